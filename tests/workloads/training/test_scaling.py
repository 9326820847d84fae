"""Weak-scaling curve: feasibility per size and the batch each size runs."""

import pytest

from fabricsim.errors import ModelError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.scaling import scaling_curve, weak_scaling_batch

from ..conftest import RingDouble


def test_tokens_per_gpu_constant_and_infeasible_sizes_listed() -> None:
    cfg = ParallelConfig(tp=8, pp=2, micro_batch=1, global_batch=64, seq_len=4096)
    spr = weak_scaling_batch(cfg, 32)  # dp = 2 at 32 GPUs -> 32 sequences per replica
    assert spr == 32
    pts = scaling_curve(get_model("llama2-13b"), "dgx-h100", [8, 20, 16, 64], cfg,
                        seqs_per_replica=spr, comm_factory=lambda f: RingDouble(f))
    by = {p["gpus"]: p for p in pts}
    assert [p["gpus"] for p in pts] == [8, 16, 20, 64]
    assert not by[8]["feasible"] and "tp·pp·cp = 16" in by[8]["reason"]
    assert not by[20]["feasible"] and "whole number" in by[20]["reason"]
    assert by[16]["global_batch"] == 32 and by[64]["global_batch"] == 128
    assert by[16]["num_micro"] == by[64]["num_micro"] == 32
    assert by[16]["scaling_efficiency"] == 1.0 and by[64]["baseline_gpus"] == 16
    assert 0 < by[64]["scaling_efficiency"] <= 1.0 + 1e-9


def test_all_infeasible_raises_with_every_reason() -> None:
    with pytest.raises(ModelError, match=r"8 GPUs.*24 GPUs"):
        scaling_curve(get_model("llama2-13b"), "dgx-h100", [8, 24],
                      ParallelConfig(tp=8, pp=2), comm_factory=lambda f: RingDouble(f))


def test_weak_scaling_batch_needs_even_split() -> None:
    assert weak_scaling_batch(ParallelConfig(tp=8, global_batch=30), 32) is None
    assert weak_scaling_batch(ParallelConfig(tp=8, global_batch=32, micro_batch=2), 32) == 8


def test_strong_scaling_keeps_the_batch_and_names_the_growing_loss() -> None:
    """Fixed global batch: at 16k GPUs each replica has 2 micro-batches, so the pipeline
    bubble, not the network, is what costs most; weak scaling stays near 100 %."""
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig
    from fabricsim.workloads.training.scaling import scaling_curve

    cfg = ParallelConfig(tp=8, pp=4, vp=5, seq_len=8192, recompute="selective")
    m = get_model("llama3-70b")
    strong = scaling_curve(m, "dgx-h100", [64, 1024, 16384], cfg, global_batch=1024)
    assert [p["global_batch"] for p in strong] == [1024] * 3
    eff = [p["scaling_efficiency"] for p in strong]
    assert eff == sorted(eff, reverse=True) and eff[-1] < 0.85
    assert strong[-1]["main_loss"] == "bubble"
    assert strong[-1]["losses"]["bubble"] > 5 * strong[0]["losses"]["bubble"]
    weak = scaling_curve(m, "dgx-h100", [64, 16384], cfg)
    assert weak[-1]["scaling_efficiency"] > eff[-1]
    # failures cost more of the wall time at 16k GPUs than at 64
    assert strong[-1]["goodput"] < strong[0]["goodput"] < 1.0
    assert strong[-1]["effective_tokens_per_s_per_gpu"] < strong[-1]["tokens_per_s_per_gpu"]
    bad = scaling_curve(m, "dgx-h100", [64, 96 * 8], cfg, global_batch=1024)
    assert not bad[1]["feasible"] and "does not split" in bad[1]["reason"]
