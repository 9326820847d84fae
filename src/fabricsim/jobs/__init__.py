"""Jobs: what a scenario asks, typed and parsed once, and one way to run each kind.

Every face — the CLI, the web app, sweeps, reports and the demo — turns its input into a
job with :func:`job_from_scenario` (a command line's flags laid over the scenario's
sections first) and runs it with :func:`run`; every report serialises through
``to_dict()`` (and ``to_row()`` for a sweep), so one scenario gives one answer whichever
face asks. The kinds (:data:`KINDS`):

=============  =======================================  ===========================
kind           job                                      runs
=============  =======================================  ===========================
``describe``   :class:`~.describe.Describe`             what the cluster is
``bench``      :class:`~.collective.CollectiveBench`    an nccl-tests sweep
``ep``         :class:`~.ep.EpBench`                    MoE dispatch/combine kernels
``train``      :class:`~.training.TrainingJob`          one training step, goodput
``scale``      :class:`~.scale.ScaleJob`                the job over GPU counts
``plan``       :class:`~.scale.PlanJob`                 the job on fabrics, priced
``plan-...``   :class:`~.scale.LayoutSearch`            the fastest layouts
``infer``      :class:`~.serving.ServingJob`            serving one model instance
``simulate``   :class:`~.flow.FlowRun`                  faults on the flow backend
``packet``     :class:`~.packet.PacketRun`              the packet-level experiment
``cluster``    :class:`~.cluster.ClusterJob`            many jobs sharing the fabric
=============  =======================================  ===========================

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("cluster: {system: dgx-h100, nodes: 2}\\n"
...                         "training: {model: llama2-7b, tp: 8, global_batch: 16}")
>>> primary_kind(sc), kinds_of(sc)
('train', ['describe', 'bench', 'train', 'scale', 'plan', 'plan-parallel'])
>>> report = run(job_from_scenario("train", sc))
>>> report.kind, report.to_dict()["model"]
('train', 'llama2-7b')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.jobs.cluster import ClusterJob, ClusterReport, cluster_job, run_cluster
from fabricsim.jobs.collective import BenchReport, CollectiveBench, bench_job, run_bench
from fabricsim.jobs.common import Cluster, Faults, Goodput, Job, Pricing, Progress, Report, quiet
from fabricsim.jobs.describe import Describe, DescribeReport, describe_job, run_describe
from fabricsim.jobs.ep import EpBench, EpReport, ep_job, run_ep_bench
from fabricsim.jobs.flow import FlowReport, FlowRun, flow_job, run_flow
from fabricsim.jobs.packet import PacketReport, PacketRun, packet_job, run_packet
from fabricsim.jobs.scale import (
    LayoutSearch,
    PlanJob,
    PlanReport,
    ScaleJob,
    ScaleReport,
    SearchReport,
    plan_job,
    run_plan,
    run_scale,
    run_search,
    scale_job,
    search_job,
)
from fabricsim.jobs.serving import ServingJob, ServingReport, run_serving_job, serving_job
from fabricsim.jobs.training import TrainingJob, TrainingReport, run_training, training_job
from fabricsim.scenario.schema import Scenario

__all__ = [
    "KINDS",
    "BenchReport",
    "Cluster",
    "ClusterJob",
    "ClusterReport",
    "CollectiveBench",
    "Describe",
    "DescribeReport",
    "EpBench",
    "EpReport",
    "Faults",
    "FlowReport",
    "FlowRun",
    "Goodput",
    "Job",
    "Kind",
    "LayoutSearch",
    "PacketReport",
    "PacketRun",
    "PlanJob",
    "PlanReport",
    "Pricing",
    "Progress",
    "Report",
    "ScaleJob",
    "ScaleReport",
    "SearchReport",
    "ServingJob",
    "ServingReport",
    "TrainingJob",
    "TrainingReport",
    "job_from_scenario",
    "kinds_of",
    "primary_kind",
    "run",
]


@dataclass(frozen=True)
class Kind:
    """One kind of job: how a scenario becomes one (``build(scenario, **options)``) and
    how it runs (``run(job, fabric, progress)``). ``needs`` is the scenario part it reads
    beyond the cluster (``None``: none); ``reads`` the top-level sections a sweep axis
    may change; ``own_fabric``: it builds the fabrics it needs itself (other sizes,
    other fabric presets, a variant's fabric), so the cluster is not built for it."""

    name: str
    summary: str
    job_type: type
    build: Callable[..., Any]
    run: Callable[..., Report]
    needs: str | None
    reads: tuple[str, ...]
    own_fabric: bool = False


_CLUSTER = ("cluster", "systems")
#: Every kind, in the order faces list them.
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("describe", "what the cluster is", Describe, describe_job, run_describe, None,
         _CLUSTER),
    Kind("bench", "an nccl-tests sweep of the scenario's collective", CollectiveBench,
         bench_job, run_bench, None, (*_CLUSTER, "collective", "faults", "background",
                                      "seed")),
    Kind("ep", "MoE dispatch/combine kernels of the scenario's expert_parallel section",
         EpBench, ep_job, run_ep_bench, None, (*_CLUSTER, "expert_parallel", "seed")),
    Kind("train", "one training step and its goodput", TrainingJob, training_job,
         run_training, "training", (*_CLUSTER, "training", "gpu_hour_usd", "faults",
                                    "background", "seed")),
    Kind("scale", "the training job over GPU counts", ScaleJob, scale_job, run_scale,
         "training", (*_CLUSTER, "training", "gpu_hour_usd"), own_fabric=True),
    Kind("plan", "the training job on fabric presets, priced", PlanJob, plan_job, run_plan,
         "training", (*_CLUSTER, "training", "gpu_hour_usd"), own_fabric=True),
    Kind("plan-parallel", "the fastest layouts of the training job", LayoutSearch,
         search_job, run_search, "training", (*_CLUSTER, "training")),
    Kind("infer", "serving one model instance", ServingJob, serving_job, run_serving_job,
         "inference", (*_CLUSTER, "inference", "training", "faults", "background", "seed")),
    Kind("simulate", "the collective with and without faults (flow backend)", FlowRun,
         flow_job, run_flow, "faults", (*_CLUSTER, "collective", "faults", "background",
                                        "seed")),
    Kind("packet", "the packet-level experiment, every variant", PacketRun, packet_job,
         run_packet, "packet", (*_CLUSTER, "packet", "collective", "faults", "seed"),
         own_fabric=True),
    Kind("cluster", "many training jobs sharing the cluster, placed", ClusterJob,
         cluster_job, run_cluster, "jobs", (*_CLUSTER, "jobs", "placement", "seed",
                                            "gpu_hour_usd", "trace", "failure")),
)}


