"""In-network all-reduce over InfiniBand SHARP (NCCL's CollNet), reduction in the switches.

``sharp`` (CollNet): inside each server the buffer is reduce-scattered over NVLink, so
local rank ``j`` holds shard ``j`` (``S/g``). Each rail then runs one SHARP aggregation
tree: every GPU sends its shard through its NIC to its leaf switch, which sums and forwards
one copy to the tree's root (the highest switch on the rail's path), which sums again and
multicasts the result down the same tree; then an all-gather over NVLink. Every NIC carries
``S/g`` each way — half of a ring's ``2(m−1)/m · S/g`` — and latency does not grow with the
server count.

``nvls_sharp`` (NCCL's NVLS with CollNet, "NVLS+SHARP"): the reduce-scatter and the
all-gather inside servers are NVLS's in-switch reduction and multicast, and each rail's
shard is reduced by SHARP between them.

As NCCL runs them, the phases pipeline chunk by chunk: a latency fill (the chain or switch
hops inside the server, the aggregation tree's depth up and down) ahead of one
steady-state step that holds every phase, so the slowest sets the pace.

Simplification: on a three-tier fabric a leaf's shard travels to the root over its
leaf→spine→core path without an intermediate reduction at the spine, which over-counts
spine→core bytes (documented in docs/collectives.md).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> g = Group.of(build_cluster("dgx-h100", 4))
>>> [x.label for x in sharp_steps(g, "all_reduce", 64e6, 1)]
['sharp fill (NVLink)', 'sharp fill (tree)', 'reduce-scatter + sharp + all-gather']
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fabricsim.collectives.hierarchical import intra_ring
from fabricsim.collectives.pipeline import switch_crossings
from fabricsim.collectives.registry import Algorithm, Group, IntArray, fill_step, register, step
from fabricsim.fabric.core import Fabric
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.schedule.core import FloatArray, Step


def _check(group: Group, collective: str) -> str | None:
    info = group.fabric.info
    if not info.sharp:
        return (f"SHARP in-network reduction is off on {info.fabric or 'this fabric'} "
                f"({info.transport or 'unknown transport'}, {info.topology or 'no topology'}):"
                " it needs an InfiniBand fat-tree with aggregating switches and the "
                "cluster parameter sharp: true (off by default, as shipping clusters run "
                "NCCL without the CollNet plugin). Use ring, tree or nvlstree")
    if group.servers < 2:
        return "SHARP reduces across servers; this group is on one server (use nvls or ring)"
    if not group.per_server:
        return "SHARP needs the same number of ranks on every server"
    return None


def _reverse(f: Fabric, links: IntArray) -> IntArray:
    """The opposite-direction link of each of ``links`` (the fabric's own table, built
    once per fabric)."""
    out: IntArray = f.reverse_link[links].astype(np.int32)
    return out


def _tree_edges(group: Group, grid: IntArray) -> tuple[IntArray, IntArray]:
    """Network links (up direction) of every rail's aggregation tree, and each member's NIC.

    A member's shard enters the network at its NIC; each leaf forwards one aggregated
    stream up the path its members' traffic takes toward the rail's far end, to the
    highest switch on it (the root). Returns (up link ids, NIC node per member, m × g).
    """
    f = group.fabric
    nodes = group.nodes[grid]
    m, g = grid.shape
    nic = f.gpu_nics[group.ranks[grid].ravel(), 0].reshape(m, g)
    far = np.repeat(nic[-1:], m, axis=0)
    src = nic[:-1].ravel()
    dst = far[:-1].ravel()
    paths = f.route_many(src, dst)
    rows = paths.row_ids()
    pos = np.arange(paths.links.size) - paths.ptr[rows]
    hop_kind = f.node_kind[f.link_dst[paths.links]].astype(np.int64)
    score = np.where(np.isin(hop_kind, [NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE]),
                     hop_kind * 1024 - pos, -1)      # highest tier, first on the path
    best = np.full(len(paths), -1, dtype=np.int64)
    np.maximum.at(best, rows, score)
    top = 1024 * (best // 1024) - best              # position of the root on each path
    is_up = np.isin(f.link_kind, [LinkKind.NIC_LEAF, LinkKind.LEAF_SPINE,
                                  LinkKind.SPINE_CORE])
    before = pos <= top[rows]
    first_half = paths.links[before]
    # the far member's side: the down half, reversed, is its way up to the same root
    second_half = _reverse(f, paths.links[~before])
    up = np.concatenate([first_half[is_up[first_half]], second_half[is_up[second_half]]])
    del nodes
    present = np.zeros(f.n_links, dtype=bool)
    present[up] = True
    return np.flatnonzero(present).astype(np.int32), nic  # = np.unique(up)


def _sharp_parts(group: Group, grid: IntArray, shard: float
                 ) -> tuple[list[IntArray], list[IntArray], list[FloatArray], int]:
    """Every rail's aggregation tree as concurrent (src, dst, bytes) parts: GPU to NIC,
    each tree edge up and down, NIC to GPU, ``shard`` bytes each; and the tree's depth."""
    f = group.fabric
    up, nic = _tree_edges(group, grid)
    gpus = group.nodes[grid].ravel()
    nics = nic.ravel()
    a, b = f.link_src[up], f.link_dst[up]
    srcs = [gpus, a, b, nics]
    dsts = [nics, b, a, gpus]
    sizes = [np.full(x.size, shard) for x in srcs]
    depth = int(np.unique(f.node_kind[b]).size)  # tree levels: leaf, spine, core
    return srcs, dsts, sizes, depth


