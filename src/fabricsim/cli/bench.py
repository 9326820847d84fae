"""``fabricsim bench``: an nccl-tests style sweep of one collective on a simulated cluster.

Output in nccl-tests' layout (:func:`fabricsim.interop.nccl_tests.format_nccl_tests`):
the run header, ``Using devices``, out-of-place and in-place columns (one simulated time
for both) with ``#wrong`` as ``N/A``, plus the algorithm and protocol chosen for each
size; sizes take nccl-tests' suffixes (``K``/``M``/``G`` are binary) or ``KiB``/``MB``.
``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_NVLS_ENABLE`` and ``NCCL_COLLNET_ENABLE`` in the
environment restrict the choice as NCCL does. ``bench SCENARIO`` runs the scenario's
``collective:`` sweep (flags on the command line override it).
"""

from __future__ import annotations

import csv
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricsim.cli.common import (
    FabricOpt,
    GpusPerNodeOpt,
    NetRoutingOpt,
    NodesOpt,
    OversubOpt,
    ScenarioArg,
    SystemOpt,
    TopologyOpt,
    check_out_file,
    fabric_from_scenario,
    print_json_line,
    scenario_with_overrides,
)
from fabricsim.errors import ConfigError, unknown

#: nccl-tests data types and their sizes in bytes.
DATATYPES = {"int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4,
             "int64": 8, "uint64": 8, "half": 2, "float16": 2, "float": 4, "float32": 4,
             "double": 8, "float64": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
#: nccl-tests reduction ops.
REDOPS = ("sum", "prod", "min", "max", "avg")
#: Largest message a sweep may ask for (1 PiB per rank: far beyond any GPU's memory).
MAX_MESSAGE_BYTES = 2**50
#: Most rows one sweep may have (nccl-tests' own default sweep has 31).
MAX_SWEEP_POINTS = 1000
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?)([bB]?)\s*$")


def parse_nccl_size(text: str, field: str = "size") -> int:
    """Parse an nccl-tests size: ``8``, ``1M``, ``1G`` (binary), ``128MiB``, ``4GB``.

    As in nccl-tests, a bare ``K``/``M``/``G`` suffix is binary (1M = 2**20); ``MB``
    (with a ``B``) is decimal, ``MiB`` binary.

    Examples
    --------
    >>> parse_nccl_size("1M"), parse_nccl_size("128MiB"), parse_nccl_size("1GB")
    (1048576, 134217728, 1000000000)
    """
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"cannot read size {text!r}; write e.g. 8, 1M, 1G or 128MiB",
                          field=field)
    num, prefix, binary, b = m.groups()
    power = " KMGT".index(prefix.upper()) if prefix else 0
    base = 1000 if (b and not binary and prefix) else 1024
    value = float(num) * base**power
    if not value <= MAX_MESSAGE_BYTES:
        raise ConfigError(f"size {text!r} is larger than the {MAX_MESSAGE_BYTES:,} B (1 PiB) "
                          "a sweep may ask for", field=field)
    if value != int(value):
        raise ConfigError(f"size {text!r} is {value:g} bytes, not a whole number; write "
                          f"e.g. {max(int(value), 1)} or {num}K", field=field)
    return int(value)


def sweep_sizes(minbytes: int, maxbytes: int, factor: float, stepbytes: int | None = None
                ) -> list[int]:
    """Sizes from ``minbytes`` to ``maxbytes`` by ``factor`` (or by ``stepbytes``).

    Examples
    --------
    >>> sweep_sizes(8, 64, 2)
    [8, 16, 32, 64]
    """
    if minbytes < 0 or maxbytes < minbytes:
        raise ConfigError(f"need 0 <= minbytes <= maxbytes, got {minbytes} and {maxbytes}",
                          field="--minbytes")
    if stepbytes:
        points = (maxbytes - minbytes) // stepbytes + 1
    else:
        if not (math.isfinite(factor) and factor > 1):
            raise ConfigError(f"step factor must be a number > 1, got {factor}",
                              field="--stepfactor")
        lo = max(minbytes, 1)
        points = int(math.log(max(maxbytes, lo) / lo) / math.log(factor) + 1e-9) + 1 + \
            (minbytes == 0)
    if points > MAX_SWEEP_POINTS:
        raise ConfigError(f"this sweep has {points:,} sizes; the limit is {MAX_SWEEP_POINTS:,}."
                          " Use a larger --stepfactor/--stepbytes or a narrower -b/-e range",
                          field="--stepfactor" if not stepbytes else "--stepbytes")
    if stepbytes:
        return list(range(minbytes, maxbytes + 1, stepbytes))
    out, s = [], float(max(minbytes, 1) if minbytes == 0 else minbytes)
    if minbytes == 0:
        out.append(0)
    while s <= maxbytes * (1 + 1e-12):
        out.append(int(s))
        s *= factor
    return out


