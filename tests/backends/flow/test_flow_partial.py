"""The event loop's partial re-solve (flows below the lowest level a finishing flow held
keep their rates) gives the same run as re-solving whole components at every event; and
the event loop itself equals a plain reference that re-solves everything each event."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends.flow.kernel import (
    GROUPS,
    LIMIT,
    STALL,
    Pool,
    _heap_build,
    _heap_del,
    _heap_pop,
    _heap_set,
    _heap_take_due,
    _heap_update,
)
from fabricsim.backends.flow.maxmin import maxmin_numpy


@st.composite
def pools(draw: st.DrawFn, hub: bool = False, n_links: int | None = None,
          group0: int = 0, n_groups: int = 3) -> dict[str, np.ndarray]:
    """Jobs of one or two flows (adaptive routing) over random links, random sizes,
    weights, coefficients and start times, in a few groups. ``hub``: many jobs whose
    flows all cross link 0 (more than 48 live flows on one link)."""
    n_links = draw(st.integers(1, 8)) if n_links is None else n_links
    n_jobs = draw(st.integers(25, 40)) if hub else draw(st.integers(1, 14))
    sizes, acts, groups, jptr, fptr, links, coefs, ws = [], [], [], [0], [0], [], [], []
    for _ in range(n_jobs):
        sizes.append(draw(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0])))
        acts.append(draw(st.sampled_from([0.0, 0.0, 0.1, 0.25])))
        groups.append(group0 + draw(st.integers(0, n_groups - 1)))
        nf = 2 if hub else draw(st.integers(1, 2))
        for _ in range(nf):
            k = draw(st.integers(1, min(3, n_links)))
            ls = sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=k, max_size=k))
                        | ({0} if hub else set()))
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


def _drain(hk: np.ndarray, hv: np.ndarray, hpos: np.ndarray, hn: int) -> list[tuple[float, int]]:
    out = []
    while hn:
        assert hpos[hv[0]] == 0
        out.append((float(hk[0]), int(hv[0])))
        hn = _heap_pop(hk, hv, hpos, hn)
    return out


@settings(max_examples=examples(100))
@given(st.lists(st.sampled_from([0.0, 1.0, 1.0, 2.0, 3.0, 5.0]), min_size=1, max_size=60),
       st.sampled_from([-1.0, 0.0, 1.0, 2.5, 9.0]), st.integers(0, 2**32 - 1))
def test_heap_bulk_paths_leave_what_one_by_one_leaves(keys: list[float], thr: float,
                                                      seed: int) -> None:
    """The heap built at once, every entry due taken out at once (few popped one by one,
    many dropped together), and a re-solve's end times written back (few sifted, many
    rebuilt): each leaves the jobs a heap of single operations leaves, in (time, job)
    order."""
    n = len(keys)
    rng = np.random.default_rng(seed)
    j_state = np.zeros(n, dtype=np.int64)  # pending: keyed by activation
    act = np.array(keys)
    hk, hv, hpos, hn = _heap_build(j_state, act, np.full(n, np.inf), np.zeros(n))
    want = sorted((k, j) for j, k in enumerate(keys))
    assert hn == n
    out = np.empty(n, dtype=np.int64)
    hn, nb = _heap_take_due(hk, hv, hpos, hn, thr, out, 0, np.empty(n, dtype=np.int64))
    assert sorted(out[:nb].tolist()) == sorted(j for k, j in want if k <= thr)
    assert all(hpos[j] == -1 for j in out[:nb])
    left = {j: k for k, j in want if k > thr}
    # a re-solve changes some jobs: new end times, or no longer moving (out of the heap)
    n_ch = int(rng.integers(0, 2 * n + 1))
    flows = rng.integers(0, n, size=n_ch).astype(np.int64)  # a job may come twice
    j_state[:] = 1
    rate = np.where(rng.random(n) < 0.8, 1.0, 0.0)
    tfin = np.round(rng.random(n) * 4.0, 1)
    for j in flows.tolist():
        if rate[j] > 0.0:
            left[j] = float(tfin[j])
        else:
            left.pop(j, None)
    hn = _heap_update(hk, hv, hpos, hn, flows, np.arange(n), j_state, rate, tfin)
    assert hn == len(left)
    assert _drain(hk, hv, hpos, hn) == sorted((k, j) for j, k in left.items())
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


# --- what the driver does between calls ----------------------------------------------
# The flow simulator changes capacities (link flaps: ``dirty``), adds jobs mid-run,
# compacts the pool (the incidence and the running sums are rebuilt with flows already
# active), lets the kernel re-arm repeated groups in place, and pauses it every few
# events (BUDGET). A partial re-solve must give the run a full one gives through all of
# that, paused or not.


class Scenario(NamedTuple):
    base: dict[str, np.ndarray]
    ops: list[tuple[float, str, Any]]  # (time, add | cap | compact | restore, argument)
    n_groups: int
    more: np.ndarray  # repetitions each group runs after its first
    budget: int  # events per kernel call


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    hub = draw(st.booleans())
    n_links = draw(st.integers(2, 6))
    base = draw(pools(hub=hub, n_links=n_links))
    cap0 = base["cap"]
    n_adds = draw(st.integers(0, 2))
    adds = [draw(pools(n_links=n_links, group0=3 + k, n_groups=1)) for k in range(n_adds)]
    ops: list[tuple[float, str, Any]] = []
    for p in adds:
        ops.append((draw(st.sampled_from([0.3, 1.0, 2.5])), "add", p))
    for _ in range(draw(st.integers(0, 3))):
        ops.append((draw(st.sampled_from([0.2, 0.5, 1.5, 3.0])), "cap",
                    (draw(st.integers(0, n_links - 1)), draw(st.sampled_from([0.0, 0.5, 3.0])))))
    for _ in range(draw(st.integers(0, 2))):
        ops.append((draw(st.sampled_from([0.7, 2.0, 4.0])), "compact", None))
    ops.sort(key=lambda o: (o[0], o[1]))
    ops.append((5.0, "restore", cap0))  # every link back up: the run can finish
    n_groups = 3 + n_adds
    return Scenario(base, ops, n_groups,
                    np.array([draw(st.integers(0, 2)) for _ in range(n_groups)]),
                    draw(st.sampled_from([1, 2, 5, 1 << 62])))


def _drive(sc: Scenario, partial: bool, budget: int) -> dict[str, np.ndarray]:
    """Run a scenario as the simulator's driver does; every job's last end (by tag),
    every repetition's end, link bytes, per-link critical time and group bottlenecks."""
    base, ops, n_groups, more = sc.base, list(sc.ops), sc.n_groups, sc.more
    cap = base["cap"].astype(float).copy()
    g_more = more.astype(np.int64).copy()
    off = np.concatenate([[0], np.cumsum(more + 1)]).astype(np.int64)
    g_flat = off[:-1].copy()
    rep_start, rep_end = np.full(off[-1] + 1, np.nan), np.full(off[-1] + 1, np.nan)
    g_start, crit = np.zeros(n_groups), np.zeros(cap.shape[0])
    g_left = np.zeros(n_groups, dtype=np.int64)
    g_end = np.full(n_groups, np.nan)
    g_bneck = np.full(n_groups, -1, dtype=np.int64)
    ends: dict[int, float] = {}
    pool = Pool.empty(cap.shape[0])
    n_tag = 0

    def add(p: dict[str, np.ndarray], now: float) -> int:
        nonlocal n_tag
        n = p["size"].shape[0]
        pool.add(p["size"], now + p["act"], p["group"].astype(np.int64), p["jptr"],
                 p["fptr"], p["links"], p["coef"], p["w"], now=now,
                 tag=np.arange(n_tag, n_tag + n))
        n_tag += n
        g = np.bincount(p["group"], minlength=n_groups)
        g_left[:] += g
        rep_start[g_flat[g > 0]] = now
        g_start[g > 0] = now
        return int((g > 0).sum())

    def keep(rec: dict[str, Any]) -> None:
        for tag, end in zip(rec.get("tag", []), rec.get("end", []), strict=True):
            ends[int(tag)] = float(end)

    now = 0.0
    left = add(base, 0.0)
    while left > 0 or ops:
        t_limit = ops[0][0] if ops else np.inf
        code, now, done = pool.run(now, t_limit, cap, n_groups, g_left, g_end, g_bneck,
                                   (g_more, g_flat, g_start, rep_start, rep_end, crit),
                                   max_events=budget, partial=partial)
        assert code != STALL
        left -= len(done)
        for g in done:
            rep_end[g_flat[g]] = now
            if g_bneck[g] >= 0:
                crit[g_bneck[g]] += now - g_start[g]
        while ops and ops[0][0] <= now:
            _, kind, arg = ops.pop(0)
            if kind == "add":
                left += add(arg, now)
            elif kind == "compact":
                keep(pool.compact(g_more))
            else:
                idx = [arg[0]] if kind == "cap" else list(range(cap.shape[0]))
                cap[idx] = arg[1] if kind == "cap" else arg
                pool.dirty[idx] = True
    keep(pool.compact())
    return {"end": np.array([ends[t] for t in range(n_tag)]), "rep_end": rep_end,
            "bytes": pool.link_bytes.copy(), "crit": crit, "bneck": g_bneck}


