"""Bus bandwidth and latency against size, with the chosen algorithm/protocol marked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from plot_inspect import legend_labels, line_labels

from fabricsim.plots.busbw import Sweep, choice_spans, plot_busbw, plot_collective
from fabricsim.plots.style import color

SIZES = [2**k for k in range(10, 31, 2)]


def sweep(scale: float, switch_at: int) -> Sweep:
    choice = ["tree/ll" if s < switch_at else "ring/simple" for s in SIZES]
    return Sweep(sizes=SIZES, busbw_gbps=[scale * s / (s + 2**22) for s in SIZES],
                 time_s=[1e-5 + s / (scale * 1e9) for s in SIZES], choice=choice)


def test_collective_has_busbw_time_and_choices(tmp_path: Path,
                                               drawn: Callable[[], list[Any]]) -> None:
    curves = {"InfiniBand NDR": sweep(360.0, 2**20), "RoCEv2 400G": sweep(350.0, 2**24)}
    out = plot_collective(curves, tmp_path / "c.png", title="all_reduce, 256 GPUs")
    assert out.stat().st_size > 10_000
    (fig,) = drawn()
    bw, lat, strip = fig.axes
    assert bw.get_title() == "all_reduce, 256 GPUs"
    assert bw.get_ylabel() == "bus bandwidth (GB/s)" and "time" in lat.get_ylabel()
    assert strip.get_xlabel() == "message size (bytes)"
    assert all(ax.get_xscale() == "log" for ax in (bw, lat, strip))
    assert lat.get_yscale() == "log"
    assert line_labels(bw) == line_labels(lat) == list(curves)
    assert legend_labels(bw) == list(curves)
    # the same fabric has the same colour in both panels and in every figure
    assert [ln.get_color() for ln in bw.get_lines() if ln.get_label() in curves] == [
        color("ib-ndr"), color("roce-400g")]
    # one switch marker per curve (tree/ll -> ring/simple)
    markers = [ln for ln in bw.get_lines() if ln.get_marker() == "D"]
    assert len(markers) == 2
    assert {float(m.get_xdata()[0]) for m in markers} == {2**20, 2**24}
    # the strip names each span's choice on a row per curve
    assert [t.get_text() for t in strip.get_yticklabels()] == list(curves)
    assert sorted(t.get_text() for t in strip.texts) == sorted(
        ["tree/ll", "ring/simple"] * 2)
    ticks = [t.get_text() for t in strip.get_xticklabels()]
    assert {"1K", "64K", "4M"} <= set(ticks)


def test_the_held_out_band_is_shaded_around_the_curve(
        tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    sw = sweep(360.0, 2**20)
    banded = Sweep(sw.sizes, sw.busbw_gbps, sw.time_s, sw.choice, band=[0.2] * len(SIZES))
    plot_collective({"InfiniBand NDR": banded}, tmp_path / "b.png")
    (fig,) = drawn()
    bw = fig.axes[0]
    (area,) = bw.collections
    ys = area.get_paths()[0].vertices[:, 1]
    top = max(banded.busbw_gbps)
    assert max(ys) == pytest.approx(1.2 * top) and "held-out error band" in " ".join(
        legend_labels(bw))


def test_choice_spans_run_lengths() -> None:
    assert choice_spans([1, 2, 4], ["a", "b", "a"]) == [(1, 1, "a"), (2, 2, "b"),
                                                         (4, 4, "a")]


def test_busbw_only(tmp_path: Path, drawn: Callable[[], list[Any]]) -> None:
    plot_busbw({"ring": (SIZES, [1.0] * len(SIZES))}, tmp_path / "b.png",
               measured=(SIZES[:2], [1.0, 1.0]))
    (fig,) = drawn()
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xscale() == "log"
    assert ax.get_xlabel() == "message size (bytes)" and "GB/s" in ax.get_ylabel()
    assert line_labels(ax) == ["ring", "measured"]
