"""Serving beyond a static TP batch: KV-cache limits, PP/EP, engines, continuous batching,
request traces and disaggregated prefill/decode."""

from __future__ import annotations

import dataclasses

import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError, ModelError
from fabricsim.workloads.comm import EngineComm
from fabricsim.workloads.models import get_model
from fabricsim.workloads.serving import instance as inf
from fabricsim.workloads.serving.batching import continuous_batching, serve_requests
from fabricsim.workloads.serving.disaggregated import disaggregated_serving
from fabricsim.workloads.serving.instance import ENGINES, get_engine, kv_bytes_per_token
from fabricsim.workloads.serving.static import simulate_inference

L70 = get_model("llama3-70b")
MIXTRAL = get_model("mixtral-8x7b")


@pytest.fixture(scope="module")
def dgx1() -> fs.Fabric:
    return fs.build_cluster("dgx-h100", 1)


@pytest.fixture(scope="module")
def dgx2() -> fs.Fabric:
    return fs.build_cluster("dgx-h100", 2)


# --- KV cache and memory ----------------------------------------------------------------
def test_kv_bytes_per_token_counts_every_layer_and_kv_head() -> None:
    m = get_model("llama2-70b")
    assert kv_bytes_per_token(m) == 80 * 2 * 8 * 128 * 2
    assert kv_bytes_per_token(m, "fp8") == kv_bytes_per_token(m) / 2
    with pytest.raises(ConfigError, match=r"inference\.kv_precision"):
        kv_bytes_per_token(m, "int4")


def test_max_batch_is_the_kv_cache_limit(dgx1: fs.Fabric) -> None:
    kw = dict(tp=8, prompt_len=4096, output_len=1024, precision="fp8")
    r = simulate_inference(L70, dgx1, batch=1, **kw)  # type: ignore[arg-type]
    assert r.max_batch == int(r.kv_capacity_tokens // (4096 + 1024))
    simulate_inference(L70, dgx1, batch=r.max_batch, **kw)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match=rf"lower --batch to {r.max_batch}") as e:
        simulate_inference(L70, dgx1, batch=r.max_batch + 1, **kw)  # type: ignore[arg-type]
    assert e.value.field == "inference.batch"


def test_fp8_kv_cache_doubles_capacity(dgx1: fs.Fabric) -> None:
    a = simulate_inference(L70, dgx1, tp=8, precision="fp8", kv_precision="bf16")
    b = simulate_inference(L70, dgx1, tp=8, precision="fp8", kv_precision="fp8")
    assert b.kv_capacity_tokens == pytest.approx(2 * a.kv_capacity_tokens)
    assert b.decode.kv_s == pytest.approx(a.decode.kv_s / 2)


def test_weights_that_do_not_fit_say_so(dgx1: fs.Fabric) -> None:
    with pytest.raises(ModelError, match="weights alone do not fit"):
        simulate_inference(get_model("llama3-405b"), dgx1, tp=8, precision="bf16")


def test_latency_counts_output_minus_one_decode_steps(dgx1: fs.Fabric) -> None:
    r = simulate_inference(L70, dgx1, tp=8, batch=8, prompt_len=128, output_len=8)
    assert r.latency_s == pytest.approx(r.prefill_s + 7 * r.tpot_s)
    assert r.throughput_tokens_per_s == pytest.approx(8 * 8 / r.latency_s)


# --- precision --------------------------------------------------------------------------
def test_fp8_on_a100_points_to_weight_only() -> None:
    a100 = fs.build_cluster("dgx-a100", 1)
    with pytest.raises(ConfigError, match="fp8-weights") as e:
        simulate_inference(L70, a100, tp=8, precision="fp8")
    assert e.value.field == "inference.precision"
    w = simulate_inference(L70, a100, tp=8, precision="fp8-weights")
    b = simulate_inference(L70, a100, tp=8, precision="bf16")
    assert w.decode.weights_s == pytest.approx(b.decode.weights_s / 2)
    assert w.kv_precision == "bf16"


