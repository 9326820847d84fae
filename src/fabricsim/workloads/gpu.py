"""What a GPU achieves: shares of its datasheet peak per generation and precision.

The tensor-core rate a large, well-shaped GEMM reaches (:data:`MAMF`, from the *maximum
achievable matmul FLOPS* measurements; FP8 and NVFP4 fitted on NVIDIA's own training
tables), the sustained clock under load (:data:`SUSTAINED`), thin-GEMM and grouped-GEMM
penalties, FlashAttention's share of the GEMM rate, and the share of HBM bandwidth
streaming kernels reach. Training (:mod:`fabricsim.workloads.training.compute`) and
serving (:mod:`fabricsim.workloads.serving`) read the same figures; they are per GPU
generation and precision, never per model or per run.

Example
-------
>>> from fabricsim.catalog import get_catalog
>>> round(gemm_efficiency(get_catalog().gpu("h100-sxm"), "bf16", 8192, 8), 3)
0.515
"""

from __future__ import annotations

import math

from fabricsim.catalog.models import GpuSpec
from fabricsim.errors import ModelError

__all__ = [
    "ADAM_BYTES_PER_PARAM",
    "ATTENTION_EFF",
    "ATTENTION_KERNEL_EFF",
    "CP_ATTENTION_EFF",
    "FP8_RECIPE_EFF",
    "FRAMEWORK_RESERVE_BYTES",
    "GROUPED_GEMM_N0",
    "HBM_EFF",
    "MAMF",
    "NVFP4_OVER_FP8",
    "SHAPE_N0",
    "SUSTAINED",
    "UNMEASURED",
    "architecture",
    "attention_kernel_eff",
    "gemm_efficiency",
    "gemm_share",
    "generation",
    "peak_flops",
    "power_capped",
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

#: CUDA context, NCCL buffers, allocator fragmentation: a flat reserve per GPU (estimate;
#: PyTorch jobs typically lose 1–3 GiB of an 80 GB card to these).
FRAMEWORK_RESERVE_BYTES = 2 * 2**30


#: Architectures no published run measures yet, and the measured generation whose
#: constants they use. NCCL does the same for its own tables: every GPU of compute
#: capability 10.0 and above gets Blackwell's rows (``src/graph/tuning.cc``).
#: Google's TPUs have no GPU generation: until published TPU step times are in the
#: reference data, their GEMM and sustained shares are Hopper's (an assumption the
#: accuracy band states: no held-out figure exists for them).
UNMEASURED: dict[str, str] = {"rubin": "blackwell", "tpu": "hopper"}


def architecture(gpu: GpuSpec) -> str:
    """GPU architecture of a catalog entry, from its key. An architecture nothing has
    measured yet (:data:`UNMEASURED`) is named as itself here; accuracy bands use this,
    so a Rubin run says it has no held-out figure.

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> architecture(get_catalog().gpu("rubin")), generation(get_catalog().gpu("rubin"))
    ('rubin', 'blackwell')
    """
    n = gpu.name
    if n.startswith("rubin"):
        return "rubin"
    if n.startswith("tpu") or gpu.ici:
        return "tpu"
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


def generation(gpu: GpuSpec) -> str:
    """GPU generation of a catalog entry: the measured generation whose constants it
    uses, its :func:`architecture` (Rubin, unmeasured, uses Blackwell's:
    :data:`UNMEASURED`).

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> generation(get_catalog().gpu("a100-sxm")), generation(get_catalog().gpu("gb200"))
    ('ampere', 'blackwell')
    """
    arch = architecture(gpu)
    return UNMEASURED.get(arch, arch)


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


def gemm_share(gpu: GpuSpec, precision: str, hidden: int, tp: int = 1) -> float:
    """Share of the dense peak one GEMM of a layer of width ``hidden`` at ``tp`` reaches
    on its own: :data:`MAMF` times the thin-GEMM factor ``n / (n + SHAPE_N0)``, ``n`` the
    geometric mean of the weight matrix's sides on one GPU. A kernel benchmark's figure,
    before anything a whole training step adds (:func:`gemm_efficiency`).

    Examples
    --------
    >>> from fabricsim.catalog import get_catalog
    >>> round(gemm_share(get_catalog().gpu("a100-sxm"), "bf16", 4096), 3)
    0.808
    """
    gen = generation(gpu)
    mamf = MAMF.get((gen, precision), MAMF.get((gen, "bf16"), 0.75))
    n = math.sqrt(hidden * hidden / tp)
    return mamf * n / (n + SHAPE_N0)


def gemm_efficiency(gpu: GpuSpec, precision: str, hidden: int, tp: int = 1) -> float:
    """Achievable fraction of peak for the GEMMs of a layer of width ``hidden`` at ``tp``
    over a training step: :func:`gemm_share` times the :data:`SUSTAINED` share.

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
    return gemm_share(gpu, precision, hidden, tp) * sustained(gpu)


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
