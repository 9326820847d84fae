"""Link faults and PFC misconfiguration for packet runs, in the flow backend's vocabulary.

A fault is a :class:`~fabricsim.scenario.schema.FaultSpec` (``type``, ``link`` or
``kind`` + ``index``, ``factor``, ``period``, ``duty``, ``start``):

=================  ==========================================================================
``link_down``      ``start`` 0: the link is gone before the run and routes avoid it (as in
                   the flow backend). ``start`` > 0: it fails at ``start`` and stays down,
                   and routes keep using it (routing has not converged): an Ethernet port
                   drops what it would send, a credit-based (InfiniBand) port sends nothing
                   and its credits stall the senders behind it.
``link_degraded``  capacity × ``factor``, from the start (``start`` 0) or from ``start``.
``link_flapping``  up for ``duty × period``, then down (``factor`` 0, the default) or at
                   ``factor`` × capacity for the rest of every period, from ``start``.
=================  ==========================================================================

A timed change applies from the next packet the link starts; ACKs and other control
messages are not carried by links and are not affected.

Example
-------
>>> from fabricsim.backends.flow.testing import host_fat_tree
>>> fab = host_fat_tree(4)
>>> plan = plan_packet_faults(fab, [{"type": "link_flapping", "link": "leaf0->spine0",
...                                  "period": "100us", "duty": 0.7}])
>>> plan.descriptions
['leaf0->spine0 flapping: up 70% of every 100 us, else down']
>>> fault_table(plan.timed).shape
(1, 5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.packet import layout as L
from fabricsim.errors import ConfigError
from fabricsim.fabric.core import Fabric
from fabricsim.fabric.kinds import NodeKind
from fabricsim.units import parse_time

#: Fault types a packet run models.
PACKET_FAULTS = ("link_down", "link_degraded", "link_flapping")
#: How to list a fabric's links (named in errors about a link name).
LIST_LINKS_HINT = ("`fabricsim describe <scenario.yaml> --export links.json` lists every "
                   "link by name")


@dataclass(frozen=True)
class TimedFault:
    """A link fault that acts during the run: ``factor`` × capacity (0: down) from
    ``start + duty·period`` to the end of each ``period`` (``period`` inf: from ``start``
    for good)."""

    links: tuple[int, ...]
    start: float
    period: float
    duty: float
    factor: float


@dataclass(frozen=True)
class PacketFaultPlan:
    """The fabric with the static faults applied, the timed ones, their descriptions."""

    fabric: Fabric
    timed: tuple[TimedFault, ...] = ()
    descriptions: list[str] = field(default_factory=list)


def _suggest(fabric: Fabric, node: int | None) -> str:
    if node is not None:
        out = [fabric.link_name(int(l)) for l in np.flatnonzero(fabric.link_src == node)]
        return f"links from {fabric.node_name(node)}: {', '.join(out[:12])}" + \
            (f" (+{len(out) - 12} more)" if len(out) > 12 else "")
    net = np.flatnonzero(np.isin(fabric.node_kind[fabric.link_src],
                                 [int(NodeKind.LEAF), int(NodeKind.SPINE), int(NodeKind.CORE),
                                  int(NodeKind.ROUTER)]))
    pick = net[:8] if net.size else np.arange(min(8, fabric.n_links))
    return "links look like " + ", ".join(fabric.link_name(int(l)) for l in pick)


def resolve_links(fabric: Fabric, name: str, field: str) -> list[int]:
    """Link ids named ``"<node>-><node>"`` (``<->``: both directions); a name that is
    not a link of ``fabric`` is a ConfigError on ``field`` listing valid names.

    >>> from fabricsim.backends.flow.testing import host_fat_tree
    >>> resolve_links(host_fat_tree(4), "leaf0<->spine0", "faults[0].link")
    [8, 12]
    >>> resolve_links(host_fat_tree(4), "leaf0->leaf1", "faults[0].link")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: faults[0].link: no link leaf0->leaf1 in this fabric; ...
    """
    both = "<->" in name
    a, sep, b = name.partition("<->" if both else "->")
    if not sep or not a.strip() or not b.strip():
        raise ConfigError(f"a link is written '<node>-><node>' (or '<->' for both "
                          f"directions), got {name!r}; {_suggest(fabric, None)}; "
                          f"{LIST_LINKS_HINT}", field=field)
    names = {fabric.node_name(i): i for i in range(fabric.n_nodes)}
    ends = []
    for end in (a.strip(), b.strip()):
        if end not in names:
            src = names.get(a.strip())
            raise ConfigError(f"no node named {end!r} in this fabric, so no link {name!r}; "
                              f"{_suggest(fabric, src)}; {LIST_LINKS_HINT}", field=field)
        ends.append(names[end])
    out = []
    for s, d in ((ends[0], ends[1]), (ends[1], ends[0]))[:2 if both else 1]:
        hit = np.flatnonzero((fabric.link_src == s) & (fabric.link_dst == d))
        if hit.size == 0:
            raise ConfigError(f"no link {fabric.node_name(s)}->{fabric.node_name(d)} in this "
                              f"fabric; {_suggest(fabric, s)}; {LIST_LINKS_HINT}",
                              field=field)
        out.append(int(hit[0]))
    return out


def plan_packet_faults(fabric: Fabric, faults: Sequence[Any], prefix: str = "faults"
                       ) -> PacketFaultPlan:
    """Apply the static faults of ``faults`` (FaultSpecs or mappings) to ``fabric`` and
    collect the timed ones; errors name ``{prefix}[i].<field>``."""
    from fabricsim.backends.flow.faults import MIN_FLAP_PERIOD, select_links
    from fabricsim.backends.flow.specs import FaultSpec

    fab = fabric
    timed: list[TimedFault] = []
    desc: list[str] = []
    seen: dict[int, int] = {}
    for i, raw in enumerate(faults):
        where = f"{prefix}[{i}]"
        spec = raw if isinstance(raw, FaultSpec) else _spec(raw, where)
        if spec.type not in PACKET_FAULTS:
            raise ConfigError(f"fault type {spec.type!r} is not modelled by the packet backend "
                              f"({', '.join(PACKET_FAULTS)} are); run it with the flow "
                              "backend", field=f"{where}.type")
        links = (resolve_links(fabric, spec.link, f"{where}.link") if spec.link
                 else select_links(fabric, spec, where))
        names = ", ".join(fabric.link_name(l) for l in links)
        start = parse_time(spec.start, field=f"{where}.start")
        if spec.type == "link_degraded" and spec.factor is None:
            raise ConfigError("link_degraded needs factor (capacity left, 0..1)",
                              field=f"{where}.factor")
        if spec.type != "link_flapping" and start <= 0:
            if spec.type == "link_down":
                fab = fab.with_links_down(links)
                desc.append(f"{names} down")
            else:
                fab = fab.with_links_scaled(links, float(spec.factor or 1.0))
                desc.append(f"{names} degraded to {spec.factor:g} of capacity")
            continue
        for l in links:
            if l in seen:
                raise ConfigError(f"{fabric.link_name(l)} already has a timed fault "
                                  f"({prefix}[{seen[l]}]); give each link one",
                                  field=f"{where}.link")
            seen[l] = i
        if spec.type == "link_flapping":
            if spec.period is None:
                raise ConfigError("link_flapping needs period (e.g. '100us')",
                                  field=f"{where}.period")
            period = parse_time(spec.period, field=f"{where}.period")
            if not period >= MIN_FLAP_PERIOD:
                raise ConfigError(f"a flapping period of {period:g} s is shorter than "
                                  f"{MIN_FLAP_PERIOD * 1e6:g} us; use e.g. '100us'",
                                  field=f"{where}.period")
            duty = spec.duty if spec.duty is not None else 0.5
            fac = spec.factor if spec.factor is not None else 0.0
            timed.append(TimedFault(tuple(links), start, period, duty, fac))
            low = "down" if fac == 0 else f"at {fac:g} of capacity"
            desc.append(f"{names} flapping: up {duty:.0%} of every {period * 1e6:g} us, "
                        f"else {low}")
        else:
            fac = 0.0 if spec.type == "link_down" else float(spec.factor or 1.0)
            timed.append(TimedFault(tuple(links), start, float("inf"), 0.0, fac))
            what = "down" if fac == 0 else f"degraded to {fac:g} of capacity"
            desc.append(f"{names} {what} from {start * 1e6:g} us (routes unchanged)")
    return PacketFaultPlan(fabric=fab, timed=tuple(timed), descriptions=desc)


def _spec(raw: Any, where: str) -> Any:
    """A FaultSpec from a mapping; a bad value is a ConfigError naming its field."""
    from pydantic import ValidationError

    from fabricsim.backends.flow.specs import FaultSpec

    try:
        return FaultSpec.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"{first['msg']} (got {first.get('input')!r})",
                          field=f"{where}.{loc}" if loc else where) from None


def fault_table(timed: Sequence[TimedFault]) -> NDArray[np.float64]:
    """The engine's ``FT`` array: one row per faulted link (columns ``layout.FT_*``)."""
    rows = [(l, f.start, f.period, f.duty, f.factor) for f in timed for l in f.links]
    out = np.zeros((len(rows), L.N_FT))
    for r, (l, start, period, duty, fac) in enumerate(rows):
        out[r, L.FT_LINK] = l
        out[r, L.FT_START] = start
        out[r, L.FT_PERIOD] = period
        out[r, L.FT_DUTY] = duty
        out[r, L.FT_FACTOR] = fac
    return out


