"""Megatron-style pipeline layouts (``pipeline_layout``) and hierarchical MoE dispatch
(``moe_dispatcher="deepep"``): DeepSeek-V3's 61 layers as NeMo splits them, and a token
crossing the network once per server its experts sit on."""

from __future__ import annotations

import itertools
import math

import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError, ModelError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.compute import microbatch_compute
from fabricsim.workloads.training.megatron import parse_megatron_args
from fabricsim.workloads.training.parallel import ParallelConfig, parse_pipeline_layout
from fabricsim.workloads.training.step import distinct_servers, routed_servers, simulate_step

DS = get_model("deepseek-v3")


@pytest.mark.parametrize(("layout", "pp", "vp", "counts", "mtp"), [
    # NeMo's DeepSeek-V3 layouts (Megatron-Bridge recipe): 16 and 32 virtual stages
    ("Et*4|(t*4|)*14tmL", 16, 1, (4,) * 15 + (1,), (0,) * 15 + (1,)),
    ("Et*4|(t*4|)*14tmL", 4, 4, (16, 16, 16, 13), (0, 0, 0, 1)),
    ("Et*4|(t*4|)*14tmL", 8, 2, (8,) * 7 + (5,), (0,) * 7 + (1,)),
    ("Et|(tt|)*30mL", 8, 4, (7, 8, 8, 8, 8, 8, 8, 6), (0,) * 7 + (1,)),
    # Megatron's own example (its docs' table): commas ignored, MTP alone in stage 30
    # (rank 14's second chunk), the loss alone in stage 31 (rank 15's)
    ("Et*3|(tt|)*29,m|L", 16, 2, (5,) + (4,) * 13 + (2, 2), (0,) * 14 + (1, 0)),
])
def test_layouts_place_every_layer_on_its_rank(layout: str, pp: int, vp: int,
                                               counts: tuple[int, ...],
                                               mtp: tuple[int, ...]) -> None:
    got = parse_pipeline_layout(layout, pp, vp, 61)
    assert got == (counts, mtp)
    assert sum(got[0]) == 61
    p = ParallelConfig(pp=pp, vp=vp, ep=8, pipeline_layout=layout).resolve(
        DS, world=pp * 8)
    assert p.stage_layer_counts == counts and p.stage_layers == max(counts)


@pytest.mark.parametrize(("layout", "pp", "vp", "msg"), [
    ("Et*4|(t*4|)*14tmL", 8, 4, "has 16 stages but pp·vp = 8·4 = 32"),
    ("Et*4|(t*4|)*14mL", 16, 1, "places 60 decoder layers"),
    ("t*4|E(t*4|)*14tmL", 16, 1, "embedding (E) goes once, at the start"),
    ("Et*4|(t*4|)*14tLm", 16, 1, "loss (L) goes once, at the end"),
    ("Et*4|(t*4|)*14tmX", 16, 1, "unknown symbols 'X'"),
    ("(t*9999|)*99999", 16, 1, "expands past 100,000 symbols"),
    ("Et*61||", 3, 1, "pipeline rank 1 gets no decoder layer"),
])
def test_bad_layouts_say_what_is_wrong(layout: str, pp: int, vp: int, msg: str) -> None:
    with pytest.raises(ModelError, match=r"training\.pipeline_layout") as e:
        ParallelConfig(pp=pp, vp=vp, ep=8, pipeline_layout=layout).resolve(
            DS, world=pp * 8)
    assert msg in str(e.value)


def test_layout_sets_vp_and_refuses_other_split_options() -> None:
    cfg = ParallelConfig(pp=8, ep=8, pipeline_layout="Et|(tt|)*30mL")
    assert cfg.vp == 4  # 32 stages over pp 8, as Megatron derives it
    with pytest.raises(ModelError, match="not both"):
        ParallelConfig(pp=8, ep=8, pipeline_layout="Et|(tt|)*30mL",
                       first_stage_layers=7).resolve(DS, world=64)


