"""``fabricsim presets``: list systems, scale-out fabrics, topologies, scenarios and
models."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from fabricsim.catalog import get_catalog
from fabricsim.cli.common import JsonOpt, console, print_json
from fabricsim.errors import ConfigError

KINDS = ("systems", "fabrics", "topologies", "scenarios", "models", "gpus", "switches", "nics",
         "links")


def register(app: typer.Typer) -> None:
    @app.command("presets")
    def presets(
        kind: Annotated[str | None, typer.Argument(
            help="Only this kind: systems, fabrics, topologies, scenarios, models, gpus, "
            "switches, nics, links."
        )] = None,
        json_out: JsonOpt = False,
    ) -> None:
        """List the preset names you can use: systems, fabrics, topologies, scenarios,
        models (and parts)."""
        cat = get_catalog()
        if kind is not None and kind not in KINDS:
            from fabricsim.errors import did_you_mean

            raise ConfigError(f"unknown preset kind {kind!r}; {did_you_mean(kind, KINDS)}",
                              field="kind")
        wanted = [kind] if kind else ["systems", "fabrics", "topologies", "scenarios",
                                      "models"]
        data: dict[str, list[dict[str, object]]] = {}
        if "systems" in wanted:
            data["systems"] = [
                {"name": s.name, "gpu": s.gpu, "gpus": s.gpus,
                 "nvlink_domain_gpus": s.nvlink_domain_gpus, "nics": s.nics,
                 "nic_gbit_s": s.nic_gbit_s, "default_fabric": s.default_fabric,
                 "default_topology": s.default_topology, "description": s.description}
                for s in cat.systems.values()]
        if "fabrics" in wanted:
            data["fabrics"] = [
                {"name": f.name, "transport": f.transport, "port_gbit_s": f.port_gbit_s,
                 "switch": f.switch, "nic": f.nic, "lossless": f.lossless,
                 "flow_control": f.flow_control, "sharp": f.sharp}
                for f in cat.fabrics.values()]
        if "topologies" in wanted:
            data["topologies"] = [{"name": t.name, "description": t.description}
                                  for t in cat.topologies.values()]
        if "scenarios" in wanted:
            from fabricsim.scenario.loader import load_scenario_text, shipped_scenarios

            data["scenarios"] = [
                {"name": name, "description": load_scenario_text(text, name).description}
                for name, text in shipped_scenarios().items()]
        if "models" in wanted:
            from fabricsim.workloads.models import PRESETS

            data["models"] = [
                {"name": m.name, "layers": m.layers, "hidden": m.hidden,
                 "params_b": round(m.params / 1e9, 1),
                 "active_b": round(m.active_params / 1e9, 1),
                 "experts": f"{m.experts} top-{m.top_k}" if m.is_moe else "-"}
                for m in PRESETS.values()]
        for other in ("gpus", "switches", "nics", "links"):
            if other in wanted:
                data[other] = [{"name": name, "source": spec.source}
                               for name, spec in getattr(cat, other).items()]
        if json_out:
            print_json(data)
            return
        for section, rows in data.items():
            if not rows:
                continue
            table = Table(title=section, title_justify="left", show_lines=False)
            cols = [c for c in rows[0]
                    if c != "description" or section in ("topologies", "scenarios")]
            for c in cols:
                table.add_column(c)
            for r in rows:
                table.add_row(*[str(r[c]) for c in cols])
            console.print(table)
