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
    assert summ["rows"] == 24 and summ["cluster"] == "dgx-a100 x 1"
    big = [r for r in rows[:-1] if r["size_bytes"] >= 2**28]
    assert all(abs(r["time_error"]) < 0.05 for r in big)   # the calibrated large sizes
    assert summ["median_abs_time_error"] < 0.15
    assert summ["flagged"] == sum(r["flag"] for r in rows[:-1])


def test_compare_table(capsys) -> None:
    p = LOGS / "all_gather_perf_2gpu_oldformat.log"
    assert main(["compare", str(p), "--system", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "time" in out and "model" in out and "median |error|" in out


def test_every_test_of_a_file_failed_ones_reported(capsys, tmp_path) -> None:
    """Three tests in one log: two compared on the cluster the log describes (2 hosts x 8
    H100), the failed one reported with NCCL's own message; a plot overlays them."""
    p = LOGS / "nccl_tests_2x8_h100_three_tests.log"
    png = tmp_path / "cmp.png"
    assert main(["compare", str(p), "--json", "--plot", str(png)]) == 0
    out = capsys.readouterr()
    summaries = [json.loads(x)["summary"] for x in out.out.splitlines() if "summary" in x]
    assert [s["collective"] for s in summaries] == ["all_reduce", "all_gather"]
    assert all(s["cluster"] == "dgx-h100 x 2" for s in summaries)
    assert "alltoall" in out.err and "Test NCCL failure" in out.err
    assert png.stat().st_size > 1000
    # the published all_reduce rows (1078-1082): the model is within 15 % in time
    assert summaries[0]["max_abs_time_error"] < 0.15


def test_plot_is_the_shared_collective_figure(tmp_path, monkeypatch) -> None:
    """--plot: measured and model busbw and time per size, the model's choice marked."""
    import fabricsim.plots.busbw as busbw

    seen: dict[str, object] = {}
    real = busbw.plot_collective

    def spy(curves, path, *, title=""):  # type: ignore[no-untyped-def]
        seen["curves"] = curves
        return real(curves, path, title=title)

    monkeypatch.setattr(busbw, "plot_collective", spy)
    png = tmp_path / "cmp.png"
    p = LOGS / "nccl_tests_2x8_h100_three_tests.log"
    assert main(["compare", str(p), "--json", "--plot", str(png)]) == 0
    curves = seen["curves"]
    assert isinstance(curves, dict) and list(curves) == [
        "all_reduce #1 measured", "all_reduce #1 model", "all_gather #2 measured",
        "all_gather #2 model"]
    model, measured = curves["all_reduce #1 model"], curves["all_reduce #1 measured"]
    assert len(model.choice) == len(model.sizes) == len(measured.time_s) > 0
    assert not measured.choice and all("/" in c for c in model.choice)
    assert png.stat().st_size > 1000


def test_threshold_flags_and_bad_threshold(capsys) -> None:
    p = LOGS / "nccl_tests_2x8_h100_three_tests.log"
    assert main(["compare", str(p), "--json", "--threshold", "0.05"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    flagged = [r for r in rows if r.get("flag")]
    assert flagged and all(abs(r["time_error"]) > 0.05 for r in flagged)
    assert main(["compare", str(p), "--threshold", "-1"]) == 2
    assert "--threshold" in capsys.readouterr().err


def test_bench_json_reads_back(capsys, tmp_path) -> None:
    """fabricsim's own bench --json is a log compare reads: the model against itself is
    exact."""
    assert main(["bench", "all_reduce", "-b", "1M", "-e", "16M", "--system", "dgx-h100",
                 "--json"]) == 0
    log = tmp_path / "all_reduce_bench.jsonl"
    log.write_text(capsys.readouterr().out)
    assert main(["compare", str(log), "--system", "dgx-h100", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rows[-1]["summary"]["max_abs_time_error"] < 1e-3


def test_compare_errors(tmp_path, capsys) -> None:
    assert main(["compare", str(tmp_path / "missing.log")]) == 2
    junk = tmp_path / "perf.log"
    junk.write_text("# nothing here\n")
    assert main(["compare", str(junk)]) == 2
    p = LOGS / "all_reduce_perf_dgx_a100.log"
    assert main(["compare", str(p), "--system", "dgx-a100", "--gpus-per-node", "4"]) == 2
    assert "ranks" in capsys.readouterr().err


def test_plot_that_is_not_an_image_is_refused_before_any_work(capsys, tmp_path) -> None:
    p = LOGS / "all_reduce_perf_dgx_a100.log"
    assert main(["compare", str(p), "--plot", str(tmp_path / "x.txt")]) == 2
    out = capsys.readouterr()
    assert "--plot" in out.err and ".png" in out.err and "Traceback" not in out.err
    assert out.out == ""   # refused before any row was compared
    assert main(["compare", str(p), "--plot", str(tmp_path / "new" / "x.svg"), "--json"]) == 0
    assert (tmp_path / "new" / "x.svg").stat().st_size > 1000


def test_bad_json_row_is_refused(capsys, tmp_path) -> None:
    rows = tmp_path / "rows.json"
    rows.write_text('{"size_bytes": 1048576, "time_us": 20.9, "busbw_gbps": 87.6}\n'
                    '{"size_bytes": "x", "time_us": 27.8, "busbw_gbps": 131.8}\n')
    assert main(["compare", str(rows), "--collective", "all_reduce", "--system",
                 "dgx-h100"]) == 2
    err = capsys.readouterr().err
    assert "rows.json line 2: size_bytes 'x'" in err and "Traceback" not in err


def test_nodes_that_contradict_the_log_name_the_matching_value(capsys) -> None:
    """A 2 x 8 H100 log: --nodes 3 is not silently modelled, --nodes 1 says 2 too."""
    p = LOGS / "nccl_tests_2x8_h100_three_tests.log"
    for flag, value, match in (("--nodes", "3", "--nodes 2"), ("--nodes", "1", "--nodes 2"),
                               ("--gpus-per-node", "4", "--gpus-per-node 8")):
        assert main(["compare", str(p), flag, value]) == 2
        err = capsys.readouterr().err
        assert f"{flag}: {flag} {value} does not match" in err and \
            "16 ranks on 2 hosts" in err and f"pass {match}" in err
    assert main(["compare", str(p), "--nodes", "2", "--gpus-per-node", "8", "--json"]) == 0


def test_system_is_checked_against_the_log_gpu_only_when_the_catalog_knows_it(
        capsys, tmp_path) -> None:
    p = LOGS / "nccl_tests_2x8_h100_three_tests.log"
    assert main(["compare", str(p), "--system", "dgx-a100"]) == 2
    assert "pass one with that GPU (dgx-h100, aws-p5)" in capsys.readouterr().err
    k80 = tmp_path / "all_reduce_perf.log"
    k80.write_text("#  Rank  0 Group  0 Pid  1 on h device  0 [0x07] Tesla K80\n"
                   "#  Rank  1 Group  0 Pid  2 on h device  1 [0x08] Tesla K80\n"
                   "  1048576  262144  float  sum  -1  50.0  20.97  36.70  0"
                   "  49.0  21.40  37.45  0\n")
    assert main(["compare", str(k80), "--system", "dgx-a100", "--json"]) == 0


def test_compare_reads_nccl_inspector_output(capsys) -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "nccl_logs" / \
        "nccl_inspector_2x8_h100.jsonl"
    assert main(["compare", str(path), "--system", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "all_reduce on 16 ranks vs dgx-h100 x 2" in out and "over 5 sizes" in out


def test_compare_takes_the_network_from_the_logs_nccl_info_lines(capsys) -> None:
    """issue 37: a log written with NCCL_DEBUG=INFO says which NICs NCCL used; compare
    models those (4 SHARP HCAs per host), not the preset's 8."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "nccl_logs" / \
        "nccl_info_and_results_2x8_h100_4nic.log"
    assert main(["compare", str(path)]) == 0
    got = capsys.readouterr()
    assert "4 IB NICs per host with SHARP" in got.err
    assert "vs dgx-h100-from-log x 2" in got.out
    # a fabric given on the line wins: the log's network is then not used
    assert main(["compare", str(path), "--fabric", "roce-400g"]) == 0
    got = capsys.readouterr()
    assert "NCCL INFO" not in got.err and "vs dgx-h100 x 2 (roce-400g)" in got.out


def test_compare_makes_the_choice_of_the_nccl_release_the_log_names(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The log's NCCL INFO line (``NCCL version 2.21.5+cuda12.4``) or nccl-tests' header
    (``nccl-library=22105``) names the release; compare says so and makes its choice
    (with the oldest tables modelled, said too); --nccl-version replaces it (a release
    newer than the newest modelled is said), and a bad one is refused by name."""
    from fabricsim.interop.nccl_tests import parse_nccl_tests

    path = LOGS / "nccl_info_and_results_2x8_h100_4nic.log"
    text = path.read_text(encoding="utf-8")
    assert parse_nccl_tests(text).nccl_version == "2.21.5"
    header_only = "\n".join(s for s in text.splitlines() if "NCCL version" not in s)
    assert parse_nccl_tests(header_only).nccl_version == "2.21.5"  # from nccl-library
    assert main(["compare", str(path), "--json"]) == 0
    got = capsys.readouterr()
    assert "NCCL 2.21.5's choice" in got.err
    # older than the model's oldest tables: answered with 2.23's, and said
    assert "older than the oldest tuning tables modelled (2.23)" in got.err
    assert main(["compare", str(path), "--json", "--nccl-version", "2.29.7"]) == 0
    assert "choice of algorithm" not in capsys.readouterr().err
    assert main(["compare", str(path), "--json", "--nccl-version", "2.30.7"]) == 0
    assert "newer than the newest release modelled (2.29.7)" in capsys.readouterr().err
    assert main(["compare", str(path), "--nccl-version", "two"]) == 2
    assert "--nccl-version" in capsys.readouterr().err
    odd = tmp_path / "odd.log"  # a version the model cannot read: said, then the default
    odd.write_text(text.replace("NCCL version 2.21.5", "NCCL version 9.1.0"), encoding="utf-8")
    assert main(["compare", str(odd)]) == 0
    assert "the log's NCCL version" in capsys.readouterr().err
