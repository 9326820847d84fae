"""The all-reduce serving engines run for tensor parallelism inside one NVLink domain.

TensorRT-LLM (its AllReduce plugin) and vLLM (``custom_all_reduce``) do not call NCCL for
a decode step's small all-reduces between GPUs of one NVLink domain: each runs its own
kernel on buffers every GPU has mapped from its peers (CUDA IPC), captured in the decode
step's CUDA graph, so no per-call launch is paid. Two shapes, the engine picking the
faster:

* **one-shot**: a barrier (every GPU raises a flag in every peer's memory and polls for
  theirs), then each GPU reads the other ``n − 1`` buffers whole over its NVLinks and
  reduces locally, then a barrier before the buffers are reused: ``2`` barriers and
  ``(n − 1)·S`` bytes in through each GPU's NVLinks;
* **two-shot**: each GPU reduces ``1/n`` of the message from its peers' buffers
  (``(n − 1)·S/n`` in), a barrier, then gathers the other reduced parts (the same again):
  ``3`` barriers and ``2·(n − 1)·S/n`` bytes.

A barrier is a flag written and polled over NVLink, the step NCCL's LL protocol makes per
hop: its NVLink hop (:data:`fabricsim.protocols.PROTOCOLS` ``["ll"]``); the bytes move at
Simple's NVLink efficiency. No constant is fitted here. Above :data:`MAX_BYTES` (vLLM's
buffer, 8 MiB) or across NVLink domains the engines call NCCL.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 1)
>>> t = engine_allreduce_time(fab, list(range(8)), 16 * 2**10)   # 16 KiB, one-shot
>>> round(t * 1e6, 2)
1.09
>>> engine_allreduce_time(fab, list(range(8)), 64 * 2**20) is None   # NCCL's size
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fabricsim.collectives.pipeline import nvlink_rate
from fabricsim.collectives.registry import Group
from fabricsim.fabric.core import Fabric
from fabricsim.protocols import PROTOCOLS

#: Largest all-reduce the engines run with their own kernels (vLLM's custom all-reduce
#: buffer, ``max_size`` 8 MiB); larger ones go to NCCL.
MAX_BYTES = 8 * 2**20


@dataclass(frozen=True)
class EngineAllreduce:
    """The engines' own all-reduce over one group of ranks: what its time depends on
    besides the message, worked out once (a decode loop asks for it at every step).
    ``rate`` 0 means the engines call NCCL for every size (ranks across NVLink domains,
    no NVLink).

    >>> from fabricsim.fabric import build_cluster
    >>> k = EngineAllreduce.of(build_cluster("dgx-h100", 1), range(8))
    >>> round(k.time(16 * 2**10) * 1e6, 2), k.time(64 * 2**20)
    (1.09, None)
    """

    n: int
    rate: float
    barrier: float

    @staticmethod
    def of(fabric: Fabric, ranks: Sequence[int]) -> EngineAllreduce:
        """The kernel's facts for ``ranks`` on ``fabric``."""
        ranks = list(ranks)
        n = len(ranks)
        barrier = PROTOCOLS["ll"].hop_latency["nvlink"]
        if n < 2:
            return EngineAllreduce(n=n, rate=0.0, barrier=barrier)
        group = Group.of(fabric, ranks)
        if group.servers != 1:
            return EngineAllreduce(n=n, rate=0.0, barrier=barrier)
        rate = nvlink_rate(group) * PROTOCOLS["simple"].efficiency["nvlink"]
        return EngineAllreduce(n=n, rate=max(rate, 0.0), barrier=barrier)

    def time(self, nbytes: float) -> float | None:
        """Seconds for ``nbytes`` (the faster of one-shot and two-shot), or ``None``
        where the engines call NCCL instead (see :func:`engine_allreduce_time`)."""
        n = self.n
        if n < 2 or nbytes <= 0:
            return 0.0
        if nbytes > MAX_BYTES or self.rate <= 0:
            return None
        one = 2 * self.barrier + (n - 1) * nbytes / self.rate
        two = 3 * self.barrier + 2 * (n - 1) / n * nbytes / self.rate
        return float(min(one, two))


def engine_allreduce_time(fabric: Fabric, ranks: Sequence[int], nbytes: float
                          ) -> float | None:
    """Seconds for the engines' own all-reduce of ``nbytes`` over ``ranks`` (the faster of
    one-shot and two-shot), or ``None`` where they call NCCL instead: more than
    :data:`MAX_BYTES`, ranks on more than one server (NVLink domain), or no NVLink."""
    if len(ranks) < 2 or nbytes <= 0:
        return 0.0
    if nbytes > MAX_BYTES:
        return None
    return EngineAllreduce.of(fabric, ranks).time(nbytes)
