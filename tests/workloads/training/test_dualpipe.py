"""DualPipe (DeepSeek-V3's bidirectional pipeline schedule): bubble, memory, checks."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ModelError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.memory import memory_per_gpu
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import pipeline_bubble, simulate_step

from ..conftest import RingDouble

FAB = fs.build_cluster("dgx-h100", nodes=4)
M = get_model("llama2-13b")  # 40 layers: 10 per stage at pp 4


def _cfg(schedule: str, **kw: object) -> ParallelConfig:
    base: dict[str, object] = dict(tp=8, pp=4, micro_batch=1, global_batch=16,
                                   seq_len=4096, pp_schedule=schedule)
    return ParallelConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_bubble_closed_forms() -> None:
    # F = 1, B = 2 (full backward), W = 1: 1F1B (p-1)(F+B), DualPipe (p/2-1)(F&B+B-3W)
    assert pipeline_bubble(8, 1, "1f1b", 3.0, 2.0, 1.0) == 21.0
    assert pipeline_bubble(8, 2, "1f1b", 3.0, 2.0, 1.0) == 10.5
    assert pipeline_bubble(8, 1, "dualpipe", 3.0, 2.0, 1.0) == 3 * (3 + 2 - 3)
    assert pipeline_bubble(2, 1, "dualpipe", 3.0, 2.0, 1.0) == 0.0
    assert pipeline_bubble(8, 1, "dualpipe", 3.0, 2.0, 5.0) == 0.0  # never negative


def test_dualpipe_step_uses_its_bubble() -> None:
    from dataclasses import replace

    from fabricsim.catalog import get_catalog
    from fabricsim.workloads.training.compute import microbatch_compute

    one = simulate_step(M, _cfg("1f1b", overlap_p2p_comm=True, vp=1), FAB, RingDouble(FAB))
    dual = simulate_step(M, _cfg("dualpipe"), FAB, RingDouble(FAB))
    assert dual.parallel["pp_schedule"] == "dualpipe"
    assert dual.parallel["overlap_p2p_comm"] is True  # DualPipe hides its sends
    # the last stage's output head is shared with the first stage's GPU: less per slot
    assert dual.breakdown["compute"] < one.breakdown["compute"]
    p = _cfg("dualpipe").resolve(M, FAB.n_gpus)
    ct = microbatch_compute(M, p, get_catalog().gpu("h100-sxm"), 0.0)
    assert ct.bwd == pytest.approx(2 * ct.fwd) and 0.5 * ct.fwd < ct.wgrad < ct.fwd
    t_mb = (dual.breakdown["compute"] + dual.breakdown["tp"]) / 16
    assert dual.breakdown["bubble"] == pytest.approx(
        (4 / 2 - 1) * (t_mb + ct.bwd - 3 * ct.wgrad), rel=1e-9)
    # the same composition with the 1F1B step's numbers: (pp - 1) slots
    p1 = replace(p, cfg=_cfg("1f1b"))
    ct1 = microbatch_compute(M, p1, get_catalog().gpu("h100-sxm"), 0.0)
    # W is taken where F is: 1F1B's last stage (with the output head's GEMM), DualPipe's
    # pair mean (half of it); the head's loss is memory-bound, so F moves more than W
    assert 0.0 < ct1.wgrad - ct.wgrad < ct1.fwd - ct.fwd
    assert one.breakdown["bubble"] == pytest.approx(
        3 * (one.breakdown["compute"] + one.breakdown["tp"]) / 16, rel=1e-9)
    assert dual.breakdown["bubble"] < 0.5 * one.breakdown["bubble"]
    assert dual.tokens_per_s > one.tokens_per_s


def test_dualpipe_holds_two_stages_and_one_more_micro_batch() -> None:
    one = memory_per_gpu(M, _cfg("1f1b").resolve(M, FAB.n_gpus))
    dual = memory_per_gpu(M, _cfg("dualpipe").resolve(M, FAB.n_gpus))
    # stage 0 (embedding) + stage 3 (output head) on one GPU: twice the 1F1B first stage
    assert dual.weights == pytest.approx(2 * one.weights, rel=1e-12)
    assert dual.optimizer == pytest.approx(2 * one.optimizer, rel=1e-12)
    # pp + 1 micro-batches in flight instead of the first stage's pp (same layers per
    # stage), plus the loss's logits the GPU of the last stage also keeps
    logits = 4.0 * 4096 * M.vocab / 8
    assert dual.activations - logits == pytest.approx(one.activations * 5 / 4, rel=1e-9)


def test_dualpipe_balances_the_heavy_last_stage_with_the_first() -> None:
    # the output head sits on the last stage; DualPipe pairs it with the first
    m = get_model("deepseek-v3")
    fab = fs.build_cluster("dgx-h800", nodes=16)
    kw = dict(pp=8, ep=16, global_batch=256, seq_len=4096, precision="fp8",
              recompute="full", pipeline_layout="Et*7|(t*8|)*6t*6mL")
    one = simulate_step(m, ParallelConfig(**kw), fab, check_memory=False)  # type: ignore[arg-type]
    dual = simulate_step(m, ParallelConfig(**kw, pp_schedule="dualpipe"),  # type: ignore[arg-type]
                         fab, check_memory=False)
    assert dual.breakdown["compute"] < one.breakdown["compute"]


@pytest.mark.parametrize(("kw", "field", "text"), [
    (dict(pp=1, tp=8), "pp_schedule", r"pp must be even and >= 2"),
    (dict(pp=2, tp=8, dp=2, vp=2), "pp_schedule", r"does not interleave"),
    (dict(global_batch=6), "global_batch", r"at least 2·pp = 8"),
    (dict(global_batch=18, micro_batch=1, pp=4, tp=4, dp=2), "global_batch",
     r"even number of micro-batches"),
])
def test_dualpipe_refuses_what_it_cannot_run(kw: dict[str, object], field: str,
                                             text: str) -> None:
    with pytest.raises(ModelError, match=text) as e:
        _cfg("dualpipe", **kw).resolve(M, 32)
    assert e.value.field == f"training.{field}"


def test_odd_pipeline_refused() -> None:
    with pytest.raises(ModelError, match=r"pp must be even.*pp=5"):
        ParallelConfig(pp=5, tp=8, global_batch=40, pp_schedule="dualpipe").resolve(
            get_model("llama2-70b"), 40)


def test_dualpipe_fsdp_moves_one_stage_per_micro_batch() -> None:
    """Under ZeRO-3 a micro-batch gathers and reduce-scatters the one stage it runs
    through, not both stages the GPU holds; the mirror pair syncs its gradients."""
    kw: dict[str, object] = dict(tp=8, pp=4, zero="fsdp", micro_batch=1, global_batch=16,
                                 seq_len=4096, overlap_p2p_comm=True)
    fab = fs.build_cluster("dgx-h100", nodes=8)  # dp = 2
    one = simulate_step(M, ParallelConfig(**kw), fab, RingDouble(fab))  # type: ignore[arg-type]
    dual = simulate_step(M, ParallelConfig(**kw, pp_schedule="dualpipe"),  # type: ignore[arg-type]
                         fab, RingDouble(fab))
    assert one.comm_total_s["dp"] > 0
    # the same per-micro-batch traffic plus the pair's once-per-step gradient all-reduce
    assert one.comm_total_s["dp"] < dual.comm_total_s["dp"] < 1.2 * one.comm_total_s["dp"]


def test_dualpipe_layout_with_virtual_stages_names_the_layout() -> None:
    with pytest.raises(ModelError, match=r"layout must hold exactly pp=2 stages"):
        ParallelConfig(pp=2, tp=8, dp=2, global_batch=16, pp_schedule="dualpipe",
                       pipeline_layout="Et*10|t*10|t*10|t*10L").resolve(M, 32)
