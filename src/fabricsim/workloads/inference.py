"""LLM serving: prefill (time to first token), decode (time per output token), batching.

One *instance* serves a model on ``tp × pp`` GPUs of the fabric (ranks ``0 … tp·pp−1``,
stage ``s`` on ranks ``s·tp … s·tp+tp−1``). Weights are split over the TP group and the
pipeline stages; the KV cache too (KV heads are split while there are at least ``tp`` of
them, then replicated). With ``ep > 1`` the routed experts of a MoE model are split over
``ep`` groups of ``tp/ep`` GPUs inside each TP group (TensorRT-LLM's ``moe_ep_size ×
moe_tp_size = tp``). docs/inference.md has the derivations and the fitted constants.

**Decode**, one token for each of ``b`` sequences (one *iteration*). Per pipeline stage and
micro-batch (``m = min(pp, b)`` micro-batches of ``b/m`` sequences), kernel by kernel:

* GEMMs: ``max(weights read / BW, GEMM FLOPs / (peak × TC))`` — the weights of the stage
  (MoE: the experts the batch reaches; with EP the busiest rank's) against the FLOPs;
* attention: ``max(KV bytes / BW, attention FLOPs / (peak × TC × ATTENTION_EFF))``;
  an engine whose decode kernel makes one pass over the KV cache per *query* head (the
  MMHA kernel of TensorRT-LLM before XQA) reads it ``1 + r·(heads/kv_heads − 1)`` times,
  ``r`` the share of the extra passes that miss L2 (fitted);
* 2 TP all-reduces per layer of ``b·h·2`` bytes, and between stages a send/recv of the
  same size, timed on the fabric by the collective engine (:class:`EngineComm`);
* the host: kernels are enqueued at ``launch_per_layer_s`` per layer, so a stage takes
  ``max(GPU time, launch time)``, and every iteration adds ``step_s + per_seq_s · b``
  (scheduling, sampling; serial with the GPU).

``BW = HBM bandwidth × SERVE_HBM_EFF``; ``TC = SERVE_TC_EFF[generation, precision]``
(achievable tensor-core share of the dense peak). An iteration is
``pp × (stage + send/recv) + host`` with the stage the last one (it also runs the output
head) when the batch fills the ``pp`` stages; a batch of fewer sequences than stages walks
each stage once, so the output head counts once. **Prefill** of ``n`` prompt tokens is the same sum
with the GEMMs at ``n`` tokens, causal attention, and all-reduces of ``n·h·2`` bytes;
pipelined over ``m`` micro-batches it takes ``(m + pp − 1)`` stage times.

**Memory**: weights + KV cache + a framework reserve must fit the GPU; the KV capacity
left after the weights sets the largest batch (:attr:`InferenceResult.max_batch`).

Four ways to serve:

* :func:`simulate_inference` — a static batch (prefill all, then decode all);
* :func:`continuous_batching` — steady state at a TPOT target (prefill of arriving requests
  shares the iterations, ``b/output`` prompts per iteration);
* :func:`serve_requests` — a request trace through an iteration-level scheduler
  (vLLM-style: waiting prompts are prefilled first, up to a token budget);
* :func:`disaggregated_serving` — prefill and decode on separate instances; each request's
  KV cache crosses the scale-out network (a send/recv per TP shard).

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

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fabricsim.catalog import get_catalog
from fabricsim.catalog.models import GpuSpec
from fabricsim.errors import ConfigError, ModelError, unknown
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.compute import ATTENTION_EFF, generation, peak_flops
from fabricsim.workloads.memory import FRAMEWORK_RESERVE_BYTES
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.spec import ServingConfig

__all__ = [
    "ENGINES",
    "PRECISIONS",
    "PRECISION_BYTES",
    "SERVE_HBM_EFF",
    "SERVE_TC_EFF",
    "ContinuousResult",
    "DecodeTimes",
    "DisaggregatedResult",
    "InferenceResult",
    "PrefillTimes",
    "ServingEngine",
    "ServingRun",
    "TraceResult",
    "continuous_batching",
    "disaggregated_serving",
    "get_engine",
    "kv_bytes_per_token",
    "run_serving",
    "serve_requests",
    "simulate_inference",
]

#: Bytes per element by precision name (weights, KV cache).
PRECISION_BYTES = {"bf16": 2.0, "fp8": 1.0}
#: Serving precision → (bytes per weight, precision of the GEMMs). ``fp8-weights`` is
#: weight-only FP8 (16-bit math, e.g. vLLM's Marlin kernels on A100).
PRECISIONS: dict[str, tuple[float, str]] = {
    "bf16": (2.0, "bf16"), "fp8": (1.0, "fp8"), "fp8-weights": (1.0, "bf16")}
#: Activations travel in 16 bits whatever the weight precision.
ACT_BYTES = 2.0
_GIB = 2**30

#: Achievable share of the dense tensor peak for serving GEMMs, by (generation, serving
#: precision): prefill and compute-bound decode alike. Fitted once by
#: benchmarks/accuracy_inference.py --fit: ampere/bf16 on rows 1100 and 1123 (batch 16,
#: 64); hopper/bf16 on 1124 (batch 16, 64); hopper/fp8 on 1097 and 1098; ampere/fp8-weights
#: (vLLM's Marlin weight-only kernels) on 1118. Not fitted (no rows): Blackwell takes
#: Hopper's, Ada and Volta Ampere's; fp8-weights elsewhere falls back to bf16.
SERVE_TC_EFF: dict[tuple[str, str], float] = {
    ("ampere", "bf16"): 0.70,
    ("ampere", "fp8-weights"): 0.23,
    ("hopper", "bf16"): 0.67,
    ("hopper", "fp8"): 0.44,
    ("blackwell", "bf16"): 0.67,
    ("blackwell", "fp8"): 0.44,
    ("ada", "bf16"): 0.70,
    ("ada", "fp8"): 0.44,
    ("volta", "bf16"): 0.70,
}
#: Achievable share of HBM bandwidth when decode streams weights and KV cache. Not fitted
#: (a free fit runs away to unphysical values, trading off against the MMHA share): the
#: share STREAM-like copies reach on HBM2e/HBM3 (0.85-0.9).
SERVE_HBM_EFF = 0.85


@dataclass(frozen=True)
class ServingEngine:
    """What a serving framework adds to the GPU's work.

    Examples
    --------
    >>> get_engine("vllm-0.5").per_seq_s > get_engine("trtllm").per_seq_s
    True
    """

    name: str
    launch_per_layer_s: float = 0.0
    """Host time to enqueue one layer's kernels (hidden when the GPU is slower)."""
    step_s: float = 0.0
    """Host time per iteration, serial with the GPU (scheduling, sampling, sync)."""
    per_seq_s: float = 0.0
    """Host time per sequence and iteration (sampling, detokenising, bookkeeping)."""
    query_head_kv_reads: float = 0.0
    """Decode attention with one KV pass per *query* head (the MMHA kernel): the share
    of the ``heads/kv_heads − 1`` extra passes that miss L2 and reach HBM. 0 for kernels
    that serve a query-head group from one pass (XQA, FlashAttention)."""
    description: str = ""


