"""The web page's charts, as Plotly figure specifications (``{"data", "layout"}``).

Built here rather than in the browser so that every chart has a title, labelled axes with
units, log-scaled size axes and the project's colours per fabric, algorithm and part of a
step (:func:`fabricsim.plots.style.color`), and so that tests can check them. The page
hands each one to ``Plotly.react``. With two designs, each series is labelled ``A: …`` or
``B: …`` and B is dashed.

Example
-------
>>> from fabricsim.web.jobs import run_job
>>> out = run_job("describe", ["cluster: {system: dgx-h100, nodes: 2}"])
>>> sorted(out["figures"])
['hierarchy', 'topology']
>>> out["figures"]["hierarchy"]["layout"]["title"]["text"]
'Bandwidth hierarchy per GPU'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fabricsim.plots.style import COLORS, color

__all__ = ["figures"]

Fig = dict[str, Any]

#: Parts of a training step, in stacking order.
STEP_PARTS = ("compute", "bubble", "tp", "cp", "ep", "pp", "dp", "optimizer")
DASH = ("solid", "dash")


def _layout(title: str, x: str, y: str, *, xlog: bool = False, ylog: bool = False,
            **more: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "xaxis": {"title": {"text": x},
                                                **({"type": "log"} if xlog else {})},
            "yaxis": {"title": {"text": y}, **({"type": "log", "dtick": 1} if ylog else {})},
            "legend": {"orientation": "h", "y": -0.3, "yanchor": "top"},
            "margin": {"t": 50, "b": 40},
            **more}


def _tag(designs: Sequence[dict[str, Any]], i: int, label: str) -> str:
    return f"{'AB'[i]}: {label}" if len(designs) > 1 else label


def _wrap(text: str, width: int = 32) -> str:
    """``text`` broken into lines of about ``width`` characters (Plotly's ``<br>``).

    >>> _wrap("server5/nic0->leaf0.0 degraded to 0.25 of capacity")
    'server5/nic0->leaf0.0 degraded<br>to 0.25 of capacity'
    """
    import textwrap

    return "<br>".join(textwrap.wrap(text, width)) or text


def _size_ticks() -> dict[str, Any]:
    vals = [2.0 ** k for k in range(0, 41, 4)]
    text = []
    for v in vals:
        for unit, div in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10), ("B", 1)):
            if v >= div:
                text.append(f"{v / div:g} {unit}")
                break
    return {"tickvals": vals, "ticktext": text}


def hierarchy(designs: Sequence[dict[str, Any]]) -> Fig:
    """Bandwidth per GPU at each level of the hierarchy, one bar series per design."""
    data = []
    for i, d in enumerate(designs):
        s = d["cluster"]["summary"]
        lv = s["hierarchy"]
        data.append({"type": "bar", "name": _tag(designs, i, s["fabric"]),
                     "x": [h["name"] for h in lv], "y": [h["bandwidth_gbps"] for h in lv],
                     "text": [f"{h['bandwidth_gbps']:,.0f}" for h in lv],
                     "textposition": "outside", "marker": {"color": color(s["fabric"])},
                     "marker_pattern_shape": "/" if i else ""})
    return {"data": data, "layout": _layout("Bandwidth hierarchy per GPU", "level",
                                            "GB/s per GPU, one direction", ylog=True,
                                            barmode="group")}


def topology(design: dict[str, Any], tag: str = "") -> Fig:
    """The tiers as rows of boxes (servers at the bottom), uplinks coloured by rail."""
    topo = design["cluster"]["topology"]
    tiers = topo["tiers"]

    def xy(t: int, p: int) -> tuple[float, float]:
        n = len(tiers[t]["drawn"])
        return ((p + 0.5) / max(n, 1), float(t))

    data: list[dict[str, Any]] = []
    by_rail: dict[Any, tuple[list[float | None], list[float | None]]] = {}
    for e in topo["edges"]:
        (x0, y0), (x1, y1) = xy(*e["from"]), xy(*e["to"])
        xs, ys = by_rail.setdefault(e["rail"], ([], []))
        xs += [x0, x1, None]
        ys += [y0, y1, None]
    for rail, (xs, ys) in sorted(by_rail.items(), key=lambda kv: (kv[0] is None, kv[0])):
        name = f"rail {rail}" if rail is not None else "switch links"
        data.append({"type": "scatter", "mode": "lines", "x": xs, "y": ys, "name": name,
                     "hoverinfo": "skip", "line": {"width": 1, "color": "#999999"
                                                   if rail is None else
                                                   COLORS[rail % len(COLORS)]}})
    for t, tier in enumerate(tiers):
        pts = [xy(t, p) for p in range(len(tier["drawn"]))]
        data.append({"type": "scatter", "mode": "markers", "name": tier["name"],
                     "x": [p[0] for p in pts], "y": [p[1] for p in pts],
                     "text": tier["drawn"], "hovertemplate": "%{text}<extra></extra>",
                     "marker": {"symbol": "square", "size": 14 if t else 18,
                                "color": "#444444" if t else "#4c72b0"},
                     "showlegend": False})
    labels = [f"{t['name']} ({t['count']:,}" +
              (f", {len(t['drawn'])} drawn)" if len(t["drawn"]) < t["count"] else ")")
              for t in tiers]
    lay = _layout(f"{tag}Topology: {topo['topology']}, {topo['rails']} rails per server",
                  "", "")
    lay["xaxis"] = {"visible": False, "range": [0, 1]}
    lay["margin"] = {"l": 170, "t": 50, "b": 40}
    lay["yaxis"] = {"tickvals": list(range(len(tiers))), "ticktext": labels,
                    "range": [-0.5, len(tiers) - 0.5]}
    return {"data": data, "layout": lay}


def _band_text(c: dict[str, Any]) -> list[str]:
    """Each size's choice with its held-out band(s) for the hover: ``tree/ll128, ± 17 %
    (tree/LL128 on several servers: ± 35 %)``; the choice alone where no band is known."""
    out = []
    bands = c.get("band") or [0.0] * len(c["choice"])
    groups = c.get("choice_group") or [""] * len(c["choice"])
    cbands = c.get("choice_band") or [0.0] * len(c["choice"])
    for ch, b, g, cb in zip(c["choice"], bands, groups, cbands, strict=True):
        text = f"{ch}, ± {b * 100:.0f} %" if b else ch
        if g:
            where, _, choice = g.split(", ")
            text += f" ({choice} on {where}: ± {cb * 100:.0f} %)"
        out.append(text)
    return out


def busbw(designs: Sequence[dict[str, Any]]) -> tuple[Fig, Fig]:
    """Bus bandwidth and time against size: one line per algorithm (the tuner's choice
    bold, with the algorithm/protocol it picked at each size on hover). The tuner's
    curve carries its held-out band as error bars (``bench``'s ``± band``), and the
    hover names the band of its group and of NCCL's choice."""
    bw: list[dict[str, Any]] = []
    tm: list[dict[str, Any]] = []
    coll = ""
    for i, d in enumerate(designs):
        b = d["bench"]
        coll = b["collective"]
        fab = d["cluster"]["summary"]["fabric"]
        for c in b["curves"]:
            auto = c["name"] == "auto"
            name = _tag(designs, i, f"{fab} {'tuner' if auto else c['name']}")
            common = {"type": "scatter", "mode": "lines+markers" if auto else "lines",
                      "name": name, "x": c["sizes"],
                      "customdata": _band_text(c) if auto else c["choice"],
                      "line": {"color": color(fab) if auto else color(c["name"]),
                               "width": 3 if auto else 1.5, "dash": DASH[i % 2]},
                      "visible": True if auto or len(designs) == 1 else "legendonly"}
            bands = c.get("band") or []
            err = ({"error_y": {"type": "data", "visible": True, "thickness": 1, "width": 3,
                                "array": [y * e for y, e in zip(c["busbw_gbps"], bands,
                                                                 strict=True)]}}
                   if auto and bands and any(bands) else {})
            bw.append({**common, **err, "y": c["busbw_gbps"], "hovertemplate":
                       "%{x:.3s}B: %{y:.1f} GB/s (%{customdata})<extra>" + name +
                       "</extra>"})
            tm.append({**common, "y": c["time_us"], "hovertemplate":
                       "%{x:.3s}B: %{y:.3s} µs (%{customdata})<extra>" + name +
                       "</extra>"})
    n = designs[0]["bench"]["gpus"]
    f1: Fig = {"data": bw, "layout": _layout(f"{coll} bus bandwidth, {n} GPUs",
                                        "message size", "bus bandwidth (GB/s)", xlog=True)}
    f2: Fig = {"data": tm, "layout": _layout(f"{coll} time, {n} GPUs", "message size",
                                        "time (µs)", xlog=True, ylog=True)}
    for f in (f1, f2):
        f["layout"]["xaxis"].update(_size_ticks())
    return f1, f2


def breakdown(designs: Sequence[dict[str, Any]]) -> Fig:
    """Where a training step's time goes, stacked: compute, bubble, and each kind of
    exposed communication, split between NVLink and the scale-out network."""
    names = [_tag(designs, i, d["cluster"]["summary"]["fabric"])
             for i, d in enumerate(designs)]
    data = []
    for part in STEP_PARTS:
        for where in ("nvlink", "scale-out") if part in ("tp", "cp", "ep", "pp", "dp") \
                else ("",):
            ys = []
            for d in designs:
                t = d["train"]
                v = float(t["breakdown"].get(part, 0.0))
                on_nv = part in t["nvlink_kinds"]
                if where and (where == "nvlink") != on_nv:
                    v = 0.0
                ys.append(v)
            if not any(ys):
                continue
            label = f"{part.upper()} on {where}" if where else part
            data.append({"type": "bar", "name": label, "x": names, "y": ys,
                         "marker": {"color": color(part),
                                    "pattern": {"shape": "/" if where == "scale-out"
                                                else ""}},
                         "hovertemplate": "%{y:.3f} s<extra>" + label + "</extra>"})
    model = designs[0]["train"]["model"]
    return {"data": data, "layout": _layout(f"One training step of {model}: where the "
                                            "time goes", "design", "seconds per step",
                                            barmode="stack")}


def _vals(runs: Sequence[dict[str, Any] | None], key: str, scale: float = 1.0
          ) -> list[float | None]:
    """``key`` of each design's run, scaled (None where the design has no such run)."""
    return [float(r[key]) * scale if r else None for r in runs]


def serving(designs: Sequence[dict[str, Any]]) -> tuple[Fig, Fig]:
    """Latency (time to first token and per output token, ms) and throughput (output
    tokens/s per GPU) of each design's serving: the static batch, and continuous batching
    and the disaggregated pair where the design asks for them."""
    names = [_tag(designs, i, d["cluster"]["summary"]["fabric"])
             for i, d in enumerate(designs)]
    modes = (("static batch", None), ("continuous batching", "continuous"),
             ("disaggregated", "disaggregated"))
    lat: list[dict[str, Any]] = []
    thr: list[dict[str, Any]] = []
    for k, (label, key) in enumerate(modes):
        runs: list[dict[str, Any] | None] = [
            d["infer"] if key is None else d["infer"].get(key) for d in designs]
        if not any(runs):
            continue
        for metric, ys, dash in (("TTFT", _vals(runs, "ttft_s", 1e3), ""),
                                 ("TPOT", _vals(runs, "tpot_s", 1e3), "/")):
            lat.append({"type": "bar", "name": f"{metric}, {label}", "x": names, "y": ys,
                        "marker": {"color": COLORS[k], "pattern": {"shape": dash}},
                        "hovertemplate": "%{y:.2f} ms<extra>" + f"{metric}, {label}"
                        + "</extra>"})
        thr.append({"type": "bar", "name": label, "x": names,
                    "y": _vals(runs, "tokens_per_s_per_gpu"), "marker": {"color": COLORS[k]},
                    "hovertemplate": "%{y:,.1f} tokens/s per GPU<extra>" + label
                    + "</extra>"})
    model = " vs ".join(dict.fromkeys(d["infer"]["model"] for d in designs))
    return ({"data": lat, "layout": _layout(f"Serving {model}: latency", "design",
                                            "milliseconds", barmode="group")},
            {"data": thr, "layout": _layout(f"Serving {model}: output tokens/s per GPU",
                                            "design", "tokens/s per GPU",
                                            barmode="group")})


def scaling(designs: Sequence[dict[str, Any]]) -> tuple[Fig, Fig]:
    """Scaling efficiency and the daily cost of exposed communication against GPUs."""
    eff, cost = [], []
    for i, d in enumerate(designs):
        pts = [p for p in d["scale"]["points"] if p.get("feasible")]
        fab = d["cluster"]["summary"]["fabric"]
        name = _tag(designs, i, fab)
        xs = [p["gpus"] for p in pts]
        line = {"color": color(fab), "dash": DASH[i % 2]}
        eff.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": xs,
                    "y": [p["scaling_efficiency"] for p in pts], "line": line,
                    "customdata": [p["main_loss"] for p in pts],
                    "hovertemplate": "%{x} GPUs: %{y:.1%} (main loss %{customdata})"
                    "<extra></extra>"})
        cost.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": xs,
                     "y": [p["comm_usd_per_day"] for p in pts], "line": line})
    model = designs[0]["scale"]["model"]
    f1: Fig = {"data": eff, "layout": _layout(f"Scaling efficiency of {model} (weak scaling)",
                                         "GPUs", "efficiency vs the smallest size",
                                         xlog=True)}
    top = max([1.0, *(y for t in eff for y in t["y"] if y is not None)])
    f1["layout"]["yaxis"].update(tickformat=".0%", range=[0, top * 1.05])
    f2: Fig = {"data": cost, "layout": _layout("GPU time lost to exposed communication",
                                          "GPUs", "US$ per day", xlog=True)}
    ticks = sorted({x for t in eff for x in t["x"]})
    for f in (f1, f2):
        f["layout"]["xaxis"].update(tickvals=ticks, ticktext=[f"{x:,}" for x in ticks])
    return f1, f2


