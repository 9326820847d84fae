"""``fabricsim report SCENARIO -o out/``: one self-contained HTML report of a scenario.

Whatever the scenario holds — a collective sweep, a training job, faults and background
traffic, a packet-level experiment — gets its section, tables and figures; the HTML page
embeds the PNGs (also written beside it) so it opens without network access.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabricsim.cli.common import check_out_dir, console
from fabricsim.errors import ConfigError

QuietOpt = Annotated[bool, typer.Option(
    "--quiet", "-q", help="No progress display; print only the report's path.")]


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""

    @app.command("report")
    def report(
        scenario: Annotated[Path, typer.Argument(
            help="Scenario YAML, or a shipped scenario's name (fabricsim presets "
            "scenarios).")],
        out: Annotated[Path, typer.Option(
            "--out", "-o", help="Folder for report.html, report.md and the PNGs.")] = Path(
            "report"),
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Stop with an explained error after this many seconds of "
            "wall time.")] = None,
        quiet: QuietOpt = False,
    ) -> None:
        """Write one self-contained HTML report (plots embedded) and its PNGs for any
        scenario.

        Example: fabricsim report flow-degraded-link -o out/
        """
        from fabricsim.reports.scenario import write_report
        from fabricsim.scenario import load_scenario

        if time_limit is not None and not time_limit > 0:
            raise ConfigError(f"--time-limit must be > 0 seconds, got {time_limit}",
                              field="--time-limit")
        check_out_dir(out, "--out")
        sc = load_scenario(scenario)
        with console.status("writing the report", spinner="dots") as status:
            if quiet:
                status.stop()
            files = write_report(sc, out, time_limit_s=time_limit,
                                 progress=None if quiet else
                                 (lambda m: status.update(f"report: {m}")))
        if quiet:
            typer.echo(str(files.html))
            return
        console.print(f"wrote {files.html} ({files.describe()})")
        for name in files.sections:
            console.print(f"  section: {name}")
