"""``fabricsim demo``: the built-in scenario, written as a report with plots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabricsim.cli.common import console
from fabricsim.reports.demo import SECTIONS, write_demo


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")] = Path("out"),
        section: Annotated[list[str] | None, typer.Option(
            "--section", help=f"Only these sections: {', '.join(SECTIONS)}.")] = None,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="No progress and no report on stdout; only the paths "
            "written.")] = False,
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Stop with an explained error after this many seconds of "
            "wall time.")] = None,
    ) -> None:
        """Run the 256-GPU reference design (IB NDR vs RoCEv2) and write out/report.html
        (self-contained, figures embedded), out/report.md and the PNGs."""
        if time_limit is not None and not time_limit > 0:
            from fabricsim.errors import ConfigError

            raise ConfigError(f"--time-limit must be > 0 seconds, got {time_limit}",
                              field="--time-limit")
        from fabricsim.cli.common import check_out_dir

        check_out_dir(out, "--out")
        if section:
            from fabricsim.errors import unknown

            for s in section:
                if s not in SECTIONS:
                    raise unknown("section", s, SECTIONS, field="--section")
        with console.status("building the report") as status:
            if quiet:
                status.stop()
            path = write_demo(out, sections=section, time_limit_s=time_limit,
                              progress=None if quiet else
                              (lambda m: status.update(f"section: {m}")))
        html = path.with_suffix(".html")
        if quiet:
            typer.echo(f"{html}\n{path}")
            return
        typer.echo(path.read_text(encoding="utf-8"))
        console.print(f"wrote {html} (open it in a browser: figures embedded), {path} and "
                      "its plots")
