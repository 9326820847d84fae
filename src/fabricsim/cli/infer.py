"""``fabricsim infer``: serving a model — TTFT, time per output token, batching, KV cache.

One instance of ``--tp × --pp`` GPUs (``--ep`` splits a MoE model's experts inside the TP
group). Without further flags a static batch is timed; ``--tpot-target-ms`` adds the
continuous-batching throughput at that latency; ``--prefill-tp`` adds disaggregated
serving (a prefill instance on other servers ships each request's KV cache over the
scale-out network).
"""

from __future__ import annotations

import typer
from rich.table import Table

from fabricsim.cli.common import JsonOpt, ScenarioArg, console, print_json
from fabricsim.cli.options import (
    CLUSTER,
    NO_CLUSTER_FLAGS,
    SERVING,
    ClusterFlags,
    load,
    with_groups,
)
from fabricsim.scenario.sections import ServingSection


def register(app: typer.Typer) -> None:
    @app.command("infer")
    @with_groups(CLUSTER, SERVING)
    def infer_cmd(scenario: ScenarioArg = None, cluster: ClusterFlags = NO_CLUSTER_FLAGS,
                  serving: ServingSection | None = None, as_json: JsonOpt = False) -> None:
        """Serve a model: TTFT, time per output token, tokens/s, KV-cache limits.

        A scenario's inference: section gives the model and the serving layout (the
        flags override it); without one, its training: section gives the model. With
        --backend flow the scenario's faults and background traffic slow the collectives
        they reach.
        """
        from fabricsim import jobs

        sc = load(scenario, cluster)
        job = jobs.job_from_scenario("infer", sc, over=serving or ServingSection())
        fab = job.cluster.build()
        report = jobs.run(job, fab)
        d = report.to_dict()
        m, cfg = job.model, job.serving
        run = report.run
        r, cont, dis = run.static, run.continuous, run.disaggregated
        tp, pp, ep, batch = cfg.tp, cfg.pp, cfg.ep, cfg.batch
        prompt_len, output_len, precision = cfg.prompt_len, cfg.output_len, cfg.precision
        tpot_target = cfg.tpot_target_ms
        notes = list(job.notes)
        if as_json:
            print_json(d)
            return
        par = f"tp={tp}" + (f" x pp={pp}" if pp > 1 else "") + (f" ep={ep}" if ep > 1 else "") \
            + (f" attention-dp={cfg.attention_dp}" if cfg.attention_dp > 1 else "")
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
        if m.is_moe and ep > 1:
            t.add_row("expert dispatch/combine kernels", r.ep_kernel if r.ep_kernel != "none"
                      else "none (experts inside the TP group; its all-reduce combines)")
            if r.ep_kernel != "none":
                t.add_row("  exposed per output token (prefill)",
                          f"{r.decode.ep_s * 1e3:.2f} ms  ({r.prefill_ep_s * 1e3:.1f} ms)")
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
        if report.accuracy:
            lat, tput = report.accuracy["latency"], report.accuracy["throughput"]
            console.print(f"± {lat.median:.0%} on latencies (first token, per output token), ± "
                          f"{tput.median:.0%} on throughput (p90 {lat.p90:.0%} / "
                          f"{tput.p90:.0%}): the held-out error of published serving "
                          f"figures (docs/inference.md)")
        if tp * pp <= fab.info.gpus_per_server and (dis is None or not dis.crosses_servers):
            console.print(f"note: one instance's {tp * pp} GPUs sit in one server, so its "
                          f"traffic stays on {'ICI' if fab.info.ici_slice else 'NVLink/PCIe'}"
                          f" and the scale-out fabric "
                          f"({fab.info.fabric}, {fab.info.topology}) and the server count do "
                          f"not change these figures")
        if "faults" in d:
            f = d["faults"]
            console.print(f"with {job.faults.describe()}: time per output token "
                          f"{r.tpot_s * 1e3:.2f} ms against {f['fault_free_tpot_s'] * 1e3:.2f} "
                          f"ms fault-free (x{f['tpot_slowdown']:.3f})")
        outside = list(dict.fromkeys(w for b in (report.accuracy or {}).values()
                                     for w in b.warnings))
        for w in r.warnings + (dis.warnings if dis is not None else []) + outside:
            console.print(f"[yellow]warning:[/] {w}")
        for n in notes:
            console.print(f"note: {n}")
