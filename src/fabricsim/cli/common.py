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


#: Image formats ``--plot`` writes (matplotlib's raster and vector outputs).
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_out_file(path: Path | None, flag: str,
                   suffixes: tuple[str, ...] = PLOT_SUFFIXES) -> Path | None:
    """A file a command is about to write: not a folder, with one of ``suffixes``; its
    folder is created when missing. Raises :class:`~fabricsim.errors.ConfigError`
    naming ``flag`` (exit 2) before any work is done.

    >>> check_out_file(None, "--plot") is None
    True
    >>> check_out_file(Path("chart.txt"), "--plot")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: --plot: chart.txt: give a file ending in .png, .svg or .pdf
    """
    from fabricsim.errors import ConfigError

    if path is None:
        return None
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; give a file name in it, e.g. "
                          f"{path / ('out' + suffixes[0])}", field=flag)
    if suffixes and path.suffix.lower() not in suffixes:
        names = ", ".join(suffixes[:-1]) + (" or " if len(suffixes) > 1 else "") + \
            suffixes[-1]
        raise ConfigError(f"{path}: give a file ending in {names}", field=flag)
    _make_folder(path.parent, flag)
    return path


def check_out_dir(path: Path | None, flag: str) -> Path | None:
    """A folder a command is about to write into: created when missing; an existing
    file of that name is an error naming ``flag`` (exit 2), never overwritten.

    >>> check_out_dir(None, "--out") is None
    True
    """
    from fabricsim.errors import ConfigError

    if path is None:
        return None
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path} is a file, not a folder; give a folder name (it is "
                          f"created if missing)", field=flag)
    _make_folder(path, flag)
    return path


def _make_folder(path: Path, flag: str) -> None:
    from fabricsim.errors import ConfigError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"cannot create folder {path}: part of that path is a file",
                          field=flag) from None
    except PermissionError:
        raise ConfigError(f"cannot create folder {path}: permission denied",
                          field=flag) from None
