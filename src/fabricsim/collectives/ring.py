"""Ring algorithms (multi-channel, pipelined), as NCCL runs them.

All-reduce is a reduce-scatter followed by an all-gather around the ring: every rank sends
``S/n`` per step to its successor, ``2(n−1)`` steps. The steps pipeline (a rank forwards a
chunk as soon as it has it), so the schedule is one steady-state step in which every ring
link carries its ``2(n−1)·S/n`` behind a zero-byte fill of ``2(n−1)−1`` hops: the latency
adds up along the ring, network hops only where the ring crosses servers. Channels split
the buffer and run concurrently (inside a server, channel ``c`` rides NVSwitch plane
``c``). Broadcast and
reduce stream the buffer down a chain in small chunks: one steady-state step in which every
ring link carries ``S`` plus a zero-byte pipeline-fill step of ``n−2`` hops.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> steps = ring_steps(Group.of(build_cluster("dgx-h100", 1)), "all_reduce", 8e6, 4)
>>> len(steps), steps[0].repeat, float(steps[1].nbytes[0])
(5, 13, 3500000.0)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from fabricsim.collectives.pipeline import (
    chain_pipeline,
    ring_crossings,
    ring_server_hops,
    ring_spread,
)
from fabricsim.collectives.registry import Algorithm, Group, fill_step, register, step
from fabricsim.schedule.core import Pipeline, Step

_REPEATS = {"all_reduce": lambda n: 2 * (n - 1), "reduce_scatter": lambda n: n - 1,
            "all_gather": lambda n: n - 1}


def ring_order(group: Group, channel: int) -> NDArray[np.int32]:
    """Node ids in ring order for ``channel``.

    On several servers with the same number of ranks each, channel ``c`` enters server
    ``s`` at local rank ``(c − s) mod g`` and leaves it from the rank before, which is the
    rank the next server is entered at; the last server leaves from local rank ``c``, where
    the ring entered the first: every server-to-server hop, the closing one too, stays on
    one rail (as NCCL's rings do with PXN), and ``g`` channels spread the ring over all
    ``g`` rails. (With ``m − 1`` servers a multiple of ``g`` the last server is entered at
    ``c`` itself and its closing hop changes rail.)

    Examples
    --------
    >>> from fabricsim.fabric import build_cluster
    >>> from fabricsim.collectives.registry import Group
    >>> fab = build_cluster("dgx-h100", 2)
    >>> local = {int(n): i % 8 for i, n in enumerate(fab.gpus)}
    >>> [local[int(n)] for n in ring_order(Group.of(fab, None), channel=0)]
    [0, 1, 2, 3, 4, 5, 6, 7, 7, 1, 2, 3, 4, 5, 6, 0]
    """
    if group.servers < 2 or not group.per_server:
        return group.nodes
    grid = group.grid()
    m, g = grid.shape
    shift = (channel - np.arange(m)) % g
    cols = (np.arange(g)[None, :] + shift[:, None]) % g
    first = channel % g
    if cols[-1, 0] != first:  # close the ring on the first server's rail
        last = [int(x) for x in cols[-1] if x != first]
        cols[-1] = np.array([*last, first])
    return group.nodes[np.take_along_axis(grid, cols, axis=1).ravel()]


def _ring_fill(group: Group, hops: int) -> list[Step]:
    """The latency of ``hops + 1`` ring steps: ``hops`` zero-byte fill steps ahead of the
    data step, which pays the last. A chunk crosses the ring hop by hop (each rank forwards
    as soon as it has received), so latency adds up along the ring rather than every step
    paying its dearest hop: the share of hops that cross servers (``servers/n`` of a
    rail-aligned ring's) pays the network's hop, one of them in the data step itself; the
    rest pay NVLink's."""
    f = group.fabric
    n, m = group.n, group.servers
    inter = max(ring_server_hops(hops + 1, n, m) - 1, 0)
    intra = hops - inter
    by_srv = group.by_server
    out: list[Step] = []
    if intra > 0:
        big = max(by_srv, key=len)
        a, b = (big[0], big[1]) if len(big) > 1 else (0, 1)
        out += fill_step(f, int(group.nodes[a]), int(group.nodes[b]), intra,
                         "ring fill (inside servers)")
    if inter > 0:
        a, b = int(by_srv[0][0]), int(by_srv[1][0])
        out += [replace(x, deps=(len(out) - 1,) if out else ())
                for x in fill_step(f, int(group.nodes[a]), int(group.nodes[b]), inter,
                                   "ring fill (between servers)")]
    return out


def ring_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """Steps of a ``channels``-channel ring ``collective`` of ``nbytes`` over ``group``."""
    n = group.n
    f = group.fabric
    if n == 1:
        return []
    nodes = group.nodes
    if collective in _REPEATS:
        red = "" if collective == "all_gather" else "dst"
        rounds = _REPEATS[collective](n)
        out = _ring_fill(group, rounds - 1)
        deps = (len(out) - 1,) if out else ()
        for c in range(channels):
            order = ring_order(group, c)
            out.append(replace(
                step(f, order, np.roll(order, -1), rounds * nbytes / (n * channels),
                     channel=c, deps=deps, reduce_at=red, label=f"ring ch{c}"),
                rounds=rounds))
        return out
    # broadcast (root = first rank, chain forward) and reduce (chain toward the root):
    # channel c chains its own ring order from the root, so across servers the channels'
    # server-to-server hops use different rails and NICs, as NCCL's rings do
    chains = []
    for c in range(channels):
        order = ring_order(group, c)
        order = np.roll(order, -int(np.flatnonzero(order == nodes[0])[0]))
        chains.append((order[:-1], order[1:]) if collective == "broadcast"
                      else (order[1:][::-1], order[:-1][::-1]))
    red = "" if collective == "broadcast" else "dst"
    src0, dst0 = chains[0]
    out = fill_step(f, int(src0[0]), int(dst0[0]), n - 2, "pipeline fill")
    deps = (0,) if out else ()
    out += [step(f, src, dst, nbytes / channels, channel=c, deps=deps, reduce_at=red,
                 label=f"chain ch{c}") for c, (src, dst) in enumerate(chains)]
    return out


def _pipeline(group: Group, collective: str) -> Pipeline | None:
    """Broadcast and reduce stream chunks down a chain; the ring collectives' steps
    already carry one chunk each."""
    return chain_pipeline(group) if collective in ("broadcast", "reduce") else None


def _fixed_steps(group: Group, collective: str) -> bool:
    """A ring all-reduce, reduce-scatter or all-gather: each step costs a fixed time plus
    its slice's bytes over the rate, whatever the message size (published ring curves fit
    that straight line within a few per cent: ``benchmarks/accuracy_nccl.py``,
    ``ring_curves``). The broadcast and reduce chains time their fill instead. Two rings
    keep the protocol's ramp, as their measured curves bend:

    * over EFA (p4d, NCCL 2.8.3: 18 % off a straight line);
    * inside one server of A100 GPUs. NCCL has A100s (compute capability 8.0) joined by
      NVLink *read* each other's buffers (``ncclTopoCheckP2p``, ``src/graph/paths.cc``)
      where later GPUs write them: a receiver pulls each slice after it sees the flag, a
      round trip per slice that small slices pay in rate. Inside one server the NVLink
      hops bound the ring and it shows: the ramp predicts four held-out one-server A100
      sources within 2.6-8.1 % (median per source), closer on three of them than any
      fixed step. Across servers the network bounds the ring, and the A100 curves of
      four sources there are straight lines. That the read is the cause is a reading
      of NCCL's code, not a measurement.

    >>> from fabricsim.fabric import build_cluster
    >>> [_fixed_steps(Group.of(build_cluster(s, n)), "all_reduce")
    ...  for s, n in (("dgx-h100", 1), ("dgx-a100", 1), ("dgx-a100", 2), ("aws-p4d", 2))]
    [True, False, True, False]
    """
    from fabricsim.protocols import tuning_hardware

    if collective not in ("all_reduce", "reduce_scatter", "all_gather"):
        return False
    f = group.fabric
    p2p_read = tuning_hardware(f)[1] == "nvlink3" and group.servers == 1
    return f.info.transport != "srd" and not p2p_read


RING = register(Algorithm(
    name="ring", build=ring_steps, pipeline=_pipeline, crossings=ring_crossings,
    spread=ring_spread, fixed_steps=_fixed_steps,
    collectives=frozenset({"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                           "reduce"}),
    description="NCCL ring: 2(n-1) steps of S/n per rank (all-reduce), chunk-pipelined "
                "chain for broadcast/reduce; channels split the buffer."))
