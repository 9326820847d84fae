import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_run import run

from fabricsim.cli.app import main


def test_train_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "train", "--system", "dgx-h100", "--nodes", "2", "--model",
                         "llama2-13b", "--tp", "4", "--global-batch", "32", "--seq-len",
                         "4096", "--recompute", "selective", "--json")
    assert code == 0, err
    d = json.loads(out)
    for k in ("step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "memory_per_gpu_gib",
              "breakdown", "idle_gpu_equivalent", "comm_usd_per_day"):
        assert k in d
    assert 0 < d["mfu"] < 1 and d["gpus"] == 16
    assert d["gpu_hour_usd"] == 2.5  # dgx-h100 preset


def test_train_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "train", "--model", "llama3-8b", "--seq-len", "4096",
                       "--recompute", "full", "--gpu-hour-usd", "3")
    assert code == 0 and "MFU" in out and "$3.00/GPU-hour" in out


def test_train_megatron_layout_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3 as NeMo runs it on H100: the header names the layout, the modules and
    the dispatcher; JSON carries them; a layout that does not fit pp·vp exits 2."""
    args = ["train", "--system", "dgx-h100", "--nodes", "128", "--model", "deepseek-v3",
            "--tp", "2", "--pp", "8", "--ep", "64", "--global-batch", "8192", "--seq-len",
            "4096", "--precision", "fp8", "--pipeline-layout", "Et|(tt|)*30mL",
            "--moe-dispatcher", "deepep", "--recompute", "selective",
            "--recompute-modules", "mla_up_proj,mlp"]
    code, out, err = run(capsys, *args)
    words = out.split()
    assert code == 0, err
    assert {"vp=4", "layout=Et|(tt|)*30mL", "modules=mla_up_proj,mlp",
            "ep-kernel=deepep"} <= set(words)
    assert "expert all-to-all by deepep kernels" in out
    code, out, err = run(capsys, *args, "--json")
    par = json.loads(out)["parallel"]
    assert par["stage_layers"] == [7, 8, 8, 8, 8, 8, 8, 6] and par["vp"] == 4
    code, _, err = run(capsys, *args, "--vp", "2")
    assert code == 2 and "--pipeline-layout" in err and "32 stages" in err


@pytest.mark.parametrize(("args", "field"), [
    (["--tp", "3"], "--tp"),
    (["--model", "llama2-70b", "--zero", "0"], "training:"),
    (["--zero", "5"], "--zero"),
    (["--model", "nope"], "--model"),
    (["--precision", "fp16"], "--precision"),
])
def test_train_bad_input_exits_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                 field: str) -> None:
    code, _, err = run(capsys, "train", "--nodes", "1", *args)
    assert code == 2 and field in err and "Traceback" not in err


def test_scale_and_plan_parallel(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    png = tmp_path / "s.png"
    code, out, err = run(capsys, "scale", "--model", "llama2-7b", "--gpus", "8,16",
                         "--seq-len", "4096", "--recompute", "full", "--plot", str(png),
                         "--json")
    assert code == 0, err
    pts = json.loads(out)["points"]
    assert pts[0]["scaling_efficiency"] == 1.0 and png.exists()
    code, out, err = run(capsys, "plan-parallel", "--nodes", "1", "--model", "llama2-13b",
                         "--global-batch", "16", "--seq-len", "4096", "--top", "3", "--json")
    assert code == 0, err
    assert len(json.loads(out)["results"]) == 3


@pytest.mark.parametrize("price", ["-3", "nan", "inf", "0"])
@pytest.mark.parametrize("cmd", [
    ["train", "--system", "dgx-h100", "--nodes", "1", "--model", "llama2-7b", "--recompute",
     "full", "--seq-len", "2048"],
    ["scale", "--system", "dgx-h100", "--model", "llama2-7b", "--recompute", "full",
     "--seq-len", "2048", "--gpus", "8"],
    ["plan", "--model", "llama2-7b", "--gpus", "8", "--fabrics", "ib-ndr"],
])
def test_bad_gpu_hour_price_rejected(capsys: pytest.CaptureFixture[str], cmd: list[str],
                                     price: str) -> None:
    code, out, err = run(capsys, *cmd, f"--gpu-hour-usd={price}")
    assert code == 2, out
    assert "--gpu-hour-usd" in err and "positive" in err
    assert "$-" not in out and "$nan" not in out


@pytest.mark.parametrize("price", [".nan", "-3", ".inf"])
def test_bad_scenario_training_price_rejected(capsys: pytest.CaptureFixture[str], tmp_path,  # type: ignore[no-untyped-def]
                                              price: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("name: s\ncluster: {system: dgx-h100, nodes: 1}\ntraining:\n"
                 f"  model: llama2-7b\n  recompute: full\n  seq_len: 2048\n"
                 f"  gpu_hour_usd: {price}\n")
    code, out, err = run(capsys, "train", str(f))
    assert code == 2, out
    assert "training.gpu_hour_usd" in err


def test_library_rejects_negative_price() -> None:
    import fabricsim as fs
    from fabricsim.errors import FabricsimError
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig
    from fabricsim.workloads.training.step import simulate_step

    fab = fs.build_cluster("dgx-h100", nodes=1, gpus_per_node=1)
    with pytest.raises(FabricsimError, match="gpu_hour_usd"):
        simulate_step(get_model("llama2-7b"), ParallelConfig(recompute="full", seq_len=2048),
                      fab, check_memory=False, gpu_hour_usd=float("nan"))


# ---------------------------------------------------------------- Megatron/NeMo flags
_405B = ["train", "--system", "dgx-h100", "--nodes", "1024", "--fabric", "roce-400g",
         "--model", "llama3-405b", "--tp", "8", "--pp", "16", "--dp", "64",
         "--global-batch", "2048", "--micro-batch", "1", "--seq-len", "8192"]


def test_llama3_405b_misfit_names_what_fits(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *_405B)
    assert code == 2
    assert "83.0 GiB" in err and "--zero fsdp" in err and "--recompute-layers 1" in err
    # the fixes are priced by the step they give, fastest first: recomputing one layer
    # per stage (+4 % compute) before FSDP's per-layer gathers over 64 replicas
    steps = [float(s) for s in re.findall(r"step ([\d.]+) s", err)]
    assert len(steps) == 2 and steps == sorted(steps)
    assert err.index("--recompute-layers 1") < err.index("--zero fsdp")


def test_llama3_405b_with_metas_uneven_stages_fits(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    """Meta's layout: one layer fewer on the first and last stage (Llama 3 paper,
    sec. 3.3.2) and no recomputation fits an 80 GiB H100 (77.7 GiB with the reserve)."""
    code, out, err = run(capsys, *_405B, "--first-stage-layers", "7",
                         "--last-stage-layers", "7", "--json")
    assert code == 0, err
    assert 75 < json.loads(out)["memory_per_gpu_gib"] < 80


def test_llama3_405b_as_meta_ran_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *_405B, "--zero", "fsdp", "--first-stage-layers", "7",
                         "--last-stage-layers", "7", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["parallel"]["stage_layers"][:2] == [7, 8] and d["memory_per_gpu_gib"] < 80
    g = d["goodput"]
    assert 0.5 < g["goodput"] < 1 and g["failures_per_day"] > 1
    json.dumps(d, allow_nan=False)


def test_from_megatron_equals_the_same_flags(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["train", "--system", "dgx-h100", "--nodes", "16", "--model", "llama3-70b",
            "--json"]
    args = ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
            "--virtual-pipeline-model-parallel-size 5 --sequence-parallel "
            "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
            "--tp-comm-overlap --micro-batch-size 1 --global-batch-size 512 "
            "--seq-length 8192 --bf16 --lr 1e-4")
    code, out_m, err = run(capsys, *base, "--from-megatron", args)
    assert code == 0, err
    code, out_f, err = run(capsys, *base, "--tp", "8", "--pp", "4", "--vp", "5", "--zero",
                           "1", "--global-batch", "512", "--seq-len", "8192",
                           "--tp-comm-overlap", "--grad-reduce-dtype", "fp32")
    assert code == 0, err
    dm, df = json.loads(out_m), json.loads(out_f)
    assert dm["step_time_s"] == df["step_time_s"]
    assert dm["notes"] and "--lr 1e-4" in dm["notes"][0]
    # an explicit flag overrides the pasted list
    code, out_o, _ = run(capsys, *base, "--from-megatron", args, "--no-tp-comm-overlap")
    assert json.loads(out_o)["breakdown"]["tp"] > dm["breakdown"]["tp"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--tp", "8", "--pp", "4", "--vp", "3"], "--vp"),
    (["--fp8", "--precision", "bf16"], "--fp8"),
    (["--from-megatron", "--tensor-model-parallel-size x"], "--from-megatron"),
    (["--from-megatron", "--recompute-granularity everything"], "--from-megatron"),
    (["--recompute-layers", "2"], "--recompute-layers"),
    (["--tp", "1", "--tp-comm-overlap"], "--tp-comm-overlap"),
    (["--checkpoint-gbps", "-1"], "--checkpoint-gbps"),
    (["--pp-schedule", "zb"], "--pp-schedule"),
    (["--tp", "8", "--pp", "2", "--vp", "2", "--pp-schedule", "dualpipe"],
     "--pp-schedule"),
    (["--tp", "8", "--pp", "8", "--global-batch", "16", "--pp-schedule", "dualpipe"],
     "--global-batch"),
    (["--tp", "8", "--pp", "4", "--pp-schedule", "dualpipe", "--chakra", "x"], "--chakra"),
    (["--tp", "8", "--fsdp-impl", "megatron"], "--zero fsdp"),
    (["--tp", "8", "--grad-reduce-dtype", "fp16"], "--grad-reduce-dtype"),
    (["--tp", "8", "--zero", "fsdp", "--fsdp-impl", "deepspeed"], "--fsdp-impl"),
])
def test_layout_flags_bad_input_exits_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                        needle: str) -> None:
    code, _, err = run(capsys, "train", "--system", "dgx-h100", "--nodes", "16", "--model",
                       "llama3-70b", "--global-batch", "512", *args)
    assert code == 2 and needle in err and "Traceback" not in err


def test_train_dualpipe(capsys: pytest.CaptureFixture[str]) -> None:
    """--pp-schedule dualpipe: named in the header and the JSON, a smaller bubble than
    1F1B on the same layout, two stages' weights per GPU."""
    args = ["train", "--system", "dgx-h100", "--nodes", "16", "--model", "llama3-70b",
            "--tp", "8", "--pp", "4", "--global-batch", "256", "--seq-len", "8192",
            "--recompute", "full"]
    code, out, err = run(capsys, *args, "--pp-schedule", "dualpipe")
    assert code == 0, err
    assert "schedule=dualpipe" in out.split()
    code, out, err = run(capsys, *args, "--pp-schedule", "dualpipe", "--json")
    dual = json.loads(out)
    code, out, err = run(capsys, *args, "--vp", "1", "--json")  # plain 1F1B
    one = json.loads(out)
    assert dual["parallel"]["pp_schedule"] == "dualpipe"
    assert one["parallel"]["pp_schedule"] == "1f1b"
    assert dual["breakdown"]["bubble"] < one["breakdown"]["bubble"]
    assert dual["memory_gib"]["weights"] > 1.9 * one["memory_gib"]["weights"]


