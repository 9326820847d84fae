"""Shared matplotlib set-up: a headless backend and one look for every figure.

Example
-------
>>> fig, ax = new_figure()
>>> fig.savefig  # doctest: +ELLIPSIS
<bound method Figure.savefig of <Figure ...>>
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricsim._extras import require

matplotlib = require("matplotlib", "plot", "plotting")
matplotlib.use("Agg")
plt = require("matplotlib.pyplot", "plot", "plotting")

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")


def new_figure(width: float = 7.0, height: float = 4.2) -> tuple[Any, Any]:
    """A figure and axes with fabricsim's defaults."""
    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def save(fig: Any, path: str | Path) -> Path:
    """Save and close ``fig``; creates the parent folder."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)
    return p
