# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""SRD (AWS EFA) sender: per-path congestion control and selective retransmission.

What SRD does (Shalev et al., "A Cloud-Optimized Transport Protocol for Elastic and
Scalable HPC", IEEE Micro 2020): each packet of a message may take another path, the
receiver accepts them out of order, the sender keeps congestion state *per path* and
reacts to RTT (delay) within a round trip, and retransmits only the packets that were
lost. This module models that at the sender of every ``srd`` flow:

* **Paths**: the flow's ``paths`` ECMP alternatives (``packet.paths``). Each has a window
  ``cwnd`` (packets), packets in flight, a smoothed and a base (lowest) RTT. A packet goes
  on the path with room whose ``in flight / cwnd`` is lowest (ties round-robin), so a
  slow or congested path gets fewer packets; a window below one packet is paced at one
  packet per ``srtt / cwnd``.
* **Delay-based window** (Swift-style, Kumar et al., SIGCOMM 2020): every packet is ACKed
  with the path it took; an RTT below ``base + target_delay`` grows the window by ``ai``
  packets per RTT, a larger one shrinks it by ``β (rtt − target) / rtt`` (at most
  ``max_decrease``) once per RTT; a loss shrinks it by ``max_decrease``.
* **Loss detection and selective retransmission**: packets on one path are FIFO, so an
  ACK for serial ``s`` on a path declares that path's earlier unacknowledged packets lost;
  a timer (``rto``, or 4 smoothed RTTs of the path when longer) catches tail losses; a
  path that ACKed nothing at all for ``rto`` while another path of the flow did, with no
  queueing, has failed (or blackholes) and its window drops to ``min_cwnd``, so it is
  only probed.
  Only the lost packets are sent again, on whatever path has room then.

Example
-------
>>> from fabricsim.backends.packet.layout import SQ_LOST
>>> SQ_LOST
3
"""

from __future__ import annotations

from numba import njit

from fabricsim.backends.packet.kernel import push
from fabricsim.backends.packet.layout import (
    C_TIMEOUTS,
    E_INJECT,
    E_RTO,
    F_ACTIVE,
    F_BM,
    F_DONE,
    F_INJ_PEND,
    F_NLOST,
    F_NPATH,
    F_NPKT,
    F_REP,
    F_RR,
    F_RTO_ON,
    F_SND_NEXT,
    F_SND_UNA,
    FF_PROGRESS,
    FF_START,
    MASK32,
    P_RTO,
    P_SRD_AI,
    P_SRD_BETA,
    P_SRD_MDF,
    P_SRD_MINCW,
    P_SRD_TARGET,
    P_WINDOW,
    SP_BASE,
    SP_CWND,
    SP_EXP,
    SP_INFL,
    SP_LACK,
    SP_LDEC,
    SP_NEXT,
    SP_NSER,
    SP_SRTT,
    SQ_ACKED,
    SQ_INFLIGHT,
    SQ_K,
    SQ_LOST,
    SQ_SER,
    SQ_ST,
    SQ_T,
)


@njit(cache=True)
def srd_next_seq(f, FI, SQ, P) -> int:  # pragma: no cover
    """The packet flow ``f`` sends next: its lowest lost one, else the next new one
    (-1: none, or the window ``packet.window`` is full)."""
    b = FI[f, F_BM]
    if FI[f, F_NLOST] > 0:
        for s in range(FI[f, F_SND_UNA], FI[f, F_SND_NEXT]):
            if SQ[b + s, SQ_ST] == SQ_LOST:
                return s
    seq = FI[f, F_SND_NEXT]
    if seq >= FI[f, F_NPKT] or seq - FI[f, F_SND_UNA] >= P[P_WINDOW]:
        return -1
    return seq


@njit(cache=True)
def srd_pick_path(f, now, FI, SPF, HT, HI, C) -> int:  # pragma: no cover
    """The path with room and the lowest ``in flight / cwnd`` (-1: every window is full;
    then a paced path's next send time is scheduled)."""
    n = FI[f, F_NPATH]
    rr = FI[f, F_RR]
    best = -1
    bl = 1e300
    wake = 1e300
    for i in range(n):
        k = (rr + i) % n
        cw = SPF[f, k, SP_CWND]
        infl = SPF[f, k, SP_INFL]
        if cw >= 1.0:
            ok = infl < cw
        else:
            ok = infl == 0 and now >= SPF[f, k, SP_NEXT]
            if infl == 0 and not ok and SPF[f, k, SP_NEXT] < wake:
                wake = SPF[f, k, SP_NEXT]
        if ok:
            load = infl / cw
            if load < bl:
                bl = load
                best = k
    if best >= 0:
        FI[f, F_RR] = best + 1
        return best
    if wake < 1e300 and FI[f, F_INJ_PEND] == 0:
        FI[f, F_INJ_PEND] = 1
        push(HT, HI, C, wake, E_INJECT, f, 0)
    return -1


@njit(cache=True)
def srd_sent(f, seq, k, now, FI, SQ, SPF) -> None:  # pragma: no cover
    """Record that packet ``seq`` of flow ``f`` left on path ``k``."""
    i = FI[f, F_BM] + seq
    if SQ[i, SQ_ST] == SQ_LOST:
        FI[f, F_NLOST] -= 1
    elif seq >= FI[f, F_SND_NEXT]:
        FI[f, F_SND_NEXT] = seq + 1
    SQ[i, SQ_T] = now
    SQ[i, SQ_ST] = SQ_INFLIGHT
    SQ[i, SQ_K] = k
    SQ[i, SQ_SER] = SPF[f, k, SP_NSER]
    SPF[f, k, SP_NSER] += 1
    SPF[f, k, SP_INFL] += 1
    cw = SPF[f, k, SP_CWND]
    if cw < 1.0:
        SPF[f, k, SP_NEXT] = now + SPF[f, k, SP_SRTT] / cw


@njit(cache=True)
def _decrease(f, k, factor, now, SPF, P):  # pragma: no cover
    """Shrink path ``k``'s window to ``factor`` of itself, at most once per RTT."""
    if now - SPF[f, k, SP_LDEC] < SPF[f, k, SP_SRTT]:
        return
    cw = SPF[f, k, SP_CWND] * factor
    SPF[f, k, SP_CWND] = cw if cw > P[P_SRD_MINCW] else P[P_SRD_MINCW]
    SPF[f, k, SP_LDEC] = now


@njit(cache=True)
def _on_rtt(f, k, rtt, now, SPF, P):  # pragma: no cover
    """Delay-based window update of path ``k`` from one RTT sample."""
    sr = SPF[f, k, SP_SRTT]
    SPF[f, k, SP_SRTT] = rtt if sr <= 0.0 else 0.875 * sr + 0.125 * rtt
    if rtt < SPF[f, k, SP_BASE] or SPF[f, k, SP_BASE] <= 0.0:
        SPF[f, k, SP_BASE] = rtt
    target = SPF[f, k, SP_BASE] + P[P_SRD_TARGET]
    cw = SPF[f, k, SP_CWND]
    if rtt < target:
        if SPF[f, k, SP_LDEC] < 0.0:  # start-up: one packet per ACK (doubles per RTT)
            SPF[f, k, SP_CWND] = cw + 1.0
        elif cw >= 1.0:
            SPF[f, k, SP_CWND] = cw + P[P_SRD_AI] / cw
        else:
            SPF[f, k, SP_CWND] = cw + P[P_SRD_AI] * cw
    else:
        dec = P[P_SRD_BETA] * (rtt - target) / rtt
        mdf = P[P_SRD_MDF]
        _decrease(f, k, 1.0 - (dec if dec < mdf else mdf), now, SPF, P)


@njit(cache=True)
def _lose(f, i, SQ, SPF, FI) -> None:  # pragma: no cover
    k = int(SQ[i, SQ_K])
    SQ[i, SQ_ST] = SQ_LOST
    SPF[f, k, SP_INFL] -= 1
    FI[f, F_NLOST] += 1


@njit(cache=True)
def srd_on_ack(f, b, now, FI, FF, SQ, SPF, P) -> None:  # pragma: no cover
    """A per-packet ACK (``b = rep << 40 | path << 32 | seq``) reached the sender."""
    if (b >> 40) != FI[f, F_REP] or FI[f, F_DONE] == 1:
        return
    k = (b >> 32) & 0xFF
    seq = b & MASK32
    SPF[f, k, SP_LACK] = now
    base = FI[f, F_BM]
    i = base + seq
    st = SQ[i, SQ_ST]
    if st == SQ_ACKED:
        return
    if st == SQ_INFLIGHT:
        kk = int(SQ[i, SQ_K])
        SPF[f, kk, SP_INFL] -= 1
        if kk == k:  # the ACK is of the latest transmission: an RTT sample of path k
            _on_rtt(f, k, now - SQ[i, SQ_T], now, SPF, P)
            ser = SQ[i, SQ_SER]
            if ser > SPF[f, k, SP_EXP]:  # earlier packets on this (FIFO) path were lost
                lost = 0
                for s in range(FI[f, F_SND_UNA], FI[f, F_SND_NEXT]):
                    j = base + s
                    if SQ[j, SQ_ST] == SQ_INFLIGHT and SQ[j, SQ_K] == k and \
                            SQ[j, SQ_SER] < ser:
                        _lose(f, j, SQ, SPF, FI)
                        lost += 1
                if lost > 0:
                    _decrease(f, k, 1.0 - P[P_SRD_MDF], now, SPF, P)
            if ser + 1 > SPF[f, k, SP_EXP]:
                SPF[f, k, SP_EXP] = ser + 1
    elif st == SQ_LOST:
        FI[f, F_NLOST] -= 1
    mark_acked(f, i, base, now, FI, FF, SQ)


@njit(cache=True)
def mark_acked(f, i, base, now, FI, FF, SQ):  # pragma: no cover
    """Packet ``i`` (slot ``base`` + its sequence) of flow ``f`` is acknowledged: the
    flow's first unacknowledged packet moves past every acknowledged one, and its
    progress time is now."""
    SQ[i, SQ_ST] = SQ_ACKED
    una = FI[f, F_SND_UNA]
    npkt = FI[f, F_NPKT]
    while una < npkt and SQ[base + una, SQ_ST] == SQ_ACKED:
        una += 1
    FI[f, F_SND_UNA] = una
    FF[f, FF_PROGRESS] = now


@njit(cache=True)
def _silent(f, k, now, rto, FF, SPF):  # pragma: no cover
    """Path ``k`` has ACKed nothing for ``rto`` (counting from the flow's start)."""
    heard = SPF[f, k, SP_LACK]
    if heard < FF[f, FF_START]:
        heard = FF[f, FF_START]
    return now - heard >= rto * (1.0 - 1e-12)


@njit(cache=True)
def _others_heard(f, k, now, rto, FI, FF, SPF, P):  # pragma: no cover
    """Some other path of flow ``f`` delivered an ACK within the last ``rto`` and shows
    no queueing (smoothed RTT within target of its base): the losses on path ``k`` are
    its own, not congestion that every path of the flow shares (an incast)."""
    for j in range(FI[f, F_NPATH]):
        if j != k and not _silent(f, j, now, rto, FF, SPF) and \
                SPF[f, j, SP_SRTT] < SPF[f, j, SP_BASE] + P[P_SRD_TARGET]:
            return True
    return False


@njit(cache=True)
def srd_on_rto(f, now, FI, FF, SQ, SPF, P, HT, HI, C) -> bool:  # pragma: no cover
    """Periodic check: packets in flight longer than ``max(rto, 4 srtt)`` of their path
    are lost (tail losses no later ACK reveals); their path's window falls to
    ``min_cwnd`` when the path ACKed nothing for ``rto`` while another, uncongested path
    did (the path failed), else by ``max_decrease``. Returns True when some were."""
    if FI[f, F_DONE] == 1 or FI[f, F_ACTIVE] == 0:
        FI[f, F_RTO_ON] = 0
        return False
    base = FI[f, F_BM]
    rto = P[P_RTO]
    found = False
    for s in range(FI[f, F_SND_UNA], FI[f, F_SND_NEXT]):
        j = base + s
        if SQ[j, SQ_ST] == SQ_INFLIGHT:
            k = int(SQ[j, SQ_K])
            lim = 4.0 * SPF[f, k, SP_SRTT]
            if now - SQ[j, SQ_T] >= (lim if lim > rto else rto) * (1.0 - 1e-12):
                _lose(f, j, SQ, SPF, FI)
                if _silent(f, k, now, rto, FF, SPF) and _others_heard(f, k, now, rto, FI,
                                                                      FF, SPF, P):
                    # this path ACKed nothing for a whole timeout while another path
                    # did: the path failed (or blackholes), not the receiver's side, so
                    # it drops to the smallest window and is only probed from now on
                    SPF[f, k, SP_CWND] = P[P_SRD_MINCW]
                    SPF[f, k, SP_LDEC] = now
                else:
                    _decrease(f, k, 1.0 - P[P_SRD_MDF], now, SPF, P)
                found = True
    if found:
        C[C_TIMEOUTS] += 1
    push(HT, HI, C, now + 0.5 * rto, E_RTO, f, 0)
    return found


@njit(cache=True)
def srd_reset(f, FI, SQ, SPF) -> None:  # pragma: no cover
    """A new repetition of flow ``f``: no packet sent; windows and RTTs are kept."""
    base = FI[f, F_BM]
    for s in range(FI[f, F_NPKT]):
        SQ[base + s, SQ_ST] = 0.0
    FI[f, F_NLOST] = 0
    for k in range(FI[f, F_NPATH]):
        SPF[f, k, SP_INFL] = 0.0
        SPF[f, k, SP_NSER] = 0.0
        SPF[f, k, SP_EXP] = 0.0
