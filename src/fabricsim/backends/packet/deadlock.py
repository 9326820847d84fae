"""Describe a PFC deadlock the engine detected: which ports, which cycle, since when.

The engine (:func:`~fabricsim.backends.packet.roce.on_deadlock_check`) marks the links
whose ports are paused, hold packets, sent nothing for a whole ``pfc.deadlock_window``
and wait on one another in a cycle. Here the waits-for edges between them are rebuilt
from the queues (port ``a`` waits on port ``b`` when a packet that entered ``b``'s switch
over link ``a`` is queued at ``b``) and one cycle is followed.

Example
-------
>>> follow_cycle({0: [1], 1: [2], 2: [0], 3: [0]}, start=3)
[0, 1, 2]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fabricsim.backends.packet import layout as L
from fabricsim.backends.packet.build import State
from fabricsim.backends.packet.config import PacketConfig
from fabricsim.fabric.core import Fabric


def follow_cycle(succ: dict[int, list[int]], start: int) -> list[int]:
    """The cycle reached from ``start`` by always taking the first successor (every
    node of ``succ`` must have one), in order from its first node met."""
    seen: dict[int, int] = {}
    path: list[int] = []
    node = start
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = succ[node][0]
    return path[seen[node]:]


def waits_for(st: State, marked: list[int]) -> dict[int, list[int]]:
    """Waits-for edges among the ``marked`` links, from the packets queued on them."""
    a = st.arrays
    QI, PK = a["QI"], a["PK"]
    NP = st.nprio
    mset = set(marked)
    succ: dict[int, list[int]] = {l: [] for l in marked}
    for l2 in marked:
        for p in range(NP):
            lp = l2 * NP + p
            pk = int(QI[lp, L.Q_HEAD])
            for _ in range(int(QI[lp, L.Q_N])):
                inl = int(PK[pk, L.PK_INL])
                if inl in mset and l2 not in succ[inl]:
                    succ[inl].append(l2)
                pk = int(PK[pk, L.PK_NEXT])
    return succ


def describe_deadlock(st: State, fabric: Fabric, cfg: PacketConfig, t: float
                      ) -> dict[str, Any]:
    """``Result.extra['deadlock']``: detection time, the window, every deadlocked port
    (link, switch, paused classes, paused since, bytes queued), one cycle of link names
    and when it closed (the latest pause start among the cycle's ports)."""
    a = st.arrays
    LI, QI, QF = a["LI"], a["QI"], a["QF"]
    NP = st.nprio
    marked = [int(l) for l in np.flatnonzero(LI[:, L.LI_DLK] == 1)]
    succ = waits_for(st, marked)
    # peel again in Python (the edges are the engine's): keep nodes with a successor
    alive = {l for l in marked}
    changed = True
    while changed:
        changed = False
        for l in list(alive):
            succ[l] = [x for x in succ[l] if x in alive]
            if not succ[l]:
                alive.discard(l)
                changed = True
    since: dict[int, float] = {}
    ports = []
    for l in marked:
        cls = [p for p in range(NP) if QI[l * NP + p, L.Q_PAUSED] == 1]
        since[l] = max((float(QF[l * NP + p, L.QF_T0]) for p in cls), default=float("nan"))
        ports.append({"link": fabric.link_name(l),
                      "switch": fabric.node_name(int(LI[l, L.LI_SRC])),
                      "classes": [cfg.classes[p].name for p in cls],
                      "paused_since_s": since[l],
                      "queued_bytes": float(sum(QF[l * NP + p, L.QF_BYTES]
                                                for p in range(NP)))})
    cycle = follow_cycle(succ, min(alive)) if alive else []
    closed = max((since[l] for l in cycle), default=float("nan"))
    return {"t_detect_s": t, "window_s": cfg.pfc.deadlock_window, "ports": ports,
            "cycle": [fabric.link_name(l) for l in cycle],
            "cycle_nodes": [fabric.node_name(int(LI[l, L.LI_SRC])) for l in cycle],
            "closed_at_s": closed}
