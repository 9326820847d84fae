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
            "rail, spread, random (default: the scenario's placement).")] = None,
        seed: Annotated[int | None, typer.Option(
            "--seed", help="Seed of the random placement (default: the scenario's).")] = None,
        fail_servers: Annotated[str | None, typer.Option(
            "--fail-servers", help="Servers that fail under the jobs, e.g. 0-3 or 0,5,9 "
            "(default: the scenario's failure.servers): what each job on them loses with "
            "spares, waiting for the repair, or shrinking to the survivors.")] = None,
        fail_gpus: Annotated[str | None, typer.Option(
            "--fail-gpus", help="GPUs that fail alone, e.g. 288-291 (an NVL72 compute "
            "tray: 4 consecutive GPUs of a rack; default: the scenario's failure.gpus): "
            "what each job on them loses, as --fail-servers.")] = None,
        repair_hours: Annotated[float | None, typer.Option(
            "--repair-hours", help="Hours the failed servers stay down without a spare "
            "(default: the scenario's failure.repair_hours, else 4).", min=0.001,
            max=8760.0)] = None,
        schedulers: Annotated[str | None, typer.Option(
            "--schedulers", help="Comma-separated schedulers to replay the scenario's "
            "trace with: fifo, topology (default: the trace's scheduler).")] = None,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Write a PNG: each job's slowdown per placement, or a trace "
            "replay over time per scheduler.")] = None,
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
        failed = _servers(fail_servers) if fail_servers is not None else None
        gpus = _servers(fail_gpus, "--fail-gpus") if fail_gpus is not None else None
        sch = tuple(p.strip() for p in schedulers.split(",") if p.strip()) \
            if schedulers is not None else None
        job = jobs.job_from_scenario(
            "cluster", sc, placements=asked, seed=seed, fail_servers=failed,
            fail_gpus=gpus, repair_hours=repair_hours, schedulers=sch,
            base_dir=scenario.parent if scenario.exists() else None)
        with Progress("[progress.description]{task.description}", BarColumn(),
                      TimeElapsedColumn(), console=console, transient=True,
                      disable=json_out or quiet) as bar:
            task = bar.add_task("placing the jobs", total=1.0)

            def tick(frac: float, msg: str) -> None:
                bar.update(task, completed=frac, description=msg)

            report = jobs.run(job, progress=tick)
        d = report.to_dict()
        if plot is not None:
            from fabricsim.plots.cluster import plot_cluster, plot_replay

            c = d["cluster"]
            where = f"{c['gpus']} GPUs, {c['fabric']} {c['topology']}"
            if "trace" in d:
                plot_replay(d["trace"]["replays"], plot, title=f"{d['trace']['source']} "
                            f"({d['trace']['jobs']} jobs) on {where}")
            else:
                plot_cluster(d["placements"], plot, title=f"{len(job.jobs)} jobs on {where}")
        if json_out:
            print_json(d)
        elif not quiet:
            _print(d)
            print_warnings(report.warnings)


def _servers(text: str, flag: str = "--fail-servers") -> tuple[int, ...]:
    """``0-3,8`` as server (or GPU) numbers; a bad list is refused naming ``flag``.

    >>> _servers("0-3,8")
    (0, 1, 2, 3, 8)
    """
    from fabricsim.errors import ConfigError

    out: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",") if p.strip()):
            lo, _, hi = part.partition("-")
            a, b = int(lo), int(hi) if hi else int(lo)
            if a < 0 or b < a:
                raise ValueError(part)
            out.extend(range(a, b + 1))
    except ValueError:
        raise ConfigError(f"give numbers and ranges, e.g. 0-3 or 0,5,9; got {text!r}",
                          field=flag) from None
    if not out:
        raise ConfigError(f"give at least one, e.g. {flag} 0-3", field=flag)
    return tuple(dict.fromkeys(out))


def _print(d: dict[str, Any]) -> None:
    c = d["cluster"]
    console.print(f"{c['nodes']} × {c['system']} ({c['gpus']} GPUs) on {c['fabric']} "
                  f"{c['topology']}")
    if "trace" in d:
        _print_replay(d["trace"])
    for p in d["placements"]:
        t = Table(title=f"placement {p['placement']}: mean slowdown ×{p['mean_slowdown']:.3f}"
                        f", {p['gpu_hours_lost_per_hour']:.1f} GPU-hours "
                        f"(${p['usd_lost_per_hour']:,.0f}) lost per hour",
                  title_justify="left")
        for col in ("job", "GPUs", "servers", "step alone", "step shared", "slowdown",
                    "GPU-h lost/h", "slowed on", "by"):
            t.add_column(col)
        for j in p["jobs"]:
            felt = j["slowdown"] >= 1.0005  # below: nothing worth naming
            link = j["links"][0]["link"] if j["links"] and felt else ""
            by = ", ".join(x["job"] for x in j["culprits"]) if felt else ""
            t.add_row(j["job"], str(j["gpus"]), str(j["servers"]),
                      format_time(j["step_alone_s"]), format_time(j["step_shared_s"]),
                      f"×{j['slowdown']:.3f}", f"{j['gpu_hours_lost_per_hour']:.2f}",
                      link, by)
        console.print(t)
        if p["busiest_links"]:
            top = "; ".join(f"{b['link']} {b['busy']:.0%}" for b in p["busiest_links"][:3])
            console.print(f"  busiest links (mean busy share, all jobs): {top}")
        for c in p.get("checkpoints", []):
            _print_burst(c)
        if "faults" in p:
            _print_faults(p["faults"])
        if "failure" in p:
            _print_failure(p["failure"])


