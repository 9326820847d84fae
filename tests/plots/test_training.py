"""The training step: where the time goes, NVLink apart from scale-out communication."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from plot_inspect import texts

from fabricsim.plots.training import comm_by_network, plot_step_breakdown

PARTS = {"ib-ndr": {"compute": 16.4, "bubble": 0.2, "tp": 4.5, "pp": 0.01, "dp": 0.019},
         "roce-400g": {"compute": 16.4, "bubble": 0.2, "tp": 4.5, "pp": 0.01, "dp": 0.020}}


def test_comm_split() -> None:
    assert comm_by_network(PARTS["ib-ndr"]) == pytest.approx({"NVLink": 4.5,
                                                              "scale-out": 0.029})
    assert comm_by_network(PARTS["ib-ndr"], nvlink=set())["scale-out"] == pytest.approx(
        4.529)


def test_breakdown_figure(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    plot_step_breakdown(PARTS, tmp_path / "t.png", title="step")
    (fig,) = drawn()
    parts, nv, so = fig.axes
    assert fig._suptitle.get_text() == "step"
    assert parts.get_xlabel() == "seconds per step"
    assert nv.get_xlabel() == so.get_xlabel() == "ms per step"
    assert "NVLink" in nv.get_title() and "scale-out" in so.get_title()
    legend = [t.get_text() for t in parts.get_legend().get_texts()]
    assert legend == ["compute", "pipeline bubble", "TP comm (NVLink)",
                      "PP comm (scale-out)", "DP comm (scale-out)"]
    # scale-out communication on its own scale: 29 vs 30 ms, readable
    assert texts(so) == ["29.0", "30.0"]
    assert texts(nv) == ["4,500.0", "4,500.0"]
    assert so.get_xlim()[1] < 100
