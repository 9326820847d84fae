"""The documentation's examples run, so the docs cannot drift from the code.

* every ``fabricsim ...`` line of a ```` ```sh ```` block in README.md and docs/*.md runs
  through the CLI entry point and must exit 0 (paths into the repository resolve against
  it; everything a command writes goes to a temporary folder); ``fabricsim serve``, which
  runs until stopped, only has its options parsed;
* ``>>>`` examples in the same files run as doctests (``--doctest-glob`` in pyproject).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from fabricsim.cli.app import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def shell_examples() -> list[tuple[str, list[str]]]:
    """(where, argv) for every fabricsim command line in a sh block."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) not in ("sh", "bash", "console"):
                continue
            line0 = text[: m.start()].count("\n") + 2
            for i, line in enumerate(m.group(2).replace("\\\n", " ").splitlines()):
                words = shlex.split(line, comments=True)
                if words[:1] == ["fabricsim"]:
                    out.append((f"{doc.name}:{line0 + i}", words[1:]))
    return out


EXAMPLES = shell_examples()


def test_the_docs_have_shell_examples() -> None:
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("argv", [a for _, a in EXAMPLES], ids=[w for w, _ in EXAMPLES])
def test_shell_example_runs(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    args = [str(ROOT / a) if "/" in a and (ROOT / a).exists() else a for a in argv]
    if args[:1] == ["serve"]:  # runs until stopped: its options are parsed, not run
        import typer.main

        from fabricsim.cli.app import app

        cmd = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
        cmd.make_context("serve", args[1:])
        return
    code = main(args)
    err = capsys.readouterr().err
    assert code == 0, err


def test_python_examples_are_doctests() -> None:
    """A ```python block is a doctest (``>>>``), so that it runs and its output is checked."""
    loose = []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) == "python" and not m.group(2).lstrip().startswith(">>>"):
                loose.append(f"{doc.name}:{text[: m.start()].count(chr(10)) + 1}")
    assert not loose, f"python blocks that never run: {loose}"
