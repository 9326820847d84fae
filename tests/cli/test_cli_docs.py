"""docs/cli.md documents every command the app has (issue 16): a command added without a
row in the command table fails here."""

from __future__ import annotations

import re
from pathlib import Path

from fabricsim.cli.app import app

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _commands() -> set[str]:
    import typer.main

    group = typer.main.get_command(app)
    return set(group.commands)  # type: ignore[attr-defined]


def test_every_command_has_a_row_in_the_table() -> None:
    rows = set(re.findall(r"^\| `([a-z-]+)` \|", DOC.read_text(encoding="utf-8"), re.M))
    commands = _commands()
    assert commands, "no commands found"
    assert commands <= rows, f"undocumented: {sorted(commands - rows)}"
    assert rows & commands == commands


def test_every_command_has_help() -> None:
    import typer.main

    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        assert (cmd.help or "").strip(), f"{name} has no help text"
