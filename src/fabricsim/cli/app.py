"""The ``fabricsim`` command line: a typer app whose commands live in sibling modules.

Each command module exposes ``register(app)``. Errors the library raises on purpose
(:class:`~fabricsim.errors.FabricsimError`) become a one-paragraph message on stderr and
exit code 2; nothing else is caught, so a bug still shows its traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version

import typer

from fabricsim.errors import DeprecatedName, FabricsimError

app = typer.Typer(
    name="fabricsim",
    help="Simulate and plan the networks that GPU clusters train and serve models on.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version() -> str:
    try:
        return version("fabricsim")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"fabricsim {_version()}")
        raise typer.Exit()


#: Commands that run a scenario as written: NCCL's variables in the shell do not reach
#: them (``bench`` reads them; ``compare``, ``diagnose`` and ``calibrate`` take a log's).
SCENARIO_COMMANDS = frozenset({"sweep", "simulate", "train", "scale", "cluster",
                               "plan-parallel", "plan", "infer", "packet", "report",
                               "serve", "demo"})


#: Those of them that run a scenario's collective sweep, which takes NCCL's variables in
#: its ``env:`` (``sweep`` of kind bench, ``report``'s collective section, the web app's).
ENV_COMMANDS = frozenset({"sweep", "simulate", "report", "serve"})


def nccl_variables_note(command: str | None, environ: Mapping[str, str]) -> str:
    """A warning where NCCL variables that change time are set in the shell of a command
    that runs a scenario as written (``""``: none).

    >>> nccl_variables_note("sweep", {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"})[:46]
    'warning: NCCL_ALGO is set in the environment, '
    >>> nccl_variables_note("bench", {"NCCL_ALGO": "Ring"})
    ''
    """
    if command not in SCENARIO_COMMANDS:
        return ""
    from fabricsim.collectives.nccl_env import NO_EFFECT

    names = sorted(k for k in environ if k.startswith("NCCL_") and k not in NO_EFFECT)
    if not names:
        return ""
    where = ("a scenario's collective sweep takes them as collective: {env: {NAME: value}}"
             if command in ENV_COMMANDS else "its model runs NCCL's own choice")
    return (f"warning: {', '.join(names)} {'is' if len(names) == 1 else 'are'} set in the "
            f"environment, but only `fabricsim bench` reads NCCL's variables from the shell: "
            f"{command} runs the scenario as written (unset them; {where})")


@app.callback()
def _root(ctx: typer.Context, version: bool = typer.Option(
        False, "--version", "-V", help="Print fabricsim's version and exit.",
        callback=_show_version, is_eager=True)) -> None:
    """Simulate and plan the networks that GPU clusters train and serve models on."""
    note = nccl_variables_note(ctx.invoked_subcommand, os.environ)
    if note:
        typer.echo(note, err=True)

#: Command modules, in the order their commands appear in --help.
COMMAND_MODULES = (
    "presets", "describe", "validate", "bench", "compare", "diagnose", "calibrate", "sweep",
    "simulate", "train",
    "scale", "cluster",
    "plan_parallel", "plan", "infer", "packet", "report", "serve", "demo",
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"fabricsim.cli.{_name}").register(app)


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: object = None, line: str | None = None) -> None:
    """fabricsim's own warnings (an old flag or field name) as one line on stderr."""
    if issubclass(category, DeprecatedName):
        typer.echo(f"warning: {message}", err=True)
    else:
        _default_show(message, category, filename, lineno, file, line)  # type: ignore[arg-type]


_default_show = warnings.showwarning


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    warnings.showwarning = _show_warning
    try:
        rv = app(args=argv, standalone_mode=False)
        if isinstance(rv, int) and not isinstance(rv, bool):
            return rv
    except FabricsimError as e:
        typer.echo(f"error: {e}", err=True)
        return 2
    except MemoryError as e:  # past the up-front estimates (fabricsim.backends.memory)
        what = f" ({e})" if str(e) else ""
        typer.echo("error: out of memory" + what + ": the run needs more memory than this "
                   "machine has free; shrink it (fewer servers or ranks, fewer queue pairs, "
                   "the analytic backend instead of flow or packet) or run it on a larger "
                   "machine", err=True)
        return 2
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except SystemExit as e:
        return int(e.code or 0)
    except typer.TyperException as e:  # usage errors: bad option, bad value
        show = getattr(e, "show", None)
        if show is not None:
            show()
        else:
            typer.echo(f"error: {e}", err=True)
        code = getattr(e, "exit_code", 2)
        return int(code) if isinstance(code, int) else 2
    return 0


def run() -> None:  # pragma: no cover - console script shim
    sys.exit(main())
