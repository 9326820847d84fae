"""The bandwidth hierarchy: log bars with their values written on them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from plot_inspect import legend_labels, texts

from fabricsim.fabric import build_cluster
from fabricsim.plots.hierarchy import plot_hierarchy
from fabricsim.reports import summarize


def test_values_on_bars_and_same_fabrics_said(tmp_path: Path,
                                              drawn: Callable[[], list[Any]]) -> None:
    sums = {"IB": summarize(build_cluster("dgx-h100", 2, fabric="ib-ndr")),
            "RoCE": summarize(build_cluster("dgx-h100", 2, fabric="roce-400g"))}
    plot_hierarchy(sums, tmp_path / "h.png")
    (fig,) = drawn()
    ax = fig.axes[0]
    levels = [lv.name for lv in sums["IB"].hierarchy]
    assert [t.get_text() for t in ax.get_xticklabels()] == levels
    assert ax.get_yscale() == "log" and "GB/s" in ax.get_ylabel() and ax.get_xlabel()
    assert legend_labels(ax) == ["IB", "RoCE"]
    assert len(ax.patches) == 2 * len(levels) == len(texts(ax))
    assert "450" in texts(ax)  # H100 NVLink, GB/s per direction
    assert "the same on every fabric" in ax.get_title()


def test_any_levels_will_do_not_only_a_cluster_summary(tmp_path: Path,
                                                       drawn: Callable[[], list[Any]]) -> None:
    """The plot takes the numbers it draws (a name and GB/s per level), from anything."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Lv:
        name: str
        bandwidth_gbps: float

    @dataclass(frozen=True)
    class Levels:
        hierarchy: tuple[Lv, ...]

    plot_hierarchy({"a": Levels((Lv("nvlink", 900.0), Lv("nic", 50.0))),
                    "b": Levels((Lv("nvlink", 900.0), Lv("nic", 25.0)))}, tmp_path / "h.png")
    (fig,) = drawn()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["nvlink", "nic"]
    assert sorted(texts(ax)) == sorted(["900", "50", "900", "25"])
    assert "the same on every fabric" not in ax.get_title()
