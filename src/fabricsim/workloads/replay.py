"""A day of a shared cluster: a job trace replayed through a scheduler onto the fabric.

Jobs arrive as their trace says (:mod:`~fabricsim.workloads.jobtrace`) and wait in one
queue; the scheduler starts them in arrival order (strict first-in first-out: a job
that does not fit holds back the ones behind it) and places each one:

* ``fifo`` — on the lowest free servers (``packed``), as a scheduler that ignores the
  topology does;
* ``topology`` — rail-aligned (``rail``): in the leaf group with the least room that
  still holds the job, so its traffic stays under one set of rail switches when it can.

A job of more than one server takes whole servers (a count that is not whole servers is
rounded up, and counted). Each job's trace duration is its work: the time it runs alone.
While it runs beside others, a job that spans servers moves at ``1 / slowdown`` of that
rate, its slowdown from the mean-field model of :class:`~fabricsim.workloads.cluster.
SharedFabric`, re-settled whenever such a job starts or ends; a job inside one server
puts nothing on the shared links and runs at full rate. So interference stretches jobs,
which holds GPUs longer and delays the queue.

Answers: utilisation (busy GPU-time over the cluster's), queueing delay, GPU-hours left
idle by fragmentation (free GPUs enough for the job at the head of the queue, but not
in the shape it needs), GPU-hours lost to interference, each job's start, end and
slowdown, and the cluster over time.

Example
-------
>>> import fabricsim as fs
>>> from fabricsim.workloads.jobtrace import parse_trace
>>> from fabricsim.workloads.models import get_model
>>> from fabricsim.workloads.training.parallel import ParallelConfig
>>> fab = fs.build_cluster("dgx-h100", 4)
>>> jobs, _ = parse_trace("name,submit_s,gpus,duration_s\\n"
...                       "a,0,16,3600\\nb,10,32,600\\nc,20,4,60\\n")
>>> m, cfg = get_model("llama3-8b"), ParallelConfig(tp=8)
>>> r = replay(fab, jobs, lambda j, g: ClusterMember(j.name, g, m, cfg), hours=2)
>>> [(j.name, j.start_s, j.end_s) for j in r.jobs]   # b waits for a, c behind b
[('a', 0.0, 3600.0), ('b', 3600.0, 4200.0), ('c', 4200.0, 4260.0)]
>>> s = r.summary()
>>> round(s["wait_mean_s"]), round(s["utilisation"], 3)
(2590, 0.334)
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular
from fabricsim.workloads.cluster import (
    Allocator,
    ClusterMember,
    Member,
    Placement,
    SharedFabric,
)
from fabricsim.workloads.jobtrace import TraceJob

__all__ = ["SCHEDULERS", "ReplayJob", "ReplayResult", "replay", "too_large"]

#: Schedulers :func:`replay` knows, and the placement policy each uses.
SCHEDULERS = {"fifo": "packed", "topology": "rail"}
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class ReplayJob(Tabular):
    """One job of a replay: when it came, started and ended (``None``: not within the
    window), its work (trace duration) and the work done, where it ran."""

    name: str
    line: int
    gpus: int
    submit_s: float
    start_s: float | None
    end_s: float | None
    work_s: float
    done_s: float
    servers: int
    leaf_groups: int
    shared: bool
    """Whether it spans servers (its traffic meets the other jobs')."""
    wall_s: float = 0.0
    """How long it held its GPUs within the window."""
    slowed_on: str = ""
    """The link where the others slowed it most, at its worst (empty: never slowed)."""
    by: tuple[str, ...] = ()
    """The jobs whose traffic it met there."""

    @property
    def status(self) -> str:
        return "queued" if self.start_s is None else "running" if self.end_s is None \
            else "finished"

    @property
    def wait_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.submit_s

    @property
    def slowdown(self) -> float | None:
        """Wall time over work done while it ran (1: never slowed)."""
        return None if self.start_s is None or self.done_s <= 0 else \
            self.wall_s / self.done_s

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.name, "line": self.line, "gpus": self.gpus,
                "submit_s": self.submit_s, "start_s": self.start_s, "end_s": self.end_s,
                "wait_s": self.wait_s, "work_s": self.work_s, "done_s": self.done_s,
                "servers": self.servers, "leaf_groups": self.leaf_groups,
                "spans_servers": self.shared, "slowdown": self.slowdown,
                "status": self.status, "slowed_on": self.slowed_on, "by": list(self.by)}


