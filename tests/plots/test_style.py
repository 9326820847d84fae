"""One palette: the same name has the same colour everywhere."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from fabricsim.plots.style import COLORS, PALETTE, canonical, color, colors_for, format_size


def test_report_names_map_to_presets() -> None:
    assert color("InfiniBand NDR") == color("ib-ndr") == PALETTE["ib-ndr"]
    assert color("RoCEv2 400G") == color("roce-400g") != color("ib-ndr")
    assert color("NVLSTree") == color("nvlstree/simple") == PALETTE["nvlstree"]
    assert canonical("  Ring/LL ") == "ring"


def test_unknown_names_get_a_stable_fallback() -> None:
    assert color("no-watchdog") == color("no-watchdog") and color("no-watchdog") in COLORS


def test_colors_in_one_figure_are_distinct() -> None:
    cols = colors_for(["ring", "simple", "ib-ndr", "tree"])  # ring, simple, ib-ndr share
    assert len(set(cols)) == 4
    assert cols[0] == color("ring")


@pytest.mark.parametrize(("n", "text"), [(8, "8"), (1024, "1K"), (2**20, "1M"),
                                         (3 * 2**30, "3G"), (1536, "1.5K")])
def test_size_ticks(n: int, text: str) -> None:
    assert format_size(n) == text


def test_log_axis_labels_do_not_pile_up() -> None:
    from fabricsim.plots.style import log_axis, plt

    fig, ax = plt.subplots()
    ax.plot([150, 6000], [0, 1])
    log_axis(ax, "x")
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels(minor=True)]
    assert set(labels) <= {""}
    shown = {t.get_text() for t in ax.get_xticklabels()}
    assert {"200", "500", "1,000", "2,000", "5,000"} <= shown
    plt.close(fig)
