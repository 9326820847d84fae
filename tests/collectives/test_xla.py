"""XLA's collectives on TPU slices, against Google's published pod figures."""

from __future__ import annotations

import pytest

from fabricsim.backends.flow import FlowBackend
from fabricsim.collectives import build_schedule, run_collective
from fabricsim.errors import ScheduleError
from fabricsim.fabric import build_cluster


@pytest.mark.parametrize(("system", "nodes", "pod_tb_s"), [
    ("tpu-v5e", 32, 51.2),     # Cloud TPU v5e page: all-reduce bandwidth per pod
    ("tpu-v6e", 32, 102.4),    # Cloud TPU v6e page
    ("tpu-v4", 1024, 1100.0),  # Cloud TPU v4 page: 1.1 PB/s per 4,096-chip pod
])
def test_pod_all_reduce_bandwidth_matches_google(system: str, nodes: int,
                                                 pod_tb_s: float) -> None:
    """Google's figure is every chip's ports at line rate: only an algorithm that keeps
    every ICI port of every chip busy reaches it (one ring per dimension would not)."""
    fab = build_cluster(system, nodes=nodes)
    r = run_collective(fab, "all_reduce", 2**30)
    assert r.algorithm == "xla_torus"
    assert r.busbw * fab.n_gpus / 1e12 == pytest.approx(pod_tb_s, rel=0.03)


def test_a_mesh_gets_half_a_torus() -> None:
    """Without wraparound the rings close back along the line: half the bandwidth."""
    mesh = run_collective(build_cluster("tpu-v5p", nodes=8), "all_reduce", 2**30).busbw
    torus = run_collective(build_cluster("tpu-v5p", nodes=16), "all_reduce", 2**30).busbw
    assert 0.45 < mesh / torus < 0.55


def test_twisting_speeds_all_to_all_not_all_reduce() -> None:
    plain = build_cluster("tpu-v5p", nodes=32)
    twist = build_cluster("tpu-v5p", nodes=32, params={"ici_twisted": True})
    a2a = [run_collective(f, "alltoall", 2**28).time for f in (plain, twist)]
    ar = [run_collective(f, "all_reduce", 2**28).time for f in (plain, twist)]
    assert 1.3 < a2a[0] / a2a[1] < 2.0   # bisection doubles; all-to-all gains less
    assert ar[1] == pytest.approx(ar[0], rel=0.01)


def test_flow_backend_agrees_on_the_torus() -> None:
    fab = build_cluster("tpu-v5p", nodes=16)
    sched = build_schedule(fab, "all_reduce", 2**28)
    ana = run_collective(fab, "all_reduce", 2**28).time
    assert FlowBackend().run(sched, fab).time == pytest.approx(ana, rel=0.02)


def test_a_sub_block_uses_its_own_dimensions() -> None:
    """A tensor-parallel group of one host (2x2x1) rings over two dimensions."""
    fab = build_cluster("tpu-v5p", nodes=16)
    sched = build_schedule(fab, "all_reduce", 2**26, ranks=[0, 1, 2, 3])
    axes = {s.label.split()[2] for s in sched.steps}
    assert axes == {"axis0", "axis1"}


def test_several_slices_reduce_hierarchically_over_the_dcn() -> None:
    one = build_cluster("tpu-v5p", nodes=32)
    two = build_cluster("tpu-v5p", nodes=32, params={"ici_slice": "4x4x4"})
    sched = build_schedule(two, "all_reduce", 2**30)
    assert any("DCN" in s.label for s in sched.steps)
    slow = run_collective(two, "all_reduce", 2**30)
    assert slow.time > 1.5 * run_collective(one, "all_reduce", 2**30).time
    assert slow.result.bottleneck_kind in ("nic-leaf", "leaf-spine", "pcie")


def test_gpu_clusters_never_get_xla_and_tpus_never_get_nccl() -> None:
    assert run_collective(build_cluster("dgx-h100", 2), "all_reduce", 2**26).algorithm \
        != "xla_torus"
    with pytest.raises(ScheduleError):
        build_schedule(build_cluster("dgx-h100", 2), "all_reduce", 2**26, algo="xla_torus")


def test_every_backend_times_a_host_the_same() -> None:
    """Analytic, flow and packet agree on an all-reduce over two hosts' ICI links."""
    from fabricsim.backends.registry import get_backend

    fab = build_cluster("tpu-v5p", nodes=2)
    sched = build_schedule(fab, "all_reduce", 2**20)
    times = [get_backend(b).run(sched, fab).time for b in ("analytic", "flow", "packet")]
    assert max(times) == pytest.approx(min(times), rel=0.01)


def test_experts_exchange_by_xla_on_a_slice() -> None:
    """MoE dispatch on a TPU slice is XLA's all-to-all; NVIDIA's EP kernels are refused."""
    from fabricsim.collectives.ep import EpConfig, run_ep
    from fabricsim.errors import ConfigError

    fab = build_cluster("tpu-v5p", nodes=16)
    cfg = EpConfig(tokens=4096, hidden=7168, top_k=8, experts=256)
    r = run_ep(fab, cfg, "dispatch")
    assert r.kernel == "xla" and r.limit == "ici"
    assert run_ep(fab, cfg, "dispatch", kernel="nccl").time_us == pytest.approx(r.time_us)
    with pytest.raises(ConfigError) as e:
        run_ep(fab, cfg, "dispatch", kernel="deepep")
    assert e.value.field == "--ep-kernel"
    with pytest.raises(ConfigError):
        run_ep(build_cluster("dgx-h100", 2), cfg, "dispatch", kernel="xla")
