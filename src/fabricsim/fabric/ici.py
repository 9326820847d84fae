"""TPU slices: chips joined by their inter-chip interconnect (ICI) as a 2-D or 3-D torus.

A TPU host (a "server" here) holds a few chips (4 on v4, v5p and TPU7x laid out 2x2x1; 8 on
v5e and v6e laid out 2x4). A **slice** is a block of chips of one pod, ``X×Y×Z`` (or
``X×Y``), carved out of the pod by the scheduler; every chip has one ICI port per direction
of each dimension (six in 3-D, four in 2-D) and links straight to its neighbours, with no
switch. Chips of different slices talk over the hosts' data-centre network (DCN) NICs, the
scale-out network of the cluster.

Which edges of a slice close into rings (wraparound links) is the pod's rule:

* 3-D pods (v4, v5p, TPU7x) are built of 4x4x4 **cubes** whose faces are joined through
  optical circuit switches (OCS): a slice of whole cubes (every dimension a multiple of 4)
  has wraparound links in every dimension, a 3-D torus; a smaller slice is a 3-D mesh
  (Cloud TPU v4 and v5p system architecture pages). A slice ``k×k×2k`` or ``k×2k×2k``
  of whole cubes may also be wired as a **twisted torus**: the wraparound links of the
  short dimensions land ``L/2`` further along each long dimension (``L`` its size),
  which shortens the longest routes and raises bisection bandwidth (Jouppi et al., ISCA
  2023; the pages' "Supports twisted?" column).
* 2-D pods (v5e, v6e) are one fixed 16x16 torus: a dimension that spans the whole pod wraps,
  a shorter one is a line (our reading of the v5e/v6e pages, which call the 256-chip pod a
  2-D torus and list smaller slices without wraparound).

Routing is dimension-order and minimal, as the TPU's ICI routers do: each dimension in turn,
the shorter way round a ring, ties (exactly half-way) split by the flow's hash. On a twisted
torus the short dimensions go first and the long ones finish from wherever the twist left
the packet. A route that would cross a link that is down takes another dimension order
(ICI resilience routes around a failed optical link the same way).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("tpu-v5p", nodes=16)          # 64 chips: one 4x4x4 cube
>>> fab.info.ici_slice, fab.info.extra["ici"]["wrap"]
((4, 4, 4), [True, True, True])
>>> small = build_cluster("tpu-v5p", nodes=8)         # 32 chips: a 2x4x4 mesh
>>> small.info.extra["ici"]["wrap"]
[False, False, False]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.kinds import LinkKind
from fabricsim.fabric.network import PAD
from fabricsim.fabric.paths import IntArray


@dataclass(frozen=True)
class PodRules:
    """What slices a TPU generation's pod can be cut into (from the system preset)."""

    host_shape: tuple[int, ...]
    max_slice: tuple[int, ...]
    cube: int  # edge of the OCS-joined cube (3-D pods); 0 for a fixed 2-D torus pod
    twist: bool  # the pod can wire a twisted torus

    @property
    def ndim(self) -> int:
        return len(self.host_shape)

    @property
    def chips_per_host(self) -> int:
        return math.prod(self.host_shape)


def shape_name(dims: Sequence[int]) -> str:
    """A slice shape as Google writes it.

    >>> shape_name((4, 4, 8))
    '4x4x8'
    """
    return "x".join(str(int(d)) for d in dims)


def parse_shape(value: object, ndim: int) -> tuple[int, ...]:
    """A slice shape from ``"4x4x8"`` or ``[4, 4, 8]`` (``params.ici_slice``).

    >>> parse_shape("4x4x8", 3)
    (4, 4, 8)
    >>> parse_shape([16, 16], 2)
    (16, 16)
    """
    eg = "4x4x8" if ndim == 3 else "8x16"
    raw: list[object]
    if isinstance(value, str):
        raw = [x.strip() for x in value.lower().split("x")]
    elif isinstance(value, list | tuple):
        raw = list(value)
    else:
        raise ConfigError(f"ici_slice must be a shape such as {eg}, got {value!r}",
                          field="params.ici_slice")
    dims: list[int] = []
    for x in raw:
        try:
            v = int(str(x))
        except ValueError:
            v = 0
        if v < 1 or str(x) != str(v):
            raise ConfigError(f"ici_slice {value!r}: every dimension must be a whole number "
                              f">= 1 (e.g. {eg})",
                              field="params.ici_slice")
        dims.append(v)
    if len(dims) != ndim:
        raise ConfigError(f"ici_slice {value!r} has {len(dims)} dimensions; this pod's ICI is "
                          f"a {ndim}-D torus, e.g. {eg}",
                          field="params.ici_slice")
    return tuple(dims)


