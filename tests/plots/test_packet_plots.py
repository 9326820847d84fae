"""Packet panels: titled, one colour scale across runs, readable ticks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from plot_inspect import line_labels

from fabricsim.jobs.packet import run_packet_scenario
from fabricsim.plots.packet import fct_cdf, pause_map, queues, throughput
from fabricsim.scenario import Scenario


@pytest.fixture(scope="module")
def runs() -> list[Any]:
    """An incast with and without DCQCN: PFC pauses in one, fewer in the other."""
    sc = Scenario.model_validate({
        "name": "incast", "cluster": {"system": "dgx-h100", "nodes": 5, "gpus_per_node": 1,
                                      "fabric": "roce-400g"},
        "packet": {"traffic": {"pattern": "incast", "nbytes": "2MB"}, "bins": 40,
                   "variants": {"no-dcqcn": {"dcqcn": {"enabled": False}}}}})
    return [run_packet_scenario(sc), run_packet_scenario(sc, "no-dcqcn")]


def test_pause_map_one_colour_scale(runs: list[Any], tmp_path: Path,
                                    drawn: Callable[[], list[Any]]) -> None:
    pause_map(runs, tmp_path / "p.png", title="incast")
    (fig,) = drawn()
    panels = fig.axes[:2]
    assert "incast" in fig._suptitle.get_text()
    assert [ax.get_title().split(":")[0] for ax in panels] == ["base", "no-dcqcn"]
    assert all(ax.get_xlabel() == "hops from the origin" for ax in panels)
    assert panels[0].get_ylabel() == "first paused (µs)"
    scales = {c.get_clim() for ax in panels for c in ax.collections}
    assert len(scales) <= 1  # every panel on the same scale
    assert fig.axes[-1].get_ylabel() == "time paused (µs), one scale"  # one colour bar
    assert len(fig.axes) == len(panels) + 1
    ticks = [float(t) for t in panels[0].get_xticks()]
    assert ticks == [float(k) for k in range(len(ticks))]  # whole hops


def test_queues_one_scale_and_time_axis(runs: list[Any], tmp_path: Path,
                                        drawn: Callable[[], list[Any]]) -> None:
    queues(runs, tmp_path / "q.png", title="incast")
    (fig,) = drawn()
    heat = [ax for ax in fig.axes if ax.get_images()]
    assert len(heat) == 2
    assert len({ax.get_images()[0].get_clim() for ax in heat}) == 1
    lines = [ax for ax in fig.axes if ax.get_lines()]
    assert len(lines) == 2 and all(ax.get_xlabel() == "time (ms)" for ax in lines)
    assert len({ax.get_xlim() for ax in lines}) == 1
    assert all(len(ax.get_xticks()) <= 7 for ax in lines)
    assert [ax.get_title().split(":")[0] for ax in heat] == ["base", "no-dcqcn"]


def test_rate_and_fct(runs: list[Any], tmp_path: Path,
                      drawn: Callable[[], list[Any]]) -> None:
    throughput(runs, tmp_path / "t.png", title="incast")
    fct_cdf(runs, tmp_path / "f.png")
    rate, fct = (f.axes[0] for f in drawn())
    assert rate.get_title() == "incast: rate over time (all flows)"
    assert rate.get_xlabel() == "time (ms)" and "Gb/s" in rate.get_ylabel()
    assert line_labels(rate) == ["base", "no-dcqcn"]
    assert fct.get_title() == "flow completion times" and fct.get_xscale() == "log"
    assert fct.get_ylabel() == "fraction of flows completed"
    assert line_labels(fct) == ["base", "no-dcqcn"]
    # a variant has the same colour in both figures
    assert [ln.get_color() for ln in rate.get_lines()] == [
        ln.get_color() for ln in fct.get_lines()]


def test_many_runs_wrap_and_no_pauses_say_so(runs: list[Any], tmp_path: Path,
                                             drawn: Callable[[], list[Any]]) -> None:
    ib = Scenario.model_validate({
        "name": "ib", "cluster": {"system": "dgx-h100", "nodes": 5, "gpus_per_node": 1,
                                  "fabric": "ib-ndr"},
        "packet": {"traffic": {"pattern": "incast", "nbytes": "1MB"}, "bins": 20}})
    quiet = run_packet_scenario(ib)
    assert not np.isfinite(quiet.result.extra["pause_first"]).any()  # credits: no PFC
    pause_map([quiet], tmp_path / "none.png", title="ib")
    queues([quiet], tmp_path / "q1.png")
    queues([*runs, *runs], tmp_path / "q4.png")
    none, q1, q4 = drawn()
    assert [t.get_text() for t in none.axes[0].texts] == ["No PFC pause in any run (base)."]
    assert "no PFC pauses" in q1._suptitle.get_text()
    assert len([ax for ax in q1.axes if ax.get_lines()]) == 0  # no empty pause panel
    heat = [ax for ax in q4.axes if ax.get_visible() and ax.get_images()]
    assert len(heat) == 4
    rows = sorted({round(ax.get_position().y0, 3) for ax in heat})
    assert len(rows) == 2  # three a row, the fourth on the next
