"""Every output a command writes is checked before the run (issue 40, part 1): a folder
that cannot be created, a name too long or a pseudo file system is refused with exit 2
naming the flag, never a traceback after a (sometimes long) run."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
SCEN = ROOT / "src" / "fabricsim" / "scenarios"
LOG = ROOT / "tests" / "data" / "nccl_logs" / "all_reduce_perf_dgx_a100.log"


def _places(tmp: Path) -> list[tuple[str, Path]]:
    blocker = tmp / "a-file"
    blocker.write_text("not a folder")
    return [("under a file", blocker / "sub"), ("name too long", tmp / ("n" * 300)),
            ("in /proc", Path("/proc/fabricsim-nowhere"))]


COMMANDS: list[tuple[str, list[str], str]] = [
    ("--plot", ["bench", "all_reduce", "--nodes", "2", "-b", "1M", "-e", "1M"], ".png"),
    ("--out", ["bench", "all_reduce", "--nodes", "2", "-b", "1M", "-e", "1M"], ".json"),
    ("--plot", ["scale", "--system", "dgx-h100", "--model", "llama3-8b", "--gpus", "8,16"],
     ".png"),
    ("--plot", ["plan", "--gpus", "64", "--model", "llama3-8b"], ".png"),
    ("--plot", ["compare", str(LOG)], ".png"),
    ("--plot", ["results", "--pareto", "cost_usd,busbw_gbps"], ".png"),
    ("--parquet", ["results"], ".parquet"),
    ("--output", ["calibrate", str(LOG)], ".yaml"),
    ("--chakra", ["train", "--system", "dgx-h100", "--nodes", "1", "--model", "llama3-8b"],
     ""),
    ("--export", ["describe", "--system", "dgx-h100", "--nodes", "2"], ".json"),
    ("--out", ["simulate", str(SCEN / "flow-degraded-link.yaml")], ""),
    ("--out", ["packet", str(SCEN / "packet-pause-storm.yaml")], ""),
    ("--out", ["report", str(SCEN / "flow-degraded-link.yaml")], ""),
    ("--out", ["demo"], ""),
]


@pytest.mark.parametrize(("flag", "argv", "suffix"), COMMANDS,
                         ids=[f"{a[0]} {f}" for f, a, _ in COMMANDS])
def test_an_unwritable_destination_is_refused_before_the_run(
        flag: str, argv: list[str], suffix: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # results reads the sweep store of the working folder
    for what, place in _places(tmp_path):
        dest = place.with_name(place.name + suffix)
        code = main([*argv, flag, str(dest)])
        out = capsys.readouterr()
        assert code == 2, (what, out.err[-400:])
        assert "Traceback" not in out.err + out.out
        assert f"{flag}:" in out.err and "cannot" in out.err, (what, out.err)
