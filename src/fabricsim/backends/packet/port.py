# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""Ports: per-priority output queues, transmission, buffer and credit accounting.

A port is the sending end of a directed link. It holds one FIFO per priority (traffic
class) as a linked list of packet ids, serves the classes round-robin one packet at a
time, skips a class that is paused (PFC) or lacks credits (InfiniBand), and schedules the
packet's serialisation end (``E_TXDONE``) and its arrival downstream (``E_ARRIVE``):
store-and-forward arrives after ``size/capacity + latency``; cut-through after
``header/capacity + latency`` when the next link is no faster than this one.

All functions are numba-compiled; the state arrays and their columns are described in
:mod:`fabricsim.backends.packet.layout`.

Example
-------
>>> from fabricsim.backends.packet.layout import Q_HEAD
>>> Q_HEAD
0
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fabricsim.backends.packet.kernel import push
from fabricsim.backends.packet.layout import (
    C_DATA_PKTS,
    C_DROP_DOWN,
    C_DROP_LOSS,
    C_ECN,
    C_ERR,
    C_FREE,
    C_HOP_PKTS,
    C_LINK_FLIPS,
    C_LLR,
    C_NDOWN,
    C_NDOWN_PERM,
    C_NPAUSED,
    C_PAUSES,
    C_POOL_HIGH,
    C_RETX,
    CL_ECN,
    E_ARRIVE,
    E_CREDIT,
    E_PAUSE,
    E_TXDONE,
    ERR_POOL,
    F_MAX_SENT,
    F_QUEUED,
    FT_FACTOR,
    FT_LINK,
    FT_PERIOD,
    I_CUT,
    I_NBINS,
    I_NP,
    LF_BYTES,
    LF_CAP,
    LF_CAP0,
    LF_LAT,
    LF_QMAX,
    LF_QTOT,
    LI_BUSY,
    LI_CBFC,
    LI_CREDIT,
    LI_DOWN,
    LI_ECN,
    LI_LLR,
    LI_LOSSY,
    LI_RR,
    LI_TX_INL,
    LI_TX_LOST,
    LI_TX_PRIO,
    LI_TX_SIZE,
    LI_TXC,
    LI_WATCH,
    N_USED,
    P_BIN_DT,
    P_CUT_HDR,
    P_KMAX,
    P_KMIN,
    P_LOSS,
    P_PMAX,
    P_XON,
    PK_ECN,
    PK_FLOW,
    PK_HOP,
    PK_INL,
    PK_NEXT,
    PK_PBASE,
    PK_PLEN,
    PK_PRIO,
    PK_SEQ,
    PK_SIZE,
    Q_HEAD,
    Q_N,
    Q_PAUSE_SENT,
    Q_PAUSED,
    Q_TAIL,
    Q_WD,
    QF_BYTES,
    QF_CRED,
    QF_IN,
)


@njit(cache=True)
def alloc_packet(PK, free, C):  # pragma: no cover
    """Take a packet id from the free stack (-1 and ``ERR_POOL`` when exhausted)."""
    top = C[C_FREE]
    if top <= 0:
        C[C_ERR] = ERR_POOL
        return -1
    top -= 1
    C[C_FREE] = top
    used = free.shape[0] - top
    if used > C[C_POOL_HIGH]:
        C[C_POOL_HIGH] = used
    return free[top]


@njit(cache=True)
def free_packet(free, C, pk):  # pragma: no cover
    """Return packet ``pk`` to the free stack."""
    free[C[C_FREE]] = pk
    C[C_FREE] += 1


@njit(cache=True)
def bin_of(t, P, IP):  # pragma: no cover
    """Time-series bin of time ``t``."""
    b = int(t / P[P_BIN_DT])
    nb = IP[I_NBINS]
    return b if b < nb else nb - 1


@njit(cache=True)
def enqueue(l, pk, now, LI, LF, QI, QF, PK, TS_Q, P, IP):  # pragma: no cover
    """Append packet ``pk`` to the output queue of link ``l`` for its priority."""
    lp = l * IP[I_NP] + PK[pk, PK_PRIO]
    size = PK[pk, PK_SIZE]
    PK[pk, PK_NEXT] = -1
    if QI[lp, Q_N] == 0:
        QI[lp, Q_HEAD] = pk
    else:
        PK[QI[lp, Q_TAIL], PK_NEXT] = pk
    QI[lp, Q_TAIL] = pk
    count_queued(l, lp, size, now, LI, LF, QI, QF, TS_Q, P, IP)


