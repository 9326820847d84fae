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
    """A trace replay over time (``trace.replays`` of ``ClusterReport.to_dict()``): a line
    per scheduler of GPUs busy, jobs queued and GPUs lost to interference; then, for the
    first scheduler, a bar per job that spans servers (coloured by its slowdown) and the
    busiest links' load over time.

    >>> import tempfile, pathlib
    >>> r = [{"scheduler": "fifo", "hours": 1.0, "utilisation": 0.5,
    ...       "wait_mean_s": 60.0, "interference_gpu_hours": 0.1,
    ...       "timeline": {"t_s": [0, 1800], "busy_gpus": [8, 16],
    ...                    "queued_jobs": [0, 2], "interference_gpus": [0, 0.5]},
    ...       "job_list": [{"job": "a", "spans_servers": True, "start_s": 0.0,
    ...                     "end_s": 1800.0, "slowdown": 1.1}],
    ...       "links_over_time": {"t_s": [0.0, 1800.0],
    ...                           "links": [{"link": "leaf0->spine0", "busy": [0.2, 0.0]}]}}]
    >>> plot_replay(r, pathlib.Path(tempfile.mkdtemp()) / "r.png").exists()
    True
    """
    fig, axes = plt.subplots(5, 1, figsize=(8.5, 11.0), dpi=110, sharex=True,
                             gridspec_kw={"height_ratios": [1.2, 0.8, 0.8, 1.6, 1.2]})
    cols = colors_for([r["scheduler"] for r in replays])
    for k, r in enumerate(replays):
        tl = r["timeline"]
        t = np.append(np.asarray(tl["t_s"], dtype=float) / 3600.0, r["hours"])
        label = (f"{r['scheduler']}: {r['utilisation']:.0%} busy, mean wait "
                 f"{r['wait_mean_s'] / 60.0:.0f} min, "
                 f"{r['interference_gpu_hours']:.0f} GPU-h lost to interference")
        for ax, key in zip(axes[:3], ("busy_gpus", "queued_jobs", "interference_gpus"),
                           strict=True):
            y = np.asarray(tl[key], dtype=float)
            ax.step(t, np.append(y, y[-1] if y.size else 0.0), where="post", color=cols[k],
                    lw=1.1, label=label if key == "busy_gpus" else None)
    for ax, lab in zip(axes[:3], ("GPUs busy", "jobs queued", "GPUs lost to\ninterference"),
                       strict=True):
        ax.set_ylabel(lab)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower right")
    first = replays[0] if replays else None
    if first is not None:
        _gantt(axes[3], first)
        _heat(fig, axes[4], first)
    axes[-1].set_xlabel("hours into the trace window")
    if title:
        axes[0].set_title(title)
    return save(fig, path)


def _gantt(ax: Any, r: dict[str, Any]) -> None:
    """A bar per job spanning servers, from its start to its end, coloured by slowdown."""
    jobs = [j for j in r["job_list"] if j["spans_servers"] and j["start_s"] is not None]
    cmap = plt.get_cmap("viridis_r")
    worst = max([j["slowdown"] or 1.0 for j in jobs] + [1.01])
    for k, j in enumerate(jobs):
        end = j["end_s"] if j["end_s"] is not None else r["hours"] * 3600.0
        frac = ((j["slowdown"] or 1.0) - 1.0) / (worst - 1.0)
        ax.barh(k, (end - j["start_s"]) / 3600.0, left=j["start_s"] / 3600.0, height=0.8,
                color=cmap(frac))
    ax.set_ylabel(f"jobs spanning\nservers ({r['scheduler']})")
    ax.set_yticks([])
    ax.text(0.99, 0.02, f"darker: slower (worst ×{worst:.2f})", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7)


def _heat(fig: Any, ax: Any, r: dict[str, Any]) -> None:
    """The busiest links' busy share from each re-timing to the next."""
    lt = r["links_over_time"]
    links = lt["links"]
    if not links:
        ax.text(0.5, 0.5, "no link shared", transform=ax.transAxes, ha="center")
        ax.set_yticks([])
        return
    edges = np.append(np.asarray(lt["t_s"], dtype=float), r["hours"] * 3600.0) / 3600.0
    z = np.array([x["busy"] for x in links])
    mesh = ax.pcolormesh(edges, np.arange(len(links) + 1), z, cmap="magma_r", vmin=0.0,
                         vmax=max(1.0, float(z.max())))
    ax.set_yticks(np.arange(len(links)) + 0.5, [x["link"] for x in links], fontsize=5)
    ax.set_ylabel(f"busiest links\n({r['scheduler']})")
    cax = ax.inset_axes((1.01, 0.0, 0.015, 1.0))  # beside, so the time axes stay aligned
    fig.colorbar(mesh, cax=cax, label="busy share")
