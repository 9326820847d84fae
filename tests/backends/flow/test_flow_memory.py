"""The flow engine's memory estimate and its refusal of runs too big for the machine."""

from __future__ import annotations

import pytest

from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.flow.memory import BASE_BYTES, BYTES_PER_ENTRY, estimate
from fabricsim.collectives.api import build_schedule
from fabricsim.errors import ConfigError
from fabricsim.fabric import build_cluster


@pytest.fixture(scope="module")
def alltoall():  # type: ignore[no-untyped-def]
    fab = build_cluster("dgx-h100", 4, fabric="roce-400g")
    return fab, build_schedule(fab, "alltoall", 2**24, algo="direct")


def test_estimate_counts_flows_and_route_entries(alltoall) -> None:  # type: ignore[no-untyped-def]
    fab, sch = alltoall
    one = estimate(sch, fab, "ecmp", 1)
    four = estimate(sch, fab, "ecmp", 4)
    spray = estimate(sch, fab, "spray", 1)
    pairs = sum(s.n for s in sch.steps)
    assert one.jobs == pairs  # a small schedule is routed whole: exact counts
    assert pairs < four.jobs <= 4 * pairs  # only transfers between servers are split
    assert spray.jobs == one.jobs and spray.entries > one.entries  # a flow per path
    assert one.bytes == BASE_BYTES + BYTES_PER_ENTRY * one.entries


def test_a_sample_estimates_a_big_schedule_closely() -> None:
    fab = build_cluster("dgx-h100", 16, fabric="roce-400g")
    sch = build_schedule(fab, "alltoall", 2**24, algo="direct")
    whole = estimate(sch, fab, "ecmp", 2, sample=10**9)
    part = estimate(sch, fab, "ecmp", 2, sample=2048)
    assert part.jobs == pytest.approx(whole.jobs, rel=0.05)
    assert part.entries == pytest.approx(whole.entries, rel=0.05)


def test_flow_backend_refuses_before_simulating(alltoall) -> None:  # type: ignore[no-untyped-def]
    fab, sch = alltoall
    res = FlowBackend().run(sch, fab)
    assert res.extra["memory_estimate"]["jobs"] == sum(s.n for s in sch.steps)
    with pytest.raises(ConfigError) as e:
        FlowBackend(qps=4, memory_limit_bytes=1e5).run(sch, fab)
    assert e.value.field == "--backend"
    msg = e.value.message
    assert "flows over" in msg and "is the limit" in msg
    assert "--backend analytic" in msg and "fewer queue pairs (4 now" in msg
    with pytest.raises(ConfigError, match="memory_limit_bytes"):
        FlowBackend(memory_limit_bytes=0)
