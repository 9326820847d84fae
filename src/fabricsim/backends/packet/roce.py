# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""RoCEv2 congestion control: DCQCN at the sender and the PFC watchdog at the switch.

DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015)
as NVIDIA ConnectX NICs run it (their firmware parameters, see docs/packet.md), per flow
(queue pair):

* on a CNP: α is first decayed by ``(1-g)`` per ``alpha_timer`` period elapsed since it
  was last updated, then ``α = (1-g) α + g``; if the last rate decrease is at least
  ``rate_reduce_period`` ago, ``Rc = Rc (1 - α/2)`` (never below ``min_rate``) and the
  increase counters and timer restart. The target rate follows ``clamp_target``:
  ``always`` sets ``Rt = Rc`` before the cut (the paper), ``after_timer`` only when a
  timer-driven increase happened since the last decrease (ConnectX
  ``clamp_tgt_rate_after_time_inc``), ``never`` keeps it;
* every ``timer`` (T) or ``byte_counter`` (B) bytes sent, one increase event: while both
  counters are below ``F`` (``fast_recovery_steps``) *fast recovery* ``Rc = (Rt+Rc)/2``;
  when both exceed F *hyper increase* ``Rt += i·R_HAI``; otherwise *additive increase*
  ``Rt += R_AI``; then ``Rc = (Rt+Rc)/2``. Rates never exceed the line rate.

α is brought up to date lazily (a per-flow timer every microsecond would cost an event
per flow per microsecond); the result equals the periodic update when at most one CNP
arrives per period, which the receiver's ``cnp_interval`` guarantees when it is at least
``alpha_timer``.

