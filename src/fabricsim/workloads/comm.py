"""Where communication times come from: a small protocol over the collective engine.

The step model asks a :class:`CommModel` for the time of one collective on one group of
ranks. :class:`EngineComm` answers with :func:`fabricsim.collectives.predict_time`
(analytic) or :func:`fabricsim.collectives.run_collective` (``backend="flow"``) on the
real fabric, and caches answers by (collective, group shape, bytes): on a symmetric
fabric two groups of the same shape take the same time, which keeps a planner's sweep of
thousands of configurations fast.

With faults or traffic from elsewhere the fabric is no longer symmetric: :class:`FlowComm`
times collectives on the flow backend with the scenario's faults and background traffic,
and answers :meth:`FlowComm.time_all` for a group and all its siblings (every group of the
job that plays the same part, :meth:`~fabricsim.workloads.training.parallel.
ResolvedParallel.siblings`): a synchronous step waits for the slowest.

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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from fabricsim.errors import ModelError
from fabricsim.fabric import Fabric

if TYPE_CHECKING:
    from fabricsim.backends.flow.specs import BackgroundSpec, FaultSpec
    from fabricsim.collectives.ep import EpConfig
    from fabricsim.schedule.core import Schedule

__all__ = ["CommModel", "EngineComm", "FlowComm", "GroupComm", "group_builder", "group_shape",
           "nic_sharing_factor"]


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


def group_builder(fabric: Fabric, collective: str, first: Sequence[int], nbytes: float
                  ) -> Callable[[Sequence[int]], Schedule]:
    """What builds ``collective`` of ``nbytes`` for any sibling of group ``first``: NCCL's
    choice (algorithm, protocol) made once, for ``first``, as every sibling sits alike.

    >>> import fabricsim as fs
    >>> build = group_builder(fs.build_cluster("dgx-h100", nodes=2), "all_reduce", [0, 8], 2**20)
    >>> build([1, 9]).algorithm == build([0, 8]).algorithm
    True
    """
    from fabricsim.collectives import Group, get_algorithm
    from fabricsim.collectives.tuner import build, default_tuner

    choice = default_tuner(fabric).choose(fabric, collective, nbytes, ranks=list(first))
    algo = get_algorithm(choice.algorithm)

    def one(g: Sequence[int]) -> Schedule:
        return build(Group.of(fabric, list(g)), collective, nbytes, algo, choice.protocol)

    return one


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

    def ep_time(self, kernel: str, phase: str, ranks: Sequence[int], cfg: EpConfig
                ) -> float:
        """Seconds for one MoE dispatch or combine of ``kernel`` over ``ranks``
        (:func:`fabricsim.collectives.ep.run_ep`), cached by group shape."""
        from fabricsim.collectives.ep import run_ep

        if len(ranks) <= 1:
            return 0.0
        key = ("ep", kernel, phase, group_shape(self.fabric, ranks), cfg)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self.calls += 1
        t = run_ep(self.fabric, cfg, phase, kernel, np.asarray(ranks, dtype=np.int32),
                   backend=self.backend).time_us * 1e-6
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


@runtime_checkable
class GroupComm(Protocol):
    """A :class:`CommModel` that can also time a collective on several groups at once
    (the groups that play one part in a job) and answer for the slowest."""

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float: ...

    def time_all(self, collective: str, groups: Sequence[Sequence[int]], nbytes: float
                 ) -> float: ...


class FlowComm:
    """:class:`CommModel` on the flow backend with a scenario's faults and background
    traffic (:class:`~fabricsim.backends.flow.FlowBackend`).

    :meth:`time` times one group as it sits on the faulty fabric. :meth:`time_all` times
    a group and its siblings and returns the slowest: the fault-free time of the group's
    shape (one flow run, cached as :class:`EngineComm` caches it), and each sibling that
    a fault can reach, run with the faults and the traffic. What a fault reaches follows
    from where it is: a straggler, the groups holding it; a link inside a server or at
    its NIC, the groups with a GPU on that server; a link between switches, or background
    traffic, every group that leaves its server. Answers are cached by group.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.backends.flow.specs import FaultSpec
    >>> fab = fs.build_cluster("dgx-h100", nodes=2)
    >>> slow = FlowComm(fab, [FaultSpec(type="slow_nic", node=1, index=3, factor=0.25)])
    >>> ok = EngineComm(fab, backend="flow")
    >>> ranks = [[3, 11], [0, 8]]  # the pair across NIC 3 first, then a healthy one
    >>> slow.time_all("all_reduce", ranks, 2**28) > 3 * ok.time("all_reduce", [0, 8], 2**28)
    True
    >>> slow.time_all("all_reduce", [[0, 1]], 2**28) == ok.time("all_reduce", [0, 1], 2**28)
    True
    """

    def __init__(self, fabric: Fabric, faults: Sequence[FaultSpec] = (),
                 background: Sequence[BackgroundSpec] = (), seed: int = 0,
                 share_nics: bool = True) -> None:
        from fabricsim.backends.flow import FlowBackend, plan_faults

        self.fabric = fabric
        self.faults = list(faults)
        self.background = list(background)
        self.share_nics = share_nics
        self.healthy = EngineComm(fabric, backend="flow", share_nics=share_nics)
        self._backend = FlowBackend(faults=self.faults, background=self.background,
                                    seed=seed)
        self._cache: dict[tuple[object, ...], float] = {}
        plan = plan_faults(fabric, self.faults)
        server = np.asarray(fabric.node_server)
        self._rank_server = server[np.asarray(fabric.gpus)]
        self._straggler_ranks: set[int] = set()
        gpu_rank = {int(n): i for i, n in enumerate(np.asarray(fabric.gpus).tolist())}
        for node in plan.node_delay:
            if node in gpu_rank:
                self._straggler_ranks.add(gpu_rank[node])
        src, dst = np.asarray(fabric.link_src), np.asarray(fabric.link_dst)
        self._servers: set[int] = set()
        self._network = bool(self.background)
        for f in plan.faults:
            for node in f.nodes:
                if node in gpu_rank:
                    self._straggler_ranks.add(gpu_rank[node])
                elif server[node] >= 0:
                    self._servers.add(int(server[node]))
            for link in f.links:
                ends = {int(server[src[link]]), int(server[dst[link]])} - {-1}
                if ends:
                    self._servers.update(ends)
                else:
                    self._network = True
        self.calls = 0

    def reaches(self, ranks: Sequence[int]) -> bool:
        """Whether a fault or the background traffic can slow a collective on ``ranks``.

        >>> import fabricsim as fs
        >>> from fabricsim.backends.flow.specs import FaultSpec
        >>> c = FlowComm(fs.build_cluster("dgx-h100", nodes=2),
        ...              [FaultSpec(type="slow_gpu", gpu=9, delay="10us")])
        >>> c.reaches([0, 1]), c.reaches([1, 9])
        (False, True)
        """
        if any(r in self._straggler_ranks for r in ranks):
            return True
        servers = {int(self._rank_server[r]) for r in ranks}
        return bool(servers & self._servers) or (self._network and len(servers) > 1)

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        """Seconds for one collective on ``ranks`` with the faults and the traffic."""
        if len(ranks) <= 1 or nbytes <= 0:
            return 0.0
        if not self.reaches(ranks):
            return self.healthy.time(collective, ranks, nbytes)
        key = (collective, tuple(ranks), round(float(nbytes)))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        from fabricsim.collectives import run_collective

        self.calls += 1
        t = run_collective(self.fabric, collective, int(nbytes), ranks=list(ranks),
                           backend=self._backend).time
        if self.share_nics:
            t *= nic_sharing_factor(self.fabric, ranks)
        self._cache[key] = t
        return t

    def ep_time(self, kernel: str, phase: str, ranks: Sequence[int], cfg: EpConfig
                ) -> float:
        """:meth:`EngineComm.ep_time` with the faults and the traffic, where they reach
        ``ranks``."""
        if not self.reaches(ranks):
            return self.healthy.ep_time(kernel, phase, ranks, cfg)
        key = ("ep", kernel, phase, tuple(ranks), cfg)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        from fabricsim.collectives.ep import run_ep

        self.calls += 1
        t = run_ep(self.fabric, cfg, phase, kernel, np.asarray(ranks, dtype=np.int32),
                   backend=self._backend).time_us * 1e-6
        if self.share_nics:
            t *= nic_sharing_factor(self.fabric, ranks)
        self._cache[key] = t
        return t

    def time_all(self, collective: str, groups: Sequence[Sequence[int]], nbytes: float
                 ) -> float:
        """Seconds until the slowest of ``groups`` (the first is the representative, the
        others its siblings) finishes ``collective`` of ``nbytes``."""
        if not groups:
            return 0.0
        worst = self.healthy.time(collective, groups[0], nbytes)
        for g in groups:
            if self.reaches(g):
                worst = max(worst, self.time(collective, g, nbytes))
        return worst
