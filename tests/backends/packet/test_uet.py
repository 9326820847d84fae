"""UET (Ultra Ethernet Transport, UE 1.0): spraying, trimming, NSCC/RCCC, LLR and CBFC.

Setting: a 16-host two-level fat-tree (4 leaves x 4 hosts, 4 spines) at 100 Gb/s, 1 us per
link, MTU 4096 (+122 B UET framing), the engine's own seed; every run is deterministic.

Published results the figures are checked against:

* Spraying vs ECMP on a permutation / all-to-all: per-flow ECMP loses a large share of
  the bisection to hash collisions, packet spraying runs near line rate (Handley et al.,
  "Re-architecting datacenter networks and stacks for low latency and high performance"
  (NDP), SIGCOMM 2017, fig. 4: ECMP permutation ~40-60 % of line rate, per-packet spraying
  > 90 %; Bonato et al., "REPS: Recycled Entropy Packet Spraying", 2024; the UE 1.0 design
  paper, Hoefler et al., arXiv:2508.08906, sec. 4, on spraying in UET).
* Trimming turns an incast's drops into headers and NACKs: the incast completes at the
  bottleneck's rate with no timeouts (NDP, sec. 6; UE 1.0 packet trimming).
"""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.packet import PacketBackend
from fabricsim.errors import ConfigError
from fabricsim.schedule import Schedule, Step

CAP = 12.5e9
WIRE = (4096 + 122) / 4096


def _fab():  # type: ignore[no-untyped-def]
    return host_fat_tree(16, bandwidth=CAP, latency=1e-6)


