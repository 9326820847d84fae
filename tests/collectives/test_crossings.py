"""Network crossings (schedule.Crossings, collectives.pipeline.*_crossings): NCCL's channels
per size, the crossings per algorithm, the same cost in every backend, and the published
two-server curve whose mid-size step they reproduce."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from backend_delta import assert_every_backend_adds

from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.backends.base import crossing_cost
from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.packet import PacketBackend
from fabricsim.collectives.alltoall import peer_parts
from fabricsim.collectives.api import predict_time
from fabricsim.collectives.pipeline import ring_crossings, tree_crossings
from fabricsim.collectives.registry import Group, get_algorithm
from fabricsim.collectives.tuner import Tuner, build
from fabricsim.errors import ScheduleError
from fabricsim.fabric import build_cluster
from fabricsim.protocols import PROTOCOLS
from fabricsim.schedule import Crossings, PeerParts, Schedule

ROOT = Path(__file__).resolve().parents[2]


def test_channels_follow_nccl_rules() -> None:
    c = Crossings(count=2, channels=16, traffic_per_byte=2.0)
    ll128 = PROTOCOLS["ll128"].thread_bytes
    # at most ceil(traffic / 16 KiB) channels, all 16 from 128 KiB of all-reduce on
    assert [c.active(s, ll128) for s in (8, 16 * 1024, 64 * 1024, 2**17, 2**30)] == \
        [1, 2, 8, 16, 16]
    # and one fewer while the message is below channels x thread bytes: Simple's 32 KiB
    assert c.active(64 * 1024, PROTOCOLS["simple"].thread_bytes) == 2
    # a ring scales LL's threshold by its ranks: 512 ranks run 1 MiB on one channel
    ring = ring_crossings(Group.of(build_cluster("hgx-b200", 64)), "all_reduce")
    assert ring is not None and ring.ll_ranks == 512
    cost = crossing_cost(Schedule(steps=(), nbytes=2**20, crossings=ring), PROTOCOLS["ll"])
    assert cost == pytest.approx(ring.count * PROTOCOLS["ll"].crossing_per_channel)


def test_bad_crossings_are_refused() -> None:
    with pytest.raises(ScheduleError):
        Crossings(count=-1, channels=4)
    with pytest.raises(ScheduleError):
        Crossings(count=1, channels=0)
    with pytest.raises(ScheduleError):
        Crossings(count=1, channels=4, plugin_latency=-1e-6)


@pytest.mark.parametrize(("system", "declared_us"), [("aws-p5", 75.0), ("aws-p6-b200", 35.0),
                                                     ("dgx-h100", 0.0)])
def test_a_crossing_pays_a_share_of_the_plugins_declared_latency(system: str,
                                                                  declared_us: float) -> None:
    """aws-ofi-nccl declares its latency to NCCL (75 us on p4d and p5, 35 on p5en and p6:
    the catalog's ``nccl_net_latency_us``); each crossing of a tree over two instances pays
    ``plugin_latency_share`` of it on top of the per-channel cost, whatever the channels,
    in every backend. NCCL's own InfiniBand transport declares none."""
    fab = build_cluster(system, 2)
    assert fab.info.net_plugin_latency == pytest.approx(declared_us * 1e-6)
    sched = build(Group.of(fab), "all_reduce", 2**20, get_algorithm("tree"), "ll128")
    assert sched.crossings is not None and sched.crossings.count == 2
    assert sched.crossings.plugin_latency == pytest.approx(declared_us * 1e-6)
    share = PROTOCOLS["ll128"].plugin_latency_share
    assert 0 < share < 1
    without = replace(sched, crossings=replace(sched.crossings, plugin_latency=0.0))
    want = 2 * share * declared_us * 1e-6
    assert crossing_cost(sched, PROTOCOLS["ll128"]) - \
        crossing_cost(without, PROTOCOLS["ll128"]) == pytest.approx(want, abs=1e-12)
    if want > 0:
        assert_every_backend_adds(sched, without, fab, want)


def test_counts_per_algorithm() -> None:
    four = Group.of(build_cluster("dgx-h100", 4))
    ring = ring_crossings(four, "all_reduce")
    assert ring is not None and ring.count == 8  # two laps over 4 server boundaries
    gather = ring_crossings(four, "all_gather")
    assert gather is not None and gather.count == 4 and gather.traffic_per_byte == 1.0
    chain = ring_crossings(four, "broadcast")
    assert chain is not None and chain.count == 3
    tree = tree_crossings(Group.of(build_cluster("dgx-h100", 8)), "all_reduce")
    assert tree is not None and tree.count == 6
    assert ring_crossings(Group.of(build_cluster("dgx-h100", 1)), "all_reduce") is None
    # all-to-all is point to point: the proxy posts a send and a receive per remote peer
    sched = build(four, "alltoall", 2**20, get_algorithm("direct"), "simple")
    assert sched.crossings is not None and sched.crossings.count == 2 * 24
    assert sched.crossings.plugin_latency == 0.0  # the peers' latencies overlap
    one = build(Group.of(build_cluster("dgx-h100", 1)), "alltoall", 2**20,
                get_algorithm("direct"), "simple")
    assert one.crossings is None


@pytest.mark.parametrize(("algo", "proto"), [("ring", "ll128"), ("tree", "ll128"),
                                             ("nvlstree", "simple")])
def test_every_backend_adds_the_same_cost(algo: str, proto: str) -> None:
    fab = build_cluster("dgx-h100", 2)
    sched = build(Group.of(fab), "all_reduce", 2**20, get_algorithm(algo), proto)
    cost = crossing_cost(sched, PROTOCOLS[proto])
    assert cost > 0
    for backend in (FlowBackend(), PacketBackend()):
        assert backend.run(sched, fab).extra["crossings"] == pytest.approx(cost)
    bare = replace(sched, crossings=None)  # the same schedule, no crossings
    analytic = AnalyticBackend()
    assert analytic.run(sched, fab).time - analytic.run(bare, fab).time == \
        pytest.approx(cost, rel=1e-9)


def _published(source: str, nodes: int) -> dict[int, float]:
    """Time (us) per size of a source's default all_reduce rows (nccl_tests.csv)."""
    out: dict[int, float] = {}
    with open(ROOT / "data" / "reference" / "nccl_tests.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["source_key"] == source and int(r["nodes"]) == nodes and not r["algo"] \
                    and r["collective"] == "all_reduce" and r["time_us"]:
                out[int(r["size_bytes"])] = float(r["time_us"])
    return out


def test_the_mid_size_step_of_two_dgx_h100() -> None:
    """Two DGX H100 over NDR (a published curve held out of every fit but the crossing's):
    from 64 KiB to 1 MiB the measured time grows by 38 us, almost none of it bandwidth; a
    fixed hop cost grew it by 5 us. The model must show most of that step. Two things make
    it: NCCL's cost model moves the tree from LL to LL128 at 512 KiB, whose NVLink steps
    (2.5 us each, fitted on one server) the tree's chains pay; and the crossings of all
    the channels the operation then runs on (32 us at 1 MiB), while a 16-byte all-reduce,
    on one channel, gains no more than its two crossings'. The model is 29-39 % slower
    than this source from 16 B to 1 MiB (an open latency gap, docs/collectives.md; the
    crossing cost is fitted on 23 sources, and this one wants less)."""
    meas = _published("nccl-tests#309-qoofyk", 2)
    fab = build_cluster("dgx-h100", 2)
    model = {s: predict_time(fab, "all_reduce", s, algo="tree") * 1e6
             for s in (16, 65536, 2**20)}
    step_meas = meas[2**20] - meas[65536]
    step_model = model[2**20] - model[65536]
    assert step_meas > 30
    assert step_model > 0.6 * step_meas
    off = Tuner({k: p.scaled(crossing_per_channel=0.0) for k, p in PROTOCOLS.items()})
    before = {s: predict_time(fab, "all_reduce", s, algo="tree", tuner=off) * 1e6
              for s in model}
    assert model[2**20] - before[2**20] > 10 * (model[16] - before[16])  # all channels
    assert all(1.0 < model[s] / meas[s] < 1.4 for s in model)
    assert 0 < model[16] - before[16] <= 2 * PROTOCOLS["ll"].crossing_per_channel * 1e6 + 1e-9


def test_peer_parts_follow_nccls_split() -> None:
    # addP2pToPlan: start from the peer's channels, one per half chunk at most; double
    # while a part is over a chunk and doubling stays within the peer's channels
    p = PeerParts(share=1.0, least=2, most=4)
    assert [p.active(b) for b in (8, 64 * 1024, 128 * 1024, 256 * 1024, 2**20, 2**30)] == \
        [1, 1, 2, 2, 4, 4]
    few = PeerParts(share=1.0, least=1, most=4)  # many ranks: one channel to start from
    assert few.active(128 * 1024) == 1 and few.active(129 * 1024) == 2
    with pytest.raises(ScheduleError):
        PeerParts(share=1.0, least=3, most=2)
    # the ranks halve a peer's starting channels (32 p5: 256 ranks over 16 p2p channels)
    p5 = peer_parts(Group.of(build_cluster("aws-p5", 32)), 1 / 256)
    assert (p5.least, p5.most) == (1, 4)
    assert p5.active(32 * 2**20) == 1 and p5.active(256 * 2**20) == 4


def test_alltoall_pays_the_proxys_posts_per_remote_peer() -> None:
    fab = build_cluster("dgx-h100", 2)
    sched = build(Group.of(fab), "alltoall", 2**20, get_algorithm("direct"), "simple")
    c = sched.crossings
    assert c is not None and c.count == 2 * 8  # a send and a receive per remote peer
    per = PROTOCOLS["simple"].crossing_per_channel
    assert crossing_cost(sched, PROTOCOLS["simple"]) == pytest.approx(16 * per)
    assert_every_backend_adds(sched, replace(sched, crossings=None), fab, 16 * per)
    # one network round for all peers, not one per peer
    fills = [s for s in sched.steps if s.label == "peer setup"]
    assert len(fills) == 1 and fills[0].repeat == 1
    # send/recv: a successor on the other server is one remote peer
    sr = build(Group.of(fab), "sendrecv", 2**20, get_algorithm("direct"), "simple")
    assert sr.crossings is not None and sr.crossings.count == 2


def test_many_rank_alltoall_is_not_a_network_step_per_peer() -> None:
    # 32 p5 (256 GPUs) at 32 MiB: 248 remote peers. A network step per peer (12.5 us,
    # plus the EFA plugin's share) made it 7.6 ms where crazyguitar's HyperPod run
    # measured 1.70 ms (busbw 19.7 GB/s); the proxy's posts give about 1.5 ms
    fab = build_cluster("aws-p5", 32)
    t = predict_time(fab, "alltoall", 32 * 2**20)
    assert 1.0e-3 < t < 2.0e-3
