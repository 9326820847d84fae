"""NCCL's cost model (``collectives.nccl_model``) against NCCL's own formulas, and the tuner
making NCCL's choice with it."""

from __future__ import annotations

import math

import pytest

from fabricsim.collectives import Tuner
from fabricsim.collectives.nccl_model import NcclModel
from fabricsim.collectives.registry import Group
from fabricsim.errors import ConfigError
from fabricsim.fabric import build_cluster


def model(system: str, nodes: int) -> NcclModel:
    return NcclModel.of(Group.of(build_cluster(system, nodes)))


def test_one_server_latencies_are_nccls() -> None:
    # NCCL 2.27 on 8 H100 of one server: ring LL 6.6 + 14 x 0.6, ring Simple 8.4 + 14 x 3.4,
    # NVLS 25 (src/graph/tuning.cc)
    m = model("dgx-h100", 1)
    assert m.latency_us("all_reduce", "ring", "ll") == pytest.approx(15.0)
    assert m.latency_us("all_reduce", "ring", "simple") == pytest.approx(56.0)
    assert m.latency_us("all_reduce", "nvls", "simple") == pytest.approx(25.0)


def test_server_count_enters_as_nccl_counts_it() -> None:
    m = model("dgx-h100", 16)
    # ring: 14N intra steps at max(0.6, 1.0 net overhead) and 2(N-1) network steps
    assert m.latency_us("all_reduce", "ring", "ll") == pytest.approx(6.6 + 224 + 30 * 2.7)
    # trees: log2 of the servers, not the ranks
    assert m.latency_us("all_reduce", "tree", "simple") == pytest.approx(
        8.4 + 2 * (7 * 4.0 + 4 * 14.0))
    assert m.latency_us("all_reduce", "nvlstree", "simple") == pytest.approx(25 + 8 * 14.0)


def test_efa_plugin_latency_and_amd_host_are_read_from_the_catalog() -> None:
    p5 = model("aws-p5", 2)
    assert p5.net_latency_us == pytest.approx(75.0) and p5.amd_host
    # Simple pays the plugin's latency twice per network step (NCCL's flush)
    assert p5.latency_us("all_reduce", "tree", "simple") == pytest.approx(
        8.4 + 2 * (7 * 4.0 + 1 * (14.0 + 150.0)))
    assert model("aws-p6-b200", 2).net_latency_us == pytest.approx(35.0)
    h100 = model("dgx-h100", 2)
    assert h100.net_latency_us == 0.0 and not h100.amd_host


def test_protocol_switch_points_order() -> None:
    """Small messages go LL, large ones Simple (or NVLS), as NCCL does on every system."""
    for system, nodes in (("dgx-h100", 1), ("dgx-a100", 4), ("aws-p4d", 2), ("hgx-b200", 8)):
        m = model(system, nodes)
        pairs = [(a, p) for a in ("ring", "tree", "nvls", "nvlstree")
                 for p in ("ll", "ll128", "simple")]
        pairs = [x for x in pairs if not math.isinf(m.time_us("all_reduce", *x, 2**10))
                 or not math.isinf(m.time_us("all_reduce", *x, 2**32))]
        assert m.best("all_reduce", 8, pairs)[1] == "ll", system  # type: ignore[index]
        assert m.best("all_reduce", 2**32, pairs)[1] == "simple", system  # type: ignore[index]


def test_ll128_off_without_nvlink_and_nvls_off_without_nvswitch_reduction() -> None:
    pcie = model("pcie-8gpu", 1)
    assert math.isinf(pcie.time_us("all_reduce", "ring", "ll128", 2**20))
    a100 = model("dgx-a100", 1)
    assert math.isinf(a100.time_us("all_reduce", "nvls", "simple", 2**30))


def test_tuner_makes_nccls_choice_and_times_it_with_fabricsims_model() -> None:
    fab = build_cluster("dgx-a100", 2)
    m = NcclModel.of(Group.of(fab))
    nccl, fastest = Tuner(), Tuner(select="fastest")
    for size in (2**12, 2**20, 2**24, 2**30):
        c = nccl.choose(fab, "all_reduce", size)
        assert (c.algorithm, c.protocol) == m.best(
            "all_reduce", size, [("ring", p) for p in ("ll", "ll128", "simple")]
            + [("tree", p) for p in ("ll", "ll128", "simple")])
        forced = fastest.choose(fab, "all_reduce", size, algo=c.algorithm, proto=c.protocol)
        assert c.time == pytest.approx(forced.time)
        assert fastest.choose(fab, "all_reduce", size).time <= c.time * (1 + 1e-12)
    # 16 MiB on 2 DGX A100: NCCL's model ranks ring LL128 first, fabricsim's own fastest
    # pick is the tree
    n, f = nccl.choose(fab, "all_reduce", 2**24), fastest.choose(fab, "all_reduce", 2**24)
    assert (n.algorithm, n.protocol, f.algorithm) == ("ring", "ll128", "tree")