#: Serving engines. Host costs and the MMHA share are fitted once per engine by
#: benchmarks/accuracy_inference.py --fit (rows named); nothing is fitted per row.
ENGINES: dict[str, ServingEngine] = {
    "ideal": ServingEngine("ideal", description="no host costs: the hardware bound"),
    "trtllm": ServingEngine(
        "trtllm",
        description="TensorRT-LLM C++ runtime (XQA decode attention, CUDA graphs): no "
                    "host cost, as none of the rows isolates one"),
    "trtllm-python": ServingEngine(
        "trtllm-python", launch_per_layer_s=266e-6,
        description="a TensorRT-LLM engine driven by the Python runtime (benchmark.py): "
                    "launch cost per layer fitted on rows 1123/1124, batch 16 and 64"),
    "trtllm-0.6": ServingEngine(
        "trtllm-0.6", query_head_kv_reads=0.78,
        description="TensorRT-LLM v0.6 C++ session (MMHA decode attention, one KV pass "
                    "per query head, before XQA); MMHA share fitted on rows 1097/1098"),
    "vllm-0.5": ServingEngine(
        "vllm-0.5", step_s=15.9e-3, per_seq_s=62.7e-6,
        description="vLLM v0.5 (CUDA graphs; Python scheduler, sampler and output "
                    "processing every iteration); host costs fitted on rows 1117/1118"),
}


def get_engine(name: str | ServingEngine) -> ServingEngine:
    """The engine ``name`` of :data:`ENGINES` (unknown names raise with the nearest).

    Examples
    --------
    >>> get_engine("trtllm").name
    'trtllm'
    >>> try:
    ...     get_engine("vllm-0.4")
    ... except ConfigError as e:
    ...     print(e.field, "vllm-0.5" in str(e))
    inference.engine True
    """
    if isinstance(name, ServingEngine):
        return name
    try:
        return ENGINES[name]
    except KeyError:
        raise unknown("engine", name, ENGINES, field="inference.engine") from None


