"""``fabricsim report``: any scenario kind, one self-contained page, sections listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from fabricsim.cli.app import main


def test_training_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "train-llama3-70b-256", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "report.html" in out and "section: 2. A training step" in out
    md = (tmp_path / "report.md").read_text()
    assert re.findall(r"^## (.+)$", md, re.M) == ["1. The cluster", "2. A training step",
                                                  "Files written"]
    # the step split by network, and the fabrics compared with their cost
    assert "exposed comm on scale-out" in md and "| roce-400g |" in md and "| efa |" in md
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3


def test_packet_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "incast.yaml"
    sc.write_text("""
name: small-incast
cluster: {system: dgx-h100, nodes: 4, gpus_per_node: 1, fabric: roce-400g}
packet:
  traffic: {pattern: incast, nbytes: 1MB}
  variants:
    no-dcqcn: {dcqcn: {enabled: false}}
""")
    assert main(["report", str(sc), "-o", str(tmp_path / "r"), "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "r" / "report.html")
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## 2. Packet level" in md and "| no-dcqcn |" in md
    for f in ("packet_pause_map.png", "packet_queues.png", "packet_throughput.png",
              "packet_fct_cdf.png"):
        assert f"]({f})" in md and (tmp_path / "r" / f).stat().st_size > 5000


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "no-such-scenario", "-o", str(tmp_path)]) == 2
    assert "no-such-scenario" in capsys.readouterr().err
    assert main(["report", "train-llama3-70b-256", "--time-limit", "0"]) == 2
    assert "--time-limit" in capsys.readouterr().err
