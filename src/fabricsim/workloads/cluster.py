"""Many jobs on one fabric: where the scheduler puts them, and what they cost each other.

**Placement.** :func:`place` gives every job its GPUs on a shared fabric by a policy, as a
scheduler hands out hosts: ``packed`` (the lowest free servers, so a job fills a leaf
group before it spills into the next), ``spread`` (servers dealt round-robin over the
leaf groups, as a scheduler balancing load across racks does), ``rail`` (rail-aligned,
topology-aware: the job keeps to one leaf group when one has room for it, the group
with the least room that does, so its rail traffic never climbs to the spine and large
holes stay whole; a job no group holds takes the fewest groups, the roomiest first),
``random`` (free servers in a seeded random order: a fragmented cluster) or an explicit
host list. A job of fewer
GPUs than a server takes free GPUs of a partly used server; a larger one takes whole
servers.

**Interference.** Each job's step is timed by the training step model
(:func:`~fabricsim.workloads.training.step.simulate_step`) with a :class:`PlacedComm`: every
collective of the job runs on the job's own GPUs of the shared fabric, all sibling
groups at once (a synchronous step waits for the slowest), on the analytic backend. That
gives the job's time alone, and what it puts on every link: the link bytes of each
distinct collective times how often a step runs it (:func:`link_use`). Sharing follows
from max-min fairness, in the mean: where job ``k`` keeps link ``l`` busy a share
``u_k(l)`` of the time (its bytes per step over the link's capacity and its step time),
another job's flow on that link gets, on average, the capacity divided by
``1 + Σ_k u_k(l)`` (two saturating flows halve the link while both run, and run together
a share ``u`` of the time). :func:`interfere` times every job on its own view of the
fabric, capacities reduced by the others' use, and repeats until the step times settle
(the others' use falls as they slow down).

This is a fluid, time-averaged model: it gives each job's mean slowdown and the links
and jobs that cause it, not the step-to-step jitter of phases that happen to align.

Example
-------
>>> import fabricsim as fs
>>> from fabricsim.workloads.models import get_model
>>> from fabricsim.workloads.training.parallel import ParallelConfig
>>> fab = fs.build_cluster("dgx-h100", 64, fabric="roce-400g")
>>> m = get_model("llama2-7b")
>>> cfg = ParallelConfig(tp=8, global_batch=64, seq_len=4096)
>>> jobs = [ClusterMember("a", 16, m, cfg), ClusterMember("b", 16, m, cfg)]
>>> placed = place(fab, [(j.name, j.gpus, None) for j in jobs], "spread")
>>> [p.servers for p in placed]   # each job across both leaf groups
[(0, 32), (1, 33)]
>>> out = interfere(fab, jobs, placed)
>>> [r.slowdown >= 1.0 for r in out.jobs]
[True, True]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.fabric.kinds import NodeKind
from fabricsim.results import Tabular
from fabricsim.workloads.comm import CommModel
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.serving.config import ServingConfig
from fabricsim.workloads.serving.static import InferenceResult
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import StepResult, simulate_step

__all__ = [
    "DEFAULT_REPAIR_HOURS",
    "HARDWARE_CLASSES",
    "POLICIES",
    "Allocator",
    "ClusterMember",
    "ClusterResult",
    "FailureCost",
    "JobShare",
    "LoopMember",
    "LoopStep",
    "Member",
    "PlacedComm",
    "Placement",
    "ServingMember",
    "SharedFabric",
    "Step",
    "WriteMember",
    "failure_costs",
    "interfere",
    "link_use",
    "place",
    "server_leaves",
]

#: Placement policies :func:`place` knows.
POLICIES = ("packed", "rail", "spread", "random")
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Placement:
    """Where one job runs: its servers and its GPUs (indices into ``fabric.gpus``, in
    the order of the job's ranks)."""

    job: str
    servers: tuple[int, ...]
    gpus: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "servers": list(self.servers), "gpus": len(self.gpus)}


def server_leaves(fabric: Fabric) -> NDArray[np.int64]:
    """The leaf switch each server's first NIC connects to (-1: none), by server.

    >>> import fabricsim as fs
    >>> leaves = server_leaves(fs.build_cluster("dgx-h100", 64, fabric="roce-400g"))
    >>> int((leaves == leaves[0]).sum()), bool(leaves[0] != leaves[63])
    (32, True)
    """
    def make() -> NDArray[np.int64]:
        out = np.full(fabric.info.servers, -1, dtype=np.int64)
        nics = fabric.nodes_of(NodeKind.NIC)
        leaf = fabric.node_kind == int(NodeKind.LEAF)
        for n in nics[np.argsort(fabric.node_server[nics], kind="stable")]:
            s = int(fabric.node_server[n])
            if s < 0 or out[s] >= 0:
                continue
            dst = fabric.link_dst[fabric.link_src == n]
            hit = dst[leaf[dst]]
            if hit.size:
                out[s] = int(hit[0])
        return out
    got: NDArray[np.int64] = fabric.memo("cluster.server_leaves", make)
    return got


