"""NVLS's pace by GPU generation: Hopper's at its links, Blackwell's at its copy warps."""

from __future__ import annotations

import pytest

from fabricsim.collectives import run_collective
from fabricsim.collectives.pipeline import nvls_copy_warps
from fabricsim.collectives.registry import Group, get_algorithm
from fabricsim.collectives.tuner import build
from fabricsim.fabric import build_cluster
from fabricsim.protocols import PROTOCOLS


def _algbw(system: str, n: int, nbytes: float) -> float:
    r = run_collective(build_cluster(system, 1), "all_reduce", nbytes, ranks=list(range(n)),
                       algo="nvls")
    return r.busbw / (2 * (n - 1) / n)


def test_blackwell_nvls_algbw_does_not_grow_with_the_ranks() -> None:
    # published one-domain Blackwell runs at >= 8 GiB: busbw 838-844 at 8 GPUs (Crusoe's
    # two trays, OCI's B300, Together's B200), 911-930 at 64-72 (Together's GB200 rack,
    # OCI's GB300 rack): algorithm bandwidth 469-482 GB/s at both, where the links'
    # (1 + 1/n) S each way would give 11 % more at 72 than at 8
    small, big = _algbw("gb200-nvl72", 8, 2**34), _algbw("gb200-nvl72", 72, 2**34)
    assert big / small == pytest.approx(1.0, abs=0.03)
    # and the copy warps set it: 168 warps x the protocol's rate per warp, less the
    # latency and the pipeline's fill at 16 GiB
    rate = 168 * PROTOCOLS["simple"].nvls_warp_rate["nvls"]
    assert 0.95 * rate <= big <= rate


def test_hopper_nvls_follows_its_links() -> None:
    # nccl issue 1455: 8 x H100, NVLS on 5 and 8 GPUs: algbw 258 -> 273 GB/s (x 1.058);
    # the links' (1 + 1/n) S each way gives x 1.067
    assert _algbw("dgx-h100", 8, 2**32) / _algbw("dgx-h100", 5, 2**32) == pytest.approx(
        1.06, abs=0.02)


def test_copy_warps_are_charged_on_blackwell_only() -> None:
    b200, h100 = Group.of(build_cluster("hgx-b200", 1)), Group.of(build_cluster("dgx-h100", 1))
    nvls = get_algorithm("nvls")
    assert build(b200, "all_reduce", 2**30, nvls, "simple").copy_warps == 24 * 7
    assert build(h100, "all_reduce", 2**30, nvls, "simple").copy_warps == 0
    # up to six ranks the block gives two more warps to the reduction, one fewer to copies
    assert nvls_copy_warps(Group.of(build_cluster("gb200-nvl72", 1), list(range(4)))) == 24 * 6
    two = Group.of(build_cluster("hgx-b200", 2))
    tree = build(two, "all_reduce", 2**30, get_algorithm("nvlstree"), "simple")
    assert tree.copy_warps == 32 * 5


def test_every_backend_charges_the_copy_warps() -> None:
    """One HGX B200 at 64 MiB: the analytic, flow and packet backends report the same
    time, the copy warps' floor (168 warps x the rate per warp) plus launch and more (the
    schedule's latency and the pipeline's fill come on top), the kernels limiting; the
    ideal protocol (physics only) charges no floor."""
    from fabricsim.backends.analytic import AnalyticBackend
    from fabricsim.backends.flow import FlowBackend
    from fabricsim.backends.packet import PacketBackend

    fab = build_cluster("hgx-b200", 1)
    s = build(Group.of(fab), "all_reduce", 2**26, get_algorithm("nvls"), "simple")
    simple = PROTOCOLS["simple"]
    floor = 2**26 / (s.copy_warps * simple.nvls_warp_rate["nvls"])
    runs = [b.run(s, fab) for b in (AnalyticBackend(), FlowBackend(), PacketBackend())]
    assert all(r.extra.get("limited_by") == "kernels" for r in runs[:1])
    assert runs[0].time >= floor + simple.launch
    for r in runs[1:]:
        assert r.time == pytest.approx(runs[0].time, rel=1e-6)
    assert AnalyticBackend(protocol="ideal").run(s, fab).time < floor


