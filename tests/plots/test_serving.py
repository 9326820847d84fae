"""Serving frontier: tokens/s per GPU against time per output token."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from plot_inspect import legend_labels, texts

from fabricsim.plots.serving import plot_serving_frontier


def test_frontier_in_ms_with_batches_and_marks(tmp_path: Path,
                                                drawn: Callable[[], list[Any]]) -> None:
    pts = [{"tpot_s": 0.03, "tokens_per_s_per_gpu": 330.0, "batch": 80},
           {"tpot_s": 0.01, "tokens_per_s_per_gpu": 200.0, "batch": 16}]
    marks = [{"label": "disaggregated", "tpot_s": 0.008, "tokens_per_s_per_gpu": 240.0}]
    plot_serving_frontier(pts, tmp_path / "s.png", marks=marks, title="t")
    (fig,) = drawn()
    (ax,) = fig.axes
    line, mark = ax.get_lines()
    assert list(line.get_xdata()) == pytest.approx([10.0, 30.0])  # sorted, in ms
    assert list(line.get_ydata()) == [200.0, 330.0]
    assert list(mark.get_xdata()) == pytest.approx([8.0])
    assert texts(ax) == ["batch 16", "batch 80"]
    assert legend_labels(ax) == ["continuous batching, one instance", "disaggregated"]
    assert ax.get_xlabel() == "time per output token (ms)" and ax.get_ylim()[1] > 330.0
