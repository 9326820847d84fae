"""Expert-parallel kernel benchmarks (``bench ep_dispatch`` / ``ep_combine``).

An :class:`EpBench` is one MoE layer's dispatch and/or combine (tokens per rank, hidden
size, top-k, experts, dtypes, routing) timed for each kernel family asked for, at each EP
size (the first that many GPUs of the cluster), with
:func:`fabricsim.collectives.ep.run_ep`. A scenario's ``expert_parallel:`` section gives
the defaults (:func:`ep_job`); flags replace them.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("cluster: {system: dgx-h800, nodes: 2}\\n"
...                         "expert_parallel: {tokens: 128, ep: [8, 16]}")
>>> job = ep_job(sc, kernels=("deepep-ll",), phases=("dispatch",))
>>> r = run_ep_bench(job, job.cluster.build())
>>> [(row["ep"], row["kernel"]) for row in r.rows]
[(8, 'deepep-ll'), (16, 'deepep-ll')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from fabricsim.errors import ConfigError, FabricsimError
from fabricsim.fabric import Fabric
from fabricsim.jobs.common import Cluster, Part, Progress, quiet
from fabricsim.scenario.cluster import ExpertParallelSpec
from fabricsim.scenario.schema import Scenario

__all__ = ["EpBench", "EpReport", "check_ep", "ep_job", "run_ep_bench"]

#: The section a scenario without ``expert_parallel:`` runs: DeepSeek-V3's layer.
DEFAULT_EP = ExpertParallelSpec()


class EpBench(Part):
    """Dispatch/combine of one MoE layer per kernel family and EP size (module docs)."""

    kind: Literal["ep"] = "ep"
    cluster: Cluster
    kernels: tuple[str, ...] = Field(("auto",), min_length=1, max_length=8)
    phases: tuple[Literal["dispatch", "combine"], ...] = ("dispatch", "combine")
    tokens: int = Field(4096, ge=1)
    hidden: int = Field(7168, ge=1)
    top_k: int = Field(8, ge=1)
    experts: int = Field(256, ge=1)
    ep_sizes: tuple[int, ...] | None = None
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"
    routing: Literal["uniform", "zipf", "histogram"] = "uniform"
    skew: float = 0.0
    load: tuple[float, ...] = ()
    node_limit: int | None = None
    capacity_factor: float | None = None
    pad_to_capacity: bool = False
    seed: int = 0
    backend: Literal["analytic", "flow", "packet"] = "analytic"

    def config(self) -> Any:
        """The :class:`~fabricsim.collectives.ep.EpConfig` of this job."""
        from fabricsim.collectives.ep import EpConfig, Routing

        return EpConfig(tokens=self.tokens, hidden=self.hidden, top_k=self.top_k,
                        experts=self.experts, dispatch_dtype=self.dispatch_dtype,
                        combine_dtype=self.combine_dtype,
                        capacity_factor=self.capacity_factor,
                        pad_to_capacity=self.pad_to_capacity,
                        routing=Routing(kind=self.routing, skew=self.skew, load=self.load,
                                        node_limit=self.node_limit, seed=self.seed))


def ep_job(sc: Scenario, **over: Any) -> EpBench:
    """The benchmark of ``sc``'s ``expert_parallel:`` section (DeepSeek-V3's layer when
    it has none), each keyword given (a field of :class:`EpBench`, ``None`` skipped)
    replacing the section's."""
    from fabricsim.collectives.ep import ep_kernel, token_bytes

    spec = sc.expert_parallel or DEFAULT_EP
    base: dict[str, Any] = {
        "kernels": tuple(spec.kernels), "phases": tuple(spec.phases), "tokens": spec.tokens,
        "hidden": spec.hidden, "top_k": spec.top_k, "experts": spec.experts,
        "ep_sizes": tuple(spec.ep) if spec.ep else None,
        "dispatch_dtype": spec.dispatch_dtype, "combine_dtype": spec.combine_dtype,
        "routing": spec.routing, "skew": spec.skew, "load": tuple(spec.load or ()),
        "node_limit": spec.node_limit, "capacity_factor": spec.capacity_factor,
        "pad_to_capacity": spec.pad_to_capacity, "backend": spec.backend, "seed": sc.seed}
    base.update({k: v for k, v in over.items() if v is not None})
    base["kernels"] = tuple("auto" if k == "auto" else ep_kernel(k) for k in base["kernels"])
    for name in ("dispatch_dtype", "combine_dtype"):
        token_bytes(base[name], 1, f"expert_parallel.{name}")
    if base["routing"] == "zipf" and not base["skew"] > 0:
        raise ConfigError("Zipf routing needs a skew > 0 (1.0 is a classic Zipf; 0 is "
                          "uniform)", field="expert_parallel.skew")
    if base["routing"] == "histogram" and not base["load"]:
        raise ConfigError("histogram routing needs load: one figure per expert",
                          field="expert_parallel.load")
    if base["routing"] != "histogram" and base["load"]:
        raise ConfigError("load is an expert-load histogram: give routing: histogram "
                          "with it", field="expert_parallel.load")
    return EpBench(cluster=Cluster.of(sc), **base)


