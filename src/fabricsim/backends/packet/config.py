"""The ``packet:`` section of a scenario, validated (errors name ``packet.<field>``).

Sizes accept numbers of bytes or strings (``"64KiB"``), times numbers of seconds or
strings (``"55us"``), rates numbers of bytes/s or strings (``"40Mbps"``). ECN defaults
follow the DCQCN paper (Zhu et al., SIGCOMM 2015: Kmin 5 KB, Kmax 200 KB, Pmax 1 %); DCQCN
defaults are NVIDIA ConnectX firmware's (:class:`DcqcnConfig`; the paper's are
:data:`DCQCN_PAPER`).

Example
-------
>>> cfg = parse_packet_config({"mtu": 1500, "ecn": {"kmin": "10KB"}})
>>> cfg.mtu, cfg.ecn.kmin
(1500, 10000.0)
>>> parse_packet_config({"mtu": 10})
Traceback (most recent call last):
...
fabricsim.errors.ConfigError: packet.mtu: Input should be greater than or equal to 64, got 10
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from fabricsim._strict import StrictModel
from fabricsim.errors import ConfigError, FabricsimError
from fabricsim.transport import DEFAULT_MTU, TRANSPORT_HEADER_BYTES
from fabricsim.units import format_bytes, format_time, parse_bandwidth, parse_size, parse_time

#: Largest buffer, queue threshold, credit or byte counter accepted (bytes): more than the
#: deepest switch buffer built (deep-buffer routers carry a few GB of HBM).
MAX_BUFFER_BYTES = 16 * 2**30
#: Largest transfer a traffic spec may move (bytes): more than any GPU's memory.
MAX_TRANSFER_BYTES = 2**40
#: Longest time setting accepted (s): the packet backend covers milliseconds to seconds of
#: a fabric at about a million events per wall-second.
MAX_TIME_S = 60.0
#: Fastest rate setting accepted (bytes/s): 1.6 Tb/s, above any NIC port.
MAX_RATE = 1.6e12 / 8
#: Shortest DCQCN, watchdog or retransmission timer (s): NIC and switch timers tick in
#: microseconds, and a shorter one adds an event per flow every few nanoseconds.
MIN_TIMER_S = 1e-6
#: Per-link loss rate above which a run is refused unless forced (``--force``).
MAX_PLAUSIBLE_LOSS = 0.01


class _M(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ------------------------------------------------------------------ physical-validity rules

#: A rule's check: yields ``(field, what is wrong)`` for each violation it finds.
Check = Callable[[Any], Iterable[tuple[str, str]]]


@dataclass(frozen=True)
class Rule:
    """A physical-validity rule: which ``field`` it constrains, the ``rule`` in words and
    the ``reason`` (what a run would otherwise show that no hardware can).

    ``extreme`` rules describe settings that are legal but far outside what a working
    fabric does; a run that breaks one is refused unless it is forced (``--force``).
    The whole list, with the scenario-level rules, is
    :data:`fabricsim.scenario.rules.RULES`; docs/scenarios.md tabulates it.
    """

    name: str
    field: str
    rule: str
    reason: str
    check: Check
    extreme: bool = False

    def error(self, field: str, detail: str) -> ConfigError:
        """The ConfigError of one violation: ``<field>: <detail>: <reason> [rule <name>]``."""
        return ConfigError(f"{detail}: {self.reason} [rule {self.name}]", field=field)

    def violations(self, subject: Any) -> list[ConfigError]:
        """Every violation of this rule by ``subject``, as ConfigErrors."""
        return [self.error(f, d) for f, d in self.check(subject)]


def register_rule(registry: list[Rule], name: str, field: str, rule: str, reason: str, *,
                  extreme: bool = False) -> Callable[[Check], Check]:
    """Decorator: register the decorated check as a named rule in ``registry``."""
    def add(check: Check) -> Check:
        registry.append(Rule(name, field, rule, reason, check, extreme))
        return check
    return add


def _no_check(_subject: Any) -> Iterator[tuple[str, str]]:
    return iter(())


#: Rules the packet section obeys on its own (no fabric needed), in checking order.
PACKET_RULES: list[Rule] = [
    Rule("finite", "packet.* (every size, time and rate)", "a finite number",
         "NaN and infinity are no physical quantity", _no_check),
    Rule("size-maximum", "packet buffers, thresholds, credits, byte_counter",
         f"at most {format_bytes(MAX_BUFFER_BYTES)}",
         "no switch or NIC has a deeper buffer (deep-buffer routers carry a few GB)",
         _no_check),
    Rule("transfer-maximum", "packet.traffic.nbytes, packet.background[i].nbytes",
         f"at most {format_bytes(MAX_TRANSFER_BYTES)}",
         "no GPU's memory holds a larger transfer", _no_check),
    Rule("time-maximum", "packet.* (every time)", f"at most {MAX_TIME_S:g} s",
         "the packet backend covers milliseconds to seconds of a fabric; longer settings "
         "only stretch the time series", _no_check),
    Rule("rate-maximum", "packet.dcqcn.rai, rhai, min_rate", "at most 1.6 Tb/s",
         "no NIC port is faster", _no_check),
]
_packet_rule = partial(register_rule, PACKET_RULES)


def _bounded(v: float, limit: float, name: str, show: Callable[[float], str]) -> float:
    if not math.isfinite(v):
        raise ValueError(f"{v} is not a finite number: NaN and infinity are no physical "
                         "quantity [rule finite]")
    if v > limit:
        rule = next(r for r in PACKET_RULES if r.name == name)
        raise ValueError(f"{show(v)} is above the maximum of {show(limit)}: {rule.reason} "
                         f"[rule {name}]")
    return v


def _parse(fn: Any, v: Any) -> float:
    if isinstance(v, float) and not math.isfinite(v):
        _bounded(v, math.inf, "finite", str)
    try:
        return float(fn(v))
    except FabricsimError as e:  # pydantic reports ValueError under the field's path
        raise ValueError(e.message) from None
    except OverflowError:  # "1e400" reads as infinity
        raise ValueError(f"{v!r} is not a finite number: NaN and infinity are no physical "
                         "quantity [rule finite]") from None


def _size(v: Any) -> float:
    return _bounded(_parse(parse_size, v), MAX_BUFFER_BYTES, "size-maximum", show_bytes)


def _transfer(v: Any) -> float:
    return _bounded(_parse(parse_size, v), MAX_TRANSFER_BYTES, "transfer-maximum",
                    show_bytes)


def _time(v: Any) -> float:
    return _bounded(_parse(parse_time, v), MAX_TIME_S, "time-maximum", format_time)


def _rate(v: Any) -> float:
    return _bounded(_parse(parse_bandwidth, v), MAX_RATE, "rate-maximum",
                    lambda x: f"{x * 8 / 1e9:g} Gb/s")


class WatchdogConfig(_M):
    """PFC watchdog: detection time of a stuck (continuously paused) queue, restore check."""

    enabled: bool = True
    detect: float = 10e-3
    restore: float = 10e-3

    _t = field_validator("detect", "restore", mode="before")(_time)


class PfcMismatch(_M):
    """Switch ingress ports whose PFC priorities do not match the NIC's marking: they never
    pause ``classes`` (default: every lossless class), so those packets meet a lossy
    queue there. ``node`` names a switch (all its ingress ports) or ``link`` one ingress
    link (``"<node>-><node>"``, ``<->`` for both directions), as faults name links."""

    node: str | None = None
    link: str | None = None
    classes: list[str] | None = None


class PfcConfig(_M):
    """Priority flow control: per ingress port and priority XOFF/XON thresholds (bytes).

    ``deadlock_window``: a cycle of paused ports that sends nothing for this long is a PFC
    deadlock and stops the run with the cycle reported (``null``: never checked); with the
    watchdog on, the window is at least ``watchdog.detect``, so the watchdog acts first.
    ``mismatch``: misconfigured ports (:class:`PfcMismatch`)."""

    enabled: bool = True
    xoff: float = 256e3
    xon: float | None = None
    headroom: float | None = None
    watchdog: WatchdogConfig = Field(default_factory=WatchdogConfig)
    deadlock_window: float | None = 1e-3
    mismatch: list[PfcMismatch] = Field(default_factory=list)

    _s = field_validator("xoff", "xon", "headroom", mode="before")(
        lambda v: None if v is None else _size(v))
    _w = field_validator("deadlock_window", mode="before")(
        lambda v: None if v is None else _time(v))


class EcnConfig(_M):
    """RED-style ECN marking at switch egress queues: 0 below ``kmin``, rising linearly to
    ``pmax`` at ``kmax``, 1 above."""

    enabled: bool = True
    kmin: float = 5e3
    kmax: float = 200e3
    pmax: float = Field(0.01, gt=0, le=1)

    _s = field_validator("kmin", "kmax", mode="before")(_size)


class DcqcnConfig(_M):
    """DCQCN reaction point at the sender NIC. Defaults are NVIDIA ConnectX firmware's
    (mlxconfig / DOCA "DCQCN CC parameters"): ``g`` = 5/1024 (``dce_tcp_g`` 1019) every
    1 µs (``dce_tcp_rtt``), a decrease at most every 4 µs
    (``rate_reduce_monitor_period``), 300 µs increase timer (``rpg_time_reset``), 32767 B
    byte counter (``rpg_byte_reset``), one fast-recovery step (``rpg_threshold``), R_AI
    5 Mb/s and R_HAI 50 Mb/s, 1 Mb/s minimum, a CNP at most every 4 µs per flow
    (``min_time_between_cnps``) and the target rate clamped only after a timer increase
    (``clamp_tgt_rate`` 0, ``clamp_tgt_rate_after_time_inc`` 1). ``rai``/``rhai`` set to
    null mean 1/1000 and 1/100 of the line rate (the paper's 40/400 Mb/s at 40 Gb/s)."""

    enabled: bool = True
    g: float = Field(5 / 1024, gt=0, lt=1)
    rai: float | None = 5e6 / 8
    rhai: float | None = 50e6 / 8
    timer: float = 300e-6
    alpha_timer: float = 1e-6
    byte_counter: float = 32767.0
    cnp_interval: float = 4e-6
    rate_reduce_period: float = 4e-6
    fast_recovery_steps: int = Field(1, ge=1, le=100)
    clamp_target: Literal["never", "after_timer", "always"] = "after_timer"
    min_rate: float = 1e6 / 8

    _r = field_validator("min_rate", mode="before")(_rate)
    _ro = field_validator("rai", "rhai", mode="before")(lambda v: None if v is None else
                                                       _rate(v))
    _t = field_validator("timer", "alpha_timer", "cnp_interval", "rate_reduce_period",
                         mode="before")(_time)
    _s = field_validator("byte_counter", mode="before")(_size)


#: The DCQCN paper's parameters (Zhu et al., SIGCOMM 2015), the defaults before the
#: ConnectX calibration (a ``packet.dcqcn`` mapping; scenarios spell it out).
DCQCN_PAPER: dict[str, Any] = {
    "g": 1 / 256, "rai": None, "rhai": None, "timer": "55us", "alpha_timer": "55us",
    "byte_counter": "10MB", "cnp_interval": "50us", "rate_reduce_period": "1us",
    "fast_recovery_steps": 5, "clamp_target": "always", "min_rate": "100Mbps"}


class SrdConfig(_M):
    """SRD (EFA) sender: per-path delay-based windows and selective retransmission
    (:mod:`~fabricsim.backends.packet.srd`). ``congestion_control: false`` restores the
    earlier model (uniform random spraying, no window, go-back from the first hole)."""

    congestion_control: bool = True
    target_delay: float = 10e-6
    ai: float = Field(1.0, gt=0, le=64)
    beta: float = Field(0.8, gt=0, le=1)
    max_decrease: float = Field(0.5, gt=0, lt=1)
    min_cwnd: float = Field(0.01, gt=0, le=1)
    init_window: float = Field(1.0, gt=0, le=4)

    _t = field_validator("target_delay", mode="before")(_time)


#: UE 1.0 profiles (Ultra Ethernet Specification 1.0, June 2025, "profiles"; Hoefler et
#: al., arXiv:2508.08906, 2025). They differ above all in the semantic layer (AI Base:
#: the operations collective libraries need; AI Full: AI Base plus tagged sends and
#: rendezvous; HPC: MPI-style tag matching and the full set of atomics), which this packet
#: model does not time. What a profile switches on here, in packet delivery and congestion
#: control, is :data:`UET_PROFILES`.
UetProfile = Literal["ai_base", "ai_full", "hpc"]
#: Per profile, the defaults of the features the packet model has: ``cc`` (congestion
#: control), ``trimming`` (switches trim instead of dropping), ``llr`` and ``cbfc`` (link
#: layer). Every profile runs reliable unordered delivery (RUD) with packet spraying. Which
#: features a profile turns on is this model's reading, not a table of the specification:
#: public summaries of UE 1.0 tie the profiles to semantic features and leave RCCC,
#: trimming, LLR and CBFC to the deployment. Here ``ai_base`` and ``ai_full`` run NSCC
#: with trimming; ``hpc`` runs RCCC (receiver-granted credit, for the incast-heavy
#: traffic of MPI codes) with trimming; LLR and CBFC are off unless set.
UET_PROFILES: dict[str, dict[str, Any]] = {
    "ai_base": {"cc": "nscc", "trimming": True, "llr": False, "cbfc": False},
    "ai_full": {"cc": "nscc", "trimming": True, "llr": False, "cbfc": False},
    "hpc": {"cc": "rccc", "trimming": True, "llr": False, "cbfc": False},
}


class NsccConfig(_M):
    """NSCC (network-signalled congestion control), the UET sender's window, as UE 1.0
    describes it and htsim's UEC model (uec.cpp) implements it: a per-connection window
    (bytes) moved by two signals per ACK, the queueing delay (RTT minus the base RTT) and
    the ECN echo:

    * no ECN, delay below ``target_delay_s``: *proportional increase*, the window grows by
      ``acked × (target − delay) / target`` (a doubling per RTT on an empty path);
    * no ECN, delay above target: *fair increase*, ``fair_increase_mtus`` MTUs per RTT;
    * ECN and delay above target: *multiplicative decrease*, at most once per base RTT, by
      ``gamma × (delay − target) / delay`` (at most ``max_decrease``);
    * ECN, delay below target: the path, not the receiver, is congested: no window change,
      the path, not the window, takes the blame (``UetConfig.load_balance``);
    * *quick adapt*: a delay above ``quick_adapt_factor × target`` (or a trim NACK)
      sets the window to what was acknowledged in the last base RTT, once per RTT;
    * a trim NACK or a loss takes the packet's bytes off the window.

    ``target_delay_s`` null: half the flow's base RTT, fabricsim's own choice. htsim's
    UEC model (uet-htsim commit 40ccb05, ``UecSrc::initNsccParams``) defaults instead to
    0.75 × the network's largest unloaded RTT when trimming is on and 1 × that RTT when it
    is off (its static 6 µs is overwritten at start-up). The window starts at
    ``init_window_bdp`` bandwidth-delay products and never exceeds ``max_window_bdp``
    (htsim: 1 and 1.5)."""

    target_delay_s: float | None = None
    gamma: float = Field(0.8, gt=0, le=1)
    max_decrease: float = Field(0.5, gt=0, lt=1)
    fair_increase_mtus: float = Field(1.0, gt=0, le=64)
    quick_adapt_factor: float = Field(4.0, ge=1, le=100)
    init_window_bdp: float = Field(1.0, gt=0, le=4)
    max_window_bdp: float = Field(1.5, gt=0, le=16)

    _t = field_validator("target_delay_s", mode="before")(
        lambda v: None if v is None else _time(v))


class RcccConfig(_M):
    """RCCC (receiver credit-based congestion control): a sender may send only bytes the
    receiver granted. Each receiver runs a pacer that grants one packet's worth of credit
    per packet time of its link (``rate_share`` of its line rate), round-robin over the
    flows that still need credit, so all senders together never send faster than the
    receiver's link drains; a sender starts with ``init_credit_bdp`` bandwidth-delay
    products it may send unasked (UE 1.0's speculative window). A trimmed packet asks for
    credit again (its NACK tells the receiver); a packet lost to a timeout is resent on
    the sender's own credit."""

    init_credit_bdp: float = Field(1.0, ge=0, le=4)
    rate_share: float = Field(1.0, gt=0, le=1)


class UetConfig(_M):
    """Ultra Ethernet Transport (UE 1.0): the ``packet.uet`` section
    (:mod:`~fabricsim.backends.packet.uet`).

    ``profile`` picks the defaults of ``cc``, ``trimming``, ``llr`` and ``cbfc``
    (:data:`UET_PROFILES`); set any of them to override. ``entropies``: entropy values
    (ECMP paths) each connection sprays over, 64 by default as in the UEC's htsim model
    (each is one routed path per flow: memory and set-up grow with it). ``load_balance``:
    how the sender picks the entropy of each packet. ``reps`` (the default, as htsim's
    default ``mixed`` balancer; REPS, Bonato et al., "REPS: Recycled Entropy Packet
    Spraying", 2024): an entropy whose ACK came back without an ECN mark is used again
    (first returned, first reused); with none to recycle, the sender explores the next
    entropy in turn, passing over those penalised by an ECN mark (one pass), a trim NACK
    (four) or a timeout (fifteen); after a timeout it explores no unknown entropy for
    four ``rto`` (REPS's freezing) but reuses those that answered before.
    ``oblivious``: round-robin over every entropy, one marked at low delay skipped for one
    base RTT (fabricsim's balancer before REPS, with 16 entropies). Under both, an entropy
    that went silent (failed) is avoided. ``trim_threshold_bytes``: a switch egress
    queue holding more than this trims arriving packets to their headers (which then go
    ahead of the data, at high priority) instead of queueing them; at most
    ``packet.lossy_queue`` (the queue's size). ``llr``: link-level retry, a frame
    corrupted on a link (``packet.loss_rate``) is sent again by that link after a link
    round trip instead of being lost end to end. ``cbfc``: credit-based flow control on
    every Ethernet link (lossless, as InfiniBand's credits)."""

    profile: UetProfile = "ai_full"
    cc: Literal["nscc", "rccc"] | None = None
    trimming: bool | None = None
    trim_threshold_bytes: float = 200e3
    llr: bool | None = None
    cbfc: bool | None = None
    entropies: int = Field(64, ge=1, le=64)
    load_balance: Literal["reps", "oblivious"] = "reps"
    nscc: NsccConfig = Field(default_factory=NsccConfig)
    rccc: RcccConfig = Field(default_factory=RcccConfig)

    @field_validator("trim_threshold_bytes", mode="before")
    @classmethod
    def _trim(cls, v: Any) -> float:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            raise ValueError(f"{v:g} B is negative: a queue holds no fewer than 0 bytes")
        return _size(v)

    def feature(self, name: str) -> Any:
        """The setting of ``name`` (``cc``, ``trimming``, ``llr``, ``cbfc``): as set, else
        the profile's.

        >>> UetConfig(profile="hpc").feature("cc"), UetConfig(cc="nscc").feature("cc")
        ('rccc', 'nscc')
        """
        v = getattr(self, name)
        return UET_PROFILES[self.profile][name] if v is None else v


class TrafficClass(_M):
    """A priority / traffic class: which DSCP values map to it, lossless (PFC) or not,
    ECN marking or not."""

    name: str
    dscp: list[int] = Field(default_factory=list)
    lossless: bool = True
    ecn: bool = True


class StuckReceiver(_M):
    """An endpoint that stops draining (a hung NIC/host) between ``start`` and ``end``:
    it pauses every lossless class on its incoming links (withholds credits on IB)."""

    rank: int | None = Field(None, ge=0)
    node: str | None = None
    start: float = 0.0
    end: float = 1e-3

    _t = field_validator("start", "end", mode="before")(_time)


class TrafficSpec(_M):
    """Traffic a scenario generates when it has no collective: ``incast`` (``senders``
    ranks to rank ``receiver``), ``all_to_all`` or ``pairs`` (rank i to i + n/2), or
    ``collective`` (a ring all-reduce). ``ranks`` lists the participating ranks explicitly
    (the senders of an incast); otherwise the first ``senders`` ranks take part."""

    pattern: Literal["incast", "all_to_all", "pairs", "collective"] = "collective"
    senders: int | None = Field(None, ge=1)
    ranks: list[int] | None = None
    receiver: int = Field(0, ge=0)
    nbytes: float = 16e6
    traffic_class: str | None = None
    dscp: int | None = Field(None, ge=0, le=63)
    start: float = 0.0
    repeat: int = Field(1, ge=1)

    _s = field_validator("nbytes", mode="before")(_transfer)
    _t = field_validator("start", mode="before")(_time)


class PacketConfig(_M):
    """Everything the packet backend can be told by a scenario.

    ``mtu`` is the payload (message bytes) per packet and ``header_bytes`` the wire bytes
    added to each packet; left unset, both are the transport's, from
    :mod:`fabricsim.transport` (:data:`~fabricsim.transport.DEFAULT_MTU`: 4096 on ib and
    roce, 8948 on tcp, 8192 on srd; :data:`~fabricsim.transport.TRANSPORT_HEADER_BYTES`),
    the framing the analytic and flow backends charge too, so the three backends time one
    uncontended transfer alike. Read them with :meth:`mtu_for` and :meth:`header_for`:
    an unset ``mtu`` field still holds 4096 (ib's). An Ethernet (IP) MTU of 1500 with
    TCP/IPv4 and timestamps is ``mtu: 1448``; RoCEv2 with a 4096 B IB MTU needs an
    Ethernet MTU of at least 4096 + 48 (IP, UDP, BTH, ICRC). The header is charged on every
    link of a flow that leaves its server (including its PCIe hops); flows that stay on
    NVLink/PCIe inside a server carry none (their link rates in the fabric are data rates).
    ``fabric`` names a scale-out fabric preset that replaces the cluster's for this run (a
    variant can compare InfiniBand on its own fabric with RoCE on Ethernet).
    """

    mtu: int = Field(DEFAULT_MTU["ib"], ge=64, le=65536)
    fabric: str | None = None
    transport: Literal["ib", "roce", "tcp", "srd", "uet", "slingshot"] | None = None
    header_bytes: int | None = Field(None, ge=0, le=512)
    switching: Literal["cut-through", "store-and-forward"] = "cut-through"
    switch_buffer: float = 32 * 2**20
    nic_buffer: float = 4 * 2**20
    lossy_queue: float = 1 * 2**20
    credit_bytes: float | None = None
    adaptive_routing: bool = False
    paths: int = Field(4, ge=1, le=64)
    pfc: PfcConfig = Field(default_factory=PfcConfig)
    ecn: EcnConfig = Field(default_factory=EcnConfig)
    dcqcn: DcqcnConfig = Field(default_factory=DcqcnConfig)
    srd: SrdConfig = Field(default_factory=SrdConfig)
    uet: UetConfig = Field(default_factory=UetConfig)
    classes: list[TrafficClass] = Field(default_factory=lambda: [
        TrafficClass(name="rdma", dscp=[26], lossless=True, ecn=True),
        TrafficClass(name="default", dscp=[0], lossless=False, ecn=False),
    ])
    loss_rate: float = Field(0.0, ge=0, lt=1)
    rto: float | None = None
    retry_limit: int | None = Field(None, ge=0, le=1000)
    ack_every: int = Field(8, ge=1)
    window: int = Field(1 << 30, ge=1)
    init_cwnd: int = Field(10, ge=1)
    stuck_receiver: StuckReceiver | None = None
    traffic: TrafficSpec | None = None
    background: list[TrafficSpec] = Field(default_factory=list)
    faults: list[dict[str, Any]] = Field(default_factory=list)
    until: float | None = None
    bins: int = Field(200, ge=10, le=5000)
    event_budget: int = Field(200_000_000, ge=1000, le=10**15)
    max_endpoints: int = Field(1024, ge=2)
    seed: int | None = None
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)

    _s = field_validator("switch_buffer", "nic_buffer", "lossy_queue", mode="before")(_size)
    _c = field_validator("credit_bytes", mode="before")(
        lambda v: None if v is None else _size(v))
    _t = field_validator("rto", "until", mode="before")(lambda v: None if v is None else
                                                        _time(v))

    @field_validator("classes")
    @classmethod
    def _classes(cls, v: list[TrafficClass]) -> list[TrafficClass]:
        if not 1 <= len(v) <= 8:
            raise ValueError("between 1 and 8 traffic classes")
        names = [c.name for c in v]
        if len(set(names)) != len(names):
            raise ValueError("traffic class names must be unique")
        return v

    @model_validator(mode="after")
    def _physical(self) -> PacketConfig:
        """Refuse the first violated rule of :data:`PACKET_RULES` (extreme ones excepted:
        :func:`extreme_violations` reports those)."""
        _refuse_violations(self)
        return self

    def for_transport(self, transport: str) -> PacketConfig:
        """This configuration as it runs on ``transport`` (``transport`` set, every other
        field as it was, ``mtu`` still unset if it was), with :data:`PACKET_RULES` checked
        again: without a ``transport`` the rules on one packet (``pfc-xoff-one-packet``,
        ``credits-one-packet``, ...) could only judge InfiniBand's, and a TCP packet at its
        transport's default MTU is more than twice as large (9038 B on the wire, not 4122).

        Example
        -------
        >>> cfg = PacketConfig(pfc={"xoff": "8KB"})
        >>> cfg.for_transport("roce").mtu_for("roce")
        4096
        >>> try:
        ...     cfg.for_transport("tcp")
        ... except ConfigError as e:
        ...     print(str(e).split(":")[:2])
        ['packet.pfc.xoff', ' 8 KB is less than one packet (9.038 KB on the wire)']
        """
        out = self.model_copy(update={"transport": transport})
        _refuse_violations(out)
        return out

    def class_index(self, name: str | None = None, dscp: int | None = None) -> int:
        """Index of the class called ``name`` or holding ``dscp`` (default: class 0)."""
        from fabricsim.errors import ConfigError, unknown

        if name is not None:
            for i, c in enumerate(self.classes):
                if c.name == name:
                    return i
            raise unknown("traffic class", name, [c.name for c in self.classes],
                          field="packet.traffic_class")
        if dscp is not None:
            for i, c in enumerate(self.classes):
                if dscp in c.dscp:
                    return i
            raise ConfigError(f"no traffic class holds DSCP {dscp}; add it to a class's "
                              "dscp list", field="packet.classes")
        return 0

    def mtu_for(self, transport: str) -> int:
        """Payload bytes per packet on ``transport``: ``mtu`` if set, else the transport's
        default (:data:`fabricsim.transport.DEFAULT_MTU`).

        Example
        -------
        >>> PacketConfig().mtu_for("tcp"), PacketConfig().mtu_for("srd")
        (8948, 8192)
        >>> PacketConfig(mtu=4096).mtu_for("tcp"), PacketConfig().mtu_for("roce")
        (4096, 4096)
        """
        if "mtu" in self.model_fields_set:
            return int(self.mtu)
        return DEFAULT_MTU[transport]

    def header_for(self, transport: str) -> int:
        """Wire bytes per packet on ``transport``: ``header_bytes`` if set, else the
        transport's default (:data:`fabricsim.transport.TRANSPORT_HEADER_BYTES`).

        Example
        -------
        >>> PacketConfig().header_for("roce"), PacketConfig(header_bytes=0).header_for("ib")
        (82, 0)
        """
        if self.header_bytes is not None:
            return int(self.header_bytes)
        return TRANSPORT_HEADER_BYTES[transport]


