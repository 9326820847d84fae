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
        import time

        from fabricsim.cli.common import check_out_dir
        from fabricsim.errors import ConfigError
        from fabricsim.scenario import load_scenario
        from fabricsim.scenario.packet import run_packet_scenario, variant_names

        check_out_dir(out, "--out")
        sc = load_scenario(scenario)
        if not sc.packet:
            raise ConfigError(f"scenario {sc.name!r} has no packet: section, so there is "
                              f"no packet-level experiment to run; add one (docs/packet.md) "
                              f"or run `fabricsim report` / `fabricsim simulate` on it",
                              field="packet")
        names: list[str | None] = [None, *variant_names(sc)]
        if variant:
            known = {"base", *variant_names(sc)}
            for v in variant:
                if v not in known:
                    from fabricsim.errors import unknown

                    raise unknown("variant", v, sorted(known), field="--variant")
            names = [None if v == "base" else v for v in variant]
        if time_limit is not None and not time_limit > 0:
            raise ConfigError(f"--time-limit must be > 0 seconds, got {time_limit}",
                              field="--time-limit")
        over: dict[str, Any] = {} if event_budget is None else {"event_budget": event_budget}
        deadline = None if time_limit is None else time.perf_counter() + time_limit
        skipped: list[str] = []
        with console.status("packet simulation") as status:
            if quiet or json_out:
                status.stop()
            runs: list[Any] = []
            for i, name in enumerate(names):
                if deadline is not None and runs and time.perf_counter() > deadline:
                    skipped = [n or "base" for n in names[i:]]
                    break
                status.update(f"packet simulation: {name or 'base'} "
                              f"({i + 1} of {len(names)})")
                runs.append(_run(run_packet_scenario, sc, name, force, over))
        report = {"scenario": sc.name, "description": sc.description,
                  "runs": [r.summary for r in runs]}
        if skipped:
            report["skipped"] = skipped
        if out is not None:
            from fabricsim.plots.packet import write_all

            out.mkdir(parents=True, exist_ok=True)
            (out / "report.json").write_text(json.dumps(report, indent=2, default=_default))
            report["files"] = [str(p) for p in write_all(runs, out, title=sc.name)] + [
                str(out / "report.json")]
        if json_out:
            print_json(report)
        elif not quiet:
            _print(report)


def _run(run: Any, sc: Any, variant: str | None, force: bool, over: dict[str, Any]) -> Any:
    """One run; a refusal for the event budget also names the command-line flags."""
    from fabricsim.errors import SimulationError

    try:
        return run(sc, variant, force=force, **over)
    except SimulationError as e:
        if e.field != "packet.event_budget":
            raise
        raise SimulationError(f"{e.message} (on the command line: --event-budget N)",
                              field=e.field) from None


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
    for s in report["runs"]:
        for w in s.get("warnings", []):
            console.print(f"[yellow]warning[/] ({s['variant']}): {w}")
    if report.get("skipped"):
        console.print(f"--time-limit reached; not run: {', '.join(report['skipped'])}")
    from fabricsim.reports.flow import human_size

    for f in report.get("files", []):
        console.print(f"wrote {f} ({human_size(Path(f).stat().st_size)})")
