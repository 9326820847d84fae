"""Latency and throughput of tensor-parallel LLM serving: prefill and decode.

One request batch of ``batch`` sequences runs on one tensor-parallel group of ``tp`` GPUs
(ranks ``0 … tp−1`` of the fabric). Weights and the KV cache are split over the group
(KV heads are split while there are at least ``tp`` of them, then replicated).

**Decode** (one output token for every sequence of the batch) is a roofline per GPU:

``t_compute = max(HBM bytes / (HBM bandwidth × HBM_EFF), FLOPs / (peak × MAMF))``

with HBM bytes = the weights a step touches (every layer and the output head; for MoE the
experts ``batch × top_k`` picks reach, in expectation ``E·(1 − (1 − k/E)^batch)``) plus
the KV cache of the batch at the current context. Every layer then all-reduces the hidden
state twice (after attention and after the MLP, Megatron-style TP): ``batch × hidden × 2``
bytes — a few KiB to a MiB, latency-bound, timed by the collective engine's
``predict_time`` (which picks the LL/LL128 protocols at these sizes). TP communication is
not overlapped with compute. The time per output token (TPOT) is reported at the mean
context ``prompt + output/2`` (the KV term grows linearly over the generation).

**Prefill** (the prompt, ``batch × prompt`` tokens at once) is compute-bound: GEMM FLOPs at
the calibrated training efficiency (:func:`~fabricsim.workloads.compute.gemm_efficiency`)
and causal attention at :data:`~fabricsim.workloads.compute.ATTENTION_EFF` of it, plus the
same two all-reduces per layer of ``batch × prompt × hidden × 2`` bytes (bandwidth-bound).

Not modelled: kernel-launch gaps and CPU scheduling (CUDA graphs hide most), speculative
decoding, paged-attention fragmentation, continuous batching (a steady batch is assumed),
custom one-shot all-reduce kernels (TensorRT-LLM's are faster than NCCL at small sizes).

Example
-------
>>> import fabricsim as fs
>>> from fabricsim.workloads.models import get_model
>>> fab = fs.build_cluster("dgx-h100", nodes=1)
>>> r = simulate_inference(get_model("llama2-70b"), fab, tp=8, batch=1, prompt_len=1024,
...                        output_len=256)
>>> 0.005 < r.tpot_s < 0.02, r.comm_share < 0.5
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fabricsim.catalog import get_catalog
from fabricsim.errors import ConfigError, ModelError
from fabricsim.fabric import Fabric
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.compute import (
    ATTENTION_EFF,
    HBM_EFF,
    MAMF,
    gemm_efficiency,
    generation,
    peak_flops,
)
from fabricsim.workloads.flops import attention_flops
from fabricsim.workloads.memory import FRAMEWORK_RESERVE_BYTES
from fabricsim.workloads.models import TransformerSpec

__all__ = ["PRECISION_BYTES", "DecodeTimes", "InferenceResult", "simulate_inference"]

#: Bytes per weight (and per KV-cache element) by serving precision.
PRECISION_BYTES = {"bf16": 2.0, "fp8": 1.0}
#: Activations travel in BF16 whatever the weight precision.
ACT_BYTES = 2.0
_GIB = 2**30


@dataclass(frozen=True)
class DecodeTimes:
    """Seconds of one decode step (one token for each sequence of the batch)."""

    weights_s: float
    """Reading the weights from HBM."""
    kv_s: float
    """Reading the KV cache from HBM."""
    compute_s: float
    """FLOPs at the achievable GEMM rate (hidden behind memory when smaller)."""
    comm_s: float
    """The 2 TP all-reduces per layer."""

    @property
    def total_s(self) -> float:
        """Roofline of memory and compute, plus communication."""
        return max(self.weights_s + self.kv_s, self.compute_s) + self.comm_s


@dataclass(frozen=True)
class InferenceResult:
    """Prefill and decode times of one batch of requests on one TP group."""

    model: str
    tp: int
    batch: int
    prompt_len: int
    output_len: int
    precision: str
    gpu: str
    prefill_s: float
    prefill_comm_s: float
    decode: DecodeTimes
    decode_first: DecodeTimes
    decode_last: DecodeTimes
    memory_per_gpu_bytes: float
    gpu_memory_bytes: float
    warnings: list[str] = field(default_factory=list)

    @property
    def tpot_s(self) -> float:
        """Time per output token (mean over the generation)."""
        return self.decode.total_s

    @property
    def tokens_per_s_per_request(self) -> float:
        """Decode speed one user sees."""
        return 1.0 / self.tpot_s

    @property
    def tokens_per_s(self) -> float:
        """Decode tokens per second of the whole batch."""
        return self.batch / self.tpot_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Decode tokens per second per GPU of the group."""
        return self.tokens_per_s / self.tp

    @property
    def comm_share(self) -> float:
        """Share of a decode step spent in TP all-reduces."""
        return self.decode.comm_s / self.tpot_s

    @property
    def latency_s(self) -> float:
        """End-to-end time of one request: prefill + output_len decode steps."""
        return self.prefill_s + self.output_len * self.tpot_s

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "model": self.model, "tp": self.tp, "batch": self.batch,
            "prompt_len": self.prompt_len, "output_len": self.output_len,
            "precision": self.precision, "gpu": self.gpu,
            "prefill_s": self.prefill_s, "ttft_s": self.prefill_s,
            "prefill_comm_share": self.prefill_comm_s / self.prefill_s,
            "tpot_s": self.tpot_s, "tpot_first_s": self.decode_first.total_s,
            "tpot_last_s": self.decode_last.total_s,
            "tokens_per_s_per_request": self.tokens_per_s_per_request,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "comm_share": self.comm_share, "latency_s": self.latency_s,
            "decode_breakdown_s": asdict(self.decode),
            "memory_per_gpu_gib": self.memory_per_gpu_bytes / _GIB,
            "gpu_memory_gib": self.gpu_memory_bytes / _GIB,
            "warnings": list(self.warnings),
        }


