"""NVFP4 training (``precision="fp4"``) and Blackwell Ultra's sustained share."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.catalog import get_catalog
from fabricsim.errors import ConfigError, ModelError
from fabricsim.workloads.compute import NVFP4_OVER_FP8, gemm_efficiency, sustained
from fabricsim.workloads.megatron import parse_megatron_args
from fabricsim.workloads.models import get_model
from fabricsim.workloads.parallel import ParallelConfig
from fabricsim.workloads.step import simulate_step


@pytest.mark.parametrize("gpu", ["b200", "gb200", "b300", "gb300"])
def test_nvfp4_gemms_run_at_a_measured_multiple_of_fp8(gpu: str) -> None:
    g = get_catalog().gpu(gpu)
    fp8 = gemm_efficiency(g, "fp8", 8192) * g.fp8_flops
    fp4 = gemm_efficiency(g, "fp4", 8192) * g.fp4_flops
    assert fp4 / fp8 == pytest.approx(NVFP4_OVER_FP8)
    assert 1.4 < NVFP4_OVER_FP8 < 1.5  # TE: 2.03x vs 1.41x BF16, not the peak's 2-3x


def test_nvfp4_step_is_faster_than_fp8_but_not_by_the_peak() -> None:
    fab = fs.build_cluster("gb200-nvl72", 1, gpus_per_node=64)
    m = get_model("llama3-70b")
    base = dict(tp=2, pp=4, interleave=5, global_batch=256, seq_len=8192,
                tp_comm_overlap=True)
    fp8 = simulate_step(m, ParallelConfig(precision="fp8", **base), fab, check_memory=False)
    fp4 = simulate_step(m, ParallelConfig(precision="fp4", **base), fab, check_memory=False)
    gain = fp8.step_time_s / fp4.step_time_s
    assert 1.1 < gain < NVFP4_OVER_FP8  # attention, casts and the rest stay as they were
    assert fp4.parallel["precision"] == "fp4" and fp4.parallel["fp8_recipe"] is None
    assert fp4.mfu < fp8.mfu  # MFU is against the FP4 peak


def test_nvfp4_needs_fp4_tensor_cores() -> None:
    fab = fs.build_cluster("dgx-h100", 1)
    with pytest.raises(ModelError, match=r"no FP4 tensor cores.*Blackwell") as e:
        simulate_step(get_model("llama3-8b"), ParallelConfig(precision="fp4", seq_len=4096),
                      fab, check_memory=False)
    assert e.value.field == "training.precision"


def test_fp8_recipe_is_refused_with_fp4() -> None:
    with pytest.raises(ModelError, match="fp8_recipe"):
        ParallelConfig(precision="fp4", fp8_recipe="mxfp8").resolve(get_model("llama3-8b"), 8)


def test_megatron_fp4_flags() -> None:
    section, ignored = parse_megatron_args("--fp4-format e2m1 --fp4-recipe nvfp4 --bf16")
    assert section["precision"] == "fp4" and not ignored
    assert parse_megatron_args("--fp4-format e2m1")[0]["precision"] == "fp4"
    with pytest.raises(ConfigError, match="keep one"):
        parse_megatron_args("--fp4-format e2m1 --fp8-format hybrid")
    with pytest.raises(ConfigError, match="--fp4-recipe nvfp4"):
        parse_megatron_args("--fp4-format e2m1 --fp4-recipe custom")
    # model shapes Qwen3 / GPT-OSS need: head width and expert width
    s = parse_megatron_args("--kv-channels 128 --moe-ffn-hidden-size 768")[0]
    assert (s["head_dim"], s["moe_ffn"]) == (128, 768)


def test_blackwell_ultra_sustains_more_of_the_same_peak() -> None:
    cat = get_catalog()
    gb200, gb300 = cat.gpu("gb200"), cat.gpu("gb300")
    assert gb300.fp8_dense_tflops == gb200.fp8_dense_tflops  # datasheet: same FP8 peak
    assert gb300.fp4_dense_tflops == 1.5 * gb200.fp4_dense_tflops
    assert sustained(gb300) > sustained(gb200)
    assert sustained(cat.gpu("b300")) == sustained(gb300)
