"""The backend protocol and its result.

A backend turns a :class:`~fabricsim.schedule.Schedule` on a
:class:`~fabricsim.fabric.Fabric` into a :class:`Result`: how long it takes, when each step
ran, how many bytes crossed each link and which link limited it. Workloads, reports and the
CLI read only Results.

Example
-------
>>> import numpy as np
>>> from fabricsim.schedule import Schedule, Step
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=1)
>>> step = Step(src=fab.gpus[:1], dst=fab.gpus[1:2], nbytes=np.array([1e6]), repeat=2)
>>> IdealBackend(latency=1e-6).run(Schedule(steps=(step,)), fab).time
2e-06
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from fabricsim.fabric.core import Fabric
from fabricsim.fabric.kinds import LinkKind
from fabricsim.results import Tabular, scalars
from fabricsim.schedule.core import Channels, Crossings, Schedule

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class LinkReport(Tabular):
    """One link's share of a result (bytes, utilization of its capacity over the run)."""

    link: int
    name: str
    kind: str
    bytes: float
    utilization: float


@dataclass(frozen=True, eq=False)
class Result(Tabular):
    """What a backend returns. Times in seconds, bytes in bytes.

    ``to_dict()`` / ``to_pandas()`` give one row: the time, the bottleneck, step and byte
    totals and the scalar figures of ``extra`` (per-link and per-flow arrays stay here).

    >>> import numpy as np
    >>> r = Result(time=2e-3, backend="analytic", step_start=np.zeros(2),
    ...            step_end=np.array([1e-3, 2e-3]), link_bytes=np.array([4e6, 0.0]),
    ...            extra={"protocol": "simple", "queue": np.zeros(2)})
    >>> r.to_dict()["extra.protocol"], r.to_dict()["link_bytes_total"], "extra.queue" in r.to_dict()
    ('simple', 4000000.0, False)
    """

    time: float
    backend: str
    step_start: FloatArray
    step_end: FloatArray
    link_bytes: FloatArray
    bottleneck_link: int = -1
    bottleneck_kind: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _record(self) -> dict[str, Any]:
        return {"time_s": self.time, "backend": self.backend,
                "steps": int(self.step_start.shape[0]),
                "link_bytes_total": float(self.link_bytes.sum()),
                "bottleneck_link": self.bottleneck_link,
                "bottleneck_kind": self.bottleneck_kind, "extra": scalars(self.extra)}

    def link_utilization(self, fabric: Fabric) -> FloatArray:
        """Mean utilization of every link over the run (0..1)."""
        if self.time <= 0:
            return np.zeros(fabric.n_links)
        return self.link_bytes / (fabric.link_capacity * self.time)

    def top_links(self, fabric: Fabric, n: int = 5) -> list[LinkReport]:
        """The ``n`` busiest links by utilization."""
        util = self.link_utilization(fabric)
        order = np.argsort(-util, kind="stable")[:n]
        return [LinkReport(int(l), fabric.link_name(int(l)), fabric.link_label(int(l)),
                           float(self.link_bytes[l]), float(util[l]))
                for l in order if self.link_bytes[l] > 0]

    def bytes_by_kind(self, fabric: Fabric) -> dict[str, float]:
        """Total bytes carried per link class (nvlink, pcie, nic-leaf, ...)."""
        out: dict[str, float] = {}
        for k in np.unique(fabric.link_kind):
            out[LinkKind(int(k)).label] = float(self.link_bytes[fabric.link_kind == k].sum())
        return out


def kernel_floor(schedule: Schedule, protocol: Any) -> float:
    """The least time (s) ``schedule``'s kernels need (:meth:`Schedule.kernel_floor`, with
    the protocol's bounds on a tree channel and on a copy warp), under a real protocol; 0
    under ``"ideal"`` (physics only) or none. Every backend applies it the same way:
    ``time = max(network time, start + floor + launch)``, ``start`` the schedule's own
    latency (:func:`fabricsim.backends.analytic.stream_start`): the kernels stream at their
    rate once the first bytes are through, as NCCL's cost model adds a latency to its size
    over bandwidth.

    >>> from fabricsim.protocols import get_protocol
    >>> from fabricsim.schedule import Schedule
    >>> s = Schedule(steps=(), nbytes=10**9, kernel_bytes_per_s=1e11)
    >>> kernel_floor(s, get_protocol("simple")), kernel_floor(s, get_protocol("ideal"))
    (0.01, 0.0)
    """
    bounds = kernel_bounds(schedule, protocol)
    return float(schedule.nbytes) / min(bounds.values()) if bounds else 0.0


