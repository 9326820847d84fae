"""Bad input gives errors that name the field and a valid value."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.errors import ConfigError, TopologyError
from fabricsim.fabric import Network, ShortestPathRouter, build_cluster, register_topology
from fabricsim.fabric.cluster import TOPOLOGIES, TOPOLOGY_PARAMS
from fabricsim.fabric.kinds import LinkKind, NodeKind


def test_torus_dims_must_multiply_to_servers():
    with pytest.raises(TopologyError) as e:
        build_cluster("dgx-h100", nodes=24, topology="torus3d", params={"dims": [4, 4, 4]})
    assert e.value.field == "params.dims" and "[4, 3, 2]" in str(e.value)


def test_dragonfly_radix_too_small():
    with pytest.raises(TopologyError) as e:
        build_cluster("dgx-h100", nodes=8, topology="dragonfly", radix=16,
                      params={"routers_per_group": 12})
    assert e.value.field == "params.routers_per_group" and "<= 9" in str(e.value)


def test_dragonfly_too_many_groups():
    with pytest.raises(TopologyError) as e:
        build_cluster("dgx-h100", nodes=64, topology="dragonfly", radix=8,
                      params={"routers_per_group": 2, "hosts_per_router": 2,
                              "global_links_per_router": 1})
    assert e.value.field == "params.groups" and "groups <= 3" in str(e.value)


def test_fat_tree_planes_must_divide_nics():
    with pytest.raises(TopologyError) as e:
        build_cluster("dgx-h100", nodes=4, planes=3)
    assert e.value.field == "planes"


def test_two_tiers_too_small():
    with pytest.raises(TopologyError) as e:
        build_cluster("dgx-h100", nodes=40, radix=16, tiers=2)
    assert e.value.field == "tiers"


def test_unknown_param_did_you_mean():
    with pytest.raises(ConfigError) as e:
        build_cluster("dgx-h100", nodes=8, topology="dragonfly", params={"group": 2})
    assert e.value.field == "params.group" and "'groups'" in str(e.value)


def test_nvlink_domain_must_be_multiple_of_server_gpus():
    with pytest.raises(ConfigError) as e:
        build_cluster("gb200-nvl72", nodes=8, params={"nvlink_domain": 500})
    assert e.value.field == "params.nvlink_domain" and "504" in str(e.value)


def test_nvlink_domain_needs_nvswitch():
    with pytest.raises(ConfigError) as e:
        build_cluster("pcie-8gpu", nodes=4, params={"nvlink_domain": 32})
    assert e.value.field == "params.nvlink_domain"


def test_storage_without_storage_nics():
    with pytest.raises(ConfigError) as e:
        build_cluster("aws-p5", nodes=2, storage=True)
    assert e.value.field == "storage"


def test_disconnected_network_is_rejected():
    def islands(b, nics, spec):  # every server on its own switch: no path between servers
        sw = b.add_nodes(NodeKind.LEAF, nics.shape[0])
        b.add_links(nics.reshape(-1), np.repeat(sw, nics.shape[1]), spec.port_bw, 1e-6,
                    LinkKind.NIC_LEAF)
        router = ShortestPathRouter(np.zeros(0, np.int32), np.zeros(0, np.int32),
                                    np.zeros(0, np.int32), 1)
        return Network(router=router, switches={"leaf": int(sw.size)}, tiers=1,
                       bisection_bandwidth=0.0, oversubscription=1.0)

    register_topology("islands-test", islands)
    try:
        with pytest.raises(TopologyError) as e:
            build_cluster("dgx-h100", nodes=3, topology="islands-test")
        assert "disconnected" in str(e.value)
    finally:
        TOPOLOGIES.pop("islands-test")
        TOPOLOGY_PARAMS.pop("islands-test")


def test_nvlink_domain_no_larger_than_its_generation_joins():
    """NVLink 5 joins up to 576 GPUs, NVLink 4 up to 256 (issue 41's bad input)."""
    with pytest.raises(ConfigError) as e:
        build_cluster("gb200-nvl72", nodes=16, params={"nvlink_domain": 1152})
    assert e.value.field == "params.nvlink_domain" and "(576)" in str(e.value)
    with pytest.raises(ConfigError) as e:
        build_cluster("dgx-h100", nodes=64, params={"nvlink_domain": 512})
    assert e.value.field == "params.nvlink_domain" and "(256)" in str(e.value)
    assert build_cluster("dgx-h100", nodes=32, params={"nvlink_domain": 256}).info \
        .nvlink_domain_gpus == 256


def test_gpus_per_node_past_a_server_points_to_the_nvlink_domain():
    with pytest.raises(ConfigError) as e:
        build_cluster("gb200-nvl72", nodes=8, gpus_per_node=576)
    assert e.value.field == "gpus_per_node" and "params.nvlink_domain" in str(e.value)
