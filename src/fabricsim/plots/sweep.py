"""Plots of a sweep's results: the Pareto front of two figures, a heatmap over two axes,
and scaling curves (a figure against GPUs or any axis, a line per value of another).

Example
-------
>>> import pandas as pd, tempfile, pathlib
>>> df = pd.DataFrame({"cost": [3.0, 2.0, 1.0, 2.5], "speed": [9.0, 8.0, 2.0, 5.0],
...                    "label": ["a", "b", "c", "d"]})
>>> front = pareto_front(df, "cost", "speed", minimise_x=True)
>>> list(front["label"])
['c', 'b', 'a']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricsim.errors import ConfigError
from fabricsim.plots.style import COLORS, new_figure, plt, save

__all__ = ["pareto_front", "plot_heatmap", "plot_pareto", "plot_scaling_curves"]


def _need(df: Any, *cols: str) -> None:
    bad = [c for c in cols if c not in df.columns]
    if bad:
        raise ConfigError(f"unknown column(s) {', '.join(bad)}; the results have "
                          f"{', '.join(map(str, df.columns))}",
                          field="--pareto/--heatmap/--scaling")


def pareto_front(df: Any, x: str, y: str, *, minimise_x: bool = True) -> Any:
    """Rows no other row beats on both ``x`` (lower is better when ``minimise_x``) and
    ``y`` (higher is better), sorted by ``x``."""
    _need(df, x, y)
    d = df.dropna(subset=[x, y]).sort_values([x, y], ascending=[minimise_x, False])
    keep, best = [], -float("inf")
    for idx, val in zip(d.index, d[y], strict=True):
        if val > best:
            keep.append(idx)
            best = val
    return d.loc[keep]


def plot_pareto(df: Any, x: str, y: str, path: str | Path, *, label: str | None = None,
                minimise_x: bool = True, title: str = "") -> Path:
    """Every point of ``df`` as ``x`` against ``y``, the Pareto front drawn over them."""
    front = pareto_front(df, x, y, minimise_x=minimise_x)
    fig, ax = new_figure()
    ax.scatter(df[x], df[y], s=14, color=COLORS[0], alpha=0.5, label="points")
    ax.plot(front[x], front[y], "-o", color=COLORS[1], ms=5, label="Pareto front")
    if label is not None and label in df.columns:
        for _, r in front.iterrows():
            ax.annotate(str(r[label]), (r[x], r[y]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"Pareto front: {len(front)} of {len(df)} points", fontsize=10)
    ax.legend()
    return save(fig, path)


def plot_heatmap(df: Any, x: str, y: str, value: str, path: str | Path, *,
                 title: str = "") -> Path:
    """``value`` over the grid of axes ``x`` and ``y`` (mean where several rows share a
    cell), with the value written in each cell."""
    _need(df, x, y, value)
    table = df.pivot_table(index=y, columns=x, values=value, aggfunc="mean")
    fig, ax = new_figure(width=1.2 + 0.9 * max(len(table.columns), 3),
                         height=1.2 + 0.6 * max(len(table.index), 3))
    im = ax.imshow(table.values, aspect="auto", cmap="viridis", origin="lower")
    ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns])
    ax.set_yticks(range(len(table.index)), [str(c) for c in table.index])
    ax.grid(False)
    for i in range(len(table.index)):
        for j in range(len(table.columns)):
            v = table.values[i, j]
            if v == v:
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=8,
                        color="white")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or value, fontsize=10)
    plt.colorbar(im, ax=ax, label=value)
    return save(fig, path)


def plot_scaling_curves(df: Any, x: str, y: str, path: str | Path, *,
                        series: str | None = None, title: str = "") -> Path:
    """``y`` against ``x`` (log scale when ``x`` spans 4× or more), the mean where several
    rows share a point, one line per value of ``series`` (e.g. the fabric), so that a
    sweep over cluster sizes reads as scaling curves.

    >>> import pandas as pd, tempfile, pathlib
    >>> df = pd.DataFrame({"gpus": [64, 128, 64, 128], "mfu": [0.5, 0.45, 0.48, 0.4],
    ...                    "fabric": ["ib", "ib", "roce", "roce"]})
    >>> p = plot_scaling_curves(df, "gpus", "mfu", pathlib.Path(tempfile.mkdtemp()) / "s.png",
    ...                         series="fabric")
    >>> p.name
    's.png'
    """
    _need(df, x, y, *([series] if series else []))
    d = df.dropna(subset=[x, y])
    groups = [(None, d)] if series is None else list(d.groupby(series, sort=True))
    fig, ax = new_figure()
    for i, (name, g) in enumerate(groups):
        m = g.groupby(x, sort=True)[y].mean()
        ax.plot(m.index, m.values, "-o", ms=4, color=COLORS[i % len(COLORS)],
                label=str(name) if series else y)
    lo, hi = d[x].min(), d[x].max()
    if lo > 0 and hi / lo >= 4:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(d[x].unique()), [f"{v:,.0f}" for v in sorted(d[x].unique())])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"{y} against {x}" + (f", by {series}" if series else ""),
                 fontsize=10)
    if series:
        ax.legend(title=series, fontsize=8)
    return save(fig, path)
