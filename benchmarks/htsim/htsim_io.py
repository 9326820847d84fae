"""Files for, and output of, the UEC's htsim (``htsim_uec``), used by ``uet_vs_htsim.py``.

htsim is a separate C++ program (the Ultra Ethernet Consortium's htsim, BSD-licensed);
nothing of it is copied here. This module only writes its two input files and reads its
standard output:

* :func:`topology_file`: a two-tier (leaf-spine) fat-tree in htsim's ``-topo`` format
  (``Nodes``, ``Tiers``, ``Podsize`` header, then one ``Tier`` block per tier with
  ``Downlink_speed_Gbps``, ``Radix_Down``, ``Radix_Up``, ``Downlink_Latency_ns``,
  ``Switch_Latency_ns``); hosts ``0..k-1`` sit on leaf 0, as in fabricsim's fat-tree;
* :func:`connection_matrix`: htsim's ``-tm`` format (``Nodes N``, ``Connections C``, then
  ``src->dst id I start 0 size S`` per flow);
* :func:`bdp_packets`: the bandwidth-delay product in packets as ``main_uec.cpp`` derives
  it (the unloaded RTT across the fabric's diameter, a data packet and an ACK serialised
  on every hop), from which htsim sizes its queues (1 BDP with trimming) and its ECN
  thresholds (0.2 and 0.8 BDP);
* :func:`parse_output`: per-flow start and finish times (µs, the sender's view: its last
  ACK) and the final counters line (``New``, ``Rtx``, ``NACKs``, ...).

Example
-------
>>> print(topology_file(16, 4, 4, 100, 1000).splitlines()[:3])
['Nodes 16', 'Tiers 2', 'Podsize 16']
>>> bdp_packets(100.0, 1e-6, 4160, tiers=2)
29
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

#: Size of htsim's UEC ACK / NACK and of a trimmed header (``uecpacket.h``), bytes.
HTSIM_ACK_BYTES = 64
#: Environment variable naming the ``htsim_uec`` binary.
ENV_BIN = "HTSIM_UEC_BIN"


def topology_file(n: int, hosts_per_leaf: int, spines: int, gbps: int,
                  latency_ns: int, switch_latency_ns: int = 0) -> str:
    """A non-blocking two-tier fat-tree: ``n / hosts_per_leaf`` leaves, each with one
    uplink to each of ``spines`` spines, every link ``gbps`` and ``latency_ns``."""
    if n % hosts_per_leaf:
        raise ValueError(f"{n} hosts are not a multiple of {hosts_per_leaf} per leaf")
    leaves = n // hosts_per_leaf
    return "\n".join([
        f"Nodes {n}", "Tiers 2", f"Podsize {n}", "",
        "Tier 0", f"Downlink_speed_Gbps {gbps}", f"Radix_Down {hosts_per_leaf}",
        f"Radix_Up {spines}", f"Downlink_Latency_ns {latency_ns}",
        f"Switch_Latency_ns {switch_latency_ns}", "",
        "Tier 1", f"Downlink_speed_Gbps {gbps}", f"Radix_Down {leaves}",
        f"Downlink_Latency_ns {latency_ns}", f"Switch_Latency_ns {switch_latency_ns}", "",
    ])


def connection_matrix(n: int, flows: Iterable[tuple[int, int, int]]) -> str:
    """htsim's connection matrix of ``(src, dst, bytes)`` flows, all starting at 0; flow
    ``i`` gets id ``i + 1`` (htsim reserves id 0).

    >>> print(connection_matrix(4, [(0, 3, 1000)]))
    Nodes 4
    Connections 1
    0->3 id 1 start 0 size 1000
    <BLANKLINE>
    """
    rows = [f"{s}->{d} id {i + 1} start 0 size {int(b)}"
            for i, (s, d, b) in enumerate(flows)]
    return "\n".join([f"Nodes {n}", f"Connections {len(rows)}", *rows, ""])


def bdp_packets(gbps: float, link_latency: float, packet_bytes: int, tiers: int = 2) -> int:
    """htsim's BDP in packets: ``ceil(rtt · rate / packet)``, with ``rtt`` twice the
    diameter's latency plus a data packet and an ACK serialised on each of its links."""
    diameter = 2 * tiers                       # links host -> ... -> top tier -> ... -> host
    ser_ns = (packet_bytes + HTSIM_ACK_BYTES) * 8 / gbps * diameter
    rtt = 2 * diameter * link_latency + ser_ns * 1e-9
    return math.ceil(rtt * gbps * 1e9 / 8 / packet_bytes)


_START = re.compile(r"^Flow (\S+) flowId (\d+) .*? starting at ([0-9.eE+-]+)")
_FINISH = re.compile(r"^Flow (\S+) flowId (\d+) .*? finished at ([0-9.eE+-]+)")
_TOTALS = re.compile(r"^New: (\d+) Rtx: (\d+) RTS: (\d+) Bounced: (\d+) ACKs: (\d+) "
                     r"NACKs: (\d+) Pulls: (\d+)")


def parse_output(text: str) -> dict[str, object]:
    """Flow start / finish times (µs, keyed by htsim flow id) and the totals line.

    >>> out = ("Flow Uec_0_3 flowId 1 uecSrc 0 starting at 0\\n"
    ...        "Flow Uec_0_3 flowId 1 uecSrc 0 finished at 12.5 total messages 1\\n"
    ...        "New: 3 Rtx: 1 RTS: 0 Bounced: 0 ACKs: 2 NACKs: 1 Pulls: 0 sleek_pkts: 0\\n")
    >>> r = parse_output(out)
    >>> r["finish_us"], r["totals"]["nacks"]
    ({1: 12.5}, 1)
    """
    start: dict[int, float] = {}
    finish: dict[int, float] = {}
    totals: dict[str, int] = {}
    for line in text.splitlines():
        if m := _START.match(line):
            start[int(m[2])] = float(m[3])
        elif m := _FINISH.match(line):
            finish.setdefault(int(m[2]), float(m[3]))
        elif m := _TOTALS.match(line):
            keys = ("new", "rtx", "rts", "bounced", "acks", "nacks", "pulls")
            totals = {k: int(v) for k, v in zip(keys, m.groups(), strict=True)}
    return {"start_us": start, "finish_us": finish, "totals": totals}


def find_binary(given: str | None) -> tuple[str | None, str]:
    """The ``htsim_uec`` binary to run: ``given`` (a file or a directory holding it), else
    ``$HTSIM_UEC_BIN``, else ``htsim_uec`` on ``PATH``. Returns ``(path, "")`` or
    ``(None, reason)``."""
    cand = given or os.environ.get(ENV_BIN)
    if cand:
        p = Path(cand).expanduser()
        if p.is_dir():
            p = p / "htsim_uec"
        if p.is_file() and os.access(p, os.X_OK):
            return str(p), ""
        src = "--htsim" if given else f"${ENV_BIN}"
        return None, f"{src}={cand}: no executable htsim_uec there"
    found = shutil.which("htsim_uec")
    if found:
        return found, ""
    return None, (f"htsim_uec not found: build the UEC htsim (its sim/datacenter target "
                  f"htsim_uec) and pass --htsim PATH or set ${ENV_BIN}")
