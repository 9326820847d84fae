"""Write ``synthetic-day.csv``: one synthetic day of jobs in the Helios trace's
``cluster_log.csv`` format, for ``examples/clusters/trace-day.yaml``.

Not real data: :func:`fabricsim.workloads.jobtrace.synthetic_day` draws it. The shape
follows the published Helios summaries (Hu et al., SC'21; HeliosArtifact's cluster
summary): most GPU jobs take one GPU and a few minutes (median 206 s over the four
clusters), while a few jobs of 16-128 GPUs run for hours and hold most of the GPU time.
Arrivals are a Poisson stream whose rate offers 110 % of 512 GPUs in expectation (the
heavy tail makes this day's draw lower: 97 %), so the queue builds at busy hours. Run it
again to regenerate (seeded: the same file every time):

    python examples/clusters/traces/make_day.py
"""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path

from fabricsim.workloads.jobtrace import synthetic_day


def main() -> None:
    t0 = datetime(2020, 9, 1)
    rows = []
    for j in synthetic_day(gpus=512, load=1.1, hours=24, seed=2026):
        sub = t0 + timedelta(seconds=j.submit_s)
        end = sub + timedelta(seconds=j.duration_s)
        rows.append([j.name, "u01", "vc1", j.gpus, 4 * j.gpus, max(1, j.gpus // 8),
                     "COMPLETED", f"{sub:%Y-%m-%d %H:%M:%S}", f"{sub:%Y-%m-%d %H:%M:%S}",
                     f"{end:%Y-%m-%d %H:%M:%S}", int(j.duration_s), 0])
    out = Path(__file__).with_name("synthetic-day.csv")
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state",
                    "submit_time", "start_time", "end_time", "duration", "queue"])
        w.writerows(rows)
    print(f"{out.name}: {len(rows)} jobs")


if __name__ == "__main__":
    main()
