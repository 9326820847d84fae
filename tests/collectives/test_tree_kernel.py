"""The tree kernels' own rate (protocols.tree_kernel_rate) and how every backend applies it."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.backends.analytic import AnalyticBackend, stream_start
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
    a100 = build_cluster("dgx-a100", 4)
    # 3 servers and more: 8 channels x 8.9 GB/s (Ampere) = 71.2 < 0.46 x 8 HDR NICs = 92,
    # 16 channels x 8.9 = 142.4 > 92
    assert tree_kernel_rate(a100, 4, 8) == pytest.approx(8 * 8.9e9)
    assert tree_kernel_rate(a100, 4, 16) == pytest.approx(TREE_NIC_SHARE * 8 * 25e9)
    # two servers: NCCL rates the tree by its NVLink side there (bwIntra), and a node
    # sends and receives the message once, not twice: only the kernels bound it
    assert tree_kernel_rate(a100, 2, 16) == pytest.approx(16 * 11.8e9)
    # deeper trees are slower per channel (NCCL's figures fall from 2 to 3+ servers)
    assert tree_kernel_rate(a100, 4, 2) < tree_kernel_rate(a100, 2, 2)
    # no figure for a GPU without NVLink: only the NIC share bounds it, from 3 servers
    pcie = build_cluster("pcie-8gpu", 3)
    assert tree_kernel_rate(pcie, 3, 8) == pytest.approx(
        TREE_NIC_SHARE * pcie.info.nic_bandwidth * pcie.info.nics_per_server)
    assert tree_kernel_rate(pcie, 2, 8) == 0.0


def test_two_servers_of_p4d_run_the_tree_at_their_nics() -> None:
    """2 x p4d (4 x 100G EFA per 8 A100): all_reduce peaks at 77-78 GB/s busbw (awsome-
    distributed-training, nccl_tests.csv), above a ring's bound (its NICs' 50 GB/s): the
    tree, which sends and receives the message once per server. NCCL's cost model rates
    it by its NVLink side over two servers, so NCCL runs it; so does the model."""
    fab = build_cluster("aws-p4d", 2)
    n = fab.n_gpus
    auto = 2**30 / predict_time(fab, "all_reduce", 2**30) * 2 * (n - 1) / n / 1e9
    ring = 2**30 / predict_time(fab, "all_reduce", 2**30, algo="ring") * 2 * (n - 1) / n / 1e9
    assert ring < 50 < 77 < auto < 90


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
    report the kernel time (1 ms) after the transfer's own latency, plus launch, not the
    link time (~4 us)."""
    fab = build_cluster("dgx-h100", 1)
    step = Step(src=fab.gpus[:1], dst=fab.gpus[1:2], nbytes=np.array([1e6]))
    s = Schedule(steps=(step,), protocol="simple", nbytes=10**6, kernel_bytes_per_s=1e9)
    start = stream_start(s, PROTOCOLS["simple"], fab)
    assert start > 0  # one NVLink hop's latency
    want = start + 1e-3 + PROTOCOLS["simple"].launch
    for b in (AnalyticBackend(), FlowBackend(), PacketBackend()):
        assert b.run(s, fab).time == pytest.approx(want, rel=1e-9)


def test_kernel_stream_starts_after_the_latency() -> None:
    """A tree with LL128 across two p5 at 4 MiB: the kernels' rate (16 channels at LL128's
    tree channel rate) needs about as long as the schedule's latencies; NCCL's own cost
    model adds the two (latency + size / bandwidth), and so does every backend: the run
    takes at least their sum, where taking the larger of the two would hide one."""
    from fabricsim.backends.base import kernel_floor

    fab = build_cluster("aws-p5", 2)
    s = build(Group.of(fab), "all_reduce", 2**22, get_algorithm("tree"), "ll128")
    ll128 = PROTOCOLS["ll128"]
    comp = AnalyticBackend().compile(s, fab)
    _, end = comp.step_times()
    start, floor = stream_start(s, ll128, fab), kernel_floor(s, ll128)
    assert 0.3 < floor / start < 3  # comparable: the rule matters here
    t = comp.time()
    assert t >= start + floor + ll128.launch
    assert t > max(float(end.max()), floor) + ll128.launch


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_bad_kernel_rate_is_a_clear_error(bad: float) -> None:
    with pytest.raises(ScheduleError, match="kernel_bytes_per_s"):
        Schedule(steps=(), kernel_bytes_per_s=bad)


