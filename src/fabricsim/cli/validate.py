"""``fabricsim validate``: check a scenario file without running it.

Every section is checked by the module that will read it
(:func:`fabricsim.jobs.check.check_sections`, which the web app's live validation
uses too): the cluster is built, the collective's name and sizes are parsed, faults are
resolved to links of the built fabric, the ``training:`` section to a model and a
parallel layout, the ``packet:`` section to a packet configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabricsim.cli.common import console
from fabricsim.jobs.check import check_sections
from fabricsim.scenario import load_scenario


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    ) -> None:
        """Validate a scenario file: schema, presets, sections, and that its cluster builds."""
        sc = load_scenario(scenario)
        parts = check_sections(sc, base_dir=scenario.parent if scenario.exists() else None)
        console.print(f"ok: {scenario}: " + ", ".join(parts))
