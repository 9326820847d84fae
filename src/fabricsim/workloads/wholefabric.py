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

from fabricsim.errors import ConfigError, SimulationError
from fabricsim.fabric import Fabric
from fabricsim.schedule.core import Schedule, merge_parallel

if TYPE_CHECKING:
    from fabricsim.backends.base import Result
    from fabricsim.collectives.ep import EpConfig

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
    from fabricsim.collectives import Group, get_algorithm
    from fabricsim.collectives.tuner import build, default_tuner

    choice = default_tuner(fabric).choose(fabric, collective, nbytes, ranks=list(groups[0]))
    algo = get_algorithm(choice.algorithm)
    scheds = [build(Group.of(fabric, list(g)), collective, nbytes, algo, choice.protocol)
              for g in groups]
    return side_by_side(scheds)


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
        "kernel_bytes_per_s": first.kernel_bytes_per_s, "pipeline": first.pipeline,
        "crossings": first.crossings, "meta": first.meta}

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
    the flows the whole run simulated (every group's, every repetition's);
    ``limited_by``/``limited_link``: the kind and name of the link that bounded the run
    longest (empty when none did);
    ``siblings_met``: false where the groups share no link (inside one server each), so
    one group was run for all.
    """

    kind: str
    groups: int
    group_size: int
    nbytes: float
    transfers: int
    time_s: float
    alone_s: float
    limited_by: str
    limited_link: str
    siblings_met: bool
    wall_s: float

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
    progress: Callable[[int, str], None] | None = None
    step_progress: Callable[[int, int, float, int], None] | None = None
    calls: list[FabricCall] = field(default_factory=list)
    _cache: dict[tuple[Any, ...], float] = field(default_factory=dict, repr=False)
    _deadline: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.precision <= 0.1:
            raise ConfigError(f"give a fraction of a transfer's duration from 0 (exact) to "
                              f"0.1, got {self.precision}", field="--flow-precision")
        if self.time_limit_s is not None:
            self._deadline = _time.perf_counter() + self.time_limit_s

    # --- the CommModel / GroupComm protocol -----------------------------------------
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

        def build(gs: Sequence[Sequence[int]]) -> Schedule:
            return siblings_schedule(self.fabric, collective, gs, float(nbytes))

        t = self._record(collective, groups, float(nbytes), build, 0.0)
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

        def build(gs: Sequence[Sequence[int]]) -> Schedule:
            scheds = []
            for g in gs:
                grp = Group.of(self.fabric, list(g))
                cfg.check(grp.n)
                scheds.append(build_ep_schedule(self.fabric, cfg, phase, kern, grp.ranks))
            return side_by_side(scheds)

        t = self._record(f"ep {phase} ({kern})", groups, float(cfg.tokens), build,
                         KERNEL_OVERHEAD_S.get(kern, 0.0))
        self._cache[key] = t
        return t

    # --- what the runs found ----------------------------------------------------------
    @property
    def flows_simulated(self) -> int:
        """Flows of every run together (every group's, every repetition's)."""
        return sum(c.transfers for c in self.calls)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: flows simulated, the runs (slowest-down first), the worst slowdown
        and the links that limited the parts."""
        calls = sorted(self.calls, key=lambda c: -c.slowdown)
        limits = sorted({c.limited_by for c in self.calls if c.limited_by})
        return {"flows_simulated": self.flows_simulated, "runs": len(self.calls),
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
                build: Callable[[Sequence[Sequence[int]]], Schedule], fixed_s: float
                ) -> float:
        fab = self.fabric
        wall0 = _time.perf_counter()
        srv = np.asarray(fab.node_server)[np.asarray(fab.gpus)]
        inside = all(np.unique(srv[np.asarray(g, dtype=np.int64)]).size == 1 for g in groups)
        if self.progress is not None:
            self.progress(len(self.calls), f"{kind} on {len(groups):,} group(s) of "
                          f"{len(groups[0])}")
        alone_sched = build([groups[0]])
        alone = self._backend().run(alone_sched, fab)
        if inside or len(groups) == 1:
            res, sched = alone, alone_sched
        else:
            sched = build(groups)
            res = self._backend().run(sched, fab)
        t = float(res.time) + fixed_s
        kind_l, name_l = _limit(res)
        self.calls.append(FabricCall(
            kind=kind, groups=len(groups), group_size=len(groups[0]), nbytes=nbytes,
            transfers=_flows(sched), time_s=t, alone_s=float(alone.time) + fixed_s,
            limited_by=kind_l, limited_link=name_l, siblings_met=not inside and len(groups) > 1,
            wall_s=_time.perf_counter() - wall0))
        return t


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
