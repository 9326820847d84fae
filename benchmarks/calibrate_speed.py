"""How long ``fabricsim calibrate`` takes on a large folder of logs.

Issue 37's target: under 10 s for 100 logs. The folder is the repository's pairwise
acceptance logs (``tests/data/nccl_logs/pairs``, 15 two-host all-reduce runs) and the
real 17-host acceptance run (``tests/data/acceptance/cluster00-pairwise-g4``, 136 logs of
several collectives), copied ``--copies`` times into a temporary folder, as a cluster's
repeated acceptance runs pile up. Prints one JSON line per folder (logs, seconds, seconds
per log, the factors determined) and exits 1 if a folder of at least 100 logs took 10 s
or more. There is no peer tool to compare with: calibration of this kind is fabricsim's.

Usage: python benchmarks/calibrate_speed.py [--copies 7]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = {"pairs": ROOT / "tests" / "data" / "nccl_logs" / "pairs",
        "acceptance-g4": ROOT / "tests" / "data" / "acceptance" / "cluster00-pairwise-g4"}


def run(folder: Path) -> dict[str, object]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "fabricsim", "calibrate", str(folder),
                           "--system", "dgx-h100", "--json"], capture_output=True,
                          text=True, check=False)
    secs = time.perf_counter() - t0
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        out = {}
    if proc.returncode not in (0, 2) or not out:
        raise SystemExit(f"calibrate failed ({proc.returncode}): {proc.stderr[-500:]}")
    return {"seconds": round(secs, 2), "exit": proc.returncode,
            "determined": sorted(k for k in out.get("factors", {})
                                 if k not in out.get("undetermined", {}))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=7)
    args = ap.parse_args(argv)
    slow = False
    for name, src in SETS.items():
        logs = sorted(p for p in src.iterdir() if p.suffix == ".log")
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(args.copies):
                for p in logs:
                    shutil.copy(p, Path(tmp) / f"{p.stem}_{k}.log")
            n = len(logs) * args.copies
            got = run(Path(tmp))
        line = {"bench": "calibrate_speed", "set": name, "logs": n, **got,
                "seconds_per_log": round(float(got["seconds"]) / n, 4)}  # type: ignore[arg-type]
        print(json.dumps(line))
        slow |= n >= 100 and float(got["seconds"]) >= 10.0  # type: ignore[arg-type]
    return 1 if slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
