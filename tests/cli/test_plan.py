"""``fabricsim plan`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim.cli.app import main


def test_plan_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.png"
    rc = main(["plan", "--model", "llama3-8b", "--gpus", "16", "--fabrics",
               "ib-ndr,roce-400g", "--tp", "8", "--global-batch", "16", "--seq-len", "4096",
               "--plot", str(out), "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    ib, roce = d["fabrics"]
    assert (ib["fabric"], roce["fabric"]) == ("ib-ndr", "roce-400g")
    assert ib["capex_usd"] > roce["capex_usd"]
    assert ib["tokens_per_s"] >= roce["tokens_per_s"] * 0.99
    assert ib["usd_per_1t_tokens"] == pytest.approx(ib["usd_per_token"] * 1e12)
    assert not ib["planned"] and out.stat().st_size > 0


def test_plan_uses_planner_without_layout(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["plan", "--model", "llama3-8b", "--nodes", "1", "--fabrics", "roce-400g",
               "--global-batch", "8", "--seq-len", "2048"])
    assert rc == 0
    assert "planner" in capsys.readouterr().out


@pytest.mark.parametrize("args, field", [
    (["--fabrics", "ib-ndrr"], "fabrics"),
    (["--gpus", "12"], "--gpus"),
    (["--gpus", "16", "--nodes", "4"], "--gpus"),
    (["--lifetime-years", "0"], "--lifetime-years"),
])
def test_plan_bad_input_exit_2(args: list[str], field: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "llama3-8b", "--tp", "8", *args]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_plan_reports_goodput_per_fabric(capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from fabricsim.cli.app import main

    assert main(["plan", "--model", "llama3-8b", "--gpus", "64", "--fabrics",
                 "ib-ndr,roce-400g", "--global-batch", "64", "--seq-len", "4096",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["fabrics"]
    for r in rows:
        assert 0.9 < r["goodput"] < 1.0
        assert r["effective_tokens_per_s"] == r["tokens_per_s"] * r["goodput"]


def test_plan_keeps_the_software_stack(capsys: pytest.CaptureFixture[str]) -> None:
    """The planner's layouts carry --zero, --fsdp-impl, --attention-kernel and
    --grad-reduce-dtype (plan used to drop them and time FlashAttention-2, BF16)."""
    base = ["plan", "--system", "dgx-a100", "--model", "mpt-1b", "--nodes", "1",
            "--fabrics", "roce-400g", "--global-batch", "16", "--seq-len", "8192", "--json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)["fabrics"][0]
    assert main([*base, "--zero", "fsdp", "--fsdp-impl", "megatron", "--attention-kernel",
                 "flash1", "--grad-reduce-dtype", "fp32"]) == 0
    stack = json.loads(capsys.readouterr().out)["fabrics"][0]
    par = stack["parallel"]
    assert (par["zero"], par["fsdp_impl"], par["attention_kernel"],
            par["grad_reduce_dtype"]) == ("fsdp", "megatron", "flash1", "fp32")
    assert stack["tokens_per_s"] < plain["tokens_per_s"]
    assert main([*base, "--fsdp-impl", "megatron"]) == 2
    assert "--zero fsdp" in capsys.readouterr().err


def test_plan_starts_from_the_systems_own_fabric() -> None:
    """Without --fabrics the plan compares the cluster's own fabric, the system's default
    where the scenario names none (Slingshot for HPE's quad-GH200), with the usual three."""
    from fabricsim.jobs.scale import PLAN_FABRICS, plan_job
    from fabricsim.scenario import Scenario

    sc = Scenario.model_validate({"cluster": {"system": "quad-gh200", "nodes": 4},
                                  "training": {"model": "llama3-8b", "tp": 4,
                                               "global_batch": 16, "seq_len": 2048}})
    assert plan_job(sc).fabrics == ("slingshot-11", *PLAN_FABRICS)
    dgx = sc.model_copy(update={"cluster": sc.cluster.model_copy(
        update={"system": "dgx-h100", "nodes": 2})})
    assert plan_job(dgx).fabrics == PLAN_FABRICS   # its own, ib-ndr, is among them
