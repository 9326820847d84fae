"""Provable lower bounds on the analytic backend's time, computed without routing.

Automatic selection compares every candidate (algorithm, protocol) by its predicted time;
compiling a candidate routes all of its transfers, which at 100k+ GPUs costs seconds. A
:class:`BoundModel` is a lower bound on :meth:`CompiledSchedule.time` for every byte
factor, computed from the schedule alone in linear time. The tuner compiles candidates in
increasing order of their bound and skips one whose bound exceeds the best time already
found for that size — an exact branch-and-bound: the skipped candidate's true time is larger
still, so the selected (algorithm, protocol) and its time are unchanged.

Why each piece is a lower bound of the analytic model (see :mod:`.analytic`), per
repetition of a concurrency group ``max_t (α_t + s·β_t)``:

* ``α_t`` (transfer with a non-empty path) is path latency + the hop overhead of its
  dearest link class. Path latency ≥ the smallest link latency on the fabric; for a
  transfer between two servers ≥ the smallest latency of a link leaving a server. Its hop
  overhead ≥ the protocol's smallest hop; for a transfer between two servers of a fabric
  whose server-leaving links are all network links, the dearest class is ``net`` or
  ``sharp``, so ≥ the smaller of those two hops.
* ``β_t`` is, over the links of its path, ``load/(capacity × efficiency of its class)``.
  Every transfer out of node ``v`` puts its bytes on the links leaving ``v`` (NVSwitch
  striping spreads them over those links, keeping the sum), so some link ``l`` leaving
  ``v`` has ``load_l/(cap_l·eff_l) ≥ bytes_out(v) / Σ cap·eff`` (a maximum is at least
  the mediant), and a transfer crossing ``l`` has ``β ≥`` that, ``eff`` being the larger
  of the link's class and its in-network class. Likewise for the links into ``v`` and for
  the links leaving or entering a server's node set. ``B`` is the largest of these.
* Hence ``max_t (α_t + s·β_t) ≥ max(A_max, A_min + s·B)`` with ``A_max``/``A_min`` the
  largest/smallest ``α`` bounds of the group's non-empty transfers.
* Groups of at most :data:`EXACT_MAX` transfers (pipeline-fill steps) are solved exactly.
* Step start/end times are max/plus of durations, monotone, so the DAG of lower bounds
  bounds the DAG; the protocol's launch overhead is added as in the exact model. A
  protocol's size-dependent bandwidth ramp (a factor ≤ 1 on bandwidth) only lengthens the
  exact times, so the bounds ignore it.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives import build_schedule, get_protocol
>>> from fabricsim.backends.analytic import AnalyticBackend
>>> fab = build_cluster("dgx-h100", 4)
>>> s = build_schedule(fab, "all_reduce", 2**20, algo="ring", proto="ll")
>>> be = AnalyticBackend()
>>> lb = bound_protocols(be, s, fab, [get_protocol("ll")])[0]
>>> exact = be.compile(s, fab)
>>> all(lb.time(f) <= exact.time(f) for f in (1e-5, 1.0, 1e4))
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.base import schedule_protocol
from fabricsim.fabric.core import Fabric
from fabricsim.schedule.core import Schedule, Step, concurrency_groups

if TYPE_CHECKING:
    from fabricsim.backends.analytic import AnalyticBackend, GroupModel
    from fabricsim.protocols import Protocol

FloatArray = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Groups with at most this many transfers are solved exactly (routing them is cheap).
EXACT_MAX = 64


@dataclass(frozen=True, eq=False)
class BoundModel:
    """A lower bound on a compiled schedule's completion time for any byte factor.

    Per concurrency group either an exact :class:`GroupModel` (``exact[g]``) or the
    triple ``(a_max[g], a_min[g], b[g])``: one repetition lasts at least
    ``max(a_max, a_min + factor · b)`` (``b`` in seconds at the schedule's own sizes).
    """

    exact: tuple[GroupModel | None, ...]
    exact_scale: FloatArray
    a_max: FloatArray
    a_min: FloatArray
    b: FloatArray
    group_of_step: I64
    deps: tuple[tuple[int, ...], ...]
    repeat: I64
    delay: FloatArray
    launch: float

    def time(self, factor: float = 1.0) -> float:
        """Lower bound (s) on the completion time with byte counts times ``factor``."""
        dur = np.empty(len(self.exact))
        for g, ex in enumerate(self.exact):
            if ex is not None:
                dur[g] = ex.duration(self.exact_scale[g] * factor)
            else:
                dur[g] = max(self.a_max[g], self.a_min[g] + factor * self.b[g])
        end = np.zeros(self.group_of_step.size)
        for i in range(end.size):
            t0 = max((end[d] for d in self.deps[i]), default=0.0) + self.delay[i]
            end[i] = t0 + self.repeat[i] * dur[self.group_of_step[i]]
        return float(end.max(initial=0.0)) + self.launch


@dataclass(frozen=True, eq=False)
class _FabricCaps:
    """Per-fabric, protocol-independent sums used by the bounds."""

    out_cap: FloatArray         # node × link class: capacity of links leaving the node
    in_cap: FloatArray          # node × link class: capacity of links entering the node
    srv_out_cap: FloatArray     # server × class: links leaving the server's node set
    srv_in_cap: FloatArray      # server × class: links entering it
    lat_min: float              # smallest link latency
    boundary_lat_min: float     # smallest latency of a link leaving/entering a server
    boundary_all_net: bool      # every server-boundary link is of class ``net``
    per_eff: dict[bytes, tuple[FloatArray, ...]] = field(default_factory=dict)

    def capeff(self, eff: FloatArray) -> tuple[FloatArray, ...]:
        """(out, in, server out, server in) of Σ capacity × ``eff[class]``."""
        key = eff.tobytes()
        hit = self.per_eff.get(key)
        if hit is None:
            hit = self.per_eff[key] = (self.out_cap @ eff, self.in_cap @ eff,
                                       self.srv_out_cap @ eff, self.srv_in_cap @ eff)
        return hit


def _by_class(idx: NDArray[np.integer[Any]], cls: NDArray[np.integer[Any]], cap: FloatArray,
              rows: int, ncls: int) -> FloatArray:
    """``rows × ncls`` sums of ``cap`` by (``idx``, ``cls``)."""
    flat = np.bincount(idx.astype(np.intp) * ncls + cls, weights=cap, minlength=rows * ncls)
    return flat.astype(np.float64, copy=False).reshape(rows, ncls)


def _caps(fabric: Fabric) -> _FabricCaps:
    hit: _FabricCaps = fabric.memo("analytic_bound.caps", lambda: _fabric_caps(fabric))
    return hit


def _fabric_caps(fabric: Fabric) -> _FabricCaps:
    from fabricsim.protocols import LINK_CLASSES, link_class_of_kind

    ncls = len(LINK_CLASSES)
    cls = link_class_of_kind().astype(np.intp)[fabric.link_kind]
    cap = fabric.link_capacity
    ls, ld = fabric.link_src, fabric.link_dst
    nn = fabric.n_nodes
    out_cap = _by_class(ls, cls, cap, nn, ncls)
    in_cap = _by_class(ld, cls, cap, nn, ncls)
    srv = fabric.node_server
    n_srv = max(int(srv.max(initial=-1)) + 1, 1)
    s_s, s_d = srv[ls], srv[ld]
    diff = s_s != s_d
    leave = diff & (s_s >= 0)
    enter = diff & (s_d >= 0)
    srv_out = _by_class(s_s[leave], cls[leave], cap[leave], n_srv, ncls)
    srv_in = _by_class(s_d[enter], cls[enter], cap[enter], n_srv, ncls)
    bnd = leave | enter
    lat = fabric.link_latency
    net = LINK_CLASSES.index("net")
    return _FabricCaps(out_cap=out_cap, in_cap=in_cap, srv_out_cap=srv_out, srv_in_cap=srv_in,
                       lat_min=float(lat.min(initial=0.0)),
                       boundary_lat_min=float(lat[bnd].min(initial=0.0)) if bnd.any() else 0.0,
                       boundary_all_net=bool(bnd.any() and (cls[bnd] == net).all()))


def _lat_caps(fabric: Fabric) -> tuple[float, float, bool]:
    """(smallest link latency, smallest latency of a server-boundary link, every boundary
    link is of class ``net``)."""
    def make() -> tuple[float, float, bool]:
        from fabricsim.protocols import LINK_CLASSES, link_class_of_kind

        srv = fabric.node_server
        s_s, s_d = srv[fabric.link_src], srv[fabric.link_dst]
        bnd = (s_s != s_d) & ((s_s >= 0) | (s_d >= 0))
        lat = fabric.link_latency
        cls = link_class_of_kind()[fabric.link_kind[bnd]]
        return (float(lat.min(initial=0.0)),
                float(lat[bnd].min(initial=0.0)) if bnd.any() else 0.0,
                bool(bnd.any() and (cls == LINK_CLASSES.index("net")).all()))

    hit: tuple[float, float, bool] = fabric.memo("analytic_bound.latencies", make)
    return hit


def _eff_hi(proto: Protocol, fabric: Fabric) -> FloatArray:
    """Per link class: the larger efficiency of the class and of its in-network class."""
    from fabricsim.protocols import LINK_CLASSES

    eff = proto.eff_array(fabric)
    innet = np.array([LINK_CLASSES.index(c) for c in ("nvls", "pcie", "sharp")])
    out = eff.copy()
    out[: innet.size] = np.maximum(eff[: innet.size], eff[innet])
    return out


def _hop_array(proto: Protocol, fabric: Fabric) -> FloatArray:
    """Per link class: the hop overhead the analytic model charges on ``fabric`` (the
    protocol may scale it per hardware generation)."""
    fn: Any = proto.hop_array
    try:
        return np.asarray(fn(fabric), dtype=np.float64)
    except TypeError:  # a protocol table without per-fabric hop scaling
        return np.asarray(fn(), dtype=np.float64)


#: Network transfers routed per large group by a refined bound (any subset gives a valid
#: bound: a link's load from a subset of the transfers is at most its load from all).
ROUTE_SAMPLE = 131072


def _routed_beta(fabric: Fabric, steps: list[Step], protocols: list[Protocol]
                 ) -> list[float]:
    """Per protocol, a lower bound on the group's largest ``β`` from routed transfers.

    Takes the group's GPU/NIC transfers between two servers (no in-network endpoint), up
    to :data:`ROUTE_SAMPLE` of them, and routes only their network segments exactly as
    the fast path does (:meth:`ClusterRouter.segments`, same flow hashes). Each network
    link ``l`` they load carries at least that load in the full group, and a sampled
    transfer crossing ``l`` has ``β ≥ load_l / (capacity_l × eff[class_l])``. Zero where
    the fast path does not apply (links down, multi-server NVLink, striped links).
    """
    from fabricsim.backends.analytic_fast import _eligible
    from fabricsim.backends.analytic_shared import innet_rows, plane_groups
    from fabricsim.fabric.cluster import ClusterRouter
    from fabricsim.fabric.core import pair_hash
    from fabricsim.protocols import link_class_of_kind

    zero = [0.0] * len(protocols)
    r = fabric.router
    if not _eligible(fabric) or not isinstance(r, ClusterRouter) or fabric.info.qps > 1:
        return zero  # (several queue pairs split what is sampled here whole)
    srv = fabric.node_server
    parts: list[tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.uint64], FloatArray]] = []
    taken = 0
    for s in steps:
        ss, sd = srv[s.src], srv[s.dst]
        sel = (ss >= 0) & (sd >= 0) & (ss != sd) & (s.nbytes > 0)
        if not sel.any():
            continue
        idx = np.flatnonzero(sel)
        idx = idx[~innet_rows(fabric, s.src[idx], s.dst[idx])][: ROUTE_SAMPLE - taken]
        h = s.hashes if s.hashes is not None else pair_hash(s.src, s.dst)
        parts.append((s.src[idx], s.dst[idx], h[idx], s.nbytes[idx]))
        taken += idx.size
        if taken >= ROUTE_SAMPLE:
            break
    if not taken:
        return zero
    src, dst, hh, nb = (np.concatenate([p[k] for p in parts]) for k in range(4))
    mid = r.segments(src, dst, hh, fabric.link_up).mid
    ok = mid >= 0
    load = np.bincount(mid[ok], weights=np.broadcast_to(nb[:, None], mid.shape)[ok],
                       minlength=fabric.n_links)
    links = np.flatnonzero(load > 0)
    if not links.size or (plane_groups(fabric)[1][links] > 1).any():
        return zero
    ratio = load[links] / fabric.link_capacity[links]
    cls = link_class_of_kind().astype(np.intp)[fabric.link_kind[links]]
    return [float((ratio / p.eff_array(fabric)[cls]).max()) for p in protocols]


def _max_ratio(bytes_per: NDArray[Any], capeff: FloatArray) -> float:
    """``max(bytes / capacity)`` over entries that carry bytes (capacity 0: ignored)."""
    ok = (bytes_per > 0) & (capeff > 0)
    if not ok.any():
        return 0.0
    return float((bytes_per[ok] / capeff[ok]).max())


def _groups(schedule: Schedule) -> tuple[list[list[Step]], I64]:
    """Concurrency groups as the analytic backend forms them (same deps, repeat, delay)."""
    return concurrency_groups(schedule)


def bound_protocols(backend: AnalyticBackend, schedule: Schedule, fabric: Fabric,
                    protocols: list[Protocol], level: int = 1) -> list[BoundModel]:
    """One :class:`BoundModel` per protocol for ``schedule`` on ``fabric``.

    ``backend`` solves the small groups exactly (and caches them as its compile does).
    ``level`` 0 bounds large groups by latency only (cheapest); 1 adds the capacity
    bounds; 2 also routes up to :data:`ROUTE_SAMPLE` network transfers of every large
    group (see :func:`_routed_beta`): tighter where ECMP collisions dominate.
    """
    from fabricsim.protocols import LINK_CLASSES

    protocols = [schedule_protocol(schedule, p) for p in protocols]
    members, group_of = _groups(schedule)
    caps = _caps(fabric) if level >= 1 else None
    lat_caps = _lat_caps(fabric)
    effs = [_eff_hi(p, fabric) for p in protocols]
    hops = [_hop_array(p, fabric) for p in protocols]
    net, sharp = LINK_CLASSES.index("net"), LINK_CLASSES.index("sharp")
    ng, npr = len(members), len(protocols)
    exact: list[list[GroupModel | None]] = [[None] * ng for _ in protocols]
    exact_scale = np.zeros(ng)
    a_max = np.zeros((npr, ng))
    a_min = np.zeros((npr, ng))
    b = np.zeros((npr, ng))
    srv = fabric.node_server
    cache = backend._cache.setdefault(fabric, {})
    for gi, steps in enumerate(members):
        n = sum(s.n for s in steps)
        if n <= EXACT_MAX:
            models, scale = backend._group(fabric, steps, protocols, cache)
            for pi, m in enumerate(models):
                exact[pi][gi] = m
            exact_scale[gi] = scale
            continue
        has_cross = has_local = False
        for s in steps:  # which kinds of non-empty transfers the group has (stop when both)
            x_s, x_d = srv[s.src], srv[s.dst]
            x_c = (x_s != x_d) & ((x_s >= 0) | (x_d >= 0))
            x_ne = s.src != s.dst
            has_cross = has_cross or bool((x_c & x_ne).any())
            has_local = has_local or bool((~x_c & x_ne).any())
            if has_cross and has_local:
                break
        if not (has_cross or has_local):
            continue
        for pi, hop in enumerate(hops):
            alphas = []
            if has_local:
                alphas.append(lat_caps[0] + float(hop.min()))
            if has_cross:
                h = min(hop[net], hop[sharp]) if lat_caps[2] else float(hop.min())
                alphas.append(max(lat_caps[1], lat_caps[0]) + h)
            a_max[pi, gi] = max(alphas)
            a_min[pi, gi] = min(alphas)
        if caps is None:
            continue
        src = np.concatenate([s.src for s in steps])
        dst = np.concatenate([s.dst for s in steps])
        nb = np.concatenate([s.nbytes for s in steps])
        ne = src != dst
        src, dst, nb = src[ne], dst[ne], nb[ne]
        ss, sd = srv[src], srv[dst]
        cross = (ss != sd) & ((ss >= 0) | (sd >= 0))
        out_b = np.bincount(src, weights=nb, minlength=fabric.n_nodes)
        in_b = np.bincount(dst, weights=nb, minlength=fabric.n_nodes)
        so = cross & (ss >= 0)
        si = cross & (sd >= 0)
        n_srv = caps.srv_out_cap.shape[0]
        srv_out_b = np.bincount(ss[so], weights=nb[so], minlength=n_srv)
        srv_in_b = np.bincount(sd[si], weights=nb[si], minlength=n_srv)
        for pi, eff in enumerate(effs):
            c_out, c_in, c_sout, c_sin = caps.capeff(eff)
            b[pi, gi] = max(_max_ratio(out_b, c_out), _max_ratio(in_b, c_in),
                            _max_ratio(srv_out_b, c_sout), _max_ratio(srv_in_b, c_sin))
        if level >= 2:
            for pi, rb in enumerate(_routed_beta(fabric, steps, protocols)):
                b[pi, gi] = max(b[pi, gi], rb)
    deps = tuple(s.deps for s in schedule.steps)
    repeat = np.array([s.repeat for s in schedule.steps], dtype=np.int64)
    delay = np.array([s.delay for s in schedule.steps], dtype=np.float64)
    return [BoundModel(exact=tuple(exact[pi]), exact_scale=exact_scale, a_max=a_max[pi],
                       a_min=a_min[pi], b=b[pi], group_of_step=group_of, deps=deps,
                       repeat=repeat, delay=delay,
                       launch=p.launch if schedule.steps else 0.0)
            for pi, p in enumerate(protocols)]
