"""Paths as compressed rows of link ids, and the :class:`Router` protocol.

A router answers "which links does a transfer from node ``a`` to node ``b`` cross?". For
many transfers at once it returns :class:`Paths`: row ``i`` holds the link ids of the path
of transfer ``i`` (compressed sparse rows: ``ptr`` and ``links``), so that per-link loads
are one ``np.bincount`` away.

Example
-------
>>> import numpy as np
>>> p = Paths.from_rows([[0, 1], [], [2]])
>>> p.row(0).tolist(), p.lengths().tolist()
([0, 1], [2, 0, 1])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int32]
I64Array = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Paths:
    """One path per transfer, as CSR rows of link ids (``links[ptr[i]:ptr[i+1]]``)."""

    ptr: I64Array
    links: IntArray

    @staticmethod
    def from_rows(rows: Sequence[Sequence[int] | IntArray]) -> Paths:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        if len(rows) and ptr[-1]:
            links = np.concatenate([np.asarray(r, dtype=np.int32) for r in rows])
        else:
            links = np.zeros(0, dtype=np.int32)
        return Paths(ptr=ptr, links=links.astype(np.int32, copy=False))

    @staticmethod
    def from_padded(padded: NDArray[np.int64] | IntArray) -> Paths:
        """Build from a 2-D array whose rows are paths padded with ``-1``."""
        mask = padded >= 0
        lengths = mask.sum(axis=1).astype(np.int64)
        ptr = np.zeros(padded.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=ptr[1:])
        return Paths(ptr=ptr, links=padded[mask].astype(np.int32))

    def __len__(self) -> int:
        return int(self.ptr.shape[0] - 1)

    def row(self, i: int) -> IntArray:
        return self.links[self.ptr[i] : self.ptr[i + 1]]

    def lengths(self) -> I64Array:
        return np.diff(self.ptr)

    def row_ids(self) -> I64Array:
        """The transfer index of every entry of ``links``."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths())

    def link_load(self, weights: FloatArray, n_links: int) -> FloatArray:
        """Sum of ``weights[i]`` over the links of each path ``i`` (bytes per link)."""
        w = np.asarray(weights, dtype=np.float64)
        load = np.bincount(self.links, weights=np.repeat(w, self.lengths()), minlength=n_links)
        return np.asarray(load, dtype=np.float64)


@runtime_checkable
class Router(Protocol):
    """Routing of a fabric: one path per transfer (ECMP by hash) or the whole ECMP set."""

    def route_many(
        self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64], link_up: NDArray[np.bool_]
    ) -> Paths:
        """One path per (src, dst) pair, chosen among equal-cost paths by ``hashes``."""
        ...

    def ecmp_paths(self, src: int, dst: int, link_up: NDArray[np.bool_], limit: int) -> list[
        IntArray
    ]:
        """All equal-cost paths from ``src`` to ``dst`` (at most ``limit``)."""
        ...


def distinct_up_paths(rows: NDArray[np.int64], link_up: NDArray[np.bool_], limit: int
                      ) -> list[IntArray]:
    """Distinct paths among ``rows`` (link ids padded with -1) whose links are all up.

    >>> import numpy as np
    >>> rows = np.array([[0, 1, -1], [0, 1, -1], [2, 3, -1]])
    >>> [p.tolist() for p in distinct_up_paths(rows, np.array([True] * 4), 8)]
    [[0, 1], [2, 3]]
    """
    seen: set[tuple[int, ...]] = set()
    out: list[IntArray] = []
    for r in rows:
        path = tuple(int(x) for x in r if x >= 0)
        if path in seen or not all(link_up[list(path)]):
            continue
        seen.add(path)
        out.append(np.asarray(path, dtype=np.int32))
        if len(out) >= limit:
            break
    return out