def kind_of(name: str) -> Kind:
    """The kind called ``name``; an unknown name lists the kinds."""
    if name not in KINDS:
        from fabricsim.errors import unknown

        raise unknown("job kind", name, list(KINDS), field="kind")
    return KINDS[name]


def job_from_scenario(kind: str, sc: Scenario, **options: Any) -> Any:
    """The job of kind ``kind`` that ``sc`` describes, with ``options`` (a face's flags:
    the keyword arguments of that kind's builder, e.g. ``over=`` a section of flags)."""
    k = kind_of(kind)
    if k.needs == "inference" and sc.inference is None and options.get("over") is None:
        raise ConfigError("an infer job needs an inference: section (model, tp, batch, "
                          "prompt and output lengths; start from the shipped "
                          "serve-llama3-70b)", field="inference")
    return k.build(sc, **options)


def run(job: Any, fabric: Fabric | None = None, progress: Progress = quiet,
        **options: Any) -> Any:
    """Run ``job`` (any kind) on ``fabric``, its cluster built when not given;
    ``options`` go to the kind's runner (a flow run's ``step_progress``)."""
    k = next((k for k in KINDS.values() if isinstance(job, k.job_type)), None)
    if k is None:
        raise ConfigError(f"not a job: {type(job).__name__}", field="job")
    if fabric is None and not k.own_fabric:
        progress(0.0, "building the cluster")
        fabric = job.cluster.build()
    return k.run(job, fabric, progress, **options)


def kinds_of(sc: Scenario) -> list[str]:
    """The kinds of job ``sc`` can run (those whose sections it has)."""
    out = ["describe", "bench"]
    if sc.expert_parallel is not None:
        out.append("ep")
    if sc.training is not None:
        out += ["train", "scale", "plan", "plan-parallel"]
    if sc.inference is not None:
        out.append("infer")
    if sc.faults or sc.background:
        out.append("simulate")
    if sc.packet is not None:
        out.append("packet")
    if sc.jobs or sc.trace is not None:
        out.append("cluster")
    return out


def primary_kind(sc: Scenario) -> str:
    """The kind a scenario is written for: its packet experiment, else its jobs sharing
    the cluster, its serving, its training, its faults on the flow backend, its
    collective, else the cluster alone.

    >>> from fabricsim.scenario import Scenario
    >>> primary_kind(Scenario.model_validate({"cluster": {"nodes": 2}}))
    'describe'
    """
    if sc.packet is not None:
        return "packet"
    if sc.jobs or sc.trace is not None:
        return "cluster"
    if sc.inference is not None:
        return "infer"
    if sc.training is not None:
        return "train"
    if sc.faults or sc.background:
        return "simulate"
    if sc.collective is not None:
        return "bench"
    if sc.expert_parallel is not None:
        return "ep"
    return "describe"
