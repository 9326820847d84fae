"""The ``packet:`` section of a scenario, validated (errors name ``packet.<field>``).

Sizes accept numbers of bytes or strings (``"64KiB"``), times numbers of seconds or
strings (``"55us"``), rates numbers of bytes/s or strings (``"40Mbps"``). Defaults follow
the DCQCN paper (Zhu et al., SIGCOMM 2015: Kmin 5 KB, Kmax 200 KB, Pmax 1 %, g = 1/256,
55 µs timers, 10 MB byte counter, 50 µs CNP interval, R_AI 40 Mb/s at 40 Gb/s).

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

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from fabricsim._strict import StrictModel
from fabricsim.errors import FabricsimError
from fabricsim.units import parse_bandwidth, parse_size, parse_time


class _M(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _parse(fn: Any, v: Any) -> float:
    try:
        return float(fn(v))
    except FabricsimError as e:  # pydantic reports ValueError under the field's path
        raise ValueError(e.message) from None


def _size(v: Any) -> float:
    return _parse(parse_size, v)


def _time(v: Any) -> float:
    return _parse(parse_time, v)


def _rate(v: Any) -> float:
    return _parse(parse_bandwidth, v)


class WatchdogConfig(_M):
    """PFC watchdog: detection time of a stuck (continuously paused) queue, restore check."""

    enabled: bool = True
    detect: float = 10e-3
    restore: float = 10e-3

    _t = field_validator("detect", "restore", mode="before")(_time)


class PfcConfig(_M):
    """Priority flow control: per ingress port and priority XOFF/XON thresholds (bytes)."""

    enabled: bool = True
    xoff: float = 256e3
    xon: float | None = None
    headroom: float | None = None
    watchdog: WatchdogConfig = Field(default_factory=WatchdogConfig)

    _s = field_validator("xoff", "xon", "headroom", mode="before")(
        lambda v: None if v is None else _size(v))


class EcnConfig(_M):
    """RED-style ECN marking at switch egress queues: 0 below ``kmin``, rising linearly to
    ``pmax`` at ``kmax``, 1 above."""

    enabled: bool = True
    kmin: float = 5e3
    kmax: float = 200e3
    pmax: float = Field(0.01, gt=0, le=1)

    _s = field_validator("kmin", "kmax", mode="before")(_size)


class DcqcnConfig(_M):
    """DCQCN reaction point at the sender NIC. ``rai``/``rhai`` default to 1/1000 and 1/100
    of the line rate (the paper's 40 Mb/s and 400 Mb/s at 40 Gb/s)."""

    enabled: bool = True
    g: float = Field(1 / 256, gt=0, lt=1)
    rai: float | None = None
    rhai: float | None = None
    timer: float = 55e-6
    alpha_timer: float = 55e-6
    byte_counter: float = 10e6
    cnp_interval: float = 50e-6
    min_rate: float = 100e6 / 8

    _r = field_validator("min_rate", mode="before")(_rate)
    _ro = field_validator("rai", "rhai", mode="before")(lambda v: None if v is None else
                                                       _rate(v))
    _t = field_validator("timer", "alpha_timer", "cnp_interval", mode="before")(_time)
    _s = field_validator("byte_counter", mode="before")(_size)


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

    _s = field_validator("nbytes", mode="before")(_size)
    _t = field_validator("start", mode="before")(_time)


#: Wire bytes each packet adds to its payload (``mtu`` is the payload), by transport:
#: headers, trailers and, on Ethernet, the 20 B of preamble (7), start-of-frame
#: delimiter (1) and minimum inter-frame gap (12) every frame occupies on the wire.
#:
#: * ``ib`` 26 B: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 (InfiniBand Architecture Specification
#:   Vol. 1, ch. 5-7; no GRH inside a subnet; the 16 B RETH of an RDMA WRITE is in the
#:   first packet of a message only and is not modelled).
#: * ``roce`` 82 B: Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (IBTA RoCEv2
#:   annex A17) + 20 B preamble/SFD/IFG (IEEE 802.3); no VLAN tag (DSCP-based PFC).
#: * ``tcp`` 90 B: Ethernet 14 + FCS 4 + IPv4 20 + TCP 20 + 12 B timestamp option
#:   (RFC 7323) + 20 B preamble/SFD/IFG.
#: * ``srd`` 82 B, an estimate: Ethernet 14 + FCS 4 + IPv4 20 + UDP-like 8 + 16 B assumed
#:   for the SRD header (AWS does not publish its format) + 20 B preamble/SFD/IFG.
#:
#: The header is charged on every link of a flow that leaves its server (including its
#: PCIe hops); flows that stay on NVLink/PCIe inside a server carry none (their link
#: rates in the fabric are data rates).
TRANSPORT_HEADER_BYTES = {"ib": 26, "roce": 82, "tcp": 90, "srd": 82}


class PacketConfig(_M):
    """Everything the packet backend can be told by a scenario.

    ``mtu`` is the payload (message bytes) per packet; ``header_bytes`` the wire bytes
    added to each packet, by default the transport's (:data:`TRANSPORT_HEADER_BYTES`). An
    Ethernet (IP) MTU of 1500 with TCP/IPv4 and timestamps is ``mtu: 1448``; RoCEv2 with
    a 4096 B IB MTU needs an Ethernet MTU of at least 4096 + 48 (IP, UDP, BTH, ICRC).
    """

    mtu: int = Field(4096, ge=64, le=65536)
    transport: Literal["ib", "roce", "tcp", "srd"] | None = None
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
    classes: list[TrafficClass] = Field(default_factory=lambda: [
        TrafficClass(name="rdma", dscp=[26], lossless=True, ecn=True),
        TrafficClass(name="default", dscp=[0], lossless=False, ecn=False),
    ])
    loss_rate: float = Field(0.0, ge=0, lt=1)
    rto: float | None = None
    ack_every: int = Field(8, ge=1)
    window: int = Field(1 << 30, ge=1)
    init_cwnd: int = Field(10, ge=1)
    stuck_receiver: StuckReceiver | None = None
    traffic: TrafficSpec | None = None
    background: list[TrafficSpec] = Field(default_factory=list)
    until: float | None = None
    bins: int = Field(200, ge=10, le=5000)
    event_budget: int = Field(200_000_000, ge=1000)
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

    def header_for(self, transport: str) -> int:
        """Wire bytes per packet on ``transport``: ``header_bytes`` if set, else the
        transport's default.

        Example
        -------
        >>> PacketConfig().header_for("roce"), PacketConfig(header_bytes=0).header_for("ib")
        (82, 0)
        """
        if self.header_bytes is not None:
            return int(self.header_bytes)
        return TRANSPORT_HEADER_BYTES[transport]


def parse_packet_config(data: Any) -> PacketConfig:
    """Validate a ``packet:`` mapping (``None`` gives the defaults)."""
    from pydantic import ValidationError

    from fabricsim._strict import config_error

    try:
        return PacketConfig.model_validate(data or {})
    except ValidationError as e:
        raise config_error(e, "packet") from None
