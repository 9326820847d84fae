# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""End-to-end transports: senders, receivers, ACK/NAK, retransmission, flow and step ends.

* ``ib`` and ``roce`` (RDMA reliable connection): the receiver accepts packets in order
  only; a gap makes it discard and send one NAK, and the sender goes back to the missing
  packet (go-back-N). ACKs are coalesced (``ack_every`` packets) and a retransmission
  timer covers lost tails.
* ``tcp`` (TCP-like, NewReno flavour): the receiver keeps out-of-order packets (bitmap)
  and ACKs every packet cumulatively; three duplicate ACKs trigger a fast retransmit and
  halve the window (slow start / congestion avoidance otherwise); a timeout goes back to
  the first unacknowledged packet with a window of one.
* ``srd`` (EFA-like): packets are spread over several paths and accepted out of order;
  every packet is ACKed with its path; the sender keeps a delay-based window per path and
  retransmits only lost packets (:mod:`~fabricsim.backends.packet.srd`). With
  ``srd.congestion_control: false`` the earlier model: uniform random spraying, no
  window, repair by a short timer going back to the first hole.
* ``uet`` (Ultra Ethernet, UE 1.0): sprayed like ``srd`` over ``uet.entropies`` paths,
  every packet ACKed with its entropy and ECN bit; a packet trimmed by a switch reaches
  the receiver as headers only and is NACKed, and the sender resends it alone; NSCC
  (window) or RCCC (receiver credit) paces the sender
  (:mod:`~fabricsim.backends.packet.uet`).

Control packets (ACK, NAK, CNP) are not queued in the fabric: they reach the sender after
the path's latency. A sender keeps at most one packet in its NIC queue per flow, so flows
that share a NIC are served round-robin and a paused NIC stops injecting.

Example
-------
>>> from fabricsim.backends.packet.layout import E_ACK
>>> E_ACK
5
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fabricsim.backends.packet.kernel import push
from fabricsim.backends.packet.layout import (
    C_CNPS,
    C_DELIVERED,
    C_ERR,
    C_NAKS,
    C_NREC,
    C_RETRY_FLOW,
    C_STEPS_DONE,
    C_TIMEOUTS,
    E_ACK,
    E_CNP,
    E_INJECT,
    E_NAK,
    E_RTO,
    E_STEP,
    ERR_RETRY,
    F_ACKCNT,
    F_ACTIVE,
    F_BM,
    F_DONE,
    F_DST,
    F_DUP,
    F_INJ_PEND,
    F_INREC,
    F_NAK_SENT,
    F_NPATH,
    F_NPKT,
    F_NTO,
    F_PRIO,
    F_QUEUED,
    F_RCV_CNT,
    F_RCV_NEXT,
    F_RECOVER,
    F_REP,
    F_RR,
    F_RTO_ON,
    F_RTX,
    F_SND_NEXT,
    F_SND_UNA,
    F_SPRAY,
    F_SRC,
    F_STEP,
    FF_CWND,
    FF_HDR,
    FF_LAST_CNP,
    FF_LINE,
    FF_NEXT_T,
    FF_PROGRESS,
    FF_PROTO,
    FF_RATE,
    FF_RET_LAT,
    FF_SIZE,
    FF_SSTHRESH,
    FF_START,
    I_ACK_EVERY,
    I_ADAPTIVE,
    I_DCQCN,
    I_NFLOW_TS,
    I_RCCC,
    I_RETRY,
    I_SELECTIVE,
    I_SRDCC,
    I_TCP,
    LF_QTOT,
    MASK32,
    P_CNP_INT,
    P_MTU,
    P_RTO,
    P_WINDOW,
    PK_ECN,
    PK_FLOW,
    PK_HOP,
    PK_INL,
    PK_PATH,
    PK_PBASE,
    PK_PLEN,
    PK_PRIO,
    PK_REP,
    PK_SEQ,
    PK_SIZE,
    PK_TRIM,
    S_DONE,
    S_FOFF,
    S_NDEP,
    S_NF,
    S_REMAIN,
    S_REP,
    S_REPEAT,
    SF_DELAY,
    SF_END,
    SF_HOP,
    SF_START,
)
from fabricsim.backends.packet.port import alloc_packet, bin_of, enqueue
from fabricsim.backends.packet.roce import on_bytes_sent
from fabricsim.backends.packet.srd import srd_next_seq, srd_pick_path, srd_reset, srd_sent
from fabricsim.backends.packet.uet import (
    rccc_want,
    uet_may_send,
    uet_pick_path,
    uet_reset,
    uet_sent,
    uet_wire,
)