@settings(max_examples=examples(150), deadline=None)
@given(scenarios())
def test_partial_equals_full_through_the_drivers_changes(sc: Scenario) -> None:
    full = _drive(sc, partial=False, budget=1 << 62)
    part = _drive(sc, partial=True, budget=sc.budget)
    for k in ("end", "rep_end", "bytes", "crit"):
        np.testing.assert_allclose(part[k], full[k], rtol=1e-9, atol=1e-9, err_msg=k)
    assert part["bneck"].tolist() == full["bneck"].tolist()


def _rebuilt_mid_run(partial: bool) -> np.ndarray:
    # link 0 (cap 1) holds job A to 1; on link 1 (cap 5) A leaves 4 to B and C, 2 each.
    # At t = 0.25 an unrelated job joins on link 2: the pool's incidence and sums are
    # rebuilt with A, B and C moving. B ends at 0.5; A keeps its rate (below the cut) and
    # C may take what is left of link 1: 5 - 1 = 4, not 5 (A must be in the new sums).
    p = Pool.empty(3)
    p.add(np.array([10.0, 1.0, 4.0]), np.zeros(3), np.array([0, 1, 2]),
          np.array([0, 1, 2, 3]), np.array([0, 2, 3, 4]), np.array([0, 1, 1, 1]),
          np.ones(4), np.ones(3), now=0.0, tag=np.arange(3))
    cap = np.array([1.0, 5.0, 1.0])
    g_left, g_end = np.array([1, 1, 1, 1]), np.full(4, np.nan)
    g_bneck = np.full(4, -1, dtype=np.int64)
    code, now, _ = p.run(0.0, 0.25, cap, 4, g_left, g_end, g_bneck, partial=partial)
    assert (code, now) == (LIMIT, 0.25)
    p.add(np.array([2.0]), np.array([0.25]), np.array([3]), np.array([0, 1]),
          np.array([0, 1]), np.array([2]), np.ones(1), np.ones(1), now=now, tag=np.array([3]))
    n = 0
    while n < 4:
        _, now, done = p.run(now, np.inf, cap, 4, g_left, g_end, g_bneck, partial=partial)
        n += len(done)
    return g_end


