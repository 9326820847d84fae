"""Scenario-level physical-validity rules (scenario/rules.py SCENARIO_RULES), the extreme
settings that need --force, and the rules table of docs/scenarios.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fabricsim.cli.app import main
from fabricsim.errors import ConfigError
from fabricsim.scenario import Scenario, load_scenario_text
from fabricsim.scenario.rules import RULES, SCENARIO_RULES, check_extreme

ROOT = Path(__file__).resolve().parents[2]
ROCE = {"system": "dgx-h100", "nodes": 2, "gpus_per_node": 1, "fabric": "roce-400g"}
LINK = {"type": "link_degraded", "kind": "leaf-spine", "index": 0}

#: rule name -> (scenario mapping that breaks it, field named, words of the reason)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "transport-matches-fabric": ({"cluster": ROCE, "packet": {"transport": "ib"}},
                                 "packet.transport", "needs InfiniBand switches"),
    "mtu-of-transport": ({"cluster": ROCE, "packet": {"mtu": 1500}}, "packet.mtu",
                         "five path MTUs"),
    "packet-ranks-exist": ({"cluster": ROCE, "packet": {"stuck_receiver": {"rank": 2}}},
                           "packet.stuck_receiver.rank", "only a GPU the cluster has"),
    "collective-sizes-ordered": ({"collective": {"minbytes": "1GB", "maxbytes": "1MB"}},
                                 "collective.minbytes", "smallest size up"),
    "collective-fits-gpu": ({"collective": {"maxbytes": "1TB"}}, "collective.maxbytes",
                            "cannot be allocated"),
    "scenario-times-finite": ({"faults": [{"type": "slow_gpu", "gpu": 0,
                                           "delay": "1e9s"}]},
                              "faults[0].delay", "not a day long"),
    "flap-period-positive": ({"faults": [{"type": "link_flapping", "kind": "leaf-spine",
                                          "index": 0, "period": 0}]},
                             "faults[0].period", "in no time"),
    "background-moves-bytes": ({"background": [{"pattern": "incast", "nbytes": 0}]},
                               "background[0].nbytes", "zero-byte flow"),
    "background-weight-finite": ({"background": [{"pattern": "incast",
                                                  "weight": float("inf")}]},
                                 "background[0].weight", "starve every other flow"),
}

#: extreme rule name -> (scenario mapping, field named, words of the reason)
EXTREME: dict[str, tuple[dict[str, Any], str, str]] = {
    "fault-factor-plausible": ({"faults": [{**LINK, "factor": 0.001}]}, "faults[0].factor",
                               "down for any operator"),
    "straggler-delay-plausible": ({"faults": [{"type": "slow_gpu", "gpu": 0,
                                               "delay": "5s"}]},
                                  "faults[0].delay", "hung, not straggling"),
}


def test_every_scenario_rule_has_a_case() -> None:
    assert set(CASES) == {r.name for r in SCENARIO_RULES if not r.extreme}
    assert set(EXTREME) == {r.name for r in SCENARIO_RULES if r.extreme}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_refuses_with_field_and_reason(name: str) -> None:
    data, field, reason = CASES[name]
    with pytest.raises(ConfigError) as e:
        Scenario.model_validate(data)
    assert e.value.field == field, str(e.value)
    assert reason in str(e.value) and f"rule {name}" in str(e.value)


@pytest.mark.parametrize("name", sorted(EXTREME))
def test_extreme_setting_needs_force(name: str) -> None:
    data, field, reason = EXTREME[name]
    sc = Scenario.model_validate(data)                  # legal: it loads
    with pytest.raises(ConfigError) as e:
        check_extreme(sc)
    assert e.value.field == field and reason in str(e.value) and "--force" in str(e.value)
    assert [x.field for x in check_extreme(sc, force=True)] == [field]


def test_rules_reach_variants_and_name_them() -> None:
    with pytest.raises(ConfigError) as e:
        Scenario.model_validate({"cluster": ROCE, "packet": {
            "variants": {"ib": {"transport": "ib"}}}})
    assert e.value.field == "packet.variants.ib.transport"
    with pytest.raises(ConfigError, match=r"packet\.variants\.v\.pfc\.xon.*in variant 'v'"):
        Scenario.model_validate({"cluster": ROCE, "packet": {
            "pfc": {"xoff": "100KB"}, "variants": {"v": {"pfc": {"xon": "200KB"}}}}})


def test_transports_a_fabric_carries_are_accepted() -> None:
    for fabric, transports in (("roce-400g", ("roce", "tcp")), ("ib-ndr", ("ib",)),
                               ("efa", ("srd", "tcp"))):
        for t in transports:
            Scenario.model_validate({"cluster": {**ROCE, "fabric": fabric},
                                     "packet": {"transport": t}})
    # packet.fabric moves a run to a fabric that carries the transport
    Scenario.model_validate({"cluster": ROCE, "packet": {"variants": {
        "ib": {"fabric": "ib-ndr", "transport": "ib"}}}})


def test_slingshot_carries_its_own_packets_and_tcp_at_most_2048_bytes() -> None:
    quad = {"system": "quad-gh200", "nodes": 2}
    for t in ("slingshot", "tcp"):
        Scenario.model_validate({"cluster": quad, "packet": {"transport": t}})
    Scenario.model_validate({"cluster": quad, "packet": {"mtu": 2048}})
    with pytest.raises(ConfigError, match="Slingshot's HPC Ethernet") as e:
        Scenario.model_validate({"cluster": quad, "packet": {"mtu": 4096}})
    assert e.value.field == "packet.mtu"
    with pytest.raises(ConfigError, match="Cassini NICs on Rosetta") as e:
        Scenario.model_validate({"cluster": quad, "packet": {"transport": "roce"}})
    assert e.value.field == "packet.transport"


def test_loader_refuses_a_rule_with_its_field() -> None:
    with pytest.raises(ConfigError, match=r"packet\.ecn\.kmin.*no ramp"):
        load_scenario_text("cluster: {fabric: roce-400g}\n"
                           "packet:\n  ecn: {kmin: 300KB, kmax: 200KB}\n")


def test_loss_above_one_percent_needs_force_and_gives_the_estimate() -> None:
    from fabricsim.jobs.packet import run_packet_scenario

    sc = Scenario.model_validate({"cluster": ROCE, "packet": {
        "transport": "tcp", "loss_rate": 0.999, "traffic": {"pattern": "incast",
                                                            "nbytes": "64KB"}}})
    with pytest.raises(ConfigError) as e:
        run_packet_scenario(sc)
    msg = str(e.value)
    assert e.value.field == "packet.loss_rate" and "--force" in msg
    assert "scale-out links" in msg and "events against the budget" in msg


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return str(p)


SMALL = """
cluster: {system: dgx-h100, nodes: 2, gpus_per_node: 1, fabric: roce-400g}
packet:
  transport: tcp
  traffic: {pattern: incast, nbytes: 64KB}
