"""``backend="flow"``: the step model runs its collectives on the flow backend."""

from __future__ import annotations

from typing import Any

import pytest

import fabricsim as fs
from fabricsim import collectives
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step


def test_flow_and_analytic_step_times_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    fab = fs.build_cluster("dgx-a100", 2, fabric="roce-200g")
    m = get_model("llama3-8b")
    cfg = ParallelConfig(tp=8, zero=0, micro_batch=1, global_batch=8, seq_len=2048)
    seen: list[str] = []
    real = collectives.run_collective

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append(str(kw.get("backend")))
        return real(*a, **kw)

    monkeypatch.setattr(collectives, "run_collective", spy)
    flow = simulate_step(m, cfg, fab, backend="flow")
    ana = simulate_step(m, cfg, fab, backend="analytic")
    assert seen and set(seen) == {"flow"}  # TP and DP collectives went to the flow backend
    assert flow.breakdown["tp"] > 0 and flow.breakdown["dp"] > 0
    # one group alone on a non-blocking fabric: no contention, so the max-min flow model
    # and the analytic model should agree closely
    assert flow.step_time_s == pytest.approx(ana.step_time_s, rel=0.05)
