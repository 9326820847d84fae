"""A trace replayed through a scheduler: strict arrival order, GPUs held for the work
stretched by the slowdown the other jobs cause, fragmentation and idle time integrated
as defined, and jobs larger than the cluster refused naming their line."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError
from fabricsim.workloads.cluster import ClusterMember
from fabricsim.workloads.jobtrace import TraceJob, parse_trace
from fabricsim.workloads.models import get_model
from fabricsim.workloads.replay import replay
from fabricsim.workloads.training.parallel import ParallelConfig

M, CFG = get_model("llama3-8b"), ParallelConfig(tp=8, seq_len=4096)


def member(j: TraceJob, gpus: int) -> ClusterMember:
    return ClusterMember(j.name, gpus, M, CFG)


def _trace(rows: str) -> list[TraceJob]:
    return parse_trace("name,submit_s,gpus,duration_s\n" + rows)[0]


def test_fragmentation_and_idle_time_by_hand() -> None:
    """Two servers of 8. a, b, c take half a server each (b beside a, c on the other);
    when a ends there are 8 free GPUs but no free server, so d (a whole server) waits
    at the head of the queue until b ends: 901 s fragmented, 8 GPUs each."""
    fab = fs.build_cluster("dgx-h100", 2)
    r = replay(fab, _trace("a,0,4,100\nb,1,4,1000\nc,2,4,1000\nd,3,8,50\n"), member,
               hours=1)
    got = {j.name: (j.start_s, j.end_s) for j in r.jobs}
    assert got == {"a": (0.0, 100.0), "b": (1.0, 1001.0), "c": (2.0, 1002.0),
                   "d": (1001.0, 1051.0)}
    assert r.fragmented_gpu_s == pytest.approx(8 * 901)
    assert r.idle_queued_gpu_s == pytest.approx(4 * 97 + 8 * 901)
    s = r.summary()
    busy = 4 * 100 + 4 * 1000 + 4 * 1000 + 8 * 50
    assert s["utilisation"] == pytest.approx(busy / (16 * 3600))
    assert s["wait_mean_s"] == pytest.approx(998 / 4)
    assert (s["finished"], s["queued_at_end"], s["interference_gpu_hours"]) == (4, 0, 0.0)


def test_strict_order_and_the_window() -> None:
    fab = fs.build_cluster("dgx-h100", 2)
    r = replay(fab, _trace("a,0,16,3600\nb,10,8,60\nc,20,1,60\nlate,7300,1,60\n"),
               member, hours=2)
    assert [j.name for j in r.jobs] == ["a", "b", "c"]  # late is after the window
    assert [j.start_s for j in r.jobs] == [0.0, 3600.0, 3600.0]  # c waits behind b
    cut = replay(fab, _trace("a,0,16,9000\n"), member, hours=1)
    (a,) = cut.jobs
    assert (a.status, a.done_s, a.end_s) == ("running", 3600.0, None)
    with pytest.raises(ConfigError, match=r"line 2 .* needs 24 GPUs; the cluster has 16"):
        replay(fab, _trace("big,0,24,60\n"), member)
    with pytest.raises(ConfigError, match="unknown scheduler 'lottery'"):
        replay(fab, _trace("a,0,1,60\n"), member, scheduler="lottery")


def test_interference_stretches_a_job_across_leaves() -> None:
    """On a fat-tree whose servers 0-4 and 6-7 hang off two leaves (5 straddles), a
    resident job on servers 0 and 6 and a trace job that can only get servers 1 and 7
    share the leaf uplinks: the trace job, whose busiest uplink is one they share, slows
    down and holds its GPUs for its work times its slowdown. (The resident's busiest
    uplink is one it has alone: per link, the mean field need not slow both.)"""
    fab = fs.build_cluster("dgx-h100", 8, fabric="roce-400g", topology="fat-tree",
                           oversubscription=2)
    resident = [(ClusterMember("r1", 16, M, CFG), [0, 6]),
                (ClusterMember("r2", 24, M, CFG), [2, 3, 4]),
                (ClusterMember("r3", 8, M, CFG), [5])]
    r = replay(fab, _trace("t,0,16,600\n"), member, hours=1, resident=resident)
    jobs = {j.name: j for j in r.jobs}
    t = jobs["t"]
    assert t.servers == 2 and t.leaf_groups == 2 and t.shared
    assert t.slowdown is not None and t.slowdown > 1.01
    assert t.end_s == pytest.approx(600.0 * t.slowdown)
    assert jobs["r1"].slowdown is not None and jobs["r1"].slowdown >= 1.0
    assert jobs["r2"].slowdown == pytest.approx(1.0)  # inside one leaf
    assert "leaf" in t.slowed_on and t.by == ("r1",)  # where, and by whom
    assert jobs["r2"].slowed_on == "" and jobs["r2"].by == ()
    d = r.as_dict()["links_over_time"]
    assert len(d["t_s"]) == r.settles == 3  # residents, t starts, t ends
    assert t.slowed_on in [x["link"] for x in d["links"]]
    assert all(len(x["busy"]) == 3 for x in d["links"])
    assert r.summary()["interference_gpu_hours"] > 0
    alone = replay(fab, _trace("t,0,16,600\n"), member, hours=1)
    assert alone.jobs[0].end_s == pytest.approx(600.0)
