"""Flow-level runs (``simulate``): a collective with and without a scenario's faults and
background traffic, and where the slowdown came from.

A :class:`FlowRun` is the scenario's ``collective:`` (at its ``maxbytes``, or a size
given), its faults and traffic, and the flow backend's routing (``ecmp``: a hash per
queue pair; ``spray``; ``adaptive``) and queue pairs per connection. :func:`run_flow`
runs it fault-free and with everything; with several faults or traffic sources, each
alone too, so the slowdown is attributed to them one by one. The report keeps both
runs for the tables and figures :mod:`fabricsim.reports.flow` writes.

Example
-------
>>> from fabricsim.scenario import Scenario
>>> sc = Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 2},
...     "collective": {"maxbytes": "16MiB", "algo": "ring"},
...     "faults": [{"type": "slow_nic", "node": 0, "index": 0, "factor": 0.5}]})
>>> job = flow_job(sc)
>>> r = run_flow(job, job.cluster.build())
>>> r.summary["slowdown"] > 1.0, r.summary["causes"][0]["description"]
(True, 'server0/nic0 at 0.5 of its bandwidth')
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field

from fabricsim.backends.base import Result
from fabricsim.backends.flow.specs import FaultSpec
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.jobs import common
from fabricsim.jobs.common import Cluster, Faults, Part, Progress, quiet, section_env
from fabricsim.scenario.cluster import CollectiveSpec
from fabricsim.scenario.schema import Scenario
from fabricsim.schedule.core import Schedule
from fabricsim.units import parse_nccl_size

__all__ = ["FlowReport", "FlowRun", "flow_job", "run_flow"]


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class FlowRun(Part):
    """A collective on the flow backend, fault-free and with the scenario's faults and
    background traffic (at least one of them)."""

    kind: Literal["simulate"] = "simulate"
    cluster: Cluster
    name: str = "scenario"
    description: str = ""
    collective: CollectiveSpec
    nbytes: int = Field(ge=0)
    routing: Literal["ecmp", "spray", "adaptive"] = "ecmp"
    qps: int | None = Field(None, ge=1, le=128)
    """Queue pairs per connection (``None``: the cluster's ``params.qps``, else 1)."""
    faults: Faults
    time_limit_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    precision: float = Field(0.0, ge=0.0, le=0.1)
    """Finishes within this fraction of a transfer's duration settled as one event
    (:attr:`~fabricsim.backends.flow.FlowBackend.precision`; 0: exact)."""
    record: bool = False
    """Keep both runs' link timelines (for the tables and the heatmap)."""
    force: bool = False
    """Run faults that are legal but extreme (``--force``)."""


def flow_job(sc: Scenario, *, size: str | None = None, routing: str = "ecmp",
             qps: int | None = None,
             time_limit_s: float | None = None, record: bool = False,
             force: bool = False, precision: float = 0.0) -> FlowRun:
    """The flow run of ``sc``: its collective (all-reduce when it names none) at
    ``size`` (default its ``maxbytes``), its faults and background traffic. Faults that
    are legal but extreme (a link below 1 % of its rate) are refused unless ``force``,
    on every face (the CLI's ``--force``; a sweep and the web app have none)."""
    from fabricsim.scenario.rules import check_extreme

    check_extreme(sc, force=force)
    faults = Faults.of(sc)
    if not faults:
        raise ConfigError("a flow run compares the fabric with and without faults or "
                          "background traffic: add a faults: or background: section "
                          "(start from a shipped flow-* scenario)", field="faults")
    spec = sc.collective or CollectiveSpec()
    nbytes = int(spec.maxbytes) if size is None else parse_nccl_size(size, field="--size")
    if size is not None:  # --size replaces collective.maxbytes: the same rules apply
        from fabricsim.scenario.rules import check_scenario

        spec = spec.model_copy(update={"maxbytes": nbytes,
                                       "minbytes": min(int(spec.minbytes), nbytes)})
        check_scenario(sc.model_copy(update={"collective": spec}))
    if routing not in ("ecmp", "spray", "adaptive"):
        from fabricsim.errors import unknown

        raise unknown("routing", routing, ["ecmp", "spray", "adaptive"], field="--routing")
    cluster = Cluster.of(sc)
    if spec.env:  # the section's NCCL variables, as bench reads them
        from fabricsim.collectives.tuner import check_collective

        env = section_env(check_collective(spec.collective), spec.env,
                          forced=spec.algo is not None)
        if env.min_channels is not None or env.max_channels is not None:
            raise ConfigError(f"{env.channel_settings()}: a flow run keeps the model's own "
                              f"channels; drop it from collective.env here, or time the "
                              f"limit with fabricsim bench (analytic backend)",
                              field="collective.env")
        # the run's own queue pairs (a --qps given replaces the section's); the rest
        # reaches the cluster
        qps = env.qps if qps is None else qps
        cluster = cluster.with_nccl(env, qps=False)
    return FlowRun(cluster=cluster, name=sc.name, description=sc.description,
                   collective=spec, nbytes=nbytes, routing=routing,
                   qps=qps, faults=faults, time_limit_s=time_limit_s, record=record,
                   force=force, precision=precision)


def _from_start(fault: FaultSpec) -> bool:
    """A fault in force from the first instant (not one that starts later)."""
    from fabricsim.units import parse_time

    return parse_time(fault.start) == 0.0


def _cut_off(fabric: Fabric, sch: Schedule, stalled: Any) -> list[str]:
    """The transfers without a route as ``rank a -> rank b`` (node names for other
    nodes), each pair once."""
    rank = {int(g): r for r, g in enumerate(fabric.gpus)}

    def name(node: int) -> str:
        return f"rank {rank[node]}" if node in rank else fabric.node_name(node)

    out: dict[str, None] = {}
    for step, i in stalled:
        st = sch.steps[int(step)]
        a, b = int(st.src[int(i)]), int(st.dst[int(i)])
        out[f"{name(a)} -> {name(b)}"] = None
    return list(out)


@dataclass(frozen=True)
class FlowReport:
    """What :func:`run_flow` ran: the fabric, the schedule, both Results, the summary."""

    job: FlowRun
    fabric: Fabric
    schedule: Schedule
    base: Result
    hit: Result
    summary: dict[str, Any]
    kind: str = "simulate"

    @property
    def warnings(self) -> list[str]:
        """A run that stalls (a transfer with no route) says so."""
        if not self.summary["stalled"]:
            return []
        cut = self.summary.get("cut_off") or []
        return [f"with the faults the collective cannot complete: steps "
                f"{self.summary['stalled_steps']} have transfers without a route "
                f"({'; '.join(cut[:5])}{' ...' if len(cut) > 5 else ''})"]

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary, "warnings": self.warnings}

    def to_row(self) -> dict[str, Any]:
        s = self.summary
        return {"gpus": s["cluster"]["gpus"], "size_bytes": s["nbytes"],
                "baseline_time_s": s["baseline_time_s"], "time_s": s["time_s"],
                "slowdown": s["slowdown"], "stalled": s["stalled"],
                "algorithm": s["algorithm"]}


