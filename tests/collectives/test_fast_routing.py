"""The vectorised ClusterRouter (template path table, RouteSegments) gives exactly the paths
of a per-pair reference built from the same primitives (template.local_paths, the network
router), on random pairs of every node kind; and the fat-tree router's structured routes
for switch endpoints equal BFS shortest paths."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.fabric import build_cluster
from fabricsim.fabric.kinds import NodeKind
from fabricsim.fabric.network import ShortestPathRouter


def _reference(fab, src, dst, hashes):
    """Per-pair reference of ClusterRouter.route_many (the pre-vectorisation logic)."""
    r = fab.router
    t = r.template
    out = []
    for s, d, h in zip(src.tolist(), dst.tolist(), hashes.tolist(), strict=True):
        ss, sd = int(r.node_server[s]), int(r.node_server[d])
        h = np.uint64(h)

        def local(x, srv):
            return x - r.node_base - srv * t.n_nodes

        def tpl(srv, a, b, hh):
            opts = t.local_paths(int(a), int(b))
            p = opts[int(hh % np.uint64(len(opts)))]
            return [int(x) + r.link_base + srv * t.n_links for x in p]

        if ss >= 0 and ss == sd:
            out.append(tpl(ss, local(s, ss), local(d, sd), h))
            continue
        arr = np.array([s], dtype=np.int32)
        s_nic = int(r._nic_for(arr, np.array([h]))[0]) if ss >= 0 else s
        d_nic = (int(r._nic_for(np.array([d], dtype=np.int32), np.array([h >> np.uint64(7)]))[0])
                 if sd >= 0 else d)
        if r.nic_plane is not None and ss >= 0 and sd >= 0:
            ps = r.nic_plane(np.array([s_nic], dtype=np.int32))[0]
            pd = r.nic_plane(np.array([d_nic], dtype=np.int32))[0]
            if ps != pd:
                s_nic = r.node_base + ss * t.n_nodes + local(d_nic, sd)
        path = tpl(ss, local(s, ss), local(s_nic, ss), h) if ss >= 0 else []
        mid = r.net.route_padded(np.array([s_nic], dtype=np.int32),
                                 np.array([d_nic], dtype=np.int32), np.array([h]), fab.link_up)
        path += [int(x) for x in mid[0] if x >= 0]
        if sd >= 0:
            path += tpl(sd, local(d_nic, sd), local(d, sd), h >> np.uint64(13))
        out.append(path)
    return out


@pytest.mark.parametrize("system,nodes,topology", [("dgx-h100", 40, "rail-optimized"),
                                                   ("dgx-a100", 24, "fat-tree")])
def test_route_many_equals_per_pair_reference(system, nodes, topology):
    fab = build_cluster(system, nodes, topology=topology)
    rng = np.random.default_rng(7)
    server_side = np.flatnonzero((fab.node_server >= 0) & np.isin(
        fab.node_kind, [int(NodeKind.GPU), int(NodeKind.NIC)]))
    gpus = fab.gpus
    n = 400
    src = np.concatenate([rng.choice(gpus, n), rng.choice(server_side, n // 2)]).astype(np.int32)
    dst = np.concatenate([rng.choice(gpus, n), rng.choice(server_side, n // 2)]).astype(np.int32)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    hashes = rng.integers(0, 2**63, src.size, dtype=np.uint64)
    got = fab.route_many(src, dst, hashes)
    ref = _reference(fab, src, dst, hashes)
    for i, p in enumerate(ref):
        assert got.row(i).tolist() == p, (i, int(src[i]), int(dst[i]))


def test_segments_tile_to_the_same_paths():
    fab = build_cluster("dgx-h100", 6)
    rng = np.random.default_rng(3)
    src = rng.choice(fab.gpus, 300).astype(np.int32)
    dst = rng.choice(fab.gpus, 300).astype(np.int32)
    h = rng.integers(0, 2**63, 300, dtype=np.uint64)
    seg = fab.router.segments(src, dst, h, fab.link_up)
    p = fab.route_many(src, dst, h)
    assert np.array_equal(seg.paths().links, p.links) and np.array_equal(seg.paths().ptr, p.ptr)
    intra = fab.node_server[src] == fab.node_server[dst]
    assert (seg.server_a[intra] == fab.node_server[src][intra]).all()
    assert (seg.mid[intra] < 0).all()


@pytest.mark.parametrize("nodes,tiers", [(64, None), (64, 3)])
def test_switch_endpoint_routes_are_shortest(nodes, tiers):
    fab = build_cluster("dgx-h100", nodes, tiers=tiers)
    net_kinds = (NodeKind.NIC, NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE)
    nodes_net = np.flatnonzero(np.isin(fab.node_kind, [int(k) for k in net_kinds]))
    rng = np.random.default_rng(11)
    src = rng.choice(nodes_net, 120).astype(np.int32)
    dst = rng.choice(nodes_net, 120).astype(np.int32)
    keep = (src != dst) & ((fab.node_kind[src] != NodeKind.NIC) |
                           (fab.node_kind[dst] != NodeKind.NIC))
    src, dst = src[keep], dst[keep]
    h = rng.integers(0, 2**63, src.size, dtype=np.uint64)
    paths = fab.route_many(src, dst, h)
    from fabricsim.fabric.cluster import NETWORK_LINK_KINDS
    links = np.flatnonzero(np.isin(fab.link_kind, [int(k) for k in NETWORK_LINK_KINDS]))
    bfs = ShortestPathRouter(fab.link_src, fab.link_dst, links.astype(np.int32), fab.n_nodes)
    for i in range(src.size):
        p = paths.row(i)
        # a valid chain from src to dst ...
        assert int(fab.link_src[p[0]]) == src[i] and int(fab.link_dst[p[-1]]) == dst[i]
        assert (fab.link_src[p[1:]] == fab.link_dst[p[:-1]]).all()
        # ... of shortest length
        assert len(p) == len(bfs.route_one(int(src[i]), int(dst[i]), 0, fab.link_up))
