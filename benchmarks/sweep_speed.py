"""Sweep throughput: analytic training points through ``fabricsim.sweeps.run_sweep`` with
1 and 2 local workers and on Ray's local mode, against a plain Python loop over the API.

The points are a grid of training steps (Llama 3 8B on 8 to 128 DGX H100 over two
fabrics, every TP, PP, global batch, micro-batch and sequence length of the axes below);
layouts that do not divide or fit are failed points, stored with their error, as in a real
study. Issue 14's targets, at 10,000 points: the sweep's per-point overhead over the plain
loop < 20 % (its 1-worker time against the loop's), and >= 1.7x with 2 workers (on a
machine with 2 free cores: the load average is printed with each figure).

The plain loop is what a careful user would write: the same points in the same order,
each through :func:`fabricsim.sweeps.run_point` with one :class:`FabricCache` (points of
one cluster share its Fabric, as ``run_sweep`` does); ``naive_loop`` builds a fresh
cluster per point, timed on the first ``--naive`` points. The sweep's time includes
expanding and validating every point, hashing, the DuckDB store and the process pool;
importing DuckDB and pandas (once per process) is timed apart.

Usage: python benchmarks/sweep_speed.py [--points 10000] [--ray-points 1000] [--repeat 3]
Prints one JSON line per measurement and a summary line: each repeat times the loop, one
worker and two back to back; overhead and speed-up per repeat, their medians, and the
ratios of the best times.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fabricsim.sweeps import FabricCache, SweepSpec, points, run_point, run_sweep

AXES: dict[str, list[Any]] = {
    "cluster.nodes": [8, 16, 32, 64, 128],
    "cluster.fabric": ["ib-ndr", "roce-400g"],
    "training.tp": [1, 2, 4, 8],
    "training.pp": [1, 2, 4, 8, 16],
    "training.global_batch": [1024, 2048, 4096, 8192, 16384],
    "training.micro_batch": [1, 2],
    "training.seq_len": [1024, 2048, 4096, 8192, 16384],
}


def spec(n: int = 10_000) -> SweepSpec:
    """The grid, its last axes dropped (their first value kept) while it still has at
    least ``n`` points: 10,000 is the whole grid, 1,000 drops micro-batch and sequence
    length; runs take the first ``n`` points."""
    axes = dict(AXES)
    fixed: dict[str, Any] = {}
    for name in reversed(list(AXES)):
        rest = math.prod(len(v) for v in axes.values()) // len(axes[name])
        if rest < n:
            break
        fixed[name.split(".", 1)[1]] = axes.pop(name)[0]
    return SweepSpec.model_validate({
        "name": f"speed-{n}", "kind": "train",
        "scenario": {"cluster": {"system": "dgx-h100"},
                     "training": {"model": "llama3-8b", "zero": 1,
                                  "recompute": "selective", **fixed}},
        "axes": axes})


def cpu_pressure() -> float | None:
    """Share of the last 10 s some task waited for a CPU (Linux PSI), if available: high
    values mean other work shared the cores during the measurement."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return float(line.split("avg10=")[1].split()[0]) / 100


def emit(**fields: Any) -> None:
    fields["load_avg_1m"] = round(os.getloadavg()[0], 2)
    fields["cpu_pressure_10s"] = cpu_pressure()
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--naive", type=int, default=300,
                    help="points of the naive loop (a fresh cluster per point)")
    ap.add_argument("--ray-points", type=int, default=1000, help="0 skips the Ray run")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each sweep (medians and bests reported: the machine is "
                         "shared, single runs are noisy)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    import duckdb  # noqa: F401  (a fixed cost of the process, not of any point)
    import pandas  # noqa: F401

    emit(case="import_store_modules", seconds=round(time.perf_counter() - t0, 3))
    sw = spec(a.points)
    t0 = time.perf_counter()
    grid = points(sw)
    emit(case="expand_points", points=len(grid), seconds=round(time.perf_counter() - t0, 3))
    pts = grid[:a.points]
    n = len(pts)

    t0 = time.perf_counter()
    for p in pts[:a.naive]:
        run_point(sw.kind, p.scenario)
    naive = (time.perf_counter() - t0) / max(1, min(a.naive, n))
    emit(case="naive_loop", points=min(a.naive, n), ms_per_point=round(naive * 1e3, 3))

    out: dict[str, Any] = {"points": n, "naive_loop_ms_per_point": round(naive * 1e3, 3)}
    # each repeat times the loop, then 1 and 2 workers, back to back: ratios within a
    # repeat share the machine's state; medians over repeats smooth the rest
    times: dict[str, list[float]] = {"loop": [], "1w": [], "2w": []}
    failed = 0
    for rep in range(a.repeat):
        t0 = time.perf_counter()
        fabrics = FabricCache()
        failed = sum("error" in run_point(sw.kind, p.scenario, fabrics) for p in pts)
        loop = time.perf_counter() - t0
        times["loop"].append(loop)
        emit(case="plain_loop", repeat=rep, points=n, failed=failed,
             seconds=round(loop, 3), ms_per_point=round(loop / n * 1e3, 3))
        for workers in (1, 2):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                counts = run_sweep(sw, Path(d) / "s.duckdb", workers=workers, limit=n)
                took = time.perf_counter() - t0
            assert counts["run"] == n and counts["failed"] == failed, counts
            times[f"{workers}w"].append(took)
            emit(case=f"sweep_{workers}w", repeat=rep, points=n, seconds=round(took, 3),
                 ms_per_point=round(took / n * 1e3, 3))
    out["failed"] = failed
    for name, ts in times.items():
        out[f"{name}_s"] = round(statistics.median(ts), 3)
        out[f"{name}_best_s"] = round(min(ts), 3)
    pairs = list(zip(times["loop"], times["1w"], times["2w"], strict=True))
    out["overhead_1w_per_repeat"] = [round(w1 / lp - 1, 3) for lp, w1, _ in pairs]
    out["speedup_2w_per_repeat"] = [round(w1 / w2, 3) for _, w1, w2 in pairs]
    out["overhead_1w"] = round(statistics.median(out["overhead_1w_per_repeat"]), 3)
    out["speedup_2w"] = round(statistics.median(out["speedup_2w_per_repeat"]), 3)
    out["overhead_1w_best"] = round(out["1w_best_s"] / out["loop_best_s"] - 1, 3)
    out["speedup_2w_best"] = round(out["1w_best_s"] / out["2w_best_s"], 3)

    if a.ray_points > 0:
        try:
            import ray
        except ModuleNotFoundError:
            emit(case="ray_local", skipped="ray is not installed (the 'ray' extra)")
        else:
            m = a.ray_points
            rs = spec(m)
            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            start = time.perf_counter() - t0
            try:
                with tempfile.TemporaryDirectory() as d:
                    t0 = time.perf_counter()
                    counts = run_sweep(rs, Path(d) / "r.duckdb", limit=m, ray=True)
                    took = time.perf_counter() - t0
            finally:
                ray.shutdown()
            emit(case="ray_local_2cpu", points=counts["run"], ray_start_s=round(start, 3),
                 seconds=round(took, 3), ms_per_point=round(took / counts["run"] * 1e3, 3))
            out["ray_local_points"] = counts["run"]
            out["ray_local_s"] = round(took, 3)
    emit(case="summary", **out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
