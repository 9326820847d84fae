"""Max-min fairness properties of the solvers (numpy reference vs numba)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends.flow.maxmin import maxmin_numba, maxmin_numpy


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
