"""``fabricsim bench``: an nccl-tests style sweep of one collective on a simulated cluster.

Output in nccl-tests' layout (:func:`fabricsim.interop.nccl_tests.format_bench`): the run
header, ``Using devices``, out-of-place and in-place columns (one simulated time for both)
with ``#wrong`` as ``N/A``, plus the algorithm and protocol chosen for each size; sizes
take nccl-tests' suffixes (``K``/``M``/``G`` are binary) or ``KiB``/``MB``.
``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_NVLS_ENABLE`` and ``NCCL_COLLNET_ENABLE`` in the
environment restrict the choice as NCCL does. ``bench SCENARIO`` runs the scenario's
``collective:`` sweep (flags on the command line override it); the job is
:class:`fabricsim.jobs.CollectiveBench`. ``-o/--out FILE`` writes the rows (``.json``,
JSON lines, or ``.csv``); ``-o`` with a reduction op (``-o max``) is nccl-tests' op, so
an nccl-tests command line runs as it is, with every other flag of nccl-tests
(:data:`NCCL_TESTS`, docs/cli.md).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricsim.cli.common import (
    FlowPrecisionOpt,
    ScenarioArg,
    check_flow_precision,
    check_out_file,
)
from fabricsim.cli.options import (
    NET_ROUTING,
    NO_CLUSTER_FLAGS,
    ClusterFlags,
    Flag,
    Group,
    load,
    with_groups,
)
from fabricsim.errors import ConfigError, unknown
from fabricsim.units import parse_nccl_size

#: nccl-tests' reduction ops (``-o`` takes them, as nccl-tests does, or a file to write).
_OPS = ("sum", "prod", "min", "max", "avg")


@dataclass(frozen=True)
class NcclTestsRun:
    """nccl-tests' run flags beyond the sweep (``all_reduce_perf -t -m -r ...``), as
    given. Each one either changes what is printed, what is modelled (``root``,
    ``agg_iters``), or is accepted with a warning saying it is not modelled."""

    given: Mapping[str, int | str] = field(default_factory=dict)

    def get(self, name: str, default: int) -> int:
        return int(self.given.get(name, default))


def _int(name: str, lo: int, hi: int) -> Callable[[int], int]:
    def conv(v: int) -> int:
        if not lo <= v <= hi:
            raise ConfigError(f"must be {lo}..{hi}, got {v}", field=name)
        return v
    return conv


#: nccl-tests flags that change the run in ways a simulation does not model (warned).
NOT_MODELLED = {"blocking": ("-z", "a blocking wait after each operation"),
                "cudagraph": ("-G", "CUDA graph launches cut the launch cost"),
                "report_cputime": ("-C", "CPU time is reported instead of GPU time"),
                "local_register": ("-R", "registered buffers speed up NVLS and copies"),
                "cta_policy": ("-x", "NCCL's CTA policy"),
                "device_implementation": ("-D", "a device-side implementation"),
                "device_cta_count": ("-V", "a device CTA count"),
                "stream_null": ("-y", "the default stream")}
NCCL_TESTS = Group("run", tuple(
    Flag(name, int, help, decls=decls, convert=conv) for name, decls, help, conv in (
        ("nthreads", ("--nthreads", "-t"), "nccl-tests' threads per process (no effect on "
         "a simulation: ranks are the cluster's GPUs).", _int("-t", 1, 1024)),
        ("agg_iters", ("--agg_iters", "-m"), "Operations aggregated per launch (one NCCL "
         "group): the launch cost is shared among them.", _int("-m", 1, 1 << 20)),
        ("root", ("--root", "-r"), "Root rank of broadcast and reduce (printed; the model "
         "is the same from any root).", _int("-r", 0, 1 << 20)),
        ("run_cycles", ("--run_cycles", "-N"), "Sweep repetitions (no effect).",
         _int("-N", 0, 1 << 20)),
        ("parallel_init", ("--parallel_init", "-p"), "Parallel communicator init (no "
         "effect).", _int("-p", 0, 1)),
        ("blocking", ("--blocking", "-z"), "Blocking collectives (warned: not modelled).",
         _int("-z", 0, 1)),
        ("stream_null", ("--stream_null", "-y"), "Default stream (warned: not modelled).",
         _int("-y", 0, 1)),
        ("timeout", ("--timeout", "-T"), "Seconds before nccl-tests aborts (no effect).",
         _int("-T", 0, 1 << 30)),
        ("cudagraph", ("--cudagraph", "-G"), "CUDA graph launches (warned: not modelled).",
         _int("-G", 0, 1 << 20)),
        ("report_cputime", ("--report_cputime", "-C"), "Report CPU time (warned: not "
         "modelled).", _int("-C", 0, 1)),
        ("report_timestamps", ("--report_timestamps", "-S"), "Timestamps per row (no "
         "effect).", _int("-S", 0, 1)),
        ("average", ("--average", "-a"), "How ranks' times are combined (one simulated "
         "time: no effect).", _int("-a", 0, 3)),
        ("local_register", ("--local_register", "-R"), "Buffer registration (warned: not "
         "modelled).", _int("-R", 0, 2)),
        ("cta_policy", ("--cta_policy", "-x"), "NCCL CTA policy (warned: not modelled).",
         _int("-x", 0, 1 << 10)),
        ("device_implementation", ("--device_implementation", "-D"), "Device-side "
         "implementation (warned: not modelled).", _int("-D", 0, 1 << 10)),
        ("device_cta_count", ("--device_cta_count", "-V"), "Device CTA count (warned: not "
         "modelled).", _int("-V", 0, 1 << 10)),
        ("memory", ("--memory", "-M"), "Memory report (no effect).", _int("-M", 0, 1)),
        ("unalign", ("--unalign", "-u"), "Buffer misalignment in bytes (no effect).",
         _int("-u", 0, 1 << 20)),
        ("per_iter_timing", ("--per_iter_timing", "-I"), "Per-iteration timing (no "
         "effect).", _int("-I", 0, 1)),
        ("per_iter_skip", ("--per_iter_skip", "-K"), "Iterations skipped in per-iteration "
         "timing (no effect).", _int("-K", 0, 1 << 20)),
    )), lambda given: NcclTestsRun(dict(given)), "run")


def _ep_sizes(text: str) -> tuple[int, ...]:
    """``--ep 8,16,32``: the EP sizes."""
    try:
        sizes = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"--ep takes EP sizes separated by commas (8,16,32), got "
                          f"{text!r}", field="--ep") from None
    if not sizes:
        raise ConfigError("--ep needs at least one size", field="--ep")
    return sizes


def _ep_layer(given: dict[str, Any]) -> dict[str, Any]:
    """The EP flags given, as :class:`fabricsim.jobs.EpBench` fields."""
    out = {k: v for k, v in given.items() if k not in ("token_routing", "ep")}
    if "ep" in given:
        out["ep_sizes"] = given["ep"]
    if "kernels" in out:
        out["kernels"] = tuple(out["kernels"])
    if "token_routing" in given:
        out.update(_routing(given["token_routing"]))
    return out


#: ``bench ep_dispatch|ep_combine|ep``: the MoE layer and its kernels (Megatron's names
#: accepted beside fabricsim's).
EP_LAYER = Group("ep_layer", (
    Flag("tokens", int | None, "ep_dispatch/ep_combine: tokens per rank (default 4096)."),
    Flag("hidden", int | None, "ep_*: hidden size (default 7168).",
         ("--hidden", "--hidden-size")),
    Flag("top_k", int | None, "ep_*: routed experts per token (default 8).",
         ("--top-k", "--moe-router-topk")),
    Flag("experts", int | None, "ep_*: experts in all (default 256).",
         ("--experts", "--num-experts")),
    Flag("ep", str | None, "ep_*: EP sizes, comma-separated (each the first that "
         "many GPUs; default every GPU).", ("--ep", "--expert-model-parallel-size"),
         convert=_ep_sizes),
    Flag("kernels", list[str] | None, "ep_*: kernel family: nccl, deepep, deepep-ll, "
         "hybridep, nvlink-onesided, xla (TPU slices) or auto (repeat to compare; default "
         "auto).",
         ("--ep-kernel",)),
    Flag("dispatch_dtype", str | None, "ep_*: what dispatch moves: fp8 (default), bf16, "
         "nvfp4.", ("--dtype",)),
    Flag("combine_dtype", str | None, "ep_*: what combine moves (default bf16)."),
    Flag("token_routing", str | None, "ep_*: uniform (default), zipf:SKEW, or a file of "
         "one token count per expert (a measured load histogram)."),
    Flag("node_limit", int | None, "ep_*: a token's experts on at most this many servers "
         "(DeepSeek-V3 routes to 4)."),
    Flag("capacity_factor", float | None, "ep_*: an expert takes at most this many times "
         "its even share; the rest are dropped.",
         ("--capacity-factor", "--moe-expert-capacity-factor")),
    Flag("pad_to_capacity", bool | None, "ep_*: pad every expert's input to its capacity "
         "(needs --capacity-factor).", ("--pad-to-capacity/--no-pad-to-capacity",)),
), _ep_layer, "expert_parallel")


#: nccl-tests' run flags by field, as the command line spells them.
NCCL_TESTS_FLAG = {f.field: f.names[0] for f in NCCL_TESTS.flags}


def register(app: typer.Typer) -> None:
    @app.command("bench")
    @with_groups(NET_ROUTING, NCCL_TESTS, EP_LAYER)
    def bench(
        collective: Annotated[str, typer.Argument(
            help="all_reduce, reduce_scatter, all_gather, broadcast, reduce, alltoall, "
                 "sendrecv; 'scenario' runs the scenario's own.")],
        scenario: ScenarioArg = None,
        cluster: ClusterFlags = NO_CLUSTER_FLAGS,
        minbytes: Annotated[str | None, typer.Option(
            "--minbytes", "-b", help="Smallest size (default: the scenario's, else 32M).")
        ] = None,
        maxbytes: Annotated[str | None, typer.Option(
            "--maxbytes", "-e", help="Largest size (default: the scenario's, else 32M).")
        ] = None,
        stepfactor: Annotated[float | None, typer.Option(
            "--stepfactor", "-f", help="Size multiplier per row (default 2).")] = None,
        stepbytes: Annotated[str | None, typer.Option(
            "--stepbytes", "-i", help="Size increment (instead of a factor).")] = None,
        iters: Annotated[int, typer.Option(
            "--iters", "-n", min=1, help="nccl-tests' iteration count. A simulation is "
            "deterministic, so it does not change the result; accepted so that nccl-tests "
            "command lines run as they are (servers are --nodes).")] = 20,
        warmup: Annotated[int, typer.Option(
            "--warmup_iters", "-w", min=0, help="nccl-tests' warm-up iterations (accepted, "
            "no effect on a simulation).")] = 5,
        check: Annotated[int, typer.Option(
            "--check", "-c", min=0, max=1, help="nccl-tests' data check (accepted; a "
            "simulation moves no data, so #wrong is N/A).")] = 1,
        ngpus: Annotated[int | None, typer.Option(
            "--ngpus", "-g", min=1, max=72, help="nccl-tests' GPUs per thread: one thread "
            "issues each operation on g GPUs, so an iteration takes at least g times the "
            "host's issue time (default: the scenario's, else 1: one process per GPU, as "
            "mpirun runs it).")] = None,
        datatype: Annotated[str | None, typer.Option(
            "--datatype", "-d", help="nccl-tests type (default: the scenario's, else "
            "float).")] = None,
        op: Annotated[str | None, typer.Option(
            "--op", help="Reduction op (nccl-tests' -o; default: the scenario's, else "
            "sum).")] = None,
        algo: Annotated[list[str] | None, typer.Option(
            "--algo", help="Force an algorithm (repeat to overlay several; default auto).")
        ] = None,
        proto: Annotated[str | None, typer.Option(
            "--proto", help="Force a protocol: LL, LL128 or Simple.")] = None,
        select: Annotated[str | None, typer.Option(
            "--select", help="Where nothing is forced: nccl (NCCL's own choice, by its "
            "cost model; the default) or fastest (the pair fabricsim times fastest: what "
            "the fabric could do).")] = None,
        nccl_version: Annotated[str | None, typer.Option(
            "--nccl-version", help="The NCCL release whose algorithm and protocol choice "
            "to make, e.g. 2.26.2 (its tuning changed in 2.28 and 2.29; default: the "
            "scenario's, else the newest modelled).")] = None,
        backend: Annotated[str | None, typer.Option(
            "--backend", help="analytic, flow, packet or hybrid (flow with packet runs of the "
            "congested links; default: the scenario's, else "
            "analytic).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per row.")
                            ] = False,
        csv_out: Annotated[bool, typer.Option("--csv", help="CSV rows.")] = False,
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", help="Also write the rows to this file: .json (JSON lines) or "
            ".csv.")] = None,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Write busbw and time vs size (log axes, algorithm/protocol "
            "switches marked) to this PNG.")] = None,
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Flow backend: stop with an explained error after this "
            "many seconds of wall time per size.")] = None,
        flow_precision: FlowPrecisionOpt = 0.0,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="No progress display (flow and packet backends show "
            "one on a terminal).")] = False,
        output_file: Annotated[Path | None, typer.Option(
            "--output_file", "-J", help="nccl-tests' JSON results file: the rows as JSON "
            "lines (as --out FILE.json).")] = None,
        run: NcclTestsRun = NcclTestsRun(),
        ep_layer: dict[str, Any] | None = None,
    ) -> None:
        """Simulate an nccl-tests sweep (all_reduce_perf etc.) on a cluster, or MoE
        dispatch/combine kernels (ep_dispatch, ep_combine, ep)."""
        import os

        layer = ep_layer or {}
        if collective in EP_COLLECTIVES:
            sweep = {"--minbytes": minbytes, "--maxbytes": maxbytes,
                     "--stepfactor": stepfactor, "--stepbytes": stepbytes,
                     "--datatype": datatype, "--op": op, "--algo": algo, "--proto": proto,
                     "--select": select, "--time-limit": time_limit, "--output_file": output_file,
                     "--ngpus": ngpus, "--nccl-version": nccl_version,
                     **{NCCL_TESTS_FLAG[k]: v for k, v in run.given.items()}}
            given = next((k for k, v in sweep.items() if v is not None), None)
            if given is not None:
                raise ConfigError(f"{given} sets an nccl-tests sweep; {collective} times "
                                  f"an MoE layer instead (its flags: --tokens, --hidden, "
                                  f"--top-k, --experts, --ep, --ep-kernel): drop {given}",
                                  field=given)
            if flow_precision:
                raise ConfigError(f"--flow-precision applies to nccl-tests sweeps on the flow "
                                  f"backend; {collective} times its MoE layer exactly: drop "
                                  f"--flow-precision", field="--flow-precision")
            _bench_ep(collective, scenario, cluster, backend, json_out, csv_out, out, plot,
                      layer)
            return
        if layer:
            flag = next(f.names[0].split("/")[0] for f in EP_LAYER.flags
                        if f.field in layer or (f.field == "ep" and "ep_sizes" in layer))
            raise ConfigError(f"{flag} describes an MoE layer: it goes with bench "
                              f"ep_dispatch, ep_combine or ep, not {collective}", field=flag)

        from fabricsim import jobs
        from fabricsim.collectives.nccl_env import nccl_env
        from fabricsim.interop.nccl_tests import format_bench
        from fabricsim.jobs.collective import BenchRow, bench_sizes

        if out is not None and out.suffix == "" and str(out) in (*_OPS, "mulsum", "all"):
            if op is not None and op != str(out):  # nccl-tests' -o: the reduction op
                raise ConfigError(f"-o {out} and --op {op} name two reduction ops; give one",
                                  field="--op")
            op, out = str(out), None
        if output_file is not None:
            if out is not None:
                raise ConfigError("-J and --out both name a rows file; give one", field="-J")
            out = output_file
        if collective.endswith("_perf"):  # nccl-tests' binary names
            collective = collective.removesuffix("_perf")
        if out is not None and out.suffix.lower() not in (".json", ".csv"):
            raise ConfigError(f"{out}: give a file ending in .json or .csv (or a reduction "
                              f"op: {', '.join(_OPS)})", field="--out")
        check_out_file(out, "--out", (".json", ".csv"))
        check_out_file(plot, "--plot")
        if json_out and csv_out:
            raise ConfigError("--json and --csv are two formats of the same rows; give one",
                              field="--csv")
        if stepfactor is not None and stepbytes is not None:
            raise ConfigError("give a size factor (-f) or a size increment (-i), not both",
                              field="--stepbytes")
        if time_limit is not None and not time_limit > 0:
            raise ConfigError("--time-limit takes seconds > 0 and applies to the flow "
                              "backend (--backend flow)", field="--time-limit")
        check_flow_precision(flow_precision)
        env = nccl_env(os.environ)
        sc = load(scenario, cluster)
        spec = sc.collective
        step_b = parse_nccl_size(stepbytes, "--stepbytes") if stepbytes is not None else None
        if step_b is not None and step_b <= 0:
            raise ConfigError(f"-i must be a size > 0, got {stepbytes!r}", field="--stepbytes")
        lo = parse_nccl_size(minbytes, "--minbytes") if minbytes is not None else \
            (int(spec.minbytes) if spec is not None else parse_nccl_size("32M"))
        hi = parse_nccl_size(maxbytes, "--maxbytes") if maxbytes is not None else \
            (int(spec.maxbytes) if spec is not None else parse_nccl_size("32M"))
        factor = stepfactor if stepfactor is not None else (
            float(spec.stepfactor) if spec is not None and step_b is None else 2.0)
        sizes = tuple(bench_sizes(lo, hi, factor, step_b))
        if collective == "scenario":
            if spec is None:
                raise ConfigError("'scenario' runs the scenario's collective: section, and "
                                  "this scenario has none", field="COLLECTIVE")
            collective = spec.collective
        if backend is not None:
            from fabricsim.backends.registry import BACKENDS

            if backend not in BACKENDS:
                raise unknown("backend", backend, BACKENDS, field="--backend")
        if select is not None:
            from fabricsim.collectives.tuner import SELECTIONS

            if select not in SELECTIONS:
                raise unknown("selection", select, SELECTIONS, field="--select")
        job = jobs.job_from_scenario(
            "bench", sc, collective=collective, sizes=sizes, datatype=datatype, op=op,
            algos=tuple(algo or ()), proto=proto, backend=backend, gpus_per_thread=ngpus,
            env=env, time_limit_s=time_limit,
            root=run.get("root", 0) if "root" in run.given else None,
            agg_iters=run.get("agg_iters", 1) if "agg_iters" in run.given else None,
            select=select,
            flow_precision=flow_precision, nccl_version=nccl_version)
        fab = job.cluster.build()
        from contextlib import ExitStack

        from fabricsim.cli.common import err_console

        stack = ExitStack()
        on_size = None
        choices = list(job.algos)
        if job.backend != "analytic" and not quiet and err_console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            bar = stack.enter_context(Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                console=err_console, transient=True))
            task = bar.add_task(f"{job.backend} backend", total=len(sizes) * len(choices))

            def on_size(i: int, n: int, size: int) -> None:
                bar.update(task, advance=1 if i else 0,
                           description=f"{job.backend} backend: {size:,} B")
        with stack:  # the job every face runs (jobs.run), with the CLI's progress bar
            report = jobs.run(job, fab, on_size=on_size)
        rows_by = report.rows
        fields = list(BenchRow.__dataclass_fields__)
        flat = [r.as_dict() for rows in rows_by.values() for r in rows]
        if out is not None:
            with out.open("w", encoding="utf-8", newline="") as f:
                _write_rows(f, flat, fields, as_csv=out.suffix.lower() == ".csv")
        if json_out or csv_out:
            _write_rows(sys.stdout, flat, fields, as_csv=csv_out)
            # the run's own warnings on stderr (the rows carry theirs as fields), so that
            # stdout stays rows only
            for w in report.run_warnings:
                typer.echo(f"warning: {w}", err=True)
        else:
            c = sc.cluster
            from fabricsim.collectives.nccl_model import release_name

            release = release_name(job.nccl_version)
            for a, rows in rows_by.items():
                how = a or (f"auto (NCCL {release}'s choice)" if job.select == "nccl"
                            else "auto (fastest)")
                header = (f"# fabricsim bench {collective}: {fab.n_gpus} GPUs ({c.system} x "
                          f"{c.nodes}, {fab.info.fabric}, {fab.info.topology}), backend "
                          f"{job.backend}, algorithm {how}")
                step = (f"{step_b}(bytes)" if step_b is not None else f"{factor:g}(factor)")
                typer.echo(format_bench(rows, header, collective=job.collective, fabric=fab,
                                        gpus_per_thread=job.gpus_per_thread,
                                        sweep=(lo, hi, step),
                                        run={"nthreads": run.get("nthreads", 1),
                                             "warmup": warmup, "iters": iters,
                                             "agg": job.agg_iters,
                                             "validation": check,
                                             "graph": run.get("cudagraph", 0),
                                             "unalign": run.get("unalign", 0)}))
            for g in report.accuracy():
                # which way the figures of NCCL's choice have erred
                lean = f"{g['lean']}; " if g["by"] == "choice" else ""
                src = "source" if g["sources"] == 1 else "sources"
                typer.echo(f"# accuracy, {g['group']}: \u00b1 {g['median'] * 100:.0f} % "
                           f"(median held-out error; p90 {g['p90'] * 100:.0f} %; {lean}"
                           f"{g['rows']} published rows from {g['sources']} {src})")
            why = report.limit(fab)
            if why:
                typer.echo(f"# limit: {why}")
            for note in report.notes:
                typer.echo(f"# note: {note}")
            room = report.headroom(fab)
            if room:
                typer.echo(f"# headroom: {room}")
            for w in report.warnings:
                typer.echo(f"# warning: {w}")
            for name, (flag, what) in NOT_MODELLED.items():
                if run.get(name, 0):
                    typer.echo(f"# warning: {flag} {run.get(name, 0)} is not modelled "
                               f"({what}): the figures are without it")
        if plot is not None:
            from fabricsim.plots.busbw import Sweep, plot_collective

            # busbw and time against a log size axis, the algorithm/protocol chosen marked
            sweeps = {a or "auto": Sweep(
                sizes=[r.size_bytes for r in rows], busbw_gbps=[r.busbw_gbps for r in rows],
                time_s=[r.time_us * 1e-6 for r in rows],
                choice=[f"{r.algorithm}/{r.protocol}".lower() for r in rows],
                band=[r.band for r in rows])
                for a, rows in rows_by.items()}
            plot_collective(sweeps, plot, title=f"{collective} on {fab.n_gpus} GPUs "
                                                f"({sc.cluster.system}, {fab.info.fabric})")
            if not (json_out or csv_out):
                typer.echo(f"# wrote {plot}")
        if out is not None and not (json_out or csv_out):
            typer.echo(f"# wrote {out}")


#: The expert-parallel names ``bench`` takes (``ep``: the scenario's phases, else both).
EP_COLLECTIVES: dict[str, tuple[str, ...] | None] = {
    "ep_dispatch": ("dispatch",), "ep_combine": ("combine",), "ep": None}


def _routing(text: str | None) -> dict[str, Any]:
    """``--token-routing``: ``uniform``, ``zipf:SKEW`` or a file of per-expert counts."""
    if text is None:
        return {}
    if text == "uniform":
        return {"routing": "uniform"}
    if text.startswith("zipf"):
        _, _, val = text.partition(":")
        try:
            skew = float(val or "1.0")
        except ValueError:
            raise ConfigError(f"--token-routing zipf:SKEW takes a number, got {val!r}",
                              field="--token-routing") from None
        if not 0 < skew <= 10:
            raise ConfigError(f"a Zipf skew is a number in (0, 10], got {skew}",
                              field="--token-routing")
        return {"routing": "zipf", "skew": skew}
    path = Path(text)
    if not path.is_file():
        raise ConfigError(f"--token-routing takes uniform, zipf:SKEW or a file of per-expert "
                          f"token counts; {text!r} is none of them", field="--token-routing")
    import re

    try:
        vals = [float(v) for v in re.split(r"[\s,]+", path.read_text(encoding="utf-8"))
                if v]
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: an expert-load histogram is numbers separated by "
                          f"commas or spaces ({e})", field="--token-routing") from None
    return {"routing": "histogram", "load": tuple(vals)}


def _bench_ep(collective: str, scenario: Any, cluster: Any, backend: str | None,
              json_out: bool, csv_out: bool, out: Path | None, plot: Path | None,
              layer: dict[str, Any]) -> None:
    """``bench ep_dispatch|ep_combine|ep``: the EP kernel job, printed as a table."""
    from fabricsim import jobs

    check_out_file(out, "--out", (".json", ".csv"))
    check_out_file(plot, "--plot")
    if json_out and csv_out:
        raise ConfigError("--json and --csv are two formats of the same rows; give one",
                          field="--csv")
    sc = load(scenario, cluster)
    over: dict[str, Any] = {"phases": EP_COLLECTIVES[collective], "backend": backend,
                            **layer}
    job = jobs.job_from_scenario("ep", sc, **over)
    report = jobs.run(job)
    rows = report.rows
    cols = ["ep", "servers", "kernel", "phase", "time_us", "headline_gbps", "headline",
            "algbw_gbps", "bw_rdma_gbps", "bw_nvl_gbps", "limit", "imbalance", "dropped"]
    if out is not None:
        with out.open("w", encoding="utf-8", newline="") as f:
            _write_rows(f, rows, cols, as_csv=out.suffix.lower() == ".csv")
    if json_out or csv_out:
        _write_rows(sys.stdout, rows, cols, as_csv=csv_out)
    else:
        c = sc.cluster
        typer.echo(f"# fabricsim bench {collective}: {job.tokens} tokens/rank, hidden "
                   f"{job.hidden}, top-{job.top_k} of {job.experts} experts, "
                   f"{job.dispatch_dtype} dispatch / {job.combine_dtype} combine, "
                   f"{job.routing} routing"
                   + (f", node limit {job.node_limit}" if job.node_limit else "")
                   + (f", capacity factor {job.capacity_factor:g}"
                      + (" (padded)" if job.pad_to_capacity else "")
                      if job.capacity_factor else "")
                   + f"; {c.system} x {c.nodes}, backend {job.backend}")
        typer.echo(f"# {'EP':>5} {'kernel':>15} {'phase':>8} {'time(us)':>10} "
                   f"{'GB/s':>8} {'(as)':>6} {'RDMA':>7} {'NVL':>7}  limit")
        for r in rows:
            typer.echo(f"  {r['ep']:>5} {r['kernel']:>15} {r['phase']:>8} "
                       f"{r['time_us']:>10.1f} {r['headline_gbps']:>8.1f} "
                       f"{r['headline']:>6} {r['bw_rdma_gbps']:>7.1f} "
                       f"{r['bw_nvl_gbps']:>7.1f}  {r['limit']}")
        typer.echo("# GB/s as each family's benchmark counts it: rdma = bytes a rank sends "
                   "to every server its tokens reach (its own included); nvl = bytes a rank "
                   "receives; algbw = one copy per (token, expert)")
        for a in report.accuracy():
            src = "source" if a["sources"] == 1 else "sources"
            typer.echo(f"# accuracy, {a['kernel']}: \u00b1 {a['median'] * 100:.0f} % (median "
                       f"held-out error; p90 {a['p90'] * 100:.0f} %; {a['rows']} published "
                       f"figures from {a['sources']} {src})")
        for w in report.warnings:
            typer.echo(f"# warning: {w}")
    if plot is not None:
        from fabricsim.plots.ep import plot_ep

        plot_ep(rows, plot, title=f"{collective} on {sc.cluster.system} "
                                  f"({job.tokens} tokens/rank)")
        if not (json_out or csv_out):
            typer.echo(f"# wrote {plot}")
    if out is not None and not (json_out or csv_out):
        typer.echo(f"# wrote {out}")


def _write_rows(f: Any, rows: list[dict[str, Any]], cols: list[str], *,
                as_csv: bool) -> None:
    """The rows' ``cols`` as JSON lines (floats to 4 decimals) or CSV with a header."""
    if as_csv:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([r[c] for c in cols])
        return
    import json

    for r in rows:
        f.write(json.dumps({c: (round(r[c], 4) if isinstance(r[c], float) else r[c])
                            for c in cols}) + "\n")
