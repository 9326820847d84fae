"""``fabricsim infer``: prefill and per-token latency of tensor-parallel serving."""

from __future__ import annotations

from typing import Annotated

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
from fabricsim.cli.train import ModelOpt
from fabricsim.errors import ConfigError
from fabricsim.workloads.models import get_model

TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel size of the serving group.")]
BatchOpt = Annotated[int, typer.Option("--batch", help="Sequences decoded together.")]
PromptOpt = Annotated[int, typer.Option("--prompt-len", help="Prompt tokens per sequence.")]
OutputOpt = Annotated[int, typer.Option("--output-len", help="Output tokens per sequence.")]
PrecOpt = Annotated[str, typer.Option("--precision", help="bf16 or fp8 weights and KV cache.")]


def register(app: typer.Typer) -> None:
    @app.command("infer")
    def infer_cmd(scenario: ScenarioArg = None, system: SystemOpt = None,
                  nodes: NodesOpt = None, gpus_per_node: GpusPerNodeOpt = None,
                  fabric: FabricOpt = None, topology: TopologyOpt = None,
                  oversubscription: OversubOpt = None, model: ModelOpt = None,
                  tp: TpOpt = 8, batch: BatchOpt = 1, prompt_len: PromptOpt = 1024,
                  output_len: OutputOpt = 256, precision: PrecOpt = "bf16",
                  as_json: JsonOpt = False) -> None:
        """Serve a model with tensor parallelism: TTFT, time per output token, tokens/s."""
        from fabricsim.workloads.inference import simulate_inference

        sc = scenario_with_overrides(
            scenario, system=system, nodes=nodes, gpus_per_node=gpus_per_node,
            fabric=fabric, topology=topology, oversubscription=oversubscription)
        name = model or str((sc.training or {}).get("model") or "llama3-70b")
        m = get_model(name, field="--model")
        if precision not in ("bf16", "fp8"):
            raise ConfigError(f"must be bf16 or fp8, got {precision!r}", field="--precision")
        fab = fabric_from_scenario(sc)
        r = simulate_inference(m, fab, tp=tp, batch=batch, prompt_len=prompt_len,
                               output_len=output_len, precision=precision)
        d = r.as_dict()
        if as_json:
            print_json(d)
            return
        console.print(f"[bold]{m.name}[/] ({m.params / 1e9:.1f}B) served by tp={tp} x "
                      f"{fab.info.gpu} ({fab.info.system}), batch {batch}, prompt "
                      f"{prompt_len}, output {output_len}, {precision}")
        t = Table(show_header=True)
        t.add_column("metric")
        t.add_column("value", justify="right")
        t.add_row("prefill (time to first token)",
                  f"{r.prefill_s * 1e3:.1f} ms  (comm {d['prefill_comm_share']:.0%})")
        t.add_row("time per output token", f"{r.tpot_s * 1e3:.2f} ms  (first "
                  f"{d['tpot_first_s'] * 1e3:.2f}, last {d['tpot_last_s'] * 1e3:.2f})")
        for k, v in d["decode_breakdown_s"].items():
            t.add_row(f"  decode {k.removesuffix('_s')}", f"{v * 1e3:.2f} ms")
        t.add_row("TP communication share of decode", f"{r.comm_share:.1%}")
        t.add_row("tokens/s per request", f"{r.tokens_per_s_per_request:,.1f}")
        t.add_row("tokens/s (batch)", f"{r.tokens_per_s:,.0f}")
        t.add_row("tokens/s per GPU", f"{r.tokens_per_s_per_gpu:,.1f}")
        t.add_row("request latency", f"{r.latency_s:.2f} s")
        t.add_row("memory per GPU", f"{d['memory_per_gpu_gib']:.1f} of "
                  f"{d['gpu_memory_gib']:.0f} GiB")
        console.print(t)
        for w in r.warnings:
            console.print(f"[yellow]warning:[/] {w}")
