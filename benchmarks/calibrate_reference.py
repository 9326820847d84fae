"""Calibration on the reference data: fit half of a cluster's rows, check the other half.

Every group of at least four rows of ``benchmarks/accuracy_nccl.py`` measured on one
cluster with one collective and NCCL's own algorithm choice (same system, node count,
GPUs per node, launch mode) becomes an nccl-tests test (time = size / algbw, algbw from
the published busbw); :func:`fabricsim.interop.calibrate.calibrate` fits every other size
and reports the median time error on the held-out sizes before and after. Prints one
JSON line per group and a summary. The issue's check: fitting on half of a cluster's
rows cuts the error on the other half.

Usage: python benchmarks/calibrate_reference.py
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from fabricsim.collectives.busbw import busbw_factor
from fabricsim.interop.calibrate import calibrate
from fabricsim.interop.nccl_tests import NcclTest, Row

HERE = Path(__file__).resolve().parent


def _accuracy() -> Any:
    spec = importlib.util.spec_from_file_location("accuracy_nccl", HERE / "accuracy_nccl.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["accuracy_nccl"] = mod
    spec.loader.exec_module(mod)
    return mod


def groups() -> list[tuple[str, int, int, str, list[Any]]]:
    acc = _accuracy()
    out: dict[tuple[Any, ...], list[Any]] = {}
    for c in acc.cases():
        if c.algo is not None or c.measured_time_us is not None or c.secondary or \
                c.span is not None:
            continue
        gpn = c.cluster.get("gpus_per_node", 8)
        key = (c.system, c.nodes, gpn, c.collective, c.gpus_per_thread)
        out.setdefault(key, []).append(c)
    return [(k[0], k[1], k[2], k[3], v) for k, v in out.items()
            if len({c.nbytes for c in v}) >= 4 and k[0] in ("dgx-a100", "dgx-h100")]


def test_of(system: str, nodes: int, gpn: int, coll: str, cases: list[Any]) -> NcclTest:
    n = nodes * gpn
    rows = []
    for c in sorted({c.nbytes: c for c in cases}.values(), key=lambda c: c.nbytes):
        alg = c.measured_busbw / busbw_factor(coll, n)  # GB/s
        t = c.nbytes / (alg * 1e9) * 1e6
        rows.append(Row(int(c.nbytes), int(c.nbytes) // 4, "float", "sum", -1, t, alg,
                        c.measured_busbw, None, t, alg, c.measured_busbw, None))
    model = {"dgx-a100": "NVIDIA A100-SXM4-80GB", "dgx-h100": "NVIDIA H100 80GB HBM3"}[system]
    hosts = tuple(f"h{k // gpn}" for k in range(n))
    return NcclTest(coll, tuple(rows), hosts, (model,) * n,
                    gpus_per_thread=cases[0].gpus_per_thread)


def main() -> int:
    before, after = [], []
    for system, nodes, gpn, coll, cases in groups():
        res = calibrate([test_of(system, nodes, gpn, coll, cases)], system=system)
        before.append(res.held_out_error_before)
        after.append(res.held_out_error_after)
        sys.stdout.write(json.dumps({"system": system, "nodes": nodes, "gpus_per_node": gpn,
                                     "collective": coll, "rows": len(cases),
                                     "rows_ids": sorted({c.row for c in cases}),
                                     **res.to_dict()}) + "\n")
    sys.stdout.write(json.dumps({
        "summary": True, "groups": len(before),
        "held_out_median_error_before": round(statistics.median(before), 4),
        "held_out_median_error_after": round(statistics.median(after), 4),
        "groups_improved": sum(a < b for a, b in zip(after, before, strict=True))}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
