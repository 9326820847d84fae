"""Link faults (down, degraded, flapping), PFC misconfiguration and PFC deadlocks.

Settings: the flow backend's test fat-trees (hosts ``gpuN`` on leaves, 1 us links) and a
5-router ring (``torus3d`` 5x1x1) for the deadlock; MTU 4096. Closed forms: a link that
is up ``duty`` of every period moves bytes only while up (credit stall) or loses what is
sent while down (Ethernet); a pause needs headroom for a round trip of the link; the
deadlock detector reports within one to two windows of the cycle closing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.packet import PacketBackend
from fabricsim.errors import ConfigError
from fabricsim.fabric.core import pair_hash
from fabricsim.jobs.packet import run_packet_scenario
from fabricsim.scenario import Scenario
from fabricsim.schedule import Schedule, Step

R = 50e9          # host_fat_tree's default link rate (bytes/s)
MTU = 4096


def _one_flow(fab: Any, nbytes: float, s: int = 0, d: int = 3) -> Schedule:
    g = fab.gpus
    return Schedule(steps=(Step(src=g[[s]], dst=g[[d]], nbytes=np.array([nbytes])),))


def _flap(link: str, period: str = "300us", duty: float = 0.7, **kw: Any) -> dict[str, Any]:
    return {"type": "link_flapping", "link": link, "period": period, "duty": duty, **kw}


def _up_time_reached(x: float, period: float, duty: float, factor: float = 0.0) -> float:
    """The time at which a link up ``duty`` of every ``period`` (else at ``factor``) has
    carried ``x`` seconds' worth of full-rate bytes."""
    per = period * (duty + (1 - duty) * factor)
    k = np.floor(x / per)
    rest = x - k * per
    if rest <= duty * period:
        return float(k * period + rest)
    return float(k * period + duty * period + (rest - duty * period) / factor)


@pytest.mark.parametrize(("transport", "factor"), [("ib", 0.0), ("roce", 0.25)])
def test_flapping_link_moves_bytes_at_its_up_share(transport: str, factor: float) -> None:
    """IB holds packets while the link is down (credits stall the sender); a link that
    drops to a quarter of its rate loses nothing on RoCE either. The write ends when the
    up windows have carried its wire bytes: closed form within 0.2 %."""
    fab = host_fat_tree(4)
    sch = _one_flow(fab, 16e6)
    base = PacketBackend(transport=transport).run(sch, fab)
    hdr = 26 if transport == "ib" else 82
    wire = 16e6 + np.ceil(16e6 / MTU) * hdr
    overhead = base.time - wire / R           # path latency and pipeline, no fault
    extra = {"factor": factor} if factor else {}
    r = PacketBackend(transport=transport,
                      faults=[_flap("gpu0->leaf0", **extra)]).run(sch, fab)
    want = _up_time_reached(wire / R, 300e-6, 0.7, factor) + overhead
    assert r.extra["complete"] and sum(r.extra["drops"].values()) == 0
    assert r.time == pytest.approx(want, rel=2e-3)
    assert r.time > 1.15 * base.time


def test_flapping_link_blackholes_its_down_window_on_roce() -> None:
    """The NIC keeps sending into the down port: it loses exactly a down window at line
    rate (90 us x 50 GB/s / 4178 B = 1077 packets), then go-back-N resends from the
    first hole (one NAK) and the write completes."""
    fab = host_fat_tree(4)
    r = PacketBackend(transport="roce", faults=[_flap("gpu0->leaf0")]).run(
        _one_flow(fab, 16e6), fab)
    e = r.extra
    assert e["complete"]
    assert abs(e["drops"]["link_down"] - 90e-6 * R / (MTU + 82)) <= 1
    assert e["retransmits"] >= e["drops"]["link_down"]
    assert e["naks"] >= 1 and e["link_changes"] == 3


