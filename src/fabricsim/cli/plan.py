"""``fabricsim plan``: compare fabrics for a model and cluster size — throughput, capex,
cost per trained token."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabricsim.cli.common import (
    JsonOpt,
    ScenarioArg,
    check_out_file,
    console,
    print_json,
    print_warnings,
)
from fabricsim.cli.options import (
    CLUSTER,
    NO_CLUSTER_FLAGS,
    ONE_STEP_ONLY,
    TRAINING,
    ClusterFlags,
    load,
    subgroup,
    with_groups,
)
from fabricsim.errors import ConfigError
from fabricsim.scenario.sections import TrainingSection

#: plan's cluster flags: the fabrics it compares are --fabrics, not one --fabric.
PLAN_CLUSTER = subgroup(CLUSTER, tuple(f.field for f in CLUSTER.flags if f.field != "fabric"))
PLAN_TRAINING = subgroup(TRAINING, tuple(f.field for f in TRAINING.flags
                                         if f.field not in ONE_STEP_ONLY))

FabricsOpt = Annotated[str | None, typer.Option(
    "--fabrics", help="Comma-separated fabric presets to compare (default: the cluster's own, "
    "ib-ndr, roce-400g, efa).")]
LifeOpt = Annotated[float, typer.Option(
    "--lifetime-years", help="Years over which the fabric capex is amortised.")]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Write a PNG comparison chart.")]


def register(app: typer.Typer) -> None:
    @app.command("plan")
    @with_groups(PLAN_CLUSTER, PLAN_TRAINING)
    def plan_cmd(scenario: ScenarioArg = None, cluster: ClusterFlags = NO_CLUSTER_FLAGS,
                 training: TrainingSection | None = None, fabrics: FabricsOpt = None,
                 lifetime_years: LifeOpt = 4.0, plot: PlotOpt = None,
                 as_json: JsonOpt = False) -> None:
        """Compare fabrics for one model and cluster: speed, capex, cost per token.
        Without a layout (--tp/--pp, or one in the scenario) the planner picks each
        fabric's fastest layout, with the software stack given (--zero, --fsdp-impl,
        --attention-kernel, --grad-reduce-dtype).

        Example: fabricsim plan --system dgx-h100 --gpus 256 --model llama3-70b
        --fabrics ib-ndr,roce-400g --global-batch 512
        """
        from fabricsim import jobs

        check_out_file(plot, "--plot")
        names: tuple[str, ...] | None = None
        if fabrics is not None:
            names = tuple(f.strip() for f in fabrics.split(",") if f.strip())
            if not names:
                raise ConfigError("give at least one fabric, e.g. ib-ndr,roce-400g",
                                  field="--fabrics")
        if not (math.isfinite(lifetime_years) and lifetime_years > 0):
            raise ConfigError(f"must be a finite number of years > 0, got {lifetime_years}",
                              field="--lifetime-years")
        job = jobs.job_from_scenario("plan", load(scenario, cluster),
                                     over=training or TrainingSection(), fabrics=names,
                                     lifetime_years=lifetime_years)
        report = jobs.run(job)
        opts = report.options
        m, c = job.training.model, job.training.cluster.spec
        sysp = job.training.cluster.catalog().system(c.system)
        rows = report.rows()
        world = opts[0].step.world
        title = (f"{m.name} on {world} x {sysp.gpu} ({c.system}), "
                 f"{c.oversubscription:g}:1, {lifetime_years:g}-year fabric life")
        if plot is not None:
            from fabricsim.plots.plan import plot_plan

            plot_plan(rows, plot, title=title)
        if as_json:
            print_json({**report.to_dict(), "plot": str(plot) if plot is not None else None})
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
        print_warnings(report.warnings)
        if plot is not None:
            console.print(f"plot written to {plot}")
