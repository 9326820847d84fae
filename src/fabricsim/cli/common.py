"""Pieces every CLI command shares: cluster options, scenario loading, output helpers.

Commands take the cluster either from a scenario file or from the flags of ``describe``
(``--system --nodes --gpus-per-node --fabric --topology --oversubscription``); flags given
on the command line override the file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fabricsim.scenario import ClusterSpec, Scenario, load_scenario
from fabricsim.scenario.fabric import fabric_from_cluster as fabric_from_cluster
from fabricsim.scenario.fabric import fabric_from_scenario as fabric_from_scenario

#: Tables keep their columns when output goes to a file or a pipe (rich would use 80).
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)

ScenarioArg = Annotated[
    Path | None, typer.Argument(help="Scenario YAML file (optional if flags are given).")
]
SystemOpt = Annotated[
    str | None, typer.Option("--system", "-s", help="System preset, e.g. dgx-h100.")
]
NodesOpt = Annotated[int | None, typer.Option(
    "--nodes", help="Number of servers (never -n, which nccl-tests uses for iterations).")]
GpusPerNodeOpt = Annotated[
    int | None, typer.Option("--gpus-per-node", help="GPUs used per server.")
]
FabricOpt = Annotated[
    str | None, typer.Option("--fabric", help="Scale-out fabric preset, e.g. ib-ndr, roce-400g.")
]
TopologyOpt = Annotated[
    str | None,
    typer.Option("--topology", help="fat-tree, rail-optimized, dragonfly or torus3d."),
]
OversubOpt = Annotated[
    float | None, typer.Option("--oversubscription", help="Leaf down:up ratio (1 = non-blocking).")
]
NetRoutingOpt = Annotated[str | None, typer.Option(
    "--routing", help="Scale-out routing: dmodk (InfiniBand tables; default on IB/EFA), "
    "ecmp (per-flow hashing; default on Ethernet) or adaptive (IB adaptive routing, "
    "Spectrum-X/UEC spraying; fat-tree and rail topologies).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def scenario_with_overrides(scenario: Path | None, *, system: str | None = None,
                            nodes: int | None = None, gpus_per_node: int | None = None,
                            fabric: str | None = None, topology: str | None = None,
                            oversubscription: float | None = None,
                            routing: str | None = None) -> Scenario:
    """Load ``scenario`` (or an empty one) and apply cluster flags on top (``routing`` goes
    to ``cluster.params.routing``)."""
    sc = load_scenario(scenario) if scenario is not None else Scenario()
    over: dict[str, Any] = {k: v for k, v in {
        "system": system, "nodes": nodes, "gpus_per_node": gpus_per_node, "fabric": fabric,
        "topology": topology, "oversubscription": oversubscription}.items() if v is not None}
    if over or routing is not None:
        data = sc.cluster.model_dump()
        data.update(over)
        if routing is not None:
            data["params"] = {**(data.get("params") or {}), "routing": routing}
        from fabricsim.scenario.loader import validate_section

        cluster = validate_section(ClusterSpec, data, "cluster")
        sc = sc.model_copy(update={"cluster": cluster})
    return sc


def print_json(obj: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, default=_default) + "\n")


def print_json_line(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, default=_default) + "\n")


def _default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
