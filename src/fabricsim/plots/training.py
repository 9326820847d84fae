"""Where a training step's time goes, per design: stacked bars with the values written.

Communication is split by where it runs: tensor-parallel traffic stays on NVLink (inside
the NVLink domain), pipeline, data-parallel and expert traffic cross the scale-out
network.

Example
-------
>>> import tempfile, os
>>> parts = {"ib-ndr": {"compute": 10.0, "bubble": 1.0, "tp": 2.0, "dp": 0.5},
...          "roce-400g": {"compute": 10.0, "bubble": 1.0, "tp": 2.0, "dp": 0.7}}
>>> plot_step_breakdown(parts, os.path.join(tempfile.mkdtemp(), "t.png")).exists()
True
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fabricsim.plots.style import COLORS, new_figure, save

__all__ = ["PART_LABELS", "plot_step_breakdown"]

#: Breakdown keys, in drawing order, with their legend labels.
PART_LABELS = {"compute": "compute", "bubble": "pipeline bubble",
               "tp": "TP comm (NVLink)", "cp": "CP comm", "ep": "EP all-to-all (scale-out)",
               "pp": "PP comm (scale-out)", "dp": "DP comm (scale-out)",
               "optimizer": "optimizer"}


def plot_step_breakdown(parts: Mapping[str, Mapping[str, float]], path: str | Path, *,
                        title: str = "Where a training step's time goes") -> Path:
    """One horizontal stacked bar per design (``parts[design][key]`` in seconds, keys of
    :data:`PART_LABELS`); each segment of at least 3 % of its bar carries its value."""
    designs = list(parts)
    fig, ax = new_figure(height=1.6 + 0.7 * len(designs))
    left = [0.0] * len(designs)
    for ci, (key, label) in enumerate(PART_LABELS.items()):
        vals = [float(parts[d].get(key, 0.0)) for d in designs]
        if not any(v > 0 for v in vals):
            continue
        color = "#7f7f7f" if key == "optimizer" else COLORS[ci % len(COLORS)]
        ax.barh(designs, vals, left=left, label=label, color=color)
        for i, v in enumerate(vals):
            total = sum(float(x) for x in parts[designs[i]].values()) or 1.0
            if v / total >= 0.03:
                ax.text(left[i] + v / 2, i, f"{v:.2f}", ha="center", va="center",
                        fontsize=7, color="white")
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_xlabel("seconds per step")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    ax.invert_yaxis()
    return save(fig, path)
