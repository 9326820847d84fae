"""Clusters: servers from a system preset joined by a scale-out network.

:func:`build_cluster` is the one entry point most users need. It tiles the server
template over ``nodes`` servers, hands their NICs to the scale-out builder of
``topology`` (registered in :data:`TOPOLOGIES`), and returns a Fabric whose router joins
intra-server routes (NVLink, PCIe) with network routes.

Example
-------
>>> fab = build_cluster("dgx-h100", nodes=4, fabric="roce-400g")
>>> fab.n_gpus, fab.info.fabric, fab.info.topology
(32, 'roce-400g', 'rail-optimized')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError, NoRouteError, TopologyError, did_you_mean, unknown
from fabricsim.fabric.aux_networks import AuxSummary, add_management_network, add_storage_network
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.core import Fabric, FabricInfo, nic_pick
from fabricsim.fabric.dragonfly import dragonfly_network
from fabricsim.fabric.fattree import fat_tree_network
from fabricsim.fabric.ici import (
    IciSlices,
    PodRules,
    add_ici_slices,
    check_slice,
    default_slice,
    parse_shape,
    shape_name,
    twistable,
)
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.network import (
    ADAPTIVE_TOPOLOGIES,
    PAD,
    ROUTING_BY_TRANSPORT,
    ROUTINGS,
    Network,
    NetworkRouter,
    ScaleOutSpec,
)
from fabricsim.fabric.nvlink_domain import NvlinkDomain, add_nvlink_domains, check_domain_size
from fabricsim.fabric.paths import IntArray, Paths
from fabricsim.fabric.server import ServerTemplate
from fabricsim.fabric.torus import torus_network

if TYPE_CHECKING:
    from fabricsim.catalog import Catalog
    from fabricsim.catalog.models import SystemSpec

ScaleOutBuilder = Callable[[FabricBuilder, NDArray[np.int32], ScaleOutSpec], Network]


def _fat_tree(b: FabricBuilder, nics: NDArray[np.int32], s: ScaleOutSpec) -> Network:
    return fat_tree_network(b, nics, radix=s.radix, port_bw=s.port_bw,
                            endpoint_bw=s.endpoint_bw, switch_latency=s.switch_latency,
                            nic_latency=s.nic_latency, oversubscription=s.oversubscription,
                            tiers=s.tiers, planes=s.planes, rail_optimized=False,
                            routing=s.routing)


def _rail(b: FabricBuilder, nics: NDArray[np.int32], s: ScaleOutSpec) -> Network:
    return fat_tree_network(b, nics, radix=s.radix, port_bw=s.port_bw,
                            endpoint_bw=s.endpoint_bw, switch_latency=s.switch_latency,
                            nic_latency=s.nic_latency, oversubscription=s.oversubscription,
                            tiers=s.tiers, planes=s.planes, rail_optimized=True,
                            routing=s.routing)


#: Scale-out builders by topology preset name. Other modules register theirs here.
TOPOLOGIES: dict[str, ScaleOutBuilder] = {
    "fat-tree": _fat_tree,
    "rail-optimized": _rail,
    "dragonfly": dragonfly_network,
    "torus3d": torus_network,
}

#: ``params`` keys each topology reads (None: not checked, for registered builders).
TOPOLOGY_PARAMS: dict[str, frozenset[str] | None] = {
    "fat-tree": frozenset(),
    "rail-optimized": frozenset(),
    "dragonfly": frozenset({"groups", "routers_per_group", "hosts_per_router",
                            "global_links_per_router"}),
    "torus3d": frozenset({"dims"}),
}
#: ``params`` keys read by build_cluster itself (NVLink domains, storage, management).
CLUSTER_PARAMS = frozenset({"nvlink_domain", "storage_targets", "mgmt_servers_per_switch",
                            "sharp", "routing", "calibration", "qps", "buffsize",
                            "ici_slice", "ici_twisted"})
#: Most queue pairs per connection (``params.qps``; NCCL accepts up to 128).
MAX_QPS = 128
#: The Simple buffers ``params.buffsize`` (``NCCL_BUFFSIZE``) may give, in bytes: from
#: 1 MiB to 1 GiB; NCCL's default is 4 MiB. Below 1 MiB a connection between servers may
#: run short of data in flight (NCCL also caps its send/recv chunk at an eighth of it),
#: which the model does not represent.
BUFFSIZE_RANGE = (2**20, 2**30)
#: Link classes a calibration may scale, and what it scales; ``host.launch`` scales the
#: host's time to issue an operation on one GPU (``Protocol.host_floor``, nccl-tests -g).
CALIBRATION_KEYS = frozenset({f"{c}.{what}" for c in ("nvlink", "pcie", "net", "nvls", "sharp")
                              for what in ("efficiency", "hop")} | {"host.launch"})


#: Range of a calibration factor: fitted clusters land within a few times the model's
#: figures; 1e-300 would make a 1 GiB all-reduce take 1e303 us.
CALIBRATION_RANGE = (0.01, 10.0)


def check_calibration(raw: object) -> dict[str, float]:
    """``params.calibration`` as a checked mapping: known keys, factors in
    :data:`CALIBRATION_RANGE`.

    >>> check_calibration({"net.efficiency": 0.95})
    {'net.efficiency': 0.95}
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"calibration must be a mapping such as {{net.efficiency: 0.95}}, "
                          f"got {raw!r}", field="params.calibration")
    out: dict[str, float] = {}
    for k, v in raw.items():
        if k not in CALIBRATION_KEYS:
            raise unknown("calibration factor", str(k), sorted(CALIBRATION_KEYS),
                          field="params.calibration")
        if isinstance(v, bool) or not isinstance(v, int | float) \
                or not CALIBRATION_RANGE[0] <= v <= CALIBRATION_RANGE[1] or v != v:
            lo, hi = CALIBRATION_RANGE
            raise ConfigError(f"calibration {k} must be a factor in [{lo:g}, {hi:g}], got "
                              f"{v!r} (a cluster that slow is broken, not calibrated: "
                              f"model it with a fault)", field=f"params.calibration.{k}")
        out[str(k)] = float(v)
    return out
