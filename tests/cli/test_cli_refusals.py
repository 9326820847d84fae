"""Flags that cannot apply, and files a command cannot write, are refused before any work
with an error naming the flag (exit 2), never a traceback or a silently ignored flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.cli.app import main

H100 = ["--system", "dgx-h100"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    return code, out.err


@pytest.mark.parametrize("cmd", [
    ["bench", "all_reduce", *H100, "--nodes", "2"],
    ["scale", "--model", "llama3-8b", "--gpus", "8,64"],
    ["plan"],
])
def test_a_plot_needs_an_image_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    cmd: list[str]) -> None:
    code, err = run(capsys, *cmd, "--plot", str(tmp_path / "chart.txt"))
    assert code == 2 and "--plot" in err and ".png" in err
    code, err = run(capsys, *cmd, "--plot", str(tmp_path))
    assert code == 2 and "is a folder" in err


def test_a_plot_in_a_new_folder_is_written(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    out = tmp_path / "new" / "deeper" / "busbw.png"
    code, _ = run(capsys, "bench", "all_reduce", *H100, "--nodes", "2", "--plot", str(out))
    assert code == 0 and out.stat().st_size > 0


@pytest.mark.parametrize("cmd", [
    ["report", "flow-degraded-link", "--out"],
    ["demo", "--out"],
    ["packet", "packet-link-flap", "--out"],
    ["simulate", "flow-degraded-link", "--out"],
])
def test_an_output_folder_that_is_a_file_is_refused(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path, cmd: list[str]) -> None:
    f = tmp_path / "taken"
    f.write_text("keep me")
    code, err = run(capsys, *cmd, str(f))
    assert code == 2 and "--out" in err and "is a file" in err
    assert f.read_text() == "keep me"  # nothing a user gave is lost


@pytest.mark.parametrize(("extra", "field"), [
    (["--nodes", "1", "--gpus-per-node", "1"], "--gpus-per-node"),
    (["--nodes", "2", "-g", "9"], "--ngpus"),
    (["--nodes", "2", "-g", "3"], "--ngpus"),
    (["--nodes", "2", "-b", "1M", "-e", "8M", "-i", "1M", "-f", "3"], "--stepbytes"),
    (["--nodes", "2", "-i", "0"], "--stepbytes"),
    (["--nodes", "2", "--json", "--csv"], "--csv"),
    (["--nodes", "2", "-b", "1.5", "-e", "3"], "--minbytes"),
])
def test_bench_refuses_what_nccl_tests_could_not_run(capsys: pytest.CaptureFixture[str],
                                                     extra: list[str], field: str) -> None:
    code, err = run(capsys, "bench", "all_reduce", *H100, *extra)
    assert code == 2 and field in err


@pytest.mark.parametrize("flag", [["--csv"], ["--full"], ["--heatmap-rank", "bytes"]])
def test_simulate_file_options_need_out(capsys: pytest.CaptureFixture[str],
                                        flag: list[str]) -> None:
    code, err = run(capsys, "simulate", "flow-degraded-link", *flag)
    assert code == 2 and flag[0] in err and "--out" in err


@pytest.mark.parametrize(("extra", "field", "needle"), [
    (["--plot", "zz.png"], "--plot", "--pareto"),
    (["--parquet", "rows.txt"], "--parquet", ".parquet"),
])
def test_results_outputs_are_checked_first(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path, extra: list[str], field: str,
                                           needle: str) -> None:
    code, err = run(capsys, "results", str(tmp_path / "none.duckdb"), *extra)
    assert code == 2 and field in err and needle in err


@pytest.mark.parametrize(("cmd", "field"), [
    (["packet", "train-llama3-70b-256"], "packet"),
    (["packet", "packet-link-flap", "--event-budget", "99999999999999999999"],
     "packet.event_budget"),
    (["plan", "--lifetime-years", "nan"], "--lifetime-years"),
    (["plan", "--lifetime-years", "inf"], "--lifetime-years"),
    (["scale", "--model", "llama3-8b", "--gpus", "8,64", "--nodes", "4"], "--nodes"),
])
def test_settings_that_cannot_apply(capsys: pytest.CaptureFixture[str], cmd: list[str],
                                    field: str) -> None:
    code, err = run(capsys, *cmd)
    assert code == 2 and f"{field}:" in err


@pytest.mark.parametrize(("training", "field"), [
    ("{model: llama3-8b, ep: 2}", "training.ep"),
    ("{model: llama3-8b, tp: 3}", "training.tp"),
    ("{model: llama3-8b, vp: 2}", "training.vp"),
    ("{model: llama3-405b}", "training"),
])
def test_validate_checks_training_as_train_does(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path, training: str,
                                                field: str) -> None:
    f = tmp_path / "sc.yaml"
    f.write_text(f"cluster: {{system: dgx-h100, nodes: 4}}\ntraining: {training}\n")
    code, err = run(capsys, "validate", str(f))
    assert code == 2 and f"{field}:" in err


def test_an_oversubscription_the_leaves_cannot_split_is_noted(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["describe", *H100, "--nodes", "64", "--topology", "fat-tree",
                 "--oversubscription", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "not the 2:1 asked" in out and "43 down / 21 up" in out


@pytest.mark.parametrize(("cluster", "needle"), [
    ("{system: dgx-h100, nodes: 64, topology: fat-tree, radix: 7}", "is odd"),
    ("{system: dgx-h100, nodes: 64, topology: torus3d, radix: 8}", "no switches"),
])
def test_a_radix_that_cannot_apply(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                   cluster: str, needle: str) -> None:
    f = tmp_path / "sc.yaml"
    f.write_text(f"cluster: {cluster}\n")
    code, err = run(capsys, "validate", str(f))
    assert code == 2 and "radix:" in err and needle in err


def test_true_is_not_a_number_of_servers(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    f = tmp_path / "sc.yaml"
    f.write_text("cluster: {system: dgx-h100, nodes: true}\n")
    code, err = run(capsys, "validate", str(f))
    assert code == 2 and "cluster.nodes" in err and "true/false" in err
