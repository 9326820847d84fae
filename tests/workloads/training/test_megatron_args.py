"""The Megatron/NeMo argument-list reader (fabricsim.workloads.training.megatron)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.errors import ConfigError
from fabricsim.workloads.models import MODEL_FIELDS, TransformerSpec
from fabricsim.workloads.training.megatron import parse_megatron_args, read_megatron_line


def test_reads_both_spellings_and_reports_what_it_ignores() -> None:
    s, ignored = parse_megatron_args(
        "--tensor-model-parallel-size=8 --pipeline-model-parallel-size 4 "
        "--virtual-pipeline-model-parallel-size 5 --micro-batch-size 1 "
        "--global-batch-size 512 --seq-length 8192 --use-distributed-optimizer "
        "--overlap-grad-reduce --tp-comm-overlap --data-path /data/x --split 99,1,0 "
        "--log-interval 1")
    assert (s["tp"], s["pp"], s["vp"], s["global_batch"]) == (8, 4, 5, 512)
    assert s["zero"] == 1 and s["overlap_grad_reduce"] is True
    assert s["overlap_param_gather"] is False  # Megatron's default, not NeMo's
    assert ignored == ["--data-path /data/x", "--split 99,1,0", "--log-interval 1"]


@pytest.mark.parametrize(("flag", "value"), [("--overlap-p2p-communication", True),
                                             ("--no-overlap-p2p-communication", False),
                                             ("", None)])
def test_pipeline_overlap_switches(flag: str, value: bool | None) -> None:
    s, ignored = parse_megatron_args(f"--pipeline-model-parallel-size 4 {flag}")
    assert s.get("overlap_p2p_comm") is value and not ignored


def test_model_shape_and_block_recompute() -> None:
    s, _ = parse_megatron_args(
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
        "--num-attention-heads 32 --group-query-attention --num-query-groups 8 "
        "--recompute-granularity full "
        "--recompute-method block --recompute-num-layers 4 --fp8-format hybrid --bf16")
    assert (s["layers"], s["hidden"], s["ffn"], s["heads"], s["kv_heads"]) == \
        (32, 4096, 14336, 32, 8)
    assert s["recompute"] == "full" and s["recompute_layers_per_chunk"] == 4
    assert s["precision"] == "fp8"


@pytest.mark.parametrize(("text", "match"), [
    ("--tensor-model-parallel-size", "needs a value"),
    ("--micro-batch-size one", "integer"),
    ("--num-layers-per-virtual-pipeline-stage 2", "needs --num-layers"),
    ("--num-layers 126 --pipeline-model-parallel-size 16 "
     "--num-layers-per-virtual-pipeline-stage 1", "do not split"),
    ("--account-for-embedding-in-pipeline-split", "give both"),
    ("--recompute-granularity everything", "full or selective"),
    ("--recompute-method uniform --recompute-num-layers 2", "block"),
    ("--lr 'unterminated", "cannot split"),
])
def test_bad_lists_are_clear_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as e:
        parse_megatron_args(text)
    assert e.value.field == "--from-megatron"


def test_an_fp8_recipe_without_an_fp8_format_is_reported_as_ignored() -> None:
    """Megatron reads --fp8-recipe only under --fp8-format; without it the run is BF16,
    and the recipe is listed as ignored rather than kept or dropped silently."""
    s, ignored = parse_megatron_args("--fp8-recipe blockwise --tensor-model-parallel-size 2")
    assert "fp8_recipe" not in s and s.get("precision") is None
    assert ignored == ["--fp8-recipe blockwise (no --fp8-format: BF16)"]
    s, ignored = parse_megatron_args("--fp8-recipe blockwise --fp8-format e4m3")
    assert (s["precision"], s["fp8_recipe"]) == ("fp8", "blockwise") and not ignored


def test_expert_tensor_parallel_size_is_read() -> None:
    s, ignored = parse_megatron_args("--expert-model-parallel-size 64 "
                                     "--expert-tensor-parallel-size 1")
    assert (s["ep"], s["etp"]) == (64, 1) and not ignored


def test_group_limited_routing_flags_are_model_shape() -> None:
    s, ignored = parse_megatron_args("--num-experts 256 --moe-router-topk 8 "
                                     "--moe-router-num-groups 8 --moe-router-group-topk 4")
    assert (s["router_groups"], s["router_group_topk"]) == (8, 4) and not ignored


@pytest.mark.parametrize(("flag", "impl"), [("--use-megatron-fsdp", "megatron"),
                                            ("--use-torch-fsdp2", "pytorch")])
def test_fsdp_switches_name_the_implementation(flag: str, impl: str) -> None:
    extra = "--use-distributed-optimizer " if impl == "megatron" else ""
    s, ignored = parse_megatron_args(f"{extra}{flag}")
    assert (s["zero"], s["fsdp_impl"]) == ("fsdp", impl) and not ignored


@pytest.mark.parametrize(("args", "match"), [
    ("--pipeline-model-parallel-size 2", "pipeline parallelism"),
    ("--expert-model-parallel-size 8", "expert parallelism"),
    ("--use-distributed-optimizer", "distributed-optimizer")])
def test_torch_fsdp2_refuses_what_megatron_refuses(args: str, match: str) -> None:
    """Megatron's arguments.py asserts PP 1, EP 1 and no distributed optimizer for
    --use-torch-fsdp2; a pasted list that breaks them would not have run."""
    with pytest.raises(ConfigError, match=match):
        parse_megatron_args(f"--use-torch-fsdp2 {args}")


@pytest.mark.parametrize(("strategy", "zero"), [
    (None, "fsdp"), ("optim_grads_params", "fsdp"), ("optim_grads", 2), ("optim", 1),
    ("no_shard", 0)])
def test_megatron_fsdp_sharding_strategy_is_the_zero_stage(strategy: str | None,
                                                           zero: int | str) -> None:
    """Megatron-FSDP shards what --data-parallel-sharding-strategy says (default
    optim_grads_params, ZeRO-3); only full sharding pays FSDP's weight gathers."""
    arg = "" if strategy is None else f" --data-parallel-sharding-strategy {strategy}"
    s, ignored = parse_megatron_args("--use-megatron-fsdp --use-distributed-optimizer" + arg)
    assert s["zero"] == zero and not ignored
    assert s.get("fsdp_impl") == ("megatron" if zero == "fsdp" else None)


