"""Random uncontended schedules on which the three backends must give one answer.

Physics says that where no two transfers share a link at the same time, the analytic
(α–β), flow (max-min) and packet backends time a schedule alike: each transfer takes its
path latency, its protocol's hop overhead and its bytes over the protocol's payload rate
on its bottleneck link (:func:`~fabricsim.protocols.transfer_terms`). This
module draws such schedules (a chain of steps, each a set of transfers between distinct
GPUs whose paths share no link) for the property test and for
``benchmarks/backend_agreement.py``.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 2)
>>> sch = uncontended_schedule(fab, seed=1)
>>> len(sch.steps) >= 1, sch.protocol in ("ll", "ll128", "simple", "")
(True, True)
"""

from __future__ import annotations

import numpy as np

from fabricsim.fabric.core import Fabric
from fabricsim.schedule.core import Schedule, Step

PROTOCOL_CHOICES = ("ll", "ll128", "simple", "ideal")


def _disjoint_pairs(fabric: Fabric, rng: np.random.Generator, want: int
                    ) -> tuple[list[int], list[int]]:
    """Up to ``want`` (src, dst) GPU pairs whose routes share no link."""
    used = np.zeros(fabric.n_links, dtype=bool)
    busy: set[int] = set()
    src: list[int] = []
    dst: list[int] = []
    for _ in range(8 * want):
        if len(src) == want:
            break
        a, b = (int(x) for x in rng.choice(fabric.gpus, 2, replace=False))
        if a in busy or b in busy:
            continue
        links = np.concatenate(fabric.ecmp_paths(a, b, limit=64))
        if used[links].any():
            continue
        used[links] = True
        busy.update((a, b))
        src.append(a)
        dst.append(b)
    return src, dst


def uncontended_schedule(fabric: Fabric, seed: int, *, max_steps: int = 3,
                         min_bytes: float = 2.0**20, max_bytes: float = 2.0**26,
                         protocol: str | None = None) -> Schedule:
    """A chain of 1..``max_steps`` steps of link-disjoint transfers (sizes log-uniform in
    [``min_bytes``, ``max_bytes``], 1–3 repetitions each) and a random protocol."""
    rng = np.random.default_rng(seed)
    steps: list[Step] = []
    for i in range(int(rng.integers(1, max_steps + 1))):
        src, dst = _disjoint_pairs(fabric, rng, int(rng.integers(1, 4)))
        size = float(np.exp(rng.uniform(np.log(min_bytes), np.log(max_bytes))))
        steps.append(Step(src=np.array(src, np.int32), dst=np.array(dst, np.int32),
                          nbytes=np.full(len(src), size), repeat=int(rng.integers(1, 4)),
                          deps=(i - 1,) if i else (), label=f"random {i}"))
    proto = protocol or str(rng.choice(PROTOCOL_CHOICES))
    return Schedule(steps=tuple(steps), protocol="" if proto == "ideal" else proto,
                    nbytes=int(max_bytes))
