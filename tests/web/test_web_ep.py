"""The web app runs the ep job as the CLI does: same rows, its figures and CSV."""

from __future__ import annotations

from fabricsim import jobs
from fabricsim.scenario import load_scenario_text
from fabricsim.web.jobs import run_job

TEXT = ("cluster: {system: dgx-h800, nodes: 2}\n"
        "expert_parallel: {tokens: 128, ep: [8, 16], kernels: [deepep-ll, deepep]}\n")


def test_web_ep_matches_the_job_and_draws_its_figures() -> None:
    out = run_job("ep", [TEXT])
    rows = out["designs"][0]["ep"]["rows"]
    ref = jobs.run(jobs.job_from_scenario("ep", load_scenario_text(TEXT))).to_dict()["rows"]
    assert [r["time_us"] for r in rows] == [r["time_us"] for r in ref]
    assert len(rows) == 8
    assert {"ep_time", "ep_bandwidth"} <= set(out["figures"])
    assert len(out["figures"]["ep_time"]["data"]) == 4
