"""Pins benchmarks/accuracy_llmfoundry.py (MosaicML's MPT tables, 216 runs) where the
model stands, so a change shows."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from benchmark_module import load

from fabricsim.workloads.comm import EngineComm


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return list(load("accuracy_llmfoundry").run(lambda fab: EngineComm(fab)))


def test_every_published_row_runs(rows: list[dict[str, Any]]) -> None:
    assert len(rows) == 216
    assert {r["gpu"] for r in rows} == {"h100_80gb", "a100_80gb", "a100_40gb"}
    assert all(r["parallel"]["attention_kernel"] == "flash1" for r in rows)


def test_summary_as_it_stands(rows: list[dict[str, Any]]) -> None:
    s = load("accuracy_llmfoundry").summary(rows)
    assert s["all"]["median_abs_error"] <= 0.07
    assert s["all"]["max_abs_error"] <= 0.28
    # long sequences, where the attention kernel is most of the step: 37 % with
    # FlashAttention-2-class attention, 4.9 % with the 2023 kernels the runs used
    assert s["seq>4096"]["rows"] == 67 and s["seq>4096"]["median_abs_error"] <= 0.06
    # the model is pessimistic here by a few percent, not optimistic
    assert -0.09 <= s["all"]["mean_signed_error"] <= 0.0


def test_small_fsdp_micro_batches_cost_what_was_measured(rows: list[dict[str, Any]]) -> None:
    """MPT-13B at 2 sequences per micro-batch without checkpointing: 39.6-40.0 % MFU on
    8, 16, 32 and 64 H100, one server or eight; within 8 % at every size (+18-20 %
    before FSDP's per-micro-batch kernels were charged)."""
    mb2 = [r for r in rows if r["case"].startswith("MPT-13b")
           and r["case"].endswith("seq 2048 mb2 x1 amp_bf16")]
    assert len(mb2) == 4
    assert all(abs(r["rel_error"]) <= 0.08 for r in mb2)


def test_the_attention_kernel_is_what_long_sequences_measure() -> None:
    """The same rows with FlashAttention-2-class attention are far too fast: the
    kernel is a fact of the run, not noise."""
    bench = load("accuracy_llmfoundry")
    long_rows = [r for r in bench.load_rows() if int(r["seq_len"]) >= 32768]
    errs = []
    for r in long_rows:
        res = bench.predict(r, attention_kernel="flash")
        assert res.parallel["attention_kernel"] == "flash"
        errs.append(res.tokens_per_s / res.world / float(r["tokens_per_s_per_gpu"]) - 1)
    assert len(errs) >= 20 and statistics.median(errs) > 0.4
