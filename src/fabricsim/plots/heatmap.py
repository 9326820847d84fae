"""Link-utilisation heatmap of a flow-backend run: links (rows) × time (columns).

Example
-------
>>> import numpy as np, tempfile, pathlib
>>> from fabricsim.backends.flow import FlowBackend, host_fat_tree
>>> from fabricsim.schedule import Schedule, Step
>>> fab = host_fat_tree(4)
>>> s = Step(src=fab.gpus, dst=np.roll(fab.gpus, -1), nbytes=np.full(4, 1e6), repeat=6)
>>> res = FlowBackend(record_timeline=True).run(Schedule(steps=(s,)), fab)
>>> out = link_heatmap(res.extra["timeline"], pathlib.Path(tempfile.mkdtemp()) / "u.png")
>>> out.suffix
'.png'
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fabricsim.backends.flow.results import Timeline
from fabricsim.plots.style import new_figure, save


def link_heatmap(timeline: Timeline, path: str | Path, *, top: int = 40, bins: int = 120,
                 title: str = "Link utilisation", highlight: tuple[int, ...] = ()) -> Path:
    """Draw the ``top`` busiest links' utilisation over ``bins`` time bins into ``path``.

    Parameters
    ----------
    timeline
        ``Result.extra["timeline"]`` of a run with ``record_timeline=True``.
    path
        PNG file to write.
    top
        How many links (rows), the ones that carried the most bytes.
    bins
        Time resolution (columns).
    highlight
        Link ids whose labels are marked with ``*`` (e.g. links a fault touches).
    """
    edges, util = timeline.resample(bins)
    order = np.argsort(-timeline.bytes[-1], kind="stable")[:top] if timeline.links.size else \
        np.zeros(0, dtype=np.int64)
    rows = util[:, order].T if order.size else np.zeros((1, bins))
    labels = [("* " if int(timeline.links[k]) in highlight else "") + timeline.names[k]
              for k in order]
    height = 1.5 + 0.22 * max(len(labels), 4)
    fig, ax = new_figure(width=9.0, height=min(height, 14.0))
    ax.grid(False)
    t_end = float(edges[-1]) if edges.size else 0.0
    img = ax.imshow(rows, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0.0,
                    vmax=1.0, extent=(0.0, t_end * 1e3, len(labels) - 0.5, -0.5))
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("time (ms)")
    ax.set_title(title)
    fig.colorbar(img, ax=ax, label="utilisation")
    return save(fig, path)