def kernel_bounds(schedule: Schedule, protocol: Any) -> dict[str, float]:
    """The kernels' own bounds on ``schedule`` (bytes/s, by name:
    :meth:`Schedule.kernel_bounds`) with ``protocol``'s rates per tree channel and per
    copy warp of its algorithm; none under ``"ideal"`` or no protocol.
    :func:`kernel_floor` takes the least; ``bench``'s limit line names it.

    >>> from fabricsim.protocols import get_protocol
    >>> from fabricsim.schedule import Schedule
    >>> s = Schedule(steps=(), algorithm="nvls", copy_warps=10)
    >>> kernel_bounds(s, get_protocol("simple"))["copy_warps"] > 0, kernel_bounds(s, None)
    (True, {})
    """
    if protocol is None or protocol.name.lower() == "ideal":
        return {}
    warp = getattr(protocol, "nvls_warp_rate", {}).get(schedule.algorithm, 0.0)
    return schedule.kernel_bounds(getattr(protocol, "tree_channel_rate", 0.0), warp,
                                  getattr(protocol, "nvlstree_channel_rate", 0.0))


def schedule_protocol(schedule: Schedule, protocol: Any) -> Any:
    """``protocol`` as ``schedule``'s steps pay it: where the schedule's steps each cost a
    fixed time (:attr:`~fabricsim.schedule.Schedule.fixed_steps`, NCCL's rings), without
    the size ramp and with the protocol's ``fixed_step_latency``; then its per-hop
    latencies times the schedule's :attr:`~fabricsim.schedule.Schedule.hop_scale` for
    that protocol (NCCL's tree chain steps cost other than its ring steps); and where the
    schedule's NVLink joins the hosts of a rack (:attr:`~fabricsim.schedule.Schedule.mnnvl`,
    multi-node NVLink), every NVLink and NVLS step ``mnnvl_step`` more. Every backend times a
    schedule with this protocol; ``None`` stays ``None``.

    >>> from fabricsim.protocols import get_protocol
    >>> from fabricsim.schedule import Schedule
    >>> s = Schedule(steps=(), hop_scale={"ll128": {"nvlink": 0.5}})
    >>> p = get_protocol("ll128")
    >>> schedule_protocol(s, p).hop_latency["nvlink"] == p.hop_latency["nvlink"] / 2
    True
    >>> schedule_protocol(s, get_protocol("simple")) is get_protocol("simple")
    True
    >>> ring = schedule_protocol(Schedule(steps=(), fixed_steps=True), get_protocol("simple"))
    >>> ring.ramp_bytes, ring.hop_latency["nvlink"] == ring.fixed_step_latency["nvlink"]
    (0.0, True)
    >>> rack = schedule_protocol(Schedule(steps=(), mnnvl=True), get_protocol("ll"))
    >>> rack.hop_latency["nvlink"] == get_protocol("ll").hop_latency["nvlink"] + p.mnnvl_step
    True
    """
    if protocol is None:
        return None
    if schedule.fixed_steps:  # steps of a fixed cost each: no ramp, the step's own latency
        protocol = protocol.scaled(
            ramp_bytes=0.0, hop_latency={**protocol.hop_latency,
                                         **protocol.fixed_step_latency})
    per = schedule.hop_scale.get(protocol.name)
    if per:
        protocol = protocol.scaled(hop_latency={c: v * per.get(c, 1.0)
                                                for c, v in protocol.hop_latency.items()})
    extra = getattr(protocol, "mnnvl_step", 0.0) if schedule.mnnvl else 0.0
    if extra > 0.0:  # a physical cost of the path: added after the algorithm's scaling;
        # NVLS steps (through the switch) join the same hosts as NVLink's own
        protocol = protocol.scaled(hop_latency={
            **protocol.hop_latency, **{c: protocol.hop_latency[c] + extra
                                       for c in ("nvlink", "nvls")}})
    return protocol


def fill_efficiency(protocol: Any, fabric: Fabric) -> dict[str, float]:
    """Payload share of line rate per link class under ``protocol`` on ``fabric`` (the
    efficiencies a :class:`~fabricsim.schedule.Pipeline`'s fill is timed with): the
    published ones, not a calibration's (the fill is a small term of a large message, so
    a fit would get a weak and misleading lever on the efficiencies through it)."""
    from fabricsim.protocols import LINK_CLASSES

    eff = protocol.eff_array(fabric, calibrated=False)
    return dict(zip(LINK_CLASSES, (float(x) for x in eff), strict=True))


