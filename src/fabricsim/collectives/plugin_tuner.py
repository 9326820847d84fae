"""The network plugin's tuner: the (algorithm, protocol) AWS's EFA plugin makes NCCL run.

NCCL lets a tuner plugin overrule its own cost model: it loads the library
``NCCL_TUNER_PLUGIN`` names or, without one, looks for a tuner in the network plugin's
library (``src/plugin/tuner.cc``), and after it has costed every (algorithm, protocol) it
hands the table to the plugin, which may set an entry to zero so that NCCL runs it.
aws-ofi-nccl, the EFA plugin AWS ships on its GPU instances, carries such a tuner: on
p5/p5e, p5en, p6-b200 and p6-b300, for a communicator of more than two instances with 8
GPUs (or 1, or on p5 2) per instance, it looks the point (message bytes, ranks) up in
regions AWS measured for that platform and collective, and zeroes the pair of the first
region that holds it, if NCCL may run that pair there; outside every region, at one or two
instances, or for a pair NCCL may not run, NCCL's own model decides
(``src/tuner/nccl_ofi_regions.cpp``, ``region_get_coll_info_internal_v3``).

The regions ship as data, ``aws_ofi_nccl_regions.json`` (from release v1.21.1; see its
``source``): polygons in log2(bytes) × log2(ranks), as the plugin tests them since
v1.18 (earlier releases drew the same vertices' edges in bytes × ranks, which differs only
along slanted edges); a point on an edge counts as inside. The plugin's own channel and
chunk settings (tree LL128 on p6-b200 at 4-32 MiB, p5en since 2026) are not modelled: the
model runs NCCL's.

Example
-------
>>> t = region_tuner("aws-p5")
>>> t.pick("all_reduce", 64 * 2**20, ranks=32, servers=4,
...        pairs=[("ring", "ll128"), ("tree", "ll128"), ("nvlstree", "simple")])
('ring', 'll128')
>>> t.pick("all_reduce", 64 * 2**20, ranks=16, servers=2, pairs=[("tree", "ll128")]) is None
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.shipped import shipped_json

__all__ = ["Region", "RegionTuner", "region_tuner", "tuner_platforms"]

#: Largest message and rank count the plugin's regions reach (``TUNER_MAX_SIZE``,
#: ``TUNER_MAX_RANKS``).
MAX_SIZE = 100.0 * 2**30
MAX_RANKS = float(2**20)
#: The plugin's stand-in for a zero coordinate before its log2 (``transform_log2``).
ZERO = 1e-6
#: How near (in log2 units) an edge a point counts as on it.
EDGE_EPS = 1e-10
#: The plugin leaves communicators of at most this many instances to NCCL.
MIN_SERVERS = 3

_Point = tuple[float, float]


def _log2(x: float, y: float) -> _Point:
    return (math.log2(x if x > 0 else ZERO), math.log2(y if y > 0 else ZERO))


def extend(a: _Point, b: _Point, to: _Point) -> _Point:
    """The point where the line through ``a`` and ``b`` (log2 coordinates) reaches the
    nearer of ``to``'s x or y: how the plugin carries a region's boundary out to the
    largest size and rank count.

    >>> extend((0.0, 1.0), (1.0, 2.0), (10.0, 5.0))
    (4.0, 5.0)
    """
    if a[0] == b[0]:
        return (a[0], to[1])
    if a[1] == b[1]:
        return (to[0], a[1])
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    y = m * to[0] + c
    return (to[0], y) if y < to[1] else ((to[1] - c) / m, to[1])


@dataclass(frozen=True)
class Region:
    """One region: the pair it chooses and its polygon's vertices, ``(k, 2)`` in
    log2(bytes), log2(ranks)."""

    algorithm: str
    protocol: str
    vertices: NDArray[np.float64]

    def holds(self, nbytes: float, ranks: int) -> bool:
        """Whether (``nbytes``, ``ranks``) lies inside the polygon or on its edge.

        >>> sq = Region("ring", "ll", np.array([[0.0, 0.0], [4.0, 0.0], [4.0, 4.0], [0.0, 4.0]]))
        >>> sq.holds(2**2, 2**2), sq.holds(2**4, 2**2), sq.holds(2**5, 2**2)
        (True, True, False)
        """
        px, py = _log2(nbytes, ranks)
        a = self.vertices
        b = np.roll(a, -1, axis=0)
        d = b - a
        length2 = (d * d).sum(axis=1)
        t = np.where(length2 > 0, ((px - a[:, 0]) * d[:, 0] + (py - a[:, 1]) * d[:, 1])
                     / np.where(length2 > 0, length2, 1.0), 0.0)
        on = (t >= 0.0) & (t <= 1.0)
        fx, fy = a[:, 0] + t * d[:, 0], a[:, 1] + t * d[:, 1]
        if bool(np.any(on & (np.hypot(fx - px, fy - py) < EDGE_EPS))):
            return True
        # even-odd crossings of a ray towards +x (half-open in y: each vertex counted once)
        up = (a[:, 1] > py) != (b[:, 1] > py)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_at = a[:, 0] + (py - a[:, 1]) * d[:, 0] / d[:, 1]
        return bool(np.count_nonzero(up & (x_at > px)) % 2)


@dataclass(frozen=True)
class RegionTuner:
    """The plugin's regions of one platform: per GPUs per instance and collective, in the
    order it tries them."""

    platform: str
    release: str
    regions: Mapping[tuple[int, str], tuple[Region, ...]]

    def pick(self, collective: str, nbytes: float, ranks: int, servers: int,
             pairs: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
        """The pair of ``pairs`` (what NCCL may run here) the plugin makes NCCL run for
        ``nbytes`` over ``ranks`` GPUs on ``servers`` instances, or ``None`` where it
        leaves the choice to NCCL."""
        if servers < MIN_SERVERS or ranks % servers:
            return None
        allowed = set(pairs)
        for r in self.regions.get((ranks // servers, collective), ()):
            if (r.algorithm, r.protocol) in allowed and r.holds(nbytes, ranks):
                return (r.algorithm, r.protocol)
        return None


def _resolve(v: Any, ext: Mapping[str, _Point]) -> _Point:
    """A vertex of the data file in log2 coordinates."""
    if isinstance(v, str):
        return ext[v]

    def coord(c: Any, axis: int) -> float:
        if c == "max_size":
            return math.log2(MAX_SIZE)
        if c == "max_ranks":
            return math.log2(MAX_RANKS)
        if isinstance(c, str):
            name, _, which = c.partition(".")
            return ext[name][0 if which == "x" else 1]
        return _log2(float(c), 1.0)[0] if axis == 0 else _log2(1.0, float(c))[1]

    return (coord(v[0], 0), coord(v[1], 1))


@functools.cache
def _document() -> dict[str, Any]:
    return shipped_json("fabricsim.collectives", "aws_ofi_nccl_regions.json")


def tuner_platforms() -> tuple[str, ...]:
    """The platforms the shipped regions cover (a system's ``nccl_tuner_regions``).

    >>> "aws-p5" in tuner_platforms()
    True
    """
    return tuple(_document()["platforms"])


@functools.cache
def region_tuner(platform: str) -> RegionTuner | None:
    """The plugin's tuner on ``platform`` (``None``: the plugin has none there)."""
    doc = _document()
    spec = doc["platforms"].get(platform)
    if spec is None:
        return None
    regions: dict[tuple[int, str], tuple[Region, ...]] = {}
    for ppn, colls in spec.items():
        for coll, block in colls.items():
            ext: dict[str, _Point] = {}
            for name, e in block["extensions"].items():
                ext[name] = extend(_resolve(e["a"], ext), _resolve(e["b"], ext),
                                   _resolve(e["to"], ext))
            regions[(int(ppn), coll)] = tuple(
                Region(r["algorithm"], r["protocol"],
                       np.array([_resolve(v, ext) for v in r["vertices"]], dtype=float))
                for r in block["regions"])
    return RegionTuner(platform=platform, release=str(doc["release"]), regions=regions)
