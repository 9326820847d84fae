"""The compiled event loop of the flow backend.

State lives in a :class:`Pool` of numpy arrays owned by the Python driver
(:mod:`fabricsim.backends.flow.sim`): *jobs* (a transfer or a share of one: bytes left,
activation time, group), *flows* (a job's path or paths; a job of several flows — adaptive
routing — finishes when their summed progress covers its bytes) and CSR *entries*
(flow → link, coefficient). :func:`advance` runs events — activations after the path
latency, completions — until a group (one repetition of a step) completes, a time limit
(the next external event: a step launch, a capacity change) is reached, or nothing can
move (a stall).

Rates change only where the set of flows on a link changes: the links of flows that
started or finished (and links whose capacity the driver changed) seed a breadth-first
search over link → flow → link; only the flows of that connected component are re-solved
by progressive filling (:func:`~fabricsim.backends.flow.maxmin.fill_component`, driven by
the links that saturate at each water level).

Example
-------
>>> import numpy as np
>>> p = Pool.empty(n_links=1)
>>> p.add(np.array([1e9]), np.array([1e-6]), np.array([0]), np.array([0, 1]),
...       np.array([0, 1]), np.array([0]), np.array([1.0]), np.array([1.0]), now=0.0)
>>> code, now, done = p.run(0.0, np.inf, np.array([1e9]), n_groups=1)
>>> code, round(now, 9), done.tolist()
(1, 1.000001, [0])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.flow.maxmin import fill_component

F8 = NDArray[np.float64]
I8 = NDArray[np.int64]

PENDING, ACTIVE, DONE = 0, 1, 2
#: Return codes of :func:`advance` (BUDGET: ``max_events`` events done, state consistent;
#: call again to go on — how the driver checks its wall-clock limit and shows progress).
LIMIT, GROUPS, STALL, BUDGET = 0, 1, 2, 3
#: Two events closer than this (relative to the clock) are one event.
TIME_RTOL = 1e-12


@numba.njit(cache=True)
def advance(now: float, t_limit: float,
            j_rem: F8, j_act: F8, j_state: I8, j_group: I8, j_end: F8, j_rate: F8,
            j_bneck: I8, j_fptr: I8,
            f_w: F8, f_ptr: I8, e_link: I8, e_coef: F8, e_frac: F8, f_rate: F8,
            f_bneck: I8, g_left: I8, g_end: F8, g_bneck: I8,
            cap: F8, dirty: NDArray[np.bool_], link_bytes: F8,
            s_rem: F8, s_demand: F8, s_nlive: I8, s_seen: NDArray[np.bool_],
            out_groups: I8, j_size: F8, j_lat: F8, g_more: I8, g_flat: I8, g_start: F8,
            rep_start: F8, rep_end: F8, crit: F8, g_slow: F8,
            inc_ptr: I8, inc_flow: I8, f_job: I8, inc_entry: I8, inc_cnt: I8,
            u_coef: F8, u_frac: F8, u_n: I8, f_counted: NDArray[np.bool_],
            l_sorted: NDArray[np.bool_], inc_key: F8, max_events: int = 1 << 62,
            partial: bool = True, precision: float = 0.0) -> tuple[int, float, int]:
    """Run events from ``now`` until a group completes, ``t_limit`` or a stall.

    A group with ``g_more[g] > 0`` more repetitions is re-armed in place when it
    completes (its jobs start again after their latency ``j_lat``), recording the
    repetition's end in ``rep_end[g_flat[g]]`` and its time in ``crit`` of its bottleneck;
    only its last repetition is returned. Returns ``(code, now, n)``: ``out_groups[:n]``
    are the groups that completed. ``inc_ptr``/``inc_flow``/``f_job``/``inc_entry``/
    ``inc_cnt``: the pool's link → flow incidence, each flow's job, each incidence's
    entry and how many of a link's incidences may still be live; ``u_coef``/``u_frac``/
    ``u_n``/``f_counted``/``l_sorted``/``inc_key``: what the active flows use of each
    link and how many flows that sum holds, which flows it holds, which links keep their
    live incidences ordered by water level, and each incidence's level when its link was
    last ordered (:func:`_incidence`).

    Bottleneck attribution: a group's bottleneck ``g_bneck[g]`` is that of its
    slowest-moving job (longest time from activation to end, ``g_slow[g]``), not of the
    job that happened to end last — a straggler's late start is not link time. When a
    group completes, ``g_start[g]`` is moved to ``end − g_slow[g]`` so that the time the
    caller credits to the bottleneck (``end − g_start``) is the time that job spent moving
    bytes: latency, launch overhead and straggler delay are credited to no link.

    ``partial`` (default) re-solves, at an event where flows only finish, just the flows
    at or above the lowest water level a finishing flow held (the others keep their
    rates, as max-min fairness guarantees); False re-solves the whole component at every
    event (the reference the tests compare with).

    ``precision`` > 0 settles finishes that fall close together as one event: taken in
    time order, a job joins the event while the event's time stays within ``precision``
    times its own active time (activation to finish) of its finish, and the event happens
    at the last of them. Every transfer so ends at most that fraction of its duration late,
    never early; what it costs the others (bandwidth released up to that late) is measured
    against the exact run in ``docs/flow.md``. 0 (default): every distinct finish time is
    its own event (exact, to :data:`TIME_RTOL`).
    """
    n_jobs = j_rem.shape[0]
    n_links = cap.shape[0]
    rearm = np.empty(max(g_left.shape[0], 1), dtype=np.int64)
    n_re = 0
    events = 0
    # Lazy state, so that an event costs what changed: a job's j_rem is exact at j_since
    # (its rate has not changed since) and it ends at j_tfin; a flow's bytes reach
    # link_bytes when its rate changes, when it finishes, and for every active flow when
    # this call returns (the driver reads both then). The next events come from an
    # indexed heap of (time, job), one entry per job: its activation or its finish,
    # moved in place when a re-solve changes its end time (a large share of the jobs
    # taken or moved at once: the heap is rebuilt once instead).
    f_since = np.full(f_w.shape[0], now)
    fseen = np.zeros(f_w.shape[0], dtype=np.bool_)  # _resolve's search; false between
    j_since = np.full(n_jobs, now)
    j_tfin = np.full(n_jobs, np.inf)
    every = np.arange(n_jobs)  # what _settle walks (it skips jobs that are not active)
    for j in range(n_jobs):
        if j_state[j] == ACTIVE and j_rate[j] > 0.0:
            j_tfin[j] = now + j_rem[j] / j_rate[j]
    hk, hv, hpos, hn = _heap_build(j_state, j_act, j_tfin, j_rate)
    batch = np.empty(max(n_jobs, 1), dtype=np.int64)
    hscratch = np.empty(max(n_jobs, 1), dtype=np.int64)  # _heap_take_due's search
    seeds = np.empty(e_link.shape[0] + n_links, dtype=np.int64)
    first = True
    while True:
        # ---------------------------------------------------------------- seed changes
        n_aff = 0
        n_out = 0
        if first:
            first = False
            for l in range(n_links):
                if dirty[l]:
                    seeds[n_aff] = l
                    n_aff += 1
                    dirty[l] = False
        # ---------------------------------------------------------------- next event
        t_next = hk[0] if hn > 0 else np.inf
        if n_aff == 0:
            if t_next > t_limit:
                t_next = t_limit
            if t_next == np.inf:
                _settle(now, every, n_jobs, j_state, j_rem, j_rate, j_since, j_fptr, f_ptr,
                        e_link, e_frac, f_rate, f_since, link_bytes)
                return STALL, now, 0
        else:
            t_next = now  # apply the driver's changes before moving
        tol = TIME_RTOL * max(abs(t_next), 1e-9)
        now = t_next
        if precision > 0.0 and n_aff == 0 and hn > 0 and hk[0] <= now + tol:
            # coalesce: pop finishes while the event's time stays within each one's share
            w_end = np.inf
            nb = 0
            while hn > 0 and hk[0] <= min(w_end, t_limit) + tol:
                j = hv[0]
                if j_state[j] != ACTIVE:
                    if nb > 0:  # an activation closes the window, settled next event
                        break
                    w_end = hk[0]
                else:
                    w_end = min(w_end, hk[0] + precision * (hk[0] - j_act[j]))
                now = max(now, hk[0])
                batch[nb] = j
                nb += 1
                hn = _heap_pop(hk, hv, hpos, hn)
            tol = TIME_RTOL * max(abs(now), 1e-9)
        else:
            nb = 0
        # ---------------------------------------------------------------- completions
        ns = n_aff
        # The lowest water level a finishing flow held: when flows only finish (nothing
        # starts, no capacity changes), every flow below it keeps its rate (max-min
        # fairness is decided level by level from the bottom, and a finished flow took
        # part only in the levels from its own up), so only flows at or above it are
        # re-solved. Any start or capacity change re-solves the whole component.
        cut = np.inf if n_aff == 0 and partial else -1.0
        hn, nb = _heap_take_due(hk, hv, hpos, hn, now + tol, batch, nb, hscratch)
        batch[:nb].sort()  # pool order: ties are settled in it
        for k in range(nb):  # bottlenecks of the jobs that end, before any leaves a link
            j = batch[k]
            if j_state[j] == ACTIVE and j_rate[j] > 0.0 and j_tfin[j] <= now + tol:
                j_bneck[j] = _bneck(j, j_fptr, f_ptr, e_link, f_rate, f_bneck, cap, u_frac)
        for k in range(nb):
            j = batch[k]
            s = j_state[j]
            fin = False
            if s == PENDING and j_act[j] <= now + tol:
                lo, hi = f_ptr[j_fptr[j]], f_ptr[j_fptr[j + 1]]
                if hi == lo or j_rem[j] <= 0.0:
                    fin = True
                else:
                    j_state[j] = ACTIVE
                    j_since[j] = now
                    cut = -1.0
                    for f in range(j_fptr[j], j_fptr[j + 1]):
                        f_since[f] = now
                    for e in range(lo, hi):
                        seeds[ns] = e_link[e]
                        ns += 1
            elif s == ACTIVE and j_rate[j] > 0.0 and j_tfin[j] <= now + tol:
                fin = True
                for f in range(j_fptr[j], j_fptr[j + 1]):
                    if cut >= 0.0 and f_w[f] > 0.0 and f_rate[f] / f_w[f] < cut:
                        cut = f_rate[f] / f_w[f]
                    _uncount(f, f_ptr, e_link, e_coef, e_frac, f_rate, u_coef, u_frac, u_n,
                             f_counted)
                    t_stop = min(now, j_tfin[j])  # a coalesced finish moved no bytes late
                    if t_stop > f_since[f]:
                        for e in range(f_ptr[f], f_ptr[f + 1]):
                            link_bytes[e_link[e]] += e_frac[e] * f_rate[f] * (
                                t_stop - f_since[f])
                    f_since[f] = now
                for e in range(f_ptr[j_fptr[j]], f_ptr[j_fptr[j + 1]]):
                    seeds[ns] = e_link[e]
                    ns += 1
            if not fin:
                continue
            j_state[j] = DONE
            j_rem[j] = 0.0
            j_end[j] = now
            j_rate[j] = 0.0
            j_tfin[j] = np.inf
            g = j_group[j]
            if g >= 0:
                # slowest mover; among equals (to clock precision) the lowest link,
                # so the answer does not depend on the order jobs are stored in
                moving = now - j_act[j]
                b = j_bneck[j]
                if moving > g_slow[g] + 4.0 * tol:
                    g_slow[g] = moving
                    g_bneck[g] = b
                elif (moving >= g_slow[g] - 4.0 * tol and b >= 0
                      and (g_bneck[g] < 0 or b < g_bneck[g])):
                    g_slow[g] = max(g_slow[g], moving)
                    g_bneck[g] = b
                g_left[g] -= 1
                if g_left[g] == 0:
                    g_end[g] = now
                    g_start[g] = now - max(g_slow[g], 0.0)
                    g_slow[g] = -1.0
                    if g_more[g] > 0:
                        rearm[n_re] = g
                        n_re += 1
                    else:
                        out_groups[n_out] = g
                        n_out += 1
        if ns > 0:
            if not np.isfinite(cut):
                cut = -1.0
            changed = _resolve(seeds[:ns], j_state, j_rate, j_fptr, f_w, f_ptr,
                               e_link, e_coef, e_frac, f_rate, f_bneck, cap, s_rem, s_demand,
                               s_nlive, s_seen, n_links, inc_ptr, inc_flow, f_job, inc_entry,
                               inc_cnt, u_coef, u_frac, u_n, f_counted, l_sorted, inc_key,
                               cut, now,
                               f_since, link_bytes, j_rem, j_since, j_tfin, fseen)
            hn = _heap_update(hk, hv, hpos, hn, changed, f_job, j_state, j_rate, j_tfin)
        for k in range(n_re):
            g = rearm[k]
            rep_end[g_flat[g]] = now
            if g_bneck[g] >= 0:
                crit[g_bneck[g]] += now - g_start[g]
            g_bneck[g] = -1
            g_flat[g] += 1
            g_more[g] -= 1
            rep_start[g_flat[g]] = now
            g_start[g] = now
            cnt = 0
            for j in range(n_jobs):
                if j_group[j] == g:
                    j_state[j] = PENDING
                    j_rem[j] = j_size[j]
                    j_act[j] = now + j_lat[j]
                    j_end[j] = np.nan
                    j_rate[j] = 0.0
                    j_bneck[j] = -1
                    j_tfin[j] = np.inf
                    hn = _heap_set(hk, hv, hpos, hn, j, j_act[j])
                    for e in range(f_ptr[j_fptr[j]], f_ptr[j_fptr[j + 1]]):
                        l = e_link[e]  # its flows are live again on their links
                        inc_cnt[l] = inc_ptr[l + 1] - inc_ptr[l]
                        l_sorted[l] = False
                    cnt += 1
            g_left[g] = cnt
        n_re = 0
        if n_out > 0:
            _settle(now, every, n_jobs, j_state, j_rem, j_rate, j_since, j_fptr, f_ptr, e_link,
                    e_frac, f_rate, f_since, link_bytes)
            return GROUPS, now, n_out
        if now >= t_limit:
            _settle(now, every, n_jobs, j_state, j_rem, j_rate, j_since, j_fptr, f_ptr, e_link,
                    e_frac, f_rate, f_since, link_bytes)
            return LIMIT, now, 0
        events += 1
        if events >= max_events:
            _settle(now, every, n_jobs, j_state, j_rem, j_rate, j_since, j_fptr, f_ptr, e_link,
                    e_frac, f_rate, f_since, link_bytes)
            return BUDGET, now, 0


@numba.njit(cache=True)
def _heap_less(hk: F8, hv: I8, a: int, key: float, val: int) -> bool:
    """Whether heap slot ``a`` comes before ``(key, val)``: time, then job."""
    return bool(hk[a] < key or (hk[a] == key and hv[a] < val))


@numba.njit(cache=True)
def _heap_place(hk: F8, hv: I8, hpos: I8, hn: int, i: int, key: float, val: int) -> None:
    """Put ``(key, val)`` at slot ``i`` of the heap and sift it up or down into place."""
    while i > 0:
        p = (i - 1) >> 1
        if _heap_less(hk, hv, p, key, val):  # jobs are distinct: never equal
            break
        hk[i] = hk[p]
        hv[i] = hv[p]
        hpos[hv[i]] = i
        i = p
    _heap_down(hk, hv, hpos, hn, i, key, val)


@numba.njit(cache=True)
def _heap_down(hk: F8, hv: I8, hpos: I8, hn: int, i: int, key: float, val: int) -> None:
    """Put ``(key, val)`` at slot ``i`` or below it, sifting down (its subtrees are
    heaps)."""
    while True:
        c = 2 * i + 1
        if c >= hn:
            break
        if c + 1 < hn and _heap_less(hk, hv, c + 1, hk[c], hv[c]):
            c += 1
        if not _heap_less(hk, hv, c, key, val):
            break
        hk[i] = hk[c]
        hv[i] = hv[c]
        hpos[hv[i]] = i
        i = c
    hk[i] = key
    hv[i] = val
    hpos[val] = i


@numba.njit(cache=True)
def _heap_set(hk: F8, hv: I8, hpos: I8, hn: int, j: int, key: float) -> int:
    """Make ``key`` job ``j``'s next event in the indexed binary min-heap ``hk``/``hv``
    (``hpos[j]``: its slot, -1 when absent; one entry per job, so none goes stale):
    inserted, or moved to its new place. Returns the heap's size."""
    i = hpos[j]
    if i < 0:
        i = hn
        hn += 1
    _heap_place(hk, hv, hpos, hn, i, key, j)
    return hn