def test_nvlstree_channels_bound_it_from_four_hopper_servers() -> None:
    """NCCL caps NVLSTree's chunk at 64 KiB from 4 servers on; there each of Hopper's 16
    NVLS channels moves at most the protocol's bus bandwidth per channel (nccl-tests issue
    309's DGX H100 at 4 and 8 servers and AWS's p5 at 16 and 32: 303-325 GB/s at 4-8 GiB).
    Two servers keep NCCL's per-head rating; Blackwell's 32 channels leave the head figure
    to bind."""
    from fabricsim.collectives.pipeline import nvlstree_capped_channels

    tree = get_algorithm("nvlstree")
    per = PROTOCOLS["simple"].nvlstree_channel_rate
    for system, n, channels in (("dgx-h100", 2, 0), ("dgx-h100", 4, 16), ("dgx-h100", 8, 16),
                                ("hgx-b200", 4, 32)):
        g = Group.of(build_cluster(system, n))
        assert nvlstree_capped_channels(g) == channels
        assert build(g, "all_reduce", 2**33, tree, "simple").nvls_channels == channels

    def busbw(system: str, n: int) -> float:
        fab = build_cluster(system, n)
        return run_collective(fab, "all_reduce", 2**33, algo="nvlstree").busbw / 1e9

    assert busbw("dgx-h100", 8) == pytest.approx(16 * per / 1e9, rel=0.03)
    assert busbw("dgx-h100", 4) == pytest.approx(16 * per / 1e9, rel=0.03)
    assert busbw("dgx-h100", 2) > 1.3 * busbw("dgx-h100", 4)  # per-head rating, 2 servers
    b200 = build(Group.of(build_cluster("hgx-b200", 4)), "all_reduce", 2**33, tree, "simple")
    from fabricsim.backends.base import kernel_bounds

    bounds = kernel_bounds(b200, PROTOCOLS["simple"])
    assert bounds["nvls_channels"] > bounds["kernels"]  # Blackwell: the head figure binds


def test_every_backend_charges_the_nvls_channels() -> None:
    from fabricsim.backends.analytic import AnalyticBackend
    from fabricsim.backends.flow import FlowBackend

    fab = build_cluster("dgx-h100", 4)
    s = build(Group.of(fab), "all_reduce", 2**32, get_algorithm("nvlstree"), "simple")
    a, f = AnalyticBackend().run(s, fab), FlowBackend().run(s, fab)
    assert f.time == pytest.approx(a.time, rel=1e-6)
    n = 32
    floor = 2**32 / (16 * PROTOCOLS["simple"].nvlstree_channel_rate * n / (2 * (n - 1)))
    assert a.time >= floor
    assert AnalyticBackend(protocol="ideal").run(s, fab).time < floor


def test_a_runs_nvls_channels_set_nvlstrees_per_channel_bound() -> None:
    """``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` clamp NCCL's NVLS channels
    (``src/transport/nvls.cc``): where NVLSTree's rate is bounded per channel (4 servers
    on) the bound follows them; on two servers there is no such bound to move."""
    from fabricsim.collectives.nccl_env import nccl_env

    tree = get_algorithm("nvlstree")
    per = PROTOCOLS["simple"].nvlstree_channel_rate
    g8 = Group.of(build_cluster("dgx-h100", 8))
    g2 = Group.of(build_cluster("dgx-h100", 2))
    ch = nccl_env({"NCCL_MIN_CTAS": "24"}).nvls_channels_of(g8)
    assert ch == 24
    assert build(g8, "all_reduce", 2**33, tree, "simple", nvls_channels=ch).nvls_channels == 24
    assert build(g2, "all_reduce", 2**33, tree, "simple", nvls_channels=ch).nvls_channels == 0
    fab8 = g8.fabric

    def busbw(nvls: int | None) -> float:
        return run_collective(fab8, "all_reduce", 2**33, algo="nvlstree",
                              nvls_channels=nvls).busbw / 1e9

    assert busbw(8) == pytest.approx(8 * per / 1e9, rel=0.03)
    assert busbw(None) == pytest.approx(16 * per / 1e9, rel=0.03)
    assert busbw(24) > 1.08 * busbw(None)   # the per-head rating or the NICs bind next
    assert busbw(24) < 24 * per / 1e9
    # the tuner keeps what it compiled per channel setting apart
    from fabricsim.collectives.tuner import Tuner

    t = Tuner()
    a = t.choose(fab8, "all_reduce", 2**33, algo="nvlstree").time
    b = t.choose(fab8, "all_reduce", 2**33, algo="nvlstree", nvls_channels=8).time
    assert b > 1.5 * a
    assert t.choose(fab8, "all_reduce", 2**33, algo="nvlstree").time == a
