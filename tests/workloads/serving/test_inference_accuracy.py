"""Pins the summary of benchmarks/accuracy_inference.py so a serving-model regression fails.

Bounds are where the model stands (issue target: median error of the published
throughput / inter-token latency <= 15 %): primary median 8.7 % over 116 figures, the
87 batch-1 figures of serving_lowbatch.csv among them. The worst held-out row (1120,
vLLM's Marlin kernels for Llama 3.1 405B on A100) is pinned as *still wrong*, so that an
improvement or a regression there shows.
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
    assert p["figures"] == 116 and p["rows"] == 103
    assert p["median_abs_error"] <= 0.09
    assert held["median_abs_error"] <= 0.09 and held["figures"] == 64
    # worst fitted: Falcon-180B's 128-token first token on H200 (-39 %), whose parallel
    # attention and MLP run as the usual sequential block
    assert fit["max_abs_error"] <= 0.40
    assert p["max_abs_error"] <= 0.52 and p["worst_row"] == 1120


def test_by_source(results: tuple[ModuleType, list[dict[str, Any]]]) -> None:
    _, res = results
    primary = [r for r in res if "secondary" not in r]
    trt = [abs(r["rel_error"]) for r in primary
           if r["row"] < 1117 or 1122 < r["row"] < 1126]
    vllm_h100 = [abs(r["rel_error"]) for r in primary if r["row"] in (1117, 1119, 1121)]
    # Azure's Llama 3 70B batch-16 rows: -14 / -16 % (H100, H200), +13 % (A100)
    assert len(trt) == 15 and max(trt) <= 0.17
    # Azure's 405B FP8 rows (TensorRT-LLM's Python runtime): +34 / +35 %. They were
    # +8 / 0 % with an FP8 share of 0.37; TensorRT-LLM's own batch-1 first-token
    # latencies at 2,048 tokens want 0.59, and the fit over both takes 0.59
    r405 = [r["rel_error"] for r in primary if r["row"] in (1126, 1127)]
    assert all(0.30 <= e <= 0.40 for e in r405)
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
    assert ids == {r for r in run if r < 6000} | set(b.NOT_COVERED)
    assert all("secondary" in r for r in res if r["row"] == 1122)
    # serving_lowbatch.csv: every row run, but for the ones lowbatch_cases() names
    with open(b.LOWBATCH_CSV, encoding="utf-8") as fh:
        low = list(csv.DictReader(fh))
    skipped = {int(r["id"]) for r in low if r["gpu"] == "L40S" or r["model"] == "mixtral-8x7b"
               or r["precision"].startswith("int")}
    assert {int(r["id"]) for r in low} == {r for r in run if r > 6000} | skipped
    assert len(skipped) == 37


def test_batch_one_serving(results: tuple[ModuleType, list[dict[str, Any]]]) -> None:
    """serving_lowbatch.csv: each layer's fixed kernel time and a prefill's weight reads
    added to its math. Without them, 128-token first-token latencies came out 60 % short
    (median of 38), gpt-fast's batch-1 decode 25 % and NIM's inter-token latency 33 %."""
    _, res = results
    low = [r for r in res if r["row"] > 6000]
    assert len(low) == 87
    ttft128 = sorted(abs(r["rel_error"]) for r in low if r["case"].endswith(" 128 TTFT"))
    assert len(ttft128) == 38 and ttft128[len(ttft128) // 2] <= 0.16
    fast = [r["rel_error"] for r in low if r["case"].startswith("gpt-fast")]
    assert len(fast) == 7 and max(abs(e) for e in fast) <= 0.16
    itl = [r["rel_error"] for r in low if r["case"].endswith(" ITL")]
    assert len(itl) == 2 and all(-0.2 <= e <= -0.1 for e in itl)  # still short


def test_sharegpt_sample_matches_the_published_means() -> None:
    b = _bench()
    reqs = b.sharegpt_requests()
    assert len(reqs) == 320
    assert sum(p for p, _ in reqs) / 320 == pytest.approx(205, rel=0.05)
    assert sum(o for _, o in reqs) / 320 == pytest.approx(197, rel=0.05)
    assert b.sharegpt_requests() == reqs


def test_leave_one_source_out_as_it_stands() -> None:
    """The hardware constants (the 8-bit tensor-core shares the other sources run on, the
    layers' fixed kernel time per phase) refitted without each of the five sources, its
    figures predicted: median 9.0 %, p90 30 % over 116 figures; the 29 figures of
    measurements_2.csv 4.5 %, the 87 batch-1 figures 12.4 % (40 % before, never
    fitted). 16-bit GEMMs run at the kernel benchmark's rate, fitted on no serving figure
    (13.9 % / 16.1 % while their shares were fitted: without TensorRT-LLM's tables the
    A100's went to 0.64). Prefill's fixed kernel time is fitted as decode's plus what it
    adds, never below. Each engine's own overhead constants rest on the one source that
    runs that engine, so every figure is held out in its hardware only, and each row
    says so. Since a ring's steps cost a fixed time (2026-12-01) the median is 9.6 %
    (9.2 % before): tensor-parallel first tokens on Hopper moved towards the published
    figures (Llama 2 70B TP4 +5 -> -5 %, Falcon-180B TP4 +24 -> +19 %), while the 8-bit
    share refitted without TensorRT-LLM's tables moved its TP1 rows about 2 points the
    other way; the batch-1 figures 12.7 -> 11.9 %, the 29 older ones 4.3 -> 5.1 %."""
    b = _bench()
    before = b.evaluate(b.cases())
    rows = b.loso()
    s = b.loso_summary(rows)
    assert s["all"]["figures"] == 116 and all(r["engine_in_sample"] for r in rows)
    # p90 0.297 -> 0.313 when a ring inside one server came to run on NCCL's active
    # channels (2026-12-03): gpt-fast's A100 TP8 rows 13 -> 17 % slow, passed on to
    # TensorRT-LLM's first tokens through the decode time refitted without each source
    assert s["all"]["median"] <= 0.097 and s["all"]["p90"] <= 0.32
    old = sorted(abs(r["held_out"]) for r in rows if r["row"] < 6000)
    assert len(old) == 29 and old[14] <= 0.055  # 4.3 % until rings' fixed steps: 5.1 %
    # issue 35's target is a latency median <= 15 %: 11 % held out; the first tokens at
    # 128 tokens on Hopper still come out ~20 % short when TensorRT-LLM's own source is out
    assert s["groups"]["latency"]["median"] <= 0.12
    assert s["groups"]["latency"]["p90"] <= 0.28
    ttft128 = sorted(abs(r["held_out"]) for r in rows if r["case"].endswith(" 128 TTFT"))
    assert len(ttft128) == 38 and ttft128[19] > 0.15  # still wrong, and says so
    for r in rows:
        assert r["source"] not in r["fitted_on"]
    # the shipped constants are back after the run: every figure as before
    assert b.evaluate(b.cases()) == before
    # fabricsim infer's band is this run's table (accuracy_inference.py --loso --write)
    import json

    shipped = json.loads((ROOT / "src" / "fabricsim" / "workloads" / "serving"
                          / "heldout.json").read_text(encoding="utf-8"))
    assert shipped == b.heldout_table(rows)
