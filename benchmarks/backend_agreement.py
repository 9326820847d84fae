"""Worst disagreement of the three backends on random uncontended schedules (issue 10).

For each fabric, ``--schedules`` random schedules (link-disjoint transfers of 1-64 MiB,
1-3 repetitions, a chain of up to 3 steps, a random NCCL protocol; see
:mod:`fabricsim.backends.agreement`) are timed by the analytic, flow and packet backends.
Prints one JSON line per fabric (worst relative difference to the analytic time, the case,
wall time per backend) and a summary line. Target: worst <= 2 %.

Usage: python benchmarks/backend_agreement.py [--schedules 40]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from fabricsim.backends import get_backend
from fabricsim.backends.agreement import uncontended_schedule
from fabricsim.fabric import build_cluster

FABRICS = {
    "dgx-h100 x2 ib-ndr": dict(system="dgx-h100", nodes=2),
    "dgx-h100 x2 roce-400g": dict(system="dgx-h100", nodes=2, fabric="roce-400g"),
    "dgx-h100 x4 1 GPU/node ib-ndr": dict(system="dgx-h100", nodes=4, gpus_per_node=1),
    "dgx-a100 x1": dict(system="dgx-a100", nodes=1),
    "dgx-h100 x8 fat-tree 2:1": dict(system="dgx-h100", nodes=8, topology="fat-tree",
                                     oversubscription=2.0),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--schedules", type=int, default=40)
    args = ap.parse_args(argv)
    worst_all = 0.0
    for name, kw in FABRICS.items():
        fab = build_cluster(kw.pop("system"), kw.pop("nodes"), **kw)
        wall = {"analytic": 0.0, "flow": 0.0, "packet": 0.0}
        worst, case = 0.0, {}
        for seed in range(args.schedules):
            sch = uncontended_schedule(fab, seed)
            t = {}
            for b in wall:
                t0 = time.perf_counter()
                t[b] = get_backend(b).run(sch, fab).time
                wall[b] += time.perf_counter() - t0
            d = max(abs(t[b] / t["analytic"] - 1.0) for b in t)
            if d >= worst:
                worst, case = d, {"seed": seed, "protocol": sch.protocol or "none",
                                  **{f"{b}_us": round(v * 1e6, 2) for b, v in t.items()}}
        worst_all = max(worst_all, worst)
        print(json.dumps({"fabric": name, "schedules": args.schedules,
                          "worst_rel_diff": round(worst, 5), "worst_case": case,
                          "wall_s": {b: round(v, 2) for b, v in wall.items()}}))
        sys.stdout.flush()
    print(json.dumps({"summary": True, "worst_rel_diff": round(worst_all, 5),
                      "target": 0.02, "ok": worst_all <= 0.02}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
