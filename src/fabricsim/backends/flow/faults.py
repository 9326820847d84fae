"""Apply :class:`~fabricsim.scenario.schema.FaultSpec` s to a fabric.

=================  ==========================================================================
``link_down``      the link carries nothing; routes avoid it (transfers with no other route
                   stall and are reported).
``link_degraded``  capacity × ``factor``.
``link_flapping``  capacity alternates: full for ``duty × period``, then × ``factor``
                   (default 0: the link stalls what crosses it, as while routing has not yet
                   converged) for the rest of the period, from ``start``.
``slow_gpu``       rank ``gpu`` starts each of its transfers ``delay`` late (a straggler).
``slow_node``      every GPU of server ``node`` is a straggler by ``delay``.
``slow_nic``       every link into or out of a NIC runs at capacity × ``factor``; the NIC is
                   ``index`` of server ``node`` (default 0), or the first NIC of rank ``gpu``.
=================  ==========================================================================

A link is selected by ``link: "<node>-><node>"`` (names as ``Fabric.link_name`` prints
them; ``<->`` selects both directions) or by ``kind`` + ``index`` (the index-th link of
that class, e.g. ``kind: leaf-spine``).

Example
-------
>>> from fabricsim.backends.flow.testing import host_fat_tree
>>> from fabricsim.backends.flow.specs import FaultSpec
>>> fab = host_fat_tree(16)
>>> plan = plan_faults(fab, [FaultSpec(type="link_degraded", kind="leaf-spine", index=0,
...                                    factor=0.5)])
>>> plan.faults[0].links, float(plan.fabric.link_capacity[32]) / 50e9
([32], 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.flow.specs import FaultSpec
from fabricsim.errors import ConfigError
from fabricsim.fabric.core import Fabric
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.units import parse_time

#: Shortest flapping period accepted (s).
MIN_FLAP_PERIOD = 1e-6


@dataclass(frozen=True)
class Flap:
    """A link whose capacity is ``factor`` × nominal outside its up windows."""

    links: tuple[int, ...]
    factor: float
    period: float
    duty: float
    start: float

    def is_up(self, t: float) -> bool:
        """Whether the links run at full capacity at time ``t``."""
        if t < self.start:
            return True
        phase = (t - self.start) % self.period
        return phase < self.duty * self.period * (1 - 1e-12)

    def next_change(self, t: float) -> float:
        """The first time after ``t`` at which the capacity changes."""
        if t < self.start:
            return self.start + self.duty * self.period
        k = np.floor((t - self.start) / self.period)
        base = self.start + k * self.period
        for cand in (base + self.duty * self.period, base + self.period,
                     base + self.period + self.duty * self.period):
            if cand > t * (1 + 1e-12) + 1e-15:
                return float(cand)
        return float(base + 2 * self.period)


@dataclass(frozen=True)
class AppliedFault:
    """A fault as applied: the spec, the link ids it touches, a one-line description."""

    spec: FaultSpec
    links: list[int]
    nodes: list[int]
    description: str


@dataclass(frozen=True)
class FaultPlan:
    """A fabric with the static faults applied, plus what varies in time."""

    fabric: Fabric
    flaps: tuple[Flap, ...] = ()
    node_delay: dict[int, float] = field(default_factory=dict)
    faults: tuple[AppliedFault, ...] = ()

    def delays(self, src: NDArray[np.int64]) -> NDArray[np.float64]:
        """Straggler delay (s) of transfers sent by nodes ``src``."""
        out = np.zeros(src.shape[0])
        for node, d in self.node_delay.items():
            out[src == node] += d
        return out


def _kind(label: str, where: str) -> LinkKind:
    for k in LinkKind:
        if k.label == label or k.name.lower() == label.replace("-", "_"):
            return k
    names = ", ".join(k.label for k in LinkKind)
    raise ConfigError(f"unknown link kind {label!r}; one of {names}", field=f"{where}.kind")


def select_links(fabric: Fabric, spec: FaultSpec, where: str = "faults[0]") -> list[int]:
    """Link ids a fault names (by ``link`` name or by ``kind`` + ``index``)."""
    if spec.link:
        both = "<->" in spec.link
        a, sep, b = spec.link.partition("<->" if both else "->")
        names = {fabric.node_name(i): i for i in range(fabric.n_nodes)}
        ends = []
        for name in (a.strip(), b.strip()):
            if name not in names:
                raise ConfigError(f"no node named {name!r} in this fabric (names look like "
                                  f"{fabric.node_name(fabric.n_nodes - 1)!r})",
                                  field=f"{where}.link")
            ends.append(names[name])
        if not sep:
            raise ConfigError("a link is written '<node>-><node>'", field=f"{where}.link")
        out = [fabric.find_link(ends[0], ends[1])]
        if both:
            out.append(fabric.find_link(ends[1], ends[0]))
        return out
    if spec.kind is None:
        raise ConfigError("give the link (link: 'a->b') or kind and index", field=where)
    kind = _kind(spec.kind, where)
    ids = fabric.links_of(kind)
    idx = spec.index or 0
    if idx >= ids.shape[0]:
        raise ConfigError(f"this fabric has {ids.shape[0]} {kind.label} links; index must be "
                          f"< {ids.shape[0]}", field=f"{where}.index")
    return [int(ids[idx])]


def _nic(fabric: Fabric, spec: FaultSpec, where: str) -> int:
    if spec.gpu is not None:
        if spec.gpu >= fabric.n_gpus:
            raise ConfigError(f"rank {spec.gpu} out of range 0..{fabric.n_gpus - 1}",
                              field=f"{where}.gpu")
        return int(np.asarray(fabric.gpu_nics[spec.gpu]).ravel()[0])
    nics = np.flatnonzero((fabric.node_kind == NodeKind.NIC) &
                          (fabric.node_server == (spec.node or 0)))
    idx = spec.index or 0
    if idx >= nics.shape[0]:
        raise ConfigError(f"server {spec.node or 0} has {nics.shape[0]} NICs", field=f"{where}"
                          ".index")
    return int(nics[idx])


def plan_faults(fabric: Fabric, faults: Sequence[FaultSpec | dict[str, Any]]) -> FaultPlan:
    """Apply static faults to ``fabric`` and collect time-varying ones.

    Examples
    --------
    >>> from fabricsim.backends.flow.testing import host_fat_tree
    >>> plan = plan_faults(host_fat_tree(4), [{"type": "slow_gpu", "gpu": 1, "delay": "5us"}])
    >>> {k: round(v * 1e6, 6) for k, v in plan.node_delay.items()}
    {1: 5.0}
    """
    fab = fabric
    flaps: list[Flap] = []
    delay: dict[int, float] = {}
    applied: list[AppliedFault] = []
    for i, raw in enumerate(faults):
        where = f"faults[{i}]"
        spec = raw if isinstance(raw, FaultSpec) else FaultSpec.model_validate(raw)
        t = spec.type
        links: list[int] = []
        nodes: list[int] = []
        if t in ("link_down", "link_degraded", "link_flapping"):
            links = select_links(fabric, spec, where)
            names = ", ".join(fabric.link_name(l) for l in links)
            if t == "link_down":
                fab = fab.with_links_down(links)
                desc = f"{names} down"
            elif t == "link_degraded":
                if spec.factor is None:
                    raise ConfigError("link_degraded needs factor (capacity left, 0..1)",
                                      field=f"{where}.factor")
                fab = fab.with_links_scaled(links, spec.factor)
                desc = f"{names} degraded to {spec.factor:g} of capacity"
            else:
                if spec.period is None:
                    raise ConfigError("link_flapping needs period (e.g. '2ms')",
                                      field=f"{where}.period")
                period = parse_time(spec.period, field=f"{where}.period")
                if not period >= MIN_FLAP_PERIOD:
                    raise ConfigError(
                        f"a flapping period of {period:g} s is shorter than "
                        f"{MIN_FLAP_PERIOD * 1e6:g} us: a link needs microseconds to retrain, "
                        "and every flap is two events of the simulation; use e.g. '2ms'",
                        field=f"{where}.period")
                duty = spec.duty if spec.duty is not None else 0.5
                fac = spec.factor if spec.factor is not None else 0.0
                flaps.append(Flap(tuple(links), fac, period, duty,
                                  parse_time(spec.start, field=f"{where}.start")))
                desc = (f"{names} flapping: up {duty:.0%} of every {period * 1e3:g} ms, "
                        f"else at {fac:g} of capacity")
        elif t in ("slow_gpu", "slow_node"):
            if spec.delay is None:
                raise ConfigError(f"{t} needs delay (per transfer, e.g. '20us')",
                                  field=f"{where}.delay")
            d = parse_time(spec.delay, field=f"{where}.delay")
            if t == "slow_gpu":
                if spec.gpu is None or spec.gpu >= fabric.n_gpus:
                    raise ConfigError(f"slow_gpu needs gpu, a rank in 0..{fabric.n_gpus - 1}",
                                      field=f"{where}.gpu")
                nodes = [int(fabric.gpus[spec.gpu])]
                desc = f"rank {spec.gpu} straggles by {d * 1e6:g} us per transfer"
            else:
                if spec.node is None:
                    raise ConfigError("slow_node needs node (a server index)",
                                      field=f"{where}.node")
                sel = (fabric.node_server[fabric.gpus] == spec.node)
                if not sel.any():
                    raise ConfigError(f"no GPU on server {spec.node}", field=f"{where}.node")
                nodes = [int(x) for x in fabric.gpus[sel]]
                desc = f"server {spec.node} straggles by {d * 1e6:g} us per transfer"
            for nd in nodes:
                delay[nd] = delay.get(nd, 0.0) + d
        else:  # slow_nic
            if spec.factor is None:
                raise ConfigError("slow_nic needs factor (capacity left, 0..1)",
                                  field=f"{where}.factor")
            nic = _nic(fabric, spec, where)
            links = np.flatnonzero((fabric.link_src == nic) | (fabric.link_dst == nic)).tolist()
            nodes = [nic]
            fab = fab.with_links_scaled(links, spec.factor)
            desc = f"{fabric.node_name(nic)} at {spec.factor:g} of its bandwidth"
        applied.append(AppliedFault(spec, [int(x) for x in links], nodes, desc))
    return FaultPlan(fabric=fab, flaps=tuple(flaps), node_delay=delay, faults=tuple(applied))
