"""NCCL's own INFO logs read back into a cluster (interop.nccl_debug)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.errors import ConfigError
from fabricsim.interop.nccl_debug import cluster_of, read_nccl_debug

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl_logs"


def test_an_nccl_tests_run_with_info_lines() -> None:
    log = read_nccl_debug((LOGS / "nccl_info_2x8_a100_allgather.log").read_text())
    assert (log.nodes, log.gpus_per_node, log.ranks) == (2, 8, 16)
    assert log.hosts == ("swat1-04", "swat1-05")
    assert log.gpu_model == "NVIDIA A100-SXM4-80GB" and log.version == "2.18.3"
    assert (log.link_layer, len(log.nics), log.sharp, log.channels) == ("IB", 8, False, 8)
    assert log.rings[0][:4] == (0, 5, 4, 7) and len(log.warnings) == 1
    lc = cluster_of(log)
    assert lc.cluster == {"system": "dgx-a100", "nodes": 2, "fabric": "ib-hdr"}
    assert lc.systems == {} and "not" not in lc.assumed["system"]


def test_a_four_nic_sharp_cluster_needs_its_system_and_gets_its_nics() -> None:
    log = read_nccl_debug((LOGS / "nccl_info_2x8_h100_4nic_sharp.log").read_text())
    assert (log.nodes, log.gpus_per_node, len(log.nics), log.sharp) == (2, 8, 4, True)
    assert log.nvls and log.nvls_channels == 16 and log.gpu_model == ""
    with pytest.raises(ConfigError, match="names no GPU model") as e:
        cluster_of(log)
    assert e.value.field == "--system"
    lc = cluster_of(log, "dgx-h100")
    assert lc.cluster == {"system": "dgx-h100-from-log", "nodes": 2, "fabric": "ib-ndr",
                          "params": {"sharp": True}}
    assert lc.systems == {"dgx-h100-from-log": {"base": "dgx-h100", "nics": 4}}
    # a system whose GPU is not the log's is refused
    a100 = read_nccl_debug((LOGS / "nccl_info_2x8_a100_allgather.log").read_text())
    with pytest.raises(ConfigError, match="dgx-h100 has h100-sxm GPUs"):
        cluster_of(a100, "dgx-h100")


@pytest.mark.parametrize(("text", "match"), [
    ("node-a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n", "truncated"),
    ("", "truncated"),
    ("a:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 3 nNodes 2 localRanks 0 localRank 0\n",
     "same number of GPUs"),
])
def test_logs_without_a_shape_are_refused(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as e:
        read_nccl_debug(text, name="--from-nccl-log")
    assert e.value.field == "--from-nccl-log"


def test_roce_efa_and_socket_link_layers() -> None:
    head = "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0\n"
    roce = read_nccl_debug(head + "a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE "
                                  "[1]mlx5_11:1/RoCE [RO]; OOB eth0:1.2.3.4<0>\n")
    assert roce.link_layer == "RoCE" and roce.nics == ("mlx5_10", "mlx5_11")
    lc = cluster_of(roce, "dgx-h100")
    assert lc.cluster["fabric"] == "roce-400g" and lc.systems["dgx-h100-from-log"]["nics"] == 2
    efa = read_nccl_debug(head + "a:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa, "
                                 "fabric is efa-direct (found 32 nics)\n")
    assert efa.link_layer == "EFA" and len(efa.nics) == 32
    assert cluster_of(efa, "aws-p5").cluster == {"system": "aws-p5", "nodes": 2,
                                                   "fabric": "efa"}
    tcp = read_nccl_debug(head + "a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:1.2.3.4<0>\n")
    assert tcp.link_layer == "Socket" and cluster_of(tcp, "dgx-h100").cluster["fabric"] \
        .startswith("tcp")


def test_a_slingshot_log_is_a_quad_gh200_over_slingshot() -> None:
    """CSCS Alps: nccl-tests on two quad-GH200 nodes, NCCL over libfabric's cxi provider
    (aws-ofi-nccl). The device name carries "GH200", which holds "H200": it must not read
    as an H200."""
    text = "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 2 localRanks 4 localRank 0\n"
    text += "a:1:1 [0] NCCL INFO NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)\n"
    for r in range(8):
        text += (f"#  Rank  {r} Group  0 Pid  {100 + r} on nid00{5471 + 16 * (r // 4)} "
                 f"device  {r % 4} [0009:01:00] NVIDIA GH200 120GB\n")
    log = read_nccl_debug(text)
    assert (log.link_layer, log.nics, log.gpus_per_node) == ("cxi", tuple(
        f"cxi{k}" for k in range(4)), 4)
    lc = cluster_of(log)
    assert lc.cluster == {"system": "quad-gh200", "nodes": 2, "fabric": "slingshot-11"}
    with pytest.raises(ConfigError, match="gh200"):
        cluster_of(log, "dgx-h200")
    # Perlmutter-like: A100 over Slingshot, a pair no preset has
    a100 = read_nccl_debug(text.replace("NVIDIA GH200 120GB", "NVIDIA A100-SXM4-40GB"))
    with pytest.raises(ConfigError, match="no preset system over its cxi network") as e:
        cluster_of(a100)
    assert e.value.field == "--system" and "pass --system" in str(e.value)


def test_a_topology_dump_gives_gpus_nics_and_their_speed() -> None:
    from fabricsim.interop.nccl_debug import read_topo_dump

    log = read_topo_dump((LOGS / "nccl_topo_dump_h100_4nic.xml").read_text())
    assert (log.gpus_per_node, len(log.nics), log.nic_gbps, log.gpu_model) == \
        (8, 4, 400.0, "sm_90")
    with pytest.raises(ConfigError, match="compute capability"):
        cluster_of(log)
    with pytest.raises(ConfigError, match="sm_90"):
        cluster_of(log, "dgx-a100")
    lc = cluster_of(log, "dgx-h100")
    assert lc.systems == {"dgx-h100-from-log": {"base": "dgx-h100", "nics": 4}}
    assert "link layer" in lc.assumed
    slow = read_topo_dump((LOGS / "nccl_topo_dump_h100_4nic.xml").read_text()
                          .replace('speed="400000"', 'speed="200000"'))
    lc = cluster_of(slow, "dgx-h100")
    assert lc.cluster["fabric"] == "ib-hdr" \
        and lc.systems["dgx-h100-from-log"]["nic_gbit_s"] == 200
    for bad, match in (("<system><cpu/></system>", "no <gpu>"), ("<sys", "not an NCCL"),
                       ("<html/>", "root element")):
        with pytest.raises(ConfigError, match=match):
            read_topo_dump(bad)


def test_review_findings_stay_fixed() -> None:
    """Interleaved output cannot make the ring pattern backtrack for ever; the largest
    communicator is the cluster; an IB NIC other than the preset's speed picks the IB
    fabric of that speed; B300 dumps (sm_103) are read; a NIC speed that is not a number
    is refused."""
    import time

    from fabricsim.interop.nccl_debug import read_topo_dump

    head = "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0\n"
    mixed = ("n1:1:2 [0] NCCL INFO Channel 05/32 : " + " ".join(str(100 + i)
                                                          for i in range(40))
             + "n2:3:4 [0] NCCL INFO x\n")
    t0 = time.perf_counter()
    log = read_nccl_debug(head + mixed + "b:1:1 [0] NCCL INFO comm 0x2 rank 0 nRanks 2 "
                                         "nNodes 2 localRanks 1 localRank 0\n")
    assert time.perf_counter() - t0 < 1.0
    assert (log.ranks, log.nodes, log.gpus_per_node) == (16, 2, 8)
    ib = read_nccl_debug(head + "a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; "
                                "OOB x<0>\n")
    assert cluster_of(ib, "hgx-h20").cluster["fabric"] == "ib-ndr"
    b300 = read_topo_dump('<system><gpu dev="0" sm="103"/><net name="m" speed="400000"/>'
                          '</system>')
    assert cluster_of(b300, "hgx-b300").cluster["system"].startswith("hgx-b300")
    with pytest.raises(ConfigError, match="speed 'nan'"):
        read_topo_dump('<system><gpu dev="0" sm="90"/><net name="m" speed="nan"/></system>')


def test_info_lines_behind_a_launcher_prefix() -> None:
    text = (LOGS / "nccl_info_2x8_a100_allgather.log").read_text()
    tagged = "".join("0: " + ln for ln in text.splitlines(keepends=True))
    log = read_nccl_debug(tagged)
    assert (log.nodes, log.gpus_per_node, len(log.nics)) == (2, 8, 8)