def test_roce_link_down_for_good_exceeds_the_retry_limit() -> None:
    """No rerouting: RoCE times out every rto (1 ms) and the queue pair errors after its
    7th retry, 8 ms after the last progress; the run stops and says so."""
    fab = host_fat_tree(4)
    r = PacketBackend(transport="roce", faults=[{"type": "link_down", "link": "gpu0->leaf0",
                                                 "start": "20us"}]).run(
        _one_flow(fab, 4e6), fab)
    e = r.extra
    assert e["status"] == "retry_exceeded" and not e["complete"]
    assert e["retry_exceeded"]["timeouts_in_a_row"] == 8 and e["timeouts"] == 8
    assert 8e-3 < r.time - 20e-6 < 8.1e-3
    assert e["retry_exceeded"]["src"] == "gpu0"


def test_ib_link_down_for_good_is_reported_as_a_stall() -> None:
    fab = host_fat_tree(4)
    r = PacketBackend(transport="ib", faults=[{"type": "link_down", "link": "gpu0->leaf0",
                                               "start": "20us"}]).run(
        _one_flow(fab, 4e6), fab)
    assert r.extra["status"] == "stalled"
    assert r.extra["stalled"]["links_down"] == ["gpu0->leaf0"]
    assert 20e-6 + 1e-3 <= r.time <= 20e-6 + 2e-3 + 1e-5


def test_ib_link_down_longer_than_the_window_but_coming_back_is_no_stall() -> None:
    """Down 5.88 ms of every 6 ms (longer than the 1 ms stall window): IB waits for each
    120 us up window and completes where the up windows have carried the bytes."""
    fab = host_fat_tree(4)
    r = PacketBackend(transport="ib", faults=[_flap("gpu0->leaf0", "6ms", 0.02)]).run(
        _one_flow(fab, 16e6), fab)
    assert r.extra["status"] == "ok" and r.extra["complete"]
    wire = 16e6 + np.ceil(16e6 / MTU) * 26
    assert r.time == pytest.approx(_up_time_reached(wire / R, 6e-3, 0.02), abs=5e-6)


def test_srd_avoids_a_failed_path() -> None:
    """A leaf-spine link of one of SRD's 4 paths fails at 20 us: the path's window falls
    to the minimum at its first timeout and the write finishes within 10 % of the
    healthy run (on three other spines), losing about one window of that path; spraying
    without per-path control keeps losing a quarter of every window."""
    fab = host_fat_tree(16, bandwidth=12.5e9, latency=1e-6)
    g = fab.gpus
    sch = _one_flow(fab, 8e6, 0, 8)
    path = fab.route_many(g[[0]], g[[8]], pair_hash(g[[0]], g[[8]])).row(0)
    up = next(fab.link_name(int(l)) for l in path if "spine" in fab.link_name(int(l)))
    fault = [{"type": "link_down", "link": up, "start": "20us"}]
    healthy = PacketBackend(transport="srd").run(sch, fab)
    srd = PacketBackend(transport="srd", faults=fault).run(sch, fab)
    spray = PacketBackend(transport="srd", faults=fault,
                          srd={"congestion_control": False}).run(sch, fab)
    assert srd.extra["complete"] and spray.extra["complete"]
    assert srd.time < 1.10 * healthy.time
    assert 0 < srd.extra["drops"]["link_down"] < 200
    assert srd.extra["retransmits"] == srd.extra["drops"]["link_down"]
    assert spray.time > 2 * srd.time
    assert spray.extra["drops"]["link_down"] > 10 * srd.extra["drops"]["link_down"]


def _incast(**kw: Any) -> Any:
    fab = host_fat_tree(4, bandwidth=12.5e9, latency=1e-6)
    g = fab.gpus
    sch = Schedule(steps=(Step(src=g[[1, 2, 3]], dst=np.full(3, g[0]),
                               nbytes=np.array([2e6])),))
    return fab, PacketBackend(transport="roce", dcqcn={"enabled": False},
                              ecn={"enabled": False}, **kw).run(sch, fab)


