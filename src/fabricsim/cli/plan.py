"""``fabricsim plan``: compare fabrics for a model and cluster size — throughput, capex,
cost per trained token."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fabricsim.cli.common import (
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
    AttnKernelOpt,
    BackendOpt,
    FsdpImplOpt,
    GbOpt,
    GradReduceOpt,
    ModelOpt,
    PpOpt,
    PrecOpt,
    PriceOpt,
    SeqOpt,
    TpOpt,
    ZeroOpt,
    job_from_cli,
    price_from_cli,
    stack_flags,
)
from fabricsim.errors import ConfigError

FabricsOpt = Annotated[str, typer.Option(
    "--fabrics", help="Comma-separated fabric presets to compare.")]
GpusOpt = Annotated[int | None, typer.Option(
    "--gpus", help="Cluster size in GPUs (alternative to --nodes).")]
LifeOpt = Annotated[float, typer.Option(
    "--lifetime-years", help="Years over which the fabric capex is amortised.")]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Write a PNG comparison chart.")]

#: Keys of ``training:`` that fix the parallel layout (then the planner is not used).
LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "zero", "recompute", "vp",
               "pp_schedule", "pipeline_layout")


def nodes_for(gpus: int | None, nodes: int | None, gpus_per_node: int) -> int | None:
    """Servers for ``--gpus`` (which must fill whole servers); checks agreement with
    ``--nodes``.

    Examples
    --------
    >>> nodes_for(256, None, 8), nodes_for(None, 4, 8)
    (32, 4)
    """
    if gpus is None:
        return nodes
    if gpus < 1 or gpus % gpus_per_node:
        raise ConfigError(f"must be a positive multiple of the {gpus_per_node} GPUs per "
                          f"server, got {gpus}", field="--gpus")
    n = gpus // gpus_per_node
    if nodes is not None and nodes != n:
        raise ConfigError(f"{gpus} GPUs are {n} servers but --nodes says {nodes}; give one "
                          f"of them", field="--gpus")
    return n


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(scenario: ScenarioArg = None, system: SystemOpt = None,
                 nodes: NodesOpt = None, gpus: GpusOpt = None,
                 gpus_per_node: GpusPerNodeOpt = None, topology: TopologyOpt = None,
                 oversubscription: OversubOpt = None, model: ModelOpt = None,
                 fabrics: FabricsOpt = "ib-ndr,roce-400g,efa", tp: TpOpt = None,
                 pp: PpOpt = None, global_batch: GbOpt = None, seq_len: SeqOpt = None,
                 precision: PrecOpt = None, zero: ZeroOpt = None,
                 fsdp_impl: FsdpImplOpt = None, attention_kernel: AttnKernelOpt = None,
                 grad_reduce_dtype: GradReduceOpt = None, backend: BackendOpt = None,
                 gpu_hour_usd: PriceOpt = None, lifetime_years: LifeOpt = 4.0,
                 plot: PlotOpt = None, as_json: JsonOpt = False) -> None:
        """Compare fabrics for one model and cluster: speed, capex, cost per token.
        Without --tp/--pp (or a layout in the scenario) the planner picks each fabric's
        fastest layout, with the software stack given (--zero, --fsdp-impl,
        --attention-kernel, --grad-reduce-dtype).

        Example: fabricsim plan --system dgx-h100 --gpus 256 --model llama3-70b
        --fabrics ib-ndr,roce-400g --global-batch 512
        """
        from fabricsim.workloads.cost.fabric_plan import compare_fabrics
        from fabricsim.workloads.training.planner import planner_zero, stack_options

        check_out_file(plot, "--plot")
        names = [f.strip() for f in fabrics.split(",") if f.strip()]
        if not names:
            raise ConfigError("give at least one fabric, e.g. ib-ndr,roce-400g",
                              field="--fabrics")
        if not (math.isfinite(lifetime_years) and lifetime_years > 0):
            raise ConfigError(f"must be a finite number of years > 0, got {lifetime_years}",
                              field="--lifetime-years")
        flags: dict[str, Any] = dict(
            system=system, nodes=None, gpus_per_node=gpus_per_node, fabric=None,
            topology=topology, oversubscription=oversubscription, tp=tp, pp=pp,
            global_batch=global_batch, seq_len=seq_len, precision=precision, zero=zero,
            **stack_flags(fsdp_impl, attention_kernel, grad_reduce_dtype))
        sc, m, cfg, extra = job_from_cli(scenario, model=model, flags=flags)
        c = sc.cluster
        from fabricsim.scenario.fabric import scenario_catalog
        from fabricsim.scenario.sections import goodput_settings

        cat = scenario_catalog(sc.systems)
        sysp = cat.system(c.system)
        gpn = c.gpus_per_node or sysp.gpus
        n = nodes_for(gpus, nodes, gpn) or c.nodes
        section = dict(sc.training or {})
        fixed = (tp is not None or pp is not None
                 or any(k in section for k in LAYOUT_KEYS))
        opts = compare_fabrics(
            m, system=c.system, nodes=n, fabrics=names, topology=c.topology,
            oversubscription=c.oversubscription, gpus_per_node=c.gpus_per_node,
            cfg=cfg if fixed else None, global_batch=cfg.global_batch,
            seq_len=cfg.seq_len, precision=cfg.precision,
            gpu_hour_usd=price_from_cli(gpu_hour_usd, extra),
            lifetime_years=lifetime_years,
            backend=backend or extra.get("backend") or "analytic",
            cluster_params=dict(c.params), zero=planner_zero(cfg),
            options=stack_options(cfg), catalog=cat,
            goodput_kw=goodput_settings(extra))
        rows = []
        for o in opts:
            d = o.as_dict()
            d["capex_per_gpu_usd"] = o.capex.per_gpu_usd
            d["capex_usd"] = o.capex.total_usd
            rows.append(d)
        world = opts[0].step.world
        title = (f"{m.name} on {world} x {sysp.gpu} ({c.system}), "
                 f"{c.oversubscription:g}:1, {lifetime_years:g}-year fabric life")
        if plot is not None:
            from fabricsim.plots.plan import plot_plan

            plot_plan(rows, plot, title=title)
        if as_json:
            print_json({"model": m.name, "gpus": world, "system": c.system,
                        "oversubscription": c.oversubscription,
                        "lifetime_years": lifetime_years, "fabrics": rows,
                        "plot": str(plot) if plot is not None else None})
            return
        t = Table(title=title)
        for col in ("fabric", "tp/pp/dp/cp", "tok/s/GPU", "MFU", "comm", "goodput",
                    "capex/GPU", "$/1T tok", "fabric%"):
            t.add_column(col, justify="left" if col == "fabric" else "right", no_wrap=True)
        for o, d in zip(opts, rows, strict=True):
            p = o.step.parallel
            lay = (f"{p['tp']}/{p['pp']}/{p['dp']}/{p['cp']}"
                   + (f" ep{p['ep']}" if p["ep"] > 1 else "") + ("*" if o.planned else ""))
            t.add_row(o.fabric, lay, f"{d['tokens_per_s_per_gpu']:,.0f}", f"{d['mfu']:.1%}",
                      f"{d['comm_fraction']:.1%}", f"{d['goodput']:.1%}",
                      f"${d['capex_per_gpu_usd']:,.0f}",
                      f"${d['usd_per_1t_tokens']:,.0f}", f"{d['fabric_share']:.1%}")
        console.print(t)
        if any(o.planned for o in opts):
            console.print("* layout chosen by the planner (fastest that fits) per fabric")
        for o, d in zip(opts, rows, strict=True):
            console.print(f"{o.fabric}: fabric capex ${d['capex_usd']:,.0f} "
                          f"({', '.join(f'{k} ${v:,.0f}' for k, v in o.capex.by_kind().items())})")
        for o in opts:
            for note in o.capex.notes:
                console.print(f"[yellow]{o.fabric}:[/] {note}")
        if plot is not None:
            console.print(f"plot written to {plot}")
