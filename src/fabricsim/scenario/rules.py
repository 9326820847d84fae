"""Physical validity of a scenario: the rules a value must obey beyond its type.

The schema (:mod:`fabricsim.scenario.schema`, :mod:`fabricsim.backends.packet.config`)
checks types, names and simple ranges; the rules here check what a real fabric can be:
thresholds in order, buffers deep enough, timers positive, the transport one the fabric
carries, times in order, sizes finite and below a stated maximum. Every rule is a
:class:`~fabricsim.backends.packet.config.Rule` with a name, the field it constrains, the
rule in words and the reason; :data:`RULES` lists them all (the packet section's own
rules first) and docs/scenarios.md tabulates them. A violation is a
:class:`~fabricsim.errors.ConfigError` naming the field, the value, the reason and the rule.

Rules marked ``extreme`` describe settings that are legal but far from a working fabric
(a link losing more than 1 % of its packets, a link degraded to almost nothing); the CLI
refuses them unless run with ``--force`` (:func:`check_extreme`).

Loading a scenario applies every other rule (:func:`check_scenario`, called by the
schema), to the ``packet:`` section and to each of its variants.

Example
-------
>>> from fabricsim.scenario import Scenario
>>> Scenario.model_validate({"cluster": {"fabric": "roce-400g"},
...                          "packet": {"pfc": {"xoff": "10KB", "xon": "200KB"}}})
Traceback (most recent call last):
...
fabricsim.errors.ConfigError: packet.pfc.xon: 200 KB is not below packet.pfc.xoff (10 KB): ...
>>> sorted({r.name for r in RULES} & {"transport-matches-fabric", "pfc-xon-below-xoff"})
['pfc-xon-below-xoff', 'transport-matches-fabric']
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from fabricsim.backends.flow.specs import BackgroundSpec, FaultSpec
from fabricsim.backends.packet.config import (
    MAX_TRANSFER_BYTES,
    PACKET_RULES,
    PacketConfig,
    Rule,
    register_rule,
    show_bytes,
)
from fabricsim.errors import ConfigError, FabricsimError
from fabricsim.scenario.cluster import ClusterSpec, CollectiveSpec, cluster_gpus
from fabricsim.transport import DEFAULT_MTU
from fabricsim.units import parse_size, parse_time

if TYPE_CHECKING:
    from fabricsim.catalog import Catalog
    from fabricsim.scenario.sections import PacketSection


class ScenarioParts(Protocol):
    """What the rules read of a scenario (:class:`fabricsim.scenario.Scenario` is one;
    the rules sit below it, and the schema applies them)."""

    @property
    def cluster(self) -> ClusterSpec: ...
    @property
    def collective(self) -> CollectiveSpec | None: ...
    @property
    def systems(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def faults(self) -> Sequence[FaultSpec]: ...
    @property
    def background(self) -> Sequence[BackgroundSpec]: ...
    @property
    def packet(self) -> PacketSection | None: ...

#: Transports each scale-out fabric family carries, by the fabric preset's own transport.
#: InfiniBand switches forward only InfiniBand link-layer packets; Ethernet fabrics with
#: ConnectX-class NICs carry RoCEv2 and TCP; AWS EFA fabrics carry SRD and TCP (SRD is the
#: EFA NIC's own protocol, and EFA offers no RoCE); Ultra Ethernet fabrics (UE 1.0 NICs
#: and switches) carry UET, and RoCEv2 and TCP beside it on other traffic classes; HPE
#: Slingshot (Cassini NICs on Rosetta switches) carries its HPC Ethernet and TCP/IP.
FABRIC_TRANSPORTS: dict[str, tuple[str, ...]] = {
    "ib": ("ib",), "roce": ("roce", "tcp"), "tcp": ("tcp", "roce"), "srd": ("srd", "tcp"),
    "uet": ("uet", "roce", "tcp"), "slingshot": ("slingshot", "tcp")}
#: Largest payload per packet of Slingshot's HPC Ethernet (bytes; HPE's cxi driver).
MAX_SLINGSHOT_MTU = 2048
#: Path MTUs InfiniBand and RoCEv2 allow (payload bytes; IBTA vol. 1, 7.7.7).
IB_MTUS = (256, 512, 1024, 2048, 4096)
#: Largest payload per packet on an Ethernet transport (bytes): a 9000 B jumbo frame.
MAX_ETHERNET_MTU = 9000
#: A capacity factor below this (link_degraded, slow_nic) needs ``--force``.
MIN_PLAUSIBLE_FACTOR = 0.01
#: A straggler delay per transfer above this (s) needs ``--force``.
MAX_PLAUSIBLE_DELAY = 1.0
#: Longest time a fault or background setting may hold (s): a day.
MAX_SCENARIO_TIME_S = 86_400.0

#: Rules that need the whole scenario (its fabric, GPUs, faults, variants).
SCENARIO_RULES: list[Rule] = []
_scenario_rule = partial(register_rule, SCENARIO_RULES)


@dataclass(frozen=True)
class Context:
    """What scenario rules look at: the scenario, each packet run's configuration (by
    variant, ``None`` for the base) and the catalog (``None`` if the scenario's systems
    do not resolve; the fabric builder then reports that)."""

    scenario: ScenarioParts
    packet: dict[str | None, PacketConfig]
    catalog: Catalog | None

    def fabric_transport(self, cfg: PacketConfig | None = None) -> tuple[str, str] | None:
        """``(fabric name, its transport)`` of a packet run (or of the cluster)."""
        if self.catalog is None:
            return None
        c = self.scenario.cluster
        try:
            name = (cfg.fabric if cfg is not None and cfg.fabric else c.fabric) or \
                self.catalog.system(c.system).default_fabric
            return name, self.catalog.fabric(name).transport
        except FabricsimError:
            return None

    def n_gpus(self) -> int | None:
        """Ranks (GPUs) of the cluster, as the builder will make them."""
        if self.catalog is None:
            return None
        try:
            return cluster_gpus(self.scenario.cluster, self.catalog)
        except FabricsimError:
            return None

    def gpu_memory(self) -> tuple[str, float] | None:
        """``(GPU name, its memory in bytes)`` of the cluster's system."""
        if self.catalog is None:
            return None
        try:
            gpu = self.catalog.system(self.scenario.cluster.system).gpu
            return gpu, float(self.catalog.gpu(gpu).memory_bytes)
        except FabricsimError:
            return None


