"""The analytic backend against closed forms: one flow, shared links, a uniform ring."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.backends.base import schedule_protocol
from fabricsim.collectives import build_schedule, get_protocol
from fabricsim.fabric import build_cluster
from fabricsim.protocols import LINK_CLASSES
from fabricsim.schedule import Schedule, Step
from fabricsim.transport import framing_efficiency


@pytest.fixture(scope="module")
def h100() -> object:
    return build_cluster("dgx-h100", 1)


@pytest.fixture(scope="module")
def a100x2() -> object:
    return build_cluster("dgx-a100", 2)


def _one(fab, src, dst, nbytes, proto="ideal"):
    s = Step(src=np.array([src]), dst=np.array([dst]), nbytes=np.array([float(nbytes)]))
    return AnalyticBackend(protocol=proto).run(Schedule(steps=(s,)), fab)


def test_one_flow_idle_nic_path_is_alpha_plus_bytes_over_bw(a100x2) -> None:
    fab = a100x2
    src, dst = int(fab.gpus[0]), int(fab.gpus[8])
    path = fab.route(src, dst)
    alpha = float(fab.link_latency[path].sum())
    # packet framing of the transport on network links (PCIe carries data rates)
    frame = framing_efficiency(fab.info.transport)
    bw = min(float(fab.link_capacity[x]) * (1.0 if fab.link_label(int(x)) == "pcie" else frame)
             for x in path)
    r = _one(fab, src, dst, 1e9)
    assert r.time == pytest.approx(alpha + 1e9 / bw, rel=1e-12)
    assert r.bottleneck_kind in ("nic-leaf", "leaf-spine")
    # every link of the path carried the bytes once, nothing else did
    assert r.link_bytes[path].tolist() == [1e9] * len(path)
    assert r.link_bytes.sum() == pytest.approx(1e9 * len(path))


def test_one_flow_with_protocol_overheads(a100x2) -> None:
    fab = a100x2
    src, dst = int(fab.gpus[0]), int(fab.gpus[8])
    path = fab.route(src, dst)
    p = get_protocol("simple")
    alpha = float(fab.link_latency[path].sum()) + p.hop_latency["net"] + p.launch
    kinds = [fab.link_label(int(x)) for x in path]
    frame = framing_efficiency(fab.info.transport)
    eff = [p.efficiency["pcie"] if k == "pcie" else p.efficiency["net"] * frame for k in kinds]
    bw = min(float(fab.link_capacity[x]) * e for x, e in zip(path, eff, strict=True))
    r = _one(fab, src, dst, 5e8, proto="simple")
    assert r.time == pytest.approx(alpha + 5e8 / bw, rel=1e-12)


def test_nvlink_flow_is_striped_over_all_nvswitch_planes(h100) -> None:
    fab = h100
    r = _one(fab, int(fab.gpus[0]), int(fab.gpus[1]), 450e6)
    # 4 planes x 112.5 GB/s = the GPU's 450 GB/s; two NVLink hops of 100 ns
    assert r.time == pytest.approx(2e-7 + 1e-3, rel=1e-12)
    assert np.count_nonzero(r.link_bytes) == 8


def test_shared_link_halves_the_bandwidth(a100x2) -> None:
    fab = a100x2
    # GPU0 and GPU1 share a PCIe switch but have their own NICs; two flows from GPU0 share
    # its PCIe uplink and its NIC
    g = fab.gpus
    one = _one(fab, int(g[0]), int(g[8]), 1e9)
    s = Step(src=np.array([g[0], g[0]]), dst=np.array([g[8], g[8]]),
             nbytes=np.array([1e9, 1e9]))
    two = AnalyticBackend(protocol="ideal").run(Schedule(steps=(s,)), fab)
    alpha = float(fab.link_latency[fab.route(int(g[0]), int(g[8]))].sum())
    assert two.time - alpha == pytest.approx(2 * (one.time - alpha), rel=1e-12)


@pytest.mark.parametrize("proto", ["ideal", "simple", "ll128"])
def test_ring_all_reduce_closed_form(h100, proto) -> None:
    fab = h100
    n, size = 8, 2**28
    sched = build_schedule(fab, "all_reduce", size, algo="ring", proto=proto)
    # the protocol as the schedule pays it (a ring's steps: a fixed cost each, no ramp)
    p = schedule_protocol(sched, get_protocol(proto))
    nvl = LINK_CLASSES.index("nvlink")
    # the protocol's constants as it applies them to this fabric (per-generation scales)
    alpha = 2 * 100e-9 + p.hop_array(fab)[nvl]           # two NVLink hops per step
    bw = 450e9 * p.eff_array(fab)[nvl] * p.bandwidth_ramp(size)  # ramp: size-dependent
    expect = 2 * (n - 1) / n * size / bw + 2 * (n - 1) * alpha + p.launch
    r = AnalyticBackend().run(sched, fab)
    assert r.time == pytest.approx(expect, rel=1e-9)
    assert r.bottleneck_kind == "nvlink"


def test_repeated_pattern_is_cached_and_scales(h100) -> None:
    fab = h100
    be = AnalyticBackend()
    small = build_schedule(fab, "all_reduce", 2**20, algo="ring", proto="simple")
    big = build_schedule(fab, "all_reduce", 2**30, algo="ring", proto="simple")
    c1, c2 = be.compile(small, fab), be.compile(big, fab)
    assert c1.groups[0] is c2.groups[0]                   # routed once
    assert c1.time(1024.0) == pytest.approx(be.run(big, fab).time, rel=1e-12)


def test_concurrent_channels_share_links(h100) -> None:
    # the ring's own steps with 1 and with 4 rings inside one server (the tuner's build
    # keeps one there and lets NCCL's channels cap the spread instead)
    from fabricsim.collectives.registry import Group, get_algorithm

    fab = h100
    g = Group.of(fab)
    ring = get_algorithm("ring")
    one, four = (Schedule(steps=tuple(ring.build(g, "all_reduce", 2**30, ch)), nbytes=2**30)
                 for ch in (1, 4))
    assert len(four.steps) > len(one.steps) or four.steps[0].src.size > one.steps[0].src.size
    be = AnalyticBackend(protocol="ideal")
    # four channels of a quarter each: same bandwidth term, same per-step latency
    assert be.run(four, fab).time == pytest.approx(be.run(one, fab).time, rel=1e-9)


def test_dependencies_serialise_steps(h100) -> None:
    fab = h100
    g = fab.gpus
    a = Step(src=g[:1], dst=g[1:2], nbytes=np.array([450e6]))
    b = Step(src=g[:1], dst=g[1:2], nbytes=np.array([450e6]), deps=(0,))
    r = AnalyticBackend(protocol="ideal").run(Schedule(steps=(a, b)), fab)
    assert r.step_start[1] == pytest.approx(r.step_end[0])
    assert r.time == pytest.approx(2 * (1e-3 + 2e-7))


@pytest.mark.parametrize("algo", ["ring", "tree", "hierarchical", "nvls", "sharp"])
def test_fast_structure_equals_general_path(algo):
    """The template-tiling fast path gives the same link loads and (α, β) keys as routing
    every transfer in full (random channel count, sizes and a 2:1 fabric)."""
    from fabricsim.backends.analytic import _structure_general
    from fabricsim.backends.analytic_fast import fast_structure
    from fabricsim.collectives import build_schedule
    from fabricsim.fabric import build_cluster

    fab = build_cluster("dgx-h100", 12, oversubscription=2.0, params={"sharp": True})
    rng = np.random.default_rng(5)
    sched = build_schedule(fab, "all_reduce", float(rng.integers(1, 2**30)), algo=algo,
                           proto="simple", channels=int(rng.integers(1, 9)))
    for s in sched.steps:
        w = rng.random(s.src.size)
        fast = fast_structure(fab, s.src, s.dst, s.hashes, w)
        gen = _structure_general(fab, s.src, s.dst, s.hashes, w)
        assert fast is not None
        assert np.allclose(fast[0], gen.load, rtol=1e-12, atol=1e-12)
        assert np.allclose(fast[1], gen.lat) and np.array_equal(fast[2], gen.rank)
        assert np.allclose(fast[3], gen.cmax, rtol=1e-12, atol=1e-15)
