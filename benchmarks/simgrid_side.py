"""SimGrid side of ``vs_simgrid.py``: run under Debian's ``/usr/bin/python3`` (python3-simgrid).

Builds a two-level fat-tree cluster (``sqrt(N)`` hosts per leaf, ``sqrt(N)`` spines, every
link ``--bw`` and ``--lat``; split-duplex), switches SimGrid's TCP corrections off so it
solves plain max-min sharing (``network/model:CM02``, ``network/TCP-gamma:0``,
``network/crosstraffic:0``, ``network/optim:Full``), and times a ring all-reduce of
``--size`` bytes: 2(N-1) steps, each N asynchronous transfers ``i -> i+1`` of size/N bytes
issued by one actor that waits for all of them. Prints one JSON line.

Usage: /usr/bin/python3 benchmarks/simgrid_side.py --n 64 --size 1073741824
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time


def platform_xml(n: int, bw: str, lat: str) -> str:
    k = math.isqrt(n)
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="ft" prefix="h" suffix="" radical="0-{n - 1}" speed="1Gf" bw="{bw}" lat="{lat}"
           topology="FAT_TREE" topo_parameters="2;{k},{n // k};1,{k};1,1"
           sharing_policy="SPLITDUPLEX"/>
</platform>
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--size", type=float, default=2.0**30)
    ap.add_argument("--bw", default="400Gbps")
    ap.add_argument("--lat", default="1us")
    a = ap.parse_args()
    from simgrid import Actor, Comm, Engine, this_actor

    t0 = time.perf_counter()
    cfg = ["--cfg=network/model:CM02", "--cfg=network/TCP-gamma:0",
           "--cfg=network/crosstraffic:0", "--cfg=network/optim:Full",
           "--log=root.thresh:critical"]
    e = Engine([sys.argv[0], *cfg])
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(platform_xml(a.n, a.bw, a.lat))
        path = f.name
    e.load_platform(path)
    os.unlink(path)
    hosts = sorted(e.all_hosts, key=lambda h: int(h.name[1:]))
    n = a.n
    chunk = int(a.size // n)  # whole bytes, as SimGrid takes them

    def driver() -> None:
        for _ in range(2 * (n - 1)):
            comms = [Comm.sendto_async(hosts[i], hosts[(i + 1) % n], chunk) for i in range(n)]
            Comm.wait_all(comms)
        this_actor.info("ring done")

    Actor.create("driver", hosts[0], driver)
    t1 = time.perf_counter()
    e.run()
    t2 = time.perf_counter()
    sys.stdout.write(json.dumps({"n": n, "completion_s": e.clock, "setup_wall_s": t1 - t0,
                                 "run_wall_s": t2 - t1, "wall_s": t2 - t0}) + "\n")


if __name__ == "__main__":
    main()
