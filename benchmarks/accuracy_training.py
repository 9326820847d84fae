"""Accuracy of the training step model against published end-to-end runs.

Runs every ``training_e2e`` row of data/reference/measurements.csv the model covers and
prints one JSON line per case (predicted vs measured, relative error), then a summary line
with the median absolute error. The same model constants serve every row: nothing here
is tuned per row. Where a source gives no parallel configuration, the configuration is
the best one ``plan_parallel`` finds (as the authors tuned theirs).

Excluded rows:
* 173 (Megatron-LM weak scaling, "41 -> 47-48 %" over GPT 2B-462B): a range over a family
  of models whose shapes and configurations are not given per point.
* 200 (Jean Zay measured inter-node bandwidth): a network figure, not a training result.
* 201 (IDEFICS-80B, multimodal, ZeRO-3 on EFA): vision tower and configuration unknown.

Usage: ``python benchmarks/accuracy_training.py [--backend analytic|flow]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fabricsim as fs
from fabricsim.catalog import get_catalog, with_systems
from fabricsim.fabric import Fabric
from fabricsim.protocols import PROTOCOLS
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.models import TransformerSpec, get_model
from fabricsim.workloads.training.goodput import goodput_on_fabric
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.planner import plan_parallel
from fabricsim.workloads.training.step import StepResult, simulate_step

#: Systems no preset matches, defined as a user would (catalog.with_systems): Jean Zay's
#: A100 nodes (BLOOM) with 4 scale-out ports of 100G; Meta's Grand Teton H100 hosts
#: (torchtitan), whose GPUs run capped at 500 W.
CATALOG = with_systems(get_catalog(), {
    "a100-4x100g": {"base": "dgx-a100", "nics": 4},
    "grand-teton-h100": {"base": "dgx-h100", "gpu_power_w": 500},
})
#: The Simple protocol's efficiency on network links (a calibration factor multiplies it).
_NET_EFF = PROTOCOLS["simple"].efficiency["net"]

#: Narayanan et al. 2021, Table 1, the 1T row: 128 layers, h=25600, 160 heads.
GPT_1T = TransformerSpec(name="gpt-1t", layers=128, hidden=25600, heads=160, ffn=102400,
                         vocab=51200, seq=2048, gated=False, tied_embeddings=True)


@dataclass
class Case:
    row: int
    label: str
    model: TransformerSpec
    system: str
    nodes: int
    fabric: str | None
    metric: str  # "mfu", "hw_tflops" or "tokens_per_gpu"
    measured: float
    cfg: ParallelConfig | None = None  # None: best plan_parallel configuration
    global_batch: int = 0
    seq: int = 2048
    note: str = ""
    #: ParallelConfig fields the source states, for a planner-chosen layout (cfg None)
    options: dict[str, Any] = field(default_factory=dict)
    #: build_cluster params (e.g. a calibration from the cluster's own measurements)
    params: dict[str, Any] | None = None
    #: the published figure is a whole run's average (tokens over GPU-hours of wall time,
    #: failures, restarts and checkpoints included): the prediction is the step's
    #: throughput times the run's goodput (fabricsim.workloads.training.goodput, its defaults)
    run_average: bool = False
    #: the independent source, where the case's data file names it (else by row)
    source: str = ""


def _mpt(row: int, size: str, gpus: int, gpu: str, mfu: float, mb: int, accum: int,
         ckpt: bool) -> Case:
    system, fabric = ("dgx-h100", "ib-ndr") if gpu == "h100" else ("dgx-a100", "roce-200g")
    dp = gpus
    note = "A100-40GB run modelled on dgx-a100 (80 GB, 2.0 TB/s HBM)" if gpu == "a100-40" \
        else ""
    # the table's MP mode: the H100 runs are amp_bf16 / DEFAULT (FSDP reduces gradients
    # in FP32), the A100 ones bf16 / PURE (BF16 reduction); llm-foundry's benchmark script
    # runs attn_impl triton, 2023's Triton FlashAttention (accuracy_llmfoundry.py)
    return Case(row, f"MPT-{size} {gpus}x{gpu} mb{mb} x{accum}", get_model(f"mpt-{size}"),
                system, gpus // 8, fabric, "mfu", mfu,
                ParallelConfig(zero="fsdp", micro_batch=mb, global_batch=mb * dp * accum,
                               seq_len=2048, recompute="full" if ckpt else "none",
                               grad_reduce_dtype="fp32" if gpu == "h100" else "bf16",
                               attention_kernel="flash1"),
                note=note)


def cases() -> list[Case]:
    """The covered rows, with the setups their sources give."""
    out = [
        _mpt(181, "70b", 64, "h100", 0.4257, 8, 4, True),
        _mpt(182, "30b", 32, "h100", 0.4392, 14, 3, True),
        _mpt(183, "13b", 64, "h100", 0.3986, 2, 1, False),
        _mpt(184, "7b", 8, "h100", 0.4644, 6, 1, False),
        _mpt(185, "1b", 64, "h100", 0.4085, 20, 1, False),
        _mpt(186, "70b", 64, "a100", 0.5333, 8, 4, True),
        _mpt(187, "70b", 128, "a100-40", 0.4891, 4, 1, True),
        _mpt(188, "13b", 128, "a100-40", 0.5193, 16, 1, True),
        _mpt(189, "7b", 128, "a100-40", 0.5014, 18, 1, True),
        _mpt(190, "30b", 128, "a100-40", 0.5225, 6, 1, True),
    ]
    # BLOOM (Megatron-DeepSpeed, 2022): TP 4, PP 12, DP 8, micro-batch 2, no sequence
    # parallelism, plain 1F1B (pipeline sends wait every micro-batch); DeepSpeed's pipeline
    # engine reduces gradients (and ZeRO-1 gathers weights) after the last micro-batch's
    # backward, as steps of its schedule, so nothing overlaps them. Jean Zay's nodes
    # have 4 x 100G Omni-Path; the same source measured 135 Gb/s between nodes (row 200),
    # applied as the calibration a user would fit from their own measurement.
    bloom = get_model("bloom-176b")
    jean_zay = {"calibration": {"net.efficiency": 135e9 / (4 * 100e9 * _NET_EFF)}}
    for gbs, tf in ((2048, 150.0), (192, 73.0), (16, 8.0)):
        out.append(Case(199, f"BLOOM-176B 384xA100 GBS {gbs}", bloom, "a100-4x100g", 48,
                        "roce-100g", "hw_tflops", tf,
                        ParallelConfig(tp=4, pp=12, micro_batch=2, global_batch=gbs,
                                       seq_len=2048, recompute="full", zero=1,
                                       sequence_parallel=False, overlap_grad_reduce=False,
                                       overlap_param_gather=False),
                        params=jean_zay,
                        note="Omni-Path 4x100G/node as 4x100G RoCE at the 135 Gb/s per node "
                             "measured on the cluster (row 200)"))
    out.append(Case(172, "GPT-1T 3072xA100 (Narayanan 2021)", GPT_1T, "dgx-a100", 384,
                    "ib-hdr", "hw_tflops", 163.0,
                    ParallelConfig(tp=8, pp=64, micro_batch=1, global_batch=3072,
                                   seq_len=2048, recompute="full", vp=2, zero=0,
                                   overlap_p2p_comm=False),
                    note="502 PFLOP/s / 3072 GPUs; Table 1 config TP 8, PP 64; Megatron-LM "
                         "of 2021: every pipeline exchange waits"))
    gpt3 = get_model("gpt3-175b")
    megatron = {"tp_comm_overlap": True}  # Megatron-LM's runs overlap TP/DP/PP (row 173)
    out.append(Case(174, "GPT-3 175B 96xH100 (Megatron)", gpt3, "dgx-h100", 12, "ib-ndr",
                    "mfu", 0.47, None, global_batch=1152, options=megatron,
                    note="TP comm overlap on, as Megatron-LM's published runs"))
    out.append(Case(174, "GPT-3 175B 4608xH100 (Megatron)", gpt3, "dgx-h100", 576,
                    "ib-ndr", "mfu", 0.42, None, global_batch=1152, options=megatron,
                    note="TP comm overlap on, as Megatron-LM's published runs"))
    out += torchtitan_cases()
    out += scale_cases()
    # DeepSeek-V3 technical report (arXiv 2412.19437), Table 1 and Sec. 3: pre-training on
    # 14.8T tokens took 2,664K H800 GPU-hours on 2,048 H800 (8 per node, 400G IB per GPU):
    # 1,543 tokens/s per GPU averaged over the run (failures and evaluation included, so
    # an upper-bound step model should sit a little above it). PP 16, EP 64, no TP, ZeRO-1,
    # FP8 GEMMs and FP8 dispatch, DualPipe (its schedule, sec. 3.2.1, and its
    # computation-communication overlap), routing limited to 4 nodes, recomputation of
    # RMSNorm and the MLA up-projections (sec. 3.2.3), one multi-token-prediction module
    # (sec. 2.2; the report does not give the stage split: DualPipe pairs the first and
    # the last stage on one GPU, so where the odd layer sits hardly matters).
    out.append(Case(0, "DeepSeek-V3 2048xH800 (tech report)", get_model("deepseek-v3"),
                    "dgx-h800", 256, "ib-ndr", "tokens_per_gpu", 1543.0,
                    ParallelConfig(pp=16, ep=64, micro_batch=1, global_batch=15360,
                                   seq_len=4096, precision="fp8", recompute="selective",
                                   recompute_modules=("layernorm", "mla_up_proj"),
                                   pp_schedule="dualpipe",
                                   pipeline_layout="Et*4|(tttt|)*14tmL",
                                   ep_overlap=True, moe_node_limit=4,
                                   fp8_recipe="blockwise"),
                    note="source outside the reference data: DeepSeek-V3 report, Table 1; "
                    "a whole-run average: step throughput times goodput",
                    run_average=True))
    out.append(Case(175, "175B 12288xA100 (MegaScale)", gpt3, "dgx-a100", 1536, "ib-hdr",
                    "mfu", 0.552,
                    ParallelConfig(tp=8, pp=8, micro_batch=1, global_batch=6144,
                                   seq_len=2048, recompute="selective", vp=6, zero=1),
                    note="MegaScale's TP/PP overlap and fused kernels are not modelled"))
    return out


#: data/reference/training_scale.csv: runs of 256 to 16,384 GPUs with their published
#: layouts (the >= 8k scale band).
SCALE_CSV = Path(__file__).resolve().parent.parent / "data" / "reference" / "training_scale.csv"


def scale_cases() -> list[Case]:
    """The rows of ``training_scale.csv``, each with what its source states and, where it
    is silent, the defaults a user of ``train`` gets (said in the row's note):

    - Llama 3 405B (Meta's paper, Table 4): FSDP with the weights kept gathered from the
      forward to the backward and FP32 gradient reduction, the embedding and the loss
      counted as pipeline stages (one layer fewer on the first and last), no activation
      recomputation. The virtual-stage count is not published: ``vp`` is left for
      ``train`` to choose (the fastest split). Memory is not checked: the paper says the
      layout ran without recomputation at 8K, where the memory model puts it over 80 GB.
      Micro-batch 1. The metric is Table 4's TFLOP/s per GPU over the BF16 peak.
    - Megatron-LM's runs beside MegaScale (its Table 2): Megatron-LM at commit 285068c8
      (January 2023), which had neither gradient-reduction overlap nor TP communication
      overlap, and FlashAttention 1; data parallelism without a distributed optimizer
      (Megatron's default), selective recomputation, micro-batch 1 (not stated). Its
      pipeline exchanges wait: ``p2p_communication.py`` of that commit waits on every
      ``batch_isend_irecv`` and calls ``torch.cuda.synchronize()`` after it, interleaved
      or not (the overlap option came in May 2023, the default in October 2023), so
      ``overlap_p2p_comm`` is off, as for Narayanan et al.'s 2021 run (the same code).
      The metric is tokens/s per GPU (the paper's vocabulary is 64,000; the preset's
      50,257).
    - MLPerf GPT-3 on Eos (v3.1, v4.0): the submissions' configs (TE FP8 with delayed
      scaling, distributed optimizer, TP communication overlap, no recomputation);
      tokens/s per GPU from the logs' block timings.
    - Megatron-Core's weak-scaling table (its README, 48 to 6,144 H100): GPT models of
      the given shapes (FFN 4h, vocabulary 131,072, sequences of 4,096, Megatron's tied
      embeddings), the distributed optimizer and every overlap the README names; the
      micro-batch (1), the interleaving (``train``'s choice) and the network (dgx-h100's
      default) are not stated.
    """
    import csv

    with SCALE_CSV.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        row, key = int(r["id"]), r["source_key"]
        gpus, per = int(r["gpus"]), int(r["gpus_per_node"])
        lay: dict[str, Any] = {
            "tp": int(r["tp"]), "cp": int(r["cp"]), "pp": int(r["pp"]), "dp": int(r["dp"]),
            "vp": int(r["vp"]) if r["vp"] else None, "micro_batch": int(r["micro_batch"] or 1),
            "global_batch": int(r["global_batch"]), "seq_len": int(r["seq_len"]),
            "precision": r["precision"]}
        label = f"{r['model']} {gpus}x{'H100' if 'H100' in r['gpu'] else 'A100'}"
        if key.startswith("Llama 3"):
            cfg = ParallelConfig(**lay, zero="fsdp", reshard_after_forward=False,
                                 grad_reduce_dtype="fp32", account_for_embedding_loss=True)
            out.append(Case(row, f"{label} CP{lay['cp']} (Llama 3)",
                            get_model(r["model"]), "dgx-h100",
                            gpus // per, "roce-400g", "mfu",
                            float(r["value"].split("|")[0]) / 989.0, cfg,
                            note="vp not published: train's choice; memory not checked",
                            source="Llama 3 paper (Meta)"))
        elif key.startswith("MegaScale"):
            cfg = ParallelConfig(**lay, zero=0, recompute="selective", grad_reduce_dtype="fp32",
                                 overlap_grad_reduce=False, overlap_param_gather=False,
                                 overlap_p2p_comm=False, attention_kernel="flash1")
            tok_s = float(r["value"].split("|")[1].strip().rstrip("k")) * 1e3
            out.append(Case(row, f"{label} (Megatron-LM in MegaScale)",
                            get_model(r["model"]), "dgx-a100",
                            gpus // per, "roce-200g", "tokens_per_gpu", tok_s / gpus, cfg,
                            note="Megatron-LM of Jan 2023: no DP/TP/PP overlap; mb 1 assumed",
                            source="MegaScale (ByteDance)"))  # as row 175, the same paper
        elif key.startswith("Megatron-LM"):
            n_layers, hidden, heads = (int(x) for x in r["model"].split("/")[1:])
            gpt = TransformerSpec(name=f"megatron-gpt-{n_layers}x{hidden}",
                                  layers=n_layers, hidden=hidden, heads=heads, ffn=4 * hidden,
                                  vocab=131072, seq=4096, gated=False, tied_embeddings=True)
            cfg = ParallelConfig(**lay, zero=1, tp_comm_overlap=lay["tp"] > 1)
            out.append(Case(row, f"GPT {n_layers}x{hidden} {gpus}xH100 (Megatron-Core)", gpt,
                            "dgx-h100", gpus // per, None, "mfu",
                            float(r["value"].split("|")[0]) / 989.0, cfg,
                            note="vp, micro-batch and network not stated: train's choice, "
                                 "1, dgx-h100's default fabric",
                            source="Megatron-LM (NVIDIA)"))  # as row 174, its README
        else:
            cfg = ParallelConfig(**lay, zero=1, tp_comm_overlap=True, fp8_recipe="delayed")
            out.append(Case(row, f"{label} FP8 (MLPerf)",
                            get_model(r["model"]), "dgx-h100", gpus // per,
                            "ib-ndr", "tokens_per_gpu", float(r["value"]), cfg,
                            note="tokens/s per GPU from the logs' block timings",
                            source="MLPerf Training (NVIDIA)"))
    return out


def torchtitan_cases() -> list[Case]:
    """measurements_2.csv rows 1139-1146: torchtitan (FSDP2, TP, PP) on H100/H200/A100.

    Meta's Grand Teton H100s (96 GB HBM2e, 500 W cap) are modelled as DGX H100 with the
    500 W cap (a user-defined system) on RoCE 400G; torchtitan's Llama 3 default sequence
    length (8192) is used where the table does not state it; "Float8" runs use FP8 GEMMs;
    "local batch" is per data-parallel rank.
    """
    gt = "Grand Teton H100 96GB/500W modelled as dgx-h100 (80 GB) capped at 500 W"
    l8, l70, l405 = get_model("llama3-8b"), get_model("llama3-70b"), get_model("llama3-405b")
    tok = "tokens_per_gpu"

    def cfg(**kw: Any) -> ParallelConfig:
        # torchtitan's defaults: BF16 weights, gradients reduced in FP32
        # (training.mixed_precision_reduce = "float32")
        base: dict[str, Any] = {"zero": "fsdp", "seq_len": 8192, "precision": "fp8",
                                "grad_reduce_dtype": "fp32"}
        kw = {**base, **kw}
        if kw["precision"] == "fp8":  # torchtitan's Float8 (the BF16 rows have none)
            kw["fp8_recipe"] = "torchao"
        return ParallelConfig(**kw)

    return [
        Case(1139, "torchtitan Llama3.1-8B 128xH100 FSDP fp8", l8, "grand-teton-h100", 16,
             "roce-400g", tok, 8380, cfg(micro_batch=2, global_batch=256,
                                         recompute="selective"), note=gt),
        Case(1140, "torchtitan Llama3.1-8B 8xH100 FSDP fp8", l8, "grand-teton-h100", 1,
             "roce-400g", tok, 8532, cfg(micro_batch=2, global_batch=16,
                                         recompute="selective"), note=gt),
        Case(1141, "torchtitan Llama3.1-70B 256xH100 FSDP32xTP8", l70, "grand-teton-h100", 32,
             "roce-400g", tok, 829, cfg(tp=8, micro_batch=16, global_batch=512,
                                        recompute="full"), note=gt),
        Case(1142, "torchtitan Llama3.1-405B 512xH100 TP8 PP8 FSDP8", l405, "grand-teton-h100", 64,
             "roce-400g", tok, 128, cfg(tp=8, pp=8, micro_batch=1, global_batch=256,
                                        recompute="full", vp=2,
                                        account_for_embedding_loss=True,
                                        tp_comm_overlap=True, reshard_after_forward=False),
             note=gt + "; AsyncTP as tp_comm_overlap; embedding and loss counted as "
                       "layers so that 128 split into 8 stages x 2 virtual"),
        Case(1143, "torchtitan Llama3.1-405B 512xH100 seq 32k", l405, "grand-teton-h100", 64,
             "roce-400g", tok, 76, cfg(tp=8, pp=8, micro_batch=1, global_batch=64,
                                       seq_len=32768, recompute="full", tp_comm_overlap=True,
                                       reshard_after_forward=False),
             note=gt + "; AsyncTP as tp_comm_overlap"),
        Case(1144, "torchtitan Llama3-70B 64xA100 FSDP", l70, "dgx-a100", 8, None, tok,
             331, cfg(micro_batch=1, global_batch=64, recompute="full", precision="bf16"),
             note="network not stated: dgx-a100's default (IB HDR)"),
        Case(1145, "torchtitan Llama2-13B 64xA100 FSDP", get_model("llama2-13b"), "dgx-a100",
             8, None, tok, 2162, cfg(micro_batch=2, global_batch=128, seq_len=4096,
                                     precision="bf16"),
             note="network not stated: dgx-a100's default (IB HDR)"),
        Case(1146, "torchtitan Llama3.1-8B 32xH200 FSDP fp8", l8, "dgx-h200", 4, None, tok,
             10938, cfg(micro_batch=2, global_batch=64, recompute="selective"),
             note="WhiteFiber 400G CX-7 per GPU: dgx-h200's default fabric"),
    ]


def predicted(c: Case, r: StepResult, fab: Fabric) -> float:
    """The case's metric from a step result (times goodput for a whole-run average)."""
    pred = r.mfu if c.metric == "mfu" else r.hw_tflops_per_gpu \
        if c.metric == "hw_tflops" else r.tokens_per_s / r.world
    if c.run_average:
        pred *= goodput_on_fabric(fab, params=c.model.params,
                                  step_time_s=r.step_time_s).goodput
    return float(pred)


def run(comm_factory: Callable[[Fabric], CommModel]) -> list[dict[str, Any]]:
    """Predict every case; one dict per case."""
    rows = []
    for c in cases():
        t0 = time.perf_counter()
        fab = fs.build_cluster(c.system, c.nodes, fabric=c.fabric, params=c.params,
                               catalog=CATALOG)
        comm = comm_factory(fab)
        if c.cfg is None:
            plan = plan_parallel(c.model, fab, global_batch=c.global_batch, seq_len=c.seq,
                                 comm=comm, top=1, options=ParallelConfig.model_validate(c.options))
            r = plan.results[0]
        else:
            r = simulate_step(c.model, c.cfg, fab, comm, check_memory=False)
        pred = predicted(c, r, fab)
        rows.append({"row": c.row, "case": c.label, "metric": c.metric,
                     "measured": c.measured, "predicted": round(pred, 4),
                     "rel_error": round(pred / c.measured - 1, 4),
                     "parallel": r.parallel, "comm_fraction": round(r.comm_fraction, 4),
                     "bubble_fraction": round(r.breakdown["bubble"] / r.step_time_s, 4),
                     "note": c.note, "wall_s": round(time.perf_counter() - t0, 3)})
    return rows


def hw_class(c: Case) -> tuple[str, str]:
    """(GPU generation, GEMM precision or FP8 recipe) of a case: the constants are fitted
    per class. FP8 cases are classed by recipe (``fp8/torchao``...): the FP8 GEMM share
    itself is fitted on NVIDIA's NeMo tables (``accuracy_nemo.py --fit``)."""
    from fabricsim.workloads.gpu import generation

    gpu = CATALOG.gpu(CATALOG.system(c.system).gpu)
    if c.cfg is None or c.cfg.precision == "bf16":
        return generation(gpu), "bf16"
    return generation(gpu), f"fp8/{c.cfg.recipe}"


class _Clusters:
    """Each case's fabric and communication model, built once for a run that predicts the
    same cases many times: a fit's trials change the compute constants, never the
    network, so the collective timings the communication model caches stay valid."""

    def __init__(self, comm_factory: Callable[[Fabric], CommModel]) -> None:
        self.comm_factory = comm_factory
        self._built: dict[str, tuple[Fabric, CommModel]] = {}

    def of(self, c: Case) -> tuple[Fabric, CommModel]:
        key = json.dumps([c.system, c.nodes, c.fabric, c.params], sort_keys=True,
                         default=str)
        hit = self._built.get(key)
        if hit is None:
            fab = fs.build_cluster(c.system, c.nodes, fabric=c.fabric, params=c.params,
                                   catalog=CATALOG)
            hit = self._built[key] = (fab, self.comm_factory(fab))
        return hit


def _predict(c: Case, comm_factory: Callable[[Fabric], CommModel],
             clusters: _Clusters | None = None) -> float:
    """The case's metric as the model predicts it now (``clusters``: the run's cache of
    fabrics and communication models, else built afresh)."""
    fab, comm = (clusters or _Clusters(comm_factory)).of(c)
    if c.cfg is None:
        r = plan_parallel(c.model, fab, global_batch=c.global_batch, seq_len=c.seq,
                          comm=comm, top=1,
                          options=ParallelConfig.model_validate(c.options)).results[0]
    else:
        r = simulate_step(c.model, c.cfg, fab, comm, check_memory=False)
    return predicted(c, r, fab)


def source(c: Case) -> str:
    """The independent source a case comes from (the unit leave-one-source-out holds
    out): a paper, a vendor's table, a project's benchmark page."""
    if c.source:
        return c.source
    if 181 <= c.row <= 190:
        return "llm-foundry (MosaicML)"
    if 1139 <= c.row <= 1146:
        return "torchtitan (Meta)"
    return {199: "BLOOM (BigScience)", 172: "Narayanan et al. 2021",
            174: "Megatron-LM (NVIDIA)", 175: "MegaScale (ByteDance)",
            0: "DeepSeek-V3 report"}[c.row]


def scale_band(gpus: int) -> str:
    """The issue's scale bands: below 1k GPUs, 1k-8k, 8k and up."""
    return "<1k" if gpus < 1024 else "1k-8k" if gpus < 8192 else ">=8k"


#: Multipliers tried for a fitted constant, as in ``fit``.
GRID = [0.70 + 0.01 * j for j in range(51)]


def _best_multiplier(table: dict[Any, float], key: Any, cases_: list[Case],
                     comm_factory: Callable[[Fabric], CommModel],
                     clusters: _Clusters | None = None) -> float:
    """The multiplier of ``table[key]`` with the least absolute log error over
    ``cases_``, each source weighing the same (the mean over sources of each one's
    median; a paper with nine rows of one table counts once, as one with one): every
    0.05 from 0.70 to 1.20, then every 0.01 around the best. A case whose layout the
    planner chooses keeps the layout it chooses at the shipped constants while the
    multiplier is searched (a uniform change of the compute rate hardly reorders
    layouts, and planning each trial again takes minutes)."""
    import math
    from dataclasses import replace

    clusters = clusters or _Clusters(comm_factory)

    def pinned(c: Case) -> Case:
        if c.cfg is not None:
            return c
        fab, comm = clusters.of(c)
        r = plan_parallel(c.model, fab, global_batch=c.global_batch, seq_len=c.seq,
                          comm=comm, top=1,
                          options=ParallelConfig.model_validate(c.options)).results[0]
        return replace(c, cfg=ParallelConfig.model_validate(
            {k: v for k, v in r.parallel.items()
             if k in ParallelConfig.model_fields and v is not None}))

    cases_ = [pinned(c) for c in cases_]
    base = table[key]
    cache: dict[float, float] = {}

    def score(k: float) -> float:
        k = round(k, 2)
        if k not in cache:
            table[key] = base * k
            per: dict[str, list[float]] = {}
            for c in cases_:
                per.setdefault(source(c), []).append(
                    abs(math.log(_predict(c, comm_factory, clusters) / c.measured)))
            cache[k] = statistics.mean(statistics.median(v) for v in per.values())
        return cache[k]

    try:
        coarse = min((score(0.70 + 0.05 * j), 0.70 + 0.05 * j) for j in range(11))[1]
        return min((score(coarse + 0.01 * j), round(coarse + 0.01 * j, 2))
                   for j in range(-4, 5) if coarse + 0.01 * j > 0.5)[1]
    finally:
        table[key] = base


def loso(comm_factory: Callable[[Fabric], CommModel]) -> list[dict[str, Any]]:
    """Leave-one-source-out error of every case: the constant of the case's class
    (BF16 ``SUSTAINED[generation]``, torchao FP8 ``FP8_RECIPE_EFF``; see :func:`fit`)
    fitted on the class's cases of every other source (:func:`_best_multiplier` of the
    shipped value), then the case predicted with it. A case whose class has no other
    source has no held-out figure (``held_out`` None: its constant would be fitted on it
    alone); a case of a class nothing here fits (DeepSeek-V3's blockwise FP8) is held
    out as it is."""
    import fabricsim.workloads.gpu as comp

    all_cases = cases()
    clusters = _Clusters(comm_factory)
    fitted: dict[tuple[str, str, str], float] = {}  # (generation, precision, left out)
    out = []
    for c in all_cases:
        gen, prec = hw_class(c)
        gpus = c.nodes * _gpus_per_node(c)
        row: dict[str, Any] = {
            "row": c.row, "case": c.label, "source": source(c), "class": f"{gen}/{prec}",
            "gpus": gpus, "band": scale_band(gpus), "moe": c.model.is_moe,
            "in_sample": round(_predict(c, comm_factory, clusters) / c.measured - 1, 4)}
        out.append(row)
        if prec not in ("bf16", "fp8/torchao"):
            row.update(held_out=row["in_sample"], fitted_on="nothing here")
            continue
        table: dict[Any, float]
        table, key = ((comp.SUSTAINED, gen) if prec == "bf16"
                      else (comp.FP8_RECIPE_EFF, "torchao"))
        others = [o for o in all_cases if hw_class(o) == (gen, prec)
                  and source(o) != source(c)]
        if not others:
            row.update(held_out=None, fitted_on="its own source only")
            continue
        k = fitted.get((gen, prec, source(c)))
        if k is None:
            k = fitted[(gen, prec, source(c))] = _best_multiplier(table, key, others,
                                                                  comm_factory, clusters)
        base = table[key]
        table[key] = base * k
        try:
            row["held_out"] = round(_predict(c, comm_factory, clusters) / c.measured - 1, 4)
        finally:
            table[key] = base
        row.update(fitted_on=sorted({source(o) for o in others}),
                   constant=round(base * k, 4), shipped=base)
    return out


def _gpus_per_node(c: Case) -> int:
    return int(CATALOG.system(c.system).gpus)


def loso_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Held-out median and 90th percentile of |error| overall and per group (class,
    dense/MoE, scale band), with the cases and sources each rests on."""
    def stats(sel: list[dict[str, Any]]) -> dict[str, Any]:
        e = sorted(abs(r["held_out"]) for r in sel if r["held_out"] is not None)
        if not e:
            return {"cases": 0}
        p90 = e[min(len(e) - 1, round(0.9 * (len(e) - 1)))]
        return {"cases": len(e), "sources": len({r["source"] for r in sel
                                                 if r["held_out"] is not None}),
                "median": round(statistics.median(e), 4), "p90": round(p90, 4)}

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for g in (f"class {r['class']}", "MoE" if r["moe"] else "dense",
                  f"band {r['band']}"):
            groups.setdefault(g, []).append(r)
    return {"summary": "leave-one-source-out", "all": stats(rows),
            "no_held_out_figure": [r["case"] for r in rows if r["held_out"] is None],
            "groups": {g: stats(v) for g, v in sorted(groups.items())}}


#: Where ``--write`` puts the table ``fabricsim train`` reads its band from.
HELDOUT_JSON = Path(__file__).resolve().parents[1] / "src" / "fabricsim" / "workloads" / \
    "training" / "heldout.json"


def heldout_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``fabricsim train`` needs of the held-out rows
    (:mod:`fabricsim.workloads.training.accuracy`): per class the median and p90 of the
    absolute held-out error with its runs and sources (runs 0 where none can be held
    out), every run's, the MoE runs', and the largest run."""
    def stats(sel: list[dict[str, Any]]) -> dict[str, Any]:
        e = sorted(abs(r["held_out"]) for r in sel if r["held_out"] is not None)
        if not e:
            return {"median": 0.0, "p90": 0.0, "runs": 0, "sources": 0}
        return {"median": round(statistics.median(e), 4),
                "p90": round(e[min(len(e) - 1, round(0.9 * (len(e) - 1)))], 4),
                "runs": len(e),
                "sources": len({r["source"] for r in sel if r["held_out"] is not None})}

    classes: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if not r["moe"]:
            classes.setdefault(r["class"], []).append(r)
    held = [r for r in rows if r["held_out"] is not None]
    return {"written_by": "benchmarks/accuracy_training.py --loso --write",
            "classes": {k: stats(v) for k, v in sorted(classes.items())},
            "all": stats([r for r in rows if not r["moe"]]),
            "moe": stats([r for r in rows if r["moe"]]),
            "largest_gpus": max(r["gpus"] for r in held)}


def fit(comm_factory: Callable[[Fabric], CommModel]) -> dict[str, Any]:  # pragma: no cover
    """Fit one multiplier per (generation, precision) on half of each class's cases (every
    other case in row order) by the median absolute log error, and report the error on
    the held-out half before and after. BF16 classes scale ``SUSTAINED[generation]``;
    torchao FP8 cases (fitted after BF16) scale ``FP8_RECIPE_EFF["torchao"]``; other
    FP8 recipes here (DeepSeek-V3's blockwise, one row) are not fitted."""
    import math

    import fabricsim.workloads.gpu as comp

    all_cases = cases()
    by_class: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(all_cases):
        by_class.setdefault(hw_class(c), []).append(i)

    def errors(idx: list[int]) -> list[float]:
        return [math.log(_predict(all_cases[i], comm_factory) / all_cases[i].measured)
                for i in idx]

    report: dict[str, Any] = {}
    order = sorted((k for k in by_class if k[1] in ("bf16", "fp8/torchao")),
                   key=lambda k: k[1] != "bf16")  # BF16 first
    for key in order:
        idx = by_class[key]
        fit_idx, held = idx[::2], idx[1::2]
        gen, prec = key
        table: dict[Any, float]
        table, tkey = ((comp.SUSTAINED, gen) if prec == "bf16"
                       else (comp.FP8_RECIPE_EFF, "torchao"))
        base = table[tkey]
        before = [abs(e) for e in errors(held)] if held else []
        best = (math.inf, 1.0)
        for k in [0.70 + 0.01 * j for j in range(51)]:
            table[tkey] = base * k
            score = statistics.median(abs(e) for e in errors(fit_idx))
            best = min(best, (score, k))
        table[tkey] = base * best[1]
        after = [abs(e) for e in errors(held)] if held else []
        report[f"{gen}/{prec}"] = {
            "constant": f"{'SUSTAINED' if prec == 'bf16' else 'FP8_RECIPE_EFF'}[{tkey!r}]",
            "was": base, "fitted": round(base * best[1], 3), "fit_rows": len(fit_idx),
            "held_out_rows": len(held),
            "held_out_median_log_error_before": round(statistics.median(before), 4)
            if before else None,
            "held_out_median_log_error_after": round(statistics.median(after), 4)
            if after else None}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="analytic", choices=["analytic", "flow"])
    ap.add_argument("--fit", action="store_true",
                    help="re-fit the per-generation constants (half fit, half held out)")
    ap.add_argument("--loso", action="store_true",
                    help="leave-one-source-out: each case predicted with its class's "
                         "constant fitted on the other sources")
    ap.add_argument("--write", action="store_true",
                    help="with --loso: write the held-out table fabricsim train reads")
    a = ap.parse_args(argv)
    if a.loso:
        rows = loso(lambda fab: EngineComm(fab, backend=a.backend))
        for r in rows:
            sys.stdout.write(json.dumps(r) + "\n")
        sys.stdout.write(json.dumps(loso_summary(rows)) + "\n")
        if a.write:
            HELDOUT_JSON.write_text(json.dumps(heldout_table(rows), indent=1) + "\n",
                                    encoding="utf-8")
        return 0
    if a.fit:  # pragma: no cover - calibration tool
        sys.stdout.write(json.dumps(fit(lambda fab: EngineComm(fab, backend=a.backend)),
                                    indent=1) + "\n")
        return 0
    rows = run(lambda fab: EngineComm(fab, backend=a.backend))
    for r in rows:
        sys.stdout.write(json.dumps(r) + "\n")
    errs = [abs(r["rel_error"]) for r in rows]
    sys.stdout.write(json.dumps({"summary": True, "cases": len(rows),
                                 "median_abs_error": round(statistics.median(errs), 4),
                                 "mean_abs_error": round(statistics.mean(errs), 4),
                                 "max_abs_error": round(max(errs), 4),
                                 "backend": a.backend}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
