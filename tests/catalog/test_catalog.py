"""Tests of the hardware catalog: data invariants, loader errors, SI properties."""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from pydantic import ValidationError

import fabricsim.catalog as catalog_pkg
from fabricsim.catalog import (
    Catalog,
    FabricSpec,
    Spec,
    get_catalog,
    load_catalog,
)
from fabricsim.catalog.loader import FILES, data_dir
from fabricsim.errors import ConfigError, UnknownPresetError

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
REFERENCE_CSV = Path(__file__).resolve().parents[2] / "data" / "reference" / "measurements.csv"

REQUIRED = {
    "links": [
        "pcie-gen3", "pcie-gen4", "pcie-gen5", "pcie-gen6",
        "nvlink2", "nvlink3", "nvlink3-a800", "nvlink4", "nvlink4-h800", "nvlink5",
        "ib-hdr", "ib-ndr", "ib-xdr",
        "eth-100g", "eth-200g", "eth-400g", "eth-800g",
        "efa-v1", "efa-v2", "efa-v3", "efa-v4",
    ],
    "gpus": [
        "v100-sxm", "a100-sxm", "a800-sxm", "h100-sxm", "h800-sxm", "h20", "h200-sxm",
        "b200", "gb200", "b300", "gb300",
    ],
    "nics": [
        "connectx-6", "connectx-7", "connectx-8", "bluefield-3",
        "aws-efa-v1", "aws-efa-v2", "aws-efa-v3", "aws-efa-v4",
    ],
    "switches": [
        "nvswitch-gen2", "nvswitch-gen3", "nvswitch-gen4", "qm8790", "qm9700", "q3400",
        "spectrum-3", "spectrum-4", "tomahawk-4", "tomahawk-5", "eth-100g-switch",
        "aws-efa-fabric",
    ],
    "cables": [
        f"{kind}-{speed}g" for kind in ("dac", "aoc", "transceiver")
        for speed in (100, 200, 400, 800)
    ],
    "fabrics": [
        "ib-hdr", "ib-ndr", "ib-xdr", "roce-100g", "roce-200g", "roce-400g", "roce-800g",
        "efa", "tcp-100g", "uet-400g", "uet-800g", "slingshot-11",
    ],
    "systems": [
        "dgx-a100", "dgx-a800", "dgx-h100", "dgx-h800", "hgx-h20", "dgx-h200", "hgx-b200",
        "gb200-nvl72", "hgx-b300", "gb300-nvl72", "aws-p4d", "aws-p5", "aws-p5en",
        "aws-p6-b200", "pcie-8gpu", "quad-gh200",
    ],
    "topologies": ["fat-tree", "rail-optimized", "dragonfly", "torus3d"],
}
TABLES = tuple(REQUIRED)


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return get_catalog()


