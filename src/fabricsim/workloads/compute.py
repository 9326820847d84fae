"""Compute time of one micro-batch on one GPU: tensor-core GEMMs plus memory-bound parts.

GEMM time is FLOPs / (dense peak × achievable efficiency). The efficiency is

``eff = MAMF(generation, precision) × n / (n + SHAPE_N0)``,

where MAMF is the *maximum achievable matmul FLOPS* fraction of peak measured for large
well-shaped BF16 GEMMs (stas00/ml-engineering, "Maximum Achievable Matmul FLOPS"
table: A100 SXM 267.9/312 = 85.9 %, H100 SXM 792.1/989 = 80.1 %), and the second factor
penalises thin GEMMs: ``n = sqrt(h · h/tp)`` is the geometric mean of a layer's weight
matrix sides on one GPU. FlashAttention runs at :data:`ATTENTION_EFF` of the BF16 GEMM
rate (also in FP8 training, whose recipes keep attention in BF16) and computes only the
causal half of the score matrix. FP8 training adds the casts of the linear layers' inputs
as memory-bound work.

Memory-bound work (norms, residual adds, rotary embedding, activation functions, MoE
token permutation, the FP32 loss over the vocabulary, and the Adam update) is bytes /
HBM bandwidth × :data:`HBM_EFF`.

These few constants are per GPU generation and precision, never per model or per run.

Example
-------
>>> from fabricsim.catalog import get_catalog
>>> round(gemm_efficiency(get_catalog().gpu("h100-sxm"), "bf16", 8192, 8), 3)
0.515
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabricsim.catalog.models import GpuSpec
from fabricsim.errors import ModelError
from fabricsim.workloads.flops import attention_flops, layer_forward_flops
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.parallel import ResolvedParallel

__all__ = [
    "ATTENTION_EFF",
    "ATTENTION_KERNEL_EFF",
    "CP_ATTENTION_EFF",
    "FP8_RECIPE_EFF",
    "GROUPED_GEMM_N0",
    "HBM_EFF",
    "MAMF",
    "NVFP4_OVER_FP8",
    "SHAPE_N0",
    "SUSTAINED",
    "ComputeTimes",
    "attention_kernel_eff",
    "gemm_efficiency",
    "generation",
    "microbatch_compute",
    "peak_flops",
    "selective_parts",
    "sustained",
]

#: Achievable fraction of dense peak for large GEMMs, by (generation, precision).
#: Ampere and Hopper BF16 are the measured MAMF figures cited above. FP8 is fitted on
#: NVIDIA's own NeMo / Megatron-Bridge tables (Transformer Engine FP8;
#: ``python benchmarks/accuracy_nemo.py --fit``: every other dense row of a generation
#: fitted by median log error, the other half held out). Hopper 0.81 (13 DGX-H100 rows:
#: held-out median error 26.9 % -> 8.6 %; the share of its doubled peak FP8 reaches is
#: BF16's), Blackwell 0.68 (26 B200/GB200 rows: 18.0 % -> 3.3 %). Recipes other than
#: Transformer Engine's scale it by :data:`FP8_RECIPE_EFF`. Blackwell BF16 as Hopper
#: (not calibrated: one BF16 row, MoE).
MAMF: dict[tuple[str, str], float] = {
    ("volta", "bf16"): 0.80,
    ("ampere", "bf16"): 0.859,
    ("hopper", "bf16"): 0.801,
    ("hopper", "fp8"): 0.81,
    ("ada", "bf16"): 0.75,
    ("ada", "fp8"): 0.65,
    ("blackwell", "bf16"): 0.80,
    ("blackwell", "fp8"): 0.68,
}
#: NVFP4 GEMMs against FP8 ones on the same GPU: Transformer Engine's published per-layer
#: GEMM times on B300 (docs/features/low_precision_training/speedups.rst, a 5B model of
#: width 4,096 and MLP 16,384, quantization included): NVFP4 2.03x BF16, FP8 current
#: scaling 1.41x, so 1.44x. A measurement, not fitted: the NVFP4 rows of NVIDIA's NeMo
#: tables stay held out. The FP4 peak (2x FP8 on B200/GB200, 3x on B300/GB300) is not
#: what the training step reaches: block scales, Hadamard transforms and the BF16 parts
#: around the GEMMs take their share.
NVFP4_OVER_FP8 = 2.03 / 1.41
#: Sustained share of MAMF over a whole training step (clock throttling under sustained
#: load, kernel launch gaps, communication kernels stealing SMs). Hopper: calibrated on a
#: point outside the accuracy benchmark (llm-foundry's MPT-30B, seq 2048, 8 GPUs,
#: micro-batch 3, activation checkpointing: HFU 50.82 %); the half-fit/half-held-out fit
#: of ``accuracy_training.py --fit`` keeps it (0.70). Ampere: that point gave 0.915; the
#: fit over half of the 12 A100 rows gives 0.86 (held-out median error 14.6 % -> 7.9 %),
#: which is used. Volta/Ada/Blackwell are not calibrated (Blackwell assumed like Hopper).
#: Blackwell Ultra (B300, GB300: Blackwell's tensor cores, MAMF and datasheet BF16/FP8
#: peaks, which NVIDIA's NeMo tables show it running 15-24 % faster than GB200) is fitted
#: on every other GB300 dense FP8 row of those tables (``accuracy_nemo.py --fit
#: blackwell-ultra``): 0.92, held-out median error 22.8 % -> 4.7 % (its MoE rows all held
#: out).
SUSTAINED: dict[str, float] = {"volta": 0.85, "ampere": 0.86, "hopper": 0.70,
                               "ada": 0.85, "blackwell": 0.70, "blackwell-ultra": 0.92}
#: Share of the FP8 GEMM rate each FP8 recipe keeps (``ParallelConfig.fp8_recipe``).
#: Transformer Engine's recipes are the reference (1.0: ``MAMF[(gen, "fp8")]`` is fitted
#: on NVIDIA's own NeMo tables, which use them). ``mxfp8``: the median of NeMo's paired
#: runs of the same layout in FP8-CS and FP8-MX on B200/GB200 (0.945, 0.964, 0.944, 0.957;
#: ``benchmarks/accuracy_nemo.py``). ``blockwise``: NeMo's paired DeepSeek-V3 run on H100
#: (330 vs 338 TFLOP/s/GPU). ``torchao``: 0.61, fitted on torchtitan's Float8 runs on
#: H100/H200 (rows 1139-1146, every other one fitted, the rest held out: held-out median
#: error 22.6 % -> 3.2 %; ``accuracy_training.py --fit``): dynamic tensorwise scaling
#: outside fused kernels and FSDP2's FP8 all-gathers cost more than TE's fused casts.
FP8_RECIPE_EFF: dict[str, float] = {"tensorwise": 1.0, "delayed": 1.0, "blockwise": 0.976,
                                    "mxfp8": 0.95, "torchao": 0.61}
#: Width (elements) at which a GEMM reaches half of its MAMF share; thin GEMMs run slower.
SHAPE_N0 = 256.0
#: Rows per expert at which a routed expert's grouped GEMM reaches half of the dense GEMM
#: rate (Megatron-Core's grouped GEMM over the local experts, with FP8 quantization and
#: padding per expert). Each expert is a separate small GEMM (rows x hidden x expert width),
#: and its fixed per-expert costs (launch, tile tails, per-expert casts and scales) weigh
#: like ~3,000 rows of work: a fine-grained MoE (DeepSeek-V3: 32 local experts of 1,024 rows
#: at EP 8) pays them, a coarse one (Mixtral: 2 local experts of 16,384 rows) hardly does.
#: Fitted once, by median log error, on NVIDIA's three DeepSeek-V3 rows on 256 B200
#: (``benchmarks/accuracy_nemo.py``: +64/+68/+36 % -> -1/+1/-19 %); held out: Mixtral 8x7B
#: on B200/GB200 (+12/+6 % -> +4/-4 %) and DeepSeek-V3 on 2,048 H800 (+23 % -> +18 %).
GROUPED_GEMM_N0 = 3000.0
#: FlashAttention throughput relative to the GEMM rate (FA2 on A100 reaches ~70 % of
#: peak where cuBLAS reaches ~86 %; FA3 on H100 ~600–740 of 989 TFLOP/s).
ATTENTION_EFF = 0.8
#: Share of :data:`ATTENTION_EFF` an older attention kernel keeps
#: (``ParallelConfig.attention_kernel``), per GPU generation. ``flash1``: FlashAttention 1
#: and the Triton FlashAttention kernels of 2023 (llm-foundry's ``attn_impl: triton``), which
#: the FlashAttention-2 paper (Dao 2023) puts at 25-40 % of the A100's peak against
#: FlashAttention-2's 50-73 %: Ampere 0.53, the ratio of the midpoints, a published figure,
#: not fitted (checked on llm-foundry's A100 rows, ``benchmarks/accuracy_llmfoundry.py``:
#: sequences over 4,096 tokens median error 33.8/29.4 % -> 6.9/5.0 % on A100-80/40GB).
#: Hopper, where those kernels use none of its new tensor-core paths: 0.40, fitted on every
#: other H100 row of that table with sequences over 4,096 tokens (``accuracy_llmfoundry.py
#: --fit``), the other half held out: median error 65.5 % -> 4.1 %. Ada as Ampere.
ATTENTION_KERNEL_EFF: dict[tuple[str, str], float] = {
    ("flash1", "ampere"): 0.53, ("flash1", "ada"): 0.53, ("flash1", "hopper"): 0.40}
#: Share of :data:`ATTENTION_EFF` the attention core keeps under context parallelism
#: (``cp > 1``). Ring attention (Transformer Engine's P2P context parallelism) runs each
#: rank's attention as ``cp`` steps on half-size blocks of the load-balanced sequence, each
#: waiting for the previous step's K/V to arrive, merges the partial softmax results after
#: every step, and sends dK/dV back around the ring in the backward pass. Fitted once on
#: NVIDIA's NeMo tables (``benchmarks/accuracy_nemo.py``): the 11 runs with CP 2 on H100,
#: B200 and GB200 were all predicted fast (median +15 %; the CP 1 runs centre on 0);
#: fitted on every other one by median log error, the other half held out: held-out
#: median error 16.5 % -> 6.9 %.
CP_ATTENTION_EFF = 0.6
#: Achievable fraction of HBM bandwidth for streaming elementwise kernels.
HBM_EFF = 0.8
#: Bytes the Adam update moves per parameter it owns (read fp32 weight, grad, m, v; write
#: them back and the BF16 copy).
ADAM_BYTES_PER_PARAM = 34.0


def generation(gpu: GpuSpec) -> str:
    """GPU generation of a catalog entry, from its key.

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> generation(get_catalog().gpu("a100-sxm")), generation(get_catalog().gpu("gb200"))
    ('ampere', 'blackwell')
    """
    n = gpu.name
    if n.startswith("v100"):
        return "volta"
    if n.startswith(("a100", "a800")):
        return "ampere"
    if n.startswith(("h100", "h800", "h200", "h20", "gh200")):
        return "hopper"
    if n.startswith(("b200", "gb200", "b100", "gb300", "b300")):
        return "blackwell"
    if n.startswith(("l40", "l4")):
        return "ada"
    return "hopper"


def sustained(gpu: GpuSpec) -> float:
    """:data:`SUSTAINED` share of ``gpu``: its generation's, or Blackwell Ultra's for B300
    and GB300 (Blackwell's tensor cores and every other per-generation constant, the same
    datasheet BF16/FP8 peaks, but a larger share of them sustained).

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> cat = get_catalog()
    >>> sustained(cat.gpu("gb300")) >= sustained(cat.gpu("gb200"))
    True
    """
    if gpu.name.startswith(("b300", "gb300")):
        return SUSTAINED["blackwell-ultra"]
    return SUSTAINED.get(generation(gpu), 0.75)


def peak_flops(gpu: GpuSpec, precision: str) -> float:
    """Dense tensor peak FLOP/s of ``gpu`` at ``precision`` (raises if unsupported).

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> peak_flops(get_catalog().gpu("h100-sxm"), "fp8") / 1e12
    1978.9
    """
    if precision == "fp8":
        if gpu.fp8_flops <= 0:
            raise ModelError(f"{gpu.name} has no FP8 tensor cores; use precision bf16",
                             field="training.precision")
        return gpu.fp8_flops
    if precision == "fp4":
        if gpu.fp4_flops <= 0:
            raise ModelError(f"{gpu.name} has no FP4 tensor cores (NVFP4 needs Blackwell: "
                             f"B200, GB200, B300, GB300); use precision fp8 or bf16",
                             field="training.precision")
        return gpu.fp4_flops
    return gpu.bf16_flops


def power_capped(gpu: GpuSpec, power_w: float) -> GpuSpec:
    """``gpu`` running under a power cap of ``power_w`` watts (0 or at least the TDP: as
    shipped). Tensor-core throughput scales with the clock, and under DVFS dynamic power
    grows about as the cube of the clock (``P ∝ f·V²`` with the voltage following the
    clock), so a capped GPU runs at ``(cap / TDP)^(1/3)`` of its dense peak; HBM
    bandwidth is on its own clock and is unchanged. A first-principles estimate (static
    and memory power, which the cap does not lower, make the real loss a little larger).

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> h100 = get_catalog().gpu("h100-sxm")
    >>> round(power_capped(h100, 500).bf16_dense_tflops / h100.bf16_dense_tflops, 3)
    0.894
    >>> power_capped(h100, 0) is h100
    True
    """
    if power_w <= 0 or power_w >= gpu.tdp_w:
        return gpu
    f = (power_w / gpu.tdp_w) ** (1.0 / 3.0)
    return gpu.model_copy(update={"bf16_dense_tflops": gpu.bf16_dense_tflops * f,
                                  "fp8_dense_tflops": gpu.fp8_dense_tflops * f,
                                  "fp4_dense_tflops": gpu.fp4_dense_tflops * f})


def gemm_efficiency(gpu: GpuSpec, precision: str, hidden: int, tp: int = 1) -> float:
    """Achievable fraction of peak for the GEMMs of a layer of width ``hidden`` at ``tp``.

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> g = get_catalog().gpu("a100-sxm")
    >>> gemm_efficiency(g, "bf16", 2048) < gemm_efficiency(g, "bf16", 12288)
    True
    """
    if precision == "fp4":  # a measured multiple of the FP8 GEMM rate, as a share of FP4
        return (gemm_efficiency(gpu, "fp8", hidden, tp) * NVFP4_OVER_FP8
                * gpu.fp8_flops / peak_flops(gpu, "fp4"))
    gen = generation(gpu)
    mamf = MAMF.get((gen, precision), MAMF.get((gen, "bf16"), 0.75))
    n = math.sqrt(hidden * hidden / tp)
    return mamf * sustained(gpu) * n / (n + SHAPE_N0)


@dataclass(frozen=True)
class ComputeTimes:
    """Seconds of one micro-batch on one GPU of a pipeline stage.

    ``fwd`` and ``bwd`` include memory-bound parts; ``recompute`` is the extra forward
    work of activation recomputation (counted in ``bwd``); ``optimizer`` is per step.
    """

    fwd: float
    bwd: float
    recompute: float
    optimizer: float
    memory_bound: float
    attn_layer: float = 0.0
    """Forward attention-core time of one layer (the window ring attention hides in)."""
    layer_fwd: float = 0.0
    """Forward time of one layer (the window a ZeRO-3 prefetch hides in)."""
    gemm: float = 0.0
    """GEMM time of the stage's layers, forward and backward (recomputation included):
    the window TP communication overlap hides in."""
    wgrad: float = 0.0
    """Weight-gradient GEMM time of the stage that sets the pace (under DualPipe, the mean
    of the pair of stages that does), multi-token-prediction and output-head GEMMs
    included: the backward's "W" half, as many FLOPs as the forward GEMMs, which
    zero-bubble schedules such as DualPipe defer into the pipeline's bubbles."""

    @property
    def compute_bound(self) -> float:
        """Share of ``fwd + bwd`` that is not memory-bound: what slows down when other
        kernels take SMs (memory-bound kernels still saturate HBM on fewer SMs)."""
        return max(0.0, 1.0 - self.memory_bound / (self.fwd + self.bwd))


