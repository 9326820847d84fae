"""Bus bandwidth against message size (log x), one curve per algorithm or fabric.

Example
-------
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "busbw.png"
>>> plot_busbw({"ring": ([1024, 2**20, 2**30], [0.1, 30.0, 230.0])}, p).exists()
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from fabricsim.plots.style import COLORS, new_figure, save


def plot_busbw(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
               path: str | Path, *, title: str = "", measured: tuple[Sequence[float],
                                                                     Sequence[float]] | None = None
               ) -> Path:
    """Draw ``curves`` (label -> (sizes in bytes, busbw in GB/s)) and save to ``path``.

    ``measured`` adds reference points (e.g. a real nccl-tests log) as markers.
    """
    fig, ax = new_figure()
    for i, (label, (sizes, bw)) in enumerate(curves.items()):
        ax.plot(list(sizes), list(bw), marker="o", ms=3, lw=1.5,
                color=COLORS[i % len(COLORS)], label=label)
    if measured is not None:
        ax.plot(list(measured[0]), list(measured[1]), "k^", ms=4, label="measured")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    return save(fig, path)
