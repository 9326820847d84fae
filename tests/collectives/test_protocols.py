"""Protocol constants: bandwidth ramp, per-generation NVLS efficiency, fabric-aware arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fabricsim.collectives import predict_time
from fabricsim.errors import FabricsimError
from fabricsim.fabric import build_cluster
from fabricsim.protocols import (
    LINK_CLASSES,
    PROTOCOLS,
    Protocol,
    get_protocol,
    hardware_of,
)
from fabricsim.transport import framing_efficiency

NVLS = LINK_CLASSES.index("nvls")


def test_ramp_closed_form_and_monotone() -> None:
    p = Protocol("x", ramp_bytes=4e6, ramp_power=0.5)
    assert p.bandwidth_ramp(4e6) == pytest.approx(0.5)
    assert p.bandwidth_ramp(16e6) == pytest.approx(1 / 1.5)
    sizes = np.logspace(2, 11, 40)
    r = [p.bandwidth_ramp(float(s)) for s in sizes]
    assert all(0 < a < b <= 1 for a, b in itertools.pairwise(r))
    assert Protocol("off").bandwidth_ramp(10.0) == 1.0
    assert p.bandwidth_ramp(0.0) == 1.0  # unknown size: no ramp


def test_ramp_slows_only_bandwidth_terms() -> None:
    """With the ramp, time(S) = alpha + beta*S/ramp(S): a 2x larger message never takes less
    time, and at large sizes busbw approaches the asymptote from below. Up to 64 KiB the
    ring runs on one or two of NCCL's channels (Simple's 32 KiB each: Schedule.spread), so
    its time stays flat there, and grows from there on."""
    fab = build_cluster("dgx-a100", 1)
    t = [predict_time(fab, "all_reduce", 2.0**k, algo="ring", proto="simple")
         for k in range(10, 34)]
    assert all(b >= a for a, b in itertools.pairwise(t))
    assert all(b > a for a, b in itertools.pairwise(t[6:]))
    bw = [2.0**k / x for k, x in zip(range(10, 34), t, strict=True)]
    assert bw[-1] > bw[-5] > bw[-10]


def test_ring_steps_cost_a_fixed_time_except_over_efa() -> None:
    """A ring's time is a fixed part plus bytes over its rate (no ramp): doubling the size
    adds twice what the previous doubling added; over EFA the ramp still bends it."""
    def growth(system: str, servers: int) -> float:
        fab = build_cluster(system, servers)
        t = [predict_time(fab, "all_gather", 2.0**k, algo="ring", proto="simple")
             for k in (25, 26, 27)]
        return (t[2] - t[1]) / (t[1] - t[0])

    assert growth("dgx-h100", 1) == pytest.approx(2.0, rel=1e-9)
    assert growth("dgx-h100", 2) == pytest.approx(2.0, rel=1e-9)
    assert growth("aws-p4d", 2) < 1.95  # SRD: Simple's ramp
    simple = PROTOCOLS["simple"]
    assert simple.fixed_step_latency["nvlink"] < simple.hop_latency["nvlink"]


def test_nvls_efficiency_per_nvswitch_generation() -> None:
    simple = get_protocol("simple")
    h100, gb200 = build_cluster("dgx-h100", 1), build_cluster("gb200-nvl72", 1)
    assert hardware_of(h100) == ("nvswitch-gen3", "nvlink4")
    assert hardware_of(gb200)[0] == "nvswitch-gen4"
    e3, e4 = simple.eff_array(h100)[NVLS], simple.eff_array(gb200)[NVLS]
    assert e3 == pytest.approx(simple.efficiency["nvls"])
    # both generations' links run at one NVLS efficiency: Blackwell's NVLS is held back by
    # its kernels' copy warps (Protocol.nvls_warp_rate), not by a factor on its links
    assert e4 == pytest.approx(e3)
    # other classes untouched but for the transport's packet framing on the network classes
    # and NVLink 5's share on NVLink, and no fabric means the plain table
    frame = np.ones(len(LINK_CLASSES))
    frame[[LINK_CLASSES.index("net"), LINK_CLASSES.index("sharp")]] = framing_efficiency(
        gb200.info.transport)
    frame[LINK_CLASSES.index("nvlink")] = simple.nvlink_scale["nvlink5"]
    assert np.allclose(np.delete(simple.eff_array(gb200), NVLS),
                       np.delete(simple.eff_array() * frame, NVLS), rtol=1e-15)


def test_protocol_ordering_kept() -> None:
    ll, ll128, simple = (PROTOCOLS[k] for k in ("ll", "ll128", "simple"))
    assert ll.efficiency["nvlink"] < ll128.efficiency["nvlink"] < simple.efficiency["nvlink"]
    assert ll128.hop_latency["nvlink"] < simple.hop_latency["nvlink"]
    for p in (ll, ll128, simple):
        assert p.hop_latency["net"] > p.hop_latency["nvlink"]


def test_repr_distinguishes_ramp_for_caching() -> None:
    a = PROTOCOLS["simple"]
    assert repr(a) != repr(a.scaled(ramp_bytes=a.ramp_bytes * 2))
    assert repr(a) != repr(a.scaled(nvls_scale={"nvswitch-gen4": 0.5}))
    assert repr(a) != repr(a.scaled(nvls_warp_rate={"nvls": 1e9}))
    assert repr(a) != repr(a.scaled(fixed_step_latency={}))


def test_unknown_protocol_names_field() -> None:
    with pytest.raises(FabricsimError) as e:
        get_protocol("LL64")
    assert "proto" in str(e.value) or getattr(e.value, "field", "") == "proto"


def test_ll128_nvlink_efficiency_per_generation() -> None:
    """LL128 on NVLink runs at NCCL's 0.92 of Simple's on Hopper and Blackwell (Simple's
    own share being smaller on NVLink 5); A100 keeps its rows' fit (nvlink_scale), and the
    scale enters the cache key."""
    ll128, simple = PROTOCOLS["ll128"], PROTOCOLS["simple"]
    i = LINK_CLASSES.index("nvlink")
    gb200 = build_cluster("gb200-nvl72", 1)
    hopper = ll128.eff_array(build_cluster("dgx-h100", 1))[i]
    ampere = ll128.eff_array(build_cluster("dgx-a100", 1))[i]
    blackwell = ll128.eff_array(gb200)[i]
    assert hopper == pytest.approx(0.92 * simple.efficiency["nvlink"], rel=0.01)
    assert blackwell == pytest.approx(0.92 * simple.eff_array(gb200)[i], rel=0.01)
    assert ampere == pytest.approx(0.45, rel=0.01)
    assert repr(ll128) != repr(ll128.scaled(nvlink_scale={}))


def test_simple_nvlink_share_lower_on_nvlink5_only() -> None:
    """Simple reaches a smaller share of NVLink 5 than of NVLink 3/4 (fitted on published
    Blackwell runs), and LL128 with it; Rubin takes Blackwell's row, LL keeps its own."""
    simple, ll128 = PROTOCOLS["simple"], PROTOCOLS["ll128"]
    i = LINK_CLASSES.index("nvlink")
    hopper = simple.eff_array(build_cluster("dgx-h100", 1))[i]
    ampere = simple.eff_array(build_cluster("dgx-a100", 1))[i]
    blackwell = simple.eff_array(build_cluster("hgx-b200", 1))[i]
    rubin = simple.eff_array(build_cluster("vera-rubin-nvl144", 1))[i]
    assert hopper == ampere == pytest.approx(simple.efficiency["nvlink"])
    share = simple.nvlink_scale["nvlink5"]   # the fit (test_heldout keeps it the fit)
    assert 0.85 <= share < 1.0
    assert blackwell == pytest.approx(share * hopper)
    assert rubin == blackwell
    assert ll128.eff_array(build_cluster("hgx-b200", 1))[i] == pytest.approx(
        0.92 * blackwell, rel=0.01)
    ll = PROTOCOLS["ll"]
    assert ll.eff_array(build_cluster("hgx-b200", 1))[i] == ll.efficiency["nvlink"]


