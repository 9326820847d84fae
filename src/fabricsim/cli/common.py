"""Pieces every CLI command shares: cluster options, scenario loading, output helpers.

Commands take the cluster either from a scenario file or from the flags of ``describe``
(``--system --nodes --gpus-per-node --fabric --topology --oversubscription``); flags given
on the command line override the file.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from fabricsim.cli.options import CLUSTER
from fabricsim.scenario import Scenario
from fabricsim.scenario.cluster import fabric_from_cluster as fabric_from_cluster
from fabricsim.scenario.fabric import fabric_from_scenario as fabric_from_scenario

#: Tables keep their columns when output goes to a file or a pipe (rich would use 80).
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)

ScenarioArg = Annotated[
    Path | None, typer.Argument(help="Scenario YAML file (optional if flags are given).")
]
SystemOpt = CLUSTER.option("system")
NodesOpt = CLUSTER.option("nodes")
GpusPerNodeOpt = CLUSTER.option("gpus_per_node")
FabricOpt = CLUSTER.option("fabric")
TopologyOpt = CLUSTER.option("topology")
OversubOpt = CLUSTER.option("oversubscription")
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
FlowPrecisionOpt = Annotated[float, typer.Option(
    "--flow-precision", help="Flow backend: settle finishes within this fraction of a "
    "transfer's duration as one event (each ends at most that much late); 0 (default) is "
    "exact, 1e-3 makes a million-flow hashed all-to-all about 15x faster.")]


def check_flow_precision(value: float) -> float:
    """``--flow-precision`` checked by the flow backend's own rule
    (:func:`~fabricsim.backends.flow.backend.check_precision`); the default 0 needs no
    check, so the flow backend is not loaded for it."""
    if value == 0.0:
        return value
    from fabricsim.backends.flow.backend import check_precision

    return check_precision(value)


def scenario_with_overrides(scenario: Path | None, **flags: Any) -> Scenario:
    """Load ``scenario`` (or an empty one) and lay the cluster ``flags`` given (not None)
    over its cluster (:class:`~fabricsim.cli.options.ClusterFlags`)."""
    from fabricsim.cli.options import ClusterFlags, load

    return load(scenario, ClusterFlags.of({k: v for k, v in flags.items() if v is not None}))


def print_warnings(warnings: list[str]) -> None:
    """Every warning of a report, one line each, as every command prints them."""
    for w in warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")


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
    try:
        is_dir = path.is_dir()
    except OSError as e:  # a name too long, a loop of links
        raise _unwritable(path, e, flag) from None
    if is_dir:
        raise ConfigError(f"{path} is a folder; give a file name in it, e.g. "
                          f"{path / ('out' + suffixes[0])}", field=flag)
    if suffixes and path.suffix.lower() not in suffixes:
        names = ", ".join(suffixes[:-1]) + (" or " if len(suffixes) > 1 else "") + \
            suffixes[-1]
        raise ConfigError(f"{path}: give a file ending in {names}", field=flag)
    _make_folder(path.parent, flag)
    _probe_file(path, flag)
    return path


def _unwritable(path: Path, e: OSError, flag: str) -> Exception:
    from fabricsim.errors import ConfigError

    why = e.strerror or type(e).__name__
    return ConfigError(f"cannot write {path}: {why}; give a path in a folder you can write"
                       f"{' (and a shorter name)' if e.errno == errno.ENAMETOOLONG else ''}",
                       field=flag)


def _probe_file(path: Path, flag: str) -> None:
    """Open ``path`` for writing without changing it (removed again if it did not
    exist): a read-only folder, a name too long or a pseudo file system fails here,
    before the run, not after it."""
    try:
        existed = path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.close(fd)
        if not existed:
            path.unlink()
    except OSError as e:
        raise _unwritable(path, e, flag) from None


def check_out_dir(path: Path | None, flag: str) -> Path | None:
    """A folder a command is about to write into: created when missing; an existing
    file of that name is an error naming ``flag`` (exit 2), never overwritten.

    >>> check_out_dir(None, "--out") is None
    True
    """
    from fabricsim.errors import ConfigError

    if path is None:
        return None
    try:
        is_file = path.exists() and not path.is_dir()
    except OSError as e:
        raise _unwritable(path, e, flag) from None
    if is_file:
        raise ConfigError(f"{path} is a file, not a folder; give a folder name (it is "
                          f"created if missing)", field=flag)
    _make_folder(path, flag)
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise _unwritable(path, e, flag) from None
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
    except OSError as e:
        raise _unwritable(path, e, flag) from None
