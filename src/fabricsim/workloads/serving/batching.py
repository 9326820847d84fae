"""Batching on one serving instance: continuous batching at a latency target, and a
request trace through an iteration-level scheduler (vLLM-style).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fabricsim.errors import ConfigError, ModelError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular
from fabricsim.workloads.comm import CommModel
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.serving.instance import (
    ServingEngine,
    build_instance,
    check_request,
    no_room,
    positive,
)

__all__ = ["ContinuousResult", "TraceResult", "continuous_batching", "serve_requests"]

# --------------------------------------------------------------------------------------
# continuous batching at a latency target
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ContinuousResult(Tabular):
    """Steady-state continuous batching: the largest batch that meets the TPOT target.

    Examples
    --------
    >>> r = ContinuousResult(batch=8, tpot_s=0.02, decode_s=0.015, prefill_share_s=0.005,
    ...                      ttft_s=0.1, tokens_per_s=400.0, gpus=8,
    ...                      limited_by="tpot-target", kv_capacity_tokens=1e6,
    ...                      max_batch_kv=500)
    >>> r.tokens_per_s_per_gpu
    50.0
    """

    batch: int
    """Sequences decoding together."""
    tpot_s: float
    """Time per output token (an iteration, with its share of arriving prefills)."""
    decode_s: float
    """The decode part of an iteration."""
    prefill_share_s: float
    """The prefill work of arriving requests an iteration carries (``batch/output``
    prompts)."""
    ttft_s: float
    """Prefill of one request alone plus half an iteration of waiting."""
    tokens_per_s: float
    """Output tokens per second of the instance."""
    gpus: int
    limited_by: str
    """What stopped the batch from growing: tpot-target, kv-cache or max-batch."""
    kv_capacity_tokens: float
    max_batch_kv: int
    """Largest batch the KV cache holds with every request at its full context (prompt
    + output: a request keeps its cache until it ends)."""

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second per GPU."""
        return self.tokens_per_s / self.gpus

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {**asdict(self), "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu}


def continuous_batching(model: TransformerSpec, fabric: Fabric, *, prompt_len: int,
                        output_len: int, tpot_target_s: float | None = None,
                        max_batch: int | None = None, tp: int = 8, pp: int = 1,
                        ep: int = 1, precision: str = "bf16",
                        kv_precision: str | None = None,
                        engine: str | ServingEngine = "trtllm",
                        memory_fraction: float = 0.9,
                        comm: CommModel | None = None, attention_dp: int = 1,
                        ep_kernel: str | None = None,
                        redundant_experts: int = 0) -> ContinuousResult:
    """Throughput of continuous batching at a latency target (steady state).

    ``b`` sequences decode together; each finishes after ``output_len`` tokens and a new
    request takes its place, so an iteration also prefills ``b / output_len`` prompts
    (chunked into the iteration, their FLOPs and all-reduce bytes added). The iteration
    time is the TPOT; the batch is the largest with ``TPOT <= tpot_target_s``, within
    the KV cache (``memory_fraction`` of GPU memory, vLLM's default 0.9) and
    ``max_batch``.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> fab = fs.build_cluster("dgx-h100", nodes=1)
    >>> m = get_model("llama3-70b")
    >>> fast = continuous_batching(m, fab, prompt_len=1000, output_len=200,
    ...                            tpot_target_s=0.02, precision="fp8")
    >>> slow = continuous_batching(m, fab, prompt_len=1000, output_len=200,
    ...                            tpot_target_s=0.05, precision="fp8")
    >>> fast.tpot_s <= 0.02 and slow.batch > fast.batch
    True
    >>> slow.tokens_per_s > fast.tokens_per_s
    True
    """
    check_request(model, prompt_len, output_len)
    if max_batch is not None:
        positive("max_batch", max_batch, "--max-batch")
    if tpot_target_s is not None and not (tpot_target_s > 0 and math.isfinite(tpot_target_s)):
        raise ConfigError(f"--tpot-target-ms must be a positive number of milliseconds, got "
                          f"{tpot_target_s * 1e3!r}", field="inference.tpot_target_ms")
    if not 0 < memory_fraction <= 1:
        raise ConfigError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}",
                          field="inference.memory_fraction")
    lay = build_instance(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                         kv_precision=kv_precision, engine=engine, comm=comm,
                         attention_dp=attention_dp, ep_kernel=ep_kernel,
                         redundant_experts=redundant_experts)
    ctx = prompt_len + output_len / 2
    kv_cap = lay.kv_capacity_tokens(memory_fraction)
    kv_batch = int(kv_cap // lay.kv_tokens(prompt_len + output_len))
    if kv_batch < 1:
        fix, where = no_room(lay, kv_cap, tp=tp, pp=pp, precision=precision)
        raise ModelError(f"{model.name} leaves no room for one request of "
                         f"{prompt_len + output_len} tokens on {lay.gpu.name} at tp={tp}, "
                         f"pp={pp}; {fix}", field=f"inference.{where}")
    pf = lay.prefill_marginal_s(prompt_len)

    def step(b: int) -> tuple[float, float]:
        d = lay.decode(b, b * ctx).total_s
        return d, b / output_len * pf

    cap = min(kv_batch, max_batch) if max_batch is not None else kv_batch
    limited = "kv-cache" if max_batch is None or kv_batch <= max_batch else "max-batch"
    best = cap
    if tpot_target_s is not None and sum(step(cap)) > tpot_target_s:
        lo, hi = 1, cap
        if sum(step(1)) > tpot_target_s:
            raise ModelError(
                f"no batch meets --tpot-target-ms {tpot_target_s * 1e3:.2f} ms: one sequence "
                f"alone takes {sum(step(1)) * 1e3:.2f} ms per token at tp={tp}, pp={pp}; "
                f"raise the target or --tp", field="inference.tpot_target_ms")
        while lo < hi:  # largest b with step(b) <= target (step grows with b)
            mid = (lo + hi + 1) // 2
            if sum(step(mid)) <= tpot_target_s:
                lo = mid
            else:
                hi = mid - 1
        best, limited = lo, "tpot-target"
    dec, share = step(best)
    tpot = dec + share
    ttft = lay.prefill([prompt_len]).total_s + tpot / 2
    return ContinuousResult(batch=best, tpot_s=tpot, decode_s=dec, prefill_share_s=share,
                            ttft_s=ttft, tokens_per_s=best / tpot, gpus=lay.gpus,
                            limited_by=limited, kv_capacity_tokens=kv_cap,
                            max_batch_kv=kv_batch)


# --------------------------------------------------------------------------------------
# a request trace through an iteration-level scheduler
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceResult(Tabular):
    """A request trace served by an iteration-level scheduler (all requests at t = 0).

    Examples
    --------
    >>> r = TraceResult(requests=2, duration_s=2.0, output_tokens=800, tokens_per_s=400.0,
    ...                 mean_itl_s=0.03, median_itl_s=0.02, mean_ttft_s=0.1,
    ...                 mean_batch=2.0, iterations=401, prefill_iterations=1,
    ...                 kv_capacity_tokens=1e6, gpus=4)
    >>> r.tokens_per_s_per_gpu, r.to_dict()["tokens_per_s_per_gpu"]
    (100.0, 100.0)
    """

    requests: int
    duration_s: float
    output_tokens: int
    tokens_per_s: float
    """Output tokens over the whole run."""
    mean_itl_s: float
    """Mean gap between consecutive tokens of a request, over all gaps (prefill stalls
    included)."""
    median_itl_s: float
    """Median of the same gaps: a typical decode iteration (vLLM's benchmark_serving
    reports mean and median)."""
    mean_ttft_s: float
    mean_batch: float
    """Time-weighted mean of the sequences decoding."""
    iterations: int
    prefill_iterations: int
    kv_capacity_tokens: float
    gpus: int

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second per GPU."""
        return self.tokens_per_s / self.gpus

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {**asdict(self), "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu}


def serve_requests(model: TransformerSpec, fabric: Fabric,
                   requests: Sequence[tuple[int, int]], *, max_batch: int = 256,
                   max_batched_tokens: int | None = None, tp: int = 8, pp: int = 1,
                   ep: int = 1, precision: str = "bf16", kv_precision: str | None = None,
                   engine: str | ServingEngine = "vllm-0.5", memory_fraction: float = 0.9,
                   comm: CommModel | None = None, attention_dp: int = 1,
                   ep_kernel: str | None = None, redundant_experts: int = 0) -> TraceResult:
    """Serve ``requests`` (``(prompt, output)`` token counts, all arriving at once).

    Iteration by iteration, as vLLM v0.5's scheduler does: while requests wait and the
    batch (``max_batch``), the prefill token budget (``max_batched_tokens``, default
    ``max(2048, longest prompt)``) and the KV cache (reserved for the full context)
    allow, waiting prompts are admitted and prefilled together in one iteration, which
    yields their first tokens; otherwise every running sequence decodes one token.
    A request with output 0 is prefilled and leaves.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> fab = fs.build_cluster("dgx-h100", nodes=1)
    >>> reqs = [(200, 100)] * 64 + [(50, 400)] * 64
    >>> r = serve_requests(get_model("llama3-8b"), fab, reqs, tp=1, max_batch=64)
    >>> r.output_tokens, r.prefill_iterations >= 2, 0 < r.mean_batch <= 64
    (32000, True, True)
    """
    if not requests:
        raise ConfigError("no requests to serve", field="inference.requests")
    for i, (p, o) in enumerate(requests):
        if isinstance(p, bool) or not isinstance(p, int) or p < 1 or \
                isinstance(o, bool) or not isinstance(o, int) or o < 0:
            raise ConfigError(f"request {i}: prompt must be >= 1 and output >= 0 tokens, "
                              f"got ({p!r}, {o!r})", field="inference.requests")
    positive("max_batch", max_batch, "--max-batch")
    lay = build_instance(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                         kv_precision=kv_precision, engine=engine, comm=comm,
                         attention_dp=attention_dp, ep_kernel=ep_kernel,
                         redundant_experts=redundant_experts)
    budget = max_batched_tokens or max(2048, max(p for p, _ in requests))
    kv_cap = lay.kv_capacity_tokens(memory_fraction)
    too_big = [i for i, (p, o) in enumerate(requests)
               if lay.kv_tokens(p + o) > kv_cap or p > budget]
    if too_big:
        p, o = requests[too_big[0]]
        raise ModelError(f"request {too_big[0]} ({p} + {o} tokens) does not fit the KV cache "
                         f"({kv_cap:.0f} tokens) or the prefill budget ({budget}); raise "
                         f"--tp or --pp", field="inference.requests")
    waiting = list(range(len(requests)))[::-1]  # pop() takes the oldest
    running: dict[int, int] = {}  # request -> tokens generated
    ctx = 0  # tokens the running sequences hold: their prompts and what they generated
    last_token: dict[int, float] = {}
    now = 0.0
    kv_used = 0.0
    gaps: list[float] = []
    ttft_sum = 0.0
    out_tokens, iters, prefills, batch_time = 0, 0, 0, 0.0
    while waiting or running:
        admit: list[int] = []
        tokens = 0
        while waiting and len(running) + len(admit) < max_batch:
            p, o = requests[waiting[-1]]
            if tokens + p > budget or kv_used + lay.kv_tokens(p + o) > kv_cap:
                break
            admit.append(waiting.pop())
            tokens += p
            kv_used += lay.kv_tokens(p + o)
        iters += 1
        if admit:
            prefills += 1
            now += lay.prefill([requests[i][0] for i in admit]).total_s
            for i in admit:
                ttft_sum += now
                if requests[i][1] >= 1:
                    out_tokens += 1
                    last_token[i] = now
                if requests[i][1] > 1:
                    running[i] = 1
                    ctx += requests[i][0] + 1
                else:
                    kv_used -= lay.kv_tokens(sum(requests[i]))
            continue
        dt = lay.decode(len(running), ctx).total_s
        now += dt
        batch_time += dt * len(running)
        for i in list(running):
            gaps.append(now - last_token[i])
            last_token[i] = now
            running[i] += 1
            ctx += 1
            out_tokens += 1
            if running[i] >= requests[i][1]:
                ctx -= requests[i][0] + running[i]
                del running[i]
                kv_used -= lay.kv_tokens(sum(requests[i]))
    return TraceResult(requests=len(requests), duration_s=now, output_tokens=out_tokens,
                       tokens_per_s=out_tokens / now,
                       mean_itl_s=statistics.fmean(gaps) if gaps else 0.0,
                       median_itl_s=statistics.median(gaps) if gaps else 0.0,
                       mean_ttft_s=ttft_sum / len(requests), mean_batch=batch_time / now,
                       iterations=iters, prefill_iterations=prefills,
                       kv_capacity_tokens=kv_cap, gpus=lay.gpus)
