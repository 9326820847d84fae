"""What web jobs compute, and the figures drawn from it."""

from __future__ import annotations

import json

import pytest
from web_designs import SMALL, TRAIN

from fabricsim.errors import ConfigError
from fabricsim.scenario.loader import shipped_scenarios
from fabricsim.web.jobs import parse_design, run_job, topology_view
from fabricsim.web.limits import Limits

LIM = Limits()


def _check_figure(fig: dict, series: int | None = None) -> None:
    lay = fig["layout"]
    assert lay["title"]["text"], "every chart has a title"
    if lay["xaxis"].get("visible", True):
        assert lay["xaxis"]["title"]["text"] or lay["yaxis"]["title"]["text"]
    if series is not None:
        assert len(fig["data"]) == series


def test_bench_curves_per_algorithm_and_the_tuners_choice() -> None:
    out = run_job("bench", [SMALL], limits=LIM)
    b = out["designs"][0]["bench"]
    names = [c["name"] for c in b["curves"]]
    assert names[0] == "auto" and "ring" in names and "nvlstree" in names
    assert "sharp" in b["skipped"]  # not on this fabric, and said why
    from fabricsim.collectives import ALGORITHMS

    auto = b["curves"][0]
    # the tuner makes NCCL's choice among the algorithms it may pick on two servers: at
    # every size the auto curve is one of their curves (the one NCCL's model ranks first)
    pickable = [c for c in b["curves"][1:]
                if ALGORITHMS[c["name"]].auto and ALGORITHMS[c["name"]].auto_min_servers <= 2
                and not 0 < ALGORITHMS[c["name"]].auto_max_servers < 2]
    assert pickable
    for i, a in enumerate(auto["busbw_gbps"]):
        assert any(abs(a - c["busbw_gbps"][i]) <= 1e-6 * max(a, 1e-9) for c in pickable), i
    assert len(auto["sizes"]) == 21  # the CLI's sweep: 1 KiB to 1 GiB by 2
    fig = out["figures"]["busbw"]
    _check_figure(fig, series=len(names))
    assert fig["layout"]["xaxis"]["type"] == "log"
    # the tuner's curve carries bench's held-out band as error bars, and says it on hover
    tuner = fig["data"][0]
    assert tuner["error_y"]["array"] == pytest.approx(
        [y * e for y, e in zip(auto["busbw_gbps"], auto["band"], strict=True)])
    big = auto["sizes"].index(2**30)
    assert tuner["customdata"][big].startswith(f"{auto['choice'][big]}, ± "
                                               f"{auto['band'][big] * 100:.0f} %")
    assert all("error_y" not in t for t in fig["data"][1:])
    _check_figure(out["figures"]["time"], series=len(names))
    json.dumps(out, allow_nan=False)


def test_two_designs_are_compared_series_by_series() -> None:
    roce = SMALL.replace("ib-ndr", "roce-400g")
    out = run_job("train", [TRAIN, TRAIN.replace("ib-ndr", "roce-400g")], limits=LIM)
    a, b = out["designs"]
    assert a["cluster"]["summary"]["fabric"] == "ib-ndr"
    assert b["cluster"]["summary"]["fabric"] == "roce-400g"
    fig = out["figures"]["breakdown"]
    _check_figure(fig)
    assert all(len(t["y"]) == 2 for t in fig["data"])
    total = [sum(t["y"][i] for t in fig["data"]) for i in range(2)]
    for i, d in enumerate((a, b)):  # the stack adds up to the step
        assert total[i] == pytest.approx(sum(d["train"]["breakdown"].values()), rel=1e-9)
    assert {"topology", "topology_b", "hierarchy"} <= set(out["figures"])
    assert run_job("describe", [SMALL, roce])["figures"]["hierarchy"]["data"][1]["name"] \
        == "B: roce-400g"


def test_train_splits_nvlink_from_scale_out() -> None:
    t = run_job("train", [TRAIN])["designs"][0]["train"]
    assert t["nvlink_kinds"] == ["cp", "tp"]  # TP 8 inside one server
    comm = sum(v for k, v in t["breakdown"].items()
               if k not in ("compute", "bubble", "optimizer"))
    assert t["exposed_nvlink_s"] + t["exposed_scale_out_s"] == pytest.approx(comm)
    assert t["exposed_nvlink_s"] > 0 and 0 < t["mfu"] < 1


