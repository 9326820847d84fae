"""Link heatmaps: ranked, and always showing the links the scenario names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from fabricsim.backends.flow.results import Timeline
from fabricsim.plots.heatmap import link_heatmap, ranked_links


def timeline() -> Timeline:
    """Four links over two intervals: bytes 40, 30, 20, 1 (capacity 10/s, 4 s)."""
    final = np.array([40.0, 30.0, 20.0, 1.0])
    return Timeline(t=np.array([0.0, 2.0, 4.0]), links=np.array([10, 11, 12, 13]),
                    bytes=np.stack([np.zeros(4), final / 2, final]),
                    capacity=np.full(4, 10.0), names=["a", "b", "c", "d"],
                    kinds=["nic-leaf"] * 4)


def test_rank_by_bytes_and_keep_named_links() -> None:
    tl = timeline()
    assert ranked_links(tl, top=2) == [0, 1]
    # the named link (id 13, the quietest) displaces the lowest-ranked of the top 2
    assert ranked_links(tl, top=2, highlight=(13,)) == [0, 3]


def test_rank_by_critical_time_then_utilisation() -> None:
    tl = timeline()
    crit = np.zeros(20)
    crit[12] = 5e-3  # link c limited the run
    assert ranked_links(tl, top=3, rank="critical", critical=crit) == [2, 0, 1]


def test_heatmap_figure(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    tl = timeline()
    crit = np.zeros(20)
    crit[13] = 1e-3
    link_heatmap(tl, tmp_path / "h.png", top=2, rank="critical", critical=crit,
                 highlight=(13,), title="links that limited the run")
    (fig,) = drawn()
    ax = fig.axes[0]
    assert ax.get_title() == "links that limited the run"
    assert ax.get_xlabel() == "time (ms)" and "link" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["▶ d", "a"]
    assert ax.get_yticklabels()[0].get_color() == "#d62728"
    img = ax.get_images()[0]
    assert img.get_clim() == (0.0, 1.0)
    assert img.get_array().shape[0] == 2


def test_unknown_rank_is_a_clear_error(tmp_path: Path) -> None:
    from fabricsim.errors import ConfigError

    with pytest.raises(ConfigError, match="bytes, utilization, critical"):
        link_heatmap(timeline(), tmp_path / "h.png", rank="hot")
