"""``fabricsim train``: step time, MFU, breakdown and the cost of communication."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from fabricsim.cli.common import (
    FabricOpt,
    GpusPerNodeOpt,
    JsonOpt,
    NodesOpt,
    OversubOpt,
    ScenarioArg,
    SystemOpt,
    TopologyOpt,
    console,
    fabric_from_scenario,
    print_json,
    scenario_with_overrides,
)
from fabricsim.errors import ConfigError
from fabricsim.scenario.fabric import training_price
from fabricsim.scenario.sections import (
    check_non_negative,
    check_positive,
    training_from_section,
)
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.parallel import ParallelConfig

ModelOpt = Annotated[str | None,
                     typer.Option("--model", "-m", help="Model preset, e.g. llama3-70b.")]
TpOpt = Annotated[int | None, typer.Option("--tp", help="Tensor-parallel size.")]
PpOpt = Annotated[int | None, typer.Option("--pp", help="Pipeline-parallel size.")]
DpOpt = Annotated[int | None, typer.Option("--dp", help="Data-parallel size (default: the rest).")]
CpOpt = Annotated[int | None, typer.Option("--cp", help="Context-parallel size.")]
EpOpt = Annotated[int | None, typer.Option("--ep", help="Expert-parallel size.")]
ReshardOpt = Annotated[bool | None, typer.Option(
    "--reshard-after-forward/--no-reshard-after-forward",
    help="With --zero fsdp: free gathered weights after each forward (FSDP's default) or "
    "keep them to the backward (torchtitan with a pipeline: gathered once per step, "
    "gradients reduce-scattered once).")]
FsdpImplOpt = Annotated[str | None, typer.Option(
    "--fsdp-impl", help="With --zero fsdp: pytorch (PyTorch FSDP/FSDP2, the default: "
    "gradients cast and divided in kernels of their own every micro-batch) or megatron "
    "(Megatron-FSDP: only its collectives stream weights and gradients through HBM).")]
GradReduceOpt = Annotated[str | None, typer.Option(
    "--grad-reduce-dtype", help="bf16 (the default) or fp32: the precision data-parallel "
    "gradients are reduced in (Megatron with --bf16 and PyTorch FSDP's reduce_dtype "
    "float32, as llm-foundry and torchtitan ship, reduce in fp32: twice the bytes).")]
AttnKernelOpt = Annotated[str | None, typer.Option(
    "--attention-kernel", help="flash (FlashAttention 2/3, cuDNN fused attention: the "
    "default) or flash1 (FlashAttention 1 and 2023's Triton kernels, e.g. llm-foundry's "
    "attn_impl triton: about half the rate).")]
EtpOpt = Annotated[int | None, typer.Option(
    "--etp", help="Expert tensor-parallel size (Megatron's --expert-tensor-parallel-size; "
    "default --tp): 1 keeps whole experts per GPU and EP groups of consecutive GPUs, as "
    "NeMo's DeepSeek-V3 recipes run.")]
ZeroOpt = Annotated[str | None, typer.Option("--zero", help="ZeRO stage 0|1|2|3 or fsdp.")]
MbOpt = Annotated[int | None, typer.Option("--micro-batch", help="Sequences per micro-batch.")]
GbOpt = Annotated[int | None, typer.Option("--global-batch", help="Sequences per step.")]
SeqOpt = Annotated[int | None, typer.Option("--seq-len", help="Sequence length.")]
PrecOpt = Annotated[str | None, typer.Option(
    "--precision", help="bf16, fp8, or fp4 (NVFP4 on Blackwell: B200, GB200, B300, GB300).")]
RcOpt = Annotated[str | None, typer.Option("--recompute", help="none, selective or full.")]
VpOpt = Annotated[int | None, typer.Option(
    "--vp", help="Virtual pipeline stages per GPU (interleaved 1F1B; Megatron's "
    "--virtual-pipeline-model-parallel-size).")]
FirstOpt = Annotated[int | None, typer.Option(
    "--first-stage-layers", help="Layers of the first pipeline stage (Megatron's "
    "--decoder-first-pipeline-num-layers).")]
LastOpt = Annotated[int | None, typer.Option(
    "--last-stage-layers", help="Layers of the last pipeline stage (it also runs the "
    "output head).")]
AccOpt = Annotated[bool | None, typer.Option(
    "--account-for-embedding-loss", help="Count the embedding and the loss as a layer "
    "each when splitting the pipeline (layers + 2 must divide by pp x vp).")]
RcModulesOpt = Annotated[str | None, typer.Option(
    "--recompute-modules", help="With --recompute selective: the parts recomputed, comma-"
    "separated (Megatron's --recompute-modules): core_attn, mlp, moe, moe_act, "
    "shared_experts, layernorm, mla_up_proj. Default core_attn.")]
LayoutOpt = Annotated[str | None, typer.Option(
    "--pipeline-layout", help="Layers of every virtual pipeline stage in Megatron's "
    "--pipeline-model-parallel-layout notation, e.g. 'Et|(tt|)*30mL' (DeepSeek-V3, pp 8, "
    "vp 4): t decoder layer, m MTP layer, E embedding, L loss, | between stages.")]
PpSchedOpt = Annotated[str | None, typer.Option(
    "--pp-schedule", help="Pipeline schedule: 1f1b (Megatron's; interleaved with --vp) or "
    "dualpipe (DeepSeek-V3's bidirectional schedule: smaller bubble, two stages' weights "
    "per GPU; even --pp, an even number of at least 2·pp micro-batches).")]
RcLayersOpt = Annotated[int | None, typer.Option(
    "--recompute-layers", help="With --recompute full: layers of each stage to recompute "
    "(Megatron's block method); default all.")]
OffloadOpt = Annotated[int | None, typer.Option(
    "--offload-layers", help="Keep the activations of this many layers in host memory "
    "(Megatron's --cpu-offloading-num-layers; with --pp 1 and no recomputation): less GPU "
    "memory, copies over NVLink-C2C or PCIe.")]
TpcOpt = Annotated[bool | None, typer.Option(
    "--tp-comm-overlap/--no-tp-comm-overlap",
    help="Hide TP communication under the GEMMs (userbuffers).")]
EpoOpt = Annotated[bool | None, typer.Option(
    "--ep-overlap/--no-ep-overlap",
    help="Hide expert all-to-all under another micro-batch's compute (DualPipe).")]
NodeLimitOpt = Annotated[int | None, typer.Option(
    "--moe-node-limit", help="Node-limited MoE routing (DeepSeek-V3: 4): a token crosses "
    "the network once per server it visits.")]
DispatcherOpt = Annotated[str | None, typer.Option(
    "--moe-dispatcher", help="alltoall (one copy per routed expert) or deepep (DeepEP/"
    "HybridEP: one network copy per destination server, fanned out over NVLink).")]
ImbalanceOpt = Annotated[float | None, typer.Option(
    "--moe-imbalance", help="MoE routing imbalance: the busiest expert-parallel rank's "
    "tokens over the mean (default 1.0, balanced).")]
OgrOpt = Annotated[bool | None, typer.Option(
    "--overlap-grad-reduce/--no-overlap-grad-reduce",
    help="Overlap the DP gradient reduce-scatter with the backward (default on).")]
OpgOpt = Annotated[bool | None, typer.Option(
    "--overlap-param-gather/--no-overlap-param-gather",
    help="Overlap the DP parameter all-gather with the forward (default on).")]
P2pOpt = Annotated[bool | None, typer.Option(
    "--overlap-p2p-comm/--no-overlap-p2p-comm",
    help="Hide pipeline sends/receives behind compute (default: with --vp > 1 only, as "
    "Megatron-LM; plain 1F1B waits on them every micro-batch).")]
SpOpt = Annotated[bool | None, typer.Option(
    "--sequence-parallel/--no-sequence-parallel",
    help="Megatron sequence parallelism with TP (default on).")]
Fp8Opt = Annotated[bool, typer.Option("--fp8", help="FP8 GEMMs (same as --precision fp8).")]
Fp8RecipeOpt = Annotated[str | None, typer.Option(
    "--fp8-recipe", help="FP8 scaling: tensorwise (TE current scaling, default), delayed, "
    "blockwise, mxfp8 (Blackwell) or torchao (torchtitan's Float8).")]
MegatronOpt = Annotated[str | None, typer.Option(
    "--from-megatron", help="A Megatron-LM/NeMo argument list, pasted as one string; "
    "explicit flags given here override it.")]
BackendOpt = Annotated[str | None, typer.Option("--backend", help="analytic or flow.")]
PriceOpt = Annotated[float | None, typer.Option("--gpu-hour-usd", help="Price of a GPU-hour.")]


def job_from_cli(scenario: Path | None, *, model: str | None, flags: dict[str, Any]
                 ) -> tuple[Any, TransformerSpec, ParallelConfig, dict[str, Any]]:
    """Scenario + flags → (scenario, model, parallel config, extras)."""
    sc = scenario_with_overrides(
        scenario, system=flags.pop("system"), nodes=flags.pop("nodes"),
        gpus_per_node=flags.pop("gpus_per_node"), fabric=flags.pop("fabric"),
        topology=flags.pop("topology"), oversubscription=flags.pop("oversubscription"))
    section = dict(sc.training or {})
    megatron = flags.pop("from_megatron", None)
    if megatron:
        from fabricsim.workloads.training.megatron import parse_megatron_args

        parsed, ignored = parse_megatron_args(megatron)
        from fabricsim.workloads.models import MODEL_FIELDS

        if model is None and "model" not in section \
                and not any(k in MODEL_FIELDS for k in (*section, *parsed)):
            raise ConfigError("the Megatron list sets no model shape and none is named: "
                              "give --model (e.g. llama3-70b), or --num-layers, "
                              "--hidden-size, --ffn-hidden-size, --num-attention-heads in "
                              "the list and vocab in a scenario", field="--model")
        section.update(parsed)
        extra_notes = [f"--from-megatron ignored (no effect on the step time): "
                       f"{', '.join(ignored)}"] if ignored else []
    else:
        extra_notes = []
    if flags.pop("fp8", False):
        if flags.get("precision") not in (None, "fp8"):
            raise ConfigError(f"--fp8 and --precision {flags['precision']} contradict each "
                              f"other; give one", field="--fp8")
        flags["precision"] = "fp8"
    if model is not None:
        section["model"] = model
    zero = flags.pop("zero", None)
    if zero is not None:
        if zero not in ("0", "1", "2", "3", "fsdp"):
            raise ConfigError(f"--zero must be 0, 1, 2, 3 or fsdp, got {zero!r}",
                              field="training.zero")
        section["zero"] = zero if zero == "fsdp" else int(zero)
    for k, v in flags.items():
        if v is not None:
            section[k] = v
    m, cfg, extra = training_from_section(section)
    extra = training_price(extra, sc)
    extra["notes"] = [*extra.get("notes", []), *extra_notes]
    return sc, m, cfg, extra


def _layout_words(par: dict[str, Any]) -> str:
    """The pipeline and MoE settings a run's header line names, when they are set."""
    words = []
    if par.get("vp", 1) > 1:
        words.append(f"vp={par['vp']}")
    if par.get("pp_schedule", "1f1b") != "1f1b":
        words.append(f"schedule={par['pp_schedule']}")
    if par.get("pipeline_layout"):
        words.append(f"layout={par['pipeline_layout']}")
    if par.get("recompute_modules"):
        words.append(f"modules={','.join(par['recompute_modules'])}")
    if par.get("etp") is not None and par["etp"] != par.get("tp"):
        words.append(f"etp={par['etp']}")
    if par.get("ep", 1) > 1 and par.get("moe_dispatcher") != "alltoall":
        words.append(f"dispatcher={par['moe_dispatcher']}")
    return "".join(" " + escape(w) for w in words)


