"""Calibration to a cluster's logs (fabricsim.interop.calibrate, fabricsim calibrate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from benchmark_module import load

from fabricsim.cli.app import main
from fabricsim.collectives import predict_time
from fabricsim.errors import ConfigError
from fabricsim.fabric import build_cluster

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "nccl_logs" / "nccl_tests_2x8_h100_three_tests.log"


def test_calibration_factors_reach_every_backend() -> None:
    """A calibrated fabric scales the protocol model, so the analytic and flow backends
    both see it; the ideal protocol (physics only) does not."""
    from fabricsim.backends.flow import FlowBackend
    from fabricsim.collectives import run_collective

    base = build_cluster("dgx-h100", 2)
    slow = build_cluster("dgx-h100", 2, params={"calibration": {"net.efficiency": 0.5}})
    t0 = predict_time(base, "all_reduce", 2**30, algo="ring")
    t1 = predict_time(slow, "all_reduce", 2**30, algo="ring")
    assert 1.7 < t1 / t0 < 2.0
    f0 = run_collective(base, "all_reduce", 2**26, algo="ring", backend=FlowBackend())
    f1 = run_collective(slow, "all_reduce", 2**26, algo="ring", backend=FlowBackend())
    assert f1.time > 1.5 * f0.time
    i0 = run_collective(base, "all_reduce", 2**26, algo="ring", proto="ideal")
    i1 = run_collective(slow, "all_reduce", 2**26, algo="ring", proto="ideal")
    assert i1.time == pytest.approx(i0.time)


@pytest.mark.parametrize(("cal", "field"), [({"net.speed": 2}, "params.calibration"),
                                            ({"net.hop": -1}, "net.hop"),
                                            ("fast", "params.calibration")])
def test_bad_calibration_names_the_field(cal: object, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        build_cluster("dgx-h100", 2, params={"calibration": cal})


def test_logs_that_determine_nothing_write_nothing_and_say_what_to_collect(
        capsys, tmp_path) -> None:
    """issue 37: five rows of a 2 x 8 H100 log determine no factor; calibrate wrote a
    'calibrated' file all the same (error 10.0 % -> 10.0 %)."""
    out = tmp_path / "my-cluster.yaml"
    assert main(["calibrate", str(LOG), "-o", str(out)]) == 2
    got = capsys.readouterr()
    assert not out.exists() and "was not written" in got.err
    assert "not determined by these logs (left at 1)" in got.out
    assert "NCCL_ALGO=Ring all_reduce_perf -b 1G -e 8G" in got.out   # what to collect
    # the network's efficiency alone would fit the 16 MiB all-gather and leave the typical
    # row further off (2.1 % -> 6 %): said, and not taken as a calibration
    assert "left the rows' median error higher" in got.out
    assert main(["calibrate", str(LOG), "-o", str(out), "--json"]) == 2
    d = json.loads(capsys.readouterr().out)
    assert d["output"] is None and set(d["undetermined"]) >= {"net.efficiency", "net.hop"}


def test_cli_writes_a_scenario_every_command_accepts(capsys, tmp_path) -> None:
    out = tmp_path / "my-cluster.yaml"
    one = LOG.with_name("all_reduce_perf_dgx_a100.log")
    assert main(["calibrate", str(one), "-o", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    err = d["median_abs_time_error"]
    # a -g 8 log: the host's issue time is fitted with the links (7.6 % -> 3.5 % held out)
    assert err["held_out_after"] < 0.6 * err["held_out_before"] < 0.06
    sc = yaml.safe_load(out.read_text())
    cal = sc["cluster"]["params"]["calibration"]
    assert sc["cluster"]["system"] == "my-cluster" and set(cal) == {"nvlink.efficiency",
                                                                     "nvlink.hop",
                                                                     "host.launch"}
    assert sc["systems"]["my-cluster"]["base"] == "dgx-a100"   # a user-defined system
    assert main(["bench", "all_reduce", str(out), "--nodes", "2", "-b", "1G", "-e", "1G",
                 "--json"]) == 0
    assert main(["describe", str(out), "--nodes", "2"]) == 0
    assert main(["train", str(out), "--nodes", "2", "--model", "llama3-8b",
                 "--global-batch", "16", "--zero", "fsdp"]) == 0


def test_nics_in_use_are_fitted() -> None:
    """Logs from A100 servers that use 4 of their 8 HDR NICs (synthetic: the model on a
    4-NIC system): calibrating against dgx-a100 finds the 4."""
    from fabricsim.catalog import get_catalog, with_systems
    from fabricsim.interop.calibrate import calibrate
    from fabricsim.interop.nccl_tests import NcclTest, Row

    cat = with_systems(get_catalog(), {"a100-4nic": {"base": "dgx-a100", "nics": 4}})
    fab = build_cluster("a100-4nic", 2, catalog=cat)
    rows = []
    for k in range(20, 34, 2):
        t = predict_time(fab, "all_reduce", 2**k) * 1e6
        rows.append(Row(2**k, 2**k // 4, "float", "sum", -1, t, 0, 0, None, t, 0, 0, None))
    hosts = ("a",) * 8 + ("b",) * 8
    test = NcclTest("all_reduce", tuple(rows), hosts, ("NVIDIA A100-SXM4-80GB",) * 16)
    res = calibrate([test], system="dgx-a100")
    assert res.nics == 4 and res.held_out_error_after < 0.02
    assert any("4 of the system's 8" in n for n in res.notes)


def test_too_little_is_a_clear_error(capsys, tmp_path) -> None:
    with pytest.raises(ConfigError, match="at least 2"):
        from fabricsim.interop.calibrate import calibrate

        calibrate([], system="dgx-h100")
    assert main(["calibrate", str(tmp_path / "missing.log")]) == 2


def test_reference_benchmark_cuts_held_out_error() -> None:
    mod = load("calibrate_reference")
    from fabricsim.interop.calibrate import calibrate

    for system, nodes, gpn, coll, cases in mod.groups():
        test = mod.test_of(system, nodes, gpn, coll, cases)
        # Azure ND H100 v5 ran -g 8: its logs were refused (an NVLink efficiency of 1.27
        # needed) while the model added eight GPUs' launches to every operation; with the
        # host's issue time as a floor they calibrate like any other, and -g logs fit the
        # host's own issue time (host.launch): A100's host issues slower, H100's faster
        res = calibrate([test], system=system)
        assert all(v <= 1.0 for k, v in res.factors.items() if k.endswith("efficiency"))
        assert res.held_out_error_after <= res.held_out_error_before + 1e-9
        assert ("host.launch" in res.factors) == (test.gpus_per_thread > 1)
        if test.gpus_per_thread > 1 and system == "dgx-a100":  # 8.3 -> 3.4 %
            assert res.held_out_error_after < 0.6 * res.held_out_error_before
            assert res.factors["host.launch"] > 1.0
        if test.gpus_per_thread > 1 and system == "dgx-h100":
            # 7.1 -> 4.2 % until a ring inside one server ran on NCCL's active channels
            # (2026-12-03): Azure's H100 page (-g 8) rises from 26 us at 1 KiB to 42 us
            # at 64 KiB-1 MiB, as if the host paid per channel it issues, and the model's
            # ring LL had risen with it by chance; now flat there under a constant floor, a
            # lower floor does not fit the page, so calibration keeps the library's and
            # says so, and the rows stay at 7.1 %
            assert res.factors["host.launch"] == 1.0
            assert res.held_out_error_after == pytest.approx(res.held_out_error_before)
            assert res.held_out_error_before < 0.08
            assert any("left the rows' median error higher" in n for n in res.notes)
        if nodes == 2:  # the Nebius NVLSTree rows: 9.8 % -> about 1 % with calibration
            # once; since network crossings are modelled the library alone gives 3.1 %
            assert res.held_out_error_after < 0.035


def test_output_is_checked_before_any_work(capsys, tmp_path) -> None:
    """-o into a missing folder creates it; a folder or another suffix is refused. (A
    one-server log: one fit, a few seconds; the multi-node fit is tested above.)"""
    out = tmp_path / "new" / "c.yml"
    one_server = LOG.parent / "all_reduce_perf_dgx_a100.log"
    assert main(["calibrate", str(one_server), "-o", str(out), "--json"]) == 0
    assert yaml.safe_load(out.read_text())["cluster"]["params"]["calibration"]
    capsys.readouterr()
    for bad, match in ((tmp_path / "c.txt", "ending in .yaml or .yml"),
                       (tmp_path, "is a folder")):
        assert main(["calibrate", str(LOG), "-o", str(bad)]) == 2
        out_err = capsys.readouterr()
        assert "--output: " in out_err.err and match in out_err.err and not out_err.out


def test_system_must_have_the_logs_gpu_and_one_gpu_per_call(capsys) -> None:
    assert main(["calibrate", str(LOG), "--system", "dgx-a100"]) == 2
    err = capsys.readouterr().err
    assert "--system dgx-a100 has a100-sxm GPUs" in err and "(dgx-h100, aws-p5)" in err
    a100 = LOG.parent / "all_reduce_perf_dgx_a100.log"
    assert main(["calibrate", str(LOG), str(a100)]) == 2
    err = capsys.readouterr().err
    assert "LOGS: the logs ran on different GPUs" in err and a100.name in err


def test_logs_without_a_device_list_are_refused(capsys, tmp_path) -> None:
    assert main(["bench", "all_reduce", "-b", "1M", "-e", "16M", "--json"]) == 0
    rows = tmp_path / "all_reduce_rows.jsonl"
    rows.write_text(capsys.readouterr().out)
    assert main(["calibrate", str(rows), "--system", "dgx-h100"]) == 2
    assert "no 'Using devices' list" in capsys.readouterr().err


def _synthetic(system: str, scale: float) -> object:
    """One server's all_reduce rows as the model predicts them on ``system``, times
    ``scale``, from GPUs the catalog does not know (so only the fit can tell)."""
    from fabricsim.interop.nccl_tests import NcclTest, Row

    fab = build_cluster(system, 1)
    rows = []
    for k in range(20, 32, 2):
        t = predict_time(fab, "all_reduce", 2**k) * 1e6 * scale
        rows.append(Row(2**k, 2**k // 4, "float", "sum", -1, t, 0, 0, None, t, 0, 0, None))
    return NcclTest("all_reduce", tuple(rows), ("a",) * 8, ("Unknown GPU",) * 8)


def test_efficiency_above_one_is_held_with_a_note_or_refused() -> None:
    """Logs 1.5 % faster than the model: nvlink.efficiency held at 1 with a note. H100
    logs calibrated as dgx-a100: faster than an A100's NVLink can go, refused."""
    from fabricsim.interop.calibrate import calibrate

    res = calibrate([_synthetic("dgx-a100", 0.985)], system="dgx-a100")
    assert res.factors["nvlink.efficiency"] == 1.0
    assert any(n.startswith("nvlink.efficiency fitted 1.0") and "held at 1.0" in n
               for n in res.notes)
    with pytest.raises(ConfigError, match=r"--system: the logs ran faster than dgx-a100 "
                                          r"can: the fit needs nvlink\.efficiency"):
        calibrate([_synthetic("dgx-h100", 1.0)], system="dgx-a100")


def test_each_log_is_timed_as_its_nccl_release_chooses(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """calibrate reads the release a log names (nccl-tests' ``nccl-library=``) and times
    its rows with that release's choice; a version the model cannot read is said, and the
    newest modelled is used."""
    from fabricsim.interop.calibrate import _points
    from fabricsim.interop.nccl_tests import parse_nccl_tests

    text = LOG.with_name("nccl_info_and_results_2x8_h100_4nic.log").read_text(encoding="utf-8")
    pts = _points(parse_nccl_tests(text).tests)
    assert pts and {p.nccl_version for p in pts} == {"2.21.5"}
    odd = tmp_path / "all_reduce_perf_odd.log"  # a library that is no NCCL release
    odd.write_text("# nccl-tests version 2.13.9 nccl-headers=91000 nccl-library=91000\n"
                   + LOG.with_name("all_reduce_perf_dgx_a100.log").read_text(encoding="utf-8"),
                   encoding="utf-8")
    assert main(["calibrate", str(odd), "--json"]) == 0
    err = capsys.readouterr().err
    assert "all_reduce_perf_odd.log's NCCL version: '9.10.0' is not an NCCL release" in err
