"""Multi-rack NVLink Switch domains (e.g. GB200 NVL576 = 8 NVL72 racks).

Asked for with ``build_cluster(..., params={"nvlink_domain": 576})``: consecutive servers
(racks) are grouped into domains of ``nvlink_domain / gpus_per_server`` servers, and the
NVSwitch chips of those servers are joined by a second tier of NVSwitch chips
(``NodeKind.NVSWITCH`` outside any server) over ``LinkKind.NVLINK_NETWORK`` links. GPUs in
different servers of one domain then route GPU → rack NVSwitch → tier-2 NVSwitch → rack
NVSwitch → GPU, never over the NIC network.

Sizing (non-blocking, an assumption: NVIDIA has not published the NVL576 cabling):
rack NVSwitch ``j`` has ``U`` = its GPU-facing NVLink lanes as uplinks, and joins tier-2
plane ``j`` of ``T = smallest divisor of U ≥ ceil(S·U/k)`` switches of radix ``k`` with
``U/T`` lanes each (``S`` servers per domain). For NVL576 on NVSwitch gen4 (k = 72): 18
planes × 8 = 144 tier-2 chips, 8 × 18 × 8 links of 9 lanes. The rack chip then uses
``2U`` ports, twice what one NVL72 chip has: read it as the rack tier having twice the
chips (the GPU-facing bandwidth is unchanged).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("gb200-nvl72", nodes=8, params={"nvlink_domain": 576})
>>> fab.info.nvlink_domain_gpus, fab.info.extra["nvlink_domain"]["tier2_switches"]
(576, 144)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.fattree import CABLE_DELAY
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.network import PAD
from fabricsim.fabric.paths import IntArray
from fabricsim.fabric.server import ServerTemplate


@dataclass(eq=False)
class NvlinkDomain:
    """Index tables to route GPU pairs of one domain over its NVLink network."""

    gpus: int
    servers_per_domain: int
    tier2_per_plane: int
    n_switches: int  # rack NVSwitch chips per server
    gpu_up: NDArray[np.int64]  # [gpus_per_server, n_sw] template link gpu -> rack switch
    sw_down: NDArray[np.int64]  # [n_sw, gpus_per_server] template link rack switch -> gpu
    up: NDArray[np.int32]  # [servers, n_sw, T] link rack switch -> tier-2
    down: NDArray[np.int32]  # [servers, n_sw, T] link tier-2 -> rack switch
    link_base: int
    template_links: int
    summary: dict[str, Any]

    def domain_of(self, server: IntArray) -> IntArray:
        return (server // self.servers_per_domain).astype(np.int32)

    @property
    def n_choices(self) -> int:
        return self.n_switches * self.tier2_per_plane

    def route(self, sa: IntArray, sb: IntArray, ga: IntArray, gb: IntArray,
              h: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Rows of 4 links for GPU ``ga`` of server ``sa`` to GPU ``gb`` of server ``sb``."""
        j = (h % np.uint64(self.n_switches)).astype(np.int64)
        t = ((h // np.uint64(self.n_switches)) % np.uint64(self.tier2_per_plane)
             ).astype(np.int64)
        base_a = self.link_base + sa.astype(np.int64) * self.template_links
        base_b = self.link_base + sb.astype(np.int64) * self.template_links
        out = np.empty((sa.shape[0], 4), dtype=np.int64)
        out[:, 0] = self.gpu_up[ga, j] + base_a
        out[:, 1] = self.up[sa, j, t]
        out[:, 2] = self.down[sb, j, t]
        out[:, 3] = self.sw_down[j, gb] + base_b
        return out

    def route_avoiding(self, sa: IntArray, sb: IntArray, ga: IntArray, gb: IntArray,
                       h: NDArray[np.uint64], link_up: NDArray[np.bool_]
                       ) -> NDArray[np.int64]:
        """As :meth:`route`, re-hashing rows that cross a link that is down (PAD if none)."""
        out = self.route(sa, sb, ga, gb, h)
        bad = np.flatnonzero(~link_up[out].all(axis=1))
        for i in bad:
            out[i] = PAD
            k = self.n_choices
            alt = self.route(np.full(k, sa[i]), np.full(k, sb[i]), np.full(k, ga[i]),
                             np.full(k, gb[i]), np.arange(k, dtype=np.uint64))
            ok = np.flatnonzero(link_up[alt].all(axis=1))
            if ok.size:
                out[i] = alt[ok[int(h[i] % np.uint64(ok.size))]]
        return out


#: Most GPUs one NVLink Switch domain joins, by NVLink generation: NVLink 4 (Hopper) up to
#: 256 through the NVLink Switch System (NVIDIA DGX H100 / GH200 NVLink Switch System
#: announcements), NVLink 5 (Blackwell) up to 576 (NVIDIA's fifth-generation NVLink and
#: GB200 NVL72 pages, seed 001: "up to 576 GPUs ... in a single NVLink domain"). Earlier
#: generations join no GPUs beyond one server. Rubin's NVLink 6 and Rubin Ultra's NVLink 7
#: are published only as one rack each (Vera Rubin NVL144: 72 GPUs; Rubin Ultra NVL576:
#: 144 four-die GPUs), so no domain beyond the rack is built for them.
MAX_DOMAIN_GPUS = {"nvlink4": 256, "nvlink5": 576, "nvlink6": 72, "nvlink7": 144}


def check_domain_size(value: object, nvlink: str, system: str) -> None:
    """A ConfigError (field ``params.nvlink_domain``) for a multi-server NVLink domain
    larger than ``system``'s NVLink generation joins (:data:`MAX_DOMAIN_GPUS`).

    >>> check_domain_size(576, "nvlink5", "gb200-nvl72")
    >>> try:
    ...     check_domain_size(1152, "nvlink5", "gb200-nvl72")
    ... except ConfigError as e:
    ...     print(e.field)
    params.nvlink_domain
    """
    if not isinstance(value, int) or isinstance(value, bool):
        return  # _parse_domain names that
    most = next((v for k, v in MAX_DOMAIN_GPUS.items() if nvlink.startswith(k)), 0)
    if most and value > most:
        raise ConfigError(f"nvlink_domain={value} GPUs is more than {nvlink} joins in one "
                          f"NVLink Switch domain ({most}); use at most {most}, or several "
                          f"domains joined by the scale-out network", field="params.nvlink_domain")


def _parse_domain(value: object, template: ServerTemplate) -> int:
    g = template.n_gpus
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"nvlink_domain must be a GPU count (e.g. {8 * g}), got {value!r}",
                          field="params.nvlink_domain")
    if value % g:
        near = max(g, round(value / g) * g)
        raise ConfigError(f"nvlink_domain={value} is not a multiple of the {g} GPUs of one "
                          f"{template.params.name} server; use {near}",
                          field="params.nvlink_domain")
    return value