def _act_bytes_per_token(m: TransformerSpec, width: int) -> float:
    """HBM bytes per token of the MLP activation function over ``width`` elements: read
    the gate (and up) projections, write the result."""
    return float((6 if m.gated else 4) * width)


def _perm_bytes_per_token(m: TransformerSpec) -> float:
    """HBM bytes per token of an MoE layer's token permutation: the dispatch and combine
    copies of each of its ``top_k`` routes."""
    return 4.0 * m.hidden * 2 * m.top_k


def _mlp_flops_per_token(m: TransformerSpec, seq: int, moe: bool, slow: float) -> float:
    """Forward FLOPs per token of a layer's MLP, with the routed experts' share weighted by
    ``slow`` (the busiest rank's imbalance times the grouped GEMM's shape penalty)."""
    f = layer_forward_flops(m, seq, moe=moe)["mlp"]
    return f + 2.0 * m.top_k * m.expert_params * (slow - 1.0) if moe else f


def _elementwise_bytes_per_token(m: TransformerSpec, moe: bool) -> float:
    """HBM bytes of the unfused elementwise kernels of one layer's forward, per token."""
    h = m.hidden
    q, kv = m.heads * m.d_head, m.n_kv * m.d_head
    width = (m.top_k + m.shared_experts) * m.expert_ffn if moe else m.ffn
    perm = _perm_bytes_per_token(m) if moe else 0.0
    return 20.0 * h + 4.0 * (q + 2 * kv) + _act_bytes_per_token(m, width) + perm