@njit(cache=True)
def choose_path(f, LF, FI, FPS, FPL, PL, IP):  # pragma: no cover
    """Path index for the next packet of flow ``f``: fixed, sprayed or least-queued."""
    n = FI[f, F_NPATH]
    if n <= 1:
        return 0
    sp = FI[f, F_SPRAY]
    if sp == 1:
        k = FI[f, F_RR] % n
        FI[f, F_RR] = k + 1
        return k
    if sp == 2:
        return np.random.randint(0, n)
    if IP[I_ADAPTIVE] == 1:
        best = 0
        bq = 1e300
        for k in range(n):
            q = 0.0
            s = FPS[f, k]
            for h in range(FPL[f, k]):
                q += LF[PL[s + h], LF_QTOT]
            if q < bq:
                bq = q
                best = k
        return best
    return 0


@njit(cache=True)
def try_inject(f, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, P, IP, HT, HI, C, free,
               TS_Q, SQ, SPF, uet) -> int:  # pragma: no cover
    """Put the next packet of flow ``f`` in its NIC queue if pacing, window and the
    one-packet-per-flow NIC slot allow; returns the first link used, or -1. ``uet`` is
    None unless the run has UET flows (see :func:`~fabricsim.backends.packet.engine.
    run_engine`)."""
    slots = 2 * FI[f, F_NPATH] if FI[f, F_SPRAY] == 1 else 1
    if FI[f, F_DONE] == 1 or FI[f, F_ACTIVE] == 0 or FI[f, F_QUEUED] >= slots:
        return -1
    on_uet = uet is not None and FI[f, F_SPRAY] == 2
    srd = on_uet or (IP[I_SRDCC] == 1 and FI[f, F_SPRAY] == 2)
    rtx = FI[f, F_RTX]
    seq = rtx
    k = 0
    if uet is not None and on_uet:
        seq = srd_next_seq(f, FI, SQ, P)
        if seq < 0 or not uet_may_send(f, seq, FI, FF, P, IP):
            return -1
    elif srd:
        seq = srd_next_seq(f, FI, SQ, P)
        if seq < 0:
            return -1
        k = srd_pick_path(f, now, FI, SPF, HT, HI, C)
        if k < 0:
            return -1
    elif rtx < 0:
        seq = FI[f, F_SND_NEXT]
        if seq >= FI[f, F_NPKT]:
            return -1
        win = FF[f, FF_CWND] if IP[I_TCP] == 1 else P[P_WINDOW]
        if seq - FI[f, F_SND_UNA] >= win:
            return -1
    rate = FF[f, FF_RATE]
    proto = FF[f, FF_PROTO]
    paced = rate < FF[f, FF_LINE] or proto > 0.0
    if paced and FF[f, FF_NEXT_T] > now:
        if FI[f, F_INJ_PEND] == 0:
            FI[f, F_INJ_PEND] = 1
            push(HT, HI, C, FF[f, FF_NEXT_T], E_INJECT, f, 0)
        return -1
    pk = alloc_packet(PK, free, C)
    if pk < 0:
        return -1
    if uet is not None and on_uet:
        k = uet_pick_path(f, now, FI, FF, SPF, IP)
        uet_sent(f, seq, now, FI, FF, P, IP)
    if srd:
        srd_sent(f, seq, k, now, FI, SQ, SPF)
    elif rtx >= 0:
        FI[f, F_RTX] = -1
    else:
        FI[f, F_SND_NEXT] = seq + 1
    mtu = int(P[P_MTU])
    npkt = FI[f, F_NPKT]
    payload = mtu if seq < npkt - 1 else int(FF[f, FF_SIZE]) - (npkt - 1) * mtu
    if payload < 0:
        payload = 0
    size = payload + int(FF[f, FF_HDR])
    if not srd:
        k = choose_path(f, LF, FI, FPS, FPL, PL, IP)
    PK[pk, PK_PATH] = k
    PK[pk, PK_FLOW] = f
    PK[pk, PK_SEQ] = seq
    PK[pk, PK_SIZE] = size
    PK[pk, PK_HOP] = 0
    PK[pk, PK_PBASE] = FPS[f, k]
    PK[pk, PK_PLEN] = FPL[f, k]
    PK[pk, PK_PRIO] = FI[f, F_PRIO]
    PK[pk, PK_ECN] = 0
    PK[pk, PK_REP] = FI[f, F_REP]
    PK[pk, PK_INL] = -1
    if uet is not None:
        PK[pk, PK_TRIM] = 0
    FI[f, F_QUEUED] += 1
    if paced:
        t0 = FF[f, FF_NEXT_T] if FF[f, FF_NEXT_T] > now else now
        gap = size / rate if rate < FF[f, FF_LINE] else 0.0  # congestion control's rate
        if proto > 0.0 and payload / proto > gap:  # the protocol's payload rate binds
            gap = payload / proto
        FF[f, FF_NEXT_T] = t0 + gap
    if IP[I_DCQCN] == 1:
        on_bytes_sent(f, size, FI, FF, P)
    l0 = PL[FPS[f, k]]
    enqueue(l0, pk, now, LI, LF, QI, QF, PK, TS_Q, P, IP)
    return l0


