"""Scaling-efficiency curve: tokens/s per GPU and efficiency against one node.

Example
-------
>>> import tempfile, os
>>> pts = [{"gpus": 8, "scaling_efficiency": 1.0, "mfu": 0.5},
...        {"gpus": 64, "scaling_efficiency": 0.9, "mfu": 0.45}]
>>> plot_scaling(pts, os.path.join(tempfile.mkdtemp(), "s.png")).exists()
True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabricsim.plots.style import COLORS, new_figure, save


def plot_scaling(points: Sequence[dict[str, Any]], path: str | Path, title: str = ""
                 ) -> Path:
    """Plot scaling efficiency and MFU against GPU count (log x) to ``path``."""
    fig, ax = new_figure()
    x = [p["gpus"] for p in points]
    ax.plot(x, [100 * p["scaling_efficiency"] for p in points], "o-", color=COLORS[0],
            label="scaling efficiency vs one node")
    ax.plot(x, [100 * p["mfu"] for p in points], "s--", color=COLORS[1], label="MFU")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.set_xticks(x, [f"{g:,}" for g in x])
    ax.minorticks_off()
    for g, p in zip(x, points, strict=True):
        ax.annotate(f"{100 * p['scaling_efficiency']:.0f}%", (g, 100 * p["scaling_efficiency"]),
                    xytext=(0, 5), textcoords="offset points", ha="center", fontsize=7)
    ax.set_title(title or "scaling efficiency and MFU against GPU count", fontsize=10)
    ax.legend(loc="lower left", fontsize=8)
    return save(fig, path)
