"""Turn transfers into jobs and flows: ECMP by hash, packet spraying, adaptive routing, QPs.

A *job* is what completes (a transfer, or one queue pair's share of it); a *flow* is a rate
on a set of links. Routing modes:

``"ecmp"``
    Each queue pair (``qps`` per transfer, each carrying ``nbytes/qps``) is hashed onto one
    of the equal-cost paths, as switches do with the 5-tuple: collisions happen. Hashes
    come from ``Step.hashes`` or :func:`~fabricsim.fabric.pair_hash` of (src, dst) seeded
    with ``seed`` and the step's channel, so NCCL channels take different paths.
``"spray"``
    Packet spraying (Spectrum-X, EFA SRD, InfiniBand with per-packet AR): one flow split
    evenly over all ECMP paths; it crosses each link with the fraction of paths using it.
``"adaptive"``
    Adaptive routing that follows congestion: one flow per ECMP path, all feeding the same
    job, so the job's rate is the sum of what each path can give (a job ends when their
    combined progress covers its bytes).

Example
-------
>>> import numpy as np
>>> from fabricsim.backends.flow.testing import host_fat_tree
>>> fab = host_fat_tree(16)
>>> ex = expand(fab, fab.gpus[:1], fab.gpus[5:6], np.array([1e6]), mode="spray")
>>> ex.n_jobs, int(ex.flow_ptr[-1]), round(float(ex.latency[0]), 9)
(1, 10, 4e-06)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError, NoRouteError
from fabricsim.fabric.core import Fabric, mix_hash, pair_hash
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.protocols import LINK_CLASSES, Protocol, link_class_of_kind, switch_endpoint

F8 = NDArray[np.float64]
I8 = NDArray[np.int64]

ROUTING_MODES = ("ecmp", "spray", "adaptive")
_CLASS_OF_KIND = link_class_of_kind()
#: At most this many equal-cost paths are used by spraying or adaptive routing.
MAX_PATHS = 64


@dataclass(frozen=True)
class Expanded:
    """Jobs of a set of transfers, ready for :meth:`~fabricsim.backends.flow.kernel.Pool.add`.

    ``tag[j]`` is the transfer index of job ``j``; ``routable[j]`` is False where no route
    exists (the job then stalls). Pointers are local (start at 0).
    """

    size: F8
    latency: F8
    tag: I8
    src: I8
    dst: I8
    routable: NDArray[np.bool_]
    job_fptr: I8
    flow_ptr: I8
    links: I8
    coef: F8
    weight: F8
    frac: F8 | None = None

    @property
    def n_jobs(self) -> int:
        return int(self.size.shape[0])


def _route_each(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
                hashes: NDArray[np.uint64]) -> tuple[list[NDArray[np.int32]], NDArray[np.bool_]]:
    """Route pairs one by one, marking those without a route (slow path after an error)."""
    rows: list[NDArray[np.int32]] = []
    ok = np.ones(src.shape[0], dtype=bool)
    for i in range(src.shape[0]):
        try:
            rows.append(fabric.route(int(src[i]), int(dst[i]), flow_hash=int(hashes[i])))
        except NoRouteError:
            rows.append(np.zeros(0, dtype=np.int32))
            ok[i] = False
    return rows, ok


def _route(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
           hashes: NDArray[np.uint64]) -> tuple[I8, I8, NDArray[np.bool_]]:
    """CSR (ptr, links) of one path per pair, and which pairs have a route."""
    same = src == dst
    ok = np.ones(src.shape[0], dtype=bool)
    idx = np.flatnonzero(~same)
    lengths = np.zeros(src.shape[0], dtype=np.int64)
    try:
        paths = fabric.route_many(src[idx], dst[idx], hashes[idx])
        lengths[idx] = paths.lengths()
        links = paths.links.astype(np.int64)
    except NoRouteError:
        rows, ok_sub = _route_each(fabric, src[idx], dst[idx], hashes[idx])
        ok[idx] = ok_sub
        lengths[idx] = [len(r) for r in rows]
        links = (np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64))
    ptr = np.zeros(src.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr, links, ok


def expand(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32], nbytes: F8, *,
           hashes: NDArray[np.uint64] | None = None, mode: str = "ecmp", qps: int = 1,
           seed: int = 0, channel: int = 0, weight: float = 1.0) -> Expanded:
    """Jobs and flows of transfers ``src[i] -> dst[i]`` of ``nbytes[i]`` bytes.

    Parameters
    ----------
    fabric
        Where the transfers run (links that are down are avoided by its router).
    src, dst, nbytes
        Node ids and sizes of the transfers.
    hashes
        ECMP hash per transfer (default: pair hash seeded with ``seed`` and ``channel``).
    mode
        ``"ecmp"``, ``"spray"`` or ``"adaptive"`` (see the module docstring).
    qps
        Queue pairs per transfer; each carries ``nbytes/qps`` and hashes separately.
    weight
        Max-min weight of every flow (its traffic class weight).

    Examples
    --------
    >>> import numpy as np
    >>> from fabricsim.backends.flow.testing import host_fat_tree
    >>> fab = host_fat_tree(16)
    >>> ex = expand(fab, fab.gpus[:2], fab.gpus[4:6], np.array([8.0, 8.0]), qps=4)
    >>> ex.n_jobs, ex.size.tolist()[:2]
    (8, [2.0, 2.0])
    """
    if mode not in ROUTING_MODES:
        raise ConfigError(f"routing must be one of {', '.join(ROUTING_MODES)}, got {mode!r}",
                          field="routing")
    if qps < 1:
        raise ConfigError(f"qps must be >= 1, got {qps}", field="qps")
    src = np.asarray(src, dtype=np.int32)
    dst = np.asarray(dst, dtype=np.int32)
    n = src.shape[0]
    base = (np.asarray(hashes, dtype=np.uint64) if hashes is not None else
            pair_hash(src, dst, seed=seed * 7919 + channel))
    rep_src = np.repeat(src, qps)
    rep_dst = np.repeat(dst, qps)
    tag = np.repeat(np.arange(n, dtype=np.int64), qps)
    size = np.repeat(np.asarray(nbytes, dtype=np.float64) / qps, qps)
    qp = np.tile(np.arange(qps), n)
    h = base[tag].copy()
    for k in range(1, qps):
        sel = qp == k
        h[sel] = mix_hash(base[tag[sel]], k)
    nj = n * qps
    if mode == "ecmp":
        ptr, links, ok = _route(fabric, rep_src, rep_dst, h)
        # path latency per flow (a flow with no path, e.g. cut off by faults, has 0),
        # summed path by path: differences of one running sum round equal paths apart
        # and split one start instant into many events
        has = ptr[1:] > ptr[:-1]
        lat = np.zeros(nj)
        if has.any():
            lat[has] = np.add.reduceat(fabric.link_latency[links], ptr[:-1][has])
        return Expanded(size=size, latency=lat, tag=tag, src=rep_src.astype(np.int64),
                        dst=rep_dst.astype(np.int64), routable=ok,
                        job_fptr=np.arange(nj + 1, dtype=np.int64), flow_ptr=ptr,
                        links=links, coef=np.ones(links.shape[0]),
                        weight=np.full(nj, float(weight)))
    return _multipath(fabric, rep_src, rep_dst, size, tag, mode, weight)


def _multipath(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32], size: F8,
               tag: I8, mode: str, weight: float) -> Expanded:
    """Spraying (one flow over all paths) or adaptive routing (one flow per path)."""
    cache: dict[tuple[int, int], list[NDArray[np.int32]]] = {}
    nj = src.shape[0]
    lat = np.zeros(nj)
    ok = np.ones(nj, dtype=bool)
    job_nf = np.zeros(nj, dtype=np.int64)
    flow_len: list[int] = []
    links: list[NDArray[np.int64]] = []
    coefs: list[F8] = []
    for j in range(nj):
        a, b = int(src[j]), int(dst[j])
        if a == b:
            continue
        key = (a, b)
        if key not in cache:
            try:
                cache[key] = fabric.ecmp_paths(a, b, MAX_PATHS)
            except NoRouteError:
                cache[key] = []
        paths = cache[key]
        if not paths:
            ok[j] = False
            continue
        lat[j] = max(fabric.path_latency(p) for p in paths)
        if mode == "spray":
            allp = np.concatenate(paths).astype(np.int64)
            uniq, cnt = np.unique(allp, return_counts=True)
            job_nf[j] = 1
            flow_len.append(int(uniq.shape[0]))
            links.append(uniq)
            coefs.append(cnt / len(paths))
        else:
            job_nf[j] = len(paths)
            for p in paths:
                flow_len.append(int(p.shape[0]))
                links.append(p.astype(np.int64))
                coefs.append(np.ones(p.shape[0]))
    job_fptr = np.zeros(nj + 1, dtype=np.int64)
    np.cumsum(job_nf, out=job_fptr[1:])
    flow_ptr = np.zeros(len(flow_len) + 1, dtype=np.int64)
    np.cumsum(np.asarray(flow_len, dtype=np.int64), out=flow_ptr[1:])
    return Expanded(size=size, latency=lat, tag=tag, src=src.astype(np.int64),
                    dst=dst.astype(np.int64), routable=ok,
                    job_fptr=job_fptr, flow_ptr=flow_ptr,
                    links=np.concatenate(links) if links else np.zeros(0, dtype=np.int64),
                    coef=np.concatenate(coefs) if coefs else np.zeros(0),
                    weight=np.full(len(flow_len), float(weight)))


def _is_switch_node(fabric: Fabric, nodes: I8) -> NDArray[np.bool_]:
    return switch_endpoint(fabric, nodes, nodes)


def nvswitch_groups(fabric: Fabric) -> tuple[I8, I8]:
    """Per link: its NVSwitch plane group (the NVLink links of one GPU, one direction, to
    every NVSwitch chip; -1 for other links) and the group's size."""
    nk = fabric.node_kind
    ls, ld = fabric.link_src, fabric.link_dst
    nv = fabric.link_kind == LinkKind.NVLINK
    up = nv & (nk[ls] == NodeKind.GPU) & (nk[ld] == NodeKind.NVSWITCH)
    down = nv & (nk[ls] == NodeKind.NVSWITCH) & (nk[ld] == NodeKind.GPU)
    group = np.full(fabric.n_links, -1, dtype=np.int64)
    size = np.zeros(fabric.n_links, dtype=np.int64)
    sel = up | down
    if sel.any():
        key = np.where(up, ls, ld).astype(np.int64)[sel] * 2 + down[sel]
        _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
        group[sel] = inv.ravel()
        size[sel] = cnt[inv.ravel()]
    return group, size


