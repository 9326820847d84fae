"""Scale-out networks: the interface topology builders implement, and routers.

A scale-out builder (``fat_tree``, ``dragonfly``, ``torus3d``, ...) receives the NIC node
ids of every server (``nics[server, nic]``), adds its switches and links to a
:class:`~fabricsim.fabric.builder.FabricBuilder`, and returns a :class:`Network`: a
router for paths between network-side nodes (NICs and switches) and a summary of what it
built (switches per tier, cables, bisection bandwidth).

:class:`ClusterRouter` joins the server template's intra-server routes with a network
router: GPU → (PCIe) → NIC → network → NIC → (PCIe) → GPU, with the NIC chosen by GPU
affinity.

:class:`ShortestPathRouter` is the generic router (all shortest paths by BFS, ECMP by
hash) for topologies without a structural router; it handles fabrics of a few thousand
switches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import NoRouteError
from fabricsim.fabric.paths import IntArray, Paths, distinct_up_paths

PAD = -1


class NetworkRouter(Protocol):
    """Routes between network-side nodes (NICs and switches) of one scale-out network."""

    def route_padded(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                     link_up: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Paths as rows of link ids padded with -1 (one row per pair)."""
        ...

    def ecmp(self, src: int, dst: int, link_up: NDArray[np.bool_], limit: int
             ) -> list[IntArray]:
        ...


@dataclass
class Network:
    """What a scale-out builder returns."""

    router: NetworkRouter
    switches: Mapping[str, int]
    tiers: int
    bisection_bandwidth: float
    oversubscription: float
    cables: Mapping[str, int] = field(default_factory=dict)
    planes: int = 1
    notes: tuple[str, ...] = ()
    extra: Mapping[str, object] = field(default_factory=dict)
    #: Its switches are radix-``k`` switches (false where a "router" stands for a server's
    #: own ports, as in the torus): the build refuses any that uses more than ``k`` ports.
    radix_bound: bool = True


class ShortestPathRouter:
    """All-shortest-path routing by BFS over a set of links (ECMP by hash).

    ``links`` restricts the graph (e.g. to one scale-out network); ``no_transit`` marks
    nodes that may start or end a path but never be crossed.
    """

    def __init__(self, link_src: IntArray, link_dst: IntArray, links: IntArray,
                 n_nodes: int, no_transit: NDArray[np.bool_] | None = None) -> None:
        self._links = np.asarray(links, dtype=np.int32)
        self._src = link_src[self._links]
        self._dst = link_dst[self._links]
        self._n = n_nodes
        order = np.argsort(self._src, kind="stable")
        self._out_links = self._links[order]
        self._out_dst = self._dst[order]
        self._out_ptr = np.searchsorted(self._src[order], np.arange(n_nodes + 1))
        # reverse adjacency for BFS from a destination
        rorder = np.argsort(self._dst, kind="stable")
        self._in_src = self._src[rorder]
        self._in_links = self._links[rorder]
        self._in_ptr = np.searchsorted(self._dst[rorder], np.arange(n_nodes + 1))
        self._no_transit = (np.zeros(n_nodes, dtype=bool) if no_transit is None
                            else no_transit)
        self._dist: dict[tuple[int, bytes], NDArray[np.int32]] = {}

    def _distances(self, dst: int, link_up: NDArray[np.bool_]) -> NDArray[np.int32]:
        down = np.flatnonzero(~link_up[self._links])
        key = (dst, down.tobytes())
        hit = self._dist.get(key)
        if hit is not None:
            return hit
        dist = np.full(self._n, -1, dtype=np.int32)
        dist[dst] = 0
        frontier = [dst]
        d = 0
        while frontier:
            d += 1
            nxt: list[int] = []
            for v in frontier:
                if v != dst and self._no_transit[v]:
                    continue
                lo, hi = self._in_ptr[v], self._in_ptr[v + 1]
                for u, link in zip(self._in_src[lo:hi], self._in_links[lo:hi], strict=True):
                    u = int(u)
                    if dist[u] < 0 and link_up[link]:
                        dist[u] = d
                        nxt.append(u)
            frontier = nxt
        if len(self._dist) > 4096:
            self._dist.clear()
        self._dist[key] = dist
        return dist

    def _next_hops(self, u: int, dist: NDArray[np.int32], link_up: NDArray[np.bool_],
                   dst: int) -> list[tuple[int, int]]:
        lo, hi = self._out_ptr[u], self._out_ptr[u + 1]
        out = []
        for link, v in zip(self._out_links[lo:hi], self._out_dst[lo:hi], strict=True):
            v = int(v)
            if (dist[v] == dist[u] - 1 and link_up[link]
                    and (v == dst or not self._no_transit[v])):
                out.append((int(link), v))
        return out

    def route_one(self, src: int, dst: int, h: int, link_up: NDArray[np.bool_]) -> list[int]:
        dist = self._distances(dst, link_up)
        if dist[src] < 0:
            raise NoRouteError(f"no route from node {src} to node {dst}")
        path: list[int] = []
        u = src
        while u != dst:
            hops = self._next_hops(u, dist, link_up, dst)
            if not hops:
                raise NoRouteError(f"no route from node {src} to node {dst} "
                                   "(every equal-cost path crosses a link that is down)")
            link, u = hops[h % len(hops)]
            h = (h * 0x9E3779B1 + 0x7F4A7C15) & 0xFFFFFFFF
            path.append(link)
        return path

    def route_padded(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                     link_up: NDArray[np.bool_]) -> NDArray[np.int64]:
        rows = [self.route_one(int(s), int(d), int(h & np.uint64(0xFFFFFFFF)), link_up)
                for s, d, h in zip(src, dst, hashes, strict=True)]
        width = max((len(r) for r in rows), default=0)
        out = np.full((len(rows), width), PAD, dtype=np.int64)
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return out

    def ecmp(self, src: int, dst: int, link_up: NDArray[np.bool_], limit: int
             ) -> list[IntArray]:
        dist = self._distances(dst, link_up)
        if dist[src] < 0:
            raise NoRouteError(f"no route from node {src} to node {dst}")
        out: list[IntArray] = []

        def walk(u: int, acc: list[int]) -> None:
            if len(out) >= limit:
                return
            if u == dst:
                out.append(np.asarray(acc, dtype=np.int32))
                return
            for link, v in self._next_hops(u, dist, link_up, dst):
                walk(v, [*acc, link])

        walk(src, [])
        return out