def _fp8_cast_bytes_per_token(m: TransformerSpec, moe: bool) -> float:
    """HBM bytes per token of one layer's forward that FP8 casting adds: every input of
    the four linear layers read in BF16 (2 B), written in FP8 (1 B) and scanned for its
    amax (2 B) — 5 bytes per element of the QKV, projection, MLP-in and MLP-out inputs."""
    width = (m.top_k + m.shared_experts) * m.expert_ffn if moe else m.ffn
    return 5.0 * (2 * m.hidden + m.heads * m.d_head + width)


def attention_kernel_eff(gpu: GpuSpec, kernel: str) -> float:
    """Share of the FlashAttention-2-class rate (:data:`ATTENTION_EFF`) that the
    attention ``kernel`` runs at on ``gpu``; 1 for ``"flash"`` (FlashAttention 2/3,
    cuDNN's fused attention). Raises :class:`~fabricsim.errors.ModelError`
    (``training.attention_kernel``) for a kernel that does not run on the GPU.

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> attention_kernel_eff(get_catalog().gpu("a100-sxm"), "flash1")
    0.53
    """
    if kernel == "flash":
        return 1.0
    share = ATTENTION_KERNEL_EFF.get((kernel, generation(gpu)))
    if share is None:
        runs = sorted(g for k, g in ATTENTION_KERNEL_EFF if k == kernel)
        raise ModelError(f"attention_kernel={kernel!r} (FlashAttention 1 / 2023 Triton "
                         f"kernels) runs on {', '.join(runs)} GPUs; {gpu.name} is "
                         f"{generation(gpu)}: use --attention-kernel flash",
                         field="training.attention_kernel")
    return share


