"""Accuracy of the training step model against NVIDIA's NeMo / Megatron-Bridge tables.

Runs every row of data/reference/nemo_perf.csv whose model fabricsim ships (Llama 2/3,
GPT-3 175B, Mixtral 8x7B, DeepSeek-V3) on DGX-H100, DGX-B200 and DGX-GB200, with the
layout the table gives (GBS, MBS, sequence, FSDP, TP, PP, CP, VP, EP) and NeMo's
defaults for what it does not say: sequence parallelism and TP communication overlap
with TP > 1, the distributed optimizer (ZeRO-1) unless FSDP, DP overlap, no
recomputation, balanced experts (the tables force-balance MoE tokens), the embedding and
loss counted as pipeline layers where the layers would not split otherwise. FP8 rows use
Transformer Engine's per-tensor current scaling (FP8, FP8-CS), MX scaling (FP8-MX,
MXFP8) or blockwise scaling as the table says. One JSON line per row (predicted vs
published tokens/s per GPU), then a summary per system and precision.

Where a layout was published in several releases, the newest release's figure is used.
Rows of other models (Nemotron, Qwen3, GPT-OSS, Llama 4, Kimi), of B300/GB300 and in NVFP4
are not run: fabricsim has no preset for them.

``--fit`` refits the FP8 GEMM share (``MAMF[(generation, "fp8")]``) for Hopper and for
Blackwell on every other dense row of that generation in row order and reports the
held-out half before and after; nothing else is fitted here.

Usage: ``python benchmarks/accuracy_nemo.py [--fit]``
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fabricsim as fs
from fabricsim.errors import ModelError
from fabricsim.fabric import Fabric
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.models import TransformerSpec, get_model
from fabricsim.workloads.parallel import ParallelConfig
from fabricsim.workloads.step import simulate_step

ROWS = Path(__file__).resolve().parents[1] / "data" / "reference" / "nemo_perf.csv"

#: Published model names -> fabricsim presets.
MODELS = {
    "LLAMA2-7B": "llama2-7b", "LLAMA2-13B": "llama2-13b", "LLAMA2-70B": "llama2-70b",
    "LLAMA3-8B": "llama3-8b", "LLAMA3_8B": "llama3-8b",
    "LLAMA3-70B": "llama3-70b", "LLAMA3_70B": "llama3-70b",
    "LLAMA3-405B": "llama3-405b", "LLAMA3.1-405B": "llama3-405b",
    "LLAMA3.1_405B": "llama3-405b", "GPT3-175B": "gpt3-175b",
    "Mixtral-8x7B": "mixtral-8x7b", "DeepSeekV3": "deepseek-v3",
}
#: Published systems -> fabricsim presets (DGX-B200 is an HGX B200 board).
SYSTEMS = {"DGX-H100": "dgx-h100", "DGX-B200": "hgx-b200", "DGX-GB200": "gb200-nvl72"}
#: Published precision -> (fabricsim precision, FP8 recipe).
PRECISIONS = {"BF16": ("bf16", "tensorwise"), "FP8": ("fp8", "tensorwise"),
              "FP8-CS": ("fp8", "tensorwise"), "FP8-MX": ("fp8", "mxfp8"),
              "MXFP8": ("fp8", "mxfp8"), "FP8-blockwise": ("fp8", "blockwise")}


@dataclass
class Row:
    container: str
    system: str
    model: str
    gpus: int
    precision: str
    published: float
    cfg: ParallelConfig
    source: str

    @property
    def generation(self) -> str:
        return "hopper" if self.system == "DGX-H100" else "blackwell"

    @property
    def dense(self) -> bool:
        return not get_model(MODELS[self.model]).is_moe

    @property
    def label(self) -> str:
        return f"{self.model} {self.gpus}x{self.system} {self.precision} ({self.container})"


def _int(v: str, default: int = 1) -> int:
    return int(float(v)) if v.strip() else default


def _release(c: str) -> tuple[int, ...]:
    return tuple(int(x) for x in c.split(".") if x.isdigit())


#: DeepSeek-V3's pipeline layouts by (pp, vp), as Megatron-Bridge's DeepSeek-V3 recipe
#: picks them when a run gives no layout (src/megatron/bridge/recipes/deepseek/
#: deepseek_v3.py, ``layout_map``; the H100 runs pass "Et|(tt|)*30mL" explicitly in
#: scripts/performance/configs/deepseek/deepseek_llm_pretrain.py). Every layout carries
#: the recipe's one MTP layer (m) next to the loss.
DEEPSEEK_LAYOUTS = {
    (4, 1): "Et*16|t*16|t*16|t*13mL",
    (8, 1): "Et*8|(t*8|)*6t*5mL", (4, 2): "Et*8|(t*8|)*6t*5mL",
    (16, 1): "Et*4|(t*4|)*14tmL", (8, 2): "Et*4|(t*4|)*14tmL",
    (4, 4): "Et*4|(t*4|)*14tmL",
    (8, 4): "Et|(tt|)*30mL",
}


#: DeepSeek-V3 runs whose NeMo configuration overlaps the expert all-to-all with compute
#: (``moe_a2a_overlap=True`` in Megatron-Bridge's scripts/performance/configs/deepseek/
#: deepseek_workload_base_configs.py): GB200 in MXFP8, and B200 in MXFP8 at pp 8 / ep 32
#: (its V2 layout). All of NeMo's DeepSeek-V3 configurations dispatch through the flex
#: dispatcher (HybridEP or DeepEP): one network copy per destination server.
DEEPSEEK_A2A_OVERLAP = {("DGX-GB200", "mxfp8", 4, 4, 64), ("DGX-GB200", "mxfp8", 8, 4, 32),
                        ("DGX-GB200", "mxfp8", 8, 2, 64), ("DGX-B200", "mxfp8", 8, 2, 32)}


#: Every NeMo DeepSeek-V3 configuration folds the experts with expert tensor parallelism
#: 1 (``BASE_DEEPSEEK_V3_CONFIG = WorkloadBaseConfig(expert_tensor_parallel_size=1)`` in
#: the same file): whole experts per GPU and EP groups of consecutive GPUs, whatever the
#: attention's TP (only the H100 runs have TP 2).


#: Selective recomputation of NeMo's DeepSeek-V3 configurations (``recompute_modules`` in
#: the same file; no ``core_attn``): MLA's up-projections everywhere, plus the dense MLP
#: on H100 and in B200's V2 layout, only the dense MLP for GB200 in FP8 current scaling.
def _deepseek_recompute(system: str, recipe: str, pp: int, ep: int) -> tuple[str, ...]:
    if system == "DGX-H100" or (system, recipe, pp, ep) == ("DGX-B200", "mxfp8", 8, 32):
        return ("mla_up_proj", "mlp")
    if system == "DGX-GB200" and recipe == "tensorwise":
        return ("mlp",)
    return ("mla_up_proj",)


def _config(r: dict[str, str], model: TransformerSpec) -> ParallelConfig:
    tp, pp, cp, ep = _int(r["tp"]), _int(r["pp"]), _int(r["cp"]), _int(r["ep"])
    vp = _int(r["vp"])
    prec, recipe = PRECISIONS[r["precision"]]
    layout = DEEPSEEK_LAYOUTS.get((pp, vp)) if model.name == "deepseek-v3" else None
    split = (layout is None and model.layers % (pp * vp) != 0
             and (model.layers + 2) % (pp * vp) == 0)
    return ParallelConfig(
        tp=tp, pp=pp, cp=cp, ep=ep, interleave=vp, micro_batch=_int(r["mbs"]),
        global_batch=_int(r["gbs"]), seq_len=_int(r["seq_len"]), precision=prec,
        fp8_recipe=recipe if prec == "fp8" else None, zero="fsdp" if _int(r["fsdp"], 0) > 0 else 1,
        sequence_parallel=tp > 1, tp_comm_overlap=tp > 1,
        account_for_embedding_loss=split, pipeline_layout=layout,
        moe_dispatcher="deepep" if layout else "alltoall",
        recompute="selective" if layout else "none",
        recompute_modules=_deepseek_recompute(r["system"], recipe, pp, ep) if layout else None,
        ep_overlap=(r["system"], recipe, pp, vp, ep) in DEEPSEEK_A2A_OVERLAP,
        etp=1 if layout else None)


def rows() -> list[Row]:
    """The covered rows, newest release per layout."""
    newest: dict[tuple[str, ...], tuple[tuple[int, ...], dict[str, str]]] = {}
    with ROWS.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if (r["model"] not in MODELS or r["system"] not in SYSTEMS
                    or r["precision"] not in PRECISIONS or not r["tokens_per_s_per_gpu"]):
                continue
            key = (r["system"], MODELS[r["model"]], r["gpus"], r["precision"], r["gbs"],
                   r["mbs"], r["seq_len"], r["tp"], r["pp"], r["cp"], r["vp"], r["ep"],
                   str(_int(r["fsdp"], 0) > 0))
            rel = _release(r["container"])
            if key not in newest or rel >= newest[key][0]:
                newest[key] = (rel, r)
    out = []
    for _, r in newest.values():
        model = get_model(MODELS[r["model"]])
        out.append(Row(r["container"], r["system"], r["model"], int(r["gpus"]),
                       r["precision"], float(r["tokens_per_s_per_gpu"]),
                       _config(r, model), f"{r['source_repo']} {r['source_commit'][:8]}"))
    return out


def fabric_for(row: Row) -> Fabric:
    """The cluster a row ran on: 8-GPU servers, or GB200 racks of 64 GPUs (72 for one
    rack of up to 72)."""
    system = SYSTEMS[row.system]
    if system == "gb200-nvl72":
        per = row.gpus if row.gpus <= 72 else 64
        return fs.build_cluster(system, max(1, row.gpus // per), gpus_per_node=per)
    if row.gpus < 8:
        return fs.build_cluster(system, 1, gpus_per_node=row.gpus)
    return fs.build_cluster(system, row.gpus // 8)


def run(comm_factory: Callable[[Fabric], CommModel] = EngineComm,
        only: Callable[[Row], bool] = lambda r: True) -> list[dict[str, Any]]:
    """Predict every covered row; one dict per row."""
    out = []
    for row in rows():
        if not only(row):
            continue
        t0 = time.perf_counter()
        fab = fabric_for(row)
        try:
            r = simulate_step(get_model(MODELS[row.model]), row.cfg, fab, comm_factory(fab),
                              check_memory=False)
        except ModelError as e:  # e.g. 61 layers over pp·vp = 16 (a custom layout)
            out.append({"case": row.label, "not_covered": str(e)})
            continue
        pred = r.tokens_per_s / r.world
        out.append({"case": row.label, "system": row.system, "precision": row.precision,
                    "generation": row.generation, "dense": row.dense,
                    "published_tokens_per_gpu": row.published,
                    "predicted_tokens_per_gpu": round(pred, 1),
                    "rel_error": round(pred / row.published - 1, 4),
                    "parallel": r.parallel, "comm_fraction": round(r.comm_fraction, 4),
                    "source": row.source, "wall_s": round(time.perf_counter() - t0, 3)})
    return out


def summary(res: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and max absolute error per (system, precision class, dense/MoE)."""
    groups: dict[str, list[float]] = {}
    for r in res:
        if "not_covered" in r:
            continue
        prec = "bf16" if r["precision"] == "BF16" else "fp8"
        kind = "dense" if r["dense"] else "moe"
        groups.setdefault(f"{r['system']}/{prec}/{kind}", []).append(abs(r["rel_error"]))
        groups.setdefault("all", []).append(abs(r["rel_error"]))
    return {k: {"rows": len(v), "median_abs_error": round(statistics.median(v), 4),
                "max_abs_error": round(max(v), 4)} for k, v in sorted(groups.items())}


