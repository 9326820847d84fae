"""``fabricsim simulate``: run a scenario's collective with its faults and background traffic
on the flow backend and explain the slowdown against the fault-free run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fabricsim.cli.common import (
    FlowPrecisionOpt,
    JsonOpt,
    check_flow_precision,
    check_out_dir,
    console,
    print_json,
    print_warnings,
)
from fabricsim.cli.options import CLUSTER, NO_CLUSTER_FLAGS, ClusterFlags, load, with_groups
from fabricsim.errors import ConfigError
from fabricsim.reports.flow import human_size
from fabricsim.units import format_bytes, format_time

__all__ = ["QuietOpt", "register"]

OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Folder for per-transfer start/end and link utilisation (Parquet), the "
    "link heatmap and fault-impact PNGs, and summary.json.")]
CsvOpt = Annotated[bool, typer.Option(
    "--csv", help="Also write each table as CSV (several times larger than Parquet).")]
FullOpt = Annotated[bool, typer.Option(
    "--full", help="Link utilisation at every instant a rate changed (can be hundreds of "
    "MB) instead of 200 equal time intervals.")]
RankOpt = Annotated[str, typer.Option(
    "--heatmap-rank", help="Order of the heatmap's links: critical (the time each limited "
    "the run, its share of the slowdown), utilization or bytes; links the scenario names "
    "are always shown.")]
QuietOpt = Annotated[bool, typer.Option(
    "--quiet", "-q", help="No progress display and no table: only errors (and --json).")]
RoutingOpt = Annotated[str, typer.Option(
    "--routing", help="ecmp (hash per queue pair), spray or adaptive.")]
QpsOpt = Annotated[int | None, typer.Option(
    "--qps", help="Queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION; NCCL allows at "
    "most 128; default: the cluster's params.qps, else NCCL's 1).", min=1, max=128)]
SizeOpt = Annotated[str | None, typer.Option(
    "--size", help="Message size (default: the scenario's collective.maxbytes).")]


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    @with_groups(CLUSTER)
    def simulate(
        scenario: Annotated[Path, typer.Argument(
            help="Scenario YAML file with faults: or background:, or a shipped scenario's "
            "name.")],
        cluster: ClusterFlags = NO_CLUSTER_FLAGS,
        routing: RoutingOpt = "ecmp",
        qps: QpsOpt = None,
        size: SizeOpt = None,
        out: OutOpt = None,
        csv: CsvOpt = False,
        full: FullOpt = False,
        heatmap_rank: RankOpt = "critical",
        json_out: JsonOpt = False,
        quiet: QuietOpt = False,
        force: Annotated[bool, typer.Option(
            "--force", help="Run faults that are legal but extreme (a link or NIC below 1 % "
            "of its rate, a straggler delay above 1 s), otherwise refused.")] = False,
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Stop with an explained error after this many seconds of "
            "wall time (all runs together).")] = None,
        flow_precision: FlowPrecisionOpt = 0.0,
    ) -> None:
        """Simulate a scenario's collective with its faults and background traffic (flow
        backend); report the slowdown against the fault-free run and where it came from.

        Tables are Parquet (--csv adds CSV), link utilisation is resampled to 200
        intervals unless --full.

        Example: fabricsim simulate flow-degraded-link.yaml --out results/
        """
        if out is None:
            given = [f for f, on in (("--csv", csv), ("--full", full),
                                     ("--heatmap-rank", heatmap_rank != "critical")) if on]
            if given:
                verb = "shapes" if len(given) == 1 else "shape"
                raise ConfigError(f"{', '.join(given)} {verb} the files written to --out; "
                                  f"give --out FOLDER or drop {given[0]}", field=given[0])
        check_out_dir(out, "--out")
        sc = load(scenario, cluster)
        from fabricsim.scenario.rules import check_extreme

        check_extreme(sc, force=force)  # before the progress bar (the job checks it too)
        if time_limit is not None and not time_limit > 0:
            raise ConfigError(f"--time-limit must be > 0 seconds, got {time_limit}",
                              field="--time-limit")
        check_flow_precision(flow_precision)
        from fabricsim.plots.heatmap import RANKS

        if heatmap_rank not in RANKS:
            from fabricsim.errors import unknown

            raise unknown("ranking", heatmap_rank, list(RANKS), field="--heatmap-rank")
        from rich.progress import Progress, SpinnerColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), "[progress.description]{task.description}",
                      TimeElapsedColumn(), console=console, transient=True,
                      disable=json_out or quiet) as bar:
            task = bar.add_task("flow simulation", total=None)

            def tick(done: int, steps: int, t: float, calls: int) -> None:
                bar.update(task, description=f"flow simulation: {done}/{steps} steps, "
                                             f"simulated {t * 1e3:.3f} ms")

            from fabricsim import jobs
            from fabricsim.reports.flow import write_flow_outputs

            job = jobs.job_from_scenario("simulate", sc, size=size, routing=routing, qps=qps,
                                         time_limit_s=time_limit, record=out is not None,
                                         force=force, precision=flow_precision)
            report = jobs.run(job, step_progress=tick)
            if out is not None:
                write_flow_outputs(report, out, csv=csv, full=full, rank=heatmap_rank)
        s = report.to_dict()
        if json_out:
            print_json(s)
        elif not quiet:
            _print(s)
            print_warnings(report.warnings)


def _print(s: dict[str, Any]) -> None:
    c = s["cluster"]
    console.print(f"[bold]{s['scenario']}[/bold]  {s['description']}")
    console.print(f"{c['nodes']} × {c['system']} ({c['gpus']} GPUs) on {c['fabric']} "
                  f"{c['topology']}; {s['collective']} {format_bytes(s['nbytes'])} "
                  f"({s['algorithm']}, {s['protocol']}); flow backend, {s['routing']}, "
                  f"{s['qps']} QP")
    base = format_time(s["baseline_time_s"])
    if s["stalled"]:
        cut = s.get("cut_off") or []
        console.print(f"fault-free {base}; with faults: [red]cannot complete[/red] — steps "
                      f"{s['stalled_steps']} have transfers without a route: "
                      f"{'; '.join(cut[:5])}{' ...' if len(cut) > 5 else ''}")
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
    if s["outputs"]:
        total = sum(o["bytes"] for o in s["outputs"])
        console.print(f"wrote {len(s['outputs'])} files, {human_size(total)} in all:")
        for o in s["outputs"]:
            console.print(f"  {o['path']}  ({human_size(o['bytes'])})")
