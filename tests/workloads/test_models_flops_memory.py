import pytest

from fabricsim.errors import ModelError
from fabricsim.workloads.flops import training_flops_per_token
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.memory import memory_per_gpu
from fabricsim.workloads.training.parallel import ParallelConfig

GIB = 2**30


@pytest.mark.parametrize(("name", "published"), [
    ("llama2-7b", 6.74e9), ("llama2-13b", 13.02e9), ("llama2-70b", 68.98e9),
    ("llama3-8b", 8.03e9), ("llama3-405b", 405.8e9), ("gpt3-175b", 175e9),
    ("mixtral-8x7b", 46.7e9), ("bloom-176b", 176.2e9), ("mpt-70b", 64.86e9),
    ("deepseek-v3", 671e9),
    # model cards / config.json totals of the presets added for NVIDIA's NeMo tables
    ("mixtral-8x22b", 141e9), ("qwen3-30b-a3b", 30.5e9), ("qwen3-235b-a22b", 235e9),
    ("gpt-oss-120b", 116.8e9), ("nemotron4-15b", 15.6e9), ("nemotron4-340b", 341e9),
    # xai-org/grok-1 README (314B) and Llama 4 Maverick's model card (400B)
    ("grok-1", 314e9), ("llama4-maverick", 400e9)])
def test_param_counts_match_published(name: str, published: float) -> None:
    assert get_model(name).params == pytest.approx(published, rel=0.01)


def test_moe_active_params() -> None:
    assert get_model("mixtral-8x7b").active_params == pytest.approx(12.9e9, rel=0.01)
    # MLA counted at its real 187.1M weights per layer (attn_weights): 37.6B; as plain
    # attention of the same width it was 38.7B
    assert get_model("deepseek-v3").active_params == pytest.approx(37e9, rel=0.02)
    assert get_model("mixtral-8x22b").active_params == pytest.approx(39e9, rel=0.01)
    assert get_model("qwen3-30b-a3b").active_params == pytest.approx(3.3e9, rel=0.02)
    assert get_model("qwen3-235b-a22b").active_params == pytest.approx(22e9, rel=0.01)
    # Kimi K2's 1T / 32B count its MLA at its real size (attn_weights), not as 64 heads
    # of plain attention (which would add 6B)
    kimi = get_model("kimi-k2")
    assert kimi.params == pytest.approx(1.03e12, rel=0.01)
    assert kimi.active_params == pytest.approx(32e9, rel=0.03)
    # Llama 4 Maverick: 17B active (one routed and the shared expert on every other layer)
    assert get_model("llama4-maverick").active_params == pytest.approx(17e9, rel=0.02)
    # GPT-OSS's 5.1B active leave out the input embedding, a lookup
    oss = get_model("gpt-oss-120b")
    assert oss.active_params - oss.vocab * oss.hidden == pytest.approx(5.13e9, rel=0.01)


def test_sliding_window_layers_meet_fewer_keys() -> None:
    from fabricsim.workloads.flops import attention_flops

    oss = get_model("gpt-oss-120b")
    full = oss.model_copy(update={"attn_window": None, "window_skip_freq": None})
    # half the layers see 128 keys instead of s/2 on average (causal)
    s = 8192
    want = (s / 2 + (128 - 128**2 / (2 * s))) / 2 / (s / 2)
    assert attention_flops(oss, s, causal=True) / attention_flops(full, s, causal=True) \
        == pytest.approx(want)
    # a window as long as the sequence changes nothing
    assert attention_flops(oss, 128, causal=True) == attention_flops(full, 128, causal=True)


@pytest.mark.parametrize("name", ["llama2-70b", "gpt3-175b", "llama3-8b", "mixtral-8x7b",
                                  "kimi-k2", "qwen3-30b-a3b"])
def test_six_n_rule_at_short_sequence(name: str) -> None:
    # 6 FLOPs per (active) weight a token touches; the input embedding is a lookup.
    m = get_model(name)
    n = m.active_params - (0 if m.tied_embeddings else m.vocab * m.hidden)
    assert training_flops_per_token(m, seq=16) == pytest.approx(6 * n, rel=0.01)


def test_attention_term_grows_with_sequence() -> None:
    m = get_model("llama2-7b")
    assert training_flops_per_token(m, 32768) > 1.5 * training_flops_per_token(m, 16)


def test_recompute_adds_hardware_flops() -> None:
    m = get_model("gpt3-175b")
    base = training_flops_per_token(m, 2048)
    assert base < training_flops_per_token(m, 2048, "selective") \
        < training_flops_per_token(m, 2048, "full") == pytest.approx(base * 4 / 3, rel=0.01)