def show_bytes(x: float) -> str:
    """A size as a user wrote it: binary prefixes for multiples of 1024, else decimal.

    >>> show_bytes(200e3), show_bytes(65536), show_bytes(12)
    ('200 KB', '64 KiB', '12 B')
    """
    if x >= 1024 and x % 1024 == 0:
        return format_bytes(x)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if x >= scale:
            return f"{x / scale:.6g} {unit}"
    return f"{x:g} B"


_b = show_bytes


def _t(x: float) -> str:
    return format_time(x)


def _wire(c: PacketConfig) -> float:
    """Bytes of one full packet on the wire, with the transport's MTU and header (IB's,
    the smallest, when the transport is the fabric's and not known here: the packet
    backend checks again with :meth:`PacketConfig.for_transport`)."""
    t = c.transport or "ib"
    return c.mtu_for(t) + c.header_for(t)


@_packet_rule("pfc-xon-below-xoff", "packet.pfc.xon", "below packet.pfc.xoff",
              "a paused port resumes only when its queue falls below XON, so XON at or above "
              "XOFF would pause and resume on the same byte (or never resume)")
def _xon(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.pfc.xon is not None and c.pfc.xon >= c.pfc.xoff:
        yield "packet.pfc.xon", f"{_b(c.pfc.xon)} is not below packet.pfc.xoff ({_b(c.pfc.xoff)})"


@_packet_rule("pfc-xoff-one-packet", "packet.pfc.xoff", "at least one packet (mtu + header)",
              "a port that pauses before one whole packet has arrived stops its sender in "
              "the middle of every packet")
def _xoff(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.pfc.xoff < _wire(c):
        yield "packet.pfc.xoff", (f"{_b(c.pfc.xoff)} is less than one packet "
                                  f"({_b(_wire(c))} on the wire)")


@_packet_rule("pfc-headroom-one-packet", "packet.pfc.headroom",
              "at least one packet (mtu + header)",
              "headroom absorbs what is in flight after a pause is sent, at least the packet "
              "being serialised; less would drop lossless packets")
def _headroom(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.pfc.headroom is not None and c.pfc.headroom < _wire(c):
        yield "packet.pfc.headroom", (f"{_b(c.pfc.headroom)} is less than one packet "
                                      f"({_b(_wire(c))} on the wire)")


@_packet_rule("pfc-fits-buffer", "packet.pfc.xoff + packet.pfc.headroom",
              "at most packet.switch_buffer and packet.nic_buffer",
              "one port's lossless queue (XOFF plus the headroom behind it) must fit in the "
              "buffer, or a paused port still drops lossless packets")
def _fits(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if not c.pfc.enabled:
        return
    need = c.pfc.xoff + (c.pfc.headroom or 0.0)
    what = ("packet.pfc.xoff + packet.pfc.headroom" if c.pfc.headroom is not None
            else "packet.pfc.xoff")
    for name, buf in (("switch_buffer", c.switch_buffer), ("nic_buffer", c.nic_buffer)):
        if need > buf:
            yield f"packet.{name}", f"{_b(buf)} is less than {what} ({_b(need)})"
            return


@_packet_rule("buffer-one-packet", "packet.switch_buffer, nic_buffer, lossy_queue",
              "at least one packet (mtu + header)",
              "a buffer or queue that cannot hold one packet drops every packet it receives")
def _buffers(c: PacketConfig) -> Iterator[tuple[str, str]]:
    for name in ("switch_buffer", "nic_buffer", "lossy_queue"):
        v = float(getattr(c, name))
        if v < _wire(c):
            yield f"packet.{name}", f"{_b(v)} is less than one packet ({_b(_wire(c))} on the wire)"


@_packet_rule("ecn-kmin-below-kmax", "packet.ecn.kmin",
              "below packet.ecn.kmax (equal only with pmax = 1, DCTCP-style step marking)",
              "RED marks with a probability rising from 0 at Kmin to Pmax at Kmax; with "
              "Kmin >= Kmax there is no ramp and Pmax is never used")
def _kmin(c: PacketConfig) -> Iterator[tuple[str, str]]:
    e = c.ecn
    if e.kmin > e.kmax or (e.kmin == e.kmax and e.pmax < 1):
        yield "packet.ecn.kmin", (f"{_b(e.kmin)} is not below packet.ecn.kmax "
                                  f"({_b(e.kmax)}; pmax {e.pmax:g})")


@_packet_rule("ecn-kmin-in-buffer", "packet.ecn.kmin", "below packet.switch_buffer",
              "an egress queue can never grow past the switch buffer, so ECN would never mark")
def _kmin_buf(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.ecn.enabled and c.ecn.kmin >= c.switch_buffer:
        yield "packet.ecn.kmin", (f"{_b(c.ecn.kmin)} is not below packet.switch_buffer "
                                  f"({_b(c.switch_buffer)})")


@_packet_rule("timers-positive", "packet.dcqcn.timer, alpha_timer, cnp_interval, "
              "rate_reduce_period, "
              "packet.pfc.watchdog.detect, restore, deadlock_window",
              f"at least {MIN_TIMER_S * 1e6:g} µs",
              "NIC and switch timers tick in microseconds; a zero timer would fire without "
              "end at one instant (and a zero CNP interval send a CNP per marked packet)")
def _timers(c: PacketConfig) -> Iterator[tuple[str, str]]:
    vals = {"packet.dcqcn.timer": c.dcqcn.timer, "packet.dcqcn.alpha_timer":
            c.dcqcn.alpha_timer, "packet.dcqcn.cnp_interval": c.dcqcn.cnp_interval,
            "packet.dcqcn.rate_reduce_period": c.dcqcn.rate_reduce_period,
            "packet.pfc.watchdog.detect": c.pfc.watchdog.detect,
            "packet.pfc.watchdog.restore": c.pfc.watchdog.restore,
            "packet.pfc.deadlock_window": (MIN_TIMER_S if c.pfc.deadlock_window is None
                                           else c.pfc.deadlock_window)}
    for f, v in vals.items():
        if v < MIN_TIMER_S:
            yield f, f"{_t(v)} is shorter than {MIN_TIMER_S * 1e6:g} µs"


@_packet_rule("rto-minimum", "packet.rto", f"at least {MIN_TIMER_S * 1e6:g} µs",
              "a retransmission timer shorter than a network round trip (microseconds even "
              "inside one rack) fires before any ACK can return and resends every packet")
def _rto(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.rto is not None and c.rto < MIN_TIMER_S:
        yield "packet.rto", f"{_t(c.rto)} is shorter than {MIN_TIMER_S * 1e6:g} µs"


@_packet_rule("dcqcn-byte-counter-one-packet", "packet.dcqcn.byte_counter",
              "at least one packet (mtu)",
              "the byte counter raises the rate once per byte_counter bytes sent; below one "
              "packet every packet (or, at 0, no byte at all) would be a rate increase")
def _byte_counter(c: PacketConfig) -> Iterator[tuple[str, str]]:
    mtu = c.mtu_for(c.transport or "ib")
    if c.dcqcn.byte_counter < mtu:
        yield "packet.dcqcn.byte_counter", (f"{_b(c.dcqcn.byte_counter)} is less than one "
                                            f"packet ({_b(mtu)})")


@_packet_rule("dcqcn-rai-below-rhai", "packet.dcqcn.rai", "at most packet.dcqcn.rhai",
              "hyper increase is the faster of DCQCN's two increase steps")
def _rai(c: PacketConfig) -> Iterator[tuple[str, str]]:
    d = c.dcqcn
    if d.rai is not None and d.rhai is not None and d.rai > d.rhai:
        yield "packet.dcqcn.rai", (f"{d.rai * 8 / 1e6:g} Mb/s is above packet.dcqcn.rhai "
                                   f"({d.rhai * 8 / 1e6:g} Mb/s)")


@_packet_rule("credits-one-packet", "packet.credit_bytes", "at least one packet (mtu + header)",
              "a sender needs credits for a whole packet before it starts one; fewer credits "
              "than a packet would never let the link send")
def _credits(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.credit_bytes is not None and c.credit_bytes < _wire(c):
        yield "packet.credit_bytes", (f"{_b(c.credit_bytes)} is less than one packet "
                                      f"({_b(_wire(c))} on the wire)")


@_packet_rule("uet-trim-in-queue", "packet.uet.trim_threshold_bytes",
              "at least one packet (mtu + header), at most packet.lossy_queue",
              "a switch trims packets that arrive at an egress queue holding more than the "
              "threshold; below one packet it trims nearly every packet, above the queue's "
              "size it never trims (the queue drops first)")
def _trim(c: PacketConfig) -> Iterator[tuple[str, str]]:
    u = c.uet
    if c.transport not in (None, "uet") or not u.feature("trimming"):
        return
    if u.trim_threshold_bytes > c.lossy_queue:
        yield "packet.uet.trim_threshold_bytes", (
            f"{_b(u.trim_threshold_bytes)} is above packet.lossy_queue "
            f"({_b(c.lossy_queue)})")
    elif u.trim_threshold_bytes < _wire(c):
        yield "packet.uet.trim_threshold_bytes", (
            f"{_b(u.trim_threshold_bytes)} is less than one packet ({_b(_wire(c))} on the "
            "wire)")


@_packet_rule("stuck-receiver-times-ordered", "packet.stuck_receiver.end",
              "after packet.stuck_receiver.start",
              "a receiver cannot recover before it hangs")
def _stuck_times(c: PacketConfig) -> Iterator[tuple[str, str]]:
    s = c.stuck_receiver
    if s is not None and s.end <= s.start:
        yield "packet.stuck_receiver.end", (f"{_t(s.end)} is not after "
                                            f"packet.stuck_receiver.start ({_t(s.start)})")


@_packet_rule("stuck-receiver-one-endpoint", "packet.stuck_receiver",
              "rank or node, not both", "one stuck endpoint is named once")
def _stuck_one(c: PacketConfig) -> Iterator[tuple[str, str]]:
    s = c.stuck_receiver
    if s is not None and s.rank is not None and s.node is not None:
        yield "packet.stuck_receiver", f"both rank {s.rank} and node {s.node!r} are given"


def _traffic(c: PacketConfig) -> Iterator[tuple[str, TrafficSpec]]:
    if c.traffic is not None:
        yield "packet.traffic", c.traffic
    for i, b in enumerate(c.background):
        yield f"packet.background[{i}]", b


@_packet_rule("traffic-moves-bytes", "packet.traffic.nbytes, packet.background[i].nbytes",
              "above 0", "a transfer of zero bytes moves no data: its 'completion time' "
              "is one header-only packet's latency, not an incast or a collective")
def _nbytes(c: PacketConfig) -> Iterator[tuple[str, str]]:
    for where, t in _traffic(c):
        if t.nbytes <= 0:
            yield f"{where}.nbytes", f"it is {_b(t.nbytes)}"


@_packet_rule("incast-receiver-not-sender", "packet.traffic.ranks",
              "without packet.traffic.receiver (incast)",
              "a rank sending to itself never leaves its GPU, so it is no incast sender")
def _self_send(c: PacketConfig) -> Iterator[tuple[str, str]]:
    for where, t in _traffic(c):
        if t.pattern == "incast" and t.ranks is not None and t.receiver in t.ranks:
            yield f"{where}.ranks", f"the receiver, rank {t.receiver}, is among {t.ranks}"


@_packet_rule("traffic-ranks-exist", "packet.traffic.ranks, senders",
              "ranks >= 0, senders at most len(ranks)",
              "only existing ranks can send, and an incast has one sender per listed rank")
def _ranks(c: PacketConfig) -> Iterator[tuple[str, str]]:
    for where, t in _traffic(c):
        if t.ranks is not None:
            if any(r < 0 for r in t.ranks):
                yield f"{where}.ranks", f"{t.ranks} holds a negative rank"
            elif not t.ranks:
                yield f"{where}.ranks", "the list is empty"
            elif t.senders is not None and t.senders > len(t.ranks):
                yield f"{where}.senders", (f"{t.senders} senders but only {len(t.ranks)} "
                                           "ranks are listed")


@_packet_rule("until-after-start", "packet.until",
              "after 0 and after the first traffic start",
              "a run that stops before any traffic starts simulates nothing and reports "
              "empty statistics")
def _until(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.until is None:
        return
    first = min((t.start for _, t in _traffic(c)), default=0.0)
    if c.until <= first:
        yield "packet.until", (f"{_t(c.until)} is not after the first traffic start "
                               f"({_t(first)})")


@_packet_rule("dscp-valid", "packet.classes[i].dscp",
              "values 0..63, each in one class only",
              "DSCP is a 6-bit field of the IP header and a switch maps each value to one "
              "priority")
def _dscp(c: PacketConfig) -> Iterator[tuple[str, str]]:
    seen: dict[int, str] = {}
    for i, k in enumerate(c.classes):
        for d in k.dscp:
            if not 0 <= d <= 63:
                yield f"packet.classes[{i}].dscp", f"DSCP {d} is outside 0..63"
            elif d in seen:
                yield f"packet.classes[{i}].dscp", (f"DSCP {d} is also in class "
                                                    f"{seen[d]!r}")
            seen.setdefault(d, k.name)


@_packet_rule("cwnd-within-window", "packet.init_cwnd", "at most packet.window",
              "the initial congestion window cannot exceed the largest window")
def _cwnd(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.init_cwnd > c.window:
        yield "packet.init_cwnd", f"{c.init_cwnd} is above packet.window ({c.window})"


@_packet_rule("loss-plausible", "packet.loss_rate", f"at most {MAX_PLAUSIBLE_LOSS:.0%} "
              "(more needs --force)",
              "a link that drops more than 1 % of its packets is broken and taken out of "
              "service; go-back-N over several such links retransmits most of the run",
              extreme=True)
def _loss(c: PacketConfig) -> Iterator[tuple[str, str]]:
    if c.loss_rate > MAX_PLAUSIBLE_LOSS:
        yield "packet.loss_rate", f"{c.loss_rate:g} ({c.loss_rate:.1%} per link)"


def _refuse_violations(cfg: PacketConfig) -> None:
    """Raise the first violation of a (not extreme) rule of :data:`PACKET_RULES`."""
    for rule in PACKET_RULES:
        if not rule.extreme:
            errs = rule.violations(cfg)
            if errs:
                raise errs[0]


def extreme_violations(cfg: PacketConfig) -> list[tuple[Rule, str, str]]:
    """``(rule, field, detail)`` of every extreme (legal, but forced only) setting."""
    return [(r, f, d) for r in PACKET_RULES if r.extreme for f, d in r.check(cfg)]


def parse_packet_config(data: Any) -> PacketConfig:
    """Validate a ``packet:`` mapping (``None`` gives the defaults)."""
    from pydantic import ValidationError

    from fabricsim._strict import config_error

    try:
        return PacketConfig.model_validate(data or {})
    except ValidationError as e:
        raise config_error(e, "packet") from None
