"""A mutable accumulator that topology builders fill and then freeze into a Fabric.

Builders add nodes and links in blocks (numpy arrays), never one by one in Python loops,
so that a 131,072-GPU fabric builds in seconds.

Example
-------
>>> import numpy as np
>>> from fabricsim.fabric.kinds import LinkKind, NodeKind
>>> b = FabricBuilder()
>>> a = b.add_nodes(NodeKind.LEAF, 2)
>>> fwd, rev = b.add_links(a[:1], a[1:], 50e9, 1e-6, LinkKind.LEAF_SPINE)
>>> b.n_nodes, b.n_links
(2, 2)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fabricsim.fabric.core import Fabric, FabricInfo
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.paths import IntArray, Router


class FabricBuilder:
    """Collects node and link blocks; :meth:`build` returns the immutable Fabric."""

    def __init__(self) -> None:
        self._nodes: list[tuple[NDArray[np.int8], IntArray, IntArray, IntArray]] = []
        self._links: list[tuple[IntArray, IntArray, NDArray[np.float64], NDArray[np.float64],
                                NDArray[np.int8], NDArray[np.int16]]] = []
        self.n_nodes = 0
        self.n_links = 0

    def add_nodes(self, kind: NodeKind, count: int, *, server: ArrayLike = -1,
                  local: ArrayLike | None = None, group: ArrayLike = -1) -> IntArray:
        """Add ``count`` nodes of ``kind``; returns their ids (consecutive)."""
        ids = np.arange(self.n_nodes, self.n_nodes + count, dtype=np.int32)
        kinds = np.full(count, int(kind), dtype=np.int8)
        srv = np.broadcast_to(np.asarray(server, dtype=np.int32), (count,)).copy()
        loc = (np.arange(count, dtype=np.int32) if local is None else
               np.broadcast_to(np.asarray(local, dtype=np.int32), (count,)).copy())
        grp = np.broadcast_to(np.asarray(group, dtype=np.int32), (count,)).copy()
        self._nodes.append((kinds, srv, loc, grp))
        self.n_nodes += count
        return ids

    def add_links(self, src: ArrayLike, dst: ArrayLike, capacity: ArrayLike, latency: ArrayLike,
                  kind: LinkKind, *, lanes: ArrayLike = 1, both: bool = True,
                  latency_back: ArrayLike | None = None) -> tuple[IntArray, IntArray]:
        """Add links ``src[i] -> dst[i]`` (and back if ``both``). Returns (fwd ids, rev ids).

        ``capacity`` is bytes/s per direction of the whole bundle of ``lanes`` cables;
        ``latency_back`` (default: ``latency``) is the latency of the reverse direction.
        """
        s = np.asarray(src, dtype=np.int32).ravel()
        d = np.asarray(dst, dtype=np.int32).ravel()
        s, d = np.broadcast_arrays(s, d)
        n = s.shape[0]
        cap = np.broadcast_to(np.asarray(capacity, dtype=np.float64), (n,)).copy()
        lat = np.broadcast_to(np.asarray(latency, dtype=np.float64), (n,)).copy()
        ln = np.broadcast_to(np.asarray(lanes, dtype=np.int16), (n,)).copy()
        kd = np.full(n, int(kind), dtype=np.int8)
        fwd = np.arange(self.n_links, self.n_links + n, dtype=np.int32)
        self._links.append((s.astype(np.int32), d.astype(np.int32), cap, lat, kd, ln))
        self.n_links += n
        rev = np.zeros(0, dtype=np.int32)
        if both:
            rev = np.arange(self.n_links, self.n_links + n, dtype=np.int32)
            back = (lat.copy() if latency_back is None else
                    np.broadcast_to(np.asarray(latency_back, dtype=np.float64), (n,)).copy())
            self._links.append((d.astype(np.int32), s.astype(np.int32), cap.copy(), back,
                                kd.copy(), ln.copy()))
            self.n_links += n
        return fwd, rev

    def add_node_block(self, kinds: NDArray[np.int8], server: IntArray, local: IntArray,
                       group: IntArray) -> IntArray:
        """Add nodes given one entry per node (mixed kinds); returns their ids."""
        n = int(kinds.shape[0])
        ids = np.arange(self.n_nodes, self.n_nodes + n, dtype=np.int32)
        self._nodes.append((kinds.astype(np.int8), server.astype(np.int32),
                            local.astype(np.int32), group.astype(np.int32)))
        self.n_nodes += n
        return ids

    def add_link_block(self, src: IntArray, dst: IntArray, capacity: NDArray[np.float64],
                       latency: NDArray[np.float64], kinds: NDArray[np.int8],
                       lanes: NDArray[np.int16]) -> IntArray:
        """Add directed links given one entry per link (mixed kinds); returns their ids."""
        n = int(src.shape[0])
        ids = np.arange(self.n_links, self.n_links + n, dtype=np.int32)
        self._links.append((src.astype(np.int32), dst.astype(np.int32),
                            capacity.astype(np.float64), latency.astype(np.float64),
                            kinds.astype(np.int8), lanes.astype(np.int16)))
        self.n_links += n
        return ids

    def arrays(self) -> dict[str, NDArray[np.generic]]:
        """Concatenated node and link arrays built so far."""
        def cat(parts: list[NDArray[np.generic]], dtype: type) -> NDArray[np.generic]:
            return (np.concatenate(parts).astype(dtype, copy=False) if parts else
                    np.zeros(0, dtype=dtype))

        return {
            "node_kind": cat([p[0] for p in self._nodes], np.int8),
            "node_server": cat([p[1] for p in self._nodes], np.int32),
            "node_local": cat([p[2] for p in self._nodes], np.int32),
            "node_group": cat([p[3] for p in self._nodes], np.int32),
            "link_src": cat([p[0] for p in self._links], np.int32),
            "link_dst": cat([p[1] for p in self._links], np.int32),
            "link_capacity": cat([p[2] for p in self._links], np.float64),
            "link_latency": cat([p[3] for p in self._links], np.float64),
            "link_kind": cat([p[4] for p in self._links], np.int8),
            "link_lanes": cat([p[5] for p in self._links], np.int16),
        }

    def build(self, *, gpus: IntArray, gpu_nics: IntArray, router: Router,
              info: FabricInfo, arrays: dict[str, NDArray[np.generic]] | None = None) -> Fabric:
        """Freeze into a Fabric (``arrays``: the result of :meth:`arrays`, if at hand)."""
        a = self.arrays() if arrays is None else arrays
        return Fabric(
            node_kind=a["node_kind"].astype(np.int8),
            node_server=a["node_server"].astype(np.int32),
            node_local=a["node_local"].astype(np.int32),
            node_group=a["node_group"].astype(np.int32),
            link_src=a["link_src"].astype(np.int32),
            link_dst=a["link_dst"].astype(np.int32),
            link_capacity=a["link_capacity"].astype(np.float64),
            link_latency=a["link_latency"].astype(np.float64),
            link_kind=a["link_kind"].astype(np.int8),
            link_lanes=a["link_lanes"].astype(np.int16),
            gpus=np.asarray(gpus, dtype=np.int32),
            gpu_nics=np.asarray(gpu_nics, dtype=np.int32),
            router=router,
            info=info,
        )
