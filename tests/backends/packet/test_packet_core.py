"""Correctness of the packet backend: exact latencies, throughput, conservation, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends import get_backend
from fabricsim.backends.packet import PacketBackend, parse_packet_config
from fabricsim.backends.packet.testbeds import point_to_point, star
from fabricsim.errors import ConfigError, SimulationError
from fabricsim.fabric import build_cluster
from fabricsim.schedule import Schedule, Step
from fabricsim.transport import TRANSPORT_HEADER_BYTES


def one(src: int, dst: int, nbytes: float, repeat: int = 1) -> Schedule:
    return Schedule(steps=(Step(src=[src], dst=[dst], nbytes=[nbytes], repeat=repeat),))


@pytest.fixture(scope="module")
def dgx2():  # type: ignore[no-untyped-def]
    return build_cluster("dgx-h100", nodes=2)


@pytest.mark.parametrize("transport", ["ib", "roce", "tcp", "srd"])
def test_one_packet_store_and_forward_is_exact(dgx2, transport):  # type: ignore[no-untyped-def]
    fab = dgx2
    a, b = int(fab.gpus[0]), int(fab.gpus[8])
    path = fab.route(a, b)
    r = PacketBackend(mtu=4096, transport=transport, switching="store-and-forward").run(
        one(a, b, 1000), fab)
    size = 1000 + TRANSPORT_HEADER_BYTES[transport]   # the transport's wire overhead
    expect = float((size / fab.link_capacity[path] + fab.link_latency[path]).sum())
    assert r.time == pytest.approx(expect, rel=1e-12)


def test_one_packet_cut_through_forwards_after_the_header(dgx2):  # type: ignore[no-untyped-def]
    fab = dgx2
    a, b = int(fab.gpus[0]), int(fab.gpus[8])
    path = fab.route(a, b)
    cap, lat = fab.link_capacity[path], fab.link_latency[path]
    r = PacketBackend(mtu=4096, switching="cut-through").run(one(a, b, 1000), fab)
    assert fab.info.transport == "ib"
    # a hop forwards after the 64-byte header when the next link is no faster; else whole
    t = 0.0
    for h in range(len(path)):
        last = h == len(path) - 1
        cut = not last and cap[h + 1] <= cap[h]
        t += (64 if cut else 1000 + 26) / cap[h] + lat[h]
    assert r.time == pytest.approx(t, rel=1e-12)
    assert r.time < PacketBackend(switching="store-and-forward").run(one(a, b, 1000), fab).time


def test_registry_builds_the_packet_backend():  # type: ignore[no-untyped-def]
    be = get_backend("packet", mtu=1500, loss_rate=0.0)
    assert be.name == "packet" and isinstance(be, PacketBackend)
    assert be.config.mtu == 1500


def test_long_flow_runs_at_line_rate():  # type: ignore[no-untyped-def]
    fab = point_to_point(rate=100e9 / 8, latency=1e-6)
    r = PacketBackend(mtu=9000, transport="roce").run(one(0, 1, 100e6), fab)
    # 100 MB plus 82 B of RoCEv2 framing per packet at 12.5 GB/s, plus the link latency
    wire = 100e6 + np.ceil(100e6 / 9000) * 82
    assert r.time == pytest.approx(wire / 12.5e9 + 1e-6, rel=1e-9)
    r0 = PacketBackend(mtu=9000, transport="roce", header_bytes=0).run(one(0, 1, 100e6), fab)
    assert r0.time == pytest.approx(100e6 / 12.5e9 + 1e-6, rel=1e-9)
    assert r.extra["data_packets"] == int(np.ceil(100e6 / 9000))


@pytest.mark.parametrize("transport", ["ib", "roce"])
def test_shared_bottleneck_matches_max_min_fair_share(transport):  # type: ignore[no-untyped-def]
    """4 senders into one host and an independent pair: max-min gives the incast flows
    cap/4 each and the pair the full link; long flows must agree within 2 %."""
    cap = 50e9
    fab = star(6, rate=cap, latency=1e-6, transport=transport)
    g = fab.gpus
    size = 4e6
    sch = Schedule(steps=(
        Step(src=g[1:5], dst=np.full(4, g[0]), nbytes=[size]),
        Step(src=g[5:6], dst=g[1:2], nbytes=[size]),
    ))
    # the second step is rank 5 -> rank 1 (rank 1's downlink is idle: senders only send)
    r = PacketBackend(mtu=4096, dcqcn={"enabled": False}).run(sch, fab)
    incast = r.step_end[0] - r.step_start[0]
    pair = r.step_end[1] - r.step_start[1]
    lat = 2e-6  # host -> switch -> host
    assert incast == pytest.approx(4 * size / cap + lat, rel=0.02)
    assert pair == pytest.approx(size / cap + lat, rel=0.02)
    assert r.extra["drops"]["lossless"] == 0


def test_agrees_with_the_flow_backend_on_long_flows():  # type: ignore[no-untyped-def]
    import fabricsim.backends.flow as flow
    fab = star(6, rate=50e9, latency=1e-6, transport="ib")
    g = fab.gpus
    sch = Schedule(steps=(
        Step(src=g[1:5], dst=np.full(4, g[0]), nbytes=[8e6]),
        Step(src=g[[0, 5]], dst=g[[5, 1]], nbytes=[8e6, 16e6], deps=(0,)),
    ))
    rp = PacketBackend(mtu=4096).run(sch, fab)
    rf = flow.FlowBackend().run(sch, fab)
    assert rp.time == pytest.approx(rf.time, rel=0.02)
    for i in range(2):
        assert rp.step_end[i] == pytest.approx(rf.step_end[i], rel=0.02)


def _random_case(draw_seed: int, n_hosts: int, n_flows: int, transport: str):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(draw_seed)
    fab = star(n_hosts, rate=25e9, latency=5e-7, transport=transport)
    src = rng.integers(0, n_hosts, n_flows)
    dst = (src + rng.integers(1, n_hosts, n_flows)) % n_hosts
    nb = rng.integers(1, 200_000, n_flows).astype(float)
    return fab, Schedule(steps=(Step(src=fab.gpus[src], dst=fab.gpus[dst], nbytes=nb,
                                     repeat=int(rng.integers(1, 3))),))


@settings(max_examples=examples(12), suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_hosts=st.integers(2, 8), n_flows=st.integers(1, 12),
       transport=st.sampled_from(["ib", "roce"]),
       xoff=st.integers(8_000, 200_000))
def test_lossless_classes_never_drop_and_conserve_buffers(seed, n_hosts, n_flows, transport,
                                                          xoff):  # type: ignore[no-untyped-def]
    fab, sch = _random_case(seed, n_hosts, n_flows, transport)
    r = PacketBackend(mtu=2048, seed=seed, pfc={"xoff": xoff},
                      credit_bytes=xoff if transport == "ib" else None).run(sch, fab)
    e = r.extra
    assert e["complete"] and e["drops"]["lossless"] == 0 and e["drops"]["lossy"] == 0
    assert e["retransmits"] == 0
    assert e["delivered_bytes"] == int(sum(s.total_bytes() for s in sch.steps))
    # credits all returned, buffers empty
    np.testing.assert_allclose(e["credits_final"], e["credits_initial"])
    np.testing.assert_allclose(e["node_used_final"], 0.0, atol=1e-6)


def test_same_seed_same_result_and_seed_matters_for_random_loss():  # type: ignore[no-untyped-def]
    fab = star(5, rate=25e9, latency=1e-6, transport="tcp")
    g = fab.gpus
    sch = Schedule(steps=(Step(src=g[1:5], dst=np.full(4, g[0]), nbytes=[2e6]),))
    runs = [PacketBackend(seed=s, loss_rate=1e-3, mtu=1500).run(sch, fab) for s in (7, 7, 8)]
    a, b, c = runs
    assert a.time == b.time and a.extra["events"] == b.extra["events"]
    np.testing.assert_array_equal(a.extra["fct"]["end"], b.extra["fct"]["end"])
    assert a.extra["drops"] == b.extra["drops"]
    assert (a.time, a.extra["events"]) != (c.time, c.extra["events"])


def test_event_budget_is_refused_up_front_with_a_clear_message():  # type: ignore[no-untyped-def]
    fab = point_to_point()
    with pytest.raises(SimulationError, match="event budget"):
        PacketBackend(mtu=1500, event_budget=10_000).run(one(0, 1, 100e6), fab)


def test_config_errors_name_the_packet_field():  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=r"packet\.ecn\.pmax"):
        parse_packet_config({"ecn": {"pmax": 2}})
    with pytest.raises(ConfigError, match=r"packet\.mtu"):
        PacketBackend(mtu=10)
    with pytest.raises(ConfigError, match=r"packet\.pfc\.xoff"):
        parse_packet_config({"pfc": {"xoff": "lots"}})
    with pytest.raises(ConfigError, match="transport"):
        PacketBackend(transport="carrier-pigeon")


def test_nvlink_flows_stripe_over_every_nvswitch():  # type: ignore[no-untyped-def]
    """Inside a DGX a GPU spreads its traffic over all NVSwitches: a ring all-reduce runs at
    the GPU's full NVLink bandwidth, as the closed form and the flow backend say."""
    fab = build_cluster("dgx-h100", nodes=1)
    g = fab.gpus
    n, size = 8, 64e6
    sch = Schedule(steps=(Step(src=g, dst=np.roll(g, -1), nbytes=[size / n],
                               repeat=2 * (n - 1)),))
    paths = fab.ecmp_paths(int(g[0]), int(g[1]))
    bw = sum(float(fab.link_capacity[p].min()) for p in paths)
    lat = float(fab.link_latency[paths[0]].sum())
    r = PacketBackend(mtu=4096).run(sch, fab)
    closed = 2 * (n - 1) * (size / n / bw + lat)
    assert len(paths) > 1
    assert r.time == pytest.approx(closed, rel=0.02)
    import fabricsim.backends.flow as flow
    assert r.time == pytest.approx(flow.FlowBackend(protocol="ideal").run(sch, fab).time,
                                   rel=0.02)


