"""3-D torus scale-out networks (TPU-pod style direct networks), topology ``"torus3d"``.

One torus node per **server**: a ``NodeKind.ROUTER`` that stands for the server's
network ports (as a TPU chip's inter-chip-interconnect router does), with the server's
NICs attached to it. Torus node ``(x, y, z)`` links to its six neighbours ``(x±1, y, z)``,
``(x, y±1, z)``, ``(x, y, z±1)`` with wrap-around (``LinkKind.TORUS``).

Bandwidth is conserved: a server's NIC bandwidth (``nics × min(nic, port)``) is split
evenly over its torus ports, two per dimension of size ≥ 2 (six in a full 3-D torus). In a
dimension of size 2 both ports reach the same neighbour: one link with ``lanes = 2``; a
dimension of size 1 has no ports.

Sizing: ``dims = (X, Y, Z)`` with ``X·Y·Z = servers``; the default is the most cubic
factorisation (smallest largest side). Bisection (one direction) cuts the largest
dimension ``L``: ``2·(servers/L)·port_capacity`` (``L > 2``), capped by half the injection.

Routing is dimension-order, each dimension the shorter way round; ECMP by hash picks the
order (x-y-z or z-y-x, so that the reverse of every path is a path) and, where both ways
round are equally short (``L`` even, distance ``L/2``), the way.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=64, topology="torus3d")
>>> fab.info.extra["torus"]["dims"]
[4, 4, 4]
>>> most_cubic(2048)
(16, 16, 8)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import TopologyError
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.fattree import CABLE_DELAY
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.network import PAD, Network, ScaleOutSpec, StructuralRouter
from fabricsim.fabric.paths import IntArray


def most_cubic(n: int) -> tuple[int, int, int]:
    """The factorisation ``X ≥ Y ≥ Z``, ``X·Y·Z = n``, with the smallest ``X`` (then ``X−Z``).

    Example
    -------
    >>> most_cubic(64), most_cubic(12), most_cubic(7)
    ((4, 4, 4), (3, 2, 2), (7, 1, 1))
    """
    if n < 1:
        raise TopologyError(f"a torus needs >= 1 node, got {n}", field="nodes")
    best: tuple[int, int, int] | None = None
    for z in range(1, round(n ** (1 / 3)) + 2):
        if n % z:
            continue
        rest = n // z
        for y in range(z, math.isqrt(rest) + 1):
            if rest % y:
                continue
            x = rest // y
            if x < y:
                continue
            cand = (x, y, z)
            if best is None or (cand[0], cand[0] - cand[2]) < (best[0], best[0] - best[2]):
                best = cand
    return best if best is not None else (n, 1, 1)


def torus_dims(servers: int, params: Mapping[str, object]) -> tuple[int, int, int]:
    """Validated ``dims`` param (default :func:`most_cubic`)."""
    raw = params.get("dims")
    if raw is None:
        return most_cubic(servers)
    if (not isinstance(raw, (list, tuple)) or len(raw) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in raw)):
        raise TopologyError(f"torus dims must be three integers >= 1, got {raw!r}; e.g. "
                            f"{list(most_cubic(servers))}", field="params.dims")
    dims = (int(raw[0]), int(raw[1]), int(raw[2]))
    if math.prod(dims) != servers:
        raise TopologyError(
            f"torus dims {list(dims)} hold {math.prod(dims)} servers but there are {servers}; "
            f"use dims={list(most_cubic(servers))} or nodes={math.prod(dims)}",
            field="params.dims")
    return dims


class TorusRouter(StructuralRouter):
    """Dimension-order minimal routing on a 3-D torus, ECMP by hash on half-way ties."""

    def __init__(self, endpoints: IntArray, n_nodes_hint: int, *, dims: tuple[int, int, int],
                 router_of: IntArray, up_nic: IntArray, down_nic: IntArray,
                 port_link: NDArray[np.int32]) -> None:
        super().__init__(endpoints, n_nodes_hint)
        self.dims = dims
        self.router_of = router_of
        self.up_nic = up_nic
        self.down_nic = down_nic
        self.port_link = port_link  # [R, 6]: link out of router on port 2*dim + (0:+, 1:-)
        self.width = 2 + sum(d // 2 for d in dims)

    def coords(self, r: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """``[n, 3]`` coordinates of router indices ``r``."""
        x, y, _ = self.dims
        r64 = r.astype(np.int64)
        return np.stack([r64 % x, (r64 // x) % y, r64 // (x * y)], axis=1)

    def n_choices(self, a: int, b: int) -> int:
        return 16  # one hash bit per dimension for ties, one for the order

    def _route_endpoints(self, a: IntArray, b: IntArray, h: NDArray[np.uint64]
                         ) -> NDArray[np.int64]:
        n = a.shape[0]
        out = np.full((n, self.width), PAD, dtype=np.int64)
        out[:, 0] = self.up_nic[a]
        col = np.ones(n, dtype=np.int64)
        ra = self.router_of[a].astype(np.int64)
        rb = self.router_of[b].astype(np.int64)
        ca, cb = self.coords(ra), self.coords(rb)
        cur = ra.copy()
        stride = (1, self.dims[0], self.dims[0] * self.dims[1])
        rev = ((h >> np.uint64(3)) & np.uint64(1)).astype(bool)
        for step in range(6):  # x, y, z for rows in order; then z, y, x for reversed rows
            d = step if step < 3 else 5 - step
            size = self.dims[d]
            if size < 2:
                continue
            todo = ~rev if step < 3 else rev
            delta = (cb[:, d] - ca[:, d]) % size
            back = size - delta
            tie = (2 * delta == size) & (size > 2)
            bit = ((h >> np.uint64(d)) & np.uint64(1)).astype(bool)
            neg = (back < delta) | (tie & bit)
            steps = np.where(neg, back, delta) * todo
            port = 2 * d + neg.astype(np.int64)
            pos = (cur // stride[d]) % size
            for k in range(size // 2):
                sel = np.flatnonzero(steps > k)
                if sel.size == 0:
                    break
                out[sel, col[sel]] = self.port_link[cur[sel], port[sel]]
                col[sel] += 1
                nxt = np.where(neg[sel], pos[sel] - 1, pos[sel] + 1) % size
                cur[sel] += (nxt - pos[sel]) * stride[d]
                pos[sel] = nxt
        out[np.arange(n), col] = self.down_nic[b]
        return out


def torus_network(b: FabricBuilder, nics: NDArray[np.int32], spec: ScaleOutSpec) -> Network:
    """Build a 3-D torus over servers (registered as topology ``"torus3d"``)."""
    if spec.tiers not in (None, 0):
        raise TopologyError(f"a torus is a direct network (tiers=0), got tiers={spec.tiers}",
                            field="tiers")
    if spec.planes not in (None, 1):
        raise TopologyError(f"torus3d builds one plane, got planes={spec.planes}",
                            field="planes")
    if spec.oversubscription != 1:
        raise TopologyError("a torus has no oversubscription setting; use 1",
                            field="oversubscription")
    servers, per = nics.shape
    dims = torus_dims(servers, spec.params)
    n_ports = 2 * sum(1 for d in dims if d >= 2)
    r_idx = np.arange(servers, dtype=np.int32)
    routers = b.add_nodes(NodeKind.ROUTER, servers, local=r_idx)
    endpoints = nics.reshape(-1).astype(np.int32)
    router_of = np.repeat(r_idx, per).astype(np.int32)
    ep_bw = min(spec.endpoint_bw, spec.port_bw)
    # the NICs are the torus ports: their attachment costs NIC latency, no cable
    up_nic, down_nic = b.add_links(endpoints, routers[router_of], ep_bw,
                                   spec.nic_latency, LinkKind.NIC_LEAF,
                                   latency_back=spec.nic_latency)
    port_cap = per * ep_bw / n_ports if n_ports else 0.0
    port_link = np.full((servers, 6), -1, dtype=np.int32)
    stride = (1, dims[0], dims[0] * dims[1])
    cables = 0
    for d, size in enumerate(dims):
        if size < 2:
            continue
        pos = (r_idx.astype(np.int64) // stride[d]) % size
        nxt = r_idx + ((pos + 1) % size - pos) * stride[d]
        if size == 2:
            src = r_idx[pos == 0]
            fwd, rev = b.add_links(routers[src], routers[nxt[pos == 0]], 2 * port_cap,
                                   CABLE_DELAY + spec.switch_latency, LinkKind.TORUS, lanes=2)
            for sign in (0, 1):
                port_link[src, 2 * d + sign] = fwd
                port_link[nxt[pos == 0], 2 * d + sign] = rev
            cables += 2 * src.size
        else:
            fwd, rev = b.add_links(routers, routers[nxt], port_cap,
                                   CABLE_DELAY + spec.switch_latency, LinkKind.TORUS)
            port_link[r_idx, 2 * d] = fwd
            port_link[nxt, 2 * d + 1] = rev
            cables += servers
    router = TorusRouter(endpoints, b.n_nodes, dims=dims, router_of=router_of, up_nic=up_nic,
                         down_nic=down_nic, port_link=port_link)
    big = max(dims)
    inj = servers * per * ep_bw
    if big >= 2:
        cut = 2 * (servers // big) * port_cap if big > 2 else (servers // 2) * 2 * port_cap
        bis = min(inj / 2, cut)
    else:
        bis = 0.0
    return Network(
        router=router, switches={"torus-router": servers}, tiers=0, bisection_bandwidth=bis,
        oversubscription=1.0, cables={"torus": cables}, radix_bound=False,
        notes=(f"torus {dims[0]}x{dims[1]}x{dims[2]}: one node per server, {n_ports} ports "
               f"of {port_cap * 8 / 1e9:.0f} Gb/s",),
        extra={"torus": {"dims": list(dims), "ports_per_node": n_ports,
                         "port_bandwidth": port_cap}})