def add_nvlink_domains(b: FabricBuilder, template: ServerTemplate, servers: int,
                       node_base: int, link_base: int, domain_gpus_asked: object,
                       tier2_radix: int, lane_latency: float) -> NvlinkDomain | None:
    """Join servers into NVLink domains of ``domain_gpus_asked`` GPUs (None: one server)."""
    domain_gpus = _parse_domain(domain_gpus_asked, template)
    g = template.n_gpus
    ds = domain_gpus // g
    if ds == 1:
        return None
    kinds = template.kinds
    sw_local = np.flatnonzero(kinds == NodeKind.NVSWITCH)
    if sw_local.size == 0 or template.params.nvlink_bw <= 0:
        raise ConfigError(f"{template.params.name} has no NVSwitch; a multi-server NVLink "
                          "domain needs one (e.g. system gb200-nvl72)",
                          field="params.nvlink_domain")
    n_sw = int(sw_local.size)
    pos_sw = {int(s): j for j, s in enumerate(sw_local)}
    pos_gpu = {int(x): i for i, x in enumerate(template.gpu_local)}
    gpu_up = np.full((g, n_sw), -1, dtype=np.int64)
    sw_down = np.full((n_sw, g), -1, dtype=np.int64)
    lanes_up = np.zeros(n_sw, dtype=np.int64)
    lane_bw = 0.0
    for link in np.flatnonzero(template.link_kind == LinkKind.NVLINK):
        s, d = int(template.link_src[link]), int(template.link_dst[link])
        if s in pos_gpu and d in pos_sw:
            gpu_up[pos_gpu[s], pos_sw[d]] = link
            lanes_up[pos_sw[d]] += int(template.link_lanes[link])
            lane_bw = float(template.link_capacity[link]) / int(template.link_lanes[link])
        elif s in pos_sw and d in pos_gpu:
            sw_down[pos_sw[s], pos_gpu[d]] = link
    up_ports = int(lanes_up.min())
    if ds > tier2_radix:
        raise ConfigError(
            f"a two-tier NVLink domain of radix-{tier2_radix} switches holds at most "
            f"{tier2_radix} servers ({tier2_radix * g} GPUs); got {domain_gpus}",
            field="params.nvlink_domain")
    lo = math.ceil(ds * up_ports / tier2_radix)
    t2 = next(t for t in range(max(lo, 1), up_ports + 1) if up_ports % t == 0)
    lanes = up_ports // t2
    domains = math.ceil(servers / ds)
    n_t2 = domains * n_sw * t2
    idx = np.arange(n_t2, dtype=np.int32)
    tier2 = b.add_nodes(NodeKind.NVSWITCH, n_t2, group=idx // (n_sw * t2),
                        local=idx % (n_sw * t2))
    srv = np.repeat(np.arange(servers, dtype=np.int64), n_sw * t2)
    j = np.tile(np.repeat(np.arange(n_sw, dtype=np.int64), t2), servers)
    t = np.tile(np.arange(t2, dtype=np.int64), servers * n_sw)
    rack_sw = node_base + srv * template.n_nodes + sw_local[j]
    t2_node = tier2[(srv // ds) * n_sw * t2 + j * t2 + t]
    fwd, rev = b.add_links(rack_sw, t2_node, lane_bw * lanes, lane_latency + CABLE_DELAY,
                           LinkKind.NVLINK_NETWORK, lanes=lanes)
    summary = {"gpus": domain_gpus, "servers_per_domain": ds, "domains": domains,
               "tier2_switches": n_t2, "tier2_per_plane": t2, "lanes_per_link": lanes,
               "cables": int(servers * n_sw * up_ports)}
    return NvlinkDomain(
        gpus=domain_gpus, servers_per_domain=ds, tier2_per_plane=t2, n_switches=n_sw,
        gpu_up=gpu_up, sw_down=sw_down, up=fwd.reshape(servers, n_sw, t2),
        down=rev.reshape(servers, n_sw, t2), link_base=link_base,
        template_links=template.n_links, summary=summary)
