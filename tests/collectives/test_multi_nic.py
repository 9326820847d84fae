"""Across servers, channels use every NIC of a GPU and latency adds up along the path
(issue 10: EFA used a quarter of the node's NICs; broadcast one rail; rings and trees paid
a network hop for every step)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.collectives import build_schedule, choose, run_collective
from fabricsim.collectives.busbw import busbw_factor
from fabricsim.fabric import NodeKind, build_cluster
from fabricsim.transport import framing_efficiency


def _nic_bytes(fab, sch) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Bytes leaving every NIC of the fabric (NIC -> switch links) over the schedule."""
    from fabricsim.backends import get_backend

    res = get_backend("analytic").run(sch, fab)
    nics = fab.nodes_of(NodeKind.NIC)
    up = np.isin(fab.link_src, nics) & ~np.isin(fab.node_kind[fab.link_dst],
                                                [int(NodeKind.PCIE_SWITCH)])
    per = np.zeros(fab.n_nodes)
    np.add.at(per, fab.link_src[up], res.link_bytes[up])
    return per[nics]


@pytest.mark.parametrize(("system", "k"), [("aws-p5", 4), ("aws-p5en", 2), ("dgx-h100", 1)])
def test_ring_channels_use_every_nic_evenly(system: str, k: int) -> None:
    fab = build_cluster(system, 2)
    assert fab.info.nics_per_gpu == k
    sch = build_schedule(fab, "all_reduce", 2**28, algo="ring", proto="simple")
    assert sch.meta["channels"] == 8 * k
    b = _nic_bytes(fab, sch)
    assert b.size == 16 * k and b.min() > 0
    assert b.max() == pytest.approx(b.min(), rel=1e-9)


def test_p5_all_reduce_reaches_its_32_nics() -> None:
    """Was ~94 GB/s busbw at 8 GiB on 8 x p5 (8 of 32 EFA NICs used)."""
    fab = build_cluster("aws-p5", 8)
    r = run_collective(fab, "all_reduce", 2**33)
    node = 32 * 100e9 / 8  # bytes/s: 32 x 100 Gb/s per node
    assert r.busbw > 3 * 94e9
    assert r.busbw < node  # nccl-tests' busbw of a NIC-bound all-reduce: the node's rate


def test_ring_time_closed_form_with_k_nics() -> None:
    """Ring all-reduce of 1 GiB over 2 x p5, ideal protocol: every NIC carries its share
    at line rate; the time is the bytes per NIC over 100 Gb/s plus latency."""
    fab = build_cluster("aws-p5", 2)
    s = 2**30
    t = choose(fab, "all_reduce", s, algo="ring", proto="ideal").time
    n = fab.n_gpus
    # 32 channels, each crossing the 2 servers twice: every one of the 64 NICs sends one
    # channel's 2(n-1)/n·S/32 once, at 100 Gb/s less SRD framing
    per_nic = 2 * (n - 1) / n * s / 32
    bound = per_nic / (100e9 / 8 * framing_efficiency("srd"))
    assert bound < t < bound * 1.02


def test_broadcast_across_servers_uses_every_rail() -> None:
    """Was 47.7 GB/s on 2 x DGX H100 (one NIC) against 354 on one server."""
    fab = build_cluster("dgx-h100", 2)
    sch = build_schedule(fab, "broadcast", 2**33, algo="ring", proto="simple")
    b = _nic_bytes(fab, sch)
    assert (b[:8] > 0).all()    # every rail of the root's server sends
    r = run_collective(fab, "broadcast", 2**33)
    assert r.busbw > 300e9


def test_alltoall_spreads_over_every_nic_and_pays_per_peer() -> None:
    fab = build_cluster("aws-p5", 2)
    sch = build_schedule(fab, "alltoall", 2**28, algo="direct")
    b = _nic_bytes(fab, sch)
    assert b.size == 64 and b.min() > 0
    assert b.max() == pytest.approx(b.min(), rel=1e-9)
    setup = [s for s in sch.steps if s.label == "peer setup"]
    assert setup and setup[0].repeat == 1   # one network round for every peer at once
    # and the proxy's posts for each of the 8 peers on the other server: a send and a
    # receive on each of a peer's parts (4 at 2 MiB a peer: one per EFA of the GPU)
    assert sch.crossings is not None and sch.crossings.count == 2 * 8
    assert sch.crossings.active(2**28, 0.0) == 4
    # one server: no network peers, no setup round
    one = build_schedule(build_cluster("aws-p5", 1), "alltoall", 2**20, algo="direct")
    assert not [s for s in one.steps if s.label == "peer setup"]


