"""Link-utilisation heatmap of a flow-backend run: links (rows) × time (columns).

Rows are the links that matter, ranked by one of: bytes carried (``rank="bytes"``), mean
utilisation (``"utilization"``), or the time each link limited the run (``"critical"``,
the flow backend's ``Result.extra["critical_time"]``: its slowdown contribution). Links in
``highlight`` — the ones a scenario names, such as a degraded link — are always shown,
marked ``▶`` and in red, whatever their rank.

Example
-------
>>> import numpy as np, tempfile, pathlib
>>> from fabricsim.backends.flow import FlowBackend, host_fat_tree
>>> from fabricsim.schedule import Schedule, Step
>>> fab = host_fat_tree(4)
>>> s = Step(src=fab.gpus, dst=np.roll(fab.gpus, -1), nbytes=np.full(4, 1e6), repeat=6)
>>> res = FlowBackend(record_timeline=True).run(Schedule(steps=(s,)), fab)
>>> tl = res.extra["timeline"]
>>> rows = ranked_links(tl, top=2, highlight=(int(tl.links[-1]),))
>>> len(rows), int(tl.links[rows[-1]]) == int(tl.links[-1])
(2, True)
>>> out = link_heatmap(tl, pathlib.Path(tempfile.mkdtemp()) / "u.png")
>>> out.suffix
'.png'
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fabricsim.backends.flow.results import Timeline
from fabricsim.errors import ConfigError
from fabricsim.plots.style import new_figure, save

__all__ = ["RANKS", "link_heatmap", "ranked_links"]

#: How rows can be ranked, with the colour-bar side label of the ranking figure.
RANKS = {"bytes": "GB carried", "utilization": "mean utilisation",
         "critical": "time limiting the run (ms)"}


def _score(timeline: Timeline, rank: str, critical: Any) -> np.ndarray:
    if rank == "bytes":
        return np.asarray(timeline.bytes[-1], dtype=np.float64) / 1e9
    if rank == "utilization":
        span = float(timeline.t[-1] - timeline.t[0]) if timeline.t.size > 1 else 0.0
        if span <= 0:
            return np.zeros(timeline.links.size)
        return np.asarray(timeline.bytes[-1] / (timeline.capacity * span), dtype=np.float64)
    if rank == "critical":
        if critical is None:
            raise ConfigError("rank='critical' needs the run's critical_time array",
                              field="critical")
        return np.asarray(critical, dtype=np.float64)[timeline.links] * 1e3
    raise ConfigError(f"unknown rank {rank!r}; use one of {', '.join(RANKS)}", field="rank")


def ranked_links(timeline: Timeline, *, top: int = 30, rank: str = "bytes",
                 critical: Sequence[float] | None = None,
                 highlight: Sequence[int] = ()) -> list[int]:
    """Column indices into ``timeline.links``: the ``top`` links by ``rank`` (ties broken
    by mean utilisation; idle links left out), with every link of ``highlight`` that the
    timeline holds added (the total stays ``top`` when there are enough, highlighted
    links displacing the lowest-ranked)."""
    score = _score(timeline, rank, critical)
    # ties (links that never limited the run, for rank="critical") by mean utilisation
    tie = _score(timeline, "utilization", None) if rank == "critical" else score
    order = [int(k) for k in np.lexsort((-tie, -score)) if score[k] > 0 or tie[k] > 0]
    pos = {int(l): k for k, l in enumerate(timeline.links.tolist())}
    must = [pos[int(h)] for h in highlight if int(h) in pos]
    rest = [k for k in order if k not in must]
    keep = set(must) | set(rest[:max(top - len(must), 0)])
    out: list[int] = []
    for k in [*order, *must]:
        if k in keep and k not in out:
            out.append(k)
    return out


def link_heatmap(timeline: Timeline, path: str | Path, *, top: int = 30, bins: int = 120,
                 title: str = "Link utilisation", highlight: Sequence[int] = (),
                 rank: str = "bytes", critical: Sequence[float] | None = None) -> Path:
    """Draw the utilisation over ``bins`` time bins of the ``top`` links by ``rank``
    (plus every link of ``highlight``) into ``path``.

    Parameters
    ----------
    timeline
        ``Result.extra["timeline"]`` of a run with ``record_timeline=True``.
    path
        PNG file to write.
    top
        How many links (rows).
    bins
        Time resolution (columns).
    highlight
        Link ids always shown and marked (e.g. links a fault touches).
    rank
        ``"bytes"``, ``"utilization"`` or ``"critical"`` (needs ``critical``).
    critical
        ``Result.extra["critical_time"]`` (by link id), for ``rank="critical"``.
    """
    score = _score(timeline, rank, critical)
    order = ranked_links(timeline, top=top, rank=rank, critical=critical,
                         highlight=highlight)
    edges, util = timeline.resample(bins)
    rows = util[:, order].T if order else np.zeros((1, bins))
    marked = {int(h) for h in highlight}
    labels = [("▶ " if int(timeline.links[k]) in marked else "") + timeline.names[k]
              for k in order] or ["(no link carried traffic)"]
    height = 1.8 + 0.24 * max(len(labels), 4)
    fig, ax = new_figure(width=10.0, height=min(height, 12.0))
    ax.grid(False)
    t_end = float(edges[-1]) if edges.size else 0.0
    img = ax.imshow(rows, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0.0,
                    vmax=1.0, extent=(0.0, t_end * 1e3, len(labels) - 0.5, -0.5))
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    for tick, k in zip(ax.get_yticklabels(), order, strict=False):
        if int(timeline.links[k]) in marked:
            tick.set_color("#d62728")
            tick.set_fontweight("bold")
    right = ax.secondary_yaxis("right")
    right.set_yticks(range(len(labels)))
    right.set_yticklabels([f"{score[k]:,.3g}" for k in order] or [""], fontsize=6.5)
    right.set_ylabel(f"rank: {RANKS.get(rank, rank)}", fontsize=8)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("link (red ▶: named by the scenario)" if marked else "link")
    ax.set_title(title, fontsize=10)
    fig.colorbar(img, ax=ax, label="utilisation (0–1)", pad=0.12, fraction=0.04)
    return save(fig, path)
