"""The ``fabricsim packet`` command."""

from __future__ import annotations

import json
from pathlib import Path

from fabricsim.cli.app import main

SMALL = """
name: tiny-incast
description: 3-to-1 incast
cluster: {system: dgx-h100, nodes: 4, gpus_per_node: 1, fabric: roce-400g}
packet:
  traffic: {pattern: incast, nbytes: 2MB}
  variants:
    no-dcqcn: {dcqcn: {enabled: false}}
"""


def test_packet_runs_base_and_variants_as_json(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SMALL)
    assert main(["packet", str(f), "--json", "--out", str(tmp_path / "out")]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in rep["runs"]] == ["base", "no-dcqcn"]
    assert all(r["complete"] and r["drops"]["lossless"] == 0 for r in rep["runs"])
    assert rep["runs"][1]["cnps"] == 0 and rep["runs"][0]["transport"] == "roce"
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"report.json", "fct_cdf.png", "pause_map.png", "queues.png",
            "throughput.png"} <= names


def test_packet_time_limit_keeps_done_runs_and_lists_the_rest(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SMALL)
    assert main(["packet", str(f), "--json", "--time-limit", "1e-9"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in rep["runs"]] == ["base"]  # the first run always finishes
    assert rep["skipped"] == ["no-dcqcn"]
    assert main(["packet", str(f), "--time-limit", "0"]) == 2
    assert "--time-limit" in capsys.readouterr().err


def test_packet_table_and_variant_selection(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SMALL)
    assert main(["packet", str(f), "--variant", "no-dcqcn"]) == 0
    out = capsys.readouterr().out
    assert "no-" in out and "tiny-incast" in out and "base" not in out


def test_packet_bad_input_is_a_clean_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SMALL.replace("nbytes: 2MB}", "nbytes: 2MB, bogus: 1}"))
    assert main(["packet", str(f)]) == 2
    assert "packet.traffic.bogus" in capsys.readouterr().err
    f.write_text(SMALL)
    assert main(["packet", str(f), "--variant", "nope"]) == 2
    assert main(["packet", "no-such-file.yaml"]) == 2


def test_packet_fault_on_an_unknown_link_is_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    fault = "  faults: [{type: link_flapping, link: leaf0.0->nowhere, period: 1ms}]\n"
    f.write_text(SMALL.replace("  variants:", fault + "  variants:"))
    assert main(["packet", str(f)]) == 2
    err = capsys.readouterr().err
    assert "packet.faults[0].link" in err and "nowhere" in err and "--export" in err


def test_packet_deadlock_is_reported_as_json(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ring.yaml"
    f.write_text("""
name: ring
cluster: {system: dgx-h100, nodes: 5, gpus_per_node: 1, fabric: roce-400g,
          topology: torus3d, params: {dims: [5, 1, 1]}}
packet:
  traffic: {pattern: pairs, nbytes: 1MB}
  pfc: {deadlock_window: 100us, watchdog: {enabled: false}}
""")
    assert main(["packet", str(f), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["status"] == "pfc_deadlock"
    assert len(run["deadlock"]["cycle"]) == 5


def test_shipped_scenarios_validate() -> None:
    from importlib.resources import files

    from fabricsim.backends.packet.config import PacketConfig
    from fabricsim.scenario import load_scenario

    paths = sorted(Path(str(files("fabricsim") / "scenarios")).glob("packet-*.yaml"))
    assert len(paths) == 12
    for p in paths:
        sc = load_scenario(p)  # the base and every variant, each read as a PacketConfig
        assert sc.packet is not None and isinstance(sc.packet.base, PacketConfig)
        assert all(isinstance(v, PacketConfig) for v in sc.packet.variants.values())
