"""Bandwidth hierarchy of one or more clusters (seed 004's levels), log scale.

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

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from fabricsim.plots.style import COLORS, new_figure, save
from fabricsim.reports.cluster import ClusterSummary


def plot_hierarchy(summaries: Mapping[str, ClusterSummary], path: str | Path) -> Path:
    """Grouped bars of GB/s per GPU for each level of each cluster."""
    names: list[str] = []
    for s in summaries.values():
        for lv in s.hierarchy:
            if lv.name not in names:
                names.append(lv.name)
    fig, ax = new_figure()
    width = 0.8 / max(len(summaries), 1)
    x = np.arange(len(names))
    for i, (label, s) in enumerate(summaries.items()):
        bw = {lv.name: lv.bandwidth_gbps for lv in s.hierarchy}
        vals = [bw.get(n, 0.0) for n in names]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=label,
               color=COLORS[i % len(COLORS)])
    ax.set_yscale("log")
    ax.set_xticks(x, names)
    ax.set_ylabel("GB/s per GPU, one direction")
    ax.set_title("Bandwidth hierarchy")
    ax.legend()
    return save(fig, path)
