"""Double binary tree all-reduce (NCCL's Tree algorithm).

As NCCL builds it: inside each server the ranks form a chain whose head is the server's
node in the inter-server trees; across servers two binary trees over the servers, the
second the mirror of the first (a server that is a leaf in one is inner in the other), each
carrying half of the buffer. Channel ``c`` starts its chains at local rank ``c``, so the
inter-server edges of different channels use different rails. The reduction streams up and
the broadcast streams down in chunks, so the steady state is one step in which every edge
carries its share each way; a zero-byte pipeline-fill step adds the up-and-down depth in
hops: along the chains inside servers at NVLink cost, between servers at network cost.
Latency grows with ``log2`` of the server count (plus the chain inside a server).
Groups that do not fill servers evenly use one binary tree pair over all ranks.

A chain step inside a server costs what NCCL's tuning model says a tree step costs against
a ring step (:data:`TREE_HOP_SCALE`): the protocols' per-hop latencies are fitted on rings
(one-server runs), and NCCL rates a tree's NVLink hop with LL128 at 1.25 us against a
ring's 1.9, with Simple at 4.0 against 3.4 (``hwLat``, ``src/graph/tuning.cc``).

Example
-------
>>> parents(7).tolist()
[-1, 0, 0, 1, 1, 2, 2]
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from fabricsim.collectives.nccl_model import HW_LAT, PROTOS, NcclModel
from fabricsim.collectives.pipeline import (
    tree_crossings,
    tree_depth,
    tree_ll128_pipelines,
    tree_pipeline,
)
from fabricsim.collectives.registry import Algorithm, Group, fill_step, register, step
from fabricsim.protocols import tree_kernel_rate
from fabricsim.schedule.core import Step


def parents(n: int) -> NDArray[np.int64]:
    """Parent position of each position in a heap-ordered binary tree (-1 for the root)."""
    p = (np.arange(n, dtype=np.int64) - 1) // 2
    p[0] = -1
    return p




def tree_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """Steps of a double-binary-tree all-reduce of ``nbytes`` over ``group``."""
    n = group.n
    f = group.fabric
    if n == 1:
        return []
    if group.servers > 1 and group.per_server:
        grid = group.grid()
    else:
        grid = np.arange(n, dtype=np.int32)[:, None]  # every rank its own "server"
    m, g = grid.shape
    child = np.arange(1, m)
    par = parents(m)
    # pipeline fill, up the tree and down again: 2(g-1) hops along the chains inside the
    # servers (NVLink-class latency) and 2·log2(m) - 1 between servers (network class)
    out = fill_step(f, int(group.nodes[grid[0, -1]]), int(group.nodes[grid[0, 0]]),
                    2 * (g - 1), "tree fill (chains)")
    inter = fill_step(f, int(group.nodes[grid[-1, 0]]), int(group.nodes[grid[0, 0]]),
                      max(1, 2 * tree_depth(m) - 1) if m > 1 else 0, "tree fill (servers)")
    if out and inter:
        inter = [replace(inter[0], deps=(0,))]
    out += inter
    deps = (len(out) - 1,) if out else ()
    for c in range(channels):
        cols = (np.arange(g) + c) % g
        chains = group.nodes[grid[:, cols]]                   # m × g, head first
        heads = chains[:, 0]
        srcs: list[NDArray[np.int32]] = []
        dsts: list[NDArray[np.int32]] = []
        sizes: list[NDArray[np.float64]] = []
        if g > 1:  # chain edges carry both trees' halves
            a, b = chains[:, 1:].ravel(), chains[:, :-1].ravel()
            srcs.append(a)
            dsts.append(b)
            sizes.append(np.full(a.size, nbytes / channels))
        if m > 1:
            for order in (heads, heads[::-1]):  # the mirror swaps leaves and inner servers
                srcs.append(order[child])
                dsts.append(order[par[child]])
                sizes.append(np.full(child.size, nbytes / (2 * channels)))
        up_s, up_d, size = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(sizes)
        out.append(step(f, up_s, up_d, size, channel=c, deps=deps, reduce_at="dst",
                        label=f"tree reduce ch{c}"))
        out.append(step(f, up_d, up_s, size, channel=c, deps=deps,
                        label=f"tree broadcast ch{c}"))
    return out


def _kernel_rate(group: Group, channels: int) -> float:
    """The tree kernels' own rate limit (:func:`fabricsim.protocols.tree_kernel_rate`) on
    the channels NCCL rates them with: its tree graph's (``graphs[a]->nChannels`` times
    ``perChMaxTreeBw`` in ``src/graph/tuning.cc``; :attr:`NcclModel.channels`), not the
    schedule's ``channels`` (one per GPU and NIC). The two agree on servers of eight GPUs
    with a NIC each; they do not where NCCL's search duplicates a small graph's channels
    (a GB200 tray: four NICs, eight graph channels) or inside one server (the schedule's
    one channel, the graph's twelve to sixteen).

    >>> from fabricsim.fabric import build_cluster
    >>> g = Group.of(build_cluster("hgx-b200", 1))
    >>> round(_kernel_rate(g, 1) / 1e9)  # 16 channels at 35 GB/s each, not one
    560
    """
    return tree_kernel_rate(group.fabric, max(group.servers, 1), NcclModel.of(group).channels)


#: Link classes inside a server whose per-hop latency a tree step pays at NCCL's tree rate.
#: The network's is left at the protocols' own: NCCL's tree network latencies fold in the
#: proxy's work per step, which the crossing cost (``Protocol.crossing_per_channel``)
#: charges here for every algorithm alike.
TREE_HOP_CLASSES = ("nvlink", "pcie")
#: Factor on each protocol's per-hop latency for a tree's steps, by link class: NCCL's tree
#: latency over its ring latency for that hardware (``HW_LAT``), e.g. LL128 on NVLink
#: 1.25 / 1.9.
TREE_HOP_SCALE: dict[str, dict[str, float]] = {
    p: {c: HW_LAT[c]["tree"][i] / HW_LAT[c]["ring"][i] for c in TREE_HOP_CLASSES}
    for i, p in enumerate(PROTOS)}


TREE = register(Algorithm(
    name="tree", build=tree_steps, collectives=frozenset({"all_reduce"}),
    auto_min_servers=2, kernel_rate=_kernel_rate,
    pipeline=lambda group, collective: tree_pipeline(group),
    pipelines=lambda group, collective: tree_ll128_pipelines(group), crossings=tree_crossings,
    hop_scale=TREE_HOP_SCALE, tree_channels=True,
    description="NCCL double binary tree across servers with chains inside them: reduce up "
                "and broadcast down, pipelined; latency ~ 2 log2(servers) network hops."))
