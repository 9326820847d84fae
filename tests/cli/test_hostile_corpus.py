"""The project's own hostile-input corpus (issue 40, part 7), by class: every entry is
refused with exit 2 naming its field, never a traceback; and a fuzzer that mutates the
shipped scenarios' values (derandomized and small in CI, larger under ``make fuzz``)
holding every command to the same: exit 0 or 2, no traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.cli.app import main
from fabricsim.scenario.loader import shipped_scenarios

BASE = "cluster: {system: dgx-h100, nodes: 2}\n"
COLL = "collective: {collective: all_reduce, maxbytes: 1MiB, algo: ring}\n"

#: (class, command, scenario text, the field the error must name)
CORPUS: list[tuple[str, str, str, str]] = [
    # sizes a user controls
    ("size", "describe", "cluster: {system: dgx-h100, nodes: 2, storage: true, params: "
     "{storage_targets: 100000000}}\n", "storage_targets"),
    ("size", "describe", "cluster: {system: dgx-h100, nodes: 100000}\n", "cluster.nodes"),
    ("size", "bench", "cluster: {system: dgx-h100, nodes: 2}\ncollective: {collective: "
     "all_reduce, minbytes: 100GiB, maxbytes: 100GiB}\n", "collective.maxbytes"),
    # timers and physics
    ("physics", "packet", BASE + COLL + "packet: {pfc: {deadlock_window: 0}}\n",
     "packet.pfc.deadlock_window"),
    ("physics", "describe", "cluster: {system: dgx-h100, nodes: 2, params: {calibration: "
     "{net.efficiency: 1.0e-300}}}\n", "params.calibration.net.efficiency"),
    ("physics", "describe", "systems:\n  w: {base: dgx-h100, gpu_power_w: 1.0e-9}\n"
     "cluster: {system: w, nodes: 1}\n", "gpu_power_w"),
    ("price", "train", "systems:\n  p: {base: dgx-h100, gpu_hour_usd: .inf}\n"
     "cluster: {system: p, nodes: 1}\ntraining: {model: llama3-8b}\n", "gpu_hour_usd"),
    # ranks
    ("ranks", "bench", BASE + "collective: {collective: all_reduce, maxbytes: 1MiB, "
     "ranks: [0, 999]}\n", "collective.ranks"),
    ("ranks", "bench", BASE + "collective: {collective: all_reduce, maxbytes: 1MiB, "
     "ranks: []}\n", "collective.ranks"),
    ("ranks", "bench", BASE + "collective: {collective: all_reduce, maxbytes: 1MiB, "
     "ranks: [0, 0, 1]}\n", "collective.ranks"),
    # faults and traffic
    ("faults", "simulate", BASE + COLL + "faults: [{type: link_down, kind: leaf-spine, "
     "index: 0, start: -1s}]\n", "faults"),
    ("faults", "simulate", BASE + COLL + "faults: [{type: link_down, link: "
     "'server0/nic0->leaf0.0', kind: nic-leaf}]\n", "faults"),
    ("faults", "simulate", BASE + COLL + "background: [{pattern: pairs, src: [1], "
     "dst: [1]}]\n", "background"),
    ("faults", "simulate", BASE + COLL + "background: [{traffic_class: gold}]\n",
     "background"),
    ("faults", "simulate", BASE + COLL + "faults:\n" + "".join(
        f"  - {{type: link_down, kind: nic-leaf, index: {i}}}\n" for i in range(32)),
     "faults"),
    ("extreme", "simulate", BASE + COLL + "faults: [{type: link_degraded, kind: leaf-spine,"
     " index: 0, factor: 0.001}]\n", "faults[0].factor"),
    ("extreme", "packet", BASE + COLL + "packet: {loss_rate: 0.02}\n", "packet.loss_rate"),
    # YAML itself
    ("yaml", "describe", "cluster: [unclosed\n", ""),
    ("yaml", "describe", "a: &x [*x]\n", ""),
    ("yaml", "describe", "cluster: {nodes: .nan}\n", "cluster.nodes"),
]


@pytest.mark.parametrize(("cls", "cmd", "text", "field"), CORPUS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CORPUS)])
def test_the_corpus_is_refused_naming_the_field(
        cls: str, cmd: str, text: str, field: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "hostile.yaml"
    f.write_text(text)
    argv = [cmd, "scenario", str(f)] if cmd == "bench" else [cmd, str(f)]
    code = main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err, out.err[-600:]
    assert code == 2, (cls, out.err[-400:])
    assert out.err.startswith("error: ") and field in out.err, (cls, out.err[-400:])


_HOSTILE_VALUES = st.one_of(
    st.integers(min_value=-2**63, max_value=2**63), st.floats(allow_nan=True),
    st.sampled_from(["", "-1", "1e308", "0", "NaN", "inf", "-1s", "1ZiB", "x" * 300, "~",
                     "[]", "{}", "null", "true"]),
    st.lists(st.integers(min_value=-5, max_value=10 ** 9), max_size=4))


def _leaves(tree: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    if isinstance(tree, dict):
        return [p for k, v in tree.items() for p in _leaves(v, (*path, k))]
    if isinstance(tree, list):
        return [p for i, v in enumerate(tree) for p in _leaves(v, (*path, i))]
    return [path]


def _mutated(text: str, pick: int, value: object, folder: Path
             ) -> tuple[Path, tuple[object, ...]]:
    """The scenario ``text`` with its ``pick``-th leaf (modulo their number) set to
    ``value``, written to ``folder``; the file and the leaf's path."""
    tree = yaml.safe_load(text)
    leaves = _leaves(tree)
    path = leaves[pick % len(leaves)]
    node = tree
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    f = folder / "mutated.yaml"
    f.write_text(yaml.safe_dump(tree))
    return f, path


