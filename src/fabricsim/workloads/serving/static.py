"""A static batch on one serving instance: prefill every prompt, then decode every token.

Example
-------
>>> import fabricsim as fs
>>> from fabricsim.workloads.models import get_model
>>> fab = fs.build_cluster("dgx-h100", nodes=1)
>>> r = simulate_inference(get_model("llama2-70b"), fab, tp=8, batch=1, prompt_len=1024,
...                        output_len=256)
>>> 0.005 < r.tpot_s < 0.03, r.comm_share < 0.5
(True, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fabricsim.errors import ModelError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular
from fabricsim.workloads.comm import CommModel
from fabricsim.workloads.gpu import FRAMEWORK_RESERVE_BYTES
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.serving.instance import (
    DecodeTimes,
    Instance,
    ServingEngine,
    build_instance,
    check_request,
    no_room,
    span_warning,
)

__all__ = ["InferenceResult", "simulate_inference"]

_GIB = 2**30

# --------------------------------------------------------------------------------------
# static batch
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InferenceResult(Tabular):
    """Prefill and decode times of one static batch of requests on one instance."""

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
    pp: int = 1
    ep: int = 1
    kv_precision: str = "bf16"
    engine: str = "trtllm"
    max_batch: int = 0
    """Largest batch whose KV cache at the full context fits beside the weights."""
    kv_capacity_tokens: float = 0.0
    """Tokens the KV cache can hold per instance."""
    attention_dp: int = 1
    ep_kernel: str = "none"
    """The expert dispatch/combine kernels assumed (``none``: no all-to-all)."""
    prefill_ep_s: float = 0.0
    """Of the prefill: expert dispatch and combine."""

    @property
    def gpus(self) -> int:
        """GPUs of the instance."""
        return self.tp * self.pp

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
        """Decode tokens per second of the whole batch (prefill excluded)."""
        return self.batch / self.tpot_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Decode tokens per second per GPU of the instance."""
        return self.tokens_per_s / self.gpus

    @property
    def comm_share(self) -> float:
        """Share of a decode iteration spent in TP all-reduces, expert dispatch/combine
        and stage hand-offs."""
        return (self.decode.comm_s + self.decode.ep_s + self.decode.p2p_s) / self.tpot_s

    @property
    def latency_s(self) -> float:
        """End-to-end time of the batch: prefill (which yields the first token), then
        ``output_len − 1`` decode iterations."""
        return self.prefill_s + (self.output_len - 1) * self.tpot_s

    @property
    def throughput_tokens_per_s(self) -> float:
        """Output tokens per second of the batch, prefill included."""
        return self.batch * self.output_len / self.latency_s

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "model": self.model, "tp": self.tp, "pp": self.pp, "ep": self.ep,
            "attention_dp": self.attention_dp, "ep_kernel": self.ep_kernel,
            "ep_s_per_token": self.decode.ep_s, "prefill_ep_s": self.prefill_ep_s,
            "batch": self.batch, "prompt_len": self.prompt_len,
            "output_len": self.output_len, "precision": self.precision,
            "kv_precision": self.kv_precision, "engine": self.engine, "gpu": self.gpu,
            "gpus": self.gpus, "prefill_s": self.prefill_s, "ttft_s": self.prefill_s,
            "prefill_comm_share": self.prefill_comm_s / self.prefill_s,
            "tpot_s": self.tpot_s, "tpot_first_s": self.decode_first.total_s,
            "tpot_last_s": self.decode_last.total_s,
            "tokens_per_s_per_request": self.tokens_per_s_per_request,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "throughput_tokens_per_s": self.throughput_tokens_per_s,
            "comm_share": self.comm_share, "latency_s": self.latency_s,
            "decode_breakdown_s": asdict(self.decode),
            "memory_per_gpu_gib": self.memory_per_gpu_bytes / _GIB,
            "gpu_memory_gib": self.gpu_memory_bytes / _GIB,
            "kv_capacity_tokens": self.kv_capacity_tokens, "max_batch": self.max_batch,
            "warnings": list(self.warnings),
        }