def test_a_rebuild_mid_run_keeps_the_flows_already_moving_in_the_sums() -> None:
    # B: 1 B at 2 B/s, ends at 0.5; C: 3 B left then, at 4 B/s, ends at 1.25 (at 5 B/s,
    # with A missing from the rebuilt sums, it would end at 1.1); the new job: 2.25
    for partial in (True, False):
        np.testing.assert_allclose(_rebuilt_mid_run(partial), [10.0, 0.5, 1.25, 2.25],
                                   rtol=1e-12)


def test_a_kept_flow_is_charged_to_the_link_that_binds_when_it_ends() -> None:
    # A (link 0) and C (links 0, 1) fill link 0 (cap 2); B and C share link 1 (cap 1), so
    # both links are full and C's bottleneck ties (the lower link, 0, would be named).
    # A ends first; C keeps its rate (below the cut) while link 0 drops to 25 %: by its
    # end C is held by link 1 alone, and a partial event must say so as a full one does.
    for partial in (True, False):
        p = Pool.empty(2)
        p.add(np.ones(3), np.zeros(3), np.array([0, 1, 2]), np.array([0, 1, 2, 3]),
              np.array([0, 1, 2, 4]), np.array([0, 1, 0, 1]), np.ones(4), np.ones(3), now=0.0)
        g_left, g_end = np.ones(3, dtype=np.int64), np.full(3, np.nan)
        g_bneck = np.full(3, -1, dtype=np.int64)
        now, n = 0.0, 0
        while n < 3:
            _, now, done = p.run(now, np.inf, np.array([2.0, 1.0]), 3, g_left, g_end,
                                 g_bneck, partial=partial)
            n += len(done)
        np.testing.assert_allclose(g_end, [2 / 3, 2.0, 2.0])
        assert g_bneck.tolist() == [0, 1, 1]


def test_a_job_whose_flows_tie_is_charged_the_same_whichever_rounds_lower() -> None:
    # one job, two flows at the same rate to within rounding, on links 1 and 0, both full:
    # the bottleneck must not depend on which rate came out an ulp lower (partial and full
    # re-solves round differently); both flows count and the lower link is named
    from fabricsim.backends.flow.kernel import _bneck
    r = 1 / 3
    picks = set()
    for rates in ([r, r * (1 + 1e-15)], [r * (1 + 1e-15), r]):
        picks.add(_bneck(0, np.array([0, 2]), np.array([0, 1, 2]), np.array([1, 0]),
                         np.array(rates), np.array([1, 0]), np.ones(2), np.ones(2)))
    assert picks == {0}


def test_a_down_link_is_named_and_ties_do_not_depend_on_path_order() -> None:
    from fabricsim.backends.flow.kernel import _bneck
    # one job: flow A on link 0, flow B on links 1 and 2; link 2 is down, so B is stuck
    # at rate 0 (the slowest) and its down link is the bottleneck, not the lowest link
    p = Pool.empty(3)
    p.add(np.array([1.0]), np.zeros(1), np.array([0]), np.array([0, 2]),
          np.array([0, 1, 3]), np.array([0, 1, 2]), np.ones(3), np.ones(2), now=0.0)
    gb = np.full(1, -1, dtype=np.int64)
    p.run(0.0, np.inf, np.array([1.0, 1.0, 0.0]), 1, np.ones(1, dtype=np.int64),
          np.full(1, np.nan), gb)
    assert gb.tolist() == [2]
    # fills 1e-9-close in a chain (x, x(1+0.8e-9), x(1+1.6e-9)): whatever the order of
    # the path's links, the lowest link within 1e-9 of the top fill is named
    x = 0.5
    u = np.array([x, x * (1 + 0.8e-9), x * (1 + 1.6e-9)])
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        got = _bneck(0, np.array([0, 1]), np.array([0, 3]), np.array(order), np.ones(1),
                     np.array([0]), np.ones(3), u)
        assert got == 1
