"""Algorithm and protocol selection: NCCL's own choice, timed by fabricsim's model.

NCCL runs the (algorithm, protocol) its cost model ranks first, not the one that runs
fastest. By default (``select="nccl"``) a :class:`Tuner` makes that choice with NCCL's
model (:mod:`fabricsim.collectives.nccl_model`) wherever every candidate is one of
NCCL's algorithms, and then times it with fabricsim's own; ``select="fastest"`` picks the
least time of fabricsim's model instead (what the fabric could do with the best
algorithm), and so do groups whose candidates NCCL's model cannot rank.

A :class:`Tuner` owns everything selection needs: the protocol model it predicts with
(:data:`~fabricsim.protocols.PROTOCOLS` unless given another, e.g. by
calibration), an analytic backend built on that model, and its caches. For a collective on
a group, every registered algorithm that implements it and applies to the group is compiled
once per protocol it supports (at a reference size) by the analytic backend; the compiled
model then gives the time of any size in microseconds, so selection over a size sweep
costs one compile per (algorithm, protocol). Compiled models are cached per fabric (weakly)
and per (collective, ranks, algorithm, protocol, channels).

NCCL's choice compiles only the candidate chosen. The least-time selection is an exact
branch and bound: a candidate is compiled only if a lower bound on its time
(:mod:`fabricsim.backends.analytic_bound`: latencies, then capacities, then a routed
sample of its network transfers) does not exceed the best time already found for that
size, so the answer equals the exhaustive scan's (``Tuner(prune=False)``) while hopeless
candidates (a 2(n-1)-step ring on 100k GPUs) are never routed.

The module-level :func:`choose` uses the fabric's own default tuner (kept with the fabric,
:meth:`~fabricsim.fabric.Fabric.memo`); pass ``tuner=`` to use another.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 1)
>>> small = choose(fab, "all_reduce", 1024)
>>> big = choose(fab, "all_reduce", 2**30)
>>> small.time < 50e-6 < big.time, big.algorithm
(True, 'nvls')
>>> fastest = Tuner(select="fastest")
>>> fastest.choose(fab, "all_reduce", 2**30).time <= big.time
True
>>> exhaustive = Tuner(select="fastest", prune=False)
>>> exhaustive.choose(fab, "all_reduce", 2**30) == fastest.choose(fab, "all_reduce", 2**30)
True
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from fabricsim.collectives.alltoall import p2p_channels_per_peer, p2p_protocol
from fabricsim.collectives.busbw import COLLECTIVES
from fabricsim.collectives.nccl_model import LL_OVERLAP_NCCL, NcclModel, nccl_release
from fabricsim.collectives.pipeline import nccl_channels
from fabricsim.collectives.registry import ALGORITHMS, Algorithm, Group, get_algorithm
from fabricsim.errors import ConfigError, ScheduleError, unknown
from fabricsim.fabric.core import Fabric
from fabricsim.protocols import IDEAL, PROTOCOL_LABELS, PROTOCOLS, Protocol, serial_ll
from fabricsim.schedule.core import Schedule

if TYPE_CHECKING:
    from fabricsim.backends.analytic import AnalyticBackend, CompiledSchedule
    from fabricsim.backends.analytic_bound import BoundModel

#: Size at which models are compiled (any size works: byte counts scale linearly).
REFERENCE_BYTES = float(2**20)
#: Relative margin by which a lower bound must exceed the best time to skip a candidate
#: (guards against rounding; the bounds themselves are exact inequalities).
PRUNE_MARGIN = 1e-9


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
    """Channels: across servers one per rank of a server and NIC of its GPU, so that every
    NIC carries a ring as with NCCL's channels (aws-p5: 8 GPUs x 4 EFA = 32 channels;
    :func:`~fabricsim.collectives.registry.channel_nic`); one inside a server (NVLink
    traffic to a peer is striped over all NVSwitch planes by the backend, as by the
    hardware)."""
    if group.servers > 1 and group.per_server:
        return group.per_server * max(group.fabric.info.nics_per_gpu, 1)
    return 1


#: How a :class:`Tuner` picks among candidates: ``nccl`` by NCCL's own cost model
#: (:mod:`fabricsim.collectives.nccl_model`) wherever every candidate is one of NCCL's
#: algorithms, the least time of fabricsim's model elsewhere; ``fastest`` always by the
#: least time of fabricsim's model.
SELECTIONS = ("nccl", "fastest")

#: Collectives NCCL runs as point-to-point sends and receives: their protocol is NCCL's
#: size rule (:func:`fabricsim.collectives.alltoall.p2p_protocol`), not a cost model's.
P2P_COLLECTIVES = frozenset({"alltoall", "sendrecv"})


def candidates(group: Group, collective: str, algo: str | None = None,
               proto: str | None = None,
               protocols: Mapping[str, Protocol] = PROTOCOLS) -> list[tuple[Algorithm, str]]:
    """The (algorithm, protocol) pairs to consider; clear errors for forced bad choices."""
    if algo is not None:
        a = get_algorithm(algo)
        why = a.why_not(group, collective)
        if why:
            raise ScheduleError(why, field="algo")
        algos = [a]
    else:
        runtime = "xla" if group.fabric.info.ici_slice else "nccl"
        auto = [a for a in ALGORITHMS.values()
                if a.auto and a.runtime == runtime and group.servers >= a.auto_min_servers
                and (a.auto_max_servers == 0 or group.servers <= a.auto_max_servers)]
        whys = {a.name: a.why_not(group, collective) for a in auto}
        algos = [a for a in auto if whys[a.name] is None]
        if not algos:
            said = [f"{n}: {w}" for n, w in whys.items()
                    if w and "does not implement" not in w]
            raise ScheduleError(f"no algorithm runs {collective} on this group"
                                + (f" ({'; '.join(said)})" if said else ""), field="algo")
    if proto is not None:
        p = protocol_of(proto, protocols).name
        ok = [(a, p) for a in algos if p in a.protocols or p == "ideal"]
        if not ok:
            raise ScheduleError(f"{algos[0].name} does not run protocol "
                                f"{PROTOCOL_LABELS.get(p, p)}; it supports "
                                f"{', '.join(PROTOCOL_LABELS[x] for x in algos[0].protocols)}",
                                field="proto")
        return ok
    forced = group.fabric.info.plugin_proto  # the network plugin's NCCL_PROTO
    return [(a, p) for a in algos for p in a.protocols if not forced or p == forced]


def build(group: Group, collective: str, nbytes: float, algo: Algorithm, proto: str,
          channels: int | None = None, nvls_channels: int | None = None) -> Schedule:
    """Compile ``algo`` into a Schedule (no selection). ``channels``: the model's rings
    across servers (:func:`default_channels` by default); inside one server, where the
    rings stripe every NVSwitch plane whatever their number, NCCL's channels a user
    limited, which cap a ring's spread (:func:`~fabricsim.collectives.pipeline.ring_spread`):
    there ``channels=1`` means NCCL on one channel, and the schedule's ``meta`` keeps
    the rings (``channels``) and the limit (``channel_limit``) apart. ``nvls_channels``:
    the NVLS channels the run sets (``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``:
    :meth:`~fabricsim.collectives.nccl_env.NcclEnv.nvls_channels_of`) where an algorithm's
    rate is bounded per NVLS channel (``Algorithm.nvls_channels``); NCCL's own by
    default."""
    ch = channels if channels is not None else default_channels(group)
    if ch < 1:
        raise ConfigError(f"channels must be >= 1, got {ch}", field="channels")
    # inside one server the rings are the default ones whatever the channels: NCCL's
    # channels there only cap the spread, so every backend (the packet one paces each
    # ring's flows) times the same schedule
    rings = default_channels(group) if group.servers == 1 else ch
    steps = algo.build(group, collective, nbytes, rings)
    rate = algo.kernel_rate(group, rings) if algo.kernel_rate is not None else 0.0
    pipe = algo.pipeline(group, collective) if algo.pipeline is not None else None
    more = algo.pipelines(group, collective) if algo.pipelines is not None else ()
    cross = algo.crossings(group, collective) if algo.crossings is not None else None
    spread = algo.spread(group, collective, channels) if algo.spread is not None else None
    return Schedule(steps=tuple(steps), collective=collective, algorithm=algo.name,
                    protocol=proto, nbytes=int(nbytes), ranks=group.ranks,
                    meta={"channels": rings, "group_size": group.n,
                          **({"channel_limit": ch} if channels is not None
                             and group.servers == 1 else {})},
                    kernel_bytes_per_s=rate,
                    pipeline=pipe, pipelines=more, crossings=cross, spread=spread,
                    hop_scale=algo.hop_scale,
                    fixed_steps=bool(algo.fixed_steps(group, collective))
                    if algo.fixed_steps is not None else False,
                    mnnvl=group.spans_hosts,
                    tree_channels=(channels or nccl_channels(group))
                    if algo.tree_channels and group.servers > 1 else 0,
                    copy_warps=algo.copy_warps(group) if algo.copy_warps is not None else 0,
                    nvls_channels=_nvls_bound_channels(group, algo, nvls_channels))


def _nvls_bound_channels(group: Group, algo: Algorithm, given: int | None) -> int:
    """The NVLS channels whose per-channel rate bounds ``algo`` on ``group`` (0: none):
    NCCL's own (``Algorithm.nvls_channels``), or ``given`` where the run sets them and
    the bound applies."""
    own = algo.nvls_channels(group) if algo.nvls_channels is not None else 0
    return given if own and given is not None else own


def protocol_of(name: str, protocols: Mapping[str, Protocol] = PROTOCOLS) -> Protocol:
    """The protocol called ``name`` in ``protocols`` (case-insensitive; ``ideal`` always)."""
    key = name.lower()
    if key == "ideal":
        return IDEAL
    if key not in protocols:
        raise unknown("protocol", name, [PROTOCOL_LABELS.get(k, k) for k in protocols],
                      field="proto")
    return protocols[key]


def _ranks_key(group: Group) -> bytes:
    return hashlib.blake2b(group.ranks.tobytes(), digest_size=16).digest()


#: Collectives whose operations overlap when issued back to back (a chain from or to a
#: root: no step waits for data to come back).
ROOTED_COLLECTIVES = frozenset({"broadcast", "reduce"})


class Tuner:
    """Selection of (algorithm, protocol), with its own caches.

    ``protocols`` is the protocol model predictions use (default: the calibrated
    :data:`~fabricsim.protocols.PROTOCOLS`); a calibration passes its own
    instead of changing the shared one. ``select`` is :data:`SELECTIONS`' ``nccl`` (NCCL's
    choice, the default) or ``fastest`` (least predicted time). ``backend``: an
    :class:`~fabricsim.backends.analytic.AnalyticBackend` to compile with, shared with
    other tuners so that a schedule's routing is worked out once for all of them (a fit
    trying many protocol constants); default one of its own. ``prune=False`` compiles
    every candidate of a least-time choice (the exhaustive scan the branch and bound is
    checked against).

    Example
    -------
    >>> from fabricsim.fabric import build_cluster
    >>> from fabricsim.protocols import PROTOCOLS
    >>> fab = build_cluster("dgx-a100", 1)
    >>> slow = dict(PROTOCOLS, simple=PROTOCOLS["simple"].scaled(launch=1e-3))
    >>> base = Tuner().choose(fab, "all_reduce", 2**30)
    >>> Tuner(slow).choose(fab, "all_reduce", 2**30).time > base.time
    True
    """

    def __init__(self, protocols: Mapping[str, Protocol] | None = None, *,
                 prune: bool = True, select: str = "nccl",
                 backend: AnalyticBackend | None = None) -> None:
        self.protocols: Mapping[str, Protocol] = MappingProxyType(
            dict(PROTOCOLS if protocols is None else protocols))
        self.prune = prune
        if select not in SELECTIONS:
            raise unknown("selection", select, SELECTIONS, field="select")
        self.select = select
        self._nccl: weakref.WeakKeyDictionary[
            Group, dict[tuple[tuple[int, int, int], bool], NcclModel]] = \
            weakref.WeakKeyDictionary()
        #: cleared if a bound is ever found above a compiled time (selection then scans
        #: every candidate)
        self.bounds_hold = True
        #: an analytic backend given to share its routing with other tuners (it is
        #: handed protocols explicitly, so tuners of different protocols can share it)
        self._given_backend = backend
        self._backend: AnalyticBackend | None = backend
        self._models: weakref.WeakKeyDictionary[
            Fabric, dict[tuple[object, ...], CompiledSchedule]] = weakref.WeakKeyDictionary()
        self._bounds: weakref.WeakKeyDictionary[
            Fabric, dict[tuple[object, ...], BoundModel]] = weakref.WeakKeyDictionary()
        self._scheds: weakref.WeakKeyDictionary[
            Fabric, dict[tuple[object, ...], Schedule]] = weakref.WeakKeyDictionary()
        self._groups: weakref.WeakKeyDictionary[Fabric, dict[bytes, Group]] = \
            weakref.WeakKeyDictionary()
        self._rkeys: weakref.WeakKeyDictionary[Group, bytes] = weakref.WeakKeyDictionary()
        self._cands: weakref.WeakKeyDictionary[
            Group, dict[tuple[object, ...], list[tuple[Algorithm, str]]]] = \
            weakref.WeakKeyDictionary()
        self._p2p_channels: weakref.WeakKeyDictionary[Group, int] = \
            weakref.WeakKeyDictionary()
        #: the tuner of NCCL releases before 2.10.3 (:meth:`serial_ll_tuner`), and
        #: whether this one is it
        self._serial_ll: Tuner | None = None
        self._is_serial_ll = False

    @property
    def backend(self) -> AnalyticBackend:
        """The analytic backend that compiles this tuner's models (on its protocols)."""
        if self._backend is None:
            from fabricsim.backends.analytic import AnalyticBackend

            self._backend = AnalyticBackend(protocols=self.protocols)
        return self._backend

    def protocol(self, name: str) -> Protocol:
        """The protocol called ``name`` in this tuner's model."""
        return protocol_of(name, self.protocols)

    def compiled(self, fabric: Fabric) -> set[str]:
        """Names of the algorithms compiled so far on ``fabric``."""
        return {str(k[2]) for k in self._models.get(fabric, {})}

    def clear(self) -> None:
        """Forget every compiled model, bound and schedule."""
        for cache in (self._models, self._bounds, self._scheds, self._groups, self._rkeys,
                      self._cands, self._p2p_channels, self._nccl):
            cache.clear()
        self._serial_ll = None
        self._backend = self._given_backend
        self.bounds_hold = True

    # ------------------------------------------------------------------ caches
    def _key(self, group: Group) -> bytes:
        hit = self._rkeys.get(group)
        if hit is None:
            hit = self._rkeys[group] = _ranks_key(group)
        return hit

    def _schedule(self, group: Group, collective: str, algo: Algorithm, proto: str,
                  channels: int | None, nvls: int | None = None) -> Schedule:
        """The reference-size schedule of ``algo`` (kept until its model is compiled)."""
        per = self._scheds.setdefault(group.fabric, {})
        key = (collective, self._key(group), algo.name, channels, nvls)
        hit = per.get(key)
        if hit is None:
            hit = per[key] = build(group, collective, REFERENCE_BYTES, algo, proto, channels,
                                   nvls)
        return hit

    def model(self, group: Group, collective: str, algo: Algorithm, proto: str,
              channels: int | None = None, nvls: int | None = None) -> CompiledSchedule:
        """The cached compiled model of (collective, group, algorithm, protocol).

        On a miss the schedule is built once and compiled for every protocol ``algo`` runs
        (routing is shared between protocols), so the other protocols are then cached too.
        """
        fab = group.fabric
        rk = self._key(group)
        per = self._models.setdefault(fab, {})
        hit = per.get((collective, rk, algo.name, proto, channels, nvls))
        if hit is None:
            names = [proto] + [p for p in algo.protocols if p != proto]
            sched = self._schedule(group, collective, algo, proto, channels, nvls)
            comps = self.backend.compile_protocols(sched, fab,
                                                   [self.protocol(p) for p in names])
            for p, c in zip(names, comps, strict=True):
                per[(collective, rk, algo.name, p, channels, nvls)] = c
            self._scheds.get(fab, {}).pop((collective, rk, algo.name, channels, nvls), None)
            hit = comps[0]
        return hit

    def lower_bound(self, group: Group, collective: str, algo: Algorithm, proto: str,
                    channels: int | None = None, level: int = 1,
                    nvls: int | None = None) -> BoundModel:
        """A cached lower bound on :meth:`model`'s time: ``level`` 0 from latencies only,
        1 adds capacity bounds (no routing), 2 also routes a sample of the network
        transfers (see :mod:`fabricsim.backends.analytic_bound`); all of ``algo``'s
        protocols at once."""
        from fabricsim.backends.analytic_bound import bound_protocols

        fab = group.fabric
        rk = self._key(group)
        per = self._bounds.setdefault(fab, {})
        hit = per.get((collective, rk, algo.name, proto, channels, nvls, level))
        if hit is None:
            names = [proto] + [p for p in algo.protocols if p != proto]
            sched = self._schedule(group, collective, algo, proto, channels, nvls)
            bounds = bound_protocols(self.backend, sched, fab,
                                     [self.protocol(p) for p in names], level)
            for p, b in zip(names, bounds, strict=True):
                per[(collective, rk, algo.name, p, channels, nvls, level)] = b
            hit = bounds[0]
        return hit

    def group_of(self, fabric: Fabric, ranks: ArrayLike | None) -> Group:
        """The (cached) :class:`Group` of ``ranks`` on ``fabric``."""
        key = b"all" if ranks is None else np.asarray(ranks).tobytes()
        per = self._groups.setdefault(fabric, {})
        g = per.get(key)
        if g is None:
            g = Group.of(fabric, ranks)
            if len(per) > 256:
                per.clear()
            per[key] = g
        return g

    # ------------------------------------------------------------------ selection
    def choose(self, fabric: Fabric, collective: str, nbytes: float,
               ranks: ArrayLike | None = None, algo: str | None = None,
               proto: str | None = None, channels: int | None = None,
               gpus_per_thread: int = 1, nccl_version: str | None = None,
               plugin_tuner: bool = True, back_to_back: bool = False,
               nvls_channels: int | None = None) -> Choice:
        """The (algorithm, protocol) with the least predicted time for ``nbytes`` (with
        ``select="nccl"``: the one NCCL release ``nccl_version``, default the newest
        modelled, would pick, after the network plugin's own tuner where the fabric's
        plugin has one and ``plugin_tuner`` leaves it on).

        ``gpus_per_thread`` (nccl-tests ``-g``): the time is at least what one thread
        takes to issue the operation on that many GPUs (``Protocol.host_floor``):
        nccl-tests issues its iterations back to back and waits once, so the host's issue
        time and the GPUs' run time overlap, and the slower of the two is what it
        measures. The floor is the same for every candidate: it does not change the
        choice.

        ``back_to_back``: the time per operation of many issued one after another, as
        nccl-tests measures it, not of one alone: the same for every collective but
        the rooted chains (broadcast, reduce), whose operations overlap
        (:meth:`~fabricsim.backends.analytic.CompiledSchedule.period`).

        >>> from fabricsim.fabric import build_cluster
        >>> fab = build_cluster("dgx-a100", 8)
        >>> one = Tuner().choose(fab, "broadcast", 1024)
        >>> many = Tuner().choose(fab, "broadcast", 1024, back_to_back=True)
        >>> bool(many.time < one.time / 4)
        True
        """
        if (not self._is_serial_ll and "ll" in self.protocols
                and nccl_release(nccl_version) < LL_OVERLAP_NCCL):
            return self.serial_ll_tuner().choose(
                fabric, collective, nbytes, ranks, algo, proto, channels, gpus_per_thread,
                nccl_version, plugin_tuner, back_to_back, nvls_channels)
        best = self._choose(fabric, collective, nbytes, ranks, algo, proto, channels,
                            nccl_version, plugin_tuner, nvls_channels)
        coll = check_collective(collective)
        if back_to_back and coll in ROOTED_COLLECTIVES and best.protocol != "ideal":
            best = self._back_to_back(fabric, coll, nbytes, ranks, algo, proto, channels,
                                      best, nvls_channels)
        floor = self.protocol(best.protocol).host_floor(gpus_per_thread, fabric)
        if floor > best.time:
            best = Choice(best.algorithm, best.protocol, floor)
        return best

    def serial_ll_tuner(self) -> Tuner:
        """The tuner that answers for NCCL releases before 2.10.3: this one's protocols
        with LL's NVLink rate as those releases' kernels run it
        (:func:`~fabricsim.protocols.serial_ll`), the same selection and backend; kept
        with this tuner. :meth:`choose` hands such releases to it.

        >>> from fabricsim.fabric import build_cluster
        >>> fab = build_cluster("dgx-a100", 1)
        >>> new = Tuner().choose(fab, "all_reduce", 2**20, proto="ll")
        >>> old = Tuner().choose(fab, "all_reduce", 2**20, proto="ll", nccl_version="2.8.4")
        >>> bool(old.time > new.time * 1.3)
        True
        """
        if self._is_serial_ll:
            return self
        if self._serial_ll is None:
            t = Tuner(serial_ll(self.protocols), prune=self.prune, select=self.select,
                      backend=self._given_backend)
            t._is_serial_ll = True
            self._serial_ll = t
        return self._serial_ll

    def _back_to_back(self, fabric: Fabric, coll: str, nbytes: float,
                      ranks: ArrayLike | None, algo: str | None, proto: str | None,
                      channels: int | None, best: Choice,
                      nvls: int | None = None) -> Choice:
        """``best`` (a rooted chain's pick) timed per operation back to back; with
        ``select="fastest"``, the allowed pair that is fastest so (a pair's period can
        rank otherwise than its single operation: Simple's fill, which a lone operation
        pays, is paid once)."""
        group = self.group_of(fabric, ranks)
        factor = check_nbytes(nbytes) / REFERENCE_BYTES

        def timed(a: Algorithm, p: str) -> Choice:
            m = self.model(group, coll, a, p, channels, nvls)
            return Choice(a.name, p, m.back_to_back(factor))

        if self.select != "fastest":
            return timed(get_algorithm(best.algorithm), best.protocol)
        return min((timed(a, p) for a, p in candidates(group, coll, algo, proto,
                                                        self.protocols)),
                   key=lambda c: c.time)

    def choose_among(self, fabric: Fabric, collective: str, nbytes: float,
                     ranks: ArrayLike | None, algos: Sequence[str | None],
                     protos: Sequence[str | None], channels: int | None = None,
                     gpus_per_thread: int = 1, nccl_version: str | None = None,
                     plugin_tuner: bool = True, back_to_back: bool = False,
                     nvls_channels: int | None = None) -> Choice:
        """The pair NCCL runs when its environment allows ``algos`` × ``protos``
        (``None`` in either: any): every allowed pair is timed, and NCCL's cost model
        ranks them (with ``select="fastest"``, or pairs NCCL does not have, the least
        time wins). What ``bench`` does under ``NCCL_ALGO``/``NCCL_PROTO``/
        ``NCCL_NVLS_ENABLE``.

        >>> from fabricsim.fabric import build_cluster
        >>> fab = build_cluster("dgx-h100", 2)
        >>> Tuner().choose_among(fab, "all_reduce", 2**33, None, ["ring", "tree"],
        ...                      [None]).algorithm
        'ring'
        """
        best: Choice | None = None
        why = ScheduleError("nothing tried")
        tried = []
        for a in algos:
            for p in protos:
                try:
                    c = self.choose(fabric, collective, nbytes, ranks, a, p, channels,
                                    gpus_per_thread=gpus_per_thread,
                                    nccl_version=nccl_version, plugin_tuner=plugin_tuner,
                                    back_to_back=back_to_back, nvls_channels=nvls_channels)
                except ScheduleError as e:
                    why = e
                    continue
                tried.append(c)
                if best is None or c.time < best.time:
                    best = c
        if len(tried) > 1 and self.select == "nccl":  # NCCL ranks what it may run
            pick = self.nccl_pick(fabric, collective, nbytes, ranks,
                                  [(c.algorithm, c.protocol) for c in tried], nccl_version,
                                  plugin_tuner)
            if pick is not None:
                best = tried[pick]
        if best is None:
            if list(algos) == [None] and list(protos) == [None]:
                raise why
            raise ConfigError(f"no allowed algorithm/protocol runs {collective} here: "
                              f"{why.message}", field="NCCL_ALGO") from why
        return best

    def _choose(self, fabric: Fabric, collective: str, nbytes: float,
                ranks: ArrayLike | None, algo: str | None, proto: str | None,
                channels: int | None, nccl_version: str | None = None,
                plugin_tuner: bool = True, nvls: int | None = None) -> Choice:
        coll = check_collective(collective)
        size = check_nbytes(nbytes)
        group = self.group_of(fabric, ranks)
        if proto is None and coll in P2P_COLLECTIVES and not fabric.info.ici_slice:
            # NCCL picks it by size (XLA on a TPU slice has no such protocols)
            ch = self._p2p_channels.get(group)
            if ch is None:
                ch = self._p2p_channels[group] = p2p_channels_per_peer(group)
            proto = p2p_protocol(group, coll, size, ch)
        per = self._cands.setdefault(group, {})
        ckey = (coll, algo, proto)
        cands = per.get(ckey)
        if cands is None:
            cands = per[ckey] = candidates(group, coll, algo, proto, self.protocols)
        factor = size / REFERENCE_BYTES
        if self.select == "nccl" and len(cands) > 1 and coll not in P2P_COLLECTIVES:
            pick = self._nccl_model(group, nccl_version, plugin_tuner).best(
                coll, size, [(a.name, p) for a, p in cands])
            if pick is not None:
                a = next(a for a, p in cands if (a.name, p) == pick)
                t = self.model(group, coll, a, pick[1], channels, nvls).time(factor)
                return Choice(pick[0], pick[1], t)
        if len(cands) == 1 or not self.prune or not self.bounds_hold:
            return self._scan(group, coll, cands, channels, factor, nvls)
        # branch and bound: candidates in order of a lower bound on their time (latencies
        # only: cheap); one whose bound exceeds the best time found is skipped (its time is
        # larger still); before compiling one, a tighter bound (capacities, and a sample of
        # its network transfers routed) gets a second chance to skip it. Ties keep the
        # first candidate in registry order, as a plain scan would.
        models = self._models.setdefault(fabric, {})
        rk = self._key(group)
        done: list[int] = []
        todo: list[int] = []
        lbs: list[float] = []
        for i, (a, p) in enumerate(cands):
            hit = models.get((coll, rk, a.name, p, channels, nvls))
            (done if hit is not None else todo).append(i)
            lbs.append(hit.time(factor) if hit is not None
                       else self.lower_bound(group, coll, a, p, channels, 0, nvls).time(factor))
        best: Choice | None = None
        best_i = -1
        # compiled candidates first (their time is known), then the others by their bound
        for i in done + sorted(todo, key=lbs.__getitem__):
            a, p = cands[i]
            lb = lbs[i]
            if best is not None and (coll, rk, a.name, p, channels, nvls) not in models:
                if lb * (1.0 - PRUNE_MARGIN) > best.time:
                    break
                lb = self.lower_bound(group, coll, a, p, channels, 2, nvls).time(factor)
                if lb * (1.0 - PRUNE_MARGIN) > best.time:
                    continue
            t = self.model(group, coll, a, p, channels, nvls).time(factor)
            if lb * (1.0 - PRUNE_MARGIN) > t:
                # a bound above a compiled time: the model has changed under the bounds
                # (a test fails too); stay correct by scanning every candidate from now on
                self.bounds_hold = False
                return self._scan(group, coll, cands, channels, factor, nvls)
            if best is None or t < best.time or (t == best.time and i < best_i):
                best, best_i = Choice(a.name, p, t), i
        assert best is not None
        return best

    def _nccl_model(self, group: Group, nccl_version: str | None = None,
                    plugin_tuner: bool = True) -> NcclModel:
        """NCCL's cost model of ``group`` as release ``nccl_version`` has it, with the
        network plugin's tuner or without (cached with the group)."""
        version = nccl_release(nccl_version)
        per = self._nccl.setdefault(group, {})
        m = per.get((version, plugin_tuner))
        if m is None:
            m = per[(version, plugin_tuner)] = NcclModel.of(group, version, plugin_tuner)
        return m

    def nccl_pick(self, fabric: Fabric, collective: str, nbytes: float,
                  ranks: ArrayLike | None, pairs: list[tuple[str, str]],
                  nccl_version: str | None = None, plugin_tuner: bool = True) -> int | None:
        """Index of the (algorithm, protocol) of ``pairs`` NCCL's cost model ranks first
        for ``nbytes`` (what NCCL does when its environment allows several); pairs NCCL
        does not have are left out, and ``None`` says none of them is NCCL's."""
        m = self._nccl_model(self.group_of(fabric, ranks), nccl_version, plugin_tuner)
        ours = [x for x in pairs if m.nccl_algo(x[0]) is not None]  # what NCCL can run
        pick = m.best(check_collective(collective), check_nbytes(nbytes), ours) if ours \
            else None
        return None if pick is None else pairs.index(pick)

    def _scan(self, group: Group, coll: str, cands: list[tuple[Algorithm, str]],
              channels: int | None, factor: float, nvls: int | None = None) -> Choice:
        """The exhaustive scan: every candidate compiled, the first of least time wins."""
        best: Choice | None = None
        for a, p in cands:
            t = self.model(group, coll, a, p, channels, nvls).time(factor)
            if best is None or t < best.time:
                best = Choice(a.name, p, t)
        assert best is not None
        return best


