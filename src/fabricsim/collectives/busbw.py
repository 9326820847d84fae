"""Bus-bandwidth factors of nccl-tests: ``busbw = algbw × factor``.

nccl-tests reports, next to the algorithm bandwidth ``algbw = size / time``, a *bus*
bandwidth that is comparable across collectives and group sizes: the rate each rank's link
would need for a ring-optimal run. The factors are those of nccl-tests' ``*_perf`` programs.

Example
-------
>>> busbw_factor("all_reduce", 8)
1.75
>>> busbw_factor("all_gather", 4), busbw_factor("broadcast", 4)
(0.75, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricsim.errors import ConfigError, unknown

#: Collectives fabricsim models, in the order nccl-tests lists them.
COLLECTIVES: tuple[str, ...] = ("all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                "reduce", "alltoall", "sendrecv")


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``collective`` on ``n`` ranks.

    ``2(n−1)/n`` for all_reduce; ``(n−1)/n`` for reduce_scatter, all_gather and alltoall;
    ``1`` for broadcast, reduce and sendrecv.

    Examples
    --------
    >>> busbw_factor("alltoall", 2)
    0.5
    """
    if collective not in COLLECTIVES:
        raise unknown("collective", collective, COLLECTIVES, field="collective")
    if n < 1:
        raise ConfigError(f"group size must be >= 1, got {n}", field="ranks")
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("reduce_scatter", "all_gather", "alltoall"):
        return (n - 1) / n
    return 1.0


def bandwidths(collective: str, nbytes: float, time: float, n: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in bytes/s for ``nbytes`` moved in ``time`` seconds on ``n`` ranks.

    Examples
    --------
    >>> bandwidths("all_reduce", 1e9, 0.01, 8)
    (100000000000.0, 175000000000.0)
    """
    if time <= 0:
        return float("inf"), float("inf")
    alg = nbytes / time
    return alg, alg * busbw_factor(collective, n)


@dataclass(frozen=True)
class SizeRow:
    """What nccl-tests reports for one message size, measured (a log's row,
    :class:`fabricsim.interop.nccl_tests.Row`) or simulated (a bench job's,
    :class:`fabricsim.jobs.collective.BenchRow`): the size in bytes and elements, data
    type, reduction op, root, the time (us) and both bandwidths (GB/s)."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
