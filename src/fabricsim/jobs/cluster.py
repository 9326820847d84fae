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

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from fabricsim.backends.flow.specs import FaultSpec
from fabricsim.errors import ConfigError, FabricsimError
from fabricsim.fabric import Fabric
from fabricsim.jobs.common import Cluster, Part, Progress, quiet
from fabricsim.jobs.serving import DEFAULT_SERVED_MODEL
from fabricsim.jobs.training import DEFAULT_MODEL, cluster_view
from fabricsim.scenario.schema import Scenario
from fabricsim.scenario.sections import LoopSection
from fabricsim.workloads.cluster import (
    DEFAULT_REPAIR_HOURS,
    POLICIES,
    ClusterMember,
    ClusterResult,
    FailureCost,
    JobShare,
    LoopMember,
    Member,
    Placement,
    ServingMember,
    WriteMember,
    failure_costs,
    interfere,
    place,
)
from fabricsim.workloads.jobtrace import TraceJob
from fabricsim.workloads.models import TransformerSpec, get_model
from fabricsim.workloads.replay import SCHEDULERS, ReplayResult, replay, too_large
from fabricsim.workloads.serving.config import ServingConfig
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import StepResult

#: A trace file's size limit (Philly's whole job log is about 1 GB) and the jobs one
#: window may hold.
MAX_TRACE_BYTES = 1_500_000_000
#: The name the storage servers of ``checkpoints:`` are held under while jobs are placed.
STORAGE = "storage servers"
MAX_TRACE_JOBS = 200_000

__all__ = ["DEFAULT_TRACE_MODEL", "STORAGE", "Checkpoint", "ClusterJob", "ClusterReport",
           "Loop", "SharedJob",
           "TraceReplay",
           "check_jobs", "cluster_job", "run_cluster"]

#: The training job a trace job spanning servers runs when ``trace.training`` is not
#: given: Llama 3 8B, tensor-parallel over (up to) 8 GPUs of a server, data-parallel
#: across servers.
DEFAULT_TRACE_MODEL = "llama3-8b"


class Loop(Part):
    """A collective run again and again over a job's GPUs, ``gap_s`` idle between two."""

    collective: str
    nbytes: int = Field(ge=1)
    gap_s: float = Field(0.0, ge=0)


class Checkpoint(Part):
    """A job's checkpoint written to storage servers of the cluster every ``every_s``."""

    job: str
    to: tuple[int, ...]
    nbytes: float = Field(gt=0)
    every_s: float = Field(gt=0)
    bytes_per_s: float | None = Field(None, gt=0)
    """What the storage takes in at most (``None``: what the network carries)."""


class SharedJob(Part):
    """One job of the cluster, as read: name, GPUs, model and layout (or a collective
    loop), optional hosts."""

    name: str
    gpus: int = Field(ge=1)
    model: TransformerSpec | None = None
    parallel: ParallelConfig | None = None
    loop: Loop | None = None
    serving: ServingConfig | None = None
    hosts: tuple[int, ...] | None = None
    gpu_hour_usd: float | None = None

    def member(self) -> Member:
        """The job as the shared fabric runs it."""
        if self.serving is not None:
            assert self.model is not None
            return ServingMember(self.name, self.gpus, self.model, self.serving,
                                 self.gpu_hour_usd)
        if self.loop is not None:
            return LoopMember(self.name, self.gpus, self.loop.collective,
                              float(self.loop.nbytes), self.loop.gap_s, self.gpu_hour_usd)
        assert self.model is not None and self.parallel is not None
        return ClusterMember(self.name, self.gpus, self.model, self.parallel,
                             self.gpu_hour_usd)