def test_efa_plugin_that_forces_simple_leaves_nccl_only_simple() -> None:
    """AWS's EFA plugin sets NCCL_PROTO=simple where the EFA device does not deliver
    128-byte blocks in order (p4d, over send/receive): NCCL's choice, and the fastest,
    are then Simple pairs at every size, ranked by NCCL's model among them; p5's EFA
    keeps LL and LL128. A protocol the user forces still runs (the plugin does not
    overwrite a user's NCCL_PROTO)."""
    fab = build_cluster("aws-p4d", 2)
    assert fab.info.plugin_proto == "simple"
    assert build_cluster("aws-p5", 2).info.plugin_proto == ""
    assert build_cluster("dgx-a100", 2).info.plugin_proto == ""
    m = NcclModel.of(Group.of(fab))
    nccl, fastest = Tuner(), Tuner(select="fastest")
    for size in (8, 2**12, 2**20, 2**24, 2**30):
        c = nccl.choose(fab, "all_reduce", size)
        assert c.protocol == "simple"
        assert (c.algorithm, c.protocol) == m.best(
            "all_reduce", size, [("ring", "simple"), ("tree", "simple")])
        assert fastest.choose(fab, "all_reduce", size).protocol == "simple"
    # 8 B: Simple's tree costs over twice LL's (measured on 2 p4de: 164 us)
    ll = nccl.choose(fab, "all_reduce", 8, proto="ll")
    assert ll.protocol == "ll" and nccl.choose(fab, "all_reduce", 8).time > 2 * ll.time
    one = build_cluster("aws-p4d", 1)  # the plugin sets it for the process, one server too
    assert Tuner().choose(one, "all_reduce", 2**12).protocol == "simple"


def test_algorithms_nccl_does_not_have_fall_back_to_the_fastest() -> None:
    m = model("dgx-h100", 2)
    assert m.best("all_reduce", 2**20, [("ring", "simple"), ("halving_doubling", "simple")]
                  ) is None


def test_unknown_selection_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="selection") as e:
        Tuner(select="quickest")
    assert e.value.field == "select"


def test_switch_points_match_a_published_nccl_log() -> None:
    """NCCL's own choice logged on 64 servers of 8 H200 over Ethernet (NCCL issue 1752,
    NCCL_DEBUG=INFO): 16 MiB all-reduce -> Tree LL128, 32 MiB -> NVLSTree Simple. Both
    come from NCCL's cost model with the ring search's 8 channels at 45 GB/s and the
    NVLS graph's 8 heads at 40 GB/s inside (48 across) the servers."""
    fab = build_cluster("dgx-h200", 64, fabric="roce-400g")
    m = NcclModel.of(Group.of(fab))
    assert (m.channels, m.bw) == (8, 45.0)
    assert (m.nvls_heads, m.nvls_bw_intra, m.nvls_bw_inter) == (8, 40.0, 48.0)
    t = Tuner()
    picks = {s: t.choose(fab, "all_reduce", s) for s in (2**24, 2**25)}
    assert (picks[2**24].algorithm, picks[2**24].protocol) == ("tree", "ll128")
    assert (picks[2**25].algorithm, picks[2**25].protocol) == ("nvlstree", "simple")


def test_two_server_trees_are_rated_by_their_nvlink_side() -> None:
    """NCCL's tuning model rates a tree over two servers by its graph's speed inside the
    server (``nNodes <= 2 ? bwIntra : bwInter``), which its search raises up to twice the
    NICs' speed while NVLink carries every channel. 2 x p4d (4 x 100G EFA): the ring
    searches 4 channels at 12 GB/s, the tree's inside speed rises to 24, and NCCL's tree
    (44 GB/s) beats its ring (26) at 1 GiB, as the measured 77 GB/s busbw (above a ring's
    50) shows NCCL ran. 2 x DGX A100 (8 x 200G): 30 GB/s inside, capped by NVLink, but
    NCCL's per-channel tree figure keeps the ring ahead, as measured (rows 1085-1086).
    One server or three and more: the speed the ring search found."""
    p4d = model("aws-p4d", 2)
    assert (p4d.channels, p4d.bw, p4d.tree_bw_intra) == (4, 12.0, 24.0)
    tree = p4d.bandwidth_gbs("all_reduce", "tree", "simple", 2**30)
    ring = p4d.bandwidth_gbs("all_reduce", "ring", "simple", 2**30)
    assert tree == pytest.approx(0.5 * 0.92 * 4 * 24) and ring < 0.6 * tree
    a100 = model("dgx-a100", 2)
    assert a100.tree_bw_intra == 30.0
    assert a100.bandwidth_gbs("all_reduce", "ring", "simple", 2**30) > \
        a100.bandwidth_gbs("all_reduce", "tree", "simple", 2**30)
    assert model("aws-p4d", 1).tree_bw_intra == model("aws-p4d", 4).tree_bw_intra == 0.0