@njit(cache=True)
def deliver(pk, now, PK, FI, FF, SI, SF, DP, DI, BM, RF, RT, TS_D, TS_F, P, IP, HT, HI,
            C, NDF, uet) -> None:  # pragma: no cover
    """Packet ``pk`` reached its flow's destination: receiver side of the transport."""
    f = PK[pk, PK_FLOW]
    rep = PK[pk, PK_REP]
    if rep != FI[f, F_REP] or FI[f, F_DONE] == 1:
        return
    seq = PK[pk, PK_SEQ]
    ret = FF[f, FF_RET_LAT]
    tag = rep << 32
    on_uet = uet is not None and FI[f, F_SPRAY] == 2
    if uet is not None and on_uet:
        if PK[pk, PK_TRIM] == 1:   # headers only: NACK it, the sender resends it alone
            C[C_NAKS] += 1
            push(HT, HI, C, now + ret, E_NAK, f, (rep << 41) | (PK[pk, PK_PATH] << 32) | seq)
            if IP[I_RCCC] == 1:
                rccc_want(f, uet_wire(f, seq, FI, FF, P), now, FI, FF, NDF, HT, HI, C)
            return
        if IP[I_RCCC] == 1:
            rccc_want(f, 0.0, now, FI, FF, NDF, HT, HI, C)
    if PK[pk, PK_ECN] == 1 and IP[I_DCQCN] == 1 and now - FF[f, FF_LAST_CNP] >= P[P_CNP_INT]:
        FF[f, FF_LAST_CNP] = now
        C[C_CNPS] += 1
        push(HT, HI, C, now + ret, E_CNP, f, 0)
    npkt = FI[f, F_NPKT]
    new = False
    if IP[I_SELECTIVE] == 1 or FI[f, F_SPRAY] != 0:
        b = FI[f, F_BM] + seq
        if BM[b] == 0:
            BM[b] = 1
            new = True
            FI[f, F_RCV_CNT] += 1
            r = FI[f, F_RCV_NEXT]
            while r < npkt and BM[FI[f, F_BM] + r] == 1:
                r += 1
            FI[f, F_RCV_NEXT] = r
        FI[f, F_ACKCNT] += 1
        if uet is not None and on_uet:   # every packet, with its entropy and ECN mark
            FI[f, F_ACKCNT] = 0
            push(HT, HI, C, now + ret, E_ACK, f, (rep << 41) | (PK[pk, PK_ECN] << 40) |
                 (PK[pk, PK_PATH] << 32) | seq)
        elif IP[I_SRDCC] == 1 and FI[f, F_SPRAY] == 2:  # SRD: every packet, with its path
            FI[f, F_ACKCNT] = 0
            push(HT, HI, C, now + ret, E_ACK, f, (rep << 40) | (PK[pk, PK_PATH] << 32) | seq)
        elif IP[I_TCP] == 1 or FI[f, F_ACKCNT] >= IP[I_ACK_EVERY] or FI[f, F_RCV_CNT] == npkt:
            FI[f, F_ACKCNT] = 0
            push(HT, HI, C, now + ret, E_ACK, f, tag | FI[f, F_RCV_NEXT])
    else:
        r = FI[f, F_RCV_NEXT]
        if seq == r:
            new = True
            FI[f, F_RCV_NEXT] = r + 1
            FI[f, F_RCV_CNT] += 1
            FI[f, F_ACKCNT] += 1
            if FI[f, F_ACKCNT] >= IP[I_ACK_EVERY] or r + 1 == npkt:
                FI[f, F_ACKCNT] = 0
                push(HT, HI, C, now + ret, E_ACK, f, tag | (r + 1))
        elif seq > r and FI[f, F_NAK_SENT] != r:
            FI[f, F_NAK_SENT] = r
            C[C_NAKS] += 1
            push(HT, HI, C, now + ret, E_NAK, f, tag | r)
    if new:
        payload = PK[pk, PK_SIZE] - int(FF[f, FF_HDR])
        C[C_DELIVERED] += payload
        bn = bin_of(now, P, IP)
        TS_D[bn] += payload
        if f < IP[I_NFLOW_TS]:
            TS_F[bn, f] += payload
        if FI[f, F_RCV_CNT] == npkt:
            finish_flow(f, now, FI, FF, SI, SF, DP, DI, RF, RT, HT, HI, C)