class TraceReplay(Part):
    """A job trace, read once: its jobs in the replay window, what was left out, and the
    training job a trace job spanning servers runs (``parallel`` ``None``: tensor
    parallel over up to 8 GPUs of a server)."""

    source: str
    format: str
    jobs: tuple[TraceJob, ...]
    skipped: dict[str, int] = Field(default_factory=dict)
    start_s: float = 0.0
    hours: float = 24.0
    model: TransformerSpec
    parallel: ParallelConfig | None = None
    gpu_hour_usd: float | None = None
    skip_larger: bool = False

    def member(self, fabric: Fabric) -> Callable[[TraceJob, int], ClusterMember]:
        """The training job a trace job of ``gpus`` (spanning servers) runs."""
        cfg = self.parallel or ParallelConfig(
            tp=min(8, max(fabric.info.gpus_per_server, 1)))

        def make(j: TraceJob, gpus: int) -> ClusterMember:
            return ClusterMember(j.name, gpus, self.model, cfg, self.gpu_hour_usd)
        return make


class ClusterJob(Part):
    """Many training jobs on one cluster, placed by each policy in ``placements``; or a
    job trace replayed on it by each scheduler in ``schedulers``, around the ``jobs``."""

    kind: Literal["cluster"] = "cluster"
    cluster: Cluster
    jobs: tuple[SharedJob, ...] = ()
    placements: tuple[Literal["packed", "rail", "spread", "random"], ...] = ("packed",)
    seed: int = 0
    fail_servers: tuple[int, ...] = ()
    """Servers that fail under the jobs (``failure.servers``; none: no failure asked)."""
    fail_gpus: tuple[int, ...] = ()
    """GPUs that fail alone (``failure.gpus``: an NVL72 compute tray)."""
    repair_hours: float = Field(4.0, gt=0, le=24 * 365)
    trace: TraceReplay | None = None
    schedulers: tuple[Literal["fifo", "topology"], ...] = ("fifo",)
    faults: tuple[FaultSpec, ...] = ()
    """Links down or degraded under the running jobs (the scenario's ``faults:``)."""
    checkpoints: tuple[Checkpoint, ...] = ()
    """Checkpoints written to storage servers (the scenario's ``checkpoints:``)."""


