"""Accuracy of the training step model against NVIDIA's NeMo / Megatron-Bridge tables.

Runs every row of data/reference/nemo_perf.csv whose model fabricsim ships (Llama 2/3,
GPT-3 5B/20B/175B, Nemotron-3 8B/22B and -4 15B/340B, Mixtral 8x7B/8x22B, Qwen3-30B-A3B
and 235B-A22B, GPT-OSS-120B, Llama 4 Scout, Kimi K2, DeepSeek-V3, Nemotron 3 Nano and
Super) on
DGX-H100, DGX-B200, DGX-GB200, DGX-B300 and DGX-GB300, with the layout the table gives
(GBS, MBS, sequence, FSDP, TP, PP, CP, VP, EP) and, for what it does not say, what the
release's Megatron-Bridge / NeMo performance configuration sets (see ``_config``):
sequence parallelism and
TP communication overlap with TP > 1, the distributed optimizer (ZeRO-1) unless FSDP, DP
overlap, experts folded out of TP, the expert all-to-all overlapped where the release
does, each model's recomputation modules and pipeline layouts, balanced experts (the
tables force-balance MoE tokens). FP8 rows use Transformer Engine's per-tensor current
scaling (FP8, FP8-CS), MX scaling (FP8-MX, MXFP8) or blockwise scaling as the table says;
NVFP4 rows run ``precision="fp4"``. One JSON line per row (predicted vs published tokens/s
per GPU), then a summary per system, number format and dense/MoE, over all rows and
over the *current* ones (the newest release of each system, model and format), then
how far NVIDIA's own figure for one layout moves between releases.

Where a layout was published in several releases, the newest release's figure is used.
Nemotron 3 Nano and Super, hybrids of Mamba-2, attention and MoE blocks (Super's MoE
latent), run from their block patterns (``hybrid_pattern``) with nothing fitted on them,
and are summarised apart (``hybrid``); Super's multi-token-prediction layers are not
modelled. Rows of models fabricsim does not ship (Nemotron 3 Ultra, Llama 4 Maverick,
DeepSeek-V4) are not run.

``--fit [GENERATION ...]`` refits one constant each on every other row of its kind in row
order and reports the held-out half before and after: the FP8 GEMM share
(``MAMF[(generation, "fp8")]``) for Hopper and Blackwell, Blackwell Ultra's sustained
share, and the expert all-to-all overlap (``ep-overlap``); nothing else is fitted here.

Usage: ``python benchmarks/accuracy_nemo.py [--fit [NAME ...]]`` (names: hopper, blackwell,
blackwell-ultra, ep-overlap; none: all)
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
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step

ROWS = Path(__file__).resolve().parents[1] / "data" / "reference" / "nemo_perf.csv"

#: Published model names -> fabricsim presets.
MODELS = {
    "LLAMA2-7B": "llama2-7b", "LLAMA2-13B": "llama2-13b", "LLAMA2-70B": "llama2-70b",
    "LLAMA3-8B": "llama3-8b", "LLAMA3_8B": "llama3-8b",
    "LLAMA3-70B": "llama3-70b", "LLAMA3_70B": "llama3-70b",
    "LLAMA3-405B": "llama3-405b", "LLAMA3.1-405B": "llama3-405b",
    "LLAMA3.1_405B": "llama3-405b", "GPT3-175B": "gpt3-175b",
    "Mixtral-8x7B": "mixtral-8x7b", "DeepSeekV3": "deepseek-v3",
    "Mixtral-8x22B": "mixtral-8x22b", "Qwen3_30B_a3B": "qwen3-30b-a3b",
    "Qwen3_235B_a22B": "qwen3-235b-a22b", "GPT OSS 120B": "gpt-oss-120b",
    "Kimi_K2": "kimi-k2", "LLAMA4-Scout-LLM": "llama4-scout",
    "Nemotron-8B": "nemotron3-8b", "Nemotron-22B": "nemotron3-22b",
    "Nemotron-15B": "nemotron4-15b", "Nemotron-340B": "nemotron4-340b",
    "GPT3-5B": "gpt3-5b", "GPT3-20B": "gpt3-20b", "Nemotron_3_Nano": "nemotron-3-nano",
    "Nemotron_3_Super": "nemotron-3-super",
}
#: Published systems -> fabricsim presets (DGX-B200/B300 are HGX boards).
SYSTEMS = {"DGX-H100": "dgx-h100", "DGX-B200": "hgx-b200", "DGX-GB200": "gb200-nvl72",
           "DGX-B300": "hgx-b300", "DGX-GB300": "gb300-nvl72"}
#: Published precision -> (fabricsim precision, number format: the FP8 recipe, or bf16 /
#: nvfp4). The format names one layout across releases (the tables renamed FP8-CS to FP8
#: and FP8-MX to MXFP8).
PRECISIONS = {"BF16": ("bf16", "bf16"), "FP8": ("fp8", "tensorwise"),
              "FP8-CS": ("fp8", "tensorwise"), "FP8-MX": ("fp8", "mxfp8"),
              "MXFP8": ("fp8", "mxfp8"), "FP8-blockwise": ("fp8", "blockwise"),
              "NVFP4": ("fp4", "nvfp4")}
_FORMAT = {label: fmt for label, (_, fmt) in PRECISIONS.items()}


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
        return "hopper" if self.system == "DGX-H100" else \
            "blackwell-ultra" if self.system in ("DGX-B300", "DGX-GB300") else "blackwell"

    @property
    def dense(self) -> bool:
        return not get_model(MODELS[self.model]).is_moe

    @property
    def hybrid(self) -> bool:
        return get_model(MODELS[self.model]).is_hybrid

    @property
    def label(self) -> str:
        return f"{self.model} {self.gpus}x{self.system} {self.precision} ({self.container})"


def _int(v: str, default: int = 1) -> int:
    return int(float(v)) if v.strip() else default


def _release(c: str) -> tuple[int, ...]:
    return tuple(int(x) for x in c.split(".") if x.isdigit())


#: DeepSeek-V3's pipeline layouts by (pp, vp), as Megatron-Bridge's DeepSeek-V3 recipe
#: picks them when a run gives no layout (src/megatron/bridge/recipes/deepseek/
#: deepseek_v3.py, ``layout_map``; the H100 runs pass "Et|(tt|)*30mL" and GB300's PP 2 x
#: VP 8 runs "Et*4|(t*4|)*14tmL" explicitly in scripts/performance/configs/deepseek/).
#: Every layout carries the recipe's one MTP layer (m) next to the loss. 25.11's PP 2 x
#: VP 4 runs match no committed configuration and no entry of the map: their layout is
#: unknown and they are not run. Its GB200 run at PP 8 x VP 4 (no committed configuration
#: either) takes the H100 runs' explicit layout, the only 32-stage one the configurations
#: give.
DEEPSEEK_LAYOUTS = {
    (4, 1): "Et*16|t*16|t*16|t*13mL",
    (8, 1): "Et*8|(t*8|)*6t*5mL", (4, 2): "Et*8|(t*8|)*6t*5mL",
    (16, 1): "Et*4|(t*4|)*14tmL", (8, 2): "Et*4|(t*4|)*14tmL",
    (4, 4): "Et*4|(t*4|)*14tmL", (2, 8): "Et*4|(t*4|)*14tmL",
    (8, 4): "Et|(tt|)*30mL",
}
#: Kimi K2 (Megatron-Bridge recipes/kimi/kimi_k2.py, ``_get_kimi_k2_pipeline_layout``):
#: 16 virtual stages of 4 layers, the embedding in the first, the loss beside the last
#: layer, no MTP.
KIMI_LAYOUTS = {(4, 4): "Et*4|(t*4|)*14tL"}

#: Settings of the table rows taken from Megatron-Bridge's performance configurations of
#: each release (scripts/performance/configs/<model>/*_workload_base_configs.py and
#: *_llm_pretrain.py on the release branch r0.1.0 = 25.09 ... r0.6.0 = 26.08; perf_recipes/
#: from r0.6.0) and NeMo 2.0's scripts/performance (25.02-25.07):
#:
#: * every MoE recipe folds its experts out of TP (``expert_tensor_parallel_size=1``);
#: * the expert all-to-all overlapped with compute (``moe_a2a_overlap``) where the row's
#:   release turns it on: :func:`_a2a_overlap`;
#: * DeepSeek-V3 and Kimi K2 dispatch through the flex dispatcher (HybridEP/DeepEP), the
#:   others through Megatron's all-to-all;
#: * selective recomputation as each lists it: :func:`_recompute`;
#: * Qwen3-235B counts the embedding and the loss as pipeline layers (96 units);
#: * sequence parallelism and TP communication overlap with TP > 1, except Qwen3 on H100,
#:   whose scripts turn the overlap off.


def _a2a_overlap(system: str, model: str, recipe: str, release: tuple[int, ...],
                 shape: tuple[int, int, int]) -> bool:
    """Whether the row's configuration overlaps the expert all-to-all with compute."""
    pp, vp, ep = shape
    new = release >= (26, 6)  # full-iteration CUDA graphs, A2A overlap for MXFP8 MoE
    if model == "deepseek-v3":
        return (new and system in ("DGX-GB200", "DGX-GB300") and recipe == "mxfp8") or \
            (system, recipe, pp, vp, ep) == ("DGX-B200", "mxfp8", 8, 2, 32) or \
            (system == "DGX-H100" and release == (25, 9))
    if model == "qwen3-30b-a3b":
        return new and recipe == "mxfp8"
    if model == "qwen3-235b-a22b":
        return (system == "DGX-H100" and release >= (25, 11)) or \
            (system == "DGX-B300" and (26, 2) <= release < (26, 4)) or \
            (new and system in ("DGX-GB200", "DGX-GB300"))
    if model == "gpt-oss-120b":
        return (system == "DGX-GB200" and recipe == "bf16" and (26, 4) <= release < (26, 6)) \
            or (new and recipe == "mxfp8" and system in ("DGX-GB200", "DGX-GB300"))
    return False


