"""Many jobs on one fabric (workloads.cluster): placement policies and their refusals, and
the mean-field interference checked against the flow backend running the jobs' traffic
together."""

from __future__ import annotations

import numpy as np
import pytest

import fabricsim as fs
from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.backends.flow import FlowBackend
from fabricsim.collectives import build_schedule
from fabricsim.errors import ConfigError
from fabricsim.schedule.core import merge_parallel
from fabricsim.workloads.cluster import (
    ClusterMember,
    _with_capacity,
    interfere,
    place,
    server_leaves,
)
from fabricsim.workloads.comm import EngineComm
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step


@pytest.fixture(scope="module")
def fab() -> fs.Fabric:
    return fs.build_cluster("dgx-h100", 64, fabric="roce-400g")  # two leaf groups of 32


def test_policies(fab: fs.Fabric) -> None:
    d = [("a", 32, None), ("b", 16, None), ("c", 4, None), ("d", 4, None)]
    packed = place(fab, d, "packed")
    assert [p.servers for p in packed] == [(0, 1, 2, 3), (4, 5), (6,), (6,)]
    assert packed[3].gpus == tuple(range(52, 56))  # the partial server's free half
    leaves = server_leaves(fab)
    spread = place(fab, d, "spread")
    assert len({int(leaves[s]) for s in spread[0].servers}) == 2  # both leaf groups
    again = place(fab, d, "random", seed=7)
    assert again == place(fab, d, "random", seed=7) != place(fab, d, "random", seed=8)
    # rail: a job no wider than a leaf group keeps to the one with the least room
    frag = [("x", 224, None), ("y", 8, [30]), ("z", 64, None), ("w", 8, None)]
    assert {int(leaves[s]) for s in place(fab, frag, "packed")[2].servers} == \
        {int(leaves[0]), int(leaves[63])}  # packed straddles the two groups
    rail = place(fab, frag, "rail")
    assert rail[2].servers == tuple(range(32, 40))  # all under the second group
    assert rail[3].servers == (28,)  # best fit: the first group's last holes
    wide = place(fab, [("v", 384, None)], "rail")[0]
    assert len({int(leaves[s]) for s in wide.servers}) == 2
    hosts = place(fab, [("x", 16, [9, 3]), ("y", 64, None)], "packed")
    assert hosts[0].servers == (9, 3) and 3 not in hosts[1].servers
    assert hosts[0].gpus[:2] == (72, 73)  # ranks in the order of the host list
    # a host list may split a job evenly: 4 GPUs on each of 4 partly used hosts
    four = place(fab, [("x", 4, [0]), ("y", 16, [0, 1, 2, 3]), ("z", 12, [1, 2, 3])])
    assert four[1].gpus[:5] == (4, 5, 6, 7, 8) and len(four[2].gpus) == 12
    assert four[2].gpus[:4] == (12, 13, 14, 15)  # the free half of host 1


@pytest.mark.parametrize(("demands", "field", "words"), [
    ([("big", 1024, None)], "jobs.big.gpus", "the cluster has 512"),
    ([("odd", 12, None)], "jobs.odd.gpus", "multiple of 8"),
    ([("a", 16, [0, 1]), ("b", 16, [1, 2])], "jobs.b.hosts", "already taken by 'a'"),
    ([("a", 16, [0, 64])], "jobs.a.hosts", "not servers"),
    ([("a", 16, [3, 3])], "jobs.a.hosts", "twice"),
    ([("a", 16, [3])], "jobs.a.hosts", "needs 2 server"),
    ([("a", 16, [3, 4, 5])], "jobs.a.hosts", "split evenly"),
    ([("a", 6, [3]), ("b", 16, [3, 4, 5, 6])], "jobs.b.hosts", "already taken by 'a'"),
    ([("a", 256, None), ("b", 256, None), ("c", 8, None)], "jobs.c.gpus", "0 are left"),
    ([("a", 8, None), ("a", 8, None)], "jobs.a.name", "two jobs are named 'a'"),
])
def test_bad_placements_name_the_job(fab: fs.Fabric, demands: list, field: str,
                                     words: str) -> None:
    with pytest.raises(ConfigError, match=words) as e:
        place(fab, demands, "packed")
    assert e.value.field == field


