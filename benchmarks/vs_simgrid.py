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

``--pattern alltoall``: one all-to-all of 1 GiB instead (every host sends S/N bytes to
every other host: N(N-1) transfers in one step, ECMP by hash; the SimGrid side issues all
of them with ``Comm.sendto_async`` from one actor and one ``Comm.wait_all``, N a perfect
square). A cross-leaf transfer takes spine ``dst mod k`` (d-mod-k, as SimGrid's fat-tree
routes): the two simulators then solve the same problem and agree exactly.
``--pattern alltoall-hash`` picks the spine by pair hash instead (ECMP collisions: many more
distinct rates and events, the hard case for the solver; SimGrid cannot route that way,
so its completion differs by the collisions' cost).

When SimGrid does not import under Debian's python3 (``apt-get install python3-simgrid``;
see the peers notes), every line reports fabricsim alone with ``peer_unavailable`` saying
why; nothing here is needed by the test suite.

One JSON line per N:
    python benchmarks/vs_simgrid.py [--pattern ring|alltoall] [--sizes 16,64,256,1024]
                                    [--no-simgrid]
"""

from __future__ import annotations

import argparse
import json
import math
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


def alltoall(fab_n: int, fab: object, spine: str = "dmodk") -> Schedule:
    """All-to-all; the spine of a cross-leaf transfer is its destination index mod the
    spines (``dmodk``, SimGrid's fat-tree routing) or a pair hash (``hash``: collisions)."""
    g = fab.gpus  # type: ignore[attr-defined]
    a, b = np.meshgrid(np.arange(fab_n), np.arange(fab_n), indexing="ij")
    keep = a != b
    hashes = b[keep].astype(np.uint64) if spine == "dmodk" else None
    st = Step(src=g[a[keep]], dst=g[b[keep]],
              nbytes=np.full(int(keep.sum()), float(SIZE // fab_n)), hashes=hashes)
    return Schedule(steps=(st,), collective="all_to_all", algorithm="direct")


PATTERNS = {"ring": ring, "alltoall": alltoall,
            "alltoall-hash": lambda n, fab: alltoall(n, fab, "hash")}

#: SimGrid side of the all-to-all (run under Debian's python3; platform as for the ring).
SIMGRID_ALLTOALL = """
import json, os, sys, tempfile, time
sys.path.insert(0, {here!r})
from simgrid_side import platform_xml
from simgrid import Actor, Comm, Engine
n, size = {n}, {size}
t0 = time.perf_counter()
e = Engine([sys.argv[0], "--cfg=network/model:CM02", "--cfg=network/TCP-gamma:0",
            "--cfg=network/crosstraffic:0", "--cfg=network/optim:Full",
            "--log=root.thresh:critical"])
with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
    f.write(platform_xml(n, "400Gbps", "1us"))
e.load_platform(f.name)
os.unlink(f.name)
hosts = sorted(e.all_hosts, key=lambda h: int(h.name[1:]))
chunk = int(size // n)
def driver():
    comms = [Comm.sendto_async(hosts[i], hosts[j], chunk)
             for i in range(n) for j in range(n) if i != j]
    Comm.wait_all(comms)
Actor.create("driver", hosts[0], driver)
t1 = time.perf_counter()
e.run()
t2 = time.perf_counter()
print(json.dumps({{"n": n, "completion_s": e.clock, "setup_wall_s": t1 - t0,
                  "run_wall_s": t2 - t1, "wall_s": t2 - t0}}))
"""


def per_leaf(n: int) -> int:
    """sqrt(N) hosts per leaf (and spines); for a non-square N the largest power of two
    below sqrt(N) (N = 512: 16 per leaf, 32 leaves, 16 spines; SimGrid is then skipped)."""
    k = math.isqrt(n)
    return k if k * k == n else 1 << (k.bit_length() - 1)


def fabricsim_run(n: int, exploit: bool, pattern: str = "ring") -> tuple[float, float]:
    t0 = time.perf_counter()
    fab = host_fat_tree(n, hosts_per_leaf=per_leaf(n), bandwidth=BW, latency=LAT)
    res = FlowBackend(exploit_repeats=exploit).run(PATTERNS[pattern](n, fab), fab)
    return res.time, time.perf_counter() - t0


def simgrid_available() -> str | None:
    """None if SimGrid imports under Debian's python3, else the reason."""
    try:
        r = subprocess.run([DEBIAN_PY, "-c", "import simgrid"], capture_output=True,
                           text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run {DEBIAN_PY}: {e}"
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def simgrid_run(n: int, pattern: str = "ring") -> dict[str, float]:
    if pattern == "ring":
        cmd = [DEBIAN_PY, str(SIDE), "--n", str(n), "--size", str(SIZE)]
    else:
        code = SIMGRID_ALLTOALL.format(here=str(SIDE.parent), n=n, size=SIZE)
        cmd = [DEBIAN_PY, "-c", code]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    line = [x for x in r.stdout.splitlines() if x.startswith("{")][-1]
    out: dict[str, float] = json.loads(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pattern", choices=sorted(PATTERNS), default="ring")
    ap.add_argument("--sizes", default=None,
                    help="host counts (default 16,64,256,1024 for ring, 16,64,256 for "
                         "alltoall; SimGrid needs perfect squares)")
    ap.add_argument("--no-simgrid", action="store_true", help="fabricsim alone")
    a = ap.parse_args()
    sizes = a.sizes or ("16,64,256,1024" if a.pattern == "ring" else "16,64,256")
    sg_pattern = "ring" if a.pattern == "ring" else "alltoall"
    fabricsim_run(4, False, a.pattern)  # warm-up: load numba's cached machine code
    why = "skipped (--no-simgrid)" if a.no_simgrid else simgrid_available()
    if why is not None:
        sys.stderr.write(f"note: SimGrid not available ({why}); reporting fabricsim alone\n")
    for n in (int(x) for x in sizes.split(",")):
        row: dict[str, object] = {"pattern": a.pattern, "n": n}
        if why is None and math.isqrt(n) ** 2 != n:
            row.update({"peer": None, "peer_unavailable": "SimGrid's platform needs a square N"})
        t_gen, w_gen = fabricsim_run(n, False, a.pattern)
        if a.pattern == "ring":
            closed = 2 * (n - 1) * (SIZE // n / BW + 4 * LAT)
            t_cut, w_cut = fabricsim_run(n, True)
            row.update({"closed_form_s": closed, "fabricsim_completion_s": t_gen,
                        "fabricsim_wall_s": w_gen,
                        "fabricsim_vs_closed_form": t_gen / closed - 1,
                        "shortcut_completion_s": t_cut, "shortcut_wall_s": w_cut})
        else:
            row.update({"transfers": n * (n - 1), "fabricsim_completion_s": t_gen,
                        "fabricsim_wall_s": w_gen})
        if why is None and "peer" not in row:
            sg = simgrid_run(n, sg_pattern)
            row.update({"peer": "simgrid 3.32 (Debian)", "simgrid_completion_s": sg["completion_s"],
                        "simgrid_wall_s": sg["wall_s"],
                        "completion_rel_diff": t_gen / sg["completion_s"] - 1,
                        "speedup": sg["wall_s"] / w_gen})
            if a.pattern == "ring":
                row["shortcut_speedup"] = sg["wall_s"] / row["shortcut_wall_s"]  # type: ignore[operator]
        elif "peer" not in row:
            row.update({"peer": None, "peer_unavailable": why})
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
