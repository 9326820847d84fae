"""Transport facts every backend shares: packet framing per scale-out transport.

A message that leaves its server travels as packets of ``mtu`` payload bytes, each with
``header_bytes`` of transport framing on the wire. The packet backend sends those packets
explicitly (with these MTUs and headers unless its ``packet:`` section sets others); the
analytic and flow backends, which move bytes as fluid, charge the same framing as a link
efficiency ``mtu / (mtu + header)`` on network links, so all three give one answer for one
uncontended transfer.

* ``ib`` 26 B: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 (InfiniBand Architecture Specification
  Vol. 1, ch. 5-7; no GRH inside a subnet; the 16 B RETH of an RDMA WRITE is in the first
  packet of a message only and is not modelled). MTU 4096 (NCCL's default IB MTU).
* ``roce`` 82 B: Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (IBTA RoCEv2
  annex A17) + 20 B preamble/SFD/IFG (IEEE 802.3); no VLAN tag (DSCP-based PFC). MTU 4096
  (RoCE's largest, on a 9000 B Ethernet MTU).
* ``tcp`` 90 B: Ethernet 14 + FCS 4 + IPv4 20 + TCP 20 + 12 B timestamp option (RFC 7323)
  + 20 B preamble/SFD/IFG. Payload 8948 B on a 9000 B jumbo MTU.
* ``srd`` 82 B, an estimate: Ethernet 14 + FCS 4 + IPv4 20 + UDP-like 8 + 16 B assumed for
  the SRD header (AWS does not publish its format) + 20 B preamble/SFD/IFG. Payload 8192 B
  (EFA's maximum message segment on a 9001 B MTU).
* ``uet`` 122 B, an estimate: Ethernet 14 + FCS 4 + IPv4 20 + UDP 8 (UET runs over UDP,
  IANA port 4793) + 12 B PDS header of a reliable-unordered request + 44 B standard SES
  header (the sizes public summaries of the Ultra Ethernet 1.0 specification give;
  optional integrity and security headers are not counted) + 20 B preamble/SFD/IFG.
  MTU 4096 (as RoCE's, on a 9000 B Ethernet MTU).
* ``slingshot`` 84 B, an upper bound: HPE Slingshot's HPC Ethernet, which the cxi
  provider NCCL runs over needs (libfabric ``fi_cxi(7)``), carries at most 2048 payload
  bytes and a 64 B header per packet ("HPC MTU is fixed at 2k. The largest HPC header is
  64 bytes", HPE's ``shs-cxi-driver``, ``cass_core.h``), plus the 20 B preamble/SFD/IFG of
  IEEE 200G, the driver's default gap. MTU 2048.

NVLink and PCIe rates in the catalog are data rates: no framing is charged on them.

Example
-------
>>> round(framing_efficiency("ib"), 4), round(framing_efficiency("roce"), 4)
(0.9937, 0.9804)
>>> framing_efficiency("")  # no scale-out transport (one server)
1.0
"""

from __future__ import annotations

from fabricsim.errors import ConfigError

#: Wire bytes each packet adds to its payload, by transport (see the module docstring).
TRANSPORT_HEADER_BYTES: dict[str, int] = {"ib": 26, "roce": 82, "tcp": 90, "srd": 82,
                                         "uet": 122, "slingshot": 84}
#: Payload bytes per packet (the MTU as the transport's packets carry data).
DEFAULT_MTU: dict[str, int] = {"ib": 4096, "roce": 4096, "tcp": 8948, "srd": 8192,
                              "uet": 4096, "slingshot": 2048}
TRANSPORTS = tuple(TRANSPORT_HEADER_BYTES)


def framing_efficiency(transport: str, mtu: int | None = None,
                       header_bytes: int | None = None) -> float:
    """Payload share of the wire for ``transport`` (1 for none): ``mtu / (mtu + header)``.

    ``mtu`` and ``header_bytes`` default to the transport's.
    """
    if not transport:
        return 1.0
    if transport not in TRANSPORT_HEADER_BYTES:
        raise ConfigError(f"unknown transport {transport!r}; one of "
                          f"{', '.join(TRANSPORTS)}", field="transport")
    m = DEFAULT_MTU[transport] if mtu is None else mtu
    h = TRANSPORT_HEADER_BYTES[transport] if header_bytes is None else header_bytes
    return m / (m + h)
