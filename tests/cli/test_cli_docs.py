"""docs/cli.md documents every command the app has (issue 16): a command added without a
row in the command table, or without its section in "Every command and option", fails
here; so does an option without its row and example, or a row for an option that is
gone. Every example is parsed by the command it documents."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest

from fabricsim.cli.app import app

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
TEXT = DOC.read_text(encoding="utf-8")
REFERENCE = TEXT[TEXT.index("## Every command and option"):]


def _commands() -> dict[str, Any]:
    import typer.main

    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


COMMANDS = _commands()


def _row(p: Any) -> str:
    """A draft table row for parameter ``p`` (the example left to write)."""
    if p.param_type_name == "option":
        names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
    else:
        names = f"`{p.name.upper()}`"
    text = " ".join((getattr(p, "help", None) or "").split()).replace("|", "\\|")
    default = "" if p.default in (None, False, (), []) else f"`{p.default}`"
    return f"| {names} | {text} | {default} | `EXAMPLE` |"


def _draft(name: str) -> str:
    """A section to paste into docs/cli.md for command ``name`` (examples to fill in)."""
    cmd = COMMANDS[name]
    first = " ".join((cmd.help or "").split("\n\n")[0].split())
    return "\n".join([f"### fabricsim {name}", "", first, "",
                      f"Example: `fabricsim {name} ...`", "",
                      "| option | what it does | default | example |", "|---|---|---|---|",
                      *(_row(p) for p in cmd.params)])


def _section(name: str) -> str:
    m = re.search(rf"^### fabricsim {re.escape(name)}\n(.*?)(?=^### |\Z)", REFERENCE,
                  re.M | re.S)
    assert m, (f"docs/cli.md has no '### fabricsim {name}' section under 'Every command "
               f"and option'; a draft to complete:\n\n{_draft(name)}\n")
    return m.group(1)


def _rows(name: str) -> list[tuple[list[str], str]]:
    """(names in the first column, example) of each row of a command's table."""
    out = []
    for line in _section(name).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| `") and len(cells) == 4:
            out.append((re.findall(r"`([^`]+)`", cells[0]), cells[3].strip("`")))
    return out


def _names(cmd: Any) -> set[str]:
    """The command's options and arguments, but the hidden ones (old names still taken,
    each documented beside its new name)."""
    out: set[str] = set()
    for p in cmd.params:
        if getattr(p, "hidden", False):
            continue
        if p.param_type_name == "option":
            out |= {*p.opts, *p.secondary_opts}
        else:
            out.add(p.name.upper())
    return out


def _parse(name: str, args: list[str]) -> None:
    """Parse ``args`` as the command would (types, choices, counts); nothing runs."""
    cmd = COMMANDS[name]
    with cmd.make_context(name, args) as ctx:
        assert ctx.params is not None


def test_every_command_has_a_row_in_the_table() -> None:
    rows = set(re.findall(r"^\| `([a-z-]+)` \|", TEXT, re.M))
    assert COMMANDS, "no commands found"
    assert set(COMMANDS) <= rows, f"undocumented: {sorted(set(COMMANDS) - rows)}"


def test_every_command_has_help() -> None:
    for name, cmd in COMMANDS.items():
        assert (cmd.help or "").strip(), f"{name} has no help text"


def test_no_section_for_a_command_that_is_gone() -> None:
    documented = set(re.findall(r"^### fabricsim ([a-z-]+)$", REFERENCE, re.M))
    assert documented == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_has_a_row_and_an_example(name: str) -> None:
    rows = _rows(name)
    documented = {n for names, _ in rows for n in names}
    have = _names(COMMANDS[name])
    missing = have - documented
    assert not missing, f"{name}: options without a row; drafts:\n" + "\n".join(
        _row(p) for p in COMMANDS[name].params
        if ({*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())}
            | ({p.name.upper()} if p.param_type_name == "argument" else set())) & missing)
    assert documented - have == set(), f"{name}: rows for options it does not have"
    required = [p for p in COMMANDS[name].params
                if p.param_type_name == "argument" and p.required]
    for names, example in rows:
        assert example, f"{name} {names[0]}: no example"
        words = shlex.split(example)
        if names[0].startswith("-"):
            assert words[0] in names, f"{name}: the example of {names[0]} uses {words[0]}"
            args = ["x"] * len(required) + words
        else:
            args = words + ["x"] * max(len(required) - 1, 0)
        try:
            _parse(name, args)
        except click.ClickException as e:  # pragma: no cover - the message is the point
            pytest.fail(f"{name}: example {example!r} does not parse: {e.format_message()}")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_whole_example(name: str) -> None:
    m = re.search(r"^Example: `(fabricsim [^`]+)`$", _section(name), re.M)
    assert m, f"{name}: no 'Example: `fabricsim {name} ...`' line"
    assert "..." not in m.group(1), f"{name}: the example is still a draft"
    words = shlex.split(m.group(1))
    assert words[1] == name
    _parse(name, words[2:])


def test_json_is_described_per_command() -> None:
    """bench and compare stream one object per row; the others print one document."""
    for name in ("bench", "compare"):
        assert "| `--json` | One JSON object per row. |" in _section(name)
    assert "one JSON object per line" in TEXT[:800]
