"""Hierarchical all-reduce: NVLink inside servers, one ring per rail across them.

The structure of Horovod's hierarchical all-reduce and of NCCL's CollNet without the
in-network reduction: (1) reduce-scatter inside every server over NVLink, so local
rank ``j`` holds shard ``j`` (``S/g``); (2) an all-reduce of each shard across servers on
rail ``j`` (the GPUs with local index ``j`` share a NIC rail); (3) all-gather inside every
server. Network traffic per NIC is ``2(m−1)/m · S/g`` instead of a flat ring's, and network
latency grows with the server count ``m`` only. NCCL has no such algorithm of its own, so
automatic selection (which predicts what NCCL runs) leaves it out; ``--algo hierarchical``
runs it.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> s = hier_steps(Group.of(build_cluster("dgx-a100", 2)), "all_reduce", 16e6, 1)
>>> [x.label for x in s]
['intra reduce-scatter ch0', 'inter all-reduce ch0', 'intra all-gather ch0']
"""

from __future__ import annotations

import numpy as np

from fabricsim.collectives.registry import Algorithm, Group, IntArray, register, step
from fabricsim.schedule.core import Step


def _check(group: Group, collective: str) -> str | None:
    if group.servers < 2:
        return "hierarchical needs ranks on at least 2 servers; use ring, tree or nvls"
    if not group.per_server:
        return ("hierarchical needs the same number of ranks on every server; pass ranks "
                "that fill servers evenly")
    return None


def intra_ring(group: Group, grid: IntArray) -> tuple[IntArray, IntArray]:
    """(src, dst) of the rings inside every server (each row of ``grid`` is a server)."""
    nodes = group.nodes[grid]
    return nodes.ravel(), np.roll(nodes, -1, axis=1).ravel()


def rail_ring(group: Group, grid: IntArray) -> tuple[IntArray, IntArray]:
    """(src, dst) of one ring per rail (column of ``grid``) across servers."""
    nodes = group.nodes[grid]
    return nodes.ravel(), np.roll(nodes, -1, axis=0).ravel()


def hier_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """Intra-server reduce-scatter, per-rail all-reduce, intra-server all-gather."""
    f = group.fabric
    grid = group.grid()
    m, g = grid.shape
    out: list[Step] = []
    shard = nbytes / g
    prev: tuple[int, ...] = ()
    if g > 1:
        s, d = intra_ring(group, grid)
        out += [step(f, s, d, shard / channels, channel=c, repeat=g - 1, reduce_at="dst",
                     label=f"intra reduce-scatter ch{c}") for c in range(channels)]
        prev = tuple(range(len(out)))
    s, d = rail_ring(group, grid)
    base = len(out)
    out += [step(f, s, d, shard / m / channels, channel=c, repeat=2 * (m - 1), deps=prev,
                 reduce_at="dst", label=f"inter all-reduce ch{c}") for c in range(channels)]
    prev = tuple(range(base, len(out)))
    if g > 1:
        s, d = intra_ring(group, grid)
        out += [step(f, s, d, shard / channels, channel=c, repeat=g - 1, deps=prev,
                     label=f"intra all-gather ch{c}") for c in range(channels)]
    return out


HIERARCHICAL = register(Algorithm(
    name="hierarchical", build=hier_steps, check=_check,
    collectives=frozenset({"all_reduce"}), auto=False,
    description="Reduce-scatter over NVLink, all-reduce of each shard on its rail across "
                "servers, all-gather over NVLink."))
