"""Memory per GPU of a training job: weights, gradients, optimizer states, activations.

Mixed-precision Adam keeps, per parameter, a BF16 weight (2 B), a gradient (2 B BF16, or
4 B with ``grad_bytes=4``) and FP32 master weight + two moments (12 B): 16 bytes in all
(Rajbhandari et al., ZeRO, 2020). ZeRO-1 shards the 12 optimizer bytes over the
data-parallel group, ZeRO-2 also the gradients, ZeRO-3/FSDP also the weights. Weights are
split over TP and PP; routed experts over EP (their ZeRO group is the expert-data-parallel
group).

Activations per layer and micro-batch follow Korthikanti et al. 2022 (arXiv 2205.05198):
``s·b·h·(34 + 5·a·s/h)`` bytes for GPT-style layers, generalised here to GQA and gated
MLPs: attention ``11·s·b·h`` (+``5·a·s²·b`` without FlashAttention), MLP
``s·b·(3·h + (6 or 4)·ffn)``, norms ``4·s·b·h``. Sequence parallelism divides everything
by ``t``; context parallelism divides ``s`` by ``cp``; selective recompute drops the
``s²`` term (as FlashAttention does); full recompute keeps only each layer's input
``2·s·b·h/t`` plus one layer's working set. The first 1F1B stage holds ``min(p, m)``
micro-batches in flight (Narayanan et al. 2021); interleaving adds ``(p−1)/(p·v)`` of that.
The last stage also holds the FP32 logits ``4·s·b·V/t`` for the loss.

Example
-------
>>> from fabricsim.workloads.models import get_model
>>> from fabricsim.workloads.parallel import ParallelConfig
>>> m = get_model("llama2-70b")
>>> p = ParallelConfig(zero=0, recompute="full", seq_len=4096).resolve(m, world=1)
>>> memory_per_gpu(m, p).total > 80 * 2**30
True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.parallel import ResolvedParallel

__all__ = ["FRAMEWORK_RESERVE_BYTES", "MemoryEstimate", "activation_bytes_per_layer",
           "memory_per_gpu", "stage_params"]

#: CUDA context, NCCL buffers, allocator fragmentation: a flat reserve per GPU (estimate;
#: PyTorch jobs typically lose 1–3 GiB of an 80 GB card to these).
FRAMEWORK_RESERVE_BYTES = 2 * 2**30


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per GPU of the most loaded pipeline stage, by kind.

    Examples
    --------
    >>> MemoryEstimate(1, 2, 3, 4, 5).total
    15
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

    Dense weights are split over TP and PP; routed experts over TP·EP and PP; the
    embedding (and, if untied, the output head) sits on the first (last) stage.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.parallel import ParallelConfig
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
    return dense / tp, expert * p.stage_layers / m.layers / tp / ep


def activation_bytes_per_layer(m: TransformerSpec, p: ResolvedParallel, moe: bool = False,
                               recompute: str | None = None) -> float:
    """Activation bytes one GPU stores for one layer and one micro-batch.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.parallel import ParallelConfig
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
    mlp = s * b * (3 * h + (6 if m.gated else 4) * width) + (2 * s * b * h * m.top_k if moe
                                                             else 0)
    linear = 11 * s * b * h + mlp + 4 * s * b * h
    # the parts outside TP regions (norms, dropout, layer input) scale with t only with SP
    if p.sp:
        linear /= t
    else:
        linear = (linear - 10 * s * b * h) / t + 10 * s * b * h
    return linear


def _s2(m: TransformerSpec, p: ResolvedParallel) -> float:
    """The ``5·a·s²·b`` attention-score bytes (per GPU) that FlashAttention avoids."""
    s = p.seq / p.cp
    return 5.0 * m.heads * s * s * p.cfg.micro_batch / p.tp


def memory_per_gpu(m: TransformerSpec, p: ResolvedParallel, *, flash: bool = True
                   ) -> MemoryEstimate:
    """Estimate the memory of the most loaded GPU (first or last pipeline stage).

    ``flash=False`` stores attention scores when ``recompute == "none"``.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.parallel import ParallelConfig
    >>> m = get_model("llama2-70b")
    >>> p = ParallelConfig(zero=3, recompute="full", seq_len=4096).resolve(m, world=64)
    >>> memory_per_gpu(m, p).total < 80 * 2**30
    True
    """
    cfg = p.cfg
    z = cfg.zero_stage
    dense, expert = stage_params(m, p)
    shard_dense = p.dp * p.cp
    shard_expert = max(1, shard_dense // p.ep)
    gb = cfg.grad_bytes

    def part(nbytes: float, stage_min: int) -> float:
        if z >= stage_min:
            return nbytes * dense / shard_dense + nbytes * expert / shard_expert
        return nbytes * (dense + expert)

    weights = part(2.0, 3)
    grads = part(float(gb), 2)
    optimizer = part(12.0, 1)
    if z >= 3:  # gathered weights of the layers in flight (prefetch of ~2 layers)
        per_layer = (dense + expert) / p.stage_layers
        weights += 2 * 2.0 * per_layer

    layers = p.stage_layers
    moe_frac = m.moe_layers / m.layers
    per_layer = ((1 - moe_frac) * activation_bytes_per_layer(m, p)
                 + moe_frac * activation_bytes_per_layer(m, p, moe=True))
    if cfg.recompute == "none" and not flash:
        per_layer += _s2(m, p)
    in_flight: float = min(p.pp, p.num_micro)
    if cfg.interleave > 1 and p.pp > 1:
        in_flight *= 1 + (p.pp - 1) / (p.pp * cfg.interleave)
    acts = layers * per_layer * in_flight
    if cfg.recompute == "full":  # one layer's full working set while it is recomputed
        acts += activation_bytes_per_layer(m, p, recompute="selective")
    logits = 4.0 * (p.seq / p.cp) * cfg.micro_batch * m.vocab / p.tp
    acts_first = acts
    acts_last = layers * per_layer + logits if p.pp > 1 else acts + logits
    return MemoryEstimate(weights=weights, grads=grads, optimizer=optimizer,
                          activations=max(acts_first, acts_last),
                          reserve=FRAMEWORK_RESERVE_BYTES)