def test_ll128_bounds_a_tree_channel_between_servers() -> None:
    """LL128's own rate per tree channel (Protocol.tree_channel_rate, fitted at 5 GB/s on
    15 sources) bounds a tree between servers on NCCL's channels, in every backend; Simple
    and LL keep the tree kernels' rate, and one server has no such bound."""
    from fabricsim.backends.base import kernel_floor
    from fabricsim.collectives.pipeline import nccl_channels

    fab = build_cluster("aws-p5", 4)
    group = Group.of(fab)
    tree = get_algorithm("tree")
    ll128 = PROTOCOLS["ll128"]
    assert ll128.tree_channel_rate > 0.0
    assert PROTOCOLS["simple"].tree_channel_rate == 0.0 == PROTOCOLS["ll"].tree_channel_rate
    s = build(group, "all_reduce", 2**28, tree, "ll128")
    ch = nccl_channels(group)
    assert s.tree_channels == ch == 16
    assert kernel_floor(s, ll128) == pytest.approx(2**28 / (ch * ll128.tree_channel_rate))
    assert kernel_floor(s, PROTOCOLS["simple"]) == pytest.approx(s.kernel_floor())
    assert kernel_floor(s, PROTOCOLS["simple"]) < kernel_floor(s, ll128)
    # channels given (NCCL_MIN/MAX_NCHANNELS) are the channels it bounds
    assert build(group, "all_reduce", 2**28, tree, "ll128", channels=8).tree_channels == 8
    # every backend holds a tree with LL128 to the bound (on a smaller cluster, for speed)
    small = build_cluster("aws-p5", 2)
    s2 = build(Group.of(small), "all_reduce", 2**27, tree, "ll128")
    floor = kernel_floor(s2, ll128) + ll128.launch
    for b in (AnalyticBackend(protocol="ll128"), FlowBackend(protocol="ll128"),
              PacketBackend(protocol="ll128")):
        assert b.run(s2, small).time >= floor * (1 - 1e-12)
    # rings are no trees, and a tree inside one server has no channel between servers
    assert build(group, "all_reduce", 2**28, get_algorithm("ring"), "ll128").tree_channels == 0
    one = Group.of(build_cluster("dgx-h100", 1))
    assert build(one, "all_reduce", 2**28, get_algorithm("ring"), "ll128").tree_channels == 0


def test_published_p5_trees_run_near_the_bound() -> None:
    """Two to 32 p5 run NCCL's tree with LL128 at 90-100 GB/s of algorithm bandwidth
    (nccl_tests.csv: two EKS blueprints, awsome-distributed-training, SageMaker HyperPod);
    the bound puts 16 channels at 80 GB/s after the latencies, and the model's 256 MiB on
    32 instances (measured 3.9 ms) within 25 % of it, where it was 1.8x fast without."""
    fab = build_cluster("aws-p5", 32)
    s = build(Group.of(fab), "all_reduce", 2**28, get_algorithm("tree"), "ll128")
    t = AnalyticBackend().compile(s, fab).time()
    assert t == pytest.approx(3.875e-3, rel=0.25)


@pytest.mark.parametrize(("system", "servers", "channels"), [
    ("hgx-b200", 4, 8),     # eight GPUs with a NIC each: the schedule's channels too
    ("gb200-nvl72", 1, 16),  # one NVLink domain: NCCL's tree graph, not one channel
])
def test_tree_kernels_are_rated_on_nccls_tree_channels(system: str, servers: int,
                                                       channels: int) -> None:
    """NCCL rates its tree kernels at its tree graph's channels times a per-channel figure
    (``graphs[a]->nChannels * perChMaxTreeBw``, src/graph/tuning.cc): the schedule's
    kernel rate uses the same channels, whatever channels the schedule's steps run on."""
    from fabricsim.collectives.nccl_model import NcclModel

    fab = build_cluster(system, servers)
    group = Group.of(fab)
    assert NcclModel.of(group).channels == channels
    sched = build(group, "all_reduce", 2**30, get_algorithm("tree"), "simple")
    assert sched.kernel_bytes_per_s == pytest.approx(
        tree_kernel_rate(fab, servers, channels))


def test_three_gb200_trays_run_their_tree_on_eight_channels() -> None:
    """NCCL issue #1801: three 4-GPU GB200 partitions on three racks, InfiniBand between
    them, tree forced, 16 GiB: 234 GB/s busbw measured. NCCL duplicates the tray's four
    NIC channels to eight; on four, the kernels held the model at 88 GB/s busbw (-62 %)."""
    fab = build_cluster("gb200-nvl72", 3, gpus_per_node=4)
    n = fab.n_gpus
    assert (fab.info.servers, n) == (3, 12)
    t = predict_time(fab, "all_reduce", 2**34, algo="tree")
    busbw = 2**34 / t * 2 * (n - 1) / n / 1e9
    assert 160 < busbw < 234
