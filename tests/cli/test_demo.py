from pathlib import Path

import pytest

from fabricsim.cli.app import main


def test_demo_writes_report_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    code = main(["demo", "--out", str(tmp_path), "--section", "cluster"])
    assert code == 0
    report = (tmp_path / "report.md").read_text()
    assert "InfiniBand NDR" in report and "RoCEv2 400G" in report
    assert (tmp_path / "hierarchy.png").stat().st_size > 1000
    assert "report.md" in capsys.readouterr().out


def test_demo_unknown_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--section", "clstr"]) == 2
    assert "cluster" in capsys.readouterr().err


def test_demo_training_section_has_its_picture(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--section", "training"]) == 0
    assert (tmp_path / "training.png").stat().st_size > 5000
    assert "![training step breakdown](training.png)" in (tmp_path / "report.md").read_text()