def kv_bytes_per_token(model: TransformerSpec, precision: str = "bf16") -> float:
    """KV-cache bytes one token occupies over the whole model (all layers, all KV heads;
    MLA: its latent, ``kv_latent``).

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> kv_bytes_per_token(get_model("llama2-70b")) / 2**10  # 80 layers x 2 x 8 x 128 x 2 B
    320.0
    >>> round(kv_bytes_per_token(get_model("deepseek-v3")) / 2**10, 1)  # 61 x 576 x 2 B
    68.6
    """
    if precision not in PRECISION_BYTES:
        raise ConfigError(f"must be bf16 or fp8, got {precision!r}",
                          field="inference.kv_precision")
    per_layer = model.kv_latent or 2 * model.n_kv * model.d_head
    return model.layers * per_layer * PRECISION_BYTES[precision]


# --------------------------------------------------------------------------------------
# step times
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DecodeTimes:
    """Seconds of one decode iteration (one token for each sequence of the batch), by part.

    Parts are summed over the pipeline stages a token passes.

    Examples
    --------
    >>> DecodeTimes(weights_s=3.0, kv_s=1.0, compute_s=2.0, comm_s=1.0).total_s
    5.0
    >>> DecodeTimes(3.0, 1.0, 2.0, 1.0, launch_s=10.0, host_s=0.5).total_s  # launch-bound
    10.5
    """

    weights_s: float
    """Reading the weights from HBM."""
    kv_s: float
    """Decode attention: reading the KV cache (or its FLOPs when larger)."""
    compute_s: float
    """GEMM FLOPs at the achievable tensor-core rate (hidden behind weights when smaller)."""
    comm_s: float
    """The 2 TP all-reduces per layer."""
    p2p_s: float = 0.0
    """Activations sent between pipeline stages."""
    launch_s: float = 0.0
    """Host time to enqueue the kernels (hidden when the GPU work is longer)."""
    host_s: float = 0.0
    """Per-iteration host time, serial with the GPU."""

    @property
    def gpu_s(self) -> float:
        """GPU time: roofline of the GEMMs, then attention and communication."""
        return max(self.weights_s, self.compute_s) + self.kv_s + self.comm_s

    @property
    def total_s(self) -> float:
        """Iteration time: GPU or launch-bound, plus stage hand-offs and host time."""
        return max(self.gpu_s, self.launch_s) + self.p2p_s + self.host_s


@dataclass(frozen=True)
class PrefillTimes:
    """Seconds of one prefill of a batch of prompts, by part (pipeline fill included).

    Examples
    --------
    >>> PrefillTimes(gemm_s=2.0, attention_s=0.5, comm_s=0.5, host_s=0.25).total_s
    3.25
    """

    gemm_s: float
    """GEMMs: FLOPs at the achievable rate (or the weight reads, when longer)."""
    attention_s: float
    """Causal attention over the prompts."""
    comm_s: float
    """TP all-reduces (``n·h·2`` bytes, bandwidth-bound)."""
    p2p_s: float = 0.0
    """Activations sent between pipeline stages."""
    launch_s: float = 0.0
    """Host time to enqueue the kernels."""
    host_s: float = 0.0
    """Per-iteration host time."""

    @property
    def total_s(self) -> float:
        """Time to first token of the batch."""
        gpu = self.gemm_s + self.attention_s + self.comm_s
        return max(gpu, self.launch_s) + self.p2p_s + self.host_s


def _tc_eff(gpu: GpuSpec, precision: str) -> float:
    """SERVE_TC_EFF for a serving precision (fp8-weights falls back to bf16)."""
    gen = generation(gpu)
    return SERVE_TC_EFF.get((gen, precision), SERVE_TC_EFF.get((gen, "bf16"), 0.5))


