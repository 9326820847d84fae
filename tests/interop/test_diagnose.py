"""Fault localisation from pairwise runs (fabricsim.interop.diagnose, fabricsim diagnose)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_module import load

from fabricsim.cli.app import main
from fabricsim.errors import ConfigError
from fabricsim.interop.diagnose import PairRun, diagnose

ROOT = Path(__file__).resolve().parents[2]
PAIRS = sorted((ROOT / "tests" / "data" / "nccl_logs" / "pairs").glob("*.log"))


def test_cli_names_the_degraded_host(capsys) -> None:
    assert main(["diagnose", *map(str, PAIRS), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["identified"] and d["hosts"] == 6 and d["system"] == "dgx-h100"
    top = d["suspects"][0]
    assert top["component"] == "host h100-04" and len(top["slow_runs"]) == 5
    assert all(r["slower_by"] > 0.5 for r in top["slow_runs"])


def test_healthy_runs_give_no_suspect_and_say_why() -> None:
    runs = [PairRun((f"n{a}", f"n{b}"), "all_reduce", 2**28, 1000.0)
            for a in range(4) for b in range(a + 1, 4)]
    rep = diagnose(runs, baseline_us=lambda r: 1000.0)
    assert not rep.suspects and not rep.identified and "nothing to suspect" in rep.why


def test_failures_are_evidence() -> None:
    runs = [PairRun(("n0", "n1"), "all_reduce", 2**28, 1000.0),
            PairRun(("n1", "n2"), "all_reduce", 2**28, None, "Test NCCL failure"),
            PairRun(("n2", "n3"), "all_reduce", 2**28, None, "Test NCCL failure"),
            PairRun(("n0", "n3"), "all_reduce", 2**28, 1000.0),
            PairRun(("n1", "n3"), "all_reduce", 2**28, 1000.0),
            PairRun(("n0", "n2"), "all_reduce", 2**28, None, "Test NCCL failure")]
    rep = diagnose(runs, baseline_us=lambda r: 1000.0)
    assert rep.identified and rep.suspects[0].component == "host n2"
    assert len(rep.suspects[0].failed_runs) == 3


def test_what_runs_cannot_separate_is_said() -> None:
    """n0 and n1 meet only each other: their slow run cannot say which of them is bad."""
    runs = [PairRun(("n0", "n1"), "all_reduce", 2**28, 3000.0),
            PairRun(("n2", "n3"), "all_reduce", 2**28, 1000.0),
            PairRun(("n4", "n5"), "all_reduce", 2**28, 1000.0)]
    rep = diagnose(runs, baseline_us=lambda r: 1000.0)
    assert not rep.identified and "cannot tell apart" in rep.why
    assert set(rep.suspects[0].names()) == {"host n0", "host n1"}


def test_bad_input(capsys, tmp_path) -> None:
    with pytest.raises(ConfigError, match="two-host runs"):
        diagnose([])
    one = ROOT / "tests" / "data" / "nccl_logs" / "all_reduce_perf_dgx_a100.log"
    assert main(["diagnose", str(one)]) == 2
    assert "two hosts" in capsys.readouterr().err
    assert main(["diagnose", str(tmp_path / "none.log")]) == 2


def _bench():  # type: ignore[no-untyped-def]
    return load("diagnose_faults")


@pytest.mark.parametrize(("kind", "seed"), [("nic_degraded", 2012),
                                            ("leaf_spine_degraded", 1019),
                                            ("nic_flapping", 2012)])
def test_simulated_faults_are_found(kind: str, seed: int) -> None:
    """One trial of benchmarks/diagnose_faults.py per fault type (8 servers each): the
    faulty host or link is in the top suspect group (a spine port that serves one host
    alone is crossed by exactly that host's cross-leaf runs, so the two may share it)."""
    row = _bench().trial(kind, seed)
    assert row["servers"] == 8 and row["found"]


def test_system_must_have_the_logs_gpu(capsys) -> None:
    """The pairs are H100 runs: an A100 system is refused (as compare refuses it), and so
    is a set of logs from different GPUs."""
    assert main(["diagnose", *map(str, PAIRS), "--system", "dgx-a100"]) == 2
    err = capsys.readouterr().err
    assert "--system dgx-a100 has a100-sxm GPUs" in err and "H100" in err
    a100 = ROOT / "tests" / "data" / "nccl_logs" / "all_reduce_perf_dgx_a100.log"
    assert main(["diagnose", *map(str, PAIRS), str(a100)]) == 2
    assert "LOGS: the logs ran on different GPUs" in capsys.readouterr().err


def test_a_folder_with_aborted_logs_and_other_files_is_read_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 37: a folder path was refused, and one log with no result rows (a test that
    died) refused the whole set; the dead runs are the strongest evidence."""
    import shutil

    from fabricsim.cli.app import main

    runs = tmp_path / "acceptance"
    runs.mkdir()
    for p in PAIRS:
        shutil.copy(p, runs / p.name)
    dead = runs / "all_reduce_h100-02_h100-04.log"  # it listed its devices and died
    head = [x for x in dead.read_text().splitlines() if x.startswith("#")][:21]
    dead.write_text("\n".join(head) + "\n")
    (runs / "README.txt").write_text("acceptance run of 2026-11-28\n")
    assert main(["diagnose", str(runs), "--system", "dgx-h100", "--json"]) == 0
    out = capsys.readouterr()
    assert "skipped README.txt" in out.err
    rep = json.loads(out.out)
    top = rep["suspects"][0]
    assert "h100-04" in top["component"] and "h100-02-h100-04" in top["failed_runs"]
    assert main(["diagnose", str(runs / "*.log"), "--system", "dgx-h100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["suspects"][0]["component"] == top["component"]


def test_a_real_acceptance_folder_names_the_host_that_fails_most(capsys) -> None:
    """issue 37: a public 17-host acceptance run (136 pairwise logs, 19 with failed
    tests, tests/data/acceptance/README.md) read as a folder: the failed runs count as
    evidence, and the host in most failed pairs (cnode2-003: 8 of the run's 18) is named
    first."""
    folder = Path(__file__).resolve().parents[1] / "data" / "acceptance" / \
        "cluster00-pairwise-g4"
    assert main(["diagnose", str(folder), "--system", "dgx-h100", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["identified"] and d["hosts"] == 17
    first = d["suspects"][0]
    assert first["component"] == "host cnode2-003"
    # the eight failed pairs the run's own failures.txt lists with cnode2-003
    assert sorted(first["failed_runs"]) == [f"cnode2-{a}-cnode2-{b}" for a, b in (
        ("001", "003"), ("003", "005"), ("003", "008"), ("003", "010"), ("003", "011"),
        ("003", "012"), ("003", "013"), ("003", "015"))]