def _recompute(system: str, model: str, recipe: str, release: tuple[int, ...],
               shape: tuple[int, int, int]) -> tuple[str, ...] | None:
    """Selective recomputation modules of the row's configuration (None: none)."""
    pp, _, ep = shape
    if model == "deepseek-v3":  # MLA's up-projections, the dense MLP on H100 ...
        if system == "DGX-GB300" and release >= (26, 6):
            return None
        if system == "DGX-H100" or (system, recipe, pp, ep) == ("DGX-B200", "mxfp8", 8, 32):
            return ("mla_up_proj", "mlp")
        if system == "DGX-GB200" and recipe == "tensorwise" and release >= (25, 11):
            return ("mlp",)
        return ("mla_up_proj",)
    if model == "kimi-k2":
        return ("mla_up_proj",)
    if model == "gpt-oss-120b" and recipe == "bf16" and system in ("DGX-GB200", "DGX-B200",
                                                                     "DGX-H100"):
        return ("layernorm", "moe_act")
    if model == "nemotron4-340b" and system == "DGX-H100":
        return ("core_attn",)  # the 24.07 launcher's activations_checkpoint: selective
    return None


def _batch(r: dict[str, str]) -> tuple[int, int]:
    """(GBS, MBS) of a row. NVIDIA's 25.02/25.04 pages print Mixtral 8x22B's as GBS 1,
    MBS 64 with GA 16 on TP 2 x PP 4 x CP 8 over 256 GPUs: the columns are swapped
    (NeMo's recommended configuration: GBS 64, MBS 1; 64 / 4 DP ranks = GA 16)."""
    gbs, mbs = _int(r["gbs"]), _int(r["mbs"])
    return (mbs, gbs) if gbs < mbs else (gbs, mbs)


