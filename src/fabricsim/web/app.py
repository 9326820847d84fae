"""The web app: a FastAPI API (OpenAPI schema at ``/openapi.json``) and the page at ``/``.

Routes (all JSON unless said):

- ``GET /api/health`` — version, workers, jobs waiting and running;
- ``GET /api/presets`` — systems, fabrics, topologies, models, shipped scenarios, kinds;
- ``GET /api/scenarios/{name}`` — a shipped scenario's YAML (``text/plain``);
- ``POST /api/validate`` — check a scenario as ``fabricsim validate`` does: what it is, or
  the error with its field and line;
- ``POST /api/jobs`` — run ``kind`` on one design or compare two (202, the job's id);
- ``GET /api/jobs`` — recent jobs; ``GET /api/jobs/{id}`` — one, with its result when done;
- ``GET /api/jobs/{id}/events`` — server-sent events: status and progress until it ends;
- ``GET /api/jobs/{id}/result.json`` / ``result.csv`` — the result to keep;
- ``GET /api/jobs/{id}/designs/{i}.yaml`` — a design's scenario as submitted.

A result's shareable address is ``/?job=ID``. Bad input gets a 4xx answer whose ``detail``
names the field (and the scenario line) and the fix; budgets are in
:class:`~fabricsim.web.limits.Limits`.

Example
-------
>>> from fastapi.testclient import TestClient
>>> with TestClient(create_app(store=":memory:", limits=Limits(workers=1))) as client:
...     r = client.post("/api/validate", json={"scenario": "cluster: {nodes: -1}"})
...     e = r.json()["error"]
>>> r.status_code, r.json()["ok"], e["field"], e["line"]
(200, False, 'cluster.nodes', 1)
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from fabricsim._extras import require
from fabricsim.errors import ConfigError, FabricsimError
from fabricsim.web.limits import Limits

require("fastapi", "web", "the web app")

from fastapi import FastAPI, HTTPException, Query, Request  # noqa: E402
from fastapi import Path as PathParam  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import (  # noqa: E402
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    StreamingResponse,
)
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

from fabricsim.web.jobs import KINDS  # noqa: E402
from fabricsim.web.runner import Busy, JobRunner, error_line  # noqa: E402
from fabricsim.web.store import TERMINAL, JobStore  # noqa: E402

__all__ = ["create_app"]

JobId = Annotated[str, PathParam(pattern=r"^[0-9a-f]{16}$", description="a job's id")]
Kind = Literal["describe", "bench", "ep", "train", "scale", "plan", "infer", "simulate", "packet",
               "cluster"]
assert set(KINDS) == set(get_args(Kind))


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ValidateIn(_In):
    """A scenario to check (YAML text), optionally for a job kind's needs and limits."""

    scenario: str = Field(max_length=128 * 1024, description="scenario YAML text")
    kind: Kind | None = Field(None, description="check it for this kind of job too")


class ErrorOut(BaseModel):
    """An input error: what is wrong and how to fix it, the field and scenario line."""

    message: str
    field: str | None = None
    line: int | None = None
    design: int | None = None


class ValidateOut(BaseModel):
    """What the scenario describes, or its first error; ``fields``: the values of the
    page's controls (:data:`CONTROLS`) as written in it."""

    ok: bool
    summary: list[str] = []
    error: ErrorOut | None = None
    fields: dict[str, Any] = {}


#: Scenario fields the page has controls for.
Control = Literal["cluster.system", "cluster.nodes", "cluster.fabric", "cluster.topology",
                  "cluster.oversubscription", "training.model", "training.tp", "training.pp",
                  "training.global_batch", "training.seq_len"]
CONTROLS: tuple[str, ...] = get_args(Control)
Scalar = str | int | float | None


class PatchIn(_In):
    """Set some of the page's control fields in a scenario (``None`` removes one)."""

    scenario: str = Field(max_length=128 * 1024, description="scenario YAML text")
    set: dict[Control, Scalar] = Field(max_length=len(CONTROLS))


class PatchOut(BaseModel):
    """The scenario with the fields set."""

    scenario: str


#: Deepest nesting of a scenario the page's controls edit (a scenario is 3-4 deep).
MAX_DEPTH = 64


def _depth(obj: Any) -> int:
    """How deeply ``obj`` nests (iteratively: a deep document cannot overflow the stack)."""
    deepest, todo = 0, [(obj, 1)]
    while todo:
        o, d = todo.pop()
        deepest = max(deepest, d)
        if isinstance(o, dict):
            todo += [(v, d + 1) for v in o.values()]
        elif isinstance(o, list):
            todo += [(v, d + 1) for v in o]
    return deepest