def selective_parts(m: TransformerSpec, p: ResolvedParallel, gpu: GpuSpec, tokens: float,
                    gemm_rate: float, attn: float, thin: float = 1.0
                    ) -> dict[str, tuple[float, float]]:
    """Forward seconds of each part selective recomputation can repeat, per layer
    averaged over dense and MoE layers, on one GPU: ``{module: (seconds, GEMM seconds)}``
    (Megatron-Core's ``--recompute-modules`` names). ``gemm_rate`` is the GEMMs'
    achieved FLOP/s, ``attn`` the attention core's forward seconds per layer, ``thin``
    the routed experts' grouped-GEMM slowdown. A part the model
    does not have costs 0. ``moe`` includes the costs of ``shared_experts`` and
    ``moe_act``, so a caller counts those only without it.

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.parallel import ParallelConfig
    >>> m = get_model("llama3-8b")
    >>> p = ParallelConfig(seq_len=8192).resolve(m, 1)
    >>> parts = selective_parts(m, p, get_catalog().gpu("h100-sxm"), 8192, 5e14, 1e-3)
    >>> parts["mlp"][0] > parts["core_attn"][0] > parts["layernorm"][0] > 0
    True
    """
    split = p.tp
    moe_frac = m.moe_layers / m.layers
    hbm = gpu.hbm_bandwidth * HBM_EFF

    def gemm(flops_per_token: float) -> float:
        return flops_per_token * tokens / split / gemm_rate

    def mem(bytes_per_token: float) -> float:
        return bytes_per_token * tokens / split / hbm

    dense_mlp = gemm(_mlp_flops_per_token(m, p.seq, False, 1.0))
    dense_act = mem(_act_bytes_per_token(m, m.ffn))
    parts: dict[str, tuple[float, float]] = {
        "core_attn": (attn, 0.0),
        "mlp": ((1 - moe_frac) * (dense_mlp + dense_act), (1 - moe_frac) * dense_mlp),
        "layernorm": (mem(8.0 * m.hidden), 0.0),
        "mla_up_proj": (gemm(2.0 * m.mla_up_params), gemm(2.0 * m.mla_up_params)),
    }
    if m.moe_layers:
        width = (m.top_k + m.shared_experts) * m.expert_ffn
        experts = gemm(_mlp_flops_per_token(m, p.seq, True, p.cfg.moe_imbalance * thin))
        shared = gemm(2.0 * m.shared_experts * m.expert_params)
        moe_act = mem(_act_bytes_per_token(m, width))
        perm = mem(_perm_bytes_per_token(m))
        parts["moe"] = (moe_frac * (experts + moe_act + perm), moe_frac * experts)
        parts["shared_experts"] = (moe_frac * (shared + mem(_act_bytes_per_token(
            m, m.shared_experts * m.expert_ffn))), moe_frac * shared)
        parts["moe_act"] = (moe_frac * moe_act, 0.0)
    return parts


