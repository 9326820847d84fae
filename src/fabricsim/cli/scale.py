"""``fabricsim scale``: the scaling-efficiency curve of a training job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
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
    check_out_file,
    console,
    print_json,
)
from fabricsim.cli.train import (
    AccOpt,
    AttnKernelOpt,
    BackendOpt,
    CkptOpt,
    CpOpt,
    DispatcherOpt,
    EpoOpt,
    EpOpt,
    EtpOpt,
    FirstOpt,
    Fp8Opt,
    Fp8RecipeOpt,
    FsdpImplOpt,
    GbOpt,
    GradReduceOpt,
    ImbalanceOpt,
    LastOpt,
    LayoutOpt,
    MbOpt,
    MegatronOpt,
    ModelOpt,
    NodeLimitOpt,
    OffloadOpt,
    OgrOpt,
    OpgOpt,
    P2pOpt,
    PpOpt,
    PpSchedOpt,
    PrecOpt,
    PriceOpt,
    RcLayersOpt,
    RcModulesOpt,
    RcOpt,
    ReshardOpt,
    RestartOpt,
    SeqOpt,
    SpOpt,
    TpcOpt,
    TpOpt,
    VpOpt,
    ZeroOpt,
    goodput_inputs,
    job_from_cli,
    layout_from,
    price_from_cli,
    stack_flags,
)
from fabricsim.errors import ConfigError


def _parse_gpus(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--gpus takes comma-separated integers, got {text!r}",
                          field="gpus") from None
    if not out or min(out) < 1:
        raise ConfigError(f"--gpus needs positive GPU counts, got {text!r}", field="gpus")
    return out


def register(app: typer.Typer) -> None:
    @app.command("scale")
    def scale(scenario: ScenarioArg = None, system: SystemOpt = None, nodes: NodesOpt = None,
              gpus_per_node: GpusPerNodeOpt = None, fabric: FabricOpt = None,
              topology: TopologyOpt = None, oversubscription: OversubOpt = None,
              gpus: Annotated[str, typer.Option("--gpus", help="GPU counts, e.g. 8,64,512.")]
              = "8,64,512,4096,16384",
              model: ModelOpt = None, tp: TpOpt = None, pp: PpOpt = None, cp: CpOpt = None,
              ep: EpOpt = None, etp: EtpOpt = None, zero: ZeroOpt = None,
              reshard_after_forward: ReshardOpt = None, micro_batch: MbOpt = None,
              seq_len: SeqOpt = None, precision: PrecOpt = None, recompute: RcOpt = None,
              fsdp_impl: FsdpImplOpt = None, attention_kernel: AttnKernelOpt = None,
              grad_reduce_dtype: GradReduceOpt = None, vp: VpOpt = None,
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
              checkpoint_gbps: CkptOpt = None, restart_min: RestartOpt = None,
              backend: BackendOpt = None, gpu_hour_usd: PriceOpt = None,
              global_batch: GbOpt = None,
              strong: Annotated[bool, typer.Option(
                  "--strong", help="Strong scaling: keep the global batch (--global-batch "
                  "or the scenario's) fixed at every size, as a training run does.")] = False,
              plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG.")] = None,
              as_json: JsonOpt = False) -> None:
        """Throughput per GPU and scaling efficiency against one node, over GPU counts,
        with the loss that grows named per size (bubble, TP, EP, CP, PP, DP).

        Example: fabricsim scale --model llama3-70b --tp 8 --pp 4 --seq-len 8192
        --gpus 64,1024,16384 --strong --global-batch 1024

        A pasted Megatron/NeMo argument list (--from-megatron) sets the layout and the
        stack; its --global-batch-size is the batch --strong keeps.
        """
        from fabricsim.workloads.training.scaling import scaling_curve, weak_scaling_batch

        check_out_file(plot, "--plot")
        goodput_inputs(checkpoint_gbps, restart_min)  # the flags checked before any work
        flags: dict[str, Any] = dict(
            system=system, nodes=nodes, gpus_per_node=gpus_per_node, fabric=fabric,
            topology=topology, oversubscription=oversubscription, tp=tp, pp=pp, cp=cp,
            ep=ep, etp=etp, zero=zero, reshard_after_forward=reshard_after_forward,
            micro_batch=micro_batch, seq_len=seq_len,
            precision=precision, recompute=recompute, global_batch=global_batch,
            **stack_flags(fsdp_impl, attention_kernel, grad_reduce_dtype),
            **layout_from(locals()))
        sc, m, cfg, extra = job_from_cli(scenario, model=model, flags=flags)
        if nodes is not None and (strong or cfg.global_batch is None):
            raise ConfigError("scale takes its sizes from --gpus; --nodes only names the "
                              "cluster a weak-scaling --global-batch was set for, so here it "
                              "would change nothing: drop --nodes"
                              + ("" if strong else " or give --global-batch"),
                              field="--nodes")
        if strong and cfg.global_batch is None:
            raise ConfigError("--strong keeps the global batch fixed: give --global-batch "
                              "(or global_batch in the scenario)", field="--global-batch")
        c = sc.cluster
        from fabricsim.scenario.fabric import cluster_build_kw, scenario_catalog, scenario_gpus

        cat = scenario_catalog(sc.systems)
        world = scenario_gpus(sc, cat)
        spr = weak_scaling_batch(cfg, world) if not strong else None
        notes: list[str] = list(extra.get("notes", []))
        mp = cfg.tp * cfg.pp * cfg.cp
        if strong:
            notes.append(f"strong scaling: global_batch={cfg.global_batch} sequences per "
                         f"step at every size; more GPUs mean fewer micro-batches per "
                         f"replica, so the bubble and the exposed communication grow "
                         f"(column 'main loss')")
        elif spr is not None:
            notes.append(f"weak scaling: each data-parallel replica (tp·pp·cp = {mp} GPUs) "
                         f"processes {spr} sequences of {cfg.seq_len or m.seq} tokens per "
                         f"step at every size, as global_batch={cfg.global_batch} does on "
                         f"{world} GPUs; the global batch grows with the GPU count (column "
                         f"'global batch')")
        else:
            default = cfg.micro_batch * (4 * cfg.pp if cfg.pp > 1 else 1)
            why = ("" if cfg.global_batch is None else
                   f"the job's global_batch={cfg.global_batch} does not split evenly over "
                   f"its {world} GPUs, so it is not used; ")
            notes.append(f"weak scaling: {why}each data-parallel replica processes {default} "
                         f"sequences per step at every size (micro_batch·"
                         f"{'4·pp' if cfg.pp > 1 else '1'}); the global batch grows with "
                         f"the GPU count (column 'global batch')")
        pts = scaling_curve(m, c.system, _parse_gpus(gpus), cfg, fabric=c.fabric,
                            topology=c.topology, oversubscription=c.oversubscription,
                            seqs_per_replica=spr,
                            global_batch=cfg.global_batch if strong else None,
                            backend=backend or extra.get("backend") or "analytic",
                            gpu_hour_usd=price_from_cli(gpu_hour_usd, extra),
                            gpus_per_node=c.gpus_per_node, catalog=cat,
                            cluster_kw=cluster_build_kw(c),
                            goodput_kw=goodput_inputs(checkpoint_gbps, restart_min, extra))
        ok = [p for p in pts if p["feasible"]]
        if plot is not None:
            from fabricsim.plots.scaling import plot_scaling

            plot_scaling(ok, plot, title=f"{m.name} on {c.system}")
        if as_json:
            print_json({"model": m.name, "system": c.system, "mode":
                        "strong" if strong else "weak", "seqs_per_replica":
                        ok[0]["global_batch"] // (ok[0]["gpus"] // mp), "notes": notes,
                        "points": pts})
            return
        t = Table(title=f"{m.name} on {c.system} (tp={cfg.tp} pp={cfg.pp} cp={cfg.cp})")
        for col in ("GPUs", "global batch", "tokens/s/GPU", "MFU", "scaling eff.",
                    "comm share", "main loss", "goodput", "idle GPUs", "$/day on comm",
                    "mem GiB"):
            t.add_column(col, justify="right")
        for p in pts:
            if not p["feasible"]:
                t.add_row(str(p["gpus"]), "-", "[yellow]infeasible[/]", "-", "-", "-", "-",
                          "-", "-", "-", "-")
                continue
            ml = p["main_loss"]
            t.add_row(str(p["gpus"]), f"{p['global_batch']:,}",
                      f"{p['tokens_per_s_per_gpu']:,.0f}", f"{p['mfu']:.1%}",
                      f"{p['scaling_efficiency']:.1%}", f"{p['comm_fraction']:.1%}",
                      f"{ml} {p['losses'][ml]:.0%}" if ml != "none" else "-",
                      f"{p['goodput']:.1%}",
                      f"{p['idle_gpu_equivalent']:.1f}", f"{p['comm_usd_per_day']:,.0f}",
                      f"{p['memory_per_gpu_gib']:.1f}" + ("" if p["fits"] else " (!)"))
        console.print(t)
        for p in pts:
            if not p["feasible"]:
                console.print(f"[yellow]skipped {p['gpus']} GPUs:[/] {p['reason']}")
        if any(not p["fits"] for p in ok):
            console.print("(!) the memory estimate exceeds the GPU's memory at this size")
        for n in notes:
            console.print(n)
        if plot is not None:
            console.print(f"plot written to {plot}")
