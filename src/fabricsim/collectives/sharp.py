"""In-network all-reduce over InfiniBand SHARP (NCCL's CollNet), reduction in the switches.

Inside each server the buffer is reduce-scattered over NVLink, so local rank ``j`` holds
shard ``j`` (``S/g``). Each rail then runs one SHARP aggregation tree: every GPU sends its
shard through its NIC to its leaf switch, which sums and forwards one copy to the tree's
root (the highest switch on the rail's path), which sums again and multicasts the result
down the same tree; then an all-gather over NVLink. Every NIC carries ``S/g`` each way —
half of a ring's ``2(m−1)/m · S/g`` — and latency does not grow with the server count.

Simplification: on a three-tier fabric a leaf's shard travels to the root over its
leaf→spine→core path without an intermediate reduction at the spine, which over-counts
spine→core bytes (documented in docs/collectives.md).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> g = Group.of(build_cluster("dgx-h100", 4))
>>> [x.label for x in sharp_steps(g, "all_reduce", 64e6, 1)]
['intra reduce-scatter ch0', 'sharp fill', 'sharp aggregate+multicast', 'intra all-gather ch0']
"""

from __future__ import annotations

import numpy as np

from fabricsim.collectives.hierarchical import intra_ring
from fabricsim.collectives.registry import Algorithm, Group, IntArray, register, step
from fabricsim.fabric.core import Fabric
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.schedule.core import Step


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


def sharp_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """Intra reduce-scatter, SHARP aggregation per rail, intra all-gather."""
    f = group.fabric
    grid = group.grid()
    _m, g = grid.shape
    shard = nbytes / g
    out: list[Step] = []
    if g > 1:
        s, d = intra_ring(group, grid)
        out += [step(f, s, d, shard / channels, channel=c, repeat=g - 1, reduce_at="dst",
                     label=f"intra reduce-scatter ch{c}") for c in range(channels)]
    prev = tuple(range(len(out)))
    up, nic = _tree_edges(group, grid)
    gpus = group.nodes[grid].ravel()
    nics = nic.ravel()
    a, b = f.link_src[up], f.link_dst[up]
    # every tree edge carries the shard once each way; GPU<->NIC inside the server too
    src = np.concatenate([gpus, a, b, nics])
    dst = np.concatenate([nics, b, a, gpus])
    fill = len(out)
    depth = int(np.unique(f.node_kind[b]).size)  # tree levels: leaf, spine, core
    out.append(step(f, [int(a[0])], [int(b[0])], 0.0, repeat=2 * depth, deps=prev,
                    label="sharp fill"))
    out.append(step(f, src, dst, shard, deps=(fill,), reduce_at="switch",
                    label="sharp aggregate+multicast"))
    if g > 1:
        s, d = intra_ring(group, grid)
        out += [step(f, s, d, shard / channels, channel=c, repeat=g - 1, deps=(fill + 1,),
                     label=f"intra all-gather ch{c}") for c in range(channels)]
    return out


SHARP = register(Algorithm(
    name="sharp", build=sharp_steps, check=_check, collectives=frozenset({"all_reduce"}),
    protocols=("ll", "simple"),
    description="InfiniBand SHARP / CollNet: per-rail reduction in the switch tree "
                "(leaf, then root), multicast back; NVLink reduce-scatter/all-gather inside "
                "servers."))
