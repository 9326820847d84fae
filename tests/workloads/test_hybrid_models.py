"""Hybrid models (Mamba-2 / gated delta-net mixers beside attention, MLP and MoE blocks):
their shapes against the published parameter counts, and the block formalism against the
transformer it must reduce to."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError
from fabricsim.workloads.flops import forward_flops_per_token, mixer_core_flops
from fabricsim.workloads.models import TransformerSpec, get_model
from fabricsim.workloads.serving.instance import build_instance, state_bytes_per_sequence
from fabricsim.workloads.training.memory import memory_per_gpu
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step


@pytest.mark.parametrize(("name", "total", "active"), [
    # Nemotron-H 8B: 8.1B (Megatron-Bridge docs); Nemotron 3 Nano: 31.6B total, 3.6B
    # active with embeddings (NVIDIA's technical report); Qwen3-Next: 80B total
    ("nemotron-h-8b", 8.1e9, None),
    ("nemotron-h-56b", 56e9, None),
    ("nemotron-3-nano", 31.6e9, 3.6e9),
    ("qwen3-next-80b-a3b", 80e9, None),
    # Nemotron 3 Super 120B-A12B: 12 B active without embeddings (11.7 here)
    ("nemotron-3-super", 120e9, None),
])
def test_parameter_counts_match_the_published(name: str, total: float,
                                              active: float | None) -> None:
    m = get_model(name)
    assert m.params == pytest.approx(total, rel=0.01)
    if active is not None:
        assert m.active_params == pytest.approx(active, rel=0.02)


def test_block_counts_follow_the_pattern() -> None:
    m = get_model("nemotron-3-nano")
    assert [m.blocks(k) for k in "M*-E"] == [23, 6, 0, 23]
    assert m.moe_layers == 23 and m.layers == 52
    assert get_model("qwen3-next-80b-a3b").blocks("G") == 36


def _pair_model() -> tuple[TransformerSpec, TransformerSpec]:
    """A 16-layer transformer and the same model written as 32 blocks: attention, MLP."""
    base = dict(hidden=2048, heads=16, kv_heads=4, ffn=8192, vocab=32000, seq=4096)
    plain = TransformerSpec(name="plain", layers=16, **base)  # type: ignore[arg-type]
    blocks = TransformerSpec(name="blocks", layers=32, hybrid_pattern="*-" * 16,
                             **base)  # type: ignore[arg-type]
    return plain, blocks


def test_attention_and_mlp_blocks_are_the_transformer_they_write() -> None:
    """Every per-layer quantity of the block formalism (weights, FLOPs, activations, TP
    all-reduces, KV cache, serving kernels) must add up to the transformer's."""
    plain, blocks = _pair_model()
    assert blocks.params == plain.params
    assert forward_flops_per_token(blocks, 4096) == pytest.approx(
        forward_flops_per_token(plain, 4096), rel=1e-12)
    fab = fs.build_cluster("dgx-h100", nodes=1)
    cfg = ParallelConfig(tp=4, global_batch=64, micro_batch=1, seq_len=4096,
                         sequence_parallel=True)
    a = simulate_step(plain, cfg, fab, backend="analytic")
    b = simulate_step(blocks, cfg, fab, backend="analytic")
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-9)
    assert b.comm_total_s["tp"] == pytest.approx(a.comm_total_s["tp"], rel=1e-9)
    ma = memory_per_gpu(plain, cfg.resolve(plain, 8))
    mb = memory_per_gpu(blocks, cfg.resolve(blocks, 8))
    assert mb.activations == pytest.approx(ma.activations, rel=1e-9)
    kw = dict(tp=4, pp=1, ep=1, precision="bf16", kv_precision=None, engine="trtllm",
              comm=None)
    ia = build_instance(plain, fab, **kw)  # type: ignore[arg-type]
    ib = build_instance(blocks, fab, **kw)  # type: ignore[arg-type]
    assert ib.decode(8, 8 * 2048).total_s == pytest.approx(ia.decode(8, 8 * 2048).total_s,
                                                           rel=1e-9)
    assert ib.prefill([2048]).total_s == pytest.approx(ia.prefill([2048]).total_s, rel=1e-9)


def test_recurrent_mixers_cost_tokens_not_context() -> None:
    """A Mamba-2 block's scan grows with the tokens, attention with the sequence: from 4k
    to 32k tokens of sequence a hybrid's FLOPs per token grow far less than a
    transformer's."""
    hyb, llama = get_model("nemotron-h-8b"), get_model("llama3-8b")
    grow_h = forward_flops_per_token(hyb, 32768) / forward_flops_per_token(hyb, 4096)
    grow_t = forward_flops_per_token(llama, 32768) / forward_flops_per_token(llama, 4096)
    assert grow_h < 1.2 < grow_t
    assert mixer_core_flops(hyb, 0) > 0  # the scans remain without any attention