def layout_flags(*, vp: int | None = None, first_stage_layers: int | None = None,
                 last_stage_layers: int | None = None,
                 account_for_embedding_loss: bool | None = None,
                 pipeline_layout: str | None = None,
                 pp_schedule: str | None = None,
                 recompute_modules: str | None = None,
                 recompute_layers: int | None = None, offload_layers: int | None = None,
                 tp_comm_overlap: bool | None = None,
                 ep_overlap: bool | None = None, moe_node_limit: int | None = None,
                 moe_dispatcher: str | None = None,
                 moe_imbalance: float | None = None,
                 overlap_grad_reduce: bool | None = None,
                 overlap_param_gather: bool | None = None,
                 overlap_p2p_comm: bool | None = None,
                 sequence_parallel: bool | None = None, fp8: bool = False,
                 fp8_recipe: str | None = None,
                 from_megatron: str | None = None) -> dict[str, Any]:
    """The Megatron/NeMo layout flags as ``training:`` fields (unset ones left out)."""
    return {"vp": vp, "first_stage_layers": first_stage_layers,
            "last_stage_layers": last_stage_layers,
            "account_for_embedding_loss": account_for_embedding_loss,
            "pipeline_layout": pipeline_layout, "pp_schedule": pp_schedule,
            "recompute_modules": [x for x in recompute_modules.replace(",", " ").split()]
            if recompute_modules is not None else None,
            "recompute_layers": recompute_layers, "offload_layers": offload_layers,
            "tp_comm_overlap": tp_comm_overlap,
            "ep_overlap": ep_overlap, "moe_node_limit": moe_node_limit,
            "moe_dispatcher": moe_dispatcher,
            "moe_imbalance": moe_imbalance,
            "overlap_grad_reduce": overlap_grad_reduce,
            "overlap_param_gather": overlap_param_gather,
            "overlap_p2p_comm": overlap_p2p_comm,
            "sequence_parallel": sequence_parallel, "fp8": fp8, "fp8_recipe": fp8_recipe,
            "from_megatron": from_megatron}


