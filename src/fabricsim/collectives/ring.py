"""Ring algorithms (multi-channel, pipelined), as NCCL runs them.

All-reduce is a reduce-scatter followed by an all-gather around the ring: every rank sends
``S/n`` per step to its successor, ``2(n−1)`` steps. Channels split the buffer and run
concurrently (inside a server, channel ``c`` rides NVSwitch plane ``c``). Broadcast and
reduce stream the buffer down a chain in small chunks: one steady-state step in which every
ring link carries ``S`` plus a zero-byte pipeline-fill step of ``n−2`` hops.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> steps = ring_steps(Group.of(build_cluster("dgx-h100", 1)), "all_reduce", 8e6, 4)
>>> len(steps), steps[0].repeat, float(steps[0].nbytes[0])
(4, 14, 250000.0)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabricsim.collectives.registry import Algorithm, Group, fill_step, register, step
from fabricsim.schedule.core import Step

_REPEATS = {"all_reduce": lambda n: 2 * (n - 1), "reduce_scatter": lambda n: n - 1,
            "all_gather": lambda n: n - 1}


def ring_order(group: Group, channel: int) -> NDArray[np.int32]:
    """Node ids in ring order for ``channel``.

    On several servers with the same number of ranks each, channel ``c`` enters server
    ``s`` at local rank ``(c − s) mod g`` and leaves it from the rank before, which is the
    rank the next server is entered at: every server-to-server hop stays on one rail (as
    NCCL's rings do with PXN), and ``g`` channels spread the ring over all ``g`` rails.
    """
    if group.servers < 2 or not group.per_server:
        return group.nodes
    grid = group.grid()
    m, g = grid.shape
    shift = (channel - np.arange(m)) % g
    cols = (np.arange(g)[None, :] + shift[:, None]) % g
    return group.nodes[np.take_along_axis(grid, cols, axis=1).ravel()]


def ring_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """Steps of a ``channels``-channel ring ``collective`` of ``nbytes`` over ``group``."""
    n = group.n
    f = group.fabric
    if n == 1:
        return []
    nodes = group.nodes
    if collective in _REPEATS:
        red = "" if collective == "all_gather" else "dst"
        out = []
        for c in range(channels):
            order = ring_order(group, c)
            out.append(step(f, order, np.roll(order, -1), nbytes / (n * channels),
                            channel=c, repeat=_REPEATS[collective](n), reduce_at=red,
                            label=f"ring ch{c}"))
        return out
    # broadcast (root = first rank, chain forward) and reduce (chain toward the root)
    if collective == "broadcast":
        src, dst, red = nodes[:-1], nodes[1:], ""
    else:
        src, dst, red = nodes[1:][::-1], nodes[:-1][::-1], "dst"
    out = fill_step(f, int(src[0]), int(dst[0]), n - 2, "pipeline fill")
    deps = (0,) if out else ()
    out += [step(f, src, dst, nbytes / channels, channel=c, deps=deps, reduce_at=red,
                 label=f"chain ch{c}") for c in range(channels)]
    return out


RING = register(Algorithm(
    name="ring", build=ring_steps,
    collectives=frozenset({"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                           "reduce"}),
    description="NCCL ring: 2(n-1) steps of S/n per rank (all-reduce), chunk-pipelined "
                "chain for broadcast/reduce; channels split the buffer."))
