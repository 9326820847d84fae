"""Option groups: the flags several commands take, each defined once.

A flag sets the field of the same name (``--vp`` sets ``vp``, ``--seq-len`` sets
``seq_len``: one vocabulary with the scenario file). A group collects the flags a command
was given into what the jobs layer takes — the cluster's overrides
(:class:`ClusterFlags`), a training section (:class:`~fabricsim.scenario.sections.
TrainingSection`) or a serving section of the flags given — and hands it to the command
as one parameter (:func:`with_groups`). An error about a field a flag set names the flag.

Adding a training flag: the field in the job model (``ParallelConfig``) and one
:class:`Flag` in :data:`TRAINING`; every command that takes the group takes the flag.

Example
-------
>>> from fabricsim.scenario import Scenario
>>> flags = ClusterFlags.of({"nodes": 4, "fabric": "roce-400g"})
>>> sc = flags.apply(Scenario())
>>> sc.cluster.nodes, sc.cluster.fabric
(4, 'roce-400g')
>>> ClusterFlags.of({"gpus": 16}).apply(Scenario()).cluster.nodes  # dgx-h100: 8 per server
2
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricsim.errors import ConfigError, DeprecatedName, FabricsimError
from fabricsim.scenario import Scenario
from fabricsim.scenario.sections import ServingSection, TrainingSection, parse_section

__all__ = ["CLUSTER", "NET_ROUTING", "NO_CLUSTER_FLAGS", "ONE_STEP_ONLY", "SERVING", "STACK",
           "TRAINING",
           "ClusterFlags", "Flag", "Group", "load", "subgroup", "with_groups"]


@dataclass(frozen=True)
class Flag:
    """One command-line flag and the field it sets.

    ``decls`` default to ``--<field with dashes>``; ``convert`` turns the flag's value into
    the field's (``None``: as given); ``old`` names a deprecated spelling still taken (a
    hidden flag that warns)."""

    field: str
    type: Any
    help: str
    decls: tuple[str, ...] = ()
    convert: Callable[[Any], Any] | None = None
    old: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return self.decls or ("--" + self.field.replace("_", "-"),)

    @property
    def param(self) -> str:
        """The command's parameter the flag fills (its field's name)."""
        return self.field


@dataclass(frozen=True)
class Group:
    """Flags a command takes together, and what they become: ``build(given)`` of the
    fields given (``{}`` when none) is handed to the command as its parameter ``name``;
    ``section`` is the scenario section their errors name (``training.tp``)."""

    name: str
    flags: tuple[Flag, ...]
    build: Callable[[dict[str, Any]], Any]
    section: str

    def option(self, name: str) -> Any:
        """One flag of the group as a plain typer option type (``None`` by default), for
        a command that takes that flag alone."""
        f = next(f for f in self.flags if f.field == name)
        return Annotated[f.type, typer.Option(*f.names, help=f.help)]


def with_groups(*groups: Group) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: the command takes every flag of ``groups`` (appended to its own
    options) and receives each group as one parameter; an error naming a field that a
    flag set names the flag instead."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name not in {g.name for g in groups}]
        extra: list[inspect.Parameter] = []
        for g in groups:
            for f in g.flags:
                extra.append(inspect.Parameter(
                    f.param, inspect.Parameter.KEYWORD_ONLY, default=None,
                    annotation=Annotated[f.type, typer.Option(*f.names, help=f.help)]))
                if f.old is not None:
                    extra.append(inspect.Parameter(
                        f.old.lstrip("-").replace("-", "_"), inspect.Parameter.KEYWORD_ONLY,
                        default=None, annotation=Annotated[f.type, typer.Option(
                            f.old, hidden=True, help=f"Old name of {f.names[0]}.")]))

        @functools.wraps(fn)
        def wrapper(**kw: Any) -> Any:
            flag_of: dict[str, str] = {}
            for g in groups:
                given: dict[str, Any] = {}
                for f in g.flags:
                    value = kw.pop(f.param, None)
                    if f.old is not None:
                        old = kw.pop(f.old.lstrip("-").replace("-", "_"), None)
                        if old is not None:
                            if value is not None:
                                raise ConfigError(f"{f.old} is the old name of "
                                                  f"{f.names[0]}; give one", field=f.old)
                            warnings.warn(f"{f.old} is the old name of {f.names[0]}; "
                                          f"write {f.names[0]}", DeprecatedName,
                                          stacklevel=2)
                            value = old
                    if value is None:
                        continue
                    given[f.field] = f.convert(value) if f.convert is not None else value
                    flag_of[f"{g.section}.{f.field}"] = f.names[0].split("/")[0]
                try:
                    kw[g.name] = g.build(given)
                except FabricsimError as e:
                    raise _named(e, flag_of) from None
            try:
                return fn(**kw)
            except FabricsimError as e:
                raise _named(e, flag_of) from None

        wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*own, *extra])
        return wrapper

    return deco


def _named(e: FabricsimError, flag_of: Mapping[str, str]) -> FabricsimError:
    """``e`` naming the flag that set its field, when one did."""
    key = (e.field or "").split(" (")[0]
    for cluster_param in ("params.", "cluster.params."):  # a flag that fills params.X
        if key.startswith(cluster_param) and f"cluster.{key[len(cluster_param):]}" in flag_of:
            key = f"cluster.{key[len(cluster_param):]}"
    flag = flag_of.get(key) or next((v for k, v in flag_of.items()
                                     if key == "--" + k.split(".", 1)[-1].replace("_", "-")),
                                    None)
    if flag is None or flag == e.field:
        return e
    out = type(e)(e.message, field=flag)
    out.__cause__ = e.__cause__
    return out


# -- the cluster ---------------------------------------------------------------------------

#: Cluster flags that fill ``cluster.params`` rather than a field of ``cluster:``.
PARAM_FLAGS = ("routing", "nvlink_domain", "ici_slice", "ici_twisted")


@dataclass(frozen=True)
class ClusterFlags:
    """The cluster flags a command was given (``cluster:`` fields, and ``gpus``: the size
    in GPUs, whole servers or part of one), laid over a scenario by :meth:`apply`."""

    given: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> ClusterFlags:
        return cls(dict(given))

    def apply(self, sc: Scenario) -> Scenario:
        """``sc`` with these flags over its ``cluster:`` section (``routing``,
        ``nvlink_domain``, ``ici_slice`` and ``ici_twisted`` go to ``cluster.params``;
        ``gpus`` sets ``nodes`` and, below one server, ``gpus_per_node``)."""
        if not self.given:
            return sc
        from fabricsim.scenario.cluster import ClusterSpec
        from fabricsim.scenario.loader import validate_section

        data = sc.cluster.model_dump(exclude_unset=True)  # what the flags leave unset stays so
        over = {k: v for k, v in self.given.items() if k not in (*PARAM_FLAGS, "gpus")}
        data.update(over)
        for k in PARAM_FLAGS:
            if k in self.given:
                data["params"] = {**(data.get("params") or {}), k: self.given[k]}
        if "gpus" in self.given:
            nodes, gpn = self._size(sc, data)
            data["nodes"] = nodes
            if gpn is not None:
                data["gpus_per_node"] = gpn
        cluster = validate_section(ClusterSpec, data, "cluster")
        return sc.model_copy(update={"cluster": cluster})

    def _size(self, sc: Scenario, data: Mapping[str, Any]) -> tuple[int, int | None]:
        from fabricsim.scenario.cluster import scenario_catalog

        gpus = int(self.given["gpus"])
        system = str(data.get("system", sc.cluster.system))
        per = data.get("gpus_per_node") or scenario_catalog(sc.systems).system(system).gpus
        if gpus < 1:
            raise ConfigError(f"must be a positive number of GPUs, got {gpus}", field="--gpus")
        if gpus < per and "gpus_per_node" not in self.given:
            nodes, gpn = 1, gpus
        elif gpus % per:
            raise ConfigError(f"{gpus} GPUs are not whole {system} servers of {per}; "
                              f"give a multiple of {per} (or --gpus-per-node)", field="--gpus")
        else:
            nodes, gpn = gpus // per, None
        if "nodes" in self.given and self.given["nodes"] != nodes:
            raise ConfigError(f"{gpus} GPUs are {nodes} server(s) but --nodes says "
                              f"{self.given['nodes']}; give one of them", field="--gpus")
        return nodes, gpn


#: The default a command's ``cluster`` parameter carries (its group hands the flags given).
NO_CLUSTER_FLAGS = ClusterFlags()

CLUSTER = Group("cluster", (
    Flag("system", str | None, "System preset, e.g. dgx-h100.", ("--system", "-s")),
    Flag("nodes", int | None, "Number of servers (never -n, which nccl-tests uses for "
         "iterations)."),
    Flag("gpus", int | None, "Cluster size in GPUs (instead of --nodes: whole servers, or "
         "part of one)."),
    Flag("gpus_per_node", int | None, "GPUs used per server."),
    Flag("fabric", str | None, "Scale-out fabric preset, e.g. ib-ndr, roce-400g."),
    Flag("topology", str | None, "fat-tree, rail-optimized, dragonfly or torus3d."),
    Flag("oversubscription", float | None, "Leaf down:up ratio (1 = non-blocking)."),
    Flag("nvlink_domain", int | None, "GPUs in one NVLink domain across racks, e.g. 576 on "
         "8 gb200-nvl72 racks (GB200 NVL576, two NVSwitch tiers)."),
    Flag("ici_slice", str | None, "TPU systems: slice shape of the ICI torus, e.g. 4x4x8 "
         "(tpu-v4, tpu-v5p, tpu7x) or 8x16 (tpu-v5e, tpu-v6e); more chips than one slice "
         "are several slices joined by the data-centre network. Default: the most compact "
         "slice of all the chips."),
    Flag("ici_twisted", bool | None, "TPU systems: wire a k x k x 2k or k x 2k x 2k slice "
         "as a twisted torus.", ("--ici-twisted",)),
), ClusterFlags.of, "cluster")

#: The cluster flags with the scale-out routing (``cluster.params.routing``).
NET_ROUTING = Group("cluster", (*CLUSTER.flags, Flag(
    "routing", str | None, "Scale-out routing: dmodk (InfiniBand tables; default on IB/EFA), "
    "ecmp (per-flow hashing; default on Ethernet) or adaptive (IB adaptive routing, "
    "Spectrum-X/UEC spraying; fat-tree and rail topologies).")), ClusterFlags.of, "cluster")


def load(path: Path | None, cluster: ClusterFlags) -> Scenario:
    """The scenario at ``path`` (or an empty one) with the cluster flags over it."""
    from fabricsim.scenario import load_scenario

    return cluster.apply(load_scenario(path) if path is not None else Scenario())


# -- training ------------------------------------------------------------------------------


def _zero(v: str) -> int | str:
    if v not in ("0", "1", "2", "3", "fsdp"):
        raise ConfigError(f"--zero must be 0, 1, 2, 3 or fsdp, got {v!r}", field="--zero")
    return v if v == "fsdp" else int(v)


def _words(v: str) -> list[str]:
    return [x for x in v.replace(",", " ").split()]


def _training(given: dict[str, Any]) -> TrainingSection | None:
    if not given:
        return None
    for key, what in (("from_torchtitan", "torchtitan config"),
                      ("from_maxtext", "MaxText config")):
        if given.get(key) is not None:  # a path on the command line: the file's text
            from fabricsim.scenario.loader import read_text_file

            given[key] = read_text_file(Path(given[key]), 1_000_000, what,
                                        field="--" + key.replace("_", "-"))
    if given.pop("fp8", False):
        if given.get("precision") not in (None, "fp8"):
            raise ConfigError(f"--fp8 and --precision {given['precision']} contradict each "
                              f"other; give one", field="--fp8")
        given["precision"] = "fp8"
    return parse_section(TrainingSection, given, "--") if given else None


MODEL = Flag("model", str | None, "Model preset, e.g. llama3-70b.", ("--model", "-m"))

#: What the training commands (train, scale, plan) share: model, layout, stack, price.
TRAINING = Group("training", (
    MODEL,
    Flag("tp", int | None, "Tensor-parallel size."),
    Flag("pp", int | None, "Pipeline-parallel size."),
    Flag("dp", int | None, "Data-parallel size (default: the rest)."),
    Flag("cp", int | None, "Context-parallel size."),
    Flag("ep", int | None, "Expert-parallel size."),
    Flag("etp", int | None, "Expert tensor-parallel size (Megatron's "
         "--expert-tensor-parallel-size; default --tp): 1 keeps whole experts per GPU and EP "
         "groups of consecutive GPUs, as NeMo's DeepSeek-V3 recipes run."),
    Flag("zero", str | None, "ZeRO stage 0|1|2|3 or fsdp.", convert=_zero),
    Flag("reshard_after_forward", bool | None, "With --zero fsdp: free gathered weights "
         "after each forward (FSDP's default) or keep them to the backward (torchtitan with "
         "a pipeline: gathered once per step, gradients reduce-scattered once).",
         ("--reshard-after-forward/--no-reshard-after-forward",)),
    Flag("fsdp_impl", str | None, "With --zero fsdp: pytorch (PyTorch FSDP/FSDP2, the "
         "default: gradients cast and divided in kernels of their own every micro-batch) or "
         "megatron (Megatron-FSDP: only its collectives stream weights and gradients "
         "through HBM)."),
    Flag("attention_kernel", str | None, "flash (FlashAttention 2/3, cuDNN fused "
         "attention: the default) or flash1 (FlashAttention 1 and 2023's Triton kernels, "
         "e.g. llm-foundry's attn_impl triton: about half the rate)."),
    Flag("grad_reduce_dtype", str | None, "bf16 (the default) or fp32: the precision "
         "data-parallel gradients are reduced in (Megatron with --bf16 and PyTorch FSDP's "
         "reduce_dtype float32, as llm-foundry and torchtitan ship, reduce in fp32: twice "
         "the bytes)."),
    Flag("micro_batch", int | None, "Sequences per micro-batch."),
    Flag("global_batch", int | None, "Sequences per step."),
    Flag("seq_len", int | None, "Sequence length."),
    Flag("precision", str | None, "bf16, fp8, or fp4 (NVFP4 on Blackwell: B200, GB200, "
         "B300, GB300)."),
    Flag("fp8", bool | None, "FP8 GEMMs (same as --precision fp8).", ("--fp8",),
         convert=bool),
    Flag("fp8_recipe", str | None, "FP8 scaling: tensorwise (TE current scaling, "
         "default), delayed, blockwise, mxfp8 (Blackwell) or torchao (torchtitan's "
         "Float8)."),
    Flag("recompute", str | None, "none, selective or full."),
    Flag("recompute_modules", str | None, "With --recompute selective: the parts "
         "recomputed, comma-separated (Megatron's --recompute-modules): core_attn, mlp, "
         "moe, moe_act, shared_experts, layernorm, mla_up_proj. Default core_attn.",
         convert=_words),
    Flag("recompute_layers", int | None, "With --recompute full: layers of each stage to "
         "recompute (Megatron's block method); default all."),
    Flag("offload_layers", int | None, "Keep the activations of this many layers in host "
         "memory (Megatron's --cpu-offloading-num-layers; with --pp 1 and no "
         "recomputation): less GPU memory, copies over NVLink-C2C or PCIe."),
    Flag("vp", int | None, "Virtual pipeline stages per GPU (interleaved 1F1B; Megatron's "
         "--virtual-pipeline-model-parallel-size). Default with --pp > 1: the fastest "
         "interleaving that fits memory, as recipes at scale run; --vp 1 for plain 1F1B."),
    Flag("pp_schedule", str | None, "Pipeline schedule: 1f1b (Megatron's; interleaved "
         "with --vp) or dualpipe (DeepSeek-V3's bidirectional schedule: smaller bubble, two "
         "stages' weights per GPU; even --pp, an even number of at least 2·pp "
         "micro-batches)."),
    Flag("first_stage_layers", int | None, "Layers of the first pipeline stage (Megatron's "
         "--decoder-first-pipeline-num-layers)."),
    Flag("last_stage_layers", int | None, "Layers of the last pipeline stage (it also runs "
         "the output head)."),
    Flag("account_for_embedding_loss", bool | None, "Count the embedding and the loss as "
         "a layer each when splitting the pipeline (layers + 2 must divide by pp x vp).",
         ("--account-for-embedding-loss",)),
    Flag("pipeline_layout", str | None, "Layers of every virtual pipeline stage in "
         "Megatron's --pipeline-model-parallel-layout notation, e.g. 'Et|(tt|)*30mL' "
         "(DeepSeek-V3, pp 8, vp 4): t decoder layer, m MTP layer, E embedding, L loss, | "
         "between stages."),
    Flag("tp_comm_overlap", bool | None, "Hide TP communication under the GEMMs "
         "(userbuffers).", ("--tp-comm-overlap/--no-tp-comm-overlap",)),
    Flag("ep_overlap", bool | None, "Hide expert all-to-all under another micro-batch's "
         "compute (DualPipe).", ("--ep-overlap/--no-ep-overlap",)),
    Flag("moe_node_limit", int | None, "Node-limited MoE routing (DeepSeek-V3: 4): a token "
         "crosses the network once per server it visits."),
    Flag("moe_dispatcher", str | None, "The EP kernel family: alltoall (NCCL, one copy "
         "per routed expert), deepep (one network copy per destination server, fanned out "
         "over NVLink), hybridep, deepep-ll (low-latency) or nvlink-onesided.",
         ("--moe-dispatcher", "--ep-kernel")),
    Flag("fsdp_shard_size", int | None, "Hybrid sharding (HSDP): ZeRO/FSDP shards over "
         "groups of this many data-parallel ranks; the groups are replicas that all-reduce "
         "their gradient shards once a step."),
    Flag("moe_capacity_factor", float | None, "Megatron's --moe-expert-capacity-factor: "
         "an expert takes at most this many times its even share; the rest are dropped.",
         ("--moe-capacity-factor", "--moe-expert-capacity-factor")),
    Flag("moe_pad_to_capacity", bool | None, "Pad every expert's input to its capacity "
         "(Megatron's --moe-pad-expert-input-to-capacity).",
         ("--moe-pad-to-capacity/--no-moe-pad-to-capacity",)),
    Flag("moe_imbalance", float | None, "MoE routing imbalance: the busiest "
         "expert-parallel rank's tokens over the mean (default 1.0, balanced)."),
    Flag("overlap_grad_reduce", bool | None, "Overlap the DP gradient reduce-scatter with "
         "the backward (default on).", ("--overlap-grad-reduce/--no-overlap-grad-reduce",)),
    Flag("overlap_param_gather", bool | None, "Overlap the DP parameter all-gather with the "
         "forward (default on).", ("--overlap-param-gather/--no-overlap-param-gather",)),
    Flag("overlap_p2p_comm", bool | None, "Hide pipeline sends/receives behind compute "
         "(default: with --vp > 1 only, as Megatron-LM; plain 1F1B waits on them every "
         "micro-batch).", ("--overlap-p2p-comm/--no-overlap-p2p-comm",)),
    Flag("sequence_parallel", bool | None, "Megatron sequence parallelism with TP "
         "(default on).", ("--sequence-parallel/--no-sequence-parallel",)),
    Flag("from_megatron", str | None, "A Megatron-LM/NeMo argument list, pasted as one "
         "string; explicit flags given here override it."),
    Flag("from_torchtitan", str | None, "A torchtitan job config (TOML file): model, "
         "batch, FSDP2/TP/PP/CP/EP degrees, activation checkpointing, Float8; explicit "
         "flags given here override it."),
    Flag("from_maxtext", str | None, "A MaxText config (YAML file): model, per-device "
         "batch, sequence, ICI/DCN mesh degrees, remat policy, FP8; explicit flags given "
         "here override it."),
    Flag("from_nemo", str | None, "A NeMo 2 / Megatron-Bridge recipe command line, pasted "
         "as one string (--factory llama3_8b trainer.strategy.tensor_model_parallel_size=4 "
         "...); explicit flags given here override it."),
    Flag("backend", str | None, "analytic or flow (flow runs the scenario's faults and "
         "background traffic)."),
    Flag("whole_fabric", bool | None, "With --backend flow: run every group of each part "
         "of the step at once on the fabric (they meet on NICs and switches), not one "
         "group alone; reports the flows simulated, the links that limited each part and "
         "the slowdown against each group alone.",
         ("--whole-fabric/--no-whole-fabric",)),
    Flag("flow_precision", float | None, "With --whole-fabric: settle flow finishes "
         "within this fraction of a transfer's duration as one event (default 1e-3; 0 "
         "exact)."),
    Flag("gpu_hour_usd", float | None, "Price of a GPU-hour."),
    Flag("checkpoint_gbps", float | None, "Aggregate checkpoint write bandwidth to storage, "
         "GB/s (default: the servers' storage NICs, at most 2,000 GB/s: the sustained "
         "throughput of Meta's Llama 3 storage, Tectonic)."),
    Flag("restart_min", float | None, "Minutes to detect a failure, reschedule and reload "
         "(default 10)."),
), _training, "training")


def _serving(given: dict[str, Any]) -> ServingSection | None:
    return parse_section(ServingSection, given, "--") if given else None


#: What ``infer`` takes: the model and how one instance serves it.
SERVING = Group("serving", (
    MODEL,
    Flag("tp", int | None, "Tensor-parallel size of the instance (default 8)."),
    Flag("pp", int | None, "Pipeline stages of the instance (default 1)."),
    Flag("ep", int | None, "Expert-parallel groups inside the TP group (MoE models; "
         "divides --tp; default 1)."),
    Flag("batch", int | None, "Sequences decoded together (default 1)."),
    Flag("prompt_len", int | None, "Prompt tokens per sequence (default 1024)."),
    Flag("output_len", int | None, "Output tokens per sequence (default 256)."),
    Flag("precision", str | None, "bf16 (the default), fp8, fp8-weights (FP8 weights, "
         "16-bit math) or nvfp4 (Blackwell)."),
    Flag("kv_precision", str | None, "KV-cache precision, bf16 or fp8 (default: fp8 with "
         "--precision fp8, else bf16)."),
    Flag("engine", str | None, "Serving engine's host costs and kernels: trtllm (the "
         "default), trtllm-python, trtllm-0.6, vllm-0.5, sglang (sglang-0.4), gpt-fast or "
         "ideal."),
    Flag("tpot_target_ms", float | None, "Continuous batching: the largest batch whose time "
         "per output token stays within this many ms.", old="--tpot-target"),
    Flag("max_batch", int | None, "Cap on the continuous batch (vLLM's --max-num-seqs)."),
    Flag("prefill_tp", int | None, "Disaggregated serving: a prefill instance of this many "
         "GPUs on other servers sends each request's KV cache to the decode instance."),
    Flag("attention_dp", int | None, "Data-parallel attention (SGLang's --dp-size with "
         "--enable-dp-attention): attention on this many groups of tp/attention_dp GPUs, "
         "the experts over all --tp GPUs (give --ep equal to --tp).",
         ("--attention-dp", "--dp-size")),
    Flag("redundant_experts", int | None, "With --attention-dp: extra copies of the busiest "
         "experts over the EP ranks (SGLang's --ep-num-redundant-experts, DeepSeek's EPLB).",
         ("--redundant-experts", "--ep-num-redundant-experts")),
    Flag("ep_kernel", str | None, "With --attention-dp: the dispatch/combine kernels "
         "(deepep, deepep-ll, hybridep, nvlink-onesided, nccl; default DeepEP: "
         "low-latency for decode, normal for prefill)."),
    Flag("backend", str | None, "analytic or flow (flow serves with the scenario's faults "
         "and background traffic)."),
), _serving, "inference")


#: Training flags only ``train`` takes (one step, every group run on the fabric):
#: ``scale`` and ``plan`` time many steps by shape and are not given them.
ONE_STEP_ONLY = ("whole_fabric", "flow_precision")


def subgroup(group: Group, fields: tuple[str, ...]) -> Group:
    """The flags of ``group`` that set ``fields``: what a command that reads only those
    takes (it is given no flag it would ignore)."""
    return Group(group.name, tuple(f for f in group.flags if f.field in fields), group.build,
                 group.section)


#: What ``plan-parallel`` takes of a training job: the model, the batch and the software
#: stack that every layout it tries keeps (the layout is what it searches).
STACK = subgroup(TRAINING, ("model", "global_batch", "seq_len", "precision", "fp8",
                            "fp8_recipe", "zero", "fsdp_impl", "attention_kernel",
                            "grad_reduce_dtype", "backend"))