@dataclass(frozen=True)
class EpReport:
    """One row per (EP size, kernel, phase): :class:`~fabricsim.collectives.ep.EpResult`
    as a dict, and the kernels that could not run at a size (with why)."""

    job: EpBench
    rows: list[dict[str, Any]]
    skipped: dict[str, str]
    gpus: int = 0
    kind: str = "ep"

    def accuracy(self) -> list[dict[str, Any]]:
        """The held-out error of each kernel family the rows ran
        (:func:`fabricsim.collectives.ep.ep_band`)."""
        from fabricsim.collectives.ep import ep_band

        out = []
        for k in dict.fromkeys(r["kernel"] for r in self.rows):
            band, _ = ep_band(k, self.job.cluster.spec.system)
            if band is not None:
                out.append({"kernel": k, **{m: band[m] for m in
                                            ("median", "p90", "rows", "sources")}})
        return out

    @property
    def warnings(self) -> list[str]:
        """Kernels that cannot run here; systems and routings no published figure
        covers."""
        from fabricsim.collectives.ep import ep_band

        out = [f"{k}: {why}" for k, why in self.skipped.items()]
        for k in dict.fromkeys(r["kernel"] for r in self.rows):
            why = ep_band(k, self.job.cluster.spec.system)[1]
            if why:
                out.append(why)
        drop = max((r.get("dropped", 0.0) for r in self.rows), default=0.0)
        if drop > 0:
            out.append(f"the capacity factor drops up to {drop:.0%} of the (token, expert) "
                       f"pairs: the figures move what is kept")
        if self.job.routing != "uniform":
            out.append("published kernel figures are for uniform routing: a skewed "
                       "routing's figures follow the model, unvalidated")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The rows, what was skipped and the warnings."""
        return {"gpus": self.gpus, "backend": self.job.backend, "tokens": self.job.tokens,
                "hidden": self.job.hidden, "top_k": self.job.top_k,
                "experts": self.job.experts, "rows": self.rows,
                "accuracy": self.accuracy(), "skipped": dict(self.skipped),
                "warnings": self.warnings}

    def to_row(self) -> dict[str, Any]:
        """The first kernel's dispatch at the largest EP size (what a sweep keeps)."""
        r = max(self.rows, key=lambda x: (x["ep"], x["phase"] == "dispatch"))
        return {"gpus": self.gpus, "ep": r["ep"], "kernel": r["kernel"],
                "phase": r["phase"], "time_us": r["time_us"],
                "headline_gbps": r["headline_gbps"], "limit": r["limit"]}


#: The problem's fields as a scenario's ``expert_parallel:`` section names them (the
#: command line's flags, where they were given, name them back:
#: :data:`fabricsim.cli.bench.EP_LAYER`).
SECTION_FIELDS = {"--ep": "expert_parallel.ep", "--top-k": "expert_parallel.top_k",
                  "--tokens": "expert_parallel.tokens", "--hidden": "expert_parallel.hidden",
                  "--experts": "expert_parallel.experts",
                  "--dtype": "expert_parallel.dispatch_dtype",
                  "--combine-dtype": "expert_parallel.combine_dtype",
                  "--node-limit": "expert_parallel.node_limit",
                  "--capacity-factor": "expert_parallel.capacity_factor",
                  "--pad-to-capacity": "expert_parallel.pad_to_capacity",
                  "routing.load": "expert_parallel.load",
                  "routing.skew": "expert_parallel.skew"}


def check_ep(job: EpBench, n_gpus: int) -> tuple[int, ...]:
    """The EP sizes of ``job`` on a cluster of ``n_gpus``, each checked against the
    layer (EP beyond the GPUs or the experts, top-k beyond the experts, a load that is
    not a distribution): a ConfigError naming the section's field."""
    sizes = job.ep_sizes or (n_gpus,)
    try:
        for e in sizes:
            if e < 2 or e > n_gpus:
                raise ConfigError(f"EP {e} needs 2..{n_gpus} GPUs (this cluster has "
                                  f"{n_gpus}); give EP sizes within that or more nodes",
                                  field="--ep")
        cfg = job.config()
        for e in sizes:
            cfg.check(e)
    except ConfigError as err:
        raise ConfigError(err.message, field=SECTION_FIELDS.get(err.field or "", err.field)
                          ) from None
    return tuple(sizes)


def run_ep_bench(job: EpBench, fabric: Fabric, progress: Progress = quiet) -> EpReport:
    """Run every (EP size, kernel, phase) of ``job`` on ``fabric``."""
    import numpy as np

    from fabricsim.collectives.ep import default_ep_kernel, route, run_ep

    sizes = check_ep(job, fabric.n_gpus)
    cfg = job.config()
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    total = len(sizes) * len(job.kernels) * len(job.phases)
    done = 0
    for e in sizes:
        ranks = np.arange(e, dtype=np.int32)
        traffic = route(cfg, fabric.node_server[fabric.gpus[ranks]])
        for k in job.kernels:
            kern = default_ep_kernel(fabric, job.tokens) if k == "auto" else k
            for ph in job.phases:
                progress(done / total, f"{kern} {ph} on EP {e}")
                done += 1
                try:
                    r = run_ep(fabric, cfg, ph, kern, ranks, backend=job.backend,
                               traffic=traffic)
                except FabricsimError as err:
                    if len(job.kernels) == 1:
                        raise
                    skipped[f"{kern} at EP {e}"] = err.message
                    continue
                rows.append({**r.as_dict(), "asked": k})
    if not rows:
        raise ConfigError("no kernel runs here: " + "; ".join(skipped.values()),
                          field="--ep-kernel")
    return EpReport(job=job, rows=rows, skipped=skipped, gpus=fabric.n_gpus)
