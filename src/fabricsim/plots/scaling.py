"""Scaling curves: efficiency against one node and MFU, and what communication costs.

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

from fabricsim.plots.style import COLORS, label_bars, plt, save


def plot_scaling(points: Sequence[dict[str, Any]], path: str | Path, title: str = ""
                 ) -> Path:
    """Scaling efficiency (against the points' ``baseline_gpus``, else one node) and MFU
    against GPU count (log x); when the points carry
    ``comm_usd_per_day`` (``fabricsim scale``), a second panel with the cost of the GPU
    time lost to communication per day at each size, values on the bars."""
    cost = all("comm_usd_per_day" in p for p in points) and bool(points)
    fig, axes = plt.subplots(1, 2 if cost else 1, figsize=(12.0 if cost else 7.0, 4.2),
                             dpi=110, squeeze=False)
    ax = axes[0, 0]
    x = [p["gpus"] for p in points]
    base = points[0].get("baseline_gpus") if points else None
    ax.plot(x, [100 * p["scaling_efficiency"] for p in points], "o-", color=COLORS[0],
            label=f"scaling efficiency vs {base:,} GPUs" if base else
            "scaling efficiency vs one node")
    ax.plot(x, [100 * p["mfu"] for p in points], "s--", color=COLORS[1], label="MFU")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.set_xticks(x, [f"{g:,}" for g in x])
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)
    for g, p in zip(x, points, strict=True):
        ax.annotate(f"{100 * p['scaling_efficiency']:.0f}%", (g, 100 * p["scaling_efficiency"]),
                    xytext=(0, 5), textcoords="offset points", ha="center", fontsize=7)
    ax.set_title("scaling efficiency and MFU against GPU count", fontsize=9)
    ax.legend(loc="lower left", fontsize=8)
    if cost:
        bx = axes[0, 1]
        pos = list(range(len(points)))
        bars = bx.bar(pos, [float(p["comm_usd_per_day"]) for p in points], color=COLORS[1])
        label_bars(bx, bars, "${:,.0f}")
        bx.set_xticks(pos, [f"{g:,}" for g in x])
        bx.set_xlabel("GPUs")
        bx.set_ylabel("USD per day")
        bx.yaxis.set_major_formatter(lambda v, _p: f"{v:,.0f}")
        bx.set_ylim(0, max(float(p["comm_usd_per_day"]) for p in points) * 1.2 or 1.0)
        bx.set_title("GPU time lost to communication, per day", fontsize=9)
        bx.grid(True, axis="y", alpha=0.3)
    fig.suptitle(title or "scaling", fontsize=10.5)
    return save(fig, path)
