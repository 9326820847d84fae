"""Chunk pipelines (collectives.pipeline, schedule.Pipeline): NCCL's chunk sizes, channels
and stages, and their fill as every backend times it."""

from __future__ import annotations

import pytest

from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.backends.base import active_pipeline, pipeline_fill, ramp_bytes
from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.packet import PacketBackend
from fabricsim.collectives.pipeline import (
    chain_pipeline,
    ll128_tree_shrink,
    nccl_channels,
    nvls_channels,
    nvls_pipeline,
    nvlstree_pipeline,
    tree_ll128_pipelines,
    tree_pipeline,
)
from fabricsim.collectives.registry import Group, get_algorithm
from fabricsim.collectives.tuner import build
from fabricsim.errors import ScheduleError
from fabricsim.fabric import build_cluster
from fabricsim.protocols import LINK_CLASSES, PROTOCOLS
from fabricsim.schedule import Pipeline, Schedule

KIB = 1024


def test_fill_is_every_stage_but_the_slowest_once() -> None:
    p = Pipeline(stages=(("nvlink", 3, 2e9), ("net", 2, 1e9)), ops=1, chunk_bytes=1e6)
    # stages take 0.5 ms (NVLink) and 1 ms (network): 3 x 0.5 + 2 x 1 - 1 = 2.5 ms
    assert p.fill(1e9, {"nvlink": 1.0, "net": 1.0}) == pytest.approx(2.5e-3)
    # half the efficiency, twice the time; a message smaller than a chunk fills with itself
    assert p.fill(1e9, {"nvlink": 0.5, "net": 0.5}) == pytest.approx(5e-3)
    assert p.fill(1e5, {"nvlink": 1.0, "net": 1.0}) == pytest.approx(2.5e-4)
    assert p.fill(0, {}) == 0.0
    with pytest.raises(ScheduleError):
        Pipeline(stages=(("net", 1, 0.0),), ops=1, chunk_bytes=1.0)
    with pytest.raises(ScheduleError):
        Pipeline(stages=(), ops=0, chunk_bytes=1.0)


def test_nccl_chunk_rules() -> None:
    """calcCollChunking (NCCL 2.27, src/enqueue.cc): NVLS 128 KiB shrinking to 64/32/16 KiB
    below 64/8/2 chunks per op; NVLSTree 64 KiB from 4 servers, 32 KiB below one chunk per
    op; AWS's EFA plugin: 512 KiB NVLS chunks and a 1 MiB Simple step."""
    one = nvls_pipeline(Group.of(build_cluster("dgx-h100", 1)))
    assert one is not None and one.ops == 16 * 8
    assert [one.chunk(s) for s in (2**30, 2**26, 2**24, 2**21)] == \
        [128 * KIB, 64 * KIB, 32 * KIB, 16 * KIB]
    four = nvlstree_pipeline(Group.of(build_cluster("dgx-h100", 4)))
    two = nvlstree_pipeline(Group.of(build_cluster("dgx-h100", 2)))
    assert four is not None and two is not None
    assert four.chunk(2**33) == 64 * KIB and two.chunk(2**33) == 128 * KIB
    assert four.chunk(4 * 2**20) == 32 * KIB
    aws = nvlstree_pipeline(Group.of(build_cluster("aws-p5", 4)))
    assert aws is not None and aws.chunk_bytes == 512 * KIB
    tree = tree_pipeline(Group.of(build_cluster("aws-p4d", 2)))
    assert tree is not None and tree.chunk_bytes == 1024 * KIB
    assert tree_pipeline(Group.of(build_cluster("dgx-a100", 2))).chunk_bytes == 512 * KIB


def test_nccl_channels_and_stages() -> None:
    h100 = Group.of(build_cluster("dgx-h100", 10))
    assert nccl_channels(h100) == 16                       # 8 rails, doubled
    assert nccl_channels(Group.of(build_cluster("aws-p4d", 2))) == 8   # AWS: 8 on p4d
    assert nvls_channels(h100) == 16
    assert nvls_channels(Group.of(build_cluster("hgx-b200", 1))) == 24
    assert nvls_channels(Group.of(build_cluster("hgx-b200", 2))) == 32
    t = tree_pipeline(h100)
    assert t is not None
    stages = {cls: n for cls, n, _ in t.stages}
    assert stages == {"net": 6.0, "nvlink": 14.0}          # depth 3 up and down; 7-GPU chains
    assert nvls_pipeline(h100) is None                     # NVLS alone: one server
    assert tree_pipeline(Group.of(build_cluster("dgx-h100", 1))) is None
    chain = chain_pipeline(Group.of(build_cluster("dgx-h100", 2)))
    assert chain is not None and {c: n for c, n, _ in chain.stages} == {"nvlink": 14.0,
                                                                        "net": 1.0}