def cluster_job(sc: Scenario, *, placements: tuple[str, ...] | None = None,
                seed: int | None = None, fail_servers: tuple[int, ...] | None = None,
                repair_hours: float | None = None,
                fail_gpus: tuple[int, ...] | None = None,
                schedulers: tuple[str, ...] | None = None,
                base_dir: Path | None = None) -> ClusterJob:
    """The cluster job of ``sc``: its ``jobs:`` with each job's ``training:`` section
    read as ``fabricsim train`` reads one, placed by ``placements`` (default the
    scenario's ``placement``); and its ``trace:``, read once from its file (relative to
    ``base_dir``, the scenario's folder; default the working folder), replayed by
    ``schedulers`` (default the trace's ``scheduler``). Refused: neither jobs nor a
    trace, two jobs of one name, a job on the flow backend, an unknown policy or
    scheduler, a trace that cannot be read (naming its line)."""
    if not sc.jobs and sc.trace is None:
        raise ConfigError("a cluster job needs a jobs: list (name, gpus and a training: "
                          "section each) or a trace: section; see docs/cluster.md",
                          field="jobs")
    seen: set[str] = set()
    out = []
    for i, j in enumerate(sc.jobs):
        where = f"jobs.{j.name}"
        if j.name in seen:
            raise ConfigError(f"two jobs are named {j.name!r}; give each its own name",
                              field=f"jobs[{i}].name")
        seen.add(j.name)
        hosts = tuple(j.hosts) if j.hosts is not None else None
        if j.collective is not None:
            out.append(SharedJob(name=j.name, gpus=j.gpus, loop=_loop(j.collective, where),
                                 hosts=hosts, gpu_hour_usd=sc.gpu_hour_usd))
            continue
        if j.inference is not None:
            inf = j.inference
            if inf.backend not in (None, "analytic"):
                raise ConfigError(f"job {j.name!r}: a cluster times every job on the "
                                  f"analytic backend with the others' traffic; drop "
                                  f"inference.backend", field=f"{where}.inference.backend")
            out.append(SharedJob(
                name=j.name, gpus=j.gpus,
                model=inf.build_model(DEFAULT_SERVED_MODEL, f"{where}.inference"),
                serving=inf.config(), hosts=hosts, gpu_hour_usd=sc.gpu_hour_usd))
            continue
        sec = j.training
        assert sec is not None
        if sec.backend not in (None, "analytic"):
            raise ConfigError(f"job {j.name!r}: a cluster times every job on the analytic "
                              f"backend with the others' traffic; drop training.backend",
                              field=f"{where}.training.backend")
        out.append(SharedJob(
            name=j.name, gpus=j.gpus, model=sec.build_model(DEFAULT_MODEL, f"{where}.training"),
            parallel=sec.parallel(), hosts=hosts,
            gpu_hour_usd=sec.gpu_hour_usd if sec.gpu_hour_usd is not None
            else sc.gpu_hour_usd))
    asked = tuple(placements) if placements else (sc.placement,)
    for p in asked:
        if p not in POLICIES:
            from fabricsim.errors import unknown

            raise unknown("placement", p, POLICIES, field="--placements")
    fail = sc.failure
    trace = None if sc.trace is None else _read_trace(sc, base_dir)
    if trace is not None and (placements or "placement" in sc.model_fields_set):
        raise ConfigError("a trace replay places every job by its scheduler (fifo: "
                          "packed, topology: rail); drop placement (or --placements) and "
                          "give trace.scheduler or --schedulers", field="placement")
    if schedulers is not None and trace is None:
        raise ConfigError("--schedulers replays a job trace; this scenario has no trace: "
                          "section", field="--schedulers")
    for i, f in enumerate(sc.faults):
        if f.type not in ("link_down", "link_degraded"):
            raise ConfigError(f"a cluster runs links down or degraded under its jobs; "
                              f"{f.type} needs one job on the flow backend (fabricsim "
                              f"simulate or train --backend flow)", field=f"faults[{i}].type")
    if sc.background:
        raise ConfigError("background traffic does not run in a cluster: give it as one "
                          "of the jobs, or drop background:", field="background")
    if trace is not None and sc.faults:
        raise ConfigError("faults ask what placed jobs lose; a trace replay does not take "
                          "them yet: drop faults:, or the trace", field="faults")
    if trace is not None and (fail_servers or fail_gpus or fail is not None):
        raise ConfigError("a failure asks what placed jobs lose; a trace replay does not "
                          "take one yet: drop failure: (or --fail-servers), or the trace",
                          field="failure")
    picked = tuple(schedulers) if schedulers else (
        (sc.trace.scheduler,) if sc.trace is not None else ("fifo",))
    for name in picked:
        if name not in SCHEDULERS:
            from fabricsim.errors import unknown

            raise unknown("scheduler", name, tuple(SCHEDULERS), field="--schedulers")
    if trace is not None and sc.checkpoints:
        raise ConfigError("checkpoints ask what placed jobs lose; a trace replay does not "
                          "take them yet: drop checkpoints:, or the trace",
                          field="checkpoints")
    return ClusterJob(cluster=Cluster.of(sc), jobs=tuple(out), trace=trace,
                      schedulers=picked, faults=tuple(sc.faults),
                      checkpoints=_checkpoints(sc, out),
                      placements=asked,
                      seed=sc.seed if seed is None else seed,
                      fail_servers=tuple(fail_servers) if fail_servers is not None
                      else () if fail_gpus is not None
                      else tuple(fail.servers) if fail is not None else (),
                      fail_gpus=tuple(fail_gpus) if fail_gpus is not None
                      else () if fail_servers is not None
                      else tuple(fail.gpus) if fail is not None else (),
                      repair_hours=repair_hours if repair_hours is not None
                      else fail.repair_hours if fail is not None else DEFAULT_REPAIR_HOURS)


