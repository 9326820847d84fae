"""Scaling jobs: a training job rebuilt at several GPU counts (``scale``), and a training
job on several fabrics, priced (``plan``).

Both keep the job's servers as its cluster has them (user-defined systems, GPUs per
server, a calibration's ``params``, tiers, planes, radix) and its goodput settings. Faults
name links and servers of the scenario's own cluster, so a job with faults is refused
here (run it with ``train`` on the flow backend).

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("cluster: {system: dgx-h100, nodes: 8}\\n"
...                         "training: {model: llama2-7b, tp: 8, global_batch: 64}")
>>> job = scale_job(sc)
>>> job.gpus
(8, 16, 32, 64)
>>> [p["gpus"] for p in run_scale(job).to_dict()["points"]]
[8, 16, 32, 64]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.jobs.common import Cluster, Part, Progress, quiet
from fabricsim.jobs.training import TrainingJob, gpu_band, training_job
from fabricsim.scenario.cluster import fabric_from_cluster
from fabricsim.scenario.schema import Scenario
from fabricsim.scenario.sections import TrainingSection
from fabricsim.workloads.cost.fabric_plan import FabricOption, compare_fabrics
from fabricsim.workloads.training.scaling import MAX_SIZES, scaling_curve, weak_scaling_batch

__all__ = ["PLAN_FABRICS", "LayoutSearch", "PlanJob", "PlanReport", "ScaleJob", "ScaleReport",
           "SearchReport", "default_sizes", "plan_job", "run_plan", "run_scale", "run_search",
           "scale_job", "search_job"]

#: The fabrics a plan compares when none are named (after the cluster's own).
PLAN_FABRICS = ("ib-ndr", "roce-400g", "efa")
#: GPU counts a scaling job of a one-server cluster sweeps when none are named.
ONE_SERVER_SIZES = (8, 64, 512, 4096, 16384)
#: Fields of a training section that fix the layout (a plan then uses it on every
#: fabric instead of the planner's best per fabric).
LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "vp",
               "pp_schedule", "pipeline_layout")


def _refuse_faults(job: TrainingJob, kind: str) -> None:
    if job.faults:
        where = "at other sizes" if kind == "scale" else "on other fabrics"
        raise ConfigError(f"a {kind} job rebuilds the cluster {where}, where the "
                          f"scenario's faults ({job.faults.describe()}) name links and "
                          f"servers that may not exist; time them with train on the flow "
                          f"backend, or remove faults: and background:", field="faults")


def _by_shape(job: TrainingJob, kind: str) -> TrainingJob:
    """``job`` as ``kind`` takes it (a kind that times each step with one group of each
    shape): faults refused; a section's ``whole_fabric`` kept in a note that says it is
    not used here (only ``train`` runs every group on the fabric)."""
    _refuse_faults(job, kind)
    if not job.whole_fabric:
        return job
    note = (f"training.whole_fabric is not used by {kind}: it times each step with one "
            f"group of each shape; run train for the whole-fabric step")
    return job.model_copy(update={"notes": (*job.notes, note)})


def default_sizes(gpus: int, per_server: int) -> tuple[int, ...]:
    """The GPU counts a scaling job sweeps when none are named: ⅛, ¼, ½ and all of the
    cluster's GPUs in whole servers; a one-server cluster, the sizes clusters are
    planned at (8 to 16,384 GPUs, in whole servers).

    >>> default_sizes(256, 8), default_sizes(8, 8)
    ((32, 64, 128, 256), (8, 64, 512, 4096, 16384))
    """
    if gpus <= per_server:
        return tuple(sorted({max(per_server, n // per_server * per_server)
                             for n in ONE_SERVER_SIZES}))
    return tuple(sorted({max(per_server, (gpus // k) // per_server * per_server)
                         for k in (8, 4, 2, 1)}))


class ScaleJob(Part):
    """A training job at several GPU counts: weak scaling (each data-parallel replica
    keeps its share of the batch) or, with ``strong``, the global batch fixed."""

    kind: Literal["scale"] = "scale"
    training: TrainingJob
    gpus: tuple[int, ...] = Field(min_length=1, max_length=MAX_SIZES)
    strong: bool = False

    @property
    def cluster(self) -> Cluster:
        return self.training.cluster


def scale_job(sc: Scenario, over: TrainingSection | None = None, *,
              gpus: tuple[int, ...] | None = None, strong: bool = False,
              notes: tuple[str, ...] = ()) -> ScaleJob:
    """The scaling job of ``sc``'s training section (flags ``over`` it) at ``gpus``
    (default :func:`default_sizes`); ``strong`` needs a global batch."""
    job = _by_shape(training_job(sc, over, notes=notes), "scale")
    if strong and job.parallel.global_batch is None:
        raise ConfigError("strong scaling keeps the global batch fixed: give "
                          "global_batch (--global-batch)", field="training.global_batch")
    if gpus is None:
        per = job.cluster.spec.gpus_per_node or job.cluster.catalog().system(
            job.cluster.spec.system).gpus
        gpus = default_sizes(job.cluster.gpus(), per)
    if len(set(gpus)) > MAX_SIZES:
        raise ConfigError(f"at most {MAX_SIZES} GPU counts, got {len(set(gpus))}",
                          field="gpus")
    return ScaleJob(training=job, gpus=tuple(sorted(set(gpus))), strong=strong)


@dataclass(frozen=True)
class ScaleReport:
    """The job at every size: throughput, efficiency, main loss, goodput."""

    job: ScaleJob
    points: list[dict[str, Any]]
    seqs_per_replica: int | None
    kind: str = "scale"

    @property
    def warnings(self) -> list[str]:
        """The job's notes, then where the sizes lie outside the published runs checked
        (each once)."""
        outside = dict.fromkeys(w for p in self.points
                                for w in p.get("accuracy", {}).get("warnings", []))
        return [*self.job.training.notes, *outside]

    @property
    def mode(self) -> str:
        return "strong" if self.job.strong else "weak"

    def notes(self) -> list[str]:
        """How the batch scales, in words."""
        t = self.job.training
        cfg = t.parallel
        mp = cfg.tp * cfg.pp * cfg.cp
        if self.job.strong:
            return [f"strong scaling: global_batch={cfg.global_batch} sequences per step "
                    f"at every size; more GPUs mean fewer micro-batches per replica, so "
                    f"the bubble and the exposed communication grow (column 'main loss')"]
        world = t.cluster.gpus()
        if self.seqs_per_replica is not None:
            return [f"weak scaling: each data-parallel replica (tp·pp·cp = {mp} GPUs) "
                    f"processes {self.seqs_per_replica} sequences of "
                    f"{cfg.seq_len or t.model.seq} tokens per step at every size, as "
                    f"global_batch={cfg.global_batch} does on {world} GPUs; the global "
                    f"batch grows with the GPU count (column 'global batch')"]
        default = cfg.micro_batch * (4 * cfg.pp if cfg.pp > 1 else 1)
        why = ("" if cfg.global_batch is None else
               f"the job's global_batch={cfg.global_batch} does not split evenly over "
               f"its {world} GPUs, so it is not used; ")
        return [f"weak scaling: {why}each data-parallel replica processes {default} "
                f"sequences per step at every size (micro_batch·"
                f"{'4·pp' if cfg.pp > 1 else '1'}); the global batch grows with the GPU "
                f"count (column 'global batch')"]

    def to_dict(self) -> dict[str, Any]:
        t = self.job.training
        ok = [p for p in self.points if p["feasible"]]
        mp = t.parallel.tp * t.parallel.pp * t.parallel.cp
        return {"model": t.model.name, "system": t.cluster.spec.system, "mode": self.mode,
                "seqs_per_replica": ok[0]["global_batch"] // (ok[0]["gpus"] // mp)
                if ok else None, "notes": [*self.notes(), *t.notes],
                "warnings": self.warnings, "points": self.points}

    def to_row(self) -> dict[str, Any]:
        """The largest feasible size's figures and the efficiency there."""
        ok = [p for p in self.points if p["feasible"]]
        last = ok[-1] if ok else {}
        keys = ("gpus", "tokens_per_s_per_gpu", "mfu", "scaling_efficiency",
                "comm_fraction", "goodput")
        return {k: last.get(k) for k in keys}


