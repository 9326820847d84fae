"""``fabricsim scale``: infeasible sizes are skipped with a reason, the batch rule is said."""

import json

import pytest

from fabricsim.cli.app import main

SCEN = "src/fabricsim/scenarios/train-llama3-70b-256.yaml"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


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

    code = main(["scale", "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--seq-len",
                 "8192", "--gpus", "64,16384", "--strong", "--global-batch", "1024",
                 "--json"])
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
