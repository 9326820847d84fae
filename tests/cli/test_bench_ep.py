"""``fabricsim bench ep_dispatch|ep_combine|ep``: rows, formats, scenario, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim.cli.app import main


def test_json_rows_per_ep_size_kernel_and_phase(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ep", "--system", "dgx-h800", "--nodes", "2", "--ep", "8,16",
                 "--ep-kernel", "deepep", "--ep-kernel", "low_latency", "--tokens", "256",
                 "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) == 8
    assert {(r["ep"], r["kernel"], r["phase"]) for r in rows} >= {
        (16, "deepep", "dispatch"), (8, "deepep-ll", "combine")}
    assert all(r["time_us"] > 0 and r["limit"] for r in rows)
    ll16 = next(r for r in rows if r["ep"] == 16 and r["kernel"] == "deepep-ll")
    assert ll16["headline"] == "algbw"


def test_megatron_names_and_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "ep.png"
    assert main(["bench", "ep_dispatch", "--system", "dgx-h100", "--nodes", "2",
                 "--num-experts", "64", "--moe-router-topk", "6", "--hidden-size", "4096",
                 "--expert-model-parallel-size", "16", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "top-6 of 64 experts" in out and "deepep" in out and png.exists()


def test_scenario_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "ep.yaml"
    sc.write_text("cluster: {system: gb200-nvl72, nodes: 1}\n"
                  "expert_parallel: {tokens: 64, ep: [8, 72], kernels: [nvlink-onesided],"
                  " phases: [combine], experts: 288}\n")
    assert main(["bench", "ep", str(sc), "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["ep"], r["phase"]) for r in rows] == [(8, "combine"), (72, "combine")]


def test_histogram_routing_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    h = tmp_path / "load.txt"
    h.write_text(" ".join(["100"] * 63 + ["5000"]))
    assert main(["bench", "ep_dispatch", "--system", "dgx-h100", "--nodes", "2",
                 "--experts", "64", "--token-routing", str(h), "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["imbalance"] > 2


@pytest.mark.parametrize(("args", "field"), [
    (["--ep", "32"], "--ep"),
    (["--experts", "8", "--ep", "16"], "--ep"),
    (["--top-k", "300"], "--top-k"),
    (["--ep-kernel", "magic"], "--ep-kernel"),
    (["--token-routing", "zipf:abc"], "--token-routing"),
    (["--token-routing", "nowhere.txt"], "--token-routing"),
    (["--dtype", "int3"], "--dtype"),
    (["--tokens", "-4"], "tokens"),
])
def test_bad_input_exits_2_naming_the_field(args: list[str], field: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "ep_dispatch", "--system", "dgx-h100", "--nodes", "2", *args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert field in err


def test_ep_flags_refused_on_nccl_collectives(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "all_reduce", "--top-k", "8"]) == 2
    assert "--top-k" in capsys.readouterr().err


def test_histogram_mismatch_and_not_a_distribution(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    h = tmp_path / "load.txt"
    h.write_text("1 2 3")
    assert main(["bench", "ep_dispatch", "--system", "dgx-h100", "--nodes", "2",
                 "--token-routing", str(h)]) == 2
    assert "one figure per expert" in capsys.readouterr().err
    h.write_text(" ".join(["0"] * 256))
    assert main(["bench", "ep_dispatch", "--system", "dgx-h100", "--nodes", "2",
                 "--token-routing", str(h)]) == 2
    assert "distribution" in capsys.readouterr().err


def test_validate_checks_the_section_against_the_cluster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that validates runs: EP sizes beyond the cluster or the experts, and a
    top-k beyond the experts, are refused by validate naming the section's field."""
    f = tmp_path / "ep.yaml"
    f.write_text("cluster: {system: dgx-h100, nodes: 2}\n"
                 "expert_parallel: {tokens: 128, ep: [32]}\n")
    assert main(["validate", str(f)]) == 2
    assert "expert_parallel.ep" in capsys.readouterr().err
    f.write_text("cluster: {system: dgx-h100, nodes: 2}\n"
                 "expert_parallel: {tokens: 128, top_k: 300}\n")
    assert main(["validate", str(f)]) == 2
    assert "expert_parallel.top_k" in capsys.readouterr().err
    f.write_text("cluster: {system: dgx-h100, nodes: 2}\n"
                 "expert_parallel: {tokens: 128, ep: [8, 16]}\n")
    assert main(["validate", str(f)]) == 0
    assert "EP 8, 16" in capsys.readouterr().out


def test_band_and_envelope_beside_every_result(capsys: pytest.CaptureFixture[str]) -> None:
    """Each family's held-out error is printed (and in the report's JSON); a system or a
    family no published figure covers is said."""
    from fabricsim.collectives.ep import ep_heldout

    assert main(["bench", "ep_dispatch", "--system", "dgx-h800", "--nodes", "2",
                 "--ep-kernel", "deepep-ll", "--ep-kernel", "nccl", "--tokens", "128"]) == 0
    out = capsys.readouterr().out
    ll = ep_heldout()["families"]["deepep-ll"]
    assert f"# accuracy, deepep-ll: \u00b1 {ll['median'] * 100:.0f} %" in out
    assert "no published nccl figure" in out
    assert main(["bench", "ep_dispatch", "--system", "aws-p5", "--nodes", "2",
                 "--ep-kernel", "deepep-ll", "--tokens", "128"]) == 0
    assert "no published deepep-ll figure on aws-p5" in capsys.readouterr().out
    # a family one source measures says so in the singular
    assert main(["bench", "ep_dispatch", "--system", "dgx-h100", "--nodes", "2",
                 "--ep-kernel", "hybridep", "--ep-kernel", "deepep-ll", "--tokens", "128"]) == 0
    out = capsys.readouterr().out
    assert "figures from 1 source)" in out and "figures from 3 sources)" in out


@pytest.mark.parametrize("flag", [["-b", "1M"], ["-d", "half"], ["--algo", "ring"],
                                  ["-g", "8"], ["-m", "4"]])
def test_nccl_tests_flags_are_refused_not_ignored(flag: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ep_dispatch", "--system", "dgx-h100", "--nodes", "2",
                 *flag]) == 2
    err = capsys.readouterr().err
    assert "nccl-tests sweep" in err and "Traceback" not in err
