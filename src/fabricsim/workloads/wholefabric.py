"""Every group of a training step on the flow backend at once, sharing the fabric.

The step model asks its :class:`~fabricsim.workloads.comm.CommModel` for each part of a
step (a TP all-reduce, an EP dispatch, a DP reduce-scatter, a pipeline send) on one group
of ranks, and, through :class:`~fabricsim.workloads.comm.GroupComm`, for that group with
all its siblings (every group of the job that plays the same part at the same moment:
:meth:`~fabricsim.workloads.training.parallel.ResolvedParallel.siblings`).
:class:`EngineComm` answers for one group alone and scales inter-server collectives by
:func:`~fabricsim.workloads.comm.nic_sharing_factor` for the siblings it does not run.
:class:`WholeFabricComm` runs them: each part's schedule is compiled for every sibling
group (NCCL's choice of algorithm and protocol for the first, as every sibling sits
alike), the schedules are merged side by side (:func:`~fabricsim.schedule.core.
merge_parallel`) and timed in one flow run, so the groups meet on NICs, leaf and spine
links under the fabric's own routing (hashed ECMP on Ethernet, its tables on
InfiniBand). The first group is also run alone; each part's record
(:class:`FabricCall`) gives both times, the flows simulated and the link that limited it.

Siblings that share a rank (a middle pipeline stage sends to both neighbours) do not run
at one moment: :func:`disjoint` keeps the first of them, as a stage exchanges with one
neighbour at a time. Groups that stay inside one server meet nowhere (an NVSwitch is
non-blocking per port): their part is run for the first group alone and says so
(``siblings_met`` false).

:attr:`WholeFabricComm.precision` (default ``1e-3``) settles finish events that fall
within that share of a transfer's duration together (``FlowBackend.precision``): a
million-flow hashed all-to-all in seconds instead of hours, each transfer at most 0.1 %
late (docs/flow.md, "Precision").

Example
-------
>>> import fabricsim as fs
>>> fab = fs.build_cluster("dgx-h100", nodes=4, fabric="roce-400g")
>>> comm = WholeFabricComm(fab)
>>> groups = [[0, 8, 16, 24], [1, 9, 17, 25]]  # two DP groups: NIC 0 and NIC 1 rails
>>> t = comm.time_all("all_reduce", groups, 2**28)
>>> c = comm.calls[0]
>>> c.groups, c.transfers > 0, c.time_s >= c.alone_s * 0.999
(2, True, True)
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError, SimulationError
from fabricsim.fabric import Fabric
from fabricsim.schedule.core import Schedule, merge_parallel
from fabricsim.workloads.comm import group_builder

if TYPE_CHECKING:
    from fabricsim.backends.base import Result
    from fabricsim.collectives.ep import EpConfig

FloatArray = NDArray[np.float64]

__all__ = ["FabricCall", "WholeFabricComm", "disjoint", "siblings_schedule", "side_by_side"]


def siblings_schedule(fabric: Fabric, collective: str, groups: Sequence[Sequence[int]],
                      nbytes: float) -> Schedule:
    """``collective`` of ``nbytes`` on every group of ``groups`` at once: NCCL's choice
    (algorithm, protocol) for the first group, built for each, merged side by side.

    >>> import fabricsim as fs
    >>> fab = fs.build_cluster("dgx-h100", nodes=2)
    >>> s = siblings_schedule(fab, "all_reduce", [[0, 8], [1, 9]], 2**20)
    >>> s.collective, len(s.steps) % 2
    ('all_reduce', 0)
    """
    build = group_builder(fabric, collective, groups[0], nbytes)
    return side_by_side([build(g) for g in groups])


def side_by_side(scheds: Sequence[Schedule]) -> Schedule:
    """Sibling schedules as one. Where every sibling has the same steps (deps, repeats,
    labels) each step of the result holds that step of every sibling (fused: a step's
    next repetition starts when every group has finished it, the lockstep a synchronous
    job keeps anyway, and a handful of steps instead of thousands); otherwise they run
    side by side, each at its own pace (:func:`~fabricsim.schedule.core.merge_parallel`).
    The first schedule's collective, algorithm, protocol and costs are the result's.

    >>> import numpy as np
    >>> from fabricsim.schedule.core import Step
    >>> a = Schedule(steps=(Step(src=[0], dst=[1], nbytes=[8.0], repeat=3),))
    >>> b = Schedule(steps=(Step(src=[2], dst=[3], nbytes=[8.0], repeat=3),))
    >>> fused = side_by_side([a, b])
    >>> len(fused.steps), fused.steps[0].src.tolist(), fused.steps[0].repeat
    (1, [0, 2], 3)
    """
    first = scheds[0]
    if len(scheds) == 1:
        return first
    kw: dict[str, Any] = {
        "collective": first.collective, "algorithm": first.algorithm,
        "protocol": first.protocol, "nbytes": first.nbytes, "ranks": first.ranks,
        "meta": first.meta, **first.timing_fields()}

    def shape(st: Any) -> tuple[Any, ...]:
        return (st.repeat, st.deps, st.reduce_at, st.label, st.channel, st.delay, st.rounds,
                st.hashes is None)

    ref = [shape(st) for st in first.steps]
    if not all([shape(st) for st in sch.steps] == ref for sch in scheds[1:]):
        return merge_parallel(list(scheds), **kw)
    steps = []
    for k, st in enumerate(first.steps):
        parts = [sch.steps[k] for sch in scheds]
        hashes = None if st.hashes is None else np.concatenate(
            [p.hashes for p in parts if p.hashes is not None])
        steps.append(replace(st, src=np.concatenate([p.src for p in parts]),
                             dst=np.concatenate([p.dst for p in parts]),
                             nbytes=np.concatenate([p.nbytes for p in parts]),
                             hashes=hashes))
    return Schedule(steps=tuple(steps), **kw)


@dataclass(frozen=True)
class FabricCall:
    """One part of a step timed with all its sibling groups on the fabric.

    ``time_s``: until the slowest group finishes, all of them running at once;
    ``alone_s``: the first group alone on the same fabric and backend; ``transfers``:
    the flows of every group together (every repetition's); ``components``: how many
    link-disjoint sets the groups form; ``distinct`` and ``simulated``: the groups and
    flows run (the others are exact copies of one of them in a component of its own,
    :meth:`WholeFabricComm._distinct`);
    ``limited_by``/``limited_link``: the kind and name of the link that bounded the run
    longest (empty when none did);
    ``siblings_met``: false where the groups share no link (inside one server each), so
    one group was run for all; ``part``: the step's part it belongs to (``tp``, ``ep``,
    ``cp``, ``pp``, ``dp``; empty outside a step); ``overlapped_s``: its time with the
    step's other parts on the fabric in the mean (:meth:`WholeFabricComm.overlap`; 0
    until then).
    """

    kind: str
    groups: int
    group_size: int
    nbytes: float
    transfers: int
    simulated: int
    components: int
    distinct: int
    time_s: float
    alone_s: float
    limited_by: str
    limited_link: str
    siblings_met: bool
    wall_s: float
    part: str = ""
    overlapped_s: float = 0.0

    @property
    def slowdown(self) -> float:
        """``time_s / alone_s`` (1 when alone takes no time)."""
        return self.time_s / self.alone_s if self.alone_s > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["slowdown"] = self.slowdown
        return d


@dataclass
class WholeFabricComm:
    """A :class:`~fabricsim.workloads.comm.GroupComm` that runs every sibling group of a
    part at once on the flow backend (see the module docstring).

    ``precision``: the flow backend's event coalescing (0: exact). ``time_limit_s``:
    wall time for all runs together (a :class:`~fabricsim.errors.SimulationError` naming
    ``--time-limit`` past it). ``progress``: called before each run with (runs done, what
    runs next) and by the flow backend as it goes (``step_progress``). Answers are cached
    by (part, bytes, groups); :attr:`calls` keeps each run's :class:`FabricCall`.
    """

    fabric: Fabric
    precision: float = 1e-3
    time_limit_s: float | None = None
    seed: int = 0
    #: Refuse (ConfigError, field ``--whole-fabric``) a part whose routing would need more
    #: bytes than this; ``None``: the memory free when it starts.
    memory_limit_bytes: float | None = None
    #: :meth:`all_at_once` runs at most this many flows (it cannot leave copies out);
    #: a million take about a minute on one core
    max_flows_at_once: int = 1_000_000
    progress: Callable[[int, str], None] | None = None
    step_progress: Callable[[int, int, float, int], None] | None = None
    calls: list[FabricCall] = field(default_factory=list)
    _cache: dict[tuple[Any, ...], float] = field(default_factory=dict, repr=False)
    #: per call: what :meth:`all_at_once` and :meth:`overlap` need to run it again
    _parts: list[_Run] = field(default_factory=list, repr=False)
    _deadline: float | None = field(default=None, repr=False)
    _part: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        from fabricsim.backends.flow.backend import check_precision

        check_precision(self.precision)
        if self.time_limit_s is not None:
            self._deadline = _time.perf_counter() + self.time_limit_s

    # --- the CommModel / GroupComm protocol -----------------------------------------
    def part(self, kind: str) -> None:
        """The step's part (``tp``, ``ep``, ``cp``, ``pp``, ``dp``) the next calls time
        (the step model says so before each)."""
        self._part = kind

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        """Seconds for ``collective`` on one group (no siblings given: that group alone
        on the fabric)."""
        return self.time_all(collective, [ranks], nbytes)

    def time_all(self, collective: str, groups: Sequence[Sequence[int]], nbytes: float
                 ) -> float:
        """Seconds until the slowest of ``groups`` finishes ``collective``, all at once."""
        if not groups or len(groups[0]) <= 1 or nbytes <= 0:
            return 0.0
        groups = disjoint(groups)
        key = (collective, round(float(nbytes)), _groups_key(groups))
        hit = self._cache.get(key)
        if hit is not None:
            return hit

        build = group_builder(self.fabric, collective, groups[0], nbytes)
        t = self._record(collective, groups, float(nbytes), build, 0.0, key)
        self._cache[key] = t
        return t

    def ep_time(self, kernel: str, phase: str, ranks: Sequence[int], cfg: EpConfig
                ) -> float:
        """One MoE dispatch or combine of ``kernel`` on one group alone."""
        return self.ep_time_all(kernel, phase, [ranks], cfg)

    def ep_time_all(self, kernel: str, phase: str, groups: Sequence[Sequence[int]],
                    cfg: EpConfig) -> float:
        """One MoE dispatch or combine of ``kernel`` (:mod:`fabricsim.collectives.ep`)
        on every EP group at once: the slowest, with the kernel family's fixed cost."""
        from fabricsim.collectives import Group
        from fabricsim.collectives.ep import KERNEL_OVERHEAD_S, build_ep_schedule, ep_kernel

        if not groups or len(groups[0]) <= 1:
            return 0.0
        kern = ep_kernel(kernel)
        key = ("ep", kern, phase, cfg, _groups_key(groups))
        hit = self._cache.get(key)
        if hit is not None:
            return hit

        def build(g: Sequence[int]) -> Schedule:
            grp = Group.of(self.fabric, list(g))
            cfg.check(grp.n)
            return build_ep_schedule(self.fabric, cfg, phase, kern, grp.ranks)

        t = self._record(f"ep {phase} ({kern})", groups, float(cfg.tokens), build,
                         KERNEL_OVERHEAD_S.get(kern, 0.0), key)
        self._cache[key] = t
        return t

    # --- what the runs found ----------------------------------------------------------
    @property
    def flows(self) -> int:
        """Flows of every part, every group's and every repetition's."""
        return sum(c.transfers for c in self.calls)

    @property
    def flows_simulated(self) -> int:
        """Flows the runs simulated: :attr:`flows` less the exact copies left out."""
        return sum(c.simulated for c in self.calls)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the flows of every group and those simulated, the runs (slowest-down
        first), the worst slowdown and the links that limited the parts."""
        calls = sorted(self.calls, key=lambda c: -c.slowdown)
        limits = sorted({c.limited_by for c in self.calls if c.limited_by})
        return {"flows": self.flows, "flows_simulated": self.flows_simulated,
                "runs": len(self.calls),
                "precision": self.precision,
                "worst_slowdown": max((c.slowdown for c in self.calls), default=1.0),
                "limiting_links": limits,
                "wall_s": sum(c.wall_s for c in self.calls),
                "calls": [c.to_dict() for c in calls]}

    # --- running ----------------------------------------------------------------------
    def _backend(self) -> Any:
        from fabricsim.backends.flow import FlowBackend

        left = None
        if self._deadline is not None:
            left = self._deadline - _time.perf_counter()
            if left <= 0:
                raise SimulationError(
                    f"time limit of {self.time_limit_s:g} s reached after {len(self.calls)} "
                    f"whole-fabric runs; raise --time-limit, coarsen --flow-precision, or "
                    f"drop --whole-fabric (each group alone, by shape)", field="--time-limit")
        return FlowBackend(seed=self.seed, precision=self.precision, time_limit_s=left,
                           progress=self.step_progress)

    def _record(self, kind: str, groups: Sequence[Sequence[int]], nbytes: float,
                build: Callable[[Sequence[int]], Schedule], fixed_s: float,
                key: tuple[Any, ...]) -> float:
        fab = self.fabric
        wall0 = _time.perf_counter()
        srv = np.asarray(fab.node_server)[np.asarray(fab.gpus)]
        inside = all(np.unique(srv[np.asarray(g, dtype=np.int64)]).size == 1 for g in groups)
        if self.progress is not None:
            self.progress(len(self.calls), f"{kind} on {len(groups):,} group(s) of "
                          f"{len(groups[0])}")
        first = build(groups[0])
        alone = self._backend().run(first, fab)
        met = not inside and len(groups) > 1
        run = _Run(build, list(groups), inside, met, key, fixed_s)
        res, whole, sched, keep, comps, link_bytes = self._together(run, fab, alone)
        run.whole, run.link_bytes = whole, link_bytes
        t = float(res.time) + fixed_s
        kind_l, name_l = _limit(res)
        self._parts.append(run)
        self.calls.append(FabricCall(
            kind=kind, groups=len(groups), group_size=len(groups[0]), nbytes=nbytes,
            transfers=_flows(whole), simulated=_flows(sched), components=comps,
            distinct=len(keep),
            time_s=t, alone_s=float(alone.time) + fixed_s, limited_by=kind_l,
            limited_link=name_l, siblings_met=met, wall_s=_time.perf_counter() - wall0,
            part=self._part))
        return t

    def _together(self, run: _Run, fab: Fabric, alone: Result | None = None
                  ) -> tuple[Result, Schedule, Schedule, list[int], int, FloatArray]:
        """Every group of ``run`` at once on ``fab``: the result, the groups' schedules
        fused, the schedule run (exact copies left out), the groups kept, the components
        and the bytes every link carries (all groups, copies included)."""
        every = [run.build(g) for g in run.groups] if run.met else [run.build(run.groups[0])]
        whole = side_by_side(every)  # every group's, fused: the part as it runs
        if run.met:
            keep, comps, link_bytes = self._distinct(every, whole, fab)
        else:
            keep, comps, link_bytes = [0], 1, np.zeros(0)
        sched = whole if len(keep) == len(every) else side_by_side([every[i] for i in keep])
        res = alone if (keep == [0] and alone is not None) else self._backend().run(sched, fab)
        if not run.met or len(keep) == len(every):  # the run covered every group
            link_bytes = np.asarray(res.link_bytes, dtype=np.float64)
        return res, whole, sched, keep, comps, link_bytes

    def overlap(self, step_time_s: float, comm_total_s: dict[str, float]) -> dict[str, Any]:
        """Every network part of a step timed again with the others on the fabric in the
        mean: part ``K`` keeps link ``l`` busy a share ``u_K(l)`` of the step (the bytes its
        runs put on ``l`` per second of their own time, times the share of the step its
        traffic is on the wire: ``comm_total_s[K]`` of the step's ``step_time_s``, over
        the link's capacity), and a part of another kind gets, on average, the capacity
        divided by ``1 + Σ u_K(l)`` (max-min sharing while they coincide, weighted by how
        often they do: the fluid model :mod:`fabricsim.workloads.cluster` applies to
        jobs, here to the parts of one job). Each part is run again, every group at once,
        on those capacities; its cached time becomes that time, so the step model asked
        again (same object) gives the step with its parts overlapping. Parts inside
        servers (an NVSwitch meets no other part) keep their time.

        Returns the runs' slowdowns by part and the links that lost the most capacity.

        >>> import fabricsim as fs
        >>> comm = WholeFabricComm(fs.build_cluster("pcie-8gpu", nodes=2))
        >>> comm.part("dp"); _ = comm.time_all("all_reduce", [[0, 8]], 2**26)
        >>> comm.part("pp"); _ = comm.time_all("sendrecv", [[1, 9]], 2**26)
        >>> out = comm.overlap(1.0, {"dp": 0.5, "pp": 0.5})
        >>> [(p["part"], p["slowdown"] > 1) for p in out["parts"]]
        [('dp', True), ('pp', True)]
        """
        net = [(i, c, r) for i, (c, r) in enumerate(zip(self.calls, self._parts,
                                                        strict=True))
               if not r.inside and c.part]
        out: dict[str, Any] = {"parts": [], "method": "mean field (fluid, time-averaged)"}
        if step_time_s <= 0 or len({c.part for _, c, _ in net}) < 2:
            return out
        fab = self.fabric
        cap = np.asarray(fab.link_capacity, dtype=np.float64)
        load: dict[str, FloatArray] = {}
        for kind in sorted({c.part for _, c, _ in net}):
            mine = [(c, r) for _, c, r in net if c.part == kind]
            busy = sum(c.time_s - r.fixed_s for c, r in mine)
            if busy <= 0:
                continue
            every_call = sum(c.time_s for c in self.calls if c.part == kind)
            active = min(1.0, comm_total_s.get(kind, 0.0) * busy / max(every_call, 1e-300)
                         / step_time_s)
            rate = sum(r.link_bytes for _, r in mine) / busy
            load[kind] = rate * active / np.maximum(cap, 1e-300)
        worst: dict[int, float] = {}
        for i, c, r in net:
            others = [u for k, u in load.items() if k != c.part]
            if not others:
                continue
            bg = np.sum(others, axis=0)
            fab2 = replace(fab, link_capacity=cap / (1.0 + bg))
            res = self._together(r, fab2)[0]
            t = float(res.time) + r.fixed_s
            self._cache[r.key] = t
            self.calls[i] = replace(c, overlapped_s=t)
            for link in np.flatnonzero(bg > 0.05):
                worst[int(link)] = max(worst.get(int(link), 0.0), float(bg[link]))
            out["parts"].append({"kind": c.kind, "part": c.part, "groups": c.groups,
                                 "time_s": c.time_s, "overlapped_s": t,
                                 "slowdown": t / c.time_s if c.time_s > 0 else 1.0})
        top = sorted(worst.items(), key=lambda kv: -kv[1])[:5]
        out["busiest_shared_links"] = [{"link": fab.link_name(k), "others_load": round(v, 4)}
                                       for k, v in top]
        return out

    def all_at_once(self) -> dict[str, Any]:
        """Every part run so far, with every sibling group, started together in one flow
        run: how much slower each part's transfers finish than in its own whole-fabric
        run. A bound: the step model overlaps fewer parts than all (the DP reduce-scatter
        under the backward's all-to-alls and sends; TP on its own), and here all start at
        the same instant. Each part keeps every group (no copies are left out: parts
        share GPUs, so their groups meet); where that cannot fit in memory the run is
        refused and ``refused`` says why.

        >>> import fabricsim as fs
        >>> comm = WholeFabricComm(fs.build_cluster("pcie-8gpu", nodes=2))
        >>> _ = comm.time_all("all_reduce", [[0, 8]], 2**26)  # GPUs 0 and 1 share a NIC
        >>> _ = comm.time_all("reduce_scatter", [[1, 9]], 2**26)
        >>> both = comm.all_at_once()
        >>> [(p["kind"], round(p["slowdown"], 2)) for p in both["parts"]], both["refused"]
        ([('all_reduce', 1.5), ('reduce_scatter', 2.0)], None)

        Max-min sharing is not monotone: a part can also finish sooner beside another.
        """
        parts = [(c, r.whole) for c, r in zip(self.calls, self._parts, strict=True)
                 if not r.inside and r.whole is not None]
        out: dict[str, Any] = {"parts": [], "refused": None, "flows": 0}
        if len(parts) < 2:
            return out
        be0 = self._backend()
        merged = merge_parallel([p[1] for p in parts], collective="step",
                                algorithm="all parts at once")
        out["flows"] = _flows(merged)
        if out["flows"] > self.max_flows_at_once:
            out["refused"] = (f"{out['flows']:,} flows, more than the {self.max_flows_at_once:,} "
                              f"this runs at once (every group of every part, none left out "
                              f"as a copy); each part's own run is above")
            return out
        try:
            self._fits(merged, "every part at once", ["each part's own run (above)"])
        except ConfigError as e:
            out["refused"] = e.message
            return out
        wall0 = _time.perf_counter()
        # every part as pure transfers (no protocol's efficiency, ramp or launch: those
        # depend on each part's own message), alone and together: the ratio is the
        # fabric's sharing alone
        be = replace(be0, protocol="ideal")
        try:
            res = be.run(merged, self.fabric)
            alone = [float(np.max(be.run(sched, self.fabric).step_end, initial=0.0))
                     for _c, sched in parts]
        except ConfigError as e:
            out["refused"] = e.message
            return out
        off = 0
        for (call, sched), raw in zip(parts, alone, strict=True):
            n = len(sched.steps)
            end = float(np.max(res.step_end[off:off + n], initial=0.0))
            off += n
            out["parts"].append({"kind": call.kind, "groups": call.groups,
                                 "group_size": call.group_size,
                                 "slowdown": end / raw if raw > 0 else 1.0})
        out["wall_s"] = _time.perf_counter() - wall0
        return out

    def _fits(self, sched: Schedule, what: str, shrink: list[str]) -> None:
        """Refuse (ConfigError, field ``--whole-fabric``) routing ``sched`` whole where
        its flows would not fit in :attr:`memory_limit_bytes` or the memory free."""
        from fabricsim.backends.flow import FlowBackend
        from fabricsim.backends.flow.memory import estimate
        from fabricsim.backends.memory import check_fits

        fab = self.fabric
        routing = FlowBackend(seed=self.seed).routing_for(fab)
        need = estimate(sched, fab, routing, fab.info.qps, seed=self.seed)
        check_fits(need.bytes, f"{what} ({need.jobs:,} flows over {need.entries:,} link "
                   f"entries)", shrink, limit=self.memory_limit_bytes, field="--whole-fabric")

    def _distinct(self, scheds: list[Schedule], whole: Schedule, fab: Fabric
                  ) -> tuple[list[int], int, FloatArray]:
        """The groups that must be simulated, how many link-disjoint components the
        groups form, and the bytes every link carries (every group's, every repetition;
        a flow's share of its job where routing splits it: sprayed paths by their
        fraction, adaptive paths evenly). Groups that share a link (any step) are one
        component and are all kept; a group alone in its component is kept unless an
        earlier one poses the same problem: the same steps and sizes over links of the
        same capacities and latencies in the same pattern (its link ids renamed in order
        of first use). Components share
        no link, so max-min fairness solves each on its own, and a copy finishes each
        step exactly when its original does: dropping it changes no time. ``whole``: the
        groups' schedules fused (:func:`side_by_side`), as the memory check routes it.
        """
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        from fabricsim.backends.flow.routing import expand, stripe_planes

        be = self._backend()
        routing = be.routing_for(fab)
        qps = fab.info.qps
        n_g, n_links = len(scheds), int(fab.n_links)
        if any(len(s.steps) != len(scheds[0].steps) for s in scheds):
            # not alike: run them all, side by side (that run counts their bytes)
            return list(range(n_g)), 1, np.zeros(n_links)
        # every group is routed at once below: refused up front where that cannot fit
        self._fits(whole, "routing every group of this part",
                   ["drop --whole-fabric (each group alone, by shape)",
                    "a smaller cluster (--nodes)"])
        pairs_g: list[np.ndarray] = []
        pairs_l: list[np.ndarray] = []
        # per group, per step: entry links; sizes, coefficients and weights; the counts
        # (step, jobs, flows, entries), flows per job, entries per flow, routability:
        # gathered for the signature
        parts: list[list[np.ndarray]] = [[] for _ in range(n_g)]
        cap = np.asarray(fab.link_capacity, dtype=np.float64)
        lat = np.asarray(fab.link_latency, dtype=np.float64)
        link_bytes = np.zeros(n_links, dtype=np.float64)
        for k in range(len(scheds[0].steps)):
            steps = [s.steps[k] for s in scheds]
            counts = np.array([st.n for st in steps], dtype=np.int64)
            if counts.sum() == 0:
                continue
            src = np.concatenate([st.src for st in steps])
            dst = np.concatenate([st.dst for st in steps])
            nb = np.concatenate([st.nbytes for st in steps])
            hashes = None if any(st.hashes is None for st in steps) else np.concatenate(
                [st.hashes for st in steps if st.hashes is not None])
            ex = stripe_planes(fab, expand(fab, src, dst, nb, hashes=hashes, mode=routing,
                                           qps=qps, seed=be.seed, channel=steps[0].channel))
            f_job = np.repeat(np.arange(ex.n_jobs), np.diff(ex.job_fptr))
            share = ex.coef if ex.frac is None else ex.frac
            e_job = np.repeat(f_job, np.diff(ex.flow_ptr))
            if routing == "adaptive":  # paths feed their job together: split evenly
                share = share / np.diff(ex.job_fptr)[e_job]
            link_bytes += np.bincount(ex.links, weights=ex.size[e_job] * share,
                                      minlength=n_links) * steps[0].repeat
            t_group = np.repeat(np.arange(n_g, dtype=np.int64), counts)
            j_group = t_group[ex.tag]
            f_per_j = np.diff(ex.job_fptr)
            e_per_f = np.diff(ex.flow_ptr)
            f_job = np.repeat(np.arange(ex.n_jobs), f_per_j)
            e_group = np.repeat(j_group[f_job], e_per_f)
            pairs_g.append(e_group)
            pairs_l.append(ex.links)
            # jobs of one group are contiguous (tags ascend), so are their flows, entries
            j_cut = np.searchsorted(j_group, np.arange(n_g + 1))
            f_cut = ex.job_fptr[j_cut]
            e_cut = ex.flow_ptr[f_cut]
            for g in range(n_g):
                j0, j1 = j_cut[g], j_cut[g + 1]
                f0, f1 = f_cut[g], f_cut[g + 1]
                e0, e1 = e_cut[g], e_cut[g + 1]
                parts[g].append(np.asarray(ex.links[e0:e1]))
                # (a job's path latency is the links' own, in the links' pattern: the
                # routed sum carries rounding from its place in the step)
                parts[g].append(np.concatenate([ex.size[j0:j1], ex.coef[e0:e1],
                                                ex.weight[f0:f1]]))
                parts[g].append(np.concatenate([[k, j1 - j0, f1 - f0, e1 - e0],
                                                f_per_j[j0:j1], e_per_f[f0:f1],
                                                ex.routable[j0:j1].astype(np.int64)]))
        eg = np.concatenate(pairs_g) if pairs_g else np.zeros(0, np.int64)
        el = np.concatenate(pairs_l) if pairs_l else np.zeros(0, np.int64)
        adj = coo_matrix((np.ones(eg.shape[0], dtype=np.int8), (eg, n_g + el)),
                         shape=(n_g + n_links, n_g + n_links)).tocsr()
        _, label = connected_components(adj, directed=False)
        comp = label[:n_g]
        sizes = np.bincount(comp)
        keep: list[int] = []
        seen: dict[bytes, int] = {}
        for g in range(n_g):
            if sizes[comp[g]] > 1:
                keep.append(g)
                continue
            links = np.concatenate(parts[g][0::3]) if parts[g] else np.zeros(0, np.int64)
            _, first, inv = np.unique(links, return_index=True, return_inverse=True)
            order = np.argsort(np.argsort(first))  # rank of each link's first use
            sig = b"".join([order[inv].astype(np.int64).tobytes(),
                            cap[links[np.sort(first)]].tobytes(),
                            lat[links[np.sort(first)]].tobytes(),
                            *(x.tobytes() for x in parts[g][1::3]),
                            *(x.tobytes() for x in parts[g][2::3])])
            if sig not in seen:
                seen[sig] = g
                keep.append(g)
        return keep, int(np.unique(comp).size), link_bytes


@dataclass
class _Run:
    """What it takes to run one part again: its schedule builder and groups, whether its
    groups stay inside servers or meet, its cache key and fixed cost; after the first run
    its groups' schedules fused and the bytes every link carries."""

    build: Callable[[Sequence[int]], Schedule]
    groups: list[Sequence[int]]
    inside: bool
    met: bool
    key: tuple[Any, ...]
    fixed_s: float
    whole: Schedule | None = None
    link_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))