def _where(variant: str | None, field: str) -> str:
    return field if variant is None else field.replace(
        "packet.", f"packet.variants.{variant}.", 1)


@_scenario_rule("transport-matches-fabric", "packet.transport",
                "one the fabric carries: ib on InfiniBand; roce or tcp on Ethernet; srd or "
                "tcp on EFA; uet, roce or tcp on Ultra Ethernet; slingshot or tcp on "
                "Slingshot",
                "InfiniBand's credit-based link layer needs InfiniBand switches, RoCE and TCP "
                "need Ethernet, SRD needs AWS EFA NICs, UET needs Ultra Ethernet NICs, "
                "Slingshot's HPC Ethernet needs Cassini NICs on Rosetta switches; set "
                "packet.fabric to a fabric that carries it")
def _transport(ctx: Context) -> Iterator[tuple[str, str]]:
    for v, cfg in ctx.packet.items():
        ft = ctx.fabric_transport(cfg)
        if cfg.transport is None or ft is None:
            continue
        name, own = ft
        if cfg.transport not in FABRIC_TRANSPORTS.get(own, (own,)):
            yield _where(v, "packet.transport"), (f"{cfg.transport} is not carried by fabric "
                                                  f"{name!r} ({own})")


@_scenario_rule("mtu-of-transport", "packet.mtu",
                f"one of {', '.join(map(str, IB_MTUS))} on ib and roce; at most "
                f"{MAX_ETHERNET_MTU} on tcp, srd and uet; at most {MAX_SLINGSHOT_MTU} on "
                f"slingshot",
                "InfiniBand and RoCEv2 packets carry one of five path MTUs, no Ethernet "
                "frame is larger than a 9000-byte jumbo frame, and Slingshot's HPC Ethernet "
                "carries at most 2048 bytes a packet")
def _mtu(ctx: Context) -> Iterator[tuple[str, str]]:
    for v, cfg in ctx.packet.items():
        ft = ctx.fabric_transport(cfg)
        t = cfg.transport or (ft[1] if ft is not None else None)
        if t is None or t not in DEFAULT_MTU:
            continue
        mtu = cfg.mtu_for(t)   # what the run will use: the transport's own when unset
        if t in ("ib", "roce") and mtu not in IB_MTUS:
            yield _where(v, "packet.mtu"), f"{mtu} B is no {t} path MTU"
        elif t in ("tcp", "srd", "uet") and mtu > MAX_ETHERNET_MTU:
            yield _where(v, "packet.mtu"), f"{mtu} B is more than a jumbo frame holds"
        elif t == "slingshot" and mtu > MAX_SLINGSHOT_MTU:
            yield _where(v, "packet.mtu"), (f"{mtu} B is more than Slingshot's HPC "
                                            f"Ethernet carries a packet")