def _builder(job: TrainingJob) -> Any:
    spec, systems = job.cluster.spec, job.cluster.systems

    def build(nodes: int, gpus_per_node: int | None) -> Fabric:
        return fabric_from_cluster(spec.model_copy(update={
            "nodes": nodes, "gpus_per_node": gpus_per_node}), systems)
    return build


def run_scale(job: ScaleJob, fabric: Fabric | None = None, progress: Progress = quiet
              ) -> ScaleReport:
    """Time ``job`` at each of its sizes (``fabric``, the cluster as built, is not
    needed: every size is built anew)."""
    t = job.training
    progress(0.1, f"{t.model.name} at {', '.join(map(str, job.gpus))} GPUs")
    cfg = t.parallel
    spr = None if job.strong else weak_scaling_batch(cfg, t.cluster.gpus())
    c = t.cluster.spec
    points = scaling_curve(
        t.model, c.system, list(job.gpus), cfg, fabric=c.fabric, topology=c.topology,
        oversubscription=c.oversubscription, seqs_per_replica=spr,
        global_batch=cfg.global_batch if job.strong else None, backend=t.backend,
        gpu_hour_usd=t.pricing.gpu_hour_usd, gpus_per_node=c.gpus_per_node,
        catalog=t.cluster.catalog(), build=_builder(t), goodput=t.goodput.inputs())
    gpu = t.cluster.catalog().system(c.system).gpu
    for p in points:  # the held-out error of published runs like each size
        if p["feasible"]:
            p["accuracy"] = gpu_band(t, gpu, int(p["gpus"])).to_dict()
    return ScaleReport(job=job, points=points, seqs_per_replica=spr)


