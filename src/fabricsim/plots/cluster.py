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

__all__ = ["plot_cluster", "plot_replay"]


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


def plot_replay(replays: Sequence[dict[str, Any]], path: str | Path, title: str = ""
                ) -> Path:
    """A trace replay over time, a line per scheduler (``trace.replays`` of
    ``ClusterReport.to_dict()``): GPUs busy, jobs queued, and GPUs lost to interference.

    >>> import tempfile, pathlib
    >>> r = [{"scheduler": "fifo", "hours": 1.0, "utilisation": 0.5,
    ...       "wait_mean_s": 60.0, "interference_gpu_hours": 0.1,
    ...       "timeline": {"t_s": [0, 1800], "busy_gpus": [8, 16],
    ...                    "queued_jobs": [0, 2], "interference_gpus": [0, 0.5]}}]
    >>> plot_replay(r, pathlib.Path(tempfile.mkdtemp()) / "r.png").exists()
    True
    """
    fig, axes = plt.subplots(3, 1, figsize=(8.0, 6.6), dpi=110, sharex=True)
    cols = colors_for([r["scheduler"] for r in replays])
    for k, r in enumerate(replays):
        tl = r["timeline"]
        end = r["hours"]
        t = np.append(np.asarray(tl["t_s"], dtype=float) / 3600.0, end)
        label = (f"{r['scheduler']}: {r['utilisation']:.0%} busy, mean wait "
                 f"{r['wait_mean_s'] / 60.0:.0f} min, "
                 f"{r['interference_gpu_hours']:.0f} GPU-h lost to interference")
        for ax, key in zip(axes, ("busy_gpus", "queued_jobs", "interference_gpus"),
                           strict=True):
            y = np.asarray(tl[key], dtype=float)
            ax.step(t, np.append(y, y[-1] if y.size else 0.0), where="post", color=cols[k],
                    lw=1.1, label=label if key == "busy_gpus" else None)
    for ax, lab in zip(axes, ("GPUs busy", "jobs queued", "GPUs lost to\ninterference"),
                       strict=True):
        ax.set_ylabel(lab)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower right")
    axes[-1].set_xlabel("hours into the trace window")
    if title:
        axes[0].set_title(title)
    return save(fig, path)
