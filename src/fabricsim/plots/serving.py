"""Serving trade-off: output tokens per second per GPU against time per output token.

Continuous batching trades latency for throughput: a larger batch reads the weights once
for more sequences (more tokens per GPU) but each iteration takes longer (a slower
stream per user). :func:`plot_serving_frontier` draws that frontier, one point per TPOT
target, with the batch that meets it, and marks other designs (a disaggregated
prefill/decode pair) on the same axes.

Example
-------
>>> import tempfile, os
>>> pts = [{"tpot_s": 0.01, "tokens_per_s_per_gpu": 200.0, "batch": 16},
...        {"tpot_s": 0.03, "tokens_per_s_per_gpu": 330.0, "batch": 80}]
>>> marks = [{"label": "disaggregated", "tpot_s": 0.008, "tokens_per_s_per_gpu": 240.0}]
>>> plot_serving_frontier(pts, os.path.join(tempfile.mkdtemp(), "s.png"),
...                       marks=marks).exists()
True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabricsim.plots.style import COLORS, plt, save


def plot_serving_frontier(points: Sequence[dict[str, Any]], path: str | Path, *,
                          marks: Sequence[dict[str, Any]] = (), title: str = "") -> Path:
    """Tokens/s per GPU (y) against time per output token in ms (x).

    ``points`` (the continuous-batching frontier, drawn as a line, each labelled with its
    batch) and ``marks`` (single designs, drawn as labelled markers) hold ``tpot_s`` and
    ``tokens_per_s_per_gpu``; points also ``batch``, marks ``label``.
    """
    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    pts = sorted(points, key=lambda p: float(p["tpot_s"]))
    x = [1e3 * float(p["tpot_s"]) for p in pts]
    y = [float(p["tokens_per_s_per_gpu"]) for p in pts]
    ax.plot(x, y, "o-", color=COLORS[0], label="continuous batching, one instance")
    for xi, yi, p in zip(x, y, pts, strict=True):
        ax.annotate(f"batch {int(p['batch'])}", (xi, yi), xytext=(0, 6),
                    textcoords="offset points", ha="center", fontsize=7)
    for k, m in enumerate(marks):
        ax.plot([1e3 * float(m["tpot_s"])], [float(m["tokens_per_s_per_gpu"])], "D",
                color=COLORS[(k + 1) % len(COLORS)], markersize=7, label=str(m["label"]))
    ax.set_xlabel("time per output token (ms)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_xlim(left=0)
    ax.set_ylim(0, max(y + [float(m["tokens_per_s_per_gpu"]) for m in marks] + [1.0]) * 1.15)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or "serving: throughput against latency", fontsize=10)
    return save(fig, path)