def _checkpoints(sc: Scenario, jobs: list[SharedJob]) -> tuple[Checkpoint, ...]:
    """The scenario's ``checkpoints:``, each naming a training job of the list."""
    from fabricsim.units import parse_bandwidth, parse_size, parse_time
    from fabricsim.workloads.training.goodput import checkpoint_size_bytes

    by = {j.name: j for j in jobs}
    out = []
    for i, c in enumerate(sc.checkpoints):
        where = f"checkpoints[{i}]"
        j = by.get(c.job)
        if j is None or j.model is None:
            from fabricsim.errors import unknown

            raise unknown("training job", c.job,
                          [n for n, x in by.items() if x.model is not None],
                          field=f"{where}.job")
        if len(set(c.to)) != len(c.to):
            raise ConfigError("a storage server is listed twice", field=f"{where}.to")
        size = checkpoint_size_bytes(j.model.params) if c.size is None \
            else float(parse_size(c.size, field=f"{where}.size"))
        if size <= 0:
            raise ConfigError(f"a checkpoint holds at least one byte, got {c.size!r}",
                              field=f"{where}.size")
        every = parse_time(c.every, field=f"{where}.every")
        if every <= 0:
            raise ConfigError(f"give how often it is written, e.g. 30min; got {c.every!r}",
                              field=f"{where}.every")
        rate = None if c.rate is None else parse_bandwidth(c.rate, field=f"{where}.rate")
        out.append(Checkpoint(job=c.job, to=tuple(c.to), nbytes=size, every_s=every,
                              bytes_per_s=rate))
    return tuple(out)


def _loop(sec: LoopSection, where: str) -> Loop:
    """A ``collective:`` loop section, its size and gap parsed."""
    from fabricsim.collectives import COLLECTIVES
    from fabricsim.errors import unknown
    from fabricsim.units import parse_size, parse_time

    name = sec.collective.lower().replace("-", "_")
    if name not in COLLECTIVES:
        raise unknown("collective", sec.collective, COLLECTIVES,
                      field=f"{where}.collective.collective")
    size = parse_size(sec.size, field=f"{where}.collective.size")
    if size < 1:
        raise ConfigError(f"a collective moves at least one byte, got {sec.size!r}",
                          field=f"{where}.collective.size")
    gap = parse_time(sec.gap, field=f"{where}.collective.gap")
    return Loop(collective=name, nbytes=size, gap_s=gap)


def _read_trace(sc: Scenario, base_dir: Path | None) -> TraceReplay:
    """The scenario's trace, read and parsed once (jobs in its window only)."""
    from fabricsim.scenario.loader import read_text_file
    from fabricsim.workloads.jobtrace import detect_format, parse_trace

    t = sc.trace
    assert t is not None
    start, span = t.start_hours * 3600.0, t.hours * 3600.0
    if t.synthetic is not None:
        from fabricsim.scenario.fabric import scenario_gpus
        from fabricsim.workloads.jobtrace import synthetic_day

        gpus = scenario_gpus(sc)
        jobs = synthetic_day(gpus, t.synthetic.load, t.start_hours + t.hours,
                             t.synthetic.seed)
        name = f"synthetic day (load {t.synthetic.load:g}, seed {t.synthetic.seed})"
        return _trace_of(sc, jobs, {}, name, "synthetic", start, span)
    assert t.file is not None
    path = Path(t.file).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.exists():
        raise ConfigError(f"trace file {t.file!r} does not exist"
                          + (f" (looked in {str(path.parent)!r})" if base_dir else ""),
                          field="trace.file")
    text = read_text_file(path, MAX_TRACE_BYTES, "job trace", field="trace.file")
    jobs, skipped = parse_trace(text, t.format, source=path.name)
    return _trace_of(sc, jobs, skipped, path.name, t.format or detect_format(text, path.name),
                     start, span)


