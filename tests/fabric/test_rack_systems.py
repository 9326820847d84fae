"""NVLink rack systems against NVIDIA's published rack figures (issue 41).

Each rack is built as the fabric builder lays it out, and its totals are summed from the
built links and the catalog, never restated: NVLink figures are bidirectional, as NVIDIA
prints them (GB200 NVL72's 130 TB/s is 72 GPUs x 1.8 TB/s).
"""

from __future__ import annotations

import json

import pytest

from fabricsim.catalog import get_catalog
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric, build_cluster
from fabricsim.fabric.kinds import LinkKind, NodeKind

TB = 1e12


def _out_of(fab: Fabric, kind: LinkKind, src_kind: NodeKind) -> float:
    """Bytes/s per direction over the links of ``kind`` leaving nodes of ``src_kind``."""
    sel = (fab.link_kind == int(kind)) & (fab.node_kind[fab.link_src] == int(src_kind))
    return float(fab.link_capacity[sel].sum())


@pytest.mark.parametrize(("system", "nvlink_tb_s", "scale_out_tb_s"), [
    ("gb300-nvl72", 130.0, 14.4),         # GB300 NVL72 page: 130 TB/s, CX-8 14.4 TB/s
    ("vera-rubin-nvl144", 260.0, 28.8),    # GTC 2025: NVLink 6 260 TB/s, CX9 28.8 TB/s
    ("rubin-ultra-nvl576", 1500.0, 115.2),  # GTC 2025: NVLink 7 1.5 PB/s, CX9 115.2 TB/s
])
def test_rack_bandwidth_matches_nvidia(system: str, nvlink_tb_s: float,
                                       scale_out_tb_s: float) -> None:
    fab = build_cluster(system, 1)
    nvlink = 2 * _out_of(fab, LinkKind.NVLINK, NodeKind.GPU) / TB
    assert nvlink == pytest.approx(nvlink_tb_s, rel=0.01)
    nics = fab.node_kind == int(NodeKind.NIC)
    bidir = 2 * get_catalog().system(system).nic_bandwidth * int(nics.sum()) / TB
    assert bidir == pytest.approx(scale_out_tb_s, rel=0.01)
    # every GPU reaches its NICs at their full rate (Rubin: 1.6 / 3.2 Tb/s per GPU)
    assert fab.info.nics_per_gpu * fab.info.nic_bandwidth <= _out_of(
        fab, LinkKind.PCIE, NodeKind.GPU) / fab.n_gpus


@pytest.mark.parametrize(("system", "fp8_ef", "fp4_ef", "hbm_tb", "hbm_pb_s"), [
    ("vera-rubin-nvl144", 1.2, 2.5, 20.7, None),   # CES 2026: 2.5 EF NVFP4 training
    ("rubin-ultra-nvl576", 5.0, None, None, 4.6),  # GTC 2025: 5 EF FP8, 4.6 PB/s HBM4e
])
def test_rack_compute_and_memory_match_nvidia(system: str, fp8_ef: float,
                                              fp4_ef: float | None, hbm_tb: float | None,
                                              hbm_pb_s: float | None) -> None:
    cat = get_catalog()
    s = cat.system(system)
    g = cat.gpu(s.gpu)
    assert s.gpus * g.fp8_flops / 1e18 == pytest.approx(fp8_ef, rel=0.01)
    if fp4_ef is not None:
        assert s.gpus * g.fp4_dense_tflops / 1e6 == pytest.approx(fp4_ef, rel=0.01)
    if hbm_tb is not None:
        assert s.gpus * g.memory_gib / 1000 == pytest.approx(hbm_tb, rel=0.01)
    if hbm_pb_s is not None:
        assert s.gpus * g.hbm_tbyte_s / 1000 == pytest.approx(hbm_pb_s, rel=0.01)


