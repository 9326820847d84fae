"""Uplinks are sized to what the leaves' endpoints can send (review defect: oversized)."""

import pytest

from fabricsim.fabric import build_cluster


def _up_capacity(fab) -> float:  # type: ignore[no-untyped-def]
    from fabricsim.fabric import LinkKind

    links = fab.links_of(LinkKind.LEAF_SPINE)
    return float(fab.link_capacity[links].sum()) / 2  # one direction per bundle


@pytest.mark.parametrize(("system", "nodes", "fabric"), [
    ("dgx-h100", 12, None),         # below one scalable unit: 2 rails per leaf
    ("dgx-h100", 40, None),         # a partly filled second scalable unit
    ("aws-p5", 4, None),            # 100G EFA interfaces behind faster switch ports
    ("dgx-a100", 8, "ib-ndr"),      # 200G NICs on 400G ports
])
def test_non_blocking_uplinks_match_downlinks(system: str, nodes: int, fabric: str | None
                                              ) -> None:
    fab = build_cluster(system, nodes, fabric=fabric)
    down = fab.info.nic_bandwidth * fab.info.nics_per_server * nodes
    up = _up_capacity(fab)
    # non-blocking: at least the endpoints' bandwidth, and not more than one uplink per
    # leaf of slack from rounding up to whole cables
    leaves = fab.info.extra["switches"]["leaf"]
    port = fab.link_capacity[fab.links_of(__import__("fabricsim").LinkKind.LEAF_SPINE)].min()
    assert up >= down * (1 - 1e-9)
    assert up <= down + leaves * port
    assert fab.info.oversubscription <= 1.0 + 1e-9


def test_single_leaf_has_no_spine() -> None:
    fab = build_cluster("dgx-h100", 1, topology="fat-tree")
    assert fab.info.tiers == 1
    assert "spine" not in {k for k, v in fab.info.extra["switches"].items() if v}
    assert fab.route(fab.gpus[0], fab.gpus[7]).size > 0


def test_oversubscription_is_as_built() -> None:
    fab = build_cluster("dgx-h100", 96, oversubscription=3)
    assert fab.info.oversubscription == pytest.approx(3.0)
    assert _up_capacity(fab) == pytest.approx(96 * 8 * 50e9 / 3)


@pytest.mark.parametrize(("system", "nodes", "fabric", "leaves", "spines"), [
    ("dgx-h100", 1, None, 1, 0),      # 8 NICs on one 32-down-port leaf
    ("dgx-h100", 2, None, 1, 0),      # all 8 rails of 2 servers on one leaf
    ("dgx-h100", 12, None, 4, 2),     # 2 rails per leaf (12 x 2 = 24 of 32 ports)
    ("dgx-h100", 40, None, 16, 8),    # two units: one leaf per rail per unit, as before
    ("gb300-nvl72", 2, "ib-xdr", 2, 1),  # 36 of a rack's 72 rails per 72-port leaf
])
def test_a_cluster_below_one_unit_shares_leaves_between_rails(
        system: str, nodes: int, fabric: str | None, leaves: int, spines: int) -> None:
    """A rail-optimized cluster smaller than one scalable unit puts whole rails together
    on a leaf (it used to buy one leaf per rail: 72 leaves of 2 ports for two GB300 NVL72
    racks); NIC i of every server still shares a leaf, so rail traffic stays on it."""
    from fabricsim.fabric import LinkKind

    fab = build_cluster(system, nodes, fabric=fabric)
    sw = fab.info.extra["switches"]
    assert (sw["leaf"], sw.get("spine", 0)) == (leaves, spines)
    gps = fab.info.gpus_per_server
    for rail in (0, gps - 1):
        a, b = fab.gpus[rail], fab.gpus[(nodes - 1) * gps + rail]
        if 1 < nodes < 32:  # below one unit: both ends on the rail's leaf
            kinds = {LinkKind(int(fab.link_kind[li])) for li in fab.route(a, b)}
            assert LinkKind.LEAF_SPINE not in kinds
