"""Serving jobs (``infer``): one model instance, its batch, and the ways to serve it.

:func:`serving_job` reads a scenario's ``inference:`` section (a command line's flags laid
over it). The served model is that section's when it names one; else the ``training:``
section's (its training-only fields noted as unused); else Llama 3 70B. ``--model`` names
the preset in whichever section gives the model (its shape fields kept). On the flow
backend the scenario's faults and background traffic slow the collectives they reach
(the instance sits on ranks 0 .. tp·pp − 1), and the report gives the fault-free serving
beside it.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("cluster: {system: dgx-h100, nodes: 1}\\n"
...                         "training: {model: llama3-8b, layers: 16, tp: 8}\\n"
...                         "inference: {tp: 2}")
>>> job = serving_job(sc)
>>> job.model.layers, job.serving.tp, "tp" in job.notes[0]
(16, 2, True)
>>> 0 < run_serving_job(job, job.cluster.build()).to_dict()["tpot_s"] < 0.1
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fabricsim.fabric import Fabric
from fabricsim.jobs.common import Cluster, Faults, Part, Progress, quiet
from fabricsim.jobs.training import cluster_view, comm_model
from fabricsim.scenario.schema import Scenario
from fabricsim.scenario.sections import ServingSection, TrainingSection
from fabricsim.workloads.comm import FlowComm
from fabricsim.workloads.models import MODEL_FIELDS, TransformerSpec, get_model
from fabricsim.workloads.serving.accuracy import ServingBand
from fabricsim.workloads.serving.config import ServingConfig
from fabricsim.workloads.serving.run import ServingRun, run_serving

__all__ = ["DEFAULT_SERVED_MODEL", "ServingJob", "ServingReport", "run_serving_job",
           "serving_job"]

#: The model served when a scenario names none anywhere.
DEFAULT_SERVED_MODEL = "llama3-70b"


class ServingJob(Part):
    """One serving instance: the model, how it is served, where, on which backend."""

    kind: Literal["infer"] = "infer"
    cluster: Cluster
    model: TransformerSpec
    serving: ServingConfig
    backend: Literal["analytic", "flow"] = "analytic"
    faults: Faults = Faults()
    notes: tuple[str, ...] = ()


def _training_fields_unused(t: TrainingSection) -> list[str]:
    unused = sorted(k for k in t.model_fields_set
                    if k not in MODEL_FIELDS and k != "model")
    return [f"the scenario's training fields {', '.join(unused)} describe a training run "
            f"and are not used here: serving takes its layout from the inference: section "
            f"or --tp, --pp, --ep and --precision"] if unused else []


def serving_job(sc: Scenario, over: ServingSection | None = None, *,
                notes: tuple[str, ...] = ()) -> ServingJob:
    """The serving job of ``sc`` with ``over`` (flags, as a section) laid over its
    ``inference:`` section (see the module docs for the model)."""
    section = sc.inference or ServingSection()
    flag_model = over.model if over is not None else None
    if flag_model is not None:
        get_model(flag_model, field="--model")  # an unknown name is the flag's error
    if over is not None:
        given = {k: v for k, v in over.given().items() if k != "model"}
        section = section.over(ServingSection.model_validate(given))
    more: list[str] = []
    if section.names_model():
        if flag_model is not None:
            section = section.over(ServingSection.model_validate({"model": flag_model}))
        model = section.build_model(DEFAULT_SERVED_MODEL, "inference")
    elif sc.training is not None and sc.training.names_model():
        t = sc.training
        if flag_model is not None:
            t = t.over(TrainingSection.model_validate({"model": flag_model}))
        model = t.build_model(DEFAULT_SERVED_MODEL, "training")
        more = _training_fields_unused(sc.training)
    else:
        model = get_model(flag_model or DEFAULT_SERVED_MODEL)
        if sc.training is not None:
            more = _training_fields_unused(sc.training)
    backend = section.backend or "analytic"
    faults = Faults.of(sc)
    faults.refuse_on(backend, "inference.backend")
    return ServingJob(cluster=Cluster.of(sc), model=model, serving=section.config(),
                      backend=backend, faults=faults, notes=(*notes, *more))


@dataclass(frozen=True)
class ServingReport:
    """The served instance: the static batch, continuous batching and disaggregated
    serving where the job asks for them; with faults, the fault-free serving too."""

    job: ServingJob
    run: ServingRun
    cluster: dict[str, Any]
    fault_free: ServingRun | None = None
    kind: str = "infer"
    #: the held-out error of published figures like the time per output token and the
    #: throughput, and where the instance lies outside them
    #: (:mod:`fabricsim.workloads.serving.accuracy`); ``None``: not asked
    accuracy: dict[str, ServingBand] | None = None

    @property
    def warnings(self) -> list[str]:
        """The instances' warnings, then the job's notes, then where the instance lies
        outside the published figures checked."""
        dis = self.run.disaggregated
        outside = list(dict.fromkeys(w for b in (self.accuracy or {}).values()
                                     for w in b.warnings))
        return [*self.run.static.warnings, *(dis.warnings if dis is not None else []),
                *self.job.notes, *outside]

    def to_dict(self) -> dict[str, Any]:
        d = self.run.as_dict()
        d["cluster"] = dict(self.cluster)
        d["model"] = self.job.model.name
        d["model_params"] = self.job.model.params
        d["serving"] = self.job.serving.model_dump()
        d["backend"] = self.job.backend
        d["notes"] = list(self.job.notes)
        d["warnings"] = self.warnings
        if self.accuracy:
            d["accuracy"] = {k: b.to_dict() for k, b in self.accuracy.items()}
        if self.fault_free is not None:
            free = self.fault_free.static
            d["faults"] = {"fault_free_tpot_s": free.tpot_s,
                           "fault_free_prefill_s": free.prefill_s,
                           "tpot_slowdown": self.run.static.tpot_s / free.tpot_s}
        return d

    def to_row(self) -> dict[str, Any]:
        """The static batch's figures, and continuous batching's where it ran."""
        r = self.run.static
        out: dict[str, Any] = {
            "gpus": r.tp * r.pp, "model": self.job.model.name, "batch": r.batch,
            "prefill_s": r.prefill_s, "tpot_s": r.tpot_s, "tokens_per_s": r.tokens_per_s,
            "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
            "memory_per_gpu_gib": r.memory_per_gpu_bytes / 2**30,
            "comm_share": r.comm_share}
        c = self.run.continuous
        if c is not None:
            out.update({"continuous_batch": c.batch, "continuous_tpot_s": c.tpot_s,
                        "continuous_tokens_per_s_per_gpu": c.tokens_per_s_per_gpu})
        d = self.run.disaggregated
        if d is not None:
            out.update({"disaggregated_ttft_s": d.ttft_s, "kv_transfer_s": d.kv_transfer_s})
        return out


def run_serving_job(job: ServingJob, fabric: Fabric, progress: Progress = quiet
                    ) -> ServingReport:
    """Serve ``job`` on ``fabric`` (its cluster, built)."""
    progress(0.1, f"serving {job.model.name}")
    comm = comm_model(job.faults, job.backend, fabric)
    run = run_serving(job.model, job.serving, fabric, comm)
    free = run_serving(job.model, job.serving, fabric, comm.healthy) \
        if isinstance(comm, FlowComm) else None
    return ServingReport(job=job, run=run, cluster=cluster_view(fabric), fault_free=free,
                         accuracy=serving_bands(job, fabric))


def serving_bands(job: ServingJob, fabric: Fabric) -> dict[str, ServingBand]:
    """The held-out error bands of ``job``'s time per output token (``latency``) and
    throughput on ``fabric``'s GPUs."""
    from fabricsim.catalog import get_catalog
    from fabricsim.errors import FabricsimError
    from fabricsim.workloads.gpu import architecture
    from fabricsim.workloads.serving.accuracy import band

    try:
        gen = architecture(get_catalog().gpu(fabric.info.gpu))
    except FabricsimError:  # a GPU the shipped catalog lacks
        gen = fabric.info.gpu or "unknown"
    c = job.serving
    return {k: band(k, engine=c.engine, generation=gen, gpus=c.tp * c.pp,
                    moe=job.model.is_moe, hybrid=job.model.is_hybrid)
            for k in ("latency", "throughput")}