def _raw(text: str) -> dict[str, Any] | None:
    import yaml

    try:
        raw = yaml.safe_load(text) if len(text) <= 128 * 1024 else None
    except (yaml.YAMLError, RecursionError):
        return None
    return raw if isinstance(raw, dict) and _depth(raw) <= MAX_DEPTH else None


def _json_safe(obj: Any) -> Any:
    """``obj`` with non-finite floats as text and long values cut, so that an error
    about a request can always be sent back as JSON (a NaN in the body is echoed as
    ``"nan"``, not as a 500)."""
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in list(obj.items())[:50]}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in list(obj)[:50]]
    if isinstance(obj, str) and len(obj) > 500:
        return obj[:500] + "..."
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    return repr(obj)[:500]


def _fields(text: str) -> dict[str, Any]:
    raw = _raw(text) or {}
    out: dict[str, Any] = {}
    for f in CONTROLS:
        sec, key = f.split(".")
        part = raw.get(sec)
        if isinstance(part, dict) and isinstance(part.get(key), str | int | float):
            out[f] = part[key]
    return out


class JobIn(_In):
    """A job: ``kind`` on one design, or two designs compared side by side."""

    kind: Kind
    designs: list[Annotated[str, Field(max_length=128 * 1024)]] = Field(
        min_length=1, max_length=2, description="scenario YAML texts: one, or two to compare")


class JobOut(BaseModel):
    """A job's state (and its result once done)."""

    id: str
    kind: str
    status: Literal["queued", "running", "done", "failed"]
    progress: float
    message: str | None = None
    created: float | None = None
    started: float | None = None
    finished: float | None = None
    error: ErrorOut | None = None
    url: str
    result: dict[str, Any] | None = None


class HealthOut(BaseModel):
    """The server's state."""

    status: str
    version: str
    workers: int
    queued: int
    running: int
    limits: dict[str, float]


def _error(e: FabricsimError, design: int | None = None, text: str | None = None
           ) -> ErrorOut:
    """``e`` as an ErrorOut: its field without the ``(line N)`` the loader appends, and
    the line, from the message or (for sections validated later) from ``text``."""
    from fabricsim.scenario.loader import field_line

    field = e.field
    line = error_line(field or "") or error_line(str(e))
    if field is not None:
        field = re.sub(r"\s*\(line \d+\)$", "", field)
        if line is None and text is not None:
            line = field_line(text, field)
    return ErrorOut(message=e.message if e.field else str(e), field=field, line=line,
                    design=design)


def _design_index(field: str | None) -> int | None:
    m = re.match(r"designs\[(\d)\]", field or "")
    return int(m.group(1)) if m else None


def _job_out(row: dict[str, Any], state: dict[str, Any] | None,
             result: dict[str, Any] | None) -> JobOut:
    st = state or {}
    err = None
    if row.get("error"):
        field = row.get("error_field")
        design = _design_index(field) if field else None
        if design is None:
            design = _design_index(row["error"])
        elif field is not None:  # "designs[1].training" -> design 1, field "training"
            field = re.sub(r"^designs\[\d\]\.?", "", field) or None
        err = ErrorOut(message=row["error"], field=field, line=row.get("error_line"),
                       design=design)
    return JobOut(id=row["id"], kind=row["kind"], status=st.get("status", row["status"]),
                  progress=float(st.get("progress", row["progress"]) or 0.0),
                  message=st.get("message", row["message"]), created=row["created"],
                  started=row["started"], finished=row["finished"], error=err,
                  url=f"/?job={row['id']}", result=result)