def test_70b_bf16_adam_needs_sharding() -> None:
    m = get_model("llama2-70b")
    alone = memory_per_gpu(m, ParallelConfig(zero=0, recompute="full", seq_len=4096)
                           .resolve(m, 64))
    assert alone.weights + alone.grads + alone.optimizer == pytest.approx(16 * m.params)
    assert alone.total > 80 * GIB
    z3 = memory_per_gpu(m, ParallelConfig(zero=3, recompute="full", seq_len=4096)
                        .resolve(m, 64))
    assert z3.total < 80 * GIB
    tp8 = memory_per_gpu(m, ParallelConfig(tp=8, zero=1, recompute="full", seq_len=4096)
                         .resolve(m, 64))
    assert tp8.total < 80 * GIB


def test_zero_stages_shrink_memory_monotonically() -> None:
    m = get_model("llama2-13b")
    tot = [memory_per_gpu(m, ParallelConfig(zero=z, seq_len=4096).resolve(m, 32)).total
           for z in (0, 1, 2, 3)]
    assert tot == sorted(tot, reverse=True) and tot[0] > 2 * tot[3]


def test_divisibility_errors_name_the_field() -> None:
    m = get_model("llama2-70b")
    with pytest.raises(ModelError, match=r"training\.tp"):
        ParallelConfig(tp=3).resolve(m, 24)
    with pytest.raises(ModelError, match=r"training\.global_batch"):
        ParallelConfig(micro_batch=3, global_batch=64).resolve(m, 8)
    with pytest.raises(ModelError, match=r"training\.ep"):
        ParallelConfig(ep=2).resolve(m, 8)
    with pytest.raises(ModelError, match=r"training\.dp"):
        ParallelConfig(dp=3).resolve(m, 8)


def test_attention_activations_follow_the_heads() -> None:
    """Korthikanti's 11·s·b·h holds for multi-head attention; GQA stores smaller keys
    and values, DeepSeek's MLA larger queries and keys (128 heads x 192)."""
    from fabricsim.workloads.training.memory import activation_bytes_per_layer

    def attn_share(name: str) -> float:
        m = get_model(name)
        p = ParallelConfig(micro_batch=1, seq_len=4096, recompute="none").resolve(m, 1)
        no_attn = m.model_copy(update={"heads": 1, "kv_heads": None, "head_dim": 1,
                                       "attn_core_width": None, "v_head_dim": None})
        return (activation_bytes_per_layer(m, p) - activation_bytes_per_layer(no_attn, p)
                ) / (4096 * m.hidden)

    # the core's Q, K, V and output over a one-wide stand-in (8 elements per token);
    # with the 3·h of input and dropout mask outside it: 11 (MHA), 7.5 (8 KV heads of 64)
    assert attn_share("gpt3-175b") == pytest.approx(8 - 8 / 12288)
    assert attn_share("llama3-70b") == pytest.approx(4.5 - 8 / 8192)
    assert attn_share("deepseek-v3") == pytest.approx(2 * 128 * (192 * 2 + 128 * 2) / 7168
                                                      - 8 / 7168)


def test_recomputing_modules_never_stores_less_than_full_recompute() -> None:
    """Selective recomputation keeps more than full recomputation, whatever it repeats
    (the MLA up-projections freed more than the attention was charged: a negative
    layer)."""
    from fabricsim.workloads.training.memory import activation_bytes_per_layer, memory_per_gpu

    m = get_model("deepseek-v3")
    kw = dict(pp=16, ep=64, global_batch=4096, seq_len=4096)
    full = memory_per_gpu(m, ParallelConfig(recompute="full", **kw).resolve(m, 2048))
    for mods in (("mla_up_proj",), ("moe", "mla_up_proj", "layernorm"),
                 ("core_attn", "mlp", "moe", "mla_up_proj", "layernorm")):
        p = ParallelConfig(recompute="selective", recompute_modules=mods, **kw).resolve(
            m, 2048)
        assert activation_bytes_per_layer(m, p, moe=True) > 0
        assert memory_per_gpu(m, p).activations > full.activations


def test_interleaving_keeps_about_p_micro_batches_on_every_rank() -> None:
    """Megatron's interleaved warm-up: 2·(p − r − 1) + (v − 1)·p chunk forwards, so a
    lighter first stage (Megatron's account-for-embedding split) is not the fullest."""
    from fabricsim.workloads.training.memory import _in_flight

    m = get_model("llama3-70b")
    p = ParallelConfig(tp=8, pp=4, vp=5, global_batch=64).resolve(m, 32)
    assert [_in_flight(p, r) for r in range(4)] == pytest.approx([4.6, 4.2, 3.8, 3.4])
    plain = ParallelConfig(tp=8, pp=4, global_batch=64).resolve(m, 32)
    assert [_in_flight(plain, r) for r in range(4)] == [4, 3, 2, 1]
    few = ParallelConfig(tp=8, pp=4, vp=5, global_batch=2).resolve(m, 32)
    assert _in_flight(few, 0) == 2  # no more than every chunk of every micro-batch