# --- pipeline parallelism ---------------------------------------------------------------
def test_pp_splits_weights_and_adds_stage_handoffs(dgx1: fs.Fabric, dgx2: fs.Fabric) -> None:
    tp8 = simulate_inference(L70, dgx1, tp=8, batch=16)
    pp2 = simulate_inference(L70, dgx1, tp=4, pp=2, batch=16)
    assert pp2.gpus == 8 and pp2.decode.p2p_s > 0 and tp8.decode.p2p_s == 0
    # each GPU holds the same share of weights; a token still passes every layer, so the
    # TPOT of PP is no better than TP's (each stage reads its half with 4 GPUs)
    assert pp2.memory_per_gpu_bytes == pytest.approx(tp8.memory_per_gpu_bytes, rel=0.05)
    assert pp2.tpot_s > tp8.tpot_s
    # two stages on two servers: the hand-off crosses the scale-out network
    across = simulate_inference(L70, dgx2, tp=8, pp=2, batch=16)
    assert across.decode.p2p_s > pp2.decode.p2p_s
    assert across.memory_per_gpu_bytes < tp8.memory_per_gpu_bytes


@pytest.mark.parametrize("kw, field, text", [
    (dict(tp=8, pp=3), "inference.pp", "must divide the 80 layers"),
    (dict(tp=8, pp=4), "inference.pp", "add --nodes"),
    (dict(tp=8, pp=0), "inference.pp", "--pp must be a positive integer"),
    (dict(tp=3), "inference.tp", "must divide the 64 attention heads"),
])
def test_pp_and_tp_errors_name_flag_and_fix(kw: dict[str, int], field: str, text: str) -> None:
    fab = fs.build_cluster("dgx-h100", 3)
    with pytest.raises(ConfigError, match=text) as e:
        simulate_inference(L70, fab, **kw)  # type: ignore[arg-type]
    assert e.value.field == field


# --- expert parallelism -----------------------------------------------------------------
def test_ep_reads_whole_experts_on_the_busiest_gpu(dgx1: fs.Fabric) -> None:
    tp1 = simulate_inference(MIXTRAL, dgx1, tp=8, batch=1)
    ep1 = simulate_inference(MIXTRAL, dgx1, tp=8, ep=8, batch=1)
    # batch 1 reaches 2 of 8 experts: with EP a GPU reads one whole expert per layer,
    # with TP every GPU reads an eighth of both
    assert ep1.decode.weights_s > tp1.decode.weights_s
    big_tp = simulate_inference(MIXTRAL, dgx1, tp=8, batch=256)
    big_ep = simulate_inference(MIXTRAL, dgx1, tp=8, ep=8, batch=256)
    assert big_ep.decode.weights_s == pytest.approx(big_tp.decode.weights_s, rel=1e-3)


def test_expected_max_binomial() -> None:
    emax = inf.expected_max_binomial
    assert emax(8, 0.25, 1) == pytest.approx(2.0)
    assert emax(4, 1.0, 8) == 4.0
    assert emax(1, 0.25, 8) == pytest.approx(1 - 0.75**8)
    assert emax(2, 0.3, 2) < emax(2, 0.3, 4) <= 2


@pytest.mark.parametrize("model, kw, text", [
    (L70, dict(tp=8, ep=2), "needs a mixture-of-experts model"),
    (MIXTRAL, dict(tp=4, ep=8), "must divide tp=4"),
    (MIXTRAL, dict(tp=8, ep=0), "--ep must be a positive integer"),
])
def test_ep_errors(dgx1: fs.Fabric, model: object, kw: dict[str, int], text: str) -> None:
    with pytest.raises(ConfigError, match=text) as e:
        simulate_inference(model, dgx1, **kw)  # type: ignore[arg-type]
    assert e.value.field == "inference.ep"


