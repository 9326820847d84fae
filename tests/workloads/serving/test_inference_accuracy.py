"""Pins the summary of benchmarks/accuracy_inference.py so a serving-model regression fails.

Bounds are where the model stands after the serving work (issue target: median error of
the published throughput / inter-token latency <= 15 %): primary median 4.8 %, held-out
median 6.8 %. The worst held-out row (1120, vLLM's Marlin kernels for Llama 3.1 405B on
A100) is pinned as *still wrong*, so that an improvement or a regression there shows.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from benchmark_module import load

ROOT = Path(__file__).resolve().parents[3]


def _bench() -> ModuleType:
    return load("accuracy_inference")


@pytest.fixture(scope="module")
def results() -> tuple[ModuleType, list[dict[str, Any]]]:
    b = _bench()
    return b, b.evaluate(b.cases())


def test_summary_targets(results: tuple[ModuleType, list[dict[str, Any]]]) -> None:
    b, res = results
    s = b.summary(res)
    assert s["errors"] == []
    p, held, fit = s["primary"], s["held_out"], s["fitted"]
    assert p["figures"] == 29 and p["rows"] == 16
    assert p["median_abs_error"] <= 0.06
    assert held["median_abs_error"] <= 0.08 and held["figures"] == 18
    assert fit["max_abs_error"] <= 0.13
    assert p["max_abs_error"] <= 0.52 and p["worst_row"] == 1120


def test_by_source(results: tuple[ModuleType, list[dict[str, Any]]]) -> None:
    _, res = results
    primary = [r for r in res if "secondary" not in r]
    trt = [abs(r["rel_error"]) for r in primary if r["row"] < 1117 or r["row"] > 1122]
    vllm_h100 = [abs(r["rel_error"]) for r in primary if r["row"] in (1117, 1119, 1121)]
    # row 1096 (TP2, batch 1024, FP8) -23 %: the FP8 share refitted on 1097/1098 with the
    # engines' own all-reduce (0.44 -> 0.37) is low for it
    assert len(trt) == 17 and max(trt) <= 0.235
    assert len(vllm_h100) == 8 and max(vllm_h100) <= 0.26
    # still wrong: Marlin (FP8 weights, 16-bit math) at 405B on A100 runs faster than a
    # tensor-core share fitted at 70B says
    r1120 = [r["rel_error"] for r in primary if r["row"] == 1120]
    assert -0.42 <= r1120[0] <= -0.33 and 0.40 <= r1120[1] <= 0.52


def test_every_row_is_run_or_explained(results: tuple[ModuleType, list[dict[str, Any]]]
                                       ) -> None:
    b, res = results
    import csv

    with open(ROOT / "data" / "reference" / "measurements_2.csv", encoding="utf-8") as fh:
        ids = {int(r["id"]) for r in csv.DictReader(fh) if r["topic"] == "inference"}
    run = {r["row"] for r in res}
    assert ids == run | set(b.NOT_COVERED)
    assert all("secondary" in r for r in res if r["row"] == 1122)


def test_sharegpt_sample_matches_the_published_means() -> None:
    b = _bench()
    reqs = b.sharegpt_requests()
    assert len(reqs) == 320
    assert sum(p for p, _ in reqs) / 320 == pytest.approx(205, rel=0.05)
    assert sum(o for _, o in reqs) / 320 == pytest.approx(197, rel=0.05)
    assert b.sharegpt_requests() == reqs


def test_leave_one_source_out_as_it_stands() -> None:
    """The tensor-core shares refitted without each source (TensorRT-LLM's v0.6.1 docs,
    Azure's guide, LambdaLabs' vLLM runs), its figures predicted: median 5.3 %, p90 23 %
    (7.3 % for the row-split held-out figures above). Each engine's own overhead
    constants rest on the one source that runs that engine, so every figure is held out
    in its hardware only, and each row says so."""
    b = _bench()
    before = b.evaluate(b.cases())
    rows = b.loso()
    s = b.loso_summary(rows)
    assert s["all"]["figures"] == 29 and all(r["engine_in_sample"] for r in rows)
    # 8.3 % / 19 % while TP all-reduces were NCCL's with NVLS free of latency; 5.3 % / 23 %
    # with the engines' own one-shot/two-shot kernels (collectives.oneshot)
    assert s["all"]["median"] <= 0.06 and s["all"]["p90"] <= 0.24
    assert s["groups"]["latency"]["median"] <= 0.15  # decode ITL, issue 35's target
    for r in rows:
        assert r["source"] not in r["fitted_on"]
    # the shipped constants are back after the run: every figure as before
    assert b.evaluate(b.cases()) == before
    # fabricsim infer's band is this run's table (accuracy_inference.py --loso --write)
    import json

    shipped = json.loads((ROOT / "src" / "fabricsim" / "workloads" / "serving"
                          / "heldout.json").read_text(encoding="utf-8"))
    assert shipped == b.heldout_table(rows)
