"""Routing: intra-server, rail alignment, ECMP spread, dragonfly/torus/NVLink domain
paths, link failures, and exports."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fabric_checks import assert_valid_paths, kinds_of

from fabricsim.errors import NoRouteError
from fabricsim.fabric import LinkKind, NodeKind, build_cluster


@pytest.fixture(scope="module")
def rail():
    return build_cluster("dgx-h100", nodes=64, topology="rail-optimized")


def test_same_server_pair_uses_nvlink_only(rail):
    for h in range(8):
        path = rail.route(rail.gpus[0], rail.gpus[5], flow_hash=h)
        assert set(kinds_of(rail, path)) == {"nvlink"} and len(path) == 2


def test_rail_aligned_pair_crosses_one_leaf(rail):
    a, b = rail.gpus[3], rail.gpus[8 * 7 + 3]  # GPU 3 of servers 0 and 7: same unit, rail 3
    path = rail.route(a, b)
    ks = kinds_of(rail, path)
    assert ks.count("nic-leaf") == 2 and "leaf-spine" not in ks
    leaves = {int(rail.link_dst[x]) for x in path if rail.node_kind[rail.link_dst[x]] ==
              NodeKind.LEAF}
    assert len(leaves) == 1


def test_ecmp_spreads_over_all_spines():
    eth = build_cluster("dgx-h100", nodes=64, topology="rail-optimized", fabric="roce-400g")
    a, b = eth.gpus[3], eth.gpus[8 * 40 + 3]  # different scalable units
    n = 512
    paths = eth.route_many(np.full(n, a), np.full(n, b), np.arange(n, dtype=np.uint64) * 7919)
    spines = {int(eth.link_dst[x]) for x in paths.links
              if eth.node_kind[eth.link_dst[x]] == NodeKind.SPINE}
    assert len(spines) == eth.count(NodeKind.SPINE)


def test_infiniband_tables_give_one_path_per_destination(rail):
    a, b = rail.gpus[3], rail.gpus[8 * 40 + 3]
    n = 64
    paths = rail.route_many(np.full(n, a), np.full(n, b), np.arange(n, dtype=np.uint64) * 7919)
    assert len({tuple(paths.row(i).tolist()) for i in range(n)}) == 1


def test_down_spine_link_is_avoided(rail):
    a, b = rail.gpus[3], rail.gpus[8 * 40 + 3]
    path = rail.route(a, b)
    ls = next(int(x) for x in path if rail.link_kind[x] == LinkKind.LEAF_SPINE)
    broken = rail.with_links_down([ls])
    for h in range(32):
        p2 = broken.route(a, b, flow_hash=h)
        assert ls not in p2.tolist()
        assert_valid_paths(broken, np.array([a]), np.array([b]),
                           broken.route_many(np.array([a]), np.array([b]),
                                             np.array([h], dtype=np.uint64)))


def test_only_nic_link_down_raises(rail):
    a, b = rail.gpus[3], rail.gpus[8 * 40 + 3]
    up = next(int(x) for x in rail.route(a, b) if rail.link_kind[x] == LinkKind.NIC_LEAF)
    with pytest.raises(NoRouteError):
        rail.with_links_down([up]).route(a, b)


def test_dragonfly_minimal_paths_and_ecmp():
    params = {"groups": 5, "routers_per_group": 4, "hosts_per_router": 4,
              "global_links_per_router": 2}
    fab = build_cluster("dgx-h100", nodes=9, topology="dragonfly", radix=12, params=params)
    g = fab.gpus
    src, dst = np.repeat(g, g.size), np.tile(g, g.size)
    paths = fab.route_many(src, dst)
    for i in range(len(paths)):
        ks = kinds_of(fab, paths.row(i))
        assert ks.count("dragonfly-global") <= 1 and ks.count("dragonfly-local") <= 2
    # a pair in different groups: ECMP covers all m = 2 global cables between the groups
    a, b = g[0], g[-1]
    ecmp = fab.ecmp_paths(a, b, limit=64)
    globals_ = {int(x) for p in ecmp for x in p if fab.link_kind[x] == LinkKind.GLOBAL}
    assert len(globals_) == 2
    # every global cable between those groups down: routed non-minimally, still valid
    broken = fab.with_links_down(sorted(globals_))
    p = broken.route_many(np.array([a]), np.array([b]))
    assert_valid_paths(broken, np.array([a]), np.array([b]), p)
    assert not set(p.row(0).tolist()) & globals_
    assert kinds_of(broken, p.row(0)).count("dragonfly-global") == 2


def test_torus_dimension_order_minimal():
    fab = build_cluster("dgx-h100", nodes=64, topology="torus3d")
    router = fab.router.net
    g = fab.gpus
    rng = np.random.default_rng(0)
    src, dst = rng.choice(g, 300), rng.choice(g, 300)
    paths = fab.route_many(src, dst)
    assert_valid_paths(fab, src, dst, paths)
    srv_a, srv_b = fab.node_server[src], fab.node_server[dst]
    ca, cb = router.coords(srv_a), router.coords(srv_b)
    delta = np.abs(ca - cb)
    hops = np.minimum(delta, 4 - delta).sum(axis=1)
    n_torus = np.array([kinds_of(fab, paths.row(i)).count("torus") for i in range(len(paths))])
    assert np.array_equal(n_torus[srv_a != srv_b], hops[srv_a != srv_b])
    # opposite corners of a 4x4x4 torus: 2 ways per dimension x 2 orders -> 16 paths
    a = fab.gpus[0]
    b = fab.gpus[8 * (2 + 2 * 4 + 2 * 16)]
    assert len(fab.ecmp_paths(a, b, limit=64)) == 16


def test_nvlink_domain_routes_over_nvlink():
    fab = build_cluster("gb200-nvl72", nodes=10, params={"nvlink_domain": 576})
    assert fab.info.nvlink_domain_gpus == 576
    a = fab.gpus[5]
    same_domain = fab.gpus[72 * 7 + 9]
    other_domain = fab.gpus[72 * 8 + 9]
    assert set(kinds_of(fab, fab.route(a, same_domain))) == {"nvlink", "nvlink-network"}
    assert "nvlink-network" not in kinds_of(fab, fab.route(a, other_domain))
    assert "nic-leaf" in kinds_of(fab, fab.route(a, other_domain))
    ecmp = fab.ecmp_paths(a, same_domain, limit=10_000)
    assert len(ecmp) == 18 * 8  # rack switch x tier-2 switch of its plane
    # a tier-2 link down: still NVLink, avoiding it
    up = next(int(x) for x in fab.route(a, same_domain)
          if fab.link_kind[x] == LinkKind.NVLINK_NETWORK)
    p = fab.with_links_down([up]).route(a, same_domain)
    assert up not in p.tolist() and "nic-leaf" not in kinds_of(fab, p)


def test_nvl72_default_domain_is_one_rack():
    fab = build_cluster("gb200-nvl72", nodes=2)
    assert fab.info.nvlink_domain_gpus == 72
    assert "nvlink-network" not in kinds_of(fab, fab.route(fab.gpus[0], fab.gpus[80]))


def test_compute_routes_ignore_storage_and_management():
    fab = build_cluster("dgx-h100", nodes=16, storage=True, management=True)
    aux = np.flatnonzero(np.isin(fab.link_kind, [LinkKind.STORAGE, LinkKind.MGMT]))
    g = fab.gpus
    src, dst = np.repeat(g, g.size), np.tile(g, g.size)
    p1 = fab.route_many(src, dst)
    assert not np.isin(p1.links, aux).any()
    p2 = fab.with_links_down(aux).route_many(src, dst)  # no storage/mgmt at all: same routes
    assert np.array_equal(p1.links, p2.links)


def test_exports():
    fab = build_cluster("dgx-h100", nodes=2, topology="torus3d", management=True)
    g = fab.to_networkx()
    assert g.number_of_nodes() == fab.n_nodes and g.number_of_edges() == fab.n_links
    d = json.loads(fab.to_json())
    assert len(d["links"]) == fab.n_links and d["info"]["topology"] == "torus3d"
    assert d["info"]["extra"]["torus"]["dims"] == [2, 1, 1]
