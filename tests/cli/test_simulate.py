"""``fabricsim simulate``: slowdown, attribution and outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fabricsim.cli.app import main

SCEN = Path(__file__).resolve().parents[2] / "src" / "fabricsim" / "scenarios"


def write(tmp: Path, faults: str, background: str = "") -> Path:
    p = tmp / "s.yaml"
    p.write_text(f"""
name: small
cluster: {{system: dgx-h100, nodes: 2, fabric: ib-ndr, topology: fat-tree}}
collective: {{collective: all_reduce, maxbytes: 64MiB, algo: ring}}
faults:
{faults}
{background}
""")
    return p


def test_degraded_nic_slowdown_and_outputs(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    sc = write(tmp_path, "  - {type: slow_nic, node: 0, index: 7, factor: 0.5}")
    out = tmp_path / "out"
    assert main(["simulate", str(sc), "--json", "--out", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["slowdown"] > 1.3
    assert d["causes"][0]["description"] == "server0/nic7 at 0.5 of its bandwidth"
    assert d["bottlenecks"][0]["fault"] == "server0/nic7 at 0.5 of its bandwidth"
    names = {Path(p).name for p in d["outputs"]}
    assert names == {"link_utilization.parquet", "link_utilization.csv",
                     "transfers.parquet", "transfers.csv",
                     "link_utilization.png", "summary.json"}
    tab = pq.read_table(out / "link_utilization.parquet")
    assert tab.num_rows > 0 and max(tab.column("utilization").to_pylist()) <= 1 + 1e-9
    # per-transfer start/end: the last transfer ends when the collective does; every
    # transfer of the schedule is there with its ranks
    tr = pq.read_table(out / "transfers.parquet").to_pydict()
    assert max(tr["end"]) == pytest.approx(d["time_s"], rel=1e-9)
    assert all(e >= s0 for s0, e in zip(tr["start"], tr["end"], strict=True))
    assert all(dur > 0 for dur in tr["duration"])
    from fabricsim.collectives import build_schedule
    from fabricsim.fabric import build_cluster

    fab = build_cluster("dgx-h100", 2, fabric="ib-ndr", topology="fat-tree")
    sch = build_schedule(fab, "all_reduce", 64 * 2**20, algo="ring")
    want = {(i, t, int(st.src[t]), int(st.dst[t]))
            for i, st in enumerate(sch.steps) for t in range(len(st.src))}
    got = set(zip(tr["step"], tr["transfer"], tr["src"], tr["dst"], strict=True))
    assert got == want
    csv_rows = (out / "transfers.csv").read_text().splitlines()
    assert csv_rows[0].split(",")[:5] == ['"step"', '"rep"', '"transfer"', '"src"', '"dst"']
    assert len(csv_rows) == len(tr["start"]) + 1


def test_no_route_is_reported_as_stall(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    faults = "\n".join(f"  - {{type: link_down, link: 'server0/nic7->leaf0.{i}'}}"
                       for i in range(1))
    sc = write(tmp_path, faults)
    assert main(["simulate", str(sc), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["stalled"] is True and d["time_s"] is None and d["stalled_transfers"]


def test_human_output_and_packaged_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(SCEN / "flow-straggler.yaml"), "--size", "16MiB"]) == 0
    text = capsys.readouterr().out
    assert "slowdown" in text and "server 3 straggles by 20 us" in text


def test_bad_fault_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = write(tmp_path, "  - {type: link_degraded, link: 'leaf9->spine9', factor: 0.5}")
    assert main(["simulate", str(sc)]) == 2
    assert "faults[0].link" in capsys.readouterr().err


def test_packaged_flow_scenarios_validate() -> None:
    from fabricsim.scenario import load_scenario

    files = sorted(SCEN.glob("flow-*.yaml"))
    assert len(files) >= 2
    for f in files:
        sc = load_scenario(f)
        assert sc.collective is not None and (sc.faults or sc.background)
