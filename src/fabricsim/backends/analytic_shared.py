"""What the analytic backend's general path (:mod:`.analytic`) and its fast path for
clusters of identical servers (:mod:`.analytic_fast`) share: which transfers end at a
switch, the links that carry them hop by hop, the NVSwitch plane and spray groups that
stripe traffic, and the reduction of transfers to (latency, dearest class) keys.

Both modules import this one and it imports neither, so the fast path no longer reaches
back into the module that calls it. Data derived from a fabric is kept with it
(:meth:`~fabricsim.fabric.core.Fabric.memo`).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 1)
>>> group_of, size = plane_groups(fab)
>>> int(size.max())   # a GPU's NVLinks to the four NVSwitches of a DGX H100
4
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabricsim.fabric.core import Fabric, mix_hash
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.protocols import switch_endpoint

FloatArray = NDArray[np.float64]


def innet_rows(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32]
               ) -> NDArray[np.bool_]:
    """Transfers that start or end at a switch (in-network reduction / multicast).

    Example
    -------
    >>> import numpy as np
    >>> from fabricsim.fabric import build_cluster
    >>> from fabricsim.fabric.kinds import NodeKind
    >>> fab = build_cluster("dgx-h100", 1)
    >>> sw = np.flatnonzero(fab.node_kind == NodeKind.NVSWITCH)[:1].astype(np.int32)
    >>> innet_rows(fab, fab.gpus[:2], np.concatenate([fab.gpus[1:2], sw])).tolist()
    [False, True]
    """
    return switch_endpoint(fabric, src, dst)


def _adjacency(fabric: Fabric) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Links sorted by (src, dst) node key: (sorted keys, link ids)."""
    key = fabric.link_src.astype(np.int64) * fabric.n_nodes + fabric.link_dst
    order = np.argsort(key, kind="stable")
    return key[order], order.astype(np.int64)


def adjacent_links(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
                   innet: NDArray[np.bool_]) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """For transfers with a switch endpoint (``innet``) whose ends share an up link: that
    link (hop-by-hop in-network trees); other transfers are routed by the fabric.

    Returns ``(direct, link)``: whether each transfer takes one link directly, and which
    (0 where it does not).

    Example
    -------
    >>> import numpy as np
    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", 1)
    >>> g, sw = int(fab.link_src[0]), int(fab.link_dst[0])   # a GPU and its NVSwitch
    >>> src, dst = np.array([g, g], np.int32), np.array([sw, sw], np.int32)
    >>> direct, link = adjacent_links(fab, src, dst, np.array([True, False]))
    >>> direct.tolist(), int(link[0]) == 0
    ([True, False], True)
    """
    keys, order = fabric.memo("analytic.adjacency", lambda: _adjacency(fabric))
    direct = np.zeros(src.size, dtype=bool)
    link = np.zeros(src.size, dtype=np.int64)
    idx = np.flatnonzero(innet)
    if idx.size and keys.size:
        q = src[idx].astype(np.int64) * fabric.n_nodes + dst[idx]
        pos = np.clip(np.searchsorted(keys, q), 0, keys.size - 1)
        ok = (keys[pos] == q) & fabric.link_up[order[pos]]
        direct[idx] = ok
        link[idx] = order[pos]
    return direct, link


def plane_groups(fabric: Fabric) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """NVSwitch plane groups: per link, the id of its group (the links of one GPU in one
    direction to every NVSwitch, ``-1`` for other links) and the group's size ``K``.

    A GPU's NVLink ports reach all NVSwitch chips and traffic to a peer GPU is interleaved
    over them, so GPU-to-GPU bytes on one of these links are spread over its whole group.
    Under adaptive routing the fabric's router adds its network spray groups (a leaf's
    uplinks, the downlinks into a leaf, ...). Transfers that target a switch (NVLS, SHARP)
    are not spread. Kept with the fabric.

    Example
    -------
    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", 1)
    >>> group_of, size = plane_groups(fab)
    >>> int(group_of.max()) + 1    # 8 GPUs, up and down
    16
    """
    hit: tuple[NDArray[np.int64], NDArray[np.int64]] = fabric.memo(
        "analytic.plane_groups", lambda: _find_plane_groups(fabric))
    return hit