def test_ep_must_divide_the_experts() -> None:
    m = MIXTRAL.model_copy(update={"experts": 6, "top_k": 2})
    with pytest.raises(ConfigError, match="must divide the 6 experts"):
        simulate_inference(m, fs.build_cluster("dgx-h100", 1), tp=4, ep=4)


# --- engines ----------------------------------------------------------------------------
def test_host_costs_add_per_iteration_and_per_sequence(dgx1: fs.Fabric) -> None:
    e = get_engine("vllm-0.5")
    r = simulate_inference(L70, dgx1, tp=8, batch=32, precision="fp8", engine=e)
    assert r.decode.host_s == pytest.approx(e.step_s + 32 * e.per_seq_s)
    ideal = simulate_inference(L70, dgx1, tp=8, batch=32, precision="fp8", engine="ideal")
    assert r.tpot_s == pytest.approx(ideal.tpot_s + r.decode.host_s + r.decode.kernels_s)


def test_each_layer_costs_its_fixed_kernel_time(dgx1: fs.Fabric) -> None:
    """Every real engine pays SERVE_LAYER_KERNELS_S per layer and phase; ideal does not."""
    from fabricsim.workloads.serving.instance import SERVE_LAYER_KERNELS_S

    r = simulate_inference(L70, dgx1, tp=8, batch=1, precision="fp8", engine="trtllm")
    ideal = simulate_inference(L70, dgx1, tp=8, batch=1, precision="fp8", engine="ideal")
    assert r.decode.kernels_s == pytest.approx(80 * SERVE_LAYER_KERNELS_S["decode"])
    assert ideal.decode.kernels_s == 0.0
    assert r.prefill_s - ideal.prefill_s == pytest.approx(
        80 * SERVE_LAYER_KERNELS_S["prefill"])
    assert SERVE_LAYER_KERNELS_S["prefill"] > SERVE_LAYER_KERNELS_S["decode"]


def test_launch_bound_decode(dgx1: fs.Fabric) -> None:
    slow = dataclasses.replace(ENGINES["trtllm"], launch_per_layer_s=1e-3)
    r = simulate_inference(L70, dgx1, tp=8, batch=1, engine=slow)
    assert r.tpot_s == pytest.approx(80e-3)  # the GPU's ~8 ms hide behind 80 launches


def test_mmha_rereads_the_kv_cache_per_query_head(dgx1: fs.Fabric) -> None:
    m = get_model("llama2-70b")
    kw = dict(tp=8, batch=64, prompt_len=2048, output_len=2048, precision="fp8")
    xqa = simulate_inference(m, dgx1, engine="trtllm", **kw)  # type: ignore[arg-type]
    mmha = simulate_inference(m, dgx1, engine="trtllm-0.6", **kw)  # type: ignore[arg-type]
    r = ENGINES["trtllm-0.6"].query_head_kv_reads
    assert mmha.decode.kv_s == pytest.approx(xqa.decode.kv_s * (1 + r * 7))  # 8 q per kv


def test_unknown_engine() -> None:
    with pytest.raises(ConfigError) as e:
        get_engine("tgi")
    assert e.value.field == "inference.engine" and "trtllm" in str(e.value)


# --- continuous batching ----------------------------------------------------------------
def test_continuous_batching_meets_the_target(dgx1: fs.Fabric) -> None:
    kw = dict(prompt_len=1000, output_len=250, tp=8, precision="fp8")
    runs = [continuous_batching(L70, dgx1, tpot_target_s=t, **kw)  # type: ignore[arg-type]
            for t in (0.012, 0.02, 0.04)]
    for t, r in zip((0.012, 0.02, 0.04), runs, strict=True):
        assert r.tpot_s <= t and r.limited_by == "tpot-target"
        nxt = continuous_batching(L70, dgx1, tpot_target_s=t, max_batch=r.batch + 1,
                                  **kw)  # type: ignore[arg-type]
        assert nxt.batch == r.batch  # one more sequence would miss the target
    assert [r.batch for r in runs] == sorted(r.batch for r in runs)
    assert runs[0].tokens_per_s < runs[1].tokens_per_s < runs[2].tokens_per_s
    r = runs[1]
    assert r.tpot_s == pytest.approx(r.decode_s + r.prefill_share_s)
    assert r.prefill_share_s > 0 and r.ttft_s > 0