@_scenario_rule("packet-ranks-exist", "packet.traffic.ranks, receiver, senders, "
                "packet.stuck_receiver.rank", "below the cluster's number of GPUs",
                "only a GPU the cluster has can send, receive or hang")
def _packet_ranks(ctx: Context) -> Iterator[tuple[str, str]]:
    n = ctx.n_gpus()
    if n is None:
        return
    for v, cfg in ctx.packet.items():
        items: list[tuple[str, int]] = []
        if cfg.stuck_receiver is not None and cfg.stuck_receiver.rank is not None:
            items.append(("packet.stuck_receiver.rank", cfg.stuck_receiver.rank))
        specs = ([("packet.traffic", cfg.traffic)] if cfg.traffic is not None else []) + [
            (f"packet.background[{i}]", b) for i, b in enumerate(cfg.background)]
        for where, t in specs:
            items += [(f"{where}.ranks", r) for r in t.ranks or []]
            if t.pattern == "incast":
                items.append((f"{where}.receiver", t.receiver))
            if t.senders is not None:
                items.append((f"{where}.senders", t.senders - 1))
        for field, r in items:
            if r >= n:
                what = f"{r + 1} senders" if field.endswith("senders") else f"rank {r}"
                yield _where(v, field), f"{what} on a cluster of {n} GPUs"
                break


def _size(value: Any, field: str) -> float | None:
    try:
        out = float(parse_size(value, field=field))
    except (FabricsimError, ValueError, OverflowError):
        return None  # the reader of the field reports it
    return out


@_scenario_rule("collective-sizes-ordered", "collective.minbytes",
                "at most collective.maxbytes", "a sweep runs from its smallest size up to "
                "its largest")
def _sweep(ctx: Context) -> Iterator[tuple[str, str]]:
    c = ctx.scenario.collective
    if c is None:
        return
    lo, hi = _size(c.minbytes, "collective.minbytes"), _size(c.maxbytes, "collective.maxbytes")
    if lo is not None and hi is not None and lo > hi:
        yield "collective.minbytes", (f"{show_bytes(lo)} is above collective.maxbytes "
                                      f"({show_bytes(hi)})")


@_scenario_rule("collective-fits-gpu", "collective.maxbytes", "at most the GPU's memory",
                "a collective's buffer lives in GPU memory; a larger one cannot be "
                "allocated")
def _fits_gpu(ctx: Context) -> Iterator[tuple[str, str]]:
    c = ctx.scenario.collective
    mem = ctx.gpu_memory()
    if c is None or mem is None:
        return
    for f, value in (("collective.maxbytes", c.maxbytes), ("collective.minbytes", c.minbytes)):
        b = _size(value, f)
        if b is not None and b > mem[1]:
            yield f, f"{show_bytes(b)} is more than a {mem[0]}'s {show_bytes(mem[1])}"
            return


def _time(value: Any) -> float | None:
    try:
        return parse_time(value)
    except (FabricsimError, ValueError, OverflowError):
        return None


@_scenario_rule("scenario-times-finite", "faults[i].start, delay, period, "
                "background[i].start", f"finite, at most {MAX_SCENARIO_TIME_S:g} s",
                "NaN and infinity are no time, and a run is not a day long")
def _times(ctx: Context) -> Iterator[tuple[str, str]]:
    sc = ctx.scenario
    items: list[tuple[str, Any]] = []
    for i, f in enumerate(sc.faults):
        items += [(f"faults[{i}].{k}", getattr(f, k)) for k in ("start", "delay", "period")]
    items += [(f"background[{i}].start", b.start) for i, b in enumerate(sc.background)]
    for field, value in items:
        t = _time(value) if value is not None else 0.0
        if t is not None and not (math.isfinite(t) and t <= MAX_SCENARIO_TIME_S):
            yield field, f"{t:g} s"


@_scenario_rule("flap-period-positive", "faults[i].period (link_flapping)", "above 0",
                "a link cannot go down and up again in no time")
def _flap(ctx: Context) -> Iterator[tuple[str, str]]:
    for i, f in enumerate(ctx.scenario.faults):
        if f.type == "link_flapping" and f.period is not None:
            t = _time(f.period)
            if t is not None and t <= 0:
                yield f"faults[{i}].period", "it is 0"


@_scenario_rule("background-moves-bytes", "background[i].nbytes",
                f"above 0, at most {show_bytes(MAX_TRANSFER_BYTES)}",
                "a zero-byte flow is no traffic, and no GPU's memory holds more")
