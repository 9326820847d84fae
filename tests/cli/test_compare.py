"""``fabricsim compare``: parse real nccl-tests logs and report measured vs predicted."""

from __future__ import annotations

import json
from pathlib import Path

from fabricsim.cli.app import main
from fabricsim.cli.compare import parse_nccl_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl_logs"


def test_parse_current_format() -> None:
    p = LOGS / "all_reduce_perf_dgx_a100.log"
    log = parse_nccl_log(p.read_text(), p.name)
    assert log.collective == "all_reduce" and log.ranks == 8 and len(log.rows) == 24
    first = log.rows[0]
    assert (first.size_bytes, first.count, first.type, first.redop) == (1024, 256, "float",
                                                                        "sum")
    assert log.rows[-1].busbw_gbps_inplace == 231.58


def test_parse_old_format_without_root() -> None:
    p = LOGS / "all_gather_perf_2gpu_oldformat.log"
    log = parse_nccl_log(p.read_text(), p.name)
    assert log.collective == "all_gather" and log.ranks == 2 and len(log.rows) == 5
    assert log.rows[0].time_us == 14.1 and log.rows[0].busbw_gbps == 37.18


def test_compare_prints_errors_and_summary(capsys) -> None:
    p = LOGS / "all_reduce_perf_dgx_a100.log"
    assert main(["compare", str(p), "--system", "dgx-a100", "--in-place", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    summ = rows[-1]["summary"]
    assert summ["rows"] == 24
    big = [r for r in rows[:-1] if r["size_bytes"] >= 2**28]
    assert all(abs(r["rel_error"]) < 0.05 for r in big)   # the calibrated large sizes
    assert summ["median_abs_rel_error"] < 0.15


def test_compare_table(capsys) -> None:
    p = LOGS / "all_gather_perf_2gpu_oldformat.log"
    assert main(["compare", str(p), "--system", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "measured" in out and "median |error|" in out


def test_compare_errors(tmp_path, capsys) -> None:
    assert main(["compare", str(tmp_path / "missing.log")]) == 2
    junk = tmp_path / "perf.log"
    junk.write_text("# nothing here\n")
    assert main(["compare", str(junk)]) == 2
    p = LOGS / "all_reduce_perf_dgx_a100.log"
    assert main(["compare", str(p), "--system", "dgx-a100", "--gpus-per-node", "4"]) == 2
    assert "ranks" in capsys.readouterr().err
