"""The analytic backend: a closed-form time for every step of a Schedule.

Per repetition of a step, each transfer takes ``α + β``: ``α`` is its path latency (the sum
of ``fabric.link_latency``, which already holds switch and NIC latency) plus the protocol's
per-hop overhead for the dearest link class the path crosses; ``β`` is, over every link of
its path, the bytes the step puts on that link divided by the link's usable rate
(``capacity × protocol efficiency``) — so a link shared by several transfers of the step
(oversubscription, a rail crossing, a PCIe switch or NIC shared by two GPUs) slows all of
them. A step lasts as long as its slowest transfer. Steps that share dependencies, repeat
count and delay run concurrently (NCCL channels) and are solved together; the DAG then
gives start and end times. The protocol's launch overhead is added once.

The per-link load pattern does not depend on the message size: it is cached per fabric and
per step pattern, so a sweep of sizes routes each pattern once; :meth:`compile` returns a
model whose :meth:`CompiledSchedule.time` evaluates any size scale in microseconds.

Example
-------
>>> import numpy as np
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.schedule import Schedule, Step
>>> fab = build_cluster("dgx-h100", nodes=1)
>>> s = Step(src=fab.gpus[:1], dst=fab.gpus[1:2], nbytes=np.array([450e6]))
>>> r = AnalyticBackend(protocol="ideal").run(Schedule(steps=(s,)), fab)
>>> round(r.time * 1e6, 3), r.bottleneck_kind
(1000.2, 'nvlink')
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends import memory as _memory
from fabricsim.backends.analytic_fast import fast_structure
from fabricsim.backends.analytic_shared import (
    adjacent_links,
    innet_rows,
    plane_groups,
    reduce_keys,
    split_queue_pairs,
)
from fabricsim.backends.base import (
    Result,
    active_pipeline,
    crossing_seconds,
    fill_efficiency,
    kernel_floor,
    schedule_protocol,
    spread_channels,
    spread_share,
)
from fabricsim.fabric.core import Fabric, pair_hash
from fabricsim.fabric.kinds import LinkKind
from fabricsim.fabric.paths import Paths
from fabricsim.protocols import (
    CLASS_RANK,
    LINK_CLASSES,
    Protocol,
    get_protocol,
    link_class_of_kind,
)
from fabricsim.schedule.core import (
    Channels,
    Crossings,
    Pipeline,
    Schedule,
    Step,
    concurrency_groups,
)

FloatArray = NDArray[np.float64]
_CLASS_OF_KIND = link_class_of_kind()
_INNET_OF = np.array([LINK_CLASSES.index("nvls"), LINK_CLASSES.index("pcie"),
                      LINK_CLASSES.index("sharp")], dtype=np.int64)
#: Order in which a path's link classes decide its hop overhead (dearest last).
_CLASS_RANK = CLASS_RANK.astype(np.int8)  # nvlink < pcie < nvls < net < sharp


@dataclass(frozen=True, eq=False)
class GroupModel:
    """Timing of one group of concurrent steps for a unit byte scale.

    One repetition lasts ``max(alpha + scale * beta)``; :attr:`links`/:attr:`load` hold the
    bytes per link for scale 1 and :attr:`busy` the time each of those links is busy (scale
    1), computed on first use (selection only needs ``alpha``/``beta``).
    """

    alpha: FloatArray
    beta: FloatArray
    link_load: FloatArray          # bytes per link of the fabric (scale 1)
    link_rate: FloatArray          # usable bytes/s per link under this protocol

    def duration(self, scale: float) -> float:
        if self.alpha.size == 0:
            return 0.0
        return float(np.max(self.alpha + scale * self.beta))

    @cached_property
    def links(self) -> NDArray[np.int32]:
        """Links this group loads."""
        return np.flatnonzero(self.link_load > 0).astype(np.int32)

    @property
    def load(self) -> FloatArray:
        """Bytes on each of :attr:`links` for scale 1."""
        return self.link_load[self.links]

    @property
    def busy(self) -> FloatArray:
        """Busy time (s) of each of :attr:`links` for scale 1."""
        return self.link_load[self.links] / self.link_rate[self.links]


@dataclass(frozen=True, eq=False)
class CompiledSchedule:
    """A schedule reduced to concurrency groups, each with a :class:`GroupModel`."""

    groups: tuple[GroupModel, ...]
    scales: FloatArray          # byte scale of each group for the compiled schedule
    group_of_step: NDArray[np.int64]
    deps: tuple[tuple[int, ...], ...]
    repeat: NDArray[np.int64]
    delay: FloatArray
    launch: float
    n_links: int
    #: Protocol whose size-dependent bandwidth ramp applies, and message bytes at factor 1.
    protocol: Protocol | None = None
    message_bytes: float = 0.0
    #: Least time (s, at factor 1) the kernels need (:meth:`Schedule.kernel_floor`).
    kernel_floor: float = 0.0
    #: The chunk pipeline whose fill this protocol pays (:class:`Schedule.pipeline`), and
    #: the protocol's payload efficiency per link class it is timed with.
    pipeline: Pipeline | None = None
    fill_eff: Mapping[str, float] = field(default_factory=dict)
    #: The network crossings whose proxy steps this protocol pays (:class:`Crossings`).
    crossings: Crossings | None = None
    #: The channels one of whose rate sets the steps' pace (:attr:`Schedule.spread`).
    spread: Channels | None = None

    def fill(self, factor: float = 1.0) -> float:
        """Seconds the chunk pipeline takes to fill at byte counts times ``factor``."""
        if self.pipeline is None:
            return 0.0
        return self.pipeline.fill(self.message_bytes * factor, self.fill_eff)

    def crossing(self, factor: float = 1.0) -> float:
        """Seconds the network crossings cost at byte counts times ``factor``."""
        return crossing_seconds(self.crossings, self.protocol, self.message_bytes * factor)

    def _byte_factor(self, factor: float) -> float:
        """``factor`` as the bandwidth (β) terms pay it: slowed by the protocol's ramp at
        this message size (not where a chunk pipeline's fill models the same cost:
        Schedule.pipeline) and by the share of the channels it runs on
        (:func:`~fabricsim.backends.base.channel_share`)."""
        if self.protocol is None:
            return factor
        size = self.message_bytes * factor
        share = spread_share(self.spread, self.protocol, size)
        if self.pipeline is not None:
            return factor / share
        return factor / max(self.protocol.bandwidth_ramp(size) * share, 1e-12)

    def step_times(self, factor: float = 1.0) -> tuple[FloatArray, FloatArray]:
        """Start and end of every step when all byte counts are multiplied by ``factor``."""
        bf = self._byte_factor(factor)
        dur = np.array([g.duration(s * bf) for g, s in zip(self.groups, self.scales,
                                                             strict=True)])
        n = self.group_of_step.size
        start = np.zeros(n)
        end = np.zeros(n)
        for i in range(n):
            t0 = max((end[d] for d in self.deps[i]), default=0.0) + self.delay[i]
            start[i] = t0
            end[i] = t0 + self.repeat[i] * dur[self.group_of_step[i]]
        return start, end

    def time(self, factor: float = 1.0) -> float:
        """Completion time (s) with byte counts multiplied by ``factor``."""
        _, end = self.step_times(factor)
        return (max(float(end.max(initial=0.0)), self.kernels(factor))
                + self.fill(factor) + self.crossing(factor) + self.launch)

    def period(self, factor: float = 1.0) -> float:
        """Seconds per operation when the schedule runs back to back on every rank, as
        nccl-tests times it, and successive operations overlap: a rooted chain
        (broadcast, reduce) has no step that waits for data to come back, so a rank takes
        up the next operation as soon as it has passed this one on. Each operation then
        costs the busiest rank's share: its launch, its bytes through the slowest hop
        (or the kernels' stream, where their rate is lower) and one network crossing's
        proxy steps. The hops' latencies and the chain's fill (the first chunk through
        every stage) are not in it: while a rank works on one operation the next one's
        data is already on its way, so they are paid once for all the operations.

        >>> from fabricsim.fabric import build_cluster
        >>> from fabricsim.collectives.registry import Group, get_algorithm
        >>> from fabricsim.collectives.tuner import build
        >>> fab = build_cluster("dgx-h100", 4)
        >>> s = build(Group.of(fab), "broadcast", 2**20, get_algorithm("ring"), "ll")
        >>> c = AnalyticBackend().compile(s, fab)
        >>> bool(c.launch < c.period() < c.time())
        True
        """
        bf = self._byte_factor(factor)
        bytes_s = max((float(np.max(g.beta, initial=0.0)) * s * bf
                       for g, s in zip(self.groups, self.scales, strict=True)), default=0.0)
        cross = self.crossing(factor) / max(self.crossings.count, 1) \
            if self.crossings is not None else 0.0
        return float(max(bytes_s, self.kernel_floor * factor) + cross + self.launch)

    def back_to_back(self, factor: float = 1.0) -> float:
        """Seconds per operation of a rooted chain (broadcast, reduce) run back to back:
        its :meth:`period`, never more than one operation alone (:meth:`time`)."""
        return min(self.time(factor), self.period(factor))

    @cached_property
    def latency(self) -> float:
        """Seconds the steps take with no bytes to move (their hops' latencies, no launch):
        the same at every size, so worked out once."""
        _, end = self.step_times(0.0)
        return float(end.max(initial=0.0))

    def kernels(self, factor: float = 1.0) -> float:
        """Seconds the kernels' own rate needs (0 without one): their stream starts once
        the schedule's latencies are through (:attr:`latency`, :func:`stream_start`)
        and then runs at that rate."""
        if self.kernel_floor <= 0.0:
            return 0.0
        return self.latency + self.kernel_floor * factor


@dataclass(eq=False)
class AnalyticBackend:
    """α–β timing of a Schedule on a Fabric with protocol overheads and link sharing.

    Parameters
    ----------
    protocol
        Protocol name to use for every schedule (``"ll"``, ``"ll128"``, ``"simple"``,
        ``"ideal"``); by default the schedule's own ``protocol`` (``"ideal"`` if unset:
        raw transfers, no NCCL overhead).
    protocols
        Override the protocol table (name -> :class:`Protocol`), e.g. for calibration.
    """

    protocol: str | None = None
    protocols: Mapping[str, Protocol] | None = None
    name: str = "analytic"
    _cache: weakref.WeakKeyDictionary[Fabric, dict[bytes, GroupModel]] = field(
        default_factory=weakref.WeakKeyDictionary, repr=False)
    _structs: weakref.WeakKeyDictionary[Fabric, dict[bytes, _Structure]] = field(
        default_factory=weakref.WeakKeyDictionary, repr=False)

    def _proto(self, schedule: Schedule) -> Protocol:
        name = (self.protocol or schedule.protocol or "ideal").lower()
        if self.protocols is not None and name in self.protocols:
            return self.protocols[name]
        return get_protocol(name)

    def compile(self, schedule: Schedule, fabric: Fabric) -> CompiledSchedule:
        """Group concurrent steps and solve each group's link loads (cached)."""
        proto = self._proto(schedule)
        return self.compile_protocols(schedule, fabric, [proto])[0]

    def compile_protocols(self, schedule: Schedule, fabric: Fabric,
                          protocols: list[Protocol]) -> list[CompiledSchedule]:
        """:meth:`compile` for several protocols at once (the routing is shared)."""
        protocols = [schedule_protocol(schedule, p) for p in protocols]
        members, group_of = concurrency_groups(schedule)
        cache = self._cache.setdefault(fabric, {})
        per_proto: list[list[GroupModel]] = [[] for _ in protocols]
        scales = np.zeros(len(members))
        for gi, steps in enumerate(members):
            models, scale = self._group(fabric, steps, protocols, cache)
            for lst, m in zip(per_proto, models, strict=True):
                lst.append(m)
            scales[gi] = scale
        deps = tuple(s.deps for s in schedule.steps)
        repeat = np.array([s.repeat for s in schedule.steps], dtype=np.int64)
        delay = np.array([s.delay for s in schedule.steps], dtype=np.float64)
        return [CompiledSchedule(groups=tuple(g), scales=scales, group_of_step=group_of,
                                 deps=deps, repeat=repeat, delay=delay,
                                 launch=p.launch if schedule.steps else 0.0,
                                 n_links=fabric.n_links, protocol=p,
                                 message_bytes=float(schedule.nbytes),
                                 kernel_floor=kernel_floor(schedule, p),
                                 crossings=schedule.crossings, spread=schedule.spread,
                                 **_fill_of(schedule, p, fabric))
                for g, p in zip(per_proto, protocols, strict=True)]

    def run(self, schedule: Schedule, fabric: Fabric) -> Result:
        """Time ``schedule`` on ``fabric``; per-link bytes and the bottleneck link."""
        comp = self.compile(schedule, fabric)
        start, end = comp.step_times()
        link_bytes = np.zeros(fabric.n_links)
        busy = np.zeros(fabric.n_links)
        reps = np.zeros(len(comp.groups))
        for i, g in enumerate(comp.group_of_step):
            reps[g] = max(reps[g], comp.repeat[i])
        for g, model in enumerate(comp.groups):
            w = reps[g] * comp.scales[g]
            np.add.at(link_bytes, model.links, model.load * w)
            np.add.at(busy, model.links, model.busy * w)
        bott = int(np.argmax(busy)) if busy.size and busy.max() > 0 else -1
        kind = LinkKind(int(fabric.link_kind[bott])).label if bott >= 0 else ""
        # the kernels' own rate (tree, NVLSTree) may set the time instead of any link
        kernels = comp.kernels() > float(end.max(initial=0.0))
        return Result(time=comp.time(), backend=self.name,
                      step_start=start, step_end=end, link_bytes=link_bytes,
                      bottleneck_link=bott, bottleneck_kind=kind,
                      extra={"protocol": self._proto(schedule).name, "launch": comp.launch,
                             "groups": len(comp.groups),
                             "limited_by": "kernels" if kernels else "links",
                             **spread_channels(schedule, comp.protocol)})

    def _group(self, fabric: Fabric, steps: list[Step], protos: list[Protocol],
               cache: dict[bytes, GroupModel]) -> tuple[list[GroupModel], float]:
        src = np.concatenate([s.src for s in steps])
        dst = np.concatenate([s.dst for s in steps])
        nb = np.concatenate([s.nbytes for s in steps])
        hashes = np.concatenate([s.hashes if s.hashes is not None else pair_hash(s.src, s.dst)
                                 for s in steps])
        src, dst, nb, hashes = split_queue_pairs(fabric, src, dst, nb, hashes)
        if src.size > _memory.CHECK_ABOVE_TRANSFERS:  # refuse what would not fit
            q = fabric.info.qps
            what = f"routing {src.size:,} transfers"
            shrink = ["fewer ranks (e.g. one expert-parallel group)"]
            if q > 1:
                what += f" ({q} queue pairs per connection)"
                shrink.insert(0, "fewer queue pairs (params.qps, NCCL_IB_QPS_PER_CONNECTION)")
            _memory.check_fits(src.size * _memory.ANALYTIC_BYTES_PER_TRANSFER, what, shrink,
                               field="params.qps" if q > 1 else "ranks")
        scale = float(nb.max(initial=0.0))
        w = nb / scale if scale > 0 else nb
        h = hashlib.blake2b(digest_size=20)
        for arr in (src, dst, hashes, w):
            h.update(np.ascontiguousarray(arr).tobytes())
        key = h.digest()
        out: list[GroupModel] = []
        for proto in protos:
            pkey = key + repr(proto).encode()
            hit = cache.get(pkey)
            if hit is None:
                st = self._structs.get(fabric, {}).get(key)
                if st is None:
                    st = _structure(fabric, src, dst, hashes, w)
                    per = self._structs.setdefault(fabric, {})
                    if len(per) > 64:
                        per.clear()
                    per[key] = st
                hit = _model(fabric, st, proto)
                if len(cache) > 4096:
                    cache.clear()
                cache[pkey] = hit
            out.append(hit)
        return out, scale


def _fill_of(schedule: Schedule, proto: Protocol, fabric: Fabric) -> dict[str, Any]:
    """The :class:`CompiledSchedule` fields of ``schedule``'s pipeline fill under
    ``proto`` (none where that protocol does not fill by chunks)."""
    pipe = active_pipeline(schedule, proto)
    if pipe is None:
        return {}
    return {"pipeline": pipe, "fill_eff": fill_efficiency(proto, fabric)}


@dataclass(frozen=True, eq=False)
class _Structure:
    """Routing of a group of transfers, independent of protocol and of the byte scale.

    Transfers are reduced to keys of equal (path latency, dearest link class): per key the
    largest latency and, per link class, the largest ``load / capacity`` over the links
    of that class on any of its transfers' paths (for striped NVSwitch traffic, over the
    whole plane group). One repetition of the group lasts
    ``max_k latency_k + hop[class_k] + scale · max_c cmax[k, c] / eff[c]`` — exactly the
    maximum over transfers, because max commutes with max.
    """

    load: FloatArray                # bytes per link for unit scale (all links)
    lat: FloatArray                 # per key
    rank: NDArray[np.int64]         # per key: class rank of the dearest link (0 = empty)
    cmax: FloatArray                # per key × link class


_N_CLS = len(LINK_CLASSES)


def _structure(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
               hashes: NDArray[np.uint64], w: FloatArray) -> _Structure:
    fast = fast_structure(fabric, src, dst, hashes, w)
    if fast is not None:
        return _Structure(*fast)
    return _structure_general(fabric, src, dst, hashes, w)


def _structure_general(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
                       hashes: NDArray[np.uint64], w: FloatArray) -> _Structure:
    """Every transfer routed in full (any fabric, links down allowed)."""
    paths = _route(fabric, src, dst, hashes)
    rows = paths.row_ids()
    links = paths.links
    innet_row = innet_rows(fabric, src, dst)
    group_of, size = plane_groups(fabric)
    sprayed = (size[links] > 1) & ~innet_row[rows]
    wr = w[rows]
    load = np.bincount(links[~sprayed], weights=wr[~sprayed],
                       minlength=fabric.n_links).astype(np.float64)
    if sprayed.any():
        g = group_of[links[sprayed]]
        per_group = np.bincount(g, weights=wr[sprayed], minlength=int(group_of.max()) + 1)
        members = group_of >= 0
        load[members] += per_group[group_of[members]] / size[members]
    cls = _CLASS_OF_KIND[fabric.link_kind[links]].astype(np.int64)
    cls = np.where(innet_row[rows], _INNET_OF[cls], cls)
    ratio = load / fabric.link_capacity
    m = ratio[links]
    if sprayed.any():
        gmax = np.zeros(int(group_of.max()) + 1)
        mem = np.flatnonzero(group_of >= 0)
        np.maximum.at(gmax, group_of[mem], ratio[mem])
        m[sprayed] = gmax[group_of[links[sprayed]]]
    n = src.shape[0]
    cm = np.zeros((n, _N_CLS))
    np.maximum.at(cm, (rows, cls), m)
    latency = _row_reduce(np.add, fabric.link_latency[links], paths.ptr, 0.0)
    rank = _row_reduce(np.maximum, _CLASS_RANK[cls].astype(np.float64), paths.ptr, 0.0)
    lat_k, rank_k, cm_k = reduce_keys(latency, rank.astype(np.int64), cm)
    return _Structure(load=load, lat=lat_k, rank=rank_k, cmax=cm_k)


def _row_reduce(op: np.ufunc, values: FloatArray, ptr: NDArray[np.int64], empty: float
                ) -> FloatArray:
    """``op`` over each CSR row of ``values`` (``empty`` for empty rows)."""
    n = ptr.size - 1
    out = np.full(n, empty, dtype=np.float64)
    nonempty = ptr[1:] > ptr[:-1]
    if values.size and nonempty.any():
        out[nonempty] = op.reduceat(values, ptr[:-1][nonempty])
    return out


def _link_rate(fabric: Fabric, eff: FloatArray) -> FloatArray:
    """Usable rate of every link for the per-class efficiencies ``eff`` (cached with the
    fabric: shared, read-only, by every group model of the fabric)."""
    per: dict[bytes, FloatArray] = fabric.memo("analytic.link_rate", dict)
    key = eff.tobytes()
    hit = per.get(key)
    if hit is None:
        hit = fabric.link_capacity * eff[_CLASS_OF_KIND[fabric.link_kind]]
        hit.flags.writeable = False
        if len(per) > 32:
            per.clear()
        per[key] = hit
    return hit


def _model(fabric: Fabric, st: _Structure, proto: Protocol) -> GroupModel:
    """Protocol-specific (α, β) envelope of a routed group."""
    eff = proto.eff_array(fabric)
    rate = _link_rate(fabric, eff)
    if st.lat.size == 0:
        z = np.zeros(0)
        return GroupModel(z, z, st.load, rate)
    beta = (st.cmax / eff[None, :]).max(axis=1)
    by_rank = np.argsort(_CLASS_RANK)
    hop = proto.hop_array(fabric)
    alpha = np.where(st.rank > 0, st.lat + hop[by_rank[np.maximum(st.rank - 1, 0)]], 0.0)
    alpha, beta = _envelope(alpha, beta)
    return GroupModel(alpha=alpha, beta=beta, link_load=st.load, link_rate=rate)


def _route(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
           hashes: NDArray[np.uint64]) -> Paths:
    """Paths of all transfers; a transfer between a switch and an adjacent node takes
    their link directly (hop-by-hop in-network trees), others are routed."""
    direct, dlink = adjacent_links(fabric, src, dst, innet_rows(fabric, src, dst))
    q = src
    if direct.all():
        return Paths(ptr=np.arange(q.size + 1, dtype=np.int64), links=dlink.astype(np.int32))
    rest = np.flatnonzero(~direct)
    routed = fabric.route_many(src[rest], dst[rest], hashes[rest])
    if not direct.any():
        return routed
    lengths = np.ones(q.size, dtype=np.int64)
    lengths[rest] = routed.lengths()
    ptr = np.zeros(q.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    links = np.empty(int(ptr[-1]), dtype=np.int32)
    d_idx = np.flatnonzero(direct)
    links[ptr[d_idx]] = dlink[d_idx]
    starts = np.repeat(ptr[rest], routed.lengths())
    within = np.arange(routed.links.size) - np.repeat(routed.ptr[:-1], routed.lengths())
    links[starts + within] = routed.links
    return Paths(ptr=ptr, links=links)


def _envelope(alpha: FloatArray, beta: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Keep only (α, β) points not dominated by another (max over them is unchanged)."""
    akey = np.round(alpha * 1e12).astype(np.int64)
    uniq = np.unique(akey)
    if uniq.size > 64:  # many distinct latencies: exact Pareto front by sorting
        order = np.lexsort((beta, -alpha))
        a, b = alpha[order], beta[order]
    else:
        a = np.array([alpha[akey == u].max() for u in uniq[::-1]])
        b = np.array([beta[akey == u].max() for u in uniq[::-1]])
    keep = b > np.concatenate([[-np.inf], np.maximum.accumulate(b)[:-1]])
    return a[keep].copy(), b[keep].copy()


def stream_start(schedule: Schedule, protocol: Any, fabric: Fabric) -> float:
    """Seconds ``schedule`` takes under ``protocol`` (as named, before the schedule's own
    adjustments: :func:`~fabricsim.backends.base.schedule_protocol`) with no bytes to
    move (its hops' latencies, no launch): where the kernels' own rate bounds a run
    (:func:`~fabricsim.backends.base.kernel_floor`), their stream starts this late. The
    flow and packet backends take it from here, so that all three add the same.

    >>> from fabricsim.fabric import build_cluster
    >>> from fabricsim.collectives.registry import Group, get_algorithm
    >>> from fabricsim.collectives.tuner import build
    >>> from fabricsim.protocols import get_protocol
    >>> fab = build_cluster("aws-p5", 2)
    >>> s = build(Group.of(fab), "all_reduce", 2**24, get_algorithm("tree"), "ll128")
    >>> 0 < stream_start(s, get_protocol("ll128"), fab) < 1e-4
    True
    """
    if protocol is None:
        return 0.0
    return AnalyticBackend().compile_protocols(schedule, fabric, [protocol])[0].latency
