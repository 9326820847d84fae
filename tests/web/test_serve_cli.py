"""``fabricsim serve``: bad options exit 2 with the field; the server starts and answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fabricsim.cli.app import main


@pytest.mark.parametrize(("args", "words"), [
    (["--port", "0"], "--port must be 1..65535"),
    (["--workers", "0"], "--workers must be positive"),
    (["--max-wall", "-1"], "--max-wall must be positive"),
    (["--host", "192.0.2.1"], "--host"),
])
def test_bad_options(args: list[str], words: str, tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--store", str(tmp_path / "s.duckdb"), *args]) == 2
    assert words in capsys.readouterr().err


def test_a_store_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    assert main(["serve", "--store", str(bad)]) == 2
    assert "--store: cannot open the job store" in capsys.readouterr().err


def test_a_port_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["serve", "--port", str(port), "--store", str(tmp_path / "s.db")]) == 2
    assert "another program uses it" in capsys.readouterr().err


def test_serve_starts_and_answers(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("fabricsim")
    proc = subprocess.Popen([str(exe), "serve", "--port", str(port), "--workers", "1",
                             "--store", str(tmp_path / "web.duckdb"), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "fabricsim serve did not answer"
                time.sleep(0.2)
        assert r.json()["workers"] == 1
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert f"open http://127.0.0.1:{port}/" in out
    assert (tmp_path / "web.duckdb").exists()
