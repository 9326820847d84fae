"""``fabricsim cluster``: many training jobs on one fabric, placed by a policy; each job's
step alone and shared, its slowdown, what it loses per hour, and the links and jobs that
cause it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fabricsim.cli.common import (
    JsonOpt,
    check_out_file,
    console,
    print_json,
    print_warnings,
)
from fabricsim.cli.options import CLUSTER, NO_CLUSTER_FLAGS, ClusterFlags, load, with_groups
from fabricsim.units import format_time

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("cluster")
    @with_groups(CLUSTER)
    def cluster(
        scenario: Annotated[Path, typer.Argument(
            help="Scenario YAML file with a jobs: list (name, gpus, training: each).")],
        cluster: ClusterFlags = NO_CLUSTER_FLAGS,
        placements: Annotated[str | None, typer.Option(
            "--placements", help="Comma-separated placement policies to compare: packed, "
            "spread, random (default: the scenario's placement).")] = None,
        seed: Annotated[int | None, typer.Option(
            "--seed", help="Seed of the random placement (default: the scenario's).")] = None,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Write a PNG: each job's slowdown per placement.")] = None,
        json_out: JsonOpt = False,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="No progress display and no table: only errors (and "
            "--json).")] = False,
    ) -> None:
        """Place a scenario's jobs on its cluster and time every job alone and with the
        others: slowdown, GPU-hours and money lost per hour, and the links and jobs
        responsible (docs/cluster.md).

        Example: fabricsim cluster examples/clusters/four-jobs.yaml --placements packed,spread
        """
        check_out_file(plot, "--plot")
        sc = load(scenario, cluster)
        from rich.progress import BarColumn, Progress, TimeElapsedColumn

        from fabricsim import jobs

        asked = tuple(p.strip() for p in placements.split(",") if p.strip()) \
            if placements is not None else None
        job = jobs.job_from_scenario("cluster", sc, placements=asked, seed=seed)
        with Progress("[progress.description]{task.description}", BarColumn(),
                      TimeElapsedColumn(), console=console, transient=True,
                      disable=json_out or quiet) as bar:
            task = bar.add_task("placing the jobs", total=1.0)

            def tick(frac: float, msg: str) -> None:
                bar.update(task, completed=frac, description=msg)

            report = jobs.run(job, progress=tick)
        d = report.to_dict()
        if plot is not None:
            from fabricsim.plots.cluster import plot_cluster

            c = d["cluster"]
            plot_cluster(d["placements"], plot, title=f"{len(job.jobs)} jobs on "
                         f"{c['gpus']} GPUs, {c['fabric']} {c['topology']}")
        if json_out:
            print_json(d)
        elif not quiet:
            _print(d)
            print_warnings(report.warnings)


def _print(d: dict[str, Any]) -> None:
    c = d["cluster"]
    console.print(f"{c['nodes']} × {c['system']} ({c['gpus']} GPUs) on {c['fabric']} "
                  f"{c['topology']}")
    for p in d["placements"]:
        t = Table(title=f"placement {p['placement']}: mean slowdown ×{p['mean_slowdown']:.3f}"
                        f", {p['gpu_hours_lost_per_hour']:.1f} GPU-hours "
                        f"(${p['usd_lost_per_hour']:,.0f}) lost per hour",
                  title_justify="left")
        for col in ("job", "GPUs", "servers", "step alone", "step shared", "slowdown",
                    "GPU-h lost/h", "slowed on", "by"):
            t.add_column(col)
        for j in p["jobs"]:
            link = j["links"][0]["link"] if j["links"] else ""
            by = ", ".join(x["job"] for x in j["culprits"])
            t.add_row(j["job"], str(j["gpus"]), str(j["servers"]),
                      format_time(j["step_alone_s"]), format_time(j["step_shared_s"]),
                      f"×{j['slowdown']:.3f}", f"{j['gpu_hours_lost_per_hour']:.2f}",
                      link, by)
        console.print(t)
        if p["busiest_links"]:
            top = "; ".join(f"{b['link']} {b['busy']:.0%}" for b in p["busiest_links"][:3])
            console.print(f"  busiest links (mean busy share, all jobs): {top}")