def test_transports_differ_by_their_wire_overhead():  # type: ignore[no-untyped-def]
    """Same wires, long flows: IB (26 B/packet), RoCEv2 (82 B incl. preamble/IFG) and TCP
    (90 B) take payload + header per packet; the times scale with (mtu + header)."""
    fab = star(3, rate=50e9, latency=1e-6, transport="roce")
    g = fab.gpus
    sch = Schedule(steps=(Step(src=g[[1, 2]], dst=g[[2, 1]], nbytes=[16e6, 16e6]),))
    t = {tr: PacketBackend(mtu=4096, transport=tr).run(sch, fab).time
         for tr in ("ib", "roce", "tcp")}
    npkt = np.ceil(16e6 / 4096)
    for tr, hdr in (("ib", 26), ("roce", 82)):   # + the switch's 64 B cut-through delay
        assert t[tr] == pytest.approx((16e6 + npkt * hdr + 64) / 50e9 + 2e-6, rel=1e-9)
    assert t["roce"] / t["ib"] == pytest.approx(4178 / 4122, rel=1e-4)
    assert t["tcp"] > t["roce"]
    same = {tr: PacketBackend(mtu=4096, transport=tr, header_bytes=0).run(sch, fab).time
            for tr in ("ib", "roce")}
    assert same["ib"] == same["roce"]


def test_flows_inside_a_server_carry_no_network_header(dgx2):  # type: ignore[no-untyped-def]
    fab = dgx2
    a, b, c = int(fab.gpus[0]), int(fab.gpus[1]), int(fab.gpus[8])
    be = PacketBackend(mtu=4096, switching="store-and-forward")
    st_nv = be.run(one(a, b, 1000), fab)
    path = fab.route(a, b)
    assert st_nv.time == pytest.approx(float((1000 / fab.link_capacity[path] +
                                              fab.link_latency[path]).sum()), rel=1e-12)
    path = fab.route(a, c)
    assert be.run(one(a, c, 1000), fab).time == pytest.approx(float(
        (1026 / fab.link_capacity[path] + fab.link_latency[path]).sum()), rel=1e-12)
