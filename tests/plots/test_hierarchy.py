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