def slice_problem(dims: tuple[int, ...], rules: PodRules, system: str = "this pod") -> str:
    """Why ``dims`` is not a slice the pod can make (``""`` if it is)."""
    if any(d % h for d, h in zip(dims, rules.host_shape, strict=True)):
        return (f"each dimension must be a multiple of the {system} host's chip layout "
                f"{shape_name(rules.host_shape)}")
    if any(d > m for d, m in zip(sorted(dims), sorted(rules.max_slice), strict=True)):
        return f"it is larger than {system}'s largest slice {shape_name(rules.max_slice)}"
    cube_chips = rules.cube ** rules.ndim
    if rules.cube and math.prod(dims) >= cube_chips and any(d % rules.cube for d in dims):
        return (f"a slice of {math.prod(dims)} chips is made of whole {rules.cube}x{rules.cube}x"
                f"{rules.cube} cubes, so every dimension must be a multiple of {rules.cube}")
    if rules.cube and math.prod(dims) < cube_chips and any(d > rules.cube for d in dims):
        return f"a slice smaller than one cube must fit inside a {rules.cube}-chip edge"
    if (not rules.cube or math.prod(dims) < cube_chips) and any(d & (d - 1) for d in dims):
        return ("below a whole cube (and on a 2-D pod) every dimension is a power of two, "
                "as the pod's published slice shapes are")
    return ""


def check_slice(dims: tuple[int, ...], rules: PodRules, system: str) -> None:
    """ConfigError (field ``params.ici_slice``) unless ``dims`` is a slice the pod can make.

    >>> r = PodRules((2, 2, 1), (16, 16, 24), 4, True)
    >>> check_slice((4, 4, 8), r, "tpu-v5p")
    >>> check_slice((4, 6, 4), r, "tpu-v5p")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: params.ici_slice: ici_slice 4x6x4 is not a slice tpu-v5p can make: a slice of 96 chips is made of whole 4x4x4 cubes, so every dimension must be a multiple of 4
    """  # noqa: E501
    why = slice_problem(dims, rules, system)
    if why:
        near = legal_shapes(rules, math.prod(dims))
        hint = f"; {shape_name(near[0])} has as many chips" if near else ""
        raise ConfigError(f"ici_slice {shape_name(dims)} is not a slice {system} can "
                          f"make: {why}{hint}", field="params.ici_slice")


def legal_shapes(rules: PodRules, chips: int) -> list[tuple[int, ...]]:
    """Every slice shape of ``chips`` chips the pod can make, most compact first.

    >>> legal_shapes(PodRules((2, 4), (16, 16), 0, False), 128)
    [(8, 16), (16, 8)]
    """
    top = max(rules.max_slice)
    steps = [range(h, top + 1, h) for h in rules.host_shape]
    out = [tuple(d) for d in itertools.product(*steps)
           if math.prod(d) == chips and not slice_problem(tuple(d), rules)]
    return sorted(out, key=lambda d: (max(d) - min(d), max(d), d))


def default_slice(rules: PodRules, chips: int, system: str) -> tuple[int, ...]:
    """The most compact legal slice of ``chips`` chips (ConfigError if there is none)."""
    shapes = legal_shapes(rules, chips)
    if not shapes:
        raise ConfigError(f"{chips} chips of {system} make no slice its pod can cut (slices "
                          f"are blocks of {shape_name(rules.host_shape)} hosts up to "
                          f"{shape_name(rules.max_slice)}); choose a node count "
                          f"that does, or set params.ici_slice and join several slices "
                          f"over the DCN", field="nodes")
    return shapes[0]