def nopfc_mask(fabric: Fabric, mismatches: Sequence[Any], class_names: Sequence[str],
               lossless: Sequence[bool]) -> NDArray[np.int64]:
    """Per link, the bit mask of classes its downstream port does not pause
    (``packet.pfc.mismatch``).

    >>> from fabricsim.backends.flow.testing import host_fat_tree
    >>> from fabricsim.backends.packet.config import PfcMismatch
    >>> m = nopfc_mask(host_fat_tree(4), [PfcMismatch(node="leaf0")], ["rdma", "tcp"],
    ...                [True, False])
    >>> int(m.sum()), sorted(set(m.tolist()))   # leaf0's 4 ingress ports, class 0
    (4, [0, 1])
    """
    out = np.zeros(fabric.n_links, dtype=np.int64)
    names = {fabric.node_name(i): i for i in range(fabric.n_nodes)}
    for i, mm in enumerate(mismatches):
        where = f"packet.pfc.mismatch[{i}]"
        if (mm.node is None) == (mm.link is None):
            raise ConfigError("give either node (a switch: all its ingress ports) or link "
                              "(one ingress link)", field=where)
        if mm.node is not None:
            if mm.node not in names:
                from fabricsim.errors import unknown

                raise unknown("node", mm.node, list(names)[:50], field=f"{where}.node")
            links = np.flatnonzero(fabric.link_dst == names[mm.node]).tolist()
        else:
            links = resolve_links(fabric, str(mm.link), f"{where}.link")
        bits = 0
        for c in (mm.classes if mm.classes is not None else
                  [n for n, ll in zip(class_names, lossless, strict=True) if ll]):
            if c not in class_names:
                from fabricsim.errors import unknown

                raise unknown("traffic class", c, list(class_names), field=f"{where}.classes")
            bits |= 1 << list(class_names).index(c)
        out[np.asarray(links, dtype=np.int64)] |= bits
    return out