def test_sharding_strategy_without_megatron_fsdp_is_listed_ignored() -> None:
    s, ignored = parse_megatron_args("--use-distributed-optimizer "
                                     "--data-parallel-sharding-strategy optim_grads")
    assert s["zero"] == 1
    assert ignored == ["--data-parallel-sharding-strategy optim_grads (no "
                       "--use-megatron-fsdp: it applies to Megatron-FSDP only)"]
    with pytest.raises(ConfigError, match="one of no_shard, optim"):
        parse_megatron_args("--use-megatron-fsdp --data-parallel-sharding-strategy zero3")


def test_two_fsdp_switches_are_refused() -> None:
    with pytest.raises(ConfigError, match="--use-megatron-fsdp and --use-torch-fsdp2"):
        parse_megatron_args("--use-megatron-fsdp --use-torch-fsdp2")


def test_fsdp_impl_without_sharded_weights_is_refused() -> None:
    from fabricsim.errors import ModelError
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig

    with pytest.raises(ModelError, match=r"training.fsdp_impl.*--zero fsdp"):
        ParallelConfig(fsdp_impl="megatron").resolve(get_model("llama2-7b"), 8)


@pytest.mark.parametrize(("args", "grad_bytes"), [
    ("--bf16", 4), ("--bf16 --grad-reduce-in-bf16", 2), ("", 4),
    ("--bf16 --accumulate-allreduce-grads-in-fp32", 4),
    ("--bf16 --main-grads-dtype bf16", 2),
    ("--bf16 --use-megatron-fsdp", 2),
    ("--bf16 --use-megatron-fsdp --megatron-fsdp-main-grads-dtype fp32", 4),
    ("--bf16 --use-megatron-fsdp --megatron-fsdp-grad-comm-dtype fp32", 4),
    ("--bf16 --use-torch-fsdp2", 2)])
