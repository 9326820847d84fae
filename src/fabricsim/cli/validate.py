"""``fabricsim validate``: check a scenario file without running it.

Every section is checked by the module that will read it: the cluster is built, the
collective's name and sizes are parsed, faults are resolved to links of the built fabric,
the ``training:`` section to a model and a parallel layout, the ``packet:`` section to a
packet configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabricsim.cli.common import console, fabric_from_scenario
from fabricsim.scenario import Scenario, load_scenario
from fabricsim.units import parse_size


def check_scenario(sc: Scenario) -> list[str]:
    """Check every section of ``sc``; returns what was found (raises on the first error)."""
    fab = fabric_from_scenario(sc)
    parts = [f"{fab.n_gpus} GPUs on {fab.info.servers} × {fab.info.system}",
             f"{fab.info.fabric} {fab.info.topology}"]
    if sc.collective is not None:
        from fabricsim.collectives.tuner import check_collective

        coll = check_collective(sc.collective.collective)
        lo = parse_size(sc.collective.minbytes, field="collective.minbytes")
        hi = parse_size(sc.collective.maxbytes, field="collective.maxbytes")
        if lo > hi:
            from fabricsim.errors import ConfigError

            raise ConfigError(f"minbytes ({lo}) is larger than maxbytes ({hi})",
                              field="collective.minbytes")
        parts.append(f"collective {coll}")
    if sc.training is not None:
        from fabricsim.workloads.spec import training_from_section

        model, _cfg, _extra = training_from_section(sc.training)
        parts.append(f"training {model.name}")
    if sc.packet is not None:
        from fabricsim.backends.packet.config import parse_packet_config

        parse_packet_config(sc.packet)
        parts.append("packet settings")
    if sc.faults:
        from fabricsim.backends.flow import plan_faults

        plan_faults(fab, sc.faults)
        parts.append(f"{len(sc.faults)} fault(s)")
    if sc.background:
        parts.append(f"{len(sc.background)} background flow set(s)")
    return parts


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    ) -> None:
        """Validate a scenario file: schema, presets, sections, and that its cluster builds."""
        sc = load_scenario(scenario)
        parts = check_scenario(sc)
        console.print(f"ok: {scenario}: " + ", ".join(parts))