def _tuner_key(select: str) -> str:
    """The key a fabric keeps its default tuner for ``select`` under."""
    return "collectives.tuner" if select == "nccl" else f"collectives.tuner.{select}"


def default_tuner(fabric: Fabric, select: str = "nccl") -> Tuner:
    """The tuner kept with ``fabric`` for ``select`` (the calibrated protocol model; NCCL's
    choice by default, see :data:`SELECTIONS`)."""
    if select not in SELECTIONS:
        raise unknown("selection", select, SELECTIONS, field="select")
    return fabric.memo(_tuner_key(select), lambda: Tuner(select=select))


def choose(fabric: Fabric, collective: str, nbytes: float, ranks: ArrayLike | None = None,
           algo: str | None = None, proto: str | None = None,
           channels: int | None = None, tuner: Tuner | None = None,
           gpus_per_thread: int = 1, nccl_version: str | None = None,
           back_to_back: bool = False, nvls_channels: int | None = None) -> Choice:
    """The (algorithm, protocol) with the least predicted time for ``nbytes``
    (by ``tuner``, default the fabric's own; see :meth:`Tuner.choose`)."""
    return (tuner or default_tuner(fabric)).choose(fabric, collective, nbytes, ranks, algo,
                                                   proto, channels, gpus_per_thread,
                                                   nccl_version, back_to_back=back_to_back,
                                                   nvls_channels=nvls_channels)


def clear_cache(fabric: Fabric) -> None:
    """Forget ``fabric``'s default tuners and everything they compiled."""
    for select in SELECTIONS:
        fabric.forget(_tuner_key(select))
