"""``fabricsim infer``: serving a model — TTFT, time per output token, batching, KV cache.

One instance of ``--tp × --pp`` GPUs (``--ep`` splits a MoE model's experts inside the TP
group). Without further flags a static batch is timed; ``--tpot-target`` adds the
continuous-batching throughput at that latency; ``--prefill-tp`` adds disaggregated
serving (a prefill instance on other servers ships each request's KV cache over the
scale-out network).
"""

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
from fabricsim.scenario.serving import serving_job

TpOpt = Annotated[int | None, typer.Option(
    "--tp", help="Tensor-parallel size of the instance (default 8).")]
PpOpt = Annotated[int | None, typer.Option(
    "--pp", help="Pipeline stages of the instance (default 1).")]
EpOpt = Annotated[int | None, typer.Option(
    "--ep", help="Expert-parallel groups inside the TP group (MoE models; divides --tp; "
    "default 1).")]
BatchOpt = Annotated[int | None, typer.Option(
    "--batch", help="Sequences decoded together (default 1).")]
PromptOpt = Annotated[int | None, typer.Option(
    "--prompt-len", help="Prompt tokens per sequence (default 1024).")]
OutputOpt = Annotated[int | None, typer.Option(
    "--output-len", help="Output tokens per sequence (default 256).")]
PrecOpt = Annotated[str | None, typer.Option(
    "--precision", help="bf16 (the default), fp8, or fp8-weights (FP8 weights, 16-bit "
    "math).")]
KvPrecOpt = Annotated[str | None, typer.Option(
    "--kv-precision", help="KV-cache precision, bf16 or fp8 (default: fp8 with --precision "
    "fp8, else bf16).")]
EngineOpt = Annotated[str | None, typer.Option(
    "--engine", help="Serving engine's host costs and kernels: trtllm (the default), "
    "trtllm-python, trtllm-0.6, vllm-0.5 or ideal.")]
TpotOpt = Annotated[float | None, typer.Option(
    "--tpot-target", help="Continuous batching: the largest batch whose time per output "
    "token stays within this many ms.")]
MaxBatchOpt = Annotated[int | None, typer.Option(
    "--max-batch", help="Cap on the continuous batch (vLLM's --max-num-seqs).")]
PrefillTpOpt = Annotated[int | None, typer.Option(
    "--prefill-tp", help="Disaggregated serving: a prefill instance of this many GPUs on "
    "other servers sends each request's KV cache to the decode instance.")]

PRECISION_CHOICES = ("bf16", "fp8", "fp8-weights")


