"""Up-front cost checks of a packet run: endpoint limit and event estimate.

A packet simulation costs at least one event per packet per hop for its serialisation
end, one for its arrival at the next node, one returned-credit event per credit-based
hop (InfiniBand, and NVLink/PCIe always), one ACK per ``ack_every`` packets of a
transfer (every packet for TCP), one event per step repetition and one retransmission
timer per flow. :func:`events_lower_bound` adds these up per transfer, with every
transfer rounded up to at least one packet (a zero-byte transfer, such as a collective's
pipeline-fill step, sends one header-only packet), so a schedule of many tiny transfers
is priced correctly. Congestion control (DCQCN timers, pacing, CNPs), PFC
frames and retransmissions only add to it, so the estimate is a lower bound of the run's
events when nothing is lost or paused.

Example
-------
>>> import numpy as np
>>> from fabricsim.schedule import Schedule, Step
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=2)
>>> sch = Schedule(steps=(Step(src=fab.gpus[:1], dst=fab.gpus[8:9], nbytes=[100],
...                            repeat=10),))
>>> hops = np.array([len(fab.route(int(fab.gpus[0]), int(fab.gpus[8])))])
>>> credit_hops = np.array([4])   # GPU-PCIe-NIC at both ends: 6 hops, 4 credit-based
>>> events_lower_bound(sch, hops, credit_hops, mtu=4096, ack_every=8, tcp=False)
10 transfers, 10 packets, 181 events
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import SimulationError
from fabricsim.schedule.core import Schedule


@dataclass(frozen=True)
class EventEstimate:
    """Lower bound of a run's events, with the transfers and packets behind it."""

    transfers: int
    packets: int
    hop_packets: int
    events: float

    def __repr__(self) -> str:
        return (f"{self.transfers:,} transfers, {self.packets:,} packets, "
                f"{self.events:,.0f} events")


def schedule_endpoints(schedule: Schedule) -> int:
    """Number of distinct nodes that send to or receive from another node in ``schedule``.

    Example
    -------
    >>> from fabricsim.schedule import Schedule, Step
    >>> schedule_endpoints(Schedule(steps=(Step(src=[0, 1], dst=[2, 2], nbytes=[1]),)))
    3
    """
    ends = []
    for s in schedule.steps:
        live = s.src != s.dst
        ends += [s.src[live], s.dst[live]]
    return int(np.unique(np.concatenate(ends)).size) if ends else 0


def check_endpoints(schedule: Schedule, limit: int) -> None:
    """Refuse a schedule with more than ``limit`` endpoints (``packet.max_endpoints``).

    Example
    -------
    >>> from fabricsim.schedule import Schedule, Step
    >>> sch = Schedule(steps=(Step(src=[0, 1], dst=[2, 2], nbytes=[1]),))
    >>> check_endpoints(sch, 3)
    >>> check_endpoints(sch, 2)
    Traceback (most recent call last):
    ...
    fabricsim.errors.SimulationError: packet.max_endpoints: the schedule has 3 endpoints, ...
    """
    n = schedule_endpoints(schedule)
    if n > limit:
        raise SimulationError(
            f"the schedule has {n:,} endpoints, beyond the packet backend's limit of "
            f"{limit:,} (packet.max_endpoints; it simulates fabrics of up to about 1,000 "
            "endpoints at about a million events per second); simulate fewer ranks, use "
            "the flow or analytic backend for this size, or raise packet.max_endpoints "
            "(and packet.event_budget) knowingly", field="packet.max_endpoints")


def events_lower_bound(schedule: Schedule, hops: NDArray[np.int64],
                       credit_hops: NDArray[np.int64], *, mtu: int, ack_every: int,
                       tcp: bool) -> EventEstimate:
    """Events a run of ``schedule`` needs at least (see the module docstring).

    Parameters
    ----------
    schedule
        The schedule; flows are its steps' transfers in order.
    hops, credit_hops
        Links on each flow's path, and how many of them are credit-based.
    mtu
        Payload bytes per packet.
    ack_every
        Packets per coalesced ACK (RDMA); TCP acknowledges every packet.
    tcp
        Whether the transport is the TCP-like one.
    """
    steps = schedule.steps
    if not steps:
        return EventEstimate(0, 0, 0, 0.0)
    nb = np.concatenate([s.nbytes for s in steps])
    src = np.concatenate([s.src for s in steps])
    dst = np.concatenate([s.dst for s in steps])
    reps = np.repeat(np.array([s.repeat for s in steps], dtype=np.int64),
                     [s.n for s in steps])
    live = src != dst
    npkt = np.where(live, np.maximum(np.ceil(nb / mtu), 1.0), 0.0).astype(np.int64)
    h = np.maximum(np.asarray(hops, dtype=np.int64), 1)
    acks = npkt if tcp else -(-npkt // ack_every)
    per_rep = npkt * (2 * h + np.asarray(credit_hops, dtype=np.int64)) + acks
    events = float((per_rep * reps).sum()) + float(sum(s.repeat for s in steps)) + \
        float(live.sum())
    return EventEstimate(transfers=int((live * reps).sum()), packets=int((npkt * reps).sum()),
                         hop_packets=int((npkt * h * reps).sum()), events=events)


def check_budget(est: EventEstimate, budget: int) -> None:
    """Refuse a run whose event estimate exceeds ``budget`` (``packet.event_budget``).

    Example
    -------
    >>> check_budget(EventEstimate(1, 1, 2, 5e9), 200_000_000)
    Traceback (most recent call last):
    ...
    fabricsim.errors.SimulationError: packet.event_budget: this run needs at least ...
    """
    if est.events > budget:
        raise SimulationError(
            f"this run needs at least {est.events:,.0f} events ({est.transfers:,} "
            f"transfers, {est.packets:,} packets over {est.hop_packets:,} packet-hops; "
            f"about {est.events / 1e6:,.0f} s at a million events per second), beyond the "
            f"event budget of {budget:,}; shrink the schedule (fewer ranks or "
            "repetitions), use a larger packet.mtu for large transfers, use the flow "
            "backend, or raise packet.event_budget", field="packet.event_budget")