def _members(n: int, gpus: int = 32) -> list[ClusterMember]:
    m = get_model("llama2-7b")  # DP across servers: gradients cross the network
    cfg = ParallelConfig(tp=1, global_batch=4 * gpus, seq_len=2048)
    return [ClusterMember(chr(97 + i), gpus, m, cfg) for i in range(n)]


def test_jobs_apart_do_not_interfere_and_jobs_together_do(fab: fs.Fabric) -> None:
    jobs = _members(2)
    apart = interfere(fab, jobs, place(fab, [("a", 32, range(4)), ("b", 32, range(32, 36))]))
    assert [j.slowdown for j in apart.jobs] == [1.0, 1.0]
    # an oversubscribed fat-tree: both jobs' rings cross the same spine links
    tight = fs.build_cluster("dgx-h100", 8, fabric="roce-400g", topology="fat-tree",
                             radix=16, oversubscription=2)
    small = _members(2, 16)
    out = interfere(tight, small, place(tight, [("a", 16, [0, 4]), ("b", 16, [1, 5])]))
    assert max(j.slowdown for j in out.jobs) > 1.02
    assert out.jobs[0].culprits[0][0] == "b" and out.jobs[1].culprits[0][0] == "a"
    slow = max(out.jobs, key=lambda j: j.slowdown)
    assert "spine" in slow.links[0][0] or "leaf" in slow.links[0][0]
    assert slow.as_dict()["gpu_hours_lost_per_hour"] > 0


def test_alone_is_the_training_model_on_its_own_cluster() -> None:
    """A job alone on its placement times like ``train`` on a cluster of its size (the
    groups run together here; the step model's NIC-sharing factor stands for that)."""
    big = fs.build_cluster("dgx-h100", 16, fabric="ib-ndr")
    m = get_model("llama3-8b")
    cfg = ParallelConfig(tp=8, global_batch=64, seq_len=8192)
    job = ClusterMember("a", 32, m, cfg)
    shared = interfere(big, [job], place(big, [("a", 32, None)]))
    own = simulate_step(m, cfg, fs.build_cluster("dgx-h100", 4, fabric="ib-ndr"),
                        EngineComm(fs.build_cluster("dgx-h100", 4, fabric="ib-ndr")),
                        check_memory=False)
    assert shared.jobs[0].alone.step_time_s == pytest.approx(own.step_time_s, rel=0.05)
    assert shared.jobs[0].slowdown == 1.0


def test_mean_field_against_the_flow_backend() -> None:
    """Two jobs' all-to-alls through the same oversubscribed spine, both running all the
    time: the flow backend shares every link max-min fairly, packet flow by flow; the
    mean-field divides each link by 1 + the other's busy share. Measured: flow ×1.33 and
    ×1.99, mean-field ×1.45 and ×1.60 — the mean misses that the faster job spends all its
    time beside the slower one. Pinned within 30 %."""
    fab = fs.build_cluster("dgx-h100", 8, fabric="roce-400g", topology="fat-tree",
                           radix=16, oversubscription=2)

    def grp(servers: list[int]) -> np.ndarray:
        return np.concatenate([np.arange(s * 8, s * 8 + 8) for s in servers])

    sa = build_schedule(fab, "alltoall", 2**30, ranks=grp([0, 4]))
    sb = build_schedule(fab, "alltoall", 2**30, ranks=grp([1, 5]))
    flow = FlowBackend()
    alone = [flow.run(s, fab).time for s in (sa, sb)]
    both = flow.run(merge_parallel([sa, sb], collective="alltoall", protocol="simple",
                                   nbytes=2**30), fab)
    n = len(sa.steps)
    shared = [float(both.step_end[:n].max()), float(both.step_end[n:].max())]
    an = AnalyticBackend()
    runs = [an.run(s, fab) for s in (sa, sb)]
    cap = fab.link_capacity
    busy = [r.link_bytes / r.time / cap for r in runs]
    mf = [an.run(s, _with_capacity(fab, cap / (1 + busy[1 - i]))).time / runs[i].time
          for i, s in enumerate((sa, sb))]
    for i in range(2):
        flow_slow = shared[i] / alone[i]
        assert flow_slow > 1.2 and mf[i] > 1.2
        assert mf[i] == pytest.approx(flow_slow, rel=0.3)