@njit(cache=True)
def finish_flow(f, now, FI, FF, SI, SF, DP, DI, RF, RT, HT, HI, C):  # pragma: no cover
    """All of flow ``f`` arrived: record its completion and advance its step."""
    FI[f, F_DONE] = 1
    n = C[C_NREC]
    if n < RF.shape[0]:
        RF[n, 0] = f
        RF[n, 1] = FI[f, F_REP]
        RT[n, 0] = FF[f, FF_START]
        RT[n, 1] = now
        C[C_NREC] = n + 1
    s = FI[f, F_STEP]
    SI[s, S_REMAIN] -= 1
    if SI[s, S_REMAIN] == 0:
        step_rep_done(s, now, SI, SF, DP, DI, HT, HI, C)


@njit(cache=True)
def step_rep_done(s, now, SI, SF, DP, DI, HT, HI, C):  # pragma: no cover
    """A repetition of step ``s`` ended: start the next one or release dependents."""
    if SI[s, S_REP] + 1 < SI[s, S_REPEAT]:
        push(HT, HI, C, now + SF[s, SF_HOP], E_STEP, s, 0)
        return
    SI[s, S_DONE] = 1
    SF[s, SF_END] = now
    C[C_STEPS_DONE] += 1
    for j in range(DP[s], DP[s + 1]):
        d = DI[j]
        SI[d, S_NDEP] -= 1
        if SI[d, S_NDEP] == 0:
            push(HT, HI, C, now + SF[d, SF_DELAY] + SF[d, SF_HOP], E_STEP, d, 0)


@njit(cache=True)
def start_step(s, now, SI, SF, FI, FF, NB, BM, DP, DI, RF, RT, P, IP, HT, HI, C, SQ, SPF,
               uet) -> None:  # pragma: no cover
    """Begin the next repetition of step ``s``: reset and activate its flows (the caller
    then injects their first packets)."""
    rep = SI[s, S_REP] + 1
    SI[s, S_REP] = rep
    if rep == 0:
        SF[s, SF_START] = now
    nf = SI[s, S_NF]
    SI[s, S_REMAIN] = nf
    mtu = P[P_MTU]
    for j in range(nf):
        f = SI[s, S_FOFF] + j
        size = NB[f]
        FI[f, F_REP] = rep
        FI[f, F_DONE] = 0
        FI[f, F_ACTIVE] = 1
        FI[f, F_SND_NEXT] = 0
        FI[f, F_SND_UNA] = 0
        FI[f, 6] = -1  # F_MAX_SENT
        FI[f, F_RCV_NEXT] = 0
        FI[f, F_RCV_CNT] = 0
        FI[f, F_NAK_SENT] = -1
        FI[f, F_DUP] = 0
        FI[f, F_INREC] = 0
        FI[f, F_RTX] = -1
        FI[f, F_ACKCNT] = 0
        FI[f, F_NTO] = 0
        FF[f, FF_SIZE] = size
        FF[f, FF_START] = now
        FF[f, FF_PROGRESS] = now
        npkt = max(int(np.ceil(size / mtu)), 1)  # a zero-byte transfer: one header packet
        FI[f, F_NPKT] = npkt
        if FI[f, F_BM] >= 0:
            BM[FI[f, F_BM]:FI[f, F_BM] + npkt] = 0
        if uet is not None and FI[f, F_SPRAY] == 2:
            uet_reset(f, FI, FF, SQ, SPF, P)
        elif IP[I_SRDCC] == 1 and FI[f, F_SPRAY] == 2:
            srd_reset(f, FI, SQ, SPF)
        if FI[f, F_SRC] == FI[f, F_DST]:
            FI[f, F_ACTIVE] = 0
            finish_flow(f, now, FI, FF, SI, SF, DP, DI, RF, RT, HT, HI, C)
            continue
        if FI[f, F_RTO_ON] == 0:
            FI[f, F_RTO_ON] = 1
            push(HT, HI, C, now + P[P_RTO], E_RTO, f, 0)