def plan(designs: Sequence[dict[str, Any]]) -> tuple[Fig, Fig]:
    """Step time and cost per million tokens for each fabric compared."""
    t, c = [], []
    for i, d in enumerate(designs):
        opts = d["plan"]["fabrics"]
        xs = [_tag(designs, i, o["fabric"]) for o in opts]
        cols = [color(o["fabric"]) for o in opts]
        t.append({"type": "bar", "name": _tag(designs, i, "step time"), "x": xs,
                  "y": [o["step_time_s"] for o in opts], "marker": {"color": cols},
                  "text": [f"{o['step_time_s']:.2f} s" for o in opts],
                  "textposition": "outside"})
        usd = [o["usd_per_token"] * 1e6 if o.get("usd_per_token") is not None else None
               for o in opts]
        c.append({"type": "bar", "name": _tag(designs, i, "cost"), "x": xs, "y": usd,
                  "marker": {"color": cols}, "textposition": "outside",
                  "text": [f"${u:,.2f}" if u is not None else "" for u in usd]})
    model = designs[0]["plan"]["model"]
    return ({"data": t, "layout": _layout(f"{model}: step time per fabric", "fabric",
                                          "seconds per step", showlegend=False)},
            {"data": c, "layout": _layout(f"{model}: cost per million tokens", "fabric",
                                          "US$ per million tokens", showlegend=False)})


