"""Invariants every builder must keep: ports, connectivity, closed-form counts, reverses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fabric_checks import (
    assert_ports_within_radix,
    assert_reverse_pairs,
    assert_valid_paths,
    ports_used,
)

from fabricsim.fabric import LinkKind, NodeKind, build_cluster
from fabricsim.fabric.dragonfly import dragonfly_shape

CASES = [
    dict(topology="fat-tree", nodes=24),
    dict(topology="rail-optimized", nodes=40),
    dict(topology="rail-optimized", nodes=20, radix=16),  # 3 tiers
    # 24 part-filled rail leaves at radix 6 once gave core switches 8 ports (issue 9)
    dict(topology="rail-optimized", nodes=9, oversubscription=2.0, radix=6),
    dict(topology="fat-tree", nodes=30, oversubscription=3.0, radix=16),
    dict(topology="dragonfly", nodes=24, radix=16),
    dict(topology="dragonfly", nodes=9, radix=12, params={"groups": 5, "routers_per_group": 4,
                                                         "hosts_per_router": 4,
                                                         "global_links_per_router": 2}),
    dict(topology="torus3d", nodes=24),
    dict(topology="torus3d", nodes=8, params={"dims": [2, 2, 2]}),
]


@pytest.fixture(params=CASES, ids=lambda c: f"{c['topology']}-{c['nodes']}-{c.get('radix')}")
def fab(request):
    return build_cluster("dgx-h100", **request.param)


def test_ports_within_radix(fab):
    assert_ports_within_radix(fab, int(fab.info.extra["radix"]))


def test_links_come_in_reverse_pairs(fab):
    assert_reverse_pairs(fab)


def test_every_gpu_reaches_every_gpu(fab):
    g = fab.gpus
    src = np.repeat(g, g.size)
    dst = np.tile(g, g.size)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    paths = fab.route_many(src, dst)
    assert_valid_paths(fab, src, dst, paths)
    # compute routes never use storage / management links
    assert not np.isin(fab.link_kind[paths.links], [LinkKind.STORAGE, LinkKind.MGMT]).any()


def test_fat_tree_counts_closed_form():
    fab = build_cluster("dgx-h100", nodes=24, topology="fat-tree")
    e, k = 24 * 8, 64
    d = u = k // 2
    leaves = math.ceil(e / d)
    spines = next(s for s in range(math.ceil(leaves * u / k), u + 1) if u % s == 0)
    assert fab.count(NodeKind.LEAF) == leaves == 6
    assert fab.count(NodeKind.SPINE) == spines
    assert len(fab.links_of(LinkKind.NIC_LEAF)) == 2 * e
    assert len(fab.links_of(LinkKind.LEAF_SPINE)) == 2 * leaves * spines
    assert int(fab.link_lanes[fab.links_of(LinkKind.LEAF_SPINE)].sum()) == 2 * leaves * u
    assert fab.info.bisection_bandwidth == pytest.approx(e / 2 * fab.info.nic_bandwidth)


def test_three_tier_counts_closed_form():
    k = 16
    fab = build_cluster("dgx-h100", nodes=20, topology="rail-optimized", radix=k)
    d = u = k // 2
    leaves = math.ceil(20 / d) * 8  # rail-optimized: a unit of d servers has one leaf per rail
    pods = math.ceil(leaves / (k // 2))
    assert fab.info.tiers == 3
    assert fab.count(NodeKind.LEAF) == leaves
    assert fab.count(NodeKind.SPINE) == pods * u
    core_ports = pods * u * (k - k // 2)
    assert int(fab.link_lanes[fab.links_of(LinkKind.SPINE_CORE)].sum()) == 2 * core_ports
    assert fab.count(NodeKind.CORE) * k >= core_ports


def test_dragonfly_counts_closed_form():
    params = {"groups": 5, "routers_per_group": 4, "hosts_per_router": 4,
              "global_links_per_router": 2}
    fab = build_cluster("dgx-h100", nodes=9, topology="dragonfly", radix=12, params=params)
    g, a, _p, h = 5, 4, 4, 2
    e = 72
    m = a * h // (g - 1)
    assert fab.count(NodeKind.ROUTER) == g * a
    assert len(fab.links_of(LinkKind.LOCAL)) == 2 * g * a * (a - 1) // 2
    glob = fab.links_of(LinkKind.GLOBAL)
    assert int(fab.link_lanes[glob].sum()) == 2 * m * g * (g - 1) // 2
    assert fab.info.cables["global"] == m * g * (g - 1) // 2
    # every router uses exactly its h global ports (a*h == m*(g-1) here)
    used = np.bincount(fab.link_src[glob], weights=fab.link_lanes[glob],
                       minlength=fab.n_nodes)[fab.nodes_of(NodeKind.ROUTER)]
    assert (used == h).all()
    assert len(fab.links_of(LinkKind.NIC_LEAF)) == 2 * e
    assert fab.info.bisection_bandwidth == pytest.approx(
        min(e / 2 * fab.info.nic_bandwidth, 2 * 3 * m * 50e9))


def test_dragonfly_balanced_defaults():
    s = dragonfly_shape(16384, 64, {})
    assert (s.hosts_per_router, s.routers_per_group, s.global_links_per_router) == (16, 32, 16)
    assert s.groups == 32 and s.ports_used <= 64
    assert s.links_between_groups == 32 * 16 // 31


def test_torus_counts_closed_form():
    fab = build_cluster("dgx-h100", nodes=24, topology="torus3d")
    assert fab.info.extra["torus"]["dims"] == [4, 3, 2]
    routers = fab.nodes_of(NodeKind.ROUTER)
    assert routers.size == 24
    tor = fab.links_of(LinkKind.TORUS)
    # dims 4 and 3 give 24 cables each; dim 2 gives 24 cables merged into 12 two-lane links
    assert int(fab.link_lanes[tor].sum()) == 2 * (24 + 24 + 24)
    used = ports_used(fab)[routers]
    assert (used == 8 + 6).all()  # 8 NICs + 6 torus ports
    port = fab.info.extra["torus"]["port_bandwidth"]
    assert port == pytest.approx(8 * 50e9 / 6)
    assert fab.info.bisection_bandwidth == pytest.approx(2 * (24 / 4) * port)


def test_storage_and_management_counted():
    fab = build_cluster("dgx-h100", nodes=40, storage=True, management=True,
                        params={"storage_targets": 6, "mgmt_servers_per_switch": 8})
    sw = fab.info.extra["switches"]
    assert fab.count(NodeKind.STORAGE_TARGET) == 6
    assert fab.count(NodeKind.MGMT_SWITCH) == sw["mgmt-switch"] == 5 + 1
    assert fab.count(NodeKind.STORAGE_SWITCH) == sw["storage-switch"]
    assert fab.info.cables["management"] == 40 + 5
    e = 40 * 2 + 6 * 2
    assert len(fab.links_of(LinkKind.STORAGE)) >= 2 * e
    assert_ports_within_radix(fab, 64, kinds=(NodeKind.STORAGE_SWITCH,))
    assert_ports_within_radix(fab, 48, kinds=(NodeKind.MGMT_SWITCH,))
    assert_reverse_pairs(fab)


def test_storage_targets_reachable_over_storage_network_only():
    import networkx as nx

    fab = build_cluster("dgx-h100", nodes=8, storage=True)
    keep = fab.link_kind == LinkKind.STORAGE
    g = nx.Graph()
    g.add_edges_from(zip(fab.link_src[keep].tolist(), fab.link_dst[keep].tolist(),
                         strict=True))
    snics = fab.nodes_of(NodeKind.STORAGE_NIC)
    targets = fab.nodes_of(NodeKind.STORAGE_TARGET)
    comp = nx.node_connected_component(g, int(targets[0]))
    assert set(snics.tolist()) <= comp and set(targets.tolist()) <= comp


def test_path_checker_catches_broken_paths():
    from fabricsim.fabric import Paths

    fab = build_cluster("dgx-h100", nodes=4, topology="fat-tree")
    src, dst = fab.gpus[:1], fab.gpus[-1:]
    good = fab.route_many(src, dst)
    assert_valid_paths(fab, src, dst, good)
    row = good.row(0).copy()
    for bad in (row[:-1], row[1:], np.concatenate([row[:2], row[3:]]),
                np.concatenate([row[:2], fab.reverse_link[row[1:2]], row[1:]])):
        with pytest.raises(AssertionError):
            assert_valid_paths(fab, src, dst, Paths.from_rows([bad]))