def register(app: typer.Typer) -> None:
    @app.command("infer")
    def infer_cmd(scenario: ScenarioArg = None, system: SystemOpt = None,
                  nodes: NodesOpt = None, gpus_per_node: GpusPerNodeOpt = None,
                  fabric: FabricOpt = None, topology: TopologyOpt = None,
                  oversubscription: OversubOpt = None, model: ModelOpt = None,
                  tp: TpOpt = None, pp: PpOpt = None, ep: EpOpt = None,
                  batch: BatchOpt = None, prompt_len: PromptOpt = None,
                  output_len: OutputOpt = None, precision: PrecOpt = None,
                  kv_precision: KvPrecOpt = None, engine: EngineOpt = None,
                  tpot_target: TpotOpt = None,
                  max_batch: MaxBatchOpt = None, prefill_tp: PrefillTpOpt = None,
                  as_json: JsonOpt = False) -> None:
        """Serve a model: TTFT, time per output token, tokens/s, KV-cache limits.

        A scenario's inference: section gives the model and the serving layout (the
        flags override it); without one, its training: section gives the model.
        """
        from fabricsim.workloads.serving.run import run_serving

        sc = scenario_with_overrides(
            scenario, system=system, nodes=nodes, gpus_per_node=gpus_per_node,
            fabric=fabric, topology=topology, oversubscription=oversubscription)
        if precision is not None and precision not in PRECISION_CHOICES:
            raise ConfigError(f"must be {', '.join(PRECISION_CHOICES)}, got {precision!r}",
                              field="--precision")
        if kv_precision is not None and kv_precision not in ("bf16", "fp8"):
            raise ConfigError(f"must be bf16 or fp8, got {kv_precision!r}",
                              field="--kv-precision")
        if tpot_target is not None and not tpot_target > 0:
            raise ConfigError(f"must be a positive number of milliseconds, got "
                              f"{tpot_target!r}", field="--tpot-target")
        flags = {k: v for k, v in dict(
            tp=tp, pp=pp, ep=ep, batch=batch, prompt_len=prompt_len, output_len=output_len,
            precision=precision, kv_precision=kv_precision, engine=engine,
            tpot_target_ms=tpot_target, max_batch=max_batch, prefill_tp=prefill_tp).items()
            if v is not None}
        m, cfg, notes = serving_job(sc, model, flags)
        tp, pp, ep, batch = cfg.tp, cfg.pp, cfg.ep, cfg.batch
        prompt_len, output_len, precision = cfg.prompt_len, cfg.output_len, cfg.precision
        tpot_target, max_batch = cfg.tpot_target_ms, cfg.max_batch
        fab = fabric_from_scenario(sc)
        run = run_serving(m, cfg, fab)
        r, cont, dis = run.static, run.continuous, run.disaggregated
        d = run.as_dict()
        d["cluster"] = {"system": fab.info.system, "gpu": fab.info.gpu,
                        "fabric": fab.info.fabric, "topology": fab.info.topology,
                        "nodes": fab.info.servers, "gpus": fab.n_gpus}
        d["model_params"] = m.params
        d["serving"] = cfg.model_dump()
        d["notes"] = notes
        if as_json:
            print_json(d)
            return
        par = f"tp={tp}" + (f" x pp={pp}" if pp > 1 else "") + (f" ep={ep}" if ep > 1 else "")
        console.print(f"[bold]{m.name}[/] ({m.params / 1e9:.1f}B) served by {par} x "
                      f"{fab.info.gpu} ({fab.info.system}), batch {batch}, prompt "
                      f"{prompt_len}, output {output_len}, {precision} weights, "
                      f"{r.kv_precision} KV cache, engine {r.engine}")
        t = Table(show_header=True)
        t.add_column("metric")
        t.add_column("value", justify="right")
        t.add_row("prefill (time to first token)",
                  f"{r.prefill_s * 1e3:.1f} ms  (comm {d['prefill_comm_share']:.0%})")
        t.add_row("time per output token", f"{r.tpot_s * 1e3:.2f} ms  (first "
                  f"{d['tpot_first_s'] * 1e3:.2f}, last {d['tpot_last_s'] * 1e3:.2f})")
        hidden = {"compute_s": " (overlaps the weight reads)",
                  "launch_s": " (overlaps the GPU work)"}
        for k, v in d["decode_breakdown_s"].items():
            if v:
                t.add_row(f"  decode {k.removesuffix('_s')}{hidden.get(k, '')}",
                          f"{v * 1e3:.2f} ms")
        t.add_row("communication share of decode", f"{r.comm_share:.1%}")
        t.add_row("tokens/s per request", f"{r.tokens_per_s_per_request:,.1f}")
        t.add_row("tokens/s (batch, decode)", f"{r.tokens_per_s:,.0f}")
        t.add_row("tokens/s per GPU", f"{r.tokens_per_s_per_gpu:,.1f}")
        t.add_row("request latency", f"{r.latency_s:.2f} s")
        t.add_row("memory per GPU", f"{d['memory_per_gpu_gib']:.1f} of "
                  f"{d['gpu_memory_gib']:.0f} GiB")
        t.add_row("KV cache capacity", f"{r.kv_capacity_tokens:,.0f} tokens  (max batch "
                  f"{r.max_batch} at this context)")
        if cont is not None:
            lim = f"{tpot_target:g} ms" if tpot_target is not None else "no target"
            t.add_row(f"[bold]continuous batching[/] (TPOT {lim})",
                      f"batch {cont.batch}  (limited by {cont.limited_by})")
            t.add_row("  time per output token", f"{cont.tpot_s * 1e3:.2f} ms  (prefill "
                      f"share {cont.prefill_share_s * 1e3:.2f})")
            t.add_row("  tokens/s (per GPU)", f"{cont.tokens_per_s:,.0f}  "
                      f"({cont.tokens_per_s_per_gpu:,.1f})")
            t.add_row("  time to first token", f"{cont.ttft_s * 1e3:.1f} ms")
        if dis is not None:
            t.add_row(f"[bold]disaggregated[/] prefill tp={dis.prefill_tp} -> decode",
                      f"GPUs {dis.prefill_ranks[0]}-{dis.prefill_ranks[1]} -> "
                      f"{dis.decode_ranks[0]}-{dis.decode_ranks[1]}")
            t.add_row("  KV cache per request", f"{dis.kv_bytes_per_request / 2**20:,.1f} MiB"
                      f"  ({'scale-out network' if dis.crosses_servers else 'same server'})")
            t.add_row("  KV transfer (exposed)", f"{dis.kv_transfer_s * 1e3:.2f} ms  "
                      f"({dis.kv_exposed_s * 1e3:.2f} ms)")
            t.add_row("  time to first token", f"{dis.ttft_s * 1e3:.1f} ms")
            t.add_row("  time per output token", f"{dis.tpot_s * 1e3:.2f} ms")
            t.add_row("  tokens/s per GPU (both instances)",
                      f"{dis.tokens_per_s_per_gpu:,.1f}  (prefill instances per decode "
                      f"{dis.prefill_instances_per_decode:.2f})")
        console.print(t)
        if tp * pp <= fab.info.gpus_per_server and (dis is None or not dis.crosses_servers):
            console.print(f"note: one instance's {tp * pp} GPUs sit in one server, so its "
                          f"traffic stays on NVLink/PCIe and the scale-out fabric "
                          f"({fab.info.fabric}, {fab.info.topology}) and the server count do "
                          f"not change these figures")
        for w in r.warnings + (dis.warnings if dis is not None else []):
            console.print(f"[yellow]warning:[/] {w}")
        for n in notes:
            console.print(f"note: {n}")
