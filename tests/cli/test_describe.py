import json
from pathlib import Path

import pytest
from cli_run import run

from fabricsim.cli.app import main

ROOT = Path(__file__).resolve().parents[2]


def test_describe_json_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", "--system", "dgx-h100", "--nodes", "32",
                       "--fabric", "ib-ndr", "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("gpus", "servers", "switches", "links", "bisection_bandwidth_gbps",
                "oversubscription", "nvlink_domain_gpus", "hierarchy", "bottleneck"):
        assert key in d, key
    assert d["gpus"] == 256 and d["servers"] == 32 and d["nvlink_domain_gpus"] == 8
    names = [lv["name"] for lv in d["hierarchy"]]
    assert names[:3] == ["hbm", "nvlink", "pcie"] and "nic" in names
    bws = {lv["name"]: lv["bandwidth_gbps"] for lv in d["hierarchy"]}
    assert bws["hbm"] > bws["nvlink"] > bws["pcie"]
    # 256 NDR NICs at 50 GB/s, non-blocking: bisection = 128 x 50 GB/s
    assert d["bisection_bandwidth_gbps"] == pytest.approx(6400.0)


def test_describe_pcie_bottleneck_named(capsys: pytest.CaptureFixture[str]) -> None:
    # DGX A100 has Gen4 PCIe (31.5 GB/s) in front of HDR NICs (25 GB/s): the NIC limits.
    code, out, _ = run(capsys, "describe", "--system", "dgx-a100", "--nodes", "4", "--json")
    assert code == 0
    assert json.loads(out)["bottleneck"].startswith("nic")
    # pcie-8gpu: four 100G NICs for eight GPUs give each GPU 6.25 GB/s of NIC.
    code, out, _ = run(capsys, "describe", "--system", "pcie-8gpu", "--nodes", "2", "--json")
    d = json.loads(out)
    assert code == 0 and d["bottleneck"].startswith("nic: 6.25")
    assert d["nvlink_domain_gpus"] == 1


def test_describe_oversubscription_halves_bisection(capsys: pytest.CaptureFixture[str]) -> None:
    _, a, _ = run(capsys, "describe", "--system", "dgx-h100", "--nodes", "96", "--json")
    _, b, _ = run(capsys, "describe", "--system", "dgx-h100", "--nodes", "96",
                  "--oversubscription", "3", "--json")
    ja, jb = json.loads(a), json.loads(b)
    assert jb["oversubscription"] == pytest.approx(3.0)
    assert jb["bisection_bandwidth_gbps"] == pytest.approx(ja["bisection_bandwidth_gbps"] / 3)


def test_describe_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", "--system", "aws-p5", "--nodes", "4")
    assert code == 0
    assert "efa" in out and "bisection" in out


def test_describe_says_what_nccl_is_told(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    _, out, _ = run(capsys, "describe", "--system", "aws-p4d", "--nodes", "2", "--json")
    d = json.loads(out)
    assert d["nccl"] == {"qps_per_connection": 1, "simple_buffer_bytes": 8 * 2**20,
                         "net_plugin_latency_us": 75.0,
                         "crossing_plugin_us": 7.5, "plugin_proto": "simple"}
    assert any("NCCL_PROTO=simple" in n for n in d["notes"])
    assert any("measured to carry 85% of their line rate" in n for n in d["notes"])
    sc = tmp_path / "qps.yaml"
    sc.write_text("cluster:\n  system: dgx-h100\n  nodes: 2\n  fabric: roce-400g\n"
                  "  params: {qps: 4, buffsize: 16777216}\n", encoding="utf-8")
    _, out, _ = run(capsys, "describe", str(sc), "--json")
    d = json.loads(out)
    assert d["nccl"] == {"qps_per_connection": 4, "simple_buffer_bytes": 16777216,
                         "net_plugin_latency_us": 0.0,
                         "crossing_plugin_us": 0.0, "plugin_proto": ""}
    assert not any("line rate" in n for n in d["notes"])  # no measured ceiling
    _, out, _ = run(capsys, "describe", "--system", "dgx-h100", "--nodes", "1", "--json")
    assert json.loads(out)["nccl"] == {}  # no network: nothing to tell
    code, out, _ = run(capsys, "describe", "--system", "aws-p4d", "--nodes", "2")
    assert code == 0 and "NCCL" in out and "sets NCCL_PROTO=simple" in out


def test_describe_from_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", str(ROOT / "examples" / "reference-256.yaml"),
                       "--json")
    assert code == 0 and json.loads(out)["fabric"] == "ib-ndr"


@pytest.mark.parametrize(("args", "needle"), [
    (["--system", "dgx-h10"], "dgx-h100"),
    (["--nodes", "-3"], "--nodes"),
    (["--fabric", "ib-nrd"], "ib-ndr"),
    (["--topology", "fat_tree"], "fat-tree"),
    (["--oversubscription", "0.5"], "oversubscription"),
    (["--gpus-per-node", "9"], "gpus_per_node"),
])
def test_bad_input_exit_2_no_traceback(capsys: pytest.CaptureFixture[str], args: list[str],
                                       needle: str) -> None:
    code, out, err = run(capsys, "describe", *args)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err + out