def _csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The result as one table: a row per (design, curve, size) for bench, per point for
    scale, per fabric for plan, per link for simulate, per variant for packet, per
    placement and job for cluster (per scheduler for a trace replay), per design
    otherwise."""
    from fabricsim.results import flatten

    rows: list[dict[str, Any]] = []
    kind = result["kind"]
    for i, d in enumerate(result["designs"]):
        base = {"design": "AB"[i], "name": d["name"],
                "fabric": d["cluster"]["summary"]["fabric"],
                "gpus": d["cluster"]["summary"]["gpus"]}
        if kind == "bench":
            for c in d["bench"]["curves"]:
                n = len(c["sizes"])
                for s, b, t, ch, band, bg, cband, cg in zip(
                        c["sizes"], c["busbw_gbps"], c["time_us"], c["choice"],
                        c.get("band") or [0.0] * n, c.get("band_group") or [""] * n,
                        c.get("choice_band") or [0.0] * n,
                        c.get("choice_group") or [""] * n, strict=True):
                    rows.append({**base, "algorithm": c["name"], "size_bytes": s,
                                 "busbw_gbps": b, "time_us": t, "chosen": ch,
                                 "band": band, "band_group": bg, "choice_band": cband,
                                 "choice_group": cg})
        elif kind == "ep":
            rows += [{**base, **flatten(r)} for r in d["ep"]["rows"]]
        elif kind == "scale":
            rows += [{**base, **flatten(p)} for p in d["scale"]["points"]]
        elif kind == "plan":
            rows += [{**base, **flatten(o)} for o in d["plan"]["fabrics"]]
        elif kind == "simulate":
            rows += [{**base, **flatten(b)} for b in d["simulate"]["bottlenecks"]]
        elif kind == "packet":
            rows += [{**base, **flatten(r)} for r in d["packet"]["runs"]]
        elif kind == "cluster":
            rows += [{**base, "placement": p["placement"], **flatten(j)}
                     for p in d["jobs"]["placements"] for j in p["jobs"]]
            rows += [{**base, **{k: v for k, v in r.items()
                                 if k not in ("timeline", "job_list", "links_over_time")}}
                     for r in d["jobs"].get("trace", {}).get("replays", [])]
        elif kind in ("train", "infer"):
            rows.append({**base, **flatten({k: v for k, v in d[kind].items()
                                            if k not in ("warnings", "notes")})})
        else:
            rows.append({**base, **flatten({k: v for k, v in d["cluster"]["summary"].items()
                                            if k not in ("hierarchy", "notes")})})
    return rows


def _static(name: str) -> Path:
    return Path(str(resources.files("fabricsim.web").joinpath("static", name)))


def _plotly_js() -> Path:
    plotly = require("plotly", "web", "the web page's charts")
    path = Path(str(plotly.__file__)).parent / "package_data" / "plotly.min.js"
    if not path.is_file():  # pragma: no cover - a broken plotly install
        raise ConfigError("plotly is installed without its plotly.min.js; reinstall it: "
                          "pip install --force-reinstall 'fabricsim[web]'")
    return path


class _BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets 413 naming the limit, one
    that does not arrive within ``timeout_s`` gets 408.

    A declared ``content-length`` is checked before anything is read; the body of a
    POST, PUT or PATCH is then read here (up to the limit, against the deadline) and
    handed on unchanged, message by message.
    """

    def __init__(self, app: Any, limit: int, timeout_s: float = 30.0) -> None:
        self.app = app
        self.limit = limit
        self.timeout_s = timeout_s

    async def _refuse(self, scope: Any, receive: Any, send: Any, said: str) -> None:
        await JSONResponse(status_code=413, content={"detail": {
            "message": f"the request body is {said}; the limit is {self.limit:,} bytes "
                       f"(max_body_bytes): send a smaller scenario", "field": "body"}})(
            scope, receive, send)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        size = dict(scope.get("headers") or []).get(b"content-length")
        if size is not None:
            text = size.decode("latin-1")
            if not text.isdigit() or int(text) > self.limit:
                await self._refuse(scope, receive, send, f"{text} bytes")
                return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        held: list[Any] = []
        total = 0
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:  # read the body, refusing it once past the limit or the deadline
            left = deadline - asyncio.get_running_loop().time()
            try:
                msg = await asyncio.wait_for(receive(), timeout=max(left, 0.0))
            except TimeoutError:
                await JSONResponse(status_code=408, content={"detail": {
                    "message": f"the request body did not arrive within "
                               f"{self.timeout_s:g} s (body_timeout_s); send it whole",
                    "field": "body"}})(scope, receive, send)
                return
            held.append(msg)
            if msg["type"] != "http.request":
                break
            total += len(msg.get("body", b""))
            if total > self.limit:
                await self._refuse(scope, receive, send, "over the limit")
                return
            if not msg.get("more_body"):
                break

        async def replay() -> Any:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)


