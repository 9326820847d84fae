"""What ``FlowBackend(precision=p)`` saves and costs on the hard case of the flow engine.

The case: a 1 GiB all-to-all on a non-blocking two-level host fat-tree (the platform of
``vs_simgrid.py``: sqrt(N) hosts per leaf, 400 Gb/s links of 1 us), every cross-leaf
transfer's spine picked by pair hash (ECMP collisions: thousands of distinct rates, one
finish event per distinct finish time when exact). For each N the exact run (p = 0) and
each p are timed one after the other in this process (fabric build + run, after a small
warm-up that loads numba's cache); for each p the JSON line gives the completion's error
and the distribution of every transfer's end-time error relative to its exact duration
(median, p99, max; positive = later). The exact run is skipped above ``--exact-max``
hosts (at N = 1,024 it takes on the order of two hours on one core).

``--simgrid`` adds SimGrid 3.32's wall on the same platform and all-to-all with d-mod-k
routing (it cannot hash per pair), run under Debian's python3 (see vs_simgrid.py): the
peer for the same size of problem, as a ratio. N must then be a perfect square.

Usage: python benchmarks/flow_precision.py [--sizes 256,512,1024] [--precision 1e-3,1e-2]
                                           [--exact-max 512] [--simgrid]
One JSON line per (N, p).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from vs_simgrid import BW, LAT, alltoall, per_leaf, simgrid_available, simgrid_run

from fabricsim.backends.flow import FlowBackend, host_fat_tree


def run(n: int, p: float) -> tuple[float, float, dict[str, np.ndarray]]:
    """(completion s, wall s, transfers) of the hashed all-to-all on N hosts at p."""
    t0 = time.perf_counter()
    fab = host_fat_tree(n, hosts_per_leaf=per_leaf(n), bandwidth=BW, latency=LAT)
    res = FlowBackend(precision=p).run(alltoall(n, fab, "hash"), fab)
    wall = time.perf_counter() - t0
    tr = res.extra["transfers"]
    order = np.lexsort((tr["transfer"], tr["step"]))
    return res.time, wall, {k: np.asarray(tr[k])[order] for k in ("start", "end")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="256,512,1024")
    ap.add_argument("--precision", default="1e-4,1e-3,1e-2")
    ap.add_argument("--exact-max", type=int, default=512,
                    help="largest N whose exact run is timed (default 512)")
    ap.add_argument("--simgrid", action="store_true",
                    help="also time SimGrid's d-mod-k all-to-all at each square N")
    a = ap.parse_args()
    run(4, 1e-3)  # warm-up: numba's cached machine code
    why = simgrid_available() if a.simgrid else "not asked (--simgrid)"
    for n in (int(x) for x in a.sizes.split(",")):
        exact = run(n, 0.0) if n <= a.exact_max else None
        peer: dict[str, object] = {"peer": None, "peer_unavailable": why}
        if why is None and math.isqrt(n) ** 2 == n:
            sg = simgrid_run(n, "alltoall")
            peer = {"peer": "simgrid-3.32 d-mod-k", "peer_wall_s": round(sg["wall_s"], 2),
                    "peer_completion_us": round(sg["completion_s"] * 1e6, 3)}
        elif why is None:
            peer["peer_unavailable"] = "SimGrid's platform needs a square N"
        rows = [0.0] if exact is not None else []
        rows += [float(x) for x in a.precision.split(",")]
        for p in rows:
            t, wall, tr = exact if (p == 0.0 and exact is not None) else run(n, p)
            row: dict[str, object] = {"n": n, "flows": n * (n - 1), "precision": p,
                                      "completion_us": round(t * 1e6, 4),
                                      "wall_s": round(wall, 2), **peer}
            if "peer_wall_s" in peer:
                row["peer_over_fabricsim"] = round(float(peer["peer_wall_s"])  # type: ignore[arg-type]
                                                   / wall, 1)
            if exact is not None and p > 0:
                dur = exact[2]["end"] - exact[2]["start"]
                err = (tr["end"] - exact[2]["end"]) / dur
                row.update({"exact_wall_s": round(exact[1], 2),
                            "speedup": round(exact[1] / wall, 1),
                            "completion_err": t / exact[0] - 1,
                            "end_err_median": float(np.median(err)),
                            "end_err_p99": float(np.quantile(np.abs(err), 0.99)),
                            "end_err_max": float(np.abs(err).max())})
            row["peak_rss_gib"] = round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
