"""Memory of flow and analytic runs against the up-front estimates that refuse big runs.

Each case runs in a fresh process (peak resident memory, ``ru_maxrss``, is per process):
an all-to-all of 1 GiB per rank on DGX H100 servers over RoCE 400G, timed by the flow
backend (ECMP, queue pairs, spraying) or by the analytic one (``predict_time``). Prints one
JSON line per case: the estimate (:mod:`fabricsim.backends.flow.memory` for flow,
:data:`fabricsim.backends.memory.ANALYTIC_BYTES_PER_TRANSFER` × routed transfers for
analytic), the measured growth of peak memory over the process before the run, and their
ratio. The estimates are meant to err high (a ratio above 1), never far below.

Usage: python benchmarks/flow_memory.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASE = r"""
import json, resource, sys
from fabricsim.fabric import build_cluster
from fabricsim.collectives.api import build_schedule, predict_time
from fabricsim.backends.flow import FlowBackend
from fabricsim.backends.flow.memory import estimate
from fabricsim.backends.memory import ANALYTIC_BYTES_PER_TRANSFER
from fabricsim.backends.analytic_shared import split_queue_pairs
backend, gpus, qps, routing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fab = build_cluster("dgx-h100", gpus // 8, fabric="roce-400g", params={"qps": qps})
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if backend == "flow":  # the schedule first (its selection runs the analytic backend)
    sch = build_schedule(fab, "alltoall", 2**30)
    est = estimate(sch, fab, routing, qps).bytes
    before = peak()
    FlowBackend(routing=routing, qps=qps, memory_limit_bytes=1e15).run(sch, fab)
    after = peak()
else:  # selection and timing from a fresh process, counted afterwards
    before = peak()
    predict_time(fab, "alltoall", 2**30)
    after = peak()
    sch = build_schedule(fab, "alltoall", 2**30)
    n = max(split_queue_pairs(fab, s.src, s.dst, s.nbytes,
                              s.hashes if s.hashes is not None else s.src.astype("uint64")
                              )[0].size for s in sch.steps)
    est = n * ANALYTIC_BYTES_PER_TRANSFER
print(json.dumps({"estimate_bytes": est, "measured_bytes": after - before}))
"""

CASES = [("flow", 256, 1, "ecmp"), ("flow", 512, 1, "ecmp"), ("flow", 512, 4, "ecmp"),
         ("flow", 512, 1, "spray"), ("analytic", 512, 1, "ecmp"), ("analytic", 512, 4, "ecmp"),
         ("analytic", 1024, 1, "ecmp"), ("analytic", 1024, 4, "ecmp")]
QUICK = [("flow", 256, 1, "ecmp"), ("analytic", 512, 1, "ecmp")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="two small cases only")
    args = ap.parse_args(argv)
    for backend, gpus, qps, routing in QUICK if args.quick else CASES:
        out = subprocess.run([sys.executable, "-c", CASE, backend, str(gpus), str(qps),
                              routing], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps({"backend": backend, "gpus": gpus, "qps": qps, "routing": routing,
                          "estimate_gib": round(r["estimate_bytes"] / 2**30, 3),
                          "measured_gib": round(r["measured_bytes"] / 2**30, 3),
                          "estimate_over_measured": round(
                              r["estimate_bytes"] / max(r["measured_bytes"], 1), 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