_SMALL = [name for name, text in sorted(shipped_scenarios().items())
          if "packet:" not in text and "training:" not in text
          and "inference:" not in text][:6]


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(name=st.sampled_from(_SMALL), pick=st.integers(min_value=0), value=_HOSTILE_VALUES)
def test_a_mutated_scenario_is_run_or_refused_never_a_traceback(
        name: str, pick: int, value: object, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    f, path = _mutated(shipped_scenarios()[name], pick, value, tmp_path)
    for cmd in ("validate", "describe"):  # describe builds the fabric too
        code = main([cmd, str(f)])
        out = capsys.readouterr()
        assert "Traceback" not in out.out + out.err, (cmd, path, value, out.err[-600:])
        assert code in (0, 2), (cmd, path, value, code, out.err[-400:])
        if code == 2:
            assert out.err.startswith("error: "), out.err[-300:]
            break


#: A small cluster scenario with every section the cluster kind reads (jobs of each
#: kind, checkpoints, failures, faults): mutated, `validate` and `cluster` answer or
#: refuse by name, never a traceback.
_CLUSTER = """
cluster: {system: dgx-h100, nodes: 8, fabric: roce-400g}
placement: spread
checkpoints: [{job: a, to: [7], every: 30min, rate: 50GB/s}]
failure: {servers: [0], gpus: [9], repair_hours: 4}
faults: [{type: link_degraded, kind: leaf-spine, index: 0, factor: 0.5}]
jobs:
  - {name: a, gpus: 16, training: {model: llama3-8b, tp: 8, global_batch: 16}}
  - {name: b, gpus: 16, collective: {collective: all_reduce, size: 64MiB, gap: 1ms}}
  - {name: c, gpus: 8, inference: {model: llama3-8b, tp: 8, batch: 8}}
"""


@settings(max_examples=examples(10), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(pick=st.integers(min_value=0), value=_HOSTILE_VALUES)
def test_a_mutated_cluster_is_run_or_refused_never_a_traceback(
        pick: int, value: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f, path = _mutated(_CLUSTER, pick, value, tmp_path)
    for cmd in (["validate", str(f)], ["cluster", str(f), "--quiet"]):
        code = main(cmd)
        out = capsys.readouterr()
        assert "Traceback" not in out.out + out.err, (cmd[0], path, value, out.err[-600:])
        assert code in (0, 2), (cmd[0], path, value, code, out.err[-400:])
        if code == 2:
            break