@pytest.mark.parametrize("algo", ["tree", "nvlstree"])
def test_every_backend_adds_the_same_fill(algo: str) -> None:
    fab = build_cluster("dgx-h100", 2)
    sched = build(Group.of(fab), "all_reduce", 2**24, get_algorithm(algo), "simple")
    fill = pipeline_fill(sched, PROTOCOLS["simple"], fab)
    assert fill > 0
    for backend in (FlowBackend(), PacketBackend()):
        assert backend.run(sched, fab).extra["pipeline_fill"] == pytest.approx(fill)
    # the analytic time is the pipeline-free schedule's (no ramp either) plus the fill
    flat = {"simple": PROTOCOLS["simple"].scaled(ramp_bytes=0.0)}
    bare = Schedule(steps=sched.steps, collective=sched.collective, algorithm=algo,
                    protocol="simple", nbytes=sched.nbytes, ranks=sched.ranks,
                    kernel_bytes_per_s=sched.kernel_bytes_per_s, crossings=sched.crossings,
                    hop_scale=sched.hop_scale)
    analytic = AnalyticBackend(protocols=flat)
    assert analytic.run(sched, fab).time - analytic.run(bare, fab).time == \
        pytest.approx(fill, rel=1e-9)


def test_line_protocols_and_ideal_do_not_fill_and_the_ramp_steps_aside() -> None:
    fab = build_cluster("dgx-h100", 2)
    sched = build(Group.of(fab), "all_reduce", 2**24, get_algorithm("tree"), "ll")
    assert pipeline_fill(sched, PROTOCOLS["ll"], fab) == 0.0
    assert pipeline_fill(sched, None, fab) == 0.0
    # Simple's fitted ramp stands in for what the pipeline models: not both
    assert ramp_bytes(sched, PROTOCOLS["simple"]) == 0.0
    assert ramp_bytes(sched, PROTOCOLS["ll"]) == float(sched.nbytes)
    # inside one server LL128 forwards line by line: no fill
    server = build_cluster("dgx-h100", 1)
    one = build(Group.of(server), "all_reduce", 2**24, get_algorithm("ring"), "ll128")
    assert pipeline_fill(one, PROTOCOLS["ll128"], server) == 0.0
    # a ring's steps cost a fixed time each: no ramp either, except where its curves bend
    # (inside one A100 server, over EFA)
    ring = build(Group.of(fab), "all_reduce", 2**24, get_algorithm("ring"), "simple")
    assert ring.pipeline is None and ring.fixed_steps
    assert ramp_bytes(ring, PROTOCOLS["simple"]) == 0.0
    a100 = build(Group.of(build_cluster("dgx-a100", 1)), "all_reduce", 2**24,
                 get_algorithm("ring"), "simple")
    assert not a100.fixed_steps and ramp_bytes(a100, PROTOCOLS["simple"]) == 2**24