def disjoint(groups: Sequence[Sequence[int]]) -> list[Sequence[int]]:
    """The groups that run at one moment: the first, then each that shares no rank with
    one kept. A rank takes part in one exchange at a time: a pipeline stage's send to the
    next stage and its neighbour's to the stage after alternate (Megatron pairs each
    stage with one neighbour per exchange), so the sibling sends of a middle stage are
    not run together. Data-, tensor- and expert-parallel siblings are disjoint already.

    >>> disjoint([[0, 8], [8, 16], [16, 24], [1, 9]])
    [[0, 8], [16, 24], [1, 9]]
    """
    seen: set[int] = set()
    out: list[Sequence[int]] = []
    for g in groups:
        if seen.isdisjoint(g):
            out.append(g)
            seen.update(g)
    return out


def _groups_key(groups: Sequence[Sequence[int]]) -> tuple[int, int, int]:
    flat = np.asarray([r for g in groups for r in g], dtype=np.int64)
    return len(groups), len(groups[0]), hash(flat.tobytes())


def _flows(sched: Schedule) -> int:
    """Transfers a schedule holds, every repetition counted."""
    return int(sum(int(s.n) * int(s.repeat) for s in sched.steps))


def _limit(res: Result) -> tuple[str, str]:
    """(kind, name) of the link that bounded a flow run longest; empty when none."""
    tops = res.extra.get("bottlenecks") or []
    if not tops:
        return res.bottleneck_kind, ""
    return str(tops[0]["kind"]), str(tops[0]["name"])
