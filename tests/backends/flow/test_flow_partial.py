"""The event loop's partial re-solve (flows below the lowest level a finishing flow held
keep their rates) gives the same run as re-solving whole components at every event; and
the event loop itself equals a plain reference that re-solves everything each event."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends.flow.kernel import (
    GROUPS,
    STALL,
    Pool,
    _heap_del,
    _heap_pop,
    _heap_set,
)
from fabricsim.backends.flow.maxmin import maxmin_numpy


@st.composite
def pools(draw: st.DrawFn) -> dict[str, np.ndarray]:
    """Jobs of one or two flows (adaptive routing) over random links, random sizes,
    weights, coefficients and start times, in a few groups."""
    n_links = draw(st.integers(1, 8))
    n_jobs = draw(st.integers(1, 14))
    sizes, acts, groups, jptr, fptr, links, coefs, ws = [], [], [], [0], [0], [], [], []
    for _ in range(n_jobs):
        sizes.append(draw(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0])))
        acts.append(draw(st.sampled_from([0.0, 0.0, 0.1, 0.25])))
        groups.append(draw(st.integers(0, 2)))
        nf = draw(st.integers(1, 2))
        for _ in range(nf):
            k = draw(st.integers(1, min(3, n_links)))
            ls = sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=k, max_size=k)))
            links += ls
            coefs += [draw(st.sampled_from([1.0, 1.0, 0.5])) for _ in ls]
            fptr.append(len(links))
            ws.append(draw(st.sampled_from([1.0, 1.0, 2.0, 0.5])))
        jptr.append(len(fptr) - 1)
    cap = np.array([draw(st.sampled_from([1.0, 2.0, 4.0, 10.0])) for _ in range(n_links)])
    return {"size": np.array(sizes), "act": np.array(acts), "group": np.array(groups),
            "jptr": np.array(jptr), "fptr": np.array(fptr), "links": np.array(links),
            "coef": np.array(coefs), "w": np.array(ws), "cap": cap}


def _run(p: dict[str, np.ndarray], partial: bool) -> tuple[np.ndarray, np.ndarray]:
    pool = Pool.empty(n_links=p["cap"].shape[0])
    pool.add(p["size"], p["act"], p["group"].astype(np.int64), p["jptr"], p["fptr"],
             p["links"], p["coef"], p["w"], now=0.0)
    n_groups = int(p["group"].max()) + 1
    g_left = np.bincount(p["group"], minlength=n_groups).astype(np.int64)
    g_end = np.full(n_groups, np.nan)
    g_bneck = np.full(n_groups, -1, dtype=np.int64)
    now, left = 0.0, int((g_left > 0).sum())
    while left > 0:
        code, now, done = pool.run(now, np.inf, p["cap"], n_groups, g_left, g_end, g_bneck,
                                   partial=partial)
        assert code != STALL
        assert code == GROUPS
        left -= len(done)
    return pool.j_end.copy(), pool.link_bytes.copy()


@settings(max_examples=examples(200))
@given(pools())
def test_partial_resolve_equals_full(p: dict[str, np.ndarray]) -> None:
    end_full, bytes_full = _run(p, partial=False)
    end_part, bytes_part = _run(p, partial=True)
    np.testing.assert_allclose(end_part, end_full, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(bytes_part, bytes_full, rtol=1e-9, atol=1e-9)


def test_link_bytes_are_the_bytes_sent() -> None:
    """Lazy accounting: every byte a job sends is on each link of its path, once."""
    p = {"size": np.array([4.0, 2.0, 6.0]), "act": np.array([0.0, 0.1, 0.0]),
         "group": np.array([0, 0, 1]), "jptr": np.array([0, 1, 2, 3]),
         "fptr": np.array([0, 2, 3, 5]), "links": np.array([0, 1, 1, 0, 2]),
         "coef": np.ones(5), "w": np.ones(3), "cap": np.array([1.0, 2.0, 3.0])}
    for partial in (True, False):
        _end, b = _run(p, partial)
        np.testing.assert_allclose(b, [4.0 + 6.0, 4.0 + 2.0, 6.0], rtol=1e-12)

# --- the event loop against a plain reference --------------------------------------
# The compiled loop (a heap of activations and finishes; finished flows dropped from the
# link incidence as they are met) against re-solving max-min over every active flow at
# every event (maxmin_numpy) and moving to the next activation or finish.


def _reference(p: dict[str, np.ndarray]) -> np.ndarray:
    """End time of every job, event by event, every active flow re-solved each time."""
    jptr, fptr, links, coef, w = p["jptr"], p["fptr"], p["links"], p["coef"], p["w"]
    n = p["size"].shape[0]
    rem, act = p["size"].astype(float).copy(), p["act"]
    end = np.full(n, np.nan)
    now = 0.0
    while np.isnan(end).any():
        live = [j for j in range(n) if np.isnan(end[j]) and act[j] <= now + 1e-15]
        rate = np.zeros(n)
        if live:
            flows = [f for j in live for f in range(jptr[j], jptr[j + 1])]
            ptr = np.concatenate([[0], np.cumsum([fptr[f + 1] - fptr[f] for f in flows])])
            idx = np.concatenate([np.arange(fptr[f], fptr[f + 1]) for f in flows])
            r, _ = maxmin_numpy(ptr, links[idx], coef[idx], p["cap"], w[flows])
            k = 0
            for j in live:
                m = jptr[j + 1] - jptr[j]
                rate[j] = r[k:k + m].sum()
                k += m
        t_fin = min((now + rem[j] / rate[j] for j in live if rate[j] > 0), default=np.inf)
        t_act = min((act[j] for j in range(n) if np.isnan(end[j]) and act[j] > now + 1e-15),
                    default=np.inf)
        t = min(t_fin, t_act)
        assert np.isfinite(t)
        for j in live:
            rem[j] -= rate[j] * (t - now)
            if rate[j] > 0 and rem[j] <= 1e-9 * p["size"][j]:
                end[j] = t
        now = t
    return end


@settings(max_examples=examples(150))
@given(pools())
def test_event_loop_equals_the_plain_reference(p: dict[str, np.ndarray]) -> None:
    end, _ = _run(p, partial=True)
    assert np.allclose(end, _reference(p), rtol=1e-9, atol=1e-12)


@settings(max_examples=examples(100))
@given(pools())
def test_heap_pops_in_time_then_job_order(p: dict[str, np.ndarray]) -> None:
    """The indexed heap: inserted, moved (earlier and later) and removed entries pop in
    (time, job) order, one per job."""
    keys = np.concatenate([p["act"], p["size"], p["w"]])
    n = keys.shape[0]
    hk, hv = np.empty(n), np.empty(n, dtype=np.int64)
    hpos = np.full(n, -1, dtype=np.int64)
    hn = 0
    for j in range(n):  # jobs in reverse, so ties must be broken by job
        hn = _heap_set(hk, hv, hpos, hn, n - 1 - j, float(keys[j]))
    final = {n - 1 - j: float(keys[j]) for j in range(n)}
    for j in range(0, n, 3):  # move some entries: later, earlier, onto a tie
        final[j] = final[j] * 2.0 if j % 2 else final[j] / 2.0
        hn = _heap_set(hk, hv, hpos, hn, j, final[j])
    for j in range(1, n, 4):  # and take some out
        hn = _heap_del(hk, hv, hpos, hn, j)
        del final[j]
    assert hn == len(final)
    out = []
    while hn:
        assert hpos[hv[0]] == 0
        out.append((hk[0], int(hv[0])))
        hn = _heap_pop(hk, hv, hpos, hn)
    assert out == sorted((t, j) for j, t in final.items())
    assert (hpos == -1).all()


def _bottlenecks(partial: bool) -> np.ndarray:
    # job 0 crosses links 0 and 1; jobs 1 and 2 share link 1 and leave it by partial
    # events first, so link 1 is empty when job 0 ends: its payload must be 0 then, not
    # the rounding its running sum kept, or job 0's tie (both links idle) tips to link 1
    p = Pool.empty(2)
    p.add(np.array([9.0, 1.0, 2.0]), np.zeros(3), np.array([0, 1, 2]), np.array([0, 1, 2, 3]),
          np.array([0, 2, 3, 4]), np.array([0, 1, 1, 1]), np.ones(4), np.ones(3), now=0.0,
          frac=np.array([0.46, 0.46, 0.46, 0.23]))
    cap = np.array([3.3, 3.3])
    g_left, g_end = np.ones(3, dtype=np.int64), np.full(3, np.nan)
    g_bneck = np.full(3, -1, dtype=np.int64)
    now, n = 0.0, 0
    while n < 3:
        _, now, done = p.run(now, np.inf, cap, 3, g_left, g_end, g_bneck, partial=partial)
        n += len(done)
    return g_bneck


def test_partial_events_name_the_bottleneck_the_reference_names() -> None:
    assert _bottlenecks(True).tolist() == _bottlenecks(False).tolist() == [0, 1, 1]
