"""Context-parallel ring attention: the slowest hop of the ring sets the pace."""

import pytest

import fabricsim as fs
from fabricsim.workloads.comm import EngineComm
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.compute import ComputeTimes
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import comm_cost, ring_hop_time, simulate_step


def _cp_run(cp: int, mb: int) -> float:
    fab = fs.build_cluster("dgx-h100", nodes=32)
    cfg = ParallelConfig(tp=2, pp=4, cp=cp, micro_batch=mb, global_batch=512, seq_len=8192)
    r = simulate_step(get_model("llama3-70b"), cfg, fab, check_memory=False)
    return r.comm_total_s["cp"]


def test_cp_ring_leaving_the_server_is_timed_on_the_network() -> None:
    # tp=2: cp=4 covers the 8 GPUs of one DGX (NVLink only); cp=8 spans two servers, so
    # two hops of its ring cross InfiniBand. The K/V bytes per hop are equal (micro-batch
    # doubled, sequence chunk halved) and the number of ring steps goes 3 -> 7 per pass,
    # so NVLink-only timing would give exactly 7/3; the network hop must make it far more.
    inside, across = _cp_run(4, 1), _cp_run(8, 2)
    assert inside > 0
    ratio = across / inside
    assert ratio > 7 / 3 * 3, ratio
    # and the cross-server hop equals a lone NDR send/recv of the same bytes
    fab = fs.build_cluster("dgx-h100", nodes=32)
    comm = EngineComm(fab)
    kv = 2 * (8192 / 8) * 2 * 8 * 128 * 2.0 / 2
    assert ring_hop_time(comm, [0, 2, 4, 6, 8, 10, 12, 14], kv) == pytest.approx(
        comm.time("sendrecv", [6, 8], kv))
    assert comm.time("sendrecv", [6, 8], kv) > 3 * comm.time("sendrecv", [0, 2], kv)


def test_ring_hop_time_takes_the_max_over_all_hops_including_wraparound() -> None:
    asked: list[tuple[int, int]] = []

    class Wrap:
        def time(self, collective: str, ranks: list[int], nbytes: float) -> float:
            asked.append((ranks[0], ranks[1]))
            return 5.0 if ranks == [30, 0] else 1.0

    assert ring_hop_time(Wrap(), [0, 10, 20, 30], 1.0) == 5.0
    assert (30, 0) in asked and len(asked) == 4
    assert ring_hop_time(Wrap(), [0], 1.0) == 0.0


def test_cp_comm_uses_the_slow_hop_in_comm_cost() -> None:
    class Cross:
        def time(self, collective: str, ranks: list[int], nbytes: float) -> float:
            if collective != "sendrecv":
                return 0.0
            return 1.0 if ranks[0] // 8 != ranks[1] // 8 else 0.01

    m = get_model("llama3-8b")
    ct = ComputeTimes(1.0, 2.0, 0.0, 0.0, 0.0)
    p = ParallelConfig(tp=2, cp=8, seq_len=8192).resolve(m, world=16)
    _, tot = comm_cost(m, p, Cross(), ct)
    # 7 ring steps forward + 14 backward per layer, each paced by the 1 s network hop
    assert tot["cp"] == pytest.approx(p.stage_layers * 21 * 1.0 * p.num_micro)


def test_engine_cache_keeps_ring_calls_few() -> None:
    fab = fs.build_cluster("dgx-h100", nodes=8)
    comm = EngineComm(fab)
    ring_hop_time(comm, list(range(0, 64, 2)), 1e6)
    assert comm.calls <= 4
