"""Worker processes: wall-time budget, fairness between clients, crashes."""

from __future__ import annotations

import time

from web_designs import SMALL

from fabricsim.scenario.loader import shipped_scenarios
from fabricsim.web.limits import Limits
from fabricsim.web.runner import Busy, JobRunner
from fabricsim.web.store import JobStore


def test_a_job_past_its_wall_time_is_stopped_and_the_next_one_runs() -> None:
    r = JobRunner(JobStore(":memory:"), Limits(workers=1, max_wall_s=3.0))
    try:
        slow = r.submit("packet", [shipped_scenarios()["packet-pause-storm"]], "a")
        quick = r.submit("describe", [SMALL], "a")
        row = r.wait(slow, timeout=60)
        assert row["status"] == "failed" and "web budget of 3 s" in row["error"]
        assert row["error_field"] == "max_wall_s"
        assert r.wait(quick, timeout=60)["status"] == "done"
    finally:
        r.close()


def test_clients_take_turns() -> None:
    r = JobRunner(JobStore(":memory:"), Limits(workers=1))
    try:
        many = [r.submit("describe", [SMALL], "greedy") for _ in range(6)]
        other = r.submit("describe", [SMALL], "polite")
        for j in [*many, other]:
            assert r.wait(j, timeout=120)["status"] == "done"
        end = {j: r.store.get(j)["finished"] for j in [*many, other]}  # type: ignore[index]
        # one client's backlog does not make another wait for all of it
        assert sorted(end.values()).index(end[other]) <= 2
    finally:
        r.close()


def test_queue_limits_per_client() -> None:
    r = JobRunner(JobStore(":memory:"), Limits(workers=1, max_queued_per_client=2))
    try:
        ids = []
        for _ in range(6):  # the first may already run: at most 2 wait
            try:
                ids.append(r.submit("describe", [SMALL], "a"))
            except Busy as e:
                assert "max_queued_per_client=2" in str(e)
                break
        else:
            raise AssertionError("the per-client queue limit did not apply")
        assert r.submit("describe", [SMALL], "b")  # another client still gets in
        for j in ids:
            r.wait(j, timeout=120)
    finally:
        r.close()


def test_model_errors_fail_the_job_with_the_field() -> None:
    r = JobRunner(JobStore(":memory:"), Limits(workers=1))
    try:
        bad = SMALL + "training:\n  model: llama3-8b\n  tp: 3\n"
        j = r.submit("train", [bad], "a")
        row = r.wait(j, timeout=120)
        assert row["status"] == "failed" and row["error_field"]
        assert r.state(j)["status"] == "failed"  # type: ignore[index]
        t0 = time.monotonic()
        assert r.wait(r.submit("describe", [SMALL], "a"), timeout=60)["status"] == "done"
        assert time.monotonic() - t0 < 60
    finally:
        r.close()
