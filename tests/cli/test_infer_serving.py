"""``fabricsim infer`` with pipeline/expert parallelism, continuous batching and
disaggregated serving; bad input exits 2 with the flag and the fix, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim.cli.app import main


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["infer", *args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert isinstance(d, dict)
    return d


def test_pp_ep_and_kv_limits_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(["--model", "llama3-70b", "--tp", "4", "--pp", "2", "--batch", "8",
               "--precision", "fp8"], capsys)
    assert (d["tp"], d["pp"], d["gpus"], d["kv_precision"]) == (4, 2, 8, "fp8")
    assert d["max_batch"] > 8 and d["kv_capacity_tokens"] > 0
    assert d["decode_breakdown_s"]["p2p_s"] > 0  # type: ignore[index]
    d = _json(["--model", "mixtral-8x7b", "--tp", "8", "--ep", "4"], capsys)
    assert d["ep"] == 4


def test_continuous_batching_and_disaggregation(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(["--model", "llama3-70b", "--precision", "fp8", "--tpot-target-ms", "25",
               "--prompt-len", "1000", "--output-len", "200"], capsys)
    c = d["continuous"]
    assert isinstance(c, dict)
    assert c["tpot_s"] <= 0.025 and c["limited_by"] == "tpot-target"
    d = _json(["--model", "llama3-70b", "--nodes", "2", "--prefill-tp", "8", "--batch", "32",
               "--precision", "fp8", "--engine", "trtllm"], capsys)
    dis = d["disaggregated"]
    assert isinstance(dis, dict)
    assert dis["crosses_servers"] and dis["kv_transfer_s"] > 0


def test_table_shows_the_new_sections(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["infer", "--model", "llama3-8b", "--tp", "2", "--nodes", "2",
                 "--tpot-target-ms", "20", "--prefill-tp", "2", "--engine", "vllm-0.5"]) == 0
    out = capsys.readouterr().out
    for text in ("KV cache capacity", "continuous batching", "disaggregated",
                 "KV transfer", "engine vllm-0.5"):
        assert text in out


@pytest.mark.parametrize("args, needles", [
    (["--nodes", "3", "--pp", "3"], ["--pp", "80 layers", "--pp 1, 2\n"]),
    (["--pp", "2"], ["--pp", "add --nodes"]),
    (["--pp", "0"], ["--pp", "greater than or equal to 1"]),
    (["--ep", "2"], ["--ep", "mixture-of-experts"]),
    (["--model", "mixtral-8x7b", "--tp", "4", "--ep", "8"], ["--ep", "divide tp=4"]),
    (["--model", "mixtral-8x7b", "--tp", "8", "--ep", "3"], ["--ep", "divide"]),
    (["--prefill-tp", "8"], ["--prefill-tp", "raise --nodes"]),
    (["--tpot-target-ms", "0.5"], ["--tpot-target-ms", "no batch meets"]),
    (["--tpot-target-ms", "-2"], ["--tpot-target-ms", "greater than 0"]),
    (["--max-batch", "0"], ["--max-batch", "greater than or equal to 1"]),
    (["--kv-precision", "int4"], ["--kv-precision", "'bf16' or 'fp8'"]),
    (["--engine", "tgi"], ["--engine", "trtllm"]),
    (["--system", "dgx-a100", "--precision", "fp8"], ["--precision", "fp8-weights"]),
    (["--batch", "100000"], ["--batch", "lower --batch to"]),
])
def test_bad_input_exits_2(args: list[str], needles: list[str],
                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["infer", "--model", "llama3-70b", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


def test_inference_section_serves_and_flags_override(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """A scenario's inference: section gives the model and the serving layout; flags
    override it; validate serves it once (a serving-only scenario used to fail validate
    as a training job)."""

    assert main(["infer", "serve-llama3-70b", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["serving"]["batch"] == 64 and d["continuous"] and d["disaggregated"]
    assert main(["infer", "serve-llama3-70b", "--tp", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tp"] == 4
    same = ["infer", "--model", "llama3-70b", "--system", "dgx-h100", "--nodes", "2",
            "--tp", "8", "--batch", "64", "--prompt-len", "4096", "--output-len", "512",
            "--precision", "fp8", "--tpot-target-ms", "30", "--prefill-tp", "8", "--json"]
    assert main(same) == 0
    flags = json.loads(capsys.readouterr().out)
    assert flags["tpot_s"] == d["tpot_s"]
    assert flags["continuous"]["batch"] == d["continuous"]["batch"]
    long = tmp_path / "long.yaml"
    long.write_text("cluster: {system: dgx-h100, nodes: 1}\n"
                    "inference: {model: llama3-70b, max_context: 131072, precision: fp8, "
                    "prompt_len: 100000}\n")
    assert main(["validate", str(long)]) == 0
    assert "inference llama3-70b" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {system: dgx-h100, nodes: 1}\ninference: {model: llama3-70b, "
                   "batchsize: 4}\n")
    assert main(["infer", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "inference.batchsize" in err and "known fields" in err and "batch" in err


def test_every_face_serves_the_same_model(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    """An inference: section naming no model serves the training: section's, in infer,
    validate and the web alike; --model replaces the preset and keeps the shape fields."""
    from fabricsim.web.jobs import run_job

    text = ("cluster: {system: dgx-h100, nodes: 1}\ntraining: {model: llama3-8b, "
            "layers: 16}\ninference: {tp: 2}\n")
    sc = tmp_path / "e.yaml"
    sc.write_text(text)
    assert main(["infer", str(sc), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert main(["validate", str(sc)]) == 0
    assert "inference llama3-8b* (tp 2" in capsys.readouterr().out
    web = run_job("infer", [text])["designs"][0]["infer"]
    assert cli["model"] == web["model"] == "llama3-8b*"
    assert cli["model_params"] < 5e9 and web["tpot_s"] == cli["tpot_s"]
    assert main(["infer", str(sc), "--model", "llama3-70b", "--json"]) == 0
    flagged = json.loads(capsys.readouterr().out)
    assert flagged["model"] == "llama3-70b*"  # 16 layers of Llama 3 70B


def test_the_old_tpot_flag_still_works_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """--tpot-target is the old name of --tpot-target-ms (one vocabulary with the
    scenario's tpot_target_ms): still taken, with a warning; both at once are refused."""
    assert main(["infer", "--model", "llama3-8b", "--tp", "1", "--tpot-target", "30",
                 "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["serving"]["tpot_target_ms"] == 30
    assert "--tpot-target is the old name of --tpot-target-ms" in cap.err
    assert main(["infer", "--model", "llama3-8b", "--tpot-target", "30",
                 "--tpot-target-ms", "30"]) == 2
    assert "give one" in capsys.readouterr().err
