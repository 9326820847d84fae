"""``fabricsim scale``: infeasible sizes are skipped with a reason, the batch rule is said."""

import json
from pathlib import Path

import pytest
from cli_run import run

from fabricsim.cli.app import main

SCEN = "src/fabricsim/scenarios/train-llama3-70b-256.yaml"


def test_issue_example_skips_infeasible_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "scale", SCEN, "--gpus", "8,64,512,4096,16384", "--json")
    assert code == 0, err
    d = json.loads(out)
    pts = {p["gpus"]: p for p in d["points"]}
    assert not pts[8]["feasible"] and "tp·pp·cp = 32" in pts[8]["reason"]
    for n in (64, 512, 4096, 16384):
        assert pts[n]["feasible"] and pts[n]["tokens_per_s_per_gpu"] > 0
        # weak scaling: the scenario's 512 sequences on 256 GPUs = 64 per replica of 32
        assert pts[n]["global_batch"] == 64 * n // 32
    assert d["seqs_per_replica"] == 64
    assert any("global_batch=512" in n for n in d["notes"])
    # the baseline is the smallest feasible size (the model needs more than one node)
    assert pts[64]["scaling_efficiency"] == 1.0 and pts[16384]["baseline_gpus"] == 64


def test_table_says_skipped_and_batch_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "scale", SCEN, "--gpus", "8,64")
    assert code == 0, err
    assert "infeasible" in out and "skipped 8 GPUs" in out and "tp·pp·cp = 32" in out
    assert "weak scaling" in out and "global batch" in out


def test_no_feasible_size_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "scale", SCEN, "--gpus", "8,16")
    assert code == 2
    assert "gpus" in err and "8 GPUs" in err and "16 GPUs" in err


