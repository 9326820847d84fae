# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-calls
# mypy: disable-error-code="no-any-return"
"""A tiny event kernel: a binary heap of ``(time, seq, kind, a, b)`` in numpy arrays.

Events with equal times pop in the order they were pushed (``seq`` breaks ties), so a run
is deterministic. The heap lives in two arrays (``times``, ``ints``) and a counter array
``c`` whose slot :data:`C_HN` is the heap size and :data:`C_SEQ` the next sequence
number; every function is numba-compiled and cached.

Example
-------
>>> import numpy as np
>>> times, ints, c = new_heap(8), np.zeros((8, 4), np.int64), np.zeros(4, np.int64)
>>> push(times, ints, c, 2.0, 1, 10, 0); push(times, ints, c, 1.0, 2, 20, 0)
>>> push(times, ints, c, 1.0, 3, 30, 0)
>>> out = np.zeros(3, np.int64)
>>> [(pop(times, ints, c, out), int(out[0])) for _ in range(3)]
[(1.0, 2), (1.0, 3), (2.0, 1)]
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

#: Counter slots shared with the engine (``c`` array).
C_HN = 0
C_SEQ = 1
C_OVERFLOW = 2


def new_heap(capacity: int) -> NDArray[np.float64]:
    """Time array of a heap with room for ``capacity`` events."""
    return np.zeros(max(int(capacity), 1), dtype=np.float64)


@njit(cache=True, inline="always")
def push(times: NDArray[np.float64], ints: NDArray[np.int64], c: NDArray[np.int64],
         t: float, kind: int, a: int, b: int) -> None:  # pragma: no cover - compiled
    """Insert event ``kind(a, b)`` at time ``t``; sets ``c[C_OVERFLOW]`` if full."""
    n = c[C_HN]
    if n >= times.shape[0]:
        c[C_OVERFLOW] = 1
        return
    seq = c[C_SEQ]
    c[C_SEQ] = seq + 1
    i = n
    while i > 0:
        p = (i - 1) >> 1
        tp = times[p]
        if tp < t or (tp == t and ints[p, 0] < seq):
            break
        times[i] = tp
        ints[i, 0] = ints[p, 0]
        ints[i, 1] = ints[p, 1]
        ints[i, 2] = ints[p, 2]
        ints[i, 3] = ints[p, 3]
        i = p
    times[i] = t
    ints[i, 0] = seq
    ints[i, 1] = kind
    ints[i, 2] = a
    ints[i, 3] = b
    c[C_HN] = n + 1


@njit(cache=True)
def pop(times: NDArray[np.float64], ints: NDArray[np.int64], c: NDArray[np.int64],
        out: NDArray[np.int64]) -> float:  # pragma: no cover - compiled
    """Remove the earliest event; write ``(kind, a, b)`` to ``out`` and return its time."""
    n = c[C_HN]
    t0 = times[0]
    out[0] = ints[0, 1]
    out[1] = ints[0, 2]
    out[2] = ints[0, 3]
    n -= 1
    c[C_HN] = n
    if n == 0:
        return t0
    t = times[n]
    s0 = ints[n, 0]
    s1 = ints[n, 1]
    s2 = ints[n, 2]
    s3 = ints[n, 3]
    i = 0
    while True:
        l = 2 * i + 1
        if l >= n:
            break
        r = l + 1
        m = l
        if r < n and (times[r] < times[l] or (times[r] == times[l] and
                                               ints[r, 0] < ints[l, 0])):
            m = r
        if times[m] < t or (times[m] == t and ints[m, 0] < s0):
            times[i] = times[m]
            ints[i, 0] = ints[m, 0]
            ints[i, 1] = ints[m, 1]
            ints[i, 2] = ints[m, 2]
            ints[i, 3] = ints[m, 3]
            i = m
        else:
            break
    times[i] = t
    ints[i, 0] = s0
    ints[i, 1] = s1
    ints[i, 2] = s2
    ints[i, 3] = s3
    return t0
