# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""The packet engine: one numba-compiled event loop over the state arrays.

What counts as an event: every entry popped from the heap — a serialisation end on a
link (``TXDONE``), a packet reaching the next node (``ARRIVE``), a PFC pause or resume
reaching a port, returned InfiniBand credits, a sender's pacing timer, an ACK, NAK or CNP
reaching a sender, DCQCN and retransmission timers, step starts and watchdog timers. A
data packet crossing ``h`` links costs at least ``2h`` events.

Every function on the hot path takes a last argument ``uet``, True or None (see
:func:`run_engine`): numba compiles one engine per transport family, and the one without
UET has none of UET's branches.

Numba's cache keys this module on its own source text only; at import,
:mod:`~fabricsim.backends.packet.numba_cache` drops the cached engine when any module it
compiles in (``transport``, ``srd``, ``uet``, ``port``, ``roce``, ``kernel``, ``layout``) has
changed.

Example
-------
>>> from fabricsim.backends.packet.layout import ERR_BUDGET
>>> ERR_BUDGET
3
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fabricsim.backends.packet.kernel import C_HN, C_OVERFLOW, pop, push
from fabricsim.backends.packet.layout import (
    C_DROP_LOSSLESS,
    C_DROP_LOSSY,
    C_DROP_NOPFC,
    C_DROP_WD,
    C_ERR,
    C_EVENTS,
    C_NPAUSED,
    C_STEPS_DONE,
    CL_LOSSLESS,
    E_ACK,
    E_ARRIVE,
    E_CNP,
    E_CREDIT,
    E_DCQ_ALPHA,
    E_DCQ_INC,
    E_DL_CHECK,
    E_GRANT,
    E_INJECT,
    E_LINK,
    E_NAK,
    E_PAUSE,
    E_PULL,
    E_RTO,
    E_STEP,
    E_STUCK,
    E_TXDONE,
    E_WD_CHECK,
    E_WD_RESTORE,
    ERR_BUDGET,
    ERR_DEADLOCK,
    ERR_HEAP,
    ERR_UNTIL,
    F_INJ_PEND,
    F_SPRAY,
    FF_CREDIT,
    FT_DUTY,
    FT_FACTOR,
    FT_PERIOD,
    FT_START,
    I_BUDGET,
    I_DCQCN,
    I_NP,
    I_SEED,
    I_SRDCC,
    I_TRIM,
    I_WD,
    LF_LAT,
    LI_BUSY,
    LI_CREDIT,
    LI_DST,
    LI_ECN,
    LI_NOPFC,
    LI_SRC,
    LI_TRIM,
    LI_TX_INL,
    LI_TX_LOST,
    LI_TX_PRIO,
    LI_TX_SIZE,
    N_BUF,
    N_MAXUSED,
    N_USED,
    P_HEADROOM,
    P_LOSS,
    P_STUCK_T0,
    P_STUCK_T1,
    P_UNTIL,
    P_XOFF,
    PK_HOP,
    PK_INL,
    PK_PBASE,
    PK_PLEN,
    PK_PRIO,
    PK_SIZE,
    PK_TRIM,
    Q_PAUSE_SENT,
    Q_WD,
    QF_BYTES,
    QF_CRED,
    QF_IN,
    S_DONE,
    S_FOFF,
    S_NDEP,
    S_NF,
    SF_DELAY,
    SF_HOP,
)
from fabricsim.backends.packet.layout import (
    C_ECN as _C_ECN,
)
from fabricsim.backends.packet.numba_cache import drop_stale
from fabricsim.backends.packet.port import (
    bin_of,
    enqueue,
    free_packet,
    on_link_fault,
    release,
    set_pause,
    try_start_tx,
)
from fabricsim.backends.packet.roce import (
    arm_deadlock_check,
    arm_watchdog,
    on_alpha_timer,
    on_cnp,
    on_deadlock_check,
    on_inc_timer,
    on_wd_check,
    on_wd_restore,
)
from fabricsim.backends.packet.srd import srd_on_ack, srd_on_rto
from fabricsim.backends.packet.transport import (
    deliver,
    on_ack,
    on_nak,
    on_rto,
    start_step,
    try_inject,
)
from fabricsim.backends.packet.uet import (
    enqueue_head,
    rccc_pull,
    trim_at_switch,
    uet_on_ack,
    uet_on_nack,
    uet_on_rto,
)

_ = (_C_ECN, P_LOSS)