def test_failure_costs_three_ways(fab: fs.Fabric) -> None:
    """A server failing under a 4-server data-parallel job: with a spare it loses the work
    since the last checkpoint and a restart; without one it waits for the repair, or
    trains on the 3 surviving replicas (each keeping its micro-batches) meanwhile."""
    from fabricsim.workloads.cluster import failure_costs

    m = get_model("llama3-8b")
    jobs = [ClusterMember("a", 32, m, ParallelConfig(tp=8, global_batch=64, seq_len=8192)),
            ClusterMember("b", 32, m, ParallelConfig(tp=8, global_batch=64, seq_len=8192))]
    placed = place(fab, [(j.name, j.gpus, None) for j in jobs])
    out = interfere(fab, jobs, placed)
    costs = failure_costs(fab, jobs, placed, [j.shared for j in out.jobs], [2],
                          repair_hours=4.0, restart_s=600.0)
    assert [c.job for c in costs] == ["a"]  # b runs on servers 4-7
    c = costs[0]
    assert (c.servers_lost, c.replicas_lost) == (1, 1)
    assert c.with_spares_s == pytest.approx(c.lost_work_s + 600.0)
    assert c.wait_s == pytest.approx(c.with_spares_s + 4 * 3600.0)
    assert c.shrink_step_s is not None and c.shrink_s is not None
    # 3 of 4 replicas train meanwhile: about a quarter of the repair is lost, not all
    lost_share = (c.shrink_s - c.lost_work_s - 1200.0) / (4 * 3600.0)
    assert 0.2 < lost_share < 0.3
    assert c.best_without_spares == "shrink"
    assert c.as_dict()["gpu_hours_lost"]["with_spares"] == pytest.approx(
        c.with_spares_s * 32 / 3600)
    # over a failure trace: every hardware failure waits the repair out, or trains shrunk
    assert 0 < c.hardware_per_day < c.failures_per_day
    assert c.goodput_wait == pytest.approx(
        c.goodput_with_spares - c.hardware_per_day / 24 * 4.0)
    assert c.goodput_shrink is not None
    assert c.goodput_wait < c.goodput_shrink < c.goodput_with_spares < 1.0
    # a layout whose every replica has a GPU on the failed server cannot shrink
    one = [ClusterMember("tp16", 16, m, ParallelConfig(tp=16, global_batch=8,
                                                       seq_len=4096))]
    pl = place(fab, [("tp16", 16, None)])
    solo = interfere(fab, one, pl)
    c2 = failure_costs(fab, one, pl, [solo.jobs[0].shared], [0])[0]
    assert c2.shrink_s is None and "every data-parallel replica" in c2.shrink_note
    assert c2.best_without_spares == "wait"


def test_crux_pair_rebuilds_and_is_scored() -> None:
    """The published pair runs as a cluster job: the GPT's step alone is the stated
    1.53 s (its batch is chosen so), both jobs share leaf uplinks (each names the other),
    and the published slowdowns are read as shared over alone."""
    from benchmark_module import load

    bench = load("accuracy_cluster")
    pub = {r["job"]: bench.published(r) for r in bench.rows()}
    assert pub == pytest.approx({"gpt": 1.70 / 1.53, "bert": 1 / (1 - 0.077)})
    got = bench.crux(2304)
    assert got["gpt"]["step_alone_s"] == pytest.approx(1.53, rel=0.02)
    assert [c["job"] for c in got["gpt"]["culprits"]] == ["bert"]
    assert [c["job"] for c in got["bert"]["culprits"]] == ["gpt"]


@pytest.mark.xfail(strict=True, reason="the mean-field model gives x1.000 for both jobs of "
                   "Crux's pair, measured x1.11 and x1.08: their data-parallel all-reduce is "
                   "hidden behind backward compute in the step model and their mean busy "
                   "share of the shared uplinks is 1-3 %; the measured slowdown needs "
                   "exposed communication the section does not describe (docs/cluster.md)")
def test_crux_pair_slowdowns_within_a_quarter_of_their_excess() -> None:
    from benchmark_module import load

    bench = load("accuracy_cluster")
    got = bench.crux(2304)
    for row in bench.rows():
        pub = bench.published(row)
        assert got[row["job"]]["slowdown"] - 1.0 == pytest.approx(pub - 1.0, rel=0.25)
