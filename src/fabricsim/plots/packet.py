"""Figures of packet-backend runs: FCT CDF, throughput, queues and pauses, pause map.

Each function takes one or more :class:`~fabricsim.scenario.packet.PacketRun`
(labelled by their variant) and writes a PNG.

Example
-------
>>> import tempfile, pathlib
>>> from fabricsim.scenario import Scenario
>>> from fabricsim.scenario.packet import run_packet_scenario
>>> sc = Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 4,
...     "gpus_per_node": 1, "fabric": "roce-400g"}, "packet": {"traffic": {
...     "pattern": "incast", "nbytes": "1MB"}}})
>>> run = run_packet_scenario(sc)
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> sorted(p.name for p in write_all([run], d))
['fct_cdf.png', 'pause_map.png', 'queues.png', 'throughput.png']
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fabricsim.plots.style import COLORS, new_figure, save


def _label(run: Any) -> str:
    return str(run.summary.get("variant", "base"))


def fct_cdf(runs: Sequence[Any], path: str | Path) -> Path:
    """CDF of flow completion times, one curve per run."""
    fig, ax = new_figure()
    for i, run in enumerate(runs):
        f = run.result.extra["fct"]
        d = np.sort(f["end"] - f["start"]) * 1e6
        if d.size:
            ax.step(d, np.arange(1, d.size + 1) / d.size, where="post",
                    color=COLORS[i % len(COLORS)], label=_label(run))
    ax.set_xscale("log")
    ax.set_xlabel("flow completion time (µs)")
    ax.set_ylabel("fraction of flows")
    ax.legend()
    return save(fig, path)


def throughput(runs: Sequence[Any], path: str | Path) -> Path:
    """Delivered goodput over time (all flows), one curve per run."""
    fig, ax = new_figure()
    for i, run in enumerate(runs):
        ts = run.result.extra["ts"]
        ax.plot(ts["t"] * 1e6, ts["delivered_Bps"] * 8 / 1e9, color=COLORS[i % len(COLORS)],
                label=_label(run), drawstyle="steps-post")
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("goodput (Gb/s)")
    ax.legend()
    return save(fig, path)


def queues(runs: Sequence[Any], path: str | Path) -> Path:
    """Deepest watched queue and number of paused port queues over time."""
    fig, ax = new_figure()
    ax2 = ax.twinx()
    for i, run in enumerate(runs):
        ts = run.result.extra["ts"]
        c = COLORS[i % len(COLORS)]
        q = ts["queue"].max(axis=1) if ts["queue"].size else np.zeros_like(ts["t"])
        ax.plot(ts["t"] * 1e6, q / 1e3, color=c, label=f"{_label(run)}: max queue")
        ax2.plot(ts["t"] * 1e6, ts["paused_ports"], color=c, linestyle=":",
                 label=f"{_label(run)}: paused queues")
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("queue depth (KB)")
    ax2.set_ylabel("paused port queues (dotted)")
    ax.legend(loc="upper right", fontsize=8)
    return save(fig, path)


def pause_map(runs: Sequence[Any], path: str | Path) -> Path:
    """Pause propagation: every switch/NIC port by hop distance from the origin, coloured
    by when it was first paused, sized by how long it stayed paused (one panel per run)."""
    from fabricsim.plots.style import plt
    from fabricsim.scenario.packet import hops_from

    n = len(runs)
    fig, axes = plt.subplots(1, max(n, 1), figsize=(4.2 * max(n, 1), 4.0), dpi=110,
                             squeeze=False)
    for i, run in enumerate(runs):
        ax = axes[0, i]
        e, fab = run.result.extra, run.fabric
        first, ptime = e["pause_first"], e["pause_time"]
        paused = np.flatnonzero(np.isfinite(first))
        ax.set_title(_label(run), fontsize=9)
        ax.set_xlabel("hops from origin")
        ax.set_ylabel("first paused (µs)")
        if paused.size == 0:
            ax.text(0.5, 0.5, "no pauses", ha="center", transform=ax.transAxes)
            continue
        origin = e["stuck_node"] if e["stuck_node"] >= 0 else int(
            fab.link_dst[paused[np.argmin(first[paused])]])
        hops = hops_from(fab, origin)[fab.link_src[paused]]
        size = 20 + 300 * ptime[paused] / max(float(ptime[paused].max()), 1e-12)
        sc = ax.scatter(hops, first[paused] * 1e6, s=size, c=ptime[paused] * 1e6,
                        cmap="inferno_r", alpha=0.8)
        fig.colorbar(sc, ax=ax, label="paused (µs)")
    return save(fig, path)


def write_all(runs: Sequence[Any], out: str | Path) -> list[Path]:
    """All four figures into folder ``out``."""
    d = Path(out)
    return [fct_cdf(runs, d / "fct_cdf.png"), throughput(runs, d / "throughput.png"),
            queues(runs, d / "queues.png"), pause_map(runs, d / "pause_map.png")]