def test_scale_and_plan() -> None:
    big = TRAIN.replace("nodes: 2", "nodes: 16")
    s = run_job("scale", [big])
    pts = s["designs"][0]["scale"]["points"]
    assert [p["gpus"] for p in pts] == [16, 32, 64, 128]
    _check_figure(s["figures"]["scaling"], series=1)
    p = run_job("plan", [TRAIN])
    fabrics = [o["fabric"] for o in p["designs"][0]["plan"]["fabrics"]]
    assert fabrics == ["ib-ndr", "roce-400g", "efa"]  # as fabricsim plan compares them
    cost = p["figures"]["plan_cost"]["data"][0]["y"]
    assert all(c is not None and c > 0 for c in cost)


def test_simulate_names_the_faulty_link_among_the_bottlenecks() -> None:
    out = run_job("simulate", [shipped_scenarios()["flow-degraded-link"]])
    s = out["designs"][0]["simulate"]
    assert s["slowdown"] > 1.5
    assert s["bottlenecks"][0]["fault"] is not None  # the degraded link limits the run
    fig = out["figures"]["bottlenecks"]
    assert "#d62728" in fig["data"][0]["marker"]["color"]


def test_packet_job_reports_pause_spread() -> None:
    text = shipped_scenarios()["packet-incast-dcqcn"]
    out = run_job("packet", [text])
    runs = out["designs"][0]["packet"]["runs"]
    assert runs[0]["variant"] == "base" and runs[0]["pause"]["ports_paused"] > 0
    assert len(runs) == 3  # the base and both variants, as fabricsim packet runs them
    _check_figure(out["figures"]["pause_spread"], series=3)
    with pytest.raises(ConfigError, match="runs at most 1") as e:  # never cut short silently
        run_job("packet", [text], limits=Limits(max_variants=1))
    assert e.value.field == "packet.variants"


def test_topology_view_of_a_rail_fabric() -> None:
    import fabricsim as fs

    v = topology_view(fs.build_cluster("dgx-h100", nodes=32), max_drawn=16)
    servers = v["tiers"][0]
    assert servers["count"] == 32 and len(servers["drawn"]) == 16
    rails = {e["rail"] for e in v["edges"] if e["from"][0] == 0}
    assert rails == set(range(8))
    # a rail-optimized leaf serves one rail: each drawn leaf sees one rail only
    per_leaf: dict[int, set[int]] = {}
    for e in v["edges"]:
        if e["from"][0] == 0:
            per_leaf.setdefault(e["to"][1], set()).add(e["rail"])
    assert all(len(r) == 1 for r in per_leaf.values())


@pytest.mark.parametrize(("kind", "text", "field", "words"), [
    ("simulate", "cluster: {nodes: 1000}", "cluster.nodes", "limited to 1024 GPUs"),
    ("train", SMALL, "training", "needs a training: section"),
    ("packet", SMALL, "packet", "has no packet: section"),
    ("simulate", SMALL, "faults", "add a faults: or background: section"),
    ("bench", "cluster: {nodes: 0}", "cluster.nodes (line 1)", "greater than or equal"),
    ("bench", "cluster:\n  system: dgx-h1000\n", None, "did you mean"),
])
def test_bad_designs_name_the_field_and_the_fix(kind: str, text: str, field: str | None,
                                                 words: str) -> None:
    with pytest.raises(ConfigError) as e:
        sc = parse_design(text, kind, Limits())
        from fabricsim.jobs.check import check_sections

        check_sections(sc)
    assert words in str(e.value)
    if field is not None:
        assert e.value.field == field


def test_scenario_over_the_size_limit() -> None:
    with pytest.raises(ConfigError, match="web limit is 100"):
        parse_design("# " + "x" * 200 + "\ncluster: {}", "bench", Limits(max_scenario_bytes=100))


def test_jsonable_keeps_nesting() -> None:
    import numpy as np

    from fabricsim.results import jsonable

    out = jsonable({"a": [np.float32(1.5), float("inf")], "b": np.arange(2), 3: (None,)})
    assert out == {"a": [1.5, None], "b": [0, 1], "3": [None]}


