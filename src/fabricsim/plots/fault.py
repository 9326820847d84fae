"""What a fault costs: fault-free against degraded progress, and where the time went.

:func:`plot_flow_fault` takes the flow backend's fault-free and degraded Results (both
with ``record_timeline=True`` for the progress panel): on the left the share of all link
traffic still to carry over time (log scale, so that a slow tail shows), on the right
the completion times — fault-free, with every fault and background source, and each
cause alone — with the values and slowdowns on the bars.

Example
-------
>>> import numpy as np, tempfile, pathlib
>>> from fabricsim.backends.flow import FlowBackend, host_fat_tree
>>> from fabricsim.schedule import Schedule, Step
>>> fab = host_fat_tree(4)
>>> s = Schedule(steps=(Step(src=fab.gpus, dst=np.roll(fab.gpus, -1),
...                          nbytes=np.full(4, 1e6), repeat=4),))
>>> ok = FlowBackend(record_timeline=True).run(s, fab)
>>> p = pathlib.Path(tempfile.mkdtemp()) / "f.png"
>>> plot_flow_fault(ok, ok, p, causes=[{"description": "nothing", "slowdown_alone": 1.0}]
...                 ).exists()
True
>>> t, frac = progress(ok)
>>> float(frac[0]), float(frac[-1])
(0.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fabricsim.plots.style import color, plt, save

__all__ = ["plot_flow_fault", "progress"]


def progress(result: Any) -> tuple[np.ndarray, np.ndarray]:
    """(time in s, share 0..1 of all link traffic carried by then) of a flow Result
    recorded with a timeline; an empty pair without one."""
    tl = result.extra.get("timeline")
    if tl is None or tl.t.size == 0:
        return np.zeros(0), np.zeros(0)
    total = tl.bytes.sum(axis=1)
    end = float(total[-1]) or 1.0
    return np.asarray(tl.t, dtype=np.float64), np.asarray(total / end, dtype=np.float64)


def _short(text: str, n: int = 38) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def plot_flow_fault(base: Any, hit: Any, path: str | Path, *,
                    causes: Sequence[Mapping[str, Any]] = (), title: str = "") -> Path:
    """Fault-free vs degraded progress (left) and completion times (right)."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.0, 4.0), dpi=110,
                                 gridspec_kw={"width_ratios": [1.1, 1.0]})
    finite = np.isfinite(hit.time)
    for res, label in ((base, "fault-free"), (hit, "degraded")):
        t, frac = progress(res)
        if t.size:
            left = np.clip(1.0 - frac, 1e-5, 1.0) * 100
            a1.plot(t * 1e3, left, color=color(label), lw=1.8, label=label)
    a1.set_yscale("log")
    a1.set_ylim(1e-3, 150)
    a1.yaxis.set_major_formatter(lambda v, _p: f"{v:g} %")
    a1.set_xlabel("time (ms)")
    a1.set_ylabel("link traffic still to carry (log)")
    a1.set_title("progress: what is left to send (a fault shows as a tail)", fontsize=9)
    a1.grid(True, alpha=0.3)
    a1.legend(loc="upper right", fontsize=8)
    names = ["fault-free", "degraded"]
    vals = [base.time * 1e3, hit.time * 1e3 if finite else 0.0]
    cols = [color("fault-free"), color("degraded")]
    if len(causes) > 1:
        for c in causes:
            sl = c.get("slowdown_alone")
            names.append("alone: " + _short(str(c.get("description", ""))))
            vals.append(base.time * sl * 1e3 if sl is not None else 0.0)
            cols.append("#f4a582")
    y = np.arange(len(names))
    bars = a2.barh(y, vals, color=cols)
    top = max(vals) or 1.0
    for b, v in zip(bars, vals, strict=True):
        text = (f"{v:,.3g} ms (×{v / (base.time * 1e3):.2f})" if v > 0 else "stalled")
        a2.text(b.get_width() + top * 0.01, b.get_y() + b.get_height() / 2, text,
                va="center", fontsize=7.5)
    a2.set_yticks(y, names, fontsize=8)
    a2.invert_yaxis()
    a2.set_xlim(0, top * 1.35)
    a2.set_xlabel("completion time (ms)")
    a2.set_title("where the time went", fontsize=9)
    a2.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title or "fault impact", fontsize=10.5)
    return save(fig, path)
