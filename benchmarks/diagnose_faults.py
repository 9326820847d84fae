"""Fault localisation (``fabricsim diagnose``) on simulated faults: top-1 precision.

For random clusters (DGX H100 servers on a rail-optimized fat-tree of radix-8 switches, so
that some server pairs meet only above the leaves) one fault is injected with the flow
backend — a NIC's uplink degraded to 30 %, a leaf-to-spine link degraded to 30 %, or a
NIC's uplink flapping (down half of every millisecond) — every pair of servers runs a
256 MiB all-reduce on the faulty cluster, and :func:`fabricsim.interop.diagnose.diagnose`
ranks suspects against the healthy analytic model. A trial counts as found when the top
suspect (with the components the runs cannot tell apart from it) holds the faulty host
(NIC faults) or the faulty link. Prints one JSON line per trial and a summary per fault
type. Target (issue 13): >= 90 % top-1 on single faults.

Usage: python benchmarks/diagnose_faults.py [--trials N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from typing import Any

from fabricsim.backends.flow import FlowBackend
from fabricsim.collectives import run_collective
from fabricsim.fabric import LinkKind, NodeKind, build_cluster
from fabricsim.interop.diagnose import PairRun, diagnose

SIZE = 2**28


def trial(kind: str, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    servers = rng.choice([8, 12, 16])
    fab = build_cluster("dgx-h100", servers, topology="rail-optimized", radix=8)
    per = fab.info.gpus_per_server
    hosts = [f"gpu-node-{i:02d}" for i in range(servers)]
    if kind in ("nic_degraded", "nic_flapping"):
        ups = [int(x) for x in fab.links_of(LinkKind.NIC_LEAF)
               if fab.node_kind[fab.link_src[x]] == NodeKind.NIC]
        link = rng.choice(ups)
        srv = int(fab.node_server[fab.link_src[link]])
        truth = f"host {hosts[srv]}"
    else:
        ls = [int(x) for x in fab.links_of(LinkKind.LEAF_SPINE)
              if fab.node_kind[fab.link_src[x]] == NodeKind.LEAF]
        link = rng.choice(ls)
        truth = f"link {fab.link_name(link)}"
    name = fab.link_name(link)
    fault: dict[str, Any] = {"type": "link_degraded", "link": name, "factor": 0.3}
    if kind == "nic_flapping":
        fault = {"type": "link_flapping", "link": name, "period": "1ms", "duty": 0.5}
    backend = FlowBackend(faults=[fault])
    runs = []
    t0 = time.perf_counter()
    for a, b in itertools.combinations(range(servers), 2):
        ranks = [*range(a * per, (a + 1) * per), *range(b * per, (b + 1) * per)]
        r = run_collective(fab, "all_reduce", SIZE, ranks=ranks, backend=backend)
        runs.append(PairRun((hosts[a], hosts[b]), "all_reduce", SIZE, r.time * 1e6))
    rep = diagnose(runs, fabric=fab)
    top = rep.suspects[0].names() if rep.suspects else ()
    return {"kind": kind, "seed": seed, "servers": servers, "fault": name, "truth": truth,
            "top": rep.suspects[0].component if rep.suspects else None,
            "found": truth in top, "identified": rep.identified,
            "runs": len(runs), "wall_s": round(time.perf_counter() - t0, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8, help="trials per fault type")
    a = ap.parse_args(argv)
    summary: dict[str, Any] = {}
    for kind in ("nic_degraded", "leaf_spine_degraded", "nic_flapping"):
        found = 0
        for seed in range(a.trials):
            row = trial(kind, 1000 * seed + len(kind))
            found += row["found"]
            sys.stdout.write(json.dumps(row) + "\n")
        summary[kind] = {"trials": a.trials, "top1": round(found / a.trials, 3)}
    sys.stdout.write(json.dumps({"summary": True, **summary, "target_top1": 0.9}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
