"""A plain two-level fat-tree of hosts, for tests and side-by-side benchmarks.

``host_fat_tree(n)`` has no server internals: ``n`` hosts (GPU nodes, one rank each),
``hosts_per_leaf`` per leaf (default √n), ``spines`` spines (default √n), every leaf joined
to every spine by one link, every link ``bandwidth`` bytes/s and ``latency`` seconds in
each direction. A cross-leaf path is host → leaf → spine → leaf → host (4 links), as in
SimGrid's ``FAT_TREE`` cluster ``2;k,n/k;1,k;1,1``. ECMP picks the spine by hash.

Example
-------
>>> fab = host_fat_tree(16)
>>> fab.n_gpus, fab.n_links, len(fab.route(fab.gpus[0], fab.gpus[15]))
(16, 64, 4)
>>> len(fab.ecmp_paths(fab.gpus[0], fab.gpus[15]))
4
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError, NoRouteError
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.core import Fabric, FabricInfo
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.paths import IntArray, Paths


class HostFatTreeRouter:
    """Up/down routing of :func:`host_fat_tree`: spine chosen by ``hash % spines``."""

    def __init__(self, n: int, per_leaf: int, spines: int, up: IntArray, down: IntArray,
                 leaf_up: NDArray[np.int32], leaf_down: NDArray[np.int32]) -> None:
        self.n, self.per_leaf, self.spines = n, per_leaf, spines
        self.up, self.down, self.leaf_up, self.leaf_down = up, down, leaf_up, leaf_down

    def route_many(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                   link_up: NDArray[np.bool_]) -> Paths:
        if src.size and max(int(src.max()), int(dst.max())) >= self.n:
            raise NoRouteError("host_fat_tree routes between hosts only")
        la, lb = src // self.per_leaf, dst // self.per_leaf
        out = np.full((src.shape[0], 4), -1, dtype=np.int64)
        s = (hashes % np.uint64(self.spines)).astype(np.int64)
        same = la == lb
        out[:, 0] = self.up[src]
        out[same, 1] = self.down[dst[same]]
        x = ~same
        out[x, 1] = self.leaf_up[la[x], s[x]]
        out[x, 2] = self.leaf_down[lb[x], s[x]]
        out[x, 3] = self.down[dst[x]]
        out[src == dst] = -1
        if not link_up.all():
            bad = np.flatnonzero(((out >= 0) & ~link_up[np.maximum(out, 0)]).any(axis=1))
            for i in bad:
                paths = self.ecmp_paths(int(src[i]), int(dst[i]), link_up, 1)
                if not paths:
                    raise NoRouteError(f"no route from host {int(src[i])} to host "
                                       f"{int(dst[i])}: every path crosses a link that is down")
                out[i] = -1
                out[i, : len(paths[0])] = paths[0]
        return Paths.from_padded(out)

    def ecmp_paths(self, src: int, dst: int, link_up: NDArray[np.bool_], limit: int
                   ) -> list[IntArray]:
        if src == dst:
            return [np.zeros(0, dtype=np.int32)]
        la, lb = src // self.per_leaf, dst // self.per_leaf
        cands = ([[self.up[src], self.down[dst]]] if la == lb else
                 [[self.up[src], self.leaf_up[la, s], self.leaf_down[lb, s], self.down[dst]]
                  for s in range(self.spines)])
        out = [np.asarray(c, dtype=np.int32) for c in cands if link_up[np.asarray(c)].all()]
        return out[:limit]


def host_fat_tree(n: int, *, hosts_per_leaf: int | None = None, spines: int | None = None,
                  bandwidth: float = 50e9, latency: float = 1e-6) -> Fabric:
    """A non-blocking two-level fat-tree of ``n`` hosts (see the module docstring).

    Examples
    --------
    >>> host_fat_tree(64).info.extra["leaves"]
    8
    """
    k = hosts_per_leaf or max(1, math.isqrt(n))
    if n < 1 or n % k:
        raise ConfigError(f"n={n} hosts must be a positive multiple of hosts_per_leaf={k}",
                          field="n")
    n_leaves = n // k
    n_sp = spines or k
    b = FabricBuilder()
    hosts = b.add_nodes(NodeKind.GPU, n)
    leaves = b.add_nodes(NodeKind.LEAF, n_leaves)
    sp = b.add_nodes(NodeKind.SPINE, n_sp)
    up, down = b.add_links(hosts, leaves[np.arange(n) // k], bandwidth, latency,
                           LinkKind.NIC_LEAF)
    li = np.repeat(np.arange(n_leaves), n_sp)
    sj = np.tile(np.arange(n_sp), n_leaves)
    fwd, rev = b.add_links(leaves[li], sp[sj], bandwidth, latency, LinkKind.LEAF_SPINE)
    router = HostFatTreeRouter(n, k, n_sp, up, down, fwd.reshape(n_leaves, n_sp),
                               rev.reshape(n_leaves, n_sp))
    info = FabricInfo(system="hosts", topology="fat-tree", tiers=2, servers=0,
                      nic_bandwidth=bandwidth, bisection_bandwidth=min(n // 2, n_leaves * n_sp
                                                                      // 2) * bandwidth,
                      extra={"leaves": n_leaves, "spines": n_sp, "hosts_per_leaf": k})
    return b.build(gpus=hosts, gpu_nics=np.full((n, 1), -1, dtype=np.int32), router=router,
                   info=info)
