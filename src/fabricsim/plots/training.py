"""Where a training step's time goes, per design: stacked bars with the values written,
and exposed communication split by where it runs.

Tensor-parallel traffic normally stays on NVLink (inside the NVLink domain); pipeline,
data-parallel and expert traffic cross the scale-out network. Because TP usually dwarfs
the rest, the right panel shows the exposed communication of each design as two bars,
NVLink and scale-out, so that fabrics can be compared on the part they change.

Example
-------
>>> import tempfile, os
>>> parts = {"ib-ndr": {"compute": 10.0, "bubble": 1.0, "tp": 2.0, "dp": 0.5},
...          "roce-400g": {"compute": 10.0, "bubble": 1.0, "tp": 2.0, "dp": 0.7}}
>>> plot_step_breakdown(parts, os.path.join(tempfile.mkdtemp(), "t.png")).exists()
True
>>> comm_by_network(parts["ib-ndr"])
{'NVLink': 2.0, 'scale-out': 0.5}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import numpy as np

from fabricsim.plots.style import color, plt, save, thin_ticks

__all__ = ["NVLINK_KINDS", "PART_LABELS", "comm_by_network", "plot_step_breakdown"]

#: Breakdown keys, in drawing order, with their legend labels.
PART_LABELS = {"compute": "compute", "bubble": "pipeline bubble",
               "tp": "TP comm", "cp": "CP comm", "ep": "EP all-to-all",
               "pp": "PP comm", "dp": "DP comm", "optimizer": "optimizer"}

#: Communication kinds that run on NVLink by default (the rest cross the scale-out
#: network).
NVLINK_KINDS = frozenset({"tp"})

_COMM = ("tp", "cp", "ep", "pp", "dp")


def comm_by_network(parts: Mapping[str, float],
                    nvlink: Collection[str] = NVLINK_KINDS) -> dict[str, float]:
    """Exposed communication (s) of one step on NVLink and on the scale-out network."""
    on = sum(float(parts.get(k, 0.0)) for k in _COMM if k in nvlink)
    off = sum(float(parts.get(k, 0.0)) for k in _COMM if k not in nvlink)
    return {"NVLink": on, "scale-out": off}


def plot_step_breakdown(parts: Mapping[str, Mapping[str, float]], path: str | Path, *,
                        title: str = "Where a training step's time goes",
                        nvlink: Collection[str] = NVLINK_KINDS) -> Path:
    """Left: one horizontal stacked bar per design (``parts[design][key]`` in seconds,
    keys of :data:`PART_LABELS`), each segment of at least 4 % of its bar labelled.
    Right: exposed communication per design on NVLink and, on its own scale, on the
    scale-out network (``nvlink``: the kinds that run on NVLink), in ms, values on the
    bars."""
    designs = list(parts)
    n = len(designs)
    fig, (ax, nx, sx) = plt.subplots(1, 3, figsize=(12.5, 2.4 + 0.75 * n), dpi=110,
                                     gridspec_kw={"width_ratios": [1.8, 0.8, 0.8]})
    left = [0.0] * n
    totals = [sum(float(x) for x in parts[d].values()) or 1.0 for d in designs]
    for key, label in PART_LABELS.items():
        vals = [float(parts[d].get(key, 0.0)) for d in designs]
        if not any(v > 0 for v in vals):
            continue
        where = "" if key not in _COMM else (" (NVLink)" if key in nvlink else " (scale-out)")
        ax.barh(designs, vals, left=left, label=label + where, color=color(key),
                edgecolor="white", linewidth=0.5)
        for i, v in enumerate(vals):
            if v / totals[i] >= 0.04:
                ax.text(left[i] + v / 2, i, f"{v:.2f}", ha="center", va="center",
                        fontsize=7, color="black" if key == "bubble" else "white")
        left = [a + b for a, b in zip(left, vals, strict=True)]
    for i, tot in enumerate(left):
        ax.text(tot, i, f" {tot:.2f} s", va="center", fontsize=7.5)
    ax.set_xlim(0, max(left or [1.0]) * 1.15)
    ax.set_xlabel("seconds per step")
    ax.set_title("step time by part", fontsize=9)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.3 / max(n, 1)
                                                                         - 0.2),
              frameon=False)
    ax.invert_yaxis()
    ax.grid(True, axis="x", alpha=0.3)
    split = [comm_by_network(parts[d], nvlink) for d in designs]
    y = np.arange(n)
    for bx, net, shade in ((nx, "NVLink", "#8172b2"), (sx, "scale-out", "#c44e52")):
        vals = [sp[net] * 1e3 for sp in split]
        bars = bx.barh(y, vals, 0.6, color=shade)
        top = max(max(vals, default=0.0), 1e-9)
        for b, v in zip(bars, vals, strict=True):
            bx.text(b.get_width() + top * 0.02, b.get_y() + 0.3, f"{v:,.1f}", va="center",
                    fontsize=7.5)
        bx.set_yticks(y, designs if bx is nx else [""] * n)
        bx.invert_yaxis()
        bx.set_xlim(0, top * 1.35)
        bx.set_xlabel("ms per step")
        bx.set_title(f"exposed comm on {net}", fontsize=9, color=shade)
        bx.grid(True, axis="x", alpha=0.3)
        thin_ticks(bx, n=4)
    fig.suptitle(title, fontsize=10.5)
    return save(fig, path)
