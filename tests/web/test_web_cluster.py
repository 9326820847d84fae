"""The web app runs the cluster job as the CLI does: the same jobs and slowdowns, its
figure and one CSV row per placement and job."""

from __future__ import annotations

from fabricsim import jobs
from fabricsim.scenario import load_scenario_text
from fabricsim.scenario.loader import shipped_scenarios
from fabricsim.web.app import _csv_rows
from fabricsim.web.jobs import run_job

TEXT = shipped_scenarios()["cluster-moe-beside-dense"]
NAMES = ["mixtral-ep8", "llama3-8b-dp", "llama2-7b-dp"]


def test_web_cluster_matches_the_job_and_draws_its_figure() -> None:
    out = run_job("cluster", [TEXT])
    got = out["designs"][0]["jobs"]
    ref = jobs.run(jobs.job_from_scenario("cluster", load_scenario_text(TEXT))).to_dict()
    assert [j["slowdown"] for j in got["placements"][0]["jobs"]] == \
        [j["slowdown"] for j in ref["placements"][0]["jobs"]]
    fig = out["figures"]["cluster_slowdown"]
    assert fig["data"][0]["x"] == NAMES and fig["data"][0]["name"] == "random"
    rows = _csv_rows(out)
    assert [(r["placement"], r["job"]) for r in rows] == [("random", n) for n in NAMES]


def test_web_replays_a_synthetic_trace_as_the_cli_does() -> None:
    """A synthetic day needs no file, so the web app replays it: the same summary as the
    job layer, a line per scheduler of GPUs busy, a CSV row per scheduler. A trace file
    is refused at submission (the server's files are not the user's)."""
    import pytest

    from fabricsim.errors import ConfigError
    from fabricsim.web.jobs import Limits, parse_design

    text = ("cluster: {system: dgx-h100, nodes: 8, fabric: roce-400g}\n"
            "trace: {synthetic: {load: 1.1}, hours: 4, scheduler: topology}\n")
    out = run_job("cluster", [text])
    got = out["designs"][0]["jobs"]["trace"]
    ref = jobs.run(jobs.job_from_scenario("cluster", load_scenario_text(text))).to_dict()
    assert got == ref["trace"] and got["source"].startswith("synthetic day")
    fig = out["figures"]["cluster_replay"]
    assert len(fig["data"]) == 1 and fig["data"][0]["name"].startswith("topology")
    rows = _csv_rows(out)
    assert [r["scheduler"] for r in rows] == ["topology"] and "utilisation" in rows[0]
    with pytest.raises(ConfigError) as e:
        parse_design(text.replace("{synthetic: {load: 1.1}", "{file: day.csv"), "cluster",
                     Limits())
    assert e.value.field == "trace.file"