def test_gradients_reduce_in_fp32_unless_told_bf16(args: str, grad_bytes: int) -> None:
    """Megatron's arguments.py turns accumulate_allreduce_grads_in_fp32 on for --bf16
    unless --grad-reduce-in-bf16 (or BF16 main grads): data-parallel gradients move 4
    bytes per element. Megatron-FSDP reduces in its main-grad dtype (default the
    parameters', BF16), torch FSDP2 without a mixed-precision policy in BF16."""
    s, ignored = parse_megatron_args(f"--tensor-model-parallel-size 2 {args}")
    assert s["grad_reduce_dtype"] == {2: "bf16", 4: "fp32"}[grad_bytes] and not ignored


def test_current_megatron_vp_and_recompute_flags() -> None:
    """--num-virtual-stages-per-pipeline-rank (Megatron's VP flag today) and
    --recompute-activations (selective) were listed as having no effect."""
    s, ignored = parse_megatron_args("--pipeline-model-parallel-size 4 "
                                     "--num-virtual-stages-per-pipeline-rank 5 "
                                     "--recompute-activations")
    assert (s["vp"], s["recompute"]) == (5, "selective") and not ignored
    s, _ = parse_megatron_args("--recompute-activations --recompute-granularity full")
    assert s["recompute"] == "full"


@pytest.mark.parametrize(("args", "match"), [
    ("--pipeline-model-parallel-size 4 --num-layers 80 "
     "--num-layers-per-virtual-pipeline-stage 0", "must be a positive integer, got 0"),
    ("--pipeline-model-parallel-size 0 --num-layers 80 "
     "--num-layers-per-virtual-pipeline-stage 2", "must be a positive integer, got 0"),
    ("--pipeline-model-parallel-size 4 --num-layers 80 "
     "--num-layers-per-virtual-pipeline-stage -2", "got -2"),
    ("--virtual-pipeline-model-parallel-size 5 --num-layers 80 "
     "--num-layers-per-virtual-pipeline-stage 2", "both set the virtual pipeline size")])
def test_bad_virtual_pipeline_lists_are_refused(args: str, match: str) -> None:
    """(They raised ZeroDivisionError, or the per-stage form silently won.)"""
    with pytest.raises(ConfigError, match=match):
        parse_megatron_args(args)


def test_flags_read_only_with_another_are_listed_ignored() -> None:
    s, ignored = parse_megatron_args("--recompute-num-layers 4 "
                                     "--moe-token-dispatcher-type allgather")
    assert "recompute_layers" not in s
    assert ignored == ["--moe-token-dispatcher-type allgather (timed as alltoall)",
                       "--recompute-num-layers 4 (no --recompute-method: Megatron reads "
                       "it only with one)"]


@pytest.mark.parametrize(("args", "match"), [
    ("model.tensor_model_parallel_size=4 trainer.num_nodes=2", "NeMo/Hydra override"),
    ("--fp8-format e5m2", "e4m3 or hybrid"),
    ("--overlap-param-gather --overlap-grad-reduce", "needs --use-distributed-optimizer"),
    ("--use-distributed-optimizer --overlap-param-gather", "needs --overlap-grad-reduce")])
