"""``fabricsim simulate``: run a scenario's collective with its faults and background traffic
on the flow backend and explain the slowdown against the fault-free run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from fabricsim.backends.base import Result
from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.flow.background import background_transfers
from fabricsim.backends.flow.results import Timeline, write_transfers
from fabricsim.backends.flow.routing import expand
from fabricsim.cli.common import (
    FabricOpt,
    JsonOpt,
    NodesOpt,
    OversubOpt,
    ScenarioArg,
    SystemOpt,
    TopologyOpt,
    console,
    fabric_from_scenario,
    print_json,
    scenario_with_overrides,
)
from fabricsim.errors import ConfigError
from fabricsim.fabric.core import Fabric
from fabricsim.scenario import Scenario
from fabricsim.scenario.schema import CollectiveSpec
from fabricsim.schedule.core import Schedule
from fabricsim.units import format_bytes, format_time, parse_size

OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Folder for link utilisation and per-transfer start/end (Parquet + CSV), "
    "heatmap PNG and summary.")]
RoutingOpt = Annotated[str, typer.Option(
    "--routing", help="ecmp (hash per queue pair), spray or adaptive.")]
QpsOpt = Annotated[int, typer.Option("--qps", help="Queue pairs per connection.", min=1)]
SizeOpt = Annotated[str | None, typer.Option(
    "--size", help="Message size (default: the scenario's collective.maxbytes).")]


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def simulate_scenario(sc: Scenario, *, routing: str = "ecmp", qps: int = 1,
                      size: str | None = None, out: Path | None = None,
                      time_limit_s: float | None = None,
                      progress: Any = None) -> dict[str, Any]:
    """Run ``sc`` with and without its faults/background; a JSON-ready summary.

    Each fault and background source is also run alone when there are several, so the
    slowdown can be attributed to them one by one. ``time_limit_s`` bounds the wall time
    of all the runs together (a SimulationError naming ``--time-limit`` when reached);
    ``progress`` is the flow backend's progress callback.
    """
    from fabricsim.collectives import build_schedule

    spec = sc.collective or CollectiveSpec()
    if size is not None:  # --size replaces collective.maxbytes: the same rules apply
        from fabricsim.scenario.rules import check_scenario

        spec = spec.model_copy(update={"maxbytes": size, "minbytes": min(
            parse_size(spec.minbytes, field="collective.minbytes"),
            parse_size(size, field="--size"))})
        check_scenario(sc.model_copy(update={"collective": spec}))
    nbytes = parse_size(spec.maxbytes, field="collective.maxbytes")
    fab = fabric_from_scenario(sc)
    sch = build_schedule(fab, spec.collective, nbytes, ranks=spec.ranks, algo=spec.algo,
                         proto=spec.proto)
    import time

    deadline = time.perf_counter() + time_limit_s if time_limit_s is not None else None

    kw: dict[str, Any] = {"seed": sc.seed, "routing": routing, "qps": qps,
                          "progress": progress}

    def left() -> dict[str, Any]:
        """The wall time left of the whole command, for each run in turn."""
        return {"time_limit_s": None if deadline is None
                else max(deadline - time.perf_counter(), 1e-3)}

    base = FlowBackend(**kw, **left()).run(sch, fab)
    hit = FlowBackend(faults=sc.faults, background=sc.background, record_timeline=out is not None,
                      **kw, **left()).run(sch, fab)
    causes: list[dict[str, Any]] = []
    descs: list[str] = list(hit.extra["faults"])
    fault_links: dict[str, list[int]] = hit.extra["fault_links"]
    several = len(sc.faults) + len(sc.background) > 1
    for i, (f, desc) in enumerate(zip(sc.faults, descs, strict=True)):
        alone = (FlowBackend(faults=[f], **kw, **left()).run(sch, fab).time if several
                 else hit.time)
        causes.append({"kind": "fault", "index": i, "type": f.type, "description": desc,
                       "links": [fab.link_name(l) for l in fault_links[desc]],
                       "slowdown_alone": _finite(alone / base.time)})
    for i, b in enumerate(sc.background):
        alone = (FlowBackend(background=[b], **kw, **left()).run(sch, fab).time if several
                 else hit.time)
        causes.append({"kind": "background", "index": i, "description":
                       f"{b.name} ({b.traffic_class}, {b.pattern}, {b.nbytes} per flow, "
                       f"weight {b.weight:g})", "slowdown_alone": _finite(alone / base.time)})
    link_fault = {l: d for d, ls in fault_links.items() for l in ls}
    for b, bt in zip(sc.background, background_transfers(fab, sc.background, seed=sc.seed),
                     strict=True):
        ex = expand(fab, bt.src, bt.dst, bt.nbytes, mode=routing, qps=qps, seed=sc.seed)
        for l in np.unique(ex.links).tolist():
            link_fault.setdefault(int(l), f"background: {b.name}")
    tops = [{**b, "fault": link_fault.get(b["link"])} for b in hit.extra["bottlenecks"]]
    summary: dict[str, Any] = {
        "scenario": sc.name, "description": sc.description,
        "cluster": {"system": sc.cluster.system, "nodes": sc.cluster.nodes,
                    "gpus": fab.n_gpus, "fabric": fab.info.fabric,
                    "topology": fab.info.topology},
        "collective": spec.collective, "nbytes": nbytes, "algorithm": sch.algorithm,
        "protocol": hit.extra["protocol"], "routing": routing, "qps": qps,
        "baseline_time_s": base.time, "time_s": _finite(hit.time),
        "slowdown": _finite(hit.time / base.time), "stalled": not math.isfinite(hit.time),
        "stalled_steps": hit.extra["stalled_steps"],
        "stalled_transfers": [list(x) for x in hit.extra["stalled_transfers"]][:20],
        "causes": causes, "bottlenecks": tops,
        "baseline_bottlenecks": base.extra["bottlenecks"][:3], "outputs": [],
    }
    if out is not None:
        summary["outputs"] = [str(p) for p in _write_outputs(out, sc, hit, fab, sch, summary)]
    return summary


def _write_outputs(out: Path, sc: Scenario, res: Result, fab: Fabric, sch: Schedule,
                   summary: dict[str, Any]) -> list[Path]:
    from fabricsim.plots.heatmap import link_heatmap

    tl: Timeline = res.extra["timeline"]
    paths = tl.write(out)
    paths += write_transfers(res.extra["transfers"], out, sch)
    faulty = tuple(l for ls in res.extra["fault_links"].values() for l in ls)
    title = (f"{sc.name}: {sch.collective} {format_bytes(sch.nbytes)} ({sch.algorithm}), "
             "link utilisation")
    paths.append(link_heatmap(tl, out / "link_utilization.png", title=title,
                              highlight=faulty))
    p = out / "summary.json"
    p.write_text(json.dumps({**summary, "outputs": [str(x) for x in paths]}, indent=2) + "\n",
                 encoding="utf-8")
    paths.append(p)
    return paths


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate(
        scenario: ScenarioArg = None,
        system: SystemOpt = None,
        nodes: NodesOpt = None,
        fabric: FabricOpt = None,
        topology: TopologyOpt = None,
        oversubscription: OversubOpt = None,
        routing: RoutingOpt = "ecmp",
        qps: QpsOpt = 1,
        size: SizeOpt = None,
        out: OutOpt = None,
        json_out: JsonOpt = False,
        force: Annotated[bool, typer.Option(
            "--force", help="Run faults that are legal but extreme (a link or NIC below 1 % "
            "of its rate, a straggler delay above 1 s), otherwise refused.")] = False,
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Stop with an explained error after this many seconds of "
            "wall time (all runs together).")] = None,
    ) -> None:
        """Simulate a scenario's collective with its faults and background traffic (flow
        backend); report the slowdown against the fault-free run and where it came from.

        Example: fabricsim simulate flow-degraded-link.yaml --out results/
        """
        if scenario is None:
            raise ConfigError("simulate needs a scenario file (see the scenarios shipped in "
                              "fabricsim/scenarios, e.g. flow-degraded-link.yaml)")
        sc = scenario_with_overrides(scenario, system=system, nodes=nodes, fabric=fabric,
                                     topology=topology, oversubscription=oversubscription)
        from fabricsim.scenario.rules import check_extreme

        check_extreme(sc, force=force)
        if time_limit is not None and not time_limit > 0:
            raise ConfigError(f"--time-limit must be > 0 seconds, got {time_limit}",
                              field="--time-limit")
        from rich.progress import Progress, SpinnerColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), "[progress.description]{task.description}",
                      TimeElapsedColumn(), console=console, transient=True,
                      disable=json_out) as bar:
            task = bar.add_task("flow simulation", total=None)

            def tick(done: int, steps: int, t: float, calls: int) -> None:
                bar.update(task, description=f"flow simulation: {done}/{steps} steps, "
                                             f"simulated {t * 1e3:.3f} ms")

            s = simulate_scenario(sc, routing=routing, qps=qps, size=size, out=out,
                                  time_limit_s=time_limit, progress=tick)
        if json_out:
            print_json(s)
        else:
            _print(s)


def _print(s: dict[str, Any]) -> None:
    c = s["cluster"]
    console.print(f"[bold]{s['scenario']}[/bold]  {s['description']}")
    console.print(f"{c['nodes']} × {c['system']} ({c['gpus']} GPUs) on {c['fabric']} "
                  f"{c['topology']}; {s['collective']} {format_bytes(s['nbytes'])} "
                  f"({s['algorithm']}, {s['protocol']}); flow backend, {s['routing']}, "
                  f"{s['qps']} QP")
    base = format_time(s["baseline_time_s"])
    if s["stalled"]:
        console.print(f"fault-free {base}; with faults: [red]STALLED[/red] — steps "
                      f"{s['stalled_steps']} cannot finish (transfers without a route: "
                      f"{s['stalled_transfers'][:5]})")
    else:
        console.print(f"fault-free {base}; with faults {format_time(s['time_s'])}: "
                      f"[bold]slowdown ×{s['slowdown']:.3f}[/bold]")
    if s["causes"]:
        t = Table(title="causes", title_justify="left")
        for col in ("what", "slowdown alone"):
            t.add_column(col)
        for cause in s["causes"]:
            sl = cause["slowdown_alone"]
            t.add_row(cause["description"], "stall" if sl is None else f"×{sl:.3f}")
        console.print(t)
    t = Table(title="top bottleneck links (time they limited a step)", title_justify="left")
    for col in ("link", "kind", "critical time", "utilisation", "cause"):
        t.add_column(col)
    for b in s["bottlenecks"]:
        t.add_row(b["name"], b["kind"], format_time(b["critical_time"]),
                  f"{b['utilization']:.0%}", b["fault"] or "")
    console.print(t)
    for p in s["outputs"]:
        console.print(f"wrote {p}")