def _find_plane_groups(fabric: Fabric) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    nk = fabric.node_kind
    nvl = np.flatnonzero(fabric.link_kind == LinkKind.NVLINK)   # only these can qualify
    ls, ld = fabric.link_src[nvl], fabric.link_dst[nvl]
    ks, kd = nk[ls], nk[ld]
    up = (ks == NodeKind.GPU) & (kd == NodeKind.NVSWITCH)
    down = (ks == NodeKind.NVSWITCH) & (kd == NodeKind.GPU)
    cand = up | down
    group_of = np.full(fabric.n_links, -1, dtype=np.int64)
    size = np.zeros(fabric.n_links, dtype=np.int64)
    if cand.any():  # ids in key order, as np.unique would number them (without sorting)
        kc = np.where(up, ls, ld)[cand].astype(np.int64) * 2 + down[cand]
        counts = np.bincount(kc, minlength=2 * fabric.n_nodes)
        ids = np.cumsum(counts > 0) - 1
        links = nvl[cand]
        group_of[links] = ids[kc]
        size[links] = counts[kc]
    # adaptive routing / packet spraying: a flow's bytes spread over equal-cost network links
    spray = getattr(fabric.router, "spray_groups", None)
    groups = spray() if spray is not None else []
    nxt = int(group_of.max()) + 1
    for g in groups:
        group_of[g] = nxt
        size[g] = g.size
        nxt += 1
    return group_of, size


def reduce_keys(lat: FloatArray, rank: NDArray[np.int64], cm: FloatArray
                ) -> tuple[FloatArray, NDArray[np.int64], FloatArray]:
    """Collapse rows with the same (latency to 1 ps, rank): max latency, max per class.

    ``lat`` is each transfer's path latency (s), ``rank`` the class rank of its dearest
    link and ``cm`` its per-class ``load / capacity`` maximum (one row per transfer).

    Example
    -------
    >>> import numpy as np
    >>> lat, rank, cm = reduce_keys(np.array([1e-6, 1e-6, 2e-6]), np.array([3, 3, 3]),
    ...                             np.array([[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]]))
    >>> lat.tolist(), rank.tolist(), cm.tolist()
    ([1e-06, 2e-06], [3, 3], [[1.0, 2.0], [5.0, 5.0]])
    """
    if lat.size == 0:
        return lat, rank, cm
    key = np.round(lat * 1e12).astype(np.int64) * 8 + rank
    order = np.argsort(key, kind="stable")
    ks = key[order]
    starts = np.flatnonzero(np.concatenate([[True], ks[1:] != ks[:-1]]))
    lat_k = np.maximum.reduceat(lat[order], starts)     # max: exact in any order
    cm_k = np.maximum.reduceat(cm[order], starts, axis=0)
    return lat_k, (ks[starts] % 8).astype(np.int64), cm_k


def split_queue_pairs(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
                      nbytes: FloatArray, hashes: NDArray[np.uint64]
                      ) -> tuple[NDArray[np.int32], NDArray[np.int32], FloatArray,
                                 NDArray[np.uint64]]:
    """Transfers between servers split over ``fabric.info.qps`` queue pairs, each with its
    share of the bytes and its own ECMP hash (as NCCL splits a connection's data over
    ``NCCL_IB_QPS_PER_CONNECTION`` QPs); transfers inside a server are kept whole.

    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", 2, fabric="roce-400g", params={"qps": 4})
    >>> g = fab.gpus
    >>> s, d, b, h = split_queue_pairs(fab, g[[0, 0]], g[[1, 8]], np.array([8.0, 8.0]),
    ...                                np.array([1, 2], dtype=np.uint64))
    >>> b.tolist(), len(set(h[1:].tolist()))
    ([8.0, 2.0, 2.0, 2.0, 2.0], 4)
    """
    q = fabric.info.qps
    if q <= 1:
        return src, dst, nbytes, hashes
    srv = fabric.node_server
    cross = np.flatnonzero(srv[src] != srv[dst])
    if cross.size == 0:
        return src, dst, nbytes, hashes
    keep = np.ones(src.shape[0], dtype=bool)
    keep[cross] = False
    parts_h = [mix_hash(hashes[cross], k) for k in range(q)]
    out_src = np.concatenate([src[keep], np.tile(src[cross], q)])
    out_dst = np.concatenate([dst[keep], np.tile(dst[cross], q)])
    out_nb = np.concatenate([nbytes[keep], np.tile(nbytes[cross] / q, q)])
    out_h = np.concatenate([hashes[keep], *parts_h])
    return out_src, out_dst, out_nb, out_h