def test_lists_megatron_would_refuse_are_refused(args: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_megatron_args(args)


def test_query_groups_need_group_query_attention() -> None:
    """Megatron sets num_query_groups only under --group-query-attention."""
    s, ignored = parse_megatron_args("--num-query-groups 8")
    assert "kv_heads" not in s and ignored[0].startswith("--num-query-groups 8 (no ")
    s, ignored = parse_megatron_args("--group-query-attention --num-query-groups 8")
    assert s["kv_heads"] == 8 and not ignored


def test_block_recompute_counts_per_model_chunk() -> None:
    """Megatron recomputes --recompute-num-layers layers of each model chunk (a virtual
    stage): n per chunk is n·v per pipeline stage, and every layer once n covers a chunk,
    whether the chunks come from --virtual-pipeline-model-parallel-size or a layout and
    whether or not the list gives --num-layers."""
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig

    m = get_model("llama2-13b")  # 40 layers
    base = ("--pipeline-model-parallel-size 4 --virtual-pipeline-model-parallel-size 5 "
            "--recompute-granularity full --recompute-method block ")

    def per_stage(text: str, model: object = m, world: int = 8) -> int | None:
        s = parse_megatron_args(text)[0]
        return ParallelConfig.model_validate(s).resolve(model, world).cfg.recompute_layers

    assert per_stage(base + "--recompute-num-layers 1") == 5
    assert per_stage(base + "--recompute-num-layers 3") is None  # 3 >= 2-layer chunks
    ds = get_model("deepseek-v3")
    lay = ("--pipeline-model-parallel-size 8 --pipeline-model-parallel-layout "
           "'Et|(tt|)*30mL' --recompute-granularity full --recompute-method block "
           "--recompute-num-layers 1 --expert-model-parallel-size 8")
    assert per_stage(lay, ds, 64) == 4  # v = 32 chunks / pp 8
    plain = parse_megatron_args("--pipeline-model-parallel-size 4 --recompute-granularity "
                                "full --recompute-method block --recompute-num-layers 3")[0]
    assert per_stage("--pipeline-model-parallel-size 4 --recompute-granularity full "
                     "--recompute-method block --recompute-num-layers 3") == 3
    assert plain["recompute_layers_per_chunk"] == 3


_DATA = Path(__file__).resolve().parents[2] / "data" / "megatron"


def test_deepseek_v2_lite_line_builds_the_published_model() -> None:
    """issue 37: Megatron's DeepSeek-V2-Lite example (MLA, 64 experts top-6, shared experts,
    a dense first layer) read whole. At the model's own 27 layers and 102,400-token
    vocabulary it has 15.7B parameters, the model card's figure (deepseek-ai/DeepSeek-V2-Lite:
    15.7B total, 2.4B activated; the activated count here also holds the 0.2B input
    embedding, which the card leaves out)."""
    line = (_DATA / "deepseek2_lite_h100.txt").read_text()
    got = read_megatron_line(line)
    f = got.args.fields
    assert (f["experts"], f["top_k"], f["moe_ffn"], f["shared_experts"], f["dense_layers"]) \
        == (64, 6, 1408, 2, 1)
    assert (f["kv_latent"], f["attn_core_width"], f["v_head_dim"]) == (576, 320, 128)
    assert "head_dim" not in f          # --kv-channels is not MLA's head width
    assert any("multi-latent attention" in a for a in got.applied)
    full = read_megatron_line(line.replace("--num-layers 16", "--num-layers 27")
                              .replace("([0]+[1]*15)", "([0]+[1]*26)")).args.fields
    model = TransformerSpec(**{**{k: v for k, v in full.items() if k in MODEL_FIELDS},
                               "vocab": 102400})
    assert model.params == pytest.approx(15.7e9, rel=0.01)
    assert model.active_params - model.hidden * model.vocab == pytest.approx(2.4e9, rel=0.03)


@pytest.mark.parametrize(("text", "match"), [
    ("--kv-lora-rank 512", "needs --multi-latent-attention"),
    ("--num-layers 4 --moe-layer-freq ([0]+[1]*2)", "describes 3 layers"),
    ("--num-layers 4 --moe-layer-freq [0,2,1,1]", "must be 0 or 1"),
    ("--num-layers 4 --moe-layer-freq 0", "at least 1"),
    ("--num-layers 4 --moe-layer-freq every-other", "list expression"),
    ("--num-layers 32 --hidden-size 4096 --num-layers 40", "contradict each other"),
    ("--nproc_per_node 8 --nproc-per-node 4", "contradict each other"),
])
def test_moe_and_mla_flags_refused_clearly(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        read_megatron_line(text)


def test_layer_frequency_and_shared_width() -> None:
    f = read_megatron_line("--num-layers 8 --moe-layer-freq 2 --moe-ffn-hidden-size 512 "
                           "--moe-shared-expert-intermediate-size 1024").args.fields
    assert f["dense_layers"] == 4 and f["shared_experts"] == 2
    mixtral = read_megatron_line((_DATA / "mixtral_distributed.txt").read_text())
    assert mixtral.launcher == {"nodes": 1, "gpus_per_node": 2}
    assert mixtral.args.fields["experts"] == 2 and mixtral.args.fields["ep"] == 2


def test_a_huge_layer_frequency_is_refused_before_it_is_built() -> None:
    import time

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="more layers than"):
        read_megatron_line("--num-layers 4 --moe-layer-freq [1]*300000000")
    assert time.perf_counter() - t0 < 1.0
