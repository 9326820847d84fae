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
            max_events: int = 1 << 62, partial: bool = True) -> tuple[int, float, int]:
    """Run events from ``now`` until a group completes, ``t_limit`` or a stall.

    A group with ``g_more[g] > 0`` more repetitions is re-armed in place when it
    completes (its jobs start again after their latency ``j_lat``), recording the
    repetition's end in ``rep_end[g_flat[g]]`` and its time in ``crit`` of its bottleneck;
    only its last repetition is returned. Returns ``(code, now, n)``: ``out_groups[:n]``
    are the groups that completed. ``inc_ptr``/``inc_flow``/``f_job``/``inc_entry``/
    ``inc_cnt``: the pool's link → flow incidence, each flow's job, each incidence's
    entry and how many of a link's incidences may still be live (:func:`_incidence`).

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
    """
    n_jobs = j_rem.shape[0]
    n_links = cap.shape[0]
    rearm = np.empty(max(g_left.shape[0], 1), dtype=np.int64)
    n_re = 0
    events = 0
    # Lazy state, so that an event costs what changed: a job's j_rem is exact at j_since
    # (its rate has not changed since) and it ends at j_tfin; a flow's bytes reach
    # link_bytes when its rate changes, when it finishes, and for every active flow when
    # this call returns (the driver reads both then). The next events come from a heap
    # of (time, job): an activation or a finish; an entry whose job has since changed
    # (another j_act / j_tfin, or done) is stale and skipped when it reaches the top.
    f_since = np.full(f_w.shape[0], now)
    fseen = np.zeros(f_w.shape[0], dtype=np.bool_)  # _resolve's search; false between
    j_since = np.full(n_jobs, now)
    j_tfin = np.full(n_jobs, np.inf)
    every = np.arange(n_jobs)  # what _settle walks (it skips jobs that are not active)
    for j in range(n_jobs):
        if j_state[j] == ACTIVE and j_rate[j] > 0.0:
            j_tfin[j] = now + j_rem[j] / j_rate[j]
    hk, hv, hn = _heap_build(j_state, j_act, j_tfin, j_rate)
    batch = np.empty(max(n_jobs, 1), dtype=np.int64)
    in_batch = np.zeros(n_jobs, dtype=np.bool_)
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
        while hn > 0 and not _current(hv[0], hk[0], j_state, j_act, j_tfin, j_rate):
            hn = _heap_pop(hk, hv, hn)
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
        # ---------------------------------------------------------------- completions
        ns = n_aff
        # The lowest water level a finishing flow held: when flows only finish (nothing
        # starts, no capacity changes), every flow below it keeps its rate (max-min
        # fairness is decided level by level from the bottom, and a finished flow took
        # part only in the levels from its own up), so only flows at or above it are
        # re-solved. Any start or capacity change re-solves the whole component.
        cut = np.inf if n_aff == 0 and partial else -1.0
        nb = 0
        while hn > 0 and hk[0] <= now + tol:
            j = hv[0]
            if _current(j, hk[0], j_state, j_act, j_tfin, j_rate) and not in_batch[j]:
                in_batch[j] = True
                batch[nb] = j
                nb += 1
            hn = _heap_pop(hk, hv, hn)
        batch[:nb].sort()  # pool order: ties are settled in it
        for k in range(nb):
            j = batch[k]
            in_batch[j] = False
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
                    if now > f_since[f]:
                        for e in range(f_ptr[f], f_ptr[f + 1]):
                            link_bytes[e_link[e]] += e_frac[e] * f_rate[f] * (
                                now - f_since[f])
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
            changed = _resolve(seeds[:ns], j_state, j_rate, j_bneck, j_fptr, f_w, f_ptr,
                               e_link, e_coef, e_frac, f_rate, f_bneck, cap, s_rem, s_demand,
                               s_nlive, s_seen, n_links, inc_ptr, inc_flow, f_job, inc_entry,
                               inc_cnt, cut, now, f_since, link_bytes, j_rem, j_since, j_tfin,
                               fseen)
            for i in range(changed.shape[0]):
                j = f_job[changed[i]]
                if j_state[j] == ACTIVE and j_rate[j] > 0.0:
                    hk, hv, hn = _heap_push(hk, hv, hn, j_tfin[j], j)
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
                    hk, hv, hn = _heap_push(hk, hv, hn, j_act[j], j)
                    for e in range(f_ptr[j_fptr[j]], f_ptr[j_fptr[j + 1]]):
                        l = e_link[e]  # its flows are live again on their links
                        inc_cnt[l] = inc_ptr[l + 1] - inc_ptr[l]
                    cnt += 1
            g_left[g] = cnt
        n_re = 0
        if hn > 4 * n_jobs + 1024:  # mostly stale entries: start afresh
            hk, hv, hn = _heap_build(j_state, j_act, j_tfin, j_rate)
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
def _current(j: int, t: float, j_state: I8, j_act: F8, j_tfin: F8, j_rate: F8) -> bool:
    """Whether heap entry ``(t, j)`` is still the job's next event."""
    if j_state[j] == PENDING:
        return bool(j_act[j] == t)
    if j_state[j] == ACTIVE:
        return bool(j_rate[j] > 0.0 and j_tfin[j] == t)
    return False


