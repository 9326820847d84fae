"""The flow backend's wall-clock limit and progress reports (issue 12)."""

from __future__ import annotations

import pytest

from fabricsim.backends.flow import FlowBackend
from fabricsim.cli.app import main
from fabricsim.collectives import run_collective
from fabricsim.errors import ConfigError, SimulationError
from fabricsim.fabric import build_cluster


def test_limit_and_progress_change_no_result() -> None:
    """Checking the clock every few events (the kernel pauses and resumes) gives the same
    times, bit for bit, as one uninterrupted run."""
    fab = build_cluster("dgx-h100", 8)
    calls: list[tuple[int, int, float, int]] = []
    a = run_collective(fab, "alltoall", 2**28, backend=FlowBackend(
        time_limit_s=600.0, progress=lambda *x: calls.append(x))).time
    b = run_collective(fab, "alltoall", 2**28, backend=FlowBackend()).time
    assert a == b


def test_a_tiny_limit_stops_with_an_explanation() -> None:
    fab = build_cluster("dgx-h100", 8)
    with pytest.raises(SimulationError, match=r"time limit of 1e-06 s reached.*steps done"
                       ) as e:
        run_collective(fab, "all_reduce", 2**30, algo="ring",
                       backend=FlowBackend(time_limit_s=1e-6))
    assert e.value.field == "--time-limit"
    with pytest.raises(ConfigError, match="time limit"):
        FlowBackend(time_limit_s=0.0)


def test_cli_time_limits(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["simulate", "flow-degraded-link", "--time-limit", "0.001"]) == 2
    assert "--time-limit" in capsys.readouterr().err
    assert main(["bench", "all_reduce", "--nodes", "2", "--backend", "flow",
                 "--time-limit", "0.0001"]) == 2
    assert "--time-limit" in capsys.readouterr().err
    assert main(["bench", "all_reduce", "--nodes", "2", "--time-limit", "5"]) == 2
    assert "flow backend" in capsys.readouterr().err
