"""``fabricsim train``: step time, MFU, breakdown and the cost of communication."""

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
    console,
    fabric_from_scenario,
    print_json,
    scenario_with_overrides,
)
from fabricsim.errors import ConfigError
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.parallel import ParallelConfig
from fabricsim.workloads.spec import check_positive, training_from_section

ModelOpt = Annotated[str | None,
                     typer.Option("--model", "-m", help="Model preset, e.g. llama3-70b.")]
TpOpt = Annotated[int | None, typer.Option("--tp", help="Tensor-parallel size.")]
PpOpt = Annotated[int | None, typer.Option("--pp", help="Pipeline-parallel size.")]
DpOpt = Annotated[int | None, typer.Option("--dp", help="Data-parallel size (default: the rest).")]
CpOpt = Annotated[int | None, typer.Option("--cp", help="Context-parallel size.")]
EpOpt = Annotated[int | None, typer.Option("--ep", help="Expert-parallel size.")]
ZeroOpt = Annotated[str | None, typer.Option("--zero", help="ZeRO stage 0|1|2|3 or fsdp.")]
MbOpt = Annotated[int | None, typer.Option("--micro-batch", help="Sequences per micro-batch.")]
GbOpt = Annotated[int | None, typer.Option("--global-batch", help="Sequences per step.")]
SeqOpt = Annotated[int | None, typer.Option("--seq-len", help="Sequence length.")]
PrecOpt = Annotated[str | None, typer.Option("--precision", help="bf16 or fp8.")]
RcOpt = Annotated[str | None, typer.Option("--recompute", help="none, selective or full.")]
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
    if extra.get("gpu_hour_usd") is None and sc.gpu_hour_usd is not None:
        extra["gpu_hour_usd"] = check_positive(sc.gpu_hour_usd, "gpu_hour_usd")
    return sc, m, cfg, extra


def price_from_cli(flag: float | None, extra: dict[str, Any]) -> float | None:
    """The $/GPU-hour to use: ``--gpu-hour-usd`` if given (positive and finite, else a
    :class:`~fabricsim.errors.ConfigError` naming the flag), else the scenario's."""
    if flag is not None:
        return check_positive(flag, "--gpu-hour-usd")
    price = extra.get("gpu_hour_usd")
    return float(price) if price is not None else None


def register(app: typer.Typer) -> None:
    @app.command("train")
    def train(scenario: ScenarioArg = None, system: SystemOpt = None, nodes: NodesOpt = None,
              gpus_per_node: GpusPerNodeOpt = None, fabric: FabricOpt = None,
              topology: TopologyOpt = None, oversubscription: OversubOpt = None,
              model: ModelOpt = None, tp: TpOpt = None, pp: PpOpt = None, dp: DpOpt = None,
              cp: CpOpt = None, ep: EpOpt = None, zero: ZeroOpt = None,
              micro_batch: MbOpt = None, global_batch: GbOpt = None, seq_len: SeqOpt = None,
              precision: PrecOpt = None, recompute: RcOpt = None, backend: BackendOpt = None,
              gpu_hour_usd: PriceOpt = None, as_json: JsonOpt = False) -> None:
        """Time one training step: throughput, MFU, breakdown, memory, cost of the network."""
        from fabricsim.workloads.step import simulate_step

        flags: dict[str, Any] = dict(
            system=system, nodes=nodes, gpus_per_node=gpus_per_node, fabric=fabric,
            topology=topology, oversubscription=oversubscription, tp=tp, pp=pp, dp=dp,
            cp=cp, ep=ep, zero=zero, micro_batch=micro_batch, global_batch=global_batch,
            seq_len=seq_len, precision=precision, recompute=recompute)
        sc, m, cfg, extra = job_from_cli(scenario, model=model, flags=flags)
        fab = fabric_from_scenario(sc)
        r = simulate_step(m, cfg, fab, backend=backend or extra.get("backend") or "analytic",
                          gpu_hour_usd=price_from_cli(gpu_hour_usd, extra),
                          total_tokens=extra.get("total_tokens"))
        d = r.as_dict()
        if as_json:
            print_json(d)
            return
        par = d["parallel"]
        console.print(f"[bold]{m.name}[/] ({m.params / 1e9:.1f}B params) on {r.world} x "
                      f"{fab.info.gpu} ({fab.info.system}, {fab.info.fabric}): tp={par['tp']} "
                      f"pp={par['pp']} dp={par['dp']} cp={par['cp']} ep={par['ep']} "
                      f"zero={par['zero']} mb={par['micro_batch']} gbs={par['global_batch']} "
                      f"seq={par['seq_len']} {par['precision']} recompute={par['recompute']}")
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
        for w in r.warnings:
            console.print(f"[yellow]warning:[/] {w}")