"""


def test_packet_cli_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path, SMALL + "  loss_rate: 0.02\n")
    assert main(["packet", f]) == 2
    err = capsys.readouterr().err
    assert "packet.loss_rate" in err and "--force" in err and "Traceback" not in err
    assert main(["packet", f, "--force", "--json"]) == 0


def test_packet_cli_event_budget_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    f = _write(tmp_path, SMALL.replace("64KB", "4MB"))
    assert main(["packet", f, "--event-budget", "1000"]) == 2
    err = capsys.readouterr().err
    assert "packet.event_budget" in err and "--event-budget" in err
    assert main(["packet", f, "--event-budget", "1000000", "--json"]) == 0


def test_simulate_cli_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path, "cluster: {system: dgx-h100, nodes: 2}\n"
               "collective: {maxbytes: 1MB}\n"
               "faults:\n  - {type: slow_nic, node: 0, factor: 0.001}\n")
    assert main(["simulate", f]) == 2
    err = capsys.readouterr().err
    assert "faults[0].factor" in err and "--force" in err
    assert main(["simulate", f, "--force", "--json"]) == 0


def test_simulate_size_obeys_the_collective_rules(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path, "cluster: {system: dgx-h100, nodes: 2}\n"
               "faults:\n  - {type: slow_nic, node: 0, factor: 0.5}\n")
    assert main(["simulate", f, "--size", "1TB"]) == 2
    assert "collective-fits-gpu" in capsys.readouterr().err


def test_docs_table_lists_every_rule() -> None:
    text = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    section = text[text.index("## Physical-validity rules"):]
    names = set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.M))
    assert names == {r.name for r in RULES}
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r"^\| `([a-z0-9-]+)` \| ([^|]*) \|", section, flags=re.M)}
    for r in RULES:  # the row names the fields the rule checks, as the rule does
        assert rows[r.name].strip().startswith(r.field), (r.name, rows[r.name], r.field)