#: Topologies whose switches can form SHARP aggregation trees (InfiniBand fat-trees).
SHARP_TOPOLOGIES = frozenset({"fat-tree", "rail-optimized"})

#: Links of compute scale-out networks (never STORAGE, MGMT or NVLINK_NETWORK).
NETWORK_LINK_KINDS = (LinkKind.NIC_LEAF, LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE,
                      LinkKind.LOCAL, LinkKind.GLOBAL, LinkKind.TORUS)


def register_topology(name: str, builder: ScaleOutBuilder,
                      params: frozenset[str] | None = None) -> None:
    """Make ``builder`` available as ``topology=name`` (``params``: keys it reads)."""
    TOPOLOGIES[name] = builder
    TOPOLOGY_PARAMS[name] = params


@dataclass(frozen=True, eq=False)
class RouteSegments:
    """Routes of many transfers split into server-template parts and a global middle part.

    Row ``i``'s path is: template path ``path_a[i]`` inside server ``server_a[i]`` (none
    when ``-1``), then the global link ids ``mid[i]`` (``-1`` padded), then template path
    ``path_b[i]`` inside server ``server_b[i]``. A template path is a row of ``table``
    (local link ids, ``-1`` padded); its global ids are ``link_base + server ×
    n_template_links + local``. Servers are identical copies of one template, so a
    per-server pattern can be evaluated once and tiled (the analytic backend does).

    Example
    -------
    >>> import numpy as np
    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", nodes=2)
    >>> seg = fab.router.segments(fab.gpus[:1], fab.gpus[9:10], np.zeros(1, np.uint64),
    ...                           fab.link_up)
    >>> int(seg.server_a[0]), int(seg.server_b[0])
    (0, 1)
    >>> seg.paths().row(0).tolist() == fab.route(fab.gpus[0], fab.gpus[9], flow_hash=0).tolist()
    True
    """

    server_a: NDArray[np.int64]
    path_a: NDArray[np.int64]
    mid: NDArray[np.int64]
    server_b: NDArray[np.int64]
    path_b: NDArray[np.int64]
    table: NDArray[np.int64]
    link_base: int
    n_template_links: int

    def _expand(self, server: NDArray[np.int64], path: NDArray[np.int64]) -> NDArray[np.int64]:
        if self.table.shape[0] == 0 or not (path >= 0).any():
            return np.full((path.shape[0], 1), PAD, dtype=np.int64)
        local = self.table[np.maximum(path, 0)]
        base = (self.link_base + server * self.n_template_links)[:, None]
        return np.where((local >= 0) & (path >= 0)[:, None], local + base, PAD)

    def paths(self) -> Paths:
        """The full paths (global link ids) as :class:`Paths`."""
        full = np.hstack([self._expand(self.server_a, self.path_a), self.mid,
                          self._expand(self.server_b, self.path_b)])
        return Paths.from_padded(full)