@dataclass
class _Layout:
    """A validated serving instance and its per-GPU shapes."""

    m: TransformerSpec
    fabric: Fabric
    gpu: GpuSpec
    tp: int
    pp: int
    ep: int
    precision: str
    kv_precision: str
    engine: ServingEngine
    comm: CommModel
    first_rank: int = 0

    # --- shapes -----------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def wbytes(self) -> float:
        return PRECISIONS[self.precision][0]

    @property
    def gemm_precision(self) -> str:
        return PRECISIONS[self.precision][1]

    @property
    def kvbytes(self) -> float:
        return PRECISION_BYTES[self.kv_precision]

    @property
    def stage_layers(self) -> int:
        return self.m.layers // self.pp

    @property
    def peak(self) -> float:
        return peak_flops(self.gpu, self.gemm_precision)

    @property
    def flops_rate(self) -> float:
        return self.peak * _tc_eff(self.gpu, self.precision)

    @property
    def hbm(self) -> float:
        return self.gpu.hbm_bandwidth * SERVE_HBM_EFF

    def kv_heads_per_gpu(self) -> int:
        return max(1, math.ceil(self.m.n_kv / self.tp))

    def kv_bytes_per_token_gpu(self) -> float:
        """KV bytes one cached token takes on one GPU of a stage (MLA: the whole latent on
        every TP rank)."""
        per_layer = self.m.kv_latent or 2 * self.kv_heads_per_gpu() * self.m.d_head
        return self.stage_layers * per_layer * self.kvbytes

    def decode_attn_flops_per_key(self) -> float:
        """Attention FLOPs per cached token and query head in decode: ``QKᵀ`` and ``AV``
        over the head width (MLA, absorbed: over the latent, ``4·kv_latent``)."""
        return 4.0 * (self.m.kv_latent or self.m.d_head)

    def prefill_attn_flops_per_pair(self) -> float:
        """Attention FLOPs per query-key pair and head in prefill: ``2·(qk + v)`` widths
        (MLA: 192 + 128 per head, ``core_width``)."""
        return 2.0 * self.m.core_width

    def _head_params(self) -> float:
        return float(self.m.vocab * self.m.hidden)

    def _dense_layer_params(self) -> float:
        """Weights of the transformer layers outside the routed experts (all layers)."""
        return float(self.m.layer_params - self.m.expert_total_params + self.m.hidden)

    def weight_bytes_per_gpu(self) -> float:
        """Weights one GPU of the heaviest stage holds."""
        m = self.m
        if self.pp == 1:
            return m.params * self.wbytes / self.tp
        dense = self._dense_layer_params() / self.pp + self._head_params()
        experts = m.expert_total_params / self.pp
        return (dense + experts) * self.wbytes / self.tp

    def kv_share(self, context: float) -> float:
        """Share of a full-context KV cache one sequence of ``context`` tokens keeps:
        layers with sliding-window attention (``attn_window``: GPT-OSS's 128 tokens on
        half of its layers) keep only the window's last tokens."""
        m = self.m
        if not m.windowed_layers or context <= 0:
            return 1.0
        return m.layer_mean(1.0, min(1.0, (m.attn_window or context) / context))

    def kv_tokens(self, context: float) -> float:
        """KV cache of one sequence of ``context`` tokens, in full-model tokens."""
        return context * self.kv_share(context)

    def attn_pairs(self, prompt: int) -> float:
        """Query-key pairs of a causal prefill of ``prompt`` tokens, per layer averaged
        over the model (a windowed layer's query meets at most the window's keys)."""
        full = prompt * (prompt + 1) / 2
        m = self.m
        if not m.windowed_layers:
            return full
        w = m.attn_window or prompt
        return m.layer_mean(full, full if prompt <= w else w * (w + 1) / 2 + (prompt - w) * w)

    def kv_capacity_tokens(self, memory_fraction: float = 1.0) -> float:
        """Tokens the KV cache can hold once weights and the reserve are in place."""
        free = (self.gpu.memory_bytes * memory_fraction - self.weight_bytes_per_gpu()
                - FRAMEWORK_RESERVE_BYTES)
        return max(0.0, free / self.kv_bytes_per_token_gpu())

    # --- communication ----------------------------------------------------------------
    def stage_ranks(self, s: int) -> list[int]:
        base = self.first_rank + s * self.tp
        return list(range(base, base + self.tp))

    def _allreduce(self, nbytes: float) -> float:
        return self.comm.time("all_reduce", self.stage_ranks(0), nbytes)

    def _p2p(self, nbytes: float) -> float:
        if self.pp == 1:
            return 0.0
        return max(self.comm.time("sendrecv", [self.stage_ranks(s)[0],
                                               self.stage_ranks(s + 1)[0]], nbytes)
                   for s in range(self.pp - 1))

    # --- weights a decode step reads ----------------------------------------------------
    def _expert_read_params(self, tokens: float) -> float:
        """Routed-expert weights the busiest GPU of a stage reads for ``tokens`` tokens."""
        m = self.m
        if not m.is_moe:
            return 0.0
        e, k = m.experts, m.top_k
        p = 1.0 - (1.0 - k / e) ** tokens  # an expert is reached by at least one token
        local = e // self.ep
        busiest = _expected_max_binomial(local, p, self.ep)
        moe_stage = m.moe_layers / self.pp
        return moe_stage * busiest * m.expert_params / (self.tp / self.ep)

    def _weights_read_bytes(self, tokens: float) -> float:
        """Bytes of weights one GPU of the last stage reads for one pass of ``tokens``."""
        dense = self._dense_layer_params() / self.pp + self._head_params()
        return (dense / self.tp + self._expert_read_params(tokens)) * self.wbytes

    def _gemm_flops(self, tokens: float, logits: float) -> float:
        """GEMM FLOPs on one GPU of a stage: ``tokens`` through the layers, ``logits``
        positions through the output head."""
        m = self.m
        layer_active = float(m.active_params - m.embedding_params - m.hidden)
        return (2.0 * layer_active / self.pp * tokens
                + 2.0 * self._head_params() * logits) / self.tp

    def _launch(self) -> float:
        return self.engine.launch_per_layer_s * self.stage_layers

    # --- decode -----------------------------------------------------------------------
    def decode(self, batch: int, context_tokens: float) -> DecodeTimes:
        """One iteration for ``batch`` sequences holding ``context_tokens`` in all."""
        m, pp = self.m, self.pp
        mb = min(pp, batch)
        b = math.ceil(batch / mb)
        ctx = context_tokens * b / batch * self.kv_share(context_tokens / batch)
        weights = self._weights_read_bytes(b) / self.hbm
        compute = self._gemm_flops(b, b) / self.flops_rate
        # query heads per KV head (MLA: one latent that every head reads in one pass)
        group = 1.0 if m.kv_latent else (m.heads / self.tp) / self.kv_heads_per_gpu()
        reads = 1.0 + self.engine.query_head_kv_reads * max(0.0, group - 1.0)
        kv = ctx * self.kv_bytes_per_token_gpu() * reads / self.hbm
        attn_flops = (ctx * self.stage_layers * (m.heads / self.tp)
                      * self.decode_attn_flops_per_key())
        kv = max(kv, attn_flops / (self.flops_rate * ATTENTION_EFF))
        act = b * m.hidden * ACT_BYTES
        ar = 2 * self.stage_layers * self._allreduce(act)
        host = self.engine.step_s + self.engine.per_seq_s * batch
        full = DecodeTimes(weights_s=pp * weights, kv_s=pp * kv, compute_s=pp * compute,
                           comm_s=pp * ar, p2p_s=pp * self._p2p(act),
                           launch_s=pp * self._launch(), host_s=host)
        if mb == pp:  # every stage busy: the last (with the output head) sets the pace
            return full
        # fewer micro-batches than stages: a token passes every stage once, and only the
        # last runs the output head; the pipe is bound by that walk, not by pp x the last
        head_w = self._head_params() / self.tp * self.wbytes / self.hbm
        head_c = 2.0 * self._head_params() * b / self.tp / self.flops_rate
        walk = replace(full, weights_s=full.weights_s - (pp - 1) * head_w,
                       compute_s=full.compute_s - (pp - 1) * head_c)
        f = mb / pp  # ... unless the last stage's share of the micro-batches is longer
        busy = DecodeTimes(**{k: v if k == "host_s" else f * v
                              for k, v in asdict(full).items()})
        return walk if walk.total_s >= busy.total_s else busy

    # --- prefill ----------------------------------------------------------------------
    def prefill(self, prompts: Sequence[int]) -> PrefillTimes:
        """Prefill of the ``prompts`` (token counts) in one iteration, pipelined over
        ``min(pp, len(prompts))`` micro-batches."""
        m, pp = self.m, self.pp
        n_seq = len(prompts)
        mb = min(pp, n_seq)
        tokens = float(sum(prompts)) / mb
        seqs = n_seq / mb
        # causal attention: position i attends to i keys, sum over a prompt = p(p+1)/2
        pairs = sum(self.attn_pairs(p) for p in prompts) / mb
        gemm = self._gemm_flops(tokens, seqs) / self.flops_rate
        gemm = max(gemm, self._weights_read_bytes(tokens) / self.hbm)
        attn = (pairs * self.stage_layers * (m.heads / self.tp)
                * self.prefill_attn_flops_per_pair() / (self.flops_rate * ATTENTION_EFF))
        act = tokens * m.hidden * ACT_BYTES
        ar = 2 * self.stage_layers * self._allreduce(act)
        fill = mb + pp - 1
        host = self.engine.step_s + self.engine.per_seq_s * n_seq
        return PrefillTimes(gemm_s=fill * gemm, attention_s=fill * attn, comm_s=fill * ar,
                            p2p_s=fill * self._p2p(act), launch_s=fill * self._launch(),
                            host_s=host)

    def prefill_marginal_s(self, prompt: int) -> float:
        """GPU time one more prompt adds to an iteration it shares (chunked prefill): its
        FLOPs, attention and all-reduce bytes on a stage (each stage works through every
        micro-batch once an iteration, so a stage's share is what the iteration gains);
        no weight reads, launches or host time (the iteration pays those already)."""
        return self._prefill_compute(prompt)

    def _prefill_compute(self, prompt: int) -> float:
        m = self.m
        gemm = self._gemm_flops(prompt, 1) / self.flops_rate
        attn = (self.attn_pairs(prompt) * self.stage_layers * (m.heads / self.tp)
                * self.prefill_attn_flops_per_pair() / (self.flops_rate * ATTENTION_EFF))
        ar = 2 * self.stage_layers * self._allreduce(prompt * m.hidden * ACT_BYTES)
        return gemm + attn + ar