def stripe_planes(fabric: Fabric, ex: Expanded) -> Expanded:
    """Interleave GPU-to-GPU traffic over every NVSwitch chip, as NVLink does: an entry on
    one GPU↔NVSwitch link becomes the whole plane group at ``1/K`` each. Transfers to or
    from a switch (NVLS) keep their one plane.

    Examples
    --------
    >>> import numpy as np
    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", nodes=1)
    >>> ex = stripe_planes(fab, expand(fab, fab.gpus[:1], fab.gpus[1:2], np.array([1.0])))
    >>> int(ex.flow_ptr[-1]), float(ex.coef.sum())
    (8, 2.0)
    """
    group, size = nvswitch_groups(fabric)
    if ex.links.size == 0 or not (size[ex.links] > 1).any():
        return ex
    members = np.argsort(group, kind="stable")
    members = members[group[members] >= 0]
    gptr = np.searchsorted(group[members], np.arange(int(group.max()) + 2))
    flow_job = np.repeat(np.arange(ex.n_jobs), np.diff(ex.job_fptr))
    ent_flow = np.repeat(np.arange(flow_job.shape[0]), np.diff(ex.flow_ptr))
    innet = _is_switch_node(fabric, ex.src) | _is_switch_node(fabric, ex.dst)
    spread = (size[ex.links] > 1) & ~innet[flow_job[ent_flow]]
    reps = np.where(spread, size[ex.links], 1)
    out_flow = np.repeat(ent_flow, reps)
    coef = np.repeat(ex.coef / reps, reps)
    frac = np.repeat((ex.coef if ex.frac is None else ex.frac) / reps, reps)
    links = np.repeat(ex.links, reps)
    idx = np.flatnonzero(np.repeat(spread, reps))
    if idx.size:
        e = np.repeat(np.flatnonzero(spread), size[ex.links[spread]])
        start = np.concatenate([[0], np.cumsum(reps)[:-1]])
        k = idx - start[e]
        links[idx] = members[gptr[group[ex.links[e]]] + k]
    ptr = np.zeros(ex.flow_ptr.shape[0], dtype=np.int64)
    np.cumsum(np.bincount(out_flow, minlength=ptr.shape[0] - 1), out=ptr[1:])
    return replace(ex, links=links.astype(np.int64), coef=coef, frac=frac, flow_ptr=ptr)