def create_app(*, store: str | Path = "fabricsim-web.duckdb", limits: Limits | None = None
               ) -> FastAPI:
    """The app, with its job store at ``store`` (``":memory:"`` keeps nothing) and its
    budgets ``limits``; workers start with the app and stop with it."""
    from fabricsim import __version__

    lim = limits or Limits()
    holder: dict[str, JobRunner] = {}

    import threading

    start_lock = threading.Lock()

    def runner() -> JobRunner:
        """The app's runner, started on first use (or by the lifespan)."""
        with start_lock:
            if "runner" not in holder:
                holder["runner"] = JobRunner(JobStore(store), lim)
            return holder["runner"]

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(runner)
        try:
            yield
        finally:
            with start_lock:
                r = holder.pop("runner", None)
            if r is not None:
                await asyncio.to_thread(r.close)
                r.store.close()

    app = FastAPI(title="fabricsim", version=__version__, lifespan=lifespan,
                  description="Simulate and plan the networks that GPU clusters train and "
                  "serve models on: describe a cluster, run collectives, training steps, "
                  "fault and packet-level scenarios as jobs, and compare two designs.")

    app.add_middleware(_BodyLimit, limit=lim.max_body_bytes, timeout_s=lim.body_timeout_s)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: _json_safe(v) for k, v in e.items() if k != "ctx"}
                  for e in exc.errors()[:20]]
        return JSONResponse(status_code=422, content={"detail": errors})

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(_static("index.html"), media_type="text/html")

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: Annotated[str, PathParam(pattern=r"^[a-z]+\.(js|css)$")]) -> FileResponse:
        if name == "plotly.js":
            return FileResponse(_plotly_js(), media_type="text/javascript")
        if name not in ("app.js", "app.css"):
            raise HTTPException(404, detail={"message": f"no static file {name!r}"})
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        return FileResponse(_static(name), media_type=kind)

    @app.get("/api/health", response_model=HealthOut)
    def health() -> HealthOut:
        r = runner()
        return HealthOut(status="ok", version=__version__, workers=lim.workers,
                         queued=r.queued(), running=r.running(),
                         limits={"max_wall_s": lim.max_wall_s, "max_gpus": lim.max_gpus,
                                 "max_gpus_flow": lim.max_gpus_flow,
                                 "max_gpus_packet": lim.max_gpus_packet,
                                 "max_body_bytes": lim.max_body_bytes})

    @app.get("/api/presets")
    def presets() -> dict[str, Any]:
        from fabricsim.catalog import get_catalog
        from fabricsim.scenario.loader import shipped_scenarios
        from fabricsim.workloads.models import model_names

        cat = get_catalog()
        return {"systems": sorted(cat.systems), "fabrics": sorted(cat.fabrics),
                "topologies": sorted(cat.topologies), "models": model_names(),
                "scenarios": sorted(shipped_scenarios()), "kinds": list(KINDS)}

    @app.get("/api/scenarios/{name}", response_class=PlainTextResponse)
    def scenario(name: Annotated[str, PathParam(pattern=r"^[a-z0-9][a-z0-9.-]{0,80}$")]
                 ) -> PlainTextResponse:
        from fabricsim.scenario.loader import shipped_scenarios

        sh = shipped_scenarios()
        if name not in sh:
            from fabricsim.errors import did_you_mean

            raise HTTPException(404, detail={"message": f"no shipped scenario {name!r}; "
                                             f"{did_you_mean(name, sh)}", "field": "name"})
        return PlainTextResponse(sh[name], media_type="text/yaml")

    @app.post("/api/validate", response_model=ValidateOut)
    def validate(body: ValidateIn) -> ValidateOut:
        from fabricsim.jobs.check import check_sections
        from fabricsim.web.jobs import parse_design

        fields = _fields(body.scenario)
        try:
            sc = parse_design(body.scenario, body.kind or "describe", lim)
            return ValidateOut(ok=True, summary=check_sections(sc, body.kind),
                               fields=fields)
        except FabricsimError as e:
            return ValidateOut(ok=False, error=_error(e, text=body.scenario), fields=fields)

    @app.post("/api/scenario/patch", response_model=PatchOut,
              responses={400: {"model": ErrorOut}})
    def patch(body: PatchIn) -> PatchOut:
        import yaml

        raw = _raw(body.scenario) if body.scenario.strip() else {}
        if raw is None:
            raise HTTPException(400, detail={"message": f"the scenario is not a YAML mapping "
                                             f"(nested at most {MAX_DEPTH} deep); fix it "
                                             f"(see the error next to its line) before "
                                             f"using the controls", "field": "scenario"})
        for f, v in body.set.items():
            sec, key = f.split(".")
            part = raw.get(sec)
            if not isinstance(part, dict):
                part = raw[sec] = {}
            if v is None or v == "":
                part.pop(key, None)
            else:
                part[key] = v
        return PatchOut(scenario=yaml.safe_dump(raw, sort_keys=False))

    @app.post("/api/jobs", status_code=202, response_model=JobOut,
              responses={400: {"model": ErrorOut}, 429: {"model": ErrorOut}})
    def submit(body: JobIn, request: Request) -> JobOut:
        from fabricsim.web.jobs import parse_design

        for i, text in enumerate(body.designs):
            try:
                parse_design(text, body.kind, lim, field=f"designs[{i}]")
            except FabricsimError as e:
                raise HTTPException(400, detail=_error(e, i, text).model_dump()) from None
        client = request.client.host if request.client else "?"
        try:
            jid = runner().submit(body.kind, body.designs, client)
        except Busy as e:
            raise HTTPException(429, detail=_error(e).model_dump()) from None
        row = runner().store.get(jid)
        assert row is not None
        return _job_out(row, runner().state(jid), None)

    @app.get("/api/jobs", response_model=list[JobOut])
    def jobs(limit: Annotated[int, Query(ge=1, le=500)] = 50) -> list[JobOut]:
        r = runner()
        return [_job_out(row, r.state(row["id"]) if row["status"] not in TERMINAL else None,
                         None) for row in r.store.recent(limit)]

    def _row(job_id: str) -> dict[str, Any]:
        row = runner().store.get(job_id)
        if row is None:
            raise HTTPException(404, detail={"message": f"no job {job_id!r}", "field": "id"})
        return row

    @app.get("/api/jobs/{job_id}", response_model=JobOut)
    def job(job_id: JobId) -> JobOut:
        row = _row(job_id)
        done = row["status"] == "done"
        state = None if row["status"] in TERMINAL else runner().state(job_id)
        return _job_out(row, state, runner().store.result(job_id) if done else None)

    @app.get("/api/jobs/{job_id}/events", response_class=StreamingResponse)
    async def events(job_id: JobId) -> StreamingResponse:
        _row(job_id)

        async def stream() -> AsyncIterator[str]:
            seen = None
            idle = 0.0
            while True:
                st = await asyncio.to_thread(runner().state, job_id)
                if st is None:
                    return
                key = (st["status"], st["version"], st["progress"])
                if key != seen:
                    seen = key
                    idle = 0.0
                    yield f"data: {json.dumps({k: st[k] for k in ('status', 'progress', 'message')})}\n\n"  # noqa: E501
                    if st["status"] in TERMINAL:
                        return
                else:
                    idle += 0.25
                    if idle >= 15.0:
                        idle = 0.0
                        yield ": keep-alive\n\n"
                await asyncio.sleep(0.25)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    def _result(job_id: str) -> dict[str, Any]:
        row = _row(job_id)
        res = runner().store.result(job_id)
        if res is None:
            raise HTTPException(409, detail={"message": f"job {job_id} is {row['status']}; "
                                             "its result exists once it is done",
                                             "field": "id"})
        return res

    @app.get("/api/jobs/{job_id}/result.json")
    def result_json(job_id: JobId) -> JSONResponse:
        return JSONResponse(_result(job_id), headers={
            "Content-Disposition": f'attachment; filename="fabricsim-{job_id}.json"'})

    @app.get("/api/jobs/{job_id}/result.csv", response_class=PlainTextResponse)
    def result_csv(job_id: JobId) -> PlainTextResponse:
        rows = _csv_rows(_result(job_id))
        cols = list(dict.fromkeys(k for r in rows for k in r))
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
        return PlainTextResponse(buf.getvalue(), media_type="text/csv", headers={
            "Content-Disposition": f'attachment; filename="fabricsim-{job_id}.csv"'})

    @app.get("/api/jobs/{job_id}/designs/{index}.yaml", response_class=PlainTextResponse)
    def design(job_id: JobId, index: Annotated[int, PathParam(ge=0, le=1)]
               ) -> PlainTextResponse:
        row = _row(job_id)
        if index >= len(row["designs"]):
            raise HTTPException(404, detail={"message": f"job {job_id} has "
                                             f"{len(row['designs'])} design(s)",
                                             "field": "index"})
        return PlainTextResponse(row["designs"][index], media_type="text/yaml", headers={
            "Content-Disposition": f'attachment; filename="design-{"ab"[index]}.yaml"'})

    return app
