"""fabricsim's flow backend side by side with SimGrid (flow-level max-min, C++).

Both get the same non-blocking two-level fat-tree (sqrt(N) hosts per leaf, sqrt(N) spines,
400 Gb/s links of 1 us, 4 links on a cross-leaf path) and the same 1 GiB ring all-reduce:
2(N-1) steps of N transfers i -> i+1 of S/N bytes. SimGrid runs with its TCP corrections
off (CM02, TCP-gamma 0, no cross-traffic, optim Full) and one actor issuing each step's N
transfers asynchronously (its fastest set-up), under Debian's /usr/bin/python3 in a
subprocess (``benchmarks/simgrid_side.py``). fabricsim runs the general solver
(``exploit_repeats=False``: every repetition simulated event by event); the figure with
the identical-repetition shortcut is reported separately (``shortcut_*``).

Walls: SimGrid's is measured inside its process (platform load + run); fabricsim's is
fabric build + run, after one small warm-up run that loads numba's compiled cache.

One JSON line per N:
    python benchmarks/vs_simgrid.py [--sizes 16,64,256,1024] [--no-simgrid]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from fabricsim.backends.flow import FlowBackend, host_fat_tree
from fabricsim.schedule import Schedule, Step

BW = 400e9 / 8  # bytes/s
LAT = 1e-6
SIZE = 2**30
SIDE = Path(__file__).with_name("simgrid_side.py")
DEBIAN_PY = "/usr/bin/python3"


def ring(fab_n: int, fab: object) -> Schedule:
    g = fab.gpus  # type: ignore[attr-defined]
    st = Step(src=g, dst=np.roll(g, -1), nbytes=np.full(fab_n, float(SIZE // fab_n)),
              repeat=2 * (fab_n - 1))
    return Schedule(steps=(st,), collective="all_reduce", algorithm="ring")


def fabricsim_run(n: int, exploit: bool) -> tuple[float, float]:
    t0 = time.perf_counter()
    fab = host_fat_tree(n, bandwidth=BW, latency=LAT)
    res = FlowBackend(exploit_repeats=exploit).run(ring(n, fab), fab)
    return res.time, time.perf_counter() - t0


def simgrid_available() -> str | None:
    """None if SimGrid imports under Debian's python3, else the reason."""
    try:
        r = subprocess.run([DEBIAN_PY, "-c", "import simgrid"], capture_output=True,
                           text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run {DEBIAN_PY}: {e}"
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def simgrid_run(n: int) -> dict[str, float]:
    r = subprocess.run([DEBIAN_PY, str(SIDE), "--n", str(n), "--size", str(SIZE)],
                       capture_output=True, text=True, check=True)
    line = [x for x in r.stdout.splitlines() if x.startswith("{")][-1]
    out: dict[str, float] = json.loads(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,64,256,1024")
    ap.add_argument("--no-simgrid", action="store_true", help="compare with the closed form only")
    a = ap.parse_args()
    fabricsim_run(4, False)  # warm-up: load numba's cached machine code
    why = "skipped (--no-simgrid)" if a.no_simgrid else simgrid_available()
    for n in (int(x) for x in a.sizes.split(",")):
        closed = 2 * (n - 1) * (SIZE // n / BW + 4 * LAT)
        t_gen, w_gen = fabricsim_run(n, False)
        t_cut, w_cut = fabricsim_run(n, True)
        row: dict[str, object] = {
            "n": n, "closed_form_s": closed,
            "fabricsim_completion_s": t_gen, "fabricsim_wall_s": w_gen,
            "fabricsim_vs_closed_form": t_gen / closed - 1,
            "shortcut_completion_s": t_cut, "shortcut_wall_s": w_cut,
        }
        if why is None:
            sg = simgrid_run(n)
            row.update({"peer": "simgrid 3.32 (Debian)", "simgrid_completion_s": sg["completion_s"],
                        "simgrid_wall_s": sg["wall_s"],
                        "completion_rel_diff": t_gen / sg["completion_s"] - 1,
                        "speedup": sg["wall_s"] / w_gen,
                        "shortcut_speedup": sg["wall_s"] / w_cut})
        else:
            row.update({"peer": None, "peer_unavailable": why})
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
