"""Load on the web app over loopback: concurrent job submissions and result reads.

Starts ``fabricsim serve`` in its own process on a free loopback port with a fresh job
store, then, from this process (asyncio + httpx):

1. submits ``--jobs`` jobs at once (``describe`` and ``bench`` of small clusters, a mix of
   two clients' worth), and counts the answers: every one must be 202;
2. waits until every job has finished (the workers drain the queue), and reports jobs/s;
3. reads results ``--reads`` times (``GET /api/jobs/{id}`` with the result, and
   ``/result.json``) with ``--concurrency`` requests in flight;
4. as the peer in the same run, reads ``/api/health`` (no store, no result) the same
   number of times the same way, so that the result reads' latency is given as a ratio
   to the cheapest request the server answers.

Prints one JSON line per phase (counts, errors, latency percentiles in ms) and a summary
line. Issue 15's target: 200 concurrent submissions and 2,000 result reads with zero
errors.

Usage: python benchmarks/web_load.py [--jobs 200] [--reads 2000] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

DESIGNS = [
    "cluster: {system: dgx-h100, nodes: 2, fabric: ib-ndr}\n",
    "cluster: {system: dgx-h100, nodes: 4, fabric: roce-400g}\n",
    "cluster: {system: dgx-a100, nodes: 2}\n"
    "collective: {collective: all_gather, minbytes: 1MiB, maxbytes: 64MiB}\n",
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pcts(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {}
    q = statistics.quantiles(ms, n=100) if len(ms) > 1 else [ms[0]] * 99
    return {"p50_ms": round(q[49], 2), "p95_ms": round(q[94], 2), "p99_ms": round(q[98], 2),
            "max_ms": round(max(ms), 2)}


async def _timed(client: httpx.AsyncClient, method: str, url: str, ok: int,
                 **kw: Any) -> tuple[float, bool, Any]:
    t0 = time.perf_counter()
    try:
        r = await client.request(method, url, **kw)
        good = r.status_code == ok
        body = r.json() if good and "json" in r.headers.get("content-type", "") else None
    except httpx.HTTPError:
        good, body = False, None
    return (time.perf_counter() - t0) * 1e3, good, body


async def _many(client: httpx.AsyncClient, n: int, conc: int, make: Any) -> tuple[
        list[float], int, list[Any]]:
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> tuple[float, bool, Any]:
        async with sem:
            return await make(i)

    res = await asyncio.gather(*(one(i) for i in range(n)))
    return [r[0] for r in res], sum(not r[1] for r in res), [r[2] for r in res]


async def run(base: str, jobs: int, reads: int, conc: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    limits = httpx.Limits(max_connections=max(conc, jobs), max_keepalive_connections=conc)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        t0 = time.perf_counter()
        ms, errors, bodies = await _many(client, jobs, jobs, lambda i: _timed(
            client, "POST", "/api/jobs", 202, json={
                "kind": "bench" if i % 2 else "describe",
                "designs": [DESIGNS[i % len(DESIGNS)]]}))
        wall = time.perf_counter() - t0
        ids = [b["id"] for b in bodies if b]
        out.append({"phase": "submit", "requests": jobs, "concurrent": jobs,
                    "errors": errors, "wall_s": round(wall, 3), **_pcts(ms)})

        t0 = time.perf_counter()
        pending = set(ids)
        while pending:
            await asyncio.sleep(0.5)
            rows = (await client.get("/api/jobs", params={"limit": 500})).json()
            pending -= {r["id"] for r in rows if r["status"] in ("done", "failed")}
            if time.perf_counter() - t0 > 1800:
                break
        rows = (await client.get("/api/jobs", params={"limit": 500})).json()
        done = [r for r in rows if r["id"] in set(ids) and r["status"] == "done"]
        drain = time.perf_counter() - t0
        out.append({"phase": "drain", "jobs": len(ids), "done": len(done),
                    "failed": len(ids) - len(done), "left": len(pending),
                    "wall_s": round(drain, 2),
                    "jobs_per_s": round(len(done) / drain, 2) if drain else None})

        def read(i: int) -> Any:
            jid = ids[i % len(ids)]
            url = f"/api/jobs/{jid}" if i % 2 else f"/api/jobs/{jid}/result.json"
            return _timed(client, "GET", url, 200)

        t0 = time.perf_counter()
        ms_r, err_r, _ = await _many(client, reads, conc, read)
        wall_r = time.perf_counter() - t0
        out.append({"phase": "read results", "requests": reads, "concurrent": conc,
                    "errors": err_r, "wall_s": round(wall_r, 3),
                    "requests_per_s": round(reads / wall_r, 1), **_pcts(ms_r)})

        t0 = time.perf_counter()
        ms_h, err_h, _ = await _many(client, reads, conc,
                                     lambda i: _timed(client, "GET", "/api/health", 200))
        wall_h = time.perf_counter() - t0
        out.append({"phase": "peer: health", "requests": reads, "concurrent": conc,
                    "errors": err_h, "wall_s": round(wall_h, 3),
                    "requests_per_s": round(reads / wall_h, 1), **_pcts(ms_h)})
        out.append({"phase": "summary", "errors": errors + err_r + err_h,
                    "jobs_failed": len(ids) - len(done),
                    "read_p50_vs_health_p50": round(
                        statistics.median(ms_r) / statistics.median(ms_h), 2),
                    "read_throughput_vs_health": round(wall_h / wall_r, 2)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    port = _port()
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "load.duckdb"
        exe = Path(sys.executable).with_name("fabricsim")
        cmd = [str(exe), "serve", "--port", str(port), "--store", str(store),
               "--workers", str(a.workers), "--quiet"]
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        base = f"http://127.0.0.1:{port}"
        try:
            t0 = time.perf_counter()
            while True:
                try:
                    if httpx.get(base + "/api/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if server.poll() is not None or time.perf_counter() - t0 > 60:
                    err = server.stderr.read().decode() if server.stderr else ""
                    raise SystemExit(f"the server did not start: {err}")
                time.sleep(0.2)
            print(json.dumps({"phase": "start", "wall_s": round(time.perf_counter() - t0, 2),
                              "workers": a.workers, "cpus": os.cpu_count(),
                              "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)
            for line in asyncio.run(run(base, a.jobs, a.reads, a.concurrency)):
                print(json.dumps(line), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
