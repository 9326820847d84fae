"""``fabricsim scale``: the scaling-efficiency curve of a training job."""

from __future__ import annotations

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

#: The cluster flags of ``scale``: its sizes come from ``--gpus`` (a list), so the
#: cluster's own size flags only name the cluster a weak-scaling batch was set for.
SCALE_CLUSTER = subgroup(CLUSTER, tuple(f.field for f in CLUSTER.flags if f.field != "gpus"))
#: scale's training flags: every size gets its own data-parallel size, so no --dp.
SCALE_TRAINING = subgroup(TRAINING, tuple(f.field for f in TRAINING.flags
                                          if f.field not in ("dp", *ONE_STEP_ONLY)))


def parse_gpus(text: str | None) -> tuple[int, ...] | None:
    """``--gpus 8,64,512`` as GPU counts (``None``: the job's default sizes).

    >>> parse_gpus("8, 64"), parse_gpus(None)
    ((8, 64), None)
    """
    if text is None:
        return None
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--gpus takes comma-separated integers, got {text!r}",
                          field="--gpus") from None
    if not out or min(out) < 1:
        raise ConfigError(f"--gpus needs positive GPU counts, got {text!r}", field="--gpus")
    return out


def register(app: typer.Typer) -> None:
    @app.command("scale")
    @with_groups(SCALE_CLUSTER, SCALE_TRAINING)
    def scale(scenario: ScenarioArg = None, cluster: ClusterFlags = NO_CLUSTER_FLAGS,
              training: TrainingSection | None = None,
              gpus: Annotated[str | None, typer.Option(
                  "--gpus", help="GPU counts, e.g. 8,64,512 (default: 1/8, 1/4, 1/2 and all "
                  "of the cluster; 8 to 16,384 for a one-server cluster).")] = None,
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
        from fabricsim import jobs

        check_out_file(plot, "--plot")
        sizes = parse_gpus(gpus)
        over = training or TrainingSection()
        if "nodes" in cluster.given and sizes is not None and (
                strong or "global_batch" not in over.model_fields_set):
            raise ConfigError("scale takes its sizes from --gpus; --nodes only names the "
                              "cluster a weak-scaling --global-batch was set for, so here it "
                              "would change nothing: drop --nodes"
                              + ("" if strong else " or give --global-batch"),
                              field="--nodes")
        job = jobs.job_from_scenario("scale", load(scenario, cluster), over=over,
                                     gpus=sizes, strong=strong)
        report = jobs.run(job)
        d = report.to_dict()
        pts = report.points
        ok = [p for p in pts if p["feasible"]]
        t = job.training
        c = t.cluster.spec
        if plot is not None:
            from fabricsim.plots.scaling import plot_scaling

            plot_scaling(ok, plot, title=f"{t.model.name} on {c.system}")
        if as_json:
            print_json(d)
            return
        cfg = t.parallel
        table = Table(title=f"{t.model.name} on {c.system} (tp={cfg.tp} pp={cfg.pp} "
                      f"cp={cfg.cp})")
        for col in ("GPUs", "global batch", "tokens/s/GPU", "MFU", "scaling eff.",
                    "comm share", "main loss", "goodput", "idle GPUs", "$/day on comm",
                    "mem GiB"):
            table.add_column(col, justify="right")
        for p in pts:
            if not p["feasible"]:
                table.add_row(str(p["gpus"]), "-", "[yellow]infeasible[/]", "-", "-", "-",
                              "-", "-", "-", "-", "-")
                continue
            ml = p["main_loss"]
            table.add_row(str(p["gpus"]), f"{p['global_batch']:,}",
                          f"{p['tokens_per_s_per_gpu']:,.0f}", f"{p['mfu']:.1%}",
                          f"{p['scaling_efficiency']:.1%}", f"{p['comm_fraction']:.1%}",
                          f"{ml} {p['losses'][ml]:.0%}" if ml != "none" else "-",
                          f"{p['goodput']:.1%}",
                          f"{p['idle_gpu_equivalent']:.1f}", f"{p['comm_usd_per_day']:,.0f}",
                          f"{p['memory_per_gpu_gib']:.1f}" + ("" if p["fits"] else " (!)"))
        console.print(table)
        for p in pts:
            if not p["feasible"]:
                console.print(f"[yellow]skipped {p['gpus']} GPUs:[/] {p['reason']}")
        if any(not p["fits"] for p in ok):
            console.print("(!) the memory estimate exceeds the GPU's memory at this size")
        for n in report.notes():
            console.print(n)
        print_warnings(report.warnings)
        if plot is not None:
            console.print(f"plot written to {plot}")
