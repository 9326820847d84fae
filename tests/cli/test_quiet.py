"""Commands that can take more than a few seconds show progress on a terminal and take
``--quiet`` for scripts: nothing on stdout but what a script needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.cli.app import main

INCAST = """
cluster: {system: dgx-h100, nodes: 4, gpus_per_node: 1, fabric: roce-400g}
packet: {traffic: {pattern: incast, nbytes: 1MB}}
"""
SLOW_NIC = """
cluster: {system: dgx-h100, nodes: 2, fabric: ib-ndr}
collective: {maxbytes: 16MiB, algo: ring}
faults: [{type: slow_nic, node: 0, index: 1, factor: 0.5}]
"""


def test_packet_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text(INCAST)
    assert main(["packet", str(sc), "--quiet", "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out == ""
    assert (tmp_path / "o" / "report.json").exists()


def test_simulate_quiet_json_still_prints(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text(SLOW_NIC)
    assert main(["simulate", str(sc), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["simulate", str(sc), "--quiet", "--json"]) == 0
    assert '"slowdown"' in capsys.readouterr().out


def test_report_and_demo_quiet_print_paths(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text(SLOW_NIC)
    assert main(["report", str(sc), "-o", str(tmp_path / "r"), "-q"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "r" / "report.html")]
    assert main(["demo", "-o", str(tmp_path / "d"), "--section", "cluster", "-q"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "d" / "report.html"),
                                               str(tmp_path / "d" / "report.md")]


def test_a_scenario_command_says_it_does_not_read_nccls_variables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench`` reads NCCL_* from the shell; a command that runs a scenario as written
    says so instead of ignoring them silently (logging variables change no time)."""
    sc = tmp_path / "s.yaml"
    sc.write_text(SLOW_NIC)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    assert main(["simulate", str(sc), "--quiet"]) == 0
    assert "NCCL" not in capsys.readouterr().err
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", "4")
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    assert main(["simulate", str(sc), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "NCCL_ALGO, NCCL_MAX_NCHANNELS are set in the environment" in err
    assert "only `fabricsim bench` reads" in err
    assert "takes them as collective: {env:" in err  # simulate reads the section's
    from fabricsim.cli.app import nccl_variables_note

    # train's model does not read the collective section: no pointer there
    note = nccl_variables_note("train", {"NCCL_ALGO": "Tree"})
    assert "its model runs NCCL's own choice" in note and "collective:" not in note
