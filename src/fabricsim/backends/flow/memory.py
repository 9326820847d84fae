"""How much memory a flow simulation will need, estimated before it starts.

The flow engine holds every routed transfer as a job and every (flow, link) pair of its
routes as an incidence entry, each with its rates, sizes and sort keys, for as long as
the run lasts. Its memory is therefore linear in the jobs (transfers × queue pairs) and
in the link entries (jobs × links per route; spraying routes one flow per equal-cost
path). :func:`estimate` routes a deterministic sample of each step's transfers exactly as
the engine will (same hashes, routing mode, queue pairs and NVSwitch-plane striping) and
scales the counts up; :data:`BASE_BYTES` and :data:`BYTES_PER_ENTRY` turn them into
bytes. Both are measured by ``benchmarks/flow_memory.py`` (peak resident memory of
all-to-alls of 256 and 512 GPUs with ECMP, four queue pairs and spraying): the estimate
is 1.1-2.3 times what those runs use, erring high.

:class:`~fabricsim.backends.flow.backend.FlowBackend` refuses, before simulating, a run
whose estimate exceeds the memory the machine has free (or its ``memory_limit_bytes``),
with the estimate and how to shrink the run.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.api import build_schedule
>>> fab = build_cluster("dgx-h100", 4)
>>> e = estimate(build_schedule(fab, "alltoall", 2**20), fab, "ecmp", 1)
>>> e.jobs > 32 * 31, e.bytes < 2**30
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabricsim.backends.flow.routing import Expanded, expand, stripe_planes
from fabricsim.fabric.core import Fabric
from fabricsim.schedule.core import Schedule

#: Peak resident bytes of a flow run: a fixed part, and per (flow, link) entry of its
#: routes after NVSwitch-plane striping (the entry carries its job's arrays too). From
#: ``benchmarks/flow_memory.py`` (all-to-alls of 256 and 512 GPUs over RoCE 400G; ECMP
#: with 1 and 4 queue pairs, spraying), which measured 41-82 B per entry: 90 B and
#: 32 MiB put every case at 1.1-2.3 times what it used, never below.
BASE_BYTES = 32 * 2**20
BYTES_PER_ENTRY = 90
#: Transfers routed in all to estimate a schedule (spread over its steps by size).
SAMPLE = 4096


@dataclass(frozen=True)
class MemoryEstimate:
    """Jobs, link entries and bytes a flow simulation of a schedule will hold."""

    jobs: int
    entries: int
    bytes: int

    def to_dict(self) -> dict[str, int]:
        """The three counts as a dict."""
        return {"jobs": self.jobs, "entries": self.entries, "bytes": self.bytes}


def estimate(schedule: Schedule, fabric: Fabric, routing: str, qps: int,
             sample: int = SAMPLE, *, seed: int = 0,
             routed: dict[int, Expanded] | None = None) -> MemoryEstimate:
    """The memory a flow simulation of ``schedule`` on ``fabric`` will hold, from a sample
    of at most ``sample`` transfers routed as the engine routes them (``seed``: the
    engine's). Steps routed whole go into ``routed`` (by step index), for the engine to
    use instead of routing them again (:func:`~fabricsim.backends.flow.sim.simulate`)."""
    total = sum(s.n for s in schedule.steps)
    jobs = entries = 0.0
    rng = np.random.default_rng(0)
    for i, s in enumerate(schedule.steps):
        if s.n == 0:
            continue
        k = min(s.n, max(1, math.ceil(sample * s.n / max(total, 1))))
        idx = np.sort(rng.choice(s.n, size=k, replace=False)) if k < s.n else np.arange(s.n)
        hashes = s.hashes[idx] if s.hashes is not None else None
        ex = expand(fabric, s.src[idx], s.dst[idx], s.nbytes[idx], hashes=hashes,
                    mode=routing, qps=qps, seed=seed, channel=s.channel)
        ex = stripe_planes(fabric, ex)
        if routed is not None and k == s.n:
            routed[i] = ex
        scale = s.n / k
        jobs += ex.n_jobs * scale
        entries += len(ex.links) * scale
    nbytes = BASE_BYTES + BYTES_PER_ENTRY * entries
    return MemoryEstimate(jobs=int(jobs), entries=int(entries), bytes=int(nbytes))
