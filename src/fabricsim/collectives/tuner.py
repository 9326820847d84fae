"""Algorithm and protocol selection by least predicted time, as NCCL's tuner does.

For a collective on a group, every registered algorithm that implements it and applies to
the group is compiled once per protocol it supports (at a reference size) by the analytic
backend; the compiled model then gives the time of any size in microseconds, so selection
over a size sweep costs one compile per (algorithm, protocol). Compiled models are cached
per fabric (weakly) and per (collective, ranks, algorithm, protocol, channels).

Selection is an exact branch and bound: a candidate is compiled only if a lower bound on
its time (:mod:`fabricsim.backends.analytic_bound`: latencies, then capacities, then a
routed sample of its network transfers) does not exceed the best time already found for
that size, so the answer equals the exhaustive scan's (``BRANCH_AND_BOUND = False``) while
hopeless candidates (a 2(n-1)-step ring on 100k GPUs) are never routed.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 1)
>>> small = choose(fab, "all_reduce", 1024)
>>> big = choose(fab, "all_reduce", 2**30)
>>> small.time < 50e-6 < big.time, big.algorithm
(True, 'nvls')
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from fabricsim.collectives.busbw import COLLECTIVES
from fabricsim.collectives.protocols import PROTOCOL_LABELS, get_protocol
from fabricsim.collectives.registry import ALGORITHMS, Algorithm, Group, get_algorithm
from fabricsim.errors import ConfigError, ScheduleError, unknown
from fabricsim.fabric.core import Fabric
from fabricsim.schedule.core import Schedule

if TYPE_CHECKING:
    from fabricsim.backends.analytic import AnalyticBackend, CompiledSchedule
    from fabricsim.backends.analytic_bound import BoundModel

#: Size at which models are compiled (any size works: byte counts scale linearly).
REFERENCE_BYTES = float(2**20)

_MODELS: weakref.WeakKeyDictionary[Fabric, dict[tuple[object, ...], CompiledSchedule]] = \
    weakref.WeakKeyDictionary()
_BOUNDS: weakref.WeakKeyDictionary[Fabric, dict[tuple[object, ...], BoundModel]] = \
    weakref.WeakKeyDictionary()
_SCHEDS: weakref.WeakKeyDictionary[Fabric, dict[tuple[object, ...], Schedule]] = \
    weakref.WeakKeyDictionary()
_BACKENDS: list[AnalyticBackend] = []
#: Relative margin by which a lower bound must exceed the best time to skip a candidate
#: (guards against rounding; the bounds themselves are exact inequalities).
PRUNE_MARGIN = 1e-9
#: Skip candidates by their lower bound (exact); ``False`` compiles every candidate.
BRANCH_AND_BOUND = True
#: ``bounds_hold`` is cleared if a bound is ever found above a compiled time (selection
#: then scans every candidate).
_STATE = {"bounds_hold": True}


def _backend() -> AnalyticBackend:
    """The shared analytic backend (imported lazily: backends.analytic imports protocols)."""
    if not _BACKENDS:
        from fabricsim.backends.analytic import AnalyticBackend

        _BACKENDS.append(AnalyticBackend())
    return _BACKENDS[0]


@dataclass(frozen=True)
class Choice:
    """An (algorithm, protocol) pair and its predicted time in seconds."""

    algorithm: str
    protocol: str
    time: float


def check_collective(collective: str) -> str:
    """Normalise and validate a collective name (``allreduce`` -> ``all_reduce``)."""
    key = collective.lower().replace("-", "_")
    aliases = {"allreduce": "all_reduce", "allgather": "all_gather",
               "reducescatter": "reduce_scatter", "all_to_all": "alltoall",
               "send_recv": "sendrecv"}
    key = aliases.get(key, key)
    if key not in COLLECTIVES:
        raise unknown("collective", collective, COLLECTIVES, field="collective")
    return key


def check_nbytes(nbytes: float) -> float:
    """Validate a message size in bytes."""
    try:
        v = float(nbytes)
    except (TypeError, ValueError):
        raise ConfigError(f"message size must be a number of bytes, got {nbytes!r}",
                          field="nbytes") from None
    if not np.isfinite(v) or v < 0:
        raise ConfigError(f"message size must be >= 0 bytes, got {nbytes!r}", field="nbytes")
    return v


def default_channels(group: Group) -> int:
    """Channels: across servers one per rank of a server, so that every rail's NIC carries
    a ring as with NCCL's channels; one inside a server (NVLink traffic to a peer is
    striped over all NVSwitch planes by the backend, as by the hardware)."""
    if group.servers > 1 and group.per_server:
        return group.per_server
    return 1


def candidates(group: Group, collective: str, algo: str | None = None,
               proto: str | None = None) -> list[tuple[Algorithm, str]]:
    """The (algorithm, protocol) pairs to consider; clear errors for forced bad choices."""
    if algo is not None:
        a = get_algorithm(algo)
        why = a.why_not(group, collective)
        if why:
            raise ScheduleError(why, field="algo")
        algos = [a]
    else:
        algos = [a for a in ALGORITHMS.values()
                 if a.auto and group.servers >= a.auto_min_servers
                 and a.why_not(group, collective) is None]
        if not algos:
            raise ScheduleError(f"no algorithm implements {collective} on this group",
                                field="algo")
    if proto is not None:
        p = get_protocol(proto).name
        ok = [(a, p) for a in algos if p in a.protocols or p == "ideal"]
        if not ok:
            raise ScheduleError(f"{algos[0].name} does not run protocol "
                                f"{PROTOCOL_LABELS.get(p, p)}; it supports "
                                f"{', '.join(PROTOCOL_LABELS[x] for x in algos[0].protocols)}",
                                field="proto")
        return ok
    return [(a, p) for a in algos for p in a.protocols]


def build(group: Group, collective: str, nbytes: float, algo: Algorithm, proto: str,
          channels: int | None = None) -> Schedule:
    """Compile ``algo`` into a Schedule (no selection)."""
    ch = channels if channels is not None else default_channels(group)
    if ch < 1:
        raise ConfigError(f"channels must be >= 1, got {ch}", field="channels")
    steps = algo.build(group, collective, nbytes, ch)
    return Schedule(steps=tuple(steps), collective=collective, algorithm=algo.name,
                    protocol=proto, nbytes=int(nbytes), ranks=group.ranks,
                    meta={"channels": ch, "group_size": group.n})


_RKEYS: weakref.WeakKeyDictionary[Group, bytes] = weakref.WeakKeyDictionary()


def _ranks_key(group: Group) -> bytes:
    hit = _RKEYS.get(group)
    if hit is None:
        hit = _RKEYS[group] = hashlib.blake2b(group.ranks.tobytes(), digest_size=16).digest()
    return hit


def _sched_key(group: Group, collective: str, algo: Algorithm, channels: int | None
               ) -> tuple[object, ...]:
    return (collective, _ranks_key(group), algo.name, channels)


def _schedule(group: Group, collective: str, algo: Algorithm, proto: str,
              channels: int | None) -> Schedule:
    """The reference-size schedule of ``algo`` (kept until its model is compiled)."""
    per = _SCHEDS.setdefault(group.fabric, {})
    key = _sched_key(group, collective, algo, channels)
    hit = per.get(key)
    if hit is None:
        hit = per[key] = build(group, collective, REFERENCE_BYTES, algo, proto, channels)
    return hit


def model(group: Group, collective: str, algo: Algorithm, proto: str,
          channels: int | None = None) -> CompiledSchedule:
    """The cached compiled model of (collective, group, algorithm, protocol).

    On a miss the schedule is built once and compiled for every protocol ``algo`` runs
    (routing is shared between protocols), so the other protocols are then cached too.
    """
    fab = group.fabric
    rk = _ranks_key(group)
    key = (collective, rk, algo.name, proto, channels)
    per = _MODELS.setdefault(fab, {})
    hit = per.get(key)
    if hit is None:
        names = [proto] + [p for p in algo.protocols if p != proto]
        sched = _schedule(group, collective, algo, proto, channels)
        comps = _backend().compile_protocols(sched, fab, [get_protocol(p) for p in names])
        for p, c in zip(names, comps, strict=True):
            per[(collective, rk, algo.name, p, channels)] = c
        _SCHEDS.get(fab, {}).pop(_sched_key(group, collective, algo, channels), None)
        hit = comps[0]
    return hit


def lower_bound(group: Group, collective: str, algo: Algorithm, proto: str,
                channels: int | None = None, level: int = 1) -> BoundModel:
    """A cached lower bound on :func:`model`'s time: ``level`` 0 from latencies only, 1
    adds capacity bounds (no routing), 2 also routes a sample of the network transfers
    (see :mod:`fabricsim.backends.analytic_bound`); all of ``algo``'s protocols at once."""
    from fabricsim.backends.analytic_bound import bound_protocols

    fab = group.fabric
    rk = _ranks_key(group)
    key = (collective, rk, algo.name, proto, channels, level)
    per = _BOUNDS.setdefault(fab, {})
    hit = per.get(key)
    if hit is None:
        names = [proto] + [p for p in algo.protocols if p != proto]
        sched = _schedule(group, collective, algo, proto, channels)
        bounds = bound_protocols(_backend(), sched, fab, [get_protocol(p) for p in names],
                                 level)
        for p, b in zip(names, bounds, strict=True):
            per[(collective, rk, algo.name, p, channels, level)] = b
        hit = bounds[0]
    return hit