@njit(cache=True)
def count_queued(l, lp, size, now, LI, LF, QI, QF, TS_Q, P, IP):  # pragma: no cover
    """Count a packet of ``size`` bytes just queued at ``lp`` of link ``l``: the class's
    and the link's bytes, the link's high-water mark and its watched queue trace."""
    QI[lp, Q_N] += 1
    QF[lp, QF_BYTES] += size
    q = LF[l, LF_QTOT] + size
    LF[l, LF_QTOT] = q
    if q > LF[l, LF_QMAX]:
        LF[l, LF_QMAX] = q
    w = LI[l, LI_WATCH]
    if w >= 0:
        b = bin_of(now, P, IP)
        if q > TS_Q[b, w]:
            TS_Q[b, w] = q


@njit(cache=True)
def release(node, inl, prio, size, now, LI, LF, QI, QF, NDF, CL, P, IP, HT, HI,
            C):  # pragma: no cover
    """A packet that entered ``node`` over link ``inl`` left its buffer: free the space,
    send XON upstream when the ingress count falls to the threshold, return credits."""
    NDF[node, N_USED] -= size
    lp = inl * IP[I_NP] + prio
    QF[lp, QF_IN] -= size
    if LI[inl, LI_CREDIT] == 1:
        push(HT, HI, C, now + LF[inl, LF_LAT], E_CREDIT, lp, size)
    elif QI[lp, Q_PAUSE_SENT] == 1 and QF[lp, QF_IN] <= P[P_XON]:
        QI[lp, Q_PAUSE_SENT] = 0
        push(HT, HI, C, now + LF[inl, LF_LAT], E_PAUSE, lp, 0)


@njit(cache=True)
def mark_ecn(pk, q, PK, P, C):  # pragma: no cover
    """RED-style ECN at dequeue from the egress queue (``q`` bytes left behind the
    packet), as the switch's egress pipeline (and ns-3's DCQCN/HPCC model) marks: none
    below Kmin, ``pmax·(q-Kmin)/(Kmax-Kmin)`` up to Kmax, every packet above."""
    if q <= P[P_KMIN]:
        return
    if q >= P[P_KMAX]:
        mark = True
    else:
        mark = np.random.random() < P[P_PMAX] * (q - P[P_KMIN]) / (P[P_KMAX] - P[P_KMIN])
    if mark:
        PK[pk, PK_ECN] = 1
        C[C_ECN] += 1


