"""``fabricsim bench``: nccl-tests columns, JSON/CSV rows, plot, and clean errors."""

from __future__ import annotations

import json

import pytest

from fabricsim.cli.app import main
from fabricsim.jobs.collective import bench_sizes as sweep_sizes
from fabricsim.units import parse_nccl_size


def test_sizes_parse_like_nccl_tests() -> None:
    assert parse_nccl_size("8") == 8
    assert parse_nccl_size("1M") == 2**20
    assert parse_nccl_size("1G") == 2**30
    assert parse_nccl_size("128MiB") == 128 * 2**20
    assert parse_nccl_size("4GB") == 4 * 10**9
    assert sweep_sizes(8, 2**34, 2)[-1] == 2**34 and len(sweep_sizes(8, 2**34, 2)) == 32


def test_table_has_nccl_columns_and_summary(capsys) -> None:
    assert main(["bench", "all_reduce", "-b", "8", "-e", "1G", "-f", "8", "--system",
                 "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "size" in out and "busbw" in out and "algorithm" in out
    assert "# Avg bus bandwidth" in out
    rows = [ln for ln in out.splitlines() if ln and not ln.startswith("#")]
    assert len(rows) == 10
    assert rows[0].split()[2:4] == ["float", "sum"]


def test_json_rows(capsys) -> None:
    assert main(["bench", "all_gather", "-b", "1M", "-e", "4M", "-d", "half", "--system",
                 "dgx-a100", "--nodes", "2", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["size_bytes"] for r in rows] == [2**20, 2**21, 2**22]
    for r in rows:
        assert set(r) >= {"size_bytes", "count", "type", "redop", "time_us", "algbw_gbps",
                          "busbw_gbps", "algorithm", "protocol"}
        # nccl-tests prints all_gather's count per rank: 16 ranks of half precision
        assert r["count"] == r["size_bytes"] // 2 // 16 and r["redop"] == "none"
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 15 / 16, rel=1e-3)


def test_csv_and_plot_with_two_algorithms(tmp_path, capsys) -> None:
    png = tmp_path / "bw.png"
    assert main(["bench", "all_reduce", "-b", "1M", "-e", "16M", "-f", "4", "--system",
                 "dgx-h100", "--algo", "ring", "--algo", "nvls", "--csv", "--plot",
                 str(png)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("size_bytes,count")
    assert len(lines) == 1 + 2 * 3
    assert png.exists() and png.stat().st_size > 1000


def test_plot_uses_the_shared_collective_figure(tmp_path, monkeypatch) -> None:
    """--plot draws busbw and time on a log size axis with the choice per size marked."""
    import fabricsim.plots.busbw as busbw

    seen: dict[str, object] = {}
    real = busbw.plot_collective

    def spy(curves, path, *, title=""):  # type: ignore[no-untyped-def]
        seen.update(curves=curves, title=title)
        return real(curves, path, title=title)

    monkeypatch.setattr(busbw, "plot_collective", spy)
    png = tmp_path / "bw.png"
    assert main(["bench", "all_reduce", "-b", "8", "-e", "1G", "--system", "dgx-h100",
                 "--nodes", "4", "--algo", "ring", "--algo", "nvls", "--plot",
                 str(png)]) == 0
    curves = seen["curves"]
    assert isinstance(curves, dict) and list(curves) == ["ring", "nvls"]
    ring = curves["ring"]
    assert len(ring.sizes) == len(ring.time_s) == len(ring.choice) == 28
    assert {c.split("/")[0] for c in ring.choice} == {"ring"}
    assert len({c.split("/")[1] for c in ring.choice}) >= 2  # protocol switches marked
    assert "32 GPUs" in str(seen["title"]) and png.stat().st_size > 1000


@pytest.mark.parametrize("argv, needle", [
    (["bench", "all_reduce", "--system", "dgx-a100", "--algo", "nvls"], "NVSwitch gen3"),
    (["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "--fabric",
      "roce-400g", "--algo", "sharp"], "SHARP"),
    (["bench", "allreduc"], "all_reduce"),
    (["bench", "all_reduce", "-b", "-8"], "size"),
    (["bench", "all_reduce", "--algo", "rign"], "ring"),
    (["bench", "all_reduce", "--proto", "LL64"], "did you mean"),
    (["bench", "all_reduce", "--backend", "magic"], "analytic"),
])
def test_bad_input_exits_2_with_a_clear_message(argv, needle, capsys) -> None:
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize(("args", "line"), [
    (["-b", "1M", "-e", "8M", "-f", "3"], "minBytes 1048576 maxBytes 8388608 step: 3(factor)"),
    (["-b", "1M", "-e", "4M", "-i", "1M"],
     "minBytes 1048576 maxBytes 4194304 step: 1048576(bytes)"),
])
def test_the_run_line_states_the_sweep_asked(capsys: pytest.CaptureFixture[str],
                                             args: list[str], line: str) -> None:
    """As nccl-tests prints it: the bounds and step given, not the rows' extremes (a
    factor of 3 from 1 MB stops at 3 MB, below the 8 MB asked)."""
    from fabricsim.cli.app import main

    assert main(["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "2", *args]) == 0
    assert line in capsys.readouterr().out


def test_bench_says_which_links_limit_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    """RoCE at 64 servers: the tree's traffic climbs to the spines and hashed ECMP piles
    it on some uplinks; bench names the link class and what spreads it. On InfiniBand's
    tables the same run is limited at the NICs."""
    args = ["bench", "all_reduce", "-b", "256M", "-e", "256M", "--system", "dgx-h100",
            "--nodes", "64"]
    assert main([*args, "--fabric", "roce-400g"]) == 0
    roce = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# limit:")]
    assert roce and "leaf-spine" in roce[0] and "--routing adaptive" in roce[0]
    assert main([*args, "--fabric", "roce-400g", "--routing", "adaptive"]) == 0
    spread = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# limit:")]
    assert spread and "leaf-spine" not in spread[0]


def test_limit_line_says_when_a_nics_measured_share_is_its_ceiling(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two p4d at 1 GiB are limited at their EFA links, which run at 83 % of line rate:
    bench says that is the 85 % the NIC is measured to carry; p4d's NICs have a measured
    share, DGX A100's do not, and its limit line does not mention one."""
    args = ["bench", "all_reduce", "-b", "1G", "-e", "1G", "--nodes", "2", "--algo", "ring"]
    assert main([*args, "--system", "aws-p4d"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# limit:"))
    assert "nic-leaf" in line and "at most 85% of their line rate" in line
    assert main([*args, "--system", "dgx-a100"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# limit:"))
    assert "line rate" not in line


def test_limit_line_names_the_kernels_when_they_set_the_time(capsys) -> None:  # type: ignore[no-untyped-def]
    """Four DGX H100 at 1 GiB run NVLSTree at its kernels' rate, its NICs at two thirds
    (NCCL's own choice there is the ring: NVLSTree is forced)."""
    from fabricsim.cli.app import main

    assert main(["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "4", "-b", "1G",
                 "-e", "1G", "--algo", "nvlstree"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# limit:"))
    assert "limited by the algorithm's kernels" in line and "not by links" in line


def test_limit_line_names_blackwells_copy_warps(capsys) -> None:  # type: ignore[no-untyped-def]
    """One HGX B200 at 8 GiB runs NVLS at its scatter and gather warps' pace (24 channels x
    7 gather warps), its NVLinks at about 60 %; the line says which of the kernels' bounds
    it is."""
    from fabricsim.cli.app import main

    assert main(["bench", "all_reduce", "--system", "hgx-b200", "-b", "8G", "-e", "8G"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# limit:"))
    assert "(nvls/Simple)" in line and "168 copy warps" in line and "not by links" in line


def test_select_fastest_against_nccls_choice(capsys) -> None:  # type: ignore[no-untyped-def]
    """`--select fastest` gives the least-time pair; the default, NCCL's choice, may be
    slower (2 DGX A100 at 16 MiB: NCCL rings with LL128, the tree is faster); a scenario's
    collective.select gives the same rows as the flag; a bad value names the flag."""
    import json

    from fabricsim import jobs
    from fabricsim.cli.app import main
    from fabricsim.scenario import load_scenario_text

    args = ["bench", "all_reduce", "--system", "dgx-a100", "--nodes", "2", "-b", "16M",
            "-e", "16M", "--json"]
    assert main(args) == 0
    nccl = json.loads(capsys.readouterr().out.splitlines()[0])
    assert main([*args, "--select", "fastest"]) == 0
    fastest = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (nccl["algorithm"], fastest["algorithm"]) == ("ring", "tree")
    assert fastest["busbw_gbps"] > nccl["busbw_gbps"]
    sc = load_scenario_text("cluster: {system: dgx-a100, nodes: 2}\n"
                            "collective: {minbytes: 16M, maxbytes: 16M, select: fastest}")
    job = jobs.job_from_scenario("bench", sc)
    row = jobs.run(job).rows[None][0]
    assert row.algorithm == "tree" and round(row.time_us, 4) == fastest["time_us"]
    assert main([*args, "--select", "quickest"]) == 2
    assert "--select" in capsys.readouterr().err
    assert main(args[:-1]) == 0  # the text output says what NCCL's choice leaves
    room = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# headroom")]
    assert room and "ring/LL128 takes 1.14x" in room[0] and "tree/LL128" in room[0]
    assert main([*args[:-1], "--select", "fastest"]) == 0
    assert "# headroom" not in capsys.readouterr().out


def test_nccl_algo_list_is_ranked_by_nccls_model(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """NCCL_ALGO=Ring,Tree leaves NCCL two algorithms, and it runs the one its model ranks
    first (the ring on 2 DGX A100 at 16 MiB), not the faster one."""
    import json

    from fabricsim.cli.app import main

    monkeypatch.setenv("NCCL_ALGO", "Ring,Tree")
    args = ["bench", "all_reduce", "--system", "dgx-a100", "--nodes", "2", "-b", "16M",
            "-e", "16M", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["algorithm"] == "ring"
    assert main([*args, "--select", "fastest"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["algorithm"] == "tree"


def test_a_scenario_with_an_unknown_selection_names_the_field(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from fabricsim.cli.app import main

    sc = tmp_path / "sel.yaml"
    sc.write_text("cluster: {system: aws-p4d, nodes: 2}\n"
                  "collective: {minbytes: 4M, maxbytes: 4M, select: quickest}\n",
                  encoding="utf-8")
    assert main(["bench", "scenario", str(sc)]) == 2
    err = capsys.readouterr().err
    assert "collective.select" in err and "fastest" in err


def test_select_with_both_algorithm_and_protocol_forced_says_so(capsys) -> None:  # type: ignore[no-untyped-def]
    """--select fastest with --algo and --proto both given has nothing left to choose:
    the warning says so, instead of the flag being silently ignored; with one of them
    free it chooses and nothing is said."""
    from fabricsim.cli.app import main

    base = ["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "-b", "1M",
            "-e", "1M", "--algo", "ring", "--select", "fastest"]
    assert main([*base, "--proto", "simple"]) == 0
    out = capsys.readouterr().out
    assert "# warning: select fastest: without effect" in out and "--proto" in out
    assert main(base) == 0
    assert "select fastest: without effect" not in capsys.readouterr().out


def test_a_plugin_that_forces_simple_is_said_and_a_users_protocol_overrides_it(
        monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """On p4d AWS's EFA plugin sets NCCL_PROTO=simple: bench runs Simple and says why;
    --proto or the user's own NCCL_PROTO runs what it names, and nothing is said."""
    from fabricsim.cli.app import main

    args = ["bench", "all_reduce", "--system", "aws-p4d", "--nodes", "2", "-b", "8", "-e", "8"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "tree    Simple" in out and "NCCL_PROTO=simple" in out and "EFA plugin" in out
    assert main([*args, "--proto", "LL"]) == 0
    out = capsys.readouterr().out
    assert "tree        LL" in out and "NCCL_PROTO=simple" not in out
    monkeypatch.setenv("NCCL_PROTO", "LL,LL128")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Simple" not in out.split("# Out of bounds")[0] and "EFA plugin" not in out
    monkeypatch.delenv("NCCL_PROTO")
    assert main(["bench", "all_reduce", "--system", "aws-p5", "--nodes", "2", "-b", "8",
                 "-e", "8"]) == 0
    assert "EFA plugin" not in capsys.readouterr().out


def test_nccl_algo_leaves_point_to_point_collectives_alone(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """NCCL_ALGO narrows NCCL's collective algorithms; all-to-all and send/recv are
    point-to-point, which it does not touch: an environment with NCCL_ALGO=Ring still runs
    them, as NCCL does (it used to stop with 'leave no algorithm')."""
    from fabricsim.cli.app import main

    monkeypatch.setenv("NCCL_ALGO", "Ring")
    for coll in ("alltoall", "sendrecv"):
        assert main(["bench", coll, "--system", "dgx-h100", "--nodes", "2", "-b", "1M",
                     "-e", "1M", "--json"]) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[0])["algorithm"] == "direct"


def test_nccl_tests_launch_flags_live_in_the_scenario_too(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """nccl-tests' -g, -m and -r are fields of a scenario's collective: section, so the
    web and a sweep can run what the CLI runs: the same scenario gives the same time as
    the flags, and a flag given replaces the section's."""
    from fabricsim import jobs
    from fabricsim.scenario import load_scenario_text

    text = ("cluster: {system: dgx-a100, nodes: 1}\n"
            "collective: {minbytes: 1K, maxbytes: 1K, gpus_per_thread: 8, agg_iters: 4}\n")
    sc = tmp_path / "g8.yaml"
    sc.write_text(text, encoding="utf-8")
    flags = ["bench", "all_reduce", "--system", "dgx-a100", "-b", "1K", "-e", "1K",
             "--json"]

    def time_us(*args: str) -> float:
        assert main(list(args)) == 0
        return float(json.loads(capsys.readouterr().out.splitlines()[0])["time_us"])

    by_flags = time_us(*flags, "-g", "8", "-m", "4")
    by_scenario = time_us("bench", "scenario", str(sc), "--json")
    assert by_scenario == by_flags
    job = jobs.job_from_scenario("bench", load_scenario_text(text))
    assert (job.gpus_per_thread, job.agg_iters, job.root) == (8, 4, 0)
    assert round(jobs.run(job).rows[None][0].time_us, 4) == by_scenario
    # a flag given replaces the section's: -g 1 runs one process per GPU again
    assert time_us("bench", "scenario", str(sc), "--json", "-g", "1", "-m", "4") == \
        time_us(*flags, "-m", "4") < by_scenario
    bad = tmp_path / "g3.yaml"
    bad.write_text(text.replace("gpus_per_thread: 8", "gpus_per_thread: 3"),
                   encoding="utf-8")
    assert main(["bench", "scenario", str(bad)]) == 2
    assert "collective.gpus_per_thread" in capsys.readouterr().err


def test_the_nccl_release_is_a_flag_and_a_scenario_field(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """NCCL's choice follows the release asked for (64 DGX H200 over RoCE, 16 MiB: 2.27
    runs a tree with LL128, 2.28.3 NVLSTree, as their tuning tables rank them); the
    scenario's ``collective.nccl_version`` and ``--nccl-version`` give the same rows, the
    flag replacing the field; a release that is not one is refused by name."""
    text = ("cluster: {system: dgx-h200, nodes: 64, fabric: roce-400g}\n"
            "collective: {minbytes: 16M, maxbytes: 16M, nccl_version: 2.28.3}\n")
    sc = tmp_path / "v.yaml"
    sc.write_text(text, encoding="utf-8")
    flags = ["bench", "all_reduce", "--system", "dgx-h200", "--nodes", "64", "--fabric",
             "roce-400g", "-b", "16M", "-e", "16M", "--json"]

    def row(*args: str) -> dict[str, object]:
        assert main(list(args)) == 0
        return dict(json.loads(capsys.readouterr().out.splitlines()[0]))

    old = row(*flags, "--nccl-version", "2.27.3")
    new = row(*flags, "--nccl-version", "2.28.3")
    assert (old["algorithm"], old["protocol"]) == ("tree", "LL128")
    assert (new["algorithm"], new["protocol"]) == ("nvlstree", "Simple")
    assert row("bench", "scenario", str(sc), "--json") == new
    assert row("bench", "scenario", str(sc), "--json", "--nccl-version", "2.27.3") == old
    assert main([*flags[:-1], "--nccl-version", "2.27.3"]) == 0  # the header says whose
    assert "algorithm auto (NCCL 2.27.3's choice)" in capsys.readouterr().out
    assert main([*flags, "--nccl-version", "latest"]) == 2
    assert "--nccl-version (collective.nccl_version)" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("2.28.3", "3.0"), encoding="utf-8")
    assert main(["bench", "scenario", str(bad)]) == 2
    assert "collective.nccl_version" in capsys.readouterr().err
    # YAML reads an unquoted 2.30 as the number 2.3: refused with the fix, never read as 2.3
    bad.write_text(text.replace("2.28.3", "2.30"), encoding="utf-8")
    assert main(["bench", "scenario", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "collective.nccl_version" in err and "quote the release" in err


def test_a_release_the_model_does_not_have_is_answered_as_the_nearest_and_says_so(
        capsys) -> None:  # type: ignore[no-untyped-def]
    """A release newer than the newest modelled (2.30.7) gets that release's choice and a
    warning naming both; one older than the oldest tables (2.21.5) 2.23's, said too; a
    modelled release (2.27.3) no such line."""
    flags = ["bench", "all_reduce", "--system", "dgx-h200", "--nodes", "64", "--fabric",
             "roce-400g", "-b", "16M", "-e", "16M"]

    def run(release: str, *extra: str) -> str:
        assert main([*flags, *extra, "--nccl-version", release]) == 0
        return str(capsys.readouterr().out)

    assert run("2.30.7", "--json") == run("2.29.7", "--json")
    # with --json the job's warnings go to stderr, the rows alone to stdout
    assert main([*flags, "--json", "--nccl-version", "2.30.7"]) == 0
    got = capsys.readouterr()
    assert "warning: NCCL 2.30.7 is newer" in got.err
    assert all(json.loads(line) for line in got.out.splitlines())
    out = run("2.30.7")
    assert ("warning: NCCL 2.30.7 is newer than the newest release modelled (2.29.7)"
            in out and "2.29.7's tuning tables" in out)
    assert run("2.21.5", "--json") == run("2.23.4", "--json")
    assert "older than the oldest tuning tables modelled (2.23)" in run("2.21.5")
    assert "release modelled" not in run("2.27.3") and "oldest" not in run("2.27.3")


def test_bench_names_nccl_229s_known_nvlstree_slowdown(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """NVLSTree forced on 8 HGX B200 with NCCL 2.29.7 (the default): the answer warns of
    NVIDIA/nccl#2035, which the model does not include; with 2.30.3, or a ring, it does
    not."""
    flags = ["bench", "all_reduce", "--system", "hgx-b200", "--nodes", "8", "--fabric",
             "ib-ndr", "-b", "8G", "-e", "8G"]
    assert main([*flags, "--algo", "nvlstree"]) == 0
    assert "warning: NCCL 2.29.7 runs NVLSTree across 4 or more Blackwell servers" in \
        capsys.readouterr().out
    assert main([*flags, "--algo", "nvlstree", "--nccl-version", "2.30.3"]) == 0
    assert "nccl#2035" not in capsys.readouterr().out
    assert main([*flags, "--algo", "ring"]) == 0
    assert "nccl#2035" not in capsys.readouterr().out


def test_nccl_variables_live_in_the_scenario_too(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A scenario's collective.env carries NCCL's variables: the same variables give the
    same rows from the scenario as from the shell; a variable set in the shell replaces
    the scenario's and the run says so; the job's answer names the variables it ran
    under. (The web and a sweep run the same job: the parity test runs the shipped
    bench-roce-qps through both.)"""
    from fabricsim import jobs
    from fabricsim.scenario import load_scenario_text

    text = ("cluster: {system: dgx-h100, nodes: 16, fabric: roce-400g, topology: fat-tree}\n"
            "collective: {minbytes: 1G, maxbytes: 1G, env: {NCCL_IB_QPS_PER_CONNECTION: 4,"
            " NCCL_ALGO: Ring}}\n")
    sc = tmp_path / "env.yaml"
    sc.write_text(text, encoding="utf-8")
    flags = ["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "16", "--fabric",
             "roce-400g", "--topology", "fat-tree", "-b", "1G", "-e", "1G", "--json"]

    def row() -> dict[str, object]:
        out = capsys.readouterr().out
        return dict(json.loads(out.splitlines()[0]))

    assert main(["bench", "scenario", str(sc), "--json"]) == 0
    by_scenario = row()
    monkeypatch.setenv("NCCL_IB_QPS_PER_CONNECTION", "4")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    assert main(flags) == 0
    assert row() == by_scenario and by_scenario["algorithm"] == "ring"
    monkeypatch.delenv("NCCL_ALGO")
    monkeypatch.delenv("NCCL_IB_QPS_PER_CONNECTION")
    job = jobs.job_from_scenario("bench", load_scenario_text(text))
    report = jobs.run(job)
    assert report.to_dict()["nccl_env"] == {"NCCL_ALGO": "Ring",
                                            "NCCL_IB_QPS_PER_CONNECTION": "4"}
    assert round(report.rows[None][0].time_us, 4) == by_scenario["time_us"]
    # without the scenario's variables: one queue pair, NCCL's own choice
    assert main(flags) == 0
    assert row()["time_us"] != by_scenario["time_us"]
    # the shell's value replaces the scenario's, and the run says so (stderr with --json)
    monkeypatch.setenv("NCCL_IB_QPS_PER_CONNECTION", "1")
    assert main(["bench", "scenario", str(sc), "--json"]) == 0
    captured = capsys.readouterr()
    assert "NCCL_IB_QPS_PER_CONNECTION=1 in the environment replaces the scenario's " \
        "NCCL_IB_QPS_PER_CONNECTION: 4" in captured.err
    assert json.loads(captured.out.splitlines()[0])["time_us"] > by_scenario["time_us"]


@pytest.mark.parametrize(("env", "field", "says"), [
    ("{NCCL_IB_HCA: mlx5_0}", "collective.env", "NCCL_IB_HCA"),
    ("{FI_PROVIDER: efa}", "collective.env", "not a variable NCCL reads"),
    ("{NCCL_NVLS_ENABLE: true}", "collective.env", "1 or 0"),
    ("{NCCL_BUFFSIZE: 1.5}", "collective.env", "a number or a word"),
    ("{NCCL_MIN_NCHANNELS: 8, NCCL_MAX_NCHANNELS: 4}", "collective.env", "above"),
    ("[NCCL_ALGO]", "collective.env", "a mapping"),
    ("{NCCL_NVLS_ENABLE: off}", "collective.env", "1 or 0"),
    ("{nccl_algo: Ring}", "collective.env", "upper case: NCCL_ALGO"),
    ("{NCCL_ALGO: NVLS}, collective: broadcast", "collective.env.NCCL_ALGO",
     "NCCL runs it with"),
    ("{NCCL_P2P_NET_CHUNKSIZE: 4096}, collective: alltoall",
     "collective.env.NCCL_P2P_NET_CHUNKSIZE", "not modelled for alltoall"),
])
def test_a_scenarios_bad_nccl_variable_is_refused_by_name(
        tmp_path, capsys, env: str, field: str, says: str) -> None:  # type: ignore[no-untyped-def]
    sc = tmp_path / "bad.yaml"
    sc.write_text(f"cluster: {{system: dgx-h100, nodes: 2}}\ncollective: {{env: {env}}}\n",
                  encoding="utf-8")
    assert main(["bench", "scenario", str(sc)]) == 2
    err = capsys.readouterr().err
    assert field in err and says in err and "Traceback" not in err


def test_the_shell_and_the_scenario_contradicting_each_other_exit_2(
        tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """NCCL_NVLS_ENABLE=0 in the shell beside the scenario's NCCL_ALGO: NVLS leaves
    nothing to run: refused naming the variable, as when both are in the shell."""
    sc = tmp_path / "nvls.yaml"
    sc.write_text("cluster: {system: dgx-h100, nodes: 1}\n"
                  "collective: {minbytes: 1G, maxbytes: 1G, env: {NCCL_ALGO: NVLS}}\n",
                  encoding="utf-8")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    assert main(["bench", "scenario", str(sc)]) == 2
    assert "NCCL_NVLS_ENABLE" in capsys.readouterr().err


def test_the_limit_line_counts_the_queue_pairs_already_set(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """On RoCE's hashed ECMP the limit line suggests more queue pairs; with 4 already set
    (the shipped bench-roce-qps) it says more than those 4, with 1 it names none."""
    assert main(["bench", "scenario", "bench-roce-qps", "-b", "4G", "-e", "4G"]) == 0
    assert "more queue pairs per connection than the 4 set" in capsys.readouterr().out
    monkeypatch.setenv("NCCL_IB_QPS_PER_CONNECTION", "1")
    assert main(["bench", "scenario", "bench-roce-qps", "-b", "4G", "-e", "4G"]) == 0
    out = capsys.readouterr().out
    assert "more queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION)" in out
