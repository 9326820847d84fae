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

The rates themselves (:data:`~fabricsim.workloads.gpu.MAMF` and the others) are
:mod:`fabricsim.workloads.gpu`'s.

Example
-------
>>> from fabricsim.catalog import get_catalog
>>> from fabricsim.workloads.models import get_model
>>> from fabricsim.workloads.training.parallel import ParallelConfig
>>> m = get_model("llama2-7b")
>>> p = ParallelConfig(seq_len=2048).resolve(m, world=8)
>>> t = microbatch_compute(m, p, get_catalog().gpu("h100-sxm"), m.params)
>>> t.bwd > t.fwd > 0
True
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricsim.catalog.models import GpuSpec
from fabricsim.errors import ModelError
from fabricsim.workloads.flops import layer_forward_flops
from fabricsim.workloads.gpu import (
    ADAM_BYTES_PER_PARAM,
    ATTENTION_EFF,
    CP_ATTENTION_EFF,
    FP8_RECIPE_EFF,
    GROUPED_GEMM_N0,
    HBM_EFF,
    attention_kernel_eff,
    gemm_efficiency,
    generation,
    peak_flops,
)
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.parallel import ResolvedParallel

__all__ = ["ComputeTimes", "microbatch_compute", "selective_parts"]


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
    return 4.0 * m.expert_width_in * 2 * m.top_k


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
    if m.is_hybrid:  # half a layer's norms and residuals per block, and the block's own
        return m.block_mean(lambda k: 10.0 * h + _block_elementwise(m, k, width)
                            + (perm if k == "E" else 0.0), moe)
    return 20.0 * h + 4.0 * (q + 2 * kv) + _act_bytes_per_token(m, width) + perm


def _inner_width(m: TransformerSpec, kind: str, width: int) -> int:
    """The width a block's output projection reads: attention's heads, a recurrent
    mixer's inner width, an MLP's (MoE: its routes') ``width``."""
    return {"*": m.heads * m.d_head, "M": m.mamba_inner, "G": m.gdn_v}.get(kind, width)


#: Tokens per chunk of the chunked scans: Megatron-LM's Mamba-2 mixer (``chunk_size``
#: 128) and flash-linear-attention's gated delta rule (64).
SCAN_CHUNK = {"M": 128, "G": 64}


def _block_elementwise(m: TransformerSpec, kind: str, width: int) -> float:
    """HBM bytes per token of a hybrid block's own memory-bound work: attention's rotary
    embedding and layout copies; an MLP's activation; a recurrent mixer's convolution over
    its inputs, its gated norm and its chunked scan. The scan keeps one FP32 state per head
    and chunk (``head_dim × state``, or ``head_dim²`` for a delta net), written once, read
    and rewritten while passing it from chunk to chunk, and read back for the output — four
    passes of ``4·inner·state / chunk`` bytes a token — and re-reads its inputs for the
    chunk states and for the output (the kernels of Mamba-2's SSD: chunk state, state
    passing, chunk scan; flash-linear-attention's likewise)."""
    if kind == "*":
        return 4.0 * (m.heads * m.d_head + 2 * m.n_kv * m.d_head)
    if kind == "M":
        d, bc = m.mamba_inner, m.mamba_bc
        scan = 16.0 * d * m.mamba_state / SCAN_CHUNK["M"] + 2.0 * (2 * d + bc) + 2.0 * d
        return 4.0 * (d + bc) + 6.0 * d + scan
    if kind == "G":
        qk, v = m.gdn_qk, m.gdn_v
        scan = 16.0 * v * m.gdn_head_dim / SCAN_CHUNK["G"] + 2.0 * (2 * qk + v) * 2 + 2.0 * v
        return 4.0 * (2 * qk + v) + 6.0 * v + scan
    return _act_bytes_per_token(m, width)


def _fp8_cast_bytes_per_token(m: TransformerSpec, moe: bool) -> float:
    """HBM bytes per token of one layer's forward that FP8 casting adds: every input of
    the four linear layers read in BF16 (2 B), written in FP8 (1 B) and scanned for its
    amax (2 B) — 5 bytes per element of the QKV, projection, MLP-in and MLP-out inputs."""
    width = (m.top_k + m.shared_experts) * m.expert_ffn if moe else m.ffn
    if m.is_hybrid:  # a block's linear inputs: its input and its output projection's
        return m.block_mean(lambda k: 5.0 * (m.hidden + _inner_width(m, k, width)), moe)
    return 5.0 * (2 * m.hidden + m.heads * m.d_head + width)


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
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
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
    # a hybrid model's MLP blocks among its blocks other than MoE
    mlp_share = m.block_mean(lambda k: k == "-") if m.is_hybrid else 1.0
    dense_act = mlp_share * mem(_act_bytes_per_token(m, m.ffn))
    parts: dict[str, tuple[float, float]] = {
        "core_attn": (attn, 0.0),
        "mlp": ((1 - moe_frac) * (dense_mlp + dense_act), (1 - moe_frac) * dense_mlp),
        "layernorm": (mem(8.0 * m.hidden), 0.0),
        "mla_up_proj": (gemm(2.0 * m.mla_up_params), gemm(2.0 * m.mla_up_params)),
    }
    if m.moe_layers:
        width = (m.top_k + m.shared_experts) * m.expert_ffn
        experts = gemm(_mlp_flops_per_token(m, p.seq, True, p.cfg.moe_load * thin))
        shared = gemm(2.0 * m.shared_experts * m.shared_expert_params)
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
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
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
        f = {**f, "mlp": _mlp_flops_per_token(m, p.seq, moe, cfg.moe_load * thin)}
        gemm = (f["qkv"] + f["proj"] + f["mlp"]) * tokens / split
        attn = layer_forward_flops(m, p.seq, moe=moe, causal=True)["attn"] * tokens / split
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
    if cfg.pp_schedule == "dualpipe":
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