@njit(cache=True)
def try_start_tx(l, now, LI, LF, QI, QF, PK, FI, CL, P, IP, HT, HI, C, PL, TS_Q, uet
                 ) -> int:  # pragma: no cover
    """Start sending the next eligible packet on link ``l``; returns the source flow of
    that packet when it left its sender's NIC queue (so the sender may inject), else -1.

    A link that is down (a timed fault) sends nothing if it is credit-based (InfiniBand,
    NVLink, PCIe: the queue waits and credits stall upstream); an Ethernet link keeps
    draining its queue at line rate into the void (the packets are lost), and so does an
    Ethernet link with credit-based flow control (UET's CBFC), whose credits for a lost
    frame come back after the link's latency. With link-level retry (UET's LLR) a frame
    hit by random loss is not lost: the link sends it again after a link round trip (the
    link is busy for that round trip and one more serialisation). CBFC and LLR exist
    only in runs with UET flows: with ``uet`` None (every other run) numba compiles
    neither."""
    if LI[l, LI_BUSY] == 1:
        return -1
    down = LI[l, LI_DOWN] == 1
    if down and LI[l, LI_CREDIT] == 1 and (uet is None or LI[l, LI_CBFC] == 0):
        return -1
    NP = IP[I_NP]
    r = LI[l, LI_RR]
    for i in range(NP):
        p = (r + i) % NP
        lp = l * NP + p
        if QI[lp, Q_N] == 0:
            continue
        if QI[lp, Q_PAUSED] == 1 and QI[lp, Q_WD] == 0:
            continue
        pk = QI[lp, Q_HEAD]
        size = PK[pk, PK_SIZE]
        credit = LI[l, LI_CREDIT] == 1
        if credit and QF[lp, QF_CRED] < size:
            continue
        # dequeue
        QI[lp, Q_HEAD] = PK[pk, PK_NEXT]
        QI[lp, Q_N] -= 1
        QF[lp, QF_BYTES] -= size
        LF[l, LF_QTOT] -= size
        if credit:
            QF[lp, QF_CRED] -= size
        LI[l, LI_RR] = (p + 1) % NP
        if LI[l, LI_ECN] == 1 and CL[p, CL_ECN] == 1 and PK[pk, PK_ECN] == 0:
            mark_ecn(pk, QF[lp, QF_BYTES], PK, P, C)
        LI[l, LI_BUSY] = 1
        LI[l, LI_TX_INL] = PK[pk, PK_INL]
        LI[l, LI_TX_PRIO] = p
        LI[l, LI_TX_SIZE] = size
        LI[l, LI_TX_LOST] = -1
        cap = LF[l, LF_CAP]
        ser = size / cap
        LF[l, LF_BYTES] += size
        LI[l, LI_TXC] += 1
        C[C_HOP_PKTS] += 1
        hop = PK[pk, PK_HOP]
        lost = False
        replay = 0.0
        if down:
            lost = True
            C[C_DROP_DOWN] += 1
        elif LI[l, LI_LOSSY] == 1 and P[P_LOSS] > 0.0 and np.random.random() < P[P_LOSS]:
            if uet is not None and LI[l, LI_LLR] == 1:   # the receiving port NACKs it: replay
                replay = ser + 2.0 * LF[l, LF_LAT]
                C[C_LLR] += 1
            else:
                lost = True
                C[C_DROP_LOSS] += 1
        push(HT, HI, C, now + ser + replay, E_TXDONE, l, 0)
        if lost:
            LI[l, LI_TX_LOST] = pk
            if uet is not None and credit and LI[l, LI_CBFC] == 1:   # credits unused
                push(HT, HI, C, now + LF[l, LF_LAT], E_CREDIT, lp, size)
        else:
            delay = ser + replay
            if IP[I_CUT] == 1 and hop + 1 < PK[pk, PK_PLEN]:
                nxt = PL[PK[pk, PK_PBASE] + hop + 1]
                if LF[nxt, LF_CAP] <= cap:
                    hdr = P[P_CUT_HDR]
                    delay = (hdr if hdr < size else size) / cap
            push(HT, HI, C, now + delay + LF[l, LF_LAT], E_ARRIVE, pk, 0)
        if hop == 0:
            f = PK[pk, PK_FLOW]
            FI[f, F_QUEUED] -= 1
            C[C_DATA_PKTS] += 1
            seq = PK[pk, PK_SEQ]
            if seq <= FI[f, F_MAX_SENT]:
                C[C_RETX] += 1
            else:
                FI[f, F_MAX_SENT] = seq
            return f
        return -1
    return -1


@njit(cache=True)
def set_pause(lp, on, now, QI, QF, C):  # pragma: no cover
    """Mark queue ``lp`` paused (``on``) or resumed and keep the pause-time totals."""
    if on == 1:
        if QI[lp, Q_PAUSED] == 0:
            QI[lp, Q_PAUSED] = 1
            QF[lp, 3] = now
            if QF[lp, 5] < 0:
                QF[lp, 5] = now
            C[C_NPAUSED] += 1
            C[C_PAUSES] += 1
    else:
        if QI[lp, Q_PAUSED] == 1:
            QI[lp, Q_PAUSED] = 0
            QF[lp, 4] += now - QF[lp, 3]
            C[C_NPAUSED] -= 1


@njit(cache=True)
def on_link_fault(row, on, FT, LI, LF, C):  # pragma: no cover
    """Timed link fault ``row`` of ``FT`` starts (``on`` 1) or ends (0); returns the link.

    A fault with capacity factor 0 takes the link down (:func:`try_start_tx` then stalls
    or loses what it would send); a positive factor scales its capacity from the nominal
    one. The change applies from the next packet the link starts."""
    l = int(FT[row, FT_LINK])
    fac = FT[row, FT_FACTOR]
    C[C_LINK_FLIPS] += 1
    if on == 1:
        if fac > 0.0:
            LF[l, LF_CAP] = LF[l, LF_CAP0] * fac
        elif LI[l, LI_DOWN] == 0:
            LI[l, LI_DOWN] = 1
            C[C_NDOWN] += 1
            if not np.isfinite(FT[row, FT_PERIOD]):
                C[C_NDOWN_PERM] += 1
    else:
        LF[l, LF_CAP] = LF[l, LF_CAP0]
        if LI[l, LI_DOWN] == 1:
            LI[l, LI_DOWN] = 0
            C[C_NDOWN] -= 1
    return l