def all_entries(cat: Catalog) -> list[tuple[str, str, Spec]]:
    return [
        (table, name, spec)
        for table in TABLES
        for name, spec in getattr(cat, table).items()
    ]


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A writable copy of the shipped data directory."""
    dst = tmp_path / "data"
    dst.mkdir()
    for filename, _ in FILES.values():
        (dst / filename).write_text(
            data_dir().joinpath(filename).read_text(encoding="utf-8"), encoding="utf-8"
        )
    return dst


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"test setup: {old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


# ------------------------------------------------------------------ API surface


def test_public_api_is_curated() -> None:
    assert sorted(catalog_pkg.__all__) == sorted(
        n for n in dir(catalog_pkg) if not n.startswith("_") and n not in {
            "loader", "models", "annotations"}
    )
    for name in catalog_pkg.__all__:
        assert hasattr(catalog_pkg, name)


def test_get_catalog_is_cached_and_immutable(cat: Catalog) -> None:
    assert get_catalog() is cat
    with pytest.raises(AttributeError):
        cat.systems = {}
    with pytest.raises(TypeError):
        cat.systems["x"] = cat.system("dgx-h100")  # type: ignore[index]
    with pytest.raises(ValidationError):
        cat.system("dgx-h100").gpus = 4


def test_load_catalog_from_directory_matches_shipped(cat: Catalog, data_copy: Path) -> None:
    fresh = load_catalog(data_copy)
    for table in TABLES:
        assert dict(getattr(fresh, table)) == dict(getattr(cat, table))


# ------------------------------------------------------------------ data invariants


def test_required_presets_exist(cat: Catalog) -> None:
    for table, names in REQUIRED.items():
        missing = set(names) - set(getattr(cat, table))
        assert not missing, f"{table} lacks {sorted(missing)}"


def test_every_entry_has_a_source_and_a_valid_name(cat: Catalog) -> None:
    entries = all_entries(cat)
    assert len(entries) > 80
    for table, name, spec in entries:
        assert spec.name == name
        assert NAME.match(name), f"{table}: {name!r} is not lowercase-dash"
        assert spec.source.strip(), f"{table}:{name} has an empty source"
        assert isinstance(spec.note, str)


def test_cross_references_resolve(cat: Catalog) -> None:
    for name, g in cat.gpus.items():
        assert g.nvlink == "" or cat.link(g.nvlink).family == "nvlink", name
        assert cat.link(g.pcie).family == "pcie", name
    for name, n in cat.nics.items():
        assert cat.link(n.pcie).family == "pcie", name
    for name, f in cat.fabrics.items():
        assert f.link in cat.links and f.switch in cat.switches and f.nic in cat.nics, name
    for name, s in cat.systems.items():
        assert s.gpu in cat.gpus, name
        assert s.nic in cat.nics, name
        assert s.default_fabric in cat.fabrics, name
        assert s.default_topology in cat.topologies, name
        assert cat.link(s.pcie).family == "pcie", name
        if s.nvswitches:
            assert cat.switch(s.nvswitch).family == "nvswitch", name
        else:
            assert s.nvswitch == "", name
        if s.storage_nics:
            assert s.storage_nic in cat.nics, name
        else:
            assert s.storage_nic == "", name


def test_nvlink_per_gpu_bandwidth_is_links_times_per_link(cat: Catalog) -> None:
    nvlinks = [s for s in cat.links.values() if s.family == "nvlink"]
    assert len(nvlinks) == 8
    for s in nvlinks:
        assert s.gbyte_s_per_direction == pytest.approx(s.links_per_gpu * s.gbyte_s_per_link)
        # a link's lanes x lane rate (Gb/s) is its per-direction rate
        assert s.lanes * s.gbit_s_per_lane / 8 == pytest.approx(s.gbyte_s_per_link)
    for s in cat.links.values():
        if s.family == "ici":  # a TPU chip's ports: ports x per-port rate
            assert s.gbyte_s_per_direction == pytest.approx(s.links_per_gpu
                                                            * s.gbyte_s_per_link)
        elif s.family != "nvlink":
            assert s.links_per_gpu == 0 and s.gbyte_s_per_link == 0.0
            assert s.link_bandwidth == s.bandwidth


@pytest.mark.parametrize(
    ("name", "links", "per_dir"),
    [
        ("nvlink2", 6, 150.0),
        ("nvlink3", 12, 300.0),
        ("nvlink3-a800", 8, 200.0),
        ("nvlink4", 18, 450.0),
        ("nvlink4-h800", 8, 200.0),
        ("nvlink5", 18, 900.0),
    ],
)
def test_nvlink_generations(cat: Catalog, name: str, links: int, per_dir: float) -> None:
    link = cat.link(name)
    assert (link.links_per_gpu, link.gbyte_s_per_direction) == (links, per_dir)


def test_port_links_match_lane_math(cat: Catalog) -> None:
    for name, s in cat.links.items():
        if s.family in ("ib", "ethernet"):
            assert s.lanes * s.gbit_s_per_lane / 8 == pytest.approx(s.gbyte_s_per_direction), name
    assert [cat.link(f"ib-{g}").gbyte_s_per_direction for g in ("hdr", "ndr", "xdr")] == [
        25.0, 50.0, 100.0]
    pcie = [cat.link(f"pcie-gen{g}").gbyte_s_per_direction for g in (3, 4, 5, 6)]
    assert pcie == sorted(pcie)
    for lo, hi in itertools.pairwise(pcie):
        assert 1.85 < hi / lo < 2.05


def test_flow_control_semantics(cat: Catalog) -> None:
    for s in cat.links.values():
        if s.family in ("ib", "nvlink", "pcie"):
            assert s.lossless and s.flow_control == "credit"
        if s.family == "ethernet":
            # lossless only once a fabric enables PFC, or where the link itself retries
            # and runs credits (Slingshot's HPC Ethernet between Cassini and Rosetta)
            assert s.lossless == (s.flow_control == "credit"), s.name
        if s.family == "efa":
            assert s.flow_control == "srd"
    for name, f in cat.fabrics.items():
        expected = {"ib": ("credit", True), "roce": ("pfc", True), "srd": ("srd", False),
                    "tcp": ("none", False), "uet": ("uet", False),
                    "slingshot": ("credit", True)}[f.transport]
        assert (f.flow_control, f.lossless) == expected, name
        assert f.sharp == (f.transport == "ib"), name
        assert cat.link(f.link).family == {
            "ib": "ib", "roce": "ethernet", "srd": "efa", "tcp": "ethernet",
            "uet": "ethernet", "slingshot": "ethernet"}[f.transport], name


def test_fabric_parts_agree_on_port_speed(cat: Catalog) -> None:
    for name, f in cat.fabrics.items():
        assert cat.link(f.link).bandwidth == pytest.approx(f.port_bandwidth), name
        assert cat.nic(f.nic).max_gbit_s >= f.port_gbit_s, name
        if f.transport != "srd":  # the AWS fabric entry is abstract
            assert cat.switch(f.switch).port_gbit_s == f.port_gbit_s, name


def three_hop_latency(cat: Catalog, f: FabricSpec) -> float:
    """Leaf-spine-leaf path: 2 NIC ends, 3 switches, 4 cables; no serialisation."""
    return 2 * f.nic_latency + 3 * f.switch_latency + 4 * cat.link(f.link).latency


def test_latency_ordering_follows_the_seeds(cat: Catalog) -> None:
    ib = [three_hop_latency(cat, cat.fabric(n)) for n in ("ib-hdr", "ib-ndr", "ib-xdr")]
    roce = [three_hop_latency(cat, f) for f in cat.fabrics.values() if f.transport == "roce"]
    tcp = three_hop_latency(cat, cat.fabric("tcp-100g"))
    for t in ib:  # seed 004: InfiniBand end-to-end 1-1.6 us
        assert 1.0e-6 <= t <= 1.6e-6 * (1 + 1e-9)
    for t in roce:  # seed 002: well-tuned RoCEv2 2-5 us
        assert 2.0e-6 <= t <= 5.0e-6 * (1 + 1e-9)
    assert max(ib) < min(roce) and max(roce) < tcp
    for name in ("qm8790", "qm9700", "q3400"):
        assert 130 <= cat.switch(name).latency_ns <= 230


def test_ib_ports_cost_more_than_ethernet_ports_of_same_speed(cat: Catalog) -> None:
    by_speed: dict[float, dict[str, list[float]]] = {}
    for s in cat.switches.values():
        if s.family in ("ib", "ethernet") and s.price_per_port_usd > 0:  # 0: not sold alone
            by_speed.setdefault(s.port_gbit_s, {}).setdefault(s.family, []).append(
                s.price_per_port_usd)
    compared = 0
    for speed, fam in by_speed.items():
        if "ib" in fam and "ethernet" in fam:
            compared += 1
            assert min(fam["ib"]) > max(fam["ethernet"]), speed
            # seeds 002/004: 1.5-2.5x per port (against the mean Ethernet port)
            ratio = min(fam["ib"]) / (sum(fam["ethernet"]) / len(fam["ethernet"]))
            assert 1.5 <= ratio <= 2.5, (speed, ratio)
    assert compared >= 3  # 200G, 400G and 800G


def test_memory_hierarchy_per_gpu(cat: Catalog) -> None:
    for name, g in cat.gpus.items():
        pcie = cat.link(g.pcie).bandwidth
        if g.has_nvlink:
            nvlink = cat.link(g.nvlink).bandwidth
            assert g.hbm_bandwidth > nvlink > pcie, name
        else:
            assert g.hbm_bandwidth > pcie, name


def test_gpu_figures_are_dense(cat: Catalog) -> None:
    h100 = cat.gpu("h100-sxm")
    assert h100.bf16_dense_tflops == pytest.approx(989.4)
    assert h100.fp8_dense_tflops == pytest.approx(1978.9)
    assert cat.gpu("a100-sxm").bf16_dense_tflops == 312.0
    assert cat.gpu("a100-sxm").fp8_dense_tflops == 0.0
    assert cat.gpu("b200").bf16_dense_tflops == pytest.approx(2250.0)
    assert cat.gpu("b200").fp8_dense_tflops == pytest.approx(4500.0)
    for name, g in cat.gpus.items():
        # TPU v5p and v6e run FP8 at their bf16 rate (the Cloud TPU pages list both)
        same = bool(g.ici) and g.fp8_dense_tflops == g.bf16_dense_tflops
        assert same or g.fp8_dense_tflops in (
            0.0, pytest.approx(2 * g.bf16_dense_tflops, rel=0.02)), name
        # seed 002's '3.35 PF BF16' for H100 must not have crept in anywhere (Rubin's
        # rack figures are checked in tests/fabric/test_rack_systems.py)
        assert g.bf16_dense_tflops < 3000 or name.startswith("rubin"), name


def test_system_facts(cat: Catalog) -> None:
    a100 = cat.system("dgx-a100")
    assert (a100.cpus, a100.pcie_switches, a100.nvswitches, a100.gpus, a100.nics,
            a100.storage_nics) == (2, 4, 6, 8, 8, 2)
    assert a100.nic == "connectx-6" and a100.nic_gbit_s == 200 and a100.pcie == "pcie-gen4"
    assert cat.gpu(cat.system("dgx-a800").gpu).nvlink == "nvlink3-a800"
    assert cat.gpu(cat.system("dgx-h800").gpu).nvlink == "nvlink4-h800"
    for name in ("dgx-h100", "dgx-h200"):
        s = cat.system(name)
        assert (s.nvswitches, s.nvswitch, s.nics, s.nic_gbit_s, s.pcie) == (
            4, "nvswitch-gen3", 8, 400, "pcie-gen5")
    b200 = cat.system("hgx-b200")
    assert (b200.nvswitches, b200.nvswitch, cat.gpu(b200.gpu).nvlink) == (
        2, "nvswitch-gen4", "nvlink5")
    nvl = cat.system("gb200-nvl72")
    assert (nvl.gpus, nvl.cpus, nvl.nvswitches, nvl.nics, nvl.nvlink_domain_gpus) == (
        72, 36, 18, 72, 72)
    pc = cat.system("pcie-8gpu")
    assert (pc.nvlink_domain_gpus, pc.nvswitches, pc.nvswitch) == (1, 0, "")
    assert not cat.gpu(pc.gpu).has_nvlink
    for s in cat.systems.values():
        assert s.nvlink_domain_gpus in (1, 4, 8, 72, 144)
        assert s.gpu_hour_usd > 0


@pytest.mark.parametrize(
    ("name", "nics", "gbit", "nic"),
    [
        ("aws-p4d", 4, 100, "aws-efa-v1"),
        ("aws-p5", 32, 100, "aws-efa-v2"),
        ("aws-p5en", 16, 200, "aws-efa-v3"),
        ("aws-p6-b200", 8, 400, "aws-efa-v4"),
    ],
)
def test_aws_instances(cat: Catalog, name: str, nics: int, gbit: int, nic: str) -> None:
    s = cat.system(name)
    assert (s.nics, s.nic_gbit_s, s.nic) == (nics, gbit, nic)
    assert (s.default_fabric, s.default_topology) == ("efa", "fat-tree")
    assert cat.nic(s.nic).kind == "efa"


def test_scale_out_bandwidth_per_server(cat: Catalog) -> None:
    # reference row 242: P5, P5en, P6-B200 and DGX H100 all have 3,200 Gb/s per node
    for name in ("aws-p5", "aws-p5en", "aws-p6-b200", "dgx-h100", "dgx-h200", "hgx-b200"):
        assert cat.system(name).total_nic_bandwidth == pytest.approx(3200e9 / 8), name
    assert cat.system("aws-p4d").total_nic_bandwidth == pytest.approx(400e9 / 8)


def test_cables_by_speed(cat: Catalog) -> None:
    for speed in (100, 200, 400, 800):
        dac, aoc = cat.cable(f"dac-{speed}g"), cat.cable(f"aoc-{speed}g")
        opt = cat.cable(f"transceiver-{speed}g")
        assert (dac.kind, aoc.kind, opt.kind) == ("dac", "aoc", "transceiver")
        assert dac.gbit_s == aoc.gbit_s == opt.gbit_s == speed
        assert dac.max_length_m < aoc.max_length_m
        assert dac.price_usd < aoc.price_usd


def test_topology_defaults(cat: Catalog) -> None:
    assert cat.topology("torus3d").tiers == 0
    assert cat.topology("torus3d").params["dims"] == [4, 4, 4]
    for t in cat.topologies.values():
        assert t.oversubscription >= 1.0 and t.description


# ------------------------------------------------------------------ SI properties


def test_si_unit_properties(cat: Catalog) -> None:
    assert cat.link("nvlink4").bandwidth == 450e9
    assert cat.link("nvlink5").link_bandwidth == 50e9
    assert cat.link("ib-ndr").latency == pytest.approx(100e-9)
    assert cat.switch("qm9700").port_bandwidth == 50e9
    assert cat.switch("qm8790").latency == pytest.approx(130e-9)
    f = cat.fabric("ib-ndr")
    assert (f.port_bandwidth, f.switch_latency, f.nic_latency) == (50e9, 150e-9, 300e-9)
    g = cat.gpu("h100-sxm")
    assert g.bf16_flops == pytest.approx(989.4e12)
    assert g.fp8_flops == pytest.approx(1978.9e12)
    assert g.memory_bytes == 80 * 2**30
    assert g.hbm_bandwidth == pytest.approx(3.35e12)
    assert cat.system("dgx-h100").nic_bandwidth == 50e9
    assert cat.system("aws-p5").nic_bandwidth == 12.5e9
    assert cat.nic("connectx-7").bandwidth == 50e9


def test_agrees_with_reference_link_facts(cat: Catalog) -> None:
    rows = {r["id"]: r for r in csv.DictReader(REFERENCE_CSV.open(encoding="utf-8"))}
    # rows 226-229: per-GPU NVLink bandwidth "uni|bidir" in GB/s
    for row_id, link in (("226", "nvlink2"), ("227", "nvlink3"), ("228", "nvlink4"),
                         ("229", "nvlink5")):
        uni, bidir = (float(v) for v in rows[row_id]["value"].split("|"))
        assert cat.link(link).gbyte_s_per_direction == uni
        assert 2 * cat.link(link).gbyte_s_per_direction == bidir
    # rows 230-232: IB lane rate | port rate in Gb/s
    for row_id, link in (("230", "ib-hdr"), ("231", "ib-ndr"), ("232", "ib-xdr")):
        lane, port = (float(v) for v in rows[row_id]["value"].split("|"))
        spec = cat.link(link)
        assert (spec.gbit_s_per_lane, spec.lanes * spec.gbit_s_per_lane) == (lane, port)
    # row 240: p4d's EFA carries 340 of its 400 Gb/s in all-reduce tests
    got, of = float(rows["240"]["value"]), float(rows["240"]["notes"].split()[1])
    assert cat.nic("aws-efa-v1").sustained_share == pytest.approx(got / of)
    assert of == cat.system("aws-p4d").nics * cat.nic("aws-efa-v1").max_gbit_s
    # measured NVLink/PCIe throughput never exceeds the catalogued peak
    h200_h2d = float(rows["237"]["value"].split("|")[0])
    assert h200_h2d < cat.link(cat.system("dgx-h200").pcie).gbyte_s_per_direction


# ------------------------------------------------------------------ unknown names


Accessor = Callable[[Catalog, str], object]


@pytest.mark.parametrize(
    ("accessor", "bad", "good"),
    [
        (Catalog.system, "dgx-h10", "dgx-h100"),
        (Catalog.gpu, "h100-sx", "h100-sxm"),
        (Catalog.link, "nvlink-4", "nvlink4"),
        (Catalog.nic, "connectx7", "connectx-7"),
        (Catalog.switch, "qm970", "qm9700"),
        (Catalog.cable, "dac-400", "dac-400g"),
        (Catalog.fabric, "ib-nd", "ib-ndr"),
        (Catalog.topology, "fattree", "fat-tree"),
    ],
)
def test_unknown_name_suggests_nearest(cat: Catalog, accessor: Accessor, bad: str,
                                       good: str) -> None:
    with pytest.raises(UnknownPresetError) as info:
        accessor(cat, bad)
    msg = str(info.value)
    assert repr(bad) in msg and "did you mean" in msg and repr(good) in msg
    assert isinstance(info.value, ConfigError)


def test_mapping_lookup_also_suggests(cat: Catalog) -> None:
    with pytest.raises(UnknownPresetError, match="dgx-h100"):
        cat.systems["dgx-h10"]
    assert "dgx-h10" not in cat.systems
    assert cat.systems.get("dgx-h10") is None
    assert isinstance(cat.systems, Mapping)


# ------------------------------------------------------------------ malformed copies


@pytest.mark.parametrize(
    ("filename", "old", "new", "field", "words"),
    [
        ("systems.toml", 'gpu = "h100-sxm"\n', 'gpu = "h100-sxmm"\n',
         "systems.toml:dgx-h100.gpu", ["unknown gpu", "'h100-sxm'"]),
        ("systems.toml", 'default_fabric = "ib-hdr"', 'default_fabric = "ib-hdrr"',
         "systems.toml:dgx-a100.default_fabric", ["unknown fabric"]),
        ("systems.toml", 'default_topology = "rail-optimized"', 'default_topology = "ring"',
         "systems.toml:dgx-a100.default_topology", ["fat-tree"]),
        ("links.toml", "gbyte_s_per_direction = 450.0", 'gbyte_s_per_direction = "fast"',
         "links.toml:nvlink4.gbyte_s_per_direction", ["'fast'"]),
        ("links.toml", "gbyte_s_per_direction = 450.0", "gbyte_s_per_direction = 500.0",
         "links.toml:nvlink4", ["links_per_gpu"]),
        ("gpus.toml", "tdp_w = 700", "tdp_watts = 700",
         "gpus.toml:h100-sxm.tdp_watts", ["unknown field", "did you mean 'tdp_w'"]),
        ("gpus.toml", "tdp_w = 700\n", "\n",
         "gpus.toml:h100-sxm.tdp_w", ["required field is missing"]),
        ("gpus.toml", 'pcie = "pcie-gen5"', 'pcie = "nvlink4"',
         "gpus.toml:h100-sxm.pcie", ["not a pcie link"]),
        ("fabrics.toml", 'switch = "qm9700"', 'switch = "nvswitch-gen3"',
         "fabrics.toml:ib-ndr.switch", ["not a scale-out switch"]),
        ("fabrics.toml", "sharp = true", 'sharp = "yes"',
         "fabrics.toml:ib-hdr.sharp", ["bool"]),
        ("switches.toml", "[qm9700]", "[QM9700]", "switches.toml:QM9700", ["lowercase"]),
        ("cables.toml", "max_length_m = 5.0", "max_length_m = -5.0",
         "cables.toml:dac-100g.max_length_m", ["greater than 0"]),
        ("systems.toml", "nvswitches = 6\n", "nvswitches = 0\n",
         "systems.toml:dgx-a100", ["nvswitch must be ''"]),
        ("systems.toml", "nic_gbit_s = 100\n", "nic_gbit_s = 400\n",
         "systems.toml:aws-p4d.nic_gbit_s", ["exceeds"]),
        ("nics.toml", "sustained_share = 0.85", "sustained_share = 1.5",
         "nics.toml:aws-efa-v1.sustained_share", ["less than or equal to 1"]),
    ],
)
def test_malformed_copy_names_file_entry_and_field(
    data_copy: Path, filename: str, old: str, new: str, field: str, words: list[str]
) -> None:
    edit(data_copy / filename, old, new)
    with pytest.raises(ConfigError) as info:
        load_catalog(data_copy)
    err = info.value
    assert err.field is not None and err.field.startswith(field), (err.field, str(err))
    for w in words:
        assert w in str(err), str(err)


def test_toml_syntax_error_names_the_file(data_copy: Path) -> None:
    edit(data_copy / "gpus.toml", "[h20]", "[h20")
    with pytest.raises(ConfigError, match="not valid TOML") as info:
        load_catalog(data_copy)
    assert info.value.field == "gpus.toml"


def test_missing_file_and_directory(data_copy: Path, tmp_path: Path) -> None:
    (data_copy / "cables.toml").unlink()
    with pytest.raises(ConfigError, match="missing") as info:
        load_catalog(data_copy)
    assert info.value.field == "cables.toml"
    with pytest.raises(ConfigError, match="does not exist"):
        load_catalog(tmp_path / "nowhere")


def test_name_key_inside_table_is_rejected(data_copy: Path) -> None:
    edit(data_copy / "topologies.toml", "[torus3d]\n", '[torus3d]\nname = "torus"\n')
    with pytest.raises(ConfigError) as info:
        load_catalog(data_copy)
    assert info.value.field == "topologies.toml:torus3d.name"


def test_shipped_data_dir_is_package_data() -> None:
    names = {p.name for p in data_dir().iterdir()}
    assert {f for f, _ in FILES.values()} <= names


def test_blank_source_is_rejected(data_copy: Path) -> None:
    path = data_copy / "nics.toml"
    text = path.read_text(encoding="utf-8")
    blanked = re.sub(r'(?m)^source = ".*"$', 'source = "  "', text, count=1)
    assert blanked != text
    path.write_text(blanked, encoding="utf-8")
    with pytest.raises(ConfigError, match="source") as info:
        load_catalog(data_copy)
    assert info.value.field == "nics.toml:connectx-6.source"


def test_blackwell_ultra_entries(cat: Catalog) -> None:
    """B300/GB300 (Blackwell Ultra datasheet): BF16/FP8 dense as B200/GB200 in the same
    form factor, NVFP4 1.5x; one 800G ConnectX-8 per GPU on XDR."""
    b200, b300, gb200, gb300 = (cat.gpu(n) for n in ("b200", "b300", "gb200", "gb300"))
    assert (b300.bf16_dense_tflops, b300.fp8_dense_tflops) == (
        b200.bf16_dense_tflops, b200.fp8_dense_tflops)
    assert (gb300.bf16_dense_tflops, gb300.fp8_dense_tflops) == (
        gb200.bf16_dense_tflops, gb200.fp8_dense_tflops)
    assert b300.fp4_dense_tflops == 1.5 * b200.fp4_dense_tflops == 13500
    assert gb300.fp4_dense_tflops == 1.5 * gb200.fp4_dense_tflops == 15000
    assert cat.gpu("h100-sxm").fp4_dense_tflops == 0  # no FP4 tensor cores
    for name, gpus in (("hgx-b300", 8), ("gb300-nvl72", 72)):
        sysp = cat.system(name)
        assert (sysp.gpus, sysp.nics, sysp.nic_gbit_s, sysp.nic) == (gpus, gpus, 800,
                                                                      "connectx-8")
        assert sysp.default_fabric == "ib-xdr"
    assert cat.system("hgx-b300").pcie_switches == 8  # one per GPU-NIC pair (CX-8's own)