@numba.njit(cache=True)
def _heap_del(hk: F8, hv: I8, hpos: I8, hn: int, j: int) -> int:
    """Take job ``j`` out of the heap (if there); returns its size."""
    i = hpos[j]
    if i < 0:
        return hn
    hpos[j] = -1
    hn -= 1
    if i < hn:
        _heap_place(hk, hv, hpos, hn, i, hk[hn], hv[hn])
    return hn


@numba.njit(cache=True)
def _heap_pop(hk: F8, hv: I8, hpos: I8, hn: int) -> int:
    """Drop the top of the heap; returns its new size."""
    return _heap_del(hk, hv, hpos, hn, hv[0])


@numba.njit(cache=True)
def _heap_sift_down(hk: F8, hv: I8, hpos: I8, hn: int, i: int) -> None:
    """Sift the entry at slot ``i`` down into place (its subtrees are heaps)."""
    _heap_down(hk, hv, hpos, hn, i, hk[i], hv[i])


@numba.njit(cache=True)
def _heapify(hk: F8, hv: I8, hpos: I8, hn: int) -> None:
    """Make slots ``0:hn`` a heap, bottom up (O(n), where ``n`` inserts cost
    O(n log n)); ``hpos`` of every entry is set."""
    for i in range(hn):
        hpos[hv[i]] = i
    for i in range(hn // 2 - 1, -1, -1):
        _heap_sift_down(hk, hv, hpos, hn, i)


@numba.njit(cache=True)
def _bulk(k: int, hn: int) -> bool:
    """Whether ``k`` changes to a heap of ``hn`` entries cost less as one rebuild
    (O(hn)) than one by one (O(k log hn) each, at scattered slots)."""
    return k > 0 and k * (int(np.log2(hn + 1)) + 1) >= 2 * hn


@numba.njit(cache=True)
def _heap_compact(hk: F8, hv: I8, hpos: I8, hn: int) -> int:
    """Drop the slots whose job is marked absent (``hpos`` -1) and rebuild the heap;
    returns its size."""
    w = 0
    for i in range(hn):
        if hpos[hv[i]] >= 0:
            hk[w] = hk[i]
            hv[w] = hv[i]
            w += 1
    _heapify(hk, hv, hpos, w)
    return w


@numba.njit(cache=True)
def _heap_take_due(hk: F8, hv: I8, hpos: I8, hn: int, thr: float, out: I8, nb: int,
                   scratch: I8) -> tuple[int, int]:
    """Take every entry with time ``<= thr`` out of the heap, appending its job to
    ``out[nb:]``; returns the heap's and ``out``'s new sizes.

    The entries due form a subtree at the root (a parent is never later than its
    children), found in O(due). Few are popped one by one; many (an activation or a
    finish of a large share of the pool at once) are dropped together and the rest
    rebuilt in O(heap) instead of O(due × log heap). The same jobs are taken either way
    (the caller orders them)."""
    if hn == 0 or hk[0] > thr:
        return hn, nb
    k = 0
    scratch[k] = 0
    k += 1
    q = 0
    while q < k:
        i = scratch[q]
        q += 1
        for c in (2 * i + 1, 2 * i + 2):
            if c < hn and hk[c] <= thr:
                scratch[k] = c
                k += 1
    if not _bulk(k, hn):
        while hn > 0 and hk[0] <= thr:
            out[nb] = hv[0]
            nb += 1
            hn = _heap_pop(hk, hv, hpos, hn)
        return hn, nb
    for q in range(k):
        j = hv[scratch[q]]
        out[nb] = j
        nb += 1
        hpos[j] = -1
    return _heap_compact(hk, hv, hpos, hn), nb


@numba.njit(cache=True)
def _heap_update(hk: F8, hv: I8, hpos: I8, hn: int, changed: I8, f_job: I8, j_state: I8,
                 j_rate: F8, j_tfin: F8) -> int:
    """After a re-solve: the jobs of the ``changed`` flows get their new end times in
    the heap (jobs no longer moving leave it); returns its size. Many changes are
    written in place and the heap rebuilt once (O(heap)), few are sifted one by one;
    both leave the same entries."""
    nch = changed.shape[0]
    if not _bulk(nch, hn):
        for i in range(nch):
            j = f_job[changed[i]]
            if j_state[j] == ACTIVE and j_rate[j] > 0.0:
                hn = _heap_set(hk, hv, hpos, hn, j, j_tfin[j])
            else:
                hn = _heap_del(hk, hv, hpos, hn, j)
        return hn
    gone = False
    for i in range(nch):
        j = f_job[changed[i]]
        s = hpos[j]
        if j_state[j] == ACTIVE and j_rate[j] > 0.0:
            if s < 0:
                s = hn
                hn += 1
                hv[s] = j
                hpos[j] = s
            hk[s] = j_tfin[j]
        elif s >= 0:
            hpos[j] = -1  # its slot is dropped below
            gone = True
    if gone:
        return _heap_compact(hk, hv, hpos, hn)
    _heapify(hk, hv, hpos, hn)
    return hn


@numba.njit(cache=True)
def _heap_build(j_state: I8, j_act: F8, j_tfin: F8, j_rate: F8
                ) -> tuple[F8, I8, I8, int]:
    """A heap of every job's next event: its activation or its finish."""
    n = j_state.shape[0]
    hk = np.empty(max(n, 1))
    hv = np.empty(max(n, 1), dtype=np.int64)
    hpos = np.full(max(n, 1), -1, dtype=np.int64)
    hn = 0
    for j in range(n):
        if j_state[j] == PENDING:
            hk[hn] = j_act[j]
        elif j_state[j] == ACTIVE and j_rate[j] > 0.0 and np.isfinite(j_tfin[j]):
            hk[hn] = j_tfin[j]
        else:
            continue
        hv[hn] = j
        hn += 1
    _heapify(hk, hv, hpos, hn)
    return hk, hv, hpos, hn


@numba.njit(cache=True)
def _settle(now: float, live: I8, n_live: int, j_state: I8, j_rem: F8, j_rate: F8,
            j_since: F8, j_fptr: I8, f_ptr: I8, e_link: I8, e_frac: F8, f_rate: F8,
            f_since: F8, link_bytes: F8) -> None:
    """Bring every active job's remaining bytes and every active flow's link bytes up to
    ``now`` (what the pool and the driver hold between calls)."""
    for k in range(n_live):
        j = live[k]
        if j_state[j] != ACTIVE:
            continue
        if now > j_since[j]:
            j_rem[j] -= j_rate[j] * (now - j_since[j])
            j_since[j] = now
        for f in range(j_fptr[j], j_fptr[j + 1]):
            if now > f_since[f] and f_rate[f] > 0.0:
                for e in range(f_ptr[f], f_ptr[f + 1]):
                    link_bytes[e_link[e]] += e_frac[e] * f_rate[f] * (now - f_since[f])
            f_since[f] = now


@numba.njit(cache=True)
def _incidence(j_fptr: I8, f_ptr: I8, e_link: I8, e_coef: F8, e_frac: F8, j_state: I8,
               f_rate: F8, n_links: int
               ) -> tuple[I8, I8, I8, I8, I8, F8, F8, I8, NDArray[np.bool_],
                          NDArray[np.bool_], F8]:
    """Link → flow incidence (CSR) over every flow of the pool, each flow's job, the
    entry (flow, link) each incidence stands for, and per link how many incidences may
    be live (all, at first: :func:`_resolve` moves those of finished jobs past them).

    Then what :func:`_resolve` keeps up to date so that a partial re-solve need not
    visit the flows that keep their rates: per link, the capacity (``Σ coef·rate``) and
    the payload (``Σ frac·rate``) the active flows use, how many and which flows those
    sums hold (:func:`_count`), and
    whether the link's live incidences are ordered by water level (none, at first),
    with each incidence's level as of that ordering."""
    n_jobs = j_fptr.shape[0] - 1
    n_flows = f_ptr.shape[0] - 1
    f_job = np.empty(max(n_flows, 0), dtype=np.int64)
    for j in range(n_jobs):
        for f in range(j_fptr[j], j_fptr[j + 1]):
            f_job[f] = j
    lptr = np.zeros(n_links + 1, dtype=np.int64)
    for e in range(e_link.shape[0]):
        lptr[e_link[e] + 1] += 1
    for l in range(n_links):
        lptr[l + 1] += lptr[l]
    fill = lptr[:-1].copy()
    lflow = np.empty(lptr[n_links], dtype=np.int64)
    lentry = np.empty(lptr[n_links], dtype=np.int64)
    u_coef = np.zeros(n_links)
    u_frac = np.zeros(n_links)
    u_n = np.zeros(n_links, dtype=np.int64)
    counted = np.zeros(max(n_flows, 0), dtype=np.bool_)
    for f in range(n_flows):
        for e in range(f_ptr[f], f_ptr[f + 1]):
            l = e_link[e]
            lflow[fill[l]] = f
            lentry[fill[l]] = e
            fill[l] += 1
        if j_state[f_job[f]] == ACTIVE:
            _count(f, f_ptr, e_link, e_coef, e_frac, f_rate, u_coef, u_frac, u_n, counted)
    return (lptr, lflow, f_job, lentry, lptr[1:] - lptr[:-1], u_coef, u_frac, u_n,
            counted, np.zeros(n_links, dtype=np.bool_), np.full(lptr[n_links], -1.0))


@numba.njit(cache=True)
def _count(f: int, f_ptr: I8, e_link: I8, e_coef: F8, e_frac: F8, f_rate: F8, u_coef: F8,
           u_frac: F8, u_n: I8, f_counted: NDArray[np.bool_]) -> None:
    """Add active flow ``f``'s use of its links (at a finite rate) to their sums."""
    if not np.isfinite(f_rate[f]):
        return
    f_counted[f] = True
    for e in range(f_ptr[f], f_ptr[f + 1]):
        l = e_link[e]
        u_coef[l] += e_coef[e] * f_rate[f]
        u_frac[l] += e_frac[e] * f_rate[f]
        u_n[l] += 1


@numba.njit(cache=True)
def _uncount(f: int, f_ptr: I8, e_link: I8, e_coef: F8, e_frac: F8, f_rate: F8,
             u_coef: F8, u_frac: F8, u_n: I8, f_counted: NDArray[np.bool_]) -> None:
    """Take flow ``f``'s use out of its links' sums (if they hold it). A link left with
    no flow gets sums of exactly 0: rounding left over would tip the exact tie-breaks of
    bottleneck attribution."""
    if not f_counted[f]:
        return
    f_counted[f] = False
    for e in range(f_ptr[f], f_ptr[f + 1]):
        l = e_link[e]
        u_n[l] -= 1
        if u_n[l] == 0:
            u_coef[l] = 0.0
            u_frac[l] = 0.0
        else:
            u_coef[l] -= e_coef[e] * f_rate[f]
            u_frac[l] -= e_frac[e] * f_rate[f]


#: A flow whose level is within this (relative) of the cut is re-solved, not kept.
CUT_RTOL = 1e-9


@numba.njit(cache=True)
def _level(f: int, j_state: I8, f_job: I8, f_rate: F8, f_w: F8) -> float:
    """The water level a link's incidences are ordered by: an active flow's rate per
    unit of weight; -1 for a flow that is not active (pending: ordered first)."""
    if j_state[f_job[f]] != ACTIVE:
        return -1.0
    return f_rate[f] / f_w[f] if f_w[f] > 0.0 else np.inf


@numba.njit(cache=True)
def _order(lo: int, hi: int, inc_flow: I8, inc_entry: I8, inc_key: F8, j_state: I8,
           f_job: I8, f_rate: F8, f_w: F8) -> None:
    """Sort incidences ``lo:hi`` of a link by water level, ascending, and record the
    levels in ``inc_key`` (in place; by insertion for the short top parts a partial
    re-solve leaves)."""
    for k in range(lo, hi):
        inc_key[k] = _level(inc_flow[k], j_state, f_job, f_rate, f_w)
    n = hi - lo
    if n < 2:
        return
    if n <= 48:
        for k in range(lo + 1, hi):
            v = inc_key[k]
            f = inc_flow[k]
            e = inc_entry[k]
            i = k - 1
            while i >= lo and inc_key[i] > v:
                inc_key[i + 1] = inc_key[i]
                inc_flow[i + 1] = inc_flow[i]
                inc_entry[i + 1] = inc_entry[i]
                i -= 1
            inc_key[i + 1] = v
            inc_flow[i + 1] = f
            inc_entry[i + 1] = e
        return
    perm = np.argsort(inc_key[lo:hi], kind="mergesort")
    ky = inc_key[lo:hi].copy()
    fl = inc_flow[lo:hi].copy()
    en = inc_entry[lo:hi].copy()
    for i in range(n):
        inc_key[lo + i] = ky[perm[i]]
        inc_flow[lo + i] = fl[perm[i]]
        inc_entry[lo + i] = en[perm[i]]


@numba.njit(cache=True)
def _swap(a: int, b: int, inc_flow: I8, inc_entry: I8, inc_key: F8) -> None:
    """Exchange incidences ``a`` and ``b`` of a link (flow, entry and level)."""
    inc_flow[a], inc_flow[b] = inc_flow[b], inc_flow[a]
    inc_entry[a], inc_entry[b] = inc_entry[b], inc_entry[a]
    inc_key[a], inc_key[b] = inc_key[b], inc_key[a]


@numba.njit(cache=True)
def _take(f: int, fseen: NDArray[np.bool_], comp: I8, nc: int, f_ptr: I8, e_link: I8,
          s_seen: NDArray[np.bool_], queue: I8, nq: int) -> tuple[int, int]:
    """Add flow ``f`` to the component and queue its links not yet met; returns the
    component's and the queue's new lengths."""
    fseen[f] = True
    comp[nc] = f
    for e in range(f_ptr[f], f_ptr[f + 1]):
        m = e_link[e]
        if not s_seen[m]:
            s_seen[m] = True
            queue[nq] = m
            nq += 1
    return nc + 1, nq


@numba.njit(cache=True)
def _resolve(seeds: I8, j_state: I8, j_rate: F8, j_fptr: I8, f_w: F8, f_ptr: I8,
             e_link: I8, e_coef: F8, e_frac: F8, f_rate: F8, f_bneck: I8, cap: F8, s_rem: F8,
             s_demand: F8, s_nlive: I8, s_seen: NDArray[np.bool_], n_links: int,
             inc_ptr: I8, inc_flow: I8, f_job: I8, inc_entry: I8, inc_cnt: I8,
             u_coef: F8, u_frac: F8, u_n: I8, f_counted: NDArray[np.bool_],
             l_sorted: NDArray[np.bool_], inc_key: F8, cut: float, now: float,
             f_since: F8,
             link_bytes: F8, j_rem: F8, j_since: F8, j_tfin: F8,
             fseen: NDArray[np.bool_]) -> I8:
    """Re-solve the connected component of active flows reachable from ``seeds`` links;
    returns the flows re-solved (their jobs' end times changed), in pool order.

    With ``cut >= 0`` (an event where flows only finished; ``cut`` is the lowest water
    level one of them held), active flows below ``cut`` keep their rates: the component
    is searched through the other flows only, and the capacity the kept flows use is
    taken off each of its links before the fill. ``cut < 0`` re-solves every active flow
    of the component.

    What the kept flows use of a link is its running sum ``u_coef`` less the
    re-solved flows' share, so they are not visited: on a link whose live incidences are
    ordered by level (``l_sorted``) the search reads them from the top down and stops at
    the first flow below the cut. A link is ordered the first time a partial re-solve
    reaches it and keeps some of its flows (after a start, a re-arm, a rebuild or a
    re-solve of all its flows it is not) and kept ordered after: only re-solved flows
    change rate, and they all sit above the cut on each of their links, so only that top
    part is sorted again (the whole link if it no longer lies above the rest). A full
    re-solve resets the sums of its links exactly.

    """
    full = cut < 0.0
    keep_below = -1.0 if full else cut * (1.0 - CUT_RTOL)
    n_flows = f_w.shape[0]
    queue = np.empty(seeds.shape[0] + n_links + 1, dtype=np.int64)
    comp_links = np.empty(n_links, dtype=np.int64)
    top = np.empty(n_links, dtype=np.int64)  # per component link: where its search stopped
    comp = np.empty(n_flows, dtype=np.int64)
    nq = 0
    nc = 0
    ncl = 0
    for i in range(seeds.shape[0]):
        l = seeds[i]
        if not s_seen[l]:
            s_seen[l] = True
            queue[nq] = l
            nq += 1
    qi = 0
    while qi < nq:
        l = queue[qi]
        qi += 1
        lo = inc_ptr[l]
        end = lo + inc_cnt[l]
        if full or not l_sorted[l]:
            kept = False
            k = lo
            while k < end:
                f = inc_flow[k]
                st = j_state[f_job[f]]
                if st == DONE:  # finished for good: moved past the link's live part
                    end -= 1
                    _swap(k, end, inc_flow, inc_entry, inc_key)
                    continue
                k += 1
                if st != ACTIVE or fseen[f]:
                    continue
                if not full and _level(f, j_state, f_job, f_rate, f_w) < keep_below:
                    kept = True
                    continue
                nc, nq = _take(f, fseen, comp, nc, f_ptr, e_link, s_seen, queue, nq)
            top[ncl] = -1 if kept else lo  # -1: to be ordered whole
        else:
            k = end - 1
            while k >= lo:
                f = inc_flow[k]
                st = j_state[f_job[f]]
                if st == DONE:  # swap with the last live one (above: already read)
                    end -= 1
                    _swap(k, end, inc_flow, inc_entry, inc_key)
                    k -= 1
                    continue
                if inc_key[k] < keep_below:
                    break  # this one and all below keep their rates (levels as ordered)
                k -= 1
                if st != ACTIVE or fseen[f]:
                    continue
                nc, nq = _take(f, fseen, comp, nc, f_ptr, e_link, s_seen, queue, nq)
            top[ncl] = k + 1
        comp_links[ncl] = l
        ncl += 1
        inc_cnt[l] = end - lo
    for k in range(ncl):
        s_seen[comp_links[k]] = False
    for i in range(nc):
        fseen[comp[i]] = False
    if nc == 0:
        return comp[:0]
    flows = np.sort(comp[:nc])  # pool order: arrays are then read in order
    # capacity left to the re-solved flows: the link's sum less their share is what the
    # kept flows use (a full re-solve keeps none: the sums start afresh); and the bytes
    # each flow moved at the rate it is about to leave
    for i in range(nc):
        f = flows[i]
        r = f_rate[f]
        if full:
            f_counted[f] = False  # its links' sums are reset below
        else:
            _uncount(f, f_ptr, e_link, e_coef, e_frac, f_rate, u_coef, u_frac, u_n,
                     f_counted)
        if now > f_since[f] and r > 0.0:
            for e in range(f_ptr[f], f_ptr[f + 1]):
                link_bytes[e_link[e]] += e_frac[e] * r * (now - f_since[f])
        f_since[f] = now
    for k in range(ncl):
        l = comp_links[k]
        if full:
            u_coef[l] = 0.0
            u_frac[l] = 0.0
            u_n[l] = 0
        s_rem[l] = max(cap[l] - u_coef[l], 0.0)
    fill_component(flows, f_ptr, e_link, e_coef, f_w, s_rem, s_demand, s_nlive, f_rate,
                   f_bneck)
    for i in range(nc):  # the new rates join the links' sums
        _count(flows[i], f_ptr, e_link, e_coef, e_frac, f_rate, u_coef, u_frac, u_n,
               f_counted)
    # keep each link's live incidences ordered by level: the re-solved flows are its
    # top part. When they are all of its active flows (after a start, every flow of the
    # link is re-solved at once, again and again; in an all-to-all of equal transfers a
    # partial re-solve takes them all too), ordering waits for a partial re-solve that
    # keeps some: a sort now is wasted if all are re-solved again before that, and
    # otherwise costs the same then, plus one read of the link whole
    for k in range(ncl):
        l = comp_links[k]
        lo = inc_ptr[l]
        hi = lo + inc_cnt[l]
        if full or top[k] == lo:
            l_sorted[l] = False
        elif top[k] < 0:
            _order(lo, hi, inc_flow, inc_entry, inc_key, j_state, f_job, f_rate, f_w)
            l_sorted[l] = True
        else:
            _order(top[k], hi, inc_flow, inc_entry, inc_key, j_state, f_job, f_rate, f_w)
            if top[k] < hi and inc_key[top[k]] < inc_key[top[k] - 1]:
                _order(lo, hi, inc_flow, inc_entry, inc_key, j_state, f_job, f_rate, f_w)
    # job rates: the sum of all their flows (some may have kept their rates), after the
    # bytes sent at the old rate (a job's bottleneck is named when it ends: _bneck)
    for i in range(nc):
        j = f_job[flows[i]]
        if now > j_since[j]:
            j_rem[j] -= j_rate[j] * (now - j_since[j])
            j_since[j] = now
        r = 0.0
        for g in range(j_fptr[j], j_fptr[j + 1]):
            r += f_rate[g]
        j_rate[j] = r
        j_tfin[j] = now + j_rem[j] / r if r > 0.0 else np.inf
    return flows


#: Two links whose payload fills differ by less than this (relative) tie for a job's
#: bottleneck (the lower link is named): rounding in the running sums must not decide.
BNECK_RTOL = 1e-9


@numba.njit(cache=True)
def _bneck(j: int, j_fptr: I8, f_ptr: I8, e_link: I8, f_rate: F8, f_bneck: I8, cap: F8,
           u_frac: F8) -> int:
    """The bottleneck of active job ``j`` as it ends: on its slowest flow (all flows as
    slow within rounding), the link the active flows fill the most with payload
    (``u_frac``; a down link first), the lower link among equals (both to 1e-9). Named
    at the end, from the sums as they stand, so that it does not depend on when the
    job's rate was last re-solved (a partial re-solve keeps a flow's rate while the
    links around it empty) nor on rounding between flows that tie.

    This differs from the solver's freezing link when a protocol's per-class efficiency
    makes a lightly loaded link bind on paper (e.g. PCIe at 46 % payload vs the NIC at
    58 % on the same path): the table then names the link the wire actually keeps busy.
    """
    lo, hi = j_fptr[j], j_fptr[j + 1]
    if hi == lo:
        return -1
    slow = f_rate[lo]
    for g in range(lo + 1, hi):
        slow = min(slow, f_rate[g])
    # two passes over every flow as slow as the slowest (within rounding): the top
    # fill, then the lowest link within 1e-9 of it (a down link's inf ties only inf),
    # so the answer does not depend on the order of a path's links
    ceil = slow + BNECK_RTOL * abs(slow)
    top_u = -1.0
    pick = -1
    for g in range(lo, hi):
        if f_rate[g] > ceil:
            continue
        if pick < 0:
            pick = f_bneck[g]  # a flow with no link: the solver's answer
        for e in range(f_ptr[g], f_ptr[g + 1]):
            top_u = max(top_u, _fill(e_link[e], u_frac, cap))
    if top_u < 0.0:
        return int(pick)
    floor = top_u if np.isinf(top_u) else top_u - BNECK_RTOL * top_u
    pick = -1
    for g in range(lo, hi):
        if f_rate[g] > ceil:
            continue
        for e in range(f_ptr[g], f_ptr[g + 1]):
            l = e_link[e]
            if _fill(l, u_frac, cap) >= floor and (pick < 0 or l < pick):
                pick = l
    return int(pick)


@numba.njit(cache=True)
def _fill(l: int, u_frac: F8, cap: F8) -> float:
    """Link ``l``'s payload fill (payload bytes/s over capacity; inf when it is down)."""
    return max(u_frac[l], 0.0) / cap[l] if cap[l] > 0.0 else np.inf


@dataclass
class Pool:
    """Live jobs, flows and entries, plus per-link scratch; grown and compacted by Python.

    ``add`` appends jobs (each with its flows and entries); ``run`` calls :func:`advance`;
    ``compact`` drops finished jobs and returns them.
    """

    j_rem: F8
    j_size: F8
    j_act: F8
    j_lat: F8
    j_start: F8
    j_state: I8
    j_group: I8
    j_end: F8
    j_rate: F8
    j_bneck: I8
    j_tag: I8
    j_fptr: I8
    f_w: F8
    f_ptr: I8
    e_link: I8
    e_coef: F8
    e_frac: F8
    f_rate: F8
    f_bneck: I8
    scratch: tuple[F8, F8, I8, NDArray[np.bool_]]
    link_bytes: F8
    dirty: NDArray[np.bool_]
    g_slow: F8 = field(default_factory=lambda: np.zeros(0))
    """Per group: the longest activation-to-end time of its finished jobs (-1: none)."""
    incidence: tuple[I8, I8, I8, I8, I8, F8, F8, I8, NDArray[np.bool_],
                     NDArray[np.bool_], F8] | None = None
    """Link → flow incidence and each flow's job, built on the first run after the
    pool's jobs change (``add``, ``compact``) and reused by the runs in between."""

    @staticmethod
    def empty(n_links: int) -> Pool:
        z, zi = np.zeros(0), np.zeros(0, dtype=np.int64)
        return Pool(z, z, z, z, z, zi, zi, z, z, zi, zi, np.zeros(1, dtype=np.int64), z,
                    np.zeros(1, dtype=np.int64), zi, z, z, z, zi,
                    (np.zeros(n_links), np.zeros(n_links), np.zeros(n_links, dtype=np.int64),
                     np.zeros(n_links, dtype=bool)),
                    np.zeros(n_links), np.zeros(n_links, dtype=bool))

    @property
    def n_jobs(self) -> int:
        return int(self.j_rem.shape[0])

    def add(self, size: F8, act: F8, group: I8, job_fptr: I8, flow_ptr: I8, links: I8,
            coef: F8, weight: F8, *, now: float, tag: I8 | None = None,
            frac: F8 | None = None) -> None:
        """Append jobs: ``job_fptr``/``flow_ptr`` are local CSR pointers (starting at 0).

        ``coef`` is the capacity an entry uses per byte/s of its flow; ``frac`` (default
        ``coef``) the payload share counted in ``link_bytes``.
        """
        n = size.shape[0]
        self.incidence = None
        if self.n_jobs == 0:  # fast path: the pool is empty between most repetitions
            m = weight.shape[0]
            self.j_rem, self.j_size, self.j_act = size.copy(), size, act
            self.j_lat = act - now
            self.j_start = np.full(n, now)
            self.j_state = np.zeros(n, dtype=np.int64)
            self.j_group = group.astype(np.int64, copy=False)
            self.j_end, self.j_rate = np.full(n, np.nan), np.zeros(n)
            self.j_bneck = np.full(n, -1, dtype=np.int64)
            self.j_tag = (np.full(n, -1, dtype=np.int64) if tag is None else
                          tag.astype(np.int64, copy=False))
            self.j_fptr = job_fptr.astype(np.int64, copy=False)
            self.f_w, self.f_ptr = weight, flow_ptr.astype(np.int64, copy=False)
            self.e_link = links.astype(np.int64, copy=False)
            self.e_coef = coef
            self.e_frac = coef if frac is None else frac
            self.f_rate, self.f_bneck = np.zeros(m), np.full(m, -1, dtype=np.int64)
            return
        self.j_rem = np.concatenate([self.j_rem, size])
        self.j_size = np.concatenate([self.j_size, size])
        self.j_act = np.concatenate([self.j_act, act])
        self.j_lat = np.concatenate([self.j_lat, act - now])
        self.j_start = np.concatenate([self.j_start, np.full(n, now)])
        self.j_state = np.concatenate([self.j_state, np.zeros(n, dtype=np.int64)])
        self.j_group = np.concatenate([self.j_group, group.astype(np.int64)])
        self.j_end = np.concatenate([self.j_end, np.full(n, np.nan)])
        self.j_rate = np.concatenate([self.j_rate, np.zeros(n)])
        self.j_bneck = np.concatenate([self.j_bneck, np.full(n, -1, dtype=np.int64)])
        self.j_tag = np.concatenate([self.j_tag, np.full(n, -1, dtype=np.int64)
                                     if tag is None else tag.astype(np.int64)])
        nf = int(self.f_w.shape[0])
        ne = int(self.e_link.shape[0])
        self.j_fptr = np.concatenate([self.j_fptr, job_fptr[1:].astype(np.int64) + nf])
        self.f_w = np.concatenate([self.f_w, weight])
        self.f_ptr = np.concatenate([self.f_ptr, flow_ptr[1:].astype(np.int64) + ne])
        self.e_link = np.concatenate([self.e_link, links.astype(np.int64)])
        self.e_coef = np.concatenate([self.e_coef, coef])
        self.e_frac = np.concatenate([self.e_frac, coef if frac is None else frac])
        m = weight.shape[0]
        self.f_rate = np.concatenate([self.f_rate, np.zeros(m)])
        self.f_bneck = np.concatenate([self.f_bneck, np.full(m, -1, dtype=np.int64)])

    def run(self, now: float, t_limit: float, cap: F8, n_groups: int,
            g_left: I8 | None = None, g_end: F8 | None = None, g_bneck: I8 | None = None,
            repeats: tuple[I8, I8, F8, F8, F8, F8] | None = None,
            max_events: int = 1 << 62, partial: bool = True,
            precision: float = 0.0) -> tuple[int, float, I8]:
        """Advance the pool (see :func:`advance`); returns (code, now, completed groups).
        ``max_events`` returns :data:`BUDGET` after that many events (call again);
        ``partial=False`` re-solves whole components at every event (a reference);
        ``precision`` coalesces close finishes (see :func:`advance`).

        ``repeats`` = ``(g_more, g_flat, g_start, rep_start, rep_end, crit)`` lets the
        kernel run further repetitions of a group itself (default: none).
        """
        if repeats is None:
            repeats = (np.zeros(n_groups, dtype=np.int64), np.zeros(n_groups, dtype=np.int64),
                       np.zeros(n_groups), np.zeros(1), np.zeros(1), np.zeros(cap.shape[0]))
        if g_left is None:
            g_left = np.bincount(self.j_group[self.j_group >= 0], minlength=n_groups)
            g_left = g_left.astype(np.int64)
        g_end = np.full(n_groups, np.nan) if g_end is None else g_end
        g_bneck = np.full(n_groups, -1, dtype=np.int64) if g_bneck is None else g_bneck
        out = np.empty(max(n_groups, 1), dtype=np.int64)
        if self.g_slow.shape[0] < n_groups:
            self.g_slow = np.concatenate([self.g_slow,
                                          np.full(n_groups - self.g_slow.shape[0], -1.0)])
        if self.incidence is None:
            self.incidence = _incidence(self.j_fptr, self.f_ptr, self.e_link, self.e_coef,
                                        self.e_frac, self.j_state, self.f_rate, cap.shape[0])
        inc = self.incidence
        code, t, n = advance(now, t_limit, self.j_rem, self.j_act, self.j_state, self.j_group,
                             self.j_end, self.j_rate, self.j_bneck, self.j_fptr, self.f_w,
                             self.f_ptr, self.e_link, self.e_coef, self.e_frac, self.f_rate,
                             self.f_bneck,
                             g_left, g_end, g_bneck, cap, self.dirty, self.link_bytes,
                             *self.scratch, out, self.j_size, self.j_lat, repeats[0],
                             repeats[1], repeats[2], repeats[3], repeats[4], repeats[5],
                             self.g_slow, inc[0], inc[1], inc[2], inc[3], inc[4], inc[5],
                             inc[6], inc[7], inc[8], inc[9], inc[10], max_events, partial,
                             precision)
        return int(code), float(t), out[:n].copy()

    def compact(self, g_more: I8 | None = None) -> dict[str, F8 | I8]:
        """Drop finished jobs (and their flows/entries); return their records.

        Jobs of groups with ``g_more > 0`` repetitions to go stay (they will be re-armed).
        """
        done = self.j_state == DONE
        if g_more is not None and done.any():
            grp = self.j_group
            done &= ~((grp >= 0) & (g_more[np.maximum(grp, 0)] > 0))
        if not done.any():
            return {}
        self.incidence = None
        rec: dict[str, F8 | I8] = {"start": self.j_act[done] - self.j_lat[done],
                                   "end": self.j_end[done], "size": self.j_size[done],
                                   "tag": self.j_tag[done], "group": self.j_group[done]}
        if done.all():
            fresh = Pool.empty(0)
            for name in ("j_rem", "j_size", "j_act", "j_lat", "j_start", "j_state", "j_group",
                         "j_end", "j_rate", "j_bneck", "j_tag", "j_fptr", "f_w", "f_ptr", "e_link",
                         "e_coef", "e_frac", "f_rate", "f_bneck"):
                setattr(self, name, getattr(fresh, name))
            return rec
        keep = ~done
        nf_per = np.diff(self.j_fptr)
        fkeep = np.repeat(keep, nf_per)
        ne_per = np.diff(self.f_ptr)
        ekeep = np.repeat(fkeep, ne_per)
        for name in ("j_rem", "j_size", "j_act", "j_lat", "j_start", "j_state", "j_group",
                     "j_end", "j_rate", "j_bneck", "j_tag"):
            setattr(self, name, getattr(self, name)[keep])
        self.j_fptr = np.concatenate([[0], np.cumsum(nf_per[keep])]).astype(np.int64)
        for name in ("f_w", "f_rate", "f_bneck"):
            setattr(self, name, getattr(self, name)[fkeep])
        self.f_ptr = np.concatenate([[0], np.cumsum(ne_per[fkeep])]).astype(np.int64)
        self.e_link = self.e_link[ekeep]
        self.e_coef = self.e_coef[ekeep]
        self.e_frac = self.e_frac[ekeep]
        return rec