def _expected_max_binomial(n: int, p: float, k: int) -> float:
    """Expected maximum of ``k`` independent Binomial(n, p) counts (exact sum)."""
    if k == 1 or n == 0:
        return n * p
    if p >= 1.0:
        return float(n)
    pmf = [math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    cdf, acc = [], 0.0
    for v in pmf:
        acc += v
        cdf.append(min(1.0, acc))
    return sum(1.0 - cdf[j - 1] ** k for j in range(1, n + 1))


def _no_room(lay: _Layout, kv_cap: float, *, tp: int, pp: int, precision: str
             ) -> tuple[str, str]:
    """(fix, field) when not even one sequence fits: the weights themselves, or one
    sequence's KV cache at this context (then the longest context that fits)."""
    if kv_cap <= 0:
        more = "" if precision != "bf16" else ", or use --precision fp8"
        return f"the weights alone do not fit: raise --tp or --pp{more}", \
            "pp" if pp > 1 else "tp"
    lo, hi = 0, 1  # the longest context whose cache fits (windowed layers keep less)
    while lay.kv_tokens(hi) <= kv_cap and hi < 2**40:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if lay.kv_tokens(mid) <= kv_cap else (lo, mid)
    longest = lo
    return (f"one sequence's KV cache does not fit beside the weights: keep --prompt-len "
            f"+ --output-len to at most {longest:,} tokens, or raise --tp or --pp",
            "prompt_len")


def _check_request(model: TransformerSpec, prompt_len: int, output_len: int,
                   batch: int | None = None) -> None:
    """Sizes of a request (and its batch) that are positive integers, and a context
    within the model's position limit (``max_context``); errors name the flag."""
    sizes = (() if batch is None else (("batch", batch),)) + (
        ("prompt_len", prompt_len), ("output_len", output_len))
    for name, v in sizes:
        _positive(name, v, "--" + name.replace("_", "-"))
    limit = model.max_context
    if limit is not None and prompt_len + output_len > limit:
        raise ConfigError(f"--prompt-len {prompt_len} + --output-len {output_len} = "
                          f"{prompt_len + output_len} tokens exceeds {model.name}'s context "
                          f"of {limit:,} (max_context): shorten them, or set max_context "
                          f"in the scenario's training section for a longer-context "
                          f"variant", field="inference.prompt_len")


def _positive(name: str, v: object, flag: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{flag} must be a positive integer, got {v!r}",
                          field=f"inference.{name}")
    return v


def _layout(model: TransformerSpec, fabric: Fabric, *, tp: int, pp: int, ep: int,
            precision: str, kv_precision: str | None, engine: str | ServingEngine,
            comm: CommModel | None, first_rank: int = 0) -> _Layout:
    """Validate a serving instance; every error names the flag and a fix."""
    _positive("tp", tp, "--tp")
    _positive("pp", pp, "--pp")
    _positive("ep", ep, "--ep")
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision must be bf16, fp8 or fp8-weights, got {precision!r}",
                          field="inference.precision")
    kvp = kv_precision or ("fp8" if precision == "fp8" else "bf16")
    if kvp not in PRECISION_BYTES:
        raise ConfigError(f"--kv-precision must be bf16 or fp8, got {kvp!r}",
                          field="inference.kv_precision")
    eng = get_engine(engine)
    gpu = get_catalog().gpu(fabric.info.gpu)
    if PRECISIONS[precision][1] == "fp8" and gpu.fp8_flops <= 0:
        raise ConfigError(f"{gpu.name} has no FP8 tensor cores: use --precision fp8-weights "
                          f"(FP8 weights, 16-bit math) or bf16", field="inference.precision")
    n = tp * pp
    free = fabric.n_gpus - first_rank
    if n > free:
        what = f"tp={tp} x pp={pp} = {n} GPUs" if pp > 1 else f"tp={tp}"
        raise ConfigError(f"{what} exceeds the {free} GPUs of the cluster left for this "
                          f"instance; add --nodes or lower --tp/--pp",
                          field="inference.pp" if pp > 1 else "inference.tp")
    if model.heads % tp:  # suggest only sizes the cluster can hold
        ok = [d for d in range(1, model.heads + 1) if model.heads % d == 0 and d * pp <= free]
        raise ConfigError(f"tp={tp} must divide the {model.heads} attention heads of "
                          f"{model.name}; use --tp {', '.join(map(str, ok[-6:]))}",
                          field="inference.tp")
    if model.layers % pp:
        ok = [d for d in range(1, model.layers + 1) if model.layers % d == 0 and d * tp <= free]
        raise ConfigError(f"pp={pp} must divide the {model.layers} layers of {model.name}; "
                          f"use --pp {', '.join(map(str, ok[:8]))}", field="inference.pp")
    if ep > 1:
        if not model.is_moe:
            raise ConfigError(f"--ep {ep} needs a mixture-of-experts model; {model.name} is "
                              f"dense (use --ep 1)", field="inference.ep")
        if tp % ep:
            raise ConfigError(f"ep={ep} must divide tp={tp}: experts are split over ep "
                              f"groups of tp/ep GPUs inside the tensor-parallel group",
                              field="inference.ep")
        if model.experts % ep:
            raise ConfigError(f"ep={ep} must divide the {model.experts} experts of "
                              f"{model.name}", field="inference.ep")
    return _Layout(m=model, fabric=fabric, gpu=gpu, tp=tp, pp=pp, ep=ep,
                   precision=precision, kv_precision=kvp, engine=eng,
                   comm=comm if comm is not None else EngineComm(fabric),
                   first_rank=first_rank)


