"""Megatron/NeMo layouts: uneven stages, virtual pipelines, block recomputation, overlap
flags, and the memory model that explains Llama 3 405B's layout (issue 11)."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ModelError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.memory import cheapest_fit, memory_per_gpu
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step

GIB = 2**30
L405 = get_model("llama3-405b")
META = {"tp": 8, "pp": 16, "dp": 64, "global_batch": 2048, "micro_batch": 1,
        "seq_len": 8192}


def _resolve(**kw: object) -> object:
    return ParallelConfig(**{**META, **kw}).resolve(L405, 8192)  # type: ignore[arg-type]


def test_stage_splits_follow_megatron() -> None:
    assert _resolve().stage_layer_counts == (8,) * 14 + (7, 7)  # uneven: front-loaded
    meta = _resolve(first_stage_layers=7, last_stage_layers=7)
    assert meta.stage_layer_counts == (7,) + (8,) * 14 + (7,)
    emb = _resolve(account_for_embedding_loss=True, vp=8)
    assert emb.stage_layer_counts == meta.stage_layer_counts
    assert sum(emb.stage_layer_counts) == 126


@pytest.mark.parametrize(("kw", "match"), [
    ({"vp": 8}, r"account-for-embedding-loss: 128"),
    ({"first_stage_layers": 5, "last_stage_layers": 7}, r"first = last = 7"),
    ({"first_stage_layers": 7, "last_stage_layers": 7, "vp": 2},
     r"divide by vp=2"),
    ({"account_for_embedding_loss": True, "vp": 3}, r"128 must divide by pp·vp"),
    ({"recompute_layers": 2}, r"needs recompute='full'"),
    ({"recompute": "full", "recompute_layers": 9}, r"more than the 8 layers .* at most 8"),
    ({"tp": 1, "dp": 512, "tp_comm_overlap": True}, r"tp_comm_overlap needs tp > 1"),
    ({"ep_overlap": True}, r"ep_overlap needs ep > 1"),
    ({"moe_node_limit": 4}, r"moe_node_limit .* drop --moe-node-limit"),
    ({"fp8_recipe": "blockwise"}, r"applies only to FP8 training .* add --fp8"),
])
def test_layouts_that_do_not_apply_name_the_flag_and_fix(kw: dict[str, object],
                                                         match: str) -> None:
    with pytest.raises(ModelError, match=match):
        _resolve(**kw)


def test_meta_llama3_405b_layout_fits_and_the_plain_one_says_how() -> None:
    """Llama 3's paper: FSDP as the data-parallel dimension and one layer fewer on the
    first and last stages. That fits 80 GiB; the same sizes with ZeRO-1 and an even split
    do not, and the error names the changes that fit."""
    meta = _resolve(zero="fsdp", first_stage_layers=7, last_stage_layers=7)
    assert memory_per_gpu(L405, meta).total < 80 * GIB  # type: ignore[arg-type]
    plain = _resolve()
    assert memory_per_gpu(L405, plain).total > 80 * GIB  # type: ignore[arg-type]
    fix = cheapest_fit(L405, plain, 80 * GIB)  # type: ignore[arg-type]
    assert fix.startswith("--zero fsdp") and "--recompute-layers" in fix


def test_block_recompute_trades_memory_for_compute() -> None:
    mems, hfus = [], []
    fab = fs.build_cluster("dgx-h100", 2)
    m = get_model("llama2-70b")
    for n in (1, 4, 10, None):
        cfg = ParallelConfig(tp=8, pp=2, global_batch=32, seq_len=4096,
                             recompute="full", recompute_layers=n)
        r = simulate_step(m, cfg, fab, check_memory=False)
        mems.append(r.memory.activations)
        hfus.append(r.hw_tflops_per_gpu / r.tflops_per_gpu)
    assert mems == sorted(mems, reverse=True)   # more recomputed layers, less memory
    assert hfus == sorted(hfus)                 # ... and more hardware FLOPs
    assert hfus[-1] == pytest.approx(4 / 3, rel=0.02)  # full: one more forward


def test_overlap_flags_move_time_between_exposed_and_hidden() -> None:
    fab = fs.build_cluster("dgx-h100", 4)
    m = get_model("llama2-70b")
    base = ParallelConfig(tp=8, pp=2, global_batch=64, seq_len=4096, recompute="selective")
    plain = simulate_step(m, base, fab, check_memory=False)
    tpo = simulate_step(m, base.model_copy(update={"tp_comm_overlap": True}), fab,
                        check_memory=False)
    assert tpo.breakdown["tp"] < 0.5 * plain.breakdown["tp"]
    assert tpo.comm_total_s["tp"] == pytest.approx(plain.comm_total_s["tp"])
    no_dp = simulate_step(m, base.model_copy(update={"overlap_grad_reduce": False,
                                                      "overlap_param_gather": False}),
                          fab, check_memory=False)
    assert no_dp.breakdown["dp"] > plain.breakdown["dp"]
    assert no_dp.breakdown["dp"] == pytest.approx(plain.comm_total_s["dp"])


def test_a_lighter_last_stage_absorbs_the_output_head() -> None:
    """The last stage also runs the output head and the loss: with 7 layers it paces like
    the 8-layer stages (Meta's reason for trimming it); with 8 it is the slowest."""
    from fabricsim.catalog import get_catalog
    from fabricsim.workloads.training.compute import microbatch_compute

    gpu = get_catalog().gpu("h100-sxm")
    light = _resolve(first_stage_layers=7, last_stage_layers=7)
    heavy = _resolve(first_stage_layers=6, last_stage_layers=8)
    t_light = microbatch_compute(L405, light, gpu, 1.0)  # type: ignore[arg-type]
    t_heavy = microbatch_compute(L405, heavy, gpu, 1.0)  # type: ignore[arg-type]
    assert t_heavy.fwd > t_light.fwd
    assert t_light.fwd == pytest.approx(8 * t_light.layer_fwd, rel=0.05)


def test_moe_dispatch_precision_node_limit_and_overlap() -> None:
    """DeepSeek-V3's three all-to-all savings, each visible on its own: FP8 dispatch,
    node-limited routing (one network copy per server) and DualPipe-style overlap."""
    fab = fs.build_cluster("dgx-h800", 32, fabric="ib-ndr")
    m = get_model("deepseek-v3")
    base = ParallelConfig(pp=4, ep=64, micro_batch=1, global_batch=64, seq_len=4096,
                          recompute="full")

    def ep(**kw: object) -> float:
        cfg = base.model_copy(update=kw)
        return simulate_step(m, cfg, fab, check_memory=False).breakdown["ep"]

    plain = ep()
    assert ep(precision="fp8") < plain                     # dispatch bytes halved
    assert ep(moe_node_limit=4) < 0.75 * plain            # 8 copies -> at most 4
    assert ep(ep_overlap=True) < plain
    with pytest.raises(ModelError, match="ep_overlap needs ep > 1"):
        ParallelConfig(ep_overlap=True).resolve(get_model("llama3-8b"), 8)


def test_mx_scaling_needs_blackwell() -> None:
    """MXFP8's block scales are a Blackwell tensor-core format: on Hopper the recipe is an
    error naming the recipes that run there; on B200 it runs."""
    m = get_model("llama3-8b")
    cfg = ParallelConfig(global_batch=16, seq_len=8192, precision="fp8",
                         fp8_recipe="mxfp8")
    with pytest.raises(ModelError, match=r"Blackwell .* tensorwise") as e:
        simulate_step(m, cfg, fs.build_cluster("dgx-h100", 1), check_memory=False)
    assert e.value.field == "training.fp8_recipe"
    r = simulate_step(m, cfg, fs.build_cluster("hgx-b200", 1), check_memory=False)
    assert r.step_time_s > 0


def test_expert_tensor_parallel_folds_the_moe_layers() -> None:
    """Megatron-Core's MoE parallel folding (--expert-tensor-parallel-size): with etp = 1
    at tp = 2 an EP group of 64 is 64 consecutive GPUs (8 servers, not 16), every GPU
    holds whole experts (twice the expert weights of etp = tp) sharded for the optimizer
    over twice as many expert-data-parallel ranks, the expert FLOPs per GPU are the same,
    and fewer servers per token make the all-to-all cheaper."""
    ds = get_model("deepseek-v3")
    fab = fs.build_cluster("dgx-h100", 128)
    base = {"tp": 2, "pp": 8, "ep": 64, "global_batch": 1024, "seq_len": 4096,
            "precision": "fp8", "moe_dispatcher": "deepep",
            "pipeline_layout": "Et|(tt|)*30mL"}
    folded = ParallelConfig(**base, etp=1).resolve(ds, 1024)  # type: ignore[arg-type]
    split = ParallelConfig(**base).resolve(ds, 1024)  # type: ignore[arg-type]
    assert split.etp == 2 and folded.etp == 1
    assert {r // 8 for r in folded.group("ep")} == set(range(8))
    assert {r // 8 for r in split.group("ep")} == set(range(16))
    assert (folded.edp, split.edp) == (2, 1)
    mf, ms = memory_per_gpu(ds, folded), memory_per_gpu(ds, split)
    assert mf.weights > ms.weights
    assert mf.optimizer == pytest.approx(ms.optimizer, rel=1e-9)
    rf = simulate_step(ds, ParallelConfig(**base, etp=1), fab,  # type: ignore[arg-type]
                       check_memory=False)
    rs = simulate_step(ds, ParallelConfig(**base), fab,  # type: ignore[arg-type]
                       check_memory=False)
    assert rf.hw_tflops_per_gpu * rf.step_time_s == pytest.approx(
        rs.hw_tflops_per_gpu * rs.step_time_s, rel=1e-9)  # same FLOPs per GPU
    assert rf.comm_total_s["ep"] < 0.9 * rs.comm_total_s["ep"]
    assert rf.parallel["etp"] == 1 and rs.parallel["etp"] == 2


@pytest.mark.parametrize(("model", "kw", "match"), [
    ("llama3-8b", {"etp": 1}, r"etp .* dense: drop --etp"),
    ("mixtral-8x7b", {"tp": 2, "ep": 8, "etp": 1, "dp": 2}, r"etp·ep = 1·8 = 8 must "
     r"divide tp·cp·dp = 4"),
    ("mixtral-8x7b", {"tp": 2, "ep": 8, "dp": 4}, r"ep=8 must divide dp·cp = 4 .*--etp 1"),
])
def test_expert_tensor_parallel_sizes_that_do_not_fold_say_why(
        model: str, kw: dict[str, object], match: str) -> None:
    with pytest.raises(ModelError, match=match):
        world = int(kw.get("tp", 1)) * int(kw.get("dp", 1))  # type: ignore[call-overload]
        ParallelConfig(**kw).resolve(get_model(model), world)  # type: ignore[arg-type]


def test_expert_folding_moves_only_the_expert_weights() -> None:
    """The dense part of a stage is split over tp whatever etp is; only the experts move
    (a review found the default etp = tp counting most experts again as dense weights,
    Mixtral at tp 2: 12.1 B dense parameters per GPU instead of 0.8 B)."""
    from fabricsim.workloads.training.memory import stage_params
    m = get_model("mixtral-8x7b")
    base = {"tp": 2, "ep": 8, "global_batch": 64, "seq_len": 4096}
    split = ParallelConfig(**base).resolve(m, 64)  # type: ignore[arg-type]
    folded = ParallelConfig(**base, etp=1).resolve(m, 64)  # type: ignore[arg-type]
    (d_s, e_s), (d_f, e_f) = stage_params(m, split), stage_params(m, folded)
    assert d_s == pytest.approx(d_f, rel=1e-12) and d_s < 1e9
    assert e_f == pytest.approx(2 * e_s, rel=1e-12)


def test_folded_experts_leave_moe_layers_only_the_attention_tp_traffic() -> None:
    fab = fs.build_cluster("dgx-h100", 8)
    m = get_model("mixtral-8x7b")
    base = {"tp": 2, "ep": 8, "global_batch": 64, "seq_len": 4096}
    split = simulate_step(m, ParallelConfig(**base), fab,  # type: ignore[arg-type]
                          check_memory=False)
    folded = simulate_step(m, ParallelConfig(**base, etp=1), fab,  # type: ignore[arg-type]
                           check_memory=False)
    # every Mixtral layer is MoE: one collective pair per layer instead of two
    assert folded.comm_total_s["tp"] == pytest.approx(split.comm_total_s["tp"] / 2,
                                                      rel=1e-9)


def test_split_errors_say_what_would_divide() -> None:
    """A VP that does not divide the layers lists the ones that do; a sequence that does
    not split over SP's TP ranks says sequence parallelism is why."""
    from fabricsim.errors import ModelError
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig

    m = get_model("llama3-70b")
    with pytest.raises(ModelError, match=r"vp one of 1, 2, 4, 5, 10, 20"):
        ParallelConfig(tp=8, pp=4, vp=3).resolve(m, 32)
    with pytest.raises(ModelError, match=r"sequence parallelism splits.*--no-sequence-"
                                         r"parallel") as e:
        ParallelConfig(tp=8, seq_len=8196).resolve(m, 8)
    assert e.value.field == "training.seq_len"
    with pytest.raises(ModelError, match=r"divisible by cp = 2: context parallelism"):
        ParallelConfig(tp=4, cp=2, seq_len=8193, sequence_parallel=False).resolve(m, 8)
    ParallelConfig(tp=8, seq_len=8196, sequence_parallel=False).resolve(m, 8)  # fine


def test_no_vp_divides_says_so() -> None:
    from fabricsim.errors import ModelError
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig

    with pytest.raises(ModelError, match="no vp divides: 80 layers do not split into 3"):
        ParallelConfig(tp=8, pp=3, vp=2, global_batch=24).resolve(
            get_model("llama3-70b"), 24)