@numba.njit(cache=True)
def _heap_push(hk: F8, hv: I8, hn: int, key: float, val: int) -> tuple[F8, I8, int]:
    """Push ``(key, val)`` on the binary min-heap ``hk``/``hv`` of ``hn`` entries (grown
    when full); returns the heap."""
    if hn == hk.shape[0]:
        nk = np.empty(2 * hn + 16)
        nv = np.empty(2 * hn + 16, dtype=np.int64)
        nk[:hn] = hk[:hn]
        nv[:hn] = hv[:hn]
        hk, hv = nk, nv
    i = hn
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] < key or (hk[p] == key and hv[p] <= val):
            break
        hk[i] = hk[p]
        hv[i] = hv[p]
        i = p
    hk[i] = key
    hv[i] = val
    return hk, hv, hn + 1


@numba.njit(cache=True)
def _heap_pop(hk: F8, hv: I8, hn: int) -> int:
    """Drop the top of the heap; returns its new size."""
    hn -= 1
    if hn <= 0:
        return 0
    key, val = hk[hn], hv[hn]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= hn:
            break
        if c + 1 < hn and (hk[c + 1] < hk[c] or (hk[c + 1] == hk[c] and hv[c + 1] < hv[c])):
            c += 1
        if hk[c] < key or (hk[c] == key and hv[c] < val):
            hk[i] = hk[c]
            hv[i] = hv[c]
            i = c
        else:
            break
    hk[i] = key
    hv[i] = val
    return hn


@numba.njit(cache=True)
def _heap_build(j_state: I8, j_act: F8, j_tfin: F8, j_rate: F8) -> tuple[F8, I8, int]:
    """A heap of every job's next event: its activation or its finish."""
    n = j_state.shape[0]
    hk = np.empty(max(2 * n, 16))
    hv = np.empty(max(2 * n, 16), dtype=np.int64)
    hn = 0
    for j in range(n):
        if j_state[j] == PENDING:
            hk, hv, hn = _heap_push(hk, hv, hn, j_act[j], j)
        elif j_state[j] == ACTIVE and j_rate[j] > 0.0 and np.isfinite(j_tfin[j]):
            hk, hv, hn = _heap_push(hk, hv, hn, j_tfin[j], j)
    return hk, hv, hn


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
def _incidence(j_fptr: I8, f_ptr: I8, e_link: I8, n_links: int
               ) -> tuple[I8, I8, I8, I8, I8]:
    """Link → flow incidence (CSR) over every flow of the pool, each flow's job, the
    entry (flow, link) each incidence stands for, and per link how many incidences may
    be live (all, at first: :func:`_resolve` moves those of finished jobs past them)."""
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
    for f in range(n_flows):
        for e in range(f_ptr[f], f_ptr[f + 1]):
            l = e_link[e]
            lflow[fill[l]] = f
            lentry[fill[l]] = e
            fill[l] += 1
    return lptr, lflow, f_job, lentry, lptr[1:] - lptr[:-1]


#: A flow whose level is within this (relative) of the cut is re-solved, not kept.
CUT_RTOL = 1e-9