def test_strong_scaling_flag(capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from fabricsim.cli.app import main

    code = main(["scale", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--vp", "1",
                 "--seq-len", "8192", "--gpus", "64,16384", "--strong", "--global-batch",
                 "1024", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    d = json.loads(out.out)
    assert d["mode"] == "strong"
    assert [p["global_batch"] for p in d["points"]] == [1024, 1024]
    assert d["points"][1]["main_loss"] == "bubble"
    code = main(["scale", "--model", "llama3-70b", "--tp", "8", "--gpus", "64", "--strong"])
    err = capsys.readouterr().err
    assert code == 2 and "--global-batch" in err


def test_scale_takes_the_software_stack(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["scale", "--system", "dgx-a100", "--model", "mpt-1b", "--seq-len", "8192",
            "--micro-batch", "1", "--gpus", "8,16", "--json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)["points"]
    assert main([*base, "--zero", "fsdp", "--fsdp-impl", "megatron", "--attention-kernel",
                 "flash1", "--grad-reduce-dtype", "fp32"]) == 0
    stack = json.loads(capsys.readouterr().out)["points"]
    assert all(s["tokens_per_s_per_gpu"] < p["tokens_per_s_per_gpu"]
               for s, p in zip(stack, plain, strict=True))
    assert main([*base, "--grad-reduce-dtype", "fp16"]) == 2
    assert "--grad-reduce-dtype" in capsys.readouterr().err


def test_scale_reads_a_pasted_megatron_list(capsys: pytest.CaptureFixture[str]) -> None:
    """--from-megatron sets the layout (VP included) and the batch --strong keeps; what
    has no effect on the step time is said, not dropped."""
    args = ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
            "--virtual-pipeline-model-parallel-size 5 --sequence-parallel "
            "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
            "--micro-batch-size 1 --global-batch-size 256 --bf16 --lr 1e-4")
    base = ["scale", "--system", "dgx-h100", "--model", "llama3-70b", "--seq-len", "4096",
            "--gpus", "64,256", "--strong", "--json"]
    assert main([*base, "--from-megatron", args]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [p["global_batch"] for p in d["points"]] == [256, 256]
    assert any("--lr 1e-4" in n for n in d["notes"])
    no_vp = args.replace("--virtual-pipeline-model-parallel-size 5 ", "")
    assert main([*base, "--from-megatron", no_vp, "--vp", "5"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert [p["tokens_per_s"] for p in same["points"]] == \
        [p["tokens_per_s"] for p in d["points"]]
    assert main([*base, "--from-megatron", no_vp]) == 0
    plain = json.loads(capsys.readouterr().out)  # no VP: a longer bubble
    assert all(v["tokens_per_s"] > p["tokens_per_s"]
               for v, p in zip(d["points"], plain["points"], strict=True))


def test_scale_and_plan_build_the_scenarios_own_cluster(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """A user-defined system, a calibration (cluster.params) and --gpus-per-node reach
    every size: scale and plan give train's step (scale refused the system, dropped
    the calibration and the GPUs per server)."""
    sc = tmp_path / "s.yaml"
    sc.write_text("systems:\n  box: {base: dgx-h100}\n"
                  "cluster:\n  system: box\n  nodes: 8\n  gpus_per_node: 4\n"
                  "  params: {calibration: {net.efficiency: 0.3}}\n"
                  "training: {model: llama3-8b, tp: 4, global_batch: 64, seq_len: 4096}\n")
    steps = []
    for cmd in (["train", str(sc)], ["plan", str(sc), "--fabrics", "ib-ndr"],
                ["scale", str(sc), "--gpus", "32", "--strong"]):
        assert main([*cmd, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        steps.append(d.get("step_time_s") or (d.get("fabrics") or d.get("points"))[0]
                     ["step_time_s"])
    assert steps[1] == pytest.approx(steps[0], rel=1e-9)
    assert steps[2] == pytest.approx(steps[0], rel=1e-9)
    sc.write_text(sc.read_text().replace("  params: {calibration: {net.efficiency: 0.3}}\n",
                                         ""))
    assert main(["train", str(sc), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] < steps[0]  # calibrated slower


def test_scale_takes_the_goodput_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    """--checkpoint-gbps and --restart-min reach every size, whose JSON carries the MTBF,
    failures a day and the dollars lost (scale had neither flag)."""
    base = ["scale", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--vp", "5",
            "--seq-len", "8192", "--gpus", "1024,16384", "--strong", "--global-batch",
            "1024", "--json"]
    assert main(base) == 0
    fast = json.loads(capsys.readouterr().out)["points"]
    assert main([*base, "--checkpoint-gbps", "50", "--restart-min", "30"]) == 0
    slow = json.loads(capsys.readouterr().out)["points"]
    assert all(s["goodput"] < f["goodput"] for s, f in zip(slow, fast, strict=True))
    assert all(s["job_mtbf_hours"] == f["job_mtbf_hours"] for s, f in
               zip(slow, fast, strict=True))
    assert fast[1]["failures_per_day"] > fast[0]["failures_per_day"] > 0
    assert main([*base, "--restart-min", "-1"]) == 2


def test_scale_takes_trains_stack_flags(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    """The overlap, pipeline-split and MoE flags of train reach scale, and give what the
    same fields in a scenario give (they were YAML-only: 'No such option')."""
    base = ("scale", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--vp", "5",
            "--seq-len", "8192", "--global-batch", "512", "--gpus", "256,1024", "--strong",
            "--json")
    code, out, err = run(capsys, *base, "--tp-comm-overlap", "--first-stage-layers", "15",
                         "--last-stage-layers", "15")
    assert code == 0, err
    flags = json.loads(out)["points"]
    sc = tmp_path / "s.yaml"
    sc.write_text("cluster: {system: dgx-h100, nodes: 32}\ntraining: {model: llama3-70b, "
                  "tp: 8, pp: 4, vp: 5, seq_len: 8192, global_batch: 512, "
                  "tp_comm_overlap: true, first_stage_layers: 15, last_stage_layers: 15}\n")
    code, out, err = run(capsys, "scale", str(sc), "--gpus", "256,1024", "--strong", "--json")
    assert code == 0, err
    yaml_pts = json.loads(out)["points"]
    assert [p["tokens_per_s_per_gpu"] for p in flags] == pytest.approx(
        [p["tokens_per_s_per_gpu"] for p in yaml_pts])
    code, out, _ = run(capsys, *base)
    plain = json.loads(out)["points"]
    assert flags[0]["losses"]["tp"] < plain[0]["losses"]["tp"] / 10  # TP hidden
