"""Routing per transport: InfiniBand's balanced tables, Ethernet's per-flow hashing (issue 10)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.collectives import choose
from fabricsim.errors import ConfigError
from fabricsim.fabric import LinkKind, NodeKind, build_cluster


def _router(fab):  # type: ignore[no-untyped-def]
    return fab.router.net


def test_the_transport_picks_the_routing() -> None:
    assert _router(build_cluster("dgx-h100", 64)).routing == "dmodk"
    assert _router(build_cluster("dgx-h100", 64, fabric="roce-400g")).routing == "ecmp"
    assert _router(build_cluster("dgx-h100", 64, params={"routing": "ecmp"})).routing == "ecmp"
    with pytest.raises(ConfigError, match=r"params\.routing.*dmodk"):
        build_cluster("dgx-h100", 4, params={"routing": "random"})


def test_ultra_ethernet_sprays_where_the_topology_can() -> None:
    """UET spreads each flow over the paths: adaptive on fat-trees; elsewhere (no adaptive
    routing there) it falls back to ECMP instead of refusing its own default."""
    assert _router(build_cluster("dgx-h100", 16, fabric="uet-800g")).routing == "adaptive"
    assert _router(build_cluster("dgx-h100", 16, fabric="uet-800g",
                                 topology="fat-tree")).routing == "adaptive"
    fab = build_cluster("dgx-h100", 16, fabric="uet-800g", topology="dragonfly")
    assert fab.info.fabric == "uet-800g"
    with pytest.raises(ConfigError, match="adaptive"):
        build_cluster("dgx-h100", 16, fabric="uet-800g", topology="dragonfly",
                      params={"routing": "adaptive"})


def test_dmodk_spreads_destinations_evenly_over_the_uplinks() -> None:
    """Every NIC of leaf 0 sends to every NIC of another leaf: with destination-based
    tables each of the leaf's uplinks carries the same number of destinations."""
    fab = build_cluster("dgx-h100", 64, topology="fat-tree")
    nics = fab.nodes_of(NodeKind.NIC)
    leaf_of = {int(fab.link_src[link]): int(fab.link_dst[link])
               for link in fab.links_of(LinkKind.NIC_LEAF)
               if fab.node_kind[fab.link_src[link]] == NodeKind.NIC}
    leaves = sorted(set(leaf_of.values()))
    a = np.array([n for n in nics if leaf_of[int(n)] == leaves[0]])
    b = np.array([n for n in nics if leaf_of[int(n)] == leaves[1]])
    src, dst = np.repeat(a, b.size), np.tile(b, a.size)
    paths = fab.route_many(src, dst, np.arange(src.size, dtype=np.uint64))
    up = paths.links[np.isin(paths.links, fab.links_of(LinkKind.LEAF_SPINE)) &
                     (fab.link_src[paths.links] == leaves[0])]
    counts = np.unique(up, return_counts=True)[1]
    assert counts.min() == counts.max()  # every uplink: the same number of destinations
    # deterministic: the hash does not move a destination's path
    again = fab.route_many(src, dst, np.arange(src.size, dtype=np.uint64)[::-1].copy())
    assert np.array_equal(paths.links, again.links)


def test_links_down_still_reroute_under_dmodk() -> None:
    fab = build_cluster("dgx-h100", 64, topology="fat-tree")
    g = fab.gpus
    p = fab.route(int(g[0]), int(g[-1]))
    spine_link = next(int(x) for x in p if fab.link_kind[x] == LinkKind.LEAF_SPINE)
    down = fab.with_links_down([spine_link])
    q = down.route(int(g[0]), int(g[-1]))
    assert spine_link not in q.tolist()


def test_tree_on_infiniband_does_not_collapse_at_scale() -> None:
    """Per-flow hashing made the IB tree fall from 378 GB/s busbw at 64 nodes to 168 at
    128 (16 GiB): hash collisions that a subnet manager's tables do not have."""
    s = 2**34
    bw = {}
    for n in (64, 128):
        fab = build_cluster("dgx-h100", n)
        bw[n] = s / choose(fab, "all_reduce", s, algo="tree").time
    assert bw[128] == pytest.approx(bw[64], rel=0.03)


# ---------------------------------------------------------------- adaptive routing
def _ring_busbw(routing: str, backend: str = "analytic") -> float:
    from fabricsim.collectives import run_collective

    fab = build_cluster("dgx-h100", 8, topology="fat-tree", fabric="roce-400g", radix=8,
                        params={"routing": routing})
    r = run_collective(fab, "all_reduce", 2**28, algo="ring", proto="simple",
                       backend=backend)
    return r.busbw


def test_adaptive_declares_spray_groups_only_when_asked() -> None:
    for routing in ("ecmp", "dmodk"):
        assert build_cluster("dgx-h100", 32, params={"routing": routing}
                             ).router.spray_groups() == []
    fab = build_cluster("dgx-h100", 32, params={"routing": "adaptive"})
    groups = fab.router.spray_groups()
    assert groups
    # every group: network links of one kind, disjoint from the others
    allg = np.concatenate(groups)
    assert np.unique(allg).size == allg.size
    for g in groups:
        assert np.unique(fab.link_kind[g]).size == 1


