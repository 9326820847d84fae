"""Weighted max-min fair rates by progressive filling (water-filling).

Flows are rows of a sparse flows × links incidence in CSR form: flow ``f`` crosses link
``links[e]`` with coefficient ``coef[e]`` for ``e`` in ``ptr[f]:ptr[f+1]`` (the
coefficient is 1 for a flow on one path; a flow sprayed evenly over ``K`` paths crosses
each of their links with the fraction of paths that use it). Flow ``f`` with weight
``w[f]`` gets rate ``w[f]·x_f``; every link ``l`` obeys ``Σ_f coef·rate ≤ capacity[l]``.

Progressive filling raises one common level ``x`` for all unfrozen flows; the first link
to saturate freezes every flow that crosses it at ``w·x``; repeat with what is left. The
result is the unique weighted max-min fair allocation: every flow crosses a saturated link
on which its level is the largest (its *bottleneck*, returned too).

:func:`maxmin_numpy` is the vectorised reference; :func:`maxmin_numba` is the same
algorithm compiled with numba (used by the event loop) and is tested against it.

Example
-------
>>> import numpy as np
>>> ptr = np.array([0, 1, 3])                     # flow 0 on link 0; flow 1 on links 0, 1
>>> links = np.array([0, 0, 1]); coef = np.ones(3)
>>> rates, bneck = maxmin_numpy(ptr, links, coef, np.array([10.0, 4.0]), np.ones(2))
>>> rates.tolist(), bneck.tolist()
([6.0, 4.0], [0, 1])
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Relative tolerance under which two link levels count as the same water level.
LEVEL_RTOL = 1e-9


def maxmin_numpy(ptr: NDArray[np.integer], links: NDArray[np.integer], coef: FloatArray,
                 capacity: FloatArray, weights: FloatArray) -> tuple[FloatArray, IntArray]:
    """Weighted max-min rates of flows over links (numpy reference implementation).

    Parameters
    ----------
    ptr, links, coef
        CSR incidence: flow ``f`` uses ``links[ptr[f]:ptr[f+1]]`` with ``coef`` (> 0).
    capacity
        Capacity of every link (bytes/s, >= 0), indexed by link id.
    weights
        Weight of every flow (> 0); a flow's rate is its weight times its water level.

    Returns
    -------
    rates, bottleneck
        Rate of every flow (bytes/s; ``inf`` for a flow that crosses no link) and the link
        that froze it (-1 when it crosses none).

    Examples
    --------
    >>> import numpy as np
    >>> r, b = maxmin_numpy(np.array([0, 1, 2]), np.array([0, 0]), np.ones(2),
    ...                     np.array([9.0]), np.array([2.0, 1.0]))
    >>> r.tolist()
    [6.0, 3.0]
    """
    ptr = np.asarray(ptr, dtype=np.int64)
    links = np.asarray(links, dtype=np.int64)
    n_flows = ptr.shape[0] - 1
    n_links = capacity.shape[0]
    rates = np.full(n_flows, np.inf)
    bneck = np.full(n_flows, -1, dtype=np.int64)
    if n_flows == 0:
        return rates, bneck
    row = np.repeat(np.arange(n_flows), np.diff(ptr))
    cw = coef * weights[row]                       # demand per unit level on each entry
    rem = capacity.astype(np.float64).copy()
    frozen = np.diff(ptr) == 0                     # flows on no link are never limited
    while not frozen.all():
        live = ~frozen[row]
        demand = np.bincount(links[live], weights=cw[live], minlength=n_links)
        used = demand > 0
        level = np.full(n_links, np.inf)
        level[used] = np.maximum(rem[used], 0.0) / demand[used]
        lmin = level.min()
        sat = level <= lmin * (1 + LEVEL_RTOL) + 1e-300
        hit = live & sat[links]
        new = np.zeros(n_flows, dtype=bool)
        new[row[hit]] = True
        # a flow frozen now is limited by the first saturated link it crosses
        first = np.full(n_flows, n_links, dtype=np.int64)
        np.minimum.at(first, row[hit], links[hit])
        idx = np.flatnonzero(new)
        rates[idx] = weights[idx] * lmin
        bneck[idx] = first[idx]
        frozen |= new
        ent = new[row]
        rem -= np.bincount(links[ent], weights=cw[ent] * lmin, minlength=n_links)
    return rates, bneck


@numba.njit(cache=True)
def maxmin_numba(ptr: NDArray[np.int64], links: NDArray[np.int64], coef: FloatArray,
                 capacity: FloatArray, weights: FloatArray) -> tuple[FloatArray, IntArray]:
    """Same contract as :func:`maxmin_numpy`, compiled (the event loop's solver).

    Examples
    --------
    >>> import numpy as np
    >>> r, _ = maxmin_numba(np.array([0, 1, 2]), np.array([0, 0]), np.ones(2),
    ...                     np.array([9.0]), np.array([2.0, 1.0]))
    >>> r.tolist()
    [6.0, 3.0]
    """
    n_flows = ptr.shape[0] - 1
    flows = np.arange(n_flows)
    rates = np.full(n_flows, np.inf)
    bneck = np.full(n_flows, -1, dtype=np.int64)
    rem = capacity.copy()
    demand = np.zeros(capacity.shape[0])
    nlive = np.zeros(capacity.shape[0], dtype=np.int64)
    fill_component(flows, ptr, links, coef, weights, rem, demand, nlive, rates, bneck)
    return rates, bneck


@numba.njit(cache=True)
def fill_component(flows: IntArray, ptr: NDArray[np.int64], links: NDArray[np.int64],
                   coef: FloatArray, weights: FloatArray, rem: FloatArray, demand: FloatArray,
                   nlive: IntArray, rates: FloatArray, bneck: IntArray) -> int:
    """Progressive filling of the flows listed in ``flows`` (in place), driven by links.

    ``rem`` holds the capacity left on every link and is consumed; ``demand`` and ``nlive``
    (scratch arrays by link) must be zero on entry and are left zero. Writes ``rates[f]``
    and ``bneck[f]`` of the listed flows and returns the number of water levels it took.

    Same levels, thresholds, freezing rule and floating-point operations (in the same
    order) as :func:`fill_component_scan`, but a level visits only the flows on the links
    that saturate at it (through a link → flow incidence built once), so a fill costs
    O(entries + levels × links touched) instead of O(levels × entries).
    """
    nf = flows.shape[0]
    n_links = rem.shape[0]
    state = np.zeros(nf, dtype=np.int8)  # 0 live, 1 frozen at this level, 2 settled
    n_ent = 0
    for i in range(nf):
        f = flows[i]
        n_ent += ptr[f + 1] - ptr[f]
    touched = np.empty(min(n_ent, n_links), dtype=np.int64)
    nt = 0
    left = 0
    for i in range(nf):
        f = flows[i]
        if ptr[f + 1] == ptr[f]:
            state[i] = 2
            rates[f] = np.inf
            bneck[f] = -1
            continue
        left += 1
        for e in range(ptr[f], ptr[f + 1]):
            l = links[e]
            if nlive[l] == 0:
                touched[nt] = l
                nt += 1
            nlive[l] += 1
            demand[l] += coef[e] * weights[f]
    # link -> flow incidence over the touched links (counting sort; flows in list order)
    pos = np.empty(n_links, dtype=np.int64)
    for k in range(nt):
        pos[touched[k]] = k
    lptr = np.zeros(nt + 1, dtype=np.int64)
    for k in range(nt):
        lptr[k + 1] = lptr[k] + nlive[touched[k]]
    fill = lptr[:-1].copy()
    lflow = np.empty(lptr[nt], dtype=np.int64)
    for i in range(nf):
        if state[i] != 0:
            continue
        f = flows[i]
        for e in range(ptr[f], ptr[f + 1]):
            k = pos[links[e]]
            lflow[fill[k]] = i
            fill[k] += 1
    sat = np.zeros(n_links, dtype=np.bool_)
    sat_list = np.empty(nt, dtype=np.int64)
    new = np.empty(max(left, 1), dtype=np.int64)
    levels = 0
    while left > 0:
        levels += 1
        lmin = np.inf
        for k in range(nt):
            l = touched[k]
            if nlive[l] > 0:
                lv = max(rem[l], 0.0) / demand[l]
                if lv < lmin:
                    lmin = lv
        thresh = lmin * (1.0 + LEVEL_RTOL) + 1e-300
        ns = 0
        for k in range(nt):
            l = touched[k]
            if nlive[l] > 0 and max(rem[l], 0.0) / demand[l] <= thresh:
                sat[l] = True
                sat_list[ns] = k
                ns += 1
        nn = 0
        for s in range(ns):
            k = sat_list[s]
            for q in range(lptr[k], lptr[k + 1]):
                i = lflow[q]
                if state[i] != 0:
                    continue
                f = flows[i]
                hit = -1
                for e in range(ptr[f], ptr[f + 1]):
                    l = links[e]
                    if sat[l] and (hit < 0 or l < hit):
                        hit = l
                state[i] = 1
                rates[f] = weights[f] * lmin
                bneck[f] = hit
                new[nn] = i
                nn += 1
        for s in range(ns):
            sat[touched[sat_list[s]]] = False
        if nn == 0:  # cannot happen (a saturated link has live flows); guards the loop
            break
        # settle in list order, as the scan does, so every sum runs in the same order
        order = np.sort(new[:nn])
        for s in range(nn):
            i = order[s]
            state[i] = 2
            left -= 1
            f = flows[i]
            for e in range(ptr[f], ptr[f + 1]):
                l = links[e]
                demand[l] -= coef[e] * weights[f]
                nlive[l] -= 1
                rem[l] -= coef[e] * rates[f]
    for k in range(nt):
        demand[touched[k]] = 0.0
        nlive[touched[k]] = 0
    return levels


@numba.njit(cache=True)
def fill_component_scan(flows: IntArray, ptr: NDArray[np.int64], links: NDArray[np.int64],
                        coef: FloatArray, weights: FloatArray, rem: FloatArray,
                        demand: FloatArray, nlive: IntArray, rates: FloatArray,
                        bneck: IntArray) -> int:
    """:func:`fill_component` as it was first written: every level scans every live flow.

    Kept as the reference the link-driven fill is tested against (identical results).
    """
    nf = flows.shape[0]
    state = np.zeros(nf, dtype=np.int8)  # 0 live, 1 frozen at this level, 2 settled
    n_ent = 0
    for i in range(nf):
        f = flows[i]
        n_ent += ptr[f + 1] - ptr[f]
    touched = np.empty(n_ent, dtype=np.int64)
    nt = 0
    left = 0
    for i in range(nf):
        f = flows[i]
        if ptr[f + 1] == ptr[f]:
            state[i] = 2
            rates[f] = np.inf
            bneck[f] = -1
            continue
        left += 1
        for e in range(ptr[f], ptr[f + 1]):
            l = links[e]
            if nlive[l] == 0:
                touched[nt] = l
                nt += 1
            nlive[l] += 1
            demand[l] += coef[e] * weights[f]
    levels = 0
    while left > 0:
        levels += 1
        lmin = np.inf
        for k in range(nt):
            l = touched[k]
            if nlive[l] > 0:
                lv = max(rem[l], 0.0) / demand[l]
                if lv < lmin:
                    lmin = lv
        thresh = lmin * (1.0 + LEVEL_RTOL) + 1e-300
        for i in range(nf):
            if state[i] != 0:
                continue
            f = flows[i]
            hit = -1
            for e in range(ptr[f], ptr[f + 1]):
                l = links[e]
                if (nlive[l] > 0 and max(rem[l], 0.0) / demand[l] <= thresh
                        and (hit < 0 or l < hit)):
                    hit = l
            if hit >= 0:
                state[i] = 1
                rates[f] = weights[f] * lmin
                bneck[f] = hit
        for i in range(nf):
            if state[i] != 1:
                continue
            state[i] = 2
            left -= 1
            f = flows[i]
            for e in range(ptr[f], ptr[f + 1]):
                l = links[e]
                demand[l] -= coef[e] * weights[f]
                nlive[l] -= 1
                rem[l] -= coef[e] * rates[f]
    for k in range(nt):
        demand[touched[k]] = 0.0
        nlive[touched[k]] = 0
    return levels
