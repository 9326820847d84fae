"""What a timing field adds to a schedule's time, checked in every backend alike."""

from __future__ import annotations

import pytest

from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.packet import PacketBackend
from fabricsim.fabric import Fabric
from fabricsim.schedule import Schedule


def assert_every_backend_adds(sched: Schedule, plain: Schedule, fab: Fabric,
                              want: float) -> None:
    """``sched`` takes ``want`` seconds more than ``plain`` in the analytic, flow and
    packet backends, and the analytic and flow backends agree on its time."""
    times = []
    for backend in (AnalyticBackend(), FlowBackend(), PacketBackend()):
        t, t0 = backend.run(sched, fab).time, backend.run(plain, fab).time
        assert t - t0 == pytest.approx(want, rel=1e-6, abs=1e-9)
        times.append(t)
    assert times[1] == pytest.approx(times[0], rel=1e-9)