def _span_warning(lay: _Layout) -> list[str]:
    dom = lay.fabric.info.nvlink_domain_gpus
    if lay.tp > max(1, dom):
        return [f"tp={lay.tp} spans beyond the NVLink domain ({dom} GPUs): every layer's "
                f"all-reduces cross the slower link"]
    return []


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
        """Share of a decode iteration spent in TP all-reduces and stage hand-offs."""
        return (self.decode.comm_s + self.decode.p2p_s) / self.tpot_s

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
                       engine: str | ServingEngine = "trtllm") -> InferenceResult:
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
    _check_request(model, prompt_len, output_len, batch)
    lay = _layout(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                  kv_precision=kv_precision, engine=engine, comm=comm)
    context = prompt_len + output_len
    kv_cap = lay.kv_capacity_tokens()
    max_batch = int(kv_cap // lay.kv_tokens(context))
    mem = (lay.weight_bytes_per_gpu()
           + lay.kv_bytes_per_token_gpu() * batch * lay.kv_tokens(context)
           + FRAMEWORK_RESERVE_BYTES)
    if check_memory and mem > lay.gpu.memory_bytes:
        fix, where = (f"lower --batch to {max_batch}", "batch") if max_batch >= 1 else \
            _no_room(lay, kv_cap, tp=tp, pp=pp, precision=precision)
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
        gpu_memory_bytes=float(lay.gpu.memory_bytes), warnings=_span_warning(lay), pp=pp,
        ep=ep, kv_precision=lay.kv_precision, engine=lay.engine.name, max_batch=max_batch,
        kv_capacity_tokens=kv_cap)


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
                        comm: CommModel | None = None) -> ContinuousResult:
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
    _check_request(model, prompt_len, output_len)
    if max_batch is not None:
        _positive("max_batch", max_batch, "--max-batch")
    if tpot_target_s is not None and not (tpot_target_s > 0 and math.isfinite(tpot_target_s)):
        raise ConfigError(f"--tpot-target must be a positive number of milliseconds, got "
                          f"{tpot_target_s * 1e3!r}", field="inference.tpot_target")
    if not 0 < memory_fraction <= 1:
        raise ConfigError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}",
                          field="inference.memory_fraction")
    lay = _layout(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                  kv_precision=kv_precision, engine=engine, comm=comm)
    ctx = prompt_len + output_len / 2
    kv_cap = lay.kv_capacity_tokens(memory_fraction)
    kv_batch = int(kv_cap // lay.kv_tokens(prompt_len + output_len))
    if kv_batch < 1:
        fix, where = _no_room(lay, kv_cap, tp=tp, pp=pp, precision=precision)
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
                f"no batch meets --tpot-target {tpot_target_s * 1e3:.2f} ms: one sequence "
                f"alone takes {sum(step(1)) * 1e3:.2f} ms per token at tp={tp}, pp={pp}; "
                f"raise the target or --tp", field="inference.tpot_target")
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
                   comm: CommModel | None = None) -> TraceResult:
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
    _positive("max_batch", max_batch, "--max-batch")
    lay = _layout(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                  kv_precision=kv_precision, engine=engine, comm=comm)
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
                else:
                    kv_used -= lay.kv_tokens(sum(requests[i]))
            continue
        ctx = sum(requests[i][0] + g for i, g in running.items())
        dt = lay.decode(len(running), ctx).total_s
        now += dt
        batch_time += dt * len(running)
        for i in list(running):
            gaps.append(now - last_token[i])
            last_token[i] = now
            running[i] += 1
            out_tokens += 1
            if running[i] >= requests[i][1]:
                del running[i]
                kv_used -= lay.kv_tokens(sum(requests[i]))
    return TraceResult(requests=len(requests), duration_s=now, output_tokens=out_tokens,
                       tokens_per_s=out_tokens / now,
                       mean_itl_s=statistics.fmean(gaps) if gaps else 0.0,
                       median_itl_s=statistics.median(gaps) if gaps else 0.0,
                       mean_ttft_s=ttft_sum / len(requests), mean_batch=batch_time / now,
                       iterations=iters, prefill_iterations=prefills,
                       kv_capacity_tokens=kv_cap, gpus=lay.gpus)


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
                          comm: CommModel | None = None) -> DisaggregatedResult:
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
    _check_request(model, prompt_len, output_len, batch)
    _positive("prefill_tp", prefill_tp, "--prefill-tp")
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
    pre = _layout(model, fabric, tp=prefill_tp, pp=1, ep=1, precision=precision,
                  kv_precision=kv_precision, engine=engine, comm=comm)
    dec = _layout(model, fabric, tp=tp, pp=pp, ep=ep, precision=precision,
                  kv_precision=kv_precision, engine=engine, comm=comm,
                  first_rank=first_decode)
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
        warnings=[f"prefill instance: {w}" for w in _span_warning(pre)]
        + [f"decode instance: {w}" for w in _span_warning(dec)])


