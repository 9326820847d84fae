"""The :class:`FlowBackend`: max-min fair flow-level simulation of a Schedule.

See :mod:`fabricsim.backends.flow.sim` for the event model and the identical-repetition
shortcut, :mod:`~fabricsim.backends.flow.routing` for ECMP/spraying/adaptive routing and
queue pairs, :mod:`~fabricsim.backends.flow.faults` and
:mod:`~fabricsim.backends.flow.background` for what a scenario adds, and
:mod:`~fabricsim.backends.flow.results` for what ``Result.extra`` holds.

Example
-------
>>> import numpy as np
>>> from fabricsim.backends.flow.testing import host_fat_tree
>>> from fabricsim.schedule import Schedule, Step
>>> fab = host_fat_tree(16)
>>> one = Step(src=fab.gpus[:1], dst=fab.gpus[15:], nbytes=np.array([50e6]))
>>> res = FlowBackend().run(Schedule(steps=(one,)), fab)
>>> round(res.time * 1e6, 3)          # 4 links of 1 us + 50 MB at 50 GB/s
1004.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricsim.backends.analytic import stream_start
from fabricsim.backends.base import (
    Result,
    crossing_cost,
    kernel_floor,
    pipeline_fill,
    schedule_protocol,
)
from fabricsim.backends.flow.background import background_transfers
from fabricsim.backends.flow.faults import plan_faults
from fabricsim.backends.flow.memory import MemoryEstimate
from fabricsim.backends.flow.memory import estimate as estimate_memory
from fabricsim.backends.flow.results import Timeline, bottlenecks
from fabricsim.backends.flow.routing import ROUTING_MODES, Expanded
from fabricsim.backends.flow.sim import simulate
from fabricsim.backends.flow.specs import BackgroundSpec, FaultSpec
from fabricsim.backends.memory import check_fits
from fabricsim.errors import ConfigError
from fabricsim.fabric.core import Fabric
from fabricsim.protocols import get_protocol
from fabricsim.schedule.core import Schedule


def check_precision(value: float) -> float:
    """A flow precision (:attr:`FlowBackend.precision`) checked: 0 (exact) to 0.1; else a
    ConfigError naming ``--flow-precision``.

    >>> check_precision(1e-3)
    0.001
    """
    if not 0.0 <= value <= 0.1:
        raise ConfigError(f"give a fraction of a transfer's duration from 0 (exact) to 0.1 "
                          f"(1e-3 is a good start), got {value}", field="--flow-precision")
    return value


@dataclass(frozen=True)
class FlowBackend:
    """Flow-level backend: event-driven, max-min fair sharing of link capacity.

    Parameters
    ----------
    seed
        Seeds ECMP hashing (when steps give no hashes) and background permutations.
    routing
        ``"ecmp"`` (hash per queue pair), ``"spray"`` (even split over all equal-cost
        paths) or ``"adaptive"`` (one flow per path feeding the same transfer); ``"auto"``
        (default) follows the fabric: ``"spray"`` on a fabric built with
        ``routing="adaptive"``, else ``"ecmp"`` over the fabric's own routes (its InfiniBand
        tables or Ethernet hashing).
    qps
        Queue pairs (NCCL channels' connections) per transfer, each ``nbytes/qps``;
        ``None`` (default): the fabric's own (``params.qps``, NCCL's 1 unless set).
    faults, background
        :class:`~fabricsim.scenario.schema.FaultSpec` and
        :class:`~fabricsim.scenario.schema.BackgroundSpec` (or dicts of their fields).
    record_timeline
        Keep per-link cumulative bytes at every event batch and every transfer's times.
    exploit_repeats
        Skip epochs that replay the previous one exactly (see ``sim``); False solves every
        repetition.
    protocol
        NCCL protocol charged on the schedule's transfers (``"ll"``, ``"ll128"``,
        ``"simple"``, ``"ideal"``), as the analytic backend does: link efficiency, hop
        overhead per repetition, launch overhead. Default: the schedule's ``protocol``, and
        ``"ideal"`` (pure physics) for a schedule that names none.
    """

    seed: int = 0
    routing: str = "auto"
    qps: int | None = None
    faults: Sequence[FaultSpec | dict[str, Any]] = ()
    background: Sequence[BackgroundSpec | dict[str, Any]] = ()
    record_timeline: bool = False
    exploit_repeats: bool = True
    protocol: str | None = None
    #: Stop with a SimulationError (field ``--time-limit``) after this much wall time.
    time_limit_s: float | None = None
    #: Refuse (ConfigError, field ``--backend``) a run whose estimated memory
    #: (:mod:`~fabricsim.backends.flow.memory`) exceeds this many bytes; ``None`` (default):
    #: the memory the machine has free when the run starts.
    memory_limit_bytes: float | None = None
    #: Finishes that fall within this fraction of a transfer's own duration of each other
    #: are settled as one event (each transfer ends at most that fraction late, never
    #: early); 0 (default) settles every distinct finish time exactly. See docs/flow.md,
    #: "Precision", for what it costs and saves.
    precision: float = 0.0
    #: Called every few thousand events with (steps done, steps, simulated time, events).
    progress: Callable[[int, int, float, int], None] | None = field(
        default=None, compare=False, repr=False)
    name: str = field(default="flow")

    def __post_init__(self) -> None:
        if self.routing not in (*ROUTING_MODES, "auto"):
            raise ConfigError(f"routing must be auto or one of {', '.join(ROUTING_MODES)}, got "
                              f"{self.routing!r}", field="routing")
        if self.qps is not None and self.qps < 1:
            raise ConfigError(f"qps must be >= 1, got {self.qps}", field="qps")
        if self.memory_limit_bytes is not None and not self.memory_limit_bytes > 0:
            raise ConfigError(f"the memory limit must be > 0 bytes, got "
                              f"{self.memory_limit_bytes}", field="memory_limit_bytes")
        check_precision(self.precision)
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ConfigError(f"the time limit must be > 0 seconds, got {self.time_limit_s}",
                              field="--time-limit")

    def routing_for(self, fabric: Fabric) -> str:
        """The routing mode this backend uses on ``fabric`` (resolves ``"auto"``)."""
        if self.routing != "auto":
            return self.routing
        spray = getattr(fabric.router, "spray_groups", None)
        return "spray" if spray is not None and spray() else "ecmp"

    def check_memory(self, schedule: Schedule, fabric: Fabric, routing: str, qps: int,
                     routed: dict[int, Expanded] | None = None) -> MemoryEstimate:
        """The run's memory estimate (:func:`~fabricsim.backends.flow.memory.estimate`,
        which leaves the steps it routed whole in ``routed``); a :class:`ConfigError`
        naming the estimate and how to shrink the run where it exceeds
        :attr:`memory_limit_bytes` or the memory the machine has free."""
        need = estimate_memory(schedule, fabric, routing, qps, seed=self.seed, routed=routed)
        shrink = ["the analytic backend (--backend analytic), which times the same schedule "
                  "without holding its flows", "fewer ranks (--ranks, e.g. one expert-"
                  "parallel group)"]
        if qps > 1:
            shrink.append(f"fewer queue pairs ({qps} now: each is a flow)")
        if routing in ("spray", "adaptive"):
            shrink.append(f"ECMP routing ({routing} holds a flow per path)")
        check_fits(need.bytes, f"this flow simulation ({need.jobs:,} flows over "
                   f"{need.entries:,} link entries)", shrink, limit=self.memory_limit_bytes)
        return need

    def run(self, schedule: Schedule, fabric: Fabric) -> Result:
        """Simulate ``schedule`` on ``fabric`` with this backend's faults and traffic."""
        proto = schedule_protocol(schedule,
                                  get_protocol(self.protocol or schedule.protocol or "ideal"))
        plan = plan_faults(fabric, self.faults)
        bg = background_transfers(plan.fabric, self.background, seed=self.seed)
        routing = self.routing_for(fabric)
        qps = self.qps if self.qps is not None else fabric.info.qps
        routed: dict[int, Expanded] = {}
        need = self.check_memory(schedule, plan.fabric, routing, qps, routed)
        out = simulate(schedule, plan, bg, routing=routing, qps=qps, seed=self.seed,
                       exploit_repeats=self.exploit_repeats,
                       record_timeline=self.record_timeline, protocol=proto,
                       time_limit_s=self.time_limit_s, progress=self.progress, routed=routed,
                       precision=self.precision)
        tops = bottlenecks(plan.fabric, out.critical_time, out.link_bytes, out.time)
        extra: dict[str, Any] = {
            "transfers": out.transfers, "rep_start": out.rep_start, "rep_end": out.rep_end,
            "bottlenecks": tops, "critical_time": out.critical_time,
            "stalled_steps": out.stalled_steps, "stalled_transfers": out.stalled_transfers,
            "skipped_epochs": out.skipped_epochs, "kernel_calls": out.kernel_calls,
            "routing": routing, "qps": qps, "protocol": proto.name,
            "faults": [f.description for f in plan.faults], "memory_estimate": need.to_dict(),
            "fault_links": {f.description: f.links for f in plan.faults},
        }
        if self.record_timeline:
            extra["timeline"] = Timeline.from_snapshots(plan.fabric, out.timeline_t,
                                                        out.timeline_bytes)
        b = tops[0]["link"] if tops else -1
        # the kernels' own rate bounds the run (Schedule.kernel_floor), after the launch
        floor = kernel_floor(schedule, proto)
        if floor > 0:
            floor += stream_start(schedule, get_protocol(
                self.protocol or schedule.protocol or "ideal"), plan.fabric)
        time = max(out.time, floor + proto.launch) if floor > 0 else out.time
        extra["limited_by"] = "kernels" if time > out.time else "links"
        # the chunk pipeline's fill (Schedule.pipeline), as every backend adds it
        fill = pipeline_fill(schedule, proto, fabric)
        cross = crossing_cost(schedule, proto)  # the proxy steps of its network crossings
        time += fill + cross
        extra["pipeline_fill"] = fill
        extra["crossings"] = cross
        return Result(time=time, backend=self.name,
                      step_start=np.nan_to_num(out.step_start, nan=np.inf),
                      step_end=np.nan_to_num(out.step_end, nan=np.inf),
                      link_bytes=out.link_bytes, bottleneck_link=b,
                      bottleneck_kind=plan.fabric.link_label(b) if b >= 0 else "",
                      extra=extra)
