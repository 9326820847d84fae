"""One serving instance: its validated layout, and its decode and prefill times.

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

``BW = HBM bandwidth × SERVE_HBM_EFF``; ``TC`` the achievable tensor-core share of the
dense peak (:func:`tc_eff`: 16-bit GEMMs at the kernel benchmark's rate for the layer's
width, 8-bit ones at the fitted ``SERVE_TC_EFF``). An iteration is
``pp × (stage + send/recv) + host`` with the stage the last one (it also runs the output
head) when the batch fills the ``pp`` stages; a batch of fewer sequences than stages walks
each stage once, so the output head counts once. **Prefill** of ``n`` prompt tokens is the same sum
with the GEMMs at ``n`` tokens, causal attention, and all-reduces of ``n·h·2`` bytes;
pipelined over ``m`` micro-batches it takes ``(m + pp − 1)`` stage times.

**Memory**: weights + KV cache + a framework reserve must fit the GPU; the KV capacity
left after the weights sets the largest batch (:attr:`InferenceResult.max_batch`).

Four ways to serve sit on it: :func:`~fabricsim.workloads.serving.static.simulate_inference`
(a static batch), :func:`~fabricsim.workloads.serving.batching.continuous_batching`
(steady state at a TPOT target), :func:`~fabricsim.workloads.serving.batching.serve_requests`
(a request trace through an iteration-level scheduler) and
:func:`~fabricsim.workloads.serving.disaggregated.disaggregated_serving` (prefill and
decode on separate instances).

Example
-------
>>> import fabricsim as fs
>>> from fabricsim.workloads.models import get_model
>>> fab = fs.build_cluster("dgx-h100", nodes=1)
>>> inst = build_instance(get_model("llama2-70b"), fab, tp=8, pp=1, ep=1,
...                       precision="bf16", kv_precision=None, engine="trtllm", comm=None)
>>> 0.005 < inst.decode(1, 1024).total_s < 0.03
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from fabricsim.catalog import get_catalog
from fabricsim.catalog.models import GpuSpec
from fabricsim.collectives.oneshot import EngineAllreduce
from fabricsim.errors import ConfigError, unknown
from fabricsim.fabric import Fabric
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.flops import mixer_core_flops
from fabricsim.workloads.gpu import (
    ATTENTION_EFF,
    FRAMEWORK_RESERVE_BYTES,
    NVFP4_OVER_FP8,
    gemm_share,
    generation,
    peak_flops,
)
from fabricsim.workloads.models import TransformerSpec

__all__ = [
    "ACT_BYTES",
    "ENGINES",
    "PRECISIONS",
    "PRECISION_BYTES",
    "SERVE_HBM_EFF",
    "SERVE_LAYER_KERNELS_S",
    "SERVE_TC_EFF",
    "STATE_BYTES",
    "DecodeTimes",
    "Instance",
    "PrefillTimes",
    "ServingEngine",
    "build_instance",
    "check_request",
    "get_engine",
    "kv_bytes_per_token",
    "no_room",
    "span_warning",
    "state_bytes_per_sequence",
]

#: Bytes per element by precision name (weights, KV cache).
PRECISION_BYTES = {"bf16": 2.0, "fp8": 1.0}
#: Serving precision → (bytes per weight, precision of the GEMMs). ``fp8-weights`` is
#: weight-only FP8 (16-bit math, e.g. vLLM's Marlin kernels on A100).
PRECISIONS: dict[str, tuple[float, str]] = {
    "bf16": (2.0, "bf16"), "fp8": (1.0, "fp8"), "fp8-weights": (1.0, "bf16"),
    "nvfp4": (0.5 + 1.0 / 16, "fp4")}
#: Activations travel in 16 bits whatever the weight precision.
ACT_BYTES = 2.0
_GIB = 2**30

#: Achievable share of the dense tensor peak for serving GEMMs with 8-bit or narrower
#: operands, by (generation, serving precision): prefill and compute-bound decode alike.
#: 16-bit GEMMs are not fitted here: they run at the kernel benchmark's rate
#: (:func:`~fabricsim.workloads.gpu.gemm_share`: measured MAMF times the thin-GEMM factor of
#: the layer's width on one GPU), the figure training reads before its sustained share. The
#: 16-bit shares once fitted here (A100 0.81, H100 0.74) were that figure to 1-2 %; fitted,
#: they went wherever the sources left in put them (A100 0.64 without TensorRT-LLM's
#: tables). Fitted once by benchmarks/accuracy_inference.py --fit: hopper/fp8 on rows 1097,
#: 1098 and TensorRT-LLM v0.8's H100/H200 first-token latencies (FP8 serving reaches
#: three quarters of the FP8 training GEMM rate: per-tensor activation casts and scales
#: around every GEMM at serving's token counts); ampere/fp8-weights (vLLM's Marlin
#: weight-only kernels) on 1118. Not fitted (no rows): Blackwell and Ada FP8 take
#: Hopper's; fp8-weights elsewhere runs at the 16-bit rate.
SERVE_TC_EFF: dict[tuple[str, str], float] = {
    ("ampere", "fp8-weights"): 0.22,
    ("hopper", "fp8"): 0.59,
    ("blackwell", "fp8"): 0.59,
    ("ada", "fp8"): 0.59,
}
#: Achievable share of HBM bandwidth when decode streams weights and KV cache. Not fitted
#: (a free fit runs away to unphysical values, trading off against the MMHA share): the
#: share STREAM-like copies reach on HBM2e/HBM3 (0.85-0.9).
SERVE_HBM_EFF = 0.85
#: GPU time each decoder layer costs an iteration that neither its bytes nor its FLOPs
#: account for, by phase: about a dozen kernels a layer (norms, GEMMs, attention,
#: activation, all-reduce), each with its launch-to-launch gap, ramp and tail. Decode runs
#: them from a CUDA graph (TensorRT-LLM's generation phase, vLLM, gpt-fast), prefill
#: launches them one by one (TensorRT-LLM's context phase, vLLM's eager prefill), so a
#: prefill layer costs more. It is what batch-1 serving is made of: measured, a batch-1
#: token of Llama 2 7B takes 2 ms longer than its weight reads at every TP size from 1 to
#: 8 (gpt-fast on A100), and a 128-token prefill on H100 about 4 ms. Fitted once
#: (``accuracy_inference.py --fit``) on the batch-1 figures of three sources:
#: TensorRT-LLM's first-token latencies (v0.8), NIM's concurrency-1 runs and gpt-fast's
#: batch-1 decode; each source is held out in turn (``--loso``).
SERVE_LAYER_KERNELS_S: dict[str, float] = {"prefill": 115e-6, "decode": 42e-6}


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
    overlap_host: bool = False
    """An overlap scheduler: the host prepares iteration ``n + 1`` while the GPU runs
    ``n`` (SGLang's zero-overhead batch scheduler since v0.4, after NanoFlow), so an
    iteration takes the longer of the two instead of their sum."""
    own_allreduce: bool = True
    """TP all-reduces inside one NVLink domain run the engine's own one-shot/two-shot
    kernels in the decode CUDA graph (TensorRT-LLM's AllReduce plugin, vLLM's
    ``custom_all_reduce``), not NCCL (:mod:`fabricsim.collectives.oneshot`)."""
    kernel_gaps: bool = True
    """Each layer pays its phase's :data:`SERVE_LAYER_KERNELS_S` of fixed kernel time
    (every real engine; ``ideal`` does not)."""
    query_head_kv_reads: float = 0.0
    """Decode attention with one KV pass per *query* head (the MMHA kernel): the share
    of the ``heads/kv_heads − 1`` extra passes that miss L2 and reach HBM. 0 for kernels
    that serve a query-head group from one pass (XQA, FlashAttention)."""
    description: str = ""


#: Serving engines. Host costs and the MMHA share are fitted once per engine by
#: benchmarks/accuracy_inference.py --fit (rows named); nothing is fitted per row.
ENGINES: dict[str, ServingEngine] = {
    "ideal": ServingEngine("ideal", kernel_gaps=False,
                           description="no host costs or kernel gaps: the hardware bound"),
    "trtllm": ServingEngine(
        "trtllm",
        description="TensorRT-LLM C++ runtime (XQA decode attention, CUDA graphs): no "
                    "host cost, as none of the rows isolates one"),
    "trtllm-python": ServingEngine(
        "trtllm-python", launch_per_layer_s=263e-6,
        description="a TensorRT-LLM engine driven by the Python runtime (benchmark.py): "
                    "launch cost per layer fitted on rows 1123/1124, batch 16 and 64"),
    "trtllm-0.6": ServingEngine(
        "trtllm-0.6", query_head_kv_reads=0.85,
        description="TensorRT-LLM v0.6 C++ session (MMHA decode attention, one KV pass "
                    "per query head, before XQA); MMHA share fitted on rows 1097/1098"),
    "vllm-0.5": ServingEngine(
        "vllm-0.5", step_s=13.8e-3, per_seq_s=72.8e-6,
        description="vLLM v0.5 (CUDA graphs; Python scheduler, sampler and output "
                    "processing every iteration); host costs fitted on rows 1117/1118"),
    "sglang-0.4": ServingEngine(
        "sglang-0.4", overlap_host=True,
        description="SGLang v0.4 and later (CUDA-graph decode, its own all-reduce kernels, "
                    "the overlap scheduler hiding host work behind the GPU's); its host "
                    "costs are not isolated by any published figure: none, as for the "
                    "TensorRT-LLM C++ runtime"),
    "gpt-fast": ServingEngine(
        "gpt-fast", own_allreduce=False,
        description="PyTorch gpt-fast (torch.compile with CUDA graphs, one sequence, no "
                    "server): TP all-reduces through NCCL, no host cost"),
}


#: Engine names without a version: the newest profile of that engine.
ENGINE_ALIASES = {"sglang": "sglang-0.4"}


def get_engine(name: str | ServingEngine) -> ServingEngine:
    """The engine ``name`` of :data:`ENGINES` or :data:`ENGINE_ALIASES` (unknown names
    raise with the nearest).

    Examples
    --------
    >>> get_engine("trtllm").name
    'trtllm'
    >>> get_engine("sglang").overlap_host
    True
    >>> try:
    ...     get_engine("vllm-0.4")
    ... except ConfigError as e:
    ...     print(e.field, "vllm-0.5" in str(e))
    inference.engine True
    """
    if isinstance(name, ServingEngine):
        return name
    try:
        return ENGINES[ENGINE_ALIASES.get(name, name)]
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
    return model.blocks("*") * per_layer * PRECISION_BYTES[precision]


#: Bytes per element of a recurrent mixer's state (Mamba-2, gated delta-net) in a serving
#: cache: FP32, the precision the scan kernels carry it in.
STATE_BYTES = 4.0


def state_bytes_per_sequence(model: TransformerSpec) -> float:
    """Recurrent state one sequence keeps over the whole model (hybrid models): the same
    at any context length, where attention layers keep a KV cache that grows.

    >>> from fabricsim.workloads.models import get_model
    >>> round(state_bytes_per_sequence(get_model("nemotron-h-8b")) / 2**20, 1)  # MiB
    98.8
    """
    return model.recurrent_state() * STATE_BYTES


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
    ep_s: float = 0.0
    """Expert dispatch and combine (data-parallel attention with wide EP)."""
    kernels_s: float = 0.0
    """The layers' fixed kernel time (:data:`SERVE_LAYER_KERNELS_S`)."""
    host_hidden: bool = False
    """The engine prepares the next iteration while the GPU runs this one (an overlap
    scheduler): host time then counts only where it is longer than the GPU's."""

    @property
    def gpu_s(self) -> float:
        """GPU time: roofline of the GEMMs, then attention, communication and the
        layers' fixed kernel time."""
        return (max(self.weights_s, self.compute_s) + self.kv_s + self.comm_s + self.ep_s
                + self.kernels_s)

    @property
    def total_s(self) -> float:
        """Iteration time: GPU or launch-bound, plus stage hand-offs and host time (or,
        under an overlap scheduler, the longer of host and GPU).

        >>> DecodeTimes(3.0, 1.0, 2.0, 1.0, host_s=0.5, host_hidden=True).total_s
        5.0
        """
        if self.host_hidden:
            return max(self.gpu_s, self.launch_s, self.host_s) + self.p2p_s
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
    """GEMMs: FLOPs at the achievable rate plus the weight reads."""
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
    ep_s: float = 0.0
    """Of ``comm_s``: expert dispatch and combine (data-parallel attention)."""
    kernels_s: float = 0.0
    """The layers' fixed kernel time (:data:`SERVE_LAYER_KERNELS_S`)."""

    @property
    def total_s(self) -> float:
        """Time to first token of the batch."""
        gpu = self.gemm_s + self.attention_s + self.comm_s + self.kernels_s
        return max(gpu, self.launch_s) + self.p2p_s + self.host_s


def tc_eff(gpu: GpuSpec, precision: str, hidden: int, tp: int = 1) -> float:
    """Tensor-core share of the dense peak for a serving precision's GEMMs in layers of
    width ``hidden`` split over ``tp`` GPUs: 16-bit GEMMs (and fp8-weights where no share
    is fitted) at :func:`~fabricsim.workloads.gpu.gemm_share`, 8-bit ones at
    :data:`SERVE_TC_EFF`. NVFP4 (4-bit weights and activations, one E4M3 scale per 16)
    runs at the FP8 share times the measured NVFP4-over-FP8 GEMM speed-up
    (:data:`~fabricsim.workloads.gpu.NVFP4_OVER_FP8`), as a share of the FP4 peak: no
    serving row fits it.

    >>> from fabricsim.catalog import get_catalog
    >>> round(tc_eff(get_catalog().gpu("h100-sxm"), "bf16", 8192, 8), 3)
    0.736
    """
    gen = generation(gpu)
    if precision == "nvfp4":
        fp8 = SERVE_TC_EFF.get((gen, "fp8"), 0.44)
        return fp8 * NVFP4_OVER_FP8 * gpu.fp8_flops / peak_flops(gpu, "fp4")
    share = SERVE_TC_EFF.get((gen, precision))
    return share if share is not None else gemm_share(gpu, "bf16", hidden, tp)


@dataclass
class Instance:
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
    #: Data-parallel attention (SGLang's ``--enable-dp-attention --dp-size``): attention
    #: runs on ``attention_dp`` groups of ``tp/attention_dp`` GPUs, each with its own
    #: sequences, and the routed experts spread over all ``ep = tp`` GPUs, reached by
    #: dispatch/combine kernels (:mod:`fabricsim.collectives.ep`). 1: TP attention.
    attention_dp: int = 1
    #: The EP kernel family of the dispatch/combine in DP-attention mode (``None``:
    #: DeepEP's low-latency kernels for decode, its normal ones for prefill).
    ep_kernel: str | None = None
    #: Extra copies of the busiest experts (SGLang's ``--ep-num-redundant-experts``,
    #: DeepSeek's EPLB): ``experts + redundant_experts`` physical experts spread over the
    #: EP ranks, the load balanced over the copies.
    redundant_experts: int = 0
    #: The engines' own all-reduce per group of ranks, worked out once per instance.
    _own_allreduce: dict[tuple[int, ...], EngineAllreduce] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    @property
    def physical_experts(self) -> int:
        """Routed experts as placed: the model's and the redundant copies."""
        return self.m.experts + self.redundant_experts

    # --- shapes -----------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def attn_tp(self) -> int:
        """GPUs one attention group splits its heads over (``tp`` without DP attention)."""
        return self.tp // self.attention_dp

    @property
    def wide_ep(self) -> bool:
        """Data-parallel attention with the experts over the whole instance."""
        return self.attention_dp > 1

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
        return self.peak * tc_eff(self.gpu, self.precision, self.m.hidden, self.tp)

    @property
    def hbm(self) -> float:
        return self.gpu.hbm_bandwidth * SERVE_HBM_EFF

    def kv_heads_per_gpu(self) -> int:
        return max(1, math.ceil(self.m.n_kv / self.attn_tp))

    def kv_bytes_per_token_gpu(self) -> float:
        """KV bytes one cached token takes on one GPU of a stage (MLA: the whole latent on
        every TP rank); with data-parallel attention a token lives in one of the
        ``attention_dp`` groups, so a GPU holds ``1/attention_dp`` of it on average."""
        per_layer = self.m.kv_latent or 2 * self.kv_heads_per_gpu() * self.m.d_head
        return (self.stage_layers * self.m.attention_share * per_layer * self.kvbytes
                / self.attention_dp)

    def state_bytes_gpu(self) -> float:
        """Recurrent state one sequence keeps on one GPU of a stage (hybrid models; its
        heads split over the TP group as attention's are)."""
        return state_bytes_per_sequence(self.m) / self.pp / self.attn_tp / self.attention_dp

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
        if self.wide_ep:  # attention and dense layers per attention group, experts over all
            shared = float(m.params - m.expert_total_params)
            placed = m.expert_total_params * self.physical_experts / m.experts
            return (shared / self.attn_tp + placed / self.ep) * self.wbytes
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
        """KV cache of one sequence of ``context`` tokens, in full-model tokens; a hybrid
        model's recurrent state is counted in as the tokens of KV cache it weighs."""
        kv = context * self.kv_share(context)
        if self.m.is_hybrid:
            kv += state_bytes_per_sequence(self.m) / kv_bytes_per_token(self.m,
                                                                        self.kv_precision)
        return kv

    def attn_pairs(self, prompt: int) -> float:
        """Query-key pairs of a causal prefill of ``prompt`` tokens, per layer averaged
        over the model (a windowed layer's query meets at most the window's keys)."""
        full = prompt * (prompt + 1) / 2
        m = self.m
        if not m.windowed_layers:
            return full * m.attention_share  # a hybrid model's attention blocks only
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

    def _allreduce(self, nbytes: float, ranks: list[int] | None = None) -> float:
        """One TP all-reduce: the engine's own kernel inside one NVLink domain
        (:mod:`fabricsim.collectives.oneshot`), else NCCL on the fabric."""
        ranks = self.stage_ranks(0) if ranks is None else ranks
        if self.engine.own_allreduce and len(ranks) > 1 and nbytes > 0:
            key = tuple(ranks)
            kernel = self._own_allreduce.get(key)
            if kernel is None:
                kernel = self._own_allreduce[key] = EngineAllreduce.of(self.fabric, ranks)
            t = kernel.time(nbytes)
            if t is not None:
                return t
        return self.comm.time("all_reduce", ranks, nbytes)

    def attention_ranks(self) -> list[int]:
        """The first attention group's GPUs (all of stage 0 without DP attention)."""
        return self.stage_ranks(0)[:self.attn_tp]

    def ep_kernel_for(self, tokens_per_rank: float) -> str:
        """The dispatch/combine kernel family at this many tokens per rank."""
        from fabricsim.collectives.ep import default_ep_kernel, ep_kernel

        if self.ep_kernel is not None:
            return ep_kernel(self.ep_kernel, "inference.ep_kernel")
        return default_ep_kernel(self.fabric, max(1, math.ceil(tokens_per_rank)))

    def ep_layer_s(self, tokens: float) -> float:
        """One MoE layer's dispatch plus combine when the instance holds ``tokens``
        tokens in all (each GPU dispatches its ``tokens / tp``)."""
        from fabricsim.collectives.ep import EpConfig

        per = max(1, math.ceil(tokens / self.tp))
        kern = self.ep_kernel_for(per)
        fp8 = self.gemm_precision == "fp8"
        cfg = EpConfig(tokens=per, hidden=self.m.expert_width_in, top_k=self.m.top_k,
                       experts=self.physical_experts,
                       dispatch_dtype="fp8" if fp8 else "bf16",
                       combine_dtype="bf16")
        ranks = self.stage_ranks(0)
        ep_time = getattr(self.comm, "ep_time", None)
        if ep_time is None:  # a communication model that does not run EP kernels
            nbytes = per * self.m.top_k * self.m.expert_width_in * (1.0 if fp8 else 2.0)
            return 2 * self.comm.time("alltoall", ranks, nbytes)
        return float(ep_time(kern, "dispatch", ranks, cfg)
                     + ep_time(kern, "combine", ranks, cfg))

    def _layer_comm(self, tokens: float, act: float) -> tuple[float, float]:
        """A stage's TP all-reduces and its expert dispatch/combine (s) for ``tokens``
        tokens of ``act`` activation bytes: two all-reduces per layer over the TP group;
        with DP attention one per layer over the attention group (of its share of the
        tokens), and a dispatch and a combine per MoE layer over all the GPUs."""
        if not self.wide_ep:  # two per transformer layer (one per hybrid block)
            return 2 * self._layer_units * self._allreduce(act), 0.0
        ar = 0.0
        if self.attn_tp > 1:
            ar = self.stage_layers * self._allreduce(act / self.attention_dp,
                                                     self.attention_ranks())
        return ar, self.m.moe_layers * self.ep_layer_s(tokens)

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
        e, k = self.physical_experts, m.top_k
        p = 1.0 - (1.0 - k / e) ** tokens  # an expert is reached by at least one token
        local = e // self.ep
        busiest = expected_max_binomial(local, p, self.ep)
        moe_stage = m.moe_layers / self.pp
        return moe_stage * busiest * m.expert_params / (self.tp / self.ep)

    def _weights_read_bytes(self, tokens: float) -> float:
        """Bytes of weights one GPU of the last stage reads for one pass of ``tokens``."""
        dense = self._dense_layer_params() / self.pp + self._head_params()
        return (dense / self.attn_tp + self._expert_read_params(tokens)) * self.wbytes

    def _gemm_flops(self, tokens: float, logits: float) -> float:
        """GEMM FLOPs on one GPU of a stage: ``tokens`` through the layers, ``logits``
        positions through the output head."""
        m = self.m
        layer_active = float(m.active_params - m.embedding_params - m.hidden)
        return (2.0 * layer_active / self.pp * tokens
                + 2.0 * self._head_params() * logits) / self.tp

    def _prefill_attention(self, pairs: float, tokens: float) -> float:
        """A stage's causal attention over ``pairs`` query-key pairs per layer and, in a
        hybrid model, its recurrent scans over ``tokens`` prompt tokens (their FLOPs,
        :func:`~fabricsim.workloads.flops.mixer_core_flops`, grow with the tokens, not the
        context), at the attention kernels' rate."""
        m = self.m
        flops = pairs * self.stage_layers * (m.heads / self.tp) \
            * self.prefill_attn_flops_per_pair()
        if m.is_hybrid:
            flops += tokens * mixer_core_flops(m, 0) / self.pp / self.tp
        return flops / (self.flops_rate * ATTENTION_EFF)

    @property
    def _layer_units(self) -> float:
        """A stage's layers in transformer layers (a hybrid model's block is half of one,
        :attr:`~fabricsim.workloads.models.TransformerSpec.layer_weight`)."""
        return self.stage_layers * self.m.layer_weight

    def _launch(self) -> float:
        return self.engine.launch_per_layer_s * self._layer_units

    def _kernels(self, phase: str) -> float:
        """A stage's fixed kernel time for one pass of ``phase`` (``"prefill"`` or
        ``"decode"``, :data:`SERVE_LAYER_KERNELS_S`)."""
        if not self.engine.kernel_gaps:
            return 0.0
        return SERVE_LAYER_KERNELS_S[phase] * self._layer_units

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
        group = 1.0 if m.kv_latent else (m.heads / self.attn_tp) / self.kv_heads_per_gpu()
        reads = 1.0 + self.engine.query_head_kv_reads * max(0.0, group - 1.0)
        kv = ctx * self.kv_bytes_per_token_gpu() * reads / self.hbm
        attn_flops = (ctx * self.stage_layers * m.attention_share * (m.heads / self.tp)
                      * self.decode_attn_flops_per_key())
        kv = max(kv, attn_flops / (self.flops_rate * ATTENTION_EFF))
        # a hybrid model's recurrent mixers read and write each sequence's state per token
        kv += 2.0 * b * self.state_bytes_gpu() / self.hbm
        act = b * m.hidden * ACT_BYTES
        ar, ep_s = self._layer_comm(b, act)
        host = self.engine.step_s + self.engine.per_seq_s * batch
        full = DecodeTimes(weights_s=pp * weights, kv_s=pp * kv, compute_s=pp * compute,
                           comm_s=pp * ar, p2p_s=pp * self._p2p(act),
                           launch_s=pp * self._launch(), host_s=host, ep_s=pp * ep_s,
                           kernels_s=pp * self._kernels("decode"),
                           host_hidden=self.engine.overlap_host)
        if mb == pp:  # every stage busy: the last (with the output head) sets the pace
            return full
        # fewer micro-batches than stages: a token passes every stage once, and only the
        # last runs the output head; the pipe is bound by that walk, not by pp x the last
        head_w = self._head_params() / self.tp * self.wbytes / self.hbm
        head_c = 2.0 * self._head_params() * b / self.tp / self.flops_rate
        walk = replace(full, weights_s=full.weights_s - (pp - 1) * head_w,
                       compute_s=full.compute_s - (pp - 1) * head_c)
        f = mb / pp  # ... unless the last stage's share of the micro-batches is longer
        busy = DecodeTimes(**{k: v if k in ("host_s", "host_hidden") else f * v
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
        # the weight reads and the math add up: at a prefill's few hundred tokens per
        # GEMM the two are of one size and the kernels do not hide one behind the other
        # (TensorRT-LLM's batch-1 first-token latencies on A100, where both are ~200 us
        # a layer at 128 tokens, measure their sum); at thousands of tokens the math
        # dominates and the reads add a few per cent
        gemm = gemm + self._weights_read_bytes(tokens) / self.hbm
        attn = self._prefill_attention(pairs, tokens)
        act = tokens * m.hidden * ACT_BYTES
        ar, ep_s = self._layer_comm(tokens, act)
        fill = mb + pp - 1
        host = self.engine.step_s + self.engine.per_seq_s * n_seq
        return PrefillTimes(gemm_s=fill * gemm, attention_s=fill * attn,
                            comm_s=fill * (ar + ep_s), p2p_s=fill * self._p2p(act),
                            launch_s=fill * self._launch(), host_s=host,
                            ep_s=fill * ep_s, kernels_s=fill * self._kernels("prefill"))

    def prefill_marginal_s(self, prompt: int) -> float:
        """GPU time one more prompt adds to an iteration it shares (chunked prefill): its
        FLOPs, attention and all-reduce bytes on a stage (each stage works through every
        micro-batch once an iteration, so a stage's share is what the iteration gains);
        no weight reads, launches or host time (the iteration pays those already)."""
        return self._prefill_compute(prompt)

    def _prefill_compute(self, prompt: int) -> float:
        m = self.m
        gemm = self._gemm_flops(prompt, 1) / self.flops_rate
        attn = self._prefill_attention(self.attn_pairs(prompt), prompt)
        ar, ep_s = self._layer_comm(prompt, prompt * m.hidden * ACT_BYTES)
        return gemm + attn + ar + ep_s


def expected_max_binomial(n: int, p: float, k: int) -> float:
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


def no_room(lay: Instance, kv_cap: float, *, tp: int, pp: int, precision: str
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


def check_request(model: TransformerSpec, prompt_len: int, output_len: int,
                   batch: int | None = None) -> None:
    """Sizes of a request (and its batch) that are positive integers, and a context
    within the model's position limit (``max_context``); errors name the flag."""
    sizes = (() if batch is None else (("batch", batch),)) + (
        ("prompt_len", prompt_len), ("output_len", output_len))
    for name, v in sizes:
        positive(name, v, "--" + name.replace("_", "-"))
    limit = model.max_context
    if limit is not None and prompt_len + output_len > limit:
        raise ConfigError(f"--prompt-len {prompt_len} + --output-len {output_len} = "
                          f"{prompt_len + output_len} tokens exceeds {model.name}'s context "
                          f"of {limit:,} (max_context): shorten them, or set max_context "
                          f"in the scenario's training section for a longer-context "
                          f"variant", field="inference.prompt_len")


def positive(name: str, v: object, flag: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{flag} must be a positive integer, got {v!r}",
                          field=f"inference.{name}")
    return v


def build_instance(model: TransformerSpec, fabric: Fabric, *, tp: int, pp: int, ep: int,
            precision: str, kv_precision: str | None, engine: str | ServingEngine,
            comm: CommModel | None, first_rank: int = 0, attention_dp: int = 1,
            ep_kernel: str | None = None, redundant_experts: int = 0) -> Instance:
    """Validate a serving instance; every error names the flag and a fix."""
    if model.is_hybrid and not model.blocks("*"):
        raise ConfigError(f"{model.name}'s hybrid_pattern has no attention block (*): "
                          f"serving counts the cache in tokens of KV cache, which a model "
                          f"of recurrent blocks only does not keep; add an attention block "
                          f"(training models it as it is)", field="training.hybrid_pattern")
    positive("tp", tp, "--tp")
    positive("pp", pp, "--pp")
    positive("ep", ep, "--ep")
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision must be bf16, fp8, fp8-weights or nvfp4, got "
                          f"{precision!r}", field="inference.precision")
    kvp = kv_precision or ("fp8" if precision in ("fp8", "nvfp4") else "bf16")
    if kvp not in PRECISION_BYTES:
        raise ConfigError(f"--kv-precision must be bf16 or fp8, got {kvp!r}",
                          field="inference.kv_precision")
    eng = get_engine(engine)
    gpu = get_catalog().gpu(fabric.info.gpu)
    if PRECISIONS[precision][1] == "fp8" and gpu.fp8_flops <= 0:
        raise ConfigError(f"{gpu.name} has no FP8 tensor cores: use --precision fp8-weights "
                          f"(FP8 weights, 16-bit math) or bf16", field="inference.precision")
    if PRECISIONS[precision][1] == "fp4" and gpu.fp4_flops <= 0:
        raise ConfigError(f"{gpu.name} has no FP4 tensor cores (NVFP4 needs Blackwell): use "
                          f"--precision fp8 or bf16", field="inference.precision")
    n = tp * pp
    free = fabric.n_gpus - first_rank
    if n > free:
        what = f"tp={tp} x pp={pp} = {n} GPUs" if pp > 1 else f"tp={tp}"
        raise ConfigError(f"{what} exceeds the {free} GPUs of the cluster left for this "
                          f"instance; add --nodes or lower --tp/--pp",
                          field="inference.pp" if pp > 1 else "inference.tp")
    positive("attention_dp", attention_dp, "--attention-dp")
    if redundant_experts < 0:
        raise ConfigError(f"--redundant-experts must be >= 0, got {redundant_experts}",
                          field="inference.redundant_experts")
    if redundant_experts and attention_dp == 1:
        raise ConfigError("--redundant-experts places extra expert copies over wide EP: "
                          "give --attention-dp (with --ep equal to --tp) or drop it",
                          field="inference.redundant_experts")
    if attention_dp > 1:
        _check_wide_ep(model, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp,
                       redundant=redundant_experts)
    elif ep_kernel is not None:
        raise ConfigError("--ep-kernel names the dispatch/combine kernels of data-parallel "
                          "attention with wide EP; give --attention-dp (with --ep equal to "
                          "--tp) or drop it (experts inside the TP group need no "
                          "all-to-all)", field="inference.ep_kernel")
    if ep_kernel is not None:
        from fabricsim.collectives.ep import ep_kernel as kernel_name

        kernel_name(ep_kernel, "inference.ep_kernel")
    if attention_dp == 1 and model.heads % tp:  # suggest sizes the cluster can hold
        ok = [d for d in range(1, model.heads + 1) if model.heads % d == 0 and d * pp <= free]
        raise ConfigError(f"tp={tp} must divide the {model.heads} attention heads of "
                          f"{model.name}; use --tp {', '.join(map(str, ok[-6:]))}",
                          field="inference.tp")
    if model.layers % pp:
        ok = [d for d in range(1, model.layers + 1) if model.layers % d == 0 and d * tp <= free]
        raise ConfigError(f"pp={pp} must divide the {model.layers} layers of {model.name}; "
                          f"use --pp {', '.join(map(str, ok[:8]))}", field="inference.pp")
    if ep > 1 and attention_dp == 1:
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
    return Instance(m=model, fabric=fabric, gpu=gpu, tp=tp, pp=pp, ep=ep,
                   precision=precision, kv_precision=kvp, engine=eng,
                   comm=comm if comm is not None else EngineComm(fabric),
                   first_rank=first_rank, attention_dp=attention_dp, ep_kernel=ep_kernel,
                   redundant_experts=redundant_experts)


def _check_wide_ep(model: TransformerSpec, *, tp: int, pp: int, ep: int,
                   attention_dp: int, redundant: int = 0) -> None:
    """Data-parallel attention with wide EP: the layouts that can be placed."""
    if not model.is_moe:
        raise ConfigError(f"--attention-dp serves the experts of a mixture-of-experts model "
                          f"over the instance; {model.name} is dense (drop it)",
                          field="inference.attention_dp")
    if tp % attention_dp:
        ok = [d for d in range(2, tp + 1) if tp % d == 0]
        raise ConfigError(f"attention_dp={attention_dp} must divide tp={tp} (the "
                          f"instance's GPUs): use --attention-dp "
                          f"{', '.join(map(str, ok[-4:]))}", field="inference.attention_dp")
    if model.heads % (tp // attention_dp):
        raise ConfigError(f"each attention group of tp/attention_dp = {tp // attention_dp} "
                          f"GPUs must divide the {model.heads} heads of {model.name}: use "
                          f"--attention-dp {tp}", field="inference.attention_dp")
    if pp != 1:
        raise ConfigError("data-parallel attention with wide EP runs one pipeline stage "
                          "(as SGLang does): give --pp 1", field="inference.pp")
    if ep != tp:
        raise ConfigError(f"with --attention-dp the experts spread over all {tp} GPUs of "
                          f"the instance: give --ep {tp} (got {ep})", field="inference.ep")
    placed = model.experts + redundant
    if placed % ep:
        divs = [d for d in range(2, placed + 1) if placed % d == 0]
        extra = (-model.experts) % ep
        raise ConfigError(f"ep={ep} must divide the {placed} experts placed ({model.experts} "
                          f"of {model.name}" + (f" + {redundant} redundant" if redundant
                                                else "")
                          + f"; EP larger than the experts, or uneven): use --tp/--ep "
                          f"{', '.join(map(str, divs[-4:] if ep > placed else divs[:6]))}, "
                          f"or --redundant-experts {extra} (SGLang's EPLB copies)",
                          field="inference.ep")


def span_warning(lay: Instance) -> list[str]:
    dom = lay.fabric.info.nvlink_domain_gpus
    if lay.wide_ep:
        if lay.tp > max(1, dom):
            return [f"the {lay.tp} GPUs of wide EP span beyond the NVLink domain ({dom} "
                    f"GPUs): dispatch and combine cross the scale-out network"]
        return []
    if lay.tp > max(1, dom):
        return [f"tp={lay.tp} spans beyond the NVLink domain ({dom} GPUs): every layer's "
                f"all-reduces cross the slower link"]
    return []
