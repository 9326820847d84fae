"""The tree kernels' own rate (protocols.tree_kernel_rate) and how every backend applies it."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.packet import PacketBackend
from fabricsim.collectives.api import predict_time
from fabricsim.collectives.registry import Group, get_algorithm
from fabricsim.collectives.tuner import build
from fabricsim.errors import ScheduleError
from fabricsim.fabric import build_cluster
from fabricsim.protocols import PROTOCOLS, TREE_NIC_SHARE, tree_kernel_rate
from fabricsim.schedule import Schedule, Step


def test_rate_is_the_smaller_of_channels_and_nics() -> None:
    a100 = build_cluster("dgx-a100", 2)
    # 8 channels x 11.8 GB/s (Ampere, 2 servers) = 94.4 > 0.46 x 8 HDR NICs = 92
    assert tree_kernel_rate(a100, 2, 8) == pytest.approx(TREE_NIC_SHARE * 8 * 25e9)
    assert tree_kernel_rate(a100, 2, 2) == pytest.approx(2 * 11.8e9)
    # deeper trees are slower per channel (NCCL's figures fall from 2 to 3+ servers)
    assert tree_kernel_rate(a100, 4, 2) < tree_kernel_rate(a100, 2, 2)
    # no figure for a GPU without NVLink: only the NIC share bounds it
    pcie = build_cluster("pcie-8gpu", 2)
    assert tree_kernel_rate(pcie, 2, 8) == pytest.approx(
        TREE_NIC_SHARE * pcie.info.nic_bandwidth * pcie.info.nics_per_server)


def test_auto_picks_ring_where_nccl_measured_ring() -> None:
    """2 x DGX A100, 1 GiB: the tree's links allow 246 GB/s busbw, its kernels 172, less
    its chunk pipeline's fill (16 channels of 512 KiB chunks through 16 stages) 164;
    ring's 178 wins, as NCCL's default measured 184 (measurements_2.csv row 1085)."""
    fab = build_cluster("dgx-a100", 2)
    n = fab.n_gpus
    bus = {a: 2**30 / predict_time(fab, "all_reduce", 2**30, algo=a) * 2 * (n - 1) / n / 1e9
           for a in ("ring", "tree")}
    auto = 2**30 / predict_time(fab, "all_reduce", 2**30) * 2 * (n - 1) / n / 1e9
    assert bus["tree"] < bus["ring"] == pytest.approx(auto)
    assert 155 < bus["tree"] < 172


def test_every_backend_applies_the_floor_alike() -> None:
    fab = build_cluster("dgx-a100", 2)
    group = Group.of(fab)
    sched = build(group, "all_reduce", 2**24, get_algorithm("tree"), "simple")
    assert sched.kernel_bytes_per_s > 0
    floor = sched.kernel_floor() + PROTOCOLS["simple"].launch
    times = [b.run(sched, fab).time for b in
             (AnalyticBackend(), FlowBackend(), PacketBackend())]
    for t in times:
        assert t >= floor * (1 - 1e-12)
    # "ideal" is physics only: no kernel overhead
    ideal = AnalyticBackend(protocol="ideal").run(sched, fab).time
    assert ideal < sched.kernel_floor()


def test_floor_binds_a_tiny_fast_schedule_in_all_backends() -> None:
    """One idle NVLink transfer of 1 MB with a kernel rate of 1 GB/s: all three backends
    report the kernel time (1 ms) plus launch, not the link time (~4 us)."""
    fab = build_cluster("dgx-h100", 1)
    step = Step(src=fab.gpus[:1], dst=fab.gpus[1:2], nbytes=np.array([1e6]))
    s = Schedule(steps=(step,), protocol="simple", nbytes=10**6, kernel_bytes_per_s=1e9)
    want = 1e-3 + PROTOCOLS["simple"].launch
    for b in (AnalyticBackend(), FlowBackend(), PacketBackend()):
        assert b.run(s, fab).time == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_bad_kernel_rate_is_a_clear_error(bad: float) -> None:
    with pytest.raises(ScheduleError, match="kernel_bytes_per_s"):
        Schedule(steps=(), kernel_bytes_per_s=bad)
