"""``fabricsim plan-parallel``: search the parallel configuration with the best throughput."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from fabricsim.cli.common import JsonOpt, ScenarioArg, console, print_json, print_warnings
from fabricsim.cli.options import CLUSTER, NO_CLUSTER_FLAGS, STACK, ClusterFlags, load, with_groups
from fabricsim.scenario.sections import TrainingSection


def register(app: typer.Typer) -> None:
    @app.command("plan-parallel")
    @with_groups(CLUSTER, STACK)
    def plan_parallel_cmd(scenario: ScenarioArg = None, cluster: ClusterFlags = NO_CLUSTER_FLAGS,
                          training: TrainingSection | None = None,
                          top: Annotated[int, typer.Option("--top", min=1)] = 10,
                          as_json: JsonOpt = False) -> None:
        """Try TP/PP/CP/EP/micro-batch/recompute; print the fastest that fit in memory.
        The software stack (--zero, --fsdp-impl, --attention-kernel, --grad-reduce-dtype,
        or the scenario's) holds for every layout tried.

        Example: fabricsim plan-parallel --system dgx-h100 --nodes 4 --model llama3-70b
        --global-batch 256 --seq-len 8192
        """
        from fabricsim import jobs

        job = jobs.job_from_scenario("plan-parallel", load(scenario, cluster),
                                     over=training or TrainingSection(), top=top)
        fab = job.cluster.build()
        report = jobs.run(job, fab)
        plan, m, gb = report.plan, job.training.model, report.global_batch
        if as_json:
            print_json(report.to_dict())
            return
        t = Table(title=f"{m.name} on {fab.n_gpus} x {fab.info.gpu}, global batch {gb}: "
                        f"{plan.evaluated} configurations fit ({plan.rejected_memory} too big "
                        f"for memory) in {plan.seconds:.1f} s")
        moe = m.is_moe
        for col in ("#", "tp", "pp", "v", "dp", "cp", "ep", *(("etp",) if moe else ()), "mb",
                    "recompute", "tokens/s", "MFU", "comm", "bubble", "mem GiB"):
            t.add_column(col, justify="right")
        for i, r in enumerate(plan.results, 1):
            p = r.parallel
            t.add_row(str(i), str(p["tp"]), str(p["pp"]), str(p["vp"]), str(p["dp"]),
                      str(p["cp"]), str(p["ep"]), *((str(p["etp"]),) if moe else ()),
                      str(p["micro_batch"]), p["recompute"],
                      f"{r.tokens_per_s:,.0f}", f"{r.mfu:.1%}", f"{r.comm_fraction:.1%}",
                      f"{r.breakdown['bubble'] / r.step_time_s:.1%}",
                      f"{r.memory_per_gpu_gib:.1f}")
        console.print(t)
        for n in plan.notes:
            console.print(f"[yellow]{n}[/]")
        print_warnings(report.warnings)
