"""Accuracy of the training step model against MosaicML's MPT benchmark tables.

Runs every row of data/reference/llm_foundry_mpt.csv (llm-foundry's
``scripts/train/benchmarking/README.md``: MPT-125M to 70B, sequences of 512 to 65,536
tokens, 8 to 512 GPUs, A100-40GB, A100-80GB and H100, BF16 and FP8, PyTorch FSDP) with the
layout each row states: FULL_SHARD as ``zero="fsdp"``, SHARD_GRAD_OP as FSDP that keeps
its gathered weights from the forward to the backward (``reshard_after_forward=False``),
activation checkpointing as full recomputation, the MP mode's gradient reduction (DEFAULT:
FP32, PURE: BF16), micro-batch and gradient accumulation. Predicted and published tokens/s per
GPU are compared (the table's MFU counts the whole attention matrix; tokens are
definition-free). One JSON line per row, then a summary per table section, per
activation checkpointing and per sequence band.

What the table does not say is taken from the repository it lives in (see
data/reference/README.md): H100 rows are DGX H100 on NDR InfiniBand (the section names
no network), A100 rows DGX A100 on 8 x 200G RoCE ("1600 Gbps node-node interconnect");
the A100-40GB runs on DGX A100 servers with the 40 GB part (1.555 TB/s HBM2). Memory is
not checked (the runs fit, as published). Every row ran llm-foundry's benchmark script,
whose ``--attn_impl`` defaulted to ``triton`` (the Triton FlashAttention of 2023, beside
flash-attn 1.0.x) until after the last row was published: ``attention_kernel="flash1"``.
FP8 rows ran Transformer Engine 0.10's delayed scaling.

``--fit`` refits the one constant this table calibrates, the 2023 kernels' share on
Hopper (``ATTENTION_KERNEL_EFF[("flash1", "hopper")]``), on every other H100 row with a
sequence over 4,096 tokens, and reports the other half before and after; Ampere's share
is the published ratio and is only checked here.

Usage: ``python benchmarks/accuracy_llmfoundry.py [--fit]``
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fabricsim as fs
from fabricsim.catalog import get_catalog, with_systems
from fabricsim.fabric import Fabric
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import StepResult, simulate_step

ROWS = Path(__file__).resolve().parents[1] / "data" / "reference" / "llm_foundry_mpt.csv"

#: DGX A100 with the 40 GB A100 (1.555 TB/s HBM2), as a user would define it.
CATALOG = with_systems(get_catalog(), {"dgx-a100-40gb": {"base": "dgx-a100",
                                                         "gpu": "a100-sxm-40gb"}})
SYSTEMS = {"h100_80gb": ("dgx-h100", "ib-ndr"), "a100_80gb": ("dgx-a100", "roce-200g"),
           "a100_40gb": ("dgx-a100-40gb", "roce-200g")}


def load_rows() -> list[dict[str, str]]:
    """The vendored table, one dict per published row."""
    with ROWS.open(newline="") as f:
        return list(csv.DictReader(f))


def config(r: dict[str, str]) -> ParallelConfig:
    """The row's layout as fabricsim's ParallelConfig."""
    mb, accum, gpus = int(r["micro_batch"]), int(r["grad_accum"]), int(r["gpus"])
    fp8 = "fp8" in r["precision"]
    # SHARD_GRAD_OP: FSDP keeps each micro-batch's gathered weights to its backward and
    # still casts, divides and reduce-scatters its gradients every micro-batch
    return ParallelConfig(
        zero="fsdp", reshard_after_forward=r["sharding"] == "FULL_SHARD", micro_batch=mb,
        global_batch=mb * gpus * accum, seq_len=int(r["seq_len"]),
        recompute="full" if r["act_ckpt"] == "True" else "none",
        precision="fp8" if fp8 else "bf16", fp8_recipe="delayed" if fp8 else None,
        grad_reduce_dtype="fp32" if r["mp_mode"] == "DEFAULT" else "bf16",
        attention_kernel="flash1")


def label(r: dict[str, str]) -> str:
    ck = " ckpt" if r["act_ckpt"] == "True" else ""
    return (f"MPT-{r['model']} {r['gpus']}x{r['gpu']} seq {r['seq_len']} mb{r['micro_batch']}"
            f" x{r['grad_accum']} {r['precision']}{ck}")


def predict(r: dict[str, str], comm_factory: Callable[[Fabric], CommModel] = EngineComm,
            **update: Any) -> StepResult:
    """The step of row ``r`` as the table gives it, with ``update`` over its layout."""
    system, fabric = SYSTEMS[r["gpu"]]
    fab = fs.build_cluster(system, max(1, int(r["gpus"]) // 8), fabric=fabric,
                           catalog=CATALOG)
    model = get_model(f"mpt-{r['model']}").model_copy(update={"seq": int(r["seq_len"])})
    return simulate_step(model, config(r).model_copy(update=update), fab,
                         comm_factory(fab), check_memory=False)


def run(comm_factory: Callable[[Fabric], CommModel]) -> list[dict[str, Any]]:
    """Predict every row; one dict per row."""
    out = []
    for r in load_rows():
        t0 = time.perf_counter()
        res = predict(r, comm_factory)
        pred = res.tokens_per_s / res.world
        meas = float(r["tokens_per_s_per_gpu"])
        out.append({"case": label(r), "section": r["section"], "gpu": r["gpu"],
                    "seq_len": int(r["seq_len"]), "act_ckpt": r["act_ckpt"] == "True",
                    "precision": r["precision"], "first_date": r["first_date"],
                    "published_tokens_per_gpu": meas,
                    "predicted_tokens_per_gpu": round(pred, 1),
                    "rel_error": round(pred / meas - 1, 4),
                    "comm_fraction": round(res.comm_fraction, 4),
                    "parallel": res.parallel, "wall_s": round(time.perf_counter() - t0, 3)})
    return out


def _stats(errs: list[float]) -> dict[str, Any]:
    a = [abs(e) for e in errs]
    return {"rows": len(a), "median_abs_error": round(statistics.median(a), 4),
            "mean_signed_error": round(statistics.mean(errs), 4),
            "max_abs_error": round(max(a), 4)}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Error per table section, per activation checkpointing and per sequence band."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        band = "seq<=4096" if r["seq_len"] <= 4096 else "seq>4096"
        for key in ("all", r["section"], f"ckpt={r['act_ckpt']}", band,
                    f"{r['gpu']}/{band}"):
            groups.setdefault(key, []).append(r["rel_error"])
    return {"summary": True, **{k: _stats(v) for k, v in groups.items()}}


def fit() -> dict[str, Any]:  # pragma: no cover - calibration tool
    """Refit Hopper's ``flash1`` share on half of the long-sequence H100 rows (every
    other one in table order, by median absolute log error); report the other half."""
    import math

    import fabricsim.workloads.training.compute as comp

    key = ("flash1", "hopper")
    base = comp.ATTENTION_KERNEL_EFF[key]
    first = run(lambda fab: EngineComm(fab))
    idx = [i for i, r in enumerate(first) if r["gpu"] == "h100_80gb" and r["seq_len"] > 4096]
    fit_idx, held = idx[::2], idx[1::2]

    def errors(share: float) -> list[float]:
        comp.ATTENTION_KERNEL_EFF[key] = share
        try:
            return [r["rel_error"] for r in run(lambda fab: EngineComm(fab))]
        finally:
            comp.ATTENTION_KERNEL_EFF[key] = base

    best = min((statistics.median(abs(math.log1p(e[i])) for i in fit_idx), k)
               for k in [0.25 + 0.01 * j for j in range(76)] for e in [errors(k)])
    before, after = errors(1.0), errors(best[1])
    return {"constant": f"ATTENTION_KERNEL_EFF[{key!r}]", "was": base,
            "fitted": round(best[1], 2), "fit_rows": len(fit_idx), "held_out_rows": len(held),
            "held_out_median_abs_error_at_1.0": round(statistics.median(
                abs(before[i]) for i in held), 4),
            "held_out_median_abs_error_after": round(statistics.median(
                abs(after[i]) for i in held), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true",
                    help="refit Hopper's flash1 attention share (half fit, half held out)")
    if ap.parse_args(argv).fit:  # pragma: no cover - calibration tool
        sys.stdout.write(json.dumps(fit(), indent=1) + "\n")
        return 0
    rows = run(lambda fab: EngineComm(fab))
    for r in rows:
        sys.stdout.write(json.dumps(r) + "\n")
    sys.stdout.write(json.dumps(summary(rows)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
