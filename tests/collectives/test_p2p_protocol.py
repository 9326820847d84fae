"""All-to-all and send/recv take NCCL's point-to-point protocol rule: LL while a peer's
bytes are at most 16 KiB per channel it may use, Simple above, never LL128."""

from __future__ import annotations

import pytest

from fabricsim.collectives import choose
from fabricsim.collectives.alltoall import (
    P2P_LL_THRESHOLD_BYTES,
    p2p_channels_per_peer,
    p2p_protocol,
)
from fabricsim.collectives.registry import Group
from fabricsim.fabric import build_cluster


@pytest.mark.parametrize(("system", "nodes", "per_peer"), [
    ("dgx-h100", 1, 32),     # NCCL logs "32 p2p channels per peer" on one H100 / A100
    ("dgx-a100", 1, 32),     # 12 NVLinks: 24 channels, the power of two above is 32
    ("dgx-h100", 2, 2),      # "2 p2p channels per peer" across servers
    ("aws-p5", 2, 4),        # at least the GPU's four EFA NICs
    ("pcie-8gpu", 1, 2),     # a PCIe peer: two
])
def test_channels_per_peer_follow_nccl(system: str, nodes: int, per_peer: int) -> None:
    assert p2p_channels_per_peer(Group.of(build_cluster(system, nodes))) == per_peer


def test_the_switch_sits_at_the_threshold() -> None:
    one = Group.of(build_cluster("dgx-h100", 1))
    limit = P2P_LL_THRESHOLD_BYTES * 32 * one.n   # alltoall: an n-th to each peer
    assert p2p_protocol(one, "alltoall", limit) == "ll"
    assert p2p_protocol(one, "alltoall", limit + one.n) == "simple"
    two = Group.of(build_cluster("dgx-h100", 2))
    assert p2p_protocol(two, "sendrecv", 32 * 1024) == "ll"
    assert p2p_protocol(two, "sendrecv", 32 * 1024 + 1) == "simple"


@pytest.mark.parametrize("nodes", [1, 2])
def test_point_to_point_never_runs_ll128(nodes: int) -> None:
    fab = build_cluster("gb300-nvl72", nodes, gpus_per_node=8)
    for size in (2**10, 2**16, 2**20, 2**22, 2**24, 2**28):
        for coll in ("alltoall", "sendrecv"):
            c = choose(fab, coll, size)
            assert c.protocol == p2p_protocol(Group.of(fab), coll, size), (coll, size)
            assert c.protocol != "ll128"


def test_a_forced_protocol_still_wins() -> None:
    fab = build_cluster("dgx-h100", 1)
    assert choose(fab, "alltoall", 2**20, proto="ll128").protocol == "ll128"
