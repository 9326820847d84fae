from pathlib import Path

import pytest

from fabricsim.errors import ConfigError, ModelError
from fabricsim.scenario import load_scenario, load_scenario_text
from fabricsim.scenario.loader import MAX_SCENARIO_BYTES


def test_minimal_defaults() -> None:
    s = load_scenario_text("cluster:\n  system: dgx-a100\n  nodes: 2\n")
    assert s.cluster.system == "dgx-a100" and s.cluster.nodes == 2
    assert s.faults == [] and s.collective is None


def test_error_names_field_and_line() -> None:
    text = "name: x\ncluster:\n  system: dgx-h100\n  nodes: -4\n"
    with pytest.raises(ConfigError) as e:
        load_scenario_text(text)
    msg = str(e.value)
    assert "cluster.nodes" in msg and "line 4" in msg and "-4" in msg


def test_unknown_field_rejected() -> None:
    with pytest.raises(ConfigError) as e:
        load_scenario_text("cluster:\n  sytem: dgx-h100\n")
    assert "cluster.sytem" in str(e.value)


def test_malformed_yaml_has_line() -> None:
    with pytest.raises(ConfigError) as e:
        load_scenario_text("cluster:\n  nodes: [1, 2\n")
    assert "malformed YAML" in str(e.value) and "line" in str(e.value)


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="mapping"):
        load_scenario_text("- a\n- b\n")


def test_fault_validation() -> None:
    with pytest.raises(ConfigError) as e:
        load_scenario_text("faults:\n  - type: link_degraded\n    factor: 3\n")
    assert "faults.0.factor" in str(e.value)


def test_huge_file_refused(tmp_path: Path) -> None:
    p = tmp_path / "big.yaml"
    p.write_text("#" * (MAX_SCENARIO_BYTES + 10))
    with pytest.raises(ConfigError, match="limit"):
        load_scenario(p)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_scenario("/nonexistent/scenario.yaml")


def test_shipped_examples_validate() -> None:
    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "examples").glob("*.yaml")) + sorted(
        (root / "src" / "fabricsim" / "scenarios").glob("*.yaml"))
    assert files, "no example scenarios found"
    for f in files:
        load_scenario(f)


def test_shipped_scenario_by_name() -> None:
    s = load_scenario("train-llama3-70b-256")
    assert s.cluster.nodes == 32
    with pytest.raises(ConfigError, match="train-llama3-70b-256"):
        load_scenario("train-llama3-70b-25")


def test_control_characters_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not YAML text: unacceptable character #x001f"):
        load_scenario_text("cluster:\n  nodes: 2\x1f\n")


def test_field_line_finds_fields_of_late_validated_sections() -> None:
    from fabricsim.scenario.loader import field_line

    text = "cluster:\n  nodes: 2\ntraining:\n  model: llama3-8b\n  tp: x\n"
    assert field_line(text, "training.tp") == 5
    assert field_line(text, "training.pp") == 3  # not written: its section's line
    assert field_line(text, "cluster.nodes (line 2)") == 2
    assert field_line("a: [", "a") is None
    assert field_line("\x1f", "a") is None


def test_check_sections_builds_and_checks_every_section() -> None:
    from fabricsim.jobs.check import check_sections

    sc = load_scenario_text("cluster: {nodes: 2}\ntraining: {model: llama3-8b, tp: 8}\n")
    assert check_sections(sc)[-1] == "training llama3-8b (tp 8, pp 1, dp 2)"
    # sizes and memory are checked against the cluster, as train checks them
    for text, field in (("training: {model: llama3-8b, tp: 3}", "training.tp"),
                        ("training: {model: llama3-8b, ep: 2}", "training.ep"),
                        ("training: {model: llama3-405b, zero: 0}", "training")):
        with pytest.raises(ModelError) as err:
            check_sections(load_scenario_text(f"cluster: {{nodes: 2}}\n{text}\n"))
        assert err.value.field == field
    # a job that does not run the training section only parses it
    big = load_scenario_text("cluster: {nodes: 2}\ntraining: {model: llama3-405b, zero: 0}\n")
    assert check_sections(big, "bench")[-1] == "training llama3-405b"
    bad = load_scenario_text("cluster: {nodes: 2}\ntraining: {model: llama3-8bb}\n")
    with pytest.raises(ConfigError, match="did you mean 'llama3-8b'") as e:
        check_sections(bad)  # the loader leaves training: to its module; this checks it
    assert e.value.field == "training.model"
