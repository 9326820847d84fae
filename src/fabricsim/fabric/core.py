"""The :class:`Fabric`: where bytes can go.

A fabric is immutable. Nodes and directed links are kept as parallel numpy arrays (struct
of arrays), so a 131,072-GPU cluster is a few tens of MB. Every direction of a cable is its
own link with its own capacity (bytes/s) and latency (s). Routing is delegated to a
:class:`~fabricsim.fabric.paths.Router` that the topology builder supplies.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=2)
>>> fab.n_gpus, fab.info.servers
(16, 2)
>>> path = fab.route(fab.gpus[0], fab.gpus[8])
>>> [fab.link_label(int(l)) for l in path][:2]
['pcie', 'pcie']
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError, NoRouteError
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.paths import FloatArray, IntArray, Paths, Router

_T = TypeVar("_T")


@dataclass(frozen=True)
class FabricInfo:
    """What a fabric was built from, and figures the builder knows in closed form.

    Bandwidths are bytes/s; ``bisection_bandwidth`` is one direction across the worst
    even cut of the scale-out network.

    Hardware facts the upper layers need (the tuner, the protocol model) are typed fields
    set by the builder from the system it built, so a user-defined system behaves exactly
    like the preset it derives from: ``nvswitch`` (catalog name of the NVSwitch chip, ``""``
    for none), ``nvlink`` (the GPUs' NVLink generation, ``""`` for none), ``nvls`` (the
    GPUs of a server share NVSwitches that can reduce in the switch), ``nics_per_gpu`` (NICs
    on each GPU's PCIe switch, which NCCL spreads its channels over) and ``pcie_switches``
    (per server); ``calibration`` holds factors fitted to the cluster's own nccl-tests
    logs (``fabricsim calibrate``), applied by every backend through the protocol model.
    """

    system: str = "custom"
    gpu: str = ""
    fabric: str = ""
    topology: str = ""
    servers: int = 0
    gpus_per_server: int = 0
    nvlink_domain_gpus: int = 1
    #: GPUs under one operating system (a rack's compute tray); 0: the whole server.
    gpus_per_host: int = 0
    nics_per_server: int = 0
    oversubscription: float = 1.0
    tiers: int = 0
    planes: int = 1
    transport: str = ""
    lossless: bool = True
    sharp: bool = False
    nic_bandwidth: float = 0.0
    bisection_bandwidth: float = 0.0
    switch_latency: float = 0.0
    nic_latency: float = 0.0
    nvswitch: str = ""
    nvlink: str = ""
    nvls: bool = False
    nics_per_gpu: int = 0
    pcie_switches: int = 0
    #: The GPUs' power cap, W (0: their TDP), from the system.
    gpu_power_w: float = 0.0
    #: Price of a GPU-hour of the system (a preset's or a user-defined system's), USD.
    gpu_hour_usd: float = 0.0
    cables: Mapping[str, int] = field(default_factory=dict)
    #: Factors a calibration to this cluster's own measurements applies to the protocol
    #: model (``fabricsim calibrate``): ``"<class>.efficiency"`` and ``"<class>.hop"`` for
    #: the link classes ``nvlink``, ``pcie``, ``net``, ``nvls``, ``sharp``. Empty: none.
    calibration: Mapping[str, float] = field(default_factory=dict)
    #: Queue pairs per connection between servers (``NCCL_IB_QPS_PER_CONNECTION``; NCCL's
    #: default 1): each carries its share of a transfer and is hashed over the equal-cost
    #: paths on its own, so hashed ECMP collides less with more.
    qps: int = 1
    #: NCCL's Simple buffer per connection in bytes (``NCCL_BUFFSIZE``; ``params.buffsize``):
    #: its eighth is the chunk a tree, a broadcast/reduce chain and an NVLS round move per
    #: step. 0: NCCL's default on the platform (4 MiB; 8 MiB where AWS's EFA plugin sets it).
    nccl_buffsize_bytes: int = 0
    #: Maker of the servers' host CPUs (``intel``, ``amd``, ``arm``), from the system.
    cpu_vendor: str = "intel"
    #: Latency (s) the NICs' NCCL network plugin reports to NCCL's tuner (0 for NCCL's own
    #: InfiniBand/RoCE transport), from the NIC: it steers NCCL's choice, not a transfer.
    net_plugin_latency: float = 0.0
    #: Tuner regions of the NICs' network plugin that overrule NCCL's choice of algorithm
    #: and protocol (AWS's EFA plugin on p5, p5en, p6: the platform's name; ``""``: none;
    #: :mod:`fabricsim.collectives.plugin_tuner`), from the system.
    nccl_tuner_regions: str = ""
    #: Most of their line rate the NICs carry under NCCL's traffic, as measured (1: no
    #: ceiling below the protocol's and the framing's), from the NIC: it caps every
    #: protocol's network efficiency (p4d's first EFA: 0.85).
    nic_sustained_share: float = 1.0
    #: ``NCCL_PROTO`` the NICs' network plugin sets for the whole process (``""``: none).
    #: AWS's EFA plugin sets ``simple`` where the EFA device does not deliver 128-byte
    #: blocks in order (p4d): NCCL then runs neither LL nor LL128, inside servers too.
    plugin_proto: str = ""
    #: The NICs reach their GPUs through the GPU's Grace CPU and NVLink-C2C (NCCL's PHB
    #: path, P2C from 2.27.3), from the system (``SystemSpec.nic_via_c2c``).
    nic_via_c2c: bool = False
    #: Shape of each TPU slice, chips per dimension of its ICI torus (``()`` for GPUs).
    ici_slice: tuple[int, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Fabric:
    """Nodes, directed links and routing of a cluster. Build one with a builder function.

    Attributes are arrays indexed by node id (``node_*``) or link id (``link_*``).
    ``gpus[r]`` is the node id of rank ``r``; ``gpu_nics[r]`` the NIC node ids that GPU
    ``r`` uses by affinity (first one preferred).
    """

    node_kind: NDArray[np.int8]
    node_server: IntArray
    node_local: IntArray
    node_group: IntArray
    link_src: IntArray
    link_dst: IntArray
    link_capacity: FloatArray
    link_latency: FloatArray
    link_kind: NDArray[np.int8]
    link_lanes: NDArray[np.int16]
    gpus: IntArray
    gpu_nics: IntArray
    router: Router
    info: FabricInfo = field(default_factory=FabricInfo)
    link_up: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False,
                                  compare=False)

    def memo(self, key: str, make: Callable[[], _T]) -> _T:
        """A value derived from this fabric, computed once by ``make`` and kept with it.

        Caches of derived data belong to the fabric they derive from (no module-level
        state); a fabric made by :meth:`with_links_down` or :meth:`with_links_scaled` starts
        with none. ``key`` names the owner, e.g. ``"analytic.adjacency"``.

        Example
        -------
        >>> from fabricsim.fabric import build_cluster
        >>> fab = build_cluster("dgx-h100", 1)
        >>> fab.memo("doc.links", lambda: fab.n_links) is fab.memo("doc.links", list)
        True
        """
        try:
            hit: _T = self._memo[key]
        except KeyError:
            hit = self._memo[key] = make()
        return hit

    def forget(self, key: str) -> None:
        """Drop what :meth:`memo` keeps under ``key`` (nothing if there is none)."""
        self._memo.pop(key, None)

    def __post_init__(self) -> None:
        if self.link_up.shape[0] != self.link_src.shape[0]:
            object.__setattr__(self, "link_up", np.ones(self.link_src.shape[0], dtype=bool))
        for name in ("node_kind", "node_server", "node_local", "node_group", "link_src",
                     "link_dst", "link_capacity", "link_latency", "link_kind", "link_lanes",
                     "gpus", "gpu_nics", "link_up"):
            getattr(self, name).setflags(write=False)

    # ------------------------------------------------------------------ sizes
    @property
    def n_nodes(self) -> int:
        return int(self.node_kind.shape[0])

    @property
    def n_links(self) -> int:
        return int(self.link_src.shape[0])

    def __repr__(self) -> str:
        """A one-line summary (the arrays are too long to print).

        >>> from fabricsim.fabric import build_cluster
        >>> build_cluster("dgx-h100", 4)
        Fabric(dgx-h100 x 4, ib-ndr rail-optimized, 32 GPUs, 113 nodes, 504 links)
        """
        i = self.info
        net = f"{i.fabric} {i.topology}".strip() or "no scale-out network"
        return (f"Fabric({i.system} x {i.servers}, {net}, {self.n_gpus} GPUs, "
                f"{self.n_nodes} nodes, {self.n_links} links)")

    @property
    def n_gpus(self) -> int:
        return int(self.gpus.shape[0])

    def count(self, kind: NodeKind) -> int:
        """Number of nodes of ``kind``."""
        return int(np.count_nonzero(self.node_kind == kind))

    def nodes_of(self, kind: NodeKind) -> IntArray:
        return np.flatnonzero(self.node_kind == kind).astype(np.int32)

    def links_of(self, kind: LinkKind) -> IntArray:
        return np.flatnonzero(self.link_kind == kind).astype(np.int32)

    # ------------------------------------------------------------------ names
    def node_name(self, node: int) -> str:
        """A readable name: ``server3/gpu5``, ``leaf12``, ``spine0.4`` (group.index)."""
        kind = NodeKind(int(self.node_kind[node]))
        server = int(self.node_server[node])
        local = int(self.node_local[node])
        if server >= 0:
            return f"server{server}/{kind.label}{local}"
        group = int(self.node_group[node])
        return f"{kind.label}{group}.{local}" if group >= 0 else f"{kind.label}{local}"

    def link_label(self, link: int) -> str:
        return LinkKind(int(self.link_kind[link])).label

    def link_name(self, link: int) -> str:
        return (f"{self.node_name(int(self.link_src[link]))}->"
                f"{self.node_name(int(self.link_dst[link]))}")

    # ------------------------------------------------------------------ routing
    def route(self, src: int, dst: int, *, flow_hash: int = 0) -> IntArray:
        """Link ids of one path from node ``src`` to node ``dst`` (ECMP picked by hash)."""
        paths = self.route_many(
            np.array([src], dtype=np.int32), np.array([dst], dtype=np.int32),
            np.array([flow_hash], dtype=np.uint64),
        )
        return paths.row(0)

    def route_many(self, src: IntArray, dst: IntArray,
                   hashes: NDArray[np.uint64] | None = None) -> Paths:
        """One path per pair; ``hashes`` (default: a hash of the pair) picks among ECMP."""
        src = np.asarray(src, dtype=np.int32)
        dst = np.asarray(dst, dtype=np.int32)
        if src.shape != dst.shape:
            raise ConfigError("src and dst must have the same length")
        if src.size and (src.min() < 0 or dst.min() < 0 or max(src.max(), dst.max()) >=
                         self.n_nodes):
            raise NoRouteError(f"node id out of range 0..{self.n_nodes - 1}")
        if hashes is None:
            hashes = pair_hash(src, dst)
        return self.router.route_many(src, dst, np.asarray(hashes, dtype=np.uint64),
                                      self.link_up)

    def ecmp_paths(self, src: int, dst: int, limit: int = 1024) -> list[IntArray]:
        """All equal-cost paths between two nodes (up to ``limit``)."""
        return self.router.ecmp_paths(int(src), int(dst), self.link_up, limit)

    def path_latency(self, path: IntArray) -> float:
        return float(self.link_latency[path].sum())

    def path_bandwidth(self, path: IntArray) -> float:
        return float(self.link_capacity[path].min()) if len(path) else float("inf")

    # ------------------------------------------------------------------ derived
    @cached_property
    def reverse_link(self) -> IntArray:
        """For each link, the id of the link in the opposite direction (or -1).

        Parallel links between two nodes (separate cables) pair up in id order: the k-th
        link a→b with the k-th link b→a.
        """
        n = self.n_nodes
        key = self.link_src.astype(np.int64) * n + self.link_dst
        rkey = self.link_dst.astype(np.int64) * n + self.link_src
        order = np.argsort(key, kind="stable")
        skey = key[order]
        first = np.searchsorted(skey, skey, side="left")      # group start, sorted order
        rank = np.empty(key.size, dtype=np.int64)
        rank[order] = np.arange(key.size) - first             # k: position among parallels
        lo = np.searchsorted(skey, rkey, side="left")
        hi = np.searchsorted(skey, rkey, side="right")
        pos = lo + rank
        found = pos < hi
        out = np.where(found, order[np.clip(pos, 0, max(len(order) - 1, 0))], -1)
        return out.astype(np.int32)

    def with_links_scaled(self, links: IntArray | list[int], factor: float) -> Fabric:
        """A copy whose ``links`` have capacity × ``factor`` (a degraded link)."""
        if factor <= 0:
            raise ConfigError(f"capacity factor must be > 0, got {factor}; use "
                              "with_links_down() for a failed link")
        cap = self.link_capacity.copy()
        cap[np.asarray(links, dtype=np.int64)] *= factor
        return replace(self, link_capacity=cap)

    def with_links_down(self, links: IntArray | list[int]) -> Fabric:
        """A copy where ``links`` carry nothing; routing avoids them where it can."""
        up = self.link_up.copy()
        up[np.asarray(links, dtype=np.int64)] = False
        return replace(self, link_up=up)

    def find_link(self, src: int, dst: int) -> int:
        """Id of the link from ``src`` to ``dst``; NoRouteError if they are not adjacent."""
        hits = np.flatnonzero((self.link_src == src) & (self.link_dst == dst))
        if hits.size == 0:
            raise NoRouteError(f"no link from {self.node_name(src)} to {self.node_name(dst)}")
        return int(hits[0])

    # ------------------------------------------------------------------ export
    def to_networkx(self) -> Any:
        """A ``networkx.MultiDiGraph`` with node attrs ``kind``/``name`` and link attrs
        ``capacity`` (bytes/s), ``latency`` (s), ``kind``."""
        import networkx as nx

        g = nx.MultiDiGraph()
        for i in range(self.n_nodes):
            g.add_node(i, kind=NodeKind(int(self.node_kind[i])).label, name=self.node_name(i))
        for l in range(self.n_links):
            g.add_edge(int(self.link_src[l]), int(self.link_dst[l]), key=l,
                       capacity=float(self.link_capacity[l]),
                       latency=float(self.link_latency[l]), kind=self.link_label(l),
                       up=bool(self.link_up[l]))
        return g

    def to_json_dict(self) -> dict[str, Any]:
        """Nodes and links as plain lists (for JSON); sizes in SI units."""
        return {
            "info": {k: (dict(v) if isinstance(v, Mapping) else v)
                     for k, v in self.info.__dict__.items()},
            "nodes": [{"id": i, "kind": NodeKind(int(self.node_kind[i])).label,
                       "name": self.node_name(i)} for i in range(self.n_nodes)],
            "links": [{"id": l, "src": int(self.link_src[l]), "dst": int(self.link_dst[l]),
                       "kind": self.link_label(l), "capacity_Bps": float(self.link_capacity[l]),
                       "latency_s": float(self.link_latency[l]), "lanes": int(self.link_lanes[l])}
                      for l in range(self.n_links)],
            "gpus": self.gpus.tolist(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())


#: A flow hash's top two bytes choose the NIC at each end among the GPU's NICs (byte 6 the
#: sender's, byte 7 the receiver's, modulo the NIC count); the other bits spread flows
#: over equal-cost paths. :func:`with_nics` sets them (as a channel picks its NIC).
NIC_SHIFT_SRC = np.uint64(48)
NIC_SHIFT_DST = np.uint64(56)
_NIC_MASK = np.uint64(0xFFFF) << NIC_SHIFT_SRC


def with_nics(hashes: NDArray[np.uint64], src_nic: int, dst_nic: int | None = None
              ) -> NDArray[np.uint64]:
    """``hashes`` with their NIC bytes set: the sender uses its NIC ``src_nic`` and the
    receiver its NIC ``dst_nic`` (default the same index: rail-aligned), each modulo the
    GPU's NIC count.

    Example
    -------
    >>> import numpy as np
    >>> h = with_nics(np.array([12345], dtype=np.uint64), 2)
    >>> int(nic_pick(h, 4)[0]), int(nic_pick(h, 4, receiver=True)[0])
    (2, 2)
    """
    d = src_nic if dst_nic is None else dst_nic
    field = (np.uint64(src_nic & 0xFF) << NIC_SHIFT_SRC) | (np.uint64(d & 0xFF) << NIC_SHIFT_DST)
    out: NDArray[np.uint64] = (hashes & ~_NIC_MASK) | field
    return out


def nic_pick(hashes: NDArray[np.uint64], k: int, receiver: bool = False) -> NDArray[np.int64]:
    """Which of ``k`` NICs each flow uses at the sending (or receiving) end."""
    shift = NIC_SHIFT_DST if receiver else NIC_SHIFT_SRC
    out: NDArray[np.int64] = ((hashes >> shift) & np.uint64(0xFF)).astype(np.int64) % k
    return out


def pair_hash(src: IntArray, dst: IntArray, seed: int = 0) -> NDArray[np.uint64]:
    """Deterministic 64-bit hash of (src, dst, seed) pairs (splitmix64), vectorised."""
    x = (src.astype(np.uint64) << np.uint64(32)) ^ dst.astype(np.uint64)
    x = x ^ np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def mix_hash(h: NDArray[np.uint64], k: int) -> NDArray[np.uint64]:
    """A new 64-bit hash from ``h`` and a small integer ``k`` (k = 0 returns ``h``); the
    NIC bytes are kept, so the queue pairs of one connection stay on its NICs."""
    if k == 0:
        return h
    lo = (h & np.uint64(0x7FFFFFFF)).astype(np.int32)
    hi = ((h >> np.uint64(33)) & np.uint64(0x7FFF)).astype(np.int32)
    nics = h & (np.uint64(0xFFFF) << NIC_SHIFT_SRC)
    out: NDArray[np.uint64] = (pair_hash(lo, hi, seed=k) & ~(np.uint64(0xFFFF) << NIC_SHIFT_SRC)
                               ) | nics
    return out