def active_pipeline(schedule: Schedule, protocol: Any) -> Any:
    """The chunk pipeline ``protocol`` fills on ``schedule``: the first of
    :attr:`Schedule.pipeline` and :attr:`Schedule.pipelines` that names it; None where it
    fills by none (LL and LL128 forward line by line inside a server). Where the
    schedule's NVLink joins the hosts of a rack (:attr:`Schedule.mnnvl`), its NVLS stages
    are the protocol's ``mnnvl_nvls_stages`` more.

    >>> from fabricsim.protocols import get_protocol
    >>> from fabricsim.schedule import Pipeline, Schedule
    >>> p = Pipeline(stages=(("nvls", 3.0, 1e9),), ops=1, chunk_bytes=65536.0)
    >>> simple = get_protocol("simple")
    >>> simple.mnnvl_nvls_stages > 0
    True
    >>> active_pipeline(Schedule(steps=(), pipeline=p), simple).stages[0][1]
    3.0
    >>> rack = Schedule(steps=(), pipeline=p, mnnvl=True)
    >>> active_pipeline(rack, simple).stages[0][1] == 3.0 + simple.mnnvl_nvls_stages
    True
    """
    if protocol is None:
        return None
    for pipe in (schedule.pipeline, *schedule.pipelines):
        if pipe is not None and protocol.name in pipe.protocols:
            extra = getattr(protocol, "mnnvl_nvls_stages", 0.0) if schedule.mnnvl else 0.0
            return pipe.with_more("nvls", extra) if extra > 0.0 else pipe
    return None


def pipeline_fill(schedule: Schedule, protocol: Any, fabric: Fabric) -> float:
    """Seconds ``schedule``'s chunk pipeline (:func:`active_pipeline`) takes to fill
    under ``protocol`` (0 without a pipeline, or for a protocol that does not fill by
    chunks). Every backend adds it to the network time the same way:
    ``time = max(network, kernels) + fill``.

    >>> from fabricsim.schedule import Schedule
    >>> pipeline_fill(Schedule(steps=()), None, None)
    0.0
    """
    pipe = active_pipeline(schedule, protocol)
    if pipe is None:
        return 0.0
    return float(pipe.fill(float(schedule.nbytes), fill_efficiency(protocol, fabric)))


def crossing_cost(schedule: Schedule, protocol: Any) -> float:
    """Seconds ``schedule``'s network crossings (:class:`Schedule.crossings`) cost under
    ``protocol`` for its message: crossings in sequence × the protocol's
    ``crossing_per_channel`` × the channels NCCL runs the operation on. Every backend
    adds it to its time the same way, as it adds the pipeline's fill:
    ``time = max(network, kernels) + fill + crossings``.

    >>> from fabricsim.schedule import Schedule
    >>> crossing_cost(Schedule(steps=()), None)
    0.0
    """
    return crossing_seconds(schedule.crossings, protocol, float(schedule.nbytes))


def crossing_seconds(cross: Crossings | None, protocol: Any, nbytes: float) -> float:
    """Seconds ``cross`` costs under ``protocol`` for a message of ``nbytes``
    (:func:`crossing_cost` for a schedule's own)."""
    if cross is None or protocol is None:
        return 0.0
    per = getattr(protocol, "crossing_per_channel", 0.0)
    plugin = getattr(protocol, "plugin_latency_share", 0.0) * cross.plugin_latency
    if not per and not plugin:
        return 0.0
    thread = _thread_bytes(protocol, cross.ll_ranks)
    return float(cross.count * (per * cross.active(nbytes, thread) + plugin))


def _thread_bytes(protocol: Any, ll_ranks: int) -> float:
    """Bytes NCCL gives one channel before it adds the next (``Channels.active``):
    ``protocol``'s thread bytes, times ``ll_ranks`` for LL."""
    return float(protocol.thread_bytes) * (ll_ranks if protocol.name == "ll" else 1)


def channel_share(schedule: Schedule, protocol: Any, nbytes: float | None = None) -> float:
    """The share of its channels ``schedule`` runs on under ``protocol`` for a message of
    ``nbytes`` (the schedule's own by default): where its steps are spread over NCCL's
    channels and one channel's rate sets their pace (:attr:`Schedule.spread
    <fabricsim.schedule.Schedule.spread>`, a ring inside one NVLink domain), an operation
    NCCL runs on fewer than all of them moves its bytes at that share of the links' rate.
    1 where the schedule has no such channels, under ``"ideal"`` and with no protocol.
    Every backend divides the protocol's rate by it as by its ramp.

    >>> from fabricsim.protocols import get_protocol
    >>> from fabricsim.schedule import Channels, Schedule
    >>> s = Schedule(steps=(), nbytes=2**15, spread=Channels(16, 2.0, ll_ranks=8))
    >>> channel_share(s, get_protocol("ll")), channel_share(s, get_protocol("ll"), 2**20)
    (0.0625, 1.0)
    >>> channel_share(s, get_protocol("ideal")), channel_share(Schedule(steps=()), None)
    (1.0, 1.0)
    """
    size = float(schedule.nbytes) if nbytes is None else float(nbytes)
    return spread_share(schedule.spread, protocol, size)


