"""Hardware facts live on the Fabric: a user-defined system is its preset (issue 10)."""

from __future__ import annotations

import pytest

from fabricsim.catalog import get_catalog
from fabricsim.catalog.loader import with_systems
from fabricsim.collectives import choose
from fabricsim.fabric import build_cluster


@pytest.mark.parametrize(("system", "nvswitch", "nvlink", "nvls", "nics_per_gpu"), [
    ("dgx-h100", "nvswitch-gen3", "nvlink4", True, 1),
    ("dgx-a100", "nvswitch-gen2", "nvlink3", False, 1),
    ("aws-p5", "nvswitch-gen3", "nvlink4", True, 4),
])
def test_builder_records_the_hardware(system: str, nvswitch: str, nvlink: str, nvls: bool,
                                      nics_per_gpu: int) -> None:
    info = build_cluster(system, 1).info
    assert (info.nvswitch, info.nvlink, info.nvls, info.nics_per_gpu) == (
        nvswitch, nvlink, nvls, nics_per_gpu)
    assert info.pcie_switches == get_catalog().system(system).pcie_switches


def test_one_gpu_per_server_has_no_nvls() -> None:
    assert not build_cluster("dgx-h100", 2, gpus_per_node=1).info.nvls


@pytest.mark.parametrize("nodes", [1, 2])
def test_user_defined_system_behaves_like_its_base(nodes: int) -> None:
    cat = with_systems(get_catalog(), {"box": {"base": "dgx-h100"}})
    mine = build_cluster("box", nodes, catalog=cat)
    preset = build_cluster("dgx-h100", nodes)
    for field in ("nvswitch", "nvlink", "nvls", "nics_per_gpu", "pcie_switches", "sharp"):
        assert getattr(mine.info, field) == getattr(preset.info, field), field
    for size in (2**10, 2**33):
        a, b = choose(mine, "all_reduce", size), choose(preset, "all_reduce", size)
        assert (a.algorithm, a.protocol) == (b.algorithm, b.protocol)
        assert a.time == pytest.approx(b.time, rel=1e-12)
    assert choose(mine, "all_reduce", 2**33).algorithm == "nvls" or nodes > 1


def test_sharp_is_off_unless_asked_and_refused_where_it_cannot_exist() -> None:
    from fabricsim.errors import ConfigError, ScheduleError

    assert not build_cluster("dgx-h100", 4).info.sharp          # shipping default
    assert build_cluster("dgx-h100", 4, params={"sharp": True}).info.sharp
    for kw, why in ((dict(fabric="roce-400g"), "transport"),
                    (dict(topology="torus3d"), "aggregation tree"),
                    (dict(fabric="efa"), "transport")):
        with pytest.raises(ConfigError, match=why):
            build_cluster("dgx-h100", 4, params={"sharp": True}, **kw)
    with pytest.raises(ConfigError, match="true or false"):
        build_cluster("dgx-h100", 4, params={"sharp": "yes"})
    with pytest.raises(ScheduleError, match="sharp: true"):
        choose(build_cluster("dgx-h100", 4, topology="torus3d"), "all_reduce", 2**20,
               algo="sharp")


def test_quad_gh200_is_an_nvlink_mesh_with_a_nic_behind_each_grace() -> None:
    """HPE's EX254n: six NVLink4 links between every GPU pair (150 GB/s per direction),
    no NVSwitch; each GPU's own Slingshot NIC hangs off its Grace CPU, so a GPU reaches
    its NIC through the CPU."""
    from fabricsim.fabric.kinds import LinkKind, NodeKind

    fab = build_cluster("quad-gh200", 2)
    assert (fab.info.gpus_per_server, fab.info.nics_per_gpu, fab.info.nvls) == (4, 1, False)
    g = [int(x) for x in fab.gpus[:4]]
    for a in g:
        for b in g:
            if a != b:
                path = fab.route(a, b)
                assert len(path) == 1 and fab.link_kind[path[0]] == LinkKind.NVLINK
                assert fab.link_capacity[path[0]] == pytest.approx(150e9)
    nic = int(fab.gpu_nics[0][0])
    via = [int(fab.link_dst[x]) for x in fab.route(g[0], nic)]
    assert fab.node_kind[via[0]] == NodeKind.CPU and via[-1] == nic
    assert len({int(fab.gpu_nics[r][0]) for r in range(4)}) == 4
