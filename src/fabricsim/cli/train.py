"""``fabricsim train``: step time, MFU, breakdown and the cost of communication."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
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
    TRAINING,
    ClusterFlags,
    load,
    with_groups,
)
from fabricsim.collectives.ep import ep_kernel_on
from fabricsim.errors import ConfigError
from fabricsim.scenario.sections import TrainingSection


def minutes(seconds: float) -> str:
    """A checkpoint interval for people: ``'45 s'`` under a minute, else ``'12 min'``.

    >>> minutes(15.86), minutes(1830.0)
    ('16 s', '30 min')
    """
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.0f} min"


def layout_words(par: dict[str, Any]) -> str:
    """The pipeline and MoE settings a run's header line names, when they are set."""
    words = []
    if par.get("vp", 1) > 1:
        words.append(f"vp={par['vp']}")
    if par.get("pp_schedule", "1f1b") != "1f1b":
        words.append(f"schedule={par['pp_schedule']}")
    if par.get("pipeline_layout"):
        words.append(f"layout={par['pipeline_layout']}")
    if par.get("recompute_modules"):
        words.append(f"modules={','.join(par['recompute_modules'])}")
    if par.get("etp") is not None and par["etp"] != par.get("tp"):
        words.append(f"etp={par['etp']}")
    if par.get("ep_kernel"):
        words.append(f"ep-kernel={par['ep_kernel']}")
    return "".join(" " + escape(w) for w in words)


ChakraOpt = Annotated[Path | None, typer.Option(
    "--chakra", help="Also write the step as Chakra execution traces (ASTRA-sim's input): "
    "PREFIX.<rank>.et for the first rank of every pipeline stage.")]

TimeLimitOpt = Annotated[float | None, typer.Option(
    "--time-limit", help="With --whole-fabric: stop with an explained error after this "
    "many seconds of wall time (all runs together).")]


def register(app: typer.Typer) -> None:
    @app.command("train")
    @with_groups(CLUSTER, TRAINING)
    def train(scenario: ScenarioArg = None, cluster: ClusterFlags = NO_CLUSTER_FLAGS,
              training: TrainingSection | None = None, chakra: ChakraOpt = None,
              as_json: JsonOpt = False, time_limit: TimeLimitOpt = None) -> None:
        """Time one training step: throughput, MFU, breakdown, memory, cost of the network,
        and the goodput once failures and restarts are counted. With --backend flow the
        scenario's faults and background traffic slow the groups they reach.

        Example: fabricsim train --system dgx-h100 --nodes 16 --model llama3-70b --tp 8
        --pp 4 --vp 5 --global-batch 512 --tp-comm-overlap
        """
        from fabricsim import jobs

        sc = load(scenario, cluster)
        job = jobs.job_from_scenario("train", sc, over=training or TrainingSection())
        if time_limit is not None:
            if not time_limit > 0 or not job.whole_fabric:
                raise ConfigError(f"--time-limit bounds the --whole-fabric runs: give "
                                  f"seconds > 0 with --backend flow --whole-fabric, got "
                                  f"{time_limit}", field="--time-limit")
            job = job.model_copy(update={"time_limit_s": time_limit})
        if chakra is not None and job.parallel.pp_schedule != "1f1b":
            raise ConfigError("--chakra writes 1F1B pipeline traces; DualPipe's two "
                              "directions are not exported: drop --chakra or use "
                              "--pp-schedule 1f1b", field="--chakra")
        if chakra is not None:  # the folder the traces go to, before the run
            check_out_file(chakra.with_name(chakra.name + ".0.et"), "--chakra", ())
        fab = job.cluster.build()
        whole = job.whole_fabric
        report = _with_progress(job, fab, quiet=as_json) if whole else jobs.run(job, fab)
        d = report.to_dict()
        r, gp, m = report.step, report.goodput, job.model
        if chakra is not None:
            from fabricsim.interop.chakra import step_trace, write_traces

            par = r.parallel
            first = {par["tp"] * par["cp"] * par["dp"] * st: step_trace(r, m, stage=st)
                     for st in range(par["pp"])}
            paths = write_traces(first, chakra, {"model": m.name, "fabric": fab.info.fabric,
                                                 "system": fab.info.system})
            d["chakra_traces"] = [str(x) for x in paths]
        if as_json:
            print_json(d)
            return
        par = d["parallel"]
        console.print(f"[bold]{m.name}[/] ({m.params / 1e9:.1f}B params) on {r.world} x "
                      f"{fab.info.gpu} ({fab.info.system}, {fab.info.fabric}): tp={par['tp']} "
                      f"pp={par['pp']} dp={par['dp']} cp={par['cp']} ep={par['ep']} "
                      f"zero={par['zero']} mb={par['micro_batch']} gbs={par['global_batch']} "
                      f"seq={par['seq_len']} {par['precision']} recompute={par['recompute']}"
                      + layout_words(par)
                      + (" [flow backend]" if job.backend == "flow" else ""))
        t = Table(show_header=True)
        for col in ("part", "seconds/step", "share"):
            t.add_column(col, justify="right" if col != "part" else "left")
        for k, v in r.breakdown.items():
            t.add_row(k, f"{v:.4f}", f"{v / r.step_time_s:.1%}")
        t.add_row("[bold]step[/]", f"{r.step_time_s:.4f}", "100%")
        console.print(t)
        console.print(f"tokens/s {r.tokens_per_s:,.0f}  ({r.tokens_per_s / r.world:,.0f} per GPU)"
                      f"  TFLOP/s/GPU {r.tflops_per_gpu:.1f}  MFU {r.mfu:.1%}  HFU {r.hfu:.1%}")
        if report.accuracy is not None:
            b = report.accuracy
            console.print(f"± {b.median:.0%} (p90 {b.p90:.0%}): the held-out error of "
                          f"published {b.group} runs ({b.runs} runs, {b.sources} sources; "
                          f"docs/training.md)")
        console.print(f"memory/GPU {r.memory_per_gpu_gib:.1f} GiB of "
                      f"{r.gpu_memory_bytes / 2**30:.0f} GiB")
        if par.get("ep_kernel"):
            console.print(f"expert all-to-all by {ep_kernel_on(fab, par['ep_kernel'])} kernels: "
                          f"{r.breakdown.get('ep', 0.0):.4f} s/step exposed of "
                          f"{d['comm_total_s'].get('ep', 0.0):.4f} s (--ep-kernel to change; "
                          f"docs/ep.md)")
        console.print(f"exposed communication {r.comm_fraction:.1%} of the step = "
                      f"{r.idle_gpus:.1f} idle GPUs = ${r.comm_usd_per_day:,.0f}/day at "
                      f"${r.gpu_hour_usd:.2f}/GPU-hour")
        if "faults" in d:
            f = d["faults"]
            console.print(f"with {job.faults.describe()}: step {r.step_time_s:.4f} s against "
                          f"{f['fault_free_step_time_s']:.4f} s fault-free (x{f['slowdown']:.3f}"
                          f") = {f['idle_gpu_equivalent']:.1f} idle GPUs = "
                          f"${f['usd_per_day']:,.0f}/day")
            for desc in f["descriptions"]:
                console.print(f"  {desc}")
        if "whole_fabric" in d:
            _print_whole(d["whole_fabric"], r.step_time_s)
        if r.total_tokens:
            run = r.run(r.total_tokens)
            console.print(f"run of {run['tokens']:.3g} tokens: {run['days']:.1f} days, "
                          f"${run['cost_usd']:,.0f}, of which ${run['comm_usd']:,.0f} waiting "
                          f"on the network")
        console.print(
            f"goodput {gp.goodput:.1%} of wall time trains: {gp.failures_per_day:.2f} "
            f"failures/day (job MTBF {gp.job_mtbf_hours:.1f} h), checkpoint every "
            f"{minutes(gp.checkpoint_interval_s)}; lost ${gp.usd_lost_per_day:,.0f}/day"
            f" (docs/goodput.md)")
        if chakra is not None:
            console.print(f"wrote {len(d['chakra_traces'])} Chakra trace(s): "
                          f"{d['chakra_traces'][0]} ...")
        print_warnings(report.warnings)