def test_pfc_priority_mismatch_drops_on_the_lossless_class() -> None:
    """leaf0 does not pause the RDMA class: its egress to gpu0 is a lossy queue (capped
    at lossy_queue + one packet) and drops what exceeds it; with PFC it holds nothing
    back and drops nothing."""
    fab, ok = _incast(lossy_queue="128KB")
    _, bad = _incast(lossy_queue="128KB", pfc={"mismatch": [{"node": "leaf0"}]})
    into = int(np.flatnonzero(fab.link_dst == fab.gpus[0])[0])
    assert sum(ok.extra["drops"].values()) == 0
    assert ok.extra["queue_max"][into] > 128e3 + MTU + 82
    assert bad.extra["drops"]["pfc_mismatch"] > 0 and bad.extra["drops"]["lossless"] == 0
    assert bad.extra["queue_max"][into] <= 128e3 + MTU + 82
    assert bad.extra["complete"] and bad.time > ok.time


def test_pfc_mismatch_on_one_port_or_on_another_class() -> None:
    """One ingress port (gpu1's) not pausing the RDMA class is enough to drop its
    packets; a mismatch on a class the traffic does not use changes nothing; an unknown
    class is refused naming the field."""
    _, ok = _incast(lossy_queue="128KB")
    _, port = _incast(lossy_queue="128KB", pfc={"mismatch": [{"link": "gpu1->leaf0"}]})
    _, other = _incast(lossy_queue="128KB",
                       pfc={"mismatch": [{"node": "leaf0", "classes": ["default"]}]})
    assert port.extra["drops"]["pfc_mismatch"] > 0
    assert sum(other.extra["drops"].values()) == 0 and other.time == ok.time
    with pytest.raises(ConfigError) as err:
        _incast(pfc={"mismatch": [{"node": "leaf0", "classes": ["gold"]}]})
    assert err.value.field == "packet.pfc.mismatch[0].classes"


def test_headroom_below_a_round_trip_drops_on_the_lossless_class() -> None:
    """Headroom of 2·rate·latency + 64 B + 2 packets (what arrives while XOFF travels up
    and the upstream finishes its packet) loses nothing; half a round trip does."""
    w = MTU + 82
    need = 2 * 12.5e9 * 1e-6 + 64 + 2 * w
    _, enough = _incast(pfc={"headroom": need})
    _, short = _incast(pfc={"headroom": 12.5e9 * 1e-6})
    assert enough.extra["drops"]["lossless"] == 0
    assert short.extra["drops"]["lossless"] > 0
    assert short.extra["complete"] and short.time > enough.time


def _ring(**packet: Any) -> Scenario:
    return Scenario.model_validate({
        "cluster": {"system": "dgx-h100", "nodes": 5, "gpus_per_node": 1,
                    "fabric": "roce-400g", "topology": "torus3d",
                    "params": {"dims": [5, 1, 1]}},
        "packet": {"traffic": {"pattern": "pairs", "nbytes": "2MB"}, **packet}})


def test_cyclic_buffer_dependency_deadlocks_and_is_reported() -> None:
    """Two-hop writes on a 5-router ring: every ring port pauses the previous one; the
    detector names the 5 ring links as the cycle, between one and two windows after the
    cycle closed, and stops the run."""
    run = run_packet_scenario(_ring(pfc={"deadlock_window": "200us",
                                         "watchdog": {"enabled": False}}))
    s = run.summary
    assert s["status"] == "pfc_deadlock" and not s["complete"]
    d = s["deadlock"]
    assert d["cycle"] == [f"router{i}->router{(i + 1) % 5}" for i in range(5)]
    assert d["closed_at_s"] + 200e-6 < d["t_detect_s"] <= d["closed_at_s"] + 400e-6 + 1e-6
    ring_ports = {p["link"] for p in d["ports"] if p["link"].startswith("router")}
    assert ring_ports == set(d["cycle"])
    assert all(p["classes"] == ["rdma"] for p in d["ports"])


