"""Benchmark: build large fabrics and route one ring of all GPUs.

Each case runs in a fresh subprocess so that ``peak_rss_mib`` (ru_maxrss, which includes
the interpreter and imports) is per case. Prints one JSON line per case.

    python benchmarks/build_fabric.py            # all cases
    python benchmarks/build_fabric.py rail-16k   # one case

Targets (one core): 16k GPUs under 2 s, 131k GPUs under 20 s and 4 GiB.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

CASES: dict[str, dict[str, object]] = {
    "rail-16k": dict(system="dgx-h100", nodes=2048, topology="rail-optimized", tiers=3),
    "rail-131k": dict(system="dgx-h100", nodes=16384, topology="rail-optimized", tiers=3),
    "dragonfly-16k": dict(system="dgx-h100", nodes=2048, topology="dragonfly"),
    "torus-16k": dict(system="dgx-h100", nodes=2048, topology="torus3d"),
    "nvl576-16k": dict(system="gb200-nvl72", nodes=232, params={"nvlink_domain": 576}),
}


def run_case(name: str) -> dict[str, object]:
    import numpy as np

    from fabricsim.fabric import build_cluster

    kw = dict(CASES[name])
    t0 = time.perf_counter()
    fab = build_cluster(str(kw.pop("system")), **kw)  # type: ignore[arg-type]
    build_s = time.perf_counter() - t0
    g = fab.gpus
    t0 = time.perf_counter()
    paths = fab.route_many(g, np.roll(g, -1))
    route_s = time.perf_counter() - t0
    assert len(paths) == g.size and (paths.lengths() > 0).all()
    t0 = time.perf_counter()  # every GPU to the GPU half the cluster away: all cross-network
    far = fab.route_many(g, np.roll(g, -(g.size // 2)))
    far_s = time.perf_counter() - t0
    assert (far.lengths() > 0).all()
    return {
        "case": name, "gpus": fab.n_gpus, "nodes": fab.n_nodes, "links": fab.n_links,
        "build_s": round(build_s, 3), "route_s": round(route_s, 3),
        "route_far_s": round(far_s, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "tiers": fab.info.tiers, "planes": fab.info.planes,
        "switches": dict(fab.info.extra["switches"]),  # type: ignore[call-overload]
        "ring_links": int(paths.links.size),
    }


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--child":
        print(json.dumps(run_case(argv[1])), flush=True)
        return
    for name in argv or list(CASES):
        out = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True,
                             text=True, check=False)
        if out.returncode:
            print(json.dumps({"case": name, "error": out.stderr.strip().splitlines()[-1:]}))
        else:
            print(out.stdout.strip(), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
