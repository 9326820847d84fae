"""One scenario, one answer: every shipped scenario run through the CLI, the web API and a
one-point sweep gives the same figures (to 1e-9) and the same warnings.

Each face builds the scenario's job with :func:`fabricsim.jobs.job_from_scenario` and runs
it with :func:`fabricsim.jobs.run`; the CLI's report (recorded as the command runs) is the
reference: its ``to_dict()`` is what ``--json`` prints and what the web returns for the
design, its ``to_row()`` what the sweep stores. The sweep must also build the job the CLI
ran, value for value.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabricsim import jobs
from fabricsim.cli.app import main
from fabricsim.results import jsonable
from fabricsim.scenario.loader import load_scenario, shipped_scenarios

pytest.importorskip("fastapi", reason="the web extra is not installed")

SHIPPED = shipped_scenarios()


def _same(a: Any, b: Any, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` (JSON-ready) differ: floats beyond 1e-9 relative."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only in one" for k in set(a) ^ set(b)]
        return out + [d for k in set(a) & set(b) for d in _same(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _same(x, y, f"{where}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or not math.isclose(float(a), float(b), rel_tol=1e-9,
                                                      abs_tol=1e-15):
            return [f"{where}: {a!r} against {b!r}"]
        return []
    return [] if a == b else [f"{where}: {a!r} against {b!r}"]


#: What a report says about the machine that ran it, not about the cluster: the wall
#: time a packet run took. Left out of the comparison.
MACHINE = frozenset({"wall_s"})


def _norm(d: Any) -> Any:
    """``d`` as JSON would carry it, without what depends on the machine."""
    def drop(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: drop(v) for k, v in x.items() if k not in MACHINE}
        if isinstance(x, list):
            return [drop(v) for v in x]
        return x
    return drop(json.loads(json.dumps(jsonable(d))))


@pytest.fixture(scope="module")
def web_answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every shipped scenario's job of its kind, submitted to the web API at once; the
    result of each (its first design's answer), by scenario."""
    from fastapi.testclient import TestClient

    from fabricsim.web.app import create_app
    from fabricsim.web.limits import Limits

    store = tmp_path_factory.mktemp("web") / "web.duckdb"
    app = create_app(store=store, limits=Limits(workers=2, max_wall_s=900.0))
    with TestClient(app) as c:
        ids = {}
        for name, text in SHIPPED.items():
            kind = jobs.primary_kind(load_scenario(name))
            r = c.post("/api/jobs", json={"kind": kind, "designs": [text]})
            assert r.status_code == 202, (name, r.json())
            ids[name] = (kind, r.json()["id"])
        out: dict[str, Any] = {}
        deadline = time.monotonic() + 1200
        for name, (kind, jid) in ids.items():
            while True:
                row = c.get(f"/api/jobs/{jid}").json()
                if row["status"] in ("done", "failed") or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert row["status"] == "done", (name, row.get("error"))
            from fabricsim.web.jobs import ANSWER_KEY

            design = c.get(f"/api/jobs/{jid}/result.json").json()["designs"][0]
            out[name] = design[ANSWER_KEY.get(kind, kind)]
        yield out


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_cli_the_web_and_a_sweep_give_one_answer(
        name: str, web_answers: dict[str, Any], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fabricsim.sweeps import read_results, run_sweep, sweep_spec

    sc = load_scenario(name)
    kind = jobs.primary_kind(sc)
    ran: list[Any] = []
    reports: list[Any] = []
    run = jobs.run

    def recorded(job: Any, *args: Any, **kw: Any) -> Any:
        ran.append(job)
        reports.append(run(job, *args, **kw))
        return reports[-1]

    monkeypatch.setattr(jobs, "run", recorded)
    # the ep job's face is bench ep, a collective's bench scenario (its own collective)
    command = {"ep": ["bench", "ep"], "bench": ["bench", "scenario"]}.get(kind, [kind])
    assert main([*command, name, "--json"]) == 0
    out = capsys.readouterr().out
    printed = {"rows": [json.loads(x) for x in out.splitlines()]} if kind in ("ep", "bench") \
        else json.loads(out)
    monkeypatch.undo()
    assert len(reports) == 1
    report = reports[0]
    answer = _norm(report.to_dict())
    if kind == "ep":  # bench ep --json prints the rows, rounded, a column set of each
        rows = [{k: r[k] for k in p} for r, p in zip(answer["rows"], printed["rows"],
                                                      strict=True)]
        assert all(math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-4)
                   if isinstance(a, float) else a == b
                   for r, p in zip(rows, printed["rows"], strict=True)
                   for a, b in ((r[k], p[k]) for k in p))
    elif kind == "bench":  # bench --json prints one row per size, times rounded to 4 places
        curve = answer["curves"][0]
        assert [r["size_bytes"] for r in printed["rows"]] == curve["sizes"]
        assert all(math.isclose(r["time_us"], t, rel_tol=1e-6, abs_tol=1e-4)
                   for r, t in zip(printed["rows"], curve["time_us"], strict=True))
        assert [f"{r['algorithm']}/{r['protocol']}".lower() for r in printed["rows"]] == \
            curve["choice"]
    else:
        assert not _same(_norm(printed), answer), _same(_norm(printed), answer)[:5]
    # the web: the same report, and what the page draws beside it
    web = _norm(web_answers[name])
    extra = set(web) - set(answer)
    assert extra <= {"nvlink_kinds", "exposed_nvlink_s", "exposed_scale_out_s"}, extra
    if kind == "bench":  # the page draws every algorithm's curve beside NCCL's choice
        assert web["curves"][0]["name"] == answer["curves"][0]["name"] == "auto"
        diffs = _same(web["curves"][0], answer["curves"][0])
        assert not diffs, diffs[:5]
        assert set(answer["warnings"]) <= set(web["warnings"])
    else:
        diffs = _same({k: web[k] for k in answer}, answer)
        assert not diffs, diffs[:5]
        assert web["warnings"] == answer["warnings"]
    # a one-point sweep: the report's row
    spec = sweep_spec({"name": name, "kind": kind, "scenario": yaml.safe_load(SHIPPED[name]),
                       "axes": {"seed": [sc.seed]}})
    # The sweep must build the very job the CLI ran (asserted). A kind that builds its own
    # fabrics (packet, scale, plan) is then a pure function of that job, already run twice
    # above (the CLI here, the web in its worker processes, with equal answers): the sweep
    # is handed the CLI's report instead of a third packet simulation, and what is checked
    # below is how it stores and reads back the report's row.
    swept: list[Any] = []

    def same_job(job: Any, fabric: Any = None, *args: Any, **kw: Any) -> Any:
        swept.append(job)
        if jobs.kind_of(kind).own_fabric and fabric is None and job == ran[0]:
            return report
        return run(job, fabric, *args, **kw)

    monkeypatch.setattr(jobs, "run", same_job)
    counts = run_sweep(spec, tmp_path / "s.duckdb", workers=1)
    monkeypatch.undo()
    assert counts["run"] == 1 and counts["failed"] == 0, counts
    assert swept == ran, "the sweep built another job than the CLI ran"
    row = read_results(tmp_path / "s.duckdb").iloc[0].to_dict()
    want = _norm(report.to_row())
    assert want, "a report's row has figures"
    for k, v in want.items():
        got = row.get(k)  # a column every row leaves empty is not stored
        if isinstance(v, float) or v is None:
            assert (v is None and (got is None or got != got)) or \
                math.isclose(float(got), v, rel_tol=1e-9, abs_tol=1e-15), (k, got, v)
        else:
            assert got == v or (isinstance(v, int) and float(got) == v), (k, got, v)
    assert (row.get("warnings") or "") == "; ".join(answer["warnings"])