class PlanJob(Part):
    """A training job on each of ``fabrics`` (the same servers), priced: the job's own
    layout on every fabric when its section fixes one, else the planner's fastest per
    fabric (with the job's software stack)."""

    kind: Literal["plan"] = "plan"
    training: TrainingJob
    fabrics: tuple[str, ...] = Field(min_length=1, max_length=16)
    fixed_layout: bool = True
    lifetime_years: float = Field(4.0, gt=0, le=100, allow_inf_nan=False)

    @property
    def cluster(self) -> Cluster:
        return self.training.cluster


def plan_job(sc: Scenario, over: TrainingSection | None = None, *,
             fabrics: tuple[str, ...] | None = None, lifetime_years: float = 4.0,
             notes: tuple[str, ...] = ()) -> PlanJob:
    """The plan of ``sc``'s training job on ``fabrics`` (default: the cluster's own,
    then :data:`PLAN_FABRICS`)."""
    job = _by_shape(training_job(sc, over, notes=notes), "plan")
    if not fabrics:
        cl = job.cluster
        own = cl.spec.fabric or cl.catalog().system(cl.spec.system).default_fabric
        fabrics = tuple(dict.fromkeys([f for f in (own, *PLAN_FABRICS) if f]))
    given = set((sc.training or TrainingSection()).model_fields_set)
    if over is not None:
        given |= over.model_fields_set
    fixed = any(k in given for k in LAYOUT_KEYS)
    twice = sorted({f for f in fabrics if fabrics.count(f) > 1})
    if twice:
        raise ConfigError(f"{', '.join(twice)} given more than once; name each fabric once",
                          field="fabrics")
    return PlanJob(training=job, fabrics=fabrics, fixed_layout=fixed,
                   lifetime_years=lifetime_years)


@dataclass(frozen=True)
class PlanReport:
    """The job on every fabric: speed, capex and cost per token."""

    job: PlanJob
    options: list[FabricOption]
    kind: str = "plan"

    @property
    def warnings(self) -> list[str]:
        return list(self.job.training.notes)

    def rows(self) -> list[dict[str, Any]]:
        """One row per fabric (JSON-ready)."""
        out = []
        for o in self.options:
            d = o.as_dict()
            d["capex_per_gpu_usd"] = o.capex.per_gpu_usd
            d["capex_usd"] = o.capex.total_usd
            out.append(d)
        return out

    def to_dict(self) -> dict[str, Any]:
        t = self.job.training
        return {"model": t.model.name, "gpus": self.options[0].step.world,
                "system": t.cluster.spec.system,
                "oversubscription": t.cluster.spec.oversubscription,
                "lifetime_years": self.job.lifetime_years, "fabrics": self.rows(),
                "warnings": self.warnings}

    def to_row(self) -> dict[str, Any]:
        """The cheapest fabric per trained token and its cost."""
        rows = self.rows()
        best = min(rows, key=lambda r: r["usd_per_1t_tokens"])
        return {"best_fabric": best["fabric"], "usd_per_1t_tokens":
                best["usd_per_1t_tokens"], "tokens_per_s_per_gpu":
                best["tokens_per_s_per_gpu"]}