@dataclass(frozen=True)
class ServingRun:
    """What a :class:`~fabricsim.workloads.spec.ServingConfig` asks for: the static batch,
    and continuous batching and disaggregated serving when it names them."""

    static: InferenceResult
    continuous: ContinuousResult | None = None
    disaggregated: DisaggregatedResult | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the static batch's summary with ``continuous`` and
        ``disaggregated`` beside it where they ran."""
        d = self.static.as_dict()
        if self.continuous is not None:
            d["continuous"] = self.continuous.as_dict()
        if self.disaggregated is not None:
            d["disaggregated"] = self.disaggregated.as_dict()
        return d


def run_serving(model: TransformerSpec, cfg: ServingConfig, fabric: Fabric,
                comm: CommModel | None = None) -> ServingRun:
    """Serve ``model`` on ``fabric`` as ``cfg`` (an ``inference:`` section or
    ``fabricsim infer``'s flags) says: the static batch, plus continuous batching when it
    names a TPOT target or a batch cap, plus disaggregated serving when it names a
    prefill instance.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.spec import ServingConfig
    >>> r = run_serving(get_model("llama3-8b"), ServingConfig(tp=1, tpot_target_ms=20),
    ...                 fs.build_cluster("dgx-h100", 1))
    >>> r.continuous is not None and r.continuous.tpot_s <= 0.02, r.disaggregated is None
    (True, True)
    """
    comm = comm if comm is not None else EngineComm(fabric)
    kw: dict[str, Any] = dict(tp=cfg.tp, pp=cfg.pp, ep=cfg.ep, precision=cfg.precision,
                              kv_precision=cfg.kv_precision, engine=cfg.engine, comm=comm)
    static = simulate_inference(model, fabric, batch=cfg.batch, prompt_len=cfg.prompt_len,
                                output_len=cfg.output_len, **kw)
    cont = None
    if cfg.tpot_target_ms is not None or cfg.max_batch is not None:
        cont = continuous_batching(
            model, fabric, prompt_len=cfg.prompt_len, output_len=cfg.output_len,
            tpot_target_s=cfg.tpot_target_ms / 1e3 if cfg.tpot_target_ms is not None
            else None, max_batch=cfg.max_batch, **kw)
    dis = None
    if cfg.prefill_tp is not None:
        dis = disaggregated_serving(model, fabric, prefill_tp=cfg.prefill_tp,
                                    batch=cfg.batch, prompt_len=cfg.prompt_len,
                                    output_len=cfg.output_len, **kw)
    return ServingRun(static, cont, dis)
