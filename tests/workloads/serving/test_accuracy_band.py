"""Every serving answer carries the held-out error of published figures like it, and
says where the instance lies outside them."""

from __future__ import annotations

import json

import pytest

from fabricsim.cli.app import main
from fabricsim.workloads.serving.accuracy import band, heldout


@pytest.mark.parametrize(("kw", "words"), [
    ({"engine": "trtllm", "generation": "hopper", "gpus": 8, "moe": False}, None),
    ({"engine": "sglang", "generation": "hopper", "gpus": 8, "moe": False}, "sglang"),
    ({"engine": "vllm-0.5", "generation": "blackwell", "gpus": 8, "moe": False},
     "blackwell"),
    ({"engine": "trtllm", "generation": "hopper", "gpus": 16, "moe": False}, "wider"),
    ({"engine": "trtllm", "generation": "hopper", "gpus": 8, "moe": True},
     "mixture-of-experts"),
])
def test_the_band_and_where_it_does_not_reach(kw: dict, words: str | None) -> None:
    b = band("throughput", **kw)
    t = heldout()["kinds"]["throughput"]
    assert (b.median, b.p90, b.figures, b.sources) == (t["median"], t["p90"], t["figures"],
                                                       t["sources"])
    if words is None:
        assert b.warnings == []
    else:
        assert any(words in w for w in b.warnings), b.warnings
    # the latency figures come from three sources now (TensorRT-LLM's first-token
    # tables, NIM, gpt-fast, beside LambdaLabs' vLLM runs): no one-source warning
    assert not any("rests on one source" in w for w in band("latency", **kw).warnings)


def test_infer_prints_and_returns_its_bands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["infer", "--model", "llama3-70b", "--tp", "8", "--system", "dgx-h100",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["accuracy"]) == {"latency", "throughput"}
    assert d["accuracy"]["throughput"]["figures"] >= 20
    assert main(["infer", "--model", "llama3-8b", "--tp", "1", "--system", "hgx-b200"]) == 0
    out = capsys.readouterr().out
    assert "on latencies (first token, per output token)" in out and "blackwell" in out
