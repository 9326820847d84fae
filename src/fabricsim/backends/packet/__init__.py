"""Packet-level backend: InfiniBand credits, RoCEv2 PFC/ECN/DCQCN, pause storms, loss.

Example
-------
>>> PacketBackend().name
'packet'
"""

from fabricsim.backends.packet.backend import PacketBackend
from fabricsim.backends.packet.config import PacketConfig, parse_packet_config
from fabricsim.backends.packet.report import jain

__all__ = ["PacketBackend", "PacketConfig", "jain", "parse_packet_config"]
