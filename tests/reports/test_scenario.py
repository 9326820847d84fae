"""write_report: a section for each thing a scenario holds, figures and files listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from fabricsim.reports.scenario import kinds, sweep_sizes, write_report
from fabricsim.scenario import Scenario


def test_sweep_sizes_are_bounded() -> None:
    s = sweep_sizes(8, 2**33, 2, limit=10)
    assert s[0] == 8 and s[-1] == 2**33 and len(s) <= 11
    assert sweep_sizes(1000, 1000) == [1000]
    assert sweep_sizes(1, 100, 10) == [1, 10, 100]


def test_kinds() -> None:
    sc = Scenario.model_validate({"packet": {"traffic": {"pattern": "incast"}},
                                  "faults": [{"type": "slow_node", "node": 0,
                                              "delay": "1us"}]})
    assert kinds(sc) == ["cluster", "packet"]  # packet runs apply their own faults


def test_collective_and_faults(tmp_path: Path) -> None:
    sc = Scenario.model_validate({
        "name": "two-servers", "description": "a slow NIC",
        "cluster": {"system": "dgx-h100", "nodes": 2, "fabric": "ib-ndr"},
        "collective": {"minbytes": "1MiB", "maxbytes": "64MiB", "algo": "ring"},
        "faults": [{"type": "slow_nic", "node": 0, "index": 3, "factor": 0.5}]})
    files = write_report(sc, tmp_path)
    assert files.sections == ["1. The cluster", "2. all_reduce against message size",
                              "3. Faults and background traffic", "Files written"]
    md = files.markdown.read_text()
    assert "a slow NIC" in md and "server0/nic3" in md
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert figures == ["hierarchy.png", "collective.png", "fault_impact.png",
                       "link_utilization.png"]
    names = {p.name for p in files.files}
    assert {"transfers.parquet", "link_utilization.parquet", "summary.json",
            "report.html", "report.md", *figures} == names
    assert files.files[files.html] == files.html.stat().st_size
    for f in figures:  # the files table lists each with its size
        assert re.search(rf"\| `{re.escape(f)}` \| [\d.]+ KiB \|", md)
    assert files.total_bytes() < 20 * 2**20


def test_time_limit_names_the_flag(tmp_path: Path) -> None:
    from fabricsim.errors import SimulationError

    sc = Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 2},
                                  "collective": {"maxbytes": "1MiB"}})
    with pytest.raises(SimulationError, match="time limit") as e:
        write_report(sc, tmp_path, time_limit_s=1e-9)
    assert e.value.field == "--time-limit"


def test_packet_section_names_a_deadlock(tmp_path: Path) -> None:
    from fabricsim.reports.document import Doc
    from fabricsim.reports.scenario import section_packet
    from fabricsim.scenario import load_scenario

    doc = Doc(tmp_path)
    (run,) = section_packet(doc, load_scenario("packet-pfc-deadlock"), variants=[None])
    md = "\n".join(doc.lines)
    assert run.summary["status"] == "pfc_deadlock"
    assert "| base | pfc deadlock |" in md
    cycle = run.summary["deadlock"]["cycle"]
    assert "**base: PFC deadlock.** The pause cycle " + " → ".join(
        f"`{x}`" for x in cycle) in md


def test_the_collective_section_runs_under_the_scenarios_nccl_variables(
        tmp_path: Path) -> None:
    """The sweep's collective.env reaches the report as it reaches bench: 4 queue pairs a
    connection on RoCE's hashed ECMP (the shipped bench-roce-qps) give bench's figure at
    the largest size, not the one queue pair of the cluster alone, and the text names
    the variables."""
    from fabricsim import jobs
    from fabricsim.scenario.loader import load_scenario

    sc = load_scenario("bench-roce-qps")
    md = write_report(sc, tmp_path).markdown.read_text()
    want = jobs.run(jobs.job_from_scenario("bench", sc)).rows[None][-1].busbw_gbps
    alone = sc.model_copy(update={"collective": sc.collective.model_copy(
        update={"env": {}})})
    other = jobs.run(jobs.job_from_scenario("bench", alone)).rows[None][-1].busbw_gbps
    assert abs(want - other) > 10
    assert f"| {want:,.1f} |" in md and f"| {other:,.1f} |" not in md
    assert "under the scenario's NCCL_IB_QPS_PER_CONNECTION=4" in md
