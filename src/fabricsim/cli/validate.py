"""``fabricsim validate``: check a scenario file without running it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabricsim.cli.common import console, fabric_from_scenario
from fabricsim.scenario import load_scenario


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    ) -> None:
        """Validate a scenario file: schema, presets and that its cluster can be built."""
        sc = load_scenario(scenario)
        fab = fabric_from_scenario(sc)
        parts = [f"{fab.n_gpus} GPUs on {fab.info.servers} × {fab.info.system}",
                 f"{fab.info.fabric} {fab.info.topology}"]
        if sc.collective:
            parts.append(f"collective {sc.collective.collective}")
        if sc.training:
            parts.append("training")
        if sc.faults:
            parts.append(f"{len(sc.faults)} fault(s)")
        console.print(f"ok: {scenario}: " + ", ".join(parts))
