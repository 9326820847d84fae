"""All-to-all (direct and pairwise) and send/recv.

``direct`` posts every rank's ``n−1`` sends at once (as NCCL groups its point-to-point
calls); ``pairwise`` runs ``n−1`` rounds in which rank ``r`` sends to ``r+k``. ``S`` is each
rank's send buffer, ``S/n`` goes to each peer. Send/recv (nccl-tests ``sendrecv_perf``):
every rank sends ``S`` to its successor and receives from its predecessor.

Across servers a peer's bytes are split evenly over the sender's NICs (aws-p5: four EFA
per GPU), and every network peer costs a connection's worth of protocol overhead before
the data flows: NCCL's proxy posts one network send and receive per peer, one after the
other, so a zero-byte step repeated once per remote peer (on a network pair) precedes the
transfers. Peers on NVLink cost no such round.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> g = Group.of(build_cluster("dgx-h100", 1), ranks=[0, 1, 2, 3])
>>> s = direct_steps(g, "alltoall", 4e6, 1)
>>> s[0].n, float(s[0].nbytes[0])
(12, 1000000.0)
"""

from __future__ import annotations

import numpy as np

from fabricsim.collectives.registry import Algorithm, Group, fill_step, register, step
from fabricsim.schedule.core import Step

#: Largest number of point-to-point transfers an all-to-all schedule may hold.
MAX_PAIRS = 8_000_000


def _check(group: Group, collective: str) -> str | None:
    n = group.n
    if collective == "alltoall" and n * (n - 1) > MAX_PAIRS:
        return (f"alltoall over {n} ranks is {n * (n - 1):,} transfers (limit {MAX_PAIRS:,});"
                " simulate a smaller group (e.g. one expert-parallel group)")
    return None


def _nics(group: Group) -> int:
    """NICs a peer's bytes are split over: the GPU's NICs across servers, else one."""
    return max(group.fabric.info.nics_per_gpu, 1) if group.servers > 1 else 1


def direct_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """All sends at once (alltoall) or one send per rank to its successor (sendrecv)."""
    n = group.n
    f = group.fabric
    k = _nics(group)
    if collective == "sendrecv":  # one rank: it sends to itself (a local copy, as NCCL)
        return [step(f, group.nodes, np.roll(group.nodes, -1), nbytes / k, nic=j,
                     label=f"sendrecv nic{j}") for j in range(k)]
    if n == 1:
        return []
    i, d = np.meshgrid(np.arange(n), np.arange(1, n), indexing="ij")
    src = group.nodes[i.ravel()]
    dst = group.nodes[(i + d).ravel() % n]
    out: list[Step] = []
    srv = group.server_of
    remote = int((srv[:, None] != srv[None, :]).sum(axis=1).max())
    if remote:  # one connection round per remote peer of the busiest rank
        a = int(np.flatnonzero(srv != srv[0])[0])
        out = fill_step(f, int(group.nodes[0]), int(group.nodes[a]), remote, "peer setup")
    deps = (0,) if out else ()
    return out + [step(f, src, dst, nbytes / n / k, deps=deps, nic=j,
                       label=f"alltoall nic{j}") for j in range(k)]


def pairwise_steps(group: Group, collective: str, nbytes: float, channels: int
                   ) -> list[Step]:
    """``n−1`` rounds; in round ``k`` rank ``r`` sends ``S/n`` to rank ``r+k``."""
    n = group.n
    f = group.fabric
    out: list[Step] = []
    prev: tuple[int, ...] = ()
    for k in range(1, n):
        here = []
        for c in range(channels):
            here.append(len(out))
            out.append(step(f, group.nodes, np.roll(group.nodes, -k), nbytes / n / channels,
                            channel=c, deps=prev, label=f"pairwise round{k} ch{c}"))
        prev = tuple(here)
    return out


DIRECT = register(Algorithm(
    name="direct", build=direct_steps, check=_check,
    collectives=frozenset({"alltoall", "sendrecv"}),
    description="All point-to-point sends posted at once (NCCL's grouped send/recv)."))
PAIRWISE = register(Algorithm(
    name="pairwise", build=pairwise_steps, check=_check, collectives=frozenset({"alltoall"}),
    description="n-1 rounds of shifted exchanges (rank r sends to r+k in round k).",
    auto=False))
