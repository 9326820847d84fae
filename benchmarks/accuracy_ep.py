"""Accuracy of the expert-parallel kernel model against published figures, held out.

Runs every row of data/reference/ep_kernels.csv (DeepEP's V1 and V2 READMEs, NVIDIA's
HybridEP document, TensorRT-LLM's one-sided NVLink all-to-all blog, NCCL EP's README,
pplx-garden's comparison, FlashInfer's benchmark of the one-sided all-to-all) with
:func:`fabricsim.collectives.ep.run_ep` and prints one JSON line per row, then one per
kernel family and one overall.

The only constant fitted is each family's fixed cost per call
(:data:`fabricsim.collectives.ep.KERNEL_OVERHEAD_S`). It is reported leave-one-source-out:
for each source, the cost is the median residual time of the *other* sources' rows of the
family (none left: no fixed cost beyond the schedule's own latency), and that source's rows
are predicted with it. The shipped cost is fitted only where at least :data:`MIN_SOURCES`
sources measure the family (else: none), so no one source decides a shipped constant.
``--in-sample`` prints the all-source fit instead (the figures the shipped constants
are), labelled as such.

A bandwidth figure is compared as the time it implies: the bytes the family's own
convention counts (from the same routing) over the published bandwidth.

``--write`` stores the held-out figures per family, and the systems each family was
checked on, in ``src/fabricsim/collectives/ep_heldout.json``: the band ``bench ep_*``
prints beside every result.

Usage: ``python benchmarks/accuracy_ep.py [--in-sample] [--write]``
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fabricsim.collectives.ep import EpConfig, Routing, run_ep
from fabricsim.fabric import Fabric, build_cluster

REF = Path(__file__).resolve().parents[1] / "data" / "reference" / "ep_kernels.csv"
METRIC = {"bw_rdma_gbps": "bw_rdma_gbps", "bw_nvl_gbps": "bw_nvl_gbps",
          "algbw_gbps": "algbw_gbps"}


def model_rows() -> list[dict[str, Any]]:
    """Every reference row with the model's time without a fixed cost (``t0_us``) and the
    published figure as a time (``meas_us``)."""
    import numpy as np

    fabrics: dict[tuple[str, int], Fabric] = {}
    out = []
    with REF.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        key = (r["system"], int(r["nodes"]))
        if key not in fabrics:
            fabrics[key] = build_cluster(*key)
        fab = fabrics[key]
        ep = int(r["ep"])
        lim = int(r["node_limit"]) if r["node_limit"] else None
        cfg = EpConfig(tokens=int(r["tokens"]), hidden=int(r["hidden"]),
                       top_k=int(r["top_k"]), experts=int(r["experts"]),
                       dispatch_dtype=r["dispatch_dtype"], combine_dtype=r["combine_dtype"],
                       routing=Routing(node_limit=lim))
        res = run_ep(fab, cfg, r["phase"], r["kernel"], np.arange(ep, dtype=np.int32),
                     overhead_s={})
        value = float(r["value"])
        if r["metric"] == "time_us":
            meas = value
        else:
            counted = getattr(res, METRIC[r["metric"]]) * res.time_us  # GB/s x us = kB
            meas = counted / value
        out.append({"id": int(r["id"]), "source": r["source"], "kernel": r["kernel"],
                    "system": r["system"], "ep": ep, "tokens": int(r["tokens"]),
                    "phase": r["phase"], "metric": r["metric"], "value": value,
                    "t0_us": res.time_us, "meas_us": meas, "limit": res.limit})
    return out


#: Fewest sources measuring a family for its fixed cost to be fitted.
MIN_SOURCES = 2


def fit(rows: list[dict[str, Any]], min_sources: int = MIN_SOURCES) -> dict[str, float]:
    """Each family's fixed cost (µs): the median residual of its rows, at least 0, for
    the families ``min_sources`` sources or more measure (``"*"``: the others, 0). What
    ships is the fit on every source with :data:`MIN_SOURCES`; a held-out fold fits on
    whatever sources remain (``min_sources=1``), as any constant is refitted without the
    source it predicts."""
    fams: dict[str, list[float]] = {}
    srcs: dict[str, set[str]] = {}
    for r in rows:
        fams.setdefault(r["kernel"], []).append(r["meas_us"] - r["t0_us"])
        srcs.setdefault(r["kernel"], set()).add(r["source"])
    out = {k: max(statistics.median(v), 0.0) for k, v in fams.items()
           if len(srcs[k]) >= min_sources}
    out["*"] = 0.0  # a family no other source measures: the schedule's latency alone
    return out


def summary(errs: list[float]) -> dict[str, float]:
    a = sorted(abs(e) for e in errs)
    return {"rows": len(a), "median": statistics.median(a),
            "p90": a[min(len(a) - 1, int(0.9 * len(a)))], "worst": a[-1]}


#: Where ``--write`` stores the held-out table ``bench ep_*`` reads.
HELDOUT_JSON = Path(__file__).resolve().parents[1] / "src" / "fabricsim" / "collectives" \
    / "ep_heldout.json"


def predictions(rows: list[dict[str, Any]], in_sample: bool = False
                ) -> Iterator[tuple[dict[str, Any], float, float]]:
    """Each row, source by source, with its family's fixed cost (fitted without its source,
    or on every source with ``in_sample``) and its error (+: the model is slower than
    published)."""
    full = fit(rows) if in_sample else {}
    for src in sorted({r["source"] for r in rows}):
        costs = full if in_sample else fit([r for r in rows if r["source"] != src], min_sources=1)
        for r in rows:
            if r["source"] == src:
                o = costs.get(r["kernel"], costs["*"])
                yield r, o, (r["t0_us"] + o) / r["meas_us"] - 1.0


def held_out_errors(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each family's errors with every source predicted by the costs fitted without it."""
    by_fam: dict[str, list[float]] = {}
    for r, _, err in predictions(rows):
        by_fam.setdefault(r["kernel"], []).append(err)
    return by_fam