def _trace_of(sc: Scenario, jobs: list[TraceJob], skipped: dict[str, int], source: str,
              fmt: str, start: float, span: float) -> TraceReplay:
    """The trace's jobs in its window, with the training job they run."""
    t = sc.trace
    assert t is not None
    window = [j for j in jobs if start <= j.submit_s < start + span]
    if not window:
        spans = f"the trace spans {jobs[-1].submit_s / 3600.0:.1f} h" if jobs else \
            "it has no job at all: give more hours or a higher load"
        raise ConfigError(f"{source}: no job is submitted in the window replayed "
                          f"({t.start_hours:g} h to {t.start_hours + t.hours:g} h after "
                          f"the first; {spans})", field="trace.start_hours")
    if len(window) > MAX_TRACE_JOBS:
        raise ConfigError(f"{source}: {len(window):,} jobs in the window; the limit is "
                          f"{MAX_TRACE_JOBS:,}: give a shorter trace.hours",
                          field="trace.hours")
    sec = t.training
    if sec is not None and sec.global_batch is not None:
        raise ConfigError("a trace job's batch grows with its data-parallel size; drop "
                          "global_batch (give micro_batch: a step is micro_batch × dp × "
                          "(4·pp if pp > 1))", field="trace.training.global_batch")
    model = sec.build_model(DEFAULT_TRACE_MODEL, "trace.training") if sec is not None \
        else get_model(DEFAULT_TRACE_MODEL)
    price = sec.gpu_hour_usd if sec is not None and sec.gpu_hour_usd is not None \
        else sc.gpu_hour_usd
    return TraceReplay(source=source, format=fmt, jobs=tuple(window), skipped=skipped,
                       start_s=start, hours=t.hours, model=model,
                       parallel=None if sec is None else sec.parallel(),
                       gpu_hour_usd=price, skip_larger=t.skip_larger)


@dataclass(frozen=True)
class ClusterReport:
    """Every placement's result (:class:`~fabricsim.workloads.cluster.ClusterResult`)."""

    job: ClusterJob
    fabric: Fabric
    results: dict[str, ClusterResult]
    #: per placement, what the failed servers cost each job on them (none asked: empty)
    failures: dict[str, list[FailureCost]] = field(default_factory=dict)
    #: per scheduler, the trace replayed (no trace: empty)
    replays: dict[str, ReplayResult] = field(default_factory=dict)
    #: per placement, every job with the faulted links (no faults: empty), and what the
    #: faults are
    faulted: dict[str, ClusterResult] = field(default_factory=dict)
    fault_names: tuple[str, ...] = ()
    #: per placement, what each checkpoint burst costs the jobs (none asked: empty)
    bursts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    kind: str = "cluster"
    notes: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return list(self.notes)

    def rows(self) -> list[dict[str, Any]]:
        """One summary row per placement, or per scheduler of a trace replay."""
        if self.replays:
            return [r.summary() for r in self.replays.values()]
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
            failing = self.job.fail_servers or self.job.fail_gpus
            extra: dict[str, Any] = {} if not failing else {"failure": {
                "servers": list(self.job.fail_servers), "gpus": list(self.job.fail_gpus),
                "repair_hours": self.job.repair_hours,
                "jobs": [f.as_dict() for f in self.failures.get(p, [])]}}
            if p in self.bursts:
                extra["checkpoints"] = self.bursts[p]
            if p in self.faulted:
                extra["faults"] = {"faults": list(self.fault_names), "jobs": [
                    _fault_row(h, f) for h, f in zip(r.jobs, self.faulted[p].jobs,
                                                      strict=True)]}
            out.append({"placement": p, **self._summary(r), **d,
                        "hosts": {pl.job: list(pl.servers) for pl in r.placements},
                        **extra})
        top: dict[str, Any] = {}
        t = self.job.trace
        if t is not None:
            top = {"trace": {
                "source": t.source, "format": t.format, "jobs": len(t.jobs),
                "skipped": t.skipped, "start_hours": t.start_s / 3600.0, "hours": t.hours,
                "model": t.model.name,
                "replays": [r.as_dict() for r in self.replays.values()]}}
        return {"cluster": cluster_view(self.fabric), "seed": self.job.seed,
                "placements": out, **top, "warnings": self.warnings}

    def to_row(self) -> dict[str, Any]:
        """The first placement's summary (a sweep's row), or the first scheduler's."""
        if self.replays:
            return {"gpus": self.fabric.n_gpus, **next(iter(self.replays.values())).summary()}
        first = next(iter(self.results.items()))
        return {"gpus": self.fabric.n_gpus, "placement": first[0],
                **self._summary(first[1])}