def bottlenecks(designs: Sequence[dict[str, Any]], top: int = 10) -> tuple[Fig, Fig]:
    """The links that limited the degraded run (the scenario's faulty links marked) and
    the slowdown of each fault or background source alone."""
    data, causes = [], []
    for i, d in enumerate(designs):
        s = d["simulate"]
        rows = s["bottlenecks"][:top][::-1]
        data.append({"type": "bar", "orientation": "h", "name": _tag(designs, i, "links"),
                     "y": [_tag(designs, i, r["name"]) for r in rows],
                     "x": [r["critical_time"] * 1e3 for r in rows],
                     "marker": {"color": ["#d62728" if r.get("fault") else "#1f77b4"
                                          for r in rows]},
                     "customdata": [r.get("fault") or "" for r in rows],
                     "hovertemplate": "%{y}: %{x:.3f} ms on the critical path "
                     "%{customdata}<extra></extra>"})
        causes.append({"type": "bar", "name": _tag(designs, i, "slowdown"),
                       "x": [_tag(designs, i, _wrap(c["description"])) for c in s["causes"]],
                       "y": [c["slowdown_alone"] for c in s["causes"]],
                       "text": [f"{c['slowdown_alone']:.2f}×" if c["slowdown_alone"]
                                else "stalled" for c in s["causes"]],
                       "textposition": "outside", "marker": {"color": "#d62728"}})
    f1 = {"data": data, "layout": _layout("Top bottleneck links (faulty ones in red)",
                                          "time on the critical path (ms)", "",
                                          showlegend=False, margin={"l": 220, "t": 50})}
    f2 = {"data": causes, "layout": _layout("Slowdown by cause, each alone", "cause",
                                            "× the fault-free time", showlegend=False)}
    return f1, f2