#: Hop-overhead precedence of link classes (the dearest class a path crosses counts).
_RANK = {"nvlink": 1, "pcie": 2, "nvls": 3, "net": 4, "sharp": 5}
#: The class an entry takes when its transfer ends at a switch that reduces (NVLS, SHARP).
_INNET = {"nvlink": "nvls", "pcie": "pcie", "net": "sharp"}


def apply_protocol(fabric: Fabric, ex: Expanded, proto: Protocol, nbytes: float = 0.0,
                   share: float = 1.0) -> Expanded:
    """Charge an NCCL protocol (as the analytic backend does): every entry uses
    ``1/(efficiency × ramp)`` of link capacity per payload byte for its link class (``nvls``
    or ``sharp`` for a transfer to or from a switch; the ramp is the protocol's bandwidth
    ramp at the collective's message size ``nbytes``, 1 when unknown, times ``share``, the
    share of its channels the operation runs on: ``backends.base.channel_share``) and
    every job waits the hop overhead of the dearest class its paths cross, on top of
    their latency.

    Examples
    --------
    >>> import numpy as np
    >>> from fabricsim.backends.flow.testing import host_fat_tree
    >>> from fabricsim.protocols import get_protocol
    >>> fab = host_fat_tree(4)
    >>> p = get_protocol("simple")
    >>> ex = apply_protocol(fab, expand(fab, fab.gpus[:1], fab.gpus[1:2], np.array([1.0])), p)
    >>> bool(np.isclose(ex.coef[0], 1 / p.efficiency["net"]))
    True
    """
    if ex.links.size == 0:
        return ex
    names = LINK_CLASSES
    cls = _CLASS_OF_KIND[fabric.link_kind[ex.links]].astype(np.int64)
    innet_map = np.array([names.index(_INNET.get(c, c)) for c in names], dtype=np.int64)
    rank = np.array([_RANK.get(c, 0) for c in names], dtype=np.int64)
    innet_job = _is_switch_node(fabric, ex.src) | _is_switch_node(fabric, ex.dst)
    flow_job = np.repeat(np.arange(ex.n_jobs), np.diff(ex.job_fptr))
    ent_job = np.repeat(flow_job, np.diff(ex.flow_ptr))
    cls = np.where(innet_job[ent_job], innet_map[cls], cls)
    ramp = max(proto.bandwidth_ramp(nbytes) * share, 1e-12)
    coef = ex.coef / (proto.eff_array(fabric)[cls] * ramp)
    best = np.full(ex.n_jobs, -1, dtype=np.int64)
    np.maximum.at(best, ent_job, rank[cls])
    by_rank = {int(r): i for i, r in enumerate(rank)}
    cls_of_best = np.array([by_rank.get(int(b), 0) for b in range(int(rank.max()) + 1)])
    hop = np.where(best > 0, proto.hop_array(fabric)[cls_of_best[np.maximum(best, 0)]], 0.0)
    return replace(ex, coef=coef, frac=ex.coef if ex.frac is None else ex.frac,
                   latency=ex.latency + hop)
