"""Write ``synthetic-day.csv``: one synthetic day of jobs in the Helios trace's
``cluster_log.csv`` format, for ``examples/clusters/trace-day.yaml``.

Not real data. The shape follows the published Helios summaries (Hu et al., SC'21;
HeliosArtifact's cluster summary): most GPU jobs take one GPU and a few minutes (median
206 s over the four clusters), while a few jobs of 16-128 GPUs run for hours and hold
most of the GPU time. Arrivals are a Poisson stream whose rate sets the offered load to
110 % of 512 GPUs in expectation (the heavy tail makes one day's draw lower: 97 %), so
the queue builds at busy hours. Run it again to regenerate (seeded: the same file every
time):

    python examples/clusters/traces/make_day.py
"""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
SHARE = (0.56, 0.08, 0.10, 0.14, 0.05, 0.04, 0.02, 0.01)
#: median minutes of a job of each size (lognormal, sigma 1.4), capped at 20 h
MEDIAN_MIN = (4, 6, 10, 20, 60, 90, 120, 180)
GPUS, LOAD, HOURS = 512, 1.1, 24


def main() -> None:
    rng = np.random.default_rng(2026)
    mean_gpu_s = sum(s * g * m * 60 * np.exp(1.4 ** 2 / 2)
                     for s, g, m in zip(SHARE, SIZES, MEDIAN_MIN, strict=True))
    rate = LOAD * GPUS / mean_gpu_s  # jobs per second
    t0 = datetime(2020, 9, 1)
    t, rows = 0.0, []
    while True:
        t += rng.exponential(1.0 / rate)
        if t >= HOURS * 3600:
            break
        k = rng.choice(len(SIZES), p=SHARE)
        dur = min(rng.lognormal(np.log(MEDIAN_MIN[k] * 60), 1.4), 20 * 3600)
        g = SIZES[k]
        sub = t0 + timedelta(seconds=round(t))
        end = sub + timedelta(seconds=round(dur))
        rows.append([f"job{len(rows) + 1:05d}", f"u{rng.integers(1, 60):02d}", "vc1", g,
                     4 * g, max(1, g // 8), "COMPLETED", f"{sub:%Y-%m-%d %H:%M:%S}",
                     f"{sub:%Y-%m-%d %H:%M:%S}", f"{end:%Y-%m-%d %H:%M:%S}",
                     max(1, round(dur)), 0])
    out = Path(__file__).with_name("synthetic-day.csv")
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state",
                    "submit_time", "start_time", "end_time", "duration", "queue"])
        w.writerows(rows)
    print(f"{out.name}: {len(rows)} jobs")


if __name__ == "__main__":
    main()