def slice_wrap(dims: tuple[int, ...], rules: PodRules) -> tuple[bool, ...]:
    """Which dimensions close into rings (see the module docstring)."""
    if rules.cube:
        whole = all(d % rules.cube == 0 for d in dims)
        return tuple(whole and d > 1 for d in dims)
    return tuple(d == m and d > 2 for d, m in zip(dims, rules.max_slice, strict=True))


def twistable(dims: tuple[int, ...], rules: PodRules) -> bool:
    """A ``k×k×2k`` or ``k×2k×2k`` slice of whole cubes on a pod that twists."""
    if not rules.twist or not rules.cube or len(dims) != 3 \
            or any(d % rules.cube for d in dims):
        return False
    a, b, c = sorted(dims)
    return (2 * a == b == c) or (2 * a == 2 * b == c)


def _ring_move(delta: NDArray[np.int64], n: int, tie: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Signed hops from ``delta`` round a ring of ``n``: the shorter way, ``tie`` picking
    forward when both ways are as long."""
    fwd = delta % n
    back = fwd - n
    return np.where((fwd < -back) | ((fwd == -back) & tie), fwd, back)


def _rows_up(rows: NDArray[np.int64], link_up: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Which PAD-padded rows of link ids cross only links that are up."""
    return np.asarray(np.where(rows >= 0, link_up[np.maximum(rows, 0)], True).all(axis=1),
                      dtype=np.bool_)


@dataclass(eq=False)
class IciSlices:
    """Index tables to route chip pairs of one slice over its ICI links."""

    dims: tuple[int, ...]
    wrap: tuple[bool, ...]
    twisted: bool
    chips_per_slice: int
    coord: NDArray[np.int64]  # [chips_per_slice, ndim] coordinate of slice-local chip
    plus: NDArray[np.int64]  # [n_ranks, ndim] link chip -> + neighbour (-1 none)
    minus: NDArray[np.int64]  # [n_ranks, ndim] link chip -> - neighbour (-1 none)
    nbr_plus: NDArray[np.int64]  # [n_ranks, ndim] rank of the + neighbour (-1 none)
    nbr_minus: NDArray[np.int64]
    summary: dict[str, Any]

    @property
    def ndim(self) -> int:
        return len(self.dims)

    def slice_of(self, ranks: IntArray | NDArray[np.int64]) -> NDArray[np.int64]:
        return np.asarray(ranks, dtype=np.int64) // self.chips_per_slice

    def coords(self, ranks: IntArray | NDArray[np.int64]) -> NDArray[np.int64]:
        """Slice coordinates of ``ranks`` (``len(ranks) × ndim``)."""
        return self.coord[np.asarray(ranks, dtype=np.int64) % self.chips_per_slice]

    # ------------------------------------------------------------------ routing
    def _long_dim(self) -> int:
        return int(np.argmax(self.dims))

    def _moves(self, a: NDArray[np.int64], b: NDArray[np.int64], h: NDArray[np.uint64],
               order: tuple[int, ...]) -> list[tuple[int, NDArray[np.int64]]]:
        """Signed hop counts per dimension (in ``order``) of minimal routes ``a -> b``."""
        n = a.shape[0]
        dims = np.asarray(self.dims, dtype=np.int64)
        tie = ((h >> np.uint64(7)) & np.uint64(1)).astype(bool)
        if not self.twisted:
            out = []
            for d in order:
                delta = b[:, d] - a[:, d]
                out.append((d, _ring_move(delta, int(dims[d]), tie) if self.wrap[d] else delta))
            return out
        long_d = self._long_dim()
        half = int(dims[long_d]) // 2
        short = [d for d in range(self.ndim) if self.dims[d] < self.dims[long_d]]
        longs = [d for d in range(self.ndim) if d not in short]
        best = np.full(n, np.iinfo(np.int64).max)
        best_moves = np.zeros((n, self.ndim), dtype=np.int64)
        for choice in itertools.product((0, 1, -1), repeat=len(short)):
            mv = np.zeros((n, self.ndim), dtype=np.int64)
            shift = np.zeros(n, dtype=np.int64)
            for d, c in zip(short, choice, strict=True):
                delta = b[:, d] - a[:, d]
                if c == 0:
                    mv[:, d] = delta
                elif c == 1:  # forward across the wrap: + (n - a + b)
                    mv[:, d] = np.where(delta < 0, delta % dims[d], 10**9)
                    shift += np.where(delta < 0, half, 0)
                else:  # backward across the wrap
                    mv[:, d] = np.where(delta > 0, delta - dims[d], 10**9)
                    shift -= np.where(delta > 0, half, 0)
            cost = np.abs(mv[:, short]).sum(axis=1)
            for d in longs:
                mv[:, d] = _ring_move(b[:, d] - (a[:, d] + shift), int(dims[d]), tie)
                cost = cost + np.abs(mv[:, d])
            better = cost < best
            best = np.where(better, cost, best)
            best_moves[better] = mv[better]
        seq = [d for d in order if d in short] + [d for d in order if d in longs]
        return [(d, best_moves[:, d]) for d in seq]

    def route(self, ra: NDArray[np.int64], rb: NDArray[np.int64], h: NDArray[np.uint64],
              order: tuple[int, ...] | None = None) -> NDArray[np.int64]:
        """Rows of global link ids (PAD-padded) for chips ``ra[i] -> rb[i]`` of one slice."""
        ra = np.asarray(ra, dtype=np.int64)
        rb = np.asarray(rb, dtype=np.int64)
        moves = self._moves(self.coords(ra), self.coords(rb), h,
                            order if order is not None else tuple(range(self.ndim)))
        width = max(sum(int(np.abs(m).max()) if m.size else 0 for _, m in moves), 1)
        out = np.full((ra.shape[0], width), PAD, dtype=np.int64)
        cur = ra.copy()
        col = np.zeros(ra.shape[0], dtype=np.int64)
        rows = np.arange(ra.shape[0])
        for d, m in moves:
            steps = np.abs(m)
            for k in range(int(steps.max()) if steps.size else 0):
                go = steps > k
                r = rows[go]
                fwd = m[go] > 0
                link = np.where(fwd, self.plus[cur[go], d], self.minus[cur[go], d])
                out[r, col[go]] = link
                cur[go] = np.where(fwd, self.nbr_plus[cur[go], d], self.nbr_minus[cur[go], d])
                col[go] += 1
        return out

    def route_avoiding(self, ra: NDArray[np.int64], rb: NDArray[np.int64],
                       h: NDArray[np.uint64], link_up: NDArray[np.bool_]) -> NDArray[np.int64]:
        """As :meth:`route`; rows that cross a link that is down take another dimension
        order (PAD rows when every order is cut)."""
        out = self.route(ra, rb, h)
        ok = _rows_up(out, link_up)
        if ok.all():
            return out
        bad = np.flatnonzero(~ok)
        fixed = np.full((bad.size, out.shape[1]), PAD, dtype=np.int64)
        done = np.zeros(bad.size, dtype=bool)
        for order in itertools.permutations(range(self.ndim)):
            for flip in (np.uint64(0), np.uint64(1 << 7)):
                todo = np.flatnonzero(~done)
                if not todo.size:
                    break
                alt = self.route(ra[bad[todo]], rb[bad[todo]], h[bad[todo]] ^ flip, order)
                good = _rows_up(alt, link_up)
                if fixed.shape[1] < alt.shape[1]:
                    fixed = np.hstack([fixed, np.full((bad.size, alt.shape[1] - fixed.shape[1]),
                                                      PAD, dtype=np.int64)])
                sel = todo[good]
                fixed[sel, : alt.shape[1]] = alt[good]
                done[sel] = True
        width = max(out.shape[1], fixed.shape[1])
        res = np.full((out.shape[0], width), PAD, dtype=np.int64)
        res[:, : out.shape[1]] = out
        res[bad] = PAD
        res[bad, : fixed.shape[1]] = fixed
        return res


def _slice_coords(dims: tuple[int, ...], host_shape: tuple[int, ...]
                  ) -> NDArray[np.int64]:
    """Coordinates of every slice-local chip: hosts tile the slice in row-major order of
    host blocks, chips inside a host in row-major order of the host's layout."""
    hosts_grid = tuple(d // h for d, h in zip(dims, host_shape, strict=True))
    n_hosts = math.prod(hosts_grid)
    per = math.prod(host_shape)
    hc = np.array(np.unravel_index(np.arange(n_hosts), hosts_grid)).T  # [n_hosts, ndim]
    lc = np.array(np.unravel_index(np.arange(per), host_shape)).T  # [per, ndim]
    coord = (hc[:, None, :] * np.asarray(host_shape)[None, None, :] + lc[None, :, :])
    return np.asarray(coord.reshape(n_hosts * per, len(dims)), dtype=np.int64)


def add_ici_slices(b: FabricBuilder, gpus: IntArray, servers: int, dims: tuple[int, ...],
                   rules: PodRules, twisted: bool, link_bw: float, link_latency: float
                   ) -> IciSlices:
    """Join the chips of every ``prod(dims)``-chip block of consecutive hosts into a slice.

    ``gpus`` are the chips' node ids in rank order; ``link_bw`` is one ICI link's bytes/s
    per direction and ``link_latency`` its per-hop latency (s).
    """
    per_slice = math.prod(dims)
    hosts_per_slice = per_slice // rules.chips_per_host
    if servers % hosts_per_slice:
        raise ConfigError(f"{servers} hosts do not divide into slices of "
                          f"{shape_name(dims)} ({hosts_per_slice} hosts each); use a "
                          f"multiple of {hosts_per_slice} nodes", field="nodes")
    n_slices = servers // hosts_per_slice
    wrap = slice_wrap(dims, rules)
    coord = _slice_coords(dims, rules.host_shape)
    index = np.empty(per_slice, dtype=np.int64)
    index[np.ravel_multi_index(tuple(coord.T), dims)] = np.arange(per_slice)
    n = gpus.shape[0]
    ndim = len(dims)
    plus = np.full((n, ndim), -1, dtype=np.int64)
    minus = np.full((n, ndim), -1, dtype=np.int64)
    nbr_plus = np.full((n, ndim), -1, dtype=np.int64)
    nbr_minus = np.full((n, ndim), -1, dtype=np.int64)
    long_d = int(np.argmax(dims))
    ranks = np.arange(n, dtype=np.int64)
    sl = ranks // per_slice
    c = coord[ranks % per_slice]
    cables = 0
    crossing = [0] * ndim  # cables of slice 0 across the middle of each dimension
    for d in range(ndim):
        if dims[d] < 2:
            continue
        nxt = c.copy()
        nxt[:, d] += 1
        at_edge = nxt[:, d] == dims[d]
        has = ~at_edge | np.bool_(wrap[d])
        nxt[:, d] %= dims[d]
        if twisted and dims[d] < dims[long_d]:
            for e in range(ndim):
                if dims[e] == dims[long_d]:
                    nxt[at_edge, e] = (nxt[at_edge, e] + dims[e] // 2) % dims[e]
        if dims[d] == 2 and wrap[d]:
            has &= ~at_edge  # two chips: one cable pair, not two
        src = ranks[has]
        dst = sl[has] * per_slice + index[np.ravel_multi_index(tuple(nxt[has].T), dims)]
        first = sl[has] == 0
        for e in range(ndim):
            half = dims[e] // 2
            crossing[e] += int(((c[has, e] < half) != (nxt[has, e] < half))[first].sum())
        fwd, rev = b.add_links(gpus[src], gpus[dst], link_bw, link_latency, LinkKind.ICI)
        plus[src, d] = fwd
        minus[dst, d] = rev
        nbr_plus[src, d] = dst
        nbr_minus[dst, d] = src
        cables += int(src.size)
    summary: dict[str, Any] = {
        "slice": list(dims), "wrap": list(wrap), "twisted": twisted, "slices": n_slices,
        "chips_per_slice": per_slice, "hosts_per_slice": hosts_per_slice,
        "ports_per_chip": 2 * ndim, "cables": cables,
        "link_gbyte_s": link_bw / 1e9,
        "bisection_bandwidth": float(min((crossing[e] for e in range(ndim)
                                          if dims[e] > 1 and dims[e] % 2 == 0),
                                         default=0) * link_bw)}
    return IciSlices(dims=dims, wrap=wrap, twisted=twisted, chips_per_slice=per_slice,
                     coord=coord, plus=plus,
                     minus=minus, nbr_plus=nbr_plus, nbr_minus=nbr_minus, summary=summary)