def test_continuous_batching_limits(dgx1: fs.Fabric) -> None:
    kw = dict(prompt_len=6000, output_len=2000, tp=8, precision="fp8")
    free = continuous_batching(L70, dgx1, **kw)  # type: ignore[arg-type]
    assert free.limited_by == "kv-cache" and free.batch == free.max_batch_kv
    capped = continuous_batching(L70, dgx1, max_batch=16, **kw)  # type: ignore[arg-type]
    assert capped.batch == 16 and capped.limited_by == "max-batch"
    with pytest.raises(ModelError, match="no batch meets --tpot-target-ms") as e:
        continuous_batching(L70, dgx1, tpot_target_s=1e-3, **kw)  # type: ignore[arg-type]
    assert e.value.field == "inference.tpot_target_ms"
    with pytest.raises(ConfigError, match="--tpot-target-ms must be a positive"):
        continuous_batching(L70, dgx1, tpot_target_s=-1.0, **kw)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="no room for one request"):
        continuous_batching(get_model("llama3-405b"), dgx1, prompt_len=100, output_len=10,
                            tp=8, precision="fp8", memory_fraction=0.6)


# --- request traces ---------------------------------------------------------------------
def test_trace_emits_every_token_and_respects_the_batch(dgx1: fs.Fabric) -> None:
    reqs = [(100 + 10 * i, 5 + (i * 37) % 60) for i in range(40)] + [(30, 0)]
    r = serve_requests(get_model("llama3-8b"), dgx1, reqs, tp=1, max_batch=8,
                       max_batched_tokens=512)
    assert r.output_tokens == sum(o for _, o in reqs)
    assert 0 < r.mean_batch <= 8
    assert r.prefill_iterations >= len(reqs) // 8
    assert r.tokens_per_s == pytest.approx(r.output_tokens / r.duration_s)
    assert r.mean_itl_s >= r.median_itl_s > 0  # prefill stalls lengthen some gaps


def test_trace_is_deterministic_and_tp_speeds_it_up(dgx1: fs.Fabric) -> None:
    reqs = [(200, 100)] * 32
    a = serve_requests(L70, dgx1, reqs, tp=4, precision="fp8")
    b = serve_requests(L70, dgx1, reqs, tp=4, precision="fp8")
    c = serve_requests(L70, dgx1, reqs, tp=8, precision="fp8")
    assert a == b
    assert c.median_itl_s < a.median_itl_s


@pytest.mark.parametrize("reqs, text", [
    ([], "no requests"),
    ([(0, 5)], "prompt must be >= 1"),
    ([(10, -1)], "output >= 0"),
    ([(3000, 10)], "prefill budget"),
])
def test_trace_errors(dgx1: fs.Fabric, reqs: list[tuple[int, int]], text: str) -> None:
    with pytest.raises(ConfigError if "budget" not in text else ModelError, match=text):
        serve_requests(L70, dgx1, reqs, tp=8, max_batched_tokens=2048)