def concat_padded(parts: list[NDArray[np.int64]]) -> Paths:
    """Join per-row padded segments (each [n, w_i], -1 padded) into Paths."""
    if not parts:
        return Paths(ptr=np.zeros(1, dtype=np.int64), links=np.zeros(0, dtype=np.int32))
    return Paths.from_padded(np.hstack(parts))


@dataclass(frozen=True)
class ScaleOutSpec:
    """What every scale-out builder receives (bytes/s, seconds).

    ``params`` carries topology-specific settings (dragonfly ``groups``, torus ``dims``,
    ...) validated by the builder that reads them.
    """

    radix: int
    port_bw: float
    endpoint_bw: float
    switch_latency: float
    nic_latency: float
    oversubscription: float = 1.0
    tiers: int | None = None
    planes: int | None = None
    params: Mapping[str, object] = field(default_factory=dict)
    #: ``"dmodk"``: deterministic, destination-balanced up/down tables (an InfiniBand subnet
    #: manager's); ``"ecmp"``: per-flow hashing (Ethernet); ``"adaptive"``: every flow
    #: spread over all its equal-cost up/down paths (InfiniBand adaptive routing on NDR/XDR,
    #: Spectrum-X / Ultra Ethernet packet spraying; fat-tree and rail topologies)
    routing: str = "ecmp"


#: Routing of a scale-out network by transport: InfiniBand's subnet manager programs
#: destination-balanced tables (OpenSM ftree/updn d-mod-k); Ethernet hashes each flow over
#: the equal-cost paths (ECMP); AWS SRD sprays every flow's packets over many paths, which
#: balances like a destination-spread table rather than like one hash per flow. Ultra
#: Ethernet sprays each flow's packets over its entropies, which on a fat-tree is what
#: ``adaptive`` models (each flow spread over the up/down paths; the packet backend
#: routes each entropy by its own hash); on other topologies it falls back to ECMP.
#: Slingshot's Rosetta switches route adaptively by default, as ``adaptive`` on a
#: fat-tree; its usual Dragonfly routes minimally over hashed global cables.
ROUTING_BY_TRANSPORT = {"ib": "dmodk", "srd": "dmodk", "roce": "ecmp", "tcp": "ecmp",
                        "uet": "adaptive", "slingshot": "adaptive"}
ROUTINGS = ("dmodk", "ecmp", "adaptive")
#: Topologies that implement ``routing="adaptive"`` (spreading over up/down paths).
ADAPTIVE_TOPOLOGIES = ("fat-tree", "rail-optimized")