def _print_burst(c: dict[str, Any]) -> None:
    every = c["every_s"]
    often = f"{every / 3600:g} h" if every >= 3600 else f"{every / 60:g} min" \
        if every >= 60 else format_time(every)
    t = Table(title=f"{c['job']} writes {c['bytes'] / 1e9:,.0f} GB to servers "
                    f"{', '.join(map(str, c['to']))} every {often}: "
                    f"{format_time(c['burst_s'])} at {c['write_gbytes_per_s']:,.0f} GB/s, "
                    f"{c['gpu_hours_lost_per_hour']:.3f} GPU-h lost per hour",
              title_justify="left")
    for col in ("job", "GPUs", "step", "step during the burst", "slowdown",
                "GPU-h lost per burst"):
        t.add_column(col)
    for j in c["jobs"]:
        t.add_row(j["job"], str(j["gpus"]), format_time(j["step_s"]),
                  format_time(j["step_during_s"]), f"×{j['slowdown']:.3f}",
                  f"{_signed(j['gpu_hours_lost_per_burst']):.4f}")
    console.print(t)


def _signed(x: float) -> float:
    """``x``, or 0 where it would print as -0."""
    return x if abs(x) >= 5e-5 else 0.0


def _print_faults(f: dict[str, Any]) -> None:
    t = Table(title=f"with {'; '.join(f['faults'])}: each job beside the others",
              title_justify="left")
    for col in ("job", "GPUs", "step healthy", "step faulted", "slowdown", "GPU-h lost/h"):
        t.add_column(col)
    for j in f["jobs"]:
        t.add_row(j["job"], str(j["gpus"]), format_time(j["step_healthy_s"]),
                  format_time(j["step_faulted_s"]), f"×{j['slowdown']:.3f}",
                  f"{j['gpu_hours_lost_per_hour']:.2f}")
    console.print(t)


def _print_failure(f: dict[str, Any]) -> None:
    parts = []
    for key, what in (("servers", "servers"), ("gpus", "GPUs")):
        ids = f[key]
        if ids:
            parts.append(f"{what} " + (", ".join(map(str, ids)) if len(ids) <= 6
                                       else f"{ids[0]}… ({len(ids)})"))
    t = Table(title=f"{' and '.join(parts)} fail ({f['repair_hours']:g} h to repair "
                    f"without a spare): GPU-hours lost per job", title_justify="left")
    for col in ("job", "GPUs lost", "replicas lost", "with spares", "wait for repair",
                "shrink to survivors", "best without spares"):
        t.add_column(col)
    for j in f["jobs"]:
        gh = j["gpu_hours_lost"]
        shrink = f"{gh['shrink']:,.0f}" if gh["shrink"] is not None else "—"
        t.add_row(j["job"], str(j["gpus_lost"]), str(j["replicas_lost"]),
                  f"{gh['with_spares']:,.0f}", f"{gh['wait']:,.0f}", shrink,
                  j["best_without_spares"])
    console.print(t)
    for j in f["jobs"]:
        g = j["goodput"]
        shrink = f", shrinking {g['shrink']:.1%}" if g["shrink"] is not None else ""
        console.print(f"  {j['job']} over a failure trace ({j['failures_per_day']:.2f} "
                      f"failures a day, {j['hardware_failures_per_day']:.2f} of them "
                      f"hardware): goodput {g['with_spares']:.1%} with spares; without, "
                      f"waiting {g['wait']:.1%}{shrink}")
    for j in f["jobs"]:
        if j["shrink_note"]:
            console.print(f"  {j['job']}: no shrink — {j['shrink_note']}")
    if not f["jobs"]:
        console.print("  no job runs on them")


def _print_replay(tr: dict[str, Any]) -> None:
    t = Table(title=f"{tr['source']} ({tr['format']}): {tr['jobs']} jobs submitted in "
                    f"{tr['hours']:g} h from hour {tr['start_hours']:g}; multi-server "
                    f"jobs run {tr['model']}", title_justify="left")
    for col in ("scheduler", "finished", "queued at end", "GPUs busy", "mean wait",
                "p90 wait", "idle while queued", "fragmented", "lost to interference",
                "slowdown mean / worst"):
        t.add_column(col)
    for r in tr["replays"]:
        t.add_row(r["scheduler"], f"{r['finished']} of {r['jobs']}", str(r["queued_at_end"]),
                  f"{r['utilisation']:.1%}", format_time(r["wait_mean_s"]),
                  format_time(r["wait_p90_s"]),
                  f"{r['idle_while_queued_gpu_hours']:,.0f} GPU-h",
                  f"{r['fragmented_gpu_hours']:,.0f} GPU-h",
                  f"{r['interference_gpu_hours']:,.1f} GPU-h",
                  f"×{r['mean_slowdown']:.3f} / ×{r['max_slowdown']:.3f}")
    console.print(t)
    for r in tr["replays"]:
        slowed = sorted((j for j in r["job_list"] if (j["slowdown"] or 1.0) >= 1.0005),
                        key=lambda j: -j["slowdown"])[:3]
        if slowed:
            top = "; ".join(f"{j['job']} ({j['gpus']} GPUs) ×{j['slowdown']:.3f}"
                            + (f" on {j['slowed_on']} by {', '.join(j['by'])}"
                               if j["slowed_on"] else "") for j in slowed)
            console.print(f"  {r['scheduler']}: most slowed {top}")