@njit(cache=True)
def kick_link(l, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
              free, TS_Q, SQ, SPF, uet) -> None:  # pragma: no cover
    """Start link ``l`` if idle; refill the NIC slot of the flow whose packet left."""
    f = try_start_tx(l, now, LI, LF, QI, QF, PK, FI, CL, P, IP, HT, HI, C, PL, TS_Q, uet)
    while f >= 0:
        l0 = try_inject(f, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, P, IP, HT, HI, C,
                        free, TS_Q, SQ, SPF, uet)
        if l0 < 0:
            return
        f = try_start_tx(l0, now, LI, LF, QI, QF, PK, FI, CL, P, IP, HT, HI, C, PL, TS_Q,
                         uet)


@njit(cache=True)
def kick_flow(f, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C, free,
              TS_Q, SQ, SPF, uet) -> None:  # pragma: no cover
    """Let flow ``f`` inject a packet if it may, and start its first link."""
    while True:
        l0 = try_inject(f, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, P, IP, HT, HI, C,
                        free, TS_Q, SQ, SPF, uet)
        if l0 < 0:
            return
        kick_link(l0, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
                  free, TS_Q, SQ, SPF, uet)


@njit(cache=True)
def arrive(pk, now, stuck_on, stuck_node, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL,
           NDF, SI, SF, DP, DI, BM, RF, RT, TS_Q, TS_D, TS_F, P, IP, HT, HI, C, free, SQ, SPF,
           uet) -> None:  # pragma: no cover
    """A packet reached the node at the end of its current link."""
    NP = IP[I_NP]
    h = PK[pk, PK_HOP]
    base = PK[pk, PK_PBASE]
    l_in = PL[base + h]
    node = LI[l_in, LI_DST]
    p = PK[pk, PK_PRIO]
    size = PK[pk, PK_SIZE]
    lp_in = l_in * NP + p
    credit_in = LI[l_in, LI_CREDIT] == 1
    if h == PK[pk, PK_PLEN] - 1:
        if stuck_on and node == stuck_node and CL[p, CL_LOSSLESS] == 0 and not credit_in:
            C[C_DROP_LOSSY] += 1
        else:
            deliver(pk, now, PK, FI, FF, SI, SF, DP, DI, BM, RF, RT, TS_D, TS_F, P, IP, HT,
                    HI, C, NDF, uet)
        if credit_in:
            push(HT, HI, C, now + LF[l_in, LF_LAT], E_CREDIT, lp_in, size)
        free_packet(free, C, pk)
        return
    l_out = PL[base + h + 1]
    lp_out = l_out * NP + p
    if QI[lp_out, Q_WD] == 1:
        C[C_DROP_WD] += 1
        if credit_in:
            push(HT, HI, C, now + LF[l_in, LF_LAT], E_CREDIT, lp_in, size)
        free_packet(free, C, pk)
        return
    head = False
    if uet is not None and IP[I_TRIM] == 1 and LI[l_out, LI_TRIM] == 1:   # UET: trim
        size = trim_at_switch(pk, l_in, lp_in, lp_out, credit_in, now, LF, QF, PK, P, HT,
                              HI, C)
        head = PK[pk, PK_TRIM] == 1
    lossless = CL[p, CL_LOSSLESS] == 1
    pfc_in = (not credit_in) and lossless and (LI[l_in, LI_NOPFC] >> p) & 1 == 0
    used = NDF[node, N_USED]
    if not credit_in:
        if pfc_in:
            if used + size > NDF[node, N_BUF] or \
                    QF[lp_in, QF_IN] + size > P[P_XOFF] + P[P_HEADROOM]:
                C[C_DROP_LOSSLESS] += 1
                free_packet(free, C, pk)
                return
        elif used + size > NDF[node, N_BUF] or QF[lp_out, QF_BYTES] + size > P[5]:
            if lossless:  # a lossless class on a port that does not pause it
                C[C_DROP_NOPFC] += 1
            else:
                C[C_DROP_LOSSY] += 1
            free_packet(free, C, pk)
            return
    used += size
    NDF[node, N_USED] = used
    if used > NDF[node, N_MAXUSED]:
        NDF[node, N_MAXUSED] = used
    QF[lp_in, QF_IN] += size
    PK[pk, PK_INL] = l_in
    if pfc_in and QF[lp_in, QF_IN] > P[P_XOFF] and QI[lp_in, Q_PAUSE_SENT] == 0:
        QI[lp_in, Q_PAUSE_SENT] = 1
        push(HT, HI, C, now + LF[l_in, LF_LAT], E_PAUSE, lp_in, 1)
    PK[pk, PK_HOP] = h + 1
    if uet is not None and head:   # a trimmed header goes ahead of the data
        enqueue_head(l_out, pk, now, LI, LF, QI, QF, PK, TS_Q, P, IP)
    else:
        enqueue(l_out, pk, now, LI, LF, QI, QF, PK, TS_Q, P, IP)
    kick_link(l_out, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
              free, TS_Q, SQ, SPF, uet)