def test_malformed_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("cluster:\n  nodes: [1\n")
    code, _, err = run(capsys, "describe", str(p))
    assert code == 2 and "line" in err and "Traceback" not in err


def test_presets(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "presets", "--json")
    assert code == 0
    d = json.loads(out)
    systems = {s["name"] for s in d["systems"]}
    assert {"dgx-a100", "dgx-h100", "gb200-nvl72", "aws-p5", "pcie-8gpu"} <= systems
    assert {"ib-ndr", "roce-400g", "efa", "tcp-100g"} <= {f["name"] for f in d["fabrics"]}
    assert {"fat-tree", "rail-optimized", "dragonfly", "torus3d"} <= {
        t["name"] for t in d["topologies"]}
    models = {m["name"]: m for m in d["models"]}
    assert {"llama3-405b", "deepseek-v3", "qwen3-235b-a22b", "gpt-oss-120b"} <= set(models)
    assert models["qwen3-235b-a22b"]["experts"] == "128 top-8"
    assert models["llama3-70b"]["experts"] == "-"
    code, out, _ = run(capsys, "presets", "models", "--json")
    assert code == 0 and list(json.loads(out)) == ["models"]
    code, out, err = run(capsys, "presets", "sytems")
    assert code == 2 and "systems" in err


def test_validate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "validate", str(ROOT / "examples" / "reference-256.yaml"))
    assert code == 0 and "ok" in out and "256 GPUs" in out
    p = tmp_path / "radix.yaml"
    p.write_text("cluster:\n  system: dgx-h100\n  nodes: 4\n  radix: 2\n")
    code, _, err = run(capsys, "validate", str(p))
    assert code == 2 and "radix" in err


def test_validate_checks_the_collective_as_bench_builds_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """validate names the NCCL variables a collective sweep runs under, and refuses what
    bench would: an NCCL_ALGO that leaves a broadcast nothing (it said ok before)."""
    code, out, _ = run(capsys, "validate", "bench-roce-qps")
    assert code == 0 and "all_reduce under NCCL_IB_QPS_PER_CONNECTION=4" in out
    p = tmp_path / "nvls.yaml"
    p.write_text("cluster: {system: dgx-h100, nodes: 2}\n"
                 "collective: {collective: broadcast, env: {NCCL_ALGO: NVLS}}\n")
    code, _, err = run(capsys, "validate", str(p))
    assert code == 2 and "collective.env.NCCL_ALGO" in err and "runs it with ring" in err