class Allocator:
    """The free GPUs of a shared cluster, handed out and taken back job by job (a
    scheduler's view). :func:`place` places a job list at once with one; a trace replay
    keeps one across arrivals and departures.

    >>> import fabricsim as fs
    >>> alloc = Allocator(fs.build_cluster("dgx-h100", 4))
    >>> a = alloc.take("a", 16)
    >>> b = alloc.take("b", 4)
    >>> a.servers, b.servers, alloc.free_gpus
    ((0, 1), (2,), 12)
    >>> alloc.fits(16), alloc.release(a), alloc.fits(16)
    (False, None, True)
    """

    def __init__(self, fabric: Fabric, policy: str = "packed", seed: int = 0) -> None:
        if policy not in POLICIES:
            raise ConfigError(f"placement must be one of {', '.join(POLICIES)} or a host "
                              f"list, got {policy!r}", field="placement")
        info = fabric.info
        self.per = max(info.gpus_per_server, 1)
        self.servers = info.servers
        self.policy = policy
        self.used = np.zeros((self.servers, self.per), dtype=bool)
        self.leaves = server_leaves(fabric)
        self.rng = np.random.default_rng(seed)
        self.owner: dict[int, str] = {}  # server -> a job on it (for error messages)

    @property
    def free(self) -> NDArray[np.int64]:
        """Free GPUs per server."""
        out: NDArray[np.int64] = self.per - self.used.sum(axis=1)
        return out

    @property
    def free_gpus(self) -> int:
        return int(self.per * self.servers - self.used.sum())

    def check(self, name: str, gpus: int, hosts: Sequence[int] | None = None) -> None:
        """Refuse, naming the job, a count the cluster can never hold or that is neither
        at most a server nor whole servers (a host list may split a job evenly over
        partly used hosts instead)."""
        total = self.servers * self.per
        if gpus < 1:
            raise ConfigError(f"job {name!r}: needs at least one GPU, got {gpus}",
                              field=f"jobs.{name}.gpus")
        if gpus > total:
            raise ConfigError(f"job {name!r} needs {gpus} GPUs; the cluster has {total}",
                              field=f"jobs.{name}.gpus")
        if gpus > self.per and gpus % self.per and hosts is None:
            raise ConfigError(f"job {name!r}: {gpus} GPUs is neither at most one server "
                              f"({self.per}) nor whole servers; give a multiple of "
                              f"{self.per}", field=f"jobs.{name}.gpus")

    def fits(self, gpus: int) -> bool:
        """Whether a job of ``gpus`` fits now (a partial server, or whole free ones)."""
        free = self.free
        if gpus < self.per:
            return bool((free >= gpus).any())
        return int((free == self.per).sum()) >= gpus // self.per

    def _give(self, name: str, chosen: Sequence[int], gpus: int,
              each: int | None = None) -> Placement:
        ids: list[int] = []
        for s in chosen:
            n = min(each or self.per, gpus - len(ids))
            slots = np.flatnonzero(~self.used[s])[:n]
            self.used[s, slots] = True
            ids.extend(int(s * self.per + k) for k in slots)
            self.owner[int(s)] = name
        return Placement(name, tuple(int(s) for s in chosen), tuple(ids))

    def take(self, name: str, gpus: int, hosts: Sequence[int] | None = None) -> Placement:
        """GPUs for job ``name`` by the policy (or on ``hosts``, in that order); refused,
        naming the job, when they are not free."""
        self.check(name, gpus, hosts)
        per, free = self.per, self.free
        if hosts is not None:
            hs = [int(h) for h in hosts]
            bad = [h for h in hs if not 0 <= h < self.servers]
            if bad:
                raise ConfigError(f"job {name!r}: hosts {bad} are not servers of this "
                                  f"cluster (0-{self.servers - 1})",
                                  field=f"jobs.{name}.hosts")
            if len(set(hs)) != len(hs):
                raise ConfigError(f"job {name!r}: a host is listed twice",
                                  field=f"jobs.{name}.hosts")
            # as many GPUs on each host as the list spreads them over (4 on each of 4
            # hosts for 16), or whole servers
            each = gpus // len(hs) if gpus % len(hs) == 0 else 0
            if not 0 < each <= per:
                need = math.ceil(gpus / per)
                raise ConfigError(f"job {name!r} needs {need} server(s) for {gpus} GPUs, or "
                                  f"a host list over which they split evenly (at most {per} "
                                  f"on each); its host list has {len(hs)}",
                                  field=f"jobs.{name}.hosts")
            taken = [h for h in hs if free[h] < each]
            if taken:
                who = sorted({self.owner[h] for h in taken if h in self.owner})
                raise ConfigError(f"job {name!r}: hosts {taken} are already taken by "
                                  f"{', '.join(repr(w) for w in who)}",
                                  field=f"jobs.{name}.hosts")
            return self._give(name, hs, gpus, each)
        if gpus < per:  # a partial server: the fullest one it fits in, else a free one
            fits = np.flatnonzero(free >= gpus)
            if fits.size == 0:
                raise self._full(name, gpus)
            busy = fits[free[fits] < per]
            pick = busy[np.argmin(free[busy])] if busy.size else _order(
                fits, self.leaves, self.policy, self.rng, 1)[0]
            return self._give(name, [int(pick)], gpus)
        whole = np.flatnonzero(free == per)
        need = gpus // per
        if whole.size < need:
            raise self._full(name, gpus)
        return self._give(name, _order(whole, self.leaves, self.policy, self.rng,
                                       need)[:need], gpus)

    def release(self, placement: Placement) -> None:
        """Give a job's GPUs back."""
        g = np.asarray(placement.gpus, dtype=np.int64)
        self.used[g // self.per, g % self.per] = False

    def _full(self, name: str, gpus: int) -> ConfigError:
        free = self.free
        return ConfigError(f"job {name!r} needs {gpus} GPUs; {int(free.sum())} are left "
                           f"({int((free == self.per).sum())} whole servers) after the "
                           f"jobs before it", field=f"jobs.{name}.gpus")


def place(fabric: Fabric, demands: Sequence[tuple[str, int, Sequence[int] | None]],
          policy: str = "packed", seed: int = 0) -> list[Placement]:
    """GPUs for every job: ``demands`` are ``(name, gpus, hosts)``, ``hosts`` an explicit
    server list (``None``: the policy chooses). Explicit placements are made first.

    Refused, naming the job: two jobs of one name, a job larger than the cluster or than
    what is left, a GPU count that is neither at most a server nor whole servers, hosts
    out of range, used twice or too few for the job.
    """
    alloc = Allocator(fabric, policy, seed)
    names = [name for name, _, _ in demands]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"two jobs are named {twice[0]!r}; give each its own name",
                          field=f"jobs.{twice[0]}.name")
    for name, gpus, hosts in demands:
        alloc.check(name, gpus, hosts)
    out = {name: alloc.take(name, gpus, hosts) for name, gpus, hosts in demands
           if hosts is not None}  # explicit host lists first
    out.update({name: alloc.take(name, gpus) for name, gpus, hosts in demands
                if hosts is None})
    return [out[name] for name, _, _ in demands]


