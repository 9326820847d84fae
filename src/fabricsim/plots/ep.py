"""MoE dispatch/combine kernels against EP size: time and bandwidth per kernel family.

Two panels: time per call (log) and bandwidth in each family's own convention, one line
per (kernel, phase), EP size on a log₂ axis.

Example
-------
>>> import tempfile, pathlib
>>> rows = [{"ep": e, "kernel": "deepep", "phase": "dispatch", "time_us": t,
...          "headline_gbps": b} for e, t, b in ((8, 900.0, 160.0), (16, 1100.0, 50.0))]
>>> plot_ep(rows, pathlib.Path(tempfile.mkdtemp()) / "ep.png").exists()
True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabricsim.plots.style import color, plt, save

__all__ = ["plot_ep"]


def plot_ep(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Time and bandwidth against EP size, a line per (kernel, phase)."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.0, 4.2), dpi=110)
    curves: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        curves.setdefault((r["kernel"], r["phase"]), []).append(r)
    for (kern, ph), rs in curves.items():
        rs = sorted(rs, key=lambda r: r["ep"])
        xs = [r["ep"] for r in rs]
        style = {"color": color(kern), "ls": "-" if ph == "dispatch" else "--",
                 "marker": "o", "label": f"{kern} {ph}"}
        a1.plot(xs, [r["time_us"] for r in rs], **style)
        a2.plot(xs, [r["headline_gbps"] for r in rs], **style)
    for ax, lab in ((a1, "time per call (µs)"), (a2, "bandwidth, family's convention (GB/s)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("EP size (GPUs)")
        ax.set_ylabel(lab)
        ax.grid(True, alpha=0.3)
    a1.set_yscale("log")
    a2.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save(fig, path)