def _with_progress(job: Any, fab: Any, quiet: bool) -> Any:
    """Run a whole-fabric training job with a progress line (part, simulated time)."""
    from rich.progress import Progress, SpinnerColumn, TimeElapsedColumn

    from fabricsim import jobs
    from fabricsim.cli.common import err_console

    with Progress(SpinnerColumn(), "[progress.description]{task.description}",
                  TimeElapsedColumn(), console=err_console, transient=True,
                  disable=quiet) as bar:
        task = bar.add_task("whole fabric", total=None)
        now = {"what": "whole fabric"}

        def said(frac: float, what: str) -> None:
            now["what"] = what
            bar.update(task, description=escape(what))

        def tick(done: int, steps: int, t: float, calls: int) -> None:
            bar.update(task, description=escape(f"{now['what']}: {done}/{steps} steps, "
                                                f"simulated {t * 1e3:.3f} ms"))

        return jobs.run(job, fab, said, step_progress=tick)


def _print_whole(w: dict[str, Any], step_s: float) -> None:
    """The whole-fabric runs: every part with its siblings against one group alone, and
    beside the step's other parts."""
    console.print(f"whole fabric: {w['flows']:,} flows of every group, {w['flows_simulated']:,} "
                  f"simulated (the rest exact copies) in {w['runs']} runs ({w['wall_s']:.1f} "
                  f"s, precision {w['precision']:g}); step {step_s:.4f} s with its parts "
                  f"beside each other, {w['step_time_parts_apart_s']:.4f} s with each part "
                  f"apart, {w['step_time_alone_s']:.4f} s with each group alone "
                  f"(x{w['slowdown']:.3f})")
    t = Table(show_header=True)
    for col in ("part", "of", "groups x ranks", "flows", "simulated", "together s", "alone s",
                "x", "beside others s", "limited by"):
        t.add_column(col, justify="left" if col in ("part", "of", "limited by") else "right")
    for c in w["calls"]:
        t.add_row(c["kind"], c["part"] or "-", f"{c['groups']:,} x {c['group_size']}",
                  f"{c['transfers']:,}", f"{c['simulated']:,}", f"{c['time_s']:.6f}",
                  f"{c['alone_s']:.6f}", f"{c['slowdown']:.3f}",
                  f"{c['overlapped_s']:.6f}" if c["overlapped_s"] else "-",
                  escape(c["limited_link"] or c["limited_by"] or "-")
                  + ("" if c["siblings_met"] else " (groups inside one server)"))
    console.print(t)
    links = (w.get("overlap") or {}).get("busiest_shared_links") or []
    if links:
        console.print("links the other parts load most (mean share of the step): "
                      + ", ".join(f"{escape(x['link'])} {x['others_load']:.2f}"
                                  for x in links[:3]))
    once = w.get("all_at_once") or {}
    if once.get("refused"):
        console.print(f"every part at once: not run ({escape(once['refused'])})")
    elif once.get("parts"):
        worst = max(once["parts"], key=lambda p: p["slowdown"])
        console.print("every part at once (a bound: the step overlaps fewer): "
                      + ", ".join(f"{p['kind']} x{p['slowdown']:.2f}" for p in once["parts"])
                      + f"; worst {worst['kind']}")
