"""NVLS: all-reduce with the reduction inside NVSwitch (NVLink SHARP, Hopper and later).

Every GPU pushes its buffer into the NVSwitch planes (``S/K`` to each of the ``K`` chips)
where it is summed (``reduce_at="switch"``); the switch returns each GPU its reduced shard
(``S/(nK)`` per plane); the GPU multicasts its shard back through the switch, which
replicates it to every GPU. Phases pipeline, so the steady state is one step in which each
NVLink carries ``(1 + 1/n)·S/K`` each way: twice less than a ring, which is why NVLS busbw
can exceed the NVLink rate. Across servers, each rail's shard is all-reduced by a ring
(``nvls``) or reduced up and broadcast down a double binary tree (``nvlstree``, NCCL's
NVLSTree) while the NVLS phases run: the phases pipeline chunk by chunk, so one
steady-state step holds all of them and the slowest sets the pace.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> s = nvls_steps(Group.of(build_cluster("dgx-h100", 1)), "all_reduce", 8e6, 1)
>>> [x.label for x in s], s[1].reduce_at
(['nvls fill', 'nvls reduce+multicast'], 'switch')
>>> [x.label for x in nvlstree_steps(Group.of(build_cluster("dgx-h100", 2)), "all_reduce",
...                                  8e6, 1)]
['nvls fill', 'fill between servers', 'nvls reduce-scatter + rail trees + multicast']
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fabricsim.collectives.hierarchical import rail_ring
from fabricsim.collectives.pipeline import (
    nvls_copy_warps,
    nvls_pipeline,
    nvlstree_capped_channels,
    nvlstree_crossings,
    nvlstree_pipeline,
    tree_depth,
)
from fabricsim.collectives.registry import (
    Algorithm,
    Group,
    IntArray,
    register,
    step,
    striped_step,
)
from fabricsim.protocols import nvlstree_kernel_rate
from fabricsim.schedule.core import FloatArray, Step


def _check(group: Group, collective: str) -> str | None:
    info = group.fabric.info
    if 0 < group.per_server < 2:  # (a fabric of 1-GPU servers also has nvls off)
        return "NVLS needs at least 2 GPUs per server; this group has 1. Use ring or tree"
    if not info.nvls:
        what = (f"{info.system}'s {info.nvswitch} cannot reduce in the switch" if info.nvswitch
                else f"{info.system} has no NVSwitch")
        return (f"NVLS needs NVSwitch gen3 or later (H100 and newer); {what}. Use ring or "
                "tree")
    if group.nvswitch_planes == 0 or not group.per_server:
        return "NVLS needs the same number of NVSwitch-attached GPUs on every server"
    if group.per_server < 2:
        return "NVLS needs at least 2 GPUs per server"
    return None


def _nvls_parts(group: Group, grid: IntArray, nbytes: float
                ) -> tuple[list[IntArray], list[IntArray], list[FloatArray]]:
    """The in-switch reduce-scatter and multicast transfers of every server, as
    concurrent (src, dst, bytes) parts: each GPU pushes ``S/K`` to each of the ``K``
    NVSwitch planes and gets its reduced shard back (``S/(gK)``), then multicasts the
    shard (``S/(gK)``) and receives the whole result (``S/K``)."""
    gpus = group.nodes[grid]                              # m × g
    sw = group.nvswitch_grid(group.server_of[grid[:, 0]])  # m × K
    g, k = gpus.shape[1], sw.shape[1]
    g_rep = np.repeat(gpus[:, :, None], k, axis=2).ravel()   # every GPU × plane
    s_rep = np.repeat(sw[:, None, :], g, axis=1).ravel()
    per = nbytes / k
    return ([g_rep, s_rep, g_rep, s_rep], [s_rep, g_rep, s_rep, g_rep],
            [np.full(g_rep.size, per), np.full(g_rep.size, per / g),
             np.full(g_rep.size, per / g), np.full(g_rep.size, per)])


def _rail_tree(group: Group, grid: IntArray, shard: float
               ) -> tuple[IntArray, IntArray, FloatArray]:
    """Every rail's double binary tree across servers, reduce up and broadcast down in one
    pipelined stream: each tree edge carries half the shard each way."""
    from fabricsim.collectives.tree import parents

    heads = group.nodes[grid]                             # m × g: column j = rail j
    m = heads.shape[0]
    child = np.arange(1, m)
    par = parents(m)
    src, dst = [], []
    for order in (heads, heads[::-1]):
        a, b = order[child].ravel(), order[par[child]].ravel()
        src += [a, b]
        dst += [b, a]
    s, d = np.concatenate(src), np.concatenate(dst)
    return s, d, np.full(s.size, shard / 2)


def _pipelined(group: Group, parts: tuple[list[IntArray], list[IntArray], list[FloatArray]],
               inter_hops: int, label: str) -> list[Step]:
    """A latency fill (NVLS's 3 switch hops, then ``inter_hops`` network hops) ahead of
    one steady-state step holding every phase at once: the phases pipeline chunk by chunk,
    so the slowest sets the pace, as in NCCL's NVLS algorithms."""
    f = group.fabric
    grid = group.grid()
    gpus = group.nodes[grid]
    sw = group.nvswitch_grid(group.server_of[grid[:, 0]])
    out: list[Step] = [step(f, [int(gpus[0, 0])], [int(sw[0, 0])], 0.0, repeat=3,
                            label="nvls fill")]
    if inter_hops > 0:
        out.append(replace(step(f, [int(gpus[0, 0])], [int(gpus[-1, 0])], 0.0,
                                repeat=inter_hops, label="fill between servers"),
                           deps=(0,)))
    srcs, dsts, sizes = parts
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    across = np.flatnonzero(f.node_server[src] != f.node_server[dst]).astype(np.int32)
    out.append(striped_step(f, src, dst, np.concatenate(sizes), across,
                            deps=(len(out) - 1,), reduce_at="switch", label=label))
    return out


def nvls_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """In-switch reduce-scatter + multicast; across servers each rail's shard is
    all-reduced by a ring, pipelined with both NVLS phases."""
    grid = group.grid()
    m, g = grid.shape
    srcs, dsts, sizes = _nvls_parts(group, grid, nbytes)
    if m == 1:
        return _pipelined(group, (srcs, dsts, sizes), 0, "nvls reduce+multicast")
    s, d = rail_ring(group, grid)
    srcs.append(s)
    dsts.append(d)
    sizes.append(np.full(s.size, 2 * (m - 1) / m * nbytes / g))
    return _pipelined(group, (srcs, dsts, sizes), 2 * (m - 1) - 1,
                      "nvls reduce-scatter + rail rings + multicast")


def nvlstree_steps(group: Group, collective: str, nbytes: float, channels: int
                   ) -> list[Step]:
    """NCCL's NVLSTree: in-switch reduce-scatter inside servers, each rail's shard reduced
    up and broadcast down a double binary tree across servers, in-switch multicast; all
    three pipelined."""

    grid = group.grid()
    m, g = grid.shape
    srcs, dsts, sizes = _nvls_parts(group, grid, nbytes)
    s, d, b = _rail_tree(group, grid, nbytes / g)
    return _pipelined(group, ([*srcs, s], [*dsts, d], [*sizes, b]),
                      max(1, 2 * tree_depth(m) - 1), "nvls reduce-scatter + rail trees + multicast")


def _nvlstree_rate(group: Group, channels: int) -> float:
    """The NVLSTree kernels' own rate limit (:func:`fabricsim.protocols.nvlstree_kernel_rate`)."""
    return nvlstree_kernel_rate(group.fabric, group.servers, group.n)


def _check_tree(group: Group, collective: str) -> str | None:
    why = _check(group, collective)
    if why is None and group.servers < 2:
        return "NVLSTree joins servers with trees; this group is on one server (use nvls)"
    return why


NVLS = register(Algorithm(
    name="nvls", build=nvls_steps, check=_check, collectives=frozenset({"all_reduce"}),
    protocols=("simple",), auto_max_servers=1,
    pipeline=lambda group, collective: nvls_pipeline(group),
    copy_warps=lambda group: nvls_copy_warps(group),
    description="NVLink SHARP: reduction and multicast inside NVSwitch (H100+); rings per "
                "rail across servers, pipelined with both (chosen automatically on one "
                "server only: across servers NCCL runs NVLSTree, or NVLS with SHARP)."))
NVLSTREE = register(Algorithm(
    name="nvlstree", build=nvlstree_steps, check=_check_tree,
    collectives=frozenset({"all_reduce"}), protocols=("simple",), auto_min_servers=2,
    kernel_rate=_nvlstree_rate,
    pipeline=lambda group, collective: nvlstree_pipeline(group),
    crossings=nvlstree_crossings,
    copy_warps=lambda group: nvls_copy_warps(group, tree=True),
    nvls_channels=nvlstree_capped_channels,
    description="NCCL's NVLSTree: NVLS inside servers, a double binary tree per rail "
                "across them, all phases pipelined (the fastest H100 all-reduce at 2+ "
                "servers)."))
