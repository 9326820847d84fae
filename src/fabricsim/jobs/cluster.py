"""Cluster jobs: many training jobs sharing one fabric (``fabricsim cluster``).

A :class:`ClusterJob` is built once from a scenario's ``jobs:`` list and ``placement:``
(:func:`cluster_job`); :func:`run_cluster` places the jobs by every policy asked
(:func:`~fabricsim.workloads.cluster.place`) and times each job alone and with all the
others (:func:`~fabricsim.workloads.cluster.interfere`): its slowdown, the GPU-hours and
money lost per hour, and the links and jobs that cause it.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text(
...     "cluster: {system: dgx-h100, nodes: 64, fabric: roce-400g}\\n"
...     "jobs:\\n"
...     "  - {name: a, gpus: 16, training: {model: llama2-7b, tp: 8, global_batch: 64}}\\n"
...     "  - {name: b, gpus: 16, training: {model: llama2-7b, tp: 8, global_batch: 64}}\\n")
>>> job = cluster_job(sc, placements=("packed", "spread"))
>>> r = run_cluster(job, job.cluster.build())
>>> [row["placement"] for row in r.rows()], r.to_dict()["placements"][0]["jobs"][0]["job"]
(['packed', 'spread'], 'a')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.jobs.common import Cluster, Part, Progress, quiet
from fabricsim.jobs.training import DEFAULT_MODEL, cluster_view
from fabricsim.scenario.schema import Scenario
from fabricsim.workloads.cluster import (
    DEFAULT_REPAIR_HOURS,
    POLICIES,
    ClusterMember,
    ClusterResult,
    FailureCost,
    Placement,
    failure_costs,
    interfere,
    place,
)
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.parallel import ParallelConfig

__all__ = ["ClusterJob", "ClusterReport", "SharedJob", "check_jobs", "cluster_job",
           "run_cluster"]


class SharedJob(Part):
    """One job of the cluster, as read: name, GPUs, model, layout, optional hosts."""

    name: str
    gpus: int = Field(ge=1)
    model: TransformerSpec
    parallel: ParallelConfig
    hosts: tuple[int, ...] | None = None
    gpu_hour_usd: float | None = None


class ClusterJob(Part):
    """Many training jobs on one cluster, placed by each policy in ``placements``."""

    kind: Literal["cluster"] = "cluster"
    cluster: Cluster
    jobs: tuple[SharedJob, ...] = Field(min_length=1)
    placements: tuple[Literal["packed", "rail", "spread", "random"], ...] = ("packed",)
    seed: int = 0
    fail_servers: tuple[int, ...] = ()
    """Servers that fail under the jobs (``failure.servers``; none: no failure asked)."""
    repair_hours: float = Field(4.0, gt=0, le=24 * 365)


def cluster_job(sc: Scenario, *, placements: tuple[str, ...] | None = None,
                seed: int | None = None, fail_servers: tuple[int, ...] | None = None,
                repair_hours: float | None = None) -> ClusterJob:
    """The cluster job of ``sc``: its ``jobs:`` with each job's ``training:`` section
    read as ``fabricsim train`` reads one, placed by ``placements`` (default the
    scenario's ``placement``). Refused: no jobs, two jobs of one name, a job on the flow
    backend, an unknown policy."""
    if not sc.jobs:
        raise ConfigError("a cluster job needs a jobs: list (name, gpus and a training: "
                          "section each); see docs/cluster.md", field="jobs")
    seen: set[str] = set()
    out = []
    for i, j in enumerate(sc.jobs):
        where = f"jobs.{j.name}"
        if j.name in seen:
            raise ConfigError(f"two jobs are named {j.name!r}; give each its own name",
                              field=f"jobs[{i}].name")
        seen.add(j.name)
        if j.training.backend not in (None, "analytic"):
            raise ConfigError(f"job {j.name!r}: a cluster times every job on the analytic "
                              f"backend with the others' traffic; drop training.backend",
                              field=f"{where}.training.backend")
        sec = j.training
        out.append(SharedJob(
            name=j.name, gpus=j.gpus, model=sec.build_model(DEFAULT_MODEL, f"{where}.training"),
            parallel=sec.parallel(), hosts=tuple(j.hosts) if j.hosts is not None else None,
            gpu_hour_usd=sec.gpu_hour_usd if sec.gpu_hour_usd is not None
            else sc.gpu_hour_usd))
    asked = tuple(placements) if placements else (sc.placement,)
    for p in asked:
        if p not in POLICIES:
            from fabricsim.errors import unknown

            raise unknown("placement", p, POLICIES, field="--placements")
    fail = sc.failure
    return ClusterJob(cluster=Cluster.of(sc), jobs=tuple(out),
                      placements=asked,
                      seed=sc.seed if seed is None else seed,
                      fail_servers=tuple(fail_servers) if fail_servers is not None
                      else tuple(fail.servers) if fail is not None else (),
                      repair_hours=repair_hours if repair_hours is not None
                      else fail.repair_hours if fail is not None else DEFAULT_REPAIR_HOURS)


@dataclass(frozen=True)
class ClusterReport:
    """Every placement's result (:class:`~fabricsim.workloads.cluster.ClusterResult`)."""

    job: ClusterJob
    fabric: Fabric
    results: dict[str, ClusterResult]
    #: per placement, what the failed servers cost each job on them (none asked: empty)
    failures: dict[str, list[FailureCost]] = field(default_factory=dict)
    kind: str = "cluster"
    notes: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return list(self.notes)

    def rows(self) -> list[dict[str, Any]]:
        """One summary row per placement."""
        return [{"placement": p, **self._summary(r)} for p, r in self.results.items()]

    @staticmethod
    def _summary(r: ClusterResult) -> dict[str, Any]:
        jobs = [j.as_dict() for j in r.jobs]
        return {"jobs": len(jobs),
                "mean_slowdown": sum(j["slowdown"] for j in jobs) / len(jobs),
                "max_slowdown": max(j["slowdown"] for j in jobs),
                "gpu_hours_lost_per_hour": sum(j["gpu_hours_lost_per_hour"] for j in jobs),
                "usd_lost_per_hour": sum(j["usd_lost_per_hour"] for j in jobs)}

    def to_dict(self) -> dict[str, Any]:
        out = []
        for p, r in self.results.items():
            d = r.as_dict()
            for b in d["busiest_links"]:
                b["link"] = self.fabric.link_name(b["link"])
            extra = {} if not self.job.fail_servers else {"failure": {
                "servers": list(self.job.fail_servers),
                "repair_hours": self.job.repair_hours,
                "jobs": [f.as_dict() for f in self.failures.get(p, [])]}}
            out.append({"placement": p, **self._summary(r), **d,
                        "hosts": {pl.job: list(pl.servers) for pl in r.placements},
                        **extra})
        return {"cluster": cluster_view(self.fabric), "seed": self.job.seed,
                "placements": out, "warnings": self.warnings}

    def to_row(self) -> dict[str, Any]:
        """The first placement's summary (a sweep's row)."""
        first = next(iter(self.results.items()))
        return {"gpus": self.fabric.n_gpus, "placement": first[0],
                **self._summary(first[1])}


def check_jobs(job: ClusterJob, fabric: Fabric) -> dict[str, list[Placement]]:
    """Every job's layout on its GPUs, refused as ``fabricsim train`` refuses one (sizes
    that do not divide, memory), the error naming the job; and every placement, made
    (returned by policy)."""
    from fabricsim.errors import FabricsimError
    from fabricsim.workloads.training.step import check_layout

    for j in job.jobs:
        try:
            check_layout(j.model, j.parallel, fabric, world=j.gpus)
        except FabricsimError as e:
            field_ = f"jobs.{j.name}.{e.field}" if e.field else f"jobs.{j.name}"
            raise type(e)(f"job {j.name!r}: {e.message}", field=field_) from None
    demands = [(j.name, j.gpus, j.hosts) for j in job.jobs]
    placed: dict[str, list[Placement]] = {
        policy: place(fabric, demands, policy, job.seed) for policy in job.placements}
    bad = [s for s in job.fail_servers if not 0 <= s < fabric.info.servers]
    if bad:
        raise ConfigError(f"failed servers {bad} are not servers of this cluster "
                          f"(0-{fabric.info.servers - 1})", field="failure.servers")
    return placed


def run_cluster(job: ClusterJob, fabric: Fabric, progress: Progress = quiet
                ) -> ClusterReport:
    """Place ``job``'s jobs by each of its policies and time them alone and shared."""
    placements = check_jobs(job, fabric)
    members = [ClusterMember(j.name, j.gpus, j.model, j.parallel, j.gpu_hour_usd)
               for j in job.jobs]
    results: dict[str, ClusterResult] = {}
    failures: dict[str, list[FailureCost]] = {}
    n = len(job.placements)
    for i, (policy, placed) in enumerate(placements.items()):

        def step(frac: float, msg: str, i: int = i, policy: str = policy) -> None:
            progress((i + frac) / n, f"{policy}: {msg}")

        results[policy] = interfere(fabric, members, placed, progress=step)
        if job.fail_servers:
            failures[policy] = failure_costs(
                fabric, members, placed, [s.shared for s in results[policy].jobs],
                job.fail_servers, repair_hours=job.repair_hours)
    progress(1.0, "done")
    return ClusterReport(job=job, fabric=fabric, results=results, failures=failures)
