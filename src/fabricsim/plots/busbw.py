"""A collective against message size: bus bandwidth and latency (log₂ size axis), with the
algorithm and protocol chosen at each size marked.

:func:`plot_busbw` draws bus bandwidth only (``bench --plot``, ``compare --plot``);
:func:`plot_collective` draws bus bandwidth, time and a strip per curve showing which
algorithm/protocol was chosen over which sizes (where NCCL's tuner would switch).

Example
-------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> plot_busbw({"ring": ([1024, 2**20, 2**30], [0.1, 30.0, 230.0])}, d / "b.png").exists()
True
>>> c = Sweep(sizes=[1024, 2**20, 2**30], busbw_gbps=[0.1, 30.0, 230.0],
...           time_s=[1e-5, 6e-5, 8e-3], choice=["ring/ll", "ring/ll128", "ring/simple"])
>>> plot_collective({"ib-ndr": c}, d / "c.png", title="all_reduce").exists()
True
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricsim.plots.style import (
    color,
    colors_for,
    log_axis,
    new_figure,
    plt,
    save,
    size_axis,
)

__all__ = ["Sweep", "choice_spans", "plot_busbw", "plot_collective"]


@dataclass(frozen=True)
class Sweep:
    """One curve: sizes (bytes), bus bandwidth (GB/s), time (s) and the
    ``algorithm/protocol`` chosen at each size."""

    sizes: Sequence[float]
    busbw_gbps: Sequence[float]
    time_s: Sequence[float]
    choice: Sequence[str] = field(default_factory=list)
    #: Relative held-out error at each size (``fabricsim.collectives.accuracy``): the
    #: bandwidth curve is drawn with a shaded band of ``busbw × (1 ± band)``.
    band: Sequence[float] = field(default_factory=list)


def choice_spans(sizes: Sequence[float], choice: Sequence[str]
                 ) -> list[tuple[float, float, str]]:
    """Runs of equal choice as ``(first size, last size, choice)``.

    >>> choice_spans([1, 2, 4, 8], ["ring/ll", "ring/ll", "tree/simple", "tree/simple"])
    [(1, 2, 'ring/ll'), (4, 8, 'tree/simple')]
    """
    spans: list[tuple[float, float, str]] = []
    for s, c in zip(sizes, choice, strict=True):
        if spans and spans[-1][2] == c:
            spans[-1] = (spans[-1][0], s, c)
        else:
            spans.append((s, s, c))
    return spans


def plot_busbw(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
               path: str | Path, *, title: str = "", measured: tuple[Sequence[float],
                                                                     Sequence[float]] | None = None
               ) -> Path:
    """Draw ``curves`` (label -> (sizes in bytes, busbw in GB/s)) and save to ``path``.

    ``measured`` adds reference points (e.g. a real nccl-tests log) as markers.
    """
    fig, ax = new_figure()
    for (label, (sizes, bw)), c in zip(curves.items(), colors_for(list(curves)), strict=True):
        ax.plot(list(sizes), list(bw), marker="o", ms=3, lw=1.5, color=c, label=label)
    if measured is not None:
        ax.plot(list(measured[0]), list(measured[1]), "k^", ms=4, label="measured")
    size_axis(ax)
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title or "bus bandwidth against message size")
    ax.legend(loc="upper left", fontsize=8)
    return save(fig, path)


def _strip(ax: Any, curves: Mapping[str, Sweep]) -> None:
    """One row per curve: the chosen algorithm/protocol over its sizes."""
    import numpy as np

    names = list(curves)
    for row, name in enumerate(names):
        sw = curves[name]
        if not sw.choice:
            continue
        sizes = [float(s) for s in sw.sizes]
        # each size owns the span from the geometric midpoint to its neighbours
        mids = [float(np.sqrt(a * b)) for a, b in itertools.pairwise(sizes)]
        lo = [sizes[0] / 1.2, *mids]
        hi = [*mids, sizes[-1] * 1.2]
        for first, last, ch in choice_spans(sizes, sw.choice):
            i, j = sizes.index(first), sizes.index(last)
            algo, _, proto = ch.partition("/")
            ax.barh(row, hi[j] - lo[i], left=lo[i], height=0.8, color=color(algo),
                    edgecolor="white", hatch={"ll": "..", "ll128": "//"}.get(proto, ""),
                    alpha=0.85)
            if j - i >= 2 or len(sizes) <= 8:
                ax.text(float(np.sqrt(lo[i] * hi[j])), row, ch, ha="center", va="center",
                        fontsize=7, color="black", clip_on=True,
                        bbox={"facecolor": "white", "alpha": 0.85, "lw": 0, "pad": 1.0})
    ax.set_yticks(range(len(names)), names, fontsize=7.5)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_title("algorithm/protocol chosen (hatching: .. LL, // LL128, plain Simple)",
                 fontsize=8, loc="left")
    ax.grid(False)


def plot_collective(curves: Mapping[str, Sweep], path: str | Path, *, title: str = ""
                    ) -> Path:
    """Bus bandwidth (top) and time (middle) against size for each curve, and the
    algorithm/protocol chosen at each size (bottom strip); switch points are marked on
    the bandwidth curves."""
    n = len(curves)
    fig, (a1, a2, a3) = plt.subplots(3, 1, sharex=True, figsize=(7.5, 7.6 + 0.3 * n),
                                     dpi=110, gridspec_kw={"height_ratios": [4, 3, 0.5 + 0.45 * n]})
    cols = colors_for(list(curves))
    for (label, sw), c in zip(curves.items(), cols, strict=True):
        a1.plot(list(sw.sizes), list(sw.busbw_gbps), "-o", ms=2.5, lw=1.5, color=c,
                label=label)
        if sw.band and len(sw.band) == len(sw.sizes):
            lo = [b * (1 - e) for b, e in zip(sw.busbw_gbps, sw.band, strict=True)]
            hi = [b * (1 + e) for b, e in zip(sw.busbw_gbps, sw.band, strict=True)]
            a1.fill_between(list(sw.sizes), [max(x, 0.0) for x in lo], hi, color=c,
                            alpha=0.12, lw=0, label=f"{label}: held-out error band")
        a2.plot(list(sw.sizes), [t * 1e6 for t in sw.time_s], "-o", ms=2.5, lw=1.5, color=c,
                label=label)
        if sw.choice:
            for first, _last, _ch in choice_spans(list(sw.sizes), list(sw.choice))[1:]:
                k = list(sw.sizes).index(first)
                a1.plot([first], [sw.busbw_gbps[k]], marker="D", ms=6, mfc="white", mec=c,
                        mew=1.5, ls="none")
    for ax in (a1, a2):
        ax.grid(True, alpha=0.3)
    a1.set_ylabel("bus bandwidth (GB/s)")
    a1.set_title(title or "collective against message size")
    a1.legend(loc="upper left", fontsize=8, title="◇ = algorithm/protocol switch",
              title_fontsize=7.5)
    log_axis(a2, "y")
    a2.set_ylabel("time (µs, log)")
    _strip(a3, curves)
    size_axis(a3)
    for ax in (a1, a2):
        ax.tick_params(labelbottom=True)
        ax.set_xlabel("")
    return save(fig, path)
