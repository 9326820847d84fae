"""Bandwidth hierarchy of one or more clusters (seed 004's levels), log scale.

The plot draws, per cluster, each level's name and GB/s per GPU: it takes anything that
has a ``hierarchy`` of such levels (:class:`Hierarchy`), as
:class:`fabricsim.reports.ClusterSummary` does, and imports nothing from the reports that
call it.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.reports import summarize
>>> import tempfile, os
>>> s = summarize(build_cluster("dgx-h100", 2))
>>> p = plot_hierarchy({"ib": s}, os.path.join(tempfile.mkdtemp(), "h.png"))
>>> p.exists()
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from fabricsim.plots.style import colors_for, label_bars, log_axis, new_figure, save


class Level(Protocol):
    """One level of a bandwidth hierarchy: its name and GB/s per GPU, one direction."""

    @property
    def name(self) -> str: ...

    @property
    def bandwidth_gbps(self) -> float: ...


class Hierarchy(Protocol):
    """A cluster's levels from the GPU outwards (e.g. a ``ClusterSummary``)."""

    @property
    def hierarchy(self) -> Sequence[Level]: ...


def plot_hierarchy(summaries: Mapping[str, Hierarchy], path: str | Path, *,
                   title: str = "") -> Path:
    """Grouped bars of GB/s per GPU for each level of each cluster (log scale), with the
    value on every bar; levels where every cluster has the same bandwidth are drawn once
    per cluster but say so in the title."""
    names: list[str] = []
    for s in summaries.values():
        for lv in s.hierarchy:
            if lv.name not in names:
                names.append(lv.name)
    fig, ax = new_figure(width=8.0, height=4.4)
    width = 0.8 / max(len(summaries), 1)
    x = np.arange(len(names))
    values = {label: {lv.name: lv.bandwidth_gbps for lv in s.hierarchy}
              for label, s in summaries.items()}
    for i, (label, c) in enumerate(zip(summaries, colors_for(list(summaries)), strict=True)):
        vals = [values[label].get(n, 0.0) for n in names]
        bars = ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=label, color=c)
        label_bars(ax, bars, "{:,.0f}")
    log_axis(ax, "y")
    ax.set_xticks(x, names)
    ax.set_xlabel("level, from the GPU outwards")
    ax.set_ylabel("GB/s per GPU, one direction (log)")
    top = max((v for d in values.values() for v in d.values()), default=1.0)
    low = min((v for d in values.values() for v in d.values() if v > 0), default=1.0)
    ax.set_ylim(10 ** np.floor(np.log10(low / 2)), top * 3)
    same = len(summaries) > 1 and all(values[k] == values[next(iter(values))]
                                      for k in values)
    ax.set_title(title or ("Bandwidth hierarchy per GPU"
                           + (" (the same on every fabric compared)" if same else "")),
                 fontsize=10)
    ax.legend(fontsize=8)
    return save(fig, path)
