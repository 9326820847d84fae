"""Packaging a user can live with: version, completion, extras that fail clearly."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fabricsim.cli.app import main

ROOT = Path(__file__).resolve().parents[1]


def _run_without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where ``modules`` cannot be imported."""
    block = "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", "import sys\n" + block + code],
                          capture_output=True, text=True, timeout=300)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"fabricsim {version('fabricsim')}"


def test_completion_installs_for_bash(tmp_path: Path) -> None:
    # the shell named, not detected: detection reads the parent process, which is no
    # shell when the suite runs detached (the test then failed there, not in a terminal)
    env = {**os.environ, "HOME": str(tmp_path), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    exe = Path(sys.executable).with_name("fabricsim")
    out = subprocess.run([str(exe), "--install-completion", "bash"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / ".bash_completions" / "fabricsim.sh").is_file()
    # the shell asks the program for completions through this environment
    env.update(_FABRICSIM_COMPLETE="complete_bash", COMP_WORDS="fabricsim ben", COMP_CWORD="1")
    out = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["bench"]


def test_core_commands_run_without_the_extras() -> None:
    out = _run_without(["matplotlib", "pyarrow"], (
        "from fabricsim.cli.app import main\n"
        "rc = main(['bench', 'all_reduce', '-b', '1M', '-e', '1M', '--system', 'dgx-h100'])\n"
        "assert 'matplotlib' not in sys.modules or sys.modules['matplotlib'] is None\n"
        "raise SystemExit(rc)\n"))
    assert out.returncode == 0, out.stderr


def test_a_plot_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    out = _run_without(["matplotlib"], (
        "from fabricsim.cli.app import main\n"
        f"raise SystemExit(main(['bench', 'all_reduce', '-b', '1M', '-e', '2M', '--system', "
        f"'dgx-h100', '--plot', {str(tmp_path / 'b.png')!r}]))\n"))
    assert out.returncode == 2
    assert "pip install 'fabricsim[plot]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_tables_without_pyarrow_name_the_extra(tmp_path: Path) -> None:
    out = _run_without(["pyarrow"], (
        "from fabricsim.backends.flow.results import write_table\n"
        f"write_table({{'a': [1]}}, {str(tmp_path)!r}, 'x')\n"))
    assert out.returncode == 1 and "pip install 'fabricsim[io]'" in out.stderr


def test_dependencies_are_ranges_and_all_imported() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dep in meta["dependencies"]:
        assert "==" not in dep and ">=" in dep and "<" in dep, dep
    # every runtime dependency is imported somewhere in the package
    src = "\n".join(p.read_text() for p in (ROOT / "src" / "fabricsim").rglob("*.py"))
    for dep in meta["dependencies"]:
        name = dep.split(">")[0].split("<")[0].strip().lower()
        module = {"pyyaml": "yaml"}.get(name, name)
        assert f"import {module}" in src or f"from {module}" in src, f"{name} is never imported"
    lock = (ROOT / "constraints" / "ci.txt").read_text()
    for extra in ("plot", "io"):
        for dep in meta["optional-dependencies"][extra]:
            name = dep.split(">")[0].strip()
            assert f"{name}==" in lock, f"{name} is not locked for CI"