def test_user_defined_system(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # An A100 box re-fitted with 400G NICs: PCIe Gen4 (31.5 GB/s) now limits the path.
    p = tmp_path / "custom.yaml"
    p.write_text(
        "systems:\n"
        "  a100-ndr:\n"
        "    base: dgx-a100\n"
        "    nic: connectx-7\n"
        "    nic_gbit_s: 400\n"
        "    default_fabric: ib-ndr\n"
        "cluster:\n  system: a100-ndr\n  nodes: 4\n")
    code, out, err = run(capsys, "describe", str(p), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["bottleneck"].startswith("pcie")
    assert any("faster than the PCIe" in n for n in d["notes"])
    p.write_text("systems:\n  x:\n    base: dgx-a100\n    gpu: h1000\ncluster:\n  system: x\n")
    code, _, err = run(capsys, "describe", str(p))
    assert code == 2 and "systems.x.gpu" in err and "h100" in err


def test_storage_and_management_counted(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    p = tmp_path / "aux.yaml"
    p.write_text("cluster:\n  system: dgx-h100\n  nodes: 8\n  storage: true\n"
                 "  management: true\n")
    code, out, _ = run(capsys, "describe", str(p), "--json")
    assert code == 0
    sw = json.loads(out)["switches"]
    assert sw.get("storage", 0) > 0 and sw.get("management", 0) > 0


def test_export_json_and_graphml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import networkx as nx

    j = tmp_path / "fab.json"
    g = tmp_path / "fab.graphml"
    assert main(["describe", "--nodes", "2", "--export", str(j)]) == 0
    assert main(["describe", "--nodes", "2", "--export", str(g)]) == 0
    data = json.loads(j.read_text())
    assert len(data["gpus"]) == 16 and data["links"] and data["nodes"]
    graph = nx.read_graphml(g)
    assert graph.number_of_nodes() == len(data["nodes"])
    assert main(["describe", "--export", str(tmp_path / "fab.csv")]) == 2
    capsys.readouterr()


@pytest.mark.parametrize(("body", "needle"), [
    ("collective:\n  collective: allreduse\n", "all_reduce"),
    ("collective:\n  maxbytes: lots\n", "collective.maxbytes"),
    ("training:\n  model: llama3-70\n", "training.model"),
    ("faults:\n  - type: link_down\n    kind: leaf-spine\n    index: 99999\n", "index"),
])
def test_validate_checks_sections(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                  body: str, needle: str) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("cluster:\n  system: dgx-h100\n  nodes: 2\n" + body)
    code, _, err = run(capsys, "validate", str(p))
    assert code == 2, err
    assert needle in err and "Traceback" not in err


def test_validate_all_shipped_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted((ROOT / "examples").glob("*.yaml")) + sorted(
        (ROOT / "src" / "fabricsim" / "scenarios").glob("*.yaml"))
    for f in files:
        code, _out, err = run(capsys, "validate", str(f))
        assert code == 0, f"{f.name}: {err}"


@pytest.mark.parametrize("value", ["inf", "nan", "1e9"])
def test_oversubscription_must_be_finite(capsys: pytest.CaptureFixture[str], value: str
                                         ) -> None:
    code, out, err = run(capsys, "describe", "--oversubscription", value)
    assert code == 2 and "oversubscription" in err and "Traceback" not in err + out


def test_folder_as_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "validate", str(tmp_path))
    assert code == 2 and "folder" in err


def test_radix_error_names_the_smallest_radix_that_fits() -> None:
    from fabricsim.errors import TopologyError
    from fabricsim.fabric import build_cluster

    with pytest.raises(TopologyError, match="smallest radix that fits is") as e:
        build_cluster("dgx-h100", 512, radix=8)
    suggested = int(str(e.value).rsplit(" ", 1)[-1])
    assert build_cluster("dgx-h100", 512, radix=suggested).n_gpus == 4096
    with pytest.raises(TopologyError):
        build_cluster("dgx-h100", 512, radix=suggested - 2)


def test_user_defined_system_reaches_every_command(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    p = tmp_path / "custom.yaml"
    p.write_text("systems:\n  box:\n    base: dgx-h100\n    gpus: 4\n    nvlink_domain_gpus: 4\n"
                 "    pcie_switches: 2\n    nics: 4\n"
                 "cluster:\n  system: box\n  nodes: 2\n")
    code, _out, err = run(capsys, "bench", "all_reduce", str(p), "-b", "1M", "-e", "1M",
                          "--json")
    assert code == 0, err
    from fabricsim.scenario import load_scenario
    from fabricsim.scenario.fabric import fabric_from_scenario as fabric_of

    assert fabric_of(load_scenario(p)).n_gpus == 8


LOGS = ROOT / "tests" / "data" / "nccl_logs"


def test_describe_from_an_nccl_info_log(capsys: pytest.CaptureFixture[str]) -> None:
    """issue 37: a public issue's cluster (NVIDIA/nccl #1357: 2 x 8 H100, four SHARP HCAs
    per host) rebuilt from its NCCL_DEBUG=INFO lines."""
    log = str(LOGS / "nccl_info_2x8_h100_4nic_sharp.log")
    code, out, _ = run(capsys, "describe", "--from-nccl-log", log, "--system", "dgx-h100",
                       "--json")
    assert code == 0
    d = json.loads(out)
    assert d["gpus"] == 16 and d["servers"] == 2
    assert d["nccl_log"]["from_log"]["nics_per_node"] == 4
    assert d["nccl_log"]["systems"] == {"dgx-h100-from-log": {"base": "dgx-h100", "nics": 4}}
    assert d["nccl_log"]["hosts"] == ["qh100-gpu19", "qh100-gpu20"]
    # the flags given override the log's facts; the text names what was assumed
    code, out, _ = run(capsys, "describe", "--from-nccl-log", log, "--system", "dgx-h100",
                       "--nodes", "4")
    assert code == 0 and "4 × dgx-h100-from-log" in out and "not in the log" in out
    # the GPU model comes from nccl-tests' device list when the log has one
    code, out, _ = run(capsys, "describe", "--from-nccl-log",
                       str(LOGS / "nccl_info_2x8_a100_allgather.log"))
    assert code == 0 and "2 × dgx-a100 on ib-hdr" in out and "NCCL WARN" in out


@pytest.mark.parametrize(("args", "field"), [
    (["--from-nccl-log", "nccl_info_truncated.log"], "--from-nccl-log"),
    (["--from-nccl-log", "nccl_info_2x8_h100_4nic_sharp.log"], "--system"),
    (["--from-nccl-log", "nccl_info_2x8_a100_allgather.log", "--system", "dgx-h100"],
     "--system"),
    (["--from-nccl-log", "missing.log"], "--from-nccl-log"),
])
def test_describe_from_nccl_log_refusals(capsys: pytest.CaptureFixture[str], args: list[str],
                                         field: str) -> None:
    args = [str(LOGS / a) if a.endswith(".log") else a for a in args]
    code, out, err = run(capsys, "describe", *args)
    assert code == 2 and not out and f"{field}:" in err and "Traceback" not in err


def test_python_dash_m_fabricsim_is_the_command_line() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "fabricsim", "describe", "--system",
                          "dgx-h100", "--nodes", "2", "--json"], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0 and json.loads(out.stdout)["gpus"] == 16