def packet(designs: Sequence[dict[str, Any]]) -> tuple[Fig, Fig]:
    """How far PFC pauses spread (ports paused, switches reached, hops) and what the run
    lost (drops, retransmits, watchdog triggers), per variant."""
    spread, loss = [], []
    for i, d in enumerate(designs):
        runs = d["packet"]["runs"]
        xs = [_tag(designs, i, r["variant"]) for r in runs]
        for key, label, col in (("ports_paused", "ports paused", "#d62728"),
                                ("switches_reached", "switches reached", "#ff7f0e"),
                                ("max_hops", "hops from the source", "#9467bd")):
            spread.append({"type": "bar", "name": _tag(designs, i, label), "x": xs,
                           "y": [r["pause"].get(key) or 0 for r in runs],
                           "marker": {"color": col}})
        for key, label, col in (("drops", "drops", "#d62728"),
                                ("retransmits", "retransmits", "#ff7f0e"),
                                ("pause_frames", "pause frames", "#1f77b4")):
            ys = [sum(r[key].values()) if isinstance(r[key], dict) else r[key]
                  for r in runs]
            loss.append({"type": "bar", "name": _tag(designs, i, label), "x": xs, "y": ys,
                         "marker": {"color": col}})
    return ({"data": spread, "layout": _layout("PFC pause spread per variant", "variant",
                                               "count", barmode="group")},
            {"data": loss, "layout": _layout("Drops, retransmits and pauses per variant",
                                             "variant", "count (log)", ylog=True,
                                             barmode="group")})