def test_train_fsdp_impl(capsys: pytest.CaptureFixture[str]) -> None:
    """--fsdp-impl megatron: the JSON names it, and its kernels cost less compute than
    PyTorch FSDP's cast-and-divide ones (14 vs 18 B per parameter each micro-batch)."""
    base = ["train", "--system", "dgx-h100", "--nodes", "2", "--model", "llama2-13b",
            "--zero", "fsdp", "--global-batch", "64", "--seq-len", "4096", "--json"]
    code, out, err = run(capsys, *base)
    assert code == 0, err
    torch = json.loads(out)
    code, out, err = run(capsys, *base, "--fsdp-impl", "megatron")
    assert code == 0, err
    meg = json.loads(out)
    assert (torch["parallel"]["fsdp_impl"], meg["parallel"]["fsdp_impl"]) == \
        ("pytorch", "megatron")
    assert meg["breakdown"]["compute"] < torch["breakdown"]["compute"]
    assert meg["breakdown"]["dp"] == torch["breakdown"]["dp"]


def _planned(capsys: pytest.CaptureFixture[str], path: Path, scenario: str,
             top: int) -> list[dict[str, Any]]:
    """plan-parallel's results for a scenario written to ``path``."""
    path.write_text(scenario)
    code, out, err = run(capsys, "plan-parallel", str(path), "--top", str(top), "--json")
    assert code == 0, err
    return list(json.loads(out)["results"])