def _order(cands: NDArray[np.int64], leaves: NDArray[np.int64], policy: str,
           rng: np.random.Generator, need: int) -> list[int]:
    """Candidate servers in the order ``policy`` takes them for a job of ``need``."""
    if policy == "packed":
        return [int(s) for s in cands]
    if policy == "random":
        return [int(s) for s in rng.permutation(cands)]
    groups: dict[int, list[int]] = {}
    for s in cands:
        groups.setdefault(int(leaves[s]), []).append(int(s))
    if policy == "rail":  # best fit in one group, else the fewest groups
        holds = sorted((g for g in groups.values() if len(g) >= need),
                       key=lambda g: (len(g), g[0]))
        if holds:
            return holds[0]
        return [s for g in sorted(groups.values(), key=lambda g: (-len(g), g[0]))
                for s in g]
    # spread: deal round-robin over the leaf groups, the emptiest group first
    lists = sorted(groups.values(), key=lambda g: (-len(g), g[0]))
    dealt: list[int] = []
    for i in range(max(len(g) for g in lists)):
        dealt.extend(g[i] for g in lists if i < len(g))
    return dealt


class PlacedComm:
    """The step model's communication for a job placed on ``gpus`` of a shared fabric.

    A collective on a group of the job's ranks runs on the GPUs the ranks map to; asked
    for all sibling groups (:meth:`time_all`), it runs them together on the analytic
    backend, one schedule, and answers for the slowest: groups of a job share its
    servers' links, and the run sees that exactly. Each distinct call's time and link
    bytes are kept (:attr:`calls`); ``scale`` multiplies the time of the call whose key
    it names (:func:`link_use` uses it to count how often a step runs each).
    """

    def __init__(self, fabric: Fabric, gpus: Sequence[int]) -> None:
        self.fabric = fabric
        self.gpus = np.asarray(gpus, dtype=np.int64)
        #: key -> (seconds, link bytes of every sibling group, for one call)
        self.calls: dict[tuple[Any, ...], tuple[float, FloatArray]] = {}
        self.scale: tuple[tuple[Any, ...], float] | None = None

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        """Seconds for ``collective`` over one group of the job's ranks."""
        return self.time_all(collective, [ranks], nbytes)

    def time_all(self, collective: str, groups: Sequence[Sequence[int]], nbytes: float
                 ) -> float:
        """Seconds for ``collective`` on every group at once (the slowest)."""
        if not groups or len(groups[0]) <= 1 or nbytes <= 0:
            return 0.0
        mapped = [self.gpus[np.asarray(g, dtype=np.int64)] for g in groups]
        key = (collective, round(float(nbytes)),
               hash(np.concatenate(mapped).tobytes()), len(mapped))
        return self._cached(key, lambda: self._run(collective, mapped, float(nbytes)))

    def time_writes(self, src: Sequence[int], dst: Sequence[int], nbytes: float) -> float:
        """Seconds for every rank of ``src`` to send ``nbytes`` to the rank of ``dst`` in
        the same position, all at once (a checkpoint written to storage servers)."""
        s = self.gpus[np.asarray(src, dtype=np.int64)]
        d = self.gpus[np.asarray(dst, dtype=np.int64)]

        def run() -> tuple[float, FloatArray]:
            from fabricsim.backends.analytic import AnalyticBackend
            from fabricsim.schedule.core import Schedule, Step

            fab = self.fabric
            sched = Schedule((Step(fab.gpus[s], fab.gpus[d], np.full(s.size, nbytes),
                                   label="checkpoint write"),), collective="write",
                             nbytes=int(nbytes) * int(s.size))
            res = AnalyticBackend().run(sched, fab)
            return float(res.time), np.asarray(res.link_bytes, dtype=np.float64)

        key = ("write", round(float(nbytes)), hash(np.concatenate([s, d]).tobytes()), 1)
        return self._cached(key, run)

    def _cached(self, key: tuple[Any, ...], run: Callable[[], tuple[float, FloatArray]]
                ) -> float:
        """A call's seconds, run once per key (its link bytes kept in :attr:`calls`),
        times :attr:`scale` when that names it."""
        hit = self.calls.get(key)
        if hit is None:
            hit = self.calls[key] = run()
        if self.scale is not None and self.scale[0] == key:
            return hit[0] * self.scale[1]
        return hit[0]

    def _run(self, collective: str, groups: list[NDArray[np.int64]], nbytes: float
             ) -> tuple[float, FloatArray]:
        from fabricsim.backends.analytic import AnalyticBackend
        from fabricsim.collectives import predict_time
        from fabricsim.schedule.core import merge_parallel
        from fabricsim.workloads.comm import group_builder

        fab = self.fabric
        srv = fab.node_server[fab.gpus]
        zero = np.zeros(fab.n_links)
        if all(np.unique(srv[g]).size == 1 for g in groups):  # NVLink only: no sharing
            return predict_time(fab, collective, int(nbytes), ranks=groups[0]), zero
        # NCCL's choice for the first group (every sibling sits alike), built for each
        build = group_builder(fab, collective, groups[0].tolist(), nbytes)
        scheds = [build(g.tolist()) for g in groups]
        first = scheds[0]
        merged = merge_parallel(scheds, collective=collective, algorithm=first.algorithm,
                                protocol=first.protocol, nbytes=first.nbytes,
                                ranks=first.ranks, **first.timing_fields())
        res = AnalyticBackend().run(merged, fab)
        return float(res.time), np.asarray(res.link_bytes, dtype=np.float64)


