"""All-to-all at MoE scale on the flow backend, through the path the CLI takes.

``fabricsim bench alltoall --backend flow`` on DGX H100 clusters (rail-optimized, the
tuner's algorithm: direct sends with PXN relays across rails), 1 GiB per rank, on
InfiniBand NDR (d-mod-k routing tables) and RoCEv2 400G (per-flow ECMP hashing: the hard
case, with many distinct rates and finish times). Issue 12's targets: 512 GPUs in under
15 s and 1,024 GPUs in under 60 s, memory under 8 GiB. The analytic backend's time for the
tuner's all-to-all is printed beside it, as the peer of the same run: the two agree where
contention does not decide the time, and the ratio shows what it adds where it does.

``--precision P`` (default 0, exact) settles finishes within P of a transfer's duration as
one event (``FlowBackend(precision=P)``, the CLI's ``--flow-precision``).

Usage: python benchmarks/flow_alltoall.py [--nodes 64,128] [--fabrics ib-ndr,roce-400g]
                                          [--precision 1e-3]
Prints one JSON line per (nodes, fabric).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import fabricsim as fs
from fabricsim.backends.flow import FlowBackend
from fabricsim.collectives import build_schedule, run_collective


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="64,128")
    ap.add_argument("--fabrics", default="ib-ndr,roce-400g")
    ap.add_argument("--size", type=int, default=2**30)
    ap.add_argument("--precision", type=float, default=0.0)
    a = ap.parse_args()
    for nodes in (int(x) for x in a.nodes.split(",")):
        for fabric in a.fabrics.split(","):
            t0 = time.perf_counter()
            fab = fs.build_cluster("dgx-h100", nodes=nodes, fabric=fabric)
            sch = build_schedule(fab, "alltoall", a.size)
            t1 = time.perf_counter()
            res = FlowBackend(precision=a.precision).run(sch, fab)
            t2 = time.perf_counter()
            ana = run_collective(fab, "alltoall", a.size).time
            print(json.dumps({
                "gpus": fab.n_gpus, "fabric": fabric, "algorithm": sch.algorithm,
                "precision": a.precision,
                "transfers": int(sum(s.n for s in sch.steps)),
                "completion_us": round(res.time * 1e6, 2),
                "analytic_us": round(ana * 1e6, 2),
                "flow_over_analytic": round(res.time / ana, 4),
                "build_s": round(t1 - t0, 2), "simulate_s": round(t2 - t1, 2),
                "total_s": round(t2 - t0, 2),
                "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                      / 2**20, 2)}), flush=True)


if __name__ == "__main__":
    main()