def fit() -> dict[str, Any]:  # pragma: no cover - a calibration run, not a test
    """Refit ``MAMF[(gen, "fp8")]`` per generation on every other dense FP8 row (row
    order), by the median absolute log error; report the other half before and after."""
    import fabricsim.workloads.compute as comp

    report: dict[str, Any] = {}
    for gen in ("hopper", "blackwell"):
        idx = [r for r in rows() if r.generation == gen and r.dense
               and r.cfg.precision == "fp8"]
        fit_rows, held = idx[::2], idx[1::2]

        def err(sel: list[Row]) -> list[float]:
            ids = {id(r) for r in sel}
            keep = {(r.label) for r in sel}
            res = run(only=lambda r: r.label in keep)
            del ids
            return [abs(math.log1p(x["rel_error"])) for x in res if "rel_error" in x]

        key = (gen, "fp8")
        base = comp.MAMF[key]
        before = statistics.median(err(held)) if held else math.nan
        best = (math.inf, base)
        for j in range(41):
            comp.MAMF[key] = 0.50 + 0.01 * j
            score = statistics.median(err(fit_rows))
            best = min(best, (score, comp.MAMF[key]))
        comp.MAMF[key] = best[1]
        after = statistics.median(err(held)) if held else math.nan
        report[gen] = {"constant": f"MAMF[{key!r}]", "was": base, "fitted": round(best[1], 3),
                       "fit_rows": len(fit_rows), "held_out_rows": len(held),
                       "held_out_median_abs_log_error_before": round(before, 4),
                       "held_out_median_abs_log_error_after": round(after, 4)}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="refit the FP8 GEMM shares")
    args = ap.parse_args(argv)
    if args.fit:
        print(json.dumps(fit(), indent=1))
        return 0
    res = run()
    for r in res:
        print(json.dumps(r))
    print(json.dumps({"summary": True, **summary(res)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