def simulate_inference(model: TransformerSpec, fabric: Fabric, *, tp: int = 8,
                       batch: int = 1, prompt_len: int = 1024, output_len: int = 256,
                       precision: str = "bf16", comm: CommModel | None = None,
                       check_memory: bool = True, pp: int = 1, ep: int = 1,
                       kv_precision: str | None = None,
                       engine: str | ServingEngine = "trtllm", attention_dp: int = 1,
                       ep_kernel: str | None = None,
                       redundant_experts: int = 0) -> InferenceResult:
    """Prefill and decode times of a static batch of ``batch`` requests on one instance.

    Parameters
    ----------
    model : TransformerSpec
        What is served.
    fabric : Fabric
        Where; the instance is ranks ``0 … tp·pp−1`` (stage by stage).
    tp, pp, ep : int
        Tensor-, pipeline- and expert-parallel sizes (``ep`` divides ``tp``; MoE only).
    batch, prompt_len, output_len : int
        Sequences served together, prompt and output tokens of each.
    precision : {"bf16", "fp8", "fp8-weights"}
        Weights and GEMMs (``fp8-weights``: FP8 weights, 16-bit math).
    kv_precision : {"bf16", "fp8"}, optional
        KV-cache elements; default fp8 for ``precision="fp8"``, else bf16.
    engine : str or ServingEngine
        Host costs and kernels of the serving framework (:data:`ENGINES`).
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
    >>> simulate_inference(get_model("llama3-70b"), fab, tp=4, pp=2).gpus
    8
    """
    check_request(model, prompt_len, output_len, batch)
    lay = build_instance(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                         kv_precision=kv_precision, engine=engine, comm=comm,
                         attention_dp=attention_dp, ep_kernel=ep_kernel,
                         redundant_experts=redundant_experts)
    context = prompt_len + output_len
    kv_cap = lay.kv_capacity_tokens()
    max_batch = int(kv_cap // lay.kv_tokens(context))
    mem = (lay.weight_bytes_per_gpu()
           + lay.kv_bytes_per_token_gpu() * batch * lay.kv_tokens(context)
           + FRAMEWORK_RESERVE_BYTES)
    if check_memory and mem > lay.gpu.memory_bytes:
        fix, where = (f"lower --batch to {max_batch}", "batch") if max_batch >= 1 else \
            no_room(lay, kv_cap, tp=tp, pp=pp, precision=precision)
        raise ModelError(
            f"{model.name} at tp={tp}, pp={pp}, batch={batch}, context {context} needs "
            f"{mem / _GIB:.1f} GiB per GPU but {lay.gpu.name} has "
            f"{lay.gpu.memory_gib:.0f} GiB; {fix}", field=f"inference.{where}")
    pre = lay.prefill([prompt_len] * batch)
    dec = lay.decode(batch, batch * (prompt_len + output_len / 2))
    first = lay.decode(batch, batch * (prompt_len + 1))
    last = lay.decode(batch, batch * (prompt_len + output_len))
    return InferenceResult(
        model=model.name, tp=tp, batch=batch, prompt_len=prompt_len, output_len=output_len,
        precision=precision, gpu=lay.gpu.name, prefill_s=pre.total_s,
        prefill_comm_s=pre.comm_s + pre.p2p_s, decode=dec, decode_first=first,
        decode_last=last, memory_per_gpu_bytes=mem,
        gpu_memory_bytes=float(lay.gpu.memory_bytes), warnings=span_warning(lay), pp=pp,
        ep=ep, kv_precision=lay.kv_precision, engine=lay.engine.name, max_batch=max_batch,
        kv_capacity_tokens=kv_cap, attention_dp=attention_dp,
        ep_kernel=_kernels(lay, batch, prompt_len), prefill_ep_s=pre.ep_s)


def _kernels(lay: Instance, batch: int, prompt_len: int) -> str:
    """What moves the experts' tokens: the dispatch/combine kernels of decode and prefill
    with DP attention; ``none`` when the experts sit inside the TP group (its all-reduce
    combines them) or the model is dense."""
    if not lay.wide_ep:
        return "none"
    dec = lay.ep_kernel_for(batch / lay.tp)
    pre = lay.ep_kernel_for(batch * prompt_len / lay.tp)
    return dec if dec == pre else f"{dec} (decode), {pre} (prefill)"
