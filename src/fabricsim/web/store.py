"""Jobs and their results, kept in one embedded DuckDB file (the ``store`` extra).

Every job is a row: what was asked (kind, designs), by whom, when, its status, and its
result or error. A restarted server opens the same file: jobs that were running when it
stopped are marked failed (with that reason), jobs still waiting are queued again, and
every finished result can still be read. Results are immutable once written, so the last
few read are kept in memory (per store object, bounded).

Example
-------
>>> s = JobStore(":memory:")
>>> s.add("j1", kind="describe", designs=["cluster: {nodes: 1}"], client="127.0.0.1")
>>> s.update("j1", status="done", result={"kind": "describe"})
>>> s.get("j1")["status"], s.result("j1")
('done', {'kind': 'describe'})
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from fabricsim._duckdb_meta import stamp_format
from fabricsim._extras import require
from fabricsim.errors import ConfigError

__all__ = ["STATUSES", "STORE_VERSION", "TERMINAL", "JobStore"]

#: Format of the jobs table; a file of another version is refused with a clear error.
STORE_VERSION = 1
#: A job's life: queued → running → done | failed.
STATUSES = ("queued", "running", "done", "failed")
TERMINAL = ("done", "failed")
#: Finished results kept in memory for fast reads.
CACHE_RESULTS = 256

_COLUMNS = ("id", "kind", "status", "client", "created", "started", "finished", "designs",
            "progress", "message", "error", "error_field", "error_line")


class JobStore:
    """The jobs table of one DuckDB file (``":memory:"`` for a throw-away store)."""

    def __init__(self, path: str | Path) -> None:
        duckdb = require("duckdb", "web", "the web app's job store")
        self.path = str(path)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        try:
            self._db = duckdb.connect(self.path)
        except Exception as e:  # duckdb raises its own IOException/... types
            raise ConfigError(f"cannot open the job store {self.path!r}: {e}",
                              field="--store") from None
        with self._lock:
            other = stamp_format(self._db, "web_meta", "version", STORE_VERSION)
            if other is not None:
                raise ConfigError(f"{self.path} was written by another version of fabricsim "
                                  f"(job store format {other}, this one reads "
                                  f"{STORE_VERSION}); use a new --store file",
                                  field="--store")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS web_jobs (id VARCHAR PRIMARY KEY, kind VARCHAR, "
                "status VARCHAR, client VARCHAR, created DOUBLE, started DOUBLE, "
                "finished DOUBLE, designs VARCHAR, progress DOUBLE, message VARCHAR, "
                "error VARCHAR, error_field VARCHAR, error_line INTEGER, result VARCHAR)")

    def recover(self) -> list[dict[str, Any]]:
        """After a restart: fail the jobs that were running, return those still queued
        (oldest first) so that they can be queued again."""
        with self._lock:
            self._db.execute(
                "UPDATE web_jobs SET status='failed', finished=?, error='interrupted: the "
                "server stopped while this job ran; submit it again' WHERE status='running'",
                [time.time()])
            rows = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM web_jobs WHERE status='queued' "
                "ORDER BY created").fetchall()
        return [self._row(r) for r in rows]

    def add(self, job_id: str, *, kind: str, designs: list[str], client: str) -> None:
        """Record a new queued job."""
        with self._lock:
            self._db.execute(
                "INSERT INTO web_jobs (id, kind, status, client, created, designs, progress, "
                "message) VALUES (?, ?, 'queued', ?, ?, ?, 0, 'queued')",
                [job_id, kind, client, time.time(), json.dumps(designs)])

    def update(self, job_id: str, *, result: dict[str, Any] | None = None,
               **fields: Any) -> None:
        """Set ``fields`` (status, started, finished, progress, message, error, ...) and,
        when given, the result."""
        bad = set(fields) - set(_COLUMNS)
        if bad:
            raise ValueError(f"unknown job fields {sorted(bad)}")
        cols = list(fields)
        vals = [fields[c] for c in cols]
        if result is not None:
            cols.append("result")
            vals.append(json.dumps(result, allow_nan=False))
        if not cols:
            return
        sets = ", ".join(f"{c}=?" for c in cols)
        with self._lock:
            self._db.execute(f"UPDATE web_jobs SET {sets} WHERE id=?", [*vals, job_id])

    @staticmethod
    def _row(r: tuple[Any, ...]) -> dict[str, Any]:
        d = dict(zip(_COLUMNS, r, strict=True))
        d["designs"] = json.loads(d["designs"]) if d["designs"] else []
        return d

    def get(self, job_id: str) -> dict[str, Any] | None:
        """The job's row (without its result), or None."""
        with self._lock:
            r = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM web_jobs WHERE id=?",
                                 [job_id]).fetchone()
        return None if r is None else self._row(r)

    def result(self, job_id: str) -> dict[str, Any] | None:
        """The finished job's result, or None."""
        with self._lock:
            hit = self._cache.get(job_id)
            if hit is not None:
                self._cache.move_to_end(job_id)
                return hit
            r = self._db.execute("SELECT result FROM web_jobs WHERE id=? AND status='done'",
                                 [job_id]).fetchone()
            if r is None or r[0] is None:
                return None
            out: dict[str, Any] = json.loads(r[0])
            self._cache[job_id] = out
            while len(self._cache) > CACHE_RESULTS:
                self._cache.popitem(last=False)
            return out

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest jobs first (rows without results)."""
        with self._lock:
            rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM web_jobs ORDER BY "
                                    "created DESC LIMIT ?", [int(limit)]).fetchall()
        return [self._row(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Jobs per status."""
        with self._lock:
            rows = self._db.execute("SELECT status, count(*) FROM web_jobs GROUP BY status"
                                    ).fetchall()
        return {s: 0 for s in STATUSES} | {str(s): int(n) for s, n in rows}

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()