def test_adaptive_removes_hash_collisions_and_backends_agree() -> None:
    """Ring all-reduce on a radix-8 fat-tree of RoCE: per-flow hashing collides on
    leaf uplinks; spreading every flow over its equal-cost paths does not."""
    ecmp, adaptive = _ring_busbw("ecmp"), _ring_busbw("adaptive")
    assert adaptive > 1.5 * ecmp
    assert _ring_busbw("adaptive", "flow") == pytest.approx(adaptive, rel=1e-6)
    assert _ring_busbw("ecmp", "flow") == pytest.approx(ecmp, rel=1e-6)


def test_adaptive_needs_a_fat_tree() -> None:
    with pytest.raises(ConfigError, match=r"fat-tree.*torus3d"):
        build_cluster("dgx-h100", 8, topology="torus3d", params={"routing": "adaptive"})


# ---------------------------------------------------------------- parallel cables
def test_ecmp_splits_parallel_cables_into_links() -> None:
    """16 DGX H100 on a radix-64 RoCE fat-tree: each leaf has 16 cables to each of 2
    spines. Under per-flow hashing they are 16 links (hashes collide on them); under
    InfiniBand tables and adaptive routing one link with 16 lanes (traffic spreads)."""
    kw = {"topology": "fat-tree", "fabric": "roce-400g"}
    split = build_cluster("dgx-h100", 16, **kw)
    merged = build_cluster("dgx-h100", 16, params={"routing": "dmodk"}, **kw)
    ls_split = split.links_of(LinkKind.LEAF_SPINE)
    ls_merged = merged.links_of(LinkKind.LEAF_SPINE)
    assert (split.link_lanes[ls_split] == 1).all()
    assert merged.link_lanes[ls_merged].max() > 1
    assert split.link_lanes[ls_split].sum() == merged.link_lanes[ls_merged].sum()
    assert split.link_capacity[ls_split].sum() == pytest.approx(
        merged.link_capacity[ls_merged].sum())
    assert split.info.cables == merged.info.cables
    rev = split.reverse_link
    assert np.array_equal(rev[rev], np.arange(split.n_links))


def test_hash_collisions_on_parallel_cables_cost_bandwidth() -> None:
    from fabricsim.collectives import predict_time

    kw = {"topology": "fat-tree", "fabric": "roce-400g"}
    bus = {}
    for routing in ("ecmp", "dmodk", "adaptive"):
        fab = build_cluster("dgx-h100", 16, params={"routing": routing}, **kw)
        t = predict_time(fab, "all_reduce", 2**32, algo="ring", proto="simple")
        bus[routing] = 2**32 / t * 2 * (fab.n_gpus - 1) / fab.n_gpus
    assert bus["ecmp"] < 0.6 * bus["dmodk"]
    assert bus["adaptive"] == pytest.approx(bus["dmodk"], rel=0.01)


def test_spraying_over_split_cables_uses_every_cable() -> None:
    """The flow backend's spraying over an ECMP fabric's separate cables moves what the
    analytic backend gives when those cables are pooled (adaptive routing)."""
    from fabricsim.backends.flow import FlowBackend
    from fabricsim.collectives import run_collective

    kw = {"topology": "fat-tree", "fabric": "roce-400g"}
    ecmp = build_cluster("dgx-h100", 4, radix=16, **kw)
    assert ecmp.link_lanes[ecmp.links_of(LinkKind.LEAF_SPINE)].max() == 1
    pooled = build_cluster("dgx-h100", 4, radix=16, params={"routing": "adaptive"}, **kw)
    sprayed = run_collective(ecmp, "all_reduce", 2**26, algo="ring", proto="simple",
                             backend=FlowBackend(routing="spray")).time
    want = run_collective(pooled, "all_reduce", 2**26, algo="ring", proto="simple").time
    assert sprayed == pytest.approx(want, rel=1e-3)


def test_queue_pairs_per_connection_are_a_cluster_setting() -> None:
    """``params.qps`` (NCCL_IB_QPS_PER_CONNECTION): NCCL's 1 by default, 1-128 accepted,
    anything else refused naming the field."""
    import pytest

    from fabricsim.errors import ConfigError
    from fabricsim.fabric import build_cluster

    assert build_cluster("dgx-h100", 2, fabric="roce-400g").info.qps == 1
    assert build_cluster("dgx-h100", 2, fabric="roce-400g", params={"qps": 4}).info.qps == 4
    for bad in (0, 129, 2.5, "4", True):
        with pytest.raises(ConfigError) as e:
            build_cluster("dgx-h100", 2, fabric="roce-400g", params={"qps": bad})
        assert e.value.field == "params.qps" and "1 to 128" in e.value.message


def test_nccl_buffer_is_a_cluster_setting() -> None:
    """``params.buffsize`` (NCCL_BUFFSIZE): 0 (NCCL's default for the platform) unless
    given, 1 MiB-1 GiB accepted, anything else refused naming the field."""
    import pytest

    from fabricsim.errors import ConfigError
    from fabricsim.fabric import build_cluster

    assert build_cluster("dgx-h100", 2).info.nccl_buffsize_bytes == 0
    assert build_cluster("dgx-h100", 2,
                         params={"buffsize": 2**24}).info.nccl_buffsize_bytes == 2**24
    for bad in (-1, 4096, 2**19, 2**31, 2.5, "16M", True):
        with pytest.raises(ConfigError) as e:
            build_cluster("dgx-h100", 2, params={"buffsize": bad})
        assert e.value.field == "params.buffsize" and "NCCL_BUFFSIZE" in e.value.message
