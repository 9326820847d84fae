"""Tensor-parallel serving: roofline decode, latency-bound all-reduces, prefill."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.catalog import get_catalog
from fabricsim.errors import ConfigError, ModelError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.serving.instance import SERVE_HBM_EFF
from fabricsim.workloads.serving.static import simulate_inference


@pytest.fixture(scope="module")
def dgx2() -> fs.Fabric:
    return fs.build_cluster("dgx-h100", 2)


def test_decode_weights_time_is_bytes_over_bandwidth(dgx2: fs.Fabric) -> None:
    m = get_model("llama3-8b")
    r = simulate_inference(m, dgx2, tp=1, batch=1, prompt_len=128, output_len=16)
    hbm = get_catalog().gpu("h100-sxm").hbm_bandwidth * SERVE_HBM_EFF
    read = m.params - m.vocab * m.hidden  # input embedding is looked up, not read
    assert r.decode.weights_s == pytest.approx(read * 2 / hbm, rel=1e-9)
    assert r.decode.comm_s == 0.0 and r.prefill_comm_s == 0.0
    assert r.tokens_per_s_per_request == pytest.approx(1 / r.tpot_s)


def test_decode_falls_with_tp_until_comm_dominates(dgx2: fs.Fabric) -> None:
    m = get_model("llama3-8b")
    runs = {tp: simulate_inference(m, dgx2, tp=tp) for tp in (1, 2, 4, 8, 16)}
    tpot = {t: r.tpot_s for t, r in runs.items()}
    # weight reads halve with each doubling while the all-reduces are still cheap ...
    assert tpot[1] > tpot[2] > tpot[4]
    shares = [runs[t].comm_share for t in (1, 2, 4, 8, 16)]
    assert shares == sorted(shares) and shares[0] == 0.0
    # ... until communication dominates: TP 16 leaves the NVLink domain, its all-reduces
    # cross InfiniBand and cost more than the halved weight reads save
    assert tpot[16] > min(tpot.values())
    assert runs[16].comm_share > 0.5
    assert runs[16].warnings


def test_nvlink_beats_pcie_for_70b_tp8() -> None:
    m = get_model("llama2-70b")
    nvl = fs.build_cluster("dgx-h100", 1)
    pcie = fs.build_cluster("pcie-8gpu", 1, fabric="roce-100g")
    kw = dict(tp=8, prompt_len=1024, output_len=256)
    a1, b1 = (simulate_inference(m, f, batch=1, **kw) for f in (nvl, pcie))  # type: ignore[arg-type]
    a16, b16 = (simulate_inference(m, f, batch=16, **kw) for f in (nvl, pcie))  # type: ignore[arg-type]
    assert b1.prefill_s / a1.prefill_s > 2.5  # prefill all-reduces are bandwidth-bound
    assert b16.tpot_s / a16.tpot_s > 1.6
    assert b1.tpot_s / a1.tpot_s > 1.3  # batch 1: small messages, latency-bound
    assert b16.decode.comm_s > a16.decode.comm_s


def test_batch_raises_throughput_and_kv_time(dgx2: fs.Fabric) -> None:
    m = get_model("llama2-70b")
    r1 = simulate_inference(m, dgx2, tp=8, batch=1)
    r32 = simulate_inference(m, dgx2, tp=8, batch=32)
    assert r32.tokens_per_s > 10 * r1.tokens_per_s
    assert r32.tpot_s > r1.tpot_s
    assert r32.decode.kv_s == pytest.approx(32 * r1.decode.kv_s, rel=1e-9)
    assert r32.decode_last.total_s > r32.decode_first.total_s


def test_fp8_halves_weight_reads(dgx2: fs.Fabric) -> None:
    m = get_model("llama2-70b")
    a = simulate_inference(m, dgx2, tp=8, precision="bf16")
    b = simulate_inference(m, dgx2, tp=8, precision="fp8")
    assert b.decode.weights_s == pytest.approx(a.decode.weights_s / 2)


def test_bad_inputs_name_the_field(dgx2: fs.Fabric) -> None:
    m = get_model("llama2-70b")
    with pytest.raises(ModelError, match=r"inference\.tp: .*weights alone"):
        simulate_inference(m, dgx2, tp=1)
    with pytest.raises(ModelError, match=r"inference\.batch: .*lower --batch"):
        simulate_inference(m, dgx2, tp=8, batch=100_000)
    with pytest.raises(ConfigError, match=r"inference\.tp"):
        simulate_inference(m, dgx2, tp=3)
    with pytest.raises(ConfigError, match=r"inference\.tp"):
        simulate_inference(m, dgx2, tp=32)
    with pytest.raises(ConfigError, match=r"inference\.precision"):
        simulate_inference(m, dgx2, tp=8, precision="int4")
    with pytest.raises(ConfigError, match=r"inference\.batch"):
        simulate_inference(m, dgx2, tp=8, batch=0)


def test_sliding_window_layers_keep_only_the_window() -> None:
    """GPT-OSS-120B: 18 of 36 layers attend to the last 128 tokens only, so at a long
    context the KV cache per request is about half, and twice the requests fit."""
    import fabricsim as fs
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.serving.static import simulate_inference

    fab = fs.build_cluster("dgx-h100", 1)
    oss = get_model("gpt-oss-120b")
    full = oss.model_copy(update={"attn_window": None, "window_skip_freq": None})
    kw = {"tp": 8, "batch": 16, "prompt_len": 8192, "output_len": 1024,
          "check_memory": False}
    win, dense = simulate_inference(oss, fab, **kw), simulate_inference(full, fab, **kw)
    share = (18 + 18 * 128 / 9216) / 36
    assert win.max_batch == int(dense.kv_capacity_tokens // (9216 * share))
    assert 1.9 < win.max_batch / dense.max_batch < 2.0
    assert win.prefill_s < dense.prefill_s and win.tpot_s < dense.tpot_s
    # prompts inside the window: nothing changes
    short = {"tp": 8, "batch": 4, "prompt_len": 64, "output_len": 32, "check_memory": False}
    assert simulate_inference(oss, fab, **short).max_batch == \
        simulate_inference(full, fab, **short).max_batch


def test_mla_caches_its_latent_on_every_tp_rank() -> None:
    """DeepSeek-V3 caches 512 + 64 latent elements per token and layer (68.6 KiB in BF16
    over 61 layers), whole on each TP rank; as 128 full KV heads it was 1,708 KiB, split
    over TP (213 KiB per GPU at TP 8, three times the latent)."""
    import fabricsim as fs
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.serving.instance import kv_bytes_per_token
    from fabricsim.workloads.serving.static import simulate_inference

    ds = get_model("deepseek-v3")
    assert kv_bytes_per_token(ds) == 61 * 576 * 2
    fab = fs.build_cluster("hgx-b200", 1)
    kw = {"tp": 8, "pp": 1, "batch": 8, "prompt_len": 4096, "output_len": 512,
          "precision": "fp8", "check_memory": False}
    mla = simulate_inference(ds, fab, **kw)
    heads = simulate_inference(ds.model_copy(update={"kv_latent": None}), fab, **kw)
    assert 2.5 < mla.max_batch / heads.max_batch < 3.5
    # prefill attention at MLA's 192 + 128 widths per head, not 2 x hidden/heads = 112
    narrow = simulate_inference(ds.model_copy(update={"attn_core_width": None}), fab, **kw)
    assert mla.prefill_s > narrow.prefill_s


def test_pipelined_decode_of_one_sequence_reads_the_output_head_once(
        dgx2: fs.Fabric) -> None:
    """One sequence walks the pp stages in turn: each layer's and the head's weights are
    read once per token, so pp barely moves TPOT (it used to charge pp x the last stage,
    head included: Llama 3 8B at pp 8, 5.3 -> 8.0 ms). A batch that fills the stages is
    paced by the last stage, the head read once per micro-batch."""
    m = get_model("llama3-8b")
    one = [simulate_inference(m, dgx2, tp=1, pp=pp, batch=1).tpot_s for pp in (1, 2, 4, 8)]
    hop = one[0] * 0.02  # stage hand-offs and per-stage launches
    assert all(abs(t - one[0]) < hop for t in one[1:])
    head = m.vocab * m.hidden * 2 / (get_catalog().gpu("h100-sxm").hbm_bandwidth
                                     * SERVE_HBM_EFF)
    full = simulate_inference(m, dgx2, tp=1, pp=4, batch=4).decode
    part = simulate_inference(m, dgx2, tp=1, pp=4, batch=2).decode
    assert full.weights_s - part.weights_s == pytest.approx(3 * head, rel=1e-6)


def test_overlap_scheduler_hides_host_time_behind_the_gpu() -> None:
    """SGLang's overlap scheduler: an iteration takes the longer of host and GPU time,
    a serial engine their sum; ``sglang`` names the newest SGLang profile."""
    from fabricsim.workloads.serving.instance import DecodeTimes, get_engine

    serial = DecodeTimes(weights_s=3.0, kv_s=1.0, compute_s=2.0, comm_s=1.0, host_s=2.0)
    hidden = DecodeTimes(weights_s=3.0, kv_s=1.0, compute_s=2.0, comm_s=1.0, host_s=2.0,
                         host_hidden=True)
    assert (serial.total_s, hidden.total_s) == (7.0, 5.0)
    longer = DecodeTimes(weights_s=1.0, kv_s=0.0, compute_s=0.0, comm_s=0.0, host_s=2.0,
                         host_hidden=True)
    assert longer.total_s == 2.0
    assert get_engine("sglang") is get_engine("sglang-0.4")
    assert get_engine("sglang").overlap_host and not get_engine("vllm-0.5").overlap_host


def test_sixteen_bit_gemms_run_at_the_kernel_benchmarks_rate() -> None:
    """16-bit serving GEMMs are not fitted on serving figures: the measured MAMF times the
    thin-GEMM factor of the layer's width on one GPU, the figure training reads before
    its sustained share; only 8-bit shares are fitted (SERVE_TC_EFF)."""
    from fabricsim.catalog import get_catalog
    from fabricsim.workloads.gpu import MAMF, gemm_efficiency, gemm_share, sustained
    from fabricsim.workloads.serving.instance import SERVE_TC_EFF, tc_eff

    cat = get_catalog()
    a100, h100 = cat.gpu("a100-sxm"), cat.gpu("h100-sxm")
    assert not any(p == "bf16" for _, p in SERVE_TC_EFF)
    assert tc_eff(a100, "bf16", 4096, 1) == pytest.approx(MAMF[("ampere", "bf16")] * 4096 / 4352)
    # thinner GEMMs (a wider TP split) run slower; the training share adds the sustained one
    assert tc_eff(h100, "bf16", 8192, 8) < tc_eff(h100, "bf16", 8192, 1)
    assert gemm_efficiency(h100, "bf16", 8192, 8) == pytest.approx(
        gemm_share(h100, "bf16", 8192, 8) * sustained(h100))
    # 8-bit GEMMs keep their fitted share whatever the shape; weight-only FP8 on a GPU
    # with no fitted share runs at the 16-bit rate
    assert tc_eff(h100, "fp8", 8192, 8) == tc_eff(h100, "fp8", 2048, 1) == SERVE_TC_EFF[
        ("hopper", "fp8")]
    assert tc_eff(h100, "fp8-weights", 8192, 1) == tc_eff(h100, "bf16", 8192, 1)
