"""Speed of automatic selection: a full nccl-tests sweep (8 B .. 16 GiB, factor 2, 32 sizes)
of all_reduce on 16,384 GPUs (2048 x dgx-h100) and on 131,072 GPUs (16,384 x dgx-h100).

Prints one JSON line per case: fabric build seconds (not counted) and the sweep's seconds
(first call included: every candidate algorithm x protocol is compiled, then each size is
evaluated from the cached model). Targets: < 1 s and < 5 s.

Usage: python benchmarks/bench_speed.py [--nodes 2048 16384]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from fabricsim.collectives import choose
from fabricsim.fabric import build_cluster


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, nargs="*", default=[2048, 16384])
    args = ap.parse_args(argv)
    sizes = [8 * 2**i for i in range(32)]
    for nodes in args.nodes:
        t0 = time.perf_counter()
        fab = build_cluster("dgx-h100", nodes)
        t1 = time.perf_counter()
        picks = [choose(fab, "all_reduce", s) for s in sizes]
        t2 = time.perf_counter()
        again = [choose(fab, "all_reduce", s) for s in sizes]
        t3 = time.perf_counter()
        assert again == picks
        print(json.dumps({
            "case": "all_reduce auto sweep", "gpus": fab.n_gpus, "sizes": len(sizes),
            "build_s": round(t1 - t0, 3), "sweep_s": round(t2 - t1, 3),
            "cached_sweep_s": round(t3 - t2, 4),
            "target_s": 1.0 if fab.n_gpus <= 16384 else 5.0,
            "algorithms": sorted({p.algorithm for p in picks}),
            "t_8B_us": round(picks[0].time * 1e6, 2),
            "t_16GiB_ms": round(picks[-1].time * 1e3, 2)}))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