def test_plan_parallel_keeps_the_scenarios_stack(capsys: pytest.CaptureFixture[str],
                                                 tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A scenario's attention kernel and gradient precision hold for every layout the
    planner tries (plan-parallel used to drop them: flash1 came back as flash)."""
    sc = tmp_path / "s.yaml"
    res = _planned(capsys, sc, "cluster: {system: dgx-a100, nodes: 1}\n"
                   "training: {model: mpt-1b, attention_kernel: flash1, grad_reduce_dtype: fp32,"
                   " seq_len: 8192, global_batch: 16}\n", top=3)
    assert res and all(r["parallel"]["attention_kernel"] == "flash1" for r in res)
    assert all(r["parallel"]["grad_reduce_dtype"] == "fp32" for r in res)
    sc.write_text("cluster: {system: hgx-b200, nodes: 1}\n"
                  "training: {model: mpt-1b, attention_kernel: flash1}\n")
    code, _, err = run(capsys, "plan-parallel", str(sc))
    assert code == 2 and "training.attention_kernel" in err and "Traceback" not in err


def test_plan_parallel_takes_zero_and_fsdp_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan-parallel", "--system", "dgx-h100", "--nodes", "1",
                         "--model", "llama2-7b", "--global-batch", "16", "--zero", "fsdp",
                         "--fsdp-impl", "megatron", "--top", "3", "--json")
    assert code == 0, err
    res = json.loads(out)["results"]
    assert res and all((r["parallel"]["zero"], r["parallel"]["fsdp_impl"]) ==
                       ("fsdp", "megatron") for r in res)


def test_goodput_flags_name_themselves(capsys: pytest.CaptureFixture[str]) -> None:
    """A job that cannot progress blames the flag behind it (it said 'gpus' for a
    checkpoint bandwidth of 1 B/s); an instant restart is allowed."""
    base = ["train", "--system", "dgx-h100", "--nodes", "2", "--model", "llama3-8b",
            "--tp", "8", "--global-batch", "16"]
    code, _, err = run(capsys, *base, "--checkpoint-gbps", "1e-9")
    assert code == 2 and err.startswith("error: --checkpoint-gbps:")
    code, _, err = run(capsys, *base, "--restart-min", "1e7")
    assert code == 2 and err.startswith("error: --restart-min:")
    code, _, err = run(capsys, *base, "--restart-min", "0")
    assert code == 0, err
    code, _, err = run(capsys, *base, "--restart-min", "-1")
    assert code == 2 and "--restart-min" in err


def test_a_megatron_list_without_a_model_asks_for_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    """It used to time llama3-8b, said nowhere."""
    code, _, err = run(capsys, "train", "--system", "dgx-h100", "--nodes", "2",
                       "--from-megatron", "--tensor-model-parallel-size 8")
    assert code == 2 and err.startswith("error: --model: the Megatron list sets no model")


def test_plan_parallel_keeps_the_scenarios_overlap_switches(
        capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    """tp_comm_overlap and overlap_grad_reduce of a scenario hold for the layouts the
    search tries (they came back as the defaults, without a word)."""
    res = _planned(capsys, tmp_path / "s.yaml", "cluster: {system: dgx-h100, nodes: 2}\n"
                   "training: {model: llama3-8b, tp_comm_overlap: true,"
                   " overlap_grad_reduce: false, seq_len: 4096, global_batch: 32}\n", top=50)
    assert all(r["parallel"]["overlap_grad_reduce"] is False for r in res)
    assert all(r["parallel"]["tp_comm_overlap"] is (r["parallel"]["tp"] > 1) for r in res)
    assert any(r["parallel"]["tp"] > 1 for r in res)


@pytest.mark.parametrize(("args", "start"), [
    (["train", "--system", "dgx-h100", "--nodes", "16", "--model", "llama3-70b", "--tp", "8",
      "--pp", "4", "--global-batch", "1000000000000"], "error: --global-batch: one step takes"),
    (["plan", "--system", "dgx-h100", "--gpus", "64", "--model", "llama3-8b", "--tp", "8",
      "--global-batch", "64", "--fabrics", "ib-ndr", "--gpu-hour-usd", "1e308"],
     "error: --gpu-hour-usd: must be at most 10,000"),
    (["plan-parallel", "--nodes", "1", "--model", "llama3-70b", "--global-batch", "64"],
     "error: training: no configuration of llama3-70b fits"),
    (["scale", "--system", "dgx-h100", "--model", "llama3-8b", "--fsdp-impl", "megatron",
      "--gpus", "8,16"], "error: --fsdp-impl:"),
    (["scale", "--model", "llama3-8b", "--gpus", ",".join(str(8 * i) for i in range(1, 70))],
     "error: gpus: at most 64 GPU counts")])
def test_limits_name_their_cause(args: list[str], start: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """(A year-long step blamed checkpoints, a $1e308 GPU-hour printed Infinity into
    JSON, plan-parallel exited 0 with nothing to run, scale blamed 'gpus' for a flag,
    and took any number of sizes.)"""
    code, _, err = run(capsys, *args)
    assert code == 2 and err.startswith(start), err


def test_goodput_settings_from_the_scenario(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    """training.checkpoint_gbps and training.restart_min set the goodput as the flags do
    (flags win); a job failures outpace names the scenario's field it came from."""
    sc = tmp_path / "g.yaml"
    sc.write_text("cluster: {system: dgx-h100, nodes: 16}\ntraining: {model: llama3-70b, "
                  "tp: 8, pp: 4, vp: 5, global_batch: 512, checkpoint_gbps: 20, "
                  "restart_min: 30}\n")
    code, out, err = run(capsys, "train", str(sc), "--json")
    assert code == 0, err
    from_yaml = json.loads(out)["goodput"]
    code, out, _ = run(capsys, "train", "--system", "dgx-h100", "--nodes", "16", "--model",
                       "llama3-70b", "--tp", "8", "--pp", "4", "--vp", "5", "--global-batch",
                       "512", "--checkpoint-gbps", "20", "--restart-min", "30", "--json")
    from_flags = json.loads(out)["goodput"]
    assert from_yaml["restart_s"] == from_flags["restart_s"] == 1800
    assert from_yaml["goodput"] == pytest.approx(from_flags["goodput"])
    code, out, _ = run(capsys, "train", str(sc), "--restart-min", "5", "--json")
    assert json.loads(out)["goodput"]["restart_s"] == 300
    code, out, _ = run(capsys, "scale", str(sc), "--gpus", "128", "--json")
    assert json.loads(out)["points"][0]["goodput"] == pytest.approx(from_yaml["goodput"])
    huge = tmp_path / "h.yaml"
    huge.write_text("cluster: {system: dgx-h100, nodes: 16}\ntraining: {model: llama3-70b, "
                    "tp: 8, pp: 4, global_batch: 100000000}\n")
    code, _, err = run(capsys, "train", str(huge))
    assert code == 2 and "training.global_batch" in err
    bad = tmp_path / "b.yaml"
    bad.write_text("cluster: {system: dgx-h100, nodes: 1}\ntraining: {model: llama3-8b, "
                   "restart_min: -1}\n")
    code, _, err = run(capsys, "train", str(bad))
    assert code == 2 and "training.restart_min" in err


def test_a_megatron_list_kept_in_the_scenario(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    """training.from_megatron holds a pasted list as --from-megatron does (the web app
    reads it too); the section's own keys win over it; a bad list names the field."""
    args = ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 "
            "--virtual-pipeline-model-parallel-size 5 --sequence-parallel "
            "--use-distributed-optimizer --micro-batch-size 1 --global-batch-size 512 "
            "--seq-length 8192 --bf16 --lr 1e-4")
    sc = tmp_path / "m.yaml"
    sc.write_text("cluster: {system: dgx-h100, nodes: 16}\ntraining:\n  model: llama3-70b\n"
                  f"  from_megatron: \"{args}\"\n")
    code, out, err = run(capsys, "train", str(sc), "--json")
    assert code == 0, err
    yaml_run = json.loads(out)
    code, out, err = run(capsys, "train", "--system", "dgx-h100", "--nodes", "16",
                         "--model", "llama3-70b", "--from-megatron", args, "--json")
    assert code == 0, err
    flag_run = json.loads(out)
    assert yaml_run["step_time_s"] == flag_run["step_time_s"]
    assert any("--lr 1e-4" in n for n in yaml_run["notes"])
    sc.write_text(sc.read_text() + "  vp: 1\n")
    code, out, _ = run(capsys, "train", str(sc), "--json")
    assert json.loads(out)["parallel"]["vp"] == 1
    sc.write_text("cluster: {system: dgx-h100, nodes: 16}\ntraining:\n  model: llama3-70b\n"
                  "  from_megatron: \"--pipeline-model-parallel-size 0\"\n")
    code, _, err = run(capsys, "train", str(sc))
    assert code == 2 and "training.from_megatron" in err


def test_plan_reads_the_goodput_settings(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    """plan's goodput takes training.restart_min and checkpoint_gbps, as train's does."""
    body = "cluster: {system: dgx-h100, nodes: 4}\ntraining: {model: llama3-8b, tp: 1, " \
           "global_batch: 64"
    slow, plain = tmp_path / "s.yaml", tmp_path / "p.yaml"
    slow.write_text(body + ", restart_min: 20, checkpoint_gbps: 50}\n")
    plain.write_text(body + "}\n")
    got = {}
    for name, path in (("slow", slow), ("plain", plain)):
        code, out, err = run(capsys, "plan", str(path), "--fabrics", "ib-ndr", "--json")
        assert code == 0, err
        got[name] = json.loads(out)
    code, out, _ = run(capsys, "train", str(slow), "--json")
    assert got["slow"]["fabrics"][0]["goodput"] == pytest.approx(
        json.loads(out)["goodput"]["goodput"])
    assert got["slow"]["fabrics"][0]["goodput"] < got["plain"]["fabrics"][0]["goodput"]


def test_a_whole_megatron_launch_line_runs_with_only_the_system(capsys) -> None:
    """issue 37: Megatron-LM's own Llama 3 8B FP8 example line, pasted whole: vocab from
    --vocab-size, gated/untied from its switches, the cluster from torchrun; the same step
    time as the explicit flags."""
    import json
    from pathlib import Path

    line = (Path(__file__).resolve().parents[1] / "data" / "megatron"
            / "llama3_8b_h100_fp8.txt").read_text().strip()
    assert main(["train", "--from-megatron", line, "--system", "dgx-h100", "--json"]) == 0
    pasted = json.loads(capsys.readouterr().out)
    assert main(["train", "--system", "dgx-h100", "--nodes", "1", "--model", "llama3-8b",
                 "--global-batch", "128", "--micro-batch", "1", "--seq-len", "8192",
                 "--precision", "fp8", "--zero", "1", "--overlap-grad-reduce",
                 "--overlap-param-gather", "--sequence-parallel", "--grad-reduce-dtype",
                 "bf16", "--json"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert pasted["step_time_s"] == pytest.approx(explicit["step_time_s"], rel=0.01)
    assert any("cluster from the launcher" in w for w in pasted["warnings"])


def test_a_launch_line_too_small_for_its_layout_says_what_it_needs(capsys) -> None:
    line = ("torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py "
            "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --num-layers 96 "
            "--hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
            "--micro-batch-size 1 --global-batch-size 1536 --fp16 "
            "--tokenizer-type GPT2BPETokenizer")
    assert main(["train", "--from-megatron", line, "--system", "dgx-a100"]) == 2
    assert "needs at least 128 GPUs" in capsys.readouterr().err
    assert main(["train", "--from-megatron", line, "--system", "dgx-a100", "--gpus", "128",
                 "--json"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    assert d["parallel"]["precision"] == "bf16"   # --fp16, timed as BF16, said so
    assert any("--fp16 timed as BF16" in w for w in d["warnings"])
    assert any("vocab 50257 padded to 51200" in w for w in d["warnings"])


@pytest.mark.parametrize(("name", "system"), [("deepseek2_lite_h100.txt", "dgx-h100"),
                                              ("mixtral_distributed.txt", "dgx-h100")])
def test_megatrons_moe_example_lines_run_with_only_the_system(capsys, name: str,
                                                               system: str) -> None:
    """issue 37: Megatron-LM's DeepSeek-V2-Lite and Mixtral example lines, pasted whole."""
    import json
    from pathlib import Path

    line = (Path(__file__).resolve().parents[1] / "data" / "megatron" / name).read_text()
    assert main(["train", "--from-megatron", line.strip(), "--system", system, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["step_time_s"] > 0 and any("cluster from the launcher" in w
                                        for w in d["warnings"])


def test_a_torchtitan_config_runs_as_its_preset_says(capsys, tmp_path) -> None:
    """issue 37: torchtitan's own Llama 3 8B config (a preset for 64 A100s) with the
    cluster given; the same step as the explicit flags; a config with a key of an unknown
    torchtitan version exits 2 naming it."""
    import json
    from pathlib import Path

    cfg = Path(__file__).resolve().parents[1] / "data" / "torchtitan" / "llama3_8b.toml"
    assert main(["train", "--from-torchtitan", str(cfg), "--system", "dgx-a100", "--gpus",
                 "64", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert main(["train", "--system", "dgx-a100", "--gpus", "64", "--model", "llama3-8b",
                 "--zero", "fsdp", "--micro-batch", "1", "--seq-len", "8192",
                 "--recompute", "selective", "--grad-reduce-dtype", "fp32", "--json"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert got["step_time_s"] == pytest.approx(explicit["step_time_s"], rel=0.01)
    assert any(w.startswith("--from-torchtitan") for w in got["warnings"])
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace("[parallelism]", "[parallelism]\nspeed = 2"))
    assert main(["train", "--from-torchtitan", str(bad), "--system", "dgx-a100", "--gpus",
                 "64"]) == 2
    assert "unknown key parallelism.speed" in capsys.readouterr().err


def test_a_maxtext_config_runs_with_the_cluster_given(capsys) -> None:
    import json
    from pathlib import Path

    cfg = Path(__file__).resolve().parents[1] / "data" / "maxtext" / "llama2_70b_gpu.yml"
    assert main(["train", "--from-maxtext", str(cfg), "--system", "dgx-h100", "--gpus", "64",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert main(["train", "--system", "dgx-h100", "--gpus", "64", "--model", "llama2-70b",
                 "--zero", "fsdp", "--micro-batch", "6", "--seq-len", "4096", "--recompute",
                 "full", "--json"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    assert got["step_time_s"] == pytest.approx(explicit["step_time_s"], rel=0.01)
    assert main(["train", "--from-maxtext", str(cfg), "--from-torchtitan", str(cfg),
                 "--system", "dgx-h100", "--gpus", "64"]) == 2
    assert "give one framework" in capsys.readouterr().err


def test_a_nemo_line_runs_on_the_cluster_its_trainer_names(capsys) -> None:
    import json

    line = ("nemo llm pretrain --factory llama3_8b trainer.num_nodes=2 trainer.devices=8 "
            "trainer.strategy.tensor_model_parallel_size=2 data.global_batch_size=64 "
            "data.seq_length=8192 trainer.max_steps=100")
    assert main(["train", "--from-nemo", line, "--system", "dgx-h100", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["gpus"] == 16 and got["parallel"]["tp"] == 2
    assert main(["train", "--from-nemo", line, "--from-megatron", "--num-layers 2",
                 "--system", "dgx-h100"]) == 2


def test_megatrons_gpt3_175b_example_needs_its_128_gpus(capsys) -> None:
    """issue 37: the 175B example as shipped (--nnodes 1) is refused saying it needs 128
    GPUs; with them it runs, GPT-2's BPE vocabulary taken from its --merge-file."""
    import json
    from pathlib import Path

    line = (Path(__file__).resolve().parents[1] / "data" / "megatron"
            / "gpt3_175b_distributed.txt").read_text().strip()
    assert main(["train", "--from-megatron", line, "--system", "dgx-a100"]) == 2
    assert "needs at least 128 GPUs" in capsys.readouterr().err
    assert main(["train", "--from-megatron", line, "--system", "dgx-a100", "--gpus", "128",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpus"] == 128 and any("GPT-2's BPE" in w for w in d["warnings"])
    assert any("vocab 50257 padded to 51200" in w for w in d["warnings"])


def test_train_says_what_interleaving_would_need(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama 3 405B as Meta's paper lays it out on 8,192 H100 (interleaved, embedding and
    loss as stages, no recomputation): the memory model puts every interleaved split
    over 80 GB, so plain 1F1B is timed, and the warning names the deepest split, what it
    needs and the change that fits it, instead of a bare 'kept'."""
    args = ["train", "--system", "dgx-h100", "--nodes", "1024", "--fabric", "roce-400g",
            "--model", "llama3-405b", "--tp", "8", "--pp", "16", "--dp", "64",
            "--global-batch", "2048", "--seq-len", "8192", "--zero", "fsdp",
            "--no-reshard-after-forward", "--account-for-embedding-loss", "--json"]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    r = json.loads(out)
    assert r["parallel"]["vp"] == 1
    note = next(w for w in r["warnings"] if w.startswith("plain 1F1B kept"))
    assert "vp=8 needs" in note and "GiB per GPU" in note and "fits with --recompute" in note