#: Layers whose activations NVIDIA's Llama 3 70B FSDP recipes (TP 1, PP 1, MBS 2) keep in
#: Grace memory (cpu_offloading_num_layers; Megatron-Bridge perf_recipes/llama/gb200 and
#: gb300 llama3.py), by (system, recipe): the configuration as published, not fitted (the
#: older releases' rows assumed to offload as the current recipes do).
LLAMA3_70B_OFFLOAD = {("DGX-GB200", "bf16"): 20, ("DGX-GB200", "tensorwise"): 40,
                      ("DGX-GB300", "bf16"): 30, ("DGX-GB300", "tensorwise"): 20}


def _config(r: dict[str, str], model: TransformerSpec) -> ParallelConfig:
    tp, pp, cp, ep = _int(r["tp"]), _int(r["pp"]), _int(r["cp"]), _int(r["ep"])
    vp = _int(r["vp"])
    prec, recipe = PRECISIONS[r["precision"]]
    rel, shape = _release(r["container"]), (pp, vp, ep)
    name = model.name
    layout = DEEPSEEK_LAYOUTS.get((pp, vp)) if name == "deepseek-v3" else \
        KIMI_LAYOUTS.get((pp, vp)) if name == "kimi-k2" else None
    split = layout is None and pp > 1 and (name == "qwen3-235b-a22b" or (
        model.layers % (pp * vp) != 0 and (model.layers + 2) % (pp * vp) == 0))
    modules = _recompute(r["system"], name, recipe, rel, shape)
    gbs, mbs = _batch(r)
    fsdp = _int(r["fsdp"], 0) > 0
    offload = LLAMA3_70B_OFFLOAD.get((r["system"], recipe)) \
        if name == "llama3-70b" and fsdp and (tp, pp, mbs) == (1, 1, 2) else None
    return ParallelConfig(
        tp=tp, pp=pp, cp=cp, ep=ep, vp=vp, micro_batch=mbs,
        global_batch=gbs, seq_len=_int(r["seq_len"]), precision=prec,
        fp8_recipe=recipe if prec == "fp8" else None,
        # the FSDP column's runs use Megatron-FSDP (use_megatron_fsdp)
        **({"zero": "fsdp", "fsdp_impl": "megatron"} if fsdp else {}), offload_layers=offload,
        sequence_parallel=tp > 1,
        # Qwen3's H100 scripts turn TP overlap off (CommOverlapConfig(tp_comm_overlap=False))
        tp_comm_overlap=tp > 1 and not (name.startswith("qwen3") and r["system"] == "DGX-H100"),
        account_for_embedding_loss=split, pipeline_layout=layout,
        moe_dispatcher="deepep" if name in ("deepseek-v3", "kimi-k2") else "alltoall",
        recompute="selective" if modules else "none", recompute_modules=modules,
        ep_overlap=ep > 1 and _a2a_overlap(r["system"], name, recipe, rel, shape),
        # 25.09's DeepSeek-V3 on H100 reduces gradients after the backward
        # (run_script.py: overlap_grad_reduce = False on H100)
        overlap_grad_reduce=not (name == "deepseek-v3" and r["system"] == "DGX-H100"
                                 and rel == (25, 9)),
        etp=1 if model.is_moe else None)