def _pipelined(group: Group, parts: tuple[list[IntArray], list[IntArray], list[FloatArray]],
               fills: list[list[Step]], label: str) -> list[Step]:
    """Fill steps one after another, then one steady-state step holding every phase."""
    out: list[Step] = []
    for fs in fills:
        for x in fs:
            out.append(replace(x, deps=(len(out) - 1,) if out else ()))
    srcs, dsts, sizes = parts
    out.append(step(group.fabric, np.concatenate(srcs), np.concatenate(dsts),
                    np.concatenate(sizes), deps=(len(out) - 1,) if out else (),
                    reduce_at="switch", label=label))
    return out


def sharp_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """NVLink reduce-scatter, SHARP aggregation per rail and NVLink all-gather, pipelined."""
    f = group.fabric
    grid = group.grid()
    _m, g = grid.shape
    shard = nbytes / g
    srcs, dsts, sizes, depth = _sharp_parts(group, grid, shard)
    fills: list[list[Step]] = []
    if g > 1:  # the ring inside each server carries (g-1) shards for each of RS and AG
        s, d = intra_ring(group, grid)
        srcs.append(s)
        dsts.append(d)
        sizes.append(np.full(s.size, 2 * (g - 1) * shard))
        nodes = group.nodes[grid]
        fills.append(fill_step(f, int(nodes[0, 0]), int(nodes[0, 1]), 2 * (g - 1),
                               "sharp fill (NVLink)"))
    a, b = int(srcs[1][0]), int(dsts[1][0])
    fills.append([step(f, [a], [b], 0.0, repeat=2 * depth, label="sharp fill (tree)")])
    return _pipelined(group, (srcs, dsts, sizes), fills,
                      "reduce-scatter + sharp + all-gather")


def nvls_sharp_steps(group: Group, collective: str, nbytes: float, channels: int
                     ) -> list[Step]:
    """NVLS+SHARP: in-switch reduce-scatter inside servers, SHARP per rail, in-switch
    multicast; pipelined."""
    from fabricsim.collectives.nvls import _nvls_parts

    f = group.fabric
    grid = group.grid()
    _m, g = grid.shape
    n_s, n_d, n_b = _nvls_parts(group, grid, nbytes)
    s_s, s_d, s_b, depth = _sharp_parts(group, grid, nbytes / g)
    gpus = group.nodes[grid]
    sw = group.nvswitch_grid(group.server_of[grid[:, 0]])
    fills = [[step(f, [int(gpus[0, 0])], [int(sw[0, 0])], 0.0, repeat=3, label="nvls fill")],
             [step(f, [int(s_s[1][0])], [int(s_d[1][0])], 0.0, repeat=2 * depth,
                   label="sharp fill (tree)")]]
    return _pipelined(group, ([*n_s, *s_s], [*n_d, *s_d], [*n_b, *s_b]), fills,
                      "nvls reduce-scatter + sharp + multicast")


def _check_nvls_sharp(group: Group, collective: str) -> str | None:
    from fabricsim.collectives.nvls import _check as nvls_check

    return _check(group, collective) or nvls_check(group, collective)


SHARP = register(Algorithm(
    name="sharp", build=sharp_steps, check=_check, collectives=frozenset({"all_reduce"}),
    protocols=("ll", "simple"), auto_min_servers=2, crossings=switch_crossings,
    description="InfiniBand SHARP / CollNet: per-rail reduction in the switch tree "
                "(leaf, then root), multicast back; NVLink reduce-scatter/all-gather inside "
                "servers; pipelined."))
NVLS_SHARP = register(Algorithm(
    name="nvls_sharp", build=nvls_sharp_steps, check=_check_nvls_sharp,
    collectives=frozenset({"all_reduce"}), protocols=("simple",), auto_min_servers=2,
    crossings=switch_crossings,
    description="NVLS+SHARP (NCCL's NVLS with CollNet): in-switch reduction inside servers "
                "and in the InfiniBand switches across them, pipelined (H100+, SHARP on)."))
