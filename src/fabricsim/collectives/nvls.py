"""NVLS: all-reduce with the reduction inside NVSwitch (NVLink SHARP, Hopper and later).

Every GPU pushes its buffer into the NVSwitch planes (``S/K`` to each of the ``K`` chips)
where it is summed (``reduce_at="switch"``); the switch returns each GPU its reduced shard
(``S/(nK)`` per plane); the GPU multicasts its shard back through the switch, which
replicates it to every GPU. Phases pipeline, so the steady state is one step in which each
NVLink carries ``(1 + 1/n)·S/K`` each way: twice less than a ring, which is why NVLS busbw
can exceed the NVLink rate. Across servers, each rail's shard is all-reduced by a ring
between the NVLS reduce-scatter and multicast phases.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> s = nvls_steps(Group.of(build_cluster("dgx-h100", 1)), "all_reduce", 8e6, 1)
>>> [x.label for x in s], s[1].reduce_at
(['nvls fill', 'nvls reduce+multicast'], 'switch')
"""

from __future__ import annotations

import numpy as np

from fabricsim.collectives.hierarchical import rail_ring
from fabricsim.collectives.registry import Algorithm, Group, register, step
from fabricsim.schedule.core import Step


def _check(group: Group, collective: str) -> str | None:
    info = group.fabric.info
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


def nvls_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """In-switch reduce-scatter + multicast, with per-rail rings between servers."""
    f = group.fabric
    grid = group.grid()
    m, g = grid.shape
    gpus = group.nodes[grid]                              # m × g
    sw = group.nvswitch_grid(group.server_of[grid[:, 0]])  # m × K
    k = sw.shape[1]
    g_rep = np.repeat(gpus[:, :, None], k, axis=2).ravel()   # every GPU × plane
    s_rep = np.repeat(sw[:, None, :], g, axis=1).ravel()
    out: list[Step] = [step(f, [int(gpus[0, 0])], [int(sw[0, 0])], 0.0, repeat=3,
                            label="nvls fill")]
    if m == 1:
        per = nbytes / k
        src = np.concatenate([g_rep, s_rep, g_rep, s_rep])
        dst = np.concatenate([s_rep, g_rep, s_rep, g_rep])
        size = np.concatenate([np.full(g_rep.size, per), np.full(g_rep.size, per / g),
                               np.full(g_rep.size, per / g), np.full(g_rep.size, per)])
        out.append(step(f, src, dst, size, deps=(0,), reduce_at="switch",
                        label="nvls reduce+multicast"))
        return out
    per = nbytes / k
    out.append(step(f, np.concatenate([g_rep, s_rep]), np.concatenate([s_rep, g_rep]),
                    np.concatenate([np.full(g_rep.size, per), np.full(g_rep.size, per / g)]),
                    deps=(0,), reduce_at="switch", label="nvls reduce-scatter"))
    s, d = rail_ring(group, grid)
    base = len(out)
    out += [step(f, s, d, nbytes / g / m / channels, channel=c, repeat=2 * (m - 1),
                 deps=(1,), reduce_at="dst", label=f"inter all-reduce ch{c}")
            for c in range(channels)]
    out.append(step(f, np.concatenate([g_rep, s_rep]), np.concatenate([s_rep, g_rep]),
                    np.concatenate([np.full(g_rep.size, per / g), np.full(g_rep.size, per)]),
                    deps=tuple(range(base, len(out))), reduce_at="switch",
                    label="nvls multicast"))
    return out


NVLS = register(Algorithm(
    name="nvls", build=nvls_steps, check=_check, collectives=frozenset({"all_reduce"}),
    protocols=("simple",),
    description="NVLink SHARP: reduction and multicast inside NVSwitch (H100+); rings per "
                "rail across servers."))