def table_of(rows: list[dict[str, Any]], by_fam: dict[str, list[float]]) -> dict[str, Any]:
    """The held-out table ``--write`` stores: per family its error summary, its sources
    and the systems its figures cover."""
    return {"method": "leave-one-source-out", "families": {
        k: {**{m: round(x, 4) for m, x in summary(v).items()},
            "sources": len({r["source"] for r in rows if r["kernel"] == k}),
            "systems": sorted({r["system"] for r in rows if r["kernel"] == k})}
        for k, v in sorted(by_fam.items())}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in-sample", action="store_true")
    ap.add_argument("--write", action="store_true",
                    help="write the held-out bands to src/fabricsim/collectives/")
    args = ap.parse_args()
    rows = model_rows()
    by_fam: dict[str, list[float]] = {}
    by_src: dict[str, list[float]] = {}
    everything = []
    full = fit(rows)
    for r, o, err in predictions(rows, args.in_sample):
        print(json.dumps({**r, "overhead_us": round(o, 2),
                          "model_us": round(r["t0_us"] + o, 2), "error": round(err, 4)}))
        by_fam.setdefault(r["kernel"], []).append(err)
        by_src.setdefault(r["source"], []).append(err)
        everything.append(err)
    label = "in-sample" if args.in_sample else "leave-one-source-out"
    if args.write and not args.in_sample:
        HELDOUT_JSON.write_text(json.dumps(table_of(rows, by_fam), indent=1) + "\n",
                                encoding="utf-8")
    for k, v in sorted(by_fam.items()):
        print(json.dumps({"summary": "family", "kernel": k, "method": label,
                          **summary(v)}))
    for k, v in sorted(by_src.items()):
        print(json.dumps({"summary": "source", "source": k, "method": label,
                          **summary(v)}))
    print(json.dumps({"summary": "all", "method": label, **summary(everything),
                      "fitted_overhead_us": {k: round(v, 1) for k, v in full.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