@njit(cache=True)
def on_ack(f, b, now, FI, FF, IP) -> None:  # pragma: no cover
    """Cumulative ACK at the sender (window growth, duplicate ACKs, fast retransmit)."""
    if (b >> 32) != FI[f, F_REP]:
        return
    seq = b & MASK32
    una = FI[f, F_SND_UNA]
    tcp = IP[I_TCP] == 1
    if seq > una:
        FI[f, F_SND_UNA] = seq
        FF[f, FF_PROGRESS] = now
        FI[f, F_NTO] = 0
        FI[f, F_DUP] = 0
        if FI[f, F_SND_NEXT] < seq:
            FI[f, F_SND_NEXT] = seq
        if tcp:
            if FI[f, F_INREC] == 1:
                if seq >= FI[f, F_RECOVER]:
                    FI[f, F_INREC] = 0
                    FF[f, FF_CWND] = FF[f, FF_SSTHRESH]
                else:  # partial ACK: the next hole
                    FI[f, F_RTX] = seq
            elif FF[f, FF_CWND] < FF[f, FF_SSTHRESH]:
                FF[f, FF_CWND] += seq - una
            else:
                FF[f, FF_CWND] += (seq - una) / FF[f, FF_CWND]
    elif tcp and seq == una and FI[f, F_SND_NEXT] > una:
        FI[f, F_DUP] += 1
        if FI[f, F_DUP] == 3 and FI[f, F_INREC] == 0:
            FI[f, F_RTX] = una
            half = FF[f, FF_CWND] / 2.0
            FF[f, FF_SSTHRESH] = half if half > 2.0 else 2.0
            FF[f, FF_CWND] = FF[f, FF_SSTHRESH]
            FI[f, F_INREC] = 1
            FI[f, F_RECOVER] = FI[f, F_SND_NEXT]


@njit(cache=True)
def on_nak(f, b, now, FI, FF) -> None:  # pragma: no cover
    """Go-back-N: restart sending from the packet the receiver expects."""
    if (b >> 32) != FI[f, F_REP]:
        return
    seq = b & MASK32
    if seq > FI[f, F_SND_UNA]:
        FI[f, F_SND_UNA] = seq
        FI[f, F_NTO] = 0
    if FI[f, F_SND_NEXT] > seq:
        FI[f, F_SND_NEXT] = seq
    FF[f, FF_PROGRESS] = now


@njit(cache=True)
def on_rto(f, now, FI, FF, P, IP, HT, HI, C) -> bool:  # pragma: no cover
    """Retransmission timer; returns True when it fired (go back to the first un-ACKed).
    More than ``retry_limit`` timeouts in a row without progress end the run with
    ``ERR_RETRY`` (an RDMA queue pair's retry counter exceeded: the QP goes to error)."""
    if FI[f, F_DONE] == 1 or FI[f, F_ACTIVE] == 0:
        FI[f, F_RTO_ON] = 0
        return False
    due = FF[f, FF_PROGRESS] + P[P_RTO]
    if now < due * (1.0 - 1e-12):
        push(HT, HI, C, due, E_RTO, f, 0)
        return False
    C[C_TIMEOUTS] += 1
    FI[f, F_NTO] += 1
    if FI[f, F_NTO] > IP[I_RETRY]:
        C[C_ERR] = ERR_RETRY
        C[C_RETRY_FLOW] = f
        return False
    FI[f, F_SND_NEXT] = FI[f, F_SND_UNA]
    FI[f, F_RTX] = -1
    FI[f, F_NAK_SENT] = -1
    if FF[f, FF_CWND] > 0:
        half = FF[f, FF_CWND] / 2.0
        FF[f, FF_SSTHRESH] = half if half > 2.0 else 2.0
        FF[f, FF_CWND] = 1.0
        FI[f, F_INREC] = 0
    FF[f, FF_PROGRESS] = now
    push(HT, HI, C, now + P[P_RTO], E_RTO, f, 0)
    return True