def _layout_key(r: dict[str, str], model: str) -> tuple[str, ...]:
    """A row's layout, alike across releases (the tables renamed FP8-CS to FP8 and FP8-MX
    to MXFP8, and print an unused VP or EP as 1 or blank)."""
    return (r["system"], model, r["gpus"], _FORMAT[r["precision"]], r["gbs"], r["mbs"],
            r["seq_len"], str(_int(r["fsdp"], 0) > 0),
            *(str(_int(r[k])) for k in ("tp", "pp", "cp", "vp", "ep")))


def rows() -> list[Row]:
    """The covered rows, newest release per layout."""
    newest: dict[tuple[str, ...], tuple[tuple[int, ...], dict[str, str]]] = {}
    with ROWS.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if (r["model"] not in MODELS or r["system"] not in SYSTEMS
                    or r["precision"] not in PRECISIONS or not r["tokens_per_s_per_gpu"]):
                continue
            key = _layout_key(r, MODELS[r["model"]])
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
    """The cluster a row ran on: 8-GPU servers, or GB200/GB300 racks of 64 GPUs (72 for
    one rack of up to 72)."""
    system = SYSTEMS[row.system]
    if system in ("gb200-nvl72", "gb300-nvl72"):
        per = row.gpus if row.gpus <= 72 else 64
        return fs.build_cluster(system, max(1, row.gpus // per), gpus_per_node=per)
    if row.gpus < 8:
        return fs.build_cluster(system, 1, gpus_per_node=row.gpus)
    return fs.build_cluster(system, row.gpus // 8)


def run(comm_factory: Callable[[Fabric], CommModel] = EngineComm,
        only: Callable[[Row], bool] = lambda r: True) -> list[dict[str, Any]]:
    """Predict every covered row; one dict per row. Rows on the same cluster share its
    fabric and communication model (and so the collective timings it caches)."""
    out = []
    clusters: dict[tuple[str, int], tuple[Fabric, CommModel]] = {}
    for row in rows():
        if not only(row):
            continue
        t0 = time.perf_counter()
        key = (row.system, row.gpus)
        if key not in clusters:
            built = fabric_for(row)
            clusters[key] = (built, comm_factory(built))
        fab, comm = clusters[key]
        try:
            r = simulate_step(get_model(MODELS[row.model]), row.cfg, fab, comm,
                              check_memory=False)
        except ModelError as e:  # e.g. 61 layers over pp·vp = 16 (a custom layout)
            out.append({"case": row.label, "not_covered": str(e)})
            continue
        pred = r.tokens_per_s / r.world
        out.append({"case": row.label, "system": row.system, "precision": row.precision,
                    "model": MODELS[row.model], "release": row.container,
                    "generation": row.generation, "dense": row.dense,
                    "hybrid": row.hybrid,
                    "published_tokens_per_gpu": row.published,
                    "predicted_tokens_per_gpu": round(pred, 1),
                    "rel_error": round(pred / row.published - 1, 4),
                    "parallel": r.parallel, "comm_fraction": round(r.comm_fraction, 4),
                    "source": row.source, "wall_s": round(time.perf_counter() - t0, 3)})
    return out


def summary(res: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and max absolute error per (system, number format, dense/MoE/hybrid), over
    all rows, dense, MoE and hybrid (Mamba) rows, and the *current* rows: those of the
    newest release that published the system, model and number format (what NVIDIA's
    software does today; older releases of the same pair ran older software, see
    :func:`release_spread`)."""
    done = [r for r in res if "not_covered" not in r]
    newest: dict[tuple[str, str, str], tuple[int, ...]] = {}
    for r in done:
        k = (r["system"], r["model"], _FORMAT[r["precision"]])
        newest[k] = max(newest.get(k, ()), _release(r["release"]))
    groups: dict[str, list[float]] = {}
    for r in done:
        prec = {"BF16": "bf16", "NVFP4": "nvfp4"}.get(r["precision"], "fp8")
        kind = "hybrid" if r.get("hybrid") else "dense" if r["dense"] else "moe"
        err = abs(r["rel_error"])
        groups.setdefault(f"{r['system']}/{prec}/{kind}", []).append(err)
        groups.setdefault("all", []).append(err)
        groups.setdefault(f"all/{kind}", []).append(err)
        k = (r["system"], r["model"], _FORMAT[r["precision"]])
        if _release(r["release"]) == newest[k]:
            groups.setdefault("current", []).append(err)
            groups.setdefault(f"current/{kind}", []).append(err)
    return {k: {"rows": len(v), "median_abs_error": round(statistics.median(v), 4),
                "max_abs_error": round(max(v), 4)} for k, v in sorted(groups.items())}


def release_spread() -> dict[str, Any]:
    """How far NVIDIA's own figure for one layout moves between releases: the floor under
    any model that, like fabricsim, has no software release in it.

    Every row of the tables counts (covered models or not). A layout is the system,
    model, GPUs, number format, GBS, MBS, sequence, FSDP, TP, PP, CP, VP and EP; its
    spread is the largest published tokens/s per GPU over the smallest. Where it exceeds
    1.5 no single prediction lies within 20 % of every release (1.2 / 0.8 = 1.5).

    Examples
    --------
    >>> s = release_spread()
    >>> s["layouts_in_several_releases"] > 50 and s["over_1.5"] >= 1
    True
    """
    by: dict[tuple[str, ...], dict[str, float]] = {}
    with ROWS.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if not r["tokens_per_s_per_gpu"] or r["precision"] not in _FORMAT:
                continue
            model = MODELS.get(r["model"]) or "".join(
                ch for ch in r["model"].upper() if ch.isalnum())
            key = _layout_key(r, model)
            rel = by.setdefault(key, {})
            rel[r["container"]] = max(rel.get(r["container"], 0.0),
                                      float(r["tokens_per_s_per_gpu"]))
    spreads = sorted(((max(v.values()) / min(v.values()), k, v) for k, v in by.items()
                      if len(v) > 1), key=lambda t: -t[0])
    ratios = [s for s, _, _ in spreads]
    return {
        "layouts": len(by), "layouts_in_several_releases": len(spreads),
        "median_spread": round(statistics.median(ratios), 3),
        "over_1.2": sum(s > 1.2 for s in ratios), "over_1.5": sum(s > 1.5 for s in ratios),
        "widest": [{"layout": " ".join(k[:4]) + " tp{}/pp{}/cp{}/vp{}/ep{}".format(*k[8:])
                    + f" gbs {k[4]} mbs {k[5]}", "spread": round(s, 2),
                    "releases": dict(sorted(v.items(), key=lambda kv: _release(kv[0])))}
                   for s, k, v in spreads[:5]],
    }


FITS = ("hopper", "blackwell", "blackwell-ultra", "ep-overlap")


def fit(only: tuple[str, ...] = FITS) -> dict[str, Any]:  # pragma: no cover - calibration
    """Refit one constant per GPU generation on every other dense FP8 row of it (row
    order), by the median absolute log error; report the other half before and after.
    Hopper and Blackwell: the FP8 GEMM share ``MAMF[(gen, "fp8")]``. Blackwell Ultra
    (B300, GB300; Blackwell's tensor cores and MAMF): ``SUSTAINED["blackwell-ultra"]``,
    the share of the same datasheet peak it sustains. ``ep-overlap``:
    ``EP_OVERLAP_EFFICIENCY`` (one value for Hopper and Blackwell, the same Megatron /
    DeepEP mechanism) on every other row that overlaps its expert all-to-all. NVFP4 is
    not fitted (``NVFP4_OVER_FP8`` is a published measurement): its rows are all held
    out."""
    import fabricsim.workloads.training.compute as comp
    import fabricsim.workloads.training.step as step

    report: dict[str, Any] = {}
    for gen in only:
        if gen == "ep-overlap":
            idx = [r for r in rows() if r.cfg.ep_overlap]
        else:
            idx = [r for r in rows() if r.generation == gen and r.dense
                   and r.cfg.precision == "fp8"]
        fit_rows, held = idx[::2], idx[1::2]

        def err(sel: list[Row]) -> list[float]:
            keep = {r.label for r in sel}
            res = run(only=lambda r: r.label in keep)
            return [abs(math.log1p(x["rel_error"])) for x in res if "rel_error" in x]

        table: dict[Any, float]
        if gen == "ep-overlap":
            table, key, grid = step.EP_OVERLAP_EFFICIENCY, "hopper", \
                [0.05 * j for j in range(17)]
        elif gen == "blackwell-ultra":
            table, key, grid = comp.SUSTAINED, gen, [0.60 + 0.01 * j for j in range(41)]
        else:
            table, key, grid = comp.MAMF, (gen, "fp8"), [0.50 + 0.01 * j for j in range(41)]
        base = table[key]
        before = statistics.median(err(held)) if held else math.nan
        best = (math.inf, base)
        keys = [key, "blackwell"] if gen == "ep-overlap" else [key]
        for v in grid:
            table.update(dict.fromkeys(keys, v))
            best = min(best, (statistics.median(err(fit_rows)), v))
        table.update(dict.fromkeys(keys, best[1]))
        after = statistics.median(err(held)) if held else math.nan
        name = {"blackwell-ultra": "SUSTAINED", "ep-overlap": "EP_OVERLAP_EFFICIENCY"}.get(
            gen, "MAMF")
        report[gen] = {"constant": f"{name}[{key!r}]", "was": base,
                       "fitted": round(best[1], 3), "fit_rows": len(fit_rows),
                       "held_out_rows": len(held),
                       "held_out_median_abs_log_error_before": round(before, 4),
                       "held_out_median_abs_log_error_after": round(after, 4)}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", nargs="*", metavar="NAME", choices=FITS,
                    help="refit the per-generation constants (all, or those named: "
                         + ", ".join(FITS) + ")")
    args = ap.parse_args(argv)
    if args.fit is not None:
        print(json.dumps(fit(tuple(args.fit) or FITS), indent=1))
        return 0
    res = run()
    for r in res:
        print(json.dumps(r))
    print(json.dumps({"summary": True, **summary(res)}))
    print(json.dumps({"release_spread": release_spread()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