PFC deadlock detection (Hu et al., "Deadlocks in Datacenter Networks: Why Do They Form,
and How to Avoid Them", HotNets 2016; Guo et al., "RDMA over Commodity Ethernet at
Scale", SIGCOMM 2016): while any port is paused, a check every ``pfc.deadlock_window``
finds the *stalled* ports — a paused class with packets queued and no packet sent on the
link since the previous check — and the waits-for edges between them (port ``a`` waits on
port ``b`` when a packet that entered ``b``'s switch over ``a``'s link is queued at ``b``:
``a`` is paused because that buffer is full). Ports that wait on nothing stalled are
peeled off (they drain once what they wait on moves); what remains waits in a cycle, a
deadlock, and the run stops (``ERR_PFC_DEADLOCK``) with those ports marked.

PFC watchdog: a queue paused continuously for ``watchdog.detect`` enters the storm state:
its packets are dropped (queued and arriving) so the buffers upstream drain, until a
restore check finds the pause gone (every ``watchdog.restore``).

Example
-------
>>> from fabricsim.backends.packet.layout import E_CNP
>>> E_CNP
7
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fabricsim.backends.packet.kernel import push
from fabricsim.backends.packet.layout import (
    C_DL_ARMED,
    C_DL_TXC,
    C_DROP_WD,
    C_ERR,
    C_NDOWN,
    C_NDOWN_PERM,
    C_NPAUSED,
    C_WD_TRIG,
    E_DCQ_INC,
    E_DL_CHECK,
    E_WD_CHECK,
    E_WD_RESTORE,
    ERR_PFC_DEADLOCK,
    ERR_STALL,
    F_ALPHA_ON,
    F_IB,
    F_INC_EPOCH,
    F_INJ_PEND,
    F_IT,
    FF_ALPHA,
    FF_ALPHA_T,
    FF_BYTE_CNT,
    FF_HDR,
    FF_LAST_DEC,
    FF_LINE,
    FF_NEXT_T,
    FF_RATE,
    FF_TARGET,
    I_DL,
    I_NP,
    LF_QTOT,
    LI_DLK,
    LI_SRC,
    LI_TXC,
    LI_TXC_LAST,
    P_BYTE_CNT,
    P_CLAMP,
    P_DEC_PERIOD,
    P_DL_WINDOW,
    P_FR_STEPS,
    P_G,
    P_MIN_RATE,
    P_MTU,
    P_RAI,
    P_RHAI,
    P_T_ALPHA,
    P_T_INC,
    P_WD_RESTORE,
    P_WD_TIME,
    PK_INL,
    PK_NEXT,
    PK_PRIO,
    PK_SIZE,
    Q_EPOCH,
    Q_HEAD,
    Q_N,
    Q_PAUSED,
    Q_WD,
    QF_BYTES,
)
from fabricsim.backends.packet.port import free_packet, release


@njit(cache=True)
def rate_increase(f, FI, FF, P):  # pragma: no cover
    """One DCQCN increase event for flow ``f`` (fast recovery, additive or hyper)."""
    it = FI[f, F_IT]
    ib = FI[f, F_IB]
    line = FF[f, FF_LINE]
    hi = it if it > ib else ib
    lo = it if it < ib else ib
    fr = int(P[P_FR_STEPS])
    if hi < fr:
        pass
    elif lo > fr:
        FF[f, FF_TARGET] += (lo - fr) * P[P_RHAI]
    else:
        FF[f, FF_TARGET] += P[P_RAI]
    if FF[f, FF_TARGET] > line:
        FF[f, FF_TARGET] = line
    FF[f, FF_RATE] = 0.5 * (FF[f, FF_TARGET] + FF[f, FF_RATE])
    if FF[f, FF_RATE] > line:
        FF[f, FF_RATE] = line


@njit(cache=True)
def on_cnp(f, now, FI, FF, P, HT, HI, C):  # pragma: no cover
    """A CNP reached the sender of flow ``f``: update α, cut the rate (at most once per
    ``rate_reduce_period``)."""
    g = P[P_G]
    t_a = FF[f, FF_ALPHA_T]
    if t_a >= 0.0 and now > t_a:
        FF[f, FF_ALPHA] *= (1.0 - g) ** ((now - t_a) / P[P_T_ALPHA])
    FF[f, FF_ALPHA_T] = now
    FF[f, FF_ALPHA] = (1.0 - g) * FF[f, FF_ALPHA] + g
    last = FF[f, FF_LAST_DEC]
    if last >= 0.0 and now - last < P[P_DEC_PERIOD] * (1.0 - 1e-9):
        return
    FF[f, FF_LAST_DEC] = now
    clamp = P[P_CLAMP]
    if clamp == 2.0 or (clamp == 1.0 and FI[f, F_IT] > 0):
        FF[f, FF_TARGET] = FF[f, FF_RATE]
    r = FF[f, FF_RATE] * (1.0 - 0.5 * FF[f, FF_ALPHA])
    FF[f, FF_RATE] = r if r > P[P_MIN_RATE] else P[P_MIN_RATE]
    FI[f, F_IT] = 0
    FI[f, F_IB] = 0
    FF[f, FF_BYTE_CNT] = 0.0
    FI[f, F_INC_EPOCH] += 1
    push(HT, HI, C, now + P[P_T_INC], E_DCQ_INC, f, FI[f, F_INC_EPOCH])


@njit(cache=True)
def on_alpha_timer(f, now, FI, FF, P, HT, HI, C):  # pragma: no cover
    """Kept for event kind ``E_DCQ_ALPHA`` (no longer scheduled: α decays lazily)."""
    FI[f, F_ALPHA_ON] = 0


@njit(cache=True)
def repace(f, now, FI, FF, P):  # pragma: no cover
    """After a rate increase the NIC's rate limiter applies the new rate at once: a
    packet held back by the old (slower) rate waits at most one packet time at the new
    one (the caller's ``kick_flow`` then re-arms the pacing timer)."""
    gap = (P[P_MTU] + FF[f, FF_HDR]) / FF[f, FF_RATE]
    if FF[f, FF_NEXT_T] > now + gap:
        FF[f, FF_NEXT_T] = now + gap
        FI[f, F_INJ_PEND] = 0


@njit(cache=True)
def on_inc_timer(f, epoch, now, FI, FF, P, HT, HI, C):  # pragma: no cover
    """Rate-increase timer: one increase event, re-armed while below line rate."""
    if epoch != FI[f, F_INC_EPOCH]:
        return
    FI[f, F_IT] += 1
    rate_increase(f, FI, FF, P)
    repace(f, now, FI, FF, P)
    if FF[f, FF_RATE] < FF[f, FF_LINE]:
        push(HT, HI, C, now + P[P_T_INC], E_DCQ_INC, f, epoch)


@njit(cache=True)
def on_bytes_sent(f, size, FI, FF, P):  # pragma: no cover
    """Byte counter: every ``byte_counter`` bytes at a reduced rate is an increase event."""
    if FF[f, FF_RATE] >= FF[f, FF_LINE]:
        return
    FF[f, FF_BYTE_CNT] += size
    if FF[f, FF_BYTE_CNT] >= P[P_BYTE_CNT]:
        FF[f, FF_BYTE_CNT] = 0.0
        FI[f, F_IB] += 1
        rate_increase(f, FI, FF, P)


@njit(cache=True)
def arm_watchdog(lp, now, QI, P, HT, HI, C):  # pragma: no cover
    """A pause began on queue ``lp``: check it again after the detection time."""
    QI[lp, Q_EPOCH] += 1
    push(HT, HI, C, now + P[P_WD_TIME], E_WD_CHECK, lp, QI[lp, Q_EPOCH])


@njit(cache=True)
def on_wd_check(lp, epoch, now, LI, LF, QI, QF, PK, NDF, CL, P, IP, HT, HI, C, free
                ) -> int:  # pragma: no cover
    """Storm detected when the queue is still paused since the same pause began: drop
    its packets and keep dropping until restored. Returns 1 when it triggered."""
    if QI[lp, Q_PAUSED] == 0 or QI[lp, Q_EPOCH] != epoch or QI[lp, Q_WD] == 1:
        return 0
    QI[lp, Q_WD] = 1
    C[C_WD_TRIG] += 1
    NP = IP[I_NP]
    l = lp // NP
    node = LI[l, LI_SRC]
    pk = QI[lp, Q_HEAD]
    while QI[lp, Q_N] > 0:
        nxt = PK[pk, PK_NEXT]
        size = PK[pk, PK_SIZE]
        QI[lp, Q_N] -= 1
        QF[lp, QF_BYTES] -= size
        LF[l, LF_QTOT] -= size
        inl = PK[pk, PK_INL]
        if inl >= 0:
            release(node, inl, PK[pk, PK_PRIO], size, now, LI, LF, QI, QF, NDF, CL, P, IP,
                    HT, HI, C)
        C[C_DROP_WD] += 1
        free_packet(free, C, pk)
        pk = nxt
    push(HT, HI, C, now + P[P_WD_RESTORE], E_WD_RESTORE, lp, 0)
    return 1


@njit(cache=True)
def on_wd_restore(lp, now, QI, P, HT, HI, C):  # pragma: no cover
    """Leave the storm state once the pause has cleared; otherwise check again later."""
    if QI[lp, Q_PAUSED] == 1:
        push(HT, HI, C, now + P[P_WD_RESTORE], E_WD_RESTORE, lp, 0)
    else:
        QI[lp, Q_WD] = 0


@njit(cache=True)
def arm_deadlock_check(now, IP, P, HT, HI, C):  # pragma: no cover
    """Schedule a deadlock/stall check one window from now unless one is pending."""
    if IP[I_DL] == 1 and C[C_DL_ARMED] == 0:
        C[C_DL_ARMED] = 1
        push(HT, HI, C, now + P[P_DL_WINDOW], E_DL_CHECK, 0, 0)


@njit(cache=True)
def on_deadlock_check(now, steps_left, LI, QI, PK, P, IP, HT, HI, C):  # pragma: no cover
    """One deadlock check (see the module text): sets ``ERR_PFC_DEADLOCK`` and marks the
    ports of the cycle (``LI_DLK``), or ``ERR_STALL`` when nothing at all moved for the
    window while a link is down for good; otherwise checks again a window later while
    ports are paused or links down."""
    C[C_DL_ARMED] = 0
    nl = LI.shape[0]
    NP = IP[I_NP]
    total = 0
    for l in range(nl):
        total += LI[l, LI_TXC]
    moved = total != C[C_DL_TXC]
    C[C_DL_TXC] = total
    idx = np.full(nl, -1, np.int64)
    members = np.zeros(nl, np.int64)
    ns = 0
    for l in range(nl):
        if LI[l, LI_TXC] != LI[l, LI_TXC_LAST]:
            continue
        for p in range(NP):
            lp = l * NP + p
            if QI[lp, Q_PAUSED] == 1 and QI[lp, Q_WD] == 0 and QI[lp, Q_N] > 0:
                idx[l] = ns
                members[ns] = l
                ns += 1
                break
    for l in range(nl):
        LI[l, LI_TXC_LAST] = LI[l, LI_TXC]
    if ns > 0 and _peel_waits_for(ns, members, idx, LI, QI, PK, NP) > 0:
        C[C_ERR] = ERR_PFC_DEADLOCK
        return
    if not moved and C[C_NDOWN_PERM] > 0 and steps_left:
        C[C_ERR] = ERR_STALL
        return
    if steps_left and (C[C_NPAUSED] > 0 or C[C_NDOWN] > 0):
        arm_deadlock_check(now, IP, P, HT, HI, C)


@njit(cache=True)
def _peel_waits_for(ns, members, idx, LI, QI, PK, NP):  # pragma: no cover
    """Peel the stalled links (``members``; ``idx`` maps a link to its position) that
    wait on no stalled link, repeatedly; mark what remains (``LI_DLK``) and return its
    size. Edges come from the queues (a packet that entered over link ``a`` queued on
    stalled link ``b``: ``a`` waits on ``b``) as a list, so memory grows with the
    queued packets, not with the square of the stalled links."""
    ne = 0
    for j in range(ns):
        l2 = members[j]
        for p in range(NP):
            lp = l2 * NP + p
            pk = QI[lp, Q_HEAD]
            for _ in range(QI[lp, Q_N]):
                inl = PK[pk, PK_INL]
                if inl >= 0 and idx[inl] >= 0:
                    ne += 1
                pk = PK[pk, PK_NEXT]
    src = np.empty(ne, np.int64)
    outdeg = np.zeros(ns, np.int64)
    start = np.zeros(ns + 1, np.int64)   # edges grouped by their target
    e = 0
    for j in range(ns):
        l2 = members[j]
        for p in range(NP):
            lp = l2 * NP + p
            pk = QI[lp, Q_HEAD]
            for _ in range(QI[lp, Q_N]):
                inl = PK[pk, PK_INL]
                if inl >= 0 and idx[inl] >= 0:
                    src[e] = idx[inl]
                    outdeg[idx[inl]] += 1
                    e += 1
                pk = PK[pk, PK_NEXT]
        start[j + 1] = e
    stack = np.zeros(ns, np.int64)
    alive = np.ones(ns, np.int8)
    top = 0
    for i in range(ns):
        if outdeg[i] == 0:
            stack[top] = i
            top += 1
    left = ns
    while top > 0:
        top -= 1
        j = stack[top]
        alive[j] = 0
        left -= 1
        for k in range(start[j], start[j + 1]):
            i = src[k]
            outdeg[i] -= 1
            if outdeg[i] == 0:
                stack[top] = i
                top += 1
    for i in range(ns):
        if alive[i] == 1:
            LI[members[i], LI_DLK] = 1
    return left