def _check_serving(j: SharedJob, fabric: Fabric) -> None:
    """A serving job's GPUs hold whole instances, and one instance serves as ``fabricsim
    infer`` would serve it; refused naming the job."""
    member = j.member()
    assert isinstance(member, ServingMember) and j.serving is not None
    c = j.serving
    size = c.tp * c.pp
    if j.gpus % size:
        raise ConfigError(f"job {j.name!r}: {j.gpus} GPUs do not hold whole instances of "
                          f"tp {c.tp} × pp {c.pp} = {size}; give a multiple of {size}",
                          field=f"jobs.{j.name}.gpus")
    try:
        member.serve(fabric)
    except FabricsimError as e:
        raise _named(j.name, e) from None


def _named(job: str, e: FabricsimError) -> FabricsimError:
    """``e`` as an error of job ``job``: its message and field prefixed with the job."""
    return type(e)(f"job {job!r}: {e.message}",
                   field=f"jobs.{job}.{e.field}" if e.field else f"jobs.{job}")


def check_jobs(job: ClusterJob, fabric: Fabric) -> dict[str, list[Placement]]:
    """Every job's layout on its GPUs, refused as ``fabricsim train`` refuses one (sizes
    that do not divide, memory), the error naming the job; and every placement, made
    (returned by policy)."""
    from fabricsim.workloads.training.step import check_layout

    for j in job.jobs:
        if j.serving is not None:
            _check_serving(j, fabric)
            continue
        if j.loop is not None:
            if j.gpus < 2:
                raise ConfigError(f"job {j.name!r}: a collective needs at least 2 GPUs, "
                                  f"got {j.gpus}", field=f"jobs.{j.name}.gpus")
            continue
        assert j.model is not None and j.parallel is not None
        try:
            check_layout(j.model, j.parallel, fabric, world=j.gpus)
        except FabricsimError as e:
            raise _named(j.name, e) from None
    demands = [(j.name, j.gpus, j.hosts) for j in job.jobs]
    storage = sorted({h for c in job.checkpoints for h in c.to})
    if storage:  # storage servers run no job: held first, as explicit hosts
        per = max(fabric.info.gpus_per_server, 1)
        bad = [h for h in storage if not 0 <= h < fabric.info.servers]
        if bad:
            raise ConfigError(f"storage servers {bad} are not servers of this cluster "
                              f"(0-{fabric.info.servers - 1})", field="checkpoints.to")
        demands = [(STORAGE, per * len(storage), tuple(storage)), *demands]
    placed: dict[str, list[Placement]] = {
        policy: [p for p in place(fabric, demands, policy, job.seed) if p.job != STORAGE]
        for policy in job.placements}
    bad = [s for s in job.fail_servers if not 0 <= s < fabric.info.servers]
    if bad:
        raise ConfigError(f"failed servers {bad} are not servers of this cluster "
                          f"(0-{fabric.info.servers - 1})", field="failure.servers")
    bad = [g for g in job.fail_gpus if not 0 <= g < fabric.n_gpus]
    if bad:
        raise ConfigError(f"failed GPUs {bad} are not GPUs of this cluster "
                          f"(0-{fabric.n_gpus - 1})", field="failure.gpus")
    return placed