def spread_channels(schedule: Schedule, protocol: Any) -> dict[str, int]:
    """The channels ``schedule`` runs on under ``protocol`` where one channel's rate sets
    its pace (:attr:`Schedule.spread <fabricsim.schedule.Schedule.spread>`) and it runs on
    fewer than all: ``channels``, ``channels_active`` and ``channels_full_bytes`` (the
    message size from which all of them run); empty otherwise.

    >>> from fabricsim.protocols import get_protocol
    >>> from fabricsim.schedule import Channels, Schedule
    >>> s = Schedule(steps=(), nbytes=2**16, spread=Channels(16, 2.0, ll_ranks=8))
    >>> spread_channels(s, get_protocol("ll"))
    {'channels': 16, 'channels_active': 2, 'channels_full_bytes': 524288}
    >>> spread_channels(Schedule(steps=(), nbytes=2**20, spread=Channels(16, 2.0, 8)),
    ...                 get_protocol("ll"))
    {}
    """
    spread = schedule.spread
    if spread is None or spread_share(spread, protocol, float(schedule.nbytes)) >= 1.0:
        return {}
    thread = _thread_bytes(protocol, spread.ll_ranks)
    out = {"channels": spread.channels,
           "channels_active": spread.active(float(schedule.nbytes), thread),
           "channels_full_bytes": int(min(spread.most, spread.channels) * thread)}
    if 0 < spread.limit < spread.channels:  # a limit that caps something
        out["channels_limit"] = spread.limit
    return out


def spread_share(spread: Channels | None, protocol: Any, nbytes: float) -> float:
    """:func:`channel_share` for the channels ``spread`` (``None``: 1). A protocol with a
    size ramp (Simple where a ring keeps it: inside one A100 server, over EFA) gets only
    the share a user's channel limit leaves at that size (:meth:`Channels.capped`, 1
    without one): its ramp, fitted on such rings, already stands for the channels they
    grow into."""
    if spread is None or protocol is None or protocol.name.lower() == "ideal":
        return 1.0
    thread = _thread_bytes(protocol, spread.ll_ranks)
    if getattr(protocol, "ramp_bytes", 0.0) > 0.0:
        return spread.capped(nbytes, thread)
    return spread.share(nbytes, thread)


def ramp_bytes(schedule: Schedule, protocol: Any) -> float:
    """The message size at which ``protocol``'s bandwidth ramp applies to ``schedule``;
    0 (no ramp) where the schedule's chunk pipeline models that cost instead.

    >>> from fabricsim.schedule import Schedule
    >>> ramp_bytes(Schedule(steps=(), nbytes=4096), None)
    4096.0
    """
    if schedule.fixed_steps or active_pipeline(schedule, protocol) is not None:
        return 0.0
    return float(schedule.nbytes)


@runtime_checkable
class Backend(Protocol):
    """Anything with a name and ``run(schedule, fabric) -> Result``."""

    @property
    def name(self) -> str:
        ...

    def run(self, schedule: Schedule, fabric: Fabric) -> Result:
        ...


def dag_times(schedule: Schedule, duration: Callable[[int], float]) -> tuple[FloatArray,
                                                                              FloatArray]:
    """Start and end of every step when one repetition of step ``i`` takes ``duration(i)``.

    A step starts when all its dependencies have ended (plus its ``delay``) and runs its
    repetitions back to back.
    """
    n = len(schedule.steps)
    start = np.zeros(n)
    end = np.zeros(n)
    for i, s in enumerate(schedule.steps):
        t0 = max((end[d] for d in s.deps), default=0.0) + s.delay
        start[i] = t0
        end[i] = t0 + s.repeat * duration(i)
    return start, end


@dataclass(frozen=True)
class IdealBackend:
    """Infinite bandwidth, a fixed ``latency`` per step repetition: for testing upper layers."""

    latency: float = 1e-6
    name: str = "ideal"

    def run(self, schedule: Schedule, fabric: Fabric) -> Result:
        start, end = dag_times(schedule, lambda i: self.latency)
        return Result(time=float(end.max(initial=0.0)), backend=self.name, step_start=start,
                      step_end=end, link_bytes=np.zeros(fabric.n_links))