def ep_kernels(designs: Sequence[dict[str, Any]]) -> tuple[Fig, Fig]:
    """MoE dispatch/combine time and bandwidth (each family's convention) against EP
    size, a line per (kernel, phase) and design."""
    tm: list[dict[str, Any]] = []
    bw: list[dict[str, Any]] = []
    for i, d in enumerate(designs):
        curves: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in d["ep"]["rows"]:
            curves.setdefault((r["kernel"], r["phase"]), []).append(r)
        for (kern, ph), rs in curves.items():
            rs = sorted(rs, key=lambda r: r["ep"])
            name = _tag(designs, i, f"{kern} {ph}")
            common = {"type": "scatter", "mode": "lines+markers", "name": name,
                      "x": [r["ep"] for r in rs],
                      "customdata": [f"{r['headline']}, limit {r['limit']}" for r in rs],
                      "line": {"color": color(kern), "dash": "solid" if ph == "dispatch"
                               else "dash"}}
            tm.append({**common, "y": [r["time_us"] for r in rs], "hovertemplate":
                       "EP %{x}: %{y:.1f} µs (%{customdata})<extra>" + name + "</extra>"})
            bw.append({**common, "y": [r["headline_gbps"] for r in rs], "hovertemplate":
                       "EP %{x}: %{y:.1f} GB/s (%{customdata})<extra>" + name +
                       "</extra>"})
    f1: Fig = {"data": tm, "layout": _layout("MoE dispatch/combine time", "EP size (GPUs)",
                                        "time per call (µs)", ylog=True)}
    f2: Fig = {"data": bw, "layout": _layout("MoE dispatch/combine bandwidth (each "
                                        "family's convention)", "EP size (GPUs)",
                                        "GB/s")}
    return f1, f2


