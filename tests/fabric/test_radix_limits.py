"""No fat-tree tier ever uses more ports than its switches have (issue 9).

A deterministic, exhaustive grid over the small region where a random search once found
core switches with 8 cables at radix 6, plus the build-time guard that refuses any
builder output over the radix.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from fabric_checks import assert_ports_within_radix

from fabricsim.errors import TopologyError
from fabricsim.fabric import build_cluster
from fabricsim.fabric.cluster import _check_ports
from fabricsim.fabric.kinds import NodeKind

GRID = list(itertools.product([6, 8, 12, 16], [1.0, 2.0, 3.0], [1, 2, 8]))


@pytest.mark.parametrize(("radix", "over", "gpn"), GRID,
                         ids=[f"k{k}-os{o:g}-g{g}" for k, o, g in GRID])
def test_every_small_fat_tree_fits_its_radix(radix: int, over: float, gpn: int) -> None:
    for nodes, topo in itertools.product(range(1, 49), ["fat-tree", "rail-optimized"]):
        fab = build_cluster("dgx-h100", nodes=nodes, gpus_per_node=gpn, radix=radix,
                            oversubscription=over, topology=topo)
        assert_ports_within_radix(fab, radix)


def test_the_case_that_broke_the_core_tier() -> None:
    # 8 rails on leaves of 4 down ports once gave 24 part-filled leaves and cores with 8
    # ports; a server with more NICs than a leaf has ports is now laid out plainly
    fab = build_cluster("dgx-h100", nodes=9, topology="rail-optimized", oversubscription=2,
                        radix=6)
    assert_ports_within_radix(fab, 6)
    assert dict(fab.info.extra["switches"])["leaf"] == 18


def test_forced_planes_name_the_tier_and_the_smallest_radix() -> None:
    with pytest.raises(TopologyError, match="smallest radix that fits is 8") as e:
        build_cluster("dgx-h100", nodes=10, topology="rail-optimized", oversubscription=2,
                      radix=6, planes=1)
    assert "20 leaves" in str(e.value) and "core" in str(e.value)
    fab = build_cluster("dgx-h100", nodes=10, topology="rail-optimized", oversubscription=2,
                        radix=8, planes=1)
    assert_ports_within_radix(fab, 8)


def test_guard_refuses_a_switch_over_its_radix() -> None:
    # one leaf (node 2) with five cables to two NICs: five ports at radix 4 are refused
    arrays = {
        "node_kind": np.array([NodeKind.NIC] * 2 + [NodeKind.LEAF], dtype=np.int8),
        "link_src": np.array([2, 2, 0, 1], dtype=np.int32),
        "link_lanes": np.array([3, 2, 1, 1], dtype=np.int16),
    }
    _check_ports(arrays, 5, (NodeKind.LEAF,))  # exactly full is fine
    _check_ports(arrays, 4, ())  # not a radix-bound kind (a torus router): not checked
    with pytest.raises(TopologyError, match="leaf tier would use 5 ports on a switch of radix 4"):
        _check_ports(arrays, 4, (NodeKind.LEAF,))
