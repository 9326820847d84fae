"""Where communication times come from: a small protocol over the collective engine.

The step model asks a :class:`CommModel` for the time of one collective on one group of
ranks. :class:`EngineComm` answers with :func:`fabricsim.collectives.predict_time`
(analytic) or :func:`fabricsim.collectives.run_collective` (``backend="flow"``) on the
real fabric, and caches answers by (collective, group shape, bytes): on a symmetric
fabric two groups of the same shape take the same time, which keeps a planner's sweep of
thousands of configurations fast.

Concurrency: the engine times one group alone. In a training step every GPU of a server
is in some DP (or CP, EP) group at the same time; when a server has fewer NICs than GPUs
these groups share NICs. :func:`nic_sharing_factor` scales inter-server collectives for it.

Example
-------
>>> import fabricsim as fs
>>> fab = fs.build_cluster("pcie-8gpu", nodes=2)
>>> nic_sharing_factor(fab, [0, 8])
2.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fabricsim.errors import ModelError
from fabricsim.fabric import Fabric

__all__ = ["CommModel", "EngineComm", "group_shape", "nic_sharing_factor"]


class CommModel(Protocol):
    """Anything that can time a collective on a group of ranks of a fabric."""

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        """Seconds for ``collective`` of ``nbytes`` (nccl-tests size) over ``ranks``."""
        ...


def group_shape(fabric: Fabric, ranks: Sequence[int]) -> tuple[int, ...]:
    """A key that two groups share when they sit alike on a symmetric fabric.

    (size, servers spanned, members per server, stride between consecutive ranks).

    Examples
    --------
    >>> import fabricsim as fs
    >>> fab = fs.build_cluster("dgx-h100", nodes=2)
    >>> group_shape(fab, [0, 8]) == group_shape(fab, [1, 9])
    True
    """
    gps = max(1, fabric.info.gpus_per_server)
    servers = {r // gps for r in ranks}
    stride = ranks[1] - ranks[0] if len(ranks) > 1 else 0
    return (len(ranks), len(servers), len(ranks) // max(1, len(servers)), stride)


def nic_sharing_factor(fabric: Fabric, ranks: Sequence[int]) -> float:
    """How many times slower an inter-server collective runs when every GPU of a server
    is in a concurrent group of the same shape and the server has fewer NICs than GPUs.

    1.0 for groups inside one server or servers with a NIC per GPU.
    """
    info = fabric.info
    gps = max(1, info.gpus_per_server)
    servers = {r // gps for r in ranks}
    if len(servers) <= 1 or info.nics_per_server <= 0:
        return 1.0
    per_server = len(ranks) / len(servers)
    alone = per_server / min(per_server, info.nics_per_server)
    together = gps / info.nics_per_server
    return max(1.0, together / alone)


class EngineComm:
    """:class:`CommModel` backed by the collective engine, with a cache.

    Parameters
    ----------
    fabric : Fabric
        The cluster.
    backend : {"analytic", "flow"}
        ``analytic`` uses ``predict_time``; ``flow`` runs the schedule on the flow backend.
    share_nics : bool
        Apply :func:`nic_sharing_factor` to inter-server groups.
    """

    def __init__(self, fabric: Fabric, backend: str = "analytic", share_nics: bool = True
                 ) -> None:
        if backend not in ("analytic", "flow"):
            raise ModelError(f"backend must be 'analytic' or 'flow', got {backend!r}",
                             field="backend")
        self.fabric = fabric
        self.backend = backend
        self.share_nics = share_nics
        self._cache: dict[tuple[object, ...], float] = {}
        self.calls = 0

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        """Seconds for one collective (0 for a group of one or no bytes)."""
        if len(ranks) <= 1 or nbytes <= 0:
            return 0.0
        key = (collective, group_shape(self.fabric, ranks), round(float(nbytes)))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self.calls += 1
        t = self._engine(collective, list(ranks), float(nbytes))
        if self.share_nics:
            t *= nic_sharing_factor(self.fabric, ranks)
        self._cache[key] = t
        return t

    def _engine(self, collective: str, ranks: list[int], nbytes: float) -> float:
        from fabricsim.collectives import predict_time, run_collective

        if self.backend == "flow":
            return run_collective(self.fabric, collective, int(nbytes), ranks=ranks,
                                  backend="flow").time
        return predict_time(self.fabric, collective, int(nbytes), ranks=ranks)
