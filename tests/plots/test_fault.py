"""Fault impact: fault-free vs degraded progress, and where the time went."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from plot_inspect import line_labels

from fabricsim.backends.flow import FlowBackend, host_fat_tree
from fabricsim.plots.fault import plot_flow_fault, progress
from fabricsim.scenario import FaultSpec
from fabricsim.schedule import Schedule, Step


def runs() -> tuple[Any, Any]:
    fab = host_fat_tree(4)
    s = Schedule(steps=(Step(src=fab.gpus, dst=np.roll(fab.gpus, -1),
                             nbytes=np.full(4, 1e6), repeat=4),))
    ok = FlowBackend(record_timeline=True).run(s, fab)
    link = fab.link_name(int(fab.route(int(fab.gpus[0]), int(fab.gpus[1]))[0]))
    bad = FlowBackend(record_timeline=True, faults=[FaultSpec(
        type="link_degraded", link=link, factor=0.5)]).run(s, fab)
    return ok, bad


def test_progress_ends_at_completion() -> None:
    _ok, bad = runs()
    t, frac = progress(bad)
    assert t[-1] == pytest.approx(bad.time) and frac[-1] == pytest.approx(1.0)
    assert np.all(np.diff(frac) >= -1e-12)


def test_fault_figure(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    ok, bad = runs()
    assert bad.time > ok.time
    plot_flow_fault(ok, bad, tmp_path / "f.png", title="a slow link", causes=[
        {"description": "link A at 0.5", "slowdown_alone": bad.time / ok.time},
        {"description": "link B at 0.9", "slowdown_alone": 1.0}])
    (fig,) = drawn()
    prog, bars = fig.axes
    assert fig._suptitle.get_text() == "a slow link"
    assert prog.get_xlabel() == "time (ms)" and "to carry" in prog.get_ylabel()
    assert prog.get_yscale() == "log"
    assert line_labels(prog) == ["fault-free", "degraded"]
    assert bars.get_xlabel() == "completion time (ms)" and bars.get_title()
    names = [t.get_text() for t in bars.get_yticklabels()]
    assert names == ["fault-free", "degraded", "alone: link A at 0.5", "alone: link B at 0.9"]
    values = [p.get_width() for p in bars.patches]
    assert values[0] == pytest.approx(ok.time * 1e3) and values[1] == pytest.approx(
        bad.time * 1e3)
    assert f"×{bad.time / ok.time:.2f}" in bars.texts[1].get_text()
