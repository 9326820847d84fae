"""Disaggregated serving: prefill on one instance, decode on another, the KV cache between.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fabricsim.errors import ConfigError, ModelError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.serving.instance import (
    ServingEngine,
    build_instance,
    check_request,
    kv_bytes_per_token,
    positive,
    span_warning,
)

__all__ = ["DisaggregatedResult", "disaggregated_serving"]

# --------------------------------------------------------------------------------------
# disaggregated prefill and decode
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DisaggregatedResult(Tabular):
    """Prefill on one instance, decode on another; the KV cache moves between them.

    Examples
    --------
    >>> r = DisaggregatedResult(
    ...     prefill_tp=8, prefill_gpus=8, decode_gpus=8, prefill_ranks=(0, 7),
    ...     decode_ranks=(8, 15), kv_bytes_per_request=2**28, kv_transfer_s=0.001,
    ...     kv_exposed_s=0.0001, prefill_s=0.1, ttft_s=0.1001, tpot_s=0.01, batch=64,
    ...     prefill_requests_per_s=10.0, decode_requests_per_s=25.0, tokens_per_s=2560.0,
    ...     crosses_servers=True)
    >>> r.prefill_instances_per_decode, r.tokens_per_s_per_gpu
    (2.5, 160.0)
    """

    prefill_tp: int
    prefill_gpus: int
    decode_gpus: int
    prefill_ranks: tuple[int, int]
    decode_ranks: tuple[int, int]
    kv_bytes_per_request: float
    kv_transfer_s: float
    """Sending one request's KV cache (all TP shards in parallel)."""
    kv_exposed_s: float
    """The part of it not hidden behind the prefill (layer by layer streaming)."""
    prefill_s: float
    """Prefill of one request on the prefill instance."""
    ttft_s: float
    tpot_s: float
    batch: int
    prefill_requests_per_s: float
    decode_requests_per_s: float
    tokens_per_s: float
    """Output tokens per second of the pair (the slower side sets the pace)."""
    crosses_servers: bool
    warnings: list[str] = field(default_factory=list)
    """An instance whose TP group spans beyond its NVLink domain, as
    :attr:`InferenceResult.warnings`."""

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second per GPU of both instances."""
        return self.tokens_per_s / (self.prefill_gpus + self.decode_gpus)

    @property
    def prefill_instances_per_decode(self) -> float:
        """Prefill instances that would keep one decode instance busy."""
        return self.decode_requests_per_s / self.prefill_requests_per_s

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {**asdict(self), "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "prefill_instances_per_decode": self.prefill_instances_per_decode}


def disaggregated_serving(model: TransformerSpec, fabric: Fabric, *, prefill_tp: int,
                          batch: int, prompt_len: int, output_len: int, tp: int = 8,
                          pp: int = 1, ep: int = 1, precision: str = "bf16",
                          kv_precision: str | None = None,
                          engine: str | ServingEngine = "trtllm",
                          comm: CommModel | None = None, attention_dp: int = 1,
                          ep_kernel: str | None = None,
                          redundant_experts: int = 0) -> DisaggregatedResult:
    """Disaggregated serving: a ``prefill_tp``-GPU prefill instance on the first servers,
    the decode instance (``tp × pp`` GPUs) from the next server boundary on.

    Each request's KV cache (``prompt_len × kv_bytes_per_token``) goes from the prefill
    GPUs to the decode GPUs as ``min(prefill_tp, tp·pp, kv_heads)`` parallel send/recvs
    (one per distinct KV shard) over the
    fabric (the collective engine times them; they cross the scale-out network when the
    instances sit on different servers). Sent layer by layer as the prefill proceeds,
    only ``max(T/L, T − prefill·(L−1)/L)`` of the transfer time ``T`` adds to the TTFT.
    The decode instance decodes ``batch`` sequences without prefill interference.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> fab = fs.build_cluster("dgx-h100", nodes=2)
    >>> r = disaggregated_serving(get_model("llama3-70b"), fab, prefill_tp=8, batch=64,
    ...                           prompt_len=2048, output_len=256, precision="fp8")
    >>> r.crosses_servers, r.kv_bytes_per_request / 2**20  # 2048 tokens x 160 KiB
    (True, 320.0)
    >>> 0 < r.kv_exposed_s <= r.kv_transfer_s < r.prefill_s
    True
    """
    check_request(model, prompt_len, output_len, batch)
    positive("prefill_tp", prefill_tp, "--prefill-tp")
    gps = max(1, fabric.info.gpus_per_server)
    first_decode = math.ceil(prefill_tp / gps) * gps
    if first_decode + tp * pp > fabric.n_gpus:
        servers = math.ceil(prefill_tp / gps) + math.ceil(tp * pp / gps)
        raise ConfigError(f"disaggregated serving needs {servers} servers (prefill "
                          f"{prefill_tp} GPUs, decode {tp * pp}, each on its own servers); "
                          f"the cluster has {fabric.n_gpus // gps}: raise --nodes",
                          field="inference.prefill_tp")
    if model.heads % prefill_tp:
        raise ConfigError(f"prefill_tp={prefill_tp} must divide the {model.heads} attention "
                          f"heads of {model.name}", field="inference.prefill_tp")
    comm = comm if comm is not None else EngineComm(fabric)
    pre = build_instance(model, fabric, tp=prefill_tp, pp=1, ep=1, precision=precision,
                  kv_precision=kv_precision, engine=engine, comm=comm)
    dec = build_instance(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                         kv_precision=kv_precision, engine=engine, comm=comm,
                         first_rank=first_decode, attention_dp=attention_dp,
                         ep_kernel=ep_kernel, redundant_experts=redundant_experts)
    if pre.kv_capacity_tokens() < pre.kv_tokens(prompt_len):
        raise ModelError(f"the prefill instance cannot hold {model.name}'s weights and one "
                         f"{prompt_len}-token prompt at tp={prefill_tp}: raise --prefill-tp",
                         field="inference.prefill_tp")
    fit = int(dec.kv_capacity_tokens() // dec.kv_tokens(prompt_len + output_len))
    if batch > fit:
        raise ModelError(f"the decode instance's KV cache holds {fit} requests of "
                         f"{prompt_len + output_len} tokens, not {batch}: lower --batch or "
                         f"raise --tp/--pp", field="inference.batch")
    kv_req = dec.kv_tokens(prompt_len) * kv_bytes_per_token(model, dec.kv_precision)
    streams = min(prefill_tp, dec.gpus, model.n_kv)  # distinct KV shards, in parallel
    transfer = max(comm.time("sendrecv", [i, first_decode + i], kv_req / streams)
                   for i in range(streams))
    t_pre = pre.prefill([prompt_len]).total_s
    layers = model.layers
    exposed = max(transfer / layers, transfer - t_pre * (layers - 1) / layers)
    ctx = prompt_len + output_len / 2
    tpot = dec.decode(batch, batch * ctx).total_s
    rate_p = 1.0 / t_pre
    rate_d = batch / (output_len * tpot)
    rate = min(rate_p, rate_d)
    return DisaggregatedResult(
        prefill_tp=prefill_tp, prefill_gpus=prefill_tp, decode_gpus=dec.gpus,
        prefill_ranks=(0, prefill_tp - 1),
        decode_ranks=(first_decode, first_decode + dec.gpus - 1),
        kv_bytes_per_request=kv_req, kv_transfer_s=transfer, kv_exposed_s=exposed,
        prefill_s=t_pre, ttft_s=t_pre + exposed, tpot_s=tpot, batch=batch,
        prefill_requests_per_s=rate_p, decode_requests_per_s=rate_d,
        tokens_per_s=rate * output_len,
        crosses_servers=(prefill_tp - 1) // gps != first_decode // gps,
        warnings=[f"prefill instance: {w}" for w in span_warning(pre)]
        + [f"decode instance: {w}" for w in span_warning(dec)])