def test_mtp_layer_costs_one_more_block_and_head() -> None:
    """The last stage of ``Et*4|(t*4|)*14tmL`` at pp 16 holds 1 layer, the MTP layer and
    the loss: lighter than the 4-layer stages, so they set the pace; moved onto a 4-layer
    stage the MTP layer makes that stage the slowest."""
    gpu = fs.get_catalog().gpu("b200")
    light = ParallelConfig(pp=16, ep=8, pipeline_layout="Et*4|(t*4|)*14tmL").resolve(
        DS, world=128)
    heavy = ParallelConfig(pp=16, ep=8, pipeline_layout="Et*4|(t*4|)*13t*4m|t*1L"
                           ).resolve(DS, world=128)
    t_l = microbatch_compute(DS, light, gpu, 1.0)
    t_h = microbatch_compute(DS, heavy, gpu, 1.0)
    assert t_l.fwd == pytest.approx(4 * t_l.layer_fwd, rel=0.02)
    assert t_h.fwd > 1.2 * t_l.fwd


def _brute_distinct(experts: int, k: int, servers: int) -> float:
    per = experts // servers
    hits = [len({e // per for e in pick})
            for pick in itertools.combinations(range(experts), k)]
    return sum(hits) / len(hits)


@pytest.mark.parametrize(("experts", "k", "servers"), [
    (8, 2, 2), (16, 4, 4), (12, 3, 3), (16, 8, 2), (10, 1, 5), (16, 5, 8)])
def test_distinct_servers_matches_enumeration(experts: int, k: int, servers: int) -> None:
    assert distinct_servers(experts, k, servers) == pytest.approx(
        _brute_distinct(experts, k, servers), rel=1e-12)


def test_distinct_servers_bounds() -> None:
    assert distinct_servers(256, 8, 1) == 1.0
    assert distinct_servers(256, 8, 64) < 8  # some experts share a server
    assert distinct_servers(256, 8, 8, node_limit=4) <= 4
    assert math.isclose(distinct_servers(256, 1, 16), 1.0)


def test_deepep_dispatch_cuts_network_copies_across_servers() -> None:
    """EP 32 over four B200 servers: one copy per destination server (3.6 of 8) instead
    of one per expert, so the all-to-all time drops by about that ratio; inside one
    server (EP 8) every copy rides NVLink either way, and DeepEP's intranode kernel
    (one copy per destination GPU, its own fixed cost) lands within 12 % of NCCL's (10.6 %
    since NVLink 5's Simple share refitted 0.90 -> 0.88 and DeepEP's fixed cost 166 -> 157
    us, both fits on published rows; 9 % before)."""
    fab = fs.build_cluster("hgx-b200", 8, fabric="ib-ndr")
    base = ParallelConfig(pp=2, ep=32, micro_batch=1, global_batch=64, seq_len=4096,
                          precision="fp8")

    def ep(**kw: object) -> float:
        return simulate_step(DS, base.model_copy(update=kw), fab,
                             check_memory=False).breakdown["ep"]

    plain, deep = ep(), ep(moe_dispatcher="deepep")
    assert 0.3 * plain < deep < 0.6 * plain
    assert ep(ep=8) == pytest.approx(ep(ep=8, moe_dispatcher="deepep"), rel=0.12)
    assert ep(ep=8) != ep(ep=8, moe_dispatcher="deepep")  # the kernel's own schedule
    with pytest.raises(ModelError, match=r"training\.moe_dispatcher"):
        ParallelConfig(moe_dispatcher="deepep").resolve(get_model("llama3-8b"), 8)


def test_megatron_args_carry_layout_and_dispatcher() -> None:
    s, ignored = parse_megatron_args(
        "--pipeline-model-parallel-size 8 --pipeline-model-parallel-layout "
        "'Et|(tt|)*30mL' --moe-token-dispatcher-type flex "
        "--moe-flex-dispatcher-backend hybridep --overlap-moe-expert-parallel-comm")
    assert s["pipeline_layout"] == "Et|(tt|)*30mL"
    assert s["moe_dispatcher"] == "hybridep" and s["ep_overlap"] is True
    s, _ = parse_megatron_args("--moe-token-dispatcher-type flex")
    assert s["moe_dispatcher"] == "deepep"
    assert not ignored
    assert "moe_dispatcher" not in parse_megatron_args(
        "--moe-token-dispatcher-type alltoall")[0]
    with pytest.raises(ConfigError, match="alltoall, allgather or flex"):
        parse_megatron_args("--moe-token-dispatcher-type ring")


def test_tied_embedding_gradient_crosses_between_end_stages() -> None:
    """BLOOM/GPT-3 style tied embeddings under PP: the first and last stage all-reduce the
    shared matrix's gradient after the DP sync, exposed; untied or pp 1: nothing."""
    fab = fs.build_cluster("dgx-a100", 4, fabric="ib-hdr")
    tied = get_model("mpt-7b")
    untied = tied.model_copy(update={"tied_embeddings": False})
    cfg = ParallelConfig(tp=8, pp=4, micro_batch=1, global_batch=32, seq_len=2048)

    def dp(m: object, c: ParallelConfig = cfg) -> float:
        return simulate_step(m, c, fab, check_memory=False).breakdown["dp"]  # type: ignore[arg-type]

    extra = dp(tied) - dp(untied)
    # vocab x hidden / tp in BF16 between two servers: 50,368 x 4,096 / 8 x 2 B = 52 MB
    assert 52e6 / 25e9 < extra < 52e6 / 5e9
    flat = cfg.model_copy(update={"pp": 1, "dp": 4})
    assert dp(tied, flat) < dp(untied, flat)  # one matrix fewer to sync, nothing more


def test_recompute_modules_cost_time_and_free_memory() -> None:
    """Megatron-Core's --recompute-modules: ``selective`` alone is ``core_attn``; each
    module adds its forward time once more and frees the activations it would keep."""
    fab = fs.build_cluster("dgx-h100", 2, fabric="ib-ndr")
    m = get_model("llama3-8b")
    base = ParallelConfig(tp=2, micro_batch=1, global_batch=64, seq_len=8192,
                          recompute="selective")

    def run(**kw: object) -> object:
        return simulate_step(m, base.model_copy(update=kw), fab, check_memory=False)

    plain, attn = run(), run(recompute_modules=("core_attn",))
    assert plain.step_time_s == attn.step_time_s  # type: ignore[attr-defined]
    mlp = run(recompute_modules=("core_attn", "mlp"))
    assert mlp.step_time_s > 1.05 * plain.step_time_s  # type: ignore[attr-defined]
    assert mlp.memory.activations < 0.8 * plain.memory.activations  # type: ignore[attr-defined]
    assert mlp.hfu > mlp.mfu  # type: ignore[attr-defined]
    norm = run(recompute_modules=("layernorm",))
    assert norm.memory.activations < plain.memory.activations  # type: ignore[attr-defined]
    assert norm.step_time_s < plain.step_time_s  # type: ignore[attr-defined]  # no attn rerun
    assert mlp.parallel["recompute_modules"] == ["core_attn", "mlp"]  # type: ignore[attr-defined]


def test_recompute_moe_block_repeats_its_all_to_all() -> None:
    fab = fs.build_cluster("hgx-b200", 8, fabric="ib-ndr")
    base = ParallelConfig(pp=2, ep=32, micro_batch=1, global_batch=64, seq_len=4096,
                          precision="fp8", recompute="selective",
                          pipeline_layout="Et*30|t*31mL")

    def tot(**kw: object) -> dict[str, float]:
        r = simulate_step(DS, base.model_copy(update=kw), fab, check_memory=False)
        return {**r.comm_total_s, "compute": r.breakdown["compute"]}

    attn, moe = tot(), tot(recompute_modules=("moe",))
    assert moe["ep"] == pytest.approx(attn["ep"] * 1.5)  # forward, backward + forward again
    up = tot(recompute_modules=("core_attn", "mla_up_proj"))
    assert up["compute"] > attn["compute"]
    with pytest.raises(ModelError, match=r"mla_up_proj needs multi-head latent"):
        ParallelConfig(recompute="selective", recompute_modules=("mla_up_proj",)).resolve(
            get_model("llama3-8b"), 8)
    with pytest.raises(ModelError, match=r"needs recompute='selective'"):
        ParallelConfig(recompute_modules=("mlp",)).resolve(get_model("llama3-8b"), 8)


def test_megatron_recompute_modules_take_several_words() -> None:
    s, ignored = parse_megatron_args("--recompute-granularity selective --recompute-modules "
                                     "mla_up_proj mlp --micro-batch-size 1")
    assert s["recompute_modules"] == ["mla_up_proj", "mlp"] and s["micro_batch"] == 1
    assert not ignored


def _brute_grouped(experts: int, k: int, groups: int, pick: int,
                   ep_servers: list[int]) -> float:
    """Every choice of ``pick`` groups, then every choice of ``k`` of their experts."""
    per_group, per_rank = experts // groups, experts // len(ep_servers)
    hits = []
    for chosen in itertools.combinations(range(groups), pick):
        pool = [e for e in range(experts) if e // per_group in chosen]
        hits.append(sum(len({ep_servers[e // per_rank] for e in ks})
                        for ks in itertools.combinations(pool, k))
                    / math.comb(len(pool), k))
    return sum(hits) / len(hits)


@pytest.mark.parametrize(("experts", "k", "groups", "pick", "ep_servers"), [
    (16, 3, 4, 2, [0, 0, 1, 1, 2, 2, 3, 3]),   # a group per server
    (16, 3, 4, 2, [0, 1, 2, 3, 4, 5, 6, 7]),   # a group spans two servers
    (16, 4, 8, 3, [0, 0, 0, 0, 1, 1, 1, 1]),   # four groups per server
    (12, 2, 3, 1, [0, 1, 2, 0, 1, 2]),         # strided ranks: groups span 2 servers
    (16, 2, 4, 3, [0, 0, 1, 1, 1, 1, 2, 2]),   # uneven spans
])
def test_group_limited_routing_matches_enumeration(experts: int, k: int, groups: int,
                                                   pick: int, ep_servers: list[int]) -> None:
    m = get_model("deepseek-v3").model_copy(update={
        "experts": experts, "top_k": k, "router_groups": groups,
        "router_group_topk": pick})
    assert routed_servers(m, ep_servers) == pytest.approx(
        _brute_grouped(experts, k, groups, pick, ep_servers), rel=1e-12)
    # a group limit never reaches more servers than none
    free = m.model_copy(update={"router_groups": 1})
    assert routed_servers(m, ep_servers) <= routed_servers(free, ep_servers) + 1e-12


def test_deepseek_groups_are_its_node_limit_on_eight_servers() -> None:
    ds = get_model("deepseek-v3")
    eight = [j // 8 for j in range(64)]
    assert routed_servers(ds, eight) == pytest.approx(
        distinct_servers(256, 8, 8, node_limit=4), rel=1e-12)
    assert routed_servers(ds, eight, node_limit=2) == distinct_servers(256, 8, 8, 2)


def test_many_group_choices_fall_back_to_the_groups_servers_as_a_limit() -> None:
    """C(32, 16) group choices are too many to average over: the chosen groups' servers
    stand in as a node limit (16 groups of one server each: at most 16 servers)."""
    m = get_model("deepseek-v3").model_copy(update={"router_groups": 32,
                                                    "router_group_topk": 16})
    ranks = [j // 2 for j in range(64)]  # 32 servers, one group each
    got = routed_servers(m, ranks)
    assert got == distinct_servers(256, 8, 32, node_limit=16)
    assert got <= routed_servers(m.model_copy(update={"router_groups": 1}), ranks)


@pytest.mark.parametrize(("upd", "match"), [
    ({"router_groups": 7, "router_group_topk": 2}, "must divide experts"),
    ({"router_groups": 8, "router_group_topk": 9}, "must be <= router_groups"),
    ({"router_groups": 64, "router_group_topk": 1}, "do not fit"),
])
def test_group_limits_that_cannot_route_are_rejected(upd: dict[str, int], match: str) -> None:
    from fabricsim.workloads.models import TransformerSpec
    base = get_model("deepseek-v3").model_dump()
    with pytest.raises(ConfigError, match=match):
        TransformerSpec(**{**base, **upd})


@pytest.mark.parametrize(("old", "value", "new", "read"), [
    ("interleave", 5, "vp", 5), ("pipeline_schedule", "dualpipe", "pp_schedule", "dualpipe"),
    ("grad_bytes", 4, "grad_reduce_dtype", "fp32")])
def test_old_field_names_are_read_with_a_warning(old: str, value: object, new: str,
                                                 read: object) -> None:
    """The YAML field names are the CLI's (vp, pp_schedule, grad_reduce_dtype); the old
    ones are still read, under the new name, and said to be old."""
    from fabricsim.errors import DeprecatedName

    with pytest.warns(DeprecatedName, match=f"training.{old} is the old name of "
                      f"training.{new}"):
        cfg = ParallelConfig.model_validate({old: value})
    assert getattr(cfg, new) == read


def test_a_field_under_its_old_and_new_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="one field") as e:
        ParallelConfig.model_validate({"interleave": 2, "vp": 2})
    assert e.value.field == "training.interleave"
