"""Wall-clock speed of the packet backend, with ns-3 side by side on the single-flow case.

Prints one JSON line per case with ``events_per_s`` and ``packets_per_s`` (data packets
leaving senders per wall-second; ``hop_packets_per_s`` counts every link transmission).
Rates use the engine's own wall time after a warm-up run (numba compile and cache load
excluded); ``total_wall_s`` includes building the state arrays and the report, and
``total_cpu_s`` is the process's CPU time over the same span (steadier than wall time
on a loaded machine).

Cases: one 100 MB flow over a 100 Gb/s, 1 µs link at MTU 1500 and 9000 (TCP-like, 52 B of
headers per packet, as ns-3's TCP); a 64-host fat-tree 32:1 incast (RoCEv2, DCQCN); a
128-host ring all-reduce on 400 Gb/s links (RoCEv2); a 128-host 127:1 incast over TCP on
one switch. The ns-3 peers (single flow, incast) are built from benchmarks/ns3/*.cc with
g++ and pkg-config at run time; if that fails the output says so.

Run: python benchmarks/packet_rate.py [--quick] [--cases incast,ring] [--transports roce,ib]
(``--cases``: any of single-flow, incast, ring, tcp-incast, default all; ``--transports``:
the transports of the incast and ring cases, default roce).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.packet import PacketBackend
from fabricsim.backends.packet.testbeds import point_to_point, star
from fabricsim.schedule import Schedule, Step

HERE = Path(__file__).resolve().parent


def emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def timed(case: str, be: PacketBackend, sch: Schedule, fab, **info) -> dict:  # type: ignore[no-untyped-def]
    t0, c0 = time.perf_counter(), time.process_time()
    r = be.run(sch, fab)
    total = time.perf_counter() - t0
    cpu = time.process_time() - c0
    e = r.extra
    w = e["wall_s"]
    out = {"case": case, "tool": "fabricsim-packet", **info,
           "simulated_s": r.time, "events": e["events"], "data_packets": e["data_packets"],
           "hop_packets": e["hop_packets"], "wall_s": round(w, 4),
           "total_wall_s": round(total, 4), "total_cpu_s": round(cpu, 4),
           "events_per_s": round(e["events"] / w),
           "packets_per_s": round(e["data_packets"] / w),
           "hop_packets_per_s": round(e["hop_packets"] / w)}
    emit(out)
    return out


def ns3_build(name: str, case: str) -> Path | None:
    """Build benchmarks/ns3/<name>.cc; None (and a line saying why) when it cannot be."""
    src = HERE / "ns3" / f"{name}.cc"
    if shutil.which("g++") is None or shutil.which("pkg-config") is None:
        emit({"case": case, "tool": "ns-3", "available": False,
              "reason": "g++ or pkg-config not found"})
        return None
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "ns3-core", "ns3-network", "ns3-internet",
         "ns3-point-to-point", "ns3-applications"], capture_output=True, text=True)
    if flags.returncode != 0:
        emit({"case": case, "tool": "ns-3", "available": False,
              "reason": "ns-3 development files not installed (apt-get install libns3-dev "
                        "libgsl-dev libsqlite3-dev): " + flags.stderr.strip()[:200]})
        return None
    exe = Path(tempfile.mkdtemp()) / name
    b = subprocess.run(["g++", "-O2", str(src), "-o", str(exe), *flags.stdout.split()],
                       capture_output=True, text=True)
    if b.returncode != 0:
        emit({"case": case, "tool": "ns-3", "available": False,
              "reason": "build failed: " + b.stderr.strip()[-300:]})
        return None
    return exe


def ns3_single_flow(mtus: list[int]) -> dict[int, dict]:
    """Build and run the ns-3 peer; returns {mtu: result} (empty when unavailable)."""
    exe = ns3_build("single_flow", "single-flow")
    if exe is None:
        return {}
    out = {}
    for mtu in mtus:
        p = subprocess.run([str(exe), str(mtu)], capture_output=True, text=True)
        if p.returncode != 0:
            emit({"case": "single-flow", "tool": "ns-3", "mtu": mtu, "available": False,
                  "reason": p.stderr.strip()[-300:]})
            continue
        d = json.loads(p.stdout.strip().splitlines()[-1])
        out[mtu] = d
        emit({"case": "single-flow", "tool": "ns-3", "mtu": mtu,
              "simulated_s": d["completion_s"], "wall_s": d["wall_s"],
              "data_packets": d["data_packets"], "packets_per_s": round(d["packets_per_s"])})
    return out


def incast_128(quick: bool) -> None:
    """127 hosts send to one over TCP on one switch (100 Gb/s, 1 us links, MTU 1500), ours
    then ns-3's (benchmarks/ns3/incast.cc: the same star, drop-tail queues of 1,000
    packets, RTO floor 200 us), and the ratio of data packets per wall-second."""
    n, size = 128, 2.5e5 if quick else 1e6
    fab = star(n, rate=100e9 / 8, latency=1e-6, transport="tcp")
    g = np.asarray(fab.gpus)
    sch = Schedule(steps=(Step(src=g[1:], dst=np.full(n - 1, g[0]),
                               nbytes=np.full(n - 1, size)),))
    be = PacketBackend(mtu=1448, header_bytes=52, transport="tcp", event_budget=10**9)
    ours = timed("incast-128", be, sch, fab, transport="tcp", hosts=n, nbytes=size)
    exe = ns3_build("incast", "incast-128")
    if exe is None:
        return
    p = subprocess.run([str(exe), str(n), str(int(size)), "1500"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        emit({"case": "incast-128", "tool": "ns-3", "available": False,
              "reason": p.stderr.strip()[-300:]})
        return
    d = json.loads(p.stdout.strip().splitlines()[-1])
    emit({"case": "incast-128", "tool": "ns-3", "simulated_s": d["completion_s"],
          "wall_s": d["wall_s"], "data_packets": d["data_packets"],
          "packets_per_s": round(d["packets_per_s"])})
    emit({"case": "incast-128", "compare": "fabricsim-packet / ns-3",
          "packets_per_s_ratio": round(ours["packets_per_s"] / d["packets_per_s"], 1),
          "simulated_s": {"fabricsim": ours["simulated_s"], "ns-3": d["completion_s"]}})


CASES = ("single-flow", "incast", "ring", "tcp-incast")


def main(quick: bool = False, cases: tuple[str, ...] = CASES,
         transports: tuple[str, ...] = ("roce",)) -> None:
    # ---- warm-up: compile or load every specialisation once, outside the measurements
    p2p = point_to_point(rate=100e9 / 8, latency=1e-6, transport="tcp")
    tiny = Schedule(steps=(Step(src=[0], dst=[1], nbytes=[1e5]),))
    for tr in sorted({"tcp", "roce", "ib", *transports}):
        PacketBackend(transport=tr).run(tiny, p2p)
    mtus = [1500, 9000]
    # ---- single flow, ours then ns-3
    if "single-flow" in cases:
        ours = {}
        for mtu in mtus:
            sch = Schedule(steps=(Step(src=[0], dst=[1], nbytes=[100e6]),))
            be = PacketBackend(mtu=mtu - 52, header_bytes=52, transport="tcp",
                               event_budget=10**9)
            ours[mtu] = timed("single-flow", be, sch, p2p, mtu=mtu, transport="tcp")
        peer = ns3_single_flow(mtus)
        for mtu in mtus:
            if mtu in peer:
                emit({"case": "single-flow", "compare": "fabricsim-packet / ns-3", "mtu": mtu,
                      "packets_per_s_ratio": round(ours[mtu]["packets_per_s"] /
                                                   peer[mtu]["packets_per_s"], 1),
                      "simulated_s": {"fabricsim": ours[mtu]["simulated_s"],
                                      "ns-3": peer[mtu]["completion_s"]},
                      "target_ratio": 10})
    # ---- 64-host fat-tree, 32:1 incast (RoCEv2 with DCQCN, or the other transports)
    if "incast" in cases:
        ft = host_fat_tree(64, bandwidth=50e9, latency=1e-6)
        g = ft.gpus
        senders = g[np.r_[8:40]]
        inc = Schedule(steps=(Step(src=senders, dst=np.full(32, g[0]),
                                   nbytes=[2e6 if quick else 8e6]),))
        for tr in transports:
            timed("fat-tree-64-incast-32:1", PacketBackend(transport=tr, mtu=4096), inc, ft,
                  transport=tr, hosts=64, senders=32)
    # ---- 128-host ring all-reduce on 400 Gb/s links
    if "ring" in cases:
        ft2 = host_fat_tree(128, hosts_per_leaf=16, spines=16, bandwidth=50e9, latency=1e-6)
        g2 = ft2.gpus
        size = 8e6 if quick else 32e6
        ring = Schedule(steps=(Step(src=g2, dst=np.roll(g2, -1), nbytes=[size / 128],
                                    repeat=2 * 127),))
        for tr in transports:
            timed("ring-all-reduce-128", PacketBackend(transport=tr, mtu=4096,
                                                       event_budget=10**9), ring, ft2,
                  transport=tr, hosts=128, nbytes=size)
    # ---- 128-host incast over TCP, ns-3 side by side
    if "tcp-incast" in cases:
        incast_128(quick)


def _csv(choices: tuple[str, ...]):  # type: ignore[no-untyped-def]
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}")
        return items
    return parse


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller transfers")
    ap.add_argument("--cases", type=_csv(CASES), default=CASES,
                    help="comma-separated cases to run (default: all)")
    ap.add_argument("--transports", type=_csv(("roce", "ib", "tcp", "srd", "uet")),
                    default=("roce",),
                    help="transports of the incast and ring cases (default: roce)")
    a = ap.parse_args()
    main(quick=a.quick, cases=a.cases, transports=a.transports)
