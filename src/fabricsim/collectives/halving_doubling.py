"""Recursive halving / doubling (Rabenseifner): log2(n) steps, for power-of-two groups.

Reduce-scatter by recursive halving: at step ``k`` rank ``r`` exchanges half of what it
still holds with ``r XOR n/2^(k+1)``. All-gather by recursive doubling is the reverse;
all-reduce is one then the other. Latency ``2 log2 n`` steps, bandwidth like a ring.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> s = hd_steps(Group.of(build_cluster("dgx-h100", 1)), "all_reduce", 8.0, 1)
>>> [float(x.nbytes[0]) for x in s]
[4.0, 2.0, 1.0, 1.0, 2.0, 4.0]
"""

from __future__ import annotations

import numpy as np

from fabricsim.collectives.registry import Algorithm, Group, register, step
from fabricsim.schedule.core import Step


def _check(group: Group, collective: str) -> str | None:
    n = group.n
    if n & (n - 1):
        return (f"halving_doubling needs a power-of-two group, got {n} ranks; use ring or "
                "tree")
    return None


def hd_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """Steps of recursive halving (reduce-scatter) and/or doubling (all-gather)."""
    n = group.n
    f = group.fabric
    if n == 1:
        return []
    levels = n.bit_length() - 1
    pos = np.arange(n)
    stages: list[tuple[int, float, str]] = []
    if collective in ("all_reduce", "reduce_scatter"):
        stages += [(n >> (k + 1), nbytes / 2 ** (k + 1), "dst") for k in range(levels)]
    if collective in ("all_reduce", "all_gather"):
        stages += [(1 << k, nbytes / n * (1 << k), "") for k in range(levels)]
    out: list[Step] = []
    prev: tuple[int, ...] = ()
    for i, (dist, size, red) in enumerate(stages):
        peer = group.nodes[pos ^ dist]
        here: list[int] = []
        for c in range(channels):
            here.append(len(out))
            out.append(step(f, group.nodes, peer, size / channels, channel=c, deps=prev,
                            reduce_at=red, label=f"hd stage{i} ch{c}"))
        prev = tuple(here)
    return out


HALVING_DOUBLING = register(Algorithm(
    name="halving_doubling", build=hd_steps, check=_check,
    collectives=frozenset({"all_reduce", "reduce_scatter", "all_gather"}),
    description="Recursive halving (reduce-scatter) and doubling (all-gather): log2(n) "
                "exchanges each; power-of-two groups.",
    auto=False))