def test_one_switching_tier_inside_each_rack() -> None:
    for system in ("vera-rubin-nvl144", "rubin-ultra-nvl576"):
        fab = build_cluster(system, 2)
        a, b = fab.gpus[0], fab.gpus[fab.info.gpus_per_server - 1]
        kinds = [int(fab.node_kind[fab.link_dst[int(link)]]) for link in fab.route(a, b)]
        assert kinds == [int(NodeKind.NVSWITCH), int(NodeKind.GPU)], system
        assert fab.info.nvls and fab.info.nvlink_domain_gpus == fab.info.gpus_per_server


def test_domains_beyond_the_published_rack_are_refused() -> None:
    with pytest.raises(ConfigError, match="nvlink6") as e:
        build_cluster("vera-rubin-nvl144", 2, params={"nvlink_domain": 144})
    assert e.value.field == "params.nvlink_domain"
    fab = build_cluster("gb200-nvl72", 8, params={"nvlink_domain": 576})
    assert fab.info.nvlink_domain_gpus == 576


def test_unmeasured_rubin_runs_on_blackwell_constants_and_says_so() -> None:
    from fabricsim.protocols import tree_kernel_rate, tuning_hardware
    from fabricsim.workloads.gpu import architecture, generation

    cat = get_catalog()
    for name in ("rubin", "rubin-ultra"):
        assert (architecture(cat.gpu(name)), generation(cat.gpu(name))) == (
            "rubin", "blackwell")
    rubin, gb200 = build_cluster("vera-rubin-nvl144", 2), build_cluster("gb200-nvl72", 2)
    assert tuning_hardware(rubin) == tuning_hardware(gb200)
    # NCCL's tree kernel row per channel (inside one rack, no NIC share): Blackwell's
    assert tree_kernel_rate(rubin, 1, 8) == tree_kernel_rate(gb200, 1, 8) == 35e9 * 8


def test_nvlink_domain_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from fabricsim.cli.app import main

    base = ["describe", "--system", "gb200-nvl72", "--nodes", "8", "--nvlink-domain"]
    assert main([*base, "576", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nvlink_domain_gpus"] == 576
    assert main([*base, "1152"]) == 2
    err = capsys.readouterr().err
    assert "--nvlink-domain" in err and "576" in err


def test_web_trains_on_an_nvl576_rack_as_the_job_layer_does() -> None:
    from fabricsim import jobs
    from fabricsim.scenario import load_scenario_text
    from fabricsim.web.jobs import run_job

    text = ("cluster: {system: rubin-ultra-nvl576, nodes: 4}\n"
            "training: {model: kimi-k2, tp: 1, pp: 6, ep: 96, global_batch: 4608, "
            "micro_batch: 1, seq_len: 4096, precision: fp8}\n")
    web = run_job("train", [text])["designs"][0]["train"]
    ref = jobs.run(jobs.job_from_scenario("train", load_scenario_text(text))).to_dict()
    assert web["step_time_s"] == ref["step_time_s"] > 0


def test_one_576_gpu_domain_keeps_a_wide_ep_group_on_nvlink() -> None:
    """docs/ep.md: EP 96 spans two NVL72 racks and crosses InfiniBand; the same eight
    racks joined into GB200 NVL576 keep it on NVLink, and its exposed all-to-all falls."""
    from fabricsim import jobs
    from fabricsim.scenario import load_scenario_text

    def ep_time(params: str) -> float:
        text = (f"cluster: {{system: gb200-nvl72, nodes: 8{params}}}\n"
                "training: {model: kimi-k2, tp: 1, pp: 6, ep: 96, global_batch: 4608, "
                "micro_batch: 1, seq_len: 4096, precision: fp8}\n")
        r = jobs.run(jobs.job_from_scenario("train", load_scenario_text(text))).to_dict()
        return float(r["breakdown"]["ep"])

    assert ep_time("") > 4 * ep_time(", params: {nvlink_domain: 576}")


def test_gpu_pcie_links_out_of_range_is_refused_naming_the_field() -> None:
    from fabricsim.catalog.loader import with_systems

    with pytest.raises(ConfigError, match="less than or equal to 4") as e:
        with_systems(get_catalog(), {"box": {"base": "vera-rubin-nvl144",
                                             "gpu_pcie_links": 9}})
    assert e.value.field == "systems.box.gpu_pcie_links"