def test_cheapest_fit_offers_recomputation_over_a_module_list() -> None:
    """A job recomputing a module list is offered full recomputation (which replaces
    the list); a job no single change fits is offered FSDP with full recomputation."""
    from fabricsim.workloads.training.memory import cheapest_fit

    m = get_model("llama3-405b")
    p = ParallelConfig(tp=8, pp=4, recompute="selective", recompute_modules=("core_attn",),
                       global_batch=256, seq_len=8192).resolve(m, 256)
    assert "--recompute full --recompute-layers" in cheapest_fit(m, p, 80 * 2**30)
    g = get_model("gpt3-175b")
    q = ParallelConfig(global_batch=128, seq_len=2048).resolve(g, 128)
    assert cheapest_fit(g, q, 80 * 2**30).startswith("--zero fsdp --recompute full (")
    priced = cheapest_fit(g, q, 80 * 2**30, step_time=lambda c: 7.0)
    assert priced.endswith("step 7 s)")


def test_v_head_dim_must_leave_a_query_key_width() -> None:
    with pytest.raises(ValueError, match="v_head_dim"):
        get_model("deepseek-v3").model_copy(update={"v_head_dim": 320}).model_validate(
            {**get_model("deepseek-v3").model_dump(), "v_head_dim": 320})
    assert get_model("kimi-k2").attn_io_widths == (64 * 192, 64 * 192, 64 * 128, 64 * 128)


def test_leading_dense_layers_sit_on_the_first_stage() -> None:
    """DeepSeek-V3's three dense layers are the first stage's (Megatron's layout
    Et*4|...: 3 dense + 1 MoE there), so that stage holds one layer's experts, not 3.8."""
    from fabricsim.workloads.training.memory import _stage_dense_layers, _stage_params

    m = get_model("deepseek-v3")
    p = ParallelConfig(pp=16, ep=8, pipeline_layout="Et*4|(tttt|)*14tmL",
                       global_batch=1024).resolve(m, 256)
    dense = _stage_dense_layers(m, p)
    assert dense[0] == 3 and sum(dense) == m.dense_layers
    e0, e1 = _stage_params(m, p, 0)[1], _stage_params(m, p, 1)[1]
    assert e0 == pytest.approx(e1 / 4)  # one MoE layer against four
    g = m.model_copy(update={"layers": 64})  # 64 layers: pp 4 x vp 2 chunks of 8
    vp = ParallelConfig(pp=4, vp=2, ep=8, global_batch=1024).resolve(g, 256)
    assert _stage_dense_layers(g, vp) == [3, 0, 0, 0]  # the first chunk is rank 0's


def test_deepseek_v3_fits_as_deepseek_trained_it() -> None:
    """DeepSeek-V3's own layout (report sec. 3: 2,048 H800 of 80 GB, PP 16 DualPipe,
    EP 64, FP8, RMSNorm and MLA up-projections recomputed) fits, with its MLA attention
    stored at its real widths and its FP8-cast expert inputs."""
    m = get_model("deepseek-v3")
    p = ParallelConfig(pp=16, ep=64, micro_batch=1, global_batch=15360, seq_len=4096,
                       precision="fp8", recompute="selective",
                       recompute_modules=("layernorm", "mla_up_proj"),
                       pp_schedule="dualpipe", pipeline_layout="Et*4|(tttt|)*14tmL",
                       ep_overlap=True, moe_node_limit=4, fp8_recipe="blockwise"
                       ).resolve(m, 2048)
    est = memory_per_gpu(m, p)
    assert 60 * GIB < est.total < 80 * GIB


def test_fp8_saves_nothing_on_what_selective_recomputation_frees() -> None:
    """Recomputing the MoE block frees its permuted inputs and activations: FP8 then saves
    only on the attention's stored linear inputs (it 'saved' 13 of the 14 s·b·h the layer
    still held, leaving FP8 at a third of BF16)."""
    m = get_model("qwen3-30b-a3b")
    kw = dict(ep=8, global_batch=64, recompute="selective",
              recompute_modules=("moe", "layernorm"))
    bf16 = memory_per_gpu(m, ParallelConfig(**kw).resolve(m, 8)).activations
    fp8 = memory_per_gpu(m, ParallelConfig(precision="fp8", **kw).resolve(m, 8)).activations
    assert 0.8 * bf16 < fp8 < bf16
