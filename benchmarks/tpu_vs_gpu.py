"""A TPU slice beside an NVLink + InfiniBand cluster of the same size.

256 TPU v5p chips (one 4x8x8 slice, plain and twisted) and 256 TPU v6e chips (the 16x16
pod) against 32 DGX H100 on InfiniBand NDR (256 GPUs, rail-optimized): all-reduce and
all-to-all bus bandwidth over message sizes on the analytic backend (the same schedules
the flow backend times within a few per cent), and a Llama 3 70B training step (TP 8, FSDP,
DP 32). Prints one JSON line per (system, collective, size) and per training run;
``--plot PATH`` draws the bus-bandwidth figure (docs/images/tpu_vs_gpu.png).

Usage: python benchmarks/tpu_vs_gpu.py [--plot docs/images/tpu_vs_gpu.png]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import fabricsim as fs
from fabricsim.collectives import run_collective
from fabricsim.jobs import job_from_scenario, run

SIZES = [2**k for k in range(20, 33, 2)]  # 1 MiB .. 4 GiB

DESIGNS: dict[str, dict[str, Any]] = {
    "TPU v5p 4x8x8": {"system": "tpu-v5p", "nodes": 64},
    "TPU v5p 4x8x8 twisted": {"system": "tpu-v5p", "nodes": 64,
                              "params": {"ici_twisted": True}},
    "TPU v6e 16x16": {"system": "tpu-v6e", "nodes": 32},
    "DGX H100 x32, IB NDR": {"system": "dgx-h100", "nodes": 32, "fabric": "ib-ndr"},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plot", type=Path, default=None)
    a = ap.parse_args()
    curves: dict[str, dict[str, tuple[list[float], list[float]]]] = {"all_reduce": {},
                                                                     "alltoall": {}}
    for label, kw in DESIGNS.items():
        fab = fs.build_cluster(**kw)
        for coll in curves:
            xs, ys = [], []
            for size in SIZES:
                t0 = time.perf_counter()
                r = run_collective(fab, coll, size)
                print(json.dumps({"design": label, "chips": fab.n_gpus, "collective": coll,
                                  "bytes": size, "algorithm": r.algorithm,
                                  "time_us": round(r.time * 1e6, 2),
                                  "busbw_gbps": round(r.busbw / 1e9, 2),
                                  "wall_s": round(time.perf_counter() - t0, 3)}), flush=True)
                xs.append(size)
                ys.append(r.busbw / 1e9)
            curves[coll][label] = (xs, ys)
        if "twisted" in label:
            continue
        sc = fs.Scenario.model_validate({
            "cluster": kw, "training": {"model": "llama3-70b", "tp": 8, "pp": 1, "zero": "fsdp"}})
        t0 = time.perf_counter()
        tr = run(job_from_scenario("train", sc), fab)
        d = tr.to_dict()
        print(json.dumps({"design": label, "chips": fab.n_gpus, "train": "llama3-70b tp8 dp32 fsdp",
                          "step_time_s": round(d["step_time_s"], 4),
                          "mfu": round(d["mfu"], 4),
                          "exposed_comm_s": round(d["exposed_comm_s"], 4),
                          "wall_s": round(time.perf_counter() - t0, 3)}), flush=True)
    if a.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, (coll, cs) in zip(axes, curves.items(), strict=True):
            for label, (xs, ys) in cs.items():
                ax.plot(xs, ys, marker="o", ms=3, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message bytes")
            ax.set_ylabel("bus bandwidth per chip (GB/s)")
            ax.set_title(f"{coll}, 256 chips")
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        a.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(a.plot, dpi=110)


if __name__ == "__main__":
    main()
