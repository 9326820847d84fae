"""Figures of packet-backend runs: FCT CDF, throughput, queues and pauses, pause map.

Each function takes one or more :class:`~fabricsim.jobs.packet.PacketRun`
(labelled by their variant) and writes a PNG. Figures with a panel per run put every
panel on one colour scale and one time axis, so runs compare at a glance; every variant
has the same colour in every figure.

Example
-------
>>> import tempfile, pathlib
>>> from fabricsim.scenario import Scenario
>>> from fabricsim.jobs.packet import run_packet_scenario
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

from fabricsim.plots.style import colors_for, log_axis, new_figure, plt, save, thin_ticks

__all__ = ["fct_cdf", "pause_map", "queues", "throughput", "write_all"]


def _label(run: Any) -> str:
    return str(run.summary.get("variant", "base"))


def _colors(runs: Sequence[Any]) -> list[str]:
    return colors_for([_label(r) for r in runs])


def _title(what: str, name: str) -> str:
    return f"{name}: {what}" if name else what


def fct_cdf(runs: Sequence[Any], path: str | Path, *, title: str = "") -> Path:
    """CDF of flow completion times, one curve per run."""
    fig, ax = new_figure()
    for run, c in zip(runs, _colors(runs), strict=True):
        f = run.result.extra["fct"]
        d = np.sort(f["end"] - f["start"]) * 1e6
        if d.size:
            ax.step(d, np.arange(1, d.size + 1) / d.size, where="post", color=c,
                    label=_label(run), lw=1.6)
    log_axis(ax, "x")
    ax.set_xlabel("flow completion time (µs, log)")
    ax.set_ylabel("fraction of flows completed")
    ax.set_ylim(0, 1.02)
    ax.set_title(_title("flow completion times", title), fontsize=10)
    if ax.get_lines():
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no flow completed", ha="center", transform=ax.transAxes)
    return save(fig, path)


def throughput(runs: Sequence[Any], path: str | Path, *, title: str = "") -> Path:
    """Delivered goodput over time (all flows), one curve per run."""
    fig, ax = new_figure()
    for run, c in zip(runs, _colors(runs), strict=True):
        ts = run.result.extra["ts"]
        ax.plot(ts["t"] * 1e3, ts["delivered_Bps"] * 8 / 1e9, color=c, lw=1.4,
                label=_label(run), drawstyle="steps-post")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("goodput delivered (Gb/s)")
    ax.set_ylim(bottom=0)
    thin_ticks(ax)
    ax.set_title(_title("rate over time (all flows)", title), fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return save(fig, path)


#: Panels per row of the per-run figures (more runs wrap onto further rows).
PANELS_PER_ROW = 3


def _grid(n: int) -> tuple[int, int]:
    """(rows, columns) of ``n`` panels, at most :data:`PANELS_PER_ROW` a row."""
    cols = min(max(n, 1), PANELS_PER_ROW)
    return -(-max(n, 1) // cols), cols


def _save(fig: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out


def queues(runs: Sequence[Any], path: str | Path, *, title: str = "") -> Path:
    """Per run (a panel each, three a row, one colour scale, one time axis): queue depth
    of every watched link over time and, when any run paused, the number of paused port
    queues under it."""
    rows, cols = _grid(len(runs))
    ymax = max((float(np.max(r.result.extra["ts"]["paused_ports"], initial=0.0))
                for r in runs), default=0.0)
    pauses = ymax > 0
    ratios = [3.0, 1.1] * rows if pauses else [3.0] * rows
    fig, axes = plt.subplots(len(ratios), cols, figsize=(5.0 * cols + 1.0,
                                                         sum(ratios) * 1.45 + 0.6),
                             dpi=110, squeeze=False, sharex=True,
                             gridspec_kw={"height_ratios": ratios, "wspace": 0.75,
                                          "hspace": 0.35})
    vmax = max((float(np.max(r.result.extra["ts"]["queue"], initial=0.0)) for r in runs),
               default=0.0) / 1e3 or 1.0
    t_end = max((float(r.result.extra["ts"]["t"][-1] + r.result.extra["ts"]["dt"])
                 for r in runs if r.result.extra["ts"]["t"].size), default=1e-6) * 1e3
    img = None
    per = 2 if pauses else 1
    used: list[Any] = []
    for i, (run, c) in enumerate(zip(runs, _colors(runs), strict=True)):
        ts, fab = run.result.extra["ts"], run.fabric
        r, k = divmod(i, cols)
        top = axes[per * r, k]
        used.append(top)
        q = np.asarray(ts["queue"], dtype=np.float64).T / 1e3
        names = [fab.link_name(int(l)) for l in ts["watched"]] or ["(none)"]
        end = float(ts["t"][-1] + ts["dt"]) * 1e3 if ts["t"].size else t_end
        img = top.imshow(q if q.size else np.zeros((1, 1)), aspect="auto",
                         interpolation="nearest", cmap="magma", vmin=0.0, vmax=vmax,
                         extent=(0.0, end, len(names) - 0.5, -0.5))
        top.set_yticks(range(len(names)))
        top.set_yticklabels(names, fontsize=5.5)
        top.set_facecolor("#e8e8e8")
        top.set_xlim(0, t_end)
        top.set_title(f"{_label(run)}: deepest {float(np.max(q, initial=0.0)):,.0f} KB",
                      fontsize=9)
        if k == 0:
            top.set_ylabel("watched link (queue at its sender)", fontsize=8)
        last = top
        if pauses:
            bot = axes[per * r + 1, k]
            used.append(bot)
            bot.plot(ts["t"] * 1e3, ts["paused_ports"], drawstyle="steps-post", color=c)
            bot.fill_between(ts["t"] * 1e3, ts["paused_ports"], step="post", color=c,
                             alpha=0.25)
            bot.set_ylim(0, ymax * 1.1)
            bot.grid(True, alpha=0.3)
            if k == 0:
                bot.set_ylabel("paused port\nqueues", fontsize=8)
            last = bot
        last.set_xlabel("time (ms)")
        last.tick_params(labelbottom=True)
        thin_ticks(last, n=5)
    for ax in axes.flat:
        if not any(ax is u for u in used):
            ax.set_visible(False)
    if img is not None:
        fig.colorbar(img, ax=used, label="queue depth (KB), one scale", fraction=0.03,
                     pad=0.02)
    what = "queue depth and PFC pauses over time" if pauses else \
        "queue depth over time (no PFC pauses in any run)"
    fig.suptitle(_title(what, title), fontsize=10.5)
    return _save(fig, path)


def pause_map(runs: Sequence[Any], path: str | Path, *, title: str = "") -> Path:
    """Pause propagation: every switch/NIC port by hop distance from the origin, coloured
    by how long it stayed paused (one colour scale for all panels), a panel per run that
    paused (three a row); one line of text when no run paused at all."""
    from fabricsim.jobs.packet import hops_from

    paused_runs = [r for r in runs if np.isfinite(r.result.extra["pause_first"]).any()]
    if not paused_runs:
        fig, ax = plt.subplots(figsize=(6.0, 1.4), dpi=110)
        ax.set_axis_off()
        names = ", ".join(_label(r) for r in runs) or "no runs"
        ax.text(0.5, 0.5, f"No PFC pause in any run ({names}).", ha="center",
                va="center", fontsize=9)
        ax.set_title(_title("PFC pause spread", title), fontsize=10.5)
        return _save(fig, path)
    rows, cols = _grid(len(paused_runs))
    fig, axes = plt.subplots(rows, cols, figsize=(3.9 * cols + 1.4, 3.6 * rows + 0.4),
                             dpi=110, squeeze=False, sharex=True, sharey=True)
    vmax = max((float(np.nanmax(r.result.extra["pause_time"], initial=0.0)) for r in runs),
               default=0.0) * 1e6 or 1.0
    sc = None
    top_hop = 1
    for i, run in enumerate(paused_runs):
        ax = axes[divmod(i, cols)]
        e, fab = run.result.extra, run.fabric
        first, ptime = e["pause_first"], e["pause_time"]
        paused = np.flatnonzero(np.isfinite(first))
        ax.set_xlabel("hops from the origin")
        ax.tick_params(labelbottom=True)
        ax.grid(True, alpha=0.3)
        if i % cols == 0:
            ax.set_ylabel("first paused (µs)")
        origin = e["stuck_node"] if e["stuck_node"] >= 0 else int(
            fab.link_dst[paused[np.argmin(first[paused])]])
        hops = hops_from(fab, origin)[fab.link_src[paused]]
        top_hop = max(top_hop, int(hops.max(initial=0)))
        pt = ptime[paused] * 1e6
        sc = ax.scatter(hops, first[paused] * 1e6, s=25 + 250 * pt / vmax, c=pt,
                        cmap="inferno_r", vmin=0.0, vmax=vmax, alpha=0.85,
                        edgecolors="black", linewidths=0.4)
        ax.set_title(f"{_label(run)}: {paused.size} ports, {int(hops.max(initial=0))} hops",
                     fontsize=9)
    for ax in axes.flat[len(paused_runs):]:
        ax.set_visible(False)
    for ax in axes.flat[:len(paused_runs)]:
        ax.set_xticks(range(0, top_hop + 1))
        ax.set_xlim(-0.5, top_hop + 0.5)
        thin_ticks(ax, "y", n=6)
    if sc is not None:
        fig.colorbar(sc, ax=list(axes.flat[:len(paused_runs)]),
                     label="time paused (µs), one scale", fraction=0.03, pad=0.02)
    quiet = [_label(r) for r in runs if not any(r is p for p in paused_runs)]
    fig.suptitle(_title("PFC pause spread (size and colour: time paused)", title)
                 + (f"; no pauses in {', '.join(quiet)}" if quiet else ""), fontsize=10.5)
    return _save(fig, path)


def write_all(runs: Sequence[Any], out: str | Path, *, prefix: str = "", title: str = ""
              ) -> list[Path]:
    """All four figures into folder ``out`` (file names ``<prefix>pause_map.png`` ...;
    ``title``, e.g. the scenario's name, leads every figure title)."""
    d = Path(out)
    return [pause_map(runs, d / f"{prefix}pause_map.png", title=title),
            queues(runs, d / f"{prefix}queues.png", title=title),
            throughput(runs, d / f"{prefix}throughput.png", title=title),
            fct_cdf(runs, d / f"{prefix}fct_cdf.png", title=title)]