def test_host_floor_is_the_hosts_issue_time_and_calibrates() -> None:
    """nccl-tests -g: one thread issues each operation on g GPUs, overlapped with the GPUs'
    run of the last one, so an operation takes at least g issues (Protocol.host_floor);
    a cluster's own -g logs fit its host (params.calibration host.launch)."""
    ll = PROTOCOLS["ll"]
    assert ll.host_floor(8) == pytest.approx(8 * ll.launch_per_gpu)
    assert ll.host_floor(0) == ll.host_floor(1) == ll.launch_per_gpu
    fab = build_cluster("dgx-a100", 1)
    slow = build_cluster("dgx-a100", 1, params={"calibration": {"host.launch": 2.0}})
    assert ll.host_floor(8, slow) == pytest.approx(2 * ll.host_floor(8, fab))
    small, big = 1024, 2**30
    assert predict_time(fab, "all_reduce", small, gpus_per_thread=8) == pytest.approx(
        ll.host_floor(8))                                      # the host's floor
    assert predict_time(slow, "all_reduce", small, gpus_per_thread=8) == pytest.approx(
        ll.host_floor(8, slow))
    assert predict_time(fab, "all_reduce", small) < ll.host_floor(8)  # one process per GPU
    assert predict_time(fab, "all_reduce", big, gpus_per_thread=8) == predict_time(
        fab, "all_reduce", big)                               # the GPUs' time hides it
    with pytest.raises(FabricsimError, match=r"host\.launch"):
        build_cluster("dgx-a100", 1, params={"calibration": {"host.launch": 0}})


