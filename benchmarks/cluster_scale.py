"""Speed of ``fabricsim cluster``: 50 training jobs sharing 16,384 H100 (2,048 DGX H100 on
RoCEv2 400G, rail-optimized, hashed ECMP), placed packed, spread and at random.

Prints one JSON line per placement: wall seconds (issue 38's target: under 10 minutes
on 2 cores for the lot), passes to settle, mean and worst slowdown, GPU-hours lost per
hour; and one for the peer in the same run, each job timed alone (the analytic sum of
jobs run alone, the baseline a shared run is compared against), with the ratio of the
two wall times. Then one simulated hour of the same cluster as a trace replay: the mix's
jobs arriving through the hour (about 50 running at once), each running 10-60 minutes,
under the topology-blind and the topology-aware scheduler; one JSON line each with the
wall time, the re-timings (settles) and the peak of jobs running. ``--small`` runs 12 jobs
on 2,048 GPUs (a quick check).
"""

from __future__ import annotations

import json
import resource
import sys
import time

import fabricsim as fs
from fabricsim.workloads.cluster import ClusterMember, interfere, place
from fabricsim.workloads.comm import EngineComm
from fabricsim.workloads.jobtrace import TraceJob
from fabricsim.workloads.models import get_model
from fabricsim.workloads.replay import ReplayResult, replay
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step

#: (model, GPUs, layout) of the job mix, repeated to the job count: a few large
#: pre-training runs, mid-size MoE and many small fine-tunes, as shared clusters run.
MIX = (
    ("llama3-70b", 1024, dict(tp=8, pp=4, global_batch=512, seq_len=8192)),
    ("mixtral-8x7b", 256, dict(tp=2, ep=8, global_batch=512, seq_len=4096)),
    ("llama3-8b", 128, dict(tp=1, global_batch=256, seq_len=8192)),
    ("llama3-8b", 64, dict(tp=2, global_batch=128, seq_len=4096)),
    ("llama2-7b", 32, dict(tp=1, global_batch=64, seq_len=4096)),
)


def jobs_for(n: int, gpus: int) -> list[ClusterMember]:
    out: list[ClusterMember] = []
    used = 0
    i = 0
    while len(out) < n:
        model, g, layout = MIX[i % len(MIX)]
        if used + g <= gpus:
            out.append(ClusterMember(f"{model}-{len(out)}", g, get_model(model),
                                     ParallelConfig(**layout)))
            used += g
        i += 1
        if i > 50 * n:
            break
    return out


def main(argv: list[str]) -> int:
    small = "--small" in argv
    nodes, n_jobs = (256, 12) if small else (2048, 50)
    t0 = time.perf_counter()
    fab = fs.build_cluster("dgx-h100", nodes, fabric="roce-400g")
    built = time.perf_counter() - t0
    members = jobs_for(n_jobs, fab.n_gpus)
    demands = [(m.name, m.gpus, None) for m in members]
    # the peer: every job alone on a cluster of its own size (the step model as `train`)
    t0 = time.perf_counter()
    for m in members:
        own = fs.build_cluster("dgx-h100", max(m.gpus // 8, 1), fabric="roce-400g")
        simulate_step(m.model, m.parallel, own, EngineComm(own), check_memory=False)
    alone_s = time.perf_counter() - t0
    total = 0.0
    for policy in ("packed", "spread", "random"):
        t0 = time.perf_counter()
        res = interfere(fab, members, place(fab, demands, policy, seed=1))
        wall = time.perf_counter() - t0
        total += wall
        slow = [j.slowdown for j in res.jobs]
        lost = sum(j.as_dict()["gpu_hours_lost_per_hour"] for j in res.jobs)
        sys.stdout.write(json.dumps({
            "case": f"{len(members)} jobs on {fab.n_gpus} GPUs, {policy}",
            "gpus_in_jobs": sum(m.gpus for m in members), "wall_s": round(wall, 2),
            "passes": res.iterations, "mean_slowdown": round(sum(slow) / len(slow), 4),
            "max_slowdown": round(max(slow), 4), "gpu_hours_lost_per_hour": round(lost, 2),
            "ratio_to_jobs_alone": round(wall / alone_s, 2)}) + "\n")
    hour(fab, members)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    sys.stdout.write(json.dumps({
        "case": "peer: every job alone, step model on its own cluster",
        "jobs": len(members), "wall_s": round(alone_s, 2), "build_s": round(built, 2),
        "all_placements_wall_s": round(total, 2), "target_s": 600,
        "peak_rss_gib": round(peak, 2)}) + "\n")
    return 0


def hour(fab: fs.Fabric, members: list[ClusterMember]) -> None:
    """One simulated hour: the mix's jobs at t = 0, and as many again arriving through
    the hour as the first ones end (each runs 10-60 min), replayed by both schedulers."""
    by_name = {m.name: m for m in members}
    trace: list[TraceJob] = []
    for k, m in enumerate(members):
        run = 600.0 + 3000.0 * ((k * 37) % 50) / 50.0
        trace.append(TraceJob(m.name, 0.0, m.gpus, run, len(trace) + 1))
        again = f"{m.name}-again"
        by_name[again] = ClusterMember(again, m.gpus, m.model, m.parallel)
        trace.append(TraceJob(again, run, m.gpus, 3600.0, len(trace) + 1))
    trace.sort(key=lambda j: j.submit_s)

    def member(j: TraceJob, gpus: int) -> ClusterMember:
        return by_name[j.name]

    for sched in ("fifo", "topology"):
        t0 = time.perf_counter()
        r = replay(fab, trace, member, scheduler=sched, hours=1.0)
        wall = time.perf_counter() - t0
        s = r.summary()
        sys.stdout.write(json.dumps({
            "case": f"one simulated hour on {fab.n_gpus} GPUs, {len(trace)} jobs, {sched}",
            "wall_s": round(wall, 2), "settles": r.settles,
            "peak_running": int(max(_running(r, t) for t in r.times_s)),
            "utilisation": round(s["utilisation"], 4),
            "interference_gpu_hours": round(s["interference_gpu_hours"], 2),
            "max_slowdown": round(s["max_slowdown"], 4), "target_s": 600}) + "\n")


def _running(r: ReplayResult, t: float) -> int:
    return sum(1 for j in r.jobs if j.start_s is not None and j.start_s <= t
               and (j.end_s is None or j.end_s > t))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
