"""Fabric comparison with cost, and scaling curves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from plot_inspect import line_labels, texts

from fabricsim.plots.plan import plot_plan
from fabricsim.plots.scaling import plot_scaling
from fabricsim.plots.style import color

ROWS = [{"fabric": "ib-ndr", "tokens_per_s_per_gpu": 900.0, "capex_per_gpu_usd": 9400.0,
         "usd_per_1t_tokens": 8.0e5, "fabric_share": 0.1},
        {"fabric": "roce-400g", "tokens_per_s_per_gpu": 880.0,
         "capex_per_gpu_usd": 6700.0, "usd_per_1t_tokens": 7.9e5, "fabric_share": 0.07}]


def test_plan_values_on_bars(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    plot_plan(ROWS, tmp_path / "p.png")
    (fig,) = drawn()
    speed, capex, cost = fig.axes
    assert fig._suptitle.get_text()
    assert [ax.get_ylabel() for ax in fig.axes] == ["tokens/s", "USD", "USD"]
    assert all(ax.get_title() and ax.get_xlabel() == "fabric" for ax in fig.axes)
    assert texts(capex) == ["$9,400", "$6,700"] and texts(speed) == ["900", "880"]
    assert [p.get_facecolor()[:3] for p in speed.patches] == [
        pytest.approx(tuple(int(color(f)[i:i + 2], 16) / 255 for i in (1, 3, 5)))
        for f in ("ib-ndr", "roce-400g")]
    assert "fabric (amortised)" in [t.get_text() for t in cost.get_legend().get_texts()]


def test_scaling(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    pts = [{"gpus": 8, "scaling_efficiency": 1.0, "mfu": 0.5},
           {"gpus": 64, "scaling_efficiency": 0.9, "mfu": 0.45}]
    plot_scaling(pts, tmp_path / "s.png")
    (fig,) = drawn()
    ax = fig.axes[0]
    assert fig._suptitle.get_text() == "scaling"
    assert ax.get_title() and ax.get_xlabel() == "GPUs" and ax.get_ylabel() == "%"
    assert line_labels(ax) == ["scaling efficiency vs one node", "MFU"]
    assert texts(ax) == ["100%", "90%"]
    assert len(fig.axes) == 1


def test_scaling_with_cost(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    pts = [{"gpus": 8, "scaling_efficiency": 1.0, "mfu": 0.5, "comm_usd_per_day": 120.0},
           {"gpus": 64, "scaling_efficiency": 0.9, "mfu": 0.45,
            "comm_usd_per_day": 2400.0}]
    plot_scaling(pts, tmp_path / "s.png", title="llama")
    (fig,) = drawn()
    _eff, cost = fig.axes
    assert cost.get_ylabel() == "USD per day" and cost.get_xlabel() == "GPUs"
    assert "communication" in cost.get_title()
    assert texts(cost) == ["$120", "$2,400"]


def test_scaling_names_its_baseline(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    """A curve whose efficiency is against its smallest size (``fabricsim scale`` from
    256 GPUs) says so, not 'one node'."""
    pts = [{"gpus": 256, "scaling_efficiency": 1.0, "mfu": 0.4, "baseline_gpus": 256},
           {"gpus": 16384, "scaling_efficiency": 0.83, "mfu": 0.33, "baseline_gpus": 256}]
    plot_scaling(pts, tmp_path / "s.png")
    (fig,) = drawn()
    assert line_labels(fig.axes[0]) == ["scaling efficiency vs 256 GPUs", "MFU"]
