"""``fabricsim plan-parallel``: search the parallel configuration with the best throughput."""

from __future__ import annotations

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
    console,
    fabric_from_scenario,
    print_json,
)
from fabricsim.cli.train import (
    AttnKernelOpt,
    BackendOpt,
    FsdpImplOpt,
    GbOpt,
    GradReduceOpt,
    ModelOpt,
    PrecOpt,
    SeqOpt,
    ZeroOpt,
    job_from_cli,
    stack_flags,
)


def register(app: typer.Typer) -> None:
    @app.command("plan-parallel")
    def plan_parallel_cmd(scenario: ScenarioArg = None, system: SystemOpt = None,
                          nodes: NodesOpt = None, gpus_per_node: GpusPerNodeOpt = None,
                          fabric: FabricOpt = None, topology: TopologyOpt = None,
                          oversubscription: OversubOpt = None, model: ModelOpt = None,
                          global_batch: GbOpt = None, seq_len: SeqOpt = None,
                          precision: PrecOpt = None, zero: ZeroOpt = None,
                          fsdp_impl: FsdpImplOpt = None,
                          attention_kernel: AttnKernelOpt = None,
                          grad_reduce_dtype: GradReduceOpt = None,
                          backend: BackendOpt = None,
                          top: Annotated[int, typer.Option("--top", min=1)] = 10,
                          as_json: JsonOpt = False) -> None:
        """Try TP/PP/CP/EP/micro-batch/recompute; print the fastest that fit in memory.
        The software stack (--zero, --fsdp-impl, --attention-kernel, --grad-reduce-dtype,
        or the scenario's) holds for every layout tried.

        Example: fabricsim plan-parallel --system dgx-h100 --nodes 4 --model llama3-70b
        --global-batch 256 --seq-len 8192
        """
        from fabricsim.workloads.training.planner import (
            plan_parallel,
            planner_zero,
            stack_options,
        )

        flags: dict[str, Any] = dict(
            system=system, nodes=nodes, gpus_per_node=gpus_per_node, fabric=fabric,
            topology=topology, oversubscription=oversubscription, seq_len=seq_len,
            precision=precision, zero=zero,
            **stack_flags(fsdp_impl, attention_kernel, grad_reduce_dtype))
        sc, m, cfg, extra = job_from_cli(scenario, model=model, flags=flags)
        fab = fabric_from_scenario(sc)
        gb = global_batch or cfg.global_batch or max(fab.n_gpus, 512)
        plan = plan_parallel(m, fab, global_batch=gb, seq_len=cfg.seq_len,
                             precision=cfg.precision, zero=planner_zero(cfg),
                             backend=backend or extra.get("backend") or "analytic", top=top,
                             options=stack_options(cfg))
        if not plan.results:  # nothing runs: an error, as plan says it
            from fabricsim.errors import ModelError

            raise ModelError("; ".join(plan.notes), field="training")
        if as_json:
            print_json({"model": m.name, "gpus": fab.n_gpus, "global_batch": gb,
                        "evaluated": plan.evaluated, "rejected_memory": plan.rejected_memory,
                        "rejected_shape": plan.rejected_shape, "seconds": plan.seconds,
                        "notes": plan.notes, "results": [r.as_dict() for r in plan.results]})
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