#: The parameters of :func:`layout_flags`, as the commands that take them name them.
LAYOUT_PARAMS = tuple(inspect.signature(layout_flags).parameters)


def layout_from(values: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`layout_flags` of a command's parameter ``values`` (its ``locals()``): the
    commands that take the layout flags (train, scale) pass them on alike."""
    return layout_flags(**{k: values[k] for k in LAYOUT_PARAMS})


CkptOpt = Annotated[float | None, typer.Option(
    "--checkpoint-gbps", help="Aggregate checkpoint write bandwidth to storage, GB/s "
    "(default: the servers' storage NICs, at most 2,000 GB/s: the sustained throughput "
    "of Meta's Llama 3 storage, Tectonic).")]
RestartOpt = Annotated[float | None, typer.Option(
    "--restart-min", help="Minutes to detect a failure, reschedule and reload (default 10, "
    "or the scenario's training.restart_min).")]


def goodput_inputs(checkpoint_gbps: float | None, restart_min: float | None,
                   extra: dict[str, Any] | None = None) -> dict[str, float]:
    """``--checkpoint-gbps`` (GB/s) and ``--restart-min`` as the keywords of
    :func:`fabricsim.workloads.training.goodput.goodput_on_fabric`, each checked (an error names
    the flag); a flag not given takes the scenario's ``training:`` value (``extra``), else
    the defaults (the servers' storage NICs; 10 minutes)."""
    from fabricsim.scenario.sections import goodput_settings

    flags = {"checkpoint_gbps": check_positive(checkpoint_gbps, "--checkpoint-gbps"),
             "restart_min": check_non_negative(restart_min, "--restart-min")}
    return goodput_settings({**(extra or {}), **{k: v for k, v in flags.items()
                                                 if v is not None}})


def run_goodput(fab: Any, params: float, step_time_s: float, price: float, world: int, *,
                inputs: dict[str, float], flags: frozenset[str] = frozenset()) -> Any:
    """Goodput of the run (:func:`fabricsim.workloads.training.goodput.goodput_on_fabric`) with the
    CLI's :func:`goodput_inputs`; a job that cannot progress names what is behind it: the
    flag if it was given (``flags``: ``checkpoint_gbps``, ``restart_min``,
    ``global_batch``), else the scenario's ``training:`` field."""
    from fabricsim.errors import ModelError
    from fabricsim.workloads.training.goodput import goodput_on_fabric

    try:
        return goodput_on_fabric(fab, params=params, step_time_s=step_time_s, gpus=world,
                                 gpu_hour_usd=max(price, 0.0), **inputs)
    except ModelError as e:  # name the input behind the loss
        key = {"checkpoint_write_bytes_per_s": "checkpoint_gbps",
               "restart_s": "restart_min", "step_time_s": "global_batch"}.get(e.field or "")
        field = e.field if key is None else ("--" + key.replace("_", "-") if key in flags
                                             else f"training.{key}")
        raise ModelError(e.message, field=field) from None


def minutes(seconds: float) -> str:
    """A checkpoint interval for people: ``'45 s'`` under a minute, else ``'12 min'``.

    >>> minutes(15.86), minutes(1830.0)
    ('16 s', '30 min')
    """
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.0f} min"


def price_from_cli(flag: float | None, extra: dict[str, Any]) -> float | None:
    """The $/GPU-hour to use: ``--gpu-hour-usd`` if given (positive and finite, else a
    :class:`~fabricsim.errors.ConfigError` naming the flag), else the scenario's."""
    if flag is not None:
        price: float | None = check_positive(flag, "--gpu-hour-usd")
    else:
        price = float(extra["gpu_hour_usd"]) if extra.get("gpu_hour_usd") is not None \
            else None
    if price is not None and price > MAX_GPU_HOUR_USD:  # dollars that overflow mean nothing
        raise ConfigError(f"must be at most {MAX_GPU_HOUR_USD:,.0f} $ per GPU-hour, got "
                          f"{price:g}", field="--gpu-hour-usd" if flag is not None
                          else "gpu_hour_usd")
    return price


#: Highest price of a GPU-hour taken (a GPU-hour costs dollars, not 1e308 of them).
MAX_GPU_HOUR_USD = 10_000.0


def _grad_dtype(dtype: str | None) -> str | None:
    """``--grad-reduce-dtype`` checked (None: unset)."""
    if dtype is not None and dtype not in ("bf16", "fp32"):
        raise ConfigError(f"must be bf16 or fp32, got {dtype!r}", field="--grad-reduce-dtype")
    return dtype


def stack_flags(fsdp_impl: str | None, attention_kernel: str | None,
                grad_reduce_dtype: str | None) -> dict[str, Any]:
    """``--fsdp-impl``, ``--attention-kernel`` and ``--grad-reduce-dtype`` as
    ``training:`` fields (None: unset, the scenario's or the default holds)."""
    return {"fsdp_impl": fsdp_impl, "attention_kernel": attention_kernel,
            "grad_reduce_dtype": _grad_dtype(grad_reduce_dtype)}


def register(app: typer.Typer) -> None:
    @app.command("train")
    def train(scenario: ScenarioArg = None, system: SystemOpt = None, nodes: NodesOpt = None,
              gpus_per_node: GpusPerNodeOpt = None, fabric: FabricOpt = None,
              topology: TopologyOpt = None, oversubscription: OversubOpt = None,
              model: ModelOpt = None, tp: TpOpt = None, pp: PpOpt = None, dp: DpOpt = None,
              cp: CpOpt = None, ep: EpOpt = None, etp: EtpOpt = None, zero: ZeroOpt = None,
              reshard_after_forward: ReshardOpt = None, fsdp_impl: FsdpImplOpt = None,
              attention_kernel: AttnKernelOpt = None, grad_reduce_dtype: GradReduceOpt = None,
              micro_batch: MbOpt = None, global_batch: GbOpt = None, seq_len: SeqOpt = None,
              precision: PrecOpt = None, recompute: RcOpt = None, vp: VpOpt = None,
              first_stage_layers: FirstOpt = None, last_stage_layers: LastOpt = None,
              account_for_embedding_loss: AccOpt = None,
              pipeline_layout: LayoutOpt = None, pp_schedule: PpSchedOpt = None,
              recompute_modules: RcModulesOpt = None,
              recompute_layers: RcLayersOpt = None, offload_layers: OffloadOpt = None,
              tp_comm_overlap: TpcOpt = None,
              ep_overlap: EpoOpt = None, moe_node_limit: NodeLimitOpt = None,
              moe_dispatcher: DispatcherOpt = None, moe_imbalance: ImbalanceOpt = None,
              overlap_grad_reduce: OgrOpt = None,
              overlap_param_gather: OpgOpt = None, overlap_p2p_comm: P2pOpt = None,
              sequence_parallel: SpOpt = None,
              fp8: Fp8Opt = False, fp8_recipe: Fp8RecipeOpt = None,
              from_megatron: MegatronOpt = None,
              backend: BackendOpt = None, gpu_hour_usd: PriceOpt = None,
              checkpoint_gbps: CkptOpt = None, restart_min: RestartOpt = None,
              chakra: Annotated[Path | None, typer.Option(
                  "--chakra", help="Also write the step as Chakra execution traces "
                  "(ASTRA-sim's input): PREFIX.<rank>.et for the first rank of every "
                  "pipeline stage.")] = None,
              as_json: JsonOpt = False) -> None:
        """Time one training step: throughput, MFU, breakdown, memory, cost of the network,
        and the goodput once failures and restarts are counted.

        Example: fabricsim train --system dgx-h100 --nodes 16 --model llama3-70b --tp 8
        --pp 4 --vp 5 --global-batch 512 --tp-comm-overlap
        """
        from fabricsim.workloads.training.step import simulate_step

        goodput_inputs(checkpoint_gbps, restart_min)  # the flags checked before any work
        flags: dict[str, Any] = dict(
            system=system, nodes=nodes, gpus_per_node=gpus_per_node, fabric=fabric,
            topology=topology, oversubscription=oversubscription, tp=tp, pp=pp, dp=dp,
            cp=cp, ep=ep, etp=etp, zero=zero, reshard_after_forward=reshard_after_forward,
            **stack_flags(fsdp_impl, attention_kernel, grad_reduce_dtype),
            micro_batch=micro_batch,
            global_batch=global_batch, seq_len=seq_len, precision=precision,
            recompute=recompute,
            **layout_from(locals()))
        sc, m, cfg, extra = job_from_cli(scenario, model=model, flags=flags)
        if chakra is not None and cfg.pp_schedule != "1f1b":
            raise ConfigError("--chakra writes 1F1B pipeline traces; DualPipe's two "
                              "directions are not exported: drop --chakra or use "
                              "--pp-schedule 1f1b", field="--chakra")
        fab = fabric_from_scenario(sc)
        r = simulate_step(m, cfg, fab, backend=backend or extra.get("backend") or "analytic",
                          gpu_hour_usd=price_from_cli(gpu_hour_usd, extra),
                          total_tokens=extra.get("total_tokens"))
        given = frozenset(k for k, v in (("checkpoint_gbps", checkpoint_gbps),
                                         ("restart_min", restart_min),
                                         ("global_batch", global_batch)) if v is not None)
        gp = run_goodput(fab, m.params, r.step_time_s, r.gpu_hour_usd, r.world,
                         inputs=goodput_inputs(checkpoint_gbps, restart_min, extra),
                         flags=given)
        d = r.as_dict()
        d["goodput"] = gp.to_dict()
        d["notes"] = extra.get("notes", [])
        if chakra is not None:
            from fabricsim.interop.chakra import step_trace, write_traces

            par = r.parallel
            first = {par["tp"] * par["cp"] * par["dp"] * st: step_trace(r, m, stage=st)
                     for st in range(par["pp"])}
            paths = write_traces(first, chakra, {"model": m.name, "fabric": fab.info.fabric,
                                                 "system": fab.info.system})
            d["chakra_traces"] = [str(x) for x in paths]
        if as_json:
            print_json(d)
            return
        par = d["parallel"]
        console.print(f"[bold]{m.name}[/] ({m.params / 1e9:.1f}B params) on {r.world} x "
                      f"{fab.info.gpu} ({fab.info.system}, {fab.info.fabric}): tp={par['tp']} "
                      f"pp={par['pp']} dp={par['dp']} cp={par['cp']} ep={par['ep']} "
                      f"zero={par['zero']} mb={par['micro_batch']} gbs={par['global_batch']} "
                      f"seq={par['seq_len']} {par['precision']} recompute={par['recompute']}"
                      + _layout_words(par))
        t = Table(show_header=True)
        for col in ("part", "seconds/step", "share"):
            t.add_column(col, justify="right" if col != "part" else "left")
        for k, v in r.breakdown.items():
            t.add_row(k, f"{v:.4f}", f"{v / r.step_time_s:.1%}")
        t.add_row("[bold]step[/]", f"{r.step_time_s:.4f}", "100%")
        console.print(t)
        console.print(f"tokens/s {r.tokens_per_s:,.0f}  ({r.tokens_per_s / r.world:,.0f} per GPU)"
                      f"  TFLOP/s/GPU {r.tflops_per_gpu:.1f}  MFU {r.mfu:.1%}  HFU {r.hfu:.1%}")
        console.print(f"memory/GPU {r.memory_per_gpu_gib:.1f} GiB of "
                      f"{r.gpu_memory_bytes / 2**30:.0f} GiB")
        console.print(f"exposed communication {r.comm_fraction:.1%} of the step = "
                      f"{r.idle_gpus:.1f} idle GPUs = ${r.comm_usd_per_day:,.0f}/day at "
                      f"${r.gpu_hour_usd:.2f}/GPU-hour")
        if r.total_tokens:
            run = r.run(r.total_tokens)
            console.print(f"run of {run['tokens']:.3g} tokens: {run['days']:.1f} days, "
                          f"${run['cost_usd']:,.0f}, of which ${run['comm_usd']:,.0f} waiting "
                          f"on the network")
        console.print(
            f"goodput {gp.goodput:.1%} of wall time trains: {gp.failures_per_day:.2f} "
            f"failures/day (job MTBF {gp.job_mtbf_hours:.1f} h), checkpoint every "
            f"{minutes(gp.checkpoint_interval_s)}; lost ${gp.usd_lost_per_day:,.0f}/day"
            f" (docs/goodput.md)")
        if chakra is not None:
            console.print(f"wrote {len(d['chakra_traces'])} Chakra trace(s): "
                          f"{d['chakra_traces'][0]} ...")
        for w in r.warnings + list(extra.get("notes", [])):
            console.print(f"[yellow]warning:[/] {w}")
