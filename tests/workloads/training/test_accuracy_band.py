"""Every training answer carries the held-out error of published runs like it, and says
where it lies outside them."""

from __future__ import annotations

import json

import pytest

from fabricsim.cli.app import main
from fabricsim.workloads.training.accuracy import MIN_RUNS, band, heldout


def test_a_class_with_enough_runs_has_its_own_band() -> None:
    data = heldout()
    b = band("ampere", "bf16", "tensorwise", gpus=512, moe=False)
    assert b.group == "ampere/bf16" and b.warnings == []
    assert (b.median, b.p90, b.runs) == (data["classes"]["ampere/bf16"]["median"],
                                         data["classes"]["ampere/bf16"]["p90"],
                                         data["classes"]["ampere/bf16"]["runs"])
    assert b.runs >= MIN_RUNS and b.sources >= 2


@pytest.mark.parametrize(("args", "group", "words"), [
    (("hopper", "fp8", "torchao", 64, False), "dense", "rests on one source"),
    (("blackwell", "bf16", "", 64, False), "dense", "no published blackwell/bf16"),
    (("ampere", "bf16", "", 64, True), "ampere/bf16", "MoE layers"),
    (("ampere", "bf16", "", 100_000, False), "ampere/bf16", "beyond the largest"),
])
def test_outside_the_published_runs_it_says_so(args: tuple, group: str, words: str) -> None:
    gen, prec, recipe, gpus, moe = args
    b = band(gen, prec, recipe, gpus=gpus, moe=moe)
    assert b.group == group and any(words in w for w in b.warnings), b.warnings


def test_train_prints_and_returns_its_band(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "train-llama3-70b-256", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["accuracy"]["group"] == "hopper/bf16" and d["accuracy"]["runs"] >= MIN_RUNS
    assert main(["train", "--model", "mixtral-8x7b", "--tp", "2", "--ep", "8",
                 "--system", "dgx-h100", "--nodes", "2"]) == 0
    out = capsys.readouterr()
    assert "held-out error of published hopper/bf16 runs" in out.out
    assert "MoE layers" in out.out + out.err


def test_scale_carries_a_band_per_size(capsys: pytest.CaptureFixture[str]) -> None:
    """Each feasible size gets the band of its class; a size beyond the largest published
    run checked is warned about, once."""
    assert main(["scale", "train-llama3-70b-256", "--gpus", "256,32768", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    small, big = d["points"]
    assert small["accuracy"]["group"] == big["accuracy"]["group"] == "hopper/bf16"
    assert small["accuracy"]["warnings"] == []
    assert [w for w in d["warnings"] if "beyond the largest" in w] == \
        big["accuracy"]["warnings"]
