"""UET vs RoCEv2 vs InfiniBand on incast, all-to-all and all-to-all with a link down.

A 16-host two-level fat-tree (4 leaves x 4 hosts, 4 spines), 100 Gb/s and 1 us per link,
MTU 4096, per-flow ECMP hashing. One JSON line per transport and case: completion time,
p99 flow completion time, drops, trims, retransmissions, PFC pauses, status and wall time.

Run: python benchmarks/uet_compare.py
"""

from __future__ import annotations

import json
import time

import numpy as np

from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.packet import PacketBackend
from fabricsim.schedule import Schedule, Step

CAP = 12.5e9


def cases() -> dict[str, tuple[Schedule, list[dict[str, object]]]]:
    g = host_fat_tree(16, bandwidth=CAP, latency=1e-6).gpus
    incast = Schedule(steps=(Step(src=g[8:16], dst=np.full(8, g[0]), nbytes=[2e6]),))
    pairs = [(i, j) for i in range(16) for j in range(16) if i != j]
    a2a = Schedule(steps=(Step(src=g[[i for i, _ in pairs]], dst=g[[j for _, j in pairs]],
                               nbytes=[256e3]),))
    down = [{"type": "link_down", "link": "leaf0->spine0", "start": "20us"}]
    return {"incast": (incast, []), "all_to_all": (a2a, []), "all_to_all_link_down": (a2a, down)}


def main() -> None:
    fab = host_fat_tree(16, bandwidth=CAP, latency=1e-6)
    for case, (sch, faults) in cases().items():
        for transport in ("uet", "roce", "ib"):
            t0 = time.perf_counter()
            r = PacketBackend(transport=transport, mtu=4096, faults=faults,
                              event_budget=50_000_000).run(sch, fab)
            wall = time.perf_counter() - t0
            e = r.extra
            fct = np.asarray(e["fct"]["end"]) - np.asarray(e["fct"]["start"])
            print(json.dumps({
                "case": case, "transport": transport, "status": e["status"],
                "complete": e["complete"], "time_us": round(r.time * 1e6, 1),
                "p99_fct_us": round(float(np.percentile(fct, 99)) * 1e6, 1) if fct.size
                else None,
                "drops": sum(e["drops"].values()), "trims": e["trims"],
                "retransmits": e["retransmits"], "timeouts": e["timeouts"],
                "pause_frames": e["pause_frames"], "wall_s": round(wall, 3)}))


if __name__ == "__main__":
    main()
