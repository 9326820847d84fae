"""Sweep throughput: points per second through ``fabricsim.sweeps.run_sweep`` with 1 and 2
workers, against a plain Python loop over the same points (``run_point`` each), as the
overhead of the store, hashing and process pool. Issue 14's targets: < 20 % overhead,
>= 1.7x with 2 workers (on a machine with 2 free cores). Prints JSON lines.

Points: bench sweeps of all_reduce on DGX H100 over node counts x fabrics x sizes (each
a real analytic run). Usage: python benchmarks/sweep_speed.py [--points N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from fabricsim.sweeps import SweepSpec, points, run_point, run_sweep


def spec(n: int) -> SweepSpec:
    sizes = [f"{2**k}" for k in range(10, 34)]
    nodes = list(range(1, 1 + max(1, n // (2 * len(sizes)) + 1)))
    return SweepSpec.model_validate({
        "name": "speed", "kind": "bench", "mode": "random", "samples": n, "seed": 1,
        "scenario": {"cluster": {"system": "dgx-h100"}, "collective": {}},
        "axes": {"cluster.nodes": nodes, "cluster.fabric": ["ib-ndr", "roce-400g"],
                 "collective.maxbytes": sizes}})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1000)
    a = ap.parse_args(argv)
    sw = spec(a.points)
    pts = points(sw)
    t0 = time.perf_counter()
    for p in pts:
        run_point(sw.kind, p.scenario)
    loop = time.perf_counter() - t0
    out: dict[str, float] = {"points": len(pts), "plain_loop_s": round(loop, 3)}
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            run_sweep(sw, Path(d) / "s.duckdb", workers=workers)
            out[f"sweep_{workers}w_s"] = round(time.perf_counter() - t0, 3)
    out["overhead_1w"] = round(out["sweep_1w_s"] / loop - 1, 3)
    out["speedup_2w"] = round(out["sweep_1w_s"] / out["sweep_2w_s"], 3)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