def check_trace(job: ClusterJob, fabric: Fabric) -> list[TraceJob]:
    """The trace jobs to replay: those larger than the cluster refused naming their line
    (or left out with ``skip_larger``); the training job of every size that spans servers
    checked as ``fabricsim train`` checks one, the error naming the first trace line of
    that size."""
    from fabricsim.workloads.training.step import check_layout

    t = job.trace
    assert t is not None
    per = max(fabric.info.gpus_per_server, 1)
    total = per * fabric.info.servers
    keep = [j for j in t.jobs if j.gpus <= total or not t.skip_larger]
    member = t.member(fabric)
    sizes: dict[int, TraceJob] = {}
    for j in keep:
        if j.gpus > total:
            raise too_large(j, total, t.source)
        if j.gpus > per:
            sizes.setdefault(-(-j.gpus // per) * per, j)
    for g, j in sorted(sizes.items()):
        m = member(j, g)
        try:
            check_layout(m.model, m.parallel, fabric, world=g)
        except FabricsimError as e:
            raise type(e)(f"{t.source} line {j.line} (job {j.name!r}, {g} GPUs): "
                          f"{e.message}", field=f"trace.training.{e.field or 'tp'}") from None
    return keep


def run_cluster(job: ClusterJob, fabric: Fabric, progress: Progress = quiet
                ) -> ClusterReport:
    """Place ``job``'s jobs by each of its policies and time them alone and shared; or
    replay its trace by each of its schedulers, around its jobs."""
    placements = check_jobs(job, fabric)
    members = [j.member() for j in job.jobs]
    if job.trace is not None:
        return _run_trace(job, fabric, members, progress)
    results: dict[str, ClusterResult] = {}
    failures: dict[str, list[FailureCost]] = {}
    faulted: dict[str, ClusterResult] = {}
    bursts: dict[str, list[dict[str, Any]]] = {}
    plan = None if not job.faults else _faulted_fabric(job, fabric)
    n = len(job.placements)
    for i, (policy, placed) in enumerate(placements.items()):

        def step(frac: float, msg: str, i: int = i, policy: str = policy) -> None:
            progress((i + frac) / n, f"{policy}: {msg}")

        results[policy] = interfere(fabric, members, placed, progress=step)
        if plan is not None:
            faulted[policy] = interfere(plan[0], members, placed)
        if job.checkpoints:
            bursts[policy] = [_burst(fabric, c, members, placed, results[policy])
                              for c in job.checkpoints]
        if job.fail_servers or job.fail_gpus:  # what training jobs lose (a loop stops)
            train = [(m, p, s.shared) for m, p, s in zip(members, placed,
                                                         results[policy].jobs, strict=True)
                     if isinstance(m, ClusterMember) and isinstance(s.shared, StepResult)]
            failures[policy] = failure_costs(
                fabric, [t[0] for t in train], [t[1] for t in train],
                [t[2] for t in train], job.fail_servers, repair_hours=job.repair_hours,
                failed_gpus=job.fail_gpus)
    progress(1.0, "done")
    return ClusterReport(job=job, fabric=fabric, results=results, failures=failures,
                         faulted=faulted, fault_names=() if plan is None else plan[1],
                         bursts=bursts)


def _burst(fabric: Fabric, c: Checkpoint, members: list[Member], placed: list[Placement],
           steady: ClusterResult) -> dict[str, Any]:
    """One checkpoint burst beside the jobs: the write alone and with them, and each
    job's step while it lasts against its step without it; the GPU-hours lost per burst
    and per hour at its interval."""
    per = max(fabric.info.gpus_per_server, 1)
    i = [m.name for m in members].index(c.job)
    src = placed[i]
    dst = tuple(s * per + k for s in c.to for k in range(per))
    name = f"checkpoint of {c.job}"
    w = WriteMember(name, len(src.gpus), c.nbytes / len(src.gpus), len(src.gpus) + len(dst),
                    min_s=0.0 if c.bytes_per_s is None else c.nbytes / c.bytes_per_s)
    wp = Placement(name, src.servers + c.to, src.gpus + dst)
    res = interfere(fabric, [*members, w], [*placed, wp])
    write = res.jobs[-1]
    burst = write.shared.step_time_s
    rows = []
    lost = 0.0
    for before, during in zip(steady.jobs, res.jobs[:-1], strict=True):
        slow = during.shared.step_time_s / before.shared.step_time_s
        gh = before.gpus * burst * (1.0 - 1.0 / slow) / 3600.0
        lost += gh
        rows.append({"job": before.name, "gpus": before.gpus,
                     "step_s": before.shared.step_time_s,
                     "step_during_s": during.shared.step_time_s, "slowdown": slow,
                     "gpu_hours_lost_per_burst": gh})
    return {"job": c.job, "to": list(c.to), "bytes": c.nbytes, "every_s": c.every_s,
            "burst_alone_s": write.alone.step_time_s, "burst_s": burst,
            "write_gbytes_per_s": c.nbytes / burst / 1e9,
            "gpu_hours_lost_per_burst": lost,
            "gpu_hours_lost_per_hour": lost * 3600.0 / c.every_s, "jobs": rows}


def _faulted_fabric(job: ClusterJob, fabric: Fabric) -> tuple[Fabric, tuple[str, ...]]:
    """The fabric with the job's links down or degraded, and what each fault is. A NIC's
    own link down is refused: NCCL does not move a rank to another NIC, so the jobs on
    that server stop, which ``failure.servers`` asks about."""
    from fabricsim.backends.flow.faults import plan_faults
    from fabricsim.fabric.kinds import NodeKind

    plan = plan_faults(fabric, job.faults)
    nic = int(NodeKind.NIC)
    for i, a in enumerate(plan.faults):
        ends = [int(fabric.node_kind[fabric.link_src[x]]) for x in a.links] + \
            [int(fabric.node_kind[fabric.link_dst[x]]) for x in a.links]
        if a.spec.type == "link_down" and nic in ends:
            server = int(fabric.node_server[fabric.link_src[a.links[0]]])
            if server < 0:
                server = int(fabric.node_server[fabric.link_dst[a.links[0]]])
            raise ConfigError(f"{a.description}: a NIC's own link down stops the jobs on "
                              f"server {server} (NCCL does not move a rank to another NIC); "
                              f"ask failure: {{servers: [{server}]}} for what that costs",
                              field=f"faults[{i}]")
    return plan.fabric, tuple(a.description for a in plan.faults)


def _fault_row(healthy: JobShare, hurt: JobShare) -> dict[str, Any]:
    """One job's step with and without the faults (both with the other jobs)."""
    h, f = healthy.shared.step_time_s, hurt.shared.step_time_s
    return {"job": healthy.name, "gpus": healthy.gpus, "step_healthy_s": h,
            "step_faulted_s": f, "slowdown": f / h,
            "gpu_hours_lost_per_hour": healthy.gpus * (1.0 - h / f)}


def _run_trace(job: ClusterJob, fabric: Fabric, members: list[Member],
               progress: Progress) -> ClusterReport:
    t = job.trace
    assert t is not None
    keep = check_trace(job, fabric)
    member = t.member(fabric)
    resident = [(m, j.hosts) for m, j in zip(members, job.jobs, strict=True)]
    replays: dict[str, ReplayResult] = {}
    n = len(job.schedulers)
    for i, sch in enumerate(job.schedulers):

        def step(frac: float, msg: str, i: int = i) -> None:
            progress((i + frac) / n, msg)

        replays[sch] = replay(fabric, keep, member, scheduler=sch, hours=t.hours,
                              start_s=t.start_s, resident=resident, seed=job.seed,
                              progress=step)
    progress(1.0, "done")
    notes = []
    if len(keep) < len(t.jobs):
        notes.append(f"{len(t.jobs) - len(keep)} trace jobs larger than the cluster were "
                     f"left out (trace.skip_larger)")
    skipped = ", ".join(f"{n} {why}" for why, n in t.skipped.items())
    if skipped:
        notes.append(f"{t.source}: left out jobs with {skipped} (the whole file)")
    first = next(iter(replays.values()))
    if first.rounded_up:
        notes.append(f"{first.rounded_up} jobs of more than one server but not whole "
                     f"servers were rounded up to whole servers")
    return ClusterReport(job=job, fabric=fabric, results={}, replays=replays, notes=notes)
