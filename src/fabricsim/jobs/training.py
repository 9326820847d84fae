"""Training jobs: one step (``train``), the job over GPU counts (``scale``), and the job
on other fabrics priced (``plan``).

A :class:`TrainingJob` is built once from a scenario's ``training:`` section, with a
command line's flags laid over it (:func:`training_job`); :func:`run_training` times one
step on a Fabric and prices its failures. On the flow backend the scenario's faults and
background traffic slow the groups they reach, and the step waits for the slowest group
of every kind (:class:`~fabricsim.workloads.comm.FlowComm`); the report then gives the
fault-free step beside it. On the analytic backend a job with faults is refused.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("cluster: {system: dgx-h100, nodes: 2}\\n"
...                         "training: {model: llama2-7b, tp: 8, global_batch: 32}")
>>> job = training_job(sc)
>>> job.model.name, job.parallel.tp, job.backend
('llama2-7b', 8, 'analytic')
>>> r = run_training(job, job.cluster.build())
>>> r.to_dict()["parallel"]["dp"], 0 < r.to_row()["mfu"] < 1
(2, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from fabricsim.errors import ConfigError, ModelError
from fabricsim.fabric import Fabric
from fabricsim.jobs.common import Cluster, Faults, Goodput, Part, Pricing, Progress, quiet
from fabricsim.scenario.schema import Scenario
from fabricsim.scenario.sections import TrainingSection
from fabricsim.workloads.comm import CommModel, EngineComm, FlowComm
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.accuracy import Band
from fabricsim.workloads.training.goodput import GoodputResult, goodput_on_fabric
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import StepResult, simulate_step

__all__ = ["DEFAULT_MODEL", "TrainingJob", "TrainingReport", "cluster_view", "run_training",
           "training_job"]

#: The model trained when a training section names none.
DEFAULT_MODEL = "llama3-8b"


class TrainingJob(Part):
    """One training job: the model, its layout, where it runs and what it costs.

    ``notes`` are what the user should know about how the job was read (arguments of
    a pasted Megatron list with no effect, old field names): every face shows them.
    """

    kind: Literal["train"] = "train"
    cluster: Cluster
    model: TransformerSpec
    parallel: ParallelConfig
    backend: Literal["analytic", "flow"] = "analytic"
    whole_fabric: bool = False
    """Every sibling group of each part at once on the flow backend
    (:class:`~fabricsim.workloads.wholefabric.WholeFabricComm`)."""
    flow_precision: float = Field(1e-3, ge=0.0, le=0.1)
    """The whole-fabric runs' event coalescing (``FlowBackend.precision``)."""
    time_limit_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Wall time for the whole-fabric runs together (``--time-limit``)."""
    pricing: Pricing = Pricing()
    goodput: Goodput = Goodput()
    faults: Faults = Faults()
    notes: tuple[str, ...] = ()


def training_job(sc: Scenario, over: TrainingSection | None = None, *,
                 notes: tuple[str, ...] = ()) -> TrainingJob:
    """The training job of scenario ``sc``: its ``training:`` section with ``over`` (a
    command line's flags, as a section) laid over it; ``notes`` adds the scenario's own
    (old field names read). Refused: no section and no flags, a pasted Megatron list
    that names no model, faults on the analytic backend."""
    if sc.training is None and over is None:
        raise ConfigError("a training job needs a training: section (model and parallel "
                          "layout); see docs/scenarios.md", field="training")
    section = sc.training or TrainingSection()
    where = "training"
    if over is not None:
        section = section.over(over)
        if over.from_megatron or over.from_torchtitan or over.from_maxtext or over.from_nemo:
            where = "--"
    if section.from_megatron and not section.names_model():
        raise ConfigError("the Megatron list sets no model shape and none is named: add "
                          "model (e.g. llama3-70b; --model on the command line), or "
                          "--num-layers, --hidden-size, --ffn-hidden-size, "
                          "--num-attention-heads to the list and vocab to the section",
                          field="--model" if where == "--" else "training.model")
    backend = section.backend or "analytic"
    faults = Faults.of(sc)
    faults.refuse_on(backend, "training.backend")
    whole = bool(section.whole_fabric)
    flag = "--whole-fabric" if over is not None and over.whole_fabric is not None \
        else "training.whole_fabric"
    if whole and backend != "flow":
        raise ConfigError("--whole-fabric runs every group on the flow backend: add "
                          "--backend flow (backend: flow in training:)", field=flag)
    if whole and faults:
        raise ConfigError(f"--whole-fabric does not yet run the scenario's "
                          f"{faults.describe()}: drop --whole-fabric (the faults then slow "
                          f"the groups they reach) or the faults", field=flag)
    if section.flow_precision is not None and not whole:
        raise ConfigError("flow_precision sets the whole-fabric runs' precision: add "
                          "--whole-fabric or drop --flow-precision",
                          field="--flow-precision" if over is not None
                          and over.flow_precision is not None else "training.flow_precision")
    launch = section.megatron_launcher()
    if launch and not {"nodes", "gpus_per_node"} & sc.cluster.model_fields_set:
        # the launcher's cluster, as the pasted line ran, when nothing else names one
        sc = sc.model_copy(update={"cluster": sc.cluster.model_copy(update=launch)})
        par = section.parallel()
        need = par.tp * par.pp * par.cp
        have = Cluster.of(sc).gpus()
        if need > have:
            raise ConfigError(f"the layout needs at least {need} GPUs (tp {par.tp} x pp "
                              f"{par.pp} x cp {par.cp}) and the pasted launcher runs "
                              f"{have}; give the cluster it ran on (--nodes or --gpus, "
                              f"e.g. --gpus {need})", field="--nodes")
    return TrainingJob(
        cluster=Cluster.of(sc), model=section.build_model(DEFAULT_MODEL, "training"),
        parallel=section.parallel(), backend=backend, whole_fabric=whole,
        flow_precision=1e-3 if section.flow_precision is None else section.flow_precision,
        pricing=Pricing(gpu_hour_usd=section.gpu_hour_usd if section.gpu_hour_usd
                        is not None else sc.gpu_hour_usd,
                        total_tokens=section.total_tokens),
        goodput=Goodput(checkpoint_gbps=section.checkpoint_gbps,
                        restart_min=section.restart_min),
        faults=faults, notes=(*notes, *section.megatron_notes(where)))


def comm_model(job_faults: Faults, backend: str, fabric: Fabric) -> CommModel:
    """Where a job's collective times come from: the flow backend with the faults and
    traffic when there are any, else the job's backend on the healthy fabric."""
    if job_faults:
        return FlowComm(fabric, job_faults.faults, job_faults.background, job_faults.seed)
    return EngineComm(fabric, backend=backend)


def cluster_view(fabric: Fabric) -> dict[str, Any]:
    """The cluster a report ran on, as reports print it."""
    info = fabric.info
    return {"system": info.system, "gpu": info.gpu, "fabric": info.fabric,
            "topology": info.topology, "nodes": info.servers, "gpus": fabric.n_gpus}


@dataclass(frozen=True)
class TrainingReport:
    """One step of a training job, its goodput, and (with faults) the fault-free step."""

    job: TrainingJob
    step: StepResult
    goodput: GoodputResult
    cluster: dict[str, Any]
    fault_free: StepResult | None = None
    fault_descriptions: list[str] = field(default_factory=list)
    kind: str = "train"
    #: the held-out error of published runs like this one, and where it lies outside
    #: them (:mod:`fabricsim.workloads.training.accuracy`); ``None``: not asked
    accuracy: Band | None = None
    #: with ``whole_fabric``: :meth:`WholeFabricComm.summary` of the runs, the step with
    #: each group alone (``step_time_alone_s``) and the slowdown against it
    whole_fabric: dict[str, Any] | None = None

    @property
    def warnings(self) -> list[str]:
        """The step's warnings, then the job's notes, then where the step lies outside
        the published runs checked."""
        outside = self.accuracy.warnings if self.accuracy is not None else []
        return [*self.step.warnings, *self.job.notes, *outside]

    @property
    def slowdown(self) -> float | None:
        """Step time with the faults over the fault-free one (``None``: no faults)."""
        if self.fault_free is None:
            return None
        return self.step.step_time_s / self.fault_free.step_time_s

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the step (:meth:`StepResult.as_dict`), its goodput, the cluster,
        the backend, the notes and warnings; with faults, what they cost."""
        d = self.step.as_dict()
        d["goodput"] = self.goodput.to_dict()
        d["cluster"] = dict(self.cluster)
        d["backend"] = self.job.backend
        d["notes"] = list(self.job.notes)
        d["warnings"] = self.warnings
        if self.accuracy is not None:
            d["accuracy"] = self.accuracy.to_dict()
        if self.whole_fabric is not None:
            d["whole_fabric"] = self.whole_fabric
        if self.fault_free is not None:
            free = self.fault_free.step_time_s
            lost = self.step.world * (1 - free / self.step.step_time_s)
            d["faults"] = {"descriptions": list(self.fault_descriptions),
                           "fault_free_step_time_s": free, "slowdown": self.slowdown,
                           "idle_gpu_equivalent": lost,
                           "usd_per_day": lost * 24.0 * self.step.gpu_hour_usd}
        return d

    def to_row(self) -> dict[str, Any]:
        """The figures a sweep keeps (units in the names), the step's breakdown as
        ``<part>_s``."""
        r, gp = self.step, self.goodput
        out: dict[str, Any] = {
            "gpus": r.world, "model": r.model, "step_time_s": r.step_time_s,
            "tokens_per_s": r.tokens_per_s, "tokens_per_s_per_gpu": r.tokens_per_s / r.world,
            "mfu": r.mfu, "memory_per_gpu_gib": r.memory_per_gpu_gib,
            "comm_fraction": r.comm_fraction, "comm_usd_per_day": r.comm_usd_per_day,
            "gpu_hour_usd": r.gpu_hour_usd, "goodput": gp.goodput,
            "usd_per_million_tokens": r.gpu_hour_usd * r.world / 3600.0
            / max(r.tokens_per_s * gp.goodput, 1e-12) * 1e6}
        out.update({f"{k}_s": v for k, v in r.breakdown.items()})
        if self.fault_free is not None:
            out["fault_free_step_time_s"] = self.fault_free.step_time_s
            out["slowdown"] = self.slowdown
        if self.whole_fabric is not None:
            out["step_time_alone_s"] = self.whole_fabric["step_time_alone_s"]
            out["whole_fabric_slowdown"] = self.whole_fabric["slowdown"]
            out["flows"] = self.whole_fabric["flows"]
            out["flows_simulated"] = self.whole_fabric["flows_simulated"]
        return out


def job_goodput(job: TrainingJob, fabric: Fabric, step: StepResult) -> GoodputResult:
    """The goodput of ``job`` at ``step``'s pace; a job that cannot progress names the
    setting behind it (``training.checkpoint_gbps``, ``restart_min``, ``global_batch``)."""
    inputs = job.goodput.inputs()
    try:
        return goodput_on_fabric(fabric, params=job.model.params, step_time_s=step.step_time_s,
                                 gpus=step.world, gpu_hour_usd=max(step.gpu_hour_usd, 0.0),
                                 checkpoint_write_bytes_per_s=inputs.checkpoint_write_bytes_per_s,
                                 restart_s=inputs.restart_s)
    except ModelError as e:  # name the input behind the loss
        key = {"checkpoint_write_bytes_per_s": "checkpoint_gbps",
               "restart_s": "restart_min", "step_time_s": "global_batch"}.get(e.field or "")
        raise ModelError(e.message, field=e.field if key is None else f"training.{key}"
                         ) from None


def run_training(job: TrainingJob, fabric: Fabric, progress: Progress = quiet,
                 step_progress: Callable[[int, int, float, int], None] | None = None
                 ) -> TrainingReport:
    """Time one step of ``job`` on ``fabric`` (its cluster, built) and its goodput.
    ``step_progress``: the flow backend's progress callback (whole-fabric runs)."""
    progress(0.1, f"one training step of {job.model.name}")
    if job.whole_fabric:
        return _whole_fabric(job, fabric, progress, step_progress)
    comm = comm_model(job.faults, job.backend, fabric)
    step = simulate_step(job.model, job.parallel, fabric, comm, backend=job.backend,
                         gpu_hour_usd=job.pricing.gpu_hour_usd,
                         total_tokens=job.pricing.total_tokens)
    free = None
    described: list[str] = []
    if isinstance(comm, FlowComm):
        from fabricsim.backends.flow import plan_faults

        progress(0.6, "the same step without the faults")
        free = simulate_step(job.model, job.parallel, fabric, comm.healthy,
                             backend="flow", gpu_hour_usd=job.pricing.gpu_hour_usd,
                             total_tokens=job.pricing.total_tokens)
        described = [f.description for f in plan_faults(fabric, comm.faults).faults]
        described += [f"background {b.name}: {b.pattern} of {b.nbytes} ({b.traffic_class})"
                      for b in job.faults.background]
    return TrainingReport(job=job, step=step, goodput=job_goodput(job, fabric, step),
                          cluster=cluster_view(fabric), fault_free=free,
                          fault_descriptions=described,
                          accuracy=step_band(job, fabric, step.world))


def _whole_fabric(job: TrainingJob, fabric: Fabric, progress: Progress,
                  step_progress: Callable[[int, int, float, int], None] | None
                  ) -> TrainingReport:
    """The step with every sibling group of each part at once on the fabric and the
    parts beside each other (:meth:`WholeFabricComm.overlap`), beside the step with its
    parts apart and with each group alone (by shape, NIC sharing estimated)."""
    from fabricsim.workloads.wholefabric import WholeFabricComm

    def said(done: int, what: str) -> None:
        progress(min(0.1 + 0.8 * done / (done + 4), 0.9), f"whole fabric: {what}")

    comm = WholeFabricComm(fabric, precision=job.flow_precision, progress=said,
                           step_progress=step_progress, time_limit_s=job.time_limit_s)
    kw: dict[str, Any] = {"backend": "flow", "gpu_hour_usd": job.pricing.gpu_hour_usd,
                          "total_tokens": job.pricing.total_tokens}
    apart = simulate_step(job.model, job.parallel, fabric, comm, **kw)
    # the parts meet too: each timed again beside the others' mean load, then the step
    # model asked again (the comm answers from its cache: no part runs a third time)
    overlap = comm.overlap(apart.step_time_s, apart.comm_total_s)
    step = simulate_step(job.model, job.parallel, fabric, comm, **kw)
    progress(0.9, "the same step with each group alone")
    alone = simulate_step(job.model, job.parallel, fabric, EngineComm(fabric, "flow"), **kw)
    progress(0.95, "every part at once")
    whole = {**comm.summary(), "step_time_alone_s": alone.step_time_s,
             "step_time_parts_apart_s": apart.step_time_s,
             "slowdown": step.step_time_s / alone.step_time_s,
             "overlap": overlap, "all_at_once": comm.all_at_once()}
    return TrainingReport(job=job, step=step, goodput=job_goodput(job, fabric, step),
                          cluster=cluster_view(fabric), whole_fabric=whole,
                          accuracy=step_band(job, fabric, step.world))


def step_band(job: TrainingJob, fabric: Fabric, gpus: int) -> Band:
    """The held-out error band of ``job``'s step on ``gpus`` GPUs of ``fabric``: their
    generation, the step's precision, dense or MoE."""
    return gpu_band(job, fabric.info.gpu, gpus)


def gpu_band(job: TrainingJob, gpu: str, gpus: int) -> Band:
    """The held-out error band of ``job``'s step on ``gpus`` GPUs named ``gpu`` (a key
    of the job's catalog)."""
    from fabricsim.errors import FabricsimError
    from fabricsim.workloads.gpu import architecture
    from fabricsim.workloads.training.accuracy import band

    try:
        gen = architecture(job.cluster.catalog().gpu(gpu))
    except FabricsimError:  # a GPU the catalog lacks: its class has no band
        gen = gpu or "unknown"
    cfg = job.parallel
    return band(gen, cfg.precision, cfg.recipe, gpus=gpus, moe=job.model.is_moe,
                hybrid=job.model.is_hybrid)
