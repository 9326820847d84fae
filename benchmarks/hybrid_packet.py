"""The hybrid backend against the full packet backend, and at a size the packet backend
cannot run (issue 39).

The case: N hosts on a two-level fat-tree (16 per leaf, 100 Gb/s links of 1 us, RoCEv2:
PFC, ECN and DCQCN), an incast (a quarter of the hosts, all on other leaves, send 256 KiB
each to host 0) at the same time as a 16 MiB all-reduce over every host (recursive
halving then doubling: 2 log2 N steps of N transfers). Timed three ways in one process:
the flow backend alone, the hybrid (flow run + packet runs of the ``--links`` most
congested links, ``--workers`` processes), and the full packet backend (up to
``--packet-max`` hosts). For each: p50, p99 and max of the transfers' completion times
(FCT), wall time, and the error of the flow and hybrid figures against the packet ones.

Usage: python benchmarks/hybrid_packet.py [--sizes 64,256,4096] [--links 8] [--workers 2]
                                          [--packet-max 256]
One JSON line per N.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time

import numpy as np

from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.hybrid import HybridBackend
from fabricsim.backends.packet import PacketBackend
from fabricsim.schedule import Schedule, Step

RATE = 100e9 / 8
PER_LEAF = 16
INCAST_BYTES = 256 * 1024
ALLREDUCE_BYTES = 16 * 2**20


def case(n: int) -> tuple[Schedule, object]:
    """The fabric and the incast-plus-all-reduce schedule of ``n`` hosts."""
    fab = host_fat_tree(n, hosts_per_leaf=PER_LEAF, bandwidth=RATE, latency=1e-6)
    g = np.asarray(fab.gpus)
    senders = g[PER_LEAF:PER_LEAF + n // 4]
    steps = [Step(src=senders, dst=np.full(senders.size, g[0]),
                  nbytes=np.full(senders.size, float(INCAST_BYTES)), label="incast")]
    rounds = int(math.log2(n))
    ranks = np.arange(n)
    size = float(ALLREDUCE_BYTES)
    prev: tuple[int, ...] = ()
    for k in list(range(rounds)) + list(range(rounds - 1, -1, -1)):
        size_k = size / 2 ** (k + 1)  # halving on the way down, doubling back up
        steps.append(Step(src=g[ranks], dst=g[ranks ^ (1 << k)],
                          nbytes=np.full(n, size_k), deps=prev, label=f"round {k}"))
        prev = (len(steps) - 1,)
    return Schedule(steps=tuple(steps), collective="incast+all_reduce"), fab


def stats(fct: np.ndarray) -> dict[str, float]:
    return {"p50_us": float(np.quantile(fct, 0.5) * 1e6),
            "p99_us": float(np.quantile(fct, 0.99) * 1e6), "max_us": float(fct.max() * 1e6)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64,256,4096")
    ap.add_argument("--links", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--packet-max", type=int, default=256)
    a = ap.parse_args()
    for n in (int(x) for x in a.sizes.split(",")):
        sch, fab = case(n)
        t0 = time.perf_counter()
        hy = HybridBackend(links=a.links, workers=a.workers, transport="roce").run(sch, fab)
        t1 = time.perf_counter()
        f = hy.extra["fct"]
        row: dict[str, object] = {
            "n": n, "transfers": int(sum(s.n for s in sch.steps)),
            "links_simulated": hy.extra["links_simulated"],
            "flow": stats(np.asarray(f["flow"])), "hybrid": stats(np.asarray(f["hybrid"])),
            "hybrid_wall_s": round(t1 - t0, 2)}
        t2 = time.perf_counter()
        FlowBackend(record_timeline=True, exploit_repeats=False).run(sch, fab)
        row["flow_wall_s"] = round(time.perf_counter() - t2, 2)
        if n <= a.packet_max:
            t3 = time.perf_counter()
            pk = PacketBackend(transport="roce").run(sch, fab)
            row["packet_wall_s"] = round(time.perf_counter() - t3, 2)
            fct = np.asarray(pk.extra["fct"]["end"]) - np.asarray(pk.extra["fct"]["start"])
            row["packet"] = stats(fct)
            for name in ("flow", "hybrid"):
                mine = row[name]
                assert isinstance(mine, dict)
                row[f"{name}_err"] = {k: round(mine[k] / row["packet"][k] - 1, 4)
                                      for k in ("p50_us", "p99_us", "max_us")}
        row["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                    / 2**20, 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
