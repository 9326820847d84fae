"""Bad and hostile input gets a clear error naming the field, exit 2, before any work
(issue 9, parts 6 and 7). Bounds are checked by construction (the refusal happens before
the expensive step), never by timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.cli.app import main
from fabricsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "data" / "nccl_logs"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return code, out.err


# ---------------------------------------------------------------- part 6
def test_pydantic_models_built_from_python_raise_the_projects_errors() -> None:
    from fabricsim.backends.packet.config import PacketConfig
    from fabricsim.scenario import Scenario
    from fabricsim.workloads.training.parallel import ParallelConfig

    with pytest.raises(ConfigError, match=r"ParallelConfig\.tp.*greater than or equal to 1"):
        ParallelConfig(tp=0)
    with pytest.raises(ConfigError, match=r"PacketConfig\.mtu"):
        PacketConfig(mtu=1)
    with pytest.raises(ConfigError, match=r"Scenario\.cluster\.nodes"):
        Scenario(cluster={"nodes": -1})  # type: ignore[arg-type]


def test_workload_helpers_raise_the_projects_errors() -> None:
    from fabricsim.workloads.flops import recompute_flops_per_token
    from fabricsim.workloads.models import get_model

    with pytest.raises(ConfigError, match=r"recompute.*got 'some'"):
        recompute_flops_per_token(get_model("gpt3-175b"), 2048, "some")


def test_compare_reads_the_gpu_from_the_log(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(capsys, "compare", str(LOGS / "all_reduce_perf_dgx_a100.log"))
    assert code == 0
    code, err = run(capsys, "compare", str(LOGS / "all_reduce_perf_dgx_a100.log"), "--system",
                    "dgx-h100")
    assert code == 2 and "--system" in err and "A100" in err


def test_compare_without_a_gpu_in_the_log_asks_for_system(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "all_reduce_perf.log"
    p.write_text("  1048576  262144  float  sum  -1  50.0  20.97  36.70  0"
                 "  49.0  21.40  37.45  0\n")
    code, err = run(capsys, "compare", str(p))
    assert code == 2 and "--system" in err


def test_compare_with_a_gpu_the_catalog_lacks(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    p = tmp_path / "all_reduce_perf.log"
    p.write_text("#  Rank  0 Group  0 Pid  1 on h device  0 [0x07] Tesla K80\n"
                 "  1048576  262144  float  sum  -1  50.0  20.97  36.70  0"
                 "  49.0  21.40  37.45  0\n")
    code, err = run(capsys, "compare", str(p))
    assert code == 2 and "Tesla K80" in err and "systems:" in err


def test_bench_n_is_iterations_not_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "all_reduce", "-b", "1M", "-e", "1M", "-n", "20", "--system",
                 "dgx-h100"])
    assert code == 0
    assert "8 GPUs" in capsys.readouterr().out  # one server, not 20


def test_nodes_has_no_short_option(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["describe", "-n", "4"])
    assert code == 2


# ---------------------------------------------------------------- part 7
@pytest.mark.parametrize(("args", "field"), [
    (["-b", "8", "-e", "8G", "-f", "1.0000001"], "--stepfactor"),
    (["-b", "8", "-e", "8G", "-f", "nan"], "--stepfactor"),
    (["-b", "8", "-e", "8G", "-f", "1"], "--stepfactor"),
    (["-b", "8", "-e", "99999999999999999999999T"], "size"),
    (["-b", "0", "-e", "1G", "-i", "1"], "--stepbytes"),
])
def test_bench_sweeps_are_bounded(capsys: pytest.CaptureFixture[str], args: list[str],
                                  field: str) -> None:
    code, err = run(capsys, "bench", "all_reduce", *args, "--system", "dgx-h100")
    assert code == 2 and field in err


def test_bench_zero_to_a_gigabyte_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(capsys, "bench", "all_reduce", "-b", "0", "-e", "1G", "--system",
                  "dgx-h100", "--json")
    assert code == 0


@pytest.mark.parametrize("extra", [[], ["--topology", "torus3d"],
                                   ["--system", "gb200-nvl72"]])
def test_huge_clusters_are_refused_before_building(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   extra: list[str]) -> None:
    import fabricsim.fabric.cluster as cluster

    def must_not_build(*_a: object, **_k: object) -> None:
        raise AssertionError("started building")

    monkeypatch.setattr(cluster.ServerTemplate, "from_system", must_not_build)
    code, err = run(capsys, "describe", "--nodes", "1000000", *extra)
    assert code == 2 and "nodes" in err and "262,144" in err


def _alias_bomb(levels: int) -> str:
    text = 'a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]\n'
    for i in range(1, levels):
        text += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]\n"
    return text + "cluster:\n  nodes: 1\n"


@pytest.mark.parametrize(("text", "needle"), [
    (_alias_bomb(9), "alias"),
    ("cluster: " + "[" * 200 + "]" * 200 + "\n", "nested"),
    ("cluster: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    ("cluster:\n  nodes: 2\n  nodes: 4\n", "appears twice"),
    ("# nothing here\n", "empty"),
    ("", "empty"),
])
def test_hostile_yaml_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                 text: str, needle: str) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    code, err = run(capsys, "validate", str(p))
    assert code == 2 and needle in err


@pytest.mark.parametrize(("data", "needle"), [
    ("cluster:\n  nodes: 2\n".encode("utf-16"), "UTF-16"),
    (b"cluster:\x00\x01", "binary"),
    ("cluster:\n  name: caf\xe9\n".encode("latin-1"), "not UTF-8"),
])
def test_files_that_are_not_utf8_text(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                      data: bytes, needle: str) -> None:
    p = tmp_path / "s.yaml"
    p.write_bytes(data)
    code, err = run(capsys, "validate", str(p))
    assert code == 2 and needle in err


@pytest.mark.parametrize("cmd", [["validate"], ["compare"]])
def test_endless_files_are_read_only_up_to_the_limit(capsys: pytest.CaptureFixture[str],
                                                     cmd: list[str]) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    code, err = run(capsys, *cmd, "/dev/zero", "--system", "dgx-a100") if cmd == ["compare"] \
        else run(capsys, *cmd, "/dev/zero")
    assert code == 2 and "larger than" in err


def test_compare_on_a_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = run(capsys, "compare", str(tmp_path), "--system", "dgx-a100")
    assert code == 2 and "folder" in err


def test_flapping_period_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "flap.yaml"
    p.write_text("cluster: {system: dgx-h100, nodes: 2}\n"
                 "collective: {collective: all_reduce, maxbytes: 1MiB, backend: flow}\n"
                 "faults:\n  - {type: link_flapping, kind: nic-leaf, index: 0, period: 0}\n")
    code, err = run(capsys, "simulate", str(p))
    assert code == 2 and "faults[0].period" in err


def test_bench_g_is_gpus_per_thread(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from fabricsim.protocols import PROTOCOLS

    def times(g: str, size: str, *extra: str) -> float:
        assert main(["bench", "all_reduce", "-b", size, "-e", size, "-g", g, "--system",
                     "dgx-a100", "--json", *extra]) == 0
        return float(json.loads(capsys.readouterr().out.splitlines()[0])["time_us"])

    # 1 KiB: the GPUs finish before one thread has issued the operation on all eight, so
    # the host's issue time is what nccl-tests measures (and what bench gives)
    one, eight = times("1", "1K"), times("8", "1K")
    assert one < eight == pytest.approx(8 * PROTOCOLS["ll"].launch_per_gpu * 1e6, rel=1e-3)
    # 1 GiB: the GPUs' time hides the host's whole: -g changes nothing
    assert times("8", "1G") == pytest.approx(times("1", "1G"), rel=1e-9)
    # every backend: the flow engine's run gets the same floor
    assert times("8", "1K", "--backend", "flow") == pytest.approx(eight, rel=1e-3)


# ---------------------------------------------------------------- issue 40: hangs and blow-ups
def test_sizes_a_user_controls_are_bounded_before_any_work(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    storage = tmp_path / "storage.yaml"
    storage.write_text("cluster: {system: dgx-h100, nodes: 2, storage: true,\n"
                       "          params: {storage_targets: 100000000}}\n")
    code, err = run(capsys, "describe", str(storage))
    assert code == 2 and "storage_targets must be at most 16,384" in err
    window = tmp_path / "window.yaml"
    window.write_text("cluster: {system: dgx-h100, nodes: 2}\n"
                      "collective: {collective: all_reduce, maxbytes: 1MiB}\n"
                      "packet: {pfc: {deadlock_window: 0}}\n")
    code, err = run(capsys, "packet", str(window))
    assert code == 2 and "packet.pfc.deadlock_window" in err
    many = ",".join(["ib-ndr"] * 2000)
    code, err = run(capsys, "plan", "--gpus", "64", "--model", "llama3-8b", "--fabrics", many)
    assert code == 2 and "given more than once" in err and len(err) < 400
    log = tmp_path / "all_reduce_perf.log"
    lines = [f"#  Rank {r:6d} Group  0 Pid  1 on host{r:06d} device  0 [0x1b] NVIDIA H100"
             for r in range(320_000)]
    row = ("           8             2     float     sum      -1    30.00    0.00    0.00      0"
           "    30.00    0.00    0.00      0")
    log.write_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)\n#\n"
                   "# Using devices\n" + "\n".join(lines) + "\n#\n" + row + "\n")
    code, err = run(capsys, "compare", str(log))
    assert code == 2 and "320,000 ranks" in err


def test_a_long_rejected_value_is_not_echoed_whole() -> None:
    from pydantic import BaseModel, Field, ValidationError

    from fabricsim._strict import config_error

    class Few(BaseModel):
        names: tuple[str, ...] = Field(max_length=16)

    with pytest.raises(ValidationError) as e:
        Few.model_validate({"names": [f"f{i}" for i in range(2000)]})
    err = config_error(e.value)
    assert "(2000 items in all)" in str(err) and len(str(err)) < 400


# ---------------------------------------------------------------- issue 40: settings that cannot be
def test_a_user_defined_systems_price_is_used_and_must_be_finite(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import json

    f = tmp_path / "priced.yaml"
    f.write_text("systems:\n  my-h100: {base: dgx-h100, gpu_hour_usd: 3.5}\n"
                 "cluster: {system: my-h100, nodes: 2}\ntraining: {model: llama3-8b}\n")
    assert main(["train", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpu_hour_usd"] == 3.5 and d["comm_usd_per_day"] > 0   # was $0.00
    f.write_text(f.read_text().replace("3.5", ".inf"))
    code, err = run(capsys, "train", str(f))
    assert code == 2 and "systems.my-h100.gpu_hour_usd" in err


@pytest.mark.parametrize(("ranks", "words"), [
    ("[0, 999]", "0..15"), ("[-1, 0]", "0..15"), ("[]", "at least two"),
    ("[0, 0, 1]", "must not repeat"), ("[3]", "at least two")])
def test_collective_ranks_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                      ranks: str, words: str) -> None:
    f = tmp_path / "ranks.yaml"
    f.write_text("cluster: {system: dgx-h100, nodes: 2}\ncollective: {collective: all_reduce,"
                 f" minbytes: 1MiB, maxbytes: 1MiB, ranks: {ranks}}}\n")
    code, err = run(capsys, "bench", "scenario", str(f))
    assert code == 2 and "collective.ranks" in err and words in err


def test_settings_no_hardware_has_are_refused(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    code, err = run(capsys, "bench", "all_reduce", "--nodes", "2", "-b", "100G", "-e", "100G")
    assert code == 2 and "collective.maxbytes" in err and "80 GiB" in err
    f = tmp_path / "cal.yaml"
    f.write_text("cluster: {system: dgx-h100, nodes: 2,\n"
                 "          params: {calibration: {net.efficiency: 1.0e-300}}}\n")
    code, err = run(capsys, "describe", str(f))
    assert code == 2 and "params.calibration.net.efficiency" in err
    f.write_text("systems:\n  weak: {base: dgx-h100, gpu_power_w: 1.0e-9}\n"
                 "cluster: {system: weak, nodes: 1}\n")
    code, err = run(capsys, "describe", str(f))
    assert code == 2 and "gpu_power_w" in err


@pytest.mark.parametrize(("entry", "words"), [
    ("faults: [{type: link_down, kind: leaf-spine, index: 0, start: -1s}]", "cannot read time"),
    ("faults: [{type: link_down, link: 'server0/nic0->leaf0.0', kind: nic-leaf}]",
     "not both"),
    ("background: [{pattern: pairs, src: [1], dst: [1]}]", "to itself"),
    ("background: [{pattern: incast, src: [3], dst: [3]}]", "needs senders"),
    ("background: [{traffic_class: gold}]", "'storage', 'checkpoint'"),
])
def test_simulate_refuses_faults_and_traffic_that_cannot_be(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, entry: str, words: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("cluster: {system: dgx-h100, nodes: 2}\n"
                 "collective: {collective: all_reduce, maxbytes: 1MiB, algo: ring}\n"
                 + entry + "\n")
    code, err = run(capsys, "simulate", str(f))
    assert code == 2 and words in err, err


def test_a_refusal_names_its_real_reason(capsys: pytest.CaptureFixture[str]) -> None:
    """issue 40: bench alltoall --nodes 512 blamed NCCL_ALGO (never set)."""
    code, err = run(capsys, "bench", "alltoall", "--nodes", "512", "-b", "1M", "-e", "1M")
    assert code == 2 and "NCCL_ALGO" not in err and "transfers (limit" in err


def test_a_log_of_mixed_gpus_is_not_modelled_as_one_without_a_word(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = [f"#  Rank {r:2d} Group  0 Pid  1 on host0 device  {r} [0x1b] "
             + ("NVIDIA H100 80GB HBM3" if r < 7 else "NVIDIA A100-SXM4-80GB") for r in range(8)]
    row = ("     1048576        262144     float     sum      -1    30.00   34.95   61.17      0"
           "    30.00   34.95   61.17      0")
    log = tmp_path / "all_reduce_perf.log"
    log.write_text("# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor)\n#\n"
                   "# Using devices\n" + "\n".join(lines) + "\n#\n" + row + "\n")
    code, err = run(capsys, "compare", str(log))
    assert code == 2 and "different GPUs" in err and "--system" in err
    code, err = run(capsys, "compare", str(log), "--system", "dgx-h100")
    assert code == 0 and "every one is modelled as dgx-h100's" in err