def run_plan(job: PlanJob, fabric: Fabric | None = None, progress: Progress = quiet
             ) -> PlanReport:
    """Price ``job`` on each of its fabrics (each built anew from the job's servers)."""
    from fabricsim.workloads.training.planner import planner_zero, stack_options

    t = job.training
    progress(0.1, f"{t.model.name} on {', '.join(job.fabrics)}")
    spec, systems = t.cluster.spec, t.cluster.systems
    cfg = t.parallel

    def build(name: str) -> Fabric:
        return fabric_from_cluster(spec.model_copy(update={"fabric": name}), systems)

    opts = compare_fabrics(
        t.model, system=spec.system, nodes=spec.nodes, fabrics=list(job.fabrics),
        topology=spec.topology, oversubscription=spec.oversubscription,
        gpus_per_node=spec.gpus_per_node, cfg=cfg if job.fixed_layout else None,
        global_batch=cfg.global_batch, seq_len=cfg.seq_len, precision=cfg.precision,
        gpu_hour_usd=t.pricing.gpu_hour_usd, lifetime_years=job.lifetime_years,
        backend=t.backend, build=build, zero=planner_zero(cfg),
        options=stack_options(cfg), catalog=t.cluster.catalog(),
        goodput=t.goodput.inputs())
    return PlanReport(job=job, options=opts)


class LayoutSearch(Part):
    """The fastest layouts of a training job's model on its cluster (``plan-parallel``):
    TP/PP/CP/EP, micro-batch and recomputation tried, the job's software stack held."""

    kind: Literal["plan-parallel"] = "plan-parallel"
    training: TrainingJob
    global_batch: int | None = Field(None, ge=1)
    top: int = Field(10, ge=1, le=1000)

    @property
    def cluster(self) -> Cluster:
        return self.training.cluster


def search_job(sc: Scenario, over: TrainingSection | None = None, *, top: int = 10,
               notes: tuple[str, ...] = ()) -> LayoutSearch:
    """The layout search of ``sc``'s training job (flags ``over`` it)."""
    laid = [k for k in LAYOUT_KEYS if sc.training is not None
            and k in sc.training.model_fields_set]
    if laid:
        notes = (*notes, f"the scenario's training fields {', '.join(laid)} fix a layout; "
                         f"plan-parallel searches the layout, so they are not used")
    job = _by_shape(training_job(sc, over, notes=notes), "plan-parallel")
    return LayoutSearch(training=job, global_batch=job.parallel.global_batch, top=top)


@dataclass(frozen=True)
class SearchReport:
    """The layouts that fit, fastest first, and what the search rejected."""

    job: LayoutSearch
    plan: Any
    global_batch: int
    gpus: int
    kind: str = "plan-parallel"

    @property
    def warnings(self) -> list[str]:
        return list(self.job.training.notes)

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {"model": self.job.training.model.name, "gpus": self.gpus,
                "global_batch": self.global_batch, "evaluated": p.evaluated,
                "rejected_memory": p.rejected_memory, "rejected_shape": p.rejected_shape,
                "seconds": p.seconds, "notes": p.notes,
                "results": [r.as_dict() for r in p.results], "warnings": self.warnings}

    def to_row(self) -> dict[str, Any]:
        best = self.plan.results[0]
        par = best.parallel
        return {"gpus": self.gpus, "tokens_per_s": best.tokens_per_s, "mfu": best.mfu,
                **{k: par[k] for k in ("tp", "pp", "vp", "dp", "cp", "ep", "micro_batch",
                                       "recompute")}}


def run_search(job: LayoutSearch, fabric: Fabric, progress: Progress = quiet
               ) -> SearchReport:
    """Search ``job``'s layouts on ``fabric`` (its cluster, built); a search where nothing
    runs is an error naming the first refusal."""
    from fabricsim.errors import ModelError
    from fabricsim.workloads.training.planner import plan_parallel, planner_zero, stack_options

    t = job.training
    cfg = t.parallel
    gb = job.global_batch or max(fabric.n_gpus, 512)
    progress(0.1, f"layouts of {t.model.name} on {fabric.n_gpus} GPUs")
    plan = plan_parallel(t.model, fabric, global_batch=gb, seq_len=cfg.seq_len,
                         precision=cfg.precision, zero=planner_zero(cfg), backend=t.backend,
                         top=job.top, options=stack_options(cfg))
    if not plan.results:  # nothing runs: an error, as plan says it
        raise ModelError("; ".join(plan.notes), field="training")
    return SearchReport(job=job, plan=plan, global_batch=gb, gpus=fabric.n_gpus)
