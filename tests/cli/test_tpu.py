"""TPU slices through every face: describe, bench, train and the web API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run
from fastapi.testclient import TestClient

from fabricsim.web.app import create_app
from fabricsim.web.limits import Limits


def test_describe_a_twisted_slice(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", "--system", "tpu-v5p", "--nodes", "32",
                       "--ici-twisted", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["ici"]["slice"] == [4, 4, 8] and d["ici"]["twisted"] is True
    assert d["ici"]["bisection_gbps"] == pytest.approx(6400.0)
    levels = {lv["name"]: lv["bandwidth_gbps"] for lv in d["hierarchy"]}
    assert levels["ici"] == pytest.approx(600.0)  # 6 ports x 100 GB/s one way


def test_bench_on_a_slice_runs_xla(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "bench", "all_reduce", "--system", "tpu-v6e", "--nodes", "32",
                       "-b", "1G", "-e", "1G", "--json")
    assert code == 0
    row = json.loads(out.splitlines()[-1]) if out.strip().startswith("{") else json.loads(out)
    text = json.dumps(row)
    assert "xla_torus" in text


@pytest.mark.parametrize(("args", "field"), [
    (["--ici-slice", "4x6x4", "--nodes", "24"], "--ici-slice"),
    (["--ici-slice", "8x8x8", "--nodes", "128", "--ici-twisted"], "--ici-twisted"),
])
def test_bad_slices_exit_2_naming_the_flag(capsys: pytest.CaptureFixture[str],
                                           args: list[str], field: str) -> None:
    code, _, err = run(capsys, "bench", "all_reduce", "--system", "tpu-v5p", *args)
    assert code == 2 and field in err and "Traceback" not in err


def test_train_on_a_slice(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "train", "--system", "tpu-v5p", "--nodes", "16", "--model",
                       "llama3-8b", "--tp", "4", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["step_time_s"] > 0 and 0 < d["mfu"] < 1
    assert any("tpu" in w for w in d["warnings"])  # no published TPU run: said so


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(store=tmp_path / "web.duckdb", limits=Limits(workers=1))
    with TestClient(app) as c:
        yield c


def test_the_web_app_takes_a_slice(client: TestClient) -> None:
    presets = client.get("/api/presets").json()
    assert "tpu-v5p" in json.dumps(presets)
    ok = client.post("/api/validate", json={"scenario": (
        "cluster:\n  system: tpu-v5p\n  nodes: 32\n  params:\n    ici_slice: 4x4x8\n")})
    assert ok.json()["ok"] is True
    bad = client.post("/api/validate", json={"scenario": (
        "cluster:\n  system: tpu-v5p\n  nodes: 32\n  params:\n    ici_slice: 4x4x6\n")})
    body = bad.json()
    assert body["ok"] is False and body["error"]["field"] == "cluster.params.ici_slice"
