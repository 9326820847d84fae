"""Pins benchmarks/accuracy_nemo.py (NVIDIA's NeMo / Megatron-Bridge tables) where the
model stands, so a change shows."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from benchmark_module import load


@pytest.fixture(scope="module")
def results() -> list[dict[str, Any]]:
    return list(load("accuracy_nemo").run())


def test_dense_fp8_runs_on_hopper_and_blackwell(results: list[dict[str, Any]]) -> None:
    s = load("accuracy_nemo").summary(results)
    assert s["DGX-H100/fp8/dense"]["rows"] >= 10
    # the FP8 GEMM share is fitted on half of these rows, the other half held out
    assert s["DGX-H100/fp8/dense"]["median_abs_error"] <= 0.08
    assert s["DGX-B200/fp8/dense"]["median_abs_error"] <= 0.08
    assert s["DGX-GB200/fp8/dense"]["median_abs_error"] <= 0.05


def test_every_covered_row_is_run_or_says_why(results: list[dict[str, Any]]) -> None:
    missing = [r for r in results if "rel_error" not in r]
    # DeepSeek-V3's 61 layers run with NeMo's pipeline layouts. Left out: two rows that
    # give EP 64 over 32 data-parallel ranks (Megatron cannot build that either), and
    # two 25.11 GB300 rows at PP 2 x VP 4 whose layout no committed configuration gives
    assert len(missing) <= 4
    assert all("etp·ep = 1·64 = 64 must divide tp·cp·dp = 32" in r["not_covered"]
               or ("DeepSeekV3 256xDGX-GB300" in r["case"] and "(25.11)" in r["case"]
                   and "pp·vp = 8 must divide the model's 61 layers" in r["not_covered"])
               for r in missing)


def test_rows_of_every_shipped_model_and_system(results: list[dict[str, Any]]) -> None:
    """Qwen3, GPT-OSS, Kimi K2, Mixtral 8x22B, Llama 4 Scout, Nemotron and GPT-3 5B/20B
    run beside Llama/GPT-3/DeepSeek-V3, on B300 and GB300 too (51 rows before them)."""
    done = [r for r in results if "rel_error" in r]
    assert len(done) >= 120
    assert {r["model"] for r in done} >= {
        "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b", "kimi-k2", "mixtral-8x22b",
        "llama4-scout", "nemotron3-8b", "nemotron3-22b", "nemotron4-15b",
        "nemotron4-340b", "gpt3-5b", "gpt3-20b"}
    assert {r["system"] for r in done} == {"DGX-H100", "DGX-B200", "DGX-GB200", "DGX-B300",
                                           "DGX-GB300"}


def test_current_rows(results: list[dict[str, Any]]) -> None:
    """Rows of the newest release that published a system, model and number format: the
    software NVIDIA ships. Older releases of the same pairs ran slower MoE software (the
    same layout moves up to 2x between releases, ``release_spread``). 8.0 % until steps
    between a rack's hosts got their cost (2026-12-01): the row at the median, Qwen3-235B
    on 256 GB200 in BF16, went -8.0 -> -8.4 %, no row moved more than 0.5 points."""
    s = load("accuracy_nemo").summary(results)
    assert s["current"]["rows"] >= 70
    assert s["current/dense"]["median_abs_error"] <= 0.06
    assert s["current/moe"]["median_abs_error"] <= 0.12
    assert s["current"]["median_abs_error"] <= 0.085


def test_blackwell_ultra_rows(results: list[dict[str, Any]]) -> None:
    """GB300 runs 15-24 % faster than GB200 at the same BF16/FP8 datasheet peak:
    ``SUSTAINED["blackwell-ultra"]`` is fitted on every other GB300 dense FP8 row. Before
    it (Blackwell's 0.70) the GB300 dense rows were -16 to -25 %."""
    gb300 = [r["rel_error"] for r in results if "rel_error" in r
             and r["system"] == "DGX-GB300" and r["dense"] and r["precision"] != "NVFP4"]
    assert len(gb300) >= 10
    assert statistics.median(abs(e) for e in gb300) <= 0.06
    assert sum(e > 0 for e in gb300) >= 0.3 * len(gb300)  # not one-sided


def test_nvfp4_rows_are_held_out(results: list[dict[str, Any]]) -> None:
    """NVFP4 GEMMs run at Transformer Engine's measured 1.44x the FP8 GEMM rate
    (``NVFP4_OVER_FP8``), not at the FP4 peak's 2x (GB200) or 3x (GB300): nothing is
    fitted on these rows. At the FP4 peak's share of MAMF they were +14 to +37 % on
    GB300."""
    fp4 = [r["rel_error"] for r in results if "rel_error" in r
           and r["precision"] == "NVFP4" and r["dense"]]
    assert len(fp4) >= 5
    assert statistics.median(abs(e) for e in fp4) <= 0.08
    assert max(abs(e) for e in fp4) <= 0.15


def test_release_spread_of_the_tables() -> None:
    """NVIDIA's own figure for one layout moves between releases (Qwen3-30B-A3B on 16
    H100: 10,494 tokens/s/GPU in 25.09, 5,275 in 25.11): where it spans more than 1.5x,
    no release-free model lies within 20 % of every release."""
    s = load("accuracy_nemo").release_spread()
    assert s["layouts_in_several_releases"] >= 70
    assert s["over_1.5"] >= 5
    assert 1.0 < s["median_spread"] < 1.1  # most layouts move little


def test_moe_rows_with_grouped_gemm_cost(results: list[dict[str, Any]]) -> None:
    """Routed experts' grouped GEMMs slow down with few rows per expert
    (``GROUPED_GEMM_N0``, fitted on the DeepSeek-V3 B200 rows; docs/training.md).
    Before it DeepSeek-V3 on B200 was +36 to +68 %, Mixtral +6/+12 %."""
    ds = {r["case"]: r["rel_error"] for r in results
          if "DeepSeekV3" in r["case"] and "rel_error" in r}
    mx = [r["rel_error"] for r in results if "Mixtral" in r["case"]]
    assert len(ds) >= 9  # every pipeline layout NeMo ran, 61 layers and all
    assert statistics.median(abs(e) for e in ds.values()) <= 0.11
    assert sum(abs(e) <= 0.20 for e in ds.values()) >= 8
    # held out (not in the fit): the coarse-grained Mixtral stays close
    assert mx and max(abs(e) for e in mx) <= 0.08


def test_deepseek_expert_parallel_across_servers(results: list[dict[str, Any]]) -> None:
    """EP 32 over four B200 servers (NeMo 26.04.01, DeepEP, all-to-all overlapped) and EP
    64 over sixteen H100 servers: one network copy per destination server (about 3.6 of
    8 on four servers) instead of one per expert. Without it the B200 row was -50 % and
    the H100 row -25 %. The H100 row runs as 25.09's run_script.py ran it: all-to-all
    overlapped with the other micro-batch (A2A 1F1B) and gradients reduced after the
    backward; with the overlap the model hides too much of it (+29 % at the assumed
    EP_OVERLAP_EFFICIENCY 0.8, +24 % at the fitted 0.45, +28 % since DeepEP's own
    kernels are modelled: they move the tokens faster than two all-to-alls did)."""
    by = {r["case"]: r["rel_error"] for r in results if "rel_error" in r}
    assert abs(by["DeepSeekV3 256xDGX-B200 MXFP8 (26.04.01)"]) <= 0.15
    assert 0.0 < by["DeepSeekV3 1024xDGX-H100 FP8-CS (25.09)"] <= 0.30


def test_context_parallel_rows(results: list[dict[str, Any]]) -> None:
    """The CP 2 runs (H100, B200, GB200) were all predicted fast, median +15 %, before
    ring attention kept only ``CP_ATTENTION_EFF`` of FlashAttention's rate (fitted on
    every other one)."""
    cp = [r["rel_error"] for r in results if "rel_error" in r and r["parallel"]["cp"] > 1]
    assert len(cp) >= 10
    assert statistics.median(abs(e) for e in cp) <= 0.08
    assert sum(e > 0 for e in cp) <= 0.8 * len(cp)  # no longer one-sided


def _hybrid(results: list[dict[str, Any]], model: str) -> list[float]:
    return [r["rel_error"] for r in results if "rel_error" in r and r.get("hybrid")
            and r["model"] == model]


def test_hybrid_rows_run_with_nothing_fitted(results: list[dict[str, Any]]) -> None:
    """Nemotron 3 Nano (Mamba-2, attention and MoE blocks) on all five systems and
    Nemotron 3 Super (its MoE latent) on four, from their block patterns alone. Where the
    model stands: Nano 28-35 % faster than NVIDIA measured on every row (the scan blocks'
    kernels cost more than their FLOPs and bytes say); Super 62-115 % faster inside a
    rack or server (GB200, GB300, B300) and 20-27 % slower where its EP 64 crosses eight
    B200 servers."""
    nano = _hybrid(results, "nemotron-3-nano")
    assert len(nano) == 5 and all(0.2 < e < 0.45 for e in nano)
    sup = {r["system"]: r["rel_error"] for r in results if "rel_error" in r
           and r["model"] == "nemotron-3-super" and r["precision"] == "NVFP4"}
    assert len(_hybrid(results, "nemotron-3-super")) == 8
    assert all(0.5 < sup[k] < 1.3 for k in ("DGX-GB200", "DGX-GB300", "DGX-B300"))
    assert -0.35 < sup["DGX-B200"] < -0.1


@pytest.mark.xfail(strict=True, reason="hybrid (Mamba-2) blocks are modelled from their "
                   "FLOPs and memory traffic (the SSD scan's chunk states included) and "
                   "run 28-35 % faster than NVIDIA's Nemotron 3 Nano rows, Nemotron 3 "
                   "Super's further off; no published kernel timing of the scans to set "
                   "them from (docs/training.md)")
def test_hybrid_rows_within_the_moe_target(results: list[dict[str, Any]]) -> None:
    errs = _hybrid(results, "nemotron-3-nano") + _hybrid(results, "nemotron-3-super")
    assert statistics.median(abs(e) for e in errs) <= 0.15
