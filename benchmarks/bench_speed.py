"""Speed of automatic selection: a full nccl-tests sweep (8 B .. 16 GiB, factor 2, 32 sizes)
of all_reduce on 16,384 GPUs (2048 x dgx-h100) and on 131,072 GPUs (16,384 x dgx-h100).

Prints one JSON line per case: fabric build seconds (not counted), the first sweep's
seconds (fresh process, NCCL's choice: only the chosen candidates are compiled), a repeat
sweep from the cached models, and which algorithms were compiled. Targets: < 1 s and < 5 s.

``--check`` then sweeps with the least-time choice (``Tuner(select="fastest")``: every
candidate is bounded, the ones that can win are compiled; ``fastest_sweep_s``) and with
its exhaustive scan (``prune=False``: every candidate compiled) and reports the largest
relative difference of the two's predicted times (must be 0: the pruning is exact) and
whether every (algorithm, protocol) pick is the same.

Usage: python benchmarks/bench_speed.py [--nodes 2048 16384] [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import fabricsim.collectives.tuner as tuner
from fabricsim.collectives import choose, clear_cache
from fabricsim.fabric import build_cluster


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, nargs="*", default=[2048, 16384])
    ap.add_argument("--check", action="store_true",
                    help="compare with the exhaustive scan (slow at 131k GPUs)")
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
        compiled = sorted(tuner.default_tuner(fab).compiled(fab))
        row: dict[str, object] = {
            "case": "all_reduce auto sweep", "gpus": fab.n_gpus, "sizes": len(sizes),
            "build_s": round(t1 - t0, 3), "sweep_s": round(t2 - t1, 3),
            "cached_sweep_s": round(t3 - t2, 4),
            "target_s": 1.0 if fab.n_gpus <= 16384 else 5.0,
            "algorithms": sorted({p.algorithm for p in picks}), "compiled": compiled,
            "t_8B_us": round(picks[0].time * 1e6, 2),
            "t_16GiB_ms": round(picks[-1].time * 1e3, 2)}
        if args.check:  # the least-time choice: branch and bound against the full scan
            fastest = tuner.Tuner(select="fastest")
            t4 = time.perf_counter()
            picks = [fastest.choose(fab, "all_reduce", s) for s in sizes]
            row["fastest_sweep_s"] = round(time.perf_counter() - t4, 3)
            exhaustive = tuner.Tuner(select="fastest", prune=False)
            t4 = time.perf_counter()
            full = [exhaustive.choose(fab, "all_reduce", s) for s in sizes]
            row["exhaustive_s"] = round(time.perf_counter() - t4, 3)
            row["same_picks"] = [(p.algorithm, p.protocol) for p in picks] == \
                [(p.algorithm, p.protocol) for p in full]
            row["max_rel_diff"] = max(abs(p.time - q.time) / q.time
                                      for p, q in zip(picks, full, strict=True))
        print(json.dumps(row))
        sys.stdout.flush()
        clear_cache(fab)
    return 0


if __name__ == "__main__":
    sys.exit(main())
