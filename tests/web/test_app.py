"""The web API: every route, its errors, and what a restart keeps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from web_designs import SMALL, TRAIN

from fabricsim.web.app import create_app
from fabricsim.web.limits import Limits


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(store=tmp_path / "web.duckdb", limits=Limits(workers=1))
    with TestClient(app) as c:
        yield c


def _wait(c: TestClient, jid: str) -> dict:
    events = []
    with c.stream("GET", f"/api/jobs/{jid}/events") as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        for line in s.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    assert events[-1]["status"] in ("done", "failed")
    prog = [e["progress"] for e in events]
    assert prog == sorted(prog) or events[-1]["status"] == "failed"
    return c.get(f"/api/jobs/{jid}").json()


def test_health_presets_and_shipped_scenarios(client: TestClient) -> None:
    h = client.get("/api/health").json()
    assert h["status"] == "ok" and h["workers"] == 1
    p = client.get("/api/presets").json()
    assert "dgx-h100" in p["systems"] and "ib-ndr" in p["fabrics"]
    assert "flow-degraded-link" in p["scenarios"] and "llama3-70b" in p["models"]
    r = client.get("/api/scenarios/flow-degraded-link")
    assert r.status_code == 200 and "faults:" in r.text
    r = client.get("/api/scenarios/flow-degraded-lnk")
    assert r.status_code == 404 and "flow-degraded-link" in r.json()["detail"]["message"]
    assert client.get("/api/scenarios/..%2F..%2Fetc%2Fpasswd").status_code in (404, 422)


def test_the_page_and_its_assets_are_served_locally(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert "http" not in page.text.replace("http-equiv", "")  # no outside assets
    for name in ("app.js", "app.css", "plotly.js"):
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and len(r.content) > 1000
    assert client.get("/static/secret.py").status_code in (404, 422)


@pytest.mark.parametrize(("text", "field", "line"), [
    ("cluster:\n  system: dgx-h100\n  nodes: -2\n", "cluster.nodes", 3),
    ("cluster:\n  nodes: 2\ntraining:\n  model: llama3-8b\n  tp: x\n", "training.tp", 5),
    ("cluster:\n  nodes: 2\n  fabric: [\n", None, 4),
    ("cluster:\n  nodes: 2\n  fabrik: ib-ndr\n", "cluster.fabrik", 3),
    # an NCCL release the model cannot read, and one YAML read as a number
    ("cluster:\n  nodes: 2\ncollective:\n  nccl_version: \"3.1\"\n",
     "collective.nccl_version", 4),
    ("cluster:\n  nodes: 2\ncollective:\n  nccl_version: 2.30\n",
     "collective.nccl_version", 4),
])
def test_validate_names_field_and_line(client: TestClient, text: str, field: str | None,
                                       line: int) -> None:
    r = client.post("/api/validate", json={"scenario": text})
    body = r.json()
    assert r.status_code == 200 and body["ok"] is False
    assert body["error"]["line"] == line
    if field is not None:
        assert body["error"]["field"] == field


def test_validate_ok_reports_what_it_is_and_the_controls(client: TestClient) -> None:
    body = client.post("/api/validate", json={"scenario": TRAIN, "kind": "train"}).json()
    assert body["ok"] and body["summary"][0] == "16 GPUs on 2 × dgx-h100"
    assert body["fields"]["cluster.nodes"] == 2 and body["fields"]["training.tp"] == 8


def test_patch_sets_and_removes_control_fields(client: TestClient) -> None:
    r = client.post("/api/scenario/patch", json={"scenario": SMALL, "set": {
        "cluster.nodes": 4, "cluster.fabric": None, "training.model": "llama3-8b"}})
    text = r.json()["scenario"]
    assert "nodes: 4" in text and "fabric" not in text and "model: llama3-8b" in text
    bad = client.post("/api/scenario/patch", json={"scenario": "a: [", "set": {}})
    assert bad.status_code == 400
    unknown = client.post("/api/scenario/patch", json={"scenario": SMALL,
                                                       "set": {"cluster.radix": 8}})
    assert unknown.status_code == 422


def test_a_job_runs_streams_progress_and_keeps_its_result(client: TestClient) -> None:
    r = client.post("/api/jobs", json={"kind": "bench", "designs": [SMALL]})
    assert r.status_code == 202
    jid = r.json()["id"]
    assert r.json()["url"] == f"/?job={jid}"
    job = _wait(client, jid)
    assert job["status"] == "done" and job["result"]["kind"] == "bench"
    assert {"busbw", "time", "hierarchy", "topology"} <= set(job["result"]["figures"])
    js = client.get(f"/api/jobs/{jid}/result.json")
    assert js.json() == job["result"] and "attachment" in js.headers["content-disposition"]
    csv = client.get(f"/api/jobs/{jid}/result.csv").text.splitlines()
    assert csv[0].startswith("design,name,fabric,gpus,algorithm,size_bytes,busbw_gbps")
    assert csv[0].endswith("chosen,band,band_group,choice_band,choice_group")
    assert len(csv) > 10
    assert client.get(f"/api/jobs/{jid}/designs/0.yaml").text == SMALL
    assert client.get(f"/api/jobs/{jid}/designs/1.yaml").status_code == 404
    assert jid in [j["id"] for j in client.get("/api/jobs").json()]


def test_two_designs_compared(client: TestClient) -> None:
    roce = TRAIN.replace("ib-ndr", "roce-400g")
    r = client.post("/api/jobs", json={"kind": "train", "designs": [TRAIN, roce]})
    job = _wait(client, r.json()["id"])
    fabs = [d["cluster"]["summary"]["fabric"] for d in job["result"]["designs"]]
    assert fabs == ["ib-ndr", "roce-400g"]
    rows = client.get(f"/api/jobs/{job['id']}/result.csv").text.splitlines()
    assert len(rows) == 3


def test_bad_job_requests(client: TestClient) -> None:
    r = client.post("/api/jobs", json={"kind": "train", "designs": [SMALL, "cluster: {nodes: 0}"]})
    d = r.json()["detail"]
    assert r.status_code == 400 and d["design"] == 0 and d["field"] == "training"
    r = client.post("/api/jobs", json={"kind": "bench", "designs": [SMALL, "cluster:\n  nodes: 0"]})
    d = r.json()["detail"]
    assert r.status_code == 400 and d["design"] == 1 and d["line"] == 2
    assert client.post("/api/jobs", json={"kind": "nope", "designs": [SMALL]}).status_code == 422
    assert client.post("/api/jobs", json={"kind": "bench", "designs": []}).status_code == 422
    assert client.post("/api/jobs", json={"kind": "bench",
                                          "designs": [SMALL] * 3}).status_code == 422
    bad_release = SMALL + 'collective:\n  nccl_version: "two"\n'
    r = client.post("/api/jobs", json={"kind": "bench", "designs": [bad_release]})
    d = r.json()["detail"]
    assert r.status_code == 400 and d["design"] == 0
    assert d["field"] == "collective.nccl_version" and "2.26.2" in d["message"]
    assert client.get("/api/jobs/0123456789abcdef").status_code == 404
    assert client.get("/api/jobs/../../etc").status_code in (404, 422)
    r = client.post("/api/jobs", json={"kind": "bench",
                                       "designs": ["cluster: {nodes: 100000}"]})
    assert r.status_code == 400 and "limited to 16384 GPUs" in r.json()["detail"]["message"]


def test_a_failed_job_says_why_and_where(client: TestClient) -> None:
    # a layout that cannot split is refused at submission, naming the design and field
    bad = SMALL + "training:\n  model: llama3-8b\n  tp: 3\n"
    r = client.post("/api/jobs", json={"kind": "train", "designs": [SMALL + "training:\n"
                                                                    "  model: llama3-8b\n",
                                                                    bad]})
    assert r.status_code == 400
    d = r.json()["detail"]
    assert d["field"] == "training.tp" and d["design"] == 1
    # one that splits but does not fit GPU memory fails when it runs, saying why
    big = SMALL + "training:\n  model: llama3-70b\n  tp: 1\n"
    r = client.post("/api/jobs", json={"kind": "train", "designs": [big]})
    job = _wait(client, r.json()["id"])
    assert job["status"] == "failed" and job["result"] is None
    assert job["error"]["field"] and job["error"]["message"]
    assert client.get(f"/api/jobs/{job['id']}/result.json").status_code == 409
    # of two designs, the one that failed is named
    r = client.post("/api/jobs", json={"kind": "train", "designs": [SMALL + "training:\n"
                                                                    "  model: llama3-8b\n",
                                                                    big]})
    job = _wait(client, r.json()["id"])
    assert job["status"] == "failed" and job["error"]["design"] == 1
    assert job["error"]["field"] == "training" and "design B" in job["error"]["message"]


def test_request_body_limit(tmp_path: Path) -> None:
    app = create_app(store=":memory:", limits=Limits(workers=1, max_body_bytes=2048))
    with TestClient(app) as c:
        r = c.post("/api/validate", json={"scenario": "#" * 5000})
        assert r.status_code == 413 and "max_body_bytes" in r.json()["detail"]["message"]
        r = c.post("/api/validate", content=b"1", headers={"content-length": "x"})
        assert r.status_code == 413

        def chunks(n: int) -> Iterator[bytes]:  # streamed: no content-length is sent
            yield b'{"scenario": "'
            for _ in range(n):
                yield b"#" * 500
            yield b'"}'

        r = c.post("/api/validate", content=chunks(10),
                   headers={"content-type": "application/json"})
        assert r.status_code == 413 and "max_body_bytes" in r.json()["detail"]["message"]
        r = c.post("/api/validate", content=chunks(2),  # under the limit: read whole
                   headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text


def test_a_restart_keeps_results_and_marks_interrupted_jobs(tmp_path: Path) -> None:
    path = tmp_path / "web.duckdb"
    with TestClient(create_app(store=path, limits=Limits(workers=1))) as c:
        done = c.post("/api/jobs", json={"kind": "describe", "designs": [SMALL]}).json()["id"]
        assert _wait(c, done)["status"] == "done"
    from fabricsim.web.store import JobStore

    s = JobStore(path)  # a job that was running when the server died
    s.add("feedfacefeedface", kind="bench", designs=[SMALL], client="x")
    s.update("feedfacefeedface", status="running")
    s.close()
    with TestClient(create_app(store=path, limits=Limits(workers=1))) as c:
        assert c.get(f"/api/jobs/{done}").json()["result"]["kind"] == "describe"
        lost = c.get("/api/jobs/feedfacefeedface").json()
        assert lost["status"] == "failed" and "interrupted" in lost["error"]["message"]


def test_malformed_bodies_get_4xx_never_500(tmp_path: Path) -> None:
    """issue 40: a NaN literal (the 422 echoed it back and JSON encoding failed) and a
    scenario nested 330 levels deep (RecursionError) answered 500."""
    app = create_app(store=":memory:", limits=Limits(workers=1))
    deep = "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 330)) + "  " * 330 + "c: 1\n"
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/api/validate", content=b'{"scenario": NaN}',
                   headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["detail"][0]["input"] == "nan"
        r = c.post("/api/scenario/patch", json={"scenario": deep, "set": {}})
        assert r.status_code == 400 and "64 deep" in r.json()["detail"]["message"]
        r = c.post("/api/validate", json={"scenario": deep})
        assert r.status_code == 200 and "64 levels" in r.json()["error"]["message"]
        r = c.post("/api/jobs", json={"kind": "describe", "designs": [deep]})
        assert r.status_code == 400


def test_a_dribbled_body_is_timed_out(tmp_path: Path) -> None:
    import asyncio

    from fabricsim.web.app import _BodyLimit

    sent: list[dict[str, object]] = []

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("the app must not see a body that never arrived")

    async def receive() -> dict[str, object]:
        await asyncio.sleep(10)  # one byte that never comes
        return {"type": "http.request", "body": b"x", "more_body": True}

    async def send(msg: dict[str, object]) -> None:
        sent.append(msg)

    scope = {"type": "http", "method": "POST", "headers": [(b"content-length", b"10")]}
    asyncio.run(_BodyLimit(app, limit=100, timeout_s=0.05)(scope, receive, send))
    assert sent[0]["status"] == 408


def test_framework_configs_reach_the_web_app_as_scenario_fields(client: TestClient) -> None:
    """issue 37: a NeMo line or a torchtitan config is a training field, so the web app
    reads it as the CLI does (and names the field when it is bad)."""
    nemo = ("cluster:\n  system: dgx-h100\n  nodes: 2\ntraining:\n  from_nemo: \"--factory "
            "llama3_8b trainer.strategy.tensor_model_parallel_size=2\"\n")
    body = client.post("/api/validate", json={"scenario": nemo, "kind": "train"}).json()
    assert body["ok"] and "training llama3-8b (tp 2, pp 1, dp 8)" in body["summary"]
    titan = ("cluster:\n  system: dgx-h100\n  nodes: 2\ntraining:\n  from_torchtitan: |\n"
             "    [model]\n    name = \"llama3\"\n    flavor = \"8B\"\n    [parallelism]\n"
             "    tensor_parallel_degree = 4\n")
    body = client.post("/api/validate", json={"scenario": titan, "kind": "train"}).json()
    assert body["ok"] and "training llama3-8b (tp 4, pp 1, dp 4)" in body["summary"]
    bad = nemo.replace("tensor_model_parallel_size", "tensor_size")
    body = client.post("/api/validate", json={"scenario": bad, "kind": "train"}).json()
    assert not body["ok"] and body["error"]["field"].startswith("training.from_nemo")