# --- disaggregated prefill / decode -----------------------------------------------------
def test_disaggregated_kv_transfer_crosses_the_network(dgx2: fs.Fabric) -> None:
    kw = dict(prefill_tp=8, batch=32, prompt_len=4096, output_len=256, tp=8,
              precision="fp8")
    r = disaggregated_serving(L70, dgx2, **kw)  # type: ignore[arg-type]
    assert r.crosses_servers and r.decode_ranks == (8, 15)
    assert r.kv_bytes_per_request == 4096 * kv_bytes_per_token(L70, "fp8")
    comm = EngineComm(dgx2)
    one = comm.time("sendrecv", [0, 8], r.kv_bytes_per_request / 8)
    assert r.kv_transfer_s == pytest.approx(one)
    assert r.kv_transfer_s / 80 <= r.kv_exposed_s <= r.kv_transfer_s
    assert r.ttft_s == pytest.approx(r.prefill_s + r.kv_exposed_s)
    slow = fs.build_cluster("dgx-h100", 2, fabric="roce-100g")
    s = disaggregated_serving(L70, slow, **kw)  # type: ignore[arg-type]
    assert s.kv_transfer_s > 2 * r.kv_transfer_s  # 100G against 400G NICs
    assert r.tokens_per_s == pytest.approx(min(r.prefill_requests_per_s,
                                               r.decode_requests_per_s) * 256)


def test_disaggregated_errors(dgx1: fs.Fabric, dgx2: fs.Fabric) -> None:
    with pytest.raises(ConfigError, match="raise --nodes") as e:
        disaggregated_serving(L70, dgx1, prefill_tp=8, batch=1, prompt_len=10,
                              output_len=10)
    assert e.value.field == "inference.prefill_tp"
    with pytest.raises(ConfigError, match="prefill_tp=3 must divide") as e:
        disaggregated_serving(L70, dgx2, prefill_tp=3, batch=1, prompt_len=10,
                              output_len=10)
    assert e.value.field == "inference.prefill_tp"
    with pytest.raises(ModelError, match="lower --batch"):
        disaggregated_serving(L70, dgx2, prefill_tp=8, batch=10**6, prompt_len=1000,
                              output_len=10)


def test_a_context_past_the_models_position_limit_is_refused(dgx1: fs.Fabric) -> None:
    """Llama 3 serves 8,192 tokens; a million-token prompt used to be timed (TTFT of
    344 s). The 3.1 variant (max_context 131,072) takes 32K."""
    from fabricsim.errors import ConfigError
    from fabricsim.workloads.models import ModelShape, custom_model
    from fabricsim.workloads.serving.disaggregated import disaggregated_serving

    for call in (simulate_inference, continuous_batching):
        with pytest.raises(ConfigError, match=r"8,192 \(max_context\)") as e:
            call(L70, dgx1, prompt_len=8000, output_len=256)  # type: ignore[operator]
        assert e.value.field == "inference.prompt_len"
    fab = fs.build_cluster("dgx-h100", 2)
    with pytest.raises(ConfigError, match="max_context"):
        disaggregated_serving(L70, fab, prefill_tp=8, batch=1, prompt_len=8000,
                              output_len=256)
    l31 = custom_model(L70, ModelShape.model_validate({"max_context": 131072}))
    assert simulate_inference(l31, dgx1, prompt_len=32768, output_len=256,
                              precision="fp8").prefill_s > 0


def test_a_context_whose_cache_cannot_fit_names_the_longest_that_does(
        dgx1: fs.Fabric) -> None:
    """With the weights in place and no room for one sequence's cache, the error names
    --prompt-len and the longest context that fits (it said the weights did not fit,
    under inference.batch, at batch 1)."""
    m = get_model("mpt-7b")  # ALiBi: no position limit
    with pytest.raises(ModelError, match=r"at most ([\d,]+) tokens") as e:
        simulate_inference(m, dgx1, tp=1, precision="fp8", prompt_len=5_000_000)
    assert e.value.field == "inference.prompt_len"
    longest = int(e.value.message.split("at most ")[1].split()[0].replace(",", ""))
    simulate_inference(m, dgx1, tp=1, precision="fp8", prompt_len=longest - 256)
    with pytest.raises(ModelError, match="weights alone") as e:
        simulate_inference(get_model("llama3-405b"), dgx1, tp=1, prompt_len=100)
    assert e.value.field == "inference.tp"