def test_ring_latency_adds_up_along_the_ring() -> None:
    """A 0-byte all_gather on 64 GPUs paid a network hop on each of its 63 steps (421 us);
    pipelined, only the 8 server crossings of the ring pay it."""
    fab = build_cluster("dgx-h100", 8)
    sch = build_schedule(fab, "all_gather", 0, algo="ring", proto="ll")
    fills = {s.label: s.repeat for s in sch.steps if "fill" in s.label}
    assert fills == {"ring fill (inside servers)": 55, "ring fill (between servers)": 7}
    assert choose(fab, "all_gather", 0, algo="ring", proto="ll").time < 421e-6 / 1.8


def test_tree_fill_pays_network_hops_only_between_servers() -> None:
    fab = build_cluster("dgx-h100", 8)
    sch = build_schedule(fab, "all_reduce", 8, algo="tree", proto="ll")
    fills = {s.label: s.repeat for s in sch.steps if "fill" in s.label}
    assert fills == {"tree fill (chains)": 14, "tree fill (servers)": 5}
    src = next(s for s in sch.steps if s.label == "tree fill (chains)")
    assert fab.node_server[src.src[0]] == fab.node_server[src.dst[0]]


def test_busbw_factor_is_what_nccl_tests_uses() -> None:
    assert busbw_factor("broadcast", 16) == 1.0


def test_nvlstree_is_as_fast_as_its_slowest_phase() -> None:
    """NVLSTree pipelines NVLS inside servers with per-rail trees across them: on 2 x DGX
    H100 the links alone would keep one server's NVLS algorithm bandwidth (the network
    carries S/8 per NIC each way, less than NVLink's share; run in sequence it was 203 GB/s
    busbw); NCCL's NVLSTree kernels cap it at 57.7 GB/s of busbw per head (8 heads), which
    is what two DGX H100 measure (rows 1078-1084: 467 GB/s)."""
    two = build_cluster("dgx-h100", 2)
    one = build_cluster("dgx-h100", 1)
    s = 2**33
    t2 = choose(two, "all_reduce", s, algo="nvlstree").time
    t1 = choose(one, "all_reduce", s, algo="nvls").time
    cap = s * busbw_factor("all_reduce", 16) / (8 * 57.7e9)
    assert cap > t1
    assert t2 == pytest.approx(cap, rel=0.01)
    net = s / 8 / (50e9 * framing_efficiency("ib"))
    assert net < t2
    assert choose(two, "all_reduce", s).time < choose(two, "all_reduce", s, algo="ring").time


def test_nvlstree_needs_nvls_and_servers() -> None:
    from fabricsim.errors import ScheduleError

    with pytest.raises(ScheduleError, match="NVSwitch gen3"):
        choose(build_cluster("dgx-a100", 2), "all_reduce", 2**20, algo="nvlstree")
    with pytest.raises(ScheduleError, match="one server"):
        choose(build_cluster("dgx-h100", 1), "all_reduce", 2**20, algo="nvlstree")
    with pytest.raises(ScheduleError, match="at least 2 GPUs per server; this group has 1"):
        choose(build_cluster("dgx-h100", 2, gpus_per_node=1), "all_reduce", 2**20,
               algo="nvlstree")


@pytest.mark.parametrize(("backend", "gpus", "size"), [
    ("analytic", 8, 2**33), ("flow", 8, 2**33), ("analytic", 4, 2**26),
    ("packet", 4, 2**26)])  # packet: a size it simulates in about a second
def test_results_say_when_kernels_not_links_set_the_time(backend: str, gpus: int,
                                                         size: int) -> None:
    from fabricsim.collectives import run_collective

    two = build_cluster("dgx-h100", 2, gpus_per_node=gpus)
    tree = run_collective(two, "all_reduce", size, algo="nvlstree", backend=backend)
    ring = run_collective(two, "all_reduce", size, algo="ring", backend=backend)
    assert (tree.result.extra["limited_by"], ring.result.extra["limited_by"]) == \
        ("kernels", "links")


@pytest.mark.parametrize("servers", [2, 3, 4, 5, 7, 8, 9, 12])
def test_ring_hops_between_servers_stay_on_one_rail(servers: int) -> None:
    """Every channel's server-to-server hops, the closing one too, join GPUs of the same
    local index (NCCL's rings with PXN); only with servers - 1 a multiple of the 8 GPUs
    per server does the closing hop change rail (the last server is entered on it)."""
    from fabricsim.collectives.registry import Group
    from fabricsim.collectives.ring import ring_order

    fab = build_cluster("dgx-h100", servers)
    local = {int(n): i % 8 for i, n in enumerate(fab.gpus)}
    server = {int(n): i // 8 for i, n in enumerate(fab.gpus)}
    for c in range(8):
        order = [int(n) for n in ring_order(Group.of(fab, None), channel=c)]
        assert sorted(order) == sorted(int(n) for n in fab.gpus)
        hops = [(a, b) for a, b in zip(order, order[1:] + order[:1], strict=True)
                if server[a] != server[b]]
        assert len(hops) == servers
        off = [(a, b) for a, b in hops if local[a] != local[b]]
        assert len(off) == (1 if (servers - 1) % 8 == 0 else 0), (c, off)
