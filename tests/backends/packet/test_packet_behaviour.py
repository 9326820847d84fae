"""Packet backend behaviours: DCQCN convergence, PFC watchdog, loss recovery, spraying."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.packet import PacketBackend, jain
from fabricsim.backends.packet.config import DCQCN_PAPER
from fabricsim.backends.packet.testbeds import star
from fabricsim.schedule import Schedule, Step

RATE = 40e9 / 8  # the DCQCN paper's 40 Gb/s testbed


def _dcqcn_run(n: int, enabled: bool, paper: bool = True, gap: float = 0.5e-3,
               until: float = 0.03):  # type: ignore[no-untyped-def]
    fab = star(n + 1, rate=RATE, latency=1e-6, transport="roce")
    g = fab.gpus
    sch = Schedule(steps=tuple(Step(src=g[i + 1:i + 2], dst=g[:1], nbytes=[1e9],
                                    delay=i * gap) for i in range(n)))
    dc = {**(DCQCN_PAPER if paper else {}), "enabled": enabled}
    r = PacketBackend(mtu=1024, dcqcn=dc, bins=100, until=until).run(sch, fab)
    ts = r.extra["ts"]
    bott = int(fab.find_link(fab.n_nodes - 1, int(g[0])))
    q = ts["queue"][:, list(ts["watched"]).index(bott)]
    return r, ts, q


@pytest.mark.parametrize("n", [4, 8])
def test_dcqcn_converges_to_a_fair_share_with_the_queue_near_the_ecn_band(n):  # type: ignore[no-untyped-def]
    """Shape of Zhu et al. 2015 (Figs. of N:1 convergence): flows starting 0.5 ms apart end
    at an equal share of the bottleneck, the link stays full, PFC stops firing and the
    queue stays near the marking band (Kmin 5 KB .. Kmax 200 KB) instead of at XOFF."""
    r, ts, q = _dcqcn_run(n, True)
    late = slice(70, 100)  # the last 9 ms of 30 ms
    assert r.extra["status"] == "until"
    assert jain(ts["flow_Bps"][late].sum(axis=0)) > 0.95
    # goodput: 1024 B payload per 1024 + 82 B RoCEv2 frame on the wire
    assert ts["delivered_Bps"][late].mean() > 0.95 * RATE * 1024 / (1024 + 82)
    assert ts["paused_ports"][late].max() == 0
    assert q[late].mean() < 200e3 and q[late].max() < 1.5 * 200e3
    assert r.extra["cnps"] > 0 and r.extra["drops"]["lossless"] == 0


def test_connectx_dcqcn_keeps_the_link_full_when_a_second_flow_joins():  # type: ignore[no-untyped-def]
    """Zhu et al. 2015's two-flow set-up at 40 Gb/s with ConnectX's default DCQCN
    parameters: when the second flow joins (at 2 ms) the aggregate stays above 60 % of
    the goodput in every 0.1 ms bin and above 95 % on average after the join (enqueue
    marking with the paper's parameters fell to ~26 % for ~20 ms), and the two flows
    share the link within 5 % from 1 ms after the join."""
    r, ts, _q = _dcqcn_run(2, True, paper=False, gap=2e-3, until=0.01)
    good = RATE * 1024 / (1024 + 82)
    d = ts["delivered_Bps"] / good
    assert d[1:].min() > 0.6 and d[20:].mean() > 0.95
    f = ts["flow_Bps"][30:].sum(axis=0)
    assert abs(f[0] - f[1]) / f.sum() < 0.05
    assert r.extra["drops"]["lossless"] == 0 and r.extra["cnps"] > 0


def test_without_dcqcn_pfc_holds_the_queue_at_xoff_and_keeps_pausing():  # type: ignore[no-untyped-def]
    r, ts, q = _dcqcn_run(4, False)
    late = slice(70, 100)
    xoff = 256e3
    assert q[late].min() > 4 * xoff * 0.9  # every ingress port holds about XOFF
    assert ts["paused_ports"][late].min() == 4
    assert r.extra["cnps"] == 0


def _storm(watchdog: bool):  # type: ignore[no-untyped-def]
    fab = star(4, rate=50e9, latency=1e-6, transport="roce")
    g = fab.gpus
    # host 1 writes to host 0 (which hangs from 20 us to 2 ms) and to host 3 (a victim)
    sch = Schedule(steps=(Step(src=g[1:2], dst=g[0:1], nbytes=[4e6]),
                          Step(src=g[1:2], dst=g[3:4], nbytes=[4e6])))
    return PacketBackend(stuck_receiver={"rank": 0, "start": 20e-6, "end": 2e-3},
                         pfc={"watchdog": {"enabled": watchdog, "detect": 100e-6,
                                           "restore": 300e-6}}).run(sch, fab)


def test_pause_storm_stalls_the_victim_until_the_receiver_recovers():  # type: ignore[no-untyped-def]
    r = _storm(False)
    victim = r.step_end[1]
    assert victim > 2e-3  # head-of-line blocked behind the paused host port
    assert r.extra["watchdog_triggers"] == 0 and r.extra["drops"]["watchdog"] == 0
    assert r.extra["pause_time"].max() >= 2e-3 - 20e-6 - 1e-6
    assert r.extra["drops"]["lossless"] == 0


def test_pfc_watchdog_drains_the_stuck_queue_and_frees_the_victim():  # type: ignore[no-untyped-def]
    r = _storm(True)
    assert r.extra["watchdog_triggers"] >= 1 and r.extra["drops"]["watchdog"] > 0
    assert r.step_end[1] < 0.5e-3  # detection 100 us, then the victim runs at line rate
    assert r.extra["complete"] and r.extra["retransmits"] > 0  # stuck flow recovered


@pytest.mark.parametrize("transport", ["tcp", "roce"])
def test_random_loss_is_recovered_by_retransmission(transport):  # type: ignore[no-untyped-def]
    fab = star(3, rate=25e9, latency=1e-6, transport=transport)
    g = fab.gpus
    sch = Schedule(steps=(Step(src=g[1:3], dst=g[[0, 1]], nbytes=[4e6]),))  # no congestion
    clean = PacketBackend(mtu=1500).run(sch, fab)
    lossy = PacketBackend(mtu=1500, loss_rate=2e-3, seed=3).run(sch, fab)
    e = lossy.extra
    assert e["complete"] and e["drops"]["random_loss"] > 0
    assert e["retransmits"] >= e["drops"]["random_loss"]
    assert e["delivered_bytes"] == 8_000_000
    assert lossy.time > clean.time


def test_srd_sprays_over_paths_and_delivers_out_of_order():  # type: ignore[no-untyped-def]
    fab = host_fat_tree(16, bandwidth=25e9, latency=1e-6)
    g = fab.gpus
    src = g[:8]
    dst = g[8:]
    sch = Schedule(steps=(Step(src=src, dst=dst, nbytes=[2e6]),))
    r = PacketBackend(transport="srd", paths=4, mtu=4096).run(sch, fab)
    e = r.extra
    assert e["complete"] and e["delivered_bytes"] == 16_000_000
    # spraying spreads every flow over several spines: more uplinks carry bytes than flows
    used = np.count_nonzero(r.link_bytes[fab.link_kind == fab.link_kind.max()] > 0)
    assert used > 8