def run_flow(job: FlowRun, fabric: Fabric, progress: Progress = quiet,
             step_progress: Callable[..., None] | None = None) -> FlowReport:
    """Run ``job`` on ``fabric`` (its cluster, built) fault-free, with everything, and
    each fault or traffic source alone when there are several. ``time_limit_s`` bounds
    the wall time of all the runs together (a SimulationError naming ``--time-limit``);
    ``step_progress`` is the flow backend's progress callback."""
    from fabricsim.backends.flow import FlowBackend
    from fabricsim.backends.flow.background import background_transfers
    from fabricsim.backends.flow.routing import expand
    from fabricsim.collectives import Group, build_schedule
    from fabricsim.collectives.nccl_env import nccl_env

    spec = job.collective
    faults, background, seed = list(job.faults.faults), list(job.faults.background), \
        job.faults.seed
    ranks = list(spec.ranks) if spec.ranks else None
    algo, proto = spec.algo, spec.proto
    env = nccl_env(spec.env)
    group = Group.of(fabric, ranks)
    with common.section_fields(spec.env):  # what the section's variables ask of the fabric
        env.check_fabric(group)
    if algo is None or proto is None:
        # NCCL's choice, by the section's release, among what its NCCL_ALGO/NCCL_PROTO/...
        # leave, as bench makes it
        from fabricsim.collectives.tuner import default_tuner

        algos, protos = env.choices(spec.collective, algo, proto)
        pick = default_tuner(fabric).choose_among(
            fabric, spec.collective, job.nbytes, ranks, algos, protos,
            nccl_version=spec.nccl_version, plugin_tuner=env.plugin_tuner)
        algo, proto = pick.algorithm, pick.protocol
    sch = build_schedule(fabric, spec.collective, job.nbytes, ranks=ranks, algo=algo,
                         proto=proto)
    deadline = time.perf_counter() + job.time_limit_s if job.time_limit_s is not None \
        else None
    routing, qps = job.routing, job.qps if job.qps is not None else fabric.info.qps

    def backend(**kw: Any) -> FlowBackend:
        left = None if deadline is None else max(deadline - time.perf_counter(), 1e-3)
        return FlowBackend(seed=seed, routing=routing, qps=qps, progress=step_progress,
                           time_limit_s=left, precision=job.precision, **kw)

    progress(0.0, "fault-free run")
    base = backend(record_timeline=job.record).run(sch, fabric)
    progress(0.3, "run with the faults and traffic")
    hit = backend(faults=faults, background=background,
                  record_timeline=job.record).run(sch, fabric)
    if hit.extra["stalled_transfers"] and all(_from_start(f) for f in faults):
        # cut off from the first instant: no run can say more than which ranks
        cut = _cut_off(fabric, sch, hit.extra["stalled_transfers"])
        raise ConfigError(f"with these faults the collective cannot run: no route for "
                          f"{'; '.join(cut[:5])}{' ...' if len(cut) > 5 else ''}; bring a "
                          f"link of that path up, or start the fault later (start:)",
                          field="faults")
    causes: list[dict[str, Any]] = []
    descs: list[str] = list(hit.extra["faults"])
    fault_links: dict[str, list[int]] = hit.extra["fault_links"]
    several = len(faults) + len(background) > 1
    for i, (f, desc) in enumerate(zip(faults, descs, strict=True)):
        progress(0.6, f"fault {i} alone")
        alone = backend(faults=[f]).run(sch, fabric).time if several else hit.time
        causes.append({"kind": "fault", "index": i, "type": f.type, "description": desc,
                       "links": [fabric.link_name(l) for l in fault_links[desc]],
                       "slowdown_alone": _finite(alone / base.time)})
    for i, b in enumerate(background):
        progress(0.8, f"background {b.name} alone")
        alone = backend(background=[b]).run(sch, fabric).time if several else hit.time
        causes.append({"kind": "background", "index": i, "description":
                       f"{b.name} ({b.traffic_class}, {b.pattern}, {b.nbytes} per flow, "
                       f"weight {b.weight:g})", "slowdown_alone": _finite(alone / base.time)})
    link_fault = {l: d for d, ls in fault_links.items() for l in ls}
    for b, bt in zip(background, background_transfers(fabric, background, seed=seed),
                     strict=True):
        ex = expand(fabric, bt.src, bt.dst, bt.nbytes, mode=routing, qps=qps, seed=seed)
        for l in np.unique(ex.links).tolist():
            link_fault.setdefault(int(l), f"background: {b.name}")
    tops = [{**b, "fault": link_fault.get(b["link"])} for b in hit.extra["bottlenecks"]]
    c = job.cluster.spec
    summary: dict[str, Any] = {
        "scenario": job.name, "description": job.description,
        "cluster": {"system": c.system, "nodes": c.nodes, "gpus": fabric.n_gpus,
                    "fabric": fabric.info.fabric, "topology": fabric.info.topology},
        "collective": spec.collective, "nbytes": job.nbytes, "algorithm": sch.algorithm,
        "protocol": hit.extra["protocol"], "routing": routing, "qps": qps,
        "nccl_env": dict(spec.env),
        "baseline_time_s": base.time, "time_s": _finite(hit.time),
        "slowdown": _finite(hit.time / base.time), "stalled": not math.isfinite(hit.time),
        # the time's parts outside the simulated transfers (their end + these = time_s)
        "pipeline_fill_s": float(hit.extra.get("pipeline_fill", 0.0)),
        "crossings_s": float(hit.extra.get("crossings", 0.0)),
        "stalled_steps": hit.extra["stalled_steps"],
        "stalled_transfers": [list(x) for x in hit.extra["stalled_transfers"]][:20],
        "cut_off": _cut_off(fabric, sch, hit.extra["stalled_transfers"]),
        "causes": causes, "bottlenecks": tops,
        "baseline_bottlenecks": base.extra["bottlenecks"][:3], "outputs": [],
    }
    return FlowReport(job=job, fabric=fabric, schedule=sch, base=base, hit=hit,
                      summary=summary)