@numba.njit(cache=True)
def _resolve(seeds: I8, j_state: I8, j_rate: F8, j_bneck: I8, j_fptr: I8, f_w: F8, f_ptr: I8,
             e_link: I8, e_coef: F8, e_frac: F8, f_rate: F8, f_bneck: I8, cap: F8, s_rem: F8,
             s_demand: F8, s_nlive: I8, s_seen: NDArray[np.bool_], n_links: int,
             inc_ptr: I8, inc_flow: I8, f_job: I8, inc_entry: I8, inc_cnt: I8, cut: float,
             now: float,
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

    A job's bottleneck is the link of its slowest flow whose capacity its flows fill the
    most with payload (``Σ frac·rate / capacity``; a down link first). This differs from
    the solver's freezing link when a protocol's per-class efficiency makes a lightly
    loaded link bind on paper (e.g. PCIe at 46 % payload vs the NIC at 58 % on the same
    path): the table then names the link the wire actually keeps busy.
    """
    keep_below = cut * (1.0 - CUT_RTOL) if cut >= 0.0 else -1.0
    n_flows = f_w.shape[0]
    queue = np.empty(seeds.shape[0] + n_links + 1, dtype=np.int64)
    comp_links = np.empty(n_links, dtype=np.int64)
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
        comp_links[ncl] = l
        ncl += 1
        rem = cap[l]
        k = inc_ptr[l]
        end = k + inc_cnt[l]
        while k < end:
            f = inc_flow[k]
            st = j_state[f_job[f]]
            if st == DONE:  # finished for good: moved past the link's live part
                end -= 1
                e = inc_entry[k]
                inc_flow[k] = inc_flow[end]
                inc_entry[k] = inc_entry[end]
                inc_flow[end] = f
                inc_entry[end] = e
                continue
            k += 1
            if st != ACTIVE:
                continue
            if keep_below >= 0.0 and f_rate[f] < f_w[f] * keep_below:
                e = inc_entry[k - 1]  # kept: its use of this link
                rem -= e_coef[e] * f_rate[f]
                s_demand[l] += e_frac[e] * f_rate[f]
                continue
            if fseen[f]:
                continue
            fseen[f] = True
            comp[nc] = f
            nc += 1
            for e in range(f_ptr[f], f_ptr[f + 1]):
                m = e_link[e]
                if not s_seen[m]:
                    s_seen[m] = True
                    queue[nq] = m
                    nq += 1
        inc_cnt[l] = end - inc_ptr[l]
        s_rem[l] = rem
    for k in range(ncl):
        s_seen[comp_links[k]] = False
    for i in range(nc):
        fseen[comp[i]] = False
    if nc == 0:
        for k in range(ncl):
            s_demand[comp_links[k]] = 0.0
        return comp[:0]
    flows = np.sort(comp[:nc])  # pool order, as a full re-solve lists them
    for i in range(nc):  # the bytes each flow moved at the rate it is about to leave
        f = flows[i]
        if now > f_since[f] and f_rate[f] > 0.0:
            for e in range(f_ptr[f], f_ptr[f + 1]):
                link_bytes[e_link[e]] += e_frac[e] * f_rate[f] * (now - f_since[f])
        f_since[f] = now
    # s_demand holds the kept flows' payload; the fill needs it zero: set it aside
    kept = np.empty(ncl, dtype=np.float64)
    for k in range(ncl):
        kept[k] = s_demand[comp_links[k]]
        s_demand[comp_links[k]] = 0.0
    fill_component(flows, f_ptr, e_link, e_coef, f_w, s_rem, s_demand, s_nlive, f_rate,
                   f_bneck)
    for k in range(ncl):
        s_demand[comp_links[k]] = kept[k]
    # job rates: the sum of all their flows (some may have kept their rates); job
    # bottleneck: on its slowest flow, the link the active flows fill the most with
    # payload (s_demand: scratch, zero again on return)
    for i in range(nc):
        j = f_job[flows[i]]
        if now > j_since[j]:  # bytes sent at the old rate, before it changes
            j_rem[j] -= j_rate[j] * (now - j_since[j])
            j_since[j] = now
    for i in range(nc):
        j = f_job[flows[i]]
        r = 0.0
        for g in range(j_fptr[j], j_fptr[j + 1]):
            r += f_rate[g]
        j_rate[j] = r
        j_tfin[j] = now + j_rem[j] / r if r > 0.0 else np.inf
    for i in range(nc):
        f = flows[i]
        if np.isfinite(f_rate[f]):
            for e in range(f_ptr[f], f_ptr[f + 1]):
                s_demand[e_link[e]] += e_frac[e] * f_rate[f]
    for i in range(nc):
        j = f_job[flows[i]]
        best = -1
        for g in range(j_fptr[j], j_fptr[j + 1]):
            if best < 0 or f_rate[g] < f_rate[best]:
                best = g
        pick = f_bneck[best]
        top = -1.0
        for e in range(f_ptr[best], f_ptr[best + 1]):
            l = e_link[e]
            u = s_demand[l] / cap[l] if cap[l] > 0.0 else np.inf
            if u > top or (u == top and l < pick):
                top = u
                pick = l
        j_bneck[j] = pick
    for k in range(ncl):  # every link of a re-solved flow was searched
        s_demand[comp_links[k]] = 0.0
    return flows


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
    incidence: tuple[I8, I8, I8, I8, I8] | None = None
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
            max_events: int = 1 << 62, partial: bool = True) -> tuple[int, float, I8]:
        """Advance the pool (see :func:`advance`); returns (code, now, completed groups).
        ``max_events`` returns :data:`BUDGET` after that many events (call again);
        ``partial=False`` re-solves whole components at every event (a reference).

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
            self.incidence = _incidence(self.j_fptr, self.f_ptr, self.e_link, cap.shape[0])
        code, t, n = advance(now, t_limit, self.j_rem, self.j_act, self.j_state, self.j_group,
                             self.j_end, self.j_rate, self.j_bneck, self.j_fptr, self.f_w,
                             self.f_ptr, self.e_link, self.e_coef, self.e_frac, self.f_rate,
                             self.f_bneck,
                             g_left, g_end, g_bneck, cap, self.dirty, self.link_bytes,
                             *self.scratch, out, self.j_size, self.j_lat, repeats[0],
                             repeats[1], repeats[2], repeats[3], repeats[4], repeats[5],
                             self.g_slow, *self.incidence, max_events, partial)
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
