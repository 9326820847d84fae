"""Folded-Clos (fat-tree) scale-out networks: 2-tier leaf–spine and 3-tier with a core.

Endpoints (NIC ports) fill leaf switches in the order given, so the same builder makes a
plain fat-tree (consecutive NICs of consecutive servers share a leaf) and a
rail-optimized one (NIC *i* of every server in a scalable unit on leaf/rail *i*): see
:func:`endpoint_order`. Several planes are independent copies that split the endpoints.

Sizing, for switch radix ``k`` and leaf oversubscription ``r`` (down:up):

* a leaf has ``d = round(k·r/(r+1))`` ports down and ``u = k − d`` up;
* 2 tiers: ``L = ceil(E/d)`` leaves need ``L ≤ k``; ``S`` spines (the smallest divisor of
  ``u`` with ``S ≥ L·u/k``), each leaf joined to each spine by ``u/S`` parallel cables;
* 3 tiers: pods of ``k/2`` leaves and ``u`` spines; spine ``j`` of every pod joins core
  group ``j``; a plane holds at most ``k·d·k/2`` endpoints.

Parallel cables between the same two switches are one link with the summed capacity
(``lanes`` counts them). Routing is structural (up/down, ECMP by hash) and vectorised.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=32, topology="fat-tree")
>>> fab.info.tiers, dict(fab.info.extra["switches"])
(2, {'leaf': 8, 'spine': 4})
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import NoRouteError, TopologyError
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.network import PAD, FallbackRouting, Network
from fabricsim.fabric.paths import IntArray, distinct_up_paths

#: Propagation delay of one cable (s): ~5 ns/m over 10–30 m runs in a data hall.
CABLE_DELAY = 100e-9


def _smallest_divisor_at_least(n: int, lo: int) -> int:
    for s in range(max(1, lo), n + 1):
        if n % s == 0:
            return s
    return n


def leaf_split(radix: int, oversubscription: float) -> tuple[int, int]:
    """(down, up) ports of a leaf of ``radix`` ports at ``oversubscription`` (down:up)."""
    if oversubscription < 1:
        raise TopologyError(f"oversubscription must be >= 1 (down:up), got {oversubscription}",
                            field="oversubscription")
    down = round(radix * oversubscription / (oversubscription + 1))
    down = min(max(down, 1), radix - 1)
    return down, radix - down


@dataclass
class FatTreePlane:
    """Index arrays of one plane, enough to route without searching."""

    tiers: int
    down: int
    up: int
    pod_leaves: int
    pods: int
    spines_per_pod: int
    cores_per_group: int
    leaf_of: IntArray  # endpoint -> leaf index
    up_nic: IntArray
    down_nic: IntArray
    leaf_up: NDArray[np.int32]  # [L, S]
    leaf_down: NDArray[np.int32]  # [L, S]
    spine_up: NDArray[np.int32]  # [pods, S, C]
    spine_down: NDArray[np.int32]  # [pods, S, C]
    leaves: IntArray
    spines: IntArray
    cores: IntArray
    spine_up_ports: int = 0
    ratio: float = 1.0  # down:up bandwidth of the fullest leaf, as built
    uplink_cables: int = 0  # leaf-to-spine cables of the plane
    #: With separate parallel cables (``split_cables``): every cable's link id,
    #: ``[L, S, lanes]`` / ``[pods, S, C, lanes]`` padded with -1, and each leaf's count.
    #: ``leaf_up`` etc. then hold cable 0. ``None`` when parallel cables are one link.
    leaf_up_cables: NDArray[np.int32] | None = None
    leaf_down_cables: NDArray[np.int32] | None = None
    spine_up_cables: NDArray[np.int32] | None = None
    spine_down_cables: NDArray[np.int32] | None = None
    lanes_leaf: NDArray[np.int16] | None = None


def build_plane(b: FabricBuilder, endpoints: IntArray, *, radix: int, port_bw: float,
                endpoint_bw: float, switch_latency: float, nic_latency: float,
                oversubscription: float, tiers: int | None, plane: int, pod_offset: int,
                leaf_of: IntArray | None = None,
                node_kinds: tuple[NodeKind, NodeKind, NodeKind] = (
                    NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE),
                link_kinds: tuple[LinkKind, LinkKind, LinkKind] = (
                    LinkKind.NIC_LEAF, LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE),
                split_cables: bool = False,
                ) -> FatTreePlane:
    """Add one fat-tree plane over ``endpoints`` (NIC node ids) to the builder.

    ``node_kinds``/``link_kinds`` (leaf, spine, core) let the storage network reuse it.
    ``split_cables``: parallel cables between two switches are separate links (one port
    each), so per-flow hashing can collide on them; otherwise one link with ``lanes``.

    ``leaf_of[i]`` is the leaf of endpoint ``i`` (default: ``d`` consecutive endpoints per
    leaf); a leaf must not get more than its ``d`` down ports.
    """
    e = int(endpoints.shape[0])
    k = radix
    d, u = leaf_split(k, oversubscription)
    if leaf_of is None:
        leaf_of = (np.arange(e, dtype=np.int32) // d).astype(np.int32)
    n_leaves = int(leaf_of.max()) + 1 if e else 0
    if e and int(np.bincount(leaf_of).max()) > d:
        raise TopologyError(f"a leaf was given more than its {d} down ports", field="radix")
    max2 = k * d
    max3 = (k // 2) * k * d
    # Uplinks carry what the leaf's endpoints can send: size them to the fullest leaf's
    # down bandwidth (partly filled leaves, or NICs slower than the switch ports, need
    # fewer), at the asked oversubscription, never more than the free ports.
    ep_bw = min(endpoint_bw, port_bw)
    max_load = int(np.bincount(leaf_of).max()) if e else 0
    u = max(1, min(u, math.ceil(max_load * ep_bw / (oversubscription * port_bw) - 1e-9)))
    ratio = max_load * ep_bw / (u * port_bw) if max_load else 1.0
    if tiers is None:
        tiers = 1 if n_leaves <= 1 else 2 if n_leaves <= k else 3
    if tiers == 2 and n_leaves > k:
        raise TopologyError(
            f"2 tiers of radix-{k} switches at {oversubscription:g}:1 hold at most {max2} "
            f"endpoints per plane, {e} asked; use tiers=3, more planes or a larger radix",
            field="tiers")
    if tiers == 3 and (e > max3 or n_leaves > _max_leaves(k)):
        raise TopologyError(
            f"3 tiers of radix-{k} switches at {oversubscription:g}:1 hold at most {max3} "
            f"endpoints in {_max_leaves(k)} leaves per plane; {e} endpoints in {n_leaves} "
            f"leaves asked: each core switch would need {math.ceil(n_leaves / (k // 2))} "
            f"ports (one per pod); use planes >= {math.ceil(e / max3)} or a larger radix",
            field="planes")
    if tiers not in (1, 2, 3) or (tiers == 1 and n_leaves > 1):
        raise TopologyError(f"fat-tree tiers must be 2 or 3, got {tiers}", field="tiers")
    spine_up_ports = 0
    if tiers == 1:  # one leaf holds every endpoint: no spine needed
        pod_leaves, pods, n_sp, cores_pg = max(n_leaves, 1), 1, 0, 0
    elif tiers == 2:
        pod_leaves = n_leaves
        pods = 1
        n_sp = _smallest_divisor_at_least(u, math.ceil(n_leaves * u / k))
        cores_pg = 0
    else:
        pod_leaves = k // 2
        pods = math.ceil(n_leaves / pod_leaves)
        n_sp = u
        # a pod spine has one cable from each leaf of its pod; as many go up (1:1 there)
        spine_up_ports = min(k - pod_leaves, min(pod_leaves, n_leaves))
        cores_pg = _smallest_divisor_at_least(spine_up_ports,
                                              math.ceil(pods * spine_up_ports / k))
    lanes_ls = u // n_sp if n_sp else 0
    # leaves that are partly filled get fewer parallel cables to each spine (2 tiers)
    loads = np.bincount(leaf_of, minlength=n_leaves) if e else np.zeros(n_leaves, np.int64)
    if tiers == 2 and n_sp:
        need = np.ceil(loads * ep_bw / (oversubscription * port_bw) - 1e-9)
        lanes_leaf = np.clip(np.ceil(need / n_sp), 1, lanes_ls).astype(np.int16)
    else:
        lanes_leaf = np.full(n_leaves, max(lanes_ls, 1), dtype=np.int16)
    leaf_idx = np.arange(n_leaves, dtype=np.int32)
    leaves = b.add_nodes(node_kinds[0], n_leaves, group=pod_offset + leaf_idx // pod_leaves,
                         local=leaf_idx % pod_leaves)
    sp_idx = np.arange(pods * n_sp, dtype=np.int32)
    spines = b.add_nodes(node_kinds[1], pods * n_sp, group=pod_offset + sp_idx // n_sp,
                         local=sp_idx % n_sp)
    if tiers == 3:
        c_idx = np.arange(n_sp * cores_pg, dtype=np.int32)
        cores = b.add_nodes(node_kinds[2], n_sp * cores_pg, group=plane * n_sp + c_idx //
                            cores_pg, local=c_idx % cores_pg)
    else:
        cores = np.zeros(0, dtype=np.int32)

    # latency: charge the sending NIC and the leaf on the way up, the NIC on the way down
    up_nic, down_nic = b.add_links(
        endpoints, leaves[leaf_of], min(endpoint_bw, port_bw),
        nic_latency + CABLE_DELAY + switch_latency, link_kinds[0],
        latency_back=CABLE_DELAY + nic_latency)

    li = np.repeat(leaf_idx, n_sp)
    sj = np.tile(np.arange(n_sp, dtype=np.int32), n_leaves)
    pod_of_leaf = li // pod_leaves
    lanes_li = lanes_leaf[li]
    cables: dict[str, NDArray[np.int32]] = {}
    split = split_cables and n_sp > 0 and int(lanes_li.max(initial=1)) > 1
    if split:  # one link per cable: pair p's cables are links p*lmax .. p*lmax+lanes-1
        lmax = int(lanes_li.max())
        pair = np.repeat(np.arange(li.size), lanes_li)
        k_of = np.arange(pair.size) - np.repeat(np.cumsum(lanes_li) - lanes_li, lanes_li)
        fwd1, rev1 = b.add_links(leaves[li[pair]], spines[(pod_of_leaf * n_sp + sj)[pair]],
                                 port_bw, CABLE_DELAY + switch_latency, link_kinds[1])
        up_c = np.full((li.size, lmax), -1, dtype=np.int32)
        dn_c = np.full((li.size, lmax), -1, dtype=np.int32)
        up_c[pair, k_of], dn_c[pair, k_of] = fwd1, rev1
        cables["leaf_up"] = up_c.reshape(n_leaves, n_sp, lmax)
        cables["leaf_down"] = dn_c.reshape(n_leaves, n_sp, lmax)
        leaf_up, leaf_down = cables["leaf_up"][:, :, 0], cables["leaf_down"][:, :, 0]
    else:
        fwd, rev = b.add_links(leaves[li], spines[pod_of_leaf * n_sp + sj],
                               port_bw * lanes_li, CABLE_DELAY + switch_latency,
                               link_kinds[1], lanes=lanes_li)
        leaf_up = fwd.reshape(n_leaves, n_sp)
        leaf_down = rev.reshape(n_leaves, n_sp)
    if tiers == 3:
        lanes_sc = spine_up_ports // cores_pg
        p = np.repeat(np.arange(pods, dtype=np.int32), n_sp * cores_pg)
        j = np.tile(np.repeat(np.arange(n_sp, dtype=np.int32), cores_pg), pods)
        c = np.tile(np.arange(cores_pg, dtype=np.int32), pods * n_sp)
        if split_cables and lanes_sc > 1:
            rep = np.repeat(np.arange(p.size), lanes_sc)
            fwd, rev = b.add_links(spines[(p * n_sp + j)[rep]], cores[(j * cores_pg + c)[rep]],
                                   port_bw, CABLE_DELAY + switch_latency, link_kinds[2])
            cables["spine_up"] = fwd.reshape(pods, n_sp, cores_pg, lanes_sc)
            cables["spine_down"] = rev.reshape(pods, n_sp, cores_pg, lanes_sc)
            spine_up = cables["spine_up"][..., 0]
            spine_down = cables["spine_down"][..., 0]
        else:
            fwd, rev = b.add_links(spines[p * n_sp + j], cores[j * cores_pg + c],
                                   port_bw * lanes_sc, CABLE_DELAY + switch_latency,
                                   link_kinds[2], lanes=lanes_sc)
            spine_up = fwd.reshape(pods, n_sp, cores_pg)
            spine_down = rev.reshape(pods, n_sp, cores_pg)
    else:
        spine_up = np.zeros((1, n_sp, 0), dtype=np.int32)
        spine_down = np.zeros((1, n_sp, 0), dtype=np.int32)
    return FatTreePlane(tiers=tiers, down=d, up=u if n_sp else 0, pod_leaves=pod_leaves, pods=pods,
                        spines_per_pod=n_sp, cores_per_group=cores_pg, leaf_of=leaf_of,
                        up_nic=up_nic, down_nic=down_nic, leaf_up=leaf_up, leaf_down=leaf_down,
                        spine_up=spine_up, spine_down=spine_down, leaves=leaves, spines=spines,
                        cores=cores, spine_up_ports=spine_up_ports, ratio=ratio,
                        uplink_cables=int(lanes_li.sum()),
                        leaf_up_cables=cables.get("leaf_up"),
                        leaf_down_cables=cables.get("leaf_down"),
                        spine_up_cables=cables.get("spine_up"),
                        spine_down_cables=cables.get("spine_down"),
                        lanes_leaf=lanes_leaf if "leaf_up" in cables else None)


class FatTreeRouter(FallbackRouting):
    """Up/down routing over one or more fat-tree planes, vectorised.

    ``routing="ecmp"`` picks spine and core by the flow's hash (Ethernet); ``"dmodk"`` by
    the destination (an InfiniBand subnet manager's table: the spine is the destination's
    index modulo the spines, the core the quotient modulo the cores), so every
    spine-to-leaf downlink serves its own destinations and flows to different destinations
    spread evenly. ``"adaptive"`` routes like ``"ecmp"`` but declares :meth:`spray_groups`:
    the links a flow's bytes spread over evenly (adaptive routing, packet spraying), which
    the analytic backend charges as one pool.
    """

    def spray_groups(self) -> list[NDArray[np.int64]]:
        """Under ``routing="adaptive"``, the sets of links among which a flow's bytes spread
        evenly: a leaf's uplinks, the downlinks into a leaf, a pod's spine-to-core links and
        the core-to-spine links into a pod (each set's links are equal-cost alternatives
        for every flow that uses one of them). Empty under other routings.

        >>> from fabricsim.fabric import build_cluster
        >>> fab = build_cluster("dgx-h100", 32, params={"routing": "adaptive"})
        >>> len(fab.router.spray_groups()) > 0
        True
        """
        if self.routing != "adaptive":
            return []
        out: list[NDArray[np.int64]] = []
        for pl in self.planes:
            for arr in (pl.leaf_up, pl.leaf_down):
                for row in arr:
                    g = np.unique(row[row >= 0]).astype(np.int64)
                    if g.size > 1:
                        out.append(g)
            for arr in (pl.spine_up, pl.spine_down):
                for pod in arr:
                    g = np.unique(pod[pod >= 0]).astype(np.int64)
                    if g.size > 1:
                        out.append(g)
        return out

    def __init__(self, planes: list[FatTreePlane], endpoints: list[IntArray],
                 n_nodes_hint: int, routing: str = "ecmp") -> None:
        self.planes = planes
        self.routing = routing
        size = max([int(ep.max()) + 1 for ep in endpoints if ep.size] + [n_nodes_hint])
        self._plane_of = np.full(size, -1, dtype=np.int32)
        self._pos = np.full(size, -1, dtype=np.int32)
        for p, ep in enumerate(endpoints):
            self._plane_of[ep] = p
            self._pos[ep] = np.arange(ep.shape[0], dtype=np.int32)

    def plane_of(self, nodes: IntArray) -> IntArray:
        ok = nodes < self._plane_of.shape[0]
        out = np.full(nodes.shape, -1, dtype=np.int32)
        out[ok] = self._plane_of[nodes[ok]]
        return out

    def route_padded(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                     link_up: NDArray[np.bool_]) -> NDArray[np.int64]:
        n = src.shape[0]
        out = np.full((n, 6), PAD, dtype=np.int64)
        ps, pd = self.plane_of(src), self.plane_of(dst)
        nic_pair = (ps >= 0) & (pd >= 0) & (ps == pd)
        other = ~nic_pair
        for p, plane in enumerate(self.planes):
            sel = np.flatnonzero(nic_pair & (ps == p))
            if sel.size:
                out[sel] = self._route_plane(plane, self._pos[src[sel]], self._pos[dst[sel]],
                                             hashes[sel])
        if other.any():
            idx = np.flatnonzero(other)
            bad = idx[(ps[idx] >= 0) & (pd[idx] >= 0)]
            if bad.size:
                raise NoRouteError(
                    f"NIC nodes {int(src[bad[0]])} and {int(dst[bad[0]])} are on different "
                    "planes; a plane is a separate network")
            fb = self._fallback_router()
            rows = fb.route_padded(src[idx], dst[idx], hashes[idx], link_up)
            if rows.shape[1] > out.shape[1]:
                out = np.hstack([out, np.full((n, rows.shape[1] - out.shape[1]), PAD)])
            out[idx, : rows.shape[1]] = rows
            out[idx, rows.shape[1]:] = PAD
        # honour links that are down: re-hash rows that cross one
        if not link_up.all():
            hit = np.flatnonzero(((out >= 0) & ~link_up[np.maximum(out, 0)]).any(axis=1))
            for i in hit:
                out[i] = self._reroute(int(src[i]), int(dst[i]), link_up, out.shape[1])
        return out

    def _reroute(self, s: int, d: int, link_up: NDArray[np.bool_], width: int
                 ) -> NDArray[np.int64]:
        paths = self.ecmp(s, d, link_up, limit=1)
        if not paths:
            raise NoRouteError(f"no route from node {s} to node {d}: every path crosses a "
                               "link that is down")
        row = np.full(width, PAD, dtype=np.int64)
        row[: len(paths[0])] = paths[0]
        return row

    def _route_plane(self, pl: FatTreePlane, a: IntArray, b: IntArray,
                     h: NDArray[np.uint64], every_path: bool = False) -> NDArray[np.int64]:
        n = a.shape[0]
        out = np.full((n, 6), PAD, dtype=np.int64)
        la, lb = pl.leaf_of[a], pl.leaf_of[b]
        out[:, 0] = pl.up_nic[a]
        same_leaf = la == lb
        pa, pb = la // pl.pod_leaves, lb // pl.pod_leaves
        s = (h % np.uint64(max(pl.spines_per_pod, 1))).astype(np.int64)
        if self.routing == "dmodk" and not every_path:  # the destination picks the way up
            h = b.astype(np.uint64)
            s = (h % np.uint64(max(pl.spines_per_pod, 1))).astype(np.int64)
        same_pod = (~same_leaf) & (pa == pb)
        cross = (~same_leaf) & (pa != pb)
        # parallel cables as separate links: each hop picks its cable by other hash bits
        # (every_path: by the path index above spines x cores, so that the first paths
        # cover every cable equally)
        if every_path:
            k_up = k_dn = k_sc = (h // np.uint64(max(pl.spines_per_pod, 1) *
                                        max(pl.cores_per_group, 1))).astype(np.int64)
        else:
            k_up = (h >> np.uint64(24)).astype(np.int64)
            k_dn = (h >> np.uint64(40)).astype(np.int64)
            k_sc = (h >> np.uint64(52)).astype(np.int64)

        def cable(i: NDArray[np.bool_], merged: NDArray[np.int32],
                  split: NDArray[np.int32] | None, leaf: IntArray,
                  k: NDArray[np.int64]) -> NDArray[np.int64]:
            """The leaf-spine link of rows ``i``: the merged link, or the hashed cable."""
            if split is None or pl.lanes_leaf is None:
                return merged[leaf[i], s[i]].astype(np.int64)
            picked: NDArray[np.int64] = split[
                leaf[i], s[i], k[i] % pl.lanes_leaf[leaf[i]]].astype(np.int64)
            return picked

        def up(i: NDArray[np.bool_]) -> NDArray[np.int64]:
            return cable(i, pl.leaf_up, pl.leaf_up_cables, la, k_up)

        def down(i: NDArray[np.bool_]) -> NDArray[np.int64]:
            return cable(i, pl.leaf_down, pl.leaf_down_cables, lb, k_dn)

        # same leaf: up, down
        out[same_leaf, 1] = pl.down_nic[b[same_leaf]]
        # same pod: up, leaf->spine, spine->leaf, down
        i = same_pod
        out[i, 1] = up(i)
        out[i, 2] = down(i)
        out[i, 3] = pl.down_nic[b[i]]
        if cross.any():
            i = cross
            c = ((h[i] // np.uint64(max(pl.spines_per_pod, 1))) %
                 np.uint64(max(pl.cores_per_group, 1))).astype(np.int64)
            out[i, 1] = up(i)
            if pl.spine_up_cables is not None and pl.spine_down_cables is not None:
                lsc = pl.spine_up_cables.shape[3]
                out[i, 2] = pl.spine_up_cables[pa[i], s[i], c, k_sc[i] % lsc]
                out[i, 3] = pl.spine_down_cables[pb[i], s[i], c, k_up[i] % lsc]
            else:
                out[i, 2] = pl.spine_up[pa[i], s[i], c]
                out[i, 3] = pl.spine_down[pb[i], s[i], c]
            out[i, 4] = down(i)
            out[i, 5] = pl.down_nic[b[i]]
        return out

    def ecmp(self, src: int, dst: int, link_up: NDArray[np.bool_], limit: int
             ) -> list[IntArray]:
        ps = self.plane_of(np.array([src], dtype=np.int32))[0]
        pd = self.plane_of(np.array([dst], dtype=np.int32))[0]
        if ps < 0 or pd < 0 or ps != pd:
            return self._fallback_router().ecmp(src, dst, link_up, limit)
        pl = self.planes[ps]
        width = max(pl.spines_per_pod, 1) * max(pl.cores_per_group, 1)
        lanes = [x.shape[-1] for x in (pl.leaf_up_cables, pl.spine_up_cables)
                 if x is not None]
        width *= max(lanes, default=1)  # every parallel cable is its own path
        hs = np.arange(width, dtype=np.uint64)
        a = np.full(width, self._pos[src], dtype=np.int32)
        b = np.full(width, self._pos[dst], dtype=np.int32)
        rows = self._route_plane(pl, a, b, hs, every_path=True)
        return distinct_up_paths(rows, link_up, limit)


def endpoint_order(nics: NDArray[np.int32], *, rail_optimized: bool, leaf_down: int
                   ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """Order NIC node ids (``nics[server, i]``) and give each its leaf.

    Plain: ``leaf_down`` consecutive NICs (server-major) share a leaf. Rail-optimized:
    servers form scalable units of ``leaf_down`` servers; within a unit, NIC *i* of every
    server is on one leaf (rail *i*), also in a last, partly filled unit. A cluster smaller
    than one unit puts :func:`rails_per_leaf` whole rails on each leaf (two DGX H100 on one
    64-port leaf, not eight leaves of two ports each); NIC *i* of every server still
    shares a leaf. A server with more NICs than a leaf has down ports (a GB200 NVL72 rack)
    is laid out plainly.
    """
    servers, per = nics.shape
    flat = nics.reshape(-1).astype(np.int32)
    if not rail_optimized or per == 1 or per > leaf_down:
        # a server with more NICs than a leaf has ports (a GB200 NVL72 rack's 72) fills
        # leaves of its own: its NICs into a normal leaf layer, rails meaningless
        return flat, (np.arange(flat.size, dtype=np.int32) // leaf_down).astype(np.int32)
    su = max(1, leaf_down)
    units = -(-servers // su)
    group = rails_per_leaf(servers, per, leaf_down)
    srv = np.arange(servers, dtype=np.int32)
    unit = srv // su
    # order: unit-major, then rail, then server within the unit
    order_srv = np.concatenate([np.tile(srv[unit == u], per) for u in range(units)])
    order_rail = np.concatenate([np.repeat(np.arange(per, dtype=np.int32),
                                           int((unit == u).sum())) for u in range(units)])
    leaf = (order_srv // su) * per + order_rail // group
    return nics[order_srv, order_rail].astype(np.int32), leaf.astype(np.int32)


def rails_per_leaf(servers: int, rails: int, leaf_down: int) -> int:
    """Whole rails one leaf of a rail-optimized plane holds: 1 from one scalable unit
    (``leaf_down`` servers) up; below it, as many as its down ports take (at most all).

    Examples
    --------
    >>> rails_per_leaf(2, 8, 32), rails_per_leaf(12, 8, 32), rails_per_leaf(40, 8, 32)
    (8, 2, 1)
    """
    if servers >= leaf_down or servers < 1:
        return 1
    return max(1, min(rails, leaf_down // servers))


def _plane_leaves(servers: int, rails: int, radix: int, oversubscription: float,
                  rail_optimized: bool) -> int:
    """Leaves one plane needs for ``servers`` x ``rails`` NICs (as :func:`endpoint_order`)."""
    d = leaf_split(radix, oversubscription)[0]
    if rail_optimized and 1 < rails <= d:
        return -(-servers // d) * -(-rails // rails_per_leaf(servers, rails, d))
    return -(-(servers * rails) // d)


def _max_leaves(radix: int) -> int:
    """Leaves one plane of 3 tiers can hold: ``k`` pods of ``k/2`` leaves.

    A core switch has one port towards every pod, so a plane holds at most ``k`` pods.
    """
    return radix * (radix // 2)


def _tier_limit_text(radix: int) -> str:
    return (f"the {_max_leaves(radix)} that radix-{radix} core switches can reach "
            f"(one core port per pod of {radix // 2} leaves)")


def _plane_fits(servers: int, rails: int, radix: int, oversubscription: float,
                rail_optimized: bool) -> bool:
    leaves = _plane_leaves(servers, rails, radix, oversubscription, rail_optimized)
    return leaves <= _max_leaves(radix)


def _smallest_fitting_radix(servers: int, per: int, radix: int, oversubscription: float,
                            rail_optimized: bool, planes: int | None) -> int:
    """The smallest even radix above ``radix`` at which the build fits (``planes`` or any)."""
    choices = [planes] if planes else [p for p in range(1, per + 1) if per % p == 0]
    k = radix + 1 + (radix + 1) % 2
    while not any(_plane_fits(servers, per // p, k, oversubscription, rail_optimized)
                  for p in choices):
        k += 2
    return k


def fat_tree_network(b: FabricBuilder, nics: NDArray[np.int32], *, radix: int, port_bw: float,
                     endpoint_bw: float, switch_latency: float, nic_latency: float,
                     oversubscription: float = 1.0, tiers: int | None = None,
                     planes: int | None = None, rail_optimized: bool = False,
                     routing: str = "ecmp") -> Network:
    """Build a (multi-plane) fat-tree over ``nics[server, i]`` and return its Network."""
    servers, per = nics.shape
    if radix < 4:
        raise TopologyError(f"switch radix must be >= 4, got {radix}", field="radix")
    total = servers * per
    if planes is None:
        planes = next((p for p in range(1, per + 1) if per % p == 0 and _plane_fits(
            servers, per // p, radix, oversubscription, rail_optimized)), 0)
        if not planes:
            k = _smallest_fitting_radix(servers, per, radix, oversubscription, rail_optimized,
                                        None)
            leaves = _plane_leaves(servers, 1, radix, oversubscription, False)
            raise TopologyError(
                f"{total} NIC ports need {leaves} leaves per plane even with one plane per "
                f"NIC, more than {_tier_limit_text(radix)}; the smallest radix that fits is "
                f"{k}", field="radix")
    if planes < 1 or per % planes:
        raise TopologyError(f"planes must divide the {per} NICs per server, got {planes}",
                            field="planes")
    if not _plane_fits(servers, per // planes, radix, oversubscription, rail_optimized):
        k = _smallest_fitting_radix(servers, per, radix, oversubscription, rail_optimized,
                                    planes)
        n_leaves = _plane_leaves(servers, per // planes, radix, oversubscription, rail_optimized)
        raise TopologyError(
            f"{planes} plane(s) of radix-{radix} switches at {oversubscription:g}:1: each plane "
            f"needs {n_leaves} leaves, more than {_tier_limit_text(radix)}; the smallest "
            f"radix that fits is {k}", field="radix")
    d, _u = leaf_split(radix, oversubscription)
    rails_per_plane = per // planes
    built: list[FatTreePlane] = []
    endpoints: list[IntArray] = []
    pod_offset = 0
    for p in range(planes):
        sub = nics[:, p * rails_per_plane : (p + 1) * rails_per_plane]
        ep, leaf_of = endpoint_order(sub, rail_optimized=rail_optimized, leaf_down=d)
        pl = build_plane(b, ep, radix=radix, port_bw=port_bw, endpoint_bw=endpoint_bw,
                         switch_latency=switch_latency, nic_latency=nic_latency,
                         oversubscription=oversubscription, tiers=tiers, plane=p,
                         pod_offset=pod_offset, leaf_of=leaf_of,
                         split_cables=routing == "ecmp")
        pod_offset += pl.pods
        built.append(pl)
        endpoints.append(ep)
    router = FatTreeRouter(built, endpoints, b.n_nodes, routing=routing)
    n_tiers = built[0].tiers
    switches = {"leaf": sum(p.leaves.size for p in built),
                "spine": sum(p.spines.size for p in built)}
    if n_tiers == 3:
        switches["core"] = sum(p.cores.size for p in built)
    # bisection (one direction): half of the capacity crossing the narrowest tier
    ep_bw = min(endpoint_bw, port_bw)
    bis = total / 2 * ep_bw
    if any(p.spines_per_pod for p in built):  # a single leaf is non-blocking inside
        leaf_up_bw = sum(p.uplink_cables for p in built) * port_bw
        bis = min(bis, leaf_up_bw / 2)
    if n_tiers == 3:
        core_bw = sum(p.pods * p.spines_per_pod * p.spine_up_ports for p in built)
        bis = min(bis, core_bw * port_bw / 2)
    cables = {"nic-leaf": total,
              "leaf-spine": int(sum(p.uplink_cables for p in built)),
              "spine-core": int(sum(p.pods * p.spines_per_pod * p.spine_up_ports
                                    for p in built) if n_tiers == 3 else 0)}
    eff_os = max(p.ratio for p in built)
    notes: tuple[str, ...] = ()
    if eff_os > oversubscription * 1.01:  # the leaf's ports cannot split as asked
        notes = (f"oversubscription {eff_os:.4g}:1, not the {oversubscription:g}:1 asked: a "
                 f"radix-{radix} leaf splits its ports {d} down / {radix - d} up; choose a "
                 f"radix that divides as asked",)
    return Network(router=router, switches=switches, tiers=n_tiers, bisection_bandwidth=bis,
                   oversubscription=eff_os, cables=cables, planes=planes, notes=notes)
