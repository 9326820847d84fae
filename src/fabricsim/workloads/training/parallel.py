"""Parallelism configuration, its validation, and rank placement on a fabric.

Ranks are laid out in Megatron-LM's order, tensor-parallel fastest: rank =
``tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i))``. Because fabric ranks are numbered
server-major, a TP group of size ≤ GPUs per server sits inside one server (and so inside
its NVLink domain), CP and DP groups stride across servers, and PP stages are the
outermost blocks. Expert parallelism splits the ``dp·cp`` ranks of a stage into groups of
``ep`` consecutive data-parallel ranks (as Megatron-Core does).

Example
-------
>>> from fabricsim.workloads.models import get_model
>>> p = ParallelConfig(tp=8, pp=2, micro_batch=1, global_batch=64).resolve(
...     get_model("llama2-70b"), world=64)
>>> p.dp, p.num_micro
(4, 16)
>>> p.group("tp"), p.group("dp"), p.group("pp")
([0, 1, 2, 3, 4, 5, 6, 7], [0, 8, 16, 24], [0, 32])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, model_validator

from fabricsim._strict import StrictModel, renamed_keys
from fabricsim.errors import ConfigError, ModelError
from fabricsim.workloads.models import TransformerSpec

__all__ = ["GROUP_KINDS", "RENAMED", "ParallelConfig", "RecomputeModule", "ResolvedParallel",
           "parse_pipeline_layout", "placement_warnings"]

GROUP_KINDS = ("tp", "cp", "dp", "ep", "edp", "pp")
#: Fields read under an older name (old -> new): one vocabulary with the CLI's flags
#: (``--vp``, ``--pp-schedule``, ``--grad-reduce-dtype``). ``grad_bytes`` took 2 or 4.
RENAMED = {"interleave": "vp", "pipeline_schedule": "pp_schedule",
           "grad_bytes": "grad_reduce_dtype"}
RecomputeModule = Literal["core_attn", "mlp", "moe", "moe_act", "shared_experts",
                          "layernorm", "mla_up_proj"]


class ParallelConfig(StrictModel):
    """How a training job is split over GPUs (what the user asks for).

    Parameters
    ----------
    tp, pp, cp, ep : int
        Tensor, pipeline, context and expert parallel sizes.
    dp : int or None
        Data-parallel size; ``None`` derives it from the world size.
    zero : {0, 1, 2, 3, "fsdp"}
        ZeRO stage of the data-parallel optimizer (``fsdp`` is stage 3).
    micro_batch, global_batch : int
        Sequences per micro-batch and per step; ``global_batch=None`` picks
        ``micro_batch·dp·(4·pp if pp > 1 else 1)``.
    seq_len : int or None
        Sequence length; ``None`` uses the model's.
    precision : {"bf16", "fp8", "fp4"}
        Tensor-core precision of the GEMMs (weights and optimizer stay mixed precision).
        ``fp4`` is NVFP4 as Transformer Engine trains with it (Blackwell): the linear
        layers' forward, data-gradient and weight-gradient GEMMs on FP4 tensor cores with
        16-element block scales, attention and the output head in BF16.
    fp8_recipe : {"tensorwise", "delayed", "blockwise", "mxfp8", "torchao"} or None
        How FP8 is scaled, only with ``precision="fp8"`` (``None``: the default,
        :attr:`recipe`): Transformer Engine's per-tensor
        current scaling (``tensorwise``, NeMo's FP8-CS, the default), delayed scaling,
        1×128/128×128 blocks (``blockwise``, DeepSeek-V3's), MX blocks of 32 (``mxfp8``,
        Blackwell), or torchao's dynamic Float8 as torchtitan runs it (``torchao``). Each
        sets a share of the FP8 GEMM rate (:data:`fabricsim.workloads.gpu.FP8_RECIPE_EFF`).
    recompute : {"none", "selective", "full"}
        Activation recomputation.
    recompute_modules : tuple of str or None
        With ``recompute="selective"``: which parts of every layer are recomputed
        (Megatron-Core's ``--recompute-modules``): ``core_attn`` (the attention core,
        Megatron's default and what ``selective`` alone means), ``mlp`` (the MLP of dense
        layers), ``moe`` (the whole MoE block of MoE layers, its expert all-to-all
        included), ``shared_experts``, ``moe_act`` (the experts' activation function),
        ``layernorm`` (the two norms), ``mla_up_proj`` (MLA's up-projections). Each is
        charged its forward time again and frees the activations it would keep.
    recompute_layers : int or None
        With ``recompute="full"``: how many layers of each stage are recomputed
        (``--recompute-layers``); ``None``: all.
    recompute_layers_per_chunk : int or None
        The same counted as Megatron counts ``--recompute-method block
        --recompute-num-layers N``: N layers of each model chunk (virtual stage), so N·v
        of a stage, every layer once N covers a chunk; resolved into
        ``recompute_layers`` (a pasted Megatron list sets it).
    offload_layers : int or None
        Activations of this many layers kept in host memory between their forward and
        backward (Megatron's ``--cpu-offloading-num-layers``, activations only; NeMo's
        Llama 3 FSDP recipes on GB200/GB300 offload 20-40 of 80): they leave GPU memory
        and cross the GPU's host link (NVLink-C2C or PCIe) both ways. As in Megatron:
        fewer than the model's layers, with ``pp`` 1 and no recomputation.
    vp : int
        Virtual pipeline stages per GPU (1 = plain 1F1B; Megatron's
        ``--virtual-pipeline-model-parallel-size``, the CLI's ``--vp``).
    pp_schedule : {"1f1b", "dualpipe"}
        ``1f1b``: Megatron's one-forward-one-backward schedule (interleaved with
        ``vp > 1``). ``dualpipe``: DeepSeek-V3's bidirectional schedule
        (DeepSeek-V3 report sec. 3.2.1): every GPU holds two stages, ``i`` and
        ``pp − 1 − i``, and micro-batches enter from both ends; its bubble is
        ``(pp/2 − 1)(F&B + B − 3W)`` instead of ``(pp − 1)(F + B)``, at the price of two
        stages' parameters and ``pp + 1`` micro-batches of activations per GPU. Needs an
        even ``pp``, no interleaving, and an even number of micro-batches of at least
        ``2·pp``; pipeline sends are hidden (``overlap_p2p_comm``) unless turned off.
    first_stage_layers, last_stage_layers : int or None
        Layers of the first / last pipeline stage when they differ from the others
        (Megatron's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-...``);
        the other stages share the rest evenly.
    account_for_embedding_loss : bool
        Count the embedding and the loss as one layer each when splitting the pipeline
        (Megatron's ``--account-for-embedding-in-pipeline-split`` and
        ``--account-for-loss-in-pipeline-split``): ``layers + 2`` must divide by
        ``pp·vp``; the first and last stages hold one layer fewer.
    pipeline_layout : str or None
        Layers of every virtual pipeline stage in Megatron-Core's
        ``--pipeline-model-parallel-layout`` notation: stages separated by ``|`` in
        model-chunk order (chunk ``k`` runs on pipeline rank ``k mod pp``), ``t`` a
        decoder layer, ``m`` a multi-token-prediction layer, ``E`` the embedding
        (first chunk), ``L`` the loss (last chunk), ``x*N`` and ``(...)*N`` repeat;
        commas and spaces are ignored. DeepSeek-V3's 61 layers at pp 8, vp 4 as NeMo runs
        them: ``"Et|(tt|)*30mL"``. Must hold ``pp·vp`` stages and every decoder
        layer of the model; replaces the first/last stage options.
    sequence_parallel : bool
        Megatron sequence parallelism with TP (all-gather/reduce-scatter instead of
        all-reduce; activations split over TP).
    tp_overlap : float
        Fraction of TP communication hidden behind GEMMs (0 = not overlapped), when given
        explicitly; ``tp_comm_overlap`` sets it from the GPU generation instead.
    tp_comm_overlap : bool
        Megatron/NeMo's TP communication overlap (userbuffers, ``--tp-comm-overlap``):
        the share of TP traffic hidden is the GPU generation's overlap efficiency
        (:data:`fabricsim.workloads.training.step.TP_OVERLAP_EFFICIENCY`). Needs ``tp > 1`` and
        sequence parallelism.
    ep_overlap : bool
        Overlap expert-parallel dispatch/combine all-to-all of one micro-batch with the
        compute of another (DeepSeek-V3's DualPipe; Megatron's
        ``--overlap-moe-expert-parallel-comm``); needs ``ep > 1``.
    etp : int or None
        Expert tensor-parallel size (Megatron-Core's ``--expert-tensor-parallel-size``,
        "MoE parallel folding"): the MoE layers re-divide a stage's ``tp·cp·dp`` GPUs
        as ``etp`` (fastest) × ``ep`` × expert data parallel, independently of the
        attention's ``tp``. ``None``: ``tp``, Megatron's default (experts split like the
        dense layers, EP groups strided by ``tp``). NeMo's DeepSeek-V3 recipes set 1:
        whole experts per GPU and EP groups of consecutive GPUs, so an EP group of 64 at
        ``tp=2`` spans 8 servers, not 16. Needs a mixture-of-experts model;
        ``etp·ep`` must divide ``tp·cp·dp``.
    moe_node_limit : int or None
        Node-limited routing (DeepSeek-V3, DeepEP): each token goes to experts on at most
        this many servers, and crosses the network once per server (its copies for
        several experts there fan out over NVLink). ``None``: one copy per expert.
    moe_dispatcher : {"alltoall", "deepep", "hybridep", "deepep-ll", "nvlink-onesided"}
        The EP kernel family that moves MoE tokens (``--ep-kernel``; Megatron's
        ``--moe-token-dispatcher-type`` and ``--moe-flex-dispatcher-backend``):
        ``alltoall`` sends one copy per routed expert through NCCL's all-to-all; the
        others are the kernels of :mod:`fabricsim.collectives.ep` (``deepep``, Megatron's
        flex dispatcher: a token crosses the network once per server holding one of its
        experts and fans out over NVLink there). Node-limited routing
        (``moe_node_limit``) with ``alltoall`` is timed as ``deepep``.
    fsdp_shard_size : int or None
        Hybrid sharding (HSDP; torchtitan's ``data_parallel_shard_degree`` with
        ``data_parallel_replicate_degree``, PyTorch's ``HYBRID_SHARD``): ZeRO/FSDP shards
        over groups of this many data-parallel ranks, and the groups hold replicas whose
        gradient shards are all-reduced once a step. ``None``: shard over every
        data-parallel rank.
    moe_capacity_factor : float or None
        Megatron's ``--moe-expert-capacity-factor``: an expert takes at most this many
        times its even share of tokens; the rest are dropped. The busiest rank then
        carries ``min(moe_imbalance, factor)`` times the mean.
    moe_pad_to_capacity : bool
        ``--moe-pad-expert-input-to-capacity``: every expert's input is padded to its
        capacity, so every rank computes and moves ``factor`` times the mean.
    moe_imbalance : float
        Tokens of the busiest expert-parallel rank over the mean (1.0: perfectly
        balanced routing). The step waits for that rank: its routed-expert GEMMs and its
        share of the dispatch/combine all-to-all take this much longer. Measure it from
        the router's load statistics of your own run; needs a mixture-of-experts model.
    overlap_grad_reduce, overlap_param_gather : bool
        Overlap the data-parallel gradient reduce-scatter with the backward pass and the
        parameter all-gather with the next forward (Megatron's ``--overlap-grad-reduce``,
        ``--overlap-param-gather``; on by default, as NeMo's recipes ship). Off: the whole
        collective waits.
    overlap_p2p_comm : bool or None
        Pipeline sends and receives hidden behind compute in the steady state (Megatron's
        ``--overlap-p2p-communication``). ``None`` (default): as Megatron-LM runs it, hidden
        with interleaving (``vp > 1``), and on the critical path of every
        micro-batch without it (plain 1F1B waits on each exchange: two transfers per
        micro-batch). ``True`` also suits schedules that overlap it without interleaving
        (DeepSeek-V3's DualPipe); needs ``pp > 1``.
    grad_reduce_dtype : {"bf16", "fp32"}
        Precision data-parallel gradients are reduced in (``grad_bytes`` per element on
        the wire: 2 or 4). BF16 is what NeMo's performance recipes ship; Megatron with
        ``--bf16`` and FP32 main grads, PyTorch FSDP's ``reduce_dtype=float32``
        (llm-foundry, torchtitan) reduce in FP32.
    reshard_after_forward : bool or None
        With FSDP / ZeRO-3: free the gathered weights after each forward (``True``,
        FSDP's default: the backward gathers them again) or keep them to the backward
        (``False``, torchtitan's ``fsdp_reshard_after_forward`` and Llama 3's choice). With
        a pipeline (``pp > 1``) ``False`` is how torch.distributed.pipelining runs FSDP
        under a schedule: the stage's weights are gathered once per step and stay, its
        gradients accumulate unsharded over the micro-batches and are reduce-scattered
        once after the last backward (two more stage-sized BF16 buffers per GPU). Without
        a pipeline, one gather per micro-batch instead of two. ``None``: ``True``.
    attention_kernel : str
        The attention core's kernel: ``"flash"`` (default: FlashAttention 2/3, cuDNN's
        fused attention, as current Megatron/NeMo, torchtitan and Transformer Engine run)
        or ``"flash1"`` (FlashAttention 1 and the Triton FlashAttention of 2023, e.g.
        llm-foundry's ``attn_impl: triton``; about half the rate,
        :data:`~fabricsim.workloads.gpu.ATTENTION_KERNEL_EFF`).
    fsdp_impl : str
        Whose ZeRO-3 / FSDP runs (with ``zero`` 3 or ``"fsdp"``): ``"pytorch"`` (default:
        PyTorch FSDP / FSDP2, as llm-foundry and torchtitan run it; DeepSpeed's ZeRO-3
        works alike) casts and divides each micro-batch's gradients in kernels of their
        own before reducing them; ``"megatron"`` (Megatron-FSDP, NeMo's
        ``use_megatron_fsdp``) accumulates them into its reduction buckets inside the
        backward GEMMs, so only the collectives stream the weights and gradients through
        HBM (:func:`~fabricsim.workloads.training.step.fsdp_kernel_bytes`).

    Examples
    --------
    >>> ParallelConfig(tp=4).zero_stage
    1
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int | None = Field(None, ge=1)
    cp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    etp: int | None = Field(None, ge=1)
    zero: Literal[0, 1, 2, 3, "fsdp"] = 1
    micro_batch: int = Field(1, ge=1)
    global_batch: int | None = Field(None, ge=1)
    seq_len: int | None = Field(None, ge=1)
    precision: Literal["bf16", "fp8", "fp4"] = "bf16"
    fp8_recipe: Literal["tensorwise", "delayed", "blockwise", "mxfp8", "torchao"] | None = \
        None
    recompute: Literal["none", "selective", "full"] = "none"
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    recompute_layers: int | None = Field(None, ge=1)
    recompute_layers_per_chunk: int | None = Field(None, ge=1)
    offload_layers: int | None = Field(None, ge=0)
    vp: int | None = Field(None, ge=1)
    pp_schedule: Literal["1f1b", "dualpipe"] = "1f1b"
    first_stage_layers: int | None = Field(None, ge=1)
    last_stage_layers: int | None = Field(None, ge=1)
    account_for_embedding_loss: bool = False
    pipeline_layout: str | None = Field(None, min_length=1, max_length=4096)
    sequence_parallel: bool = True
    tp_overlap: float = Field(0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    tp_comm_overlap: bool = False
    ep_overlap: bool = False
    moe_node_limit: int | None = Field(None, ge=1)
    moe_dispatcher: Literal["alltoall", "deepep", "hybridep", "deepep-ll",
                            "nvlink-onesided"] = "alltoall"
    moe_imbalance: float = Field(1.0, ge=1.0, le=64.0, allow_inf_nan=False)
    moe_capacity_factor: float | None = Field(None, gt=0.0, le=64.0, allow_inf_nan=False)
    moe_pad_to_capacity: bool = False
    fsdp_shard_size: int | None = Field(None, ge=1)
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    overlap_p2p_comm: bool | None = None
    grad_reduce_dtype: Literal["bf16", "fp32"] = "bf16"
    reshard_after_forward: bool | None = None
    fsdp_impl: Literal["pytorch", "megatron"] = "pytorch"
    attention_kernel: Literal["flash", "flash1"] = "flash"

    @model_validator(mode="before")
    @classmethod
    def _vp_from_layout(cls, data: Any) -> Any:
        """Old field names read under their new ones (:data:`RENAMED`, with a warning); a
        pipeline layout without ``vp`` sets it, as Megatron does: stages / pp."""
        if isinstance(data, Mapping):
            data = renamed_keys(dict(data), RENAMED, "training")
        if isinstance(data, dict) and isinstance(data.get("moe_dispatcher"), str):
            data = {**data, "moe_dispatcher": dispatcher_name(data["moe_dispatcher"])}
        if isinstance(data, dict) and isinstance(data.get("grad_reduce_dtype"), int) \
                and not isinstance(data["grad_reduce_dtype"], bool):  # grad_bytes: 2 / 4
            width = {2: "bf16", 4: "fp32"}.get(data["grad_reduce_dtype"])
            data = {**data, "grad_reduce_dtype": width or data["grad_reduce_dtype"]}
        if isinstance(data, dict) and isinstance(data.get("pipeline_layout"), str) \
                and data.get("vp") is None:
            pp = data.get("pp") or 1
            try:
                n = len(_expand_layout(data["pipeline_layout"]).split("|"))
            except ValueError:  # resolve() reports it against the field
                return data
            if isinstance(pp, int) and pp > 0 and n % pp == 0:
                data = {**data, "vp": n // pp}
        return data

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient element on the wire for the data-parallel reduction.

        >>> ParallelConfig().grad_bytes, ParallelConfig(grad_reduce_dtype="fp32").grad_bytes
        (2, 4)
        """
        return 4 if self.grad_reduce_dtype == "fp32" else 2

    @property
    def keeps_gathered(self) -> bool:
        """FSDP weights kept gathered from the forward to the backward
        (``reshard_after_forward=False`` with ZeRO-3).

        >>> ParallelConfig(zero="fsdp", reshard_after_forward=False).keeps_gathered
        True
        >>> ParallelConfig(zero="fsdp").keeps_gathered
        False
        """
        return self.zero_stage >= 3 and self.reshard_after_forward is False

    @property
    def recipe(self) -> str:
        """The FP8 scaling recipe in effect: ``fp8_recipe``, or Transformer Engine's
        per-tensor current scaling when none is given.

        >>> ParallelConfig(precision="fp8").recipe, ParallelConfig(fp8_recipe="mxfp8").recipe
        ('tensorwise', 'mxfp8')
        """
        return self.fp8_recipe or "tensorwise"

    @property
    def p2p_overlapped(self) -> bool:
        """Pipeline sends/receives hidden behind compute in the steady state.

        >>> ParallelConfig(pp=4).p2p_overlapped, ParallelConfig(pp=4, vp=2).p2p_overlapped
        (False, True)
        """
        if self.overlap_p2p_comm is not None:
            return self.overlap_p2p_comm
        return self.interleave > 1 or self.pp_schedule == "dualpipe"

    @property
    def modules_recomputed(self) -> frozenset[str]:
        """The parts of a layer recomputed in the backward pass: all with ``full``, the
        attention core alone with ``selective`` unless ``recompute_modules`` says.

        >>> sorted(ParallelConfig(recompute="selective").modules_recomputed)
        ['core_attn']
        """
        if self.recompute == "none":
            return frozenset()
        if self.recompute == "full":
            return frozenset(get_args(RecomputeModule))
        return frozenset(self.recompute_modules or ("core_attn",))

    @property
    def zero_stage(self) -> int:
        """ZeRO stage as an integer (``fsdp`` → 3)."""
        return 3 if self.zero == "fsdp" else int(self.zero)

    def resolve(self, model: TransformerSpec, world: int,
                prefix: str = "training") -> ResolvedParallel:
        """Check sizes against ``model`` and ``world`` GPUs; derive dp and micro-batches.

        Raises :class:`~fabricsim.errors.ModelError` naming ``<prefix>.<field>``.
        """
        def bad(field: str, msg: str) -> ModelError:
            return ModelError(msg, field=f"{prefix}.{field}")

        tp, pp, cp, ep = self.tp, self.pp, self.cp, self.ep
        mp = tp * pp * cp
        if world % mp:
            raise bad("tp", f"tp·pp·cp = {tp}·{pp}·{cp} = {mp} does not divide the {world} "
                            f"GPUs; choose sizes whose product divides {world}")
        dp = self.dp if self.dp is not None else world // mp
        if dp * mp != world:
            raise bad("dp", f"tp·pp·cp·dp = {mp * dp} but the cluster has {world} GPUs; set "
                            f"dp = {world // mp} or change the cluster size")
        if model.heads % tp:
            raise bad("tp", f"tp={tp} must divide the model's {model.heads} attention heads")
        if pp > model.layers:
            raise bad("pp", f"pp={pp} exceeds the model's {model.layers} layers")
        if self.interleave > 1 and pp == 1:
            raise bad("vp", "vp > 1 (interleaved 1F1B) needs pp > 1")
        mtp: tuple[int, ...] = ()
        if self.pipeline_layout is not None:
            if (self.first_stage_layers is not None or self.last_stage_layers is not None
                    or self.account_for_embedding_loss):
                raise bad("pipeline_layout", "give either pipeline_layout or first/last "
                          "stage layers / account_for_embedding_loss, not both")
            try:
                counts, mtp = parse_pipeline_layout(self.pipeline_layout, pp,
                                                    self.interleave, model.layers)
            except ValueError as e:
                raise bad("pipeline_layout", str(e)) from None
        else:
            counts = self._stage_layers(model.layers, bad)
        if self.recompute_layers is not None and self.recompute != "full":
            raise bad("recompute_layers", "recompute_layers (block recomputation) needs "
                                          "recompute='full'; set --recompute full")
        mods = self.recompute_modules
        if mods is not None:
            if self.recompute != "selective":
                raise bad("recompute_modules", f"recompute_modules needs recompute="
                          f"'selective' (--recompute selective), got recompute="
                          f"{self.recompute!r}")
            if not mods:
                raise bad("recompute_modules", "give at least one module, or drop "
                          "recompute_modules (selective then means core_attn)")
            moe_only = sorted({"moe", "moe_act", "shared_experts"} & set(mods))
            if moe_only and not model.is_moe:
                raise bad("recompute_modules", f"{', '.join(moe_only)} "
                          f"need{'s' if len(moe_only) == 1 else ''} a mixture-of-experts "
                          f"model; {model.name} is dense: drop "
                          f"{'it' if len(moe_only) == 1 else 'them'}")
            if "shared_experts" in mods and not model.shared_experts:
                raise bad("recompute_modules", f"{model.name} has no shared experts")
            if "mla_up_proj" in mods and not model.mla_up_params:
                raise bad("recompute_modules", f"mla_up_proj needs multi-head latent "
                          f"attention (mla_up_params); {model.name} has none")
        if self.tp_comm_overlap and tp == 1:
            raise bad("tp_comm_overlap", "tp_comm_overlap needs tp > 1 (there is no "
                                         "tensor-parallel traffic to hide)")
        if self.overlap_p2p_comm and pp == 1:
            raise bad("overlap_p2p_comm", "overlap_p2p_comm (--overlap-p2p-comm) needs "
                                          "pp > 1 (no pipeline sends to hide): drop it "
                                          "or set --pp")
        if self.ep_overlap and ep == 1:
            raise bad("ep_overlap", "ep_overlap needs ep > 1 (no expert all-to-all to hide)")
        if self.tp_comm_overlap and not self.sequence_parallel:
            raise bad("tp_comm_overlap", "tp_comm_overlap needs sequence parallelism (as "
                                         "Megatron's userbuffers overlap does): turn it on "
                                         "(--sequence-parallel)")
        s = self.fsdp_shard_size
        if s is not None:
            if self.zero_stage < 1:
                raise bad("fsdp_shard_size", f"fsdp_shard_size shards ZeRO/FSDP state over "
                          f"groups of data-parallel ranks; zero={self.zero!r} shards nothing: "
                          f"set --zero fsdp (or 1) or drop --fsdp-shard-size")
            if (dp * cp) % s:
                divs = [d for d in range(1, dp * cp + 1) if (dp * cp) % d == 0]
                raise bad("fsdp_shard_size", f"fsdp_shard_size={s} must divide the "
                          f"{dp * cp} data-parallel ranks (dp x cp): use "
                          f"{', '.join(map(str, divs[-6:]))}")
        if self.moe_capacity_factor is not None and not model.is_moe:
            raise bad("moe_capacity_factor", f"moe_capacity_factor caps an expert's tokens; "
                      f"{model.name} is dense: drop --moe-capacity-factor")
        if self.moe_pad_to_capacity and self.moe_capacity_factor is None:
            raise bad("moe_pad_to_capacity", "moe_pad_to_capacity pads each expert's input "
                      "to its capacity: give --moe-capacity-factor too (Megatron needs "
                      "--moe-expert-capacity-factor with it)")
        if self.moe_imbalance > 1.0 and not model.is_moe:
            raise bad("moe_imbalance", f"moe_imbalance needs a mixture-of-experts model; "
                                       f"{model.name} is dense: drop --moe-imbalance")
        if self.reshard_after_forward is not None and self.zero_stage < 3:
            raise bad("reshard_after_forward", f"reshard_after_forward applies to sharded "
                      f"weights (ZeRO-3 / FSDP); zero={self.zero!r} keeps them whole: set "
                      f"--zero fsdp or drop --reshard-after-forward")
        if self.fsdp_impl != "pytorch" and self.zero_stage < 3:
            raise bad("fsdp_impl", f"fsdp_impl={self.fsdp_impl!r} names an FSDP "
                      f"implementation; zero={self.zero!r} does not shard the weights: set "
                      f"--zero fsdp or drop --fsdp-impl")
        if self.moe_node_limit is not None and not (model.is_moe and ep > 1):
            raise bad("moe_node_limit", "moe_node_limit (node-limited routing) needs a "
                      "mixture-of-experts model with ep > 1 (no expert traffic to limit "
                      "otherwise): drop --moe-node-limit")
        if self.fp8_recipe is not None and self.precision != "fp8":
            raise bad("fp8_recipe", f"fp8_recipe={self.fp8_recipe!r} applies only to FP8 "
                      f"training and precision is {self.precision!r}: add --fp8 (or "
                      f"--precision fp8; Megatron's --fp8-format) or drop --fp8-recipe")
        if self.moe_dispatcher != "alltoall" and not (model.is_moe and ep > 1):
            raise bad("moe_dispatcher", f"moe_dispatcher={self.moe_dispatcher!r} needs a "
                      f"mixture-of-experts model with ep > 1 (no expert all-to-all "
                      f"otherwise): drop it")
        if ep > 1 and not model.is_moe:
            raise bad("ep", f"ep={ep} needs a mixture-of-experts model; {model.name} is dense")
        if model.is_moe and model.experts % ep:
            raise bad("ep", f"ep={ep} must divide the model's {model.experts} experts")
        if self.etp is not None and not model.is_moe:
            raise bad("etp", f"etp (expert tensor parallel) needs a mixture-of-experts "
                             f"model; {model.name} is dense: drop --etp")
        etp = self.etp if self.etp is not None else tp
        if self.etp is not None and model.expert_ffn % etp:
            raise bad("etp", f"etp={etp} must divide the experts' width "
                             f"{model.expert_ffn}")
        if (tp * dp * cp) % (etp * ep):
            if self.etp is None:
                raise bad("ep", f"ep={ep} must divide dp·cp = {dp * cp} (or fold the "
                                f"experts over tp too: --etp 1 needs ep to divide "
                                f"tp·dp·cp = {tp * dp * cp})")
            raise bad("etp", f"etp·ep = {etp}·{ep} = {etp * ep} must divide tp·cp·dp = "
                             f"{tp * cp * dp}, the GPUs of a pipeline stage")
        if self.pp_schedule == "dualpipe":
            if pp < 2 or pp % 2:
                raise bad("pp_schedule", f"dualpipe pairs stage i with stage pp-1-i "
                          f"on one GPU, so pp must be even and >= 2, got pp={pp}")
            if self.interleave > 1:
                what = (f"the pipeline layout must hold exactly pp={pp} stages"
                        if self.pipeline_layout is not None else "drop --vp")
                raise bad("pp_schedule", f"dualpipe is its own schedule and does not "
                          f"interleave: {what}, or use --pp-schedule 1f1b")
        seq = self.seq_len or model.seq
        sp = self.sequence_parallel and tp > 1
        if seq % (cp * (tp if sp else 1)):
            if not sp:
                raise bad("seq_len", f"seq_len={seq} must be divisible by cp = {cp}: context "
                          f"parallelism splits each sequence over {cp} ranks")
            raise bad("seq_len", f"seq_len={seq} must be divisible by cp·tp = {cp * tp}: "
                      f"sequence parallelism splits each sequence over the {tp} TP ranks"
                      + (f" (and context parallelism over {cp})" if cp > 1 else "")
                      + f"; use a multiple of {cp * tp}, or --no-sequence-parallel"
                      + (f" (a multiple of {cp} then)" if cp > 1 else ""))
        if cp > 1 and seq // cp < 2:
            raise bad("cp", f"cp={cp} leaves fewer than 2 tokens per rank")
        per_step = self.micro_batch * dp
        gb = self.global_batch or per_step * (4 * pp if pp > 1 else 1)
        if gb % per_step:
            raise bad("global_batch", f"global_batch={gb} must be a multiple of "
                                      f"micro_batch·dp = {self.micro_batch}·{dp} = {per_step}")
        if self.pp_schedule == "dualpipe" and (gb // per_step < 2 * pp
                                                     or (gb // per_step) % 2):
            need = 2 * pp * per_step
            raise bad("global_batch", f"dualpipe needs an even number of micro-batches, at "
                      f"least 2·pp = {2 * pp}, per step; global_batch={gb} gives "
                      f"{gb // per_step}: raise global_batch to a multiple of "
                      f"{2 * per_step} of at least {need}")
        if self.offload_layers:  # what Megatron's TransformerConfig refuses
            if pp > 1:
                raise bad("offload_layers", "activation offloading runs without pipeline "
                          "parallelism (Megatron has no support for the two together): "
                          "use pp 1 (FSDP, as NVIDIA's recipes do) or drop --offload-layers")
            if self.recompute != "none":
                raise bad("offload_layers", f"activation offloading does not work with "
                          f"recomputation (Megatron refuses both): drop --recompute "
                          f"{self.recompute} or --offload-layers")
            if self.offload_layers >= model.layers:
                raise bad("offload_layers", f"offload_layers={self.offload_layers} must be "
                          f"less than the model's {model.layers} layers")
        cfg = self
        if self.recompute_layers_per_chunk is not None:
            if self.recompute != "full" or self.recompute_layers is not None:
                raise bad("recompute_layers_per_chunk", "recompute_layers_per_chunk (Megatron's "
                          "block recomputation) needs recompute='full' and no "
                          "recompute_layers")
            v = self.interleave
            per_stage = min(max(counts), self.recompute_layers_per_chunk * v)
            cfg = self.model_copy(update={
                "recompute_layers": None if per_stage >= max(counts) else per_stage,
                "recompute_layers_per_chunk": None})
        if self.recompute_layers is not None and self.recompute_layers > max(counts):
            raise bad("recompute_layers", f"recompute_layers={self.recompute_layers} is more "
                      f"than the {max(counts)} layers of the fullest pipeline stage; give at "
                      f"most {max(counts)} (or drop --recompute-layers to recompute all)")
        return ResolvedParallel(cfg=cfg, world=world, dp=dp, seq=seq, global_batch=gb,
                                num_micro=gb // per_step, stage_layers=max(counts),
                                stage_layer_counts=counts, stage_mtp_layers=mtp)

    @property
    def interleave(self) -> int:
        """Virtual stages per pipeline rank: ``vp``, or 1 while it is left to choose
        (``None``: :func:`~fabricsim.workloads.training.step.simulate_step` interleaves as
        runs at scale do, :func:`~fabricsim.workloads.training.step.auto_interleave`).

        >>> ParallelConfig(pp=4).interleave, ParallelConfig(pp=4, vp=5).interleave
        (1, 5)
        """
        return self.vp or 1

    @property
    def moe_load(self) -> float:
        """The busiest expert-parallel rank's tokens over the even share, after the
        capacity factor (dropping above it, or padding every expert up to it).

        >>> ParallelConfig(moe_imbalance=1.6, moe_capacity_factor=1.25).moe_load
        1.25
        >>> ParallelConfig(moe_capacity_factor=1.5, moe_pad_to_capacity=True).moe_load
        1.5
        """
        cf = self.moe_capacity_factor
        if cf is None:
            return self.moe_imbalance
        return cf if self.moe_pad_to_capacity else min(self.moe_imbalance, cf)

    def _stage_layers(self, layers: int, bad: Callable[[str, str], ModelError]
                      ) -> tuple[int, ...]:
        """Layers of every pipeline stage, as Megatron splits them (see the fields)."""
        pp, v = self.pp, self.interleave
        first, last = self.first_stage_layers, self.last_stage_layers
        if self.account_for_embedding_loss:
            if first is not None or last is not None:
                raise bad("account_for_embedding_loss", "give either first/last stage "
                          "layers or account_for_embedding_loss, not both")
            total = layers + 2
            if pp == 1 or total % (pp * v):
                raise bad("account_for_embedding_loss",
                          f"layers + embedding + loss = {total} must divide by pp·vp = "
                          f"{pp * v} (and pp > 1)")
            per = total // pp
            counts = [per] * pp
            counts[0] -= 1
            counts[-1] -= 1
            return tuple(counts)
        if first is not None or last is not None:
            if pp == 1:
                raise bad("first_stage_layers", "first/last stage layers need pp > 1")
            given = [x for x in (first, last) if x is not None]
            rest, middle = layers - sum(given), pp - len(given)
            if rest < 0 or (middle == 0 and rest) or (middle and (rest <= 0 or rest % middle)):
                raise bad("first_stage_layers",
                          f"the other {middle} stage(s) must share the remaining {rest} of "
                          f"{layers} layers evenly; e.g. first = last = "
                          f"{_even_ends(layers, pp)}")
            mid = rest // middle if middle else 0
            counts = [mid] * pp
            if first is not None:
                counts[0] = first
            if last is not None:
                counts[-1] = last
            if v > 1 and any(c % v for c in counts):
                raise bad("vp", f"every stage's layers {sorted(set(counts))} must "
                          f"divide by vp={v}; use account_for_embedding_loss (layers + 2 = "
                          f"{layers + 2} over pp·vp = {pp * v}) or other stage sizes")
            return tuple(counts)
        if v > 1 and layers % (pp * v):
            hint = (f"; or count the embedding and loss as layers "
                    f"(--account-for-embedding-loss: {layers + 2} = {pp * v}·"
                    f"{(layers + 2) // (pp * v)})" if (layers + 2) % (pp * v) == 0 else "")
            fits = [str(k) for k in range(1, layers // pp + 1) if layers % (pp * k) == 0]
            which = f"vp one of {', '.join(fits)}" if fits else \
                f"no vp divides: {layers} layers do not split into {pp} equal stages"
            raise bad("vp", f"pp·vp = {pp * v} must divide the model's {layers} "
                      f"layers (at pp={pp}, {which}), or set first/last stage layers so "
                      f"that every stage's count divides by vp{hint}")
        base, extra = divmod(layers, pp)
        # Megatron-DeepSpeed style uneven split: the first stages take one more layer
        return tuple(base + (1 if i < extra else 0) for i in range(pp))


@dataclass(frozen=True)
class ResolvedParallel:
    """A :class:`ParallelConfig` checked against a model and a world size.

    Attributes mirror the config, with ``dp``, ``seq``, ``global_batch`` and
    ``num_micro`` (micro-batches per step per pipeline) filled in.
    """

    cfg: ParallelConfig
    world: int
    dp: int
    seq: int
    global_batch: int
    num_micro: int
    stage_layers: int = 0
    """Layers of the largest pipeline stage (uneven splits leave the largest stage
    setting the pace)."""
    stage_layer_counts: tuple[int, ...] = ()
    """Layers of every pipeline stage, first to last."""
    stage_mtp_layers: tuple[int, ...] = ()
    """Multi-token-prediction layers of every pipeline stage (from ``pipeline_layout``;
    empty: none)."""

    @property
    def last_stage_layers(self) -> int:
        """Layers of the last stage (which also runs the output head and the loss)."""
        return self.stage_layer_counts[-1] if self.stage_layer_counts else self.stage_layers

    @property
    def tp(self) -> int:
        return self.cfg.tp

    @property
    def pp(self) -> int:
        return self.cfg.pp

    @property
    def cp(self) -> int:
        return self.cfg.cp

    @property
    def ep(self) -> int:
        return self.cfg.ep

    @property
    def etp(self) -> int:
        """Expert tensor-parallel size in effect (``cfg.etp``, or ``tp``)."""
        return self.cfg.etp if self.cfg.etp is not None else self.cfg.tp

    @property
    def edp(self) -> int:
        """Expert data-parallel size: the stage's ``tp·cp·dp`` GPUs over ``etp·ep``."""
        return self.tp * self.cp * self.dp // (self.etp * self.ep)

    @property
    def sp(self) -> bool:
        """Sequence parallelism in effect (needs tp > 1)."""
        return self.cfg.sequence_parallel and self.cfg.tp > 1

    def rank(self, tp_i: int = 0, cp_i: int = 0, dp_i: int = 0, pp_i: int = 0) -> int:
        """Global rank of the given coordinates (Megatron order, TP fastest)."""
        return tp_i + self.tp * (cp_i + self.cp * (dp_i + self.dp * pp_i))

    def coordinates(self, rank: int, moe: bool = False) -> tuple[int, int, int, int]:
        """``rank``'s coordinates ``(tp_i, cp_i, dp_i, pp_i)`` in Megatron's order, or
        with ``moe`` in the MoE layers' folding ``(etp_i, ep_i, edp_i, pp_i)``.

        >>> from fabricsim.workloads.models import get_model
        >>> p = ParallelConfig(tp=2, ep=4).resolve(get_model("mixtral-8x7b"), world=16)
        >>> p.coordinates(11), p.coordinates(11, moe=True)
        ((1, 0, 5, 0), (1, 1, 1, 0))
        """
        sizes = self._sizes(moe)
        out = []
        for size in sizes:
            out.append(rank % size)
            rank //= size
        return out[0], out[1], out[2], out[3]

    def _sizes(self, moe: bool) -> tuple[int, int, int, int]:
        if moe:
            return self.etp, self.ep, self.edp, self.pp
        return self.tp, self.cp, self.dp, self.pp

    def siblings(self, ranks: Sequence[int], moe: bool = False) -> list[list[int]]:
        """Every group that plays the part ``ranks`` plays in the job, ``ranks`` first:
        the same members moved along every coordinate (:meth:`coordinates`) as far as
        all of them stay inside the job. The TP group of rank 0 has one sibling per other
        TP group; a pipeline send between stages 0 and 1 has one per rank of a stage and
        pair of neighbouring stages. A synchronous step waits for the slowest of them.

        >>> from fabricsim.workloads.models import get_model
        >>> p = ParallelConfig(tp=2, pp=3).resolve(get_model("llama2-7b"), world=12)
        >>> p.siblings(p.group("dp"))
        [[0, 2], [4, 6], [8, 10], [1, 3], [5, 7], [9, 11]]
        >>> len(p.siblings(p.group("pp")[:2])), len(p.siblings(p.group("tp")))
        (8, 6)
        """
        import itertools

        sizes = self._sizes(moe)
        coords = [self.coordinates(r, moe) for r in ranks]
        spans = [range(-min(c[d] for c in coords), sizes[d] - max(c[d] for c in coords))
                 for d in range(4)]
        out: list[list[int]] = [list(ranks)]
        for shift in itertools.product(*spans):
            if not any(shift):
                continue
            group = []
            for c in coords:
                r, scale = 0, 1
                for d in range(4):
                    r += (c[d] + shift[d]) * scale
                    scale *= sizes[d]
                group.append(r)
            out.append(group)
        return out

    def shard_size(self, kind: str) -> int:
        """Ranks ZeRO/FSDP shards over in the data-parallel group ``kind`` (``dp`` or
        ``edp``): the whole group, or under hybrid sharding its shard groups (the expert
        group where ``fsdp_shard_size`` divides it, else whole).

        >>> from fabricsim.workloads.models import get_model
        >>> p = ParallelConfig(tp=8, zero="fsdp", fsdp_shard_size=4).resolve(
        ...     get_model("llama3-8b"), world=64)
        >>> p.shard_size("dp"), p.hsdp_groups("dp")
        (4, ([0, 8, 16, 24], [0, 32]))
        """
        n = self.dp * self.cp if kind == "dp" else self.edp
        s = self.cfg.fsdp_shard_size
        return s if s is not None and n % s == 0 else n

    def hsdp_groups(self, kind: str) -> tuple[list[int], list[int]]:
        """The first shard group of ``kind`` and the replicas of its first rank (the
        group a shard's gradient is all-reduced over; one rank without hybrid
        sharding)."""
        g = self.group(kind)
        s = self.shard_size(kind)
        return g[:s], g[::s]

    def group(self, kind: str) -> list[int]:
        """Ranks of the first group of ``kind`` (``tp``, ``cp``, ``dp``, ``ep``, ``edp``
        — expert data parallel —, or ``pp``: the ranks of one pipeline).

        ``dp`` is the group gradients of dense weights are reduced over: ``dp·cp`` ranks.

        Examples
        --------
        >>> from fabricsim.workloads.models import get_model
        >>> p = ParallelConfig(tp=2, ep=4).resolve(get_model("mixtral-8x7b"), world=16)
        >>> p.group("ep"), p.group("edp")
        ([0, 2, 4, 6], [0, 8])
        >>> p = ParallelConfig(tp=2, ep=4, etp=1).resolve(get_model("mixtral-8x7b"), world=16)
        >>> p.group("ep"), p.group("edp")
        ([0, 1, 2, 3], [0, 4, 8, 12])
        """
        if kind == "tp":
            return [self.rank(tp_i=i) for i in range(self.tp)]
        if kind == "cp":
            return [self.rank(cp_i=i) for i in range(self.cp)]
        if kind == "dp":
            return [self.rank(cp_i=c, dp_i=d) for d in range(self.dp) for c in range(self.cp)]
        # the MoE layers fold a stage's tp·cp·dp GPUs as etp (fastest) x ep x edp
        if kind == "ep":
            return [self.etp * j for j in range(self.ep)]
        if kind == "edp":
            return [self.etp * self.ep * k for k in range(self.edp)]
        if kind == "pp":
            return [self.rank(pp_i=i) for i in range(self.pp)]
        raise ConfigError(f"group kind must be one of {', '.join(GROUP_KINDS)}, got {kind!r}",
                          field="kind")


def dispatcher_name(name: str) -> str:
    """The dispatcher field's value for an EP kernel name or alias (NCCL's all-to-all is
    ``alltoall``, Megatron's name).

    >>> dispatcher_name("nccl"), dispatcher_name("low_latency"), dispatcher_name("flex")
    ('alltoall', 'deepep-ll', 'deepep')
    """
    from fabricsim.collectives.ep import ep_kernel

    key = name.strip().lower()
    if key in ("alltoall", "allgather"):
        return "alltoall"
    k = ep_kernel(key, "training.moe_dispatcher")
    return "alltoall" if k == "nccl" else k


def _expand_layout(text: str) -> str:
    """A layout string with its repeats written out and spaces/commas dropped."""
    flat = re.sub(r"[\s,]", "", text)
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    def rep(g: re.Match[str]) -> str:
        if len(g.group(1)) * int(g.group(2)) > _LAYOUT_MAX:
            raise ValueError(f"pipeline_layout expands past {_LAYOUT_MAX:,} symbols; a "
                             f"layout holds one t per decoder layer")
        return g.group(1) * int(g.group(2))

    while True:  # innermost groups first
        flat, n = group.subn(rep, flat)
        if len(flat) > _LAYOUT_MAX:
            raise ValueError(f"pipeline_layout expands past {_LAYOUT_MAX:,} symbols; a "
                             f"layout holds one t per decoder layer")
        if not n:
            break
    return re.sub(r"([EtmL|])\*(\d+)", rep, flat)


_LAYOUT_MAX = 100_000


def parse_pipeline_layout(text: str, pp: int, vp: int, layers: int
                          ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Decoder and MTP layers per pipeline rank of a Megatron-style layout string.

    Raises :class:`ValueError` saying what is wrong (the caller names the field).

    Examples
    --------
    >>> parse_pipeline_layout("Et|(tt|)*30mL", pp=8, vp=4, layers=61)
    ((7, 8, 8, 8, 8, 8, 8, 6), (0, 0, 0, 0, 0, 0, 0, 1))
    >>> parse_pipeline_layout("Et*3|t*2", pp=2, vp=1, layers=5)
    ((3, 2), (0, 0))
    """
    flat = _expand_layout(text)
    bad = sorted(set(re.sub(r"[EtmL|]", "", flat)))
    if bad:
        raise ValueError(f"unknown symbols {''.join(bad)!r} in pipeline_layout; use t "
                         f"(decoder layer), m (MTP layer), E (embedding), L (loss), | "
                         f"between stages and x*N or (...)*N to repeat")
    chunks = flat.split("|")
    if len(chunks) != pp * vp:
        raise ValueError(f"pipeline_layout has {len(chunks)} stages but pp·vp = {pp}·{vp} "
                         f"= {pp * vp}: give one |-separated stage per virtual stage")
    n_t = flat.count("t")
    if n_t != layers:
        raise ValueError(f"pipeline_layout places {n_t} decoder layers (t) but the model "
                         f"has {layers}")
    if "E" in flat and (flat.count("E") > 1 or not chunks[0].startswith("E")):
        raise ValueError("the embedding (E) goes once, at the start of the first stage")
    if "L" in flat and (flat.count("L") > 1 or not chunks[-1].endswith("L")):
        raise ValueError("the loss (L) goes once, at the end of the last stage")
    counts, mtp = [0] * pp, [0] * pp
    for k, c in enumerate(chunks):
        counts[k % pp] += c.count("t")
        mtp[k % pp] += c.count("m")
    if min(counts) == 0:
        raise ValueError(f"pipeline rank {counts.index(0)} gets no decoder layer")
    return tuple(counts), tuple(mtp)


def _even_ends(layers: int, pp: int) -> int:
    """First/last stage size that lets the middle stages split the rest evenly (the
    largest such size not above ``ceil(layers/pp)``), for error messages."""
    for e in range(-(-layers // pp), 0, -1):
        rest = layers - 2 * e
        if pp > 2 and rest > 0 and rest % (pp - 2) == 0:
            return e
    return -(-layers // pp)


def placement_warnings(p: ResolvedParallel, gpus_per_server: int,
                       nvlink_domain_gpus: int) -> list[str]:
    """Warnings about where the groups of ``p`` land on a fabric (empty when all is well).

    TP beyond the NVLink domain is allowed but slow; a TP group that straddles servers
    or NVLink domains unevenly is worse.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> p = ParallelConfig(tp=16).resolve(get_model("llama2-70b"), world=16)
    >>> placement_warnings(p, 8, 8)[0][:40]
    'training.tp=16 spans beyond the NVLink d'
    """
    out: list[str] = []
    tp = p.tp
    if tp > nvlink_domain_gpus:
        out.append(f"training.tp={tp} spans beyond the NVLink domain ({nvlink_domain_gpus} "
                   f"GPU{'s' if nvlink_domain_gpus > 1 else ''}): every layer's tensor-parallel "
                   f"traffic crosses {'PCIe' if tp <= gpus_per_server else 'the network'}; "
                   f"keep tp <= {nvlink_domain_gpus} for speed")
    if tp < gpus_per_server and gpus_per_server % tp:
        out.append(f"training.tp={tp} does not divide the {gpus_per_server} GPUs per server: "
                   f"some TP groups straddle two servers")
    if tp > gpus_per_server and tp % gpus_per_server:
        out.append(f"training.tp={tp} is not a multiple of the {gpus_per_server} GPUs per "
                   f"server: TP groups straddle servers unevenly")
    if p.cp > 1 and tp * p.cp > nvlink_domain_gpus:
        out.append(f"context parallel ring (cp={p.cp}) leaves the NVLink domain: its KV "
                   f"exchange crosses the network")
    return out