def test_a_trees_ll128_fills_its_network_hops_with_nccls_chunk() -> None:
    """Over the network NCCL's proxy posts an LL128 step only once all of it is written: a
    tree over two DGX H100 holds one chunk on each network hop, up and down, and NCCL's
    LL128 tree chunk at 16 MiB on 16 channels is 71,040 bytes (576,000 halved while the
    message is under 23 whole chunks per channel, then kept: 16 MiB is over 6; rounded down
    to LL128's 1,920-byte grain)."""
    fab = build_cluster("dgx-h100", 2)
    group = Group.of(fab)
    (pipe,) = tree_ll128_pipelines(group)
    assert pipe.protocols == frozenset({"ll128"}) and pipe.ops == nccl_channels(group) == 16
    assert [c for c, _, _ in pipe.stages] == ["net"] and pipe.stages[0][1] == 2.0
    assert pipe.chunk(2**24) == pytest.approx(71040.0)
    assert pipe.chunk(2**20) == pytest.approx(17280.0)
    assert ll128_tree_shrink(2, 8)[0] == (23, 288000.0)
    # whole chunks, as NCCL divides: at 22.5 chunks of 144,000 per channel it halves again
    assert pipe.chunk(22.5 * 16 * 144000) == pytest.approx(72000 // 1920 * 1920)
    sched = build(group, "all_reduce", 2**24, get_algorithm("tree"), "ll128")
    rate = pipe.stages[0][2] * PROTOCOLS["ll128"].eff_array(fab, calibrated=False)[
        list(LINK_CLASSES).index("net")]
    assert pipeline_fill(sched, PROTOCOLS["ll128"], fab) == pytest.approx(71040.0 / rate)
    # the same in every backend
    fill = pipeline_fill(sched, PROTOCOLS["ll128"], fab)
    for backend in (FlowBackend(), PacketBackend()):
        assert backend.run(sched, fab).extra["pipeline_fill"] == pytest.approx(fill)
    # Simple keeps its own pipeline; rings with LL128 and one server have none
    assert active_pipeline(sched, PROTOCOLS["simple"]) is sched.pipeline
    ring = build(group, "all_reduce", 2**24, get_algorithm("ring"), "ll128")
    assert pipeline_fill(ring, PROTOCOLS["ll128"], fab) == 0.0
    assert tree_ll128_pipelines(Group.of(build_cluster("dgx-h100", 1))) == ()


def test_the_fill_is_a_mid_size_cost() -> None:
    """Share of the time the fill takes: a quarter at 16 MiB, small at 4 GiB (two DGX
    H100, NVLSTree; the published two-server curve closes on its asymptote the same
    way). It was a third while NVLSTree's scatter and gather counted as stages."""
    fab = build_cluster("dgx-h100", 2)
    shares = []
    for size in (2**24, 2**32):
        sched = build(Group.of(fab), "all_reduce", size, get_algorithm("nvlstree"), "simple")
        t = AnalyticBackend().run(sched, fab).time
        shares.append(pipeline_fill(sched, PROTOCOLS["simple"], fab) / t)
    assert shares[0] > 0.2 and shares[1] < 0.01


def test_the_packet_backend_does_not_also_apply_the_ramp() -> None:
    """Review finding: the packet backend applied Simple's ramp beside the fill."""
    fab = build_cluster("dgx-h100", 1)
    sched = build(Group.of(fab), "all_reduce", 2**20, get_algorithm("nvls"), "simple")
    a = AnalyticBackend().run(sched, fab).time
    p = PacketBackend().run(sched, fab).time
    assert p == pytest.approx(a, rel=0.1)


def test_the_simple_step_is_the_buffer_nccl_is_given_over_its_eight_steps() -> None:
    """NCCL's tree and chain chunk is ``NCCL_BUFFSIZE / 8`` (``calcCollChunking``): the
    cluster's ``params.buffsize`` where given, else 4 MiB, or AWS's plugin's 8 MiB; NVLS's
    chunk is at most one step."""
    from fabricsim.collectives.pipeline import simple_step_bytes

    h100 = build_cluster("dgx-h100", 2)
    big = build_cluster("dgx-h100", 2, params={"buffsize": 2**24})
    small = build_cluster("dgx-h100", 1, params={"buffsize": 1_100_000})
    assert simple_step_bytes(h100) == 512 * KIB
    assert simple_step_bytes(build_cluster("aws-p5", 2)) == 1024 * KIB
    assert simple_step_bytes(build_cluster("aws-p5", 2, params={"buffsize": 2**22})) \
        == 512 * KIB
    tree = tree_pipeline(Group.of(big))
    chain = chain_pipeline(Group.of(big))
    assert tree is not None and chain is not None
    assert tree.chunk_bytes == chain.chunk_bytes == 2048 * KIB
    # 1,100,000 / 8 = 137,500 B, rounded down to Simple's 512-byte grain: 268 x 512
    assert simple_step_bytes(small) == 268 * 512
    nvls = nvls_pipeline(Group.of(small))
    assert nvls is not None and nvls.chunk_bytes == 128 * KIB  # NVLS's own chunk, smaller
    # a store-and-forward chunk four times larger fills the tree's 2 x 7 NVLink and two
    # network stages four times slower: a mid-size tree all-reduce takes longer, one far
    # larger than the pipeline does not notice, and sizes under a chunk per channel none
    be = AnalyticBackend()

    def tree_us(fab, size: float) -> float:
        s = build(Group.of(fab), "all_reduce", size, get_algorithm("tree"), "simple")
        return be.run(s, fab).time * 1e6

    assert tree_us(big, 2**26) > 1.5 * tree_us(h100, 2**26)
    assert tree_us(big, 2**22) == pytest.approx(tree_us(h100, 2**22))
    assert tree_us(big, 2**34) < 1.05 * tree_us(h100, 2**34)
