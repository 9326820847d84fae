"""Dragonfly scale-out networks (Kim, Dally, Scott, Abts, ISCA 2008).

Routers (``NodeKind.ROUTER``) form groups of ``a`` routers joined all-to-all by local
links (``LinkKind.LOCAL``); every router has ``p`` endpoint (NIC) ports and ``h`` global
ports, and groups are joined all-to-all by global links (``LinkKind.GLOBAL``).

Sizing, for switch radix ``k`` and ``E`` endpoints (params override each default):

* balanced defaults ``p = h = floor((k+1)/4)``, ``a = 2p`` (so ``p + a − 1 + h ≤ k``);
* ``R = ceil(E/p)`` routers; if ``R ≤ a`` there is one group of ``R`` routers, otherwise
  ``g = ceil(E/(a·p))`` groups (at most ``a·h + 1``);
* every pair of groups is joined by ``m = floor(a·h/(g−1))`` global cables. Cable ``t``
  between groups ``i`` and ``j`` leaves group ``i`` from global port
  ``((j−i−1) mod g) + t·(g−1)`` (router = port // h), the *relative* arrangement that
  spreads each group's peers evenly over its routers. Cables that join the same two
  routers are one link with ``lanes`` > 1.

Routing is minimal (at most local–global–local): ECMP by hash over the ``m`` global cables
between the two groups; vectorised, so 16k endpoints route in milliseconds. Links that are
down are avoided over the other global cables first, then non-minimally (shortest path).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=64, topology="dragonfly")
>>> ex = fab.info.extra["dragonfly"]
>>> ex["groups"], ex["routers_per_group"], ex["hosts_per_router"]
(1, 32, 16)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import TopologyError
from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.fattree import CABLE_DELAY
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.network import PAD, Network, ScaleOutSpec, StructuralRouter
from fabricsim.fabric.paths import IntArray

#: Propagation delay of a global (inter-group, optical) cable (s): ~60 m at 5 ns/m.
GLOBAL_CABLE_DELAY = 300e-9


@dataclass(frozen=True)
class DragonflyShape:
    """Resolved dragonfly sizes: ``p`` hosts, ``a`` routers, ``h`` global ports, ``g``."""

    hosts_per_router: int
    routers_per_group: int
    global_links_per_router: int
    groups: int

    @property
    def ports_used(self) -> int:
        """Ports a router needs: ``p + (a − 1) + h``."""
        return self.hosts_per_router + self.routers_per_group - 1 + self.global_links_per_router

    @property
    def links_between_groups(self) -> int:
        """Global cables per pair of groups (``m``)."""
        if self.groups < 2:
            return 0
        return (self.routers_per_group * self.global_links_per_router) // (self.groups - 1)


def _int_param(params: Mapping[str, object], name: str) -> int | None:
    v = params.get(name)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise TopologyError(f"dragonfly {name} must be an integer >= 1, got {v!r}",
                            field=f"params.{name}")
    return v


def dragonfly_shape(endpoints: int, radix: int, params: Mapping[str, object]
                    ) -> DragonflyShape:
    """Resolve the dragonfly sizes for ``endpoints`` NIC ports on radix-``radix`` routers.

    Example
    -------
    >>> s = dragonfly_shape(16384, 64, {})
    >>> (s.hosts_per_router, s.routers_per_group, s.global_links_per_router, s.groups)
    (16, 32, 16, 32)
    """
    bal = max(1, (radix + 1) // 4)
    p = _int_param(params, "hosts_per_router") or bal
    h = _int_param(params, "global_links_per_router") or bal
    a_given = _int_param(params, "routers_per_group")
    g_given = _int_param(params, "groups")
    a = a_given or 2 * p
    routers = math.ceil(endpoints / p)
    if g_given is None:
        if a_given is None and routers <= a:
            a, g = routers, 1
        else:
            g = math.ceil(endpoints / (a * p))
    else:
        g = g_given
        need = math.ceil(endpoints / (a * p))
        if g < need:
            raise TopologyError(
                f"{g} groups of {a} routers x {p} hosts hold {g * a * p} endpoints, "
                f"{endpoints} asked; use groups >= {need}", field="params.groups")
    shape = DragonflyShape(p, a, h, g)
    if shape.ports_used > radix:
        fit_a = radix - p - h + 1
        raise TopologyError(
            f"a dragonfly router needs hosts_per_router + routers_per_group - 1 + "
            f"global_links_per_router = {p} + {a - 1} + {h} = {shape.ports_used} ports, more "
            f"than radix {radix}; use routers_per_group <= {max(fit_a, 1)} or a larger radix",
            field="params.routers_per_group" if a_given or fit_a >= 1 else "radix")
    if g > 1 and g - 1 > a * h:
        max_e = (a * h + 1) * a * p
        raise TopologyError(
            f"{g} groups need {g - 1} global cables per group but a group has only "
            f"{a * h} global ports (routers_per_group x global_links_per_router); a "
            f"dragonfly of this shape holds at most {max_e} endpoints (groups <= {a * h + 1})",
            field="params.groups")
    return shape


class DragonflyRouter(StructuralRouter):
    """Minimal (local–global–local) dragonfly routing, ECMP by hash over global cables."""

    width = 5

    def __init__(self, endpoints: IntArray, n_nodes_hint: int, *, shape: DragonflyShape,
                 router_of: IntArray, up_nic: IntArray, down_nic: IntArray,
                 local: NDArray[np.int32], glink: NDArray[np.int32],
                 g_from: NDArray[np.int32], g_to: NDArray[np.int32]) -> None:
        super().__init__(endpoints, n_nodes_hint)
        self.shape = shape
        self.router_of = router_of  # endpoint -> router index
        self.up_nic = up_nic
        self.down_nic = down_nic
        self.local = local  # [R, a] link id router -> local index in its group (-1 on self)
        self.glink = glink  # [g, g, m] link id, group i -> group j, cable t
        self.g_from = g_from  # [g, g, m] router index in group i
        self.g_to = g_to  # [g, g, m] router index in group j

    def n_choices(self, a: int, b: int) -> int:
        return max(1, self.shape.links_between_groups)

    def _route_endpoints(self, a: IntArray, b: IntArray, h: NDArray[np.uint64]
                         ) -> NDArray[np.int64]:
        n = a.shape[0]
        ap = self.shape.routers_per_group
        out = np.full((n, self.width), PAD, dtype=np.int64)
        ra, rb = self.router_of[a], self.router_of[b]
        ga, gb = ra // ap, rb // ap
        out[:, 0] = self.up_nic[a]
        col = np.ones(n, dtype=np.int64)
        rows = np.arange(n)

        def put(sel: NDArray[np.bool_], links: NDArray[np.int64]) -> None:
            out[rows[sel], col[sel]] = links
            col[sel] += 1

        same_g = ga == gb
        put(same_g & (ra != rb), self.local[ra[same_g & (ra != rb)],
                                            rb[same_g & (ra != rb)] % ap])
        cross = ~same_g
        if cross.any():
            m = self.shape.links_between_groups
            t = (h[cross] % np.uint64(m)).astype(np.int64)
            gi, gj = ga[cross], gb[cross]
            r1 = self.g_from[gi, gj, t]
            r2 = self.g_to[gi, gj, t]
            gl = self.glink[gi, gj, t]
            s_ra, s_rb = ra[cross], rb[cross]
            first = np.zeros(n, dtype=bool)
            first[rows[cross]] = s_ra != r1
            put(first, self.local[s_ra[s_ra != r1], r1[s_ra != r1] % ap])
            put(cross, gl)
            last = np.zeros(n, dtype=bool)
            last[rows[cross]] = r2 != s_rb
            put(last, self.local[r2[r2 != s_rb], s_rb[r2 != s_rb] % ap])
        out[rows, col] = self.down_nic[b]
        return out


def dragonfly_network(b: FabricBuilder, nics: NDArray[np.int32], spec: ScaleOutSpec
                      ) -> Network:
    """Build a dragonfly over ``nics[server, i]`` (registered as topology ``"dragonfly"``)."""
    if spec.tiers not in (None, 2):
        raise TopologyError(f"a dragonfly has 2 tiers (local, global), got tiers={spec.tiers}",
                            field="tiers")
    if spec.planes not in (None, 1):
        raise TopologyError(f"dragonfly builds one plane, got planes={spec.planes}",
                            field="planes")
    if spec.oversubscription != 1:
        raise TopologyError("dragonfly oversubscription is set by its shape "
                            "(hosts_per_router vs global_links_per_router), use 1",
                            field="oversubscription")
    endpoints = nics.reshape(-1).astype(np.int32)
    e = int(endpoints.shape[0])
    shape = dragonfly_shape(e, spec.radix, spec.params)
    p, ap, hh, g = (shape.hosts_per_router, shape.routers_per_group,
                    shape.global_links_per_router, shape.groups)
    n_r = g * ap
    r_idx = np.arange(n_r, dtype=np.int32)
    routers = b.add_nodes(NodeKind.ROUTER, n_r, group=r_idx // ap, local=r_idx % ap)
    router_of = (np.arange(e, dtype=np.int32) // p).astype(np.int32)
    ep_bw = min(spec.endpoint_bw, spec.port_bw)
    up_nic, down_nic = b.add_links(
        endpoints, routers[router_of], ep_bw,
        spec.nic_latency + CABLE_DELAY + spec.switch_latency, LinkKind.NIC_LEAF,
        latency_back=CABLE_DELAY + spec.nic_latency)
    # local: all-to-all inside each group
    iu, ju = np.triu_indices(ap, 1)
    grp = np.repeat(np.arange(g, dtype=np.int64), iu.size)
    u = grp * ap + np.tile(iu, g)
    v = grp * ap + np.tile(ju, g)
    fwd, rev = b.add_links(routers[u], routers[v], spec.port_bw,
                           CABLE_DELAY + spec.switch_latency, LinkKind.LOCAL)
    local = np.full((n_r, ap), -1, dtype=np.int32)
    local[u, v % ap] = fwd
    local[v, u % ap] = rev
    m = shape.links_between_groups
    glink = np.full((g, g, max(m, 1)), -1, dtype=np.int32)
    g_from = np.zeros((g, g, max(m, 1)), dtype=np.int32)
    g_to = np.zeros((g, g, max(m, 1)), dtype=np.int32)
    n_global_cables = 0
    if g > 1:
        gi, gj = np.triu_indices(g, 1)
        gi = np.repeat(gi, m)
        gj = np.repeat(gj, m)
        t = np.tile(np.arange(m), gi.size // m)
        slot_i = (gj - gi - 1) % g + t * (g - 1)
        slot_j = (gi - gj - 1) % g + t * (g - 1)
        r1 = gi * ap + slot_i // hh
        r2 = gj * ap + slot_j // hh
        key = r1.astype(np.int64) * n_r + r2
        uniq, inv, lanes = np.unique(key, return_inverse=True, return_counts=True)
        ur1, ur2 = uniq // n_r, uniq % n_r
        gf, gr = b.add_links(routers[ur1], routers[ur2], spec.port_bw * lanes,
                             GLOBAL_CABLE_DELAY + spec.switch_latency, LinkKind.GLOBAL,
                             lanes=lanes)
        glink[gi, gj, t] = gf[inv]
        glink[gj, gi, t] = gr[inv]
        g_from[gi, gj, t] = r1
        g_to[gi, gj, t] = r2
        g_from[gj, gi, t] = r2
        g_to[gj, gi, t] = r1
        n_global_cables = int(gi.size)
    router = DragonflyRouter(endpoints, b.n_nodes, shape=shape, router_of=router_of,
                             up_nic=up_nic, down_nic=down_nic, local=local, glink=glink,
                             g_from=g_from, g_to=g_to)
    # bisection: global cables across an even split of the groups (one group: local links)
    if g > 1:
        cut = (g // 2) * (g - g // 2) * m * spec.port_bw
    else:
        cut = (ap // 2) * (ap - ap // 2) * spec.port_bw
    bis = min(e / 2 * ep_bw, cut)
    local_cables = g * ap * (ap - 1) // 2
    return Network(
        router=router, switches={"router": n_r}, tiers=2, bisection_bandwidth=bis,
        oversubscription=p / hh if g > 1 else 1.0,
        cables={"nic-router": e, "local": local_cables, "global": n_global_cables},
        notes=(f"dragonfly: {g} groups x {ap} routers, {p} hosts + {hh} global ports per "
               f"router, {m} global cables per group pair",),
        extra={"dragonfly": {"groups": g, "routers_per_group": ap, "hosts_per_router": p,
                             "global_links_per_router": hh, "links_between_groups": m}})