@dataclass(frozen=True)
class ClusterMember:
    """One training job of a cluster: its name, GPUs, model and layout."""

    name: str
    gpus: int
    model: TransformerSpec
    parallel: ParallelConfig
    gpu_hour_usd: float | None = None


@dataclass(frozen=True)
class LoopMember:
    """A job of a cluster that runs one collective over all its GPUs again and again,
    ``gap_s`` idle between two (an nccl-tests burn-in, a benchmark, a synthetic load)."""

    name: str
    gpus: int
    collective: str
    nbytes: float
    gap_s: float = 0.0
    gpu_hour_usd: float | None = None


@dataclass(frozen=True)
class LoopStep:
    """One round of a :class:`LoopMember`: the collective, then the gap (the fields a
    shared fabric reads of a step: its time, its communication, a label, a price)."""

    model: str
    step_time_s: float
    comm_total_s: dict[str, float]
    gpu_hour_usd: float
    parallel: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def run(cls, job: LoopMember, comm: PlacedComm) -> LoopStep:
        t = comm.time_all(job.collective, [list(range(job.gpus))], job.nbytes)
        from fabricsim.units import format_bytes

        return cls(f"{job.collective} {format_bytes(job.nbytes)}", t + job.gap_s,
                   {"loop": t}, job.gpu_hour_usd or 0.0)


@dataclass(frozen=True)
class WriteMember:
    """A checkpoint being written: each GPU of a job (the first ``writers`` ranks of its
    placement) sends ``nbytes`` to a GPU of the storage servers (the ranks after them),
    back to back while the burst lasts; the burst lasts at least ``min_s`` (storage that
    takes data in slower than the network brings it)."""

    name: str
    writers: int
    nbytes: float
    gpus: int = 0  # every rank of its placement: writers, then the storage GPUs
    min_s: float = 0.0  # the storage's own pace: the burst lasts at least this
    gpu_hour_usd: float | None = None

    def step(self, comm: PlacedComm) -> LoopStep:
        n = self.gpus - self.writers
        src = list(range(self.writers))
        dst = [self.writers + k % n for k in range(self.writers)]
        from fabricsim.units import format_bytes

        t = comm.time_writes(src, dst, self.nbytes)
        return LoopStep(f"checkpoint {format_bytes(self.nbytes * self.writers)}",
                        max(t, self.min_s), {"write": t}, 0.0)


