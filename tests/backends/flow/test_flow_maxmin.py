"""Max-min fairness properties of the solvers (numpy reference vs numba)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends.flow.maxmin import (
    fill_component,
    fill_component_scan,
    maxmin_numba,
    maxmin_numpy,
)
from fabricsim.backends.flow.routing import expand
from fabricsim.backends.flow.testing import host_fat_tree


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    n_links = draw(st.integers(1, 7))
    n_flows = draw(st.integers(1, 9))
    rows = []
    coefs = []
    for _ in range(n_flows):
        k = draw(st.integers(0, n_links))
        ls = sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=k, max_size=k)))
        rows.append(ls)
        coefs.append([draw(st.sampled_from([1.0, 0.5, 0.25])) for _ in ls])
    cap = np.array([draw(st.floats(0.5, 100.0)) for _ in range(n_links)])
    w = np.array([draw(st.sampled_from([1.0, 2.0, 0.5])) for _ in range(n_flows)])
    ptr = np.zeros(n_flows + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    links = np.array([l for r in rows for l in r], dtype=np.int64)
    coef = np.array([c for r in coefs for c in r], dtype=np.float64)
    return ptr, links, coef, cap, w


@settings(max_examples=examples(150))
@given(problems())
def test_maxmin_properties(p: tuple[np.ndarray, ...]) -> None:
    ptr, links, coef, cap, w = p
    rates, bneck = maxmin_numpy(ptr, links, coef, cap, w)
    r2, b2 = maxmin_numba(ptr, links, coef, cap, w)
    np.testing.assert_allclose(r2, rates, rtol=1e-9)
    assert (b2 == bneck).all()
    row = np.repeat(np.arange(ptr.shape[0] - 1), np.diff(ptr))
    finite = np.isfinite(rates)
    # flows on no link are unconstrained; every other flow has a finite rate
    assert (finite == (np.diff(ptr) > 0)).all()
    load = np.bincount(links, weights=coef * np.where(finite, rates, 0)[row],
                       minlength=cap.shape[0])
    assert (load <= cap * (1 + 1e-9)).all(), "a link is over capacity"
    for f in np.flatnonzero(finite):
        b = bneck[f]
        assert b in links[ptr[f]:ptr[f + 1]]
        assert load[b] >= cap[b] * (1 - 1e-9), "bottleneck link not saturated"
        on_b = np.unique(row[links == b])
        assert rates[f] / w[f] >= (rates[on_b] / w[on_b]).max() * (1 - 1e-9), \
            "flow does not have the largest level on its bottleneck"


def test_weights_and_two_links() -> None:
    # flow 0 on link 0 only; flow 1 on links 0 and 1; flow 2 on link 1 with weight 3
    ptr = np.array([0, 1, 3, 4])
    links = np.array([0, 0, 1, 1])
    rates, bneck = maxmin_numpy(ptr, links, np.ones(4), np.array([10.0, 8.0]),
                                np.array([1.0, 1.0, 3.0]))
    # link 1: level 8/4 = 2 -> flow 1 gets 2, flow 2 gets 6; link 0 leaves 8 for flow 0
    np.testing.assert_allclose(rates, [8.0, 2.0, 6.0])
    assert bneck.tolist() == [0, 1, 1]


def test_zero_capacity_stalls() -> None:
    rates, _ = maxmin_numba(np.array([0, 1, 2]), np.array([0, 1]), np.ones(2),
                            np.array([0.0, 5.0]), np.ones(2))
    assert rates.tolist() == [0.0, 5.0]


def _fill(fn: object, flows: np.ndarray, p: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    ptr, links, coef, cap, w = p
    n_flows = ptr.shape[0] - 1
    rem = cap.copy()
    demand = np.zeros(cap.shape[0])
    nlive = np.zeros(cap.shape[0], dtype=np.int64)
    rates = np.full(n_flows, -1.0)
    bneck = np.full(n_flows, -2, dtype=np.int64)
    levels = fn(flows, ptr, links, coef, w, rem, demand, nlive, rates,  # type: ignore[operator]
                bneck)
    assert not demand.any() and not nlive.any(), "scratch arrays not left zero"
    return rates, bneck, rem, np.array([levels])


@settings(max_examples=examples(150))
@given(problems(), st.randoms(use_true_random=False))
def test_link_driven_fill_equals_scan(p: tuple[np.ndarray, ...], rnd: object) -> None:
    """The link-driven fill gives bit-identical rates, bottlenecks and leftover capacity
    to the level-by-level scan it replaced, for any subset of flows in any order."""
    n_flows = p[0].shape[0] - 1
    flows = list(range(n_flows))
    rnd.shuffle(flows)  # type: ignore[attr-defined]
    flows = flows[: max(1, rnd.randint(1, n_flows))]  # type: ignore[attr-defined]
    sel = np.array(flows, dtype=np.int64)
    a = _fill(fill_component, sel, p)
    b = _fill(fill_component_scan, sel, p)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


def test_all_to_all_fat_tree_matches_reference() -> None:
    """A 36-host all-to-all by ECMP (1,260 flows, many water levels): numba = numpy."""
    fab = host_fat_tree(36)
    n = 36
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    keep = a != b
    ex = expand(fab, fab.gpus[a[keep]], fab.gpus[b[keep]], np.full(int(keep.sum()), 1e6))
    cap = fab.link_capacity.astype(np.float64)
    rates, bneck = maxmin_numpy(ex.flow_ptr, ex.links, ex.coef, cap, ex.weight)
    r2, b2 = maxmin_numba(ex.flow_ptr, ex.links, ex.coef, cap, ex.weight)
    np.testing.assert_allclose(r2, rates, rtol=1e-12)
    assert (b2 == bneck).all()
    assert np.unique(rates).shape[0] > 10  # a real multi-level problem
