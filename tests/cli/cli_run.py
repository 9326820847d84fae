"""Run the CLI in-process for a test: exit code, stdout and stderr."""

from __future__ import annotations

import pytest

from fabricsim.cli.app import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``fabricsim ARGS``: (exit code, what it printed, what it said on stderr)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err