@dataclass(frozen=True)
class Row:
    """One nccl-tests-style result row."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    algorithm: str
    protocol: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _best(fabric: Any, coll: str, size: int, algos: list[str | None],
          protos: list[str | None], gpus_per_thread: int) -> Any:
    """The fastest allowed (algorithm, protocol) at ``size`` (NCCL's environment
    restrictions applied by the caller as lists; ``None`` = the tuner's own choice)."""
    from fabricsim.collectives.tuner import choose
    from fabricsim.errors import ScheduleError

    best, why = None, ""
    for a in algos:
        for p in protos:
            try:
                c = choose(fabric, coll, size, None, a, p, gpus_per_thread=gpus_per_thread)
            except ScheduleError as e:
                why = str(e)
                continue
            if best is None or c.time < best.time:
                best = c
    if best is None:
        raise ConfigError(f"no allowed algorithm/protocol runs {coll} here: {why}",
                          field="NCCL_ALGO")
    return best


def run_sweep(fabric: Any, collective: str, sizes: list[int], *, datatype: str = "float",
              op: str = "sum", algo: str | None = None, proto: str | None = None,
              backend: Any = "analytic", gpus_per_thread: int = 1,
              env: Any = None, on_size: Any = None) -> list[Row]:
    """Simulate ``collective`` at every size (aligned as nccl-tests aligns them).

    ``env`` (:class:`fabricsim.interop.nccl_tests.NcclEnv`) restricts the algorithms and
    protocols as NCCL's environment variables do; ``algo``/``proto`` force one.
    ``on_size(i, n, size)`` is called before each size (progress).
    """
    from fabricsim.collectives import ALGORITHMS, run_collective
    from fabricsim.collectives.busbw import bandwidths
    from fabricsim.collectives.tuner import check_collective
    from fabricsim.protocols import PROTOCOL_LABELS

    coll = check_collective(collective)
    if datatype not in DATATYPES:
        raise unknown("datatype", datatype, DATATYPES, field="--datatype")
    if op not in REDOPS:
        raise unknown("reduction op", op, REDOPS, field="--op")
    algos: list[str | None] = [algo]
    protos: list[str | None] = [proto]
    if env is not None and algo is None and (env.algorithms is not None or
                                             env.nvls is False or env.collnet):
        auto = [a.name for a in ALGORITHMS.values() if a.auto]
        extra = ["sharp", "nvls_sharp"] if env.collnet else []
        algos = list(env.allowed_algorithms([*auto, *extra]))
        if not algos:
            raise ConfigError("NCCL_ALGO/NCCL_NVLS_ENABLE leave no algorithm to run",
                              field="NCCL_ALGO")
    if env is not None and proto is None and env.protocols is not None:
        protos = sorted(env.protocols)
    tsize = DATATYPES[datatype]
    n = fabric.n_gpus
    align = tsize * (n if coll in ("all_gather", "reduce_scatter", "alltoall") else 1)
    reduces = coll in ("all_reduce", "reduce_scatter", "reduce")
    rows = []
    for i, s in enumerate(sizes):
        size = (s // align) * align
        if on_size is not None:
            on_size(i, len(sizes), size)
        if backend == "analytic":
            c = _best(fabric, coll, size, algos, protos, gpus_per_thread)
            t, alg_name, pr = c.time, c.algorithm, c.protocol
        else:
            if len(algos) > 1 or len(protos) > 1:
                c = _best(fabric, coll, size, algos, protos, gpus_per_thread)
                a_run, p_run = c.algorithm, c.protocol
            else:
                a_run, p_run = algos[0], protos[0]
            r = run_collective(fabric, coll, size, algo=a_run, proto=p_run, backend=backend)
            t, alg_name, pr = r.time, r.algorithm, r.protocol
        alg, bus = bandwidths(coll, size, t, n)
        pr = PROTOCOL_LABELS.get(pr, pr)
        rows.append(Row(size_bytes=size, count=size // tsize, type=datatype,
                        redop=op if reduces else "none",
                        root=0 if coll in ("broadcast", "reduce") else -1,
                        time_us=t * 1e6, algbw_gbps=alg / 1e9, busbw_gbps=bus / 1e9,
                        algorithm=alg_name, protocol=pr))
    return rows


def format_table(rows: list[Row], header: str, collective: str = "all_reduce",
                 fabric: Any = None, gpus_per_thread: int = 1,
                 sweep: tuple[int, int, str] | None = None) -> str:
    """The rows in nccl-tests' layout: out-of-place and in-place columns (the model has one
    time for both), ``#wrong`` as ``N/A`` (nothing is validated), then the algorithm and
    protocol chosen as two extra columns."""
    from fabricsim.interop.nccl_tests import Row as LogRow
    from fabricsim.interop.nccl_tests import format_nccl_tests
    from fabricsim.protocols import PROTOCOL_LABELS

    out = [LogRow(r.size_bytes, r.count, r.type, r.redop, r.root, r.time_us, r.algbw_gbps,
                  r.busbw_gbps, None, r.time_us, r.algbw_gbps, r.busbw_gbps, None,
                  extra=(r.algorithm, PROTOCOL_LABELS.get(r.protocol, r.protocol)))
           for r in rows]
    devices: list[tuple[str, int, str]] = []
    if fabric is not None and fabric.n_gpus <= 4096:
        import numpy as np

        srv = fabric.node_server[fabric.gpus]
        local = fabric.node_local[fabric.gpus]
        model = _gpu_label(fabric.info.gpu)
        devices = [(f"node{int(a):04d}", int(b), model) for a, b in
                   zip(np.asarray(srv), np.asarray(local), strict=True)]
    lo, hi, step = sweep if sweep is not None else (None, None, "2(factor)")
    return format_nccl_tests(out, collective=collective, header=[header.lstrip("# ")],
                             devices=devices, gpus_per_thread=gpus_per_thread,
                             extra_columns=("algorithm", "protocol"), min_bytes=lo,
                             max_bytes=hi, step=step)


def _gpu_label(gpu: str) -> str:
    """The GPU model as nccl-tests prints it, for the catalog GPU ``gpu``."""
    labels = {"h100-sxm": "NVIDIA H100 80GB HBM3", "a100-sxm": "NVIDIA A100-SXM4-80GB",
              "a100-sxm-40gb": "NVIDIA A100-SXM4-40GB", "h200-sxm": "NVIDIA H200",
              "h800-sxm": "NVIDIA H800", "a800-sxm": "NVIDIA A800-SXM4-80GB",
              "b200": "NVIDIA B200", "gb200": "NVIDIA GB200", "v100-sxm": "Tesla V100-SXM2-32GB",
              "h20": "NVIDIA H20", "h100-pcie": "NVIDIA H100 PCIe", "l40s": "NVIDIA L40S"}
    return labels.get(gpu, gpu)


def _coll_name(collective: str) -> str:
    from fabricsim.collectives.tuner import check_collective

    return check_collective(collective)


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench(
        collective: Annotated[str, typer.Argument(
            help="all_reduce, reduce_scatter, all_gather, broadcast, reduce, alltoall, "
                 "sendrecv.")],
        scenario: ScenarioArg = None,
        minbytes: Annotated[str, typer.Option("--minbytes", "-b", help="Smallest size.")
                            ] = "32M",
        maxbytes: Annotated[str, typer.Option("--maxbytes", "-e", help="Largest size.")
                            ] = "32M",
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
        ngpus: Annotated[int, typer.Option(
            "--ngpus", "-g", min=1, max=72, help="nccl-tests' GPUs per thread: one process "
            "launching g GPUs pays the launch overhead g-1 more times (default 1: one "
            "process per GPU, as mpirun runs it).")] = 1,
        datatype: Annotated[str, typer.Option("--datatype", "-d", help="nccl-tests type.")
                            ] = "float",
        op: Annotated[str, typer.Option("--op", "-o", help="Reduction op.")] = "sum",
        system: SystemOpt = None,
        nodes: NodesOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        fabric: FabricOpt = None,
        topology: TopologyOpt = None,
        oversubscription: OversubOpt = None,
        routing: NetRoutingOpt = None,
        algo: Annotated[list[str] | None, typer.Option(
            "--algo", help="Force an algorithm (repeat to overlay several; default auto).")
        ] = None,
        proto: Annotated[str | None, typer.Option(
            "--proto", help="Force a protocol: LL, LL128 or Simple.")] = None,
        backend: Annotated[str | None, typer.Option(
            "--backend", help="analytic, flow or packet (default: the scenario's, else "
            "analytic).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per row.")
                            ] = False,
        csv_out: Annotated[bool, typer.Option("--csv", help="CSV rows.")] = False,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Write busbw and time vs size (log axes, algorithm/protocol "
            "switches marked) to this PNG.")] = None,
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Flow backend: stop with an explained error after this "
            "many seconds of wall time per size.")] = None,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="No progress display (flow and packet backends show "
            "one on a terminal).")] = False,
    ) -> None:
        """Simulate an nccl-tests sweep (all_reduce_perf etc.) on a cluster."""
        import os

        from fabricsim.backends.registry import BACKENDS
        from fabricsim.interop.nccl_tests import nccl_env

        if backend is not None and backend not in BACKENDS:
            raise unknown("backend", backend, BACKENDS, field="--backend")
        check_out_file(plot, "--plot")
        if json_out and csv_out:
            raise ConfigError("--json and --csv are two formats of the same rows; give one",
                              field="--csv")
        if stepfactor is not None and stepbytes is not None:
            raise ConfigError("give a size factor (-f) or a size increment (-i), not both",
                              field="--stepbytes")
        env = nccl_env(os.environ)
        sc = scenario_with_overrides(scenario, system=system, nodes=nodes,
                                     gpus_per_node=gpus_per_node, fabric=fabric,
                                     topology=topology, oversubscription=oversubscription,
                                     routing=routing)
        if env.collnet:  # NCCL_COLLNET_ENABLE=1: the fabric's SHARP switches take part
            params = {**(sc.cluster.params or {}), "sharp": True}
            sc = sc.model_copy(update={"cluster": sc.cluster.model_copy(
                update={"params": params})})
        fab = fabric_from_scenario(sc)
        spec = sc.collective
        if spec is not None:  # the scenario's sweep, unless flags on the line say otherwise
            given = {a.split("=")[0] for a in sys.argv[1:]}
            if not given & {"-b", "--minbytes"}:
                minbytes = str(spec.minbytes)
            if not given & {"-e", "--maxbytes"}:
                maxbytes = str(spec.maxbytes)
            if not given & {"-f", "--stepfactor", "-i", "--stepbytes"}:
                stepfactor = float(spec.stepfactor)
            if not given & {"-d", "--datatype"}:
                datatype = spec.datatype
            if not given & {"-o", "--op"}:
                op = spec.op
            if algo is None and spec.algo:
                algo = [spec.algo]
            if proto is None and spec.proto:
                proto = spec.proto
            if collective == "scenario":
                collective = spec.collective
            backend = backend or spec.backend
        backend = backend or "analytic"
        runner: Any = backend
        if time_limit is not None and (backend != "flow" or not time_limit > 0):
            raise ConfigError("--time-limit takes seconds > 0 and applies to the flow "
                              "backend (--backend flow)", field="--time-limit")
        if sc.faults or sc.background or time_limit is not None:
            if backend != "flow":
                raise ConfigError(f"the scenario's faults/background traffic need the flow "
                                  f"backend; run with --backend flow (got {backend})",
                                  field="--backend")
            from fabricsim.backends.flow import FlowBackend

            # the scenario's faults and traffic are kept
            runner = FlowBackend(faults=list(sc.faults), background=list(sc.background),
                                 seed=sc.seed, time_limit_s=time_limit)
        if fab.n_gpus < 2:
            raise ConfigError(f"a collective moves data between GPUs and this cluster has "
                              f"{fab.n_gpus}; give --nodes 2 or --gpus-per-node 2 or more",
                              field="--gpus-per-node")
        per_server = fab.info.gpus_per_server
        if ngpus > per_server or per_server % ngpus:
            raise ConfigError(f"-g {ngpus}: one process drives GPUs of its own server, and "
                              f"{fab.info.system} servers have {per_server}; give a -g that "
                              f"divides {per_server}", field="--ngpus")
        step_b = parse_nccl_size(stepbytes, "--stepbytes") if stepbytes is not None else None
        if step_b is not None and step_b <= 0:
            raise ConfigError(f"-i must be a size > 0, got {stepbytes!r}", field="--stepbytes")
        factor = stepfactor if stepfactor is not None else 2.0  # nccl-tests' -f 2
        sizes = sweep_sizes(parse_nccl_size(minbytes, "--minbytes"),
                            parse_nccl_size(maxbytes, "--maxbytes"),
                            factor, step_b)
        writer = csv.writer(sys.stdout) if csv_out else None
        if writer is not None:
            writer.writerow(list(Row.__dataclass_fields__))
        choices: list[str | None] = list(algo) if algo else [None]
        from contextlib import ExitStack

        from fabricsim.cli.common import err_console

        stack = ExitStack()
        on_size = None
        if backend != "analytic" and not quiet and err_console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            bar = stack.enter_context(Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                console=err_console, transient=True))
            task = bar.add_task(f"{backend} backend", total=len(sizes) * len(choices))

            def on_size(i: int, n: int, size: int) -> None:
                bar.update(task, advance=1 if i else 0,
                           description=f"{backend} backend: {size:,} B")
        rows_by: dict[str | None, list[Row]] = {}
        with stack:
            for a in choices:
                rows_by[a] = run_sweep(fab, collective, sizes, datatype=datatype, op=op,
                                       algo=a, proto=proto, backend=runner,
                                       gpus_per_thread=ngpus, env=env, on_size=on_size)
        for a in choices:
            rows = rows_by[a]
            if json_out:
                for r in rows:
                    print_json_line({k: (round(v, 4) if isinstance(v, float) else v)
                                     for k, v in r.as_dict().items()})
            elif writer is not None:
                for r in rows:
                    writer.writerow(list(r.as_dict().values()))
            else:
                c = sc.cluster
                header = (f"# fabricsim bench {collective}: {fab.n_gpus} GPUs ({c.system} x "
                          f"{c.nodes}, {fab.info.fabric}, {fab.info.topology}), backend "
                          f"{backend}, algorithm {a or 'auto'}")
                step = (f"{step_b}(bytes)" if step_b is not None else
                        f"{factor:g}(factor)")
                typer.echo(format_table(rows, header, collective=_coll_name(collective),
                                        fabric=fab, gpus_per_thread=ngpus,
                                        sweep=(parse_nccl_size(minbytes),
                                               parse_nccl_size(maxbytes), step)))
        if plot is not None:
            from fabricsim.plots.busbw import Sweep, plot_collective

            # busbw and time against a log size axis, the algorithm/protocol chosen marked
            sweeps = {a or "auto": Sweep(
                sizes=[r.size_bytes for r in rows_by[a]],
                busbw_gbps=[r.busbw_gbps for r in rows_by[a]],
                time_s=[r.time_us * 1e-6 for r in rows_by[a]],
                choice=[f"{r.algorithm}/{r.protocol}".lower() for r in rows_by[a]])
                for a in choices}
            plot_collective(sweeps, plot, title=f"{collective} on {fab.n_gpus} GPUs "
                                                f"({sc.cluster.system}, {fab.info.fabric})")
            if not (json_out or csv_out):
                typer.echo(f"# wrote {plot}")