def test_serving_keeps_state_not_cache_in_recurrent_blocks() -> None:
    """Nemotron-H 8B keeps a KV cache in 4 of its 52 blocks and a fixed state per sequence
    in 24: more sequences fit than for Llama 3 8B, and decode slows less with context."""
    fab = fs.build_cluster("dgx-h100", nodes=1)
    kw = dict(tp=1, pp=1, ep=1, precision="bf16", kv_precision=None, engine="trtllm",
              comm=None)
    hyb = build_instance(get_model("nemotron-h-8b"), fab, **kw)  # type: ignore[arg-type]
    tf = build_instance(get_model("llama3-8b"), fab, **kw)  # type: ignore[arg-type]
    per_seq_h = hyb.kv_tokens(8192) * hyb.kv_bytes_per_token_gpu()
    per_seq_t = tf.kv_tokens(8192) * tf.kv_bytes_per_token_gpu()
    assert per_seq_h * 2 < per_seq_t
    assert state_bytes_per_sequence(get_model("llama3-8b")) == 0
    slow_h = hyb.decode(32, 32 * 8000).total_s / hyb.decode(32, 32 * 500).total_s
    slow_t = tf.decode(32, 32 * 8000).total_s / tf.decode(32, 32 * 500).total_s
    assert slow_h < slow_t


@pytest.mark.parametrize(("change", "says"), [
    (dict(layers=50), "hybrid_pattern has 52 blocks but layers is 50"),
    (dict(hybrid_pattern="M-X" * 4, layers=12), "'X'"),
    (dict(experts=1, top_k=1), "has MoE blocks (E) but experts is 1"),
    (dict(attn_window=128), "attn_window"),
])
def test_bad_patterns_name_the_field(change: dict[str, object], says: str) -> None:
    data = get_model("nemotron-3-nano").model_dump() | change
    with pytest.raises(ConfigError) as e:
        TransformerSpec(**data)
    assert says in str(e.value)


def test_megatron_launch_line_builds_the_preset() -> None:
    """NVIDIA's own Nemotron 3 Nano arguments (Megatron-LM's modelopt configuration)
    read into the same model as the preset."""
    from fabricsim.workloads.training.megatron import parse_megatron_args

    line = ("--num-experts 128 --moe-router-topk 6 --moe-shared-expert-intermediate-size "
            "3712 --mamba-num-heads 64 --mamba-head-dim 64 --hybrid-layer-pattern "
            "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME "
            "--untie-embeddings-and-output-weights --squared-relu --hidden-size 2688 "
            "--num-attention-heads 32 --group-query-attention --num-query-groups 2 "
            "--ffn-hidden-size 1856 --kv-channels 128 --bf16 --seq-length 8192 "
            "--vocab-size 131072")
    args = parse_megatron_args(line)[0]
    preset = get_model("nemotron-3-nano")
    shape = {k: v for k, v in args.items() if k in TransformerSpec.model_fields}
    m = TransformerSpec(name="line", **shape)
    assert m.layers == 52 and m.hybrid_pattern == preset.hybrid_pattern
    assert m.params == preset.params


def test_serving_a_model_without_attention_is_refused_by_name() -> None:
    """The cache is counted in tokens of KV cache: a model of recurrent blocks only has
    none, so serving it is refused naming the field, not divided by zero."""
    m = get_model("nemotron-h-8b").model_copy(update={"hybrid_pattern": "M-M-M-M-",
                                                      "layers": 8})
    with pytest.raises(ConfigError) as e:
        build_instance(m, fs.build_cluster("dgx-h100", nodes=1), tp=1, pp=1, ep=1,
                       precision="bf16", kv_precision=None, engine="trtllm", comm=None)
    assert e.value.field == "training.hybrid_pattern" and "attention block" in str(e.value)


def test_latent_moe_routes_and_moves_its_latent() -> None:
    """Nemotron 3 Super's routed experts work at a 1,024-wide latent: their weights, the
    FLOPs of the tokens through them and what dispatch and combine move shrink 4x against
    experts at the 4,096 hidden width; the shared expert and the projections stay."""
    m = get_model("nemotron-3-super")
    wide = m.model_copy(update={"moe_latent": None})
    assert (m.expert_width_in, wide.expert_width_in) == (1024, 4096)
    assert wide.expert_params == 4 * m.expert_params
    assert m.shared_expert_params == wide.shared_expert_params
    assert m.latent_params == 2 * 4096 * 1024 and wide.latent_params == 0
    assert (m.active_params - m.embedding_params) / 1e9 == pytest.approx(12, rel=0.05)
    fab = fs.build_cluster("dgx-h100", nodes=8)
    cfg = ParallelConfig(tp=1, ep=64, global_batch=64, seq_len=4096, zero="fsdp")
    a = simulate_step(m, cfg, fab, backend="analytic", check_memory=False)
    b = simulate_step(wide, cfg, fab, backend="analytic", check_memory=False)
    assert b.comm_total_s["ep"] > 3 * a.comm_total_s["ep"]


def test_megatron_pattern_with_mtp_blocks_is_refused_by_name() -> None:
    """Multi-token-prediction blocks (after ``/``) are not modelled: refused naming the
    flag, not dropped silently; pipeline marks (``|``) are dropped and said so."""
    from fabricsim.workloads.training.megatron import read_megatron_line

    with pytest.raises(ConfigError) as e:
        read_megatron_line("--hybrid-layer-pattern M*-/M- --hidden-size 1024 "
                           "--num-attention-heads 8")
    assert e.value.field == "--from-megatron" and "multi-token-prediction" in str(e.value)
    line = read_megatron_line("--hybrid-layer-pattern M*|-M --hidden-size 1024 "
                              "--num-attention-heads 8")
    assert line.args[0]["hybrid_pattern"] == "M*-M" and line.args[0]["layers"] == 4
    assert any("pipeline marks" in a for a in line.applied)
