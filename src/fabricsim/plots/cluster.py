"""Jobs sharing a cluster: each job's slowdown beside the others, per placement.

Grouped bars, a group per job and a bar per placement (the ``placements`` of
``ClusterReport.to_dict()``), the GPU-hours each placement loses per hour in the legend.

Example
-------
>>> import tempfile, pathlib
>>> pl = [{"placement": "packed", "gpu_hours_lost_per_hour": 0.0,
...        "jobs": [{"job": "a", "slowdown": 1.0}, {"job": "b", "slowdown": 1.0}]},
...       {"placement": "spread", "gpu_hours_lost_per_hour": 3.5,
...        "jobs": [{"job": "a", "slowdown": 1.04}, {"job": "b", "slowdown": 1.01}]}]
>>> plot_cluster(pl, pathlib.Path(tempfile.mkdtemp()) / "c.png").exists()
True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fabricsim.plots.style import colors_for, plt, save

__all__ = ["plot_cluster"]


def plot_cluster(placements: Sequence[dict[str, Any]], path: str | Path,
                 title: str = "") -> Path:
    """Each job's slowdown (step shared over step alone) for every placement."""
    names = [j["job"] for j in placements[0]["jobs"]] if placements else []
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(names) + 2.0), 4.2), dpi=110)
    width = 0.8 / max(len(placements), 1)
    x = np.arange(len(names))
    cols = colors_for([p["placement"] for p in placements])
    for k, p in enumerate(placements):
        slow = {j["job"]: j["slowdown"] for j in p["jobs"]}
        ax.bar(x + (k - (len(placements) - 1) / 2) * width,
               [(slow[n] - 1.0) * 100.0 for n in names], width, color=cols[k],
               label=f"{p['placement']}: {p['gpu_hours_lost_per_hour']:.1f} GPU-h lost/h")
    ax.set_xticks(x, names, rotation=15, ha="right")
    ax.set_ylabel("slowdown beside the other jobs (%)")
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return save(fig, path)
