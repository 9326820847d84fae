"""Shared matplotlib set-up: a headless backend and one look for every figure.

One palette serves every figure: a fabric, an algorithm or a part of a training step has
the same colour wherever it appears (:func:`color`), sizes read as ``1 KiB … 8 GiB`` on a
log axis (:func:`size_axis`), and bars carry their values (:func:`label_bars`).

Example
-------
>>> color("ib-ndr") == color("InfiniBand NDR"), color("ring") == color("Ring")
(True, True)
>>> fig, ax = new_figure()
>>> size_axis(ax)
>>> ax.get_xscale()
'log'
>>> plt.close(fig)
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabricsim._extras import require

matplotlib = require("matplotlib", "plot", "plotting")
matplotlib.use("Agg")
plt = require("matplotlib.pyplot", "plot", "plotting")

#: Fallback colours, for names the palette does not know (chosen by a stable hash).
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf",
          "#e377c2", "#bcbd22", "#7f7f7f")

#: Fixed colours by canonical name: fabrics, algorithms, protocols, step parts, runs.
PALETTE: dict[str, str] = {
    # fabrics (InfiniBand blues, Ethernet reds/oranges, EFA green)
    "ib-ndr": "#1f77b4", "ib-xdr": "#17becf", "ib-hdr": "#6baed6", "ib-edr": "#9ecae1",
    "roce-400g": "#d62728", "roce-800g": "#ff7f0e", "roce-200g": "#f4a582",
    "spectrum-x": "#e377c2", "efa": "#2ca02c", "efa-v2": "#2ca02c", "efa-v3": "#74c476",
    # algorithms
    "ring": "#1f77b4", "tree": "#ff7f0e", "nvls": "#2ca02c", "nvlstree": "#9467bd",
    "collnet": "#8c564b", "sharp": "#8c564b", "nvls_sharp": "#bcbd22", "pat": "#17becf",
    "direct": "#e377c2", "hierarchical": "#7f7f7f",
    # protocols
    "simple": "#1f77b4", "ll": "#d62728", "ll128": "#2ca02c",
    # parts of a training step
    "compute": "#4c72b0", "bubble": "#c7c7c7", "tp": "#8172b2", "cp": "#64b5cd",
    "ep": "#dd8452", "pp": "#55a868", "dp": "#c44e52", "optimizer": "#7f7f7f",
    # runs
    "fault-free": "#2ca02c", "degraded": "#d62728", "measured": "#000000",
}

#: Names used in reports, mapped to the palette's canonical names.
ALIASES: dict[str, str] = {
    "infiniband ndr": "ib-ndr", "infiniband xdr": "ib-xdr", "infiniband hdr": "ib-hdr",
    "rocev2 400g": "roce-400g", "rocev2 800g": "roce-800g", "aws efa": "efa",
    "collnetdirect": "collnet", "collnetchain": "collnet", "baseline": "fault-free",
    "with faults": "degraded",
}


def canonical(name: str) -> str:
    """The palette key of ``name`` (case and spacing ignored; ``ring/simple`` → ring)."""
    key = re.sub(r"\s+", " ", name.strip().lower())
    key = ALIASES.get(key, key)
    if key not in PALETTE and "/" in key:
        key = key.split("/", 1)[0]
    return ALIASES.get(key, key)


def color(name: str) -> str:
    """The colour of ``name`` in every figure (a stable fallback for unknown names)."""
    key = canonical(name)
    if key in PALETTE:
        return PALETTE[key]
    return COLORS[zlib.crc32(key.encode("utf-8")) % len(COLORS)]


def new_figure(width: float = 7.0, height: float = 4.2) -> tuple[Any, Any]:
    """A figure and axes with fabricsim's defaults."""
    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def format_size(x: float, _pos: object = None) -> str:
    """Tick label of a size in bytes: ``1K``, ``64M``, ``2G`` (binary prefixes).

    >>> format_size(1024), format_size(2**26), format_size(8), format_size(3 * 2**30)
    ('1K', '64M', '8', '3G')
    """
    for unit, k in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if x >= 2**k:
            v = x / 2**k
            return f"{v:.0f}{unit}" if abs(v - round(v)) < 1e-9 else f"{v:.3g}{unit}"
    return f"{x:.0f}"


def size_axis(ax: Any, axis: str = "x", label: str = "message size (bytes)") -> None:
    """A log₂ size axis with ticks every factor of 4 or more, labelled ``1K``/``1M``."""
    ticker = require("matplotlib.ticker", "plot", "plotting")
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    set_scale("log", base=2)
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(ticker.LogLocator(base=2, numticks=10))
    target.set_major_formatter(ticker.FuncFormatter(format_size))
    target.set_minor_locator(ticker.NullLocator())
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label)


def log_axis(ax: Any, axis: str = "y") -> None:
    """A log₁₀ axis labelled at 1, 2 and 5 times the powers of ten (``200``, ``500``,
    ``1,000``) and nowhere else, so that labels never pile up."""
    ticker = require("matplotlib.ticker", "plot", "plotting")
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
    target.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:,.10g}"))
    target.set_minor_formatter(ticker.NullFormatter())


def label_bars(ax: Any, bars: Any, fmt: str = "{:,.3g}", *, inside: bool = False,
               fontsize: float = 7.5) -> None:
    """Write each bar's value on it (above it, or centred inside when ``inside``)."""
    for b in bars:
        h = b.get_height()
        if not h or h != h:
            continue
        x = b.get_x() + b.get_width() / 2
        if inside:
            ax.text(x, b.get_y() + h / 2, fmt.format(h), ha="center", va="center",
                    fontsize=fontsize, color="white")
        else:
            ax.annotate(fmt.format(h), (x, b.get_y() + h), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom",
                        fontsize=fontsize)


def thin_ticks(ax: Any, axis: str = "x", n: int = 6) -> None:
    """At most ``n`` major ticks on ``axis`` so that labels never overlap."""
    ticker = require("matplotlib.ticker", "plot", "plotting")
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(ticker.MaxNLocator(nbins=n, min_n_ticks=2))


def legend_below(ax: Any, n: int, ncol: int = 4) -> None:
    """A legend under the axes (keeps the data visible when there are many entries)."""
    if n:
        ax.legend(fontsize=7.5, ncol=min(ncol, n), loc="upper center",
                  bbox_to_anchor=(0.5, -0.18), frameon=False)


def save(fig: Any, path: str | Path) -> Path:
    """Save and close ``fig``; creates the parent folder."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, bbox_inches="tight")
    plt.close(fig)
    return p


def colors_for(names: Sequence[str]) -> list[str]:
    """:func:`color` of each name; repeated colours among ``names`` fall back to distinct
    fallback colours so that no two series in one figure look alike."""
    out: list[str] = []
    for name in names:
        c = color(name)
        if c in out:
            c = next((x for x in COLORS if x not in out), c)
        out.append(c)
    return out