@dataclass(frozen=True)
class ServingMember:
    """A serving job of a cluster: ``gpus / instance`` replicas of one serving instance
    (``cfg``: ``tp × pp`` GPUs), each decoding its static batch. Its step is one decode
    iteration (the time per output token); its traffic the decode's TP all-reduces,
    pipeline hand-offs and expert all-to-alls of every replica (prefill bursts are not
    counted)."""

    name: str
    gpus: int
    model: TransformerSpec
    cfg: ServingConfig
    gpu_hour_usd: float | None = None

    @property
    def instance(self) -> int:
        return int(self.cfg.tp) * int(self.cfg.pp)

    def serve(self, fab: Fabric, comm: CommModel | None = None) -> InferenceResult:
        """One instance as ``fabricsim infer`` serves it, its collectives timed by
        ``comm`` (default: the collective engine on ``fab``)."""
        from fabricsim.workloads.serving.static import simulate_inference

        c = self.cfg
        return simulate_inference(
            self.model, fab, tp=c.tp, pp=c.pp, ep=c.ep, batch=c.batch,
            prompt_len=c.prompt_len, output_len=c.output_len, precision=c.precision,
            kv_precision=c.kv_precision, engine=c.engine, comm=comm,
            attention_dp=c.attention_dp, ep_kernel=c.ep_kernel,
            redundant_experts=c.redundant_experts)

    def step(self, fab: Fabric, comm: PlacedComm) -> LoopStep:
        c = self.cfg
        r = self.serve(fab, _Replicas(comm, self.instance, self.gpus // self.instance))
        d = r.decode
        return LoopStep(f"serve {self.model.name} tp{c.tp}"
                        + (f" pp{c.pp}" if c.pp > 1 else ""), r.tpot_s,
                        {"decode": d.comm_s + d.p2p_s + d.ep_s},
                        self.gpu_hour_usd or 0.0)


class _Replicas:
    """A serving instance's collectives on every replica at once (the slowest answers)."""

    def __init__(self, comm: PlacedComm, size: int, copies: int) -> None:
        self.comm, self.size, self.copies = comm, size, copies

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        return self.comm.time_all(
            collective, [[int(r) + k * self.size for r in ranks] for k in range(self.copies)],
            nbytes)


#: What runs on a shared fabric, and what one of its steps gives.
Member = ClusterMember | LoopMember | WriteMember | ServingMember
Step = StepResult | LoopStep


def link_use(step: Callable[[PlacedComm], Step], comm: PlacedComm,
             base: Step) -> FloatArray:
    """Bytes per step the job puts on every link: each distinct collective's link bytes
    (:attr:`PlacedComm.calls`) times how often the step runs it. The count is what the
    step's total communication time (``comm_total_s``) gains when that one call is made a
    little slower, over what the call gained; the step model is deterministic, so this
    is exact in its own terms."""
    total = sum(base.comm_total_s.values())
    out = np.zeros(comm.fabric.n_links)
    eps = 1e-6
    for key, (t, lb) in list(comm.calls.items()):
        if t <= 0 or not lb.any():
            continue
        comm.scale = (key, 1.0 + eps)
        try:
            bumped = sum(step(comm).comm_total_s.values())
        finally:
            comm.scale = None
        count = max((bumped - total) / (eps * t), 0.0)
        out += count * lb
    return out


@dataclass(frozen=True)
class JobShare(Tabular):
    """One job on the shared fabric: alone and with the others."""

    name: str
    gpus: int
    servers: tuple[int, ...]
    alone: Step
    shared: Step
    #: links where the others slow it most: (link name, others' busy share, own share)
    links: tuple[tuple[str, float, float], ...] = ()
    #: the jobs whose traffic it meets most there, with their busy share
    culprits: tuple[tuple[str, float], ...] = ()

    @property
    def slowdown(self) -> float:
        return self.shared.step_time_s / self.alone.step_time_s

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: step alone and shared, slowdown, what it loses, where, by whom."""
        lost = self.gpus * (1.0 - 1.0 / self.slowdown)
        price = self.alone.gpu_hour_usd
        return {"job": self.name, "gpus": self.gpus, "servers": len(self.servers),
                "model": self.alone.model, "step_alone_s": self.alone.step_time_s,
                "step_shared_s": self.shared.step_time_s, "slowdown": self.slowdown,
                "gpu_hours_lost_per_hour": lost, "usd_lost_per_hour": lost * price,
                "links": [{"link": n, "others_busy": o, "own_busy": w}
                          for n, o, w in self.links],
                "culprits": [{"job": j, "busy": b} for j, b in self.culprits]}


@dataclass(frozen=True)
class ClusterResult(Tabular):
    """Every job alone and shared, and how busy each link is with all of them.
    ``to_pandas()`` has one row per job."""

    jobs: tuple[JobShare, ...]
    placements: tuple[Placement, ...]
    #: mean busy share of every link with all jobs running (sum over jobs)
    busy: FloatArray = field(repr=False, default_factory=lambda: np.zeros(0))
    iterations: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: every job (:meth:`JobShare.as_dict`), passes, busiest links."""
        return {"jobs": [j.as_dict() for j in self.jobs],
                "iterations": self.iterations,
                "busiest_links": self.busiest()}

    def _rows(self) -> list[dict[str, Any]]:
        return [j.to_dict() for j in self.jobs]

    def busiest(self, n: int = 5) -> list[dict[str, Any]]:
        """The ``n`` links busiest with all jobs (mean busy share; above 1: oversubscribed
        in the mean, the jobs slow each other until it is not)."""
        if self.busy.size == 0:
            return []
        top = np.argsort(-self.busy)[:n]
        return [{"link": int(i), "busy": float(self.busy[i])} for i in top
                if self.busy[i] > 0]


class SharedFabric:
    """Jobs on one fabric that come and go: each timed alone once when it is added
    (:meth:`add`), and all of them with one another on demand (:meth:`settle`).

    A job's alone step and the bytes it puts on every link are kept while it runs; a
    settle re-times only the jobs whose links the others now use differently, starting
    from the step times of the last settle. :func:`interfere` is one settle of jobs all
    added at once; a trace replay adds and removes jobs as they start and end.

    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> fab = fs.build_cluster("dgx-h100", 64, fabric="roce-400g")
    >>> cfg = ParallelConfig(tp=8, global_batch=64, seq_len=4096)
    >>> m = get_model("llama2-7b")
    >>> a, b = place(fab, [("a", 16, None), ("b", 16, None)], "spread")
    >>> shared = SharedFabric(fab)
    >>> _ = shared.add(ClusterMember("a", 16, m, cfg), a)
    >>> _ = shared.add(ClusterMember("b", 16, m, cfg), b)
    >>> _ = shared.settle()
    >>> shared.slowdown("a") >= 1.0, shared.names
    (True, ['a', 'b'])
    >>> shared.remove("b"); _ = shared.settle(); shared.slowdown("a")
    1.0
    """

    def __init__(self, fabric: Fabric, *, iterations: int = 8, tolerance: float = 0.005
                 ) -> None:
        self.fabric = fabric
        self.iterations = iterations
        self.tolerance = tolerance
        self.cap = fabric.link_capacity.astype(np.float64)
        self._jobs: dict[str, _Running] = {}

    @property
    def names(self) -> list[str]:
        """The jobs running, in the order they were added."""
        return list(self._jobs)

    def _step(self, fab: Fabric, j: Member, comm: PlacedComm,
              cfg: ParallelConfig | None = None) -> Step:
        if isinstance(j, LoopMember):
            return LoopStep.run(j, comm)
        if isinstance(j, WriteMember):
            return j.step(comm)
        if isinstance(j, ServingMember):
            return j.step(fab, comm)
        return simulate_step(j.model, cfg or j.parallel, fab, comm, world=j.gpus,
                             check_memory=False, gpu_hour_usd=j.gpu_hour_usd)

    def add(self, job: Member, placement: Placement) -> Step:
        """Start ``job`` on ``placement``: its step alone, and what it puts on each link."""
        if job.name in self._jobs:
            raise ConfigError(f"job {job.name!r} is already running; give each its own "
                              f"name", field=f"jobs.{job.name}.name")
        comm = PlacedComm(self.fabric, placement.gpus)
        base = self._step(self.fabric, job, comm)
        # the count must not switch layout: the interleaving the step chose, pinned
        pinned = None if isinstance(job, LoopMember | WriteMember | ServingMember) else \
            job.parallel.model_copy(update={"vp": base.parallel.get("vp")}) \
            if job.parallel.vp is None else job.parallel
        use = link_use(partial(self._step, self.fabric, job, cfg=pinned), comm, base)
        self._jobs[job.name] = _Running(job, placement, base, use, np.flatnonzero(use > 0),
                                        base, base.step_time_s)
        return base

    def remove(self, name: str) -> None:
        """Stop job ``name``: its traffic leaves the fabric."""
        del self._jobs[name]

    def slowdown(self, name: str) -> float:
        """Job ``name``'s step with the others (as of the last settle) over its step alone."""
        r = self._jobs[name]
        return r.shared.step_time_s / r.alone.step_time_s

    def settle(self, progress: Callable[[float, str], None] | None = None) -> int:
        """Time every job with the others until no step changes by more than the
        tolerance (damped: the others' use follows the step times halfway each pass);
        the number of passes."""
        runs = list(self._jobs.values())
        if not runs:
            return 0
        steps = np.array([r.step for r in runs])
        done = 0
        for it in range(self.iterations):
            busy, per_job = _busy([r.use for r in runs], steps, self.cap)
            now = steps.copy()
            for i, r in enumerate(runs):
                if progress is not None:
                    progress((it + i / len(runs)) / self.iterations,
                             f"{r.job.name} shared (pass {it + 1})")
                others = (busy - per_job[i])[r.mine]
                if not (others > 1e-9).any():
                    r.shared, r.seen = r.alone, None
                elif r.seen is None or not np.allclose(others, r.seen,
                                                       rtol=self.tolerance, atol=1e-6):
                    r.seen = others
                    full = np.zeros_like(self.cap)
                    full[r.mine] = others
                    fab = _with_capacity(self.fabric, self.cap / (1.0 + full))
                    r.shared = self._step(fab, r.job, PlacedComm(fab, r.placement.gpus))
                now[i] = r.shared.step_time_s
            done = it + 1
            settled = bool(np.all(np.abs(now - steps) <= self.tolerance * steps))
            steps = np.where(settled, now, 0.5 * (steps + now))
            if settled:
                break
        for r, s in zip(runs, steps, strict=True):
            r.step = float(s)
        return done

    def result(self) -> ClusterResult:
        """Every running job alone and shared (as of the last settle), the links where
        the others slow it most and the jobs whose traffic it meets there."""
        runs = list(self._jobs.values())
        busy, per_job = _busy([r.use for r in runs], np.array([r.step for r in runs]),
                              self.cap)
        out = []
        for i, r in enumerate(runs):
            others = busy - per_job[i]
            hurt = per_job[i] * others  # where it is slowed: its own use x the others'
            top = [int(x) for x in np.argsort(-hurt)[:3] if hurt[x] > 1e-9]
            links = tuple((self.fabric.link_name(x), float(others[x]), float(per_job[i][x]))
                          for x in top)
            blame: dict[str, float] = {}
            for x in top:
                for k, b in enumerate(per_job):
                    if k != i and b[x] > 1e-9:
                        who = runs[k].job.name
                        blame[who] = max(blame.get(who, 0.0), float(b[x]))
            culprits = tuple(sorted(blame.items(), key=lambda kv: -kv[1])[:3])
            out.append(JobShare(r.job.name, r.job.gpus, r.placement.servers, r.alone,
                                r.shared, links, culprits))
        return ClusterResult(tuple(out), tuple(r.placement for r in runs), busy)


@dataclass
class _Running:
    """A job on a :class:`SharedFabric`: alone, its bytes per step per link (and the
    links it uses), its last shared step, the step time the others' use follows, and
    the others' use of its links when it was last timed."""

    job: Member
    placement: Placement
    alone: Step
    use: FloatArray
    mine: NDArray[np.int64]
    shared: Step
    step: float
    seen: FloatArray | None = None


def interfere(fabric: Fabric, jobs: Sequence[Member], placed: Sequence[Placement],
              *, iterations: int = 8, tolerance: float = 0.005,
              progress: Callable[[float, str], None] | None = None) -> ClusterResult:
    """Every job's step alone on its placement and with all the others (see the module
    docstring), until no step time changes by more than ``tolerance``."""
    if len(jobs) != len(placed):
        raise ConfigError("one placement per job", field="jobs")
    shared = SharedFabric(fabric, iterations=iterations, tolerance=tolerance)
    for i, (j, p) in enumerate(zip(jobs, placed, strict=True)):
        if progress is not None:
            progress(i / (2 * len(jobs)), f"{j.name} alone")
        shared.add(j, p)
    passes = shared.settle(None if progress is None else
                           lambda f, m: progress(0.5 + 0.5 * f, m))
    return replace(shared.result(), iterations=passes)


def _busy(use: Sequence[FloatArray], steps: FloatArray, cap: FloatArray
          ) -> tuple[FloatArray, list[FloatArray]]:
    """Every job's busy share of every link (its bytes per step over the capacity and its
    step time), and their sum."""
    safe = np.where(cap > 0, cap, np.inf)
    per_job = [u / safe / s for u, s in zip(use, steps, strict=True)]
    total = np.sum(per_job, axis=0) if per_job else np.zeros_like(cap)
    return total, per_job


def _with_capacity(fabric: Fabric, cap: FloatArray) -> Fabric:
    """A copy of ``fabric`` with link capacities ``cap``."""
    return replace(fabric, link_capacity=np.asarray(cap, dtype=np.float64))


#: Failure classes that take a server out until it is swapped (the others only restart).
HARDWARE_CLASSES = ("gpu", "nic", "host")

#: Hours to bring failed servers back when no spare takes their place: an assumption.
#: Reported swaps of a GB200 NVL72 compute tray take 1-4 h, of a backplane 8-24 h
#: (docs/cluster.md); give the cluster's own with ``repair_hours``.
DEFAULT_REPAIR_HOURS = 4.0


@dataclass(frozen=True)
class FailureCost(Tabular):
    """What losing some servers costs one job that runs on them, three ways (seconds of
    the job's wall time; GPU-hours are these times its GPUs):

    * ``with_spares_s``: restart from the last checkpoint on spare servers — the work
      since the last durable checkpoint (``lost_work_s``: half a checkpoint interval on
      average, plus a write not yet durable) and the restart;
    * ``wait_s``: no spare — wait for the repair, then restart;
    * ``shrink_s``: no spare — restart on the survivors without the data-parallel
      replicas that lost a GPU, each keeping its micro-batches (the global batch shrinks
      with them, as elastic training runs; a step takes ``shrink_step_s``), train at that
      reduced rate until the repair, and restart on the full set; ``None`` with
      ``shrink_note`` saying why when the layout cannot shrink.

    And the job's goodput over a failure trace (the share of wall time that trains, with
    the failure rates of :class:`~fabricsim.workloads.training.goodput.FailureRates`,
    Llama 3 derived): ``goodput_with_spares`` restarts on spares after every failure;
    without spares, each hardware failure (a GPU, NIC or host: a server to swap) costs
    the repair too, waited out (``goodput_wait``) or trained through shrunk
    (``goodput_shrink``), as this failure does; cable, switch and software failures only
    restart. ``failures_per_day`` is the job's, ``hardware_per_day`` the share that needs
    a swap.
    """

    job: str
    gpus: int
    servers_lost: int
    replicas_lost: int
    gpus_lost: int
    step_s: float
    lost_work_s: float
    restart_s: float
    repair_s: float
    with_spares_s: float
    wait_s: float
    shrink_s: float | None
    shrink_step_s: float | None
    shrink_note: str = ""
    failures_per_day: float = 0.0
    hardware_per_day: float = 0.0
    goodput_with_spares: float = 1.0
    goodput_wait: float = 1.0
    goodput_shrink: float | None = None

    @property
    def best_without_spares(self) -> str:
        """``shrink`` or ``wait``, whichever loses less."""
        return "shrink" if self.shrink_s is not None and self.shrink_s < self.wait_s \
            else "wait"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with GPU-hours lost for each way."""
        gh = self.gpus / 3600.0
        return {"job": self.job, "gpus": self.gpus, "servers_lost": self.servers_lost,
                "gpus_lost": self.gpus_lost,
                "replicas_lost": self.replicas_lost, "step_s": self.step_s,
                "lost_work_s": self.lost_work_s, "restart_s": self.restart_s,
                "repair_s": self.repair_s, "with_spares_s": self.with_spares_s,
                "wait_s": self.wait_s, "shrink_s": self.shrink_s,
                "shrink_step_s": self.shrink_step_s, "shrink_note": self.shrink_note,
                "best_without_spares": self.best_without_spares,
                "failures_per_day": self.failures_per_day,
                "hardware_failures_per_day": self.hardware_per_day,
                "goodput": {"with_spares": self.goodput_with_spares,
                            "wait": self.goodput_wait, "shrink": self.goodput_shrink},
                "gpu_hours_lost": {"with_spares": self.with_spares_s * gh,
                                   "wait": self.wait_s * gh,
                                   "shrink": None if self.shrink_s is None
                                   else self.shrink_s * gh}}


def failure_costs(fabric: Fabric, jobs: Sequence[ClusterMember], placed: Sequence[Placement],
                  steps: Sequence[StepResult], failed: Sequence[int], *,
                  repair_hours: float = DEFAULT_REPAIR_HOURS,
                  restart_s: float | None = None,
                  failed_gpus: Sequence[int] = ()) -> list[FailureCost]:
    """:class:`FailureCost` of every job with a GPU on the ``failed`` servers or among
    ``failed_gpus`` (indices into ``fabric.gpus``: an NVL72 compute tray alone), its step
    ``steps[i]`` (alone or shared) and its checkpoints as the goodput model sets them
    (:func:`~fabricsim.workloads.training.goodput.goodput_on_fabric`, written by its own
    servers' storage NICs)."""
    from fabricsim.errors import FabricsimError
    from fabricsim.workloads.training.goodput import (
        DEFAULT_RESTART_S,
        goodput_on_fabric,
        storage_write_bytes_per_s,
    )
    from fabricsim.workloads.training.step import check_layout

    down = {int(s) for s in failed}
    lost_gpus = {int(g) for g in failed_gpus}
    per = max(fabric.info.gpus_per_server, 1)
    repair = repair_hours * 3600.0
    restart = DEFAULT_RESTART_S if restart_s is None else restart_s
    out = []
    for j, p, st in zip(jobs, placed, steps, strict=True):
        hit = [r for r, g in enumerate(p.gpus) if g // per in down or g in lost_gpus]
        if not hit:
            continue
        g = goodput_on_fabric(fabric, params=j.model.params, step_time_s=st.step_time_s,
                              gpus=j.gpus, gpu_hour_usd=max(st.gpu_hour_usd, 0.0),
                              checkpoint_write_bytes_per_s=storage_write_bytes_per_s(
                                  fabric, len(p.servers)), restart_s=restart,
                              servers=len(p.servers))
        lost_work = g.checkpoint_interval_s / 2.0 + g.checkpoint_write_s \
            - g.checkpoint_blocking_s
        res = check_layout(j.model, j.parallel, fabric, world=j.gpus, check_memory=False)
        lost = sorted({res.coordinates(r)[2] for r in hit})
        keep = [d for d in range(res.dp) if d not in lost]
        shrink_step: float | None = None
        note = ""
        if not keep:
            note = "every data-parallel replica has a GPU on the failed servers"
        else:
            world = res.tp * res.cp * res.pp * len(keep)
            # each surviving replica keeps its micro-batches (elastic training): the
            # global batch shrinks with the replicas
            gb = res.cfg.global_batch  # (None: one batch per replica, as before)
            gbs = None if gb is None else gb // res.dp * len(keep)
            shrunk = res.cfg.model_copy(update={"global_batch": gbs})
            try:
                new = check_layout(j.model, shrunk, fabric, world=world)
                gpus = [0] * world
                for q in range(res.pp):
                    for i, d in enumerate(keep):
                        for c in range(res.cp):
                            for t in range(res.tp):
                                gpus[new.rank(t, c, i, q)] = p.gpus[res.rank(t, c, d, q)]
                shrink_step = simulate_step(j.model, shrunk, fabric,
                                            PlacedComm(fabric, gpus), world=world,
                                            gpu_hour_usd=j.gpu_hour_usd).step_time_s
            except FabricsimError as e:
                note = f"the layout cannot shrink to {world} GPUs: {e.message}"
        # while shrunk, the job trains at (its batch / its step) of the full rate
        rate = 0.0 if shrink_step is None else \
            (len(keep) / res.dp) * st.step_time_s / shrink_step
        shrink = None if shrink_step is None else \
            lost_work + 2.0 * restart + repair * (1.0 - rate)
        # over a failure trace: hardware failures wait for a swap or train shrunk
        hw_per_day = sum(g.failures_per_day_by_class[c] for c in HARDWARE_CLASSES)
        per_s = hw_per_day / 86_400.0
        keep_wait = max(g.goodput - per_s * repair, 0.0)
        keep_shrink = None if shrink_step is None else \
            max(g.goodput - per_s * (restart + repair * (1.0 - rate)), 0.0)
        out.append(FailureCost(
            job=j.name, gpus=j.gpus, servers_lost=len({p.gpus[r] // per for r in hit}),
            gpus_lost=len(hit),
            replicas_lost=len(lost), step_s=st.step_time_s, lost_work_s=lost_work,
            restart_s=restart, repair_s=repair, with_spares_s=lost_work + restart,
            wait_s=lost_work + repair + restart, shrink_s=shrink, shrink_step_s=shrink_step,
            shrink_note=note, failures_per_day=g.failures_per_day,
            hardware_per_day=hw_per_day, goodput_with_spares=g.goodput,
            goodput_wait=keep_wait, goodput_shrink=keep_shrink))
    return out