def _kv_heads_per_gpu(m: TransformerSpec, tp: int) -> int:
    return max(1, math.ceil(m.n_kv / tp))


def _kv_bytes(m: TransformerSpec, tp: int, tokens: float, nbytes: float) -> float:
    """KV-cache bytes on one GPU for ``tokens`` cached tokens (all sequences)."""
    return tokens * m.layers * 2 * _kv_heads_per_gpu(m, tp) * m.d_head * nbytes


def _weights_read(m: TransformerSpec, batch: int) -> float:
    """Parameters one decode step reads: all but the input embedding; MoE experts that the
    batch's ``batch·top_k`` picks reach (expected count, uniform router)."""
    read = float(m.params - m.vocab * m.hidden * (0 if m.tied_embeddings else 1))
    if m.is_moe:
        e, k = m.experts, m.top_k
        touched = e * (1.0 - (1.0 - k / e) ** batch)
        read -= m.moe_layers * (e - touched) * m.expert_params
    return float(read)


def _decode(m: TransformerSpec, fabric: Fabric, comm: CommModel, tp: int, batch: int,
            context: float, precision: str) -> DecodeTimes:
    cat = get_catalog()
    gpu = cat.gpu(fabric.info.gpu)
    wb = PRECISION_BYTES[precision]
    hbm = gpu.hbm_bandwidth * HBM_EFF
    weights = _weights_read(m, batch) * wb / tp
    kv = _kv_bytes(m, tp, batch * context, wb)
    flops = batch * (2.0 * m.active_params + m.layers * attention_flops(m, int(context))
                     ) / tp
    mamf = MAMF.get((generation(gpu), precision), 0.75)
    t_comp = flops / (peak_flops(gpu, precision) * mamf)
    ranks = list(range(tp))
    ar = comm.time("all_reduce", ranks, batch * m.hidden * ACT_BYTES)
    return DecodeTimes(weights_s=weights / hbm, kv_s=kv / hbm, compute_s=t_comp,
                       comm_s=2 * m.layers * ar)


