"""Flow backend at scale: 16,384 GPUs (2,048 x DGX H100, 3-tier rail-optimized fat-tree on
InfiniBand NDR), 1 GiB ring and hierarchical all-reduce, one core.

Structural shortcuts used (both exact, see docs/flow.md):
* routes are computed once per step (a repetition reuses its step's paths: same queue
  pairs, same hashes, as in a real fabric);
* identical epochs are skipped: when the fabric is idle as the same set of steps launches
  its next repetition, one epoch later than the last idle launch and with no external
  event in between, the driver advances by whole epochs (``exploit_repeats=True``).

One JSON line per collective algorithm, with fabric build time, schedule build time,
simulation wall time, completion time, epochs simulated/skipped and peak RSS. The
``--general`` flag also times the general solver on the ring (every one of its 32,766
epochs of 131,072 jobs simulated: far beyond the 60 s budget on one core).

    python benchmarks/flow_scale.py [--nodes 2048] [--size 1GiB] [--algos ring,hierarchical]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from fabricsim.backends.flow import FlowBackend
from fabricsim.collectives import build_schedule
from fabricsim.fabric import build_cluster
from fabricsim.units import parse_size


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--algos", default="ring,hierarchical")
    ap.add_argument("--general", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    fab = build_cluster("dgx-h100", a.nodes, fabric="ib-ndr", topology="rail-optimized",
                        tiers=3)
    t_fab = time.perf_counter() - t0
    nbytes = parse_size(a.size)
    for algo in a.algos.split(","):
        t1 = time.perf_counter()
        sch = build_schedule(fab, "all_reduce", nbytes, algo=algo)
        t_sch = time.perf_counter() - t1
        modes = [True, False] if (a.general and algo == "ring") else [True]
        for exploit in modes:
            t2 = time.perf_counter()
            res = FlowBackend(exploit_repeats=exploit).run(sch, fab)
            t_run = time.perf_counter() - t2
            reps = sum(s.repeat for s in sch.steps)
            sys.stdout.write(json.dumps({
                "gpus": fab.n_gpus, "links": fab.n_links, "tiers": fab.info.tiers,
                "algorithm": sch.algorithm, "protocol": sch.protocol, "steps": len(sch.steps),
                "repetitions": reps, "transfers": sch.n_transfers(),
                "exploit_repeats": exploit, "completion_s": res.time,
                "skipped_epochs": res.extra["skipped_epochs"],
                "kernel_calls": res.extra["kernel_calls"],
                "fabric_build_s": t_fab, "schedule_build_s": t_sch, "simulate_wall_s": t_run,
                "total_wall_s": t_fab + t_sch + t_run, "peak_rss_gib": peak_rss_gib(),
                "bottleneck": res.extra["bottlenecks"][0]["name"]
                if res.extra["bottlenecks"] else None}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
