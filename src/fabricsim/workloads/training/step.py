"""Step time of a training job: compute, exposed communication by kind, pipeline bubble.

One step processes ``global_batch`` sequences as ``m = num_micro`` micro-batches per
pipeline. Per micro-batch and stage, a GPU spends ``fwd + bwd`` in compute plus the
communication that cannot hide:

* **TP** (per layer): with sequence parallelism 2 all-gathers + 2 reduce-scatters of the
  layer's activation ``b·s·h·2`` bytes forward and again backward (the all-gathers in
  FP8, ``b·s·h`` bytes, under ``precision="fp8"``, in NVFP4 under ``"fp4"``; without SP,
  2 all-reduces each way);
  full recomputation repeats the forward ones. Not overlapped
  unless ``tp_overlap`` > 0.
* **EP** (per MoE layer): all-to-all dispatch + combine forward and backward (dispatch in
  FP8 under ``precision="fp8"``; one copy per server with ``moe_node_limit``); hidden
  under another micro-batch's compute with ``ep_overlap`` (DualPipe). With
  ``moe_imbalance`` > 1 the busiest rank's all-to-all share and routed-expert GEMMs grow
  by that factor, and the step waits for it.
* **CP** (per layer): ring attention passes K/V chunks ``cp − 1`` times forward (twice the
  bytes backward), each step paced by the slowest hop of the ring (the one that leaves a
  server, if any), hidden behind the attention core where it is long enough.
* **DP**: gradient reduce-scatter (ZeRO ≥ 1) or all-reduce (ZeRO-0) over ``dp·cp`` ranks,
  overlapped with the backward pass of the last micro-batch, bucket by bucket, so at least
  one layer's bucket stays exposed; ZeRO-1/2 all-gather updated weights overlapped with the
  next forward; ZeRO-3 gathers weights for every micro-batch's forward and backward and
  reduce-scatters gradients every micro-batch, prefetched behind compute. Those gathers
  and reductions also stream the whole unsharded stage through HBM every micro-batch
  (gathered weights written, gradients cast, divided and reduced:
  :func:`fsdp_kernel_bytes` per parameter), work that grows with the parameters, not the
  tokens, and takes the GPU from the compute beside it (booked to compute: no byte of it
  crosses a link).
* **Tied embeddings** (input embedding = output head) with PP: the first and last stage
  all-reduce that matrix's gradient after the DP sync, exposed.
* **PP**: activations and gradients between stages. Plain 1F1B (Megatron-LM without
  interleaving) waits on each exchange: two transfers per micro-batch sit on the critical
  path. Interleaved 1F1B overlaps them (``overlap_p2p_comm``, Megatron's default with
  virtual stages), so only the fill and drain wait: ``2·(p·v − 1)`` transfers.

Step = ``m·t_mb + (p − 1)/v · t_mb + PP + exposed DP + optimizer`` with ``t_mb`` the
per-micro-batch stage time (1F1B bubble ``(p−1)/v`` micro-batch slots, Narayanan et al.
2021; DualPipe's ``(p/2 − 1)(F&B + B − 3W)``, see :func:`pipeline_bubble`).

Example
-------
>>> import fabricsim as fs
>>> from fabricsim.workloads.models import get_model
>>> from fabricsim.workloads.training.parallel import ParallelConfig
>>> fab = fs.build_cluster("dgx-h100", nodes=1, gpus_per_node=1)
>>> r = simulate_step(get_model("llama2-7b"), ParallelConfig(recompute="full",
...                   seq_len=2048), fab, check_memory=False)
>>> r.breakdown["tp"] + r.breakdown["dp"] + r.breakdown["pp"]
0.0
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fabricsim.catalog import get_catalog
from fabricsim.errors import ModelError, OutOfMemoryError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular
from fabricsim.workloads.comm import CommModel, EngineComm, GroupComm
from fabricsim.workloads.flops import training_flops_per_token
from fabricsim.workloads.gpu import (
    HBM_EFF,
    attention_kernel_eff,
    generation,
    peak_flops,
    power_capped,
)
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.compute import ComputeTimes, microbatch_compute
from fabricsim.workloads.training.memory import (
    MemoryEstimate,
    cheapest_fit,
    memory_per_gpu,
    offload_bytes_per_layer,
    stage_params,
)
from fabricsim.workloads.training.parallel import (
    ParallelConfig,
    ResolvedParallel,
    placement_warnings,
)

__all__ = [
    "COMM_KINDS",
    "DP_OVERLAP_SM_SHARE",
    "EP_OVERLAP_EFFICIENCY",
    "EP_OVERLAP_SM_SHARE",
    "TP_OVERLAP_EFFICIENCY",
    "StepResult",
    "check_layout",
    "comm_cost",
    "distinct_servers",
    "fsdp_kernel_bytes",
    "pipeline_bubble",
    "ring_hop_time",
    "routed_servers",
    "simulate_step",
]

COMM_KINDS = ("tp", "ep", "cp", "pp", "dp")
_GIB = 2**30

#: Share of the GEMM time of a layer under which Megatron/NeMo's TP communication overlap
#: (Transformer Engine userbuffers: GEMMs split into chunks whose all-gather /
#: reduce-scatter run beside the previous chunk's GEMM) can hide TP traffic, per GPU
#: generation. Communication kernels take SMs and memory bandwidth from the GEMMs, so not
#: all of it is usable. Assumption (no reference row isolates it): Hopper and Blackwell,
#: with copy-engine/multimem collectives, 0.8; Ampere, SM-driven collectives only, 0.6.
#: Checked, not fitted, by the Megatron GPT-3 rows (174) of benchmarks/accuracy_training.py.
TP_OVERLAP_EFFICIENCY = {"volta": 0.5, "ampere": 0.6, "ada": 0.6, "hopper": 0.8,
                         "blackwell": 0.8}
#: The same for expert-parallel all-to-all hidden behind the other micro-batch's compute
#: when dispatch/combine are overlapped (DeepSeek-V3's DualPipe, Megatron's
#: ``--overlap-moe-expert-parallel-comm``): the share of a micro-batch's forward+backward
#: compute the all-to-all can hide under. A dispatch or combine waits for the layer part
#: before it and feeds the one after, so only the other micro-batch's chunk running at the
#: same time can cover it. Fitted once, for Hopper and Blackwell together (one Megatron /
#: DeepEP mechanism), on every other NeMo table row that overlaps its all-to-all
#: (``python benchmarks/accuracy_nemo.py --fit ep-overlap``): 0.8 (an assumption until
#: then) -> 0.45, held-out median error 15.8 % -> 8.2 %; DeepSeek-V3's report row (DualPipe,
#: not in the fit) +24.5 % -> +20.2 %. Volta/Ampere/Ada scaled alike (no rows).
EP_OVERLAP_EFFICIENCY = {"volta": 0.28, "ampere": 0.34, "ada": 0.34, "hopper": 0.45,
                         "blackwell": 0.45}
#: Share of a GPU's SMs that overlapped expert all-to-all kernels hold for the whole
#: steady state, so the compute-bound kernels beside them run on the rest. DeepSeek-V3's
#: dispatch/combine kernels (DeepSeek-V3 report, sec. 3.2.2: 20 of the H800's 132 SMs;
#: DeepEP's default of 20 SMs for its normal kernels): 20 / SM count of the generation
#: (Hopper 132, Blackwell 148, Ampere 108). A hardware fact, not fitted. Only with
#: ``ep_overlap``: unoverlapped all-to-alls take the whole GPU in their own time.
EP_OVERLAP_SM_SHARE = {"volta": 20 / 80, "ampere": 20 / 108, "ada": 20 / 142,
                       "hopper": 20 / 132, "blackwell": 20 / 148}
#: Share of a GPU's SMs that a data-parallel collective (gradient reduce-scatter or
#: all-reduce, parameter all-gather; FSDP's per-layer gathers) holds while it runs
#: hidden behind compute: NCCL runs one thread block per channel, and its ring and tree
#: collectives between 8-GPU servers use 16 channels (``NCCL INFO 16 coll channels`` on
#: DGX H100/H800 and DGX A100), so 16 / SM count of the generation. The compute-bound
#: kernels that run beside it run on the rest; memory-bound ones are not slowed. A
#: hardware/library fact, not fitted; un-overlapped collectives take their own time.
DP_OVERLAP_SM_SHARE = {"volta": 16 / 80, "ampere": 16 / 108, "ada": 16 / 142,
                       "hopper": 16 / 132, "blackwell": 16 / 148}


def _dp_shards(p: ResolvedParallel, dense: float, expert: float) -> list[tuple[str, float]]:
    """The data-parallel groups of more than one rank (``"dp"`` over ``dp·cp`` for the
    dense parameters, ``"edp"`` for the routed experts) and the parameters each one
    reduces and, under ZeRO, shards."""
    out = [("dp", dense)] if p.dp * p.cp > 1 else []
    if expert > 0 and p.edp > 1:
        out.append(("edp", expert))
    return out


def fsdp_kernel_bytes(cfg: ParallelConfig) -> float:
    """HBM bytes per parameter that ZeRO-3 / FSDP's own kernels move for one micro-batch
    (for a step, when a pipelined FSDP keeps its weights gathered).

    Counted from PyTorch FSDP's per-unit work: each all-gather writes the gathered BF16
    weights and reads the chunks it forwards (2 x 2 B; FSDP gathers for the forward and,
    resharding after it, again for the backward); the gradient is cast to the reduce
    dtype when that is not BF16 (2 B read, ``grad_bytes`` written), divided in place
    before the reduction (2 x ``grad_bytes``), and reduce-scattered, reading its input
    and the peer's partial sums and writing the sum (3 x ``grad_bytes``). 34 B with FP32
    reduction (FSDP's ``reduce_dtype=float32``, llm-foundry's DEFAULT, torchtitan's
    default), 18 B with BF16 (llm-foundry's PURE). That is FSDP1's count; FSDP2 averages
    inside NCCL (no divide) but copies the gathered weights out of the gather buffer and
    the gradients into the reduce buffer, about as many bytes. Megatron-FSDP
    (``fsdp_impl="megatron"``) reduces straight from its gradient buckets and scales
    inside the collective: only the gathers and the reduce-scatter remain (14 B with BF16
    reduction, 20 B with FP32). These kernels run on FSDP's side streams but share the
    GPU with the compute beside them: the step is charged their time at
    :data:`~fabricsim.workloads.gpu.HBM_EFF` of HBM bandwidth, as compute. A count from
    the code, not fitted: checked on llm-foundry's MPT tables (``benchmarks/
    accuracy_llmfoundry.py``), where a 13B model at 2 sequences per micro-batch runs
    20 % below what its FLOPs give and the same model at 16 does not.

    Examples
    --------
    >>> fsdp_kernel_bytes(ParallelConfig(zero="fsdp", grad_reduce_dtype="fp32"))
    34.0
    >>> fsdp_kernel_bytes(ParallelConfig(zero="fsdp", reshard_after_forward=False))
    14.0
    >>> fsdp_kernel_bytes(ParallelConfig(zero="fsdp", fsdp_impl="megatron"))
    14.0
    """
    gb = float(cfg.grad_bytes)
    gathers = 1 if cfg.keeps_gathered else 2
    reduce = 3 * gb
    if cfg.fsdp_impl == "pytorch":  # cast to the reduce dtype, divide in place
        reduce += (2.0 + gb if gb != 2.0 else 0.0) + 2 * gb
    return gathers * 2 * 2.0 + reduce


@dataclass(frozen=True)
class StepResult(Tabular):
    """What one training step costs, and what it means in money.

    ``breakdown`` holds seconds per step: ``compute`` (all micro-batches, including
    recomputation), ``bubble`` (pipeline fill/drain), exposed ``tp``, ``ep``, ``cp``,
    ``pp``, ``dp`` communication and ``optimizer``; they sum to ``step_time_s``.
    ``to_dict()`` / ``to_pandas()`` flatten :meth:`as_dict` into one row
    (``breakdown.compute``, ``parallel.tp``, ...).
    """

    model: str
    world: int
    parallel: dict[str, Any]
    step_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    hw_tflops_per_gpu: float
    mfu: float
    hfu: float
    breakdown: dict[str, float]
    comm_total_s: dict[str, float]
    memory: MemoryEstimate
    gpu_memory_bytes: float
    gpu_hour_usd: float
    warnings: list[str] = field(default_factory=list)
    total_tokens: float | None = None

    @property
    def memory_per_gpu_gib(self) -> float:
        """Estimated memory per GPU in GiB."""
        return self.memory.total / _GIB

    @property
    def exposed_comm_s(self) -> float:
        """Seconds per step the GPUs wait on communication."""
        return sum(self.breakdown[k] for k in COMM_KINDS)

    @property
    def comm_fraction(self) -> float:
        """Share of the step lost to exposed communication."""
        return self.exposed_comm_s / self.step_time_s

    @property
    def compute_fraction(self) -> float:
        """Share of the step spent computing (the seed's "scaling efficiency")."""
        return self.breakdown["compute"] / self.step_time_s

    @property
    def idle_gpus(self) -> float:
        """GPU equivalents idle on communication: ``world × comm_fraction``."""
        return self.world * self.comm_fraction

    @property
    def comm_usd_per_day(self) -> float:
        """Money per day spent on GPUs waiting for the network."""
        return self.idle_gpus * 24.0 * self.gpu_hour_usd

    def run(self, total_tokens: float) -> dict[str, float]:
        """Duration and cost of training on ``total_tokens`` tokens.

        Examples
        --------
        >>> import fabricsim as fs
        >>> from fabricsim.workloads.models import get_model
        >>> fab = fs.build_cluster("dgx-h100", nodes=1, gpus_per_node=1)
        >>> r = simulate_step(get_model("llama2-7b"), ParallelConfig(seq_len=2048,
        ...                   recompute="full"), fab, check_memory=False)
        >>> r.run(1e9)["comm_usd"]
        0.0
        """
        seconds = total_tokens / self.tokens_per_s
        hours = seconds / 3600.0
        return {"tokens": total_tokens, "days": seconds / 86400.0,
                "gpu_hours": hours * self.world,
                "cost_usd": hours * self.world * self.gpu_hour_usd,
                "comm_usd": hours * self.idle_gpus * self.gpu_hour_usd}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (SI units, with GiB where named)."""
        d: dict[str, Any] = {
            "model": self.model, "gpus": self.world, "parallel": self.parallel,
            "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s / self.world,
            "tflops_per_gpu": self.tflops_per_gpu, "hw_tflops_per_gpu": self.hw_tflops_per_gpu,
            "mfu": self.mfu, "hfu": self.hfu, "breakdown": dict(self.breakdown),
            "comm_total_s": dict(self.comm_total_s),
            "exposed_comm_s": self.exposed_comm_s, "comm_fraction": self.comm_fraction,
            "compute_fraction": self.compute_fraction,
            "memory_per_gpu_gib": self.memory_per_gpu_gib,
            "memory_gib": {k: v / _GIB for k, v in self.memory.as_dict().items()},
            "gpu_memory_gib": self.gpu_memory_bytes / _GIB,
            "idle_gpu_equivalent": self.idle_gpus, "gpu_hour_usd": self.gpu_hour_usd,
            "comm_usd_per_day": self.comm_usd_per_day, "warnings": list(self.warnings),
        }
        if self.total_tokens:
            d["run"] = self.run(self.total_tokens)
        return d


def _exposed(comm: float, window: float, floor_frac: float) -> float:
    """Communication left over after hiding it behind ``window`` seconds of compute; at
    least ``floor_frac`` of it (the last bucket) stays exposed."""
    return max(comm - window, comm * floor_frac, 0.0)


def distinct_servers(experts: int, top_k: int, servers: int,
                     node_limit: int | None = None) -> float:
    """Expected number of servers a token's ``top_k`` routed experts sit on.

    The ``experts`` are spread evenly over ``servers``; the router picks ``top_k``
    distinct experts at random (balanced routing), within ``node_limit`` servers when
    routing is node-limited (DeepSeek-V3 picks the servers first, then the experts among
    theirs). A server is missed when all ``top_k`` picks fall elsewhere.

    Examples
    --------
    >>> round(distinct_servers(256, 8, 8, node_limit=4), 2)  # DeepSeek-V3 on 8 servers
    3.63
    >>> round(distinct_servers(256, 8, 4), 2), distinct_servers(8, 2, 1)
    (3.61, 1.0)
    """
    if experts < 1 or top_k < 1 or servers < 1:
        raise ModelError("experts, top_k and servers must be >= 1", field="training.ep")
    reach = min(node_limit or servers, servers)
    per = experts / servers
    pool = per * reach
    miss = 1.0  # P(no pick lands on a given server of the reach)
    for i in range(top_k):
        if pool - per - i <= 0:
            miss = 0.0
            break
        miss *= (pool - per - i) / (pool - i)
    return reach * (1.0 - miss)


#: Group choices :func:`routed_servers` averages over exactly; beyond it, the groups'
#: servers stand in as a node limit.
_GROUP_CHOICES_MAX = 20_000


def routed_servers(m: TransformerSpec, ep_servers: Sequence[int],
                   node_limit: int | None = None) -> float:
    """Expected number of servers one token's routed experts sit on, for an EP group
    whose rank ``j`` is on server ``ep_servers[j]`` (experts spread evenly, rank ``j``
    holding the ``j``-th block of consecutive experts).

    ``node_limit`` (an explicit limit) is :func:`distinct_servers`'s. Otherwise a model
    with group-limited routing (``router_groups``, ``router_group_topk``) picks its best
    groups first (at random under balanced routing) and its ``top_k`` experts among
    theirs; the expectation is taken over every choice of groups. Where each group sits
    on one server this is node-limited routing; where groups share servers or span
    several, the servers the chosen groups cover decide.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> ds = get_model("deepseek-v3")  # 8 groups of 32 experts, the best 4
    >>> round(routed_servers(ds, [j // 8 for j in range(64)]), 2)  # EP 64, 8 servers
    3.63
    >>> round(routed_servers(ds, [j // 4 for j in range(64)]), 2)  # 16: 2 per group
    5.34
    >>> round(routed_servers(ds.model_copy(update={"router_groups": 1}),
    ...                      [j // 4 for j in range(64)]), 2)  # no group limit
    6.52
    """
    servers = sorted(set(ep_servers))
    n_srv = len(servers)
    groups, pick = m.router_groups, m.router_group_topk
    if node_limit is not None or groups <= 1 or pick is None or pick >= groups \
            or n_srv <= 1:
        return distinct_servers(m.experts, m.top_k, n_srv, node_limit)
    ep = len(ep_servers)
    per_rank, per_group = m.experts / ep, m.experts // groups
    where = {srv: i for i, srv in enumerate(servers)}
    held = [[0] * groups for _ in servers]  # experts of group g on server i
    for e in range(m.experts):
        held[where[ep_servers[int(e // per_rank)]]][e // per_group] += 1
    if math.comb(groups, pick) > _GROUP_CHOICES_MAX:  # the chosen groups' servers
        spans = sum(sum(1 for row in held if row[g]) for g in range(groups)) / groups
        return distinct_servers(m.experts, m.top_k, n_srv,
                                max(1, min(n_srv, round(pick * spans))))
    import numpy as np

    pool = pick * per_group
    chosen = np.zeros((math.comb(groups, pick), groups))
    for c, combo in enumerate(itertools.combinations(range(groups), pick)):
        chosen[c, list(combo)] = 1.0
    here = chosen @ np.asarray(held, dtype=np.float64).T  # experts within reach, per server
    miss = np.ones_like(here)  # P(no pick on the server | the groups chosen)
    for i in range(m.top_k):
        miss *= np.clip(pool - here - i, 0.0, None) / (pool - i)
    return float((1.0 - miss).sum(axis=1).mean())


def pipeline_bubble(pp: int, vp: int, schedule: str, t_mb: float, bwd: float,
                    wgrad: float) -> float:
    """Seconds per step a pipeline stage idles in fill and drain.

    ``t_mb`` is one micro-batch's forward + backward on a stage (exposed communication
    included), ``bwd`` its full backward and ``wgrad`` the weight-gradient part of it.
    ``1f1b``: ``(pp − 1)/v`` micro-batch slots (Narayanan et al. 2021). ``dualpipe``:
    DeepSeek's Table 2, ``(pp/2 − 1)(F&B + B − 3W)``, with ``F&B`` (a forward and a
    backward chunk overlapped with each other's communication) taken as ``t_mb``: the
    two directions fill half the pipeline each and the deferred weight gradients fill
    part of what is left.

    Examples
    --------
    >>> pipeline_bubble(16, 1, "1f1b", 3.0, 2.0, 1.0)  # F = 1, B = 2, W = 1
    45.0
    >>> pipeline_bubble(16, 1, "dualpipe", 3.0, 2.0, 1.0)
    14.0
    """
    if schedule == "dualpipe":
        return max(0.0, (pp / 2 - 1) * (t_mb + bwd - 3.0 * wgrad))
    return (pp - 1) / vp * t_mb


def interleave_splits(counts: Sequence[int]) -> list[int]:
    """Virtual-stage counts above one that every pipeline stage's layers divide into.

    >>> interleave_splits([12, 12]), interleave_splits([7, 8, 7])
    ([2, 3, 4, 6, 12], [])
    """
    return [v for v in range(2, max(counts, default=1) + 1)
            if all(c % v == 0 for c in counts)]


def _interleave_hint(p: ResolvedParallel, micro: int, bubble: float, step: float
                     ) -> list[str]:
    """A warning when plain 1F1B leaves a large bubble that interleaving would cut: runs
    at scale interleave (NeMo's recipes, NVIDIA's MLPerf GPT-3, Meta's Llama 3), so a
    layout given without ``vp`` is most often not what was run."""
    cfg = p.cfg
    if p.pp < 2 or cfg.interleave > 1 or cfg.pp_schedule != "1f1b" or step <= 0 \
            or bubble < 0.15 * step:
        return []
    vs = interleave_splits(p.stage_layer_counts or (p.stage_layers,))
    if not vs:
        return []
    v = next((v for v in vs if bubble / v < 0.05 * step), vs[-1])
    after = (bubble / v) / (step - bubble + bubble / v)
    return [f"the pipeline bubble is {bubble / step:.0%} of the step: plain 1F1B with "
            f"{micro} micro-batches over pp={p.pp}. Runs at this scale interleave (NeMo's "
            f"recipes, MLPerf's GPT-3, Meta's Llama 3); --vp {v} would cut it to about "
            f"{after:.0%} if memory allows"]


def ring_hop_time(comm: CommModel, ranks: list[int], nbytes: float) -> float:
    """Seconds of one step of a ring over ``ranks``: every rank sends ``nbytes`` to the next
    at once, so the slowest hop (e.g. the one that leaves a server) sets the pace.

    Every hop is asked for, the wrap-around back to the first rank included;
    :class:`EngineComm` answers hops of the same shape (servers spanned, stride) from its
    cache, so a ring costs a few engine calls whatever its size.

    Examples
    --------
    >>> class Servers:  # 8 GPUs per server; leaving one costs 10x
    ...     def time(self, collective, ranks, nbytes):
    ...         return 1.0 if ranks[0] // 8 != ranks[1] // 8 else 0.1
    >>> ring_hop_time(Servers(), [0, 2, 4, 6], 1e6)
    0.1
    >>> ring_hop_time(Servers(), [0, 2, 4, 6, 8, 10, 12, 14], 1e6)
    1.0
    """
    n = len(ranks)
    if n < 2:
        return 0.0
    hops = [(ranks[i], ranks[(i + 1) % n]) for i in range(n if n > 2 else 1)]
    return max(comm.time("sendrecv", [a, b], nbytes) for a, b in hops)


class _Siblings:
    """``comm`` asked for a group of ``p``'s job: when it can time several groups at
    once (:class:`~fabricsim.workloads.comm.FlowComm`, with faults), the group and all
    its siblings (:meth:`ResolvedParallel.siblings`), the slowest answering; else the
    group alone (on a symmetric fabric every sibling takes as long)."""

    def __init__(self, comm: CommModel, p: ResolvedParallel, moe: bool = False) -> None:
        self.comm, self.p, self.moe = comm, p, moe
        self.many = comm.time_all if isinstance(comm, GroupComm) else None

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        if self.many is None or len(ranks) <= 1 or nbytes <= 0:
            return self.comm.time(collective, ranks, nbytes)
        return self.many(collective, self.p.siblings(ranks, self.moe), nbytes)


def _part(comm: CommModel, kind: str) -> None:
    """Tell a communication model that records its runs (``WholeFabricComm.part``) which
    part of the step (``tp``, ``ep``, ``cp``, ``pp`` or ``dp``) the next calls time."""
    tell = getattr(comm, "part", None)
    if callable(tell):
        tell(kind)


def ep_kernel_of(cfg: ParallelConfig) -> str:
    """The EP kernel family a layout's MoE tokens travel by (:mod:`fabricsim.collectives.ep`
    names): its dispatcher, with node-limited routing on NCCL's all-to-all timed as
    DeepEP's normal kernels (one network copy per server needs them).

    >>> ep_kernel_of(ParallelConfig(ep=8, moe_dispatcher="low_latency"))
    'deepep-ll'
    """
    d = cfg.moe_dispatcher
    if d == "alltoall":
        return "deepep" if cfg.moe_node_limit else "nccl"
    return d


def comm_cost(m: TransformerSpec, p: ResolvedParallel, comm: CommModel,
              ct: ComputeTimes, generation: str = "hopper", domain_gpus: int = 0
              ) -> tuple[dict[str, float], dict[str, float]]:
    """Exposed communication per micro-batch (``tp``, ``ep``, ``cp``, ``dp_mb``) and per
    step (``pp``, ``dp``), and the total (hidden or not) per step, in seconds.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.training.compute import ComputeTimes
    >>> class Free:
    ...     def time(self, collective, ranks, nbytes):
    ...         return 0.0
    >>> m = get_model("llama2-7b")
    >>> p = ParallelConfig(tp=8).resolve(m, world=8)
    >>> exp, tot = comm_cost(m, p, Free(), ComputeTimes(1, 2, 0, 0, 0))
    >>> sum(exp.values())
    0.0
    """
    raw, comm = comm, _Siblings(comm, p)  # a synchronous step waits for every group
    cfg = p.cfg
    b, h = cfg.micro_batch, m.hidden
    s_local = p.seq / p.cp
    act = b * s_local * h * 2.0
    sp_split = p.tp if p.sp else 1
    layers = p.stage_layers
    moe_layers = m.moe_layers / p.pp
    rc = cfg.recompute
    fwd_passes = 2 if rc == "full" else 1
    m_micro = p.num_micro

    exp: dict[str, float] = {"tp": 0.0, "ep": 0.0, "cp": 0.0, "dp_mb": 0.0, "pp_mb": 0.0}
    tot: dict[str, float] = {k: 0.0 for k in COMM_KINDS}

    # --- tensor parallel -------------------------------------------------------------
    _part(raw, "tp")
    if p.tp > 1:
        g = p.group("tp")
        if p.sp:
            # FP8 recipes cast a linear layer's input before the sequence-parallel
            # all-gather (Transformer Engine; torchtitan's float8 tensorwise TP), so
            # the gathers move 1 byte per element, NVFP4's 4 bits plus one E4M3 scale
            # per 16 (0.5625 B); reduce-scatters stay BF16
            ag_b = act * {"fp8": 0.5, "fp4": 0.5625 / 2}.get(cfg.precision, 1.0)
            one = comm.time("all_gather", g, ag_b) + comm.time("reduce_scatter", g, act)
        else:
            one = comm.time("all_reduce", g, act)
        # an attention and an MLP pair per layer; with experts folded out of TP (etp = 1)
        # the MoE layers' tokens go straight from their sequence-parallel shard to the
        # all-to-all, so those layers pay only the attention's pair; a hybrid model's
        # layer is one block (a mixer, an MLP or an MoE block): one pair each
        pairs = 2.0 * m.layer_weight - (
            m.moe_layers / m.layers if m.is_moe and p.etp == 1 else 0.0)
        per_layer = pairs * one * (fwd_passes + 1)
        tp_mb = layers * per_layer
        tot["tp"] = tp_mb * m_micro
        if cfg.tp_overlap > 0:  # an explicit share hidden
            exp["tp"] = tp_mb * (1.0 - cfg.tp_overlap)
        elif cfg.tp_comm_overlap:  # hidden under the GEMMs' usable share
            window = TP_OVERLAP_EFFICIENCY.get(generation, 0.6) * ct.gemm
            exp["tp"] = max(tp_mb - window, 0.0)
        else:
            exp["tp"] = tp_mb

    # --- expert parallel ---------------------------------------------------------------
    _part(raw, "ep")
    if p.ep > 1 and m.is_moe:
        ep_comm = _Siblings(raw, p, moe=True)
        g = p.group("ep")
        tokens = b * s_local / sp_split
        width = m.expert_width_in  # a latent MoE dispatches its latent
        dispatch_b = 1.0 if cfg.precision == "fp8" else 2.0  # FP8 dispatch, BF16 combine
        dom = domain_gpus or p.world
        local = [r for r in g if r // dom == g[0] // dom]
        servers = len({r // dom for r in g})
        kernel = ep_kernel_of(cfg)
        ep_time = getattr(raw, "ep_time", None)
        ep_all = getattr(raw, "ep_time_all", None)
        if ep_all is not None:  # a model that runs the sibling EP groups together
            sibs = p.siblings(g, moe=True)

            def ep_time(kernel: str, phase: str, ranks: Sequence[int], cfg: Any) -> float:
                return float(ep_all(kernel, phase, sibs, cfg))
        if kernel != "nccl" and ep_time is not None:
            # the kernel family's own schedule (fabricsim.collectives.ep), every sibling
            # EP group alike on a symmetric fabric
            from fabricsim.collectives.ep import EpConfig, Routing

            def a2a_time(nbytes: float, phase: str) -> float:
                cfg_ep = EpConfig(
                    tokens=max(round(tokens), 1), hidden=width, top_k=m.top_k,
                    experts=m.experts, dispatch_dtype="fp8" if nbytes == 1.0 else "bf16",
                    routing=Routing(node_limit=cfg.moe_node_limit))
                return float(ep_time(kernel, phase, g, cfg_ep))
        elif kernel != "nccl" and servers > 1:
            # hierarchical dispatch (DeepEP, HybridEP): a token crosses the network once
            # per server holding one of its experts (within its node or group limit),
            # then fans out over NVLink to each expert there; both legs run pipelined,
            # the slower one sets the pace
            fan = routed_servers(m, [r // dom for r in g], cfg.moe_node_limit)

            def a2a_time(nbytes: float, phase: str) -> float:
                net = ep_comm.time("alltoall", g, tokens * fan * width * nbytes)
                nvl = ep_comm.time("alltoall", local, tokens * m.top_k * width * nbytes) \
                    if len(local) > 1 else 0.0
                return max(net, nvl)
        else:  # one copy per routed expert through the EP group

            def a2a_time(nbytes: float, phase: str) -> float:
                return ep_comm.time("alltoall", g, tokens * m.top_k * width * nbytes)
        a2a_d = a2a_time(dispatch_b, "dispatch")
        a2a_c = a2a_time(2.0, "combine")
        # mean of one dispatch and one combine; the busiest rank receives (and sends
        # back) moe_imbalance times the mean, and every rank waits for it
        a2a = (a2a_d + a2a_c) / 2 * cfg.moe_load
        ep_passes = 2 if "moe" in cfg.modules_recomputed else 1  # forward reruns
        ep_mb = moe_layers * a2a * 2 * (ep_passes + 1)
        tot["ep"] = ep_mb * m_micro
        if cfg.ep_overlap:  # dispatch/combine of one micro-batch under another's compute
            window = EP_OVERLAP_EFFICIENCY.get(generation, 0.6) * (ct.fwd + ct.bwd)
            exp["ep"] = max(ep_mb - window, 0.0)
        else:
            exp["ep"] = ep_mb

    # --- context parallel (ring attention) ---------------------------------------------
    _part(raw, "cp")
    if p.cp > 1:
        g = p.group("cp")
        kv = b * s_local * 2 * m.n_kv * m.d_head * 2.0 / p.tp
        t_sr = ring_hop_time(comm, g, kv)
        fwd_c = (p.cp - 1) * t_sr
        bwd_c = 2 * fwd_c
        per_layer = fwd_passes * fwd_c + bwd_c
        tot["cp"] = layers * per_layer * m_micro
        hidden_fwd = min(fwd_c, ct.attn_layer)
        hidden_bwd = min(bwd_c, 2 * ct.attn_layer)
        exp["cp"] = layers * (per_layer - fwd_passes * hidden_fwd - hidden_bwd)

    # --- pipeline ----------------------------------------------------------------------
    _part(raw, "pp")
    pp_exp = 0.0
    if p.pp > 1:
        g = p.group("pp")
        t_p2p = comm.time("sendrecv", g[:2], act / sp_split)
        tot["pp"] = 2 * m_micro * t_p2p * cfg.interleave
        if cfg.p2p_overlapped:  # only the fill and drain wait
            pp_exp = 2 * (p.pp * cfg.interleave - 1) * t_p2p
        else:  # every micro-batch slot waits on its two exchanges (fill/drain included)
            exp["pp_mb"] = 2 * cfg.interleave * t_p2p

    # --- data parallel -----------------------------------------------------------------
    _part(raw, "dp")
    dense, expert = stage_params(m, p)
    z = cfg.zero_stage
    gbytes = float(cfg.grad_bytes)
    dp_exp = 0.0
    # a bucket per transformer layer (a hybrid model's block is half of one)
    buckets = max(1, round(layers * m.layer_weight))
    groups = [(*p.hsdp_groups(kind), n) for kind, n in _dp_shards(p, dense, expert)]
    for g, reps, n in groups:
        if z >= 1 and len(reps) > 1:
            # hybrid sharding: each shard group holds a replica; once a step the
            # replicas all-reduce their gradient shards, behind the last backward
            rep = comm.time("all_reduce", reps, n / len(g) * gbytes)
            tot["dp"] += rep
            dp_exp += _exposed(rep, ct.bwd, 1 / buckets) if cfg.overlap_grad_reduce \
                else rep
        if cfg.keeps_gathered and p.pp > 1:
            # pipelined FSDP that keeps its weights (torch.distributed.pipelining): one
            # gather per step, before the first forward's layers; gradients accumulate
            # unsharded and are reduce-scattered once, behind the last backward
            ag = comm.time("all_gather", g, n * 2.0)
            rs = comm.time("reduce_scatter", g, n * gbytes)
            tot["dp"] += ag + rs
            dp_exp += _exposed(ag, ct.fwd, 1 / buckets) + _exposed(rs, ct.bwd, 1 / buckets)
        elif z >= 3:
            # a micro-batch runs through one stage: under DualPipe half of what it holds
            n_mb = n / 2 if cfg.pp_schedule == "dualpipe" else n
            ag = comm.time("all_gather", g, n_mb * 2.0)
            rs = comm.time("reduce_scatter", g, n_mb * gbytes)
            # weights are gathered for the forward and, unless kept, again for the
            # backward (recomputation included); gradients reduce-scattered every
            # micro-batch
            ag_bwd = 0.0 if cfg.keeps_gathered else ag
            tot["dp"] += (ag + ag_bwd + rs) * m_micro
            exp["dp_mb"] += (_exposed(ag, ct.fwd, 1 / buckets)
                             + _exposed(ag_bwd + rs, ct.bwd, 1 / buckets))
        else:
            if z == 0:
                red = comm.time("all_reduce", g, n * gbytes)
                ag = 0.0
            else:
                red = comm.time("reduce_scatter", g, n * gbytes)
                ag = comm.time("all_gather", g, n * 2.0)
            tot["dp"] += red + ag
            dp_exp += (_exposed(red, ct.bwd, 1 / buckets) if cfg.overlap_grad_reduce
                       else red)
            dp_exp += (_exposed(ag, ct.fwd, 1 / buckets) if cfg.overlap_param_gather
                       else ag)

    # tied input embedding and output head on different stages: after the data-parallel
    # sync, the first and last stage all-reduce the shared matrix's gradient (Megatron's
    # finalize_model_grads, DeepSpeed's ReduceTiedGrads), with nothing left to hide it
    if m.tied_embeddings and p.pp > 1:
        ends = [p.rank(pp_i=0), p.rank(pp_i=p.pp - 1)]
        tied = comm.time("all_reduce", ends, m.vocab * h / p.tp * gbytes)
        tot["dp"] += tied
        dp_exp += tied
    # DualPipe keeps two copies of every stage (on GPU i and on its mirror pp-1-i), each
    # with its own optimizer: after the data-parallel sync the pair all-reduces each
    # stage's gradient shard (DualPipe's example), with nothing left to hide it
    if cfg.pp_schedule == "dualpipe":
        shard = ((dense / p.shard_size("dp") + expert / p.shard_size("edp")) if z >= 1
                 else dense + expert) / 2
        pair = [p.rank(pp_i=0), p.rank(pp_i=p.pp - 1)]
        mirror = comm.time("all_reduce", pair, shard * gbytes)
        tot["dp"] += 2 * mirror
        dp_exp += 2 * mirror
    per_step = {"pp": pp_exp, "dp": dp_exp}
    return {**exp, **per_step}, tot


def check_layout(model: TransformerSpec, cfg: ParallelConfig, fabric: Fabric, *,
                 world: int | None = None, check_memory: bool = True) -> ResolvedParallel:
    """``cfg`` resolved on ``fabric`` (``world`` GPUs, default all), refused as
    :func:`simulate_step` refuses it: sizes that do not divide, a layout that does not
    fit GPU memory (with the breakdown and the cheapest change that fits), TP overlap
    beyond the NVLink domain. What ``fabricsim validate`` checks for a ``training:``
    section.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> check_layout(get_model("llama3-405b"), ParallelConfig(), fs.build_cluster(
    ...     "dgx-h100", 1, gpus_per_node=1))
    Traceback (most recent call last):
    ...
    fabricsim.errors.OutOfMemoryError: training: llama3-405b needs ...
    """
    return _checked(model, cfg, fabric, world, check_memory)[0]


def _checked(model: TransformerSpec, cfg: ParallelConfig, fabric: Fabric, world: int | None,
             check_memory: bool, comm: CommModel | None = None
             ) -> tuple[ResolvedParallel, MemoryEstimate]:
    """:func:`check_layout`, with the memory estimate it made (for simulate_step). The
    changes a layout that does not fit is offered are priced by the step they give
    (``comm``'s collective times; the analytic backend's without one)."""
    p = cfg.resolve(model, world or fabric.n_gpus)
    gpu = get_catalog().gpu(fabric.info.gpu)
    peak_flops(gpu, cfg.precision)  # FP8 / FP4 on a GPU without those tensor cores
    attention_kernel_eff(gpu, cfg.attention_kernel)  # a kernel that does not run there
    mem = memory_per_gpu(model, p)
    if check_memory and mem.total > gpu.memory_bytes:
        d = mem.as_dict()
        parts = ", ".join(f"{k} {d[k] / _GIB:.1f}" for k in
                          ("weights", "grads", "optimizer", "activations", "reserve"))
        priced = comm if comm is not None else EngineComm(fabric)

        def step_time(changed: ParallelConfig) -> float:
            return simulate_step(model, changed, fabric, priced, check_memory=False,
                                 world=world).step_time_s

        fix = cheapest_fit(model, p, gpu.memory_bytes, step_time=step_time)
        raise OutOfMemoryError(
            f"{model.name} needs {mem.total / _GIB:.1f} GiB per GPU on its fullest "
            f"pipeline stage ({parts} GiB) but {gpu.name} has "
            f"{gpu.memory_bytes / _GIB:.0f} GiB; "
            + (f"fits with {fix}" if fix else "raise tp or pp, or use fewer layers "
               "per stage"), field="training")
    if cfg.tp_comm_overlap and p.tp > fabric.info.nvlink_domain_gpus:
        raise ModelError(f"tp_comm_overlap (userbuffers) overlaps TP traffic over NVLink; "
                         f"tp={p.tp} spans beyond the {fabric.info.nvlink_domain_gpus}-GPU "
                         f"NVLink domain: keep tp <= {fabric.info.nvlink_domain_gpus} or "
                         f"drop --tp-comm-overlap", field="training.tp_comm_overlap")
    return p, mem


def auto_interleave(model: TransformerSpec, cfg: ParallelConfig, fabric: Fabric,
                    comm: CommModel, **kw: Any) -> StepResult:
    """The step of ``cfg`` with the interleaving a run at scale would use, where ``vp``
    is not given: plain 1F1B and every virtual-stage count its stages split into, the
    fastest that fits memory (NeMo's and Megatron-Bridge's recipes interleave every
    pipelined model, as NVIDIA's MLPerf GPT-3 and Meta's Llama 3 runs do). Give ``vp``
    (``--vp 1`` for plain 1F1B, as Megatron-LM runs without the flag) to fix it.

    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> r = simulate_step(get_model("llama2-7b"), ParallelConfig(tp=2, pp=4,
    ...                   global_batch=32), fs.build_cluster("dgx-h100", 1))
    >>> r.parallel["vp"] > 1, any("interleav" in w for w in r.warnings)
    (True, True)
    """
    base = cfg.model_copy(update={"vp": 1})
    try:
        counts = base.resolve(model, kw.get("world") or fabric.n_gpus).stage_layer_counts
    except ModelError:
        counts = ()
    if counts and not cfg.account_for_embedding_loss:
        tries = [1, *interleave_splits(counts)]
    else:  # the split depends on vp itself (embedding and loss counted as layers)
        tries = list(range(1, max(counts or (model.layers // max(cfg.pp, 1),)) + 1))
    best: StepResult | None = None
    why: ModelError | None = None
    refused: tuple[int, ModelError] | None = None  # the deepest split memory refused
    for v in tries:
        try:
            r = simulate_step(model, cfg.model_copy(update={"vp": v}), fabric, comm, **kw)
        except ModelError as e:
            why = why or e
            if v > 1 and isinstance(e, OutOfMemoryError):
                refused = (v, e)
            continue
        if best is None or r.step_time_s < best.step_time_s * (1 - 1e-9):
            best = r
    if best is None:
        assert why is not None
        raise why
    v = int(best.parallel["vp"])
    if v > 1:
        note = (f"vp={v} chosen: interleaved 1F1B, the fastest split that fits memory (runs "
                f"at scale interleave: NeMo's recipes, MLPerf's GPT-3, Meta's Llama 3); give "
                f"--vp 1 for plain 1F1B, as Megatron-LM runs without the flag")
    elif refused is not None:
        # say what interleaving would have needed, so that a layout published as
        # interleaved (e.g. Llama 3's) is not silently timed as plain 1F1B
        rv, err = refused
        note = (f"plain 1F1B kept: interleaving does not fit memory; vp={rv} "
                f"{err.message.split(' ', 1)[1]} (give --vp {rv} with that change to "
                f"time it)")
    else:
        note = "plain 1F1B kept: no interleaving helps (give --vp to choose)"
    return replace(best, warnings=[note, *best.warnings])


def simulate_step(model: TransformerSpec, cfg: ParallelConfig, fabric: Fabric,
                  comm: CommModel | None = None, *, backend: str = "analytic",
                  gpu_hour_usd: float | None = None, total_tokens: float | None = None,
                  check_memory: bool = True, world: int | None = None) -> StepResult:
    """Time one training step of ``model`` split as ``cfg`` on ``fabric``.

    Parameters
    ----------
    model : TransformerSpec
        The model (see :func:`~fabricsim.workloads.models.get_model`).
    cfg : ParallelConfig
        Parallelism, batch, precision and recomputation.
    fabric : Fabric
        The cluster; all its GPUs take part unless ``world`` says fewer.
    comm : CommModel, optional
        Where collective times come from; default :class:`EngineComm` on ``fabric`` with
        ``backend``.
    gpu_hour_usd : float, optional
        Price of a GPU-hour; default the system preset's ``gpu_hour_usd``.
    total_tokens : float, optional
        Tokens of the whole run, for duration and cost per run.
    check_memory : bool
        Raise :class:`~fabricsim.errors.ModelError` when the estimate exceeds GPU memory.

    Returns
    -------
    StepResult
    """
    if gpu_hour_usd is not None and not (math.isfinite(gpu_hour_usd) and gpu_hour_usd >= 0):
        raise ModelError(f"must be a finite price >= 0, got {gpu_hour_usd!r}",
                         field="gpu_hour_usd")
    world = world or fabric.n_gpus
    if comm is None:
        comm = EngineComm(fabric, backend=backend)
    if cfg.vp is None and cfg.pp > 1 and cfg.pipeline_layout is None \
            and cfg.pp_schedule == "1f1b":
        return auto_interleave(model, cfg, fabric, comm, gpu_hour_usd=gpu_hour_usd,
                               total_tokens=total_tokens, check_memory=check_memory,
                               world=world)
    p, mem = _checked(model, cfg, fabric, world, check_memory, comm)
    cfg = p.cfg  # as resolved (Megatron's per-chunk block count made per stage)
    cat = get_catalog()
    gpu = cat.gpu(fabric.info.gpu)
    warnings = placement_warnings(p, fabric.info.gpus_per_server,
                                  fabric.info.nvlink_domain_gpus)
    cf = cfg.moe_capacity_factor
    if cf is not None and not cfg.moe_pad_to_capacity and cfg.moe_imbalance > cf:
        warnings.append(f"--moe-capacity-factor {cf:g} drops about "
                        f"{1 - cf / cfg.moe_imbalance:.0%} of the busiest expert's tokens "
                        f"(--moe-imbalance {cfg.moe_imbalance:g}); the step is timed with "
                        f"what is kept")
    if p.ep > 1 and cfg.moe_node_limit:
        dom = fabric.info.nvlink_domain_gpus or world
        span = len({r // dom for r in p.group("ep")})
        if span == 1:
            warnings.append(f"--moe-node-limit has no effect here: the EP group's {p.ep} "
                            f"GPUs sit in one NVLink domain, so no token crosses the "
                            f"network")
        elif cfg.moe_node_limit and cfg.moe_node_limit >= span:
            warnings.append(f"--moe-node-limit {cfg.moe_node_limit} does not limit: the EP "
                            f"group spans {span} servers")
    dense, expert = stage_params(model, p)
    z = cfg.zero_stage
    owned = (dense / p.shard_size("dp") + expert / p.shard_size("edp")) if z >= 1 \
        else dense + expert
    # a power cap lowers the clock the kernels run at; MFU stays against the datasheet
    ct = microbatch_compute(model, p, power_capped(gpu, fabric.info.gpu_power_w), owned)
    if cfg.ep_overlap and model.is_moe:  # GEMMs and attention run beside the a2a kernels
        slow = 1.0 / (1.0 - EP_OVERLAP_SM_SHARE.get(generation(gpu), 0.15))
        f = 1.0 + (slow - 1.0) * ct.compute_bound
        ct = replace(ct, fwd=ct.fwd * f, bwd=ct.bwd * f, gemm=ct.gemm * slow,
                     attn_layer=ct.attn_layer * slow, layer_fwd=ct.layer_fwd * f,
                     wgrad=ct.wgrad * slow)
    exp, tot = comm_cost(model, p, comm, ct, generation(gpu),
                         domain_gpus=fabric.info.nvlink_domain_gpus)
    m = p.num_micro
    # data-parallel traffic hidden behind compute holds NCCL's SMs while it runs: the
    # compute-bound kernels beside it slow down for that long (charged to dp)
    hidden_dp = tot["dp"] - (m * exp["dp_mb"] + exp["dp"])
    if hidden_dp > 0.0:
        share = DP_OVERLAP_SM_SHARE.get(generation(gpu), 16 / 132)
        busy = min(hidden_dp / (m * (ct.fwd + ct.bwd)), 1.0)
        extra = (ct.fwd + ct.bwd) * busy * ct.compute_bound * share / (1.0 - share)
        exp = {**exp, "dp_mb": exp["dp_mb"] + extra}
    # FSDP's gather/cast/reduce kernels stream the unsharded stage through HBM: GPU work,
    # not traffic on a link, so it is compute (per micro-batch, or per step when a
    # pipelined FSDP keeps its weights gathered)
    fsdp_mb = fsdp_step = 0.0
    if z >= 3:
        sharded = sum(n for _, n in _dp_shards(p, dense, expert))
        t_fsdp = sharded * fsdp_kernel_bytes(cfg) / (gpu.hbm_bandwidth * HBM_EFF)
        if cfg.keeps_gathered and p.pp > 1:
            fsdp_step = t_fsdp
        else:  # under DualPipe a micro-batch runs through half of what a GPU holds
            fsdp_mb = t_fsdp * (0.5 if cfg.pp_schedule == "dualpipe" else 1.0)
    # activations offloaded to host memory cross the GPU's host link (NVLink-C2C or PCIe)
    # on a copy stream beside the compute: out during the stage's forward, back in ahead
    # of its backward (Megatron's offload queue prefetches); what the link cannot move in
    # that window waits (GPU-local, so charged as compute)
    off = min(cfg.offload_layers or 0, p.stage_layers)
    if off:
        host = gpu.c2c_gbyte_s * 1e9 or cat.link(gpu.pcie).gbyte_s_per_direction * 1e9
        t_copy = off * offload_bytes_per_layer(model, p) / host
        fsdp_mb += max(0.0, t_copy - ct.fwd) + max(0.0, t_copy - ct.bwd)
    mb_comm = exp["tp"] + exp["ep"] + exp["cp"] + exp["dp_mb"] + exp["pp_mb"]
    t_mb = ct.fwd + ct.bwd + fsdp_mb + mb_comm
    bubble = pipeline_bubble(p.pp, cfg.interleave, cfg.pp_schedule, t_mb, ct.bwd,
                             ct.wgrad)
    breakdown = {
        "compute": m * (ct.fwd + ct.bwd + fsdp_mb) + fsdp_step,
        "bubble": bubble,
        "tp": m * exp["tp"], "ep": m * exp["ep"], "cp": m * exp["cp"],
        "pp": m * exp["pp_mb"] + exp["pp"], "dp": m * exp["dp_mb"] + exp["dp"],
        "optimizer": ct.optimizer,
    }
    step = sum(breakdown.values())
    warnings += _interleave_hint(p, m, bubble, step)
    tokens = p.global_batch * p.seq
    model_flops = training_flops_per_token(model, p.seq) * tokens
    hw_flops = training_flops_per_token(model, p.seq, cfg.recompute,
                                        cfg.modules_recomputed) * tokens
    if cfg.recompute == "full" and cfg.recompute_layers:  # block: only N of each stage's
        share = min(cfg.recompute_layers, p.stage_layers) / p.stage_layers
        hw_flops = model_flops + (hw_flops - model_flops) * share
    peak = peak_flops(gpu, cfg.precision)
    price = gpu_hour_usd if gpu_hour_usd is not None else fabric.info.gpu_hour_usd
    par = {"tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "ep": p.ep,
           "etp": p.etp if model.is_moe else None,
           "zero": cfg.zero, "micro_batch": cfg.micro_batch, "global_batch": p.global_batch,
           "num_micro": m, "seq_len": p.seq, "precision": cfg.precision,
           "recompute": cfg.recompute, "vp": cfg.interleave,
           "pp_schedule": cfg.pp_schedule,
           "stage_layers": list(p.stage_layer_counts),
           "recompute_layers": cfg.recompute_layers, "offload_layers": cfg.offload_layers,
           "recompute_modules": sorted(cfg.modules_recomputed)
           if cfg.recompute == "selective" else None,
           "pipeline_layout": cfg.pipeline_layout, "moe_dispatcher": cfg.moe_dispatcher,
           "ep_kernel": ep_kernel_of(cfg) if p.ep > 1 else None,
           "tp_comm_overlap": cfg.tp_comm_overlap or cfg.tp_overlap > 0,
           "overlap_grad_reduce": cfg.overlap_grad_reduce,
           "overlap_param_gather": cfg.overlap_param_gather, "ep_overlap": cfg.ep_overlap,
           "overlap_p2p_comm": cfg.p2p_overlapped, "moe_imbalance": cfg.moe_imbalance,
           "moe_capacity_factor": cfg.moe_capacity_factor,
           "moe_pad_to_capacity": cfg.moe_pad_to_capacity,
           "fp8_recipe": cfg.recipe if cfg.precision == "fp8" else None,
           "reshard_after_forward": (not cfg.keeps_gathered) if z >= 3 else None,
           "fsdp_impl": cfg.fsdp_impl if z >= 3 else None,
           "grad_reduce_dtype": cfg.grad_reduce_dtype,
           "attention_kernel": cfg.attention_kernel}
    return StepResult(
        model=model.name, world=world, parallel=par, step_time_s=step,
        tokens_per_s=tokens / step, tflops_per_gpu=model_flops / step / world / 1e12,
        hw_tflops_per_gpu=hw_flops / step / world / 1e12,
        mfu=model_flops / step / world / peak, hfu=hw_flops / step / world / peak,
        breakdown=breakdown, comm_total_s=tot, memory=mem,
        gpu_memory_bytes=float(gpu.memory_bytes), gpu_hour_usd=float(price),
        warnings=warnings, total_tokens=total_tokens)