def test_train_prices_and_counts_failures_as_the_cli_does() -> None:
    """The scenario's top-level gpu_hour_usd prices the job (the web used $2.50), and
    the goodput comes with what it is made of."""
    from fabricsim.scenario import load_scenario_text
    from fabricsim.scenario.fabric import fabric_from_scenario
    from fabricsim.workloads.training.goodput import goodput_on_fabric
    from fabricsim.workloads.training.parallel import ParallelConfig
    from fabricsim.workloads.training.step import simulate_step

    text = "gpu_hour_usd: 10\n" + TRAIN
    t = run_job("train", [text])["designs"][0]["train"]
    sc = load_scenario_text(text)
    assert sc.training is not None
    m = sc.training.build_model("llama3-8b", "training")
    cfg = ParallelConfig.model_validate(sc.training.parallel().model_dump())
    fab = fabric_from_scenario(sc)
    r = simulate_step(m, cfg, fab, gpu_hour_usd=10.0)
    gp = goodput_on_fabric(fab, params=m.params, step_time_s=r.step_time_s, gpu_hour_usd=10.0)
    assert t["gpu_hour_usd"] == 10.0
    assert t["comm_usd_per_day"] == pytest.approx(r.comm_usd_per_day)
    assert t["goodput"]["usd_lost_per_day"] == pytest.approx(gp.usd_lost_per_day)
    assert t["goodput"]["usd_lost_per_day"] > 0
    assert t["goodput"]["job_mtbf_hours"] == pytest.approx(gp.job_mtbf_hours)
    assert t["goodput"]["failures_per_day"] > 0 and t["goodput"]["checkpoint_interval_s"] > 0
    p = run_job("plan", [text])["designs"][0]["plan"]["fabrics"][0]
    assert p["gpu_usd_per_hour"] == pytest.approx(10.0 * 16)  # 16 GPUs at $10


def test_scale_and_plan_build_the_scenarios_own_servers() -> None:
    """User-defined systems and GPUs per server reach scale and plan (the web failed on
    the first and sized points at 4 GPUs per server while building 8)."""
    custom = ("systems:\n  mybox: {base: dgx-h100}\ncluster:\n  system: mybox\n  nodes: 8\n"
              "training:\n  model: llama3-8b\n  tp: 8\n  global_batch: 64\n")
    assert run_job("scale", [custom])["designs"][0]["scale"]["points"]
    assert run_job("plan", [custom])["designs"][0]["plan"]["fabrics"]
    half = ("cluster:\n  system: dgx-h100\n  nodes: 8\n  gpus_per_node: 4\n"
            "training:\n  model: llama3-8b\n  tp: 4\n  global_batch: 64\n")
    pts = run_job("scale", [half])["designs"][0]["scale"]["points"]
    assert [p["gpus"] for p in pts] == [4, 8, 16, 32]
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig
    from fabricsim.workloads.training.scaling import scaling_curve, weak_scaling_batch

    cfg = ParallelConfig(tp=4, global_batch=64)
    cli = scaling_curve(get_model("llama3-8b"), "dgx-h100", [32], cfg, gpus_per_node=4,
                        seqs_per_replica=weak_scaling_batch(cfg, 32))
    assert pts[-1]["tokens_per_s_per_gpu"] == pytest.approx(cli[0]["tokens_per_s_per_gpu"])


@pytest.mark.parametrize(("training", "field"), [
    ("{model: gpt3-175b, tp: 64}", "training.tp"),
    ("{model: llama3-8b, vp: -2}", "training.vp"),
    ("{model: llama3-8b, ep: 2}", "training.ep"),
])
def test_a_training_layout_that_cannot_split_is_refused_at_submission(
        training: str, field: str) -> None:
    from fabricsim.errors import FabricsimError

    with pytest.raises(FabricsimError) as e:
        parse_design(SMALL + "training: " + training + "\n", "scale", Limits())
    assert e.value.field is not None and e.value.field.startswith(field)


