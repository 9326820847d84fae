"""Memory per GPU of a training job: weights, gradients, optimizer states, activations.

Mixed-precision Adam keeps, per parameter, a BF16 weight (2 B), a gradient (2 B BF16, or
4 B with ``grad_reduce_dtype="fp32"``) and FP32 master weight + two moments (12 B): 16 bytes in all
(Rajbhandari et al., ZeRO, 2020). ZeRO-1 shards the 12 optimizer bytes over the
data-parallel group, ZeRO-2 also the gradients, ZeRO-3/FSDP also the weights. Weights are
split over TP and PP; routed experts over EP (their ZeRO group is the expert-data-parallel
group).

Activations per layer and micro-batch follow Korthikanti et al. 2022 (arXiv 2205.05198):
``s·b·h·(34 + 5·a·s/h)`` bytes for GPT-style layers, generalised here to GQA, MLA and
gated MLPs: attention ``s·b·(3·h + 2·(q + k + v) + 2·o)`` with the core's query, key,
value and output widths (``11·s·b·h`` for multi-head attention; Llama 3 70B's 8 KV heads
``7.5·s·b·h``; DeepSeek-V3's MLA ``25.9·s·b·h``) (+``5·a·s²·b`` without FlashAttention),
MLP ``s·b·(3·h + (6 or 4)·ffn)``, norms ``4·s·b·h``. Sequence parallelism divides everything
by ``t``; context parallelism divides ``s`` by ``cp``; selective recompute drops the
``s²`` term (as FlashAttention does); full recompute keeps only each layer's input
``2·s·b·h/t`` plus one layer's working set. Pipeline rank ``r`` of 1F1B holds
``min(p − r, m)`` micro-batches in flight (Narayanan et al. 2021); interleaved over ``v``
chunks, the ``2·(p − r − 1) + (v − 1)·p + 1`` chunk forwards of Megatron's warm-up
(``p + (p − 1)/v`` micro-batches on the first rank, about ``p`` on every other).
The last stage also holds the FP32 logits ``4·s·b·V/t`` for the loss.

Example
-------
>>> from fabricsim.workloads.models import get_model
>>> from fabricsim.workloads.training.parallel import ParallelConfig
>>> m = get_model("llama2-70b")
>>> p = ParallelConfig(zero=0, recompute="full", seq_len=4096).resolve(m, world=1)
>>> memory_per_gpu(m, p).total > 80 * 2**30
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from fabricsim.errors import ConfigError, ModelError
from fabricsim.results import Tabular
from fabricsim.workloads.gpu import FRAMEWORK_RESERVE_BYTES
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.parallel import ParallelConfig, ResolvedParallel

__all__ = ["MemoryEstimate", "activation_bytes_per_layer",
           "cheapest_fit", "memory_per_gpu", "offload_bytes_per_layer", "stage_params"]



@dataclass(frozen=True)
class MemoryEstimate(Tabular):
    """Bytes per GPU of the most loaded pipeline stage, by kind.

    Examples
    --------
    >>> MemoryEstimate(1, 2, 3, 4, 5).total, MemoryEstimate(1, 2, 3, 4, 5).to_dict()["total"]
    (15, 15)
    """

    weights: float
    grads: float
    optimizer: float
    activations: float
    reserve: float

    @property
    def total(self) -> float:
        """Sum of all parts."""
        return self.weights + self.grads + self.optimizer + self.activations + self.reserve

    def as_dict(self) -> dict[str, float]:
        """Parts and total in bytes."""
        return {**asdict(self), "total": self.total}


def stage_params(m: TransformerSpec, p: ResolvedParallel) -> tuple[float, float]:
    """Parameters one GPU of the largest stage holds: ``(dense_part, expert_part)``.

    Dense weights are split over TP and PP; routed experts over ETP·EP and PP; the
    embedding (and, if untied, the output head) sits on the first (last) stage. Under
    DualPipe every GPU holds two stages (``i`` and ``pp − 1 − i``): twice as much.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> m = get_model("gpt3-175b")
    >>> d, e = stage_params(m, ParallelConfig().resolve(m, world=1))
    >>> d == m.params and e == 0
    True
    """
    tp, pp, ep = p.tp, p.pp, p.ep
    expert = m.expert_total_params
    dense_layers = m.layer_params - expert + m.hidden
    emb = m.vocab * m.hidden
    dense: float
    if pp == 1:
        dense = dense_layers + m.embedding_params
    else:
        dense = dense_layers * p.stage_layers / m.layers + emb
    copies = 2 if p.cfg.pp_schedule == "dualpipe" else 1
    return copies * dense / tp, copies * expert * p.stage_layers / m.layers / p.etp / ep


def activation_bytes_per_layer(m: TransformerSpec, p: ResolvedParallel, moe: bool = False,
                               recompute: str | None = None) -> float:
    """Activation bytes one GPU stores for one layer and one micro-batch.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> m = get_model("gpt3-175b")
    >>> p = ParallelConfig(micro_batch=1, recompute="none", seq_len=2048).resolve(m, 1)
    >>> s, b, h, a = 2048, 1, m.hidden, m.heads
    >>> stored = activation_bytes_per_layer(m, p) + 5 * a * s * s * b
    >>> stored == s * b * h * (34 + 5 * a * s / h)
    True
    """
    rc = recompute or p.cfg.recompute
    s = p.seq / p.cp
    b = p.cfg.micro_batch
    h = m.hidden
    t = p.tp
    if rc == "full":
        return 2.0 * s * b * h / (t if p.sp else 1)
    width = (m.top_k + m.shared_experts) * m.expert_ffn if moe else m.ffn
    if m.is_hybrid:
        linear = _hybrid_block_bytes(m, p, moe, width)
        if rc == "selective" and p.cfg.recompute == "selective":
            share = 1.0 if moe else m.block_mean(lambda k: k == "-")
            linear -= share * _module_savings(m, p, moe)
        return linear
    perm = 2 * s * b * m.expert_width_in * m.top_k if moe else 0  # the routed copies
    mlp = s * b * (3 * h + (6 if m.gated else 4) * width) + perm
    # attention: its input and dropout mask (3·h), the core's query, key and value and
    # its output (BF16): 11·s·b·h for multi-head attention, less with GQA, more for MLA
    q, k, v, o = m.attn_io_widths
    attn = s * b * (3 * h + 2 * (q + k + v) + 2 * o)
    linear = attn + mlp + 4 * s * b * h
    # the parts outside TP regions (norms, dropout, layer input) scale with t only with SP
    if p.sp:
        linear /= t
    else:
        linear = (linear - 10 * s * b * h) / t + 10 * s * b * h
    if rc == "selective" and p.cfg.recompute == "selective":
        linear -= _module_savings(m, p, moe)
    return linear


def _hybrid_block_bytes(m: TransformerSpec, p: ResolvedParallel, moe: bool,
                        width: int) -> float:
    """Activation bytes one GPU stores for a hybrid model's MoE block (``moe``) or, on
    average, one of its other blocks, one micro-batch, no recomputation: the block's norm
    (2·h; 5·h of the block lie outside TP regions); attention as a transformer layer's
    half; an MLP's input and activation; a Mamba-2 mixer's input, its
    input projection's output (x, z, B, C, dt), the convolution's output, the scan's
    output and the gated norm's output; a gated delta-net's likewise (BF16)."""
    s, b, h, t = p.seq / p.cp, p.cfg.micro_batch, m.hidden, p.tp
    act = 6 if m.gated else 4
    d, nh, bc = m.mamba_inner, m.mamba_nheads, m.mamba_bc
    qk, v = m.gdn_qk, m.gdn_v
    q, k, vv, o = m.attn_io_widths

    def inside(kind: str) -> float:  # per token, in TP regions
        return {"*": 3 * h + 2 * (q + k + vv) + 2 * o,
                "M": 2 * h + 2 * (2 * d + bc + nh) + 2 * (d + bc) + 4 * d,
                "G": 2 * h + 2 * (2 * qk + 2 * v + 2 * m.gdn_v_heads) + 2 * (2 * qk + v)
                + 4 * v,
                "-": 3 * h + act * m.ffn,
                "E": 3 * h + act * width + 2 * m.expert_width_in * m.top_k}[kind] + 2.0 * h

    linear = s * b * m.block_mean(inside, moe)
    outside = 5.0 * s * b * h  # of those, outside TP regions: split by TP only with SP
    return linear / t if p.sp else (linear - outside) / t + outside


def _module_savings(m: TransformerSpec, p: ResolvedParallel, moe: bool) -> float:
    """Activation bytes per layer and micro-batch that ``recompute_modules`` frees (the
    recomputed parts keep only their input)."""
    mods = p.cfg.modules_recomputed
    s, b, h, t = p.seq / p.cp, p.cfg.micro_batch, m.hidden, p.tp
    act = 6 if m.gated else 4
    inside = 0.0  # within tensor-parallel regions: split over TP
    if "mlp" in mods and not moe:
        inside += s * b * (h + act * m.ffn)
    if moe and "moe" in mods:
        width = (m.top_k + m.shared_experts) * m.expert_ffn
        inside += s * b * (h + act * width) + 2 * s * b * m.expert_width_in * m.top_k
    elif moe:
        if "moe_act" in mods:
            inside += 2 * s * b * (m.top_k + m.shared_experts) * m.expert_ffn
        if "shared_experts" in mods:
            inside += s * b * act * m.shared_experts * m.expert_ffn
    if "mla_up_proj" in mods and m.mla_up_width:  # the core's Q, K, V are recomputed
        q, k, v, _o = m.attn_io_widths
        inside += 2 * s * b * (q + k + v)
    norms = 4 * s * b * h if "layernorm" in mods else 0.0
    return inside / t + (norms / t if p.sp else norms)


def _s2(m: TransformerSpec, p: ResolvedParallel) -> float:
    """The ``5·a·s²·b`` attention-score bytes (per GPU) that FlashAttention avoids."""
    s = p.seq / p.cp
    return 5.0 * m.heads * s * s * p.cfg.micro_batch / p.tp


def _stage_dense_layers(m: TransformerSpec, p: ResolvedParallel) -> list[float]:
    """Dense layers on each pipeline rank when the model's first ``dense_layers`` are
    dense and the rest MoE (DeepSeek-V3's three leading dense layers): the layers are laid
    out chunk by chunk, chunk ``c`` of the ``pp·v`` model chunks on rank ``c mod pp``, a
    rank's layers split evenly over its ``v`` chunks.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> m = get_model("deepseek-v3")
    >>> p = ParallelConfig(pp=16, ep=8, pipeline_layout="Et*4|(tttt|)*14tmL"
    ...                    ).resolve(m, 256)
    >>> _stage_dense_layers(m, p)[:2]
    [3.0, 0.0]
    """
    counts = p.stage_layer_counts or (p.stage_layers,) * p.pp
    if not m.is_moe or not m.dense_layers or len(counts) != p.pp:
        return [float(c) * (m.layers - m.moe_layers) / m.layers for c in counts]
    v = max(p.cfg.interleave, 1)
    out = [0.0] * p.pp
    start = 0.0
    for c in range(p.pp * v):
        rank = c % p.pp
        size = counts[rank] / v
        out[rank] += max(0.0, min(start + size, m.dense_layers) - start)
        start += size
    return out


def _stage_params(m: TransformerSpec, p: ResolvedParallel, stage: int,
                  dense_on: list[float] | None = None) -> tuple[float, float]:
    """Parameters one GPU of pipeline stage ``stage`` holds (dense, expert), as
    :func:`stage_params` does for the largest stage, with the stage's own dense and MoE
    layers (``dense_on``: :func:`_stage_dense_layers`, computed when not given)."""
    counts = p.stage_layer_counts or (p.stage_layers,)
    if p.pp == 1:
        return stage_params(m, p)
    layers = counts[stage]
    if m.is_moe:
        dense_n = (dense_on or _stage_dense_layers(m, p))[stage]
        moe_n = layers - dense_n
        routed = m.experts * m.expert_params
        dense = dense_n * m.dense_layer_params + moe_n * (m.moe_layer_params - routed)
        expert = moe_n * routed
    else:
        dense, expert = float(layers * m.dense_layer_params), 0.0
    emb = m.vocab * m.hidden
    if stage == 0:
        dense += emb
    if stage == p.pp - 1:
        dense += emb  # the output head (its own copy when tied, as Megatron keeps it)
    return dense / p.tp, expert / p.etp / p.ep


def _fp8_saving(m: TransformerSpec, p: ResolvedParallel, moe: bool,
                rc: str | None = None) -> float:
    """Bytes per layer and micro-batch that FP8 saves: Transformer Engine keeps the inputs
    of the linear layers for the backward in FP8 (1 byte) instead of BF16 (2 bytes): the
    QKV and projection inputs, the MLP's first input and its activation output. In an
    MoE layer the routed experts' first input is the ``top_k`` permuted copies of each
    token (the grouped GEMM's FP8-cast input; the BF16 copies are not kept: the
    permutation's backward needs only the routing map). Under selective recomputation
    (``rc``, default the job's) the MLP parts its modules recompute are not stored, so
    FP8 saves nothing on them."""
    s = p.seq / p.cp
    b = p.cfg.micro_batch
    rc = rc or p.cfg.recompute
    mods = p.cfg.modules_recomputed if rc == "selective" else frozenset()
    shared = m.shared_experts * m.expert_ffn
    if moe:
        mlp_in = 0.0 if "moe" in mods else float(m.hidden * m.top_k)
        act_out = float(shared if "shared_experts" not in mods else 0)
        if not mods & {"moe", "moe_act"}:
            act_out += m.top_k * m.expert_ffn
    else:
        freed = "mlp" in mods
        mlp_in, act_out = (0.0, 0.0) if freed else (float(m.hidden), float(m.ffn))
    if m.is_hybrid:  # a block's linear inputs: the mixer's, or the MLP's (MoE block's)
        if moe:
            return s * b * (mlp_in + act_out) / p.tp
        inputs = {"*": 2.0 * m.hidden, "M": float(m.hidden + m.mamba_inner),
                  "G": float(m.hidden + m.gdn_v), "-": mlp_in + act_out}
        return s * b * m.block_mean(inputs.__getitem__) / p.tp
    saved = s * b * (2 * m.hidden + mlp_in + act_out)
    return saved / p.tp  # the MLP input and activation live in TP regions


def _in_flight(p: ResolvedParallel, rank: int) -> float:
    """Micro-batches of a whole stage's activations pipeline rank ``rank`` holds at its
    peak under (interleaved) 1F1B: Megatron's warm-up runs ``2·(p − r − 1) + (v − 1)·p``
    chunk forwards before the first backward, one more forward at the peak, each chunk
    holding ``1/v`` of the stage's layers; at most every chunk of every micro-batch.
    ``p − r`` without interleaving (warm-up ``p − r − 1``); ``p + (p − 1)/v`` on the
    first rank (Narayanan et al. 2021), and under interleaving every rank holds about
    ``p`` (the last ``(v − 1)·p + 1`` chunks, where plain 1F1B keeps one micro-batch).

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> m = get_model("llama3-70b")
    >>> p = ParallelConfig(tp=8, pp=4, vp=5, global_batch=64).resolve(m, 32)
    >>> [round(_in_flight(p, r), 2) for r in range(4)]
    [4.6, 4.2, 3.8, 3.4]
    """
    pp, v = p.pp, max(p.cfg.interleave, 1)
    if v == 1 or pp == 1:
        return float(min(pp - rank, p.num_micro))
    chunks = 2 * (pp - rank - 1) + (v - 1) * pp + 1
    return min(chunks, p.num_micro * v) / v


def _layer_bytes(m: TransformerSpec, p: ResolvedParallel, rc: str, moe_frac: float,
                 flash: bool = True) -> float:
    """Activation bytes one layer of one micro-batch keeps under recomputation ``rc``, for
    a mix of ``moe_frac`` MoE layers: FP8-cast linear inputs counted at 1 byte, the
    attention scores added without FlashAttention."""
    out = ((1 - moe_frac) * activation_bytes_per_layer(m, p, recompute=rc)
           + moe_frac * activation_bytes_per_layer(m, p, moe=True, recompute=rc))
    if rc != "full" and p.cfg.precision != "bf16":
        out -= (1 - moe_frac) * _fp8_saving(m, p, False, rc) + moe_frac * _fp8_saving(
            m, p, True, rc)
    if rc == "none" and not flash:
        out += _s2(m, p)
    return out


def offload_bytes_per_layer(m: TransformerSpec, p: ResolvedParallel) -> float:
    """Activation bytes one layer of one micro-batch leaves (the layer mix of the whole
    model, as the job recomputes and casts them): what ``offload_layers`` copies to host
    memory after the layer's forward and back before its backward.

    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> m = get_model("llama3-70b")
    >>> p = ParallelConfig(micro_batch=2, seq_len=8192, precision="fp8", zero="fsdp",
    ...                    offload_layers=40).resolve(m, 64)
    >>> round(offload_bytes_per_layer(m, p) / 1e9, 2)  # GB
    3.89
    """
    return _layer_bytes(m, p, p.cfg.recompute, m.moe_layers / m.layers)


def memory_per_gpu(m: TransformerSpec, p: ResolvedParallel, *, flash: bool = True
                   ) -> MemoryEstimate:
    """Estimate the memory of the most loaded GPU (every pipeline stage is evaluated: its
    layers, parameters and micro-batches in flight; the largest total is returned).

    Under DualPipe a GPU holds stages ``i`` and ``pp − 1 − i`` (both stages' parameters)
    and ``pp + 1`` micro-batches of activations, half of them on each stage (DualPipe's
    table). ``flash=False`` stores attention scores when ``recompute == "none"``. With
    ``recompute="full"`` and ``recompute_layers=N`` only ``N`` layers of each stage are
    recomputed (the others keep all their activations). ``offload_layers=N`` keeps ``N``
    layers' activations of each stage in host memory (one layer's stays, in transit).
    With ``precision="fp8"`` the linear layers' saved inputs are FP8 (Transformer
    Engine); under ``fp4`` (NVFP4) they
    are counted the same (a 4-bit copy for the forward plus the weight-gradient's own
    Hadamard-transformed copy).

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> m = get_model("llama2-70b")
    >>> p = ParallelConfig(zero=3, recompute="full", seq_len=4096).resolve(m, world=64)
    >>> memory_per_gpu(m, p).total < 80 * 2**30
    True
    """
    cfg = p.cfg
    z = cfg.zero_stage
    shard_dense = p.shard_size("dp")
    shard_expert = p.shard_size("edp")
    gb = cfg.grad_bytes
    block = cfg.recompute == "full" and cfg.recompute_layers is not None

    counts = p.stage_layer_counts or (p.stage_layers,)
    dense_on = _stage_dense_layers(m, p)
    logits = 4.0 * (p.seq / p.cp) * cfg.micro_batch * m.vocab / p.tp
    dual = cfg.pp_schedule == "dualpipe"

    def acts_of(stage: int) -> float:
        """Activations one micro-batch leaves on pipeline stage ``stage``."""
        layers = counts[stage]
        frac = 1 - dense_on[stage] / layers if layers and m.is_moe else 0.0
        full_layer = _layer_bytes(m, p, "full", frac, flash)
        # layers not recomputed keep everything (block recomputation's other layers)
        kept_layer = _layer_bytes(m, p, "none" if block else cfg.recompute, frac, flash)
        # offloaded layers keep their activations in host memory (the layer being
        # copied out or back in holds one layer's on the GPU)
        off = min(cfg.offload_layers or 0, layers)
        kept = layers - off + (1 if off else 0)
        if block:  # N layers recomputed, the rest keep all their activations
            n_rc = min(cfg.recompute_layers or layers, kept)
            return n_rc * full_layer + (kept - n_rc) * kept_layer
        return kept * kept_layer

    best: MemoryEstimate | None = None
    for i, layers in enumerate(counts):
        dense, expert = _stage_params(m, p, i, dense_on)
        if dual:  # the stage of the other direction on the same GPU
            d2, e2 = _stage_params(m, p, p.pp - 1 - i, dense_on)
            dense, expert = dense + d2, expert + e2

        def part(nbytes: float, stage_min: int, dense: float = dense,
                 expert: float = expert) -> float:
            if z >= stage_min:
                return nbytes * dense / shard_dense + nbytes * expert / shard_expert
            return nbytes * (dense + expert)

        weights = part(2.0, 3)
        grads = part(float(gb), 2)
        optimizer = part(12.0, 1)
        if z >= 3 and cfg.keeps_gathered:  # the stage's weights stay gathered (BF16)
            weights += 2.0 * (dense + expert)
            if p.pp > 1:  # ... and its gradients accumulate unsharded to the step's end
                grads += 2.0 * (dense + expert)
        elif z >= 3:  # gathered weights of the layers in flight (prefetch of ~2 layers)
            held = layers + (counts[p.pp - 1 - i] if dual else 0)
            weights += 2 * 2.0 * (dense + expert) / max(held, 1)
        if dual:
            in_flight = float(min(p.pp + 1, p.num_micro))
            acts = in_flight * (acts_of(i) + acts_of(p.pp - 1 - i)) / 2
        else:
            acts = acts_of(i) * _in_flight(p, i)
        if cfg.recompute == "full":  # one layer's full working set while it is recomputed
            acts += activation_bytes_per_layer(m, p, recompute="selective")
        if i == len(counts) - 1 or (dual and i == 0):
            acts += logits
        est = MemoryEstimate(weights=weights, grads=grads, optimizer=optimizer,
                             activations=acts, reserve=FRAMEWORK_RESERVE_BYTES)
        if best is None or est.total > best.total:
            best = est
    assert best is not None
    return best


def cheapest_fit(m: TransformerSpec, p: ResolvedParallel, capacity: float, *,
                 step_time: Callable[[ParallelConfig], float] | None = None) -> str:
    """Changes that make the job fit ``capacity`` bytes per GPU, each with the memory it
    leaves and its price, joined by ``"; or "`` (``""`` if none tried fits): sharding
    weights and gradients too (ZeRO-3/FSDP: more data-parallel traffic, no extra
    compute), block recomputation of the fewest layers per stage, a smaller micro-batch,
    full recomputation, and, when none of those fits alone, FSDP with full
    recomputation. ``step_time`` (seconds of a step under a changed configuration)
    prices each change and orders them, fastest first; without it they keep that order.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.parallel import ParallelConfig
    >>> m = get_model("llama3-405b")
    >>> p = ParallelConfig(tp=8, pp=16, dp=64, global_batch=2048, seq_len=8192
    ...                    ).resolve(m, 8192)
    >>> cheapest_fit(m, p, 80 * 2**30).split("; or ")[0]
    '--zero fsdp (71.9 GiB)'
    """
    cfg = p.cfg
    # recomputing everything replaces a module list (a list needs recompute=selective)
    full: dict[str, object] = {"recompute": "full", "recompute_modules": None}

    def fits(**change: object) -> MemoryEstimate | None:
        try:
            q = cfg.model_copy(update=change).resolve(m, p.world)
        except (ModelError, ConfigError):  # a change that does not apply is skipped
            return None
        est = memory_per_gpu(m, q)
        return est if est.total <= capacity else None

    found: list[tuple[str, dict[str, object], str]] = []  # flags, change, what it costs

    def gib(est: MemoryEstimate) -> str:
        return f"{est.total / 2**30:.1f} GiB"

    if cfg.zero_stage < 3 and (est := fits(zero="fsdp")) is not None:
        found.append(("--zero fsdp", {"zero": "fsdp"}, gib(est)))
    layers = p.stage_layers
    if cfg.recompute != "full" or cfg.recompute_layers:
        for n in range(max(cfg.recompute_layers or 0, 0) + 1, layers):
            if (est := fits(**full, recompute_layers=n)) is not None:
                found.append((f"--recompute full --recompute-layers {n}",
                              {**full, "recompute_layers": n},
                              f"block recomputation of {n} of each stage's {layers} "
                              f"layers: {gib(est)}, about +{n / layers / 3:.0%} compute"))
                break
    for mb in range(cfg.micro_batch - 1, 0, -1):
        if p.global_batch % (mb * p.dp) == 0 and (est := fits(micro_batch=mb)) is not None:
            found.append((f"--micro-batch {mb}", {"micro_batch": mb}, gib(est)))
            break
    if (cfg.recompute != "full" or cfg.recompute_layers) and not any(
            "recompute" in f for f, _c, _w in found) and (
            est := fits(**full, recompute_layers=None)) is not None:
        found.append(("--recompute full", {**full, "recompute_layers": None},
                      f"{gib(est)}, about +33% compute"))
    if not found and cfg.zero_stage < 3 and (
            est := fits(zero="fsdp", **full, recompute_layers=None)) is not None:
        found.append(("--zero fsdp --recompute full",
                      {"zero": "fsdp", **full, "recompute_layers": None},
                      f"{gib(est)}, about +33% compute"))
    if step_time is None:
        return "; or ".join(f"{f} ({w})" for f, _c, w in found)
    priced = sorted((step_time(cfg.model_copy(update=c)), f, w) for f, c, w in found)
    return "; or ".join(f"{f} ({w}; step {t:.3g} s)" for t, f, w in priced)
