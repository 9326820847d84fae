"""NVFP4 training (``precision="fp4"``) and Blackwell Ultra's sustained share."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.catalog import get_catalog
from fabricsim.errors import ConfigError, ModelError
from fabricsim.workloads.gpu import NVFP4_OVER_FP8, gemm_efficiency, sustained
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.megatron import parse_megatron_args
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step


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
    base = dict(tp=2, pp=4, vp=5, global_batch=256, seq_len=8192,
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


def test_megatron_window_flags_shape_the_model() -> None:
    s, ignored = parse_megatron_args("--window-size 128 0 --window-attn-skip-freq 2")
    assert (s["attn_window"], s["window_skip_freq"]) == (128, 2) and not ignored
    assert parse_megatron_args("--window-size=(128,0)")[0]["attn_window"] == 128
    with pytest.raises(ConfigError, match="only a causal window"):
        parse_megatron_args("--window-size 128 64")
    # recipes for a format that is not on are reported, never dropped silently
    assert parse_megatron_args("--fp4-recipe nvfp4")[1] == [
        "--fp4-recipe nvfp4 (no --fp4-format: not FP4)"]
    assert parse_megatron_args("--fp4-format e2m1 --fp8-recipe mxfp8")[1] == [
        "--fp8-recipe mxfp8 (no --fp8-format: NVFP4)"]


def test_a_window_given_as_a_frequency_follows_the_layer_count() -> None:
    from fabricsim.workloads.models import ModelShape, custom_model

    oss = get_model("gpt-oss-120b")
    assert oss.windowed_layers == 18
    assert custom_model(oss, ModelShape.model_validate({"layers": 12})).windowed_layers == 6
    assert custom_model(oss, ModelShape.model_validate({"layers": 72})).windowed_layers == 36
    with pytest.raises(ConfigError, match="window_skip_freq needs attn_window"):
        custom_model(oss, ModelShape.model_validate({"attn_window": None}))


def test_mla_weights_must_cover_the_output_projection() -> None:
    from fabricsim.workloads.models import ModelShape, custom_model

    with pytest.raises(ConfigError, match=r"attn_weights .* MLA preset") as e:
        custom_model(get_model("deepseek-v3"), ModelShape.model_validate({"hidden": 16384}))
    assert e.value.field == "training.attn_weights"
    wide = custom_model(get_model("deepseek-v3"), ModelShape.model_validate(
        {"hidden": 16384, "attn_weights": 300_000_000}))
    assert wide.attn_params == 300_000_000


def test_unsupported_precision_is_refused_before_any_search() -> None:
    from fabricsim.workloads.training.planner import plan_parallel
    from fabricsim.workloads.training.step import check_layout

    fab = fs.build_cluster("dgx-h100", 1)
    m = get_model("llama3-8b")
    with pytest.raises(ModelError, match="no FP4 tensor cores"):
        plan_parallel(m, fab, global_batch=64, seq_len=4096, precision="fp4")
    with pytest.raises(ModelError, match="no FP4 tensor cores"):
        check_layout(m, ParallelConfig(precision="fp4", seq_len=4096), fab)
    with pytest.raises(ModelError, match="no FP4 tensor cores"):
        gemm_efficiency(get_catalog().gpu("h100-sxm"), "fp4", 8192)