def test_a_nic_measured_below_line_rate_caps_every_protocols_network_share() -> None:
    """p4d's first EFA carries 340 of its 400 Gb/s in all-reduce tests (reference row
    240): no protocol's network share on it exceeds 0.85, where framing and Simple's own
    share would give 0.947; p5's EFA, with no such measurement, keeps those; NVLink is
    untouched; and a 1 GiB all-reduce over two p4d takes at least line rate / 0.85."""
    net = LINK_CLASSES.index("net")
    p4d, p5 = build_cluster("aws-p4d", 2), build_cluster("aws-p5", 2)
    assert p4d.info.nic_sustained_share == 0.85 and p5.info.nic_sustained_share == 1.0
    for p in PROTOCOLS.values():
        assert p.eff_array(p4d)[net] <= 0.85
        assert p.eff_array(p5)[net] == pytest.approx(
            p.efficiency["net"] * framing_efficiency("srd"))
        nv = LINK_CLASSES.index("nvlink")
        assert p.eff_array(p4d)[nv] == p.eff_array(build_cluster("dgx-a100", 2))[nv]
    t = predict_time(p4d, "all_reduce", 2**30, algo="tree", proto="simple")
    line = p4d.info.nic_bandwidth * p4d.info.nics_per_server  # bytes/s per server
    assert 2**30 / t <= 0.85 * line


def test_serial_ll_halves_ll_on_nvlink_alone() -> None:
    from fabricsim.protocols import SERIAL_LL_NVLINK, serial_ll

    out = serial_ll(PROTOCOLS)
    ll, base = out["ll"], PROTOCOLS["ll"]
    for cls, eff in base.efficiency.items():
        want = eff * SERIAL_LL_NVLINK if cls == "nvlink" else eff
        assert ll.efficiency[cls] == pytest.approx(want)
    assert ll.hop_latency == base.hop_latency and ll.launch == base.launch
    assert out["ll128"] is PROTOCOLS["ll128"] and out["simple"] is PROTOCOLS["simple"]
    assert serial_ll({"simple": PROTOCOLS["simple"]}) == {"simple": PROTOCOLS["simple"]}