def _run(sch, transport="uet", fab=None, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("mtu", 4096)
    return PacketBackend(transport=transport, **kw).run(sch, fab or _fab())


def _incast(n=8, nbytes=2e6):  # type: ignore[no-untyped-def]
    g = _fab().gpus
    return Schedule(steps=(Step(src=g[16 - n:16], dst=np.full(n, g[0]), nbytes=[nbytes]),))


def _all_to_all(nbytes=256e3):  # type: ignore[no-untyped-def]
    g = _fab().gpus
    pairs = [(i, j) for i in range(16) for j in range(16) if i != j]
    return Schedule(steps=(Step(src=g[[i for i, _ in pairs]], dst=g[[j for _, j in pairs]],
                                nbytes=[nbytes]),))


@pytest.fixture(scope="module")
def incast():  # type: ignore[no-untyped-def]
    return _run(_incast()), _run(_incast(), "roce")


def test_incast_trims_and_resends_each_trimmed_packet_once(incast):  # type: ignore[no-untyped-def]
    """8:1 incast, 2 MB each: the receiver's leaf queue passes the trim threshold, the
    trimmed packets are NACKed and each is sent again exactly once; nothing is dropped and
    no timer fires; bytes delivered equal bytes sent."""
    uet, _ = incast
    e = uet.extra
    assert e["trims"] > 0
    assert e["retransmits"] == e["trims"] == e["naks"]
    assert set(e["drops"].values()) == {0} and e["timeouts"] == 0
    assert e["delivered_bytes"] == 8 * 2_000_000


def test_incast_finishes_within_the_bottleneck_bound_without_pauses(incast):  # type: ignore[no-untyped-def]
    """Closed form: all 16 MB (with framing) through the receiver's 100 Gb/s link, plus the
    trimmed packets' second trip and a few base RTTs. RoCE needs PFC pauses for the same
    incast; UET needs none (it has no PFC) and is not slower."""
    uet, roce = incast
    ideal = 8 * 2e6 * WIRE / CAP
    resent = uet.extra["trims"] * (4096 + 122) / CAP
    assert ideal <= uet.time <= ideal + resent + 20e-6
    assert uet.extra["pause_frames"] == 0
    assert roce.extra["pause_frames"] > 0
    assert uet.time <= roce.time


def test_no_trimming_below_the_threshold():  # type: ignore[no-untyped-def]
    """A threshold the queue never reaches trims nothing (the same incast, threshold at the
    whole 1 MiB queue: NSCC keeps the queue far below it)."""
    r = _run(_incast(), uet={"trim_threshold_bytes": "1MiB"})
    assert r.extra["trims"] == 0
    assert r.extra["delivered_bytes"] == 16_000_000


def test_spraying_uses_every_path_and_runs_all_to_all_near_line_rate():  # type: ignore[no-untyped-def]
    """16-host all-to-all, 256 kB per pair: every leaf-spine link carries traffic and the
    exchange runs at >= 90 % of the hosts' line rate (spraying, NDP fig. 4), while RoCE's
    per-flow ECMP hashing collides and takes over 1.5x longer."""
    fab = _fab()
    uet = _run(_all_to_all(), fab=fab)
    roce = _run(_all_to_all(), "roce", fab=fab)
    up = np.flatnonzero(fab.link_kind == fab.link_kind.max())
    assert (uet.link_bytes[up] > 0).all()
    ideal = 15 * 256e3 * WIRE / CAP
    assert uet.time <= ideal / 0.9
    assert roce.time > 1.5 * uet.time
    assert uet.extra["delivered_bytes"] == 240 * 256_000


@pytest.mark.parametrize("lb", [{}, {"load_balance": "oblivious", "entropies": 16}])
def test_a_failed_link_costs_uet_little_and_roce_its_run(lb):  # type: ignore[no-untyped-def]
    """leaf0->spine0 fails 20 us into a transfer of 4 flows that all leave leaf0 (routes
    unchanged): leaf0 keeps 3 of its 4 uplinks, so the closed form is the healthy time
    with the rest at 3/4 of the rate. UET's dead entropies go silent, are skipped (REPS
    no longer recycles them: their ACKs stop), and the run finishes within 1.25x that
    bound, with REPS over 64 entropies (the default) as with round-robin over 16 (the
    model before REPS; round-robin over 64 has four times as many dead entropies to
    find and takes 1.28x); RoCE's flows hashed onto the dead link time out until the QP
    gives up (or the run is far slower)."""
    g = _fab().gpus
    sch = Schedule(steps=(Step(src=g[[0, 1, 2, 3]], dst=g[[8, 9, 12, 13]], nbytes=[2e6]),))
    down = [{"type": "link_down", "link": "leaf0->spine0", "start": "20us"}]
    healthy = _run(sch, uet=lb)
    uet = _run(sch, faults=down, uet=lb)
    roce = _run(sch, "roce", faults=down)
    assert uet.extra["complete"] and uet.extra["delivered_bytes"] == 8_000_000
    assert uet.extra["drops"]["link_down"] > 0
    bound = 20e-6 + (healthy.time - 20e-6) * 4 / 3
    assert uet.time < 1.25 * bound
    assert (not roce.extra["complete"]) or roce.time > 2 * uet.time


def test_every_path_down_exceeds_the_retry_limit():  # type: ignore[no-untyped-def]
    """Every uplink of leaf0 fails 20 us into a 4 MB transfer gpu0 -> gpu8: each entropy
    goes silent and is skipped, then probed again, and none answers. After more than
    retry_limit (7) retransmission timeouts (100 us) in a row with no ACK or NACK on any
    entropy the flow errors as a RoCE queue pair does: ``retry_exceeded`` naming it,
    about 8 rto after its last ACK and far inside the event budget;
    ``packet.retry_limit`` overrides the count."""
    g = _fab().gpus
    sch = Schedule(steps=(Step(src=g[[0]], dst=g[[8]], nbytes=[4e6]),))
    down = [{"type": "link_down", "link": f"leaf0->spine{i}", "start": "20us"}
            for i in range(4)]
    r = _run(sch, faults=down)
    e = r.extra
    assert e["status"] == "retry_exceeded" and not e["complete"]
    x = e["retry_exceeded"]
    assert (x["flow"], x["src"], x["dst"]) == (0, "gpu0", "gpu8")
    assert x["timeouts_in_a_row"] == 8
    # the last ACK comes back within a few base RTTs of the failure; then 8 rto
    assert 20e-6 + 8 * 100e-6 <= r.time <= 20e-6 + 8 * 100e-6 + 30e-6
    assert e["events"] < 10_000 and e["drops"]["link_down"] > 0   # budget: 200 M
    r2 = _run(sch, faults=down, retry_limit=2)
    assert r2.extra["status"] == "retry_exceeded"
    assert r2.extra["retry_exceeded"]["timeouts_in_a_row"] == 3
    assert 20e-6 + 3 * 100e-6 <= r2.time <= 20e-6 + 3 * 100e-6 + 30e-6


def test_llr_repairs_corrupted_frames_on_the_link():  # type: ignore[no-untyped-def]
    """1e-3 frame loss on every link: without LLR every loss is an end-to-end loss the
    sender must detect and resend; with LLR no packet is lost end to end, and the run
    costs at most one link round trip plus one serialisation per replayed frame more than
    on clean links."""
    g = _fab().gpus
    sch = Schedule(steps=(Step(src=g[:4], dst=g[8:12], nbytes=[4e6]),))
    clean = _run(sch)
    lossy = _run(sch, loss_rate=1e-3, seed=3)
    llr = _run(sch, loss_rate=1e-3, seed=3, uet={"llr": True})
    assert lossy.extra["drops"]["random_loss"] > 0
    assert lossy.extra["retransmits"] >= lossy.extra["drops"]["random_loss"]
    e = llr.extra
    assert e["llr_replays"] > 0 and e["drops"]["random_loss"] == 0
    # a few packets overtaken by replays look lost to the time-based reordering window
    assert e["retransmits"] <= 0.01 * 4 * 977
    assert llr.time - clean.time <= e["llr_replays"] * (2 * 1e-6 + 2 * 4218 / CAP)
    assert e["delivered_bytes"] == 16_000_000


def test_cbfc_drops_nothing_even_without_trimming():  # type: ignore[no-untyped-def]
    """CBFC (credits on every Ethernet link) with trimming off: the incast's queues cannot
    overflow, so nothing is dropped; the few resends (under 1 %) are packets that queued
    behind credit back-pressure longer than the reordering window."""
    r = _run(_incast(), uet={"cbfc": True, "trimming": False})
    e = r.extra
    assert set(e["drops"].values()) == {0}
    assert e["retransmits"] <= 0.01 * 8 * 489 and e["trims"] == 0
    assert e["delivered_bytes"] == 16_000_000


def test_rccc_paces_the_incast_at_the_receiver():  # type: ignore[no-untyped-def]
    """RCCC: after one speculative BDP each sender sends only on the receiver's credit,
    granted at the receiver's line rate: the incast finishes within the same closed-form
    bound and trims fewer packets than NSCC's first round trips do."""
    r = _run(_incast(), uet={"cc": "rccc"})
    e = r.extra
    ideal = 8 * 2e6 * WIRE / CAP
    assert ideal <= r.time <= 1.05 * ideal
    assert e["grants"] > 0 and e["delivered_bytes"] == 16_000_000
    assert set(e["drops"].values()) == {0}


@pytest.mark.parametrize(("uet", "field"), [
    ({"trim_threshold_bytes": -1}, "packet.uet.trim_threshold_bytes"),
    ({"trim_threshold_bytes": "2MiB"}, "packet.uet.trim_threshold_bytes"),
    ({"profile": "ai_lite"}, "packet.uet.profile"),
    ({"cc": "dcqcn"}, "packet.uet.cc"),
    ({"entropies": 0}, "packet.uet.entropies"),
    ({"load_balance": "ecmp"}, "packet.uet.load_balance"),
    ({"nscc": {"gamma": 2}}, "packet.uet.nscc.gamma"),
])
def test_settings_outside_the_spec_name_their_field(uet, field):  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as e:
        PacketBackend(transport="uet", uet=uet)
    assert str(e.value).startswith(field + ":")


def test_other_transports_run_an_engine_compiled_without_uet():  # type: ignore[no-untyped-def]
    # the engine's last argument is None unless the run has UET flows; numba compiles one
    # specialisation per type and prunes UET's branches from the other one (speed)
    from numba import types

    from fabricsim.backends.packet.engine import run_engine

    g = _fab().gpus
    sch = Schedule(steps=(Step(src=[g[1]], dst=[g[0]], nbytes=[1e5]),))
    for transport in ("roce", "uet"):
        assert _run(sch, transport).extra["complete"]
    last = {sig[-1] for sig in run_engine.signatures}
    assert types.none in last and types.boolean in last


def _balancer(n, reps):  # type: ignore[no-untyped-def]
    """One UET flow's sender state with ``n`` entropies, nothing sent, for the
    balancer's own functions (the engine's arrays, as the builder lays them out)."""
    from fabricsim.backends.packet import layout as L

    FI = np.zeros((1, L.N_FI), dtype=np.int64)
    FI[0, L.F_NPATH] = n
    FI[0, L.F_NPKT] = 64
    FI[0, L.F_REP] = 0
    FF = np.zeros((1, L.N_FF))
    FF[0, L.FF_SIZE] = 64 * 4096
    SQ = np.zeros((64, L.N_SQ))
    SQ[:, L.SQ_ST] = L.SQ_ACKED   # ACKs for packets already acknowledged: only the
    SPF = np.zeros((1, n, L.N_SPF))   # balancer hears them
    SPF[0, :, L.SP_CWND] = 1.0
    P = np.zeros(L.N_P)
    P[L.P_MTU] = 4096
    IP = np.zeros(L.N_I, dtype=np.int64)
    IP[L.I_REPS] = int(reps)
    return FI, FF, SQ, SPF, P, IP


@pytest.mark.parametrize("reps", [True, False])
def test_reps_reuses_unmarked_entropies_and_not_marked_ones(reps):  # type: ignore[no-untyped-def]
    """REPS (Bonato et al. 2024; htsim's UEC ``mixed`` balancer): ACKs come back unmarked
    on entropies 5 and 2 and ECN-marked on 3. The next packets go on 5 and 2 (oldest
    first), then the sender explores in turn from entropy 0: 0, 1, 2 (no penalty), and
    passes over 3 (its mark costs it one exploration) to 4, 5, ...; 3 is used again once
    its penalty is paid. ``oblivious`` ignores the ACKs: 0, 1, 2, 3, ..."""
    from fabricsim.backends.packet.uet import uet_on_ack, uet_pick_path

    FI, FF, SQ, SPF, P, IP = _balancer(8, reps)
    for seq, (k, ecn) in enumerate([(5, 0), (3, 1), (2, 0)]):
        uet_on_ack(0, ecn << 40 | k << 32 | seq, 1e-6, FI, FF, SQ, SPF, P, IP)
    picks = [uet_pick_path(0, 2e-6, FI, FF, SPF, IP) for _ in range(12)]
    if reps:
        assert picks == [5, 2, 0, 1, 2, 4, 5, 6, 7, 0, 1, 2]
        assert 3 not in picks[:9]
        # a second unmarked ACK on 3 is reused at once
        uet_on_ack(0, 3 << 32 | 3, 3e-6, FI, FF, SQ, SPF, P, IP)
        assert uet_pick_path(0, 4e-6, FI, FF, SPF, IP) == 3
    else:
        assert picks == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]


