"""The job store: what a restart keeps, and a file of another version."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.errors import ConfigError
from fabricsim.web.store import JobStore


def test_restart_fails_running_jobs_and_requeues_waiting_ones(tmp_path: Path) -> None:
    path = tmp_path / "jobs.duckdb"
    s = JobStore(path)
    for jid in ("a", "b", "c"):
        s.add(jid, kind="describe", designs=["cluster: {}"], client="x")
    s.update("a", status="done", result={"kind": "describe", "designs": []})
    s.update("b", status="running", started=1.0)
    s.close()

    s = JobStore(path)
    queued = s.recover()
    assert [j["id"] for j in queued] == ["c"]
    b = s.get("b")
    assert b is not None and b["status"] == "failed" and "interrupted" in b["error"]
    assert s.result("a") == {"kind": "describe", "designs": []}
    assert s.counts() == {"queued": 1, "running": 0, "done": 1, "failed": 1}
    s.close()


def test_a_store_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jobs.duckdb"
    s = JobStore(path)
    s._db.execute("UPDATE web_meta SET value='99' WHERE key='version'")
    s.close()
    with pytest.raises(ConfigError, match="another version of fabricsim") as e:
        JobStore(path)
    assert e.value.field == "--store"


def test_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    bad = tmp_path / "notes.duckdb"
    bad.write_text("not a database")
    with pytest.raises(ConfigError, match="cannot open the job store"):
        JobStore(bad)


def test_results_are_cached_and_bounded() -> None:
    from fabricsim.web import store as mod

    s = JobStore(":memory:")
    for i in range(mod.CACHE_RESULTS + 5):
        s.add(f"j{i}", kind="describe", designs=[], client="x")
        s.update(f"j{i}", status="done", result={"i": i})
        assert s.result(f"j{i}") == {"i": i}
    assert len(s._cache) == mod.CACHE_RESULTS
    assert s.result("j0") == {"i": 0}  # evicted, read again from the file
