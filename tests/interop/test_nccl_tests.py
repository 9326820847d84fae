"""nccl-tests logs in and out (fabricsim.interop.nccl_tests), and NCCL's environment."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from fabricsim.cli.app import main
from fabricsim.errors import ConfigError
from fabricsim.interop.nccl_tests import (
    Row,
    format_nccl_tests,
    nccl_env,
    parse_nccl_tests,
)
from fabricsim.protocols import PROTOCOLS

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl_logs"


def test_three_tests_one_failed() -> None:
    f = parse_nccl_tests((LOGS / "nccl_tests_2x8_h100_three_tests.log").read_text())
    assert f.version == "2.13.9"
    assert [t.collective for t in f.tests] == ["all_reduce", "all_gather", "alltoall"]
    ar, ag, a2a = f.tests
    assert (ar.ranks, ar.nodes, ar.gpus_per_node) == (16, 2, 8)
    assert ar.gpu_model == "NVIDIA H100 80GB HBM3" and ar.complete
    assert ar.rows[0].time_us == 2432.7 and ar.rows[0].busbw_gbps_inplace == 422.54
    assert ag.rows[0].wrong is None and ag.rows[0].redop == "none"
    assert a2a.failed and not a2a.rows and "Test NCCL failure" in a2a.failures[0]
    assert any("failed" in n for n in f.notes)


def test_truncated_and_old_format() -> None:
    text = (LOGS / "all_reduce_perf_dgx_a100.log").read_text()
    cut = "\n".join(line for line in text.splitlines() if "Avg bus" not in line)
    f = parse_nccl_tests(cut, "all_reduce_perf.log")
    assert not f.tests[0].complete and any("truncated" in n for n in f.notes)
    old = parse_nccl_tests((LOGS / "all_gather_perf_2gpu_oldformat.log").read_text(),
                           "all_gather_perf.log")
    t = old.tests[0]
    assert t.collective == "all_gather" and t.ranks == 2 and t.rows[0].root == -1
    assert t.gpus_per_thread == 2


def test_not_a_log_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="nccl-tests output"):
        parse_nccl_tests("hello\nworld\n")


_ROW = "  1048576  262144  float  sum  -1  50.0  20.97  36.70  0  49.0  21.40  37.45  0"


@pytest.mark.parametrize(("column", "bad"), [
    ("size", "1" + "0" * 30), ("count", "1" + "0" * 30), ("root", "x"),
    ("out-of-place time", "-50.0"), ("out-of-place time", "nan"),
    ("out-of-place time", "0"), ("out-of-place time", "fast"),
    ("out-of-place busbw", "-36.70"), ("out-of-place busbw", "inf"),
    ("in-place busbw", "NaN"), ("out-of-place #wrong", "-1")])
def test_nonsense_in_a_row_names_the_file_line_and_column(column: str, bad: str) -> None:
    """A result row with a figure that is not one (negative, NaN/inf, not a number, a size
    past 1 PiB) is refused, never read as a measurement; N/A bandwidths stay NaN."""
    index = {"size": 0, "count": 1, "root": 4, "out-of-place time": 5,
             "out-of-place busbw": 7, "out-of-place #wrong": 8, "in-place busbw": 11}[column]
    tok = _ROW.split()
    tok[index] = bad
    text = "# size count type redop root time\n" + _ROW + "\n  " + "  ".join(tok) + "\n"
    with pytest.raises(ConfigError, match=rf"LOG: ar_perf\.log line 3: {column} "
                                          rf"'{re.escape(bad)}' is not"):
        parse_nccl_tests(text, "ar_perf.log")
    na = _ROW.replace("36.70", "N/A")
    assert math.isnan(parse_nccl_tests(na).tests[0].rows[0].busbw_gbps)


@pytest.mark.parametrize(("key", "bad"), [("size_bytes", '"x"'), ("size_bytes", "1e30"),
                                          ("size_bytes", "-4"), ("time_us", "NaN"),
                                          ("time_us", "-2.5"), ("busbw_gbps", "-1"),
                                          ("busbw_gbps", "Infinity"), ("count", "true")])
def test_nonsense_in_a_json_row_names_the_file_line_and_key(key: str, bad: str) -> None:
    good = {"size_bytes": 1048576, "count": 262144, "time_us": 20.9, "busbw_gbps": 87.6}
    rows = [json.dumps(good), json.dumps(good).replace(f'"{key}": {good[key]}',
                                                       f'"{key}": {bad}')]
    assert rows[1] != rows[0]
    with pytest.raises(ConfigError, match=rf"LOG: rows\.json line 2: {key} .* is not"):
        parse_nccl_tests("\n".join(rows), "rows.json")


def test_format_round_trips_with_extra_columns() -> None:
    rows = [Row(2**20, 2**18, "float", "sum", -1, 40.0, 26.2, 49.2, None, 41.0, 25.6, 48.0,
                None, extra=("ring", "LL128")),
            Row(2**30, 2**28, "float", "sum", -1, 4000.0, 268.4, 503.3, 0, 4010.0, 267.8,
                502.0, 0, extra=("nvls", "Simple"))]
    out = format_nccl_tests(rows, collective="all_reduce",
                            devices=[("n0", 0, "NVIDIA H100 80GB HBM3"),
                                     ("n1", 0, "NVIDIA H100 80GB HBM3")],
                            extra_columns=("algorithm", "protocol"))
    t = parse_nccl_tests(out).tests[0]
    assert list(t.rows) == rows and t.nodes == 2 and t.complete


def test_bench_output_is_nccl_tests_output(capsys) -> None:
    assert main(["bench", "all_reduce", "-b", "1M", "-e", "4M", "--nodes", "2"]) == 0
    f = parse_nccl_tests(capsys.readouterr().out)
    t = f.tests[0]
    assert t.collective == "all_reduce" and (t.ranks, t.nodes) == (16, 2)
    assert [r.size_bytes for r in t.rows] == [2**20, 2**21, 2**22]
    assert all(r.wrong is None and r.time_us == r.time_us_inplace for r in t.rows)
    assert all(len(r.extra) == 2 for r in t.rows)   # algorithm and protocol


def test_nccl_env_as_nccl_reads_it() -> None:
    e = nccl_env({"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "^LL"})
    assert e.algorithm_set() == {"ring", "tree"} and e.protocol_set() == {"ll128", "simple"}
    assert nccl_env({}).algorithms is None
    assert nccl_env({"NCCL_ALGO": "CollNetDirect", "NCCL_COLLNET_ENABLE": "1"}
                    ).allowed_algorithms(["ring", "sharp", "nvls_sharp"]) == \
        ["sharp", "nvls_sharp"]
    for bad in ({"NCCL_ALGO": "fast"}, {"NCCL_PROTO": "LL256"},
                {"NCCL_NVLS_ENABLE": "yes"}, {"NCCL_ALGO": "allgather:ring;ring"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            nccl_env(bad)


def test_nccl_24_per_collective_form() -> None:
    e = nccl_env({"NCCL_ALGO": "ring;allreduce:tree,nvls", "NCCL_PROTO": "allgather:^LL"})
    assert e.allowed_algorithms(["ring", "tree", "nvls"], "all_reduce") == ["tree", "nvls"]
    assert e.allowed_algorithms(["ring", "tree", "nvls"], "all_gather") == ["ring"]
    assert e.protocol_set("all_gather") == {"ll128", "simple"}
    assert e.protocol_set("all_reduce") is None
    with pytest.raises(ConfigError, match="unknown collective 'alltoall'"):
        nccl_env({"NCCL_ALGO": "alltoall:ring"})


@pytest.mark.parametrize(("env", "field", "words"), [
    ({"NCCL_IB_HCA": "mlx5_0,mlx5_1"}, "NCCL_IB_HCA", "nics: N"),
    ({"NCCL_SOMETHING_NEW": "1"}, "NCCL_SOMETHING_NEW", "Honoured: NCCL_ALGO"),
    ({"NCCL_BUFFSIZE": "524288"}, "NCCL_BUFFSIZE", "1048576..1073741824"),
    ({"NCCL_BUFFSIZE": "16M"}, "NCCL_BUFFSIZE", "NCCL would read '16'"),
    ({"NCCL_BUFFSIZE": "1_048_576"}, "NCCL_BUFFSIZE", "whole number"),
    ({"NCCL_NET_GDR_C2C": "0"}, "NCCL_NET_GDR_C2C", "host memory.*Accepted: 1"),
    ({"NCCL_NET_GDR_LEVEL": "LOC"}, "NCCL_NET_GDR_LEVEL", "GPU Direct RDMA"),
    ({"NCCL_NET_GDR_READ": "0"}, "NCCL_NET_GDR_READ", "host memory"),
    ({"NCCL_MNNVL_ENABLE": "0"}, "NCCL_MNNVL_ENABLE", "multi-node NVLink"),
    ({"NCCL_P2P_NET_CHUNKSIZE": "64K"}, "NCCL_P2P_NET_CHUNKSIZE", "whole number"),
    ({"NCCL_IB_DISABLE": "1"}, "NCCL_IB_DISABLE", "sockets"),
    ({"NCCL_NET": "Socket"}, "NCCL_NET", "sockets"),
    ({"NCCL_TESTS_SPLIT_MASK": "0x7"}, "NCCL_TESTS_SPLIT_MASK", "splits"),
    ({"NCCL_MIN_NCHANNELS": "32", "NCCL_MAX_NCHANNELS": "8"}, "NCCL_MIN_NCHANNELS",
     "above"),
    ({"NCCL_MAX_NCHANNELS": "65"}, "NCCL_MAX_NCHANNELS", "1..64"),
    ({"NCCL_IB_QPS_PER_CONNECTION": "0"}, "NCCL_IB_QPS_PER_CONNECTION", "1..128"),
    ({"NCCL_ALGO": "NVLS", "NCCL_NVLS_ENABLE": "0"}, "NCCL_NVLS_ENABLE", "turns NVLS off"),
    ({"NCCL_ALGO": "CollNetDirect"}, "NCCL_COLLNET_ENABLE", "NCCL_COLLNET_ENABLE=1"),
    ({"NCCL_ALGO": "PAT"}, "NCCL_ALGO", "PAT algorithm is not modelled"),
])
def test_unsupported_or_contradictory_nccl_settings_are_refused_by_name(
        env: dict[str, str], field: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as e:
        nccl_env(env)
    assert e.value.field == field


def test_nccl_settings_that_change_nothing_or_are_the_default_are_accepted() -> None:
    e = nccl_env({"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0",
                  "NCCL_BUFFSIZE": "4194304", "NCCL_CROSS_NIC": "2", "NCCL_NVLS_ENABLE": "2",
                  "NCCL_MIN_CTAS": "4", "NCCL_IB_QPS_PER_CONNECTION": "4"})
    assert e.no_effect == ("NCCL_DEBUG", "NCCL_SOCKET_IFNAME")
    assert (e.nvls, e.min_channels, e.qps, e.channels(2), e.channels(16)) == \
        (None, 4, 4, 4, 16)


def test_published_recipes_environments_are_taken_whole() -> None:
    # OCI's GB200/GB300 manifests, Google's A3 Ultra/A4 recipes and Azure's NDv4 set these
    # (data/reference/nccl_tests.csv notes): each is honoured, set to what the model does
    # already, or without effect, and says which
    oci = {"NCCL_MNNVL_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_CUMEM_ENABLE": "1",
           "NCCL_NET_GDR_C2C": "1", "NCCL_IB_QPS_PER_CONNECTION": "4",
           "NCCL_IB_SPLIT_DATA_ON_QPS": "0", "NCCL_BUFFSIZE": "16777216",
           "NCCL_IB_GID_INDEX": "3", "NCCL_P2P_NET_CHUNKSIZE": "0x80000",
           "NCCL_MNNVLS_ENABLE": "1", "NCCL_NET_GDR_LEVEL": "SYS", "NCCL_IB_SL": ""}
    e = nccl_env(oci)
    assert (e.buffsize_bytes, e.qps, e.p2p_net_chunk_bytes) == (16777216, 4, 524288)
    assert e.as_modelled == ("NCCL_IB_SPLIT_DATA_ON_QPS", "NCCL_MNNVL_ENABLE",
                             "NCCL_NET_GDR_C2C", "NCCL_NET_GDR_LEVEL")
    assert "NCCL_MNNVLS_ENABLE" in e.no_effect and "NCCL_BUFFSIZE" not in e.no_effect
    assert "NCCL_IB_SL" not in e.no_effect  # empty: unset, as NCCL reads it
    assert "16 MiB Simple buffer" in e.describe()
    # the point-to-point chunk sizes send/recv and all-to-all only: refused there (the
    # model times them at NCCL's default), a note for the rest
    assert "without effect on all_reduce" in e.check_p2p("all_reduce")
    with pytest.raises(ConfigError, match="not modelled for alltoall") as err:
        e.check_p2p("alltoall")
    assert err.value.field == "NCCL_P2P_NET_CHUNKSIZE"
    assert nccl_env({"NCCL_P2P_NET_CHUNKSIZE": "131072"}).check_p2p("sendrecv") == ""
    gcp = nccl_env({"NCCL_NET": "gIB", "NCCL_IB_DISABLE": "0", "NCCL_PXN_DISABLE": "0",
                    "NCCL_GRAPH_MIXING_SUPPORT": "0", "NCCL_TESTS_SPLIT_MASK": "0x0",
                    "NCCL_TOPO_FILE": "/etc/topo.xml", "NCCL_IB_AR_THRESHOLD": "0",
                    "NCCL_IB_PCI_RELAXED_ORDERING": "1", "NCCL_IB_MERGE_VFS": "0"})
    assert set(gcp.as_modelled) == {"NCCL_NET", "NCCL_IB_DISABLE", "NCCL_PXN_DISABLE",
                                    "NCCL_TESTS_SPLIT_MASK", "NCCL_IB_PCI_RELAXED_ORDERING"}
    assert gcp.buffsize_bytes is None


def test_cross_nic_is_what_the_model_does_except_on_rails(capsys, monkeypatch) -> None:
    """NCCL_CROSS_NIC=1 lets a ring leave a server on one NIC and enter the next on
    another. Where every NIC reaches every other alike (a fat-tree, a dragonfly) that is
    what the model's rings do; on a rail-optimized network it is refused by name."""
    e = nccl_env({"NCCL_CROSS_NIC": "1"})
    assert e.cross_nic and "NCCL_CROSS_NIC" in e.as_modelled
    assert not nccl_env({"NCCL_CROSS_NIC": "0"}).cross_nic
    # CSCS's recipe for Alps (cscs-docs, nccl_env_vars), taken whole on its own system
    for k, v in {"NCCL_NET": "AWS Libfabric", "NCCL_NET_GDR_LEVEL": "PHB",
                 "NCCL_CROSS_NIC": "1", "NCCL_PROTO": "^LL128"}.items():
        monkeypatch.setenv(k, v)
    quad = ["bench", "all_reduce", "--system", "quad-gh200", "--nodes", "2", "-b", "4M",
            "-e", "4M"]
    assert main(quad) == 0
    out = capsys.readouterr().out
    assert "NCCL_CROSS_NIC" in out and "set to what the model does already" in out
    assert "LL128" not in out.split("# Avg")[0].split("#wrong")[-1]
    assert main(["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "NCCL_CROSS_NIC" in err and "rail-optimized" in err
    assert main(["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "2",
                 "--topology", "fat-tree", "-b", "1M", "-e", "1M"]) == 0
    assert main(["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "1", "-b", "1M",
                 "-e", "1M"]) == 0  # one server: no ring between servers


def test_cross_nic_in_a_scenario_is_refused_on_rails_by_every_face(capsys, tmp_path) -> None:
    """validate, bench and simulate refuse the section's NCCL_CROSS_NIC=1 on a
    rail-optimized network alike, naming the scenario's field; on a fat-tree all run."""
    body = ("collective: {collective: all_reduce, minbytes: 1M, maxbytes: 1M, "
            "env: {NCCL_CROSS_NIC: 1}}\n"
            "faults: [{type: link_degraded, kind: nic-leaf, index: 0, factor: 0.5}]\n")
    rails, tree = tmp_path / "rails.yaml", tmp_path / "tree.yaml"
    rails.write_text("cluster: {system: dgx-h100, nodes: 2}\n" + body)
    tree.write_text("cluster: {system: dgx-h100, nodes: 2, topology: fat-tree}\n" + body)
    for cmd in (["validate"], ["bench", "all_reduce", "--backend", "flow"], ["simulate"]):
        assert main([*cmd, str(rails)]) == 2, cmd
        assert "collective.env.NCCL_CROSS_NIC" in capsys.readouterr().err, cmd
        assert main([*cmd, str(tree)]) == 0, cmd
        capsys.readouterr()


def test_both_channel_variables_combine_as_nccl_combines_them() -> None:
    # NCCL takes the larger minimum and the smaller maximum of NCCL_MIN/MAX_NCHANNELS and
    # the communicator's minCTAs/maxCTAs (src/graph/connect.cc), whichever name is first
    e = nccl_env({"NCCL_MIN_NCHANNELS": "4", "NCCL_MIN_CTAS": "24", "NCCL_MAX_CTAS": "32",
                  "NCCL_MAX_NCHANNELS": "28"})
    assert (e.min_channels, e.max_channels, e.ctas) == (24, 28, (24, 32))
    assert e.channels(16) == 24 and e.channels(64) == 28
    with pytest.raises(ConfigError, match="NCCL_MIN_CTAS=24 is above NCCL_MAX_NCHANNELS=8") \
            as err:
        nccl_env({"NCCL_MIN_CTAS": "24", "NCCL_MAX_NCHANNELS": "8"})
    assert err.value.field == "NCCL_MIN_CTAS"


def test_bench_takes_min_ctas_as_nvls_channels(capsys, monkeypatch) -> None:
    # NCCL clamps NVLS's channels with NCCL_MIN_CTAS too (src/transport/nvls.cc): from 4
    # servers they bound NVLSTree's rate, so 24 of them move more than NCCL's 16 (issue
    # 309's 8 DGX H100 at 1 GiB: 320 GB/s by default, 375 with NCCL_MIN_CTAS=24); bench
    # says what the model keeps of them
    args = ["bench", "all_reduce", "--nodes", "8", "-b", "1G", "-e", "1G", "--json"]
    assert main(args) == 0
    default = json.loads(capsys.readouterr().out)["busbw_gbps"]
    monkeypatch.setenv("NCCL_MIN_CTAS", "24")
    assert main(args) == 0
    got = capsys.readouterr()
    row = json.loads(got.out)
    assert row["algorithm"] == "nvlstree"
    assert row["busbw_gbps"] > 1.08 * default
    assert "warning: NCCL_MIN_CTAS=24 sets NVLS channels in NCCL too" in got.err
    assert "bounds NVLSTree's rate from 4 servers on by those channels" in got.err
    monkeypatch.delenv("NCCL_MIN_CTAS")
    monkeypatch.setenv("NCCL_MAX_CTAS", "8")  # fewer than NCCL's 16: slower
    assert main([*args, "--algo", "nvlstree"]) == 0
    assert json.loads(capsys.readouterr().out)["busbw_gbps"] < 0.9 * default
    monkeypatch.delenv("NCCL_MAX_CTAS")
    monkeypatch.setenv("NCCL_MIN_CTAS", "24")
    monkeypatch.setenv("NCCL_ALGO", "Ring")   # no NVLS ran: nothing to say
    assert main(args) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["algorithm"] == "ring"
    assert "NVLS channels" not in got.err


def test_bench_refuses_a_cta_minimum_above_its_maximum(capsys, monkeypatch) -> None:
    # NVLS's channels are NCCL's own clamped by the CTAS pair; a pair that cannot clamp
    # anything is refused by name, with the fix, before anything is timed
    monkeypatch.setenv("NCCL_MIN_CTAS", "24")
    monkeypatch.setenv("NCCL_MAX_CTAS", "8")
    assert main(["bench", "all_reduce", "--nodes", "8", "-b", "1G", "-e", "1G"]) == 2
    err = capsys.readouterr().err
    assert "NCCL_MIN_CTAS=24 is above NCCL_MAX_CTAS=8" in err
    assert "give a minimum at most the maximum" in err
    assert "Traceback" not in err


def test_bench_honours_channels_and_queue_pairs(capsys, monkeypatch) -> None:
    args = ["bench", "all_reduce", "--nodes", "2", "-b", "64M", "-e", "64M", "--json"]
    assert main(args) == 0
    free = json.loads(capsys.readouterr().out)
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", "1")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    assert main(args) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["time_us"] > 2 * free["time_us"]   # one ring on one NIC of 8
    assert main([*args, "--backend", "flow"]) == 2
    assert "NCCL_MAX_NCHANNELS" in capsys.readouterr().err
    monkeypatch.delenv("NCCL_MAX_NCHANNELS")
    monkeypatch.delenv("NCCL_ALGO")
    # queue pairs are honoured on every backend: on Ethernet each QP hashes on its own,
    # so an all-to-all between two NVL72 racks collides less (the flow backend agrees)
    a2a = ["bench", "alltoall", "--system", "gb300-nvl72", "--nodes", "2",
           "--gpus-per-node", "64", "--fabric", "roce-400g", "-b", "1G", "-e", "1G", "--json"]
    got = {}
    for q, backend in (("1", "analytic"), ("4", "analytic"), ("4", "flow")):
        monkeypatch.setenv("NCCL_IB_QPS_PER_CONNECTION", q)
        assert main([*a2a, "--backend", backend]) == 0
        out = capsys.readouterr().out
        assert "NCCL_IB_QPS_PER_CONNECTION" not in out  # no "no effect" warning
        got[(q, backend)] = json.loads(out.strip().splitlines()[-1])["busbw_gbps"]
    assert got[("4", "analytic")] > 1.5 * got[("1", "analytic")]
    assert got[("4", "flow")] == pytest.approx(got[("4", "analytic")], rel=0.05)


def test_bench_honours_nccl_buffsize_as_the_scenarios_buffer(capsys, monkeypatch,
                                                            tmp_path) -> None:
    # NCCL_BUFFSIZE sets the Simple step a tree moves per chunk (NCCL_BUFFSIZE / 8); the
    # environment and a scenario's params.buffsize are one setting and give one answer
    args = ["bench", "all_reduce", "--system", "dgx-h100", "--nodes", "2", "--algo", "tree",
            "--proto", "simple", "-b", "64M", "-e", "64M", "--json"]
    assert main(args) == 0
    default = json.loads(capsys.readouterr().out)["time_us"]
    monkeypatch.setenv("NCCL_BUFFSIZE", "16777216")
    assert main(args) == 0
    out = capsys.readouterr()
    assert "NCCL_BUFFSIZE" not in out.err  # honoured: in no warning
    big = json.loads(out.out)["time_us"]
    assert big > 1.5 * default
    monkeypatch.delenv("NCCL_BUFFSIZE")
    sc = tmp_path / "buf.yaml"
    sc.write_text("name: buf\ncluster:\n  system: dgx-h100\n  nodes: 2\n"
                  "  params: {buffsize: 16777216}\n"
                  "collective:\n  collective: all_reduce\n  minbytes: 64MiB\n"
                  "  maxbytes: 64MiB\n  algo: tree\n  proto: simple\nseed: 0\n")
    assert main(["bench", "scenario", str(sc), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_us"] == pytest.approx(big, rel=1e-9)


def test_bench_says_which_recipe_settings_it_takes_as_modelled(capsys, monkeypatch) -> None:
    for k, v in {"NCCL_NET_GDR_C2C": "1", "NCCL_IB_GID_INDEX": "3",
                 "NCCL_P2P_NET_CHUNKSIZE": "524288"}.items():
        monkeypatch.setenv(k, v)
    base = ["bench", "--system", "dgx-h100", "--nodes", "2", "-b", "1M", "-e", "1M"]
    assert main([base[0], "all_reduce", *base[1:]]) == 0
    err = capsys.readouterr().out  # the table's "# warning:" lines
    assert "NCCL_NET_GDR_C2C: set to what the model does already" in err
    assert "NCCL_IB_GID_INDEX: set, without effect on time" in err
    assert "NCCL_P2P_NET_CHUNKSIZE=524288: set, without effect on all_reduce" in err
    assert main([base[0], "alltoall", *base[1:]]) == 2
    assert "NCCL_P2P_NET_CHUNKSIZE" in capsys.readouterr().err


def _bench_algos(capsys, monkeypatch, env: dict[str, str], *args: str) -> list[str]:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = main(["bench", "all_reduce", "--json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return [json.loads(x)["algorithm"] for x in out.out.splitlines()]


def test_bench_honours_the_nccl_environment(capsys, monkeypatch) -> None:
    sweep = ["-b", "1M", "-e", "1G", "-f", "32", "--nodes", "2"]
    assert set(_bench_algos(capsys, monkeypatch, {"NCCL_ALGO": "Ring"}, *sweep)) == {"ring"}
    assert "nvls" not in _bench_algos(capsys, monkeypatch, {"NCCL_ALGO": "",
                                                            "NCCL_NVLS_ENABLE": "0"}, *sweep)
    assert "nvlstree" not in _bench_algos(capsys, monkeypatch, {}, *sweep)
    big = _bench_algos(capsys, monkeypatch, {"NCCL_NVLS_ENABLE": "1",
                                             "NCCL_COLLNET_ENABLE": "1"},
                       "-b", "8G", "-e", "8G", "--nodes", "16")
    assert big == ["nvls_sharp"]
    monkeypatch.setenv("NCCL_COLLNET_ENABLE", "1")
    assert main(["bench", "all_reduce", "--nodes", "2", "--fabric", "roce-400g"]) == 2
    assert "sharp" in capsys.readouterr().err.lower()


def test_bench_scenario_runs_its_sweep(capsys) -> None:
    scen = Path(__file__).resolve().parents[2] / "src/fabricsim/scenarios/flow-degraded-link.yaml"
    assert main(["bench", "scenario", str(scen), "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) > 1 and not math.isnan(rows[0]["busbw_gbps"])


def test_an_nccl_tests_command_line_runs_as_is(capsys) -> None:
    """A whole nccl-tests line (issue 37): the binary's name, every flag of nccl-tests
    2.19 and -o as its reduction op."""
    line = ["bench", "all_gather_perf", "-b", "1M", "-e", "1M", "-c", "1", "-n", "10",
            "-w", "2", "-g", "1", "-d", "half", "-t", "1", "-m", "1", "-r", "0", "-z", "0",
            "-y", "0", "-T", "60", "-a", "3", "-C", "0", "-R", "0", "-N", "1", "-p", "0",
            "-S", "0", "-M", "0", "-u", "0", "-I", "0", "-K", "0", "-x", "0", "-D", "0",
            "-V", "0", "-G", "0", "--nodes", "2"]
    assert main([*line, "-o", "max"]) == 0
    out = capsys.readouterr().out
    t = parse_nccl_tests(out).tests[0]
    row = t.rows[0]
    # all_gather's count is elements per rank, as nccl-tests prints it
    assert (row.type, row.redop, row.count) == ("half", "none", 2**20 // 2 // 16)
    assert "agg iters: 1 validation: 1 graph: 0 unalign: 0" in out
    assert "not modelled" not in out
    assert main([*line, "-o", "max", "--op", "min"]) == 2
    assert "two reduction ops" in capsys.readouterr().err


def test_nccl_tests_flags_that_change_the_run(capsys, tmp_path: Path) -> None:
    base = ["bench", "broadcast", "-b", "64K", "-e", "64K", "--json"]
    assert main(base) == 0
    one = json.loads(capsys.readouterr().out)
    assert main([*base, "-m", "4"]) == 0  # four operations share one launch
    four = json.loads(capsys.readouterr().out)
    launch = PROTOCOLS[one["protocol"].lower()].launch * 1e6
    assert four["time_us"] == pytest.approx(one["time_us"] - 0.75 * launch, abs=0.01)
    assert main([*base, "-r", "3"]) == 0 and json.loads(capsys.readouterr().out)["root"] == 3
    assert main([*base, "-r", "8"]) == 2 and "-r/--root" in capsys.readouterr().err
    assert main(["bench", "all_reduce", "-b", "1M", "-e", "1M", "-G", "10", "-R", "1"]) == 0
    out = capsys.readouterr().out
    assert "-G 10 is not modelled" in out and "-R 1 is not modelled" in out
    rows = tmp_path / "rows.json"
    assert main(["bench", "all_reduce", "-b", "1M", "-e", "1M", "-J", str(rows)]) == 0
    assert json.loads(rows.read_text().splitlines()[0])["size_bytes"] == 2**20
    assert main(["bench", "all_reduce", "-b", "1M", "-e", "1M", "-a", "7"]) == 2
    assert "-a" in capsys.readouterr().err


def test_nccl_inspector_output_is_read_as_tests() -> None:
    """issue 37: NCCL Inspector's per-collective JSON (NCCL 2.28+) feeds compare,
    calibrate and diagnose like nccl-tests logs: one test per communicator and collective,
    the median per size over ranks and calls, hosts by rank."""
    import json
    from pathlib import Path

    from fabricsim.interop.nccl_tests import parse_nccl_tests

    path = Path(__file__).resolve().parents[1] / "data" / "nccl_logs" / \
        "nccl_inspector_2x8_h100.jsonl"
    f = parse_nccl_tests(path.read_text(), path.name)
    (t,) = f.tests
    assert t.collective == "all_reduce" and t.source == "NCCL Inspector"
    assert [r.size_bytes for r in t.rows] == [2**29, 2**30, 2**31, 2**32, 2**33]
    assert t.rows[0].time_us == pytest.approx(2432.7)
    assert (t.ranks, t.nodes, t.gpus_per_node) == (16, 2, 8)
    # reduce-scatter records one rank's share: nccl-tests' size counts every rank's
    rec = {"header": {"id": "0x1", "rank": 0, "n_ranks": 8, "nnodes": 1},
           "metadata": {"hostname": "a"},
           "coll_perf": {"coll": "ReduceScatter", "coll_msg_size_bytes": 2147483648,
                         "coll_exec_time_us": 41057, "coll_algobw_gbs": 418.439467,
                         "coll_busbw_gbs": 366.134533}}
    pretty = json.dumps(rec, indent=2) + "\n" + json.dumps(rec, indent=2)
    (rs,) = parse_nccl_tests(pretty).tests
    assert rs.collective == "reduce_scatter" and rs.rows[0].size_bytes == 8 * 2147483648
    # one rank of eight recorded: the communicator's shape from the header, hosts marked
    # as such (diagnose does not take them for real ones)
    assert (rs.ranks, rs.nodes) == (8, 1) and rs.header["hosts"] == "from the header"
    bad = dict(rec, coll_perf={**rec["coll_perf"], "coll_exec_time_us": -3})
    with pytest.raises(ConfigError, match="coll_exec_time_us"):
        parse_nccl_tests(json.dumps(bad), "x.jsonl")


@pytest.mark.parametrize("prefix", ["0: ", "  3: ", "[1,0]<stdout>:", "[0]:", "[default0]:"])
def test_launcher_prefixes_are_read_through(prefix: str) -> None:
    """Logs as Slurm (srun -l), Open MPI (--tag-output) and torchrun write them."""
    from pathlib import Path

    from fabricsim.interop.nccl_tests import parse_nccl_tests

    src = (Path(__file__).resolve().parents[1] / "data" / "nccl_logs" /
           "all_reduce_perf_dgx_a100.log").read_text()
    plain = parse_nccl_tests(src, "all_reduce_perf.log").tests[0]
    tagged = parse_nccl_tests("".join(prefix + ln for ln in src.splitlines(keepends=True)),
                              "all_reduce_perf.log").tests[0]
    assert [r.size_bytes for r in tagged.rows] == [r.size_bytes for r in plain.rows]
    assert [r.time_us for r in tagged.rows] == [r.time_us for r in plain.rows]
