# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""Ultra Ethernet Transport (UET, UE 1.0): spraying, trimming, NSCC, RCCC, LLR and CBFC.

Sources: Ultra Ethernet Consortium, *UE Specification 1.0* (June 2025); Hoefler et al.,
"Ultra Ethernet's Design Principles and Architectural Innovations", arXiv:2508.08906
(2025); the UEC model of the htsim packet simulator (``uec.cpp``: NSCC's quadrants,
quick adapt, trimming, the receiver's pull pacer). The code here is written for this
engine from those descriptions. What it models, per reliable-unordered (RUD) connection:

* **Spraying**: every packet carries one of the flow's ``uet.entropies`` entropy
  values, each an ECMP path through the fabric; the receiver accepts packets in any
  order (bitmap) and ACKs each with its entropy and the ECN bit it saw. The sender picks
  entropies as ``uet.load_balance`` says (:func:`uet_pick_path`). ``reps`` (REPS, Bonato
  et al., 2024, as the default ``mixed`` balancer of htsim's UEC model): an entropy whose
  ACK came back unmarked is reused, oldest first; with none to reuse, the sender takes
  the next entropy in turn that carries no penalty (an ECN mark adds 1, a trim NACK 4, a
  timeout 15, at most 15; each exploration that starts on a penalised entropy takes 1
  off and moves on); for ``4 rto`` after a timeout it explores no unknown entropy and
  takes in turn those that answered before (REPS's freezing); an entropy silent for that
  whole ``rto`` has failed. ``oblivious``: round-robin, an entropy whose ACK came back
  marked at low delay (a congested path, not a congested receiver) skipped for one base
  RTT. Under both, an entropy that went silent for a whole ``rto`` while others answered
  has failed; a failed entropy is avoided for ``4 rto``, then probed again.
* **Trimming** (switches, :func:`trim_at_switch`): a packet that reaches an egress queue
  holding more than ``trim_threshold_bytes`` loses its payload; its headers go on at the
  head of the queue (high priority) to the receiver, which answers with a NACK at once;
  the sender resends that one packet (selective retransmission, no go-back-N).
* **Loss detection** without a trim: packets on one entropy follow one path in order, so
  an ACK for a later packet on it declares the earlier unacknowledged ones lost; a
  periodic check declares packets older than ``rto`` lost (tail losses, failed links).
  A flow that hears nothing (no ACK or NACK on any entropy) for more than ``retry_limit``
  whole ``rto`` in a row while it has packets out fails the run with ``ERR_RETRY``, as
  an RDMA queue pair whose retry counter runs out: every entropy has failed.
* **NSCC** (:func:`nscc_on_ack`, see :class:`~fabricsim.backends.packet.config.NsccConfig`)
  or **RCCC** (:func:`rccc_pull`, :class:`~fabricsim.backends.packet.config.RcccConfig`).
* **LLR** and **CBFC** act in the link layer (:func:`~fabricsim.backends.packet.port.
  try_start_tx`): a corrupted frame costs its link a round trip and one more
  serialisation, not an end-to-end loss; CBFC links carry credits like InfiniBand's but
  drop (as Ethernet) what they would send while down.

Example
-------
>>> from fabricsim.backends.packet.layout import E_PULL, E_GRANT
>>> E_PULL, E_GRANT
(17, 18)
"""

from __future__ import annotations

from numba import njit

from fabricsim.backends.packet.kernel import push
from fabricsim.backends.packet.layout import (
    C_ERR,
    C_GRANTS,
    C_RETRY_FLOW,
    C_TIMEOUTS,
    C_TRIMS,
    E_CREDIT,
    E_GRANT,
    E_PULL,
    E_RTO,
    ERR_RETRY,
    F_ACTIVE,
    F_BM,
    F_DONE,
    F_DST,
    F_NLOST,
    F_NPATH,
    F_NPKT,
    F_NTO,
    F_REP,
    F_RQ_HEAD,
    F_RQ_N,
    F_RR,
    F_RTO_ON,
    F_SND_NEXT,
    F_SND_UNA,
    FF_ACH,
    FF_BRTT,
    FF_CRED0,
    FF_CREDIT,
    FF_CWND,
    FF_FREEZE,
    FF_HDR,
    FF_INFL,
    FF_LAST_DEC,
    FF_MAXW,
    FF_NEED,
    FF_PROGRESS,
    FF_QA_T,
    FF_QA_TRIG,
    FF_RACK,
    FF_RET_LAT,
    FF_SIZE,
    FF_TGT,
    I_NP,
    I_RCCC,
    I_REPS,
    I_RETRY,
    LF_LAT,
    MASK32,
    N_PULL_ON,
    N_PULL_RATE,
    N_PULL_RR,
    N_PULL_T,
    P_MTU,
    P_NSCC_FI,
    P_NSCC_GAMMA,
    P_NSCC_MAXMD,
    P_NSCC_QA,
    P_RTO,
    P_TRIM,
    P_TRIM_SIZE,
    PK_NEXT,
    PK_PRIO,
    PK_SIZE,
    PK_TRIM,
    Q_HEAD,
    Q_N,
    Q_TAIL,
    QF_BYTES,
    SP_CWND,
    SP_EXP,
    SP_INFL,
    SP_LACK,
    SP_NEXT,
    SP_PEN,
    SP_RQ,
    SQ_ACKED,
    SQ_INFLIGHT,
    SQ_K,
    SQ_LOST,
    SQ_SER,
    SQ_ST,
    SQ_T,
)
from fabricsim.backends.packet.port import count_queued
from fabricsim.backends.packet.srd import mark_acked, srd_reset

#: A failed entropy is skipped for this many retransmission timeouts, then probed.
FAILED_PATH_RTOS = 4.0
#: REPS: explorations that pass over an entropy after an ECN mark, a trim NACK and a
#: timeout on it, and the most it can owe (the values of htsim's UEC balancer).
PEN_ECN, PEN_NACK, PEN_TIMEOUT, PEN_MAX = 1.0, 4.0, 15.0, 15.0
#: A packet out for this many base RTTs (or ``rto``, if shorter) while a packet sent
#: after it was acknowledged is lost (time-based reordering window, as RACK); if its
#: entropy answered nothing since it was sent, the entropy has failed. The flow checks
#: every half of that window. Trimming bounds every queue's delay (a full trim threshold
#: at line rate is a few microseconds), so a packet on a live path returns within a few
#: base RTTs.
SILENT_BASE_RTTS = 4.0


@njit(cache=True)
def uet_wire(f, seq, FI, FF, P):  # pragma: no cover
    """Wire bytes of packet ``seq`` of flow ``f`` (payload plus headers)."""
    mtu = int(P[P_MTU])
    npkt = FI[f, F_NPKT]
    payload = mtu if seq < npkt - 1 else int(FF[f, FF_SIZE]) - (npkt - 1) * mtu
    if payload < 0:
        payload = 0
    return payload + FF[f, FF_HDR]


@njit(cache=True)
def uet_may_send(f, seq, FI, FF, P, IP) -> bool:  # pragma: no cover
    """NSCC: the window has room for packet ``seq`` (or nothing is in flight); RCCC: the
    sender holds credit for it."""
    w = uet_wire(f, seq, FI, FF, P)
    if IP[I_RCCC] == 1:
        return FF[f, FF_CREDIT] >= w - 1e-6
    infl = FF[f, FF_INFL]
    return infl <= 0.0 or infl + w <= FF[f, FF_CWND] + 1e-6


@njit(cache=True)
def _penalise(f, k, pen, SPF) -> None:  # pragma: no cover
    p = SPF[f, k, SP_PEN] + pen
    SPF[f, k, SP_PEN] = p if p < PEN_MAX else PEN_MAX


@njit(cache=True)
def _recycle(f, k, FI, SPF) -> None:  # pragma: no cover
    """REPS: entropy ``k`` came back unmarked; queue it for reuse (the ring holds one slot
    per entropy; when full, the oldest entry gives way)."""
    n = FI[f, F_NPATH]
    h = FI[f, F_RQ_HEAD]
    m = FI[f, F_RQ_N]
    if m >= n:
        h = (h + 1) % n
        m -= 1
        FI[f, F_RQ_HEAD] = h
    SPF[f, (h + m) % n, SP_RQ] = k
    FI[f, F_RQ_N] = m + 1


@njit(cache=True)
def _reps_pick(f, now, FI, FF, SPF) -> int:  # pragma: no cover
    """REPS: the oldest recycled entropy that has not failed since; else, within
    :data:`FAILED_PATH_RTOS` timeouts of a timeout (REPS's freezing), the next one in
    turn that has answered before and has not failed since; else the next one in turn
    without a penalty (the exploration's first entropy, if penalised, pays 1); -1 when
    every entropy is penalised or avoided."""
    n = FI[f, F_NPATH]
    while FI[f, F_RQ_N] > 0:
        h = FI[f, F_RQ_HEAD]
        k = int(SPF[f, h, SP_RQ])
        FI[f, F_RQ_HEAD] = (h + 1) % n
        FI[f, F_RQ_N] -= 1
        if SPF[f, k, SP_NEXT] <= now and SPF[f, k, SP_CWND] > 0.0:
            return k
    rr = FI[f, F_RR]
    if now < FF[f, FF_FREEZE]:   # a path failed: do not try unknown entropies now
        for i in range(n):
            k = (rr + i) % n
            if SPF[f, k, SP_LACK] > 0.0 and SPF[f, k, SP_NEXT] <= now and \
                    SPF[f, k, SP_CWND] > 0.0:
                FI[f, F_RR] = k + 1
                return k
    for i in range(n):
        k = (rr + i) % n
        if SPF[f, k, SP_PEN] > 0.0:
            if i == 0:
                SPF[f, k, SP_PEN] -= 1.0
            continue
        if SPF[f, k, SP_NEXT] <= now:
            FI[f, F_RR] = k + 1
            if SPF[f, k, SP_CWND] <= 0.0:   # a failed entropy's pause is over: probe it
                SPF[f, k, SP_CWND] = 1.0
            return k
    return -1


@njit(cache=True)
def uet_pick_path(f, now, FI, FF, SPF, IP) -> int:  # pragma: no cover
    """The entropy of the next packet (``uet.load_balance``): REPS's recycled or explored
    one, or the next round-robin, skipping avoided ones (ECN at low delay, failed); when
    every one is avoided or penalised, the next one that has not failed (else the next)."""
    if IP[I_REPS] == 1:
        k = _reps_pick(f, now, FI, FF, SPF)
        if k >= 0:
            return k
    n = FI[f, F_NPATH]
    rr = FI[f, F_RR]
    fallback = -1
    for i in range(n):
        k = (rr + i) % n
        if SPF[f, k, SP_NEXT] <= now:
            FI[f, F_RR] = k + 1
            if SPF[f, k, SP_CWND] <= 0.0:   # a failed entropy's pause is over: probe it
                SPF[f, k, SP_CWND] = 1.0
            return k
        if fallback < 0 and SPF[f, k, SP_CWND] > 0.0:
            fallback = k
    if fallback < 0:
        fallback = rr % n
    FI[f, F_RR] = fallback + 1
    return fallback


@njit(cache=True)
def uet_sent(f, seq, now, FI, FF, P, IP) -> None:  # pragma: no cover
    """Book packet ``seq`` as sent: bytes in flight, RCCC credit spent."""
    w = uet_wire(f, seq, FI, FF, P)
    FF[f, FF_INFL] += w
    if IP[I_RCCC] == 1:
        FF[f, FF_CREDIT] -= w


@njit(cache=True)
def _lose(f, i, w, own_credit, SQ, SPF, FI, FF, P, IP) -> None:  # pragma: no cover
    """Declare the packet in SQ row ``i`` lost: to be resent."""
    k = int(SQ[i, SQ_K])
    SQ[i, SQ_ST] = SQ_LOST
    SPF[f, k, SP_INFL] -= 1
    FI[f, F_NLOST] += 1
    FF[f, FF_INFL] -= w
    if IP[I_RCCC] == 1:
        if own_credit:   # the receiver never saw it: resent on the sender's own credit
            FF[f, FF_CREDIT] += w
    else:   # NSCC: the lost bytes leave the window (htsim's mark_packet_for_retransmission)
        cw = FF[f, FF_CWND] - w
        lo = FF[f, FF_HDR] + P[P_MTU]   # one full packet
        FF[f, FF_CWND] = cw if cw > lo else lo


@njit(cache=True)
def nscc_on_ack(f, k, w, rtt, ecn, now, FF, SPF, P, IP) -> None:  # pragma: no cover
    """NSCC window update from one ACK of ``w`` bytes on entropy ``k``."""
    brtt = FF[f, FF_BRTT]
    if rtt < brtt:
        FF[f, FF_BRTT] = rtt
        brtt = rtt
    delay = rtt - brtt
    tgt = FF[f, FF_TGT]
    FF[f, FF_ACH] += w
    if delay > P[P_NSCC_QA] * tgt:
        FF[f, FF_QA_TRIG] = 1.0
    lo = FF[f, FF_HDR] + P[P_MTU]
    if now >= FF[f, FF_QA_T]:   # end of a quick-adapt period
        fired = FF[f, FF_QA_TRIG] == 1.0
        if fired:   # the window falls to what the path delivered in the last period
            ach = FF[f, FF_ACH]
            FF[f, FF_CWND] = ach if ach > lo else lo
            FF[f, FF_LAST_DEC] = now
        FF[f, FF_QA_TRIG] = 0.0
        FF[f, FF_ACH] = 0.0
        FF[f, FF_QA_T] = now + brtt + tgt
        if fired:
            return
    cw = FF[f, FF_CWND]
    if ecn == 0:
        if delay < tgt:   # proportional increase
            cw += w * (tgt - delay) / tgt
        else:             # fair increase: fair_increase_mtus per RTT
            cw += P[P_NSCC_FI] * w / cw
    elif delay >= tgt:    # multiplicative decrease, once per base RTT
        if now - FF[f, FF_LAST_DEC] >= brtt:
            dec = P[P_NSCC_GAMMA] * (delay - tgt) / delay
            mx = P[P_NSCC_MAXMD]
            cw *= 1.0 - (dec if dec < mx else mx)
            FF[f, FF_LAST_DEC] = now
    elif IP[I_REPS] == 0:   # marked at low delay: the path is congested; try other entropies
        SPF[f, k, SP_NEXT] = now + brtt   # (REPS: the mark's penalty does that)
    mw = FF[f, FF_MAXW]
    FF[f, FF_CWND] = lo if cw < lo else (mw if cw > mw else cw)


@njit(cache=True)
def uet_on_ack(f, b, now, FI, FF, SQ, SPF, P, IP) -> None:  # pragma: no cover
    """A per-packet ACK (``b = rep << 41 | ecn << 40 | entropy << 32 | seq``)."""
    if (b >> 41) != FI[f, F_REP] or FI[f, F_DONE] == 1:
        return
    ecn = (b >> 40) & 1
    k = (b >> 32) & 0xFF
    seq = b & MASK32
    SPF[f, k, SP_LACK] = now
    if IP[I_REPS] == 1:   # every ACK tells the balancer how its entropy fared
        if ecn == 0:
            _recycle(f, k, FI, SPF)
        else:
            _penalise(f, k, PEN_ECN, SPF)
    base = FI[f, F_BM]
    i = base + seq
    st = SQ[i, SQ_ST]
    if st == SQ_ACKED:
        return
    w = uet_wire(f, seq, FI, FF, P)
    if st == SQ_INFLIGHT:
        kk = int(SQ[i, SQ_K])
        SPF[f, kk, SP_INFL] -= 1
        FF[f, FF_INFL] -= w
        if kk == k:   # the latest transmission: earlier ones on this entropy were lost
            if SQ[i, SQ_T] > FF[f, FF_RACK]:
                FF[f, FF_RACK] = SQ[i, SQ_T]
            ser = SQ[i, SQ_SER]
            if ser > SPF[f, k, SP_EXP]:
                for s in range(FI[f, F_SND_UNA], FI[f, F_SND_NEXT]):
                    j = base + s
                    if SQ[j, SQ_ST] == SQ_INFLIGHT and SQ[j, SQ_K] == k and \
                            SQ[j, SQ_SER] < ser:
                        _lose(f, j, uet_wire(f, s, FI, FF, P), True, SQ, SPF, FI, FF, P, IP)
            if ser + 1 > SPF[f, k, SP_EXP]:
                SPF[f, k, SP_EXP] = ser + 1
            if IP[I_RCCC] == 0:
                nscc_on_ack(f, k, w, now - SQ[i, SQ_T], ecn, now, FF, SPF, P, IP)
    elif st == SQ_LOST:   # declared lost, yet it arrived: no resend needed
        FI[f, F_NLOST] -= 1
    mark_acked(f, i, base, now, FI, FF, SQ)


@njit(cache=True)
def uet_on_nack(f, b, now, FI, FF, SQ, SPF, P, IP) -> None:  # pragma: no cover
    """A trim NACK (``b = rep << 41 | entropy << 32 | seq``): resend that packet now."""
    if (b >> 41) != FI[f, F_REP] or FI[f, F_DONE] == 1:
        return
    k = (b >> 32) & 0xFF
    seq = b & MASK32
    i = FI[f, F_BM] + seq
    SPF[f, k, SP_LACK] = now
    if IP[I_REPS] == 1:
        _penalise(f, k, PEN_NACK, SPF)
    if SQ[i, SQ_ST] == SQ_INFLIGHT and SQ[i, SQ_K] == k:
        _lose(f, i, uet_wire(f, seq, FI, FF, P), False, SQ, SPF, FI, FF, P, IP)
        FF[f, FF_QA_TRIG] = 1.0
    FF[f, FF_PROGRESS] = now


@njit(cache=True)
def uet_on_rto(f, now, FI, FF, SQ, SPF, P, IP, HT, HI, C) -> bool:  # pragma: no cover
    """Periodic check: a packet out for :data:`SILENT_BASE_RTTS` base RTTs (at most
    ``rto``) while a later one was acknowledged, or out for ``rto``, is lost; if its
    entropy answered nothing since the packet left, the entropy has failed and is skipped
    for :data:`FAILED_PATH_RTOS` timeouts (its other packets are lost with it). More than
    ``retry_limit`` whole ``rto`` without an ACK or NACK on any entropy while packets are
    out end the run with ``ERR_RETRY``. Returns True when packets were declared lost."""
    if FI[f, F_DONE] == 1 or FI[f, F_ACTIVE] == 0:
        FI[f, F_RTO_ON] = 0
        return False
    base = FI[f, F_BM]
    rto = P[P_RTO]
    quiet = SILENT_BASE_RTTS * FF[f, FF_BRTT]
    if quiet > rto:
        quiet = rto
    found = False
    eps = 1.0 - 1e-12
    for s in range(FI[f, F_SND_UNA], FI[f, F_SND_NEXT]):
        j = base + s
        if SQ[j, SQ_ST] != SQ_INFLIGHT:
            continue
        k = int(SQ[j, SQ_K])
        t0 = SQ[j, SQ_T]
        age = now - t0
        late = age >= quiet * eps and FF[f, FF_RACK] > t0
        if SPF[f, k, SP_CWND] <= 0.0 or late or age >= rto * eps:
            if late and SPF[f, k, SP_LACK] < t0 and SPF[f, k, SP_CWND] > 0.0:
                SPF[f, k, SP_CWND] = 0.0   # nothing came back on it since: it failed
                SPF[f, k, SP_NEXT] = now + FAILED_PATH_RTOS * rto
            if IP[I_REPS] == 1 and not late:   # a timeout, not a reordering loss
                _penalise(f, k, PEN_TIMEOUT, SPF)
                FF[f, FF_FREEZE] = now + FAILED_PATH_RTOS * rto
                if SPF[f, k, SP_LACK] < t0 and SPF[f, k, SP_CWND] > 0.0:
                    SPF[f, k, SP_CWND] = 0.0   # silent for a whole rto: failed
                    SPF[f, k, SP_NEXT] = now + FAILED_PATH_RTOS * rto
            _lose(f, j, uet_wire(f, s, FI, FF, P), True, SQ, SPF, FI, FF, P, IP)
            found = True
    if found:
        C[C_TIMEOUTS] += 1
    if FF[f, FF_INFL] <= 0.0 and FI[f, F_NLOST] == 0:
        FF[f, FF_PROGRESS] = now   # nothing out (waiting for credit): no timer runs
        FI[f, F_NTO] = 0
    else:   # retransmission timeouts in a row since the flow last heard from its receiver
        nto = int((now - FF[f, FF_PROGRESS]) / (rto * eps))
        FI[f, F_NTO] = nto
        if nto > IP[I_RETRY]:
            C[C_ERR] = ERR_RETRY
            C[C_RETRY_FLOW] = f
            return False
    push(HT, HI, C, now + 0.5 * quiet, E_RTO, f, 0)
    return found


@njit(cache=True)
def uet_reset(f, FI, FF, SQ, SPF, P) -> None:  # pragma: no cover
    """A new repetition of flow ``f``: nothing sent or in flight; RCCC credit and demand
    start again (windows, base RTTs and failed entropies are kept)."""
    srd_reset(f, FI, SQ, SPF)  # what SRD resets: packets, losses, per-entropy counts
    FF[f, FF_INFL] = 0.0
    FF[f, FF_RACK] = -1.0
    total = FF[f, FF_SIZE] + FI[f, F_NPKT] * FF[f, FF_HDR]
    c0 = FF[f, FF_CRED0]
    first = uet_wire(f, 0, FI, FF, P)
    if c0 < first:
        c0 = first
    FF[f, FF_CREDIT] = c0 if c0 < total else total
    FF[f, FF_NEED] = total - FF[f, FF_CREDIT]


@njit(cache=True)
def enqueue_head(l, pk, now, LI, LF, QI, QF, PK, TS_Q, P, IP):  # pragma: no cover
    """Put packet ``pk`` at the head of link ``l``'s queue for its class (a trimmed
    header goes ahead of the data: UE 1.0 forwards it at high priority)."""
    lp = l * IP[I_NP] + PK[pk, PK_PRIO]
    size = PK[pk, PK_SIZE]
    if QI[lp, Q_N] == 0:
        PK[pk, PK_NEXT] = -1
        QI[lp, Q_TAIL] = pk
    else:
        PK[pk, PK_NEXT] = QI[lp, Q_HEAD]
    QI[lp, Q_HEAD] = pk
    count_queued(l, lp, size, now, LI, LF, QI, QF, TS_Q, P, IP)


@njit(cache=True)
def trim_at_switch(pk, l_in, lp_in, lp_out, credit_in, now, LF, QF, PK, P, HT, HI, C
                   ) -> int:  # pragma: no cover
    """Trim packet ``pk`` if the egress queue ``lp_out`` it joins holds more than the trim
    threshold: the payload is cut and the headers go on. Returns the packet's size after.
    Credits of the cut bytes go back upstream at once on a credit-based (CBFC) link."""
    size = PK[pk, PK_SIZE]
    if PK[pk, PK_TRIM] == 1 or QF[lp_out, QF_BYTES] + size <= P[P_TRIM]:
        return size
    cut = int(P[P_TRIM_SIZE])
    if cut >= size:
        return size
    if credit_in:
        push(HT, HI, C, now + LF[l_in, LF_LAT], E_CREDIT, lp_in, size - cut)
    PK[pk, PK_SIZE] = cut
    PK[pk, PK_TRIM] = 1
    C[C_TRIMS] += 1
    return cut


@njit(cache=True)
def rccc_want(f, w, now, FI, FF, NDF, HT, HI, C) -> None:  # pragma: no cover
    """The receiver of flow ``f`` learns it needs ``w`` more bytes of credit (0: only
    that the flow exists); starts its pacer if idle."""
    FF[f, FF_NEED] += w
    n = FI[f, F_DST]
    if FF[f, FF_NEED] > 0.0 and NDF[n, N_PULL_ON] == 0.0:
        NDF[n, N_PULL_ON] = 1.0
        t = NDF[n, N_PULL_T]
        push(HT, HI, C, t if t > now else now, E_PULL, n, 0)


@njit(cache=True)
def rccc_pull(n, now, FI, FF, NDF, RX, P, HT, HI, C) -> None:  # pragma: no cover
    """Receiver ``n``'s pacer: grant one packet of credit to the next flow (round-robin)
    that needs some, and come back after that packet's time on the receiver's link."""
    s0 = RX[n]
    cnt = RX[n + 1] - s0
    rr = int(NDF[n, N_PULL_RR])
    for i in range(cnt):
        j = (rr + i) % cnt
        f = RX[s0 + j]
        if FI[f, F_ACTIVE] == 1 and FI[f, F_DONE] == 0 and FF[f, FF_NEED] > 0.0:
            g = FF[f, FF_HDR] + P[P_MTU]
            if g > FF[f, FF_NEED]:
                g = FF[f, FF_NEED]
            FF[f, FF_NEED] -= g
            C[C_GRANTS] += 1
            push(HT, HI, C, now + FF[f, FF_RET_LAT], E_GRANT, f, int(g + 0.5))
            NDF[n, N_PULL_RR] = j + 1
            dt = g / NDF[n, N_PULL_RATE]
            NDF[n, N_PULL_T] = now + dt
            push(HT, HI, C, now + dt, E_PULL, n, 0)
            return
    NDF[n, N_PULL_ON] = 0.0