def microbatch_compute(m: TransformerSpec, p: ResolvedParallel, gpu: GpuSpec,
                       owned_params: float) -> ComputeTimes:
    """Times of one micro-batch through one pipeline stage on one GPU.

    ``owned_params`` is the number of parameters whose Adam update this GPU performs.

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.parallel import ParallelConfig
    >>> m = get_model("llama2-7b")
    >>> p = ParallelConfig(micro_batch=1).resolve(m, world=1)
    >>> t = microbatch_compute(m, p, get_catalog().gpu("h100-sxm"), m.params)
    >>> round(t.bwd / t.fwd, 2)
    2.0
    """
    cfg = p.cfg
    peak = peak_flops(gpu, cfg.precision)
    eff = gemm_efficiency(gpu, cfg.precision, m.hidden, p.tp)
    if cfg.precision == "fp8":
        if cfg.recipe == "mxfp8" and generation(gpu) != "blackwell":
            raise ModelError(f"fp8_recipe='mxfp8' (MX block scaling) runs on Blackwell "
                             f"tensor cores; {gpu.name} is {generation(gpu)}: use "
                             f"--fp8-recipe tensorwise, delayed or blockwise",
                             field="training.fp8_recipe")
        eff *= FP8_RECIPE_EFF[cfg.recipe]
    kernel = attention_kernel_eff(gpu, cfg.attention_kernel)
    tokens = cfg.micro_batch * p.seq / p.cp  # tokens this GPU's CP shard processes
    layers = p.stage_layers
    moe_frac = m.moe_layers / m.layers
    split = p.tp

    # FP8 recipes (Transformer Engine, torchao Float8) run only the linear layers in FP8:
    # attention stays BF16 (FlashAttention), and every FP8 GEMM input is cast (read BF16,
    # write FP8, plus the amax scan) — memory-bound work BF16 training does not have.
    bf16_peak = peak_flops(gpu, "bf16")
    bf16_eff = gemm_efficiency(gpu, "bf16", m.hidden, p.tp)

    # routed experts run grouped GEMMs whose rows are the tokens one expert receives per
    # micro-batch: the EP group's tokens x top_k over the experts. Few rows per expert
    # run slower, by the shape law of a thin GEMM with the grouped kernels' own half-rate
    # point (GROUPED_GEMM_N0). A GPU of the EP group routes its sequence-parallel share
    # of the tokens gathered over its expert-TP group (all of the TP group's when etp =
    # tp; its own tp-th with etp = 1, whose experts are whole instead of tp-split).
    ep_tokens = tokens * p.etp / p.tp
    rows_per_expert = p.ep * ep_tokens * m.top_k / m.experts if m.experts else 0.0
    thin = (rows_per_expert + GROUPED_GEMM_N0) / rows_per_expert if rows_per_expert \
        else 1.0

    def layer_times(moe: bool) -> tuple[float, float, float]:
        f = layer_forward_flops(m, p.seq, moe=moe)
        # the busiest rank's routed experts set the pace, at their shape's rate
        f = {**f, "mlp": _mlp_flops_per_token(m, p.seq, moe, cfg.moe_imbalance * thin)}
        gemm = (f["qkv"] + f["proj"] + f["mlp"]) * tokens / split
        attn = attention_flops(m, p.seq, causal=True) * tokens / split
        t_gemm = gemm / (peak * eff)
        t_attn = attn / (bf16_peak * bf16_eff * ATTENTION_EFF * kernel
                         * (CP_ATTENTION_EFF if p.cp > 1 else 1.0))
        cast = _fp8_cast_bytes_per_token(m, moe) if cfg.precision != "bf16" else 0.0
        t_mem = (_elementwise_bytes_per_token(m, moe) + cast) * tokens / split / (
            gpu.hbm_bandwidth * HBM_EFF)
        return t_gemm, t_attn, t_mem

    dg, da, dm = layer_times(False)
    mg, ma, mm = layer_times(True) if m.moe_layers else (0.0, 0.0, 0.0)
    per_gemm = (1 - moe_frac) * dg + moe_frac * mg
    per_attn = (1 - moe_frac) * da + moe_frac * ma
    per_mem = (1 - moe_frac) * dm + moe_frac * mm
    fwd_layer = per_gemm + per_attn + per_mem
    # output head and loss on the last stage; the slowest stage sets the pipeline's pace
    # (a last stage with fewer layers, as Megatron's first/last-stage split allows, can
    # absorb the head)
    head = 2.0 * m.hidden * m.vocab * tokens / split / (peak * eff)
    loss = 12.0 * m.vocab * tokens / split / (gpu.hbm_bandwidth * HBM_EFF)
    # a multi-token-prediction layer (pipeline_layout's m) is one more block of the
    # model's kind plus its own pass through the output head and loss
    mtp_fwd = (mg + ma + mm if m.moe_layers else dg + da + dm) + head + loss
    counts = p.stage_layer_counts if p.pp > 1 and p.stage_layer_counts else \
        (layers,) * p.pp
    mtps = p.stage_mtp_layers or (0,) * p.pp
    stage_fwd = [counts[r] * fwd_layer + mtps[r] * mtp_fwd
                 + (head + loss if r == p.pp - 1 else 0.0) for r in range(p.pp)]
    # weight-gradient GEMMs of each stage (one forward's worth of its GEMMs)
    mtp_gemm = (mg if m.moe_layers else dg) + head
    stage_w = [counts[r] * per_gemm + mtps[r] * mtp_gemm
               + (head if r == p.pp - 1 else 0.0) for r in range(p.pp)]
    if cfg.pipeline_schedule == "dualpipe":
        # a GPU runs stage r and stage pp-1-r alternately, so the pair's mean sets the
        # pace (DualPipe puts the embedding and the output head on the same GPU)
        pace = max(range(p.pp), key=lambda r: stage_fwd[r] + stage_fwd[-1 - r])
        fwd = (stage_fwd[pace] + stage_fwd[-1 - pace]) / 2
        wgrad = (stage_w[pace] + stage_w[-1 - pace]) / 2
    else:
        pace = max(range(p.pp), key=lambda r: stage_fwd[r])
        fwd = stage_fwd[pace]
        wgrad = stage_w[pace]
    bwd = 2 * fwd
    rc = cfg.recompute
    n_rc = min(cfg.recompute_layers or layers, layers)  # block recomputation: N layers
    rc_gemm = 0.0  # GEMM seconds per layer that selective recomputation repeats
    if rc == "full":
        recompute = n_rc * fwd_layer
    elif rc == "selective":
        parts = selective_parts(m, p, gpu, tokens, peak * eff, per_attn, thin)
        mods = cfg.modules_recomputed
        if "moe" in mods:  # the MoE block already reruns its experts and activation
            mods = mods - {"shared_experts", "moe_act"}
        per_layer = sum(t for k, (t, _) in parts.items() if k in mods)
        rc_gemm = sum(g for k, (_, g) in parts.items() if k in mods)
        recompute = layers * per_layer
    else:
        recompute = 0.0
    opt = owned_params * ADAM_BYTES_PER_PARAM / (gpu.hbm_bandwidth * HBM_EFF)
    mem = 3 * layers * per_mem + 3 * loss
    gemm = layers * (per_gemm * (3 + (n_rc / layers if rc == "full" else 0.0)) + rc_gemm)
    return ComputeTimes(fwd=fwd, bwd=bwd + recompute, recompute=recompute, optimizer=opt,
                        memory_bound=mem, attn_layer=per_attn, layer_fwd=fwd_layer,
                        gemm=gemm, wgrad=wgrad)