@njit(cache=True)
def run_engine(LI, LF, QI, QF, CL, NDF, PK, free, FI, FF, FPS, FPL, PL, NB, BM, SI, SF, DP,
               DI, RF, RT, TS_Q, TS_D, TS_F, TS_NP, P, IP, HT, HI, C, STUCK_L, stuck_node,
               SQ, SPF, FT, RX, uet) -> float:  # pragma: no cover
    """Run until every step has ended (or an error, the budget, ``until``, a PFC
    deadlock or a stall behind a down link); returns the time of the last event
    processed.

    ``uet`` is True when the run has UET flows and None otherwise. Its type picks the
    compiled specialisation: with None, numba prunes every ``uet is not None`` branch
    here and in the functions it calls, so the other transports' event loop contains
    none of UET's code (compiled in, it made their loop larger and slower). Hence the
    ``uet is not None and`` before conditions that already imply it."""
    np.random.seed(IP[I_SEED])
    out = np.zeros(3, np.int64)
    NP = IP[I_NP]
    ns = SI.shape[0]
    for s in range(ns):
        if SI[s, S_NDEP] == 0:
            push(HT, HI, C, SF[s, SF_DELAY] + SF[s, SF_HOP], E_STEP, s, 0)
    if stuck_node >= 0:
        push(HT, HI, C, P[P_STUCK_T0], E_STUCK, 0, 1)
        if P[P_STUCK_T1] > P[P_STUCK_T0]:
            push(HT, HI, C, P[P_STUCK_T1], E_STUCK, 0, 0)
    for r in range(FT.shape[0]):  # timed link faults: first change
        if np.isfinite(FT[r, FT_PERIOD]):
            push(HT, HI, C, FT[r, FT_START] + FT[r, FT_DUTY] * FT[r, FT_PERIOD], E_LINK, r, 1)
        else:
            push(HT, HI, C, FT[r, FT_START], E_LINK, r, 1)
    stuck_on = False
    now = 0.0
    while C[C_HN] > 0:
        if C[C_EVENTS] >= IP[I_BUDGET]:
            C[C_ERR] = ERR_BUDGET
            break
        if HT[0] > P[P_UNTIL]:
            C[C_ERR] = ERR_UNTIL
            now = P[P_UNTIL]
            break
        now = pop(HT, HI, C, out)
        C[C_EVENTS] += 1
        kind = out[0]
        a = out[1]
        b = out[2]
        if kind == E_TXDONE:
            l = a
            LI[l, LI_BUSY] = 0
            inl = LI[l, LI_TX_INL]
            if inl >= 0:
                release(LI[l, LI_SRC], inl, LI[l, LI_TX_PRIO], LI[l, LI_TX_SIZE], now, LI, LF,
                        QI, QF, NDF, CL, P, IP, HT, HI, C)
            lost = LI[l, LI_TX_LOST]
            if lost >= 0:
                free_packet(free, C, lost)
                LI[l, LI_TX_LOST] = -1
            kick_link(l, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
                      free, TS_Q, SQ, SPF, uet)
        elif kind == E_ARRIVE:
            arrive(a, now, stuck_on, stuck_node, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL,
                   NDF, SI, SF, DP, DI, BM, RF, RT, TS_Q, TS_D, TS_F, P, IP, HT, HI, C, free,
                   SQ, SPF, uet)
        elif kind == E_PAUSE:
            set_pause(a, b, now, QI, QF, C)
            bn = bin_of(now, P, IP)
            if C[C_NPAUSED] > TS_NP[bn]:
                TS_NP[bn] = C[C_NPAUSED]
            l = a // NP
            if b == 1:
                if IP[I_WD] == 1 and LI[l, LI_CREDIT] == 0:
                    arm_watchdog(a, now, QI, P, HT, HI, C)
                arm_deadlock_check(now, IP, P, HT, HI, C)
            else:
                kick_link(l, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI,
                          C, free, TS_Q, SQ, SPF, uet)
        elif kind == E_CREDIT:
            QF[a, QF_CRED] += b
            kick_link(a // NP, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT,
                      HI, C, free, TS_Q, SQ, SPF, uet)
        elif kind == E_INJECT:
            FI[a, F_INJ_PEND] = 0
            kick_flow(a, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
                      free, TS_Q, SQ, SPF, uet)
        elif kind in (E_ACK, E_NAK):
            if uet is not None and FI[a, F_SPRAY] == 2:
                if kind == E_ACK:
                    uet_on_ack(a, b, now, FI, FF, SQ, SPF, P, IP)
                else:
                    uet_on_nack(a, b, now, FI, FF, SQ, SPF, P, IP)
            elif kind == E_ACK and IP[I_SRDCC] == 1 and FI[a, F_SPRAY] == 2:
                srd_on_ack(a, b, now, FI, FF, SQ, SPF, P)
            elif kind == E_ACK:
                on_ack(a, b, now, FI, FF, IP)
            else:
                on_nak(a, b, now, FI, FF)
            kick_flow(a, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
                      free, TS_Q, SQ, SPF, uet)
        elif kind == E_CNP:
            if IP[I_DCQCN] == 1:
                on_cnp(a, now, FI, FF, P, HT, HI, C)
        elif kind == E_DCQ_ALPHA:
            on_alpha_timer(a, now, FI, FF, P, HT, HI, C)
        elif kind == E_DCQ_INC:
            on_inc_timer(a, b, now, FI, FF, P, HT, HI, C)
            kick_flow(a, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
                      free, TS_Q, SQ, SPF, uet)
        elif kind == E_RTO:
            if uet is not None and FI[a, F_SPRAY] == 2:
                fired = uet_on_rto(a, now, FI, FF, SQ, SPF, P, IP, HT, HI, C)
            elif IP[I_SRDCC] == 1 and FI[a, F_SPRAY] == 2:
                fired = srd_on_rto(a, now, FI, FF, SQ, SPF, P, HT, HI, C)
            else:
                fired = on_rto(a, now, FI, FF, P, IP, HT, HI, C)
            if fired:
                kick_flow(a, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI,
                          C, free, TS_Q, SQ, SPF, uet)
        elif kind == E_STEP:
            start_step(a, now, SI, SF, FI, FF, NB, BM, DP, DI, RF, RT, P, IP, HT, HI, C, SQ,
                       SPF, uet)
            f0 = SI[a, S_FOFF]
            for f in range(f0, f0 + SI[a, S_NF]):
                kick_flow(f, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI,
                          C, free, TS_Q, SQ, SPF, uet)
        elif kind == E_WD_CHECK:
            on_wd_check(a, b, now, LI, LF, QI, QF, PK, NDF, CL, P, IP, HT, HI, C, free)
        elif kind == E_WD_RESTORE:
            on_wd_restore(a, now, QI, P, HT, HI, C)
        elif kind == E_LINK:
            l = on_link_fault(a, b, FT, LI, LF, C)
            period = FT[a, FT_PERIOD]
            if C[C_STEPS_DONE] < ns and np.isfinite(period):
                up = FT[a, FT_DUTY] * period
                push(HT, HI, C, now + (period - up if b == 1 else up), E_LINK, a, 1 - b)
            if b == 0:
                kick_link(l, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI,
                          C, free, TS_Q, SQ, SPF, uet)
            elif FT[a, FT_FACTOR] == 0.0:
                arm_deadlock_check(now, IP, P, HT, HI, C)
        elif kind == E_DL_CHECK:
            on_deadlock_check(now, C[C_STEPS_DONE] < ns, LI, QI, PK, P, IP, HT, HI, C)
        elif uet is not None and kind == E_PULL:
            rccc_pull(a, now, FI, FF, NDF, RX, P, HT, HI, C)
        elif uet is not None and kind == E_GRANT:
            FF[a, FF_CREDIT] += b
            kick_flow(a, now, LI, LF, QI, QF, PK, FI, FF, FPS, FPL, PL, CL, P, IP, HT, HI, C,
                      free, TS_Q, SQ, SPF, uet)
        elif kind == E_STUCK:
            stuck_on = b == 1
            for i in range(STUCK_L.shape[0]):
                l = STUCK_L[i]
                for p in range(NP):
                    if LI[l, LI_CREDIT] == 1 or CL[p, CL_LOSSLESS] == 1:
                        push(HT, HI, C, now + LF[l, LF_LAT], E_PAUSE, l * NP + p, b)
        if C[C_OVERFLOW] != 0:
            C[C_ERR] = ERR_HEAP
        if C[C_ERR] != 0:
            break
    if C[C_ERR] == 0:
        for s in range(ns):
            if SI[s, S_DONE] == 0:
                C[C_ERR] = ERR_DEADLOCK
                break
    _unused = (LI_DST, LI_ECN, Q_WD)
    return now


drop_stale(run_engine)