def test_rerouting_around_a_failed_link_closes_a_cycle() -> None:
    """Writes 2->3, 3->1 and 4->2 form no cycle on the ring; with router2->router3 down,
    2->3 goes the long way round (2->1->0->4->3) and the counter-clockwise ring deadlocks."""
    def ring(nbytes: str, faults: list[dict[str, Any]]) -> Any:
        one = {"pattern": "incast", "nbytes": nbytes}
        return run_packet_scenario(_ring(
            traffic={**one, "ranks": [2], "receiver": 3},
            background=[{**one, "ranks": [3], "receiver": 1},
                        {**one, "ranks": [4], "receiver": 2}],
            faults=faults, pfc={"deadlock_window": "200us",
                                "watchdog": {"enabled": False}})).summary
    assert ring("16MB", [])["complete"]
    after = ring("64MB", [{"type": "link_down", "link": "router2->router3"}])
    assert after["status"] == "pfc_deadlock"
    assert after["deadlock"]["cycle"] == [f"router{i}->router{(i - 1) % 5}"
                                          for i in (2, 1, 0, 4, 3)]


def test_time_to_deadlock_grows_with_xoff_at_half_the_ring_rate() -> None:
    """Each ring link carries a write that ends at the next router and one that goes on;
    the second fills the next router's ingress buffer at about half the ring rate
    (12.5 GB/s) while the egress ahead of it is saturated, so the cycle closes
    XOFF / 12.5 GB/s later per XOFF (measured 11.6 GB/s: a little still drains)."""
    closed = []
    for xoff in (64e3, 128e3):
        run = run_packet_scenario(_ring(pfc={"xoff": xoff, "deadlock_window": "100us",
                                             "watchdog": {"enabled": False}},
                                        dcqcn={"enabled": False}))
        assert run.summary["status"] == "pfc_deadlock"
        closed.append(run.summary["deadlock"]["closed_at_s"])
    per = 64e3 / 12.5e9
    assert 1.0 * per <= closed[1] - closed[0] <= 1.15 * per


def test_watchdog_breaks_the_deadlock_and_one_hop_traffic_never_forms_one() -> None:
    """With the watchdog on, the detection window is at least its detection time: the
    watchdog flushes the cycle first and the writes complete (with drops)."""
    wd = run_packet_scenario(_ring(pfc={"deadlock_window": "50us", "watchdog": {
        "enabled": True, "detect": "100us", "restore": "200us"}}))
    assert wd.summary["complete"] and wd.summary["drops"]["watchdog"] > 0
    hop = run_packet_scenario(_ring(traffic={"pattern": "collective", "nbytes": "5MB"}))
    assert hop.summary["complete"] and hop.summary["status"] == "ok"


def test_fault_on_a_link_that_does_not_exist_names_the_field_and_the_links() -> None:
    sc = Scenario.model_validate({
        "cluster": {"system": "dgx-h100", "nodes": 2, "gpus_per_node": 1,
                    "fabric": "roce-400g"},
        "packet": {"traffic": {"pattern": "pairs", "nbytes": "1MB"},
                   "faults": [_flap("leaf0.0->spine9.9")]}})
    with pytest.raises(ConfigError) as err:
        run_packet_scenario(sc)
    assert err.value.field == "packet.faults[0].link"
    assert "spine9.9" in err.value.message and "--export" in err.value.message
    bad_pair = Scenario.model_validate({
        "cluster": {"system": "dgx-h100", "nodes": 2, "gpus_per_node": 1,
                    "fabric": "roce-400g"},
        "packet": {"traffic": {"pattern": "pairs", "nbytes": "1MB"},
                   "faults": [_flap("server0/nic0->server1/nic0")]}})
    with pytest.raises(ConfigError, match=r"links from server0/nic0: .*leaf0\.0"):
        run_packet_scenario(bad_pair)


def test_a_bad_fault_value_names_its_field() -> None:
    fab = host_fat_tree(4)
    with pytest.raises(ConfigError) as err:
        PacketBackend(faults=[_flap("gpu0->leaf0", factor=0)]).run(_one_flow(fab, 1e5), fab)
    assert err.value.field == "packet.faults[0].factor"


def test_a_second_timed_fault_on_one_link_is_refused() -> None:
    fab = host_fat_tree(4)
    with pytest.raises(ConfigError) as err:
        PacketBackend(faults=[_flap("gpu0->leaf0"), {"type": "link_down",
                                                     "link": "gpu0->leaf0",
                                                     "start": "1us"}]).run(
            _one_flow(fab, 1e5), fab)
    assert err.value.field == "packet.faults[1].link"
