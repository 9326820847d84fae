"""Collectives as XLA runs them on a TPU slice's ICI torus.

On a TPU slice the compiler, not a library like NCCL, lays collectives out, and it lays
them along the torus: a reduction over a block of chips is a **reduce-scatter along each
dimension in turn, then an all-gather back** (the "multi-dimensional ring"), every ring
**bidirectional** (half of the data each way round, so both ports of a dimension work), and
the data split into as many parts as the block has dimensions, each part taking the
dimensions in a rotated order, so every ICI port of a chip is busy at every stage (Kumar et
al., "Exploring the limits of concurrency in ML training on Google TPUs", MLSys 2021; JAX
scaling book, "How to think about TPUs"). A chip then moves ``2(n−1)/n·S`` over ``2D``
ports: bus bandwidth ``2·D·B`` per chip for ``D`` dimensions of ports of ``B`` bytes/s,
which is how Google states a pod's all-reduce bandwidth (v5e: 256 × 4 × 50 GB/s = 51.2 TB/s).

Dimensions without wraparound (a slice smaller than a cube, a line of a 2-D pod) still run
their rings: the ring's closing hop is routed back along the line over the links the other
direction uses, so that dimension gets half the bandwidth, the mechanism behind Google's
"a torus performs better than a mesh".

Groups: a block of the slice (every combination of the coordinates its members use, such
as a tensor-parallel axis of a device mesh) runs the torus algorithm over the dimensions it
spans; any other group runs one bidirectional ring in rank order. A group spanning several
slices reduces hierarchically, as multislice training does: reduce-scatter inside each
slice over ICI, all-reduce of each chip's shard with its peers in the other slices over the
data-centre network, all-gather inside the slice.

All-to-all posts every pair's transfer at once, routed dimension-order over the torus.

The ``ideal`` protocol is used: transfers run at link rate with each link's latency (ICI's
per-hop latency is a catalog fact). XLA's launch and synchronisation overheads are not
modelled (small collectives come out fast by that overhead, unknown publicly).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives import run_collective
>>> fab = build_cluster("tpu-v5e", nodes=32)           # 16x16 pod
>>> r = run_collective(fab, "all_reduce", 2**30)
>>> r.algorithm, round(r.busbw / 1e9, -1)             # 4 ports x 50 GB/s
('xla_torus', 200.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import NDArray

from fabricsim.collectives.registry import Algorithm, Group, register, step
from fabricsim.errors import ScheduleError
from fabricsim.fabric.ici import IciSlices
from fabricsim.schedule.core import Step

#: Largest number of point-to-point transfers an XLA all-to-all schedule may hold.
MAX_PAIRS = 8_000_000


def on_tpu(group: Group) -> bool:
    """Whether the group's fabric is built of TPU slices."""
    return bool(group.fabric.info.ici_slice)


def _check(group: Group, collective: str) -> str | None:
    if not on_tpu(group):
        return "XLA's collectives run on TPU slices (a system such as tpu-v5p)"
    return None


@dataclass(frozen=True)
class Rings:
    """Rings of a group of ``n`` members: ``succ[a][i]`` is member ``i``'s successor on
    the rings of axis ``a`` (``size[a]`` members each)."""

    succ: list[NDArray[np.int64]]
    pred: list[NDArray[np.int64]]
    size: list[int]


def _axis_rings(coords: NDArray[np.int64]) -> Rings | None:
    """Rings along each varying coordinate of a block (``None`` if not a block)."""
    n = coords.shape[0]
    used = [np.unique(coords[:, d]) for d in range(coords.shape[1])]
    if math.prod(len(u) for u in used) != n:
        return None
    pos = np.stack([np.searchsorted(used[d], coords[:, d]) for d in range(coords.shape[1])],
                   axis=1)
    shape = tuple(len(u) for u in used)
    member_at = np.full(shape, -1, dtype=np.int64)
    member_at[tuple(pos.T)] = np.arange(n)
    if (member_at < 0).any():
        return None
    succ, pred, size = [], [], []
    for d, k in enumerate(shape):
        if k < 2:
            continue
        up = pos.copy()
        up[:, d] = (up[:, d] + 1) % k
        down = pos.copy()
        down[:, d] = (down[:, d] - 1) % k
        succ.append(member_at[tuple(up.T)])
        pred.append(member_at[tuple(down.T)])
        size.append(k)
    return Rings(succ, pred, size)


def _twisted_rings(group: Group, ici: IciSlices) -> Rings:
    """Rings of a whole twisted slice: each member's neighbours over its own ICI links, so
    a short dimension's ring goes through the twisted wraparound rather than back along
    the line. XLA lays its rings on the twisted links; the volume per stage is the
    untwisted one's (``n_d`` chips), the schedule's data layout is not tracked."""
    pos = np.full(group.fabric.n_gpus, -1, dtype=np.int64)
    pos[group.ranks] = np.arange(group.n)
    succ, pred, size = [], [], []
    for d, k in enumerate(ici.dims):
        if k < 2:
            continue
        succ.append(pos[ici.nbr_plus[group.ranks, d]])
        pred.append(pos[ici.nbr_minus[group.ranks, d]])
        size.append(k)
    return Rings(succ, pred, size)


def _rank_ring(n: int) -> Rings:
    idx = np.arange(n, dtype=np.int64)
    return Rings([np.roll(idx, -1)], [np.roll(idx, 1)], [n])


def _slices(group: Group) -> IciSlices:
    """The TPU slices the group's chips sit in."""
    ici = getattr(group.fabric.router, "ici", None)
    if ici is None:
        raise ScheduleError("XLA's collectives need a TPU slice fabric", field="algo")
    return cast(IciSlices, ici)


