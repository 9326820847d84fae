"""Server internals as a template: GPUs, NVSwitches, PCIe switches, CPUs and NICs.

A :class:`ServerTemplate` is built once per system preset (e.g. ``dgx-h100``) from the
catalog and tiled over every server of a cluster with numpy, so servers share one set of
intra-server routes (computed lazily per local pair). Parallel NVLinks between a GPU and an
NVSwitch are one link whose capacity is their sum (``lanes`` counts them).

Example
-------
>>> t = ServerTemplate.from_system("dgx-a100")
>>> t.n_gpus, t.n_nics, int((t.kinds == NodeKind.NVSWITCH).sum())
(8, 8, 6)
>>> [t.link_label(l) for l in t.local_paths(int(t.gpu_local[0]), int(t.nic_local[0]))[0]]
['pcie', 'pcie']
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import ConfigError, NoRouteError
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.paths import IntArray

if TYPE_CHECKING:
    from fabricsim.catalog import Catalog

#: CPU-to-CPU socket interconnect per direction (bytes/s): Intel UPI 2.0, 4 links at
#: 16 GT/s ≈ 64 GB/s per direction on Sapphire Rapids; AMD xGMI on EPYC is similar.
CPU_INTERCONNECT_BW = 64e9
#: Latency of one socket-to-socket hop (s), order of magnitude from vendor briefs.
CPU_INTERCONNECT_LATENCY = 100e-9
#: Weight that makes non-NVLink hops slightly dearer so NVLink wins ties in routing.
_NON_NVLINK_WEIGHT = 1.001


@dataclass(frozen=True)
class ServerParams:
    """Numbers a server template is built from (bytes/s, seconds)."""

    name: str
    gpus: int
    nvswitches: int
    nvlink_bw: float  # per GPU per direction, 0 if no NVLink
    nvlink_lanes: int  # NVLinks per GPU
    nvlink_latency: float
    cpus: int
    pcie_switches: int
    pcie_bw: float
    pcie_latency: float
    nics: int
    nic_bw: float
    storage_nics: int = 0
    storage_nic_bw: float = 0.0
    gpu_pcie_links: int = 1  # PCIe x16 links from each GPU (their bandwidth adds up)


@dataclass(eq=False)
class ServerTemplate:
    """Local nodes and links of one server, plus lazily computed intra-server routes."""

    params: ServerParams
    kinds: NDArray[np.int8]
    local_index: IntArray
    link_src: IntArray
    link_dst: IntArray
    link_capacity: NDArray[np.float64]
    link_latency: NDArray[np.float64]
    link_kind: NDArray[np.int8]
    link_lanes: NDArray[np.int16]
    gpu_local: IntArray
    nic_local: IntArray
    gpu_nic_local: IntArray
    _routes: dict[tuple[int, int], list[IntArray]] = field(default_factory=dict)
    _preds: dict[int, dict[int, list[tuple[int, int]]]] = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return int(self.kinds.shape[0])

    @property
    def n_links(self) -> int:
        return int(self.link_src.shape[0])

    @property
    def n_gpus(self) -> int:
        return int(self.gpu_local.shape[0])

    @property
    def n_nics(self) -> int:
        return int(self.nic_local.shape[0])

    def link_label(self, link: int) -> str:
        return LinkKind(int(self.link_kind[link])).label

    # ---------------------------------------------------------------- construction
    @staticmethod
    def from_params(p: ServerParams) -> ServerTemplate:
        if p.gpus < 1:
            raise ConfigError(f"a server needs >= 1 GPU, got {p.gpus}", field="gpus_per_node")
        kinds: list[int] = []
        local: list[int] = []

        def add(kind: NodeKind, n: int) -> list[int]:
            start = len(kinds)
            kinds.extend([int(kind)] * n)
            local.extend(range(n))
            return list(range(start, start + n))

        gpus = add(NodeKind.GPU, p.gpus)
        nvsw = add(NodeKind.NVSWITCH, p.nvswitches if p.nvlink_bw > 0 else 0)
        cpus = add(NodeKind.CPU, max(1, p.cpus))
        psw = add(NodeKind.PCIE_SWITCH, p.pcie_switches)
        nics = add(NodeKind.NIC, p.nics)
        snics = add(NodeKind.STORAGE_NIC, p.storage_nics)

        src: list[int] = []
        dst: list[int] = []
        cap: list[float] = []
        lat: list[float] = []
        kind: list[int] = []
        lanes: list[int] = []

        def link(a: int, b: int, c: float, t: float, k: LinkKind, n: int = 1) -> None:
            for x, y in ((a, b), (b, a)):
                src.append(x)
                dst.append(y)
                cap.append(c)
                lat.append(t)
                kind.append(int(k))
                lanes.append(n)

        if nvsw:
            per = p.nvlink_bw / len(nvsw)
            n_lanes = max(1, round(p.nvlink_lanes / len(nvsw)))
            for g in gpus:
                for s in nvsw:
                    link(g, s, per, p.nvlink_latency, LinkKind.NVLINK, n_lanes)
        elif p.nvlink_bw > 0 and p.gpus > 1:
            # NVLink without a switch: a direct full mesh sharing the GPU's links.
            per = p.nvlink_bw / (p.gpus - 1)
            for i, a in enumerate(gpus):
                for b in gpus[i + 1:]:
                    link(a, b, per, p.nvlink_latency, LinkKind.NVLINK)
        for i in range(1, len(cpus)):
            link(cpus[0], cpus[i], CPU_INTERCONNECT_BW, CPU_INTERCONNECT_LATENCY,
                 LinkKind.CPU_INTERCONNECT)
        attach = psw if psw else cpus
        for j, s in enumerate(psw):
            link(s, cpus[j * len(cpus) // len(psw)], p.pcie_bw, p.pcie_latency, LinkKind.PCIE)
        for i, g in enumerate(gpus):
            link(g, attach[i * len(attach) // len(gpus)], p.pcie_bw * p.gpu_pcie_links,
                 p.pcie_latency, LinkKind.PCIE)
        for i, n in enumerate(nics):
            link(n, attach[i * len(attach) // len(nics)], p.pcie_bw, p.pcie_latency,
                 LinkKind.PCIE)
        for i, n in enumerate(snics):
            link(n, cpus[i * len(cpus) // len(snics)], p.pcie_bw, p.pcie_latency, LinkKind.PCIE)

        if nics:
            per_gpu = max(1, len(nics) // len(gpus))
            table = [[nics[(i * len(nics)) // len(gpus) + k] for k in range(per_gpu)]
                     for i in range(len(gpus))]
        else:
            table = [[-1] for _ in gpus]
        return ServerTemplate(
            params=p,
            kinds=np.asarray(kinds, dtype=np.int8),
            local_index=np.asarray(local, dtype=np.int32),
            link_src=np.asarray(src, dtype=np.int32),
            link_dst=np.asarray(dst, dtype=np.int32),
            link_capacity=np.asarray(cap, dtype=np.float64),
            link_latency=np.asarray(lat, dtype=np.float64),
            link_kind=np.asarray(kind, dtype=np.int8),
            link_lanes=np.asarray(lanes, dtype=np.int16),
            gpu_local=np.asarray(gpus, dtype=np.int32),
            nic_local=np.asarray(nics, dtype=np.int32),
            gpu_nic_local=np.asarray(table, dtype=np.int32),
        )

    @staticmethod
    def from_system(name: str, *, gpus: int | None = None, catalog: Catalog | None = None
                    ) -> ServerTemplate:
        """Template of a catalog system preset (``gpus`` overrides GPUs per server)."""
        return ServerTemplate.from_params(server_params(name, gpus=gpus, catalog=catalog))

    # ---------------------------------------------------------------- routing
    @cached_property
    def _adjacency(self) -> dict[int, list[tuple[int, int, float]]]:
        adj: dict[int, list[tuple[int, int, float]]] = {i: [] for i in range(self.n_nodes)}
        for l in range(self.n_links):
            w = 1.0 if self.link_kind[l] == LinkKind.NVLINK else _NON_NVLINK_WEIGHT
            adj[int(self.link_src[l])].append((int(self.link_dst[l]), l, w))
        return adj

    def local_paths(self, a: int, b: int) -> list[IntArray]:
        """Equal-cost paths (local link ids) from local node ``a`` to ``b``.

        GPUs, NICs and storage NICs are never transit nodes; NVLink wins ties over PCIe.
        """
        key = (a, b)
        hit = self._routes.get(key)
        if hit is not None:
            return hit
        if a == b:
            self._routes[key] = [np.zeros(0, dtype=np.int32)]
            return self._routes[key]
        preds = self._shortest_from(a)
        if b not in preds:
            raise NoRouteError(f"no path inside the server from local node {a} to {b}")
        out: list[list[int]] = []

        def walk(v: int, tail: list[int]) -> None:
            if v == a:
                out.append(list(reversed(tail)))
                return
            for u, l in preds[v]:
                walk(u, [*tail, l])

        walk(b, [])
        paths = [np.asarray(p, dtype=np.int32) for p in sorted(out)]
        self._routes[key] = paths
        return paths

    def _shortest_from(self, a: int) -> dict[int, list[tuple[int, int]]]:
        """Dijkstra from local node ``a``: every reached node's predecessors (node, link)
        on its shortest paths. One search serves every destination, so it is kept."""
        hit = self._preds.get(a)
        if hit is not None:
            return hit
        endpoint = {int(NodeKind.GPU), int(NodeKind.NIC), int(NodeKind.STORAGE_NIC)}
        dist = {a: 0.0}
        preds: dict[int, list[tuple[int, int]]] = {a: []}
        heap = [(0.0, a)]
        done: set[int] = set()
        while heap:
            d, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            if u != a and int(self.kinds[u]) in endpoint:
                continue  # endpoints are not transit
            for v, l, w in self._adjacency[u]:
                nd = d + w
                old = dist.get(v)
                if old is None or nd < old - 1e-12:
                    dist[v] = nd
                    preds[v] = [(u, l)]
                    heapq.heappush(heap, (nd, v))
                elif abs(nd - old) <= 1e-12:
                    preds[v].append((u, l))
        self._preds[a] = preds
        return preds


def server_params(name: str, *, gpus: int | None = None, catalog: Catalog | None = None
                  ) -> ServerParams:
    """Read a system preset's internal topology figures from the catalog."""
    from fabricsim.catalog import get_catalog

    cat = catalog if catalog is not None else get_catalog()
    sysp = cat.system(name)
    gpu = cat.gpu(sysp.gpu)
    n_gpus = sysp.gpus if gpus is None else gpus
    if n_gpus < 1:
        raise ConfigError(f"gpus per node must be >= 1, got {n_gpus}", field="gpus_per_node")
    nvlink_bw = 0.0
    nvlink_lanes = 0
    nvlink_lat = 0.0
    if gpu.nvlink and sysp.nvlink_domain_gpus > 1 and n_gpus > 1:
        nl = cat.link(gpu.nvlink)
        nvlink_bw = nl.bandwidth
        nvlink_lanes = int(nl.links_per_gpu or 1)
        nvlink_lat = nl.latency
    pcie = cat.link(sysp.pcie)
    scale = n_gpus / sysp.gpus
    nics = max(1, round(sysp.nics * scale)) if sysp.nics else 0
    return ServerParams(
        name=name,
        gpus=n_gpus,
        nvswitches=sysp.nvswitches,
        nvlink_bw=nvlink_bw,
        nvlink_lanes=nvlink_lanes,
        nvlink_latency=nvlink_lat,
        cpus=sysp.cpus,
        pcie_switches=max(0, min(sysp.pcie_switches, n_gpus)) if sysp.pcie_switches else 0,
        pcie_bw=pcie.bandwidth,
        pcie_latency=pcie.latency,
        nics=nics,
        nic_bw=sysp.nic_bandwidth,
        storage_nics=sysp.storage_nics,
        storage_nic_bw=(cat.nic(sysp.storage_nic).max_gbit_s * 1e9 / 8
                        if sysp.storage_nic else 0.0),
        gpu_pcie_links=sysp.gpu_pcie_links,
    )
