"""Small hand-made fabrics for experiments, tests and benchmarks.

* :func:`point_to_point` — two hosts and one cable (the ns-3 single-flow case);
* :func:`star` — ``n`` hosts on one switch (the incast and DCQCN-paper setups);
* :func:`hosts_and_switches` — finishes any such fabric built by hand.

Hosts are ``NodeKind.GPU`` nodes (so ``fabric.gpus`` lists them as ranks); the switch is
a leaf. Latency is per link direction and includes the switch it enters.

Example
-------
>>> fab = star(4, rate=40e9 / 8, latency=1e-6, transport="roce")
>>> fab.n_gpus, fab.n_links, fab.info.transport
(4, 8, 'roce')
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.core import Fabric, FabricInfo
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.network import ShortestPathRouter
from fabricsim.fabric.paths import IntArray, Paths


class _Routes:
    """The :class:`~fabricsim.fabric.paths.Router` protocol over a shortest-path router."""

    def __init__(self, net: ShortestPathRouter) -> None:
        self.net = net

    def route_many(self, src: IntArray, dst: IntArray, hashes: NDArray[np.uint64],
                   link_up: NDArray[np.bool_]) -> Paths:
        return Paths.from_padded(self.net.route_padded(src, dst, hashes, link_up))

    def ecmp_paths(self, src: int, dst: int, link_up: NDArray[np.bool_],
                   limit: int) -> list[IntArray]:
        return [np.asarray(p, dtype=np.int32) for p in self.net.ecmp(src, dst, link_up, limit)]


def _info(transport: str, n: int, rate: float, name: str) -> FabricInfo:
    return FabricInfo(system=name, topology=name, servers=n, gpus_per_server=1,
                      transport=transport, lossless=transport in ("ib", "roce"),
                      nic_bandwidth=rate)


def point_to_point(rate: float = 100e9 / 8, latency: float = 1e-6,
                   transport: str = "roce") -> Fabric:
    """Two hosts joined by one full-duplex link of ``rate`` bytes/s."""
    b = FabricBuilder()
    h = b.add_nodes(NodeKind.GPU, 2)
    b.add_links(h[:1], h[1:], rate, latency, LinkKind.NIC_LEAF)
    a = b.arrays()
    ls, ld = a["link_src"].astype(np.int32), a["link_dst"].astype(np.int32)
    router = _Routes(ShortestPathRouter(ls, ld, np.arange(b.n_links, dtype=np.int32),
                                        b.n_nodes))
    return b.build(gpus=h, gpu_nics=h.reshape(-1, 1), router=router,
                   info=_info(transport, 2, rate, "point-to-point"))


def hosts_and_switches(b: FabricBuilder, hosts: IntArray, transport: str, rate: float,
                       name: str) -> Fabric:
    """Finish a hand-made fabric whose ``hosts`` are its ranks and every other node a
    switch: shortest-path routes that never pass through a host.

    >>> b = FabricBuilder()
    >>> h = b.add_nodes(NodeKind.GPU, 2)
    >>> sw = b.add_nodes(NodeKind.LEAF, 1, group=0)
    >>> _ = b.add_links(h, np.full(2, sw[0]), 1e9, 1e-6, LinkKind.NIC_LEAF)
    >>> hosts_and_switches(b, h, "roce", 1e9, "pair").n_links
    4
    """
    a = b.arrays()
    no_transit = np.zeros(b.n_nodes, dtype=bool)
    no_transit[hosts] = True
    ls, ld = a["link_src"].astype(np.int32), a["link_dst"].astype(np.int32)
    router = _Routes(ShortestPathRouter(ls, ld, np.arange(b.n_links, dtype=np.int32),
                                        b.n_nodes, no_transit=no_transit))
    return b.build(gpus=hosts, gpu_nics=np.asarray(hosts).reshape(-1, 1), router=router,
                   info=_info(transport, int(np.asarray(hosts).size), rate, name))


def star(n: int, rate: float = 100e9 / 8, latency: float = 1e-6,
         transport: str = "roce") -> Fabric:
    """``n`` hosts, each on its own link of ``rate`` bytes/s to one switch."""
    b = FabricBuilder()
    h = b.add_nodes(NodeKind.GPU, n)
    sw = b.add_nodes(NodeKind.LEAF, 1, group=0)
    b.add_links(h, np.full(n, sw[0]), rate, latency, LinkKind.NIC_LEAF)
    return hosts_and_switches(b, h, transport, rate, "star")