def _bg_bytes(ctx: Context) -> Iterator[tuple[str, str]]:
    for i, b in enumerate(ctx.scenario.background):
        n = _size(b.nbytes, f"background[{i}].nbytes")
        if n is not None and not 0 < n <= MAX_TRANSFER_BYTES:
            yield f"background[{i}].nbytes", f"it is {show_bytes(n)}"


@_scenario_rule("background-weight-finite", "background[i].weight", "finite",
                "a share of a link is a finite weight; an infinite one would starve every "
                "other flow")
def _bg_weight(ctx: Context) -> Iterator[tuple[str, str]]:
    for i, b in enumerate(ctx.scenario.background):
        if not math.isfinite(b.weight):
            yield f"background[{i}].weight", f"it is {b.weight}"


@_scenario_rule("fault-factor-plausible", "faults[i].factor (link_degraded, slow_nic)",
                f"at least {MIN_PLAUSIBLE_FACTOR:g} (less needs --force)",
                "a link or NIC at under 1 % of its rate is down for any operator; model it "
                "as link_down, or force the run", extreme=True)
def _factor(ctx: Context) -> Iterator[tuple[str, str]]:
    for i, f in enumerate(ctx.scenario.faults):
        if f.type in ("link_degraded", "slow_nic") and f.factor is not None and \
                f.factor < MIN_PLAUSIBLE_FACTOR:
            yield f"faults[{i}].factor", (f"{f.factor:g} leaves {f.factor:.2%} of the "
                                          "capacity")


@_scenario_rule("straggler-delay-plausible", "faults[i].delay (slow_gpu, slow_node)",
                f"at most {MAX_PLAUSIBLE_DELAY:g} s per transfer (more needs --force)",
                "a GPU that starts each transfer seconds late is hung, not straggling",
                extreme=True)
def _delay(ctx: Context) -> Iterator[tuple[str, str]]:
    for i, f in enumerate(ctx.scenario.faults):
        if f.type in ("slow_gpu", "slow_node") and f.delay is not None:
            d = _time(f.delay)
            if d is not None and MAX_PLAUSIBLE_DELAY < d <= MAX_SCENARIO_TIME_S:
                yield f"faults[{i}].delay", f"{d:g} s per transfer"


#: Every rule, packet section first: what docs/scenarios.md tabulates.
RULES: list[Rule] = [*PACKET_RULES, *SCENARIO_RULES]


def packet_configs(sc: ScenarioParts) -> dict[str | None, PacketConfig]:
    """The validated packet configuration of the base (key ``None``) and of every
    variant (the :class:`~fabricsim.scenario.sections.PacketSection` read them)."""
    if sc.packet is None:
        return {}
    out: dict[str | None, PacketConfig] = {None: sc.packet.base}
    out.update(sc.packet.variants)
    return out


def _context(sc: ScenarioParts, packet: dict[str | None, PacketConfig] | None = None) -> Context:
    from fabricsim.scenario.cluster import scenario_catalog

    try:
        cat: Catalog | None = scenario_catalog(sc.systems)
    except FabricsimError:
        cat = None
    return Context(sc, packet_configs(sc) if packet is None else packet, cat)


def violations(sc: ScenarioParts, *, extreme: bool = False,
               packet: dict[str | None, PacketConfig] | None = None) -> list[ConfigError]:
    """Every violation of a scenario rule by ``sc`` (of the extreme ones with
    ``extreme=True``). The packet section's own rules run when it is parsed; its extreme
    ones when a packet run starts (:func:`packet_extremes`), where the fabric and the
    schedule give their cost."""
    ctx = _context(sc, packet)
    return [e for r in SCENARIO_RULES if r.extreme == extreme for e in r.violations(ctx)]


def check_scenario(sc: ScenarioParts) -> None:
    """Raise the first violated rule (extreme rules excepted) of ``sc``."""
    errs = violations(sc)
    if errs:
        raise errs[0]


def refuse_unless_forced(errs: list[ConfigError], force: bool) -> list[ConfigError]:
    """Raise the first of ``errs`` (extreme settings) unless ``force``; else return them."""
    if errs and not force:
        e = errs[0]
        raise ConfigError(f"{e.message}; the setting is legal but extreme: pass --force to "
                          "run it anyway", field=e.field)
    return errs


def check_extreme(sc: ScenarioParts, *, force: bool = False) -> list[ConfigError]:
    """Refuse (raise) the first extreme setting of ``sc``'s faults unless ``force``; with
    ``force`` return them, for the caller to warn about."""
    return refuse_unless_forced(violations(sc, extreme=True), force)
