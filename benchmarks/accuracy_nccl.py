"""Accuracy of the collective model against published nccl-tests numbers.

Runs every nccl_intranode / nccl_internode / sharp_nvls row of
/work/shared/reference/measurements.csv that the model covers, on the matching system
preset, and prints one JSON line per row (predicted vs measured busbw, relative error) and
a summary: median and max relative busbw error for sizes >= 1 MiB and, apart, < 1 MiB.

Excluded rows (and why) are printed as JSON lines with "excluded": a reason.

``--fit`` re-fits the protocol constants (least squares on log busbw error over the
included rows) and prints the fitted values; the library's constants were set from it.

Usage: python benchmarks/accuracy_nccl.py [--fit] [--csv PATH]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any

from fabricsim.collectives import predict_time
from fabricsim.collectives.busbw import busbw_factor
from fabricsim.fabric import build_cluster

CSV = "/work/shared/reference/measurements.csv"
MIB = 2**20


@dataclass
class Case:
    row: int
    system: str
    nodes: int
    nbytes: float
    measured_busbw: float  # GB/s
    algo: str | None = None
    proto: str | None = None
    collective: str = "all_reduce"
    cluster: dict[str, Any] = field(default_factory=dict)
    note: str = ""


#: Rows outside the model, with the reason.
EXCLUDED = {
    97: "stas00 A100 curve point below 1 MiB disagrees with the Azure curve (rows 1-24) "
        "measured with a newer NCCL; the >= 1 MiB stas00 points are kept",
    98: "stas00 A100 1 MiB point is 2x slower than Azure's row 11 at the same size (older "
        "NCCL, different launch mode); both cannot be matched by one model; row 11 kept",
    120: "2x H100 PCIe joined by an NVLink bridge: no system preset has bridged PCIe GPUs",
    121: "approximate user report (~200) contradicting rows 24, 102, 122 on the same system",
    133: "3 nodes with 4 HDR NICs per node: no preset with 4 NICs per DGX A100",
    134: "2 nodes with 4 HDR NICs per node: no preset with 4 NICs per DGX A100",
    135: "one HDR NIC per A800 node shared with storage traffic: no such preset",
}


def _size(config: str) -> float | None:
    m = re.search(r"msg=(\d+)B", config)
    return float(m.group(1)) if m else None


def cases() -> list[Case]:
    with open(CSV, encoding="utf-8") as fh:
        rows = {int(r["id"]): r for r in csv.DictReader(fh)}
    out: list[Case] = []
    for rid, r in rows.items():
        if r["topic"] != "nccl_intranode" or rid in EXCLUDED:
            continue
        size = _size(r["config"])
        if size is None:
            continue
        value = r["value"].split("|")[-1]
        if "A100" in r["config"]:
            out.append(Case(rid, "dgx-a100", 1, size, float(value)))
        elif "H100" in r["config"]:
            out.append(Case(rid, "dgx-h100", 1, size, float(value)))
    g8 = 8 * 2**30
    out += [
        Case(115, "dgx-h100", 1, 4 * 2**30, 367.5, algo="ring", note="range 365-370"),
        Case(116, "dgx-h100", 1, 4 * 2**30, 420, algo="nvls", cluster={"gpus_per_node": 5}),
        Case(116, "dgx-h100", 1, 4 * 2**30, 440, algo="nvls", cluster={"gpus_per_node": 6}),
        Case(116, "dgx-h100", 1, 4 * 2**30, 460, algo="nvls", cluster={"gpus_per_node": 7}),
        Case(116, "dgx-h100", 1, 4 * 2**30, 480, algo="nvls", cluster={"gpus_per_node": 8}),
        Case(117, "dgx-h100", 1, g8, 480, algo="nvls"),
        Case(117, "dgx-h100", 1, g8, 370, algo="ring"),
        Case(122, "dgx-a100", 1, 4 * 2**30, 232.54),
        Case(131, "dgx-a100", 4, g8, 192, algo="ring", note="multi-node ring, 8 HDR NICs"),
        Case(132, "dgx-a100", 4, g8, 24 * 8, algo="ring", note="24 GB/s per 200G NIC x 8"),
        Case(132, "dgx-a100", 4, g8, 12 * 8, algo="ring", cluster={"fabric": "roce-100g"},
             note="12 GB/s per 100G NIC x 8"),
        Case(141, "dgx-h100", 4, g8, 48.5 * 8, algo="ring", note="48-49 GB/s per NDR NIC x 8"),
        Case(169, "dgx-h200", 1, g8, 482.26, algo="nvls"),
        Case(169, "dgx-h200", 1, g8, 367.61, algo="ring"),
        Case(170, "dgx-h100", 1, g8, 480, algo="nvls"),
        Case(170, "dgx-h100", 1, g8, 370, algo="ring"),
        Case(170, "gb200-nvl72", 1, g8, 850, algo="nvls"),
        Case(170, "gb200-nvl72", 1, g8, 680, algo="ring"),
        Case(171, "aws-p5", 1, g8, 480, algo="nvls"),
    ]
    return out


_FABRICS: dict[tuple[Any, ...], Any] = {}


def predict(c: Case) -> float:
    key = (c.system, c.nodes, tuple(sorted(c.cluster.items())))
    if key not in _FABRICS:
        _FABRICS[key] = build_cluster(c.system, c.nodes, **c.cluster)
    fab = _FABRICS[key]
    t = predict_time(fab, c.collective, c.nbytes, algo=c.algo, proto=c.proto)
    return c.nbytes / t * busbw_factor(c.collective, fab.n_gpus) / 1e9


def evaluate(cs: list[Case]) -> list[dict[str, Any]]:
    out = []
    for c in cs:
        p = predict(c)
        out.append({"row": c.row, "system": c.system, "nodes": c.nodes, **c.cluster,
                    "size_bytes": int(c.nbytes), "algo": c.algo or "auto",
                    "measured_busbw_gbps": c.measured_busbw, "predicted_busbw_gbps": round(p, 2),
                    "rel_error": round((p - c.measured_busbw) / c.measured_busbw, 4),
                    **({"note": c.note} if c.note else {})})
    return out


def summary(res: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": True}
    for name, sel in (("ge_1MiB", lambda r: r["size_bytes"] >= MIB),
                      ("lt_1MiB", lambda r: r["size_bytes"] < MIB)):
        errs = [abs(r["rel_error"]) for r in res if sel(r)]
        if errs:
            worst = max((r for r in res if sel(r)), key=lambda r: abs(r["rel_error"]))
            out[name] = {"rows": len(errs),
                         "median_abs_rel_error": round(statistics.median(errs), 4),
                         "max_abs_rel_error": round(max(errs), 4),
                         "worst_row": worst["row"], "worst_size": worst["size_bytes"]}
    out["excluded_rows"] = sorted(EXCLUDED)
    return out


def fit(cs: list[Case]) -> None:  # pragma: no cover - calibration tool
    import numpy as np
    from scipy.optimize import minimize

    from fabricsim.collectives import protocols, tuner

    # one launch overhead for every protocol (a kernel launch does not depend on it)
    names = [("all", "launch"), ("ll", "nvlink_hop"), ("ll", "nvlink_eff"),
             ("ll128", "nvlink_hop"), ("ll128", "nvlink_eff"),
             ("simple", "nvlink_hop"), ("simple", "nvlink_eff"),
             ("simple", "nvls_eff"), ("simple", "nvls_hop")]
    base = {k: protocols.PROTOCOLS[k] for k in ("ll", "ll128", "simple")}

    def apply(x: Any) -> None:
        for (p, what), v in zip(names, x, strict=True):
            if what == "launch":
                for q in ("ll", "ll128", "simple"):
                    protocols.PROTOCOLS[q] = protocols.PROTOCOLS[q].scaled(
                        launch=float(v) * 1e-6)
                continue
            pr = protocols.PROTOCOLS[p]
            hop, eff = dict(pr.hop_latency), dict(pr.efficiency)
            cls, kind = what.split("_")
            if kind == "hop":
                hop[cls] = float(v) * 1e-6
            else:
                eff[cls] = float(v)
            protocols.PROTOCOLS[p] = pr.scaled(hop_latency=hop, efficiency=eff)
        tuner._MODELS.clear()
        tuner._backend()._cache.clear()

    def loss(x: Any) -> float:
        if np.any(np.asarray(x) <= 0):
            return 1e9
        apply(x)
        tot = 0.0
        for c in cs:
            if c.system == "gb200-nvl72":  # one vendor-slide point; kept out of the fit
                continue
            e = np.log(predict(c) / c.measured_busbw)
            tot += (1.0 if c.nbytes >= MIB else 0.3) * e * e
        return tot

    x0 = []
    for p, what in names:
        pr = base["simple" if p == "all" else p]
        if what == "launch":
            x0.append(pr.launch * 1e6)
        else:
            cls, kind = what.split("_")
            x0.append(pr.hop_latency[cls] * 1e6 if kind == "hop" else pr.efficiency[cls])
    r = minimize(loss, np.array(x0), method="Nelder-Mead",
                 options={"maxiter": 1500, "xatol": 1e-3, "fatol": 1e-4})
    print(json.dumps({"fit": {f"{p}.{w}": round(float(v), 4) for (p, w), v in
                              zip(names, r.x, strict=True)}, "loss": float(r.fun)}))
    apply(r.x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fit", action="store_true")
    args = ap.parse_args(argv)
    cs = cases()
    if args.fit:
        fit(cs)
    res = evaluate(cs)
    for r in res:
        print(json.dumps(r))
    for rid, why in sorted(EXCLUDED.items()):
        print(json.dumps({"row": rid, "excluded": why}))
    print(json.dumps(summary(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
