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
    console,
    print_json,
)
from fabricsim.cli.train import (
    BackendOpt,
    CpOpt,
    EpOpt,
    MbOpt,
    ModelOpt,
    PpOpt,
    PrecOpt,
    PriceOpt,
    RcOpt,
    SeqOpt,
    TpOpt,
    ZeroOpt,
    job_from_cli,
    price_from_cli,
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
              ep: EpOpt = None, zero: ZeroOpt = None, micro_batch: MbOpt = None,
              seq_len: SeqOpt = None, precision: PrecOpt = None, recompute: RcOpt = None,
              backend: BackendOpt = None, gpu_hour_usd: PriceOpt = None,
              plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG.")] = None,
              as_json: JsonOpt = False) -> None:
        """Throughput per GPU and scaling efficiency against one node, over GPU counts."""
        from fabricsim.workloads.scaling import scaling_curve

        flags: dict[str, Any] = dict(
            system=system, nodes=nodes, gpus_per_node=gpus_per_node, fabric=fabric,
            topology=topology, oversubscription=oversubscription, tp=tp, pp=pp, cp=cp,
            ep=ep, zero=zero, micro_batch=micro_batch, seq_len=seq_len,
            precision=precision, recompute=recompute)
        sc, m, cfg, extra = job_from_cli(scenario, model=model, flags=flags)
        c = sc.cluster
        pts = scaling_curve(m, c.system, _parse_gpus(gpus), cfg, fabric=c.fabric,
                            topology=c.topology, oversubscription=c.oversubscription,
                            backend=backend or extra.get("backend") or "analytic",
                            gpu_hour_usd=price_from_cli(gpu_hour_usd, extra))
        if plot is not None:
            from fabricsim.plots.scaling import plot_scaling

            plot_scaling(pts, plot, title=f"{m.name} on {c.system}")
        if as_json:
            print_json({"model": m.name, "system": c.system, "points": pts})
            return
        t = Table(title=f"{m.name} on {c.system} (tp={cfg.tp} pp={cfg.pp})")
        for col in ("GPUs", "tokens/s/GPU", "MFU", "scaling eff.", "comm share",
                    "idle GPUs", "$/day on comm", "mem GiB"):
            t.add_column(col, justify="right")
        for p in pts:
            t.add_row(str(p["gpus"]), f"{p['tokens_per_s_per_gpu']:,.0f}", f"{p['mfu']:.1%}",
                      f"{p['scaling_efficiency']:.1%}", f"{p['comm_fraction']:.1%}",
                      f"{p['idle_gpu_equivalent']:.1f}", f"{p['comm_usd_per_day']:,.0f}",
                      f"{p['memory_per_gpu_gib']:.1f}" + ("" if p["fits"] else " (!)"))
        console.print(t)
        if plot is not None:
            console.print(f"plot written to {plot}")