_GROUPS: weakref.WeakKeyDictionary[Fabric, dict[bytes, Group]] = weakref.WeakKeyDictionary()
_CANDS: weakref.WeakKeyDictionary[Group, dict[tuple[object, ...], list[tuple[Algorithm, str]]]
                                  ] = weakref.WeakKeyDictionary()


def group_of(fabric: Fabric, ranks: ArrayLike | None) -> Group:
    """The (cached) :class:`Group` of ``ranks`` on ``fabric``."""
    key = b"all" if ranks is None else np.asarray(ranks).tobytes()
    per = _GROUPS.setdefault(fabric, {})
    g = per.get(key)
    if g is None:
        g = Group.of(fabric, ranks)
        if len(per) > 256:
            per.clear()
        per[key] = g
    return g


def choose(fabric: Fabric, collective: str, nbytes: float, ranks: ArrayLike | None = None,
           algo: str | None = None, proto: str | None = None,
           channels: int | None = None) -> Choice:
    """The (algorithm, protocol) with the least predicted time for ``nbytes``."""
    coll = check_collective(collective)
    size = check_nbytes(nbytes)
    group = group_of(fabric, ranks)
    per = _CANDS.setdefault(group, {})
    ckey = (coll, algo, proto)
    cands = per.get(ckey)
    if cands is None:
        cands = per[ckey] = candidates(group, coll, algo, proto)
    factor = size / REFERENCE_BYTES
    if len(cands) == 1 or not BRANCH_AND_BOUND or not _STATE["bounds_hold"]:
        return _scan(group, coll, cands, channels, factor)
    # branch and bound: candidates in order of a lower bound on their time (latencies
    # only: cheap); one whose bound exceeds the best time found is skipped (its time is
    # larger still); before compiling one, a tighter bound (capacities, and a sample of
    # its network transfers routed) gets a second chance to skip it. Ties keep the first
    # candidate in registry order, as a plain scan would.
    models = _MODELS.setdefault(fabric, {})
    rk = _ranks_key(group)
    done: list[int] = []
    todo: list[int] = []
    lbs: list[float] = []
    for i, (a, p) in enumerate(cands):
        hit = models.get((coll, rk, a.name, p, channels))
        (done if hit is not None else todo).append(i)
        lbs.append(hit.time(factor) if hit is not None
                   else lower_bound(group, coll, a, p, channels, level=0).time(factor))
    best: Choice | None = None
    best_i = -1
    # compiled candidates first (their time is known), then the others by their bound
    for i in done + sorted(todo, key=lbs.__getitem__):
        a, p = cands[i]
        lb = lbs[i]
        if best is not None and (coll, rk, a.name, p, channels) not in models:
            if lb * (1.0 - PRUNE_MARGIN) > best.time:
                break
            lb = lower_bound(group, coll, a, p, channels, level=2).time(factor)
            if lb * (1.0 - PRUNE_MARGIN) > best.time:
                continue
        t = model(group, coll, a, p, channels).time(factor)
        if lb * (1.0 - PRUNE_MARGIN) > t:
            # a bound above a compiled time: the model has changed under the bounds
            # (a test fails too); stay correct by scanning every candidate from now on
            _STATE["bounds_hold"] = False
            return _scan(group, coll, cands, channels, factor)
        if best is None or t < best.time or (t == best.time and i < best_i):
            best, best_i = Choice(a.name, p, t), i
    assert best is not None
    return best


def _scan(group: Group, coll: str, cands: list[tuple[Algorithm, str]],
          channels: int | None, factor: float) -> Choice:
    """The exhaustive scan: every candidate compiled, the first of least time wins."""
    best: Choice | None = None
    for a, p in cands:
        t = model(group, coll, a, p, channels).time(factor)
        if best is None or t < best.time:
            best = Choice(a.name, p, t)
    assert best is not None
    return best


def clear_cache() -> None:
    """Forget compiled models (e.g. after changing protocol constants)."""
    _MODELS.clear()
    _BOUNDS.clear()
    _SCHEDS.clear()
    _backend()._cache.clear()
    _backend()._structs.clear()
