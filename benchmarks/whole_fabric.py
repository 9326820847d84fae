"""A whole training step on the flow backend with every group at once (issue 39).

DeepSeek-V3 on DGX H100 servers, rail-optimized (the system's default InfiniBand NDR, or
``--fabric``), TP 1 x PP 16 x EP 64, full recomputation of 2 layers per stage (what fits
in 80 GB): ``fabricsim train --backend flow --whole-fabric`` through the job API. Each
size runs in its own process (a clean peak RSS); the same step with each group alone
(``--backend flow``, by shape) is timed in that process first, as the peer: the ratio is
what running every group's flows together costs.

Usage: python benchmarks/whole_fabric.py [--nodes 256,2048,16384] [--fabric ib-ndr]
                                         [--precision 1e-3]
One JSON line per size: the flows of every group and those simulated (the rest are exact
copies, docs/training.md), wall and peak RSS, the step with all groups and its parts beside
each other, with its parts apart and with each group alone, and each part's [slowdown,
flows, flows simulated, link-disjoint components, limiting link, slowdown beside the other
parts].
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(nodes: int, fabric: str, precision: float) -> dict[str, object]:
    from fabricsim import jobs
    from fabricsim.scenario import Scenario

    sc = Scenario.model_validate({
        "cluster": {"system": "dgx-h100", "nodes": nodes, "fabric": fabric,
                    "topology": "rail-optimized"},
        "training": {"model": "deepseek-v3", "tp": 1, "pp": 16, "ep": 64,
                     "recompute": "full", "recompute_layers": 2, "backend": "flow"}})
    t0 = time.perf_counter()
    alone_job = jobs.job_from_scenario("train", sc)
    fab = alone_job.cluster.build()
    alone = jobs.run(alone_job, fab)
    t1 = time.perf_counter()
    whole_job = alone_job.model_copy(update={"whole_fabric": True,
                                             "flow_precision": precision})
    rep = jobs.run(whole_job, fab)
    t2 = time.perf_counter()
    w = rep.whole_fabric or {}
    return {"gpus": fab.n_gpus, "fabric": fabric, "precision": precision,
            "flows": w.get("flows"), "flows_simulated": w.get("flows_simulated"),
            "runs": w.get("runs"),
            "step_s": rep.step.step_time_s, "step_alone_s": w.get("step_time_alone_s"),
            "step_parts_apart_s": w.get("step_time_parts_apart_s"),
            "slowdown": w.get("slowdown"),
            "alone_path_step_s": alone.step.step_time_s,
            "whole_wall_s": round(t2 - t1, 1), "alone_wall_s": round(t1 - t0, 1),
            "whole_over_alone_wall": round((t2 - t1) / max(t1 - t0, 1e-9), 1),
            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                  / 2**20, 2),
            "parts": {f"{c['kind']} {c['groups']}x{c['group_size']}":
                      [round(c["slowdown"], 3), c["transfers"], c["simulated"],
                       c["components"], c["limited_by"],
                       round(c["overlapped_s"] / c["time_s"], 3) if c["overlapped_s"]
                       else 1.0]
                      for c in w.get("calls", [])}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="256,2048,16384")
    ap.add_argument("--fabric", default="ib-ndr")
    ap.add_argument("--precision", type=float, default=1e-3)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.one, a.fabric, a.precision)), flush=True)
        return
    for n in (int(x) for x in a.nodes.split(",")):
        subprocess.run([sys.executable, __file__, "--one", str(n), "--fabric", a.fabric,
                        "--precision", str(a.precision)], check=False)


if __name__ == "__main__":
    main()
