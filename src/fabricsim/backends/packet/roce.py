# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""RoCEv2 congestion control: DCQCN at the sender and the PFC watchdog at the switch.

DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015)
as implemented here, per flow (queue pair):

* on a CNP: ``Rt = Rc``; ``Rc = Rc (1 - α/2)``; ``α = (1-g) α + g``; the rate-increase
  timer and byte counter restart;
* every ``alpha_timer`` without a CNP: ``α = (1-g) α``;
* every ``timer`` (T) or ``byte_counter`` (B) bytes sent, one increase event: while both
  counters are below ``F`` (=5) *fast recovery* ``Rc = (Rt+Rc)/2``; when both exceed F
  *hyper increase* ``Rt += i·R_HAI``; otherwise *additive increase* ``Rt += R_AI``; then
  ``Rc = (Rt+Rc)/2``. Rates never exceed the line rate nor fall below ``min_rate``.

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

from numba import njit

from fabricsim.backends.packet.kernel import push
from fabricsim.backends.packet.layout import (
    C_DROP_WD,
    C_WD_TRIG,
    E_DCQ_ALPHA,
    E_DCQ_INC,
    E_WD_CHECK,
    E_WD_RESTORE,
    F_ALPHA_ON,
    F_IB,
    F_INC_EPOCH,
    F_IT,
    FF_ALPHA,
    FF_BYTE_CNT,
    FF_CNP_SEEN,
    FF_LINE,
    FF_RATE,
    FF_TARGET,
    I_NP,
    LF_QTOT,
    LI_SRC,
    P_BYTE_CNT,
    P_G,
    P_MIN_RATE,
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

FAST_RECOVERY_STEPS = 5


@njit(cache=True)
def rate_increase(f, FI, FF, P):  # pragma: no cover
    """One DCQCN increase event for flow ``f`` (fast recovery, additive or hyper)."""
    it = FI[f, F_IT]
    ib = FI[f, F_IB]
    line = FF[f, FF_LINE]
    hi = it if it > ib else ib
    lo = it if it < ib else ib
    if hi < FAST_RECOVERY_STEPS:
        pass
    elif lo > FAST_RECOVERY_STEPS:
        FF[f, FF_TARGET] += (lo - FAST_RECOVERY_STEPS) * P[P_RHAI]
    else:
        FF[f, FF_TARGET] += P[P_RAI]
    if FF[f, FF_TARGET] > line:
        FF[f, FF_TARGET] = line
    FF[f, FF_RATE] = 0.5 * (FF[f, FF_TARGET] + FF[f, FF_RATE])
    if FF[f, FF_RATE] > line:
        FF[f, FF_RATE] = line


@njit(cache=True)
def on_cnp(f, now, FI, FF, P, HT, HI, C):  # pragma: no cover
    """Rate decrease when a CNP reaches the sender of flow ``f``."""
    g = P[P_G]
    FF[f, FF_TARGET] = FF[f, FF_RATE]
    r = FF[f, FF_RATE] * (1.0 - 0.5 * FF[f, FF_ALPHA])
    FF[f, FF_RATE] = r if r > P[P_MIN_RATE] else P[P_MIN_RATE]
    FF[f, FF_ALPHA] = (1.0 - g) * FF[f, FF_ALPHA] + g
    FF[f, FF_CNP_SEEN] = 1.0
    FI[f, F_IT] = 0
    FI[f, F_IB] = 0
    FF[f, FF_BYTE_CNT] = 0.0
    FI[f, F_INC_EPOCH] += 1
    push(HT, HI, C, now + P[P_T_INC], E_DCQ_INC, f, FI[f, F_INC_EPOCH])
    if FI[f, F_ALPHA_ON] == 0:
        FI[f, F_ALPHA_ON] = 1
        push(HT, HI, C, now + P[P_T_ALPHA], E_DCQ_ALPHA, f, 0)


@njit(cache=True)
def on_alpha_timer(f, now, FI, FF, P, HT, HI, C):  # pragma: no cover
    """Alpha decays when no CNP arrived during the last period."""
    if FF[f, FF_CNP_SEEN] == 0.0:
        FF[f, FF_ALPHA] *= 1.0 - P[P_G]
    FF[f, FF_CNP_SEEN] = 0.0
    if FF[f, FF_RATE] < FF[f, FF_LINE] or FF[f, FF_ALPHA] > 1e-3:
        push(HT, HI, C, now + P[P_T_ALPHA], E_DCQ_ALPHA, f, 0)
    else:
        FI[f, F_ALPHA_ON] = 0


@njit(cache=True)
def on_inc_timer(f, epoch, now, FI, FF, P, HT, HI, C):  # pragma: no cover
    """Rate-increase timer: one increase event, re-armed while below line rate."""
    if epoch != FI[f, F_INC_EPOCH]:
        return
    FI[f, F_IT] += 1
    rate_increase(f, FI, FF, P)
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