@dataclass(eq=False)
class ClusterRouter:
    """Intra-server template routes + a scale-out network router."""

    template: ServerTemplate
    servers: int
    node_base: int
    link_base: int
    node_server: IntArray
    rank_of: IntArray
    gpu_nics: IntArray
    net: NetworkRouter
    nic_plane: Callable[[IntArray], IntArray] | None = None
    nvl: NvlinkDomain | None = None
    ici: IciSlices | None = None
    # template path table, filled lazily per (local src, local dst) pair
    _opt_start: NDArray[np.int64] | None = field(default=None, init=False, repr=False)
    _opt_count: NDArray[np.int64] | None = field(default=None, init=False, repr=False)
    _tp_rows: list[IntArray] = field(default_factory=list, init=False, repr=False)
    _tp_table: NDArray[np.int64] = field(
        default_factory=lambda: np.zeros((0, 1), dtype=np.int64), init=False, repr=False)

    def spray_groups(self) -> list[NDArray[np.int64]]:
        """Sets of network links an adaptive router spreads a flow over (see
        :meth:`fabricsim.fabric.fattree.FatTreeRouter.spray_groups`); none otherwise."""
        fn = getattr(self.net, "spray_groups", None)
        return list(fn()) if fn is not None else []

    def _local(self, nodes: IntArray) -> IntArray:
        srv = self.node_server[nodes]
        return (nodes - self.node_base - srv * self.template.n_nodes).astype(np.int32)

    def template_paths(self, a_local: IntArray, b_local: IntArray,
                       hashes: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Ids (rows of :attr:`template_table`) of the template path from local node
        ``a_local`` to ``b_local`` chosen among the equal-cost ones by ``hashes``."""
        nt = self.template.n_nodes
        if self._opt_start is None or self._opt_count is None:
            self._opt_start = np.full(nt * nt, -1, dtype=np.int64)
            self._opt_count = np.zeros(nt * nt, dtype=np.int64)
        start, count = self._opt_start, self._opt_count
        key = a_local.astype(np.int64) * nt + b_local
        new = np.unique(key[start[key] < 0])
        if new.size:
            for k in new.tolist():
                opts = self.template.local_paths(k // nt, k % nt)
                start[k] = len(self._tp_rows)
                count[k] = len(opts)
                self._tp_rows.extend(opts)
            width = max(max((len(p) for p in self._tp_rows), default=0), 1)
            table = np.full((len(self._tp_rows), width), PAD, dtype=np.int64)
            for i, p in enumerate(self._tp_rows):
                table[i, : len(p)] = p
            self._tp_table = table
        pick = (hashes % count[key].astype(np.uint64)).astype(np.int64)
        return np.asarray(start[key] + pick, dtype=np.int64)

    @property
    def template_table(self) -> NDArray[np.int64]:
        """Template paths seen so far: rows of local link ids padded with -1."""
        return self._tp_table

    def _nic_for(self, nodes: IntArray, hashes: NDArray[np.uint64], receiver: bool = False
                 ) -> IntArray:
        """The NIC a server-side node sends (or receives) through: one of its GPU's NICs,
        chosen by the hash's NIC byte (:func:`~fabricsim.fabric.core.with_nics`)."""
        out = nodes.copy()
        ranks = self.rank_of[nodes]
        is_gpu = ranks >= 0
        if is_gpu.any():
            k = self.gpu_nics.shape[1]
            pick = nic_pick(hashes[is_gpu], k, receiver=receiver)
            out[is_gpu] = self.gpu_nics[ranks[is_gpu], pick]
        kinds_local = self.template.kinds[self._local(nodes)]
        other = (~is_gpu) & (kinds_local != NodeKind.NIC)
        if other.any():
            srv = self.node_server[nodes[other]]
            first = int(self.template.nic_local[0]) if self.template.n_nics else -1
            if first < 0:
                raise NoRouteError("this server has no NIC to reach the network")
            out[other] = self.node_base + srv * self.template.n_nodes + first
        return out

    def segments(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                 link_up: NDArray[np.bool_]) -> RouteSegments:
        """Routes of ``src[i] -> dst[i]`` as template and network segments (see
        :class:`RouteSegments`); :meth:`route_many` is ``segments(...).paths()``."""
        n = src.shape[0]
        ss, sd = self.node_server[src], self.node_server[dst]
        same = (ss >= 0) & (ss == sd)
        rows_ici = np.zeros(0, dtype=np.int64)
        on_ici = np.zeros(n, dtype=bool)
        if self.ici is not None:  # chips of one TPU slice talk over ICI, same host or not
            rs, rd = self.rank_of[src], self.rank_of[dst]
            on_ici = ((rs >= 0) & (rd >= 0) & (src != dst)
                      & (self.ici.slice_of(rs) == self.ici.slice_of(rd)))
            rows_ici = np.flatnonzero(on_ici)
            same &= ~on_ici
        sa = np.full(n, -1, dtype=np.int64)
        pa = np.full(n, -1, dtype=np.int64)
        sb = np.full(n, -1, dtype=np.int64)
        pb = np.full(n, -1, dtype=np.int64)
        rows_same = np.flatnonzero(same)
        if rows_same.size:
            sa[rows_same] = ss[rows_same]
            pa[rows_same] = self.template_paths(self._local(src[rows_same]),
                                                self._local(dst[rows_same]), hashes[rows_same])
        rows_nvl = np.zeros(0, dtype=np.int64)
        seg_nvl = np.zeros((0, 4), dtype=np.int64)
        if self.nvl is not None:
            rs, rd = self.rank_of[src], self.rank_of[dst]
            ds = self.nvl.servers_per_domain
            dom = (~same) & (rs >= 0) & (rd >= 0) & (ss // ds == sd // ds)
            rows_nvl = np.flatnonzero(dom)
            g = self.template.n_gpus
            seg_nvl = self.nvl.route_avoiding(ss[rows_nvl], sd[rows_nvl], rs[rows_nvl] % g,
                                              rd[rows_nvl] % g, hashes[rows_nvl], link_up)
            rows_net = np.flatnonzero(~same & ~dom & ~on_ici)
            if rows_nvl.size and (seg_nvl < 0).all(axis=1).any():
                i = int(rows_nvl[np.flatnonzero((seg_nvl < 0).all(axis=1))[0]])
                raise NoRouteError(f"no NVLink route from node {int(src[i])} to node "
                                   f"{int(dst[i])} avoids the links that are down")
        else:
            rows_net = np.flatnonzero(~same & ~on_ici)
        seg_ici = np.zeros((0, 1), dtype=np.int64)
        if rows_ici.size:
            assert self.ici is not None
            seg_ici = self.ici.route_avoiding(self.rank_of[src[rows_ici]].astype(np.int64),
                                              self.rank_of[dst[rows_ici]].astype(np.int64),
                                              hashes[rows_ici], link_up)
            cut = (seg_ici < 0).all(axis=1)
            if cut.any():
                i = int(rows_ici[np.flatnonzero(cut)[0]])
                raise NoRouteError(f"no ICI route from node {int(src[i])} to node "
                                   f"{int(dst[i])} avoids the links that are down")
        mid_net = np.zeros((0, 1), dtype=np.int64)
        if rows_net.size:
            s, d, h = src[rows_net], dst[rows_net], hashes[rows_net]
            s_in, d_in = ss[rows_net] >= 0, sd[rows_net] >= 0
            if self.template.n_nics == 0 and (s_in.any() or d_in.any()):
                raise NoRouteError("servers have no NIC; GPUs cannot reach other servers")
            s_nic = s.copy()
            d_nic = d.copy()
            if s_in.any():
                s_nic[s_in] = self._nic_for(s[s_in], h[s_in])
            if d_in.any():
                d_nic[d_in] = self._nic_for(d[d_in], h[d_in], receiver=True)
            if self.nic_plane is not None and s_in.any() and d_in.any():
                ps, pd = self.nic_plane(s_nic), self.nic_plane(d_nic)
                fix = s_in & d_in & (ps != pd)
                if fix.any():  # rail-aligned NIC of the sending server (as PXN would do)
                    loc = self._local(d_nic[fix])
                    s_nic[fix] = (self.node_base + ss[rows_net][fix] * self.template.n_nodes
                                  + loc)
            if s_in.any():
                r = rows_net[s_in]
                sa[r] = ss[r]
                pa[r] = self.template_paths(self._local(s[s_in]), self._local(s_nic[s_in]),
                                            h[s_in])
            mid_net = self.net.route_padded(s_nic, d_nic, h, link_up)
            if d_in.any():
                r = rows_net[d_in]
                sb[r] = sd[r]
                pb[r] = self.template_paths(self._local(d_nic[d_in]), self._local(d[d_in]),
                                            h[d_in] >> np.uint64(13))
        width = max(mid_net.shape[1], seg_nvl.shape[1] if rows_nvl.size else 1,
                    seg_ici.shape[1], 1)
        mid = np.full((n, width), PAD, dtype=np.int64)
        if rows_ici.size:
            mid[rows_ici, : seg_ici.shape[1]] = seg_ici
        if rows_nvl.size:
            mid[rows_nvl, : seg_nvl.shape[1]] = seg_nvl
        if rows_net.size:
            mid[rows_net, : mid_net.shape[1]] = mid_net
        return RouteSegments(server_a=sa, path_a=pa, mid=mid, server_b=sb, path_b=pb,
                             table=self._tp_table, link_base=self.link_base,
                             n_template_links=self.template.n_links)

    def route_many(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                   link_up: NDArray[np.bool_]) -> Paths:
        paths = self.segments(src, dst, hashes, link_up).paths()
        if not link_up.all() and paths.links.size and not link_up[paths.links].all():
            bad = np.unique(paths.row_ids()[~link_up[paths.links]])
            raise NoRouteError(
                f"{bad.size} transfer(s) have no route that avoids the links that are down "
                f"(first: node {int(src[bad[0]])} -> node {int(dst[bad[0]])})")
        return paths

    def ecmp_paths(self, src: int, dst: int, link_up: NDArray[np.bool_], limit: int
                   ) -> list[IntArray]:
        s = np.array([src], dtype=np.int32)
        d = np.array([dst], dtype=np.int32)
        ss, sd = int(self.node_server[src]), int(self.node_server[dst])
        if ss >= 0 and ss == sd and self.ici is None:
            base = self.link_base + ss * self.template.n_links
            return [p + base for p in self.template.local_paths(
                int(self._local(s)[0]), int(self._local(d)[0]))][:limit]
        # enumerate by hashing: distinct paths over a range of hashes
        seen: dict[tuple[int, ...], None] = {}
        tries = max(64, 4 * limit)
        hs = np.arange(tries, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        paths = self.route_many(np.repeat(s, tries), np.repeat(d, tries), hs, link_up)
        for i in range(tries):
            seen.setdefault(tuple(int(x) for x in paths.row(i)), None)
            if len(seen) >= limit:
                break
        return [np.asarray(p, dtype=np.int32) for p in seen]


#: Largest cluster :func:`build_cluster` builds (twice the largest benchmarked, 131,072 GPUs;
#: a 131k-GPU three-tier build peaks at ~290 MiB), checked before any array is allocated.
MAX_GPUS = 262_144


def build_cluster(system: str = "dgx-h100", nodes: int = 1, *, gpus_per_node: int | None = None,
                  fabric: str | None = None, topology: str | None = None,
                  oversubscription: float = 1.0, tiers: int | None = None,
                  planes: int | None = None, radix: int | None = None,
                  params: dict[str, object] | None = None, storage: bool = False,
                  management: bool = False, catalog: Catalog | None = None) -> Fabric:
    """Build ``nodes`` servers of preset ``system`` on scale-out ``fabric`` and ``topology``.

    Defaults come from the system preset (its NICs, fabric and topology). ``params`` holds
    topology settings (dragonfly ``groups``..., torus ``dims``), ``nvlink_domain`` (GPUs per
    multi-server NVLink domain, e.g. 576 for GB200 NVL576) and the storage/management
    settings ``storage_targets`` and ``mgmt_servers_per_switch``. ``storage`` and
    ``management`` add those networks (counted in ``info``, never used by compute routes).
    ``catalog`` (default: the shipped one) lets user-defined systems be built (see
    :func:`fabricsim.catalog.with_systems`). Raises ConfigError/TopologyError naming the
    field and a valid value on bad input.

    Example
    -------
    >>> fab = build_cluster("dgx-h100", nodes=16, topology="torus3d", management=True)
    >>> fab.info.topology, fab.info.extra["switches"]["mgmt-switch"]
    ('torus3d', 1)
    """
    from fabricsim.catalog import get_catalog

    cat = catalog if catalog is not None else get_catalog()
    sysp = cat.system(system)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise ConfigError(f"nodes must be an integer >= 1, got {nodes!r}", field="nodes")
    if gpus_per_node is not None and (gpus_per_node < 1 or gpus_per_node > sysp.gpus):
        more = (f"; an NVLink domain across servers (racks) is the cluster's "
                f"params.nvlink_domain (e.g. {8 * sysp.gpus} on {8} servers, in a "
                f"scenario's cluster: section)" if gpus_per_node > sysp.gpus
                and sysp.nvswitches > 0 else "")
        raise ConfigError(f"gpus_per_node must be 1..{sysp.gpus} for {system}, got "
                          f"{gpus_per_node}{more}", field="gpus_per_node")
    if sysp.ici_host_shape and gpus_per_node not in (None, sysp.gpus):
        raise ConfigError(f"a {system} host has {sysp.gpus} chips laid out "
                          f"{shape_name(sysp.ici_host_shape)} in its slice's torus; "
                          f"gpus_per_node cannot change that (choose the slice with "
                          f"params.ici_slice)", field="gpus_per_node")
    n_gpus = nodes * (gpus_per_node or sysp.gpus)
    if n_gpus > MAX_GPUS:
        raise ConfigError(
            f"{nodes:,} x {gpus_per_node or sysp.gpus} GPUs = {n_gpus:,} GPUs is beyond the "
            f"{MAX_GPUS:,} GPUs fabricsim builds (about 1 GiB of fabric arrays at most); use "
            f"at most {MAX_GPUS // (gpus_per_node or sysp.gpus):,} nodes of {system}",
            field="nodes")
    fabric_name = fabric or sysp.default_fabric
    fspec = cat.fabric(fabric_name)
    topo = topology or sysp.default_topology
    if topo not in TOPOLOGIES:
        raise unknown("topology", topo, TOPOLOGIES, field="topology")
    prm = dict(params or {})
    allowed = TOPOLOGY_PARAMS.get(topo)
    if allowed is not None:
        extra_keys = sorted(set(prm) - allowed - CLUSTER_PARAMS)
        if extra_keys:
            raise ConfigError(
                f"unknown {topo} param {extra_keys[0]!r}; "
                f"{did_you_mean(extra_keys[0], allowed | CLUSTER_PARAMS)}",
                field=f"params.{extra_keys[0]}")
    if not (1 <= oversubscription <= 64):
        raise ConfigError(f"oversubscription must be between 1 and 64 (e.g. 1 for "
                          f"non-blocking, 2 for 2:1), got {oversubscription}",
                          field="oversubscription")
    template = ServerTemplate.from_system(system, gpus=gpus_per_node, catalog=cat)
    switch = cat.switch(fspec.switch)
    sharp = _sharp_setting(prm.get("sharp", False), fabric_name, fspec.sharp,
                           switch.in_network_reduction, fspec.switch, topo)
    qps = prm.get("qps", 1)
    if isinstance(qps, bool) or not isinstance(qps, int) or not 1 <= qps <= MAX_QPS:
        raise ConfigError(f"qps (queue pairs per connection, NCCL_IB_QPS_PER_CONNECTION) "
                          f"must be a whole number from 1 to {MAX_QPS}, got {qps!r}",
                          field="params.qps")
    buffsize = prm.get("buffsize", 0)
    lo, hi = BUFFSIZE_RANGE
    if isinstance(buffsize, bool) or not isinstance(buffsize, int) or \
            not (buffsize == 0 or lo <= buffsize <= hi):
        raise ConfigError(f"buffsize (NCCL's Simple buffer per connection, NCCL_BUFFSIZE) "
                          f"must be a whole number of bytes from {lo} to {hi} (NCCL's "
                          f"default 4194304; below 1 MiB a connection may run short of "
                          f"data in flight, which is not modelled), got {buffsize!r}",
                          field="params.buffsize")
    routing = prm.get("routing", ROUTING_BY_TRANSPORT.get(fspec.transport, "ecmp"))
    if "routing" not in prm and routing == "adaptive" and topo not in ADAPTIVE_TOPOLOGIES:
        routing = "ecmp"  # a spraying transport's default where no adaptive routing exists
    if routing not in ROUTINGS:
        raise unknown("routing", str(routing), ROUTINGS, field="params.routing")
    if routing == "adaptive" and topo not in ADAPTIVE_TOPOLOGIES:
        raise ConfigError(f"routing 'adaptive' spreads flows over a fat-tree's up/down paths; "
                          f"topology {topo!r} has none: use {' or '.join(ADAPTIVE_TOPOLOGIES)}"
                          f", or routing 'ecmp'/'dmodk'", field="params.routing")
    k = radix or switch.radix
    if k < 4:
        raise TopologyError(f"switch radix must be >= 4, got {k}", field="radix")
    if radix is not None and topo == "torus3d":
        raise TopologyError("a 3D torus has no switches: each server's router has six "
                            "torus ports, so radix does not apply; drop radix or choose a "
                            "switched topology (fat-tree, rail-optimized, dragonfly)",
                            field="radix")
    if radix is not None and k % 2 and topo in SHARP_TOPOLOGIES:
        raise TopologyError(f"radix {k} is odd: a fat-tree switch splits its ports between "
                            f"down and up links, and switches ship with an even count; use "
                            f"{k - 1} or {k + 1}", field="radix")
    if template.n_nics == 0:
        raise TopologyError(f"{system} has no compute NIC; it cannot join a scale-out network",
                            field="system")

    b = FabricBuilder()
    node_base, link_base = 0, 0
    gpus, nics, gpu_nics = _tile_servers(b, template, nodes)
    nt = template.n_nodes
    nvl = None
    ici = _ici_slices(b, gpus, nodes, sysp, system, prm, cat) if sysp.ici_host_shape else None
    if ici is None and ("ici_slice" in prm or "ici_twisted" in prm):
        key = "ici_slice" if "ici_slice" in prm else "ici_twisted"
        raise ConfigError(f"{key} shapes a TPU slice; {system} has no ICI (use a TPU system "
                          f"such as tpu-v5p)", field=f"params.{key}")
    if "nvlink_domain" in prm and ici is not None:
        raise ConfigError(f"{system} chips have no NVLink; their slice is set by "
                          f"params.ici_slice", field="params.nvlink_domain")
    if "nvlink_domain" in prm:
        check_domain_size(prm["nvlink_domain"], cat.gpu(sysp.gpu).nvlink or "", system)
        nvl_lat = template.params.nvlink_latency
        t2_radix = cat.switch(sysp.nvswitch).radix if sysp.nvswitch else 0
        nvl = add_nvlink_domains(b, template, nodes, node_base, link_base,
                                 prm["nvlink_domain"], t2_radix, nvl_lat)
    spec = ScaleOutSpec(radix=k, port_bw=switch.port_bandwidth,
                        endpoint_bw=sysp.nic_bandwidth, switch_latency=fspec.switch_latency,
                        nic_latency=fspec.nic_latency, oversubscription=oversubscription,
                        tiers=tiers, planes=planes, routing=routing,
                        params={x: v for x, v in prm.items() if x not in CLUSTER_PARAMS})
    net = TOPOLOGIES[topo](b, nics, spec)
    aux: list[AuxSummary] = []
    offs = (np.arange(nodes, dtype=np.int32) * nt)[:, None]
    if storage:
        snic_local = np.flatnonzero(template.kinds == NodeKind.STORAGE_NIC).astype(np.int32)
        snic_bw = template.params.storage_nic_bw
        aux.append(add_storage_network(
            b, (offs + snic_local[None, :]).astype(np.int32), radix=k,
            port_bw=switch.port_bandwidth, nic_bw=snic_bw or switch.port_bandwidth,
            switch_latency=fspec.switch_latency, nic_latency=fspec.nic_latency, params=prm))
    if management:
        cpu_local = np.flatnonzero(template.kinds == NodeKind.CPU).astype(np.int32)
        aux.append(add_management_network(b, (offs + cpu_local[None, :]).astype(np.int32),
                                          prm))
    arrays = b.arrays()
    n_nodes = b.n_nodes
    _check_connected(arrays, gpus, n_nodes)
    _check_ports(arrays, k, (SCALE_OUT_SWITCHES if net.radix_bound else ())
                 + ((NodeKind.STORAGE_SWITCH,) if storage else ()))
    rank_of = np.full(n_nodes, -1, dtype=np.int32)
    rank_of[gpus] = np.arange(gpus.size, dtype=np.int32)
    plane_fn = getattr(net.router, "plane_of", None)
    router = ClusterRouter(template=template, servers=nodes, node_base=node_base,
                           link_base=link_base,
                           node_server=arrays["node_server"].astype(np.int32),
                           rank_of=rank_of, gpu_nics=gpu_nics, net=net.router,
                           nic_plane=plane_fn, nvl=nvl, ici=ici)
    attach = getattr(net.router, "attach", None)
    if attach is not None:
        net_links = np.flatnonzero(np.isin(arrays["link_kind"],
                                           [int(x) for x in NETWORK_LINK_KINDS]))
        attach(arrays["link_src"], arrays["link_dst"], net_links.astype(np.int32), n_nodes)
    gpu = cat.gpu(sysp.gpu)
    switches = dict(net.switches)
    cables = dict(net.cables)
    extra: dict[str, object] = {"switch": fspec.switch, "radix": k, "nic": sysp.nic,
                                "gpu_memory_bytes": gpu.memory_bytes,
                                "notes": list(net.notes)}
    extra.update(net.extra)
    domain_gpus = (min(sysp.nvlink_domain_gpus, template.n_gpus)
                   if template.params.nvlink_bw > 0 else 1)
    if nvl is not None:
        switches["nvswitch-tier2"] = int(nvl.summary["tier2_switches"])
        cables["nvlink-network"] = int(nvl.summary["cables"])
        extra["nvlink_domain"] = dict(nvl.summary)
        domain_gpus = min(nvl.gpus, nodes * template.n_gpus)
    if ici is not None:
        cables["ici"] = int(ici.summary["cables"])
        extra["ici"] = {"link": cat.gpu(sysp.gpu).ici, **ici.summary}
        domain_gpus = min(ici.chips_per_slice, nodes * template.n_gpus)
    for a in aux:
        switches.update(a.switches)
        cables.update(a.cables)
        extra.update(a.extra)
    extra["switches"] = switches
    info = FabricInfo(
        system=system, gpu=sysp.gpu, fabric=fabric_name, topology=topo, servers=nodes,
        gpus_per_server=template.n_gpus, nvlink_domain_gpus=domain_gpus,
        nics_per_server=template.n_nics, oversubscription=net.oversubscription,
        tiers=net.tiers, planes=net.planes, transport=fspec.transport,
        lossless=fspec.lossless, sharp=sharp, nic_bandwidth=min(
            sysp.nic_bandwidth, switch.port_bandwidth),
        bisection_bandwidth=net.bisection_bandwidth, switch_latency=fspec.switch_latency,
        nic_latency=fspec.nic_latency, nvswitch=sysp.nvswitch, nvlink=gpu.nvlink or "",
        nvls=bool(sysp.nvswitch) and cat.switch(sysp.nvswitch).in_network_reduction
        and domain_gpus > 1,
        nics_per_gpu=int(gpu_nics.shape[1]), pcie_switches=template.params.pcie_switches,
        gpu_power_w=sysp.gpu_power_w, gpu_hour_usd=sysp.gpu_hour_usd, cables=cables,
        calibration=check_calibration(prm.get("calibration")), qps=qps,
        nccl_buffsize_bytes=buffsize,
        cpu_vendor=sysp.cpu_vendor, gpus_per_host=sysp.gpus_per_host,
        net_plugin_latency=cat.nic(sysp.nic).nccl_net_latency_us * 1e-6 if sysp.nics else 0.0,
        plugin_proto="simple" if sysp.nics and not cat.nic(sysp.nic).in_order_128b else "",
        nic_sustained_share=cat.nic(sysp.nic).sustained_share if sysp.nics else 1.0,
        nic_via_c2c=sysp.nic_via_c2c and sysp.nics > 0,
        nccl_tuner_regions=sysp.nccl_tuner_regions if sysp.nics else "",
        ici_slice=ici.dims if ici is not None else (),
        extra=extra,
    )
    return b.build(gpus=gpus, gpu_nics=gpu_nics, router=router, info=info, arrays=arrays)


def _ici_slices(b: FabricBuilder, gpus: IntArray, nodes: int, sysp: SystemSpec, system: str,
                prm: dict[str, object], cat: Catalog) -> IciSlices:
    """Join a TPU system's chips into slices (``params.ici_slice``, ``params.ici_twisted``)."""
    rules = PodRules(host_shape=tuple(sysp.ici_host_shape), max_slice=tuple(sysp.ici_max_slice),
                     cube=sysp.ici_cube, twist=sysp.ici_twist)
    chips = nodes * sysp.gpus
    if "ici_slice" in prm:
        dims = parse_shape(prm["ici_slice"], rules.ndim)
        check_slice(dims, rules, system)
    elif chips > math.prod(rules.max_slice):
        big = shape_name(rules.max_slice)
        raise ConfigError(f"{chips:,} chips are more than one {system} slice holds ({big}); "
                          f"set params.ici_slice (e.g. ici_slice: {big}) and the cluster is "
                          f"that many slices joined by the data-centre network", field="nodes")
    else:
        dims = default_slice(rules, chips, system)
    twisted = prm.get("ici_twisted", False)
    if not isinstance(twisted, bool):
        raise ConfigError(f"ici_twisted must be true or false, got {twisted!r}",
                          field="params.ici_twisted")
    if twisted and not twistable(dims, rules):
        raise ConfigError(f"{shape_name(dims)} cannot be a twisted torus on {system}: "
                          f"twisting needs a k x k x 2k or k x 2k x 2k slice of whole "
                          f"{rules.cube or 4}-chip cubes on a pod that twists (e.g. 4x4x8)",
                          field="params.ici_twisted")
    link = cat.link(cat.gpu(sysp.gpu).ici)
    return add_ici_slices(b, gpus, nodes, dims, rules, twisted, link.link_bandwidth,
                          link.latency)


def _sharp_setting(asked: object, fabric: str, fabric_sharp: bool, switch_reduces: bool,
                   switch: str, topology: str) -> bool:
    """Whether SHARP (in-network reduction) is on: only if asked (``params.sharp``, off by
    default as on shipping clusters) and the fabric can (InfiniBand with aggregating
    switches in a fat-tree)."""
    if not isinstance(asked, bool):
        raise ConfigError(f"sharp must be true or false, got {asked!r}", field="params.sharp")
    if not asked:
        return False
    why = ("its transport has no SHARP" if not fabric_sharp else
           f"its switch {switch} cannot aggregate" if not switch_reduces else
           f"a {topology} has no switch aggregation tree" if topology not in SHARP_TOPOLOGIES
           else "")
    if why:
        raise ConfigError(f"SHARP cannot be enabled on {fabric}: {why}; it needs an "
                          "InfiniBand fat-tree (ib-hdr, ib-ndr, ib-xdr)", field="params.sharp")
    return True


def _tile_servers(b: FabricBuilder, template: ServerTemplate, nodes: int
                  ) -> tuple[IntArray, NDArray[np.int32], NDArray[np.int32]]:
    """Add ``nodes`` copies of the server template; returns (gpus, nics, gpu_nics)."""
    nt = template.n_nodes
    b.add_node_block(np.tile(template.kinds, nodes),
                     np.repeat(np.arange(nodes, dtype=np.int32), nt),
                     np.tile(template.local_index, nodes), np.full(nodes * nt, -1, np.int32))
    offs = (np.arange(nodes, dtype=np.int32) * nt)[:, None]
    b.add_link_block(
        (template.link_src[None, :] + offs).ravel(), (template.link_dst[None, :] + offs).ravel(),
        np.tile(template.link_capacity, nodes), np.tile(template.link_latency, nodes),
        np.tile(template.link_kind, nodes), np.tile(template.link_lanes, nodes))
    gpus = (offs + template.gpu_local[None, :]).ravel().astype(np.int32)
    nics = (offs + template.nic_local[None, :]).astype(np.int32)
    gpu_nics = (offs[:, :, None] + template.gpu_nic_local[None, :, :]).reshape(
        -1, template.gpu_nic_local.shape[1]).astype(np.int32)
    return gpus, nics, gpu_nics


#: Switches of a scale-out network, built from the fabric's switch radix.
SCALE_OUT_SWITCHES = (NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE, NodeKind.ROUTER)


def _check_ports(arrays: dict[str, NDArray[np.generic]], radix: int,
                 kinds: tuple[NodeKind, ...]) -> None:
    """TopologyError if a builder gave a switch more cables than its ``radix`` ports.

    A guard on every builder's output (a cable is one port; parallel cables count as
    ``lanes``): a fabric whose switches exceed their radix cannot be built, so it must
    never be timed.
    """
    node_kind = arrays["node_kind"]
    ports = np.bincount(np.asarray(arrays["link_src"], dtype=np.int64),
                        weights=arrays["link_lanes"], minlength=node_kind.shape[0])
    for kind in kinds:
        used = ports[node_kind == int(kind)]
        if used.size and int(used.max()) > radix:
            raise TopologyError(
                f"the {kind.label} tier would use {int(used.max())} ports on a switch of "
                f"radix {radix}; use a larger radix, more planes or a lower "
                "oversubscription", field="radix")


#: Largest fabric (links) whose compute connectivity is checked at build time.
CONNECTIVITY_CHECK_MAX_LINKS = 1_000_000


def _check_connected(arrays: dict[str, NDArray[np.generic]], gpus: IntArray,
                     n_nodes: int) -> None:
    """TopologyError if the compute network (no storage/management) splits the GPUs."""
    kinds = arrays["link_kind"]
    if kinds.shape[0] > CONNECTIVITY_CHECK_MAX_LINKS or gpus.size < 2:
        return
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    s_all = np.asarray(arrays["link_src"], dtype=np.int64)
    d_all = np.asarray(arrays["link_dst"], dtype=np.int64)
    # one direction of each cable is enough for undirected components
    keep = ~np.isin(kinds, [int(LinkKind.STORAGE), int(LinkKind.MGMT)]) & (s_all < d_all)
    src, dst = s_all[keep], d_all[keep]
    g = coo_matrix((np.ones(src.size, dtype=np.float64), (src, dst)), shape=(n_nodes, n_nodes))
    _, label = connected_components(g, directed=False)
    parts = np.unique(label[gpus])
    if parts.size > 1:
        lone = int(gpus[np.flatnonzero(label[gpus] != label[gpus[0]])[0]])
        raise TopologyError(f"the compute network is disconnected: GPU node {lone} cannot "
                            f"reach GPU node {int(gpus[0])} ({parts.size} separate parts)",
                            field="topology")
