"""The repository is self-contained: no tracked file names a machine's absolute path."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# built from pieces so that this file does not match itself
_DIRS = "|".join(["wo" + "rk", "ro" + "ot", "ho" + "me"])
ABSOLUTE = re.compile(r"(?<![\w.:/-])/(?:" + _DIRS + r")/[A-Za-z]")


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: nothing to check")
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_no_tracked_file_names_an_absolute_machine_path() -> None:
    hits = []
    for p in _tracked():
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary or unreadable: not prose or code
        for n, line in enumerate(text.splitlines(), 1):
            if ABSOLUTE.search(line) and "://" not in line:
                hits.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "absolute machine paths:\n" + "\n".join(hits)


def test_the_pattern_catches_what_it_should() -> None:
    assert ABSOLUTE.search("CSV = '/" + "work/shared/x.csv'")
    assert ABSOLUTE.search("see /" + "home/user/data")
    assert not ABSOLUTE.search("data/reference/measurements.csv")
    assert not ABSOLUTE.search("https://example.org/" + "home/page")


def test_reference_data_is_vendored() -> None:
    ref = ROOT / "data" / "reference"
    for name in ("measurements.csv", "measurements_2.csv", "README.md"):
        assert (ref / name).is_file(), name
