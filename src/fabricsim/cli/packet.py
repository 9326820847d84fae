"""``fabricsim packet SCENARIO``: run a packet-level scenario (and its variants).

Example: ``fabricsim packet packet-pause-storm.yaml --out results/`` runs the base
configuration and every variant of ``packet.variants``, prints them side by side and
writes ``report.json`` and four figures (FCT CDF, throughput, queues/pauses, pause map).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fabricsim.cli.common import JsonOpt, console, print_json


def register(app: typer.Typer) -> None:
    """Add the ``packet`` command to ``app``."""

    @app.command("packet")
    def packet_cmd(
        scenario: Annotated[Path, typer.Argument(
            help="Scenario YAML with a packet: section, or a shipped scenario's name.")],
        json_out: JsonOpt = False,
        out: Annotated[Path | None, typer.Option("--out", help="Folder for report.json and "
                                                 "plots.")] = None,
        variant: Annotated[list[str] | None, typer.Option(
            "--variant", help="Run only these variants ('base' for the base config).")] = None,
        force: Annotated[bool, typer.Option(
            "--force", help="Run settings that are legal but extreme (loss_rate above 1 %), "
            "which are otherwise refused with their estimated cost.")] = False,
        event_budget: Annotated[int | None, typer.Option(
            "--event-budget", min=1000, help="Events a run may take (overrides "
            "packet.event_budget; a run estimated beyond it is refused up front).")] = None,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="No progress display and no table (--json still "
            "prints).")] = False,
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Seconds after which no further variant is started; the "
            "runs done are reported and the rest listed as skipped (one run is bounded by "
            "--event-budget).")] = None,
    ) -> None:
        """Packet-level simulation (IB credits, RoCE PFC/ECN/DCQCN, pause storms, loss)."""
        from fabricsim import jobs
        from fabricsim.cli.common import check_out_dir
        from fabricsim.errors import ConfigError
        from fabricsim.scenario import load_scenario

        check_out_dir(out, "--out")
        if time_limit is not None and not time_limit > 0:
            raise ConfigError(f"--time-limit must be > 0 seconds, got {time_limit}",
                              field="--time-limit")
        job = jobs.job_from_scenario("packet", load_scenario(scenario), variants=variant,
                                     force=force, event_budget=event_budget,
                                     time_limit_s=time_limit)
        with console.status("packet simulation") as status:
            if quiet or json_out:
                status.stop()

            def step(_frac: float, msg: str) -> None:
                status.update(f"packet simulation: {msg}")

            result = jobs.run(job, progress=step)
        runs = result.runs
        report = result.to_dict()
        if out is not None:
            from fabricsim.plots.packet import write_all

            out.mkdir(parents=True, exist_ok=True)
            (out / "report.json").write_text(json.dumps(report, indent=2, default=_default))
            report["files"] = [str(p) for p in write_all(runs, out, title=job.name)] + [
                str(out / "report.json")]
        if json_out:
            print_json(report)
        elif not quiet:
            _print(report)


def _default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def _us(x: float | None) -> str:
    return "—" if x is None else f"{x * 1e6:,.1f}"


def _print(report: dict[str, Any]) -> None:
    console.print(f"[bold]{report['scenario']}[/bold]  {report['description']}")
    t = Table()
    for col in ("variant", "time µs", "main µs", "p99 FCT µs", "drops", "retx", "paused µs",
                "ports/hops", "CNPs", "wd"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    for s in report["runs"]:
        p99 = max((c["fct_p99_s"] for c in s["fct_by_class"].values()), default=None)
        drops = sum(s["drops"].values())
        t.add_row(f"{s['variant']} ({s['transport']})", _us(s["time_s"]),
                  _us(s["main_traffic_time_s"]), _us(p99), f"{drops:,}",
                  f"{s['retransmits']:,}", _us(s["pause"]["pause_time_total_s"]),
                  f"{s['pause']['ports_paused']}/{s['pause']['max_hops']}", f"{s['cnps']:,}",
                  str(s["watchdog_triggers"]))
    console.print(t)
    for w in report["warnings"]:
        console.print(f"[yellow]warning:[/] {w}")
    from fabricsim.reports.flow import human_size

    for f in report.get("files", []):
        console.print(f"wrote {f} ({human_size(Path(f).stat().st_size)})")