def test_infer_job_serves_the_inference_section() -> None:
    """The web app serves a scenario's inference: section as fabricsim infer does: the
    static batch, continuous batching and the disaggregated pair, with their charts."""
    text = shipped_scenarios()["serve-llama3-70b"]
    out = run_job("infer", [text, text.replace("fabric: ib-ndr", "fabric: roce-400g")])
    a, b = (d["infer"] for d in out["designs"])
    assert a["serving"]["tp"] == 8 and a["continuous"]["tpot_s"] <= 0.030
    assert a["disaggregated"]["crosses_servers"] is True
    # the KV cache crosses the fabric: the only figure the fabric changes
    assert a["disaggregated"]["kv_transfer_s"] != b["disaggregated"]["kv_transfer_s"]
    assert a["tpot_s"] == b["tpot_s"]
    for name in ("serving_latency", "serving_throughput"):
        _check_figure(out["figures"][name])
    with pytest.raises(ConfigError, match="needs an inference: section") as e:
        parse_design(SMALL, "infer", Limits())
    assert e.value.field == "inference"
    with pytest.raises(ConfigError) as e:
        parse_design(SMALL + "inference: {model: llama3-8b, tpot_target_ms: -1}\n", "infer",
                     Limits())
    assert (e.value.field or "").startswith("inference.tpot_target_ms")


def test_train_reads_the_sections_backend_total_tokens_and_goodput_settings() -> None:
    """training.backend, total_tokens, checkpoint_gbps and restart_min reach the web's
    train job (it ran analytic, without the run's cost, at default goodput settings)."""
    text = TRAIN + "  total_tokens: 1.0e+12\n  restart_min: 30\n  checkpoint_gbps: 5\n"
    t = run_job("train", [text])["designs"][0]["train"]
    assert t["run"]["tokens"] == 1e12 and t["run"]["days"] > 0
    base = run_job("train", [TRAIN])["designs"][0]["train"]
    assert t["goodput"]["goodput"] < base["goodput"]["goodput"]  # slower restarts, checkpoints
    flow = run_job("train", [TRAIN + "  backend: flow\n"])["designs"][0]["train"]
    assert flow["step_time_s"] == pytest.approx(base["step_time_s"], rel=0.05)
    from fabricsim.errors import FabricsimError

    with pytest.raises(FabricsimError, match="backend"):  # the section's backend is used
        run_job("train", [TRAIN + "  backend: nonesuch\n"])


@pytest.mark.parametrize(("kind", "text", "field"), [
    ("simulate", "cluster: {system: dgx-h100, nodes: 2}\ncollective: {collective: all_reduce, "
     "maxbytes: 1MiB, algo: ring}\nfaults: [{type: link_degraded, kind: leaf-spine, index: 0,"
     " factor: 0.001}]", "faults[0].factor"),
    ("packet", "cluster: {system: dgx-h100, nodes: 2}\ncollective: {collective: all_reduce, "
     "maxbytes: 1MiB, algo: ring}\npacket: {loss_rate: 0.02}", "packet.loss_rate")])
def test_extreme_settings_are_refused_at_submission(kind: str, text: str, field: str) -> None:
    """issue 40: the web ran a link at 0.001 (the CLI wants --force) and accepted a 2 %
    loss with 202, then failed telling the web user to pass --force."""
    from fabricsim.errors import ConfigError
    from fabricsim.web.jobs import parse_design
    from fabricsim.web.limits import Limits

    with pytest.raises(ConfigError, match="web app does not run it") as e:
        parse_design(text, kind, Limits())
    assert e.value.field == field


def test_a_web_all_to_all_is_bounded_by_its_transfers() -> None:
    """issue 40: a 1,024-rank flow all-to-all (1M transfers) grew a worker to 1.7 GiB
    inside the wall-time budget."""
    from fabricsim.errors import ConfigError
    from fabricsim.web.jobs import parse_design
    from fabricsim.web.limits import Limits

    text = ("cluster: {system: dgx-h100, nodes: 128}\ncollective: {collective: alltoall, "
            "maxbytes: 1MiB, algo: direct, backend: flow}\n"
            "faults: [{type: link_degraded, kind: leaf-spine, index: 0, factor: 0.5}]\n")
    with pytest.raises(ConfigError, match="1,047,552 transfers") as e:
        parse_design(text, "simulate", Limits())
    assert e.value.field == "collective.ranks"
    assert parse_design(text.replace("128", "32"), "simulate", Limits()).cluster.nodes == 32
    bg = ("cluster: {system: dgx-h100, nodes: 128}\ncollective: {collective: all_reduce, "
          "maxbytes: 1MiB, algo: ring}\nbackground: [{pattern: all_to_all}]\n")
    with pytest.raises(ConfigError, match="background\\[0\\] \\(all_to_all of 1024 ranks\\)"):
        parse_design(bg, "simulate", Limits())