def simulate_inference(model: TransformerSpec, fabric: Fabric, *, tp: int = 8,
                       batch: int = 1, prompt_len: int = 1024, output_len: int = 256,
                       precision: str = "bf16", comm: CommModel | None = None,
                       check_memory: bool = True) -> InferenceResult:
    """Prefill and decode times of ``batch`` requests served by ``tp`` GPUs of ``fabric``.

    Parameters
    ----------
    model : TransformerSpec
        What is served.
    fabric : Fabric
        Where; the TP group is ranks ``0 … tp−1`` (inside one NVLink domain if it fits).
    tp, batch, prompt_len, output_len : int
        Tensor-parallel size, sequences decoded together, prompt and output tokens.
    precision : {"bf16", "fp8"}
        Weight and KV-cache precision.
    comm : CommModel, optional
        Default: :class:`~fabricsim.workloads.comm.EngineComm` (analytic collective engine).
    check_memory : bool
        Raise when weights + KV cache at the full context exceed GPU memory.

    Returns
    -------
    InferenceResult

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> fab = fs.build_cluster("dgx-h100", nodes=1)
    >>> a = simulate_inference(get_model("llama3-8b"), fab, tp=1)
    >>> b = simulate_inference(get_model("llama3-8b"), fab, tp=4)
    >>> b.tpot_s < a.tpot_s and a.comm_share == 0.0
    True
    """
    for name, v in (("tp", tp), ("batch", batch), ("prompt_len", prompt_len),
                    ("output_len", output_len)):
        if not isinstance(v, int) or v < 1:
            raise ConfigError(f"must be a positive integer, got {v!r}", field=f"inference.{name}")
    if precision not in PRECISION_BYTES:
        raise ConfigError(f"must be bf16 or fp8, got {precision!r}",
                          field="inference.precision")
    if tp > fabric.n_gpus:
        raise ConfigError(f"tp={tp} exceeds the {fabric.n_gpus} GPUs of the cluster; add "
                          f"nodes or lower tp", field="inference.tp")
    if model.heads % tp:
        raise ConfigError(f"tp={tp} must divide the {model.heads} attention heads of "
                          f"{model.name}", field="inference.tp")
    cat = get_catalog()
    gpu = cat.gpu(fabric.info.gpu)
    peak = peak_flops(gpu, precision)  # raises for fp8 on GPUs without it
    wb = PRECISION_BYTES[precision]
    mem = (model.params * wb / tp + _kv_bytes(model, tp, batch * (prompt_len + output_len), wb)
           + FRAMEWORK_RESERVE_BYTES)
    if check_memory and mem > gpu.memory_bytes:
        raise ModelError(
            f"{model.name} at tp={tp}, batch={batch}, context {prompt_len + output_len} needs "
            f"{mem / _GIB:.1f} GiB per GPU but {gpu.name} has {gpu.memory_gib:.0f} GiB; raise "
            f"tp, lower batch or use fp8", field="inference.batch")
    warnings: list[str] = []
    dom = fabric.info.nvlink_domain_gpus
    if tp > max(1, dom):
        warnings.append(f"tp={tp} spans beyond the NVLink domain ({dom} GPUs): every layer's "
                        f"all-reduces cross the slower link")
    comm = comm if comm is not None else EngineComm(fabric)

    tokens = batch * prompt_len
    eff = gemm_efficiency(gpu, precision, model.hidden, tp)
    gemm = 2.0 * (model.active_params - model.vocab * model.hidden) * tokens / tp
    attn = model.layers * attention_flops(model, prompt_len, causal=True) * tokens / tp
    head = 2.0 * model.vocab * model.hidden * batch / tp  # logits of the last position only
    t_compute = (gemm + head) / (peak * eff) + attn / (peak * eff * ATTENTION_EFF)
    t_weights = model.params * wb / tp / (gpu.hbm_bandwidth * HBM_EFF)
    ar = comm.time("all_reduce", list(range(tp)), tokens * model.hidden * ACT_BYTES)
    prefill_comm = 2 * model.layers * ar
    prefill = max(t_compute, t_weights) + prefill_comm

    mean_ctx = prompt_len + output_len / 2
    dec = _decode(model, fabric, comm, tp, batch, mean_ctx, precision)
    first = _decode(model, fabric, comm, tp, batch, prompt_len + 1, precision)
    last = _decode(model, fabric, comm, tp, batch, prompt_len + output_len, precision)
    return InferenceResult(
        model=model.name, tp=tp, batch=batch, prompt_len=prompt_len, output_len=output_len,
        precision=precision, gpu=gpu.name, prefill_s=prefill, prefill_comm_s=prefill_comm,
        decode=dec, decode_first=first, decode_last=last, memory_per_gpu_bytes=mem,
        gpu_memory_bytes=float(gpu.memory_bytes), warnings=warnings)
