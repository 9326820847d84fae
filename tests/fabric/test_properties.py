"""Hypothesis properties over random small fabrics."""

from __future__ import annotations

import networkx as nx
import numpy as np
from fabric_checks import assert_ports_within_radix, assert_reverse_pairs, assert_valid_paths
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.fabric import LinkKind, NodeKind, build_cluster

SETTINGS = settings(max_examples=examples(25))


@st.composite
def fat_trees(draw):
    radix = draw(st.sampled_from([6, 8, 12, 16]))
    over = draw(st.sampled_from([1.0, 2.0, 3.0]))
    gpn = draw(st.sampled_from([1, 2, 8]))  # dgx-h100 with 1/2/8 GPUs -> 1/2/8 NICs
    nodes = draw(st.integers(1, 48))
    topo = draw(st.sampled_from(["fat-tree", "rail-optimized"]))
    # ECMP routing: its paths are symmetric (an InfiniBand d-mod-k table is not, by design;
    # tests/fabric/test_routing_transport.py covers it)
    return dict(nodes=nodes, gpus_per_node=gpn, radix=radix, oversubscription=over,
                topology=topo, params={"routing": "ecmp"})


def _build(kw):
    from fabricsim.errors import TopologyError

    try:
        return build_cluster("dgx-h100", **kw)
    except TopologyError as e:
        if "would use" in str(e):  # the build-time radix guard: a builder bug, never skip
            raise
        assume(False)
        raise


@SETTINGS
@given(fat_trees(), st.integers(0, 2**32))
# the radix-6 case whose core switches once used 8 of their 6 ports
@example(dict(nodes=9, gpus_per_node=8, radix=6, oversubscription=2.0,
              topology="rail-optimized", params={"routing": "ecmp"}), 0)
def test_fat_tree_ports_connectivity_symmetry(kw, seed):
    fab = _build(kw)
    assert_ports_within_radix(fab, kw["radix"])
    assert_reverse_pairs(fab)
    rng = np.random.default_rng(seed)
    g = fab.gpus
    src, dst = rng.choice(g, 40), rng.choice(g, 40)
    paths = fab.route_many(src, dst, rng.integers(0, 2**63, 40, dtype=np.uint64))
    assert_valid_paths(fab, src, dst, paths)
    # symmetry at the NIC level: the reverse of a path a->b is an ECMP path b->a
    nics = fab.nodes_of(NodeKind.NIC)
    a, b = rng.choice(nics, 2)
    if fab.router.nic_plane is not None:
        same_plane = fab.router.nic_plane(np.array([a, b]))
        assume(same_plane[0] == same_plane[1])
    fwd = fab.route(int(a), int(b), flow_hash=int(seed))
    back = {tuple(p.tolist()) for p in fab.ecmp_paths(int(b), int(a), limit=2_000)}
    assert tuple(fab.reverse_link[fwd][::-1].tolist()) in back


def _cut_flow(fab, side_a, side_b) -> float:
    """Max flow (bytes/s, one direction) from NICs side_a to NICs side_b over the network."""
    g = nx.DiGraph()
    net = np.isin(fab.link_kind, [LinkKind.NIC_LEAF, LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE])
    for l in np.flatnonzero(net):
        u, v = int(fab.link_src[l]), int(fab.link_dst[l])
        g.add_edge(u, v, capacity=float(fab.link_capacity[l]))
    for n in side_a:
        g.add_edge("s", int(n), capacity=float("inf"))
    for n in side_b:
        g.add_edge(int(n), "t", capacity=float("inf"))
    return float(nx.maximum_flow_value(g, "s", "t"))


@settings(max_examples=examples(15))
@given(st.sampled_from([8, 12, 16]), st.sampled_from([1.0, 2.0, 3.0]),
       st.integers(1, 6), st.booleans())
def test_bisection_formula_matches_min_cut(radix, over, leaves_half, three):
    """Closed-form bisection == max flow between the NICs of the two halves of the leaves."""
    d = round(radix * over / (over + 1))
    d = min(max(d, 1), radix - 1)
    n_leaves = 2 * leaves_half
    tiers = 3 if three else 2
    if tiers == 2:
        assume(n_leaves <= radix)
    else:
        assume(n_leaves <= (radix // 2) * radix)
    nodes = n_leaves * d  # dgx-h100 with 1 GPU/NIC per server: every leaf full
    fab = build_cluster("dgx-h100", nodes=nodes, gpus_per_node=1, topology="fat-tree",
                        radix=radix, oversubscription=over, tiers=tiers)
    nics = fab.nodes_of(NodeKind.NIC)
    up = fab.links_of(LinkKind.NIC_LEAF)
    up = up[np.isin(fab.link_src[up], nics)]
    leaf_of = dict(zip(fab.link_src[up].tolist(), fab.link_dst[up].tolist(), strict=True))
    leaves = sorted(set(leaf_of.values()))
    first = set(leaves[: len(leaves) // 2])
    side_a = [n for n in nics if leaf_of[int(n)] in first]
    side_b = [n for n in nics if leaf_of[int(n)] not in first]
    flow = _cut_flow(fab, side_a, side_b)
    assert abs(flow - fab.info.bisection_bandwidth) <= 1e-6 * flow


@settings(max_examples=examples(15))
@given(st.integers(2, 40), st.integers(4, 24), st.integers(0, 2**32))
def test_dragonfly_and_torus_properties(nodes, radix, seed):
    for topo in ("dragonfly", "torus3d"):
        # a torus has no switches, so no radix to give it
        kw = dict(radix=radix) if topo == "dragonfly" else {}
        fab = _build(dict(nodes=nodes, gpus_per_node=2, topology=topo, **kw))
        if topo == "dragonfly":
            assert_ports_within_radix(fab, radix)
        assert_reverse_pairs(fab)
        rng = np.random.default_rng(seed)
        g = fab.gpus
        src, dst = rng.choice(g, 30), rng.choice(g, 30)
        assert_valid_paths(fab, src, dst, fab.route_many(src, dst))
        nics = fab.nodes_of(NodeKind.NIC)
        a, b = (int(x) for x in rng.choice(nics, 2))
        fwd = fab.route(a, b, flow_hash=int(seed))
        back = {tuple(p.tolist()) for p in fab.ecmp_paths(b, a, limit=1_000)}
        assert tuple(fab.reverse_link[fwd][::-1].tolist()) in back
