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
    ) -> None:
        """Run the 256-GPU reference design (IB NDR vs RoCEv2) and write out/report.md."""
        if section:
            from fabricsim.errors import unknown

            for s in section:
                if s not in SECTIONS:
                    raise unknown("section", s, SECTIONS, field="--section")
        with console.status("building the report") as status:
            path = write_demo(out, sections=section,
                              progress=lambda m: status.update(f"section: {m}"))
        typer.echo(path.read_text(encoding="utf-8"))
        console.print(f"wrote {path} and its plots")