def cluster_jobs(designs: Sequence[dict[str, Any]]) -> Fig:
    """Every job's slowdown with the others running, a bar per job, a series per
    placement and design."""
    data: list[dict[str, Any]] = []
    for i, d in enumerate(designs):
        for p in d["jobs"]["placements"]:
            name = _tag(designs, i, p["placement"])
            data.append({"type": "bar", "name": name,
                         "x": [j["job"] for j in p["jobs"]],
                         "y": [j["slowdown"] for j in p["jobs"]],
                         "customdata": [f"{j['gpu_hours_lost_per_hour']:.2f} GPU-h lost/h"
                                        for j in p["jobs"]],
                         "hovertemplate": "%{x}: ×%{y:.3f} (%{customdata})<extra>" + name
                                          + "</extra>"})
    return {"data": data, "layout": {**_layout("Each job's slowdown beside the others",
                                               "job", "step shared / step alone"),
                                     "barmode": "group"}}


def cluster_replay(designs: Sequence[dict[str, Any]]) -> Fig:
    """A trace replay: GPUs busy over the window, a line per scheduler and design."""
    data: list[dict[str, Any]] = []
    for i, d in enumerate(designs):
        for r in d["jobs"]["trace"]["replays"]:
            tl = r["timeline"]
            name = _tag(designs, i, r["scheduler"])
            data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv"},
                         "name": f"{name}: {r['interference_gpu_hours']:.1f} GPU-h lost",
                         "x": [t / 3600.0 for t in tl["t_s"]], "y": tl["busy_gpus"]})
    return {"data": data, "layout": _layout("GPUs busy over the trace", "hours",
                                            "GPUs busy")}


def figures(kind: str, designs: Sequence[dict[str, Any]]) -> dict[str, Fig]:
    """Every chart of a job's result, by name, in the order the page shows them."""
    out: dict[str, Fig] = {}
    if kind == "bench":
        out["busbw"], out["time"] = busbw(designs)
    elif kind == "ep":
        out["ep_time"], out["ep_bandwidth"] = ep_kernels(designs)
    elif kind == "train":
        out["breakdown"] = breakdown(designs)
    elif kind == "scale":
        out["scaling"], out["cost"] = scaling(designs)
    elif kind == "plan":
        out["plan_time"], out["plan_cost"] = plan(designs)
    elif kind == "infer":
        out["serving_latency"], out["serving_throughput"] = serving(designs)
    elif kind == "simulate":
        out["bottlenecks"], out["causes"] = bottlenecks(designs)
    elif kind == "packet":
        out["pause_spread"], out["packet_loss"] = packet(designs)
    elif kind == "cluster" and all("trace" in d["jobs"] for d in designs):
        out["cluster_replay"] = cluster_replay(designs)
    elif kind == "cluster":
        out["cluster_slowdown"] = cluster_jobs(designs)
    out["hierarchy"] = hierarchy(designs)
    for i, d in enumerate(designs):
        out["topology" if i == 0 else "topology_b"] = topology(
            d, f"{'AB'[i]}: " if len(designs) > 1 else "")
    return out
