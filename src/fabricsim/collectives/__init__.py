"""NCCL-style collectives compiled to Schedules, with algorithm/protocol selection.

Collectives: ``all_reduce``, ``reduce_scatter``, ``all_gather``, ``broadcast``, ``reduce``,
``alltoall``, ``sendrecv``. Algorithms (registry :data:`ALGORITHMS`): ``ring``, ``tree``,
``halving_doubling``, ``direct``, ``pairwise``, ``hierarchical``, ``nvls``, ``sharp``.
Protocols: ``ll``, ``ll128``, ``simple``.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-a100", 1)
>>> r = run_collective(fab, "all_reduce", 2**26)
>>> r.algorithm in ALGORITHMS, busbw_factor("all_reduce", 8)
(True, 1.75)
"""

from fabricsim.collectives import (  # noqa: F401  (import registers the algorithms)
    alltoall,
    halving_doubling,
    hierarchical,
    nvls,
    ring,
    sharp,
    tree,
    xla,
)
from fabricsim.collectives.api import (
    CollectiveResult,
    build_schedule,
    predict_time,
    run_collective,
)
from fabricsim.collectives.busbw import COLLECTIVES, bandwidths, busbw_factor
from fabricsim.collectives.registry import ALGORITHMS, Algorithm, Group, get_algorithm, register
from fabricsim.collectives.tuner import Choice, Tuner, choose, clear_cache
from fabricsim.protocols import PROTOCOL_LABELS, PROTOCOLS, Protocol, get_protocol

__all__ = [
    "ALGORITHMS",
    "COLLECTIVES",
    "PROTOCOLS",
    "PROTOCOL_LABELS",
    "Algorithm",
    "Choice",
    "CollectiveResult",
    "Group",
    "Protocol",
    "Tuner",
    "bandwidths",
    "build_schedule",
    "busbw_factor",
    "choose",
    "clear_cache",
    "get_algorithm",
    "get_protocol",
    "predict_time",
    "register",
    "run_collective",
]
