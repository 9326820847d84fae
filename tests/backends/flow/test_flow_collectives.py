"""The flow backend runs every collective's schedule and agrees with the analytic backend
where transfers do not contend (and the analytic model's sharing is exact)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.collectives import ALGORITHMS, build_schedule  # isort: skip  (before analytic:
from fabricsim.backends.analytic import AnalyticBackend  # isort: skip  import cycle)
from fabricsim.backends.flow import FlowBackend
from fabricsim.collectives.busbw import COLLECTIVES
from fabricsim.errors import ScheduleError
from fabricsim.fabric import build_cluster


@pytest.mark.parametrize("nodes", [1, 2])
def test_every_collective_runs_and_matches_analytic(nodes: int) -> None:
    fab = build_cluster("dgx-h100", nodes=nodes)
    ran = 0
    for coll in COLLECTIVES:
        for algo in ALGORITHMS:
            try:
                sch = build_schedule(fab, coll, 32 * 2**20, algo=algo)
            except ScheduleError:  # the algorithm does not apply here
                continue
            rf = FlowBackend().run(sch, fab)
            ra = AnalyticBackend().run(sch, fab)
            assert np.isfinite(rf.time)
            assert rf.time == pytest.approx(ra.time, rel=0.005), (coll, algo)
            np.testing.assert_allclose(rf.link_bytes.sum(), ra.link_bytes.sum(), rtol=1e-6)
            ran += 1
    assert ran >= 10


def test_ideal_protocol_single_flow_matches_analytic() -> None:
    from fabricsim.schedule import Schedule, Step

    fab = build_cluster("dgx-h100", nodes=2)
    one = Step(src=fab.gpus[:1], dst=fab.gpus[9:10], nbytes=np.array([3e8]))
    sch = Schedule(steps=(one,))
    rf = FlowBackend(protocol="ideal").run(sch, fab)
    ra = AnalyticBackend(protocol="ideal").run(sch, fab)
    assert rf.time == pytest.approx(ra.time, rel=1e-9)


def test_epoch_skipping_is_exact_for_every_collective() -> None:
    fab = build_cluster("dgx-h100", nodes=2)
    faults = [{"type": "slow_gpu", "gpu": 5, "delay": "7us"}]
    for coll in COLLECTIVES:
        for algo in ALGORITHMS:
            try:
                sch = build_schedule(fab, coll, 2**22, algo=algo)
            except ScheduleError:
                continue
            fast = FlowBackend(faults=faults).run(sch, fab)
            slow = FlowBackend(faults=faults, exploit_repeats=False).run(sch, fab)
            assert fast.time == pytest.approx(slow.time, rel=1e-9), (coll, algo)
            np.testing.assert_allclose(fast.link_bytes, slow.link_bytes, rtol=1e-9)