def _stages(group: Group, nodes: NDArray[np.int32], rings: Rings, nbytes: float,
            reduce: bool, gather: bool, deps: tuple[int, ...], label: str,
            first: int) -> tuple[list[Step], tuple[int, ...]]:
    """Reduce-scatter (``reduce``) then all-gather (``gather``) stages of the multi-axis
    bidirectional ring over ``rings`` for ``nodes`` (member -> node id); ``nbytes`` is
    the full buffer. Returns the steps (numbered from ``first``) and the final deps."""
    f = group.fabric
    axes = len(rings.size)
    if axes == 0:
        return [], deps
    out: list[Step] = []
    ends: list[int] = []
    for p in range(axes):
        order = [(p + k) % axes for k in range(axes)]
        shard = nbytes / axes
        sizes = []
        for a in order:
            sizes.append(shard)
            shard /= rings.size[a]
        plan = ([(a, s, "dst") for a, s in zip(order, sizes, strict=True)] if reduce else [])
        if gather:
            plan += [(a, s, "") for a, s in reversed(list(zip(order, sizes, strict=True)))]
        prev = deps
        for a, s, red in plan:
            k = rings.size[a]
            src = np.concatenate([nodes, nodes])
            dst = np.concatenate([nodes[rings.succ[a]], nodes[rings.pred[a]]])
            st = step(f, src, dst, s / (2 * k), repeat=k - 1, deps=prev, reduce_at=red,
                      label=f"{label} part{p} axis{a} {'rs' if red else 'ag'}")
            out.append(st)
            prev = (first + len(out) - 1,)
        ends.append(first + len(out) - 1)
    return out, tuple(ends)


def torus_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """Steps of XLA's torus ``collective`` (all_reduce, reduce_scatter, all_gather)."""
    n = group.n
    if n == 1:
        return []
    ici = _slices(group)
    ranks = group.ranks.astype(np.int64)
    slices, coords = ici.slice_of(ranks), ici.coords(ranks)
    uniq, inv = np.unique(slices, return_inverse=True)
    nodes = group.nodes.astype(np.int32)
    per = [np.flatnonzero(inv == i) for i in range(uniq.size)]
    if uniq.size == 1 or collective != "all_reduce" or len({x.size for x in per}) > 1:
        if uniq.size > 1:
            rings = _rank_ring(n)
        elif ici.twisted and n == ici.chips_per_slice:
            rings = _twisted_rings(group, ici)
        else:
            rings = _axis_rings(coords) or _rank_ring(n)
        reduce = collective in ("all_reduce", "reduce_scatter")
        gather = collective in ("all_reduce", "all_gather")
        steps, _ = _stages(group, nodes, rings, nbytes, reduce, gather, (), "xla", 0)
        return steps
    # several slices holding the same block: RS inside each, all-reduce across, AG inside
    m = per[0].size
    grid = np.stack([x[np.lexsort(coords[x].T[::-1])] for x in per])  # [slices, m]
    s_count = grid.shape[0]
    inner = _axis_rings(coords[grid[0]]) or _rank_ring(m)
    # every slice's inner rings at once, over members in grid order (slice i at i * m)
    offs = (np.arange(s_count, dtype=np.int64) * m)[:, None]
    rings = Rings([(offs + r[None, :]).ravel() for r in inner.succ],
                  [(offs + r[None, :]).ravel() for r in inner.pred], inner.size)
    in_grid = nodes[grid.ravel()]
    rs, deps = _stages(group, in_grid, rings, nbytes, True, False, (), "xla slice", 0)
    # across slices: each position's chips form a bidirectional ring over the DCN
    idx = np.arange(s_count)
    src = np.concatenate([grid, grid]).ravel()
    dst = np.concatenate([grid[np.roll(idx, -1)], grid[np.roll(idx, 1)]]).ravel()
    cross = step(group.fabric, nodes[src], nodes[dst], nbytes / m / (2 * s_count),
                 repeat=2 * (s_count - 1), deps=deps, reduce_at="dst",
                 label="xla across slices (DCN)")
    ag, _ = _stages(group, in_grid, rings, nbytes, False, True, (len(rs),), "xla slice",
                    len(rs) + 1)
    return [*rs, cross, *ag]


def alltoall_steps(group: Group, collective: str, nbytes: float, channels: int
                   ) -> list[Step]:
    """Every pair at once (all-to-all, ``S/n`` each); sendrecv: each member to the next."""
    n = group.n
    f = group.fabric
    if n == 1:
        return []
    nodes = group.nodes
    if collective == "sendrecv":
        return [step(f, nodes, np.roll(nodes, -1), nbytes, label="xla sendrecv")]
    if n * (n - 1) > MAX_PAIRS:
        raise ScheduleError(f"an all-to-all over {n:,} chips is {n * (n - 1):,} transfers, "
                            f"more than {MAX_PAIRS:,}; time it on a smaller group",
                            field="ranks")
    src = np.repeat(nodes, n)
    dst = np.tile(nodes, n)
    keep = src != dst
    return [step(f, src[keep], dst[keep], nbytes / n, label="xla alltoall")]


XLA_TORUS = register(Algorithm(
    name="xla_torus", build=torus_steps, check=_check, protocols=("ideal",), runtime="xla",
    collectives=frozenset({"all_reduce", "reduce_scatter", "all_gather"}),
    description="XLA on a TPU slice: bidirectional rings along each torus dimension in "
                "turn, data split so every ICI port works; hierarchical across slices."))
XLA_ALLTOALL = register(Algorithm(
    name="xla_alltoall", build=alltoall_steps, check=_check, protocols=("ideal",),
    runtime="xla",
    collectives=frozenset({"alltoall", "sendrecv"}),
    description="XLA on a TPU slice: every pair's transfer at once, dimension-order "
                "routed over the ICI torus."))
