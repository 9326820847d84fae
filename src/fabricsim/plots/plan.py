"""Fabric comparison chart: throughput, capex per GPU and cost per 1T trained tokens.

Example
-------
>>> import tempfile, os
>>> rows = [{"fabric": "ib-ndr", "tokens_per_s_per_gpu": 900.0, "capex_per_gpu_usd": 9400.0,
...          "usd_per_1t_tokens": 8.0e5, "fabric_share": 0.1},
...         {"fabric": "roce-400g", "tokens_per_s_per_gpu": 880.0,
...          "capex_per_gpu_usd": 6700.0, "usd_per_1t_tokens": 7.9e5, "fabric_share": 0.07}]
>>> plot_plan(rows, os.path.join(tempfile.mkdtemp(), "p.png")).exists()
True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabricsim.plots.style import colors_for, label_bars, plt, save


def plot_plan(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Three bar panels per fabric: tokens/s per GPU, fabric capex per GPU (USD), and
    cost per 1T tokens (USD, the fabric's amortised share hatched).

    ``rows`` hold ``fabric``, ``tokens_per_s_per_gpu``, ``capex_per_gpu_usd``,
    ``usd_per_1t_tokens`` and ``fabric_share``.
    """
    names = [r["fabric"] for r in rows]
    x = list(range(len(rows)))
    colors = colors_for(names)
    fig, axes = plt.subplots(1, 3, figsize=(11.0, 3.8), dpi=110)
    from matplotlib.ticker import FuncFormatter

    panels = (("tokens_per_s_per_gpu", "tokens/s per GPU", "{:,.0f}", "tokens/s"),
              ("capex_per_gpu_usd", "fabric capex per GPU", "${:,.0f}", "USD"),
              ("usd_per_1t_tokens", "cost per 1T trained tokens", "${:,.0f}", "USD"))
    for ax, (key, label, fmt, unit) in zip(axes, panels, strict=True):
        vals = [float(r[key]) for r in rows]
        label_bars(ax, ax.bar(x, vals, color=colors), fmt)
        ax.set_ylim(0, max(vals, default=1.0) * 1.25)
        ax.set_ylabel(unit, fontsize=8)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        if key == "usd_per_1t_tokens":
            fab = [v * float(r["fabric_share"]) for v, r in zip(vals, rows, strict=True)]
            ax.bar(x, fab, color="none", edgecolor="black", hatch="//",
                   label="fabric (amortised)")
            ax.legend(loc="upper right", fontsize=8)
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=20)
        ax.set_xlabel("fabric")
        ax.set_title(label, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(title or "fabrics compared: speed, capex and cost per token", fontsize=11)
    return save(fig, path)
