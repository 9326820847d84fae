"""Speed of plan-parallel: Llama-3 405B on 16,384 H100 (2,048 DGX H100), analytic backend.

Prints one JSON line: candidates evaluated, rejected, engine calls, wall seconds (target
< 60 s), and the best configuration.
"""

from __future__ import annotations

import json
import sys
import time

import fabricsim as fs
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.planner import plan_parallel


def main() -> int:
    t0 = time.perf_counter()
    fab = fs.build_cluster("dgx-h100", 2048)
    built = time.perf_counter() - t0
    plan = plan_parallel(get_model("llama3-405b"), fab, global_batch=2048, seq_len=8192,
                         top=3)
    best = plan.results[0] if plan.results else None
    sys.stdout.write(json.dumps({
        "case": "llama3-405b on 16384 x h100, gbs 2048, seq 8192",
        "build_s": round(built, 3), "search_s": round(plan.seconds, 3),
        "evaluated": plan.evaluated, "rejected_memory": plan.rejected_memory,
        "rejected_shape": plan.rejected_shape, "engine_calls": plan.comm_calls,
        "best": best.parallel if best else None,
        "best_mfu": round(best.mfu, 4) if best else None}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
