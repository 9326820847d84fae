"""A tree's steps inside a server cost NCCL's tree rate (collectives.tree.TREE_HOP_SCALE),
and every backend charges it alike (backends.base.schedule_protocol)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from backend_delta import assert_every_backend_adds

from fabricsim.collectives.registry import Group, get_algorithm
from fabricsim.collectives.tree import TREE_HOP_SCALE
from fabricsim.collectives.tuner import build
from fabricsim.errors import ScheduleError
from fabricsim.fabric import build_cluster
from fabricsim.protocols import PROTOCOLS
from fabricsim.schedule import Schedule


def test_scale_is_nccls_tree_over_ring_latency() -> None:
    # NCCL's hwLat (src/graph/tuning.cc): NVLink tree LL/LL128/Simple 0.6/1.25/4.0, ring
    # 0.6/1.9/3.4; PCIe tree 1.0/1.9/4.0, ring 1.0/2.5/5.7
    assert TREE_HOP_SCALE["ll"] == {"nvlink": 1.0, "pcie": 1.0}
    assert TREE_HOP_SCALE["ll128"]["nvlink"] == pytest.approx(1.25 / 1.9)
    assert TREE_HOP_SCALE["simple"]["nvlink"] == pytest.approx(4.0 / 3.4)
    assert TREE_HOP_SCALE["simple"]["pcie"] == pytest.approx(4.0 / 5.7)
    assert all("net" not in per for per in TREE_HOP_SCALE.values())  # the crossing's


@pytest.mark.parametrize("proto", ["ll128", "simple"])
def test_chain_hops_move_the_time_by_their_count_in_every_backend(proto: str) -> None:
    """Four DGX H100: each tree chain inside a server is 8 GPUs, so a chunk's fill climbs
    7 NVLink hops and comes down 7; at NCCL's tree rate each costs ``ratio`` times the
    protocol's own NVLink hop, and nothing else moves."""
    fab = build_cluster("dgx-h100", 4)
    sched = build(Group.of(fab), "all_reduce", 2**20, get_algorithm("tree"), proto)
    assert sched.hop_scale == TREE_HOP_SCALE
    plain = replace(sched, hop_scale={})
    hop = PROTOCOLS[proto].hop_latency["nvlink"]
    want = 14 * hop * (TREE_HOP_SCALE[proto]["nvlink"] - 1.0)
    assert_every_backend_adds(sched, plain, fab, want)


def test_rings_keep_the_protocols_hops() -> None:
    fab = build_cluster("dgx-h100", 2)
    assert build(Group.of(fab), "all_reduce", 2**20, get_algorithm("ring"),
                 "ll128").hop_scale == {}


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_hop_scale_is_a_clear_error(bad: float) -> None:
    with pytest.raises(ScheduleError, match=r"hop_scale\['ll128'\]\['nvlink'\]"):
        Schedule(steps=(), hop_scale={"ll128": {"nvlink": bad}})