class FallbackRouting:
    """Switch-to-switch routes by BFS over the network links a fabric gives :meth:`attach`.

    Structured routers know their endpoints' paths in closed form; routes that start or
    end at a switch (in-network reduction trees) come from here.
    """

    _fallback: ShortestPathRouter | None = None
    _fallback_args: tuple[IntArray, IntArray, IntArray, int] | None = None

    def attach(self, link_src: IntArray, link_dst: IntArray, net_links: IntArray,
               n_nodes: int) -> None:
        """Give the router the whole fabric's arrays for non-endpoint routes."""
        self._fallback_args = (link_src, link_dst, net_links, n_nodes)

    def _fallback_router(self) -> ShortestPathRouter:
        if self._fallback is None:
            if self._fallback_args is None:
                raise NoRouteError("router not attached to a fabric")
            s, d, links, n = self._fallback_args
            self._fallback = ShortestPathRouter(s, d, links, n)
        return self._fallback


class StructuralRouter(FallbackRouting):
    """Base of the vectorised topology routers (dragonfly, torus).

    Subclasses implement :meth:`_route_endpoints` (rows of link ids for NIC pairs, choice
    among equal-cost paths by hash) and :meth:`n_choices`; this base routes every other
    pair (switch to switch) by BFS over the network links given to :meth:`attach`, and
    re-routes rows that cross a link that is down: first over the other equal-cost paths,
    then over the shortest path that avoids every down link (non-minimal).
    """

    width: int = 1

    def __init__(self, endpoints: IntArray, n_nodes_hint: int) -> None:
        size = max(int(endpoints.max()) + 1 if endpoints.size else 0, n_nodes_hint)
        self._pos = np.full(size, -1, dtype=np.int32)
        self._pos[endpoints] = np.arange(endpoints.shape[0], dtype=np.int32)

    # ------------------------------------------------------------- to implement
    def _route_endpoints(self, a: IntArray, b: IntArray, h: NDArray[np.uint64]
                         ) -> NDArray[np.int64]:
        """Rows (width :attr:`width`, -1 padded) for endpoint positions ``a`` -> ``b``."""
        raise NotImplementedError

    def n_choices(self, a: int, b: int) -> int:
        """Number of hash values that enumerate every equal-cost path from ``a`` to ``b``."""
        raise NotImplementedError

    # ------------------------------------------------------------- shared
    def position(self, nodes: IntArray) -> IntArray:
        """Endpoint index of each node (-1 for nodes that are not endpoints)."""
        out = np.full(nodes.shape, -1, dtype=np.int32)
        ok = nodes < self._pos.shape[0]
        out[ok] = self._pos[nodes[ok]]
        return out

    def route_padded(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                     link_up: NDArray[np.bool_]) -> NDArray[np.int64]:
        n = src.shape[0]
        out = np.full((n, self.width), PAD, dtype=np.int64)
        pa, pb = self.position(src), self.position(dst)
        ep = (pa >= 0) & (pb >= 0)
        if ep.all():
            out = self._route_endpoints(pa, pb, hashes)
        else:
            sel = np.flatnonzero(ep)
            if sel.size:
                out[sel] = self._route_endpoints(pa[sel], pb[sel], hashes[sel])
            idx = np.flatnonzero(~ep)
            rows = self._fallback_router().route_padded(src[idx], dst[idx], hashes[idx],
                                                        link_up)
            if rows.shape[1] > out.shape[1]:
                out = np.hstack([out, np.full((n, rows.shape[1] - out.shape[1]), PAD)])
            out[idx] = PAD
            out[idx, : rows.shape[1]] = rows
        if not link_up.all():
            hit = np.flatnonzero(((out >= 0) & ~link_up[np.maximum(out, 0)]).any(axis=1))
            for i in hit:
                row = self._reroute(int(src[i]), int(dst[i]), link_up)
                if row.size > out.shape[1]:
                    out = np.hstack([out, np.full((n, row.size - out.shape[1]), PAD)])
                out[i] = PAD
                out[i, : row.size] = row
        return out

    def _reroute(self, s: int, d: int, link_up: NDArray[np.bool_]) -> IntArray:
        paths = self.ecmp(s, d, link_up, limit=1)
        if paths:
            return paths[0]
        # no minimal path survives: shortest path over the links that are up
        return np.asarray(self._fallback_router().route_one(s, d, 0, link_up), dtype=np.int32)

    def ecmp(self, src: int, dst: int, link_up: NDArray[np.bool_], limit: int
             ) -> list[IntArray]:
        pa = int(self.position(np.array([src], dtype=np.int32))[0])
        pb = int(self.position(np.array([dst], dtype=np.int32))[0])
        if pa < 0 or pb < 0:
            return self._fallback_router().ecmp(src, dst, link_up, limit)
        k = self.n_choices(pa, pb)
        hs = np.arange(k, dtype=np.uint64)
        rows = self._route_endpoints(np.full(k, pa, dtype=np.int32),
                                     np.full(k, pb, dtype=np.int32), hs)
        return distinct_up_paths(rows, link_up, limit)