@dataclass(frozen=True)
class ReplayResult(Tabular):
    """A replay under one scheduler: every job (:class:`ReplayJob`), the cluster over
    time (``times_s`` with the busy GPUs, queued jobs and GPUs lost to interference
    from each instant to the next), and the totals (:meth:`summary`).
    ``to_pandas()`` has one row per job."""

    scheduler: str
    gpus: int
    hours: float
    jobs: tuple[ReplayJob, ...]
    times_s: FloatArray = field(repr=False)
    busy_gpus: FloatArray = field(repr=False)
    queued: FloatArray = field(repr=False)
    lost_gpus: FloatArray = field(repr=False)
    fragmented_gpu_s: float = 0.0
    idle_queued_gpu_s: float = 0.0
    rounded_up: int = 0
    settles: int = 0
    link_names: tuple[str, ...] = ()
    """The links busiest at their peak (at most 16)."""
    link_times_s: FloatArray = field(repr=False, default_factory=lambda: np.zeros(0))
    """When the jobs were re-timed (a job spanning servers started or ended)."""
    link_busy: FloatArray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    """Busy share of each of ``link_names`` (rows) from each re-timing to the next."""

    def _rows(self) -> list[dict[str, Any]]:
        return [j.to_dict() for j in self.jobs]

    def summary(self) -> dict[str, Any]:
        """Utilisation, queueing delay (mean, median, 90th percentile of the jobs that
        started; those still queued at the end counted apart), GPU-hours idle by
        fragmentation and while jobs queued, GPU-hours lost to interference, and the
        slowdown of the jobs that span servers (mean by work, worst)."""
        span = self.hours * 3600.0
        dt = np.diff(np.append(self.times_s, span))
        waits = np.array([j.wait_s for j in self.jobs if j.wait_s is not None])
        slow = [(j.slowdown, j.done_s) for j in self.jobs
                if j.shared and j.slowdown is not None]
        work = sum(w for _, w in slow)
        return {
            "scheduler": self.scheduler, "jobs": len(self.jobs),
            "finished": sum(j.status == "finished" for j in self.jobs),
            "running_at_end": sum(j.status == "running" for j in self.jobs),
            "queued_at_end": sum(j.status == "queued" for j in self.jobs),
            "utilisation": float((self.busy_gpus * dt).sum() / (self.gpus * span)),
            "wait_mean_s": float(waits.mean()) if waits.size else 0.0,
            "wait_median_s": float(np.median(waits)) if waits.size else 0.0,
            "wait_p90_s": float(np.percentile(waits, 90)) if waits.size else 0.0,
            "fragmented_gpu_hours": self.fragmented_gpu_s / 3600.0,
            "idle_while_queued_gpu_hours": self.idle_queued_gpu_s / 3600.0,
            "interference_gpu_hours": float((self.lost_gpus * dt).sum() / 3600.0),
            "mean_slowdown": sum(s * w for s, w in slow) / work if work > 0 else 1.0,
            "max_slowdown": max((s for s, _ in slow), default=1.0),
            "rounded_up_to_servers": self.rounded_up,
        }

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the summary, every job, and the cluster over time."""
        return {**self.summary(), "hours": self.hours,
                "timeline": {"t_s": self.times_s.tolist(),
                             "busy_gpus": self.busy_gpus.tolist(),
                             "queued_jobs": self.queued.tolist(),
                             "interference_gpus": self.lost_gpus.tolist()},
                "links_over_time": {"t_s": self.link_times_s.tolist(),
                                    "links": [{"link": n, "busy": b.tolist()} for n, b in
                                              zip(self.link_names, self.link_busy,
                                                  strict=True)]},
                "job_list": [j.as_dict() for j in self.jobs]}


def too_large(job: TraceJob, total: int, source: str) -> ConfigError:
    """The error for a trace job larger than the cluster, naming its line."""
    return ConfigError(f"{source} line {job.line} (job {job.name!r}) needs {job.gpus} GPUs; "
                       f"the cluster has {total}: give a larger cluster, or "
                       f"trace.skip_larger: true to leave such jobs out", field="trace.file")


@dataclass
class _Run:
    job: TraceJob
    gpus: int
    placement: Placement
    start: float
    spans: bool
    done: float = 0.0  # work done (seconds alone)
    slow: float = 1.0
    worst: float = 1.0005  # below: nothing worth naming
    slowed_on: str = ""
    by: tuple[str, ...] = ()

    @property
    def left(self) -> float:
        return self.job.duration_s - self.done


def replay(fabric: Fabric, trace: Sequence[TraceJob],
           member: Callable[[TraceJob, int], ClusterMember], *,
           scheduler: str = "fifo", hours: float = 24.0, start_s: float = 0.0,
           resident: Sequence[tuple[Member, Sequence[int] | None]] = (),
           seed: int = 0, progress: Callable[[float, str], None] | None = None
           ) -> ReplayResult:
    """Replay the jobs of ``trace`` submitted in ``[start_s, start_s + hours)`` on
    ``fabric`` under ``scheduler`` (:data:`SCHEDULERS`); ``member(job, gpus)`` gives the
    training job that a trace job spanning servers runs (its traffic). ``resident`` jobs
    (with their hosts, or ``None`` for the scheduler's placement) hold their GPUs the
    whole window, placed before the first arrival; the cluster is otherwise empty. Times
    in the result count from ``start_s``. Refused: an unknown scheduler, a job larger
    than the cluster (naming its line)."""
    if scheduler not in SCHEDULERS:
        from fabricsim.errors import unknown

        raise unknown("scheduler", scheduler, tuple(SCHEDULERS), field="trace.scheduler")
    if not (hours > 0 and math.isfinite(hours)):
        raise ConfigError(f"must be a positive number of hours, got {hours}",
                          field="trace.hours")
    alloc = Allocator(fabric, SCHEDULERS[scheduler], seed)
    per, total = alloc.per, alloc.per * alloc.servers
    span = hours * 3600.0
    todo = [j for j in trace if start_s <= j.submit_s < start_s + span]
    rounded = 0
    need: dict[int, int] = {}
    for j in todo:
        if j.gpus > total:
            raise too_large(j, total, "trace")
        g = j.gpus if j.gpus <= per else -(-j.gpus // per) * per
        rounded += g != j.gpus
        need[id(j)] = g
    shared = SharedFabric(fabric)
    leaves = alloc.leaves
    names: dict[str, int] = {}
    queue: deque[TraceJob] = deque()
    running: dict[str, _Run] = {}
    out: dict[int, ReplayJob] = {}
    times: list[float] = []
    busy: list[float] = []
    queued: list[float] = []
    lost: list[float] = []
    frag = idle = 0.0
    settles = 0
    t, end, i = 0.0, span, 0

    def key(j: TraceJob) -> str:  # a unique name (traces may repeat one)
        n = names.get(j.name, 0)
        names[j.name] = n + 1
        return j.name if n == 0 else f"{j.name}#{n + 1}"

    def record(r: _Run, until: float, done: bool) -> None:
        p = r.placement
        work = r.job.duration_s if math.isfinite(r.job.duration_s) else r.done
        out[id(r.job)] = ReplayJob(
            r.job.name, r.job.line, r.gpus, r.job.submit_s - start_s, r.start,
            until if done else None, work, min(r.done, work),
            len(p.servers), len({int(leaves[s]) for s in p.servers}), r.spans,
            until - r.start, r.slowed_on, r.by)

    residents = []
    for m, hosts in resident:
        p = alloc.take(m.name, m.gpus, hosts)
        tj = TraceJob(m.name, start_s, m.gpus, math.inf, 0)
        r = _Run(tj, m.gpus, p, 0.0, len(p.servers) > 1)
        running[key(tj)] = r
        residents.append(tj)
        need[id(tj)] = m.gpus
        if r.spans:
            shared.add(m, p)
    snaps: list[tuple[float, NDArray[np.int64], FloatArray]] = []

    def resettle(now: float) -> None:
        """Re-time the jobs that span servers with one another; keep the links they load
        (sparse) and, for each, where and by whom it was slowed at its worst."""
        shared.settle()
        res = shared.result()
        for js in res.jobs:
            r = running[js.name]
            r.slow = js.slowdown
            if js.slowdown > r.worst and js.links:
                r.worst = js.slowdown
                r.slowed_on = js.links[0][0]
                r.by = tuple(c for c, _ in js.culprits)
        hot = np.flatnonzero(res.busy > 0.01)
        snaps.append((now, hot, res.busy[hot]))

    if shared.names:
        settles += 1
        resettle(0.0)

    while True:
        nxt_arr = todo[i].submit_s - start_s if i < len(todo) else math.inf
        nxt_fin = min((t + r.left * r.slow for r in running.values()), default=math.inf)
        tn = min(nxt_arr, nxt_fin, end)
        if tn > t:
            dt = tn - t
            used = sum(r.gpus for r in running.values())
            times.append(t)
            busy.append(used)
            queued.append(len(queue))
            lost.append(sum(r.gpus * (1.0 - 1.0 / r.slow) for r in running.values()))
            if queue:
                idle += (total - used) * dt
                head = need[id(queue[0])]
                if total - used >= head:  # enough GPUs, not in the shape it needs
                    frag += (total - used) * dt
            for r in running.values():
                r.done += dt / r.slow
            t = tn
            if progress is not None:
                progress(t / end, f"{scheduler}: {t / 3600.0:.1f} h, {len(running)} "
                                  f"running, {len(queue)} queued")
        if t >= end:
            break
        changed = False
        for name in [n for n, r in running.items() if r.left <= 1e-6 * max(1.0, r.slow)]:
            r = running.pop(name)
            alloc.release(r.placement)
            if r.spans:
                shared.remove(name)
                changed = True
            record(r, t, True)
        while i < len(todo) and todo[i].submit_s - start_s <= t:
            queue.append(todo[i])
            i += 1
        while queue and alloc.fits(need[id(queue[0])]):
            j = queue.popleft()
            g, name = need[id(j)], key(j)
            p = alloc.take(name, g)
            r = _Run(j, g, p, t, g > per)
            running[name] = r
            if r.spans:
                shared.add(replace(member(j, g), name=name), p)
                changed = True
        if changed:
            settles += 1
            resettle(t)
    for r in running.values():
        record(r, end, False)
    for j in queue:
        out[id(j)] = ReplayJob(j.name, j.line, need[id(j)], j.submit_s - start_s, None,
                               None, j.duration_s, 0.0, 0, 0, need[id(j)] > per)
    jobs = tuple(out[id(j)] for j in (*residents, *todo))
    names_, at, load = _hot_links(fabric, snaps)
    return ReplayResult(scheduler, total, hours, jobs, np.array(times), np.array(busy),
                        np.array(queued), np.array(lost), frag, idle, rounded, settles,
                        names_, at, load)


def _hot_links(fabric: Fabric, snaps: Sequence[tuple[float, NDArray[np.int64], FloatArray]],
               keep: int = 16) -> tuple[tuple[str, ...], FloatArray, FloatArray]:
    """The ``keep`` links busiest at their peak, and their busy share at every re-timing
    (links × times)."""
    peak: dict[int, float] = {}
    for _, idx, val in snaps:
        for x, v in zip(idx.tolist(), val.tolist(), strict=True):
            peak[x] = max(peak.get(x, 0.0), v)
    top = sorted(peak, key=lambda x: -peak[x])[:keep]
    row = {x: k for k, x in enumerate(top)}
    load = np.zeros((len(top), len(snaps)))
    for c, (_, idx, val) in enumerate(snaps):
        for x, v in zip(idx.tolist(), val.tolist(), strict=True):
            if x in row:
                load[row[x], c] = v
    return (tuple(fabric.link_name(x) for x in top),
            np.array([t for t, _, _ in snaps]), load)