def test_reps_passes_over_nacked_entropies_longer_than_marked_ones():  # type: ignore[no-untyped-def]
    """A trim NACK costs its entropy four explorations (an ECN mark one) and it is never
    recycled; with nothing to recycle, exploration takes the unpenalised entropies."""
    from fabricsim.backends.packet.uet import uet_on_nack, uet_pick_path

    FI, FF, SQ, SPF, P, IP = _balancer(4, True)
    uet_on_nack(0, 1 << 32 | 0, 1e-6, FI, FF, SQ, SPF, P, IP)
    picks = [uet_pick_path(0, 2e-6, FI, FF, SPF, IP) for _ in range(16)]
    assert picks[:12] == [0, 2, 3] * 4   # four explorations pass over entropy 1
    assert picks[12:15] == [0, 1, 2]     # then it is back in turn


def _permutation(seed=1):  # type: ignore[no-untyped-def]
    g = _fab().gpus
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(16)
        if not np.any(p == np.arange(16)):
            break
    return Schedule(steps=(Step(src=g, dst=g[p], nbytes=[2e6]),))


def test_reps_beats_oblivious_spraying_on_a_permutation():  # type: ignore[no-untyped-def]
    """A 16-host permutation of 2 MB (seed 3): oblivious round-robin over the same 64
    entropies keeps sending on entropies whose spine links collide with other flows' and
    finishes over 1.2x the line-rate time (165 us with 122 B of headers), over 16
    entropies 1.8x; REPS keeps reusing the entropies that came back unmarked, so flows
    settle on paths they share with no one and finish within 10 % of line rate."""
    sch = _permutation(3)
    reps = _run(sch)
    obl = _run(sch, uet={"load_balance": "oblivious"})
    obl16 = _run(sch, uet={"load_balance": "oblivious", "entropies": 16})
    line = 2e6 * WIRE / CAP
    assert reps.extra["complete"] and obl.extra["complete"]
    assert obl.time > 1.2 * line and obl16.time > 1.8 * line
    assert reps.time < 1.10 * line
    assert reps.time < 0.9 * obl.time
    assert reps.extra["trims"] == 0 < obl.extra["trims"]
