"""``fabricsim infer`` end to end."""

from __future__ import annotations

import json

import pytest

from fabricsim.cli.app import main


def test_infer_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["infer", "--model", "llama2-70b", "--tp", "8", "--batch", "4", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("prefill_s", "tpot_s", "tokens_per_s_per_request", "tokens_per_s_per_gpu",
              "comm_share"):
        assert d[k] > 0
    assert d["tokens_per_s"] == pytest.approx(4 / d["tpot_s"])


def test_infer_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["infer", "--model", "llama3-8b", "--tp", "2"]) == 0
    assert "time per output token" in capsys.readouterr().out


@pytest.mark.parametrize("args, field", [
    (["--tp", "3"], "--tp"),
    (["--tp", "1"], "--tp"),
    (["--precision", "int4"], "--precision"),
    (["--model", "llama9"], "--model"),
])
def test_infer_bad_input_exit_2(args: list[str], field: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["infer", "--model", "llama2-70b", *args]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_an_instance_inside_one_server_says_the_fabric_does_not_matter(
        capsys: pytest.CaptureFixture[str]) -> None:
    from fabricsim.cli.app import main

    assert main(["infer", "--system", "dgx-h100", "--nodes", "4", "--model", "llama3-70b",
                 "--tp", "8"]) == 0
    assert "scale-out fabric" in capsys.readouterr().out
    assert main(["infer", "--system", "dgx-h100", "--nodes", "4", "--model", "llama3-405b",
                 "--tp", "8", "--pp", "2"]) == 0
    assert "scale-out fabric" not in capsys.readouterr().out


def test_infer_serves_the_scenarios_model_and_names_what_it_does_not_use(
        tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A scenario's model shape is served (it used to fall back to llama3-70b); its
    training layout is named in a note, not dropped silently."""
    import json

    from fabricsim.cli.app import main

    sc = tmp_path / "s.yaml"
    sc.write_text("cluster: {system: dgx-h100, nodes: 1}\n"
                  "training: {layers: 4, hidden: 1024, heads: 8, ffn: 4096, vocab: 32000}\n")
    assert main(["infer", str(sc), "--tp", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"] == "custom" and not d["notes"]
    sc.write_text("cluster: {system: dgx-h100, nodes: 1}\n"
                  "training: {model: llama3-8b, layers: 16, tp: 2, precision: fp8}\n")
    assert main(["infer", str(sc), "--tp", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"].startswith("llama3-8b") and d["tp"] == 1
    assert "precision, tp" in d["notes"][0]
    sc.write_text("cluster: {system: dgx-h100, nodes: 1}\ntraining: {model: llama3-9b}\n")
    assert main(["infer", str(sc)]) == 2
    assert "training.model" in capsys.readouterr().err


def test_infer_json_says_where_it_ran_and_warns_for_both_instances(
        capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from fabricsim.cli.app import main

    assert main(["infer", "--model", "llama3-70b", "--nodes", "3", "--prefill-tp", "16",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["cluster"] == {"system": "dgx-h100", "gpu": "h100-sxm", "fabric": "ib-ndr",
                            "topology": "rail-optimized", "nodes": 3, "gpus": 24}
    assert d["model_params"] > 70e9
    assert any("prefill instance: tp=16 spans" in w
               for w in d["disaggregated"]["warnings"])
    assert main(["infer", "--tp", "3"]) == 2  # suggests only what 8 GPUs hold
    assert "use --tp 1, 2, 4, 8\n" in capsys.readouterr().err


def test_infer_wide_ep_names_the_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang-style DeepSeek serving: DP attention, EP over 32 GPUs of four servers."""
    args = ["infer", "--model", "deepseek-v3", "--system", "dgx-h100", "--nodes", "4",
            "--tp", "32", "--ep", "32", "--dp-size", "32", "--batch", "512",
            "--precision", "fp8"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "attention-dp=32" in out and "deepep-ll (decode), deepep (prefill)" in out
    assert main([*args, "--ep-kernel", "hybridep", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ep_kernel"] == "hybridep" and d["ep_s_per_token"] > 0
    assert main([*args[:-2], "--ep", "8"]) == 2
    assert "--ep" in capsys.readouterr().err
