"""Faults and background traffic reach every kind that can feel them, on every face: a
training step or a served instance on the flow backend waits for them; on the analytic
backend the job is refused (exit 2, a 400, a failed sweep point), never run as if they
were not there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fabricsim import jobs
from fabricsim.cli.app import main
from fabricsim.errors import ConfigError
from fabricsim.scenario.loader import load_scenario_text

#: Llama 2 7B on 4 x DGX H100, DP over the servers; one NIC of server 1 at a quarter of
#: its rate (a port that trained down).
FAULTY = """name: train-with-a-slow-nic
cluster: {system: dgx-h100, nodes: 4, fabric: ib-ndr, topology: rail-optimized}
training: {model: llama2-7b, tp: 8, global_batch: 64, seq_len: 4096, backend: flow}
faults:
  - {type: slow_nic, node: 1, index: 3, factor: 0.25}
"""


def _scenario(tmp_path: Path, text: str = FAULTY) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_a_fault_slows_the_step_on_the_flow_backend(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    assert main(["train", str(_scenario(tmp_path)), "--json"]) == 0
    hurt = json.loads(capsys.readouterr().out)
    calm = _scenario(tmp_path, FAULTY.split("faults:")[0])
    assert main(["train", str(calm), "--json"]) == 0
    free = json.loads(capsys.readouterr().out)
    assert hurt["step_time_s"] > free["step_time_s"] * 1.01
    assert hurt["faults"]["fault_free_step_time_s"] == pytest.approx(free["step_time_s"],
                                                                     rel=1e-9)
    assert hurt["faults"]["slowdown"] > 1.01 and hurt["faults"]["usd_per_day"] > 0
    assert hurt["faults"]["descriptions"] == ["server1/nic3 at 0.25 of its bandwidth"]
    assert hurt["breakdown"]["dp"] > free["breakdown"]["dp"]  # the DP group across NIC 3


def test_the_step_waits_for_the_slowest_group_not_the_first() -> None:
    """Rank 0's groups never touch server 1's NIC 3; their siblings through it do."""
    sc = load_scenario_text(FAULTY)
    r = jobs.run(jobs.job_from_scenario("train", sc))
    assert r.slowdown is not None and r.slowdown > 1.01


def test_on_the_analytic_backend_faults_are_refused_everywhere(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = FAULTY.replace(", backend: flow", "")
    assert main(["train", str(_scenario(tmp_path, text))]) == 2
    err = capsys.readouterr().err
    assert "training.backend" in err and "flow" in err and "1 fault(s)" in err
    with pytest.raises(ConfigError) as e:
        jobs.job_from_scenario("train", load_scenario_text(text))
    assert e.value.field == "training.backend"
    from fabricsim.sweeps import run_point

    assert "only the flow backend" in run_point("train", yaml.safe_load(text))["error"]


def test_the_flag_turns_the_flow_backend_on(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    text = FAULTY.replace(", backend: flow", "")
    assert main(["train", str(_scenario(tmp_path, text)), "--backend", "flow",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["faults"]["slowdown"] > 1.01


def test_the_web_and_a_sweep_feel_the_fault_too() -> None:
    pytest.importorskip("fastapi")
    from fabricsim.sweeps import run_point
    from fabricsim.web.jobs import run_job

    web = run_job("train", [FAULTY])["designs"][0]["train"]
    point = run_point("train", yaml.safe_load(FAULTY))
    cli = jobs.run(jobs.job_from_scenario("train", load_scenario_text(FAULTY)))
    assert web["step_time_s"] == pytest.approx(cli.step.step_time_s, rel=1e-9)
    assert point["step_time_s"] == pytest.approx(cli.step.step_time_s, rel=1e-9)
    assert point["slowdown"] == pytest.approx(web["faults"]["slowdown"], rel=1e-9)
    assert point["slowdown"] > 1.01


def test_serving_feels_a_fault_on_its_instance() -> None:
    """An instance across two servers (TP 16) all-reduces through the slow NIC; one that
    fits in server 0 does not."""
    text = ("cluster: {system: dgx-h100, nodes: 2}\n"
            "inference: {model: llama3-70b, tp: 16, backend: flow}\n"
            "faults:\n  - {type: slow_nic, node: 1, index: 0, factor: 0.1}\n")
    r = jobs.run(jobs.job_from_scenario("infer", load_scenario_text(text)))
    assert r.to_dict()["faults"]["tpot_slowdown"] > 1.0
    inside = text.replace("tp: 16", "tp: 8")
    r = jobs.run(jobs.job_from_scenario("infer", load_scenario_text(inside)))
    assert r.to_dict()["faults"]["tpot_slowdown"] == pytest.approx(1.0)


def test_scale_and_plan_refuse_faults_they_cannot_place() -> None:
    sc = load_scenario_text(FAULTY)
    for kind in ("scale", "plan"):
        with pytest.raises(ConfigError, match="rebuilds the cluster") as e:
            jobs.job_from_scenario(kind, sc)
        assert e.value.field == "faults"
