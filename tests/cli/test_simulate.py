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
    assert main(["simulate", str(sc), "--json", "--out", str(out), "--csv"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["slowdown"] > 1.3
    assert d["causes"][0]["description"] == "server0/nic7 at 0.5 of its bandwidth"
    assert d["bottlenecks"][0]["fault"] == "server0/nic7 at 0.5 of its bandwidth"
    names = {Path(o["path"]).name for o in d["outputs"]}
    assert names == {"link_utilization.parquet", "link_utilization.csv",
                     "transfers.parquet", "transfers.csv", "link_utilization.png",
                     "fault_impact.png", "summary.json"}
    assert all(o["bytes"] == Path(o["path"]).stat().st_size for o in d["outputs"])
    tab = pq.read_table(out / "link_utilization.parquet")
    assert tab.num_rows > 0 and max(tab.column("utilization").to_pylist()) <= 1 + 1e-9
    # per-transfer start/end: the last transfer ends when the collective does; every
    # transfer of the schedule is there with its ranks
    tr = pq.read_table(out / "transfers.parquet").to_pydict()
    assert max(tr["end"]) + d["pipeline_fill_s"] + d["crossings_s"] == \
        pytest.approx(d["time_s"], rel=1e-9)
    assert d["crossings_s"] > 0  # a ring across two servers crosses them
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


def test_outputs_default_to_parquet_resampled(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Without --csv no CSV is written; without --full the link table has one row per
    link per resampled interval, with --full one per link per instant of the run."""
    from fabricsim.reports.flow import DEFAULT_BINS

    sc = write(tmp_path, "  - {type: slow_nic, node: 0, index: 7, factor: 0.5}")
    small, full = tmp_path / "small", tmp_path / "full"
    assert main(["simulate", str(sc), "--out", str(small), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    assert not list(small.glob("*.csv"))
    assert {p.name for p in small.iterdir()} == {
        "link_utilization.parquet", "transfers.parquet", "link_utilization.png",
        "fault_impact.png", "summary.json"}
    rows = pq.read_table(small / "link_utilization.parquet").to_pydict()
    links = len(set(rows["link"]))
    assert len(rows["link"]) == links * DEFAULT_BINS
    assert main(["simulate", str(sc), "--out", str(full), "--full", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    whole = pq.read_table(full / "link_utilization.parquet").to_pydict()
    # the same bytes cross each link, however finely the time is cut
    by_link = {l: 0.0 for l in set(rows["link"])}
    for l, b in zip(whole["link"], whole["bytes"], strict=True):
        by_link[l] += b
    for l, b in zip(rows["link"], rows["bytes"], strict=True):
        by_link[l] -= b
    assert max(abs(v) for v in by_link.values()) < 1e-6 * max(whole["bytes"])
    assert d["outputs"] and "link_utilization.parquet" in d["outputs"][1]["path"]


def test_human_output_lists_files_and_sizes(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    sc = write(tmp_path, "  - {type: slow_nic, node: 0, index: 7, factor: 0.5}")
    assert main(["simulate", str(sc), "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "wrote 5 files" in text and "transfers.parquet" in text and "KiB" in text


def test_heatmap_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = write(tmp_path, "  - {type: slow_nic, node: 0, index: 7, factor: 0.5}")
    assert main(["simulate", str(sc), "--heatmap-rank", "hot"]) == 2
    assert "--heatmap-rank" in capsys.readouterr().err
    assert main(["simulate", str(sc), "--out", str(tmp_path / "o"), "-q",
                 "--heatmap-rank", "bytes"]) == 0
    assert (tmp_path / "o" / "link_utilization.png").stat().st_size > 5000


def test_no_route_from_the_start_is_refused_naming_the_ranks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = write(tmp_path, "  - {type: link_down, link: 'server0/nic7->leaf0.0'}")
    assert main(["simulate", str(sc), "--json"]) == 2
    err = capsys.readouterr().err
    assert "faults:" in err and "cannot run: no route for rank 7 -> rank" in err


def test_every_nic_down_is_refused_not_an_index_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 40: every NIC link down ended in IndexError inside flow routing."""
    sc = write(tmp_path, "\n".join(f"  - {{type: link_down, kind: nic-leaf, index: {i}}}"
                                   for i in range(32)))
    assert main(["simulate", str(sc)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "no route for rank" in err


def test_a_route_lost_during_the_run_is_reported_as_a_stall(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = write(tmp_path, "  - {type: link_down, link: 'server0/nic7->leaf0.0', start: 1us}")
    assert main(["simulate", str(sc), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["stalled"] is True and d["time_s"] is None and d["stalled_transfers"]
    assert d["cut_off"] and d["cut_off"][0].startswith("rank 7 -> rank")


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


@pytest.mark.parametrize("name", ["flow-degraded-link", "flow-flapping-storage",
                                  "flow-straggler"])
def test_shipped_scenarios_default_outputs_stay_small(name: str, tmp_path: Path) -> None:
    """Issue 16: a shipped scenario once wrote 413 MB; by default its outputs stay under
    20 MB (Parquet, resampled link utilisation) and summary.json lists every file."""
    out = tmp_path / name
    assert main(["simulate", name, "--out", str(out), "--quiet"]) == 0
    total = sum(p.stat().st_size for p in out.iterdir())
    assert 0 < total < 20 * 2**20
    listed = json.loads((out / "summary.json").read_text())["outputs"]
    assert {Path(o["path"]).name for o in listed} | {"summary.json"} == {
        p.name for p in out.iterdir()}
