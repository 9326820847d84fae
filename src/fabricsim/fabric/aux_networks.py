"""Storage and out-of-band management networks, built beside the compute network.

Both are optional (``build_cluster(..., storage=True, management=True)``), counted in
``FabricInfo`` (switches in ``extra["switches"]``, cables in ``cables``), and never carry
compute traffic: their links have kinds ``LinkKind.STORAGE`` / ``LinkKind.MGMT``, which no
compute router looks at.

Storage: every server's storage NICs (``NodeKind.STORAGE_NIC`` in the server template)
and ``storage_targets`` storage servers (``NodeKind.STORAGE_TARGET``, default one per 8
compute servers, each with 2 ports at the storage NIC rate; an assumption to override)
join a non-blocking fat-tree of ``NodeKind.STORAGE_SWITCH`` switches of the compute
fabric's switch model (2 tiers, 3 when needed).

Management: each server's BMCs are modelled as 1 GbE ports of its CPUs — one BMC per
two CPUs, i.e. one per DGX-class server and 18 per GB200 NVL72 rack (one per compute
tray; switch-tray BMCs are left out) — on 48-port 1 GbE ``NodeKind.MGMT_SWITCH`` leaves,
``mgmt_servers_per_switch`` servers each (default: as many as fit, at most 16); leaves
join a tree of aggregation switches of the same model with one uplink each.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=32, storage=True, management=True)
>>> sw = fab.info.extra["switches"]
>>> sw["storage-switch"], sw["mgmt-switch"], fab.info.cables["management"]
(5, 3, 34)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.fattree import CABLE_DELAY, build_plane
from fabricsim.fabric.kinds import LinkKind, NodeKind

#: Ports of a management (1 GbE) switch.
MGMT_SWITCH_RADIX = 48
#: One management port per direction (bytes/s): 1 Gb/s.
MGMT_PORT_BW = 1e9 / 8
#: Store-and-forward latency of a 1 GbE switch (s), order of magnitude.
MGMT_SWITCH_LATENCY = 5e-6
#: Storage target ports (each at the storage NIC rate).
TARGET_PORTS = 2


@dataclass
class AuxSummary:
    """What an auxiliary network added: switch and cable counts, notes."""

    switches: dict[str, int] = field(default_factory=dict)
    cables: dict[str, int] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


#: Most storage targets a storage network is built with (a target is a server with
#: TARGET_PORTS ports: 16,384 of them is a storage cluster beyond any GPU cluster's).
MAX_STORAGE_TARGETS = 16_384


def _pos_int(params: Mapping[str, object], name: str, default: int,
             most: int | None = None) -> int:
    v = params.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {v!r}", field=f"params.{name}")
    if most is not None and v > most:
        raise ConfigError(f"{name} must be at most {most:,}, got {v:,}", field=f"params.{name}")
    return v


def add_storage_network(b: FabricBuilder, storage_nics: NDArray[np.int32], *, radix: int,
                        port_bw: float, nic_bw: float, switch_latency: float,
                        nic_latency: float, params: Mapping[str, object]) -> AuxSummary:
    """Storage fat-tree over ``storage_nics[server, i]`` plus storage targets."""
    servers, per = storage_nics.shape
    if per == 0:
        raise ConfigError("this system has no storage NIC (storage_nics = 0 in its preset); "
                          "use storage=False", field="storage")
    targets = _pos_int(params, "storage_targets", max(1, math.ceil(servers / 8)),
                       MAX_STORAGE_TARGETS)
    t_idx = np.arange(targets, dtype=np.int32)
    tnodes = b.add_nodes(NodeKind.STORAGE_TARGET, targets, local=t_idx)
    ports = np.repeat(tnodes, TARGET_PORTS)
    # a target port is a node of its own so that each port is one cable to one leaf
    port_nodes = b.add_nodes(NodeKind.STORAGE_NIC, ports.size, group=np.repeat(t_idx,
                                                                                 TARGET_PORTS),
                             local=np.tile(np.arange(TARGET_PORTS), targets))
    b.add_links(port_nodes, ports, max(nic_bw, port_bw), 0.0, LinkKind.STORAGE)
    endpoints = np.concatenate([storage_nics.reshape(-1), port_nodes]).astype(np.int32)
    e = int(endpoints.size)
    k = radix
    tiers = 2 if math.ceil(e / (k // 2)) <= k else 3
    plane = build_plane(b, endpoints, radix=k, port_bw=port_bw, endpoint_bw=nic_bw,
                        switch_latency=switch_latency, nic_latency=nic_latency,
                        oversubscription=1.0, tiers=tiers, plane=0, pod_offset=0,
                        node_kinds=(NodeKind.STORAGE_SWITCH,) * 3,
                        link_kinds=(LinkKind.STORAGE,) * 3)
    n_sw = int(plane.leaves.size + plane.spines.size + plane.cores.size)
    up_cables = plane.uplink_cables
    core_cables = int(plane.pods * plane.spines_per_pod * plane.spine_up_ports
                      if plane.tiers == 3 else 0)
    return AuxSummary(
        switches={"storage-switch": n_sw},
        cables={"storage": e + up_cables + core_cables},
        extra={"storage": {"targets": targets, "target_ports": TARGET_PORTS, "tiers":
                           plane.tiers, "endpoints": e}})


def add_management_network(b: FabricBuilder, cpus: NDArray[np.int32],
                           params: Mapping[str, object]) -> AuxSummary:
    """1 GbE management tree over BMC ports on the CPUs (``cpus[server, i]``)."""
    servers, n_cpu = cpus.shape
    if n_cpu == 0:
        raise ConfigError("servers have no CPU to carry a BMC port", field="management")
    bmcs = max(1, n_cpu // 2)
    fit = (MGMT_SWITCH_RADIX - 1) // bmcs
    if fit < 1:
        raise ConfigError(f"{bmcs} BMC ports per server do not fit a {MGMT_SWITCH_RADIX}-port "
                          "management switch", field="management")
    per_sw = _pos_int(params, "mgmt_servers_per_switch", min(16, fit))
    if per_sw > fit:
        raise ConfigError(
            f"mgmt_servers_per_switch={per_sw} needs {per_sw * bmcs} + 1 ports, more than a "
            f"{MGMT_SWITCH_RADIX}-port switch; use <= {fit}",
            field="params.mgmt_servers_per_switch")
    bmc_nodes = cpus[:, [2 * i for i in range(bmcs)]]  # [servers, bmcs]
    n_leaf = math.ceil(servers / per_sw)
    level = b.add_nodes(NodeKind.MGMT_SWITCH, n_leaf, group=0)
    leaf_of = np.repeat(np.arange(servers) // per_sw, bmcs)
    lat = CABLE_DELAY + MGMT_SWITCH_LATENCY
    b.add_links(bmc_nodes.reshape(-1), level[leaf_of], MGMT_PORT_BW, lat, LinkKind.MGMT)
    cables = servers * bmcs
    total = n_leaf
    depth = 1
    while level.size > 1:
        fan = MGMT_SWITCH_RADIX - 1
        parents = b.add_nodes(NodeKind.MGMT_SWITCH, math.ceil(level.size / fan), group=depth)
        b.add_links(level, parents[np.arange(level.size) // fan], MGMT_PORT_BW, lat,
                    LinkKind.MGMT)
        cables += int(level.size)
        total += int(parents.size)
        level = parents
        depth += 1
    return AuxSummary(switches={"mgmt-switch": total}, cables={"management": cables},
                      extra={"management": {"bmcs_per_server": bmcs, "servers_per_switch":
                                            per_sw, "levels": depth}})
