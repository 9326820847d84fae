"""``fabricsim bench``: an nccl-tests style sweep of one collective on a simulated cluster.

Columns as nccl-tests prints them (size, count, type, redop, root, time, algbw, busbw)
plus the algorithm and protocol chosen for each size; sizes take nccl-tests' suffixes
(``K``/``M``/``G`` are binary, as in nccl-tests) or ``KiB``/``MB`` forms.
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


def parse_nccl_size(text: str) -> int:
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
                          field="size")
    num, prefix, binary, b = m.groups()
    power = " KMGT".index(prefix.upper()) if prefix else 0
    base = 1000 if (b and not binary and prefix) else 1024
    value = float(num) * base**power
    if not value <= MAX_MESSAGE_BYTES:
        raise ConfigError(f"size {text!r} is larger than the {MAX_MESSAGE_BYTES:,} B (1 PiB) "
                          "a sweep may ask for", field="size")
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


def run_sweep(fabric: Any, collective: str, sizes: list[int], *, datatype: str = "float",
              op: str = "sum", algo: str | None = None, proto: str | None = None,
              backend: str = "analytic", gpus_per_thread: int = 1) -> list[Row]:
    """Simulate ``collective`` at every size (aligned as nccl-tests aligns them)."""
    from fabricsim.collectives import run_collective
    from fabricsim.collectives.busbw import bandwidths
    from fabricsim.collectives.tuner import check_collective, choose
    from fabricsim.protocols import PROTOCOL_LABELS

    coll = check_collective(collective)
    if datatype not in DATATYPES:
        raise unknown("datatype", datatype, DATATYPES, field="--datatype")
    if op not in REDOPS:
        raise unknown("reduction op", op, REDOPS, field="--op")
    tsize = DATATYPES[datatype]
    n = fabric.n_gpus
    align = tsize * (n if coll in ("all_gather", "reduce_scatter", "alltoall") else 1)
    reduces = coll in ("all_reduce", "reduce_scatter", "reduce")
    rows = []
    for s in sizes:
        size = (s // align) * align
        if backend == "analytic":
            c = choose(fabric, coll, size, None, algo, proto,
                       gpus_per_thread=gpus_per_thread)
            t, alg_name, pr = c.time, c.algorithm, c.protocol
        else:
            r = run_collective(fabric, coll, size, algo=algo, proto=proto, backend=backend)
            t, alg_name, pr = r.time, r.algorithm, r.protocol
        alg, bus = bandwidths(coll, size, t, n)
        pr = PROTOCOL_LABELS.get(pr, pr)
        rows.append(Row(size_bytes=size, count=size // tsize, type=datatype,
                        redop=op if reduces else "none",
                        root=0 if coll in ("broadcast", "reduce") else -1,
                        time_us=t * 1e6, algbw_gbps=alg / 1e9, busbw_gbps=bus / 1e9,
                        algorithm=alg_name, protocol=pr))
    return rows


def format_table(rows: list[Row], header: str) -> str:
    """The rows as nccl-tests prints them, with algorithm/protocol columns appended."""
    from fabricsim.protocols import PROTOCOL_LABELS

    lines = [header, "#",
             f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time':>9} "
             f"{'algbw':>7} {'busbw':>7}  {'algorithm':<13} {'protocol':<8}",
             f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>5} {'(us)':>9} "
             f"{'(GB/s)':>7} {'(GB/s)':>7}"]
    for r in rows:
        lines.append(f"{r.size_bytes:>12} {r.count:>12} {r.type:>8} {r.redop:>6} "
                     f"{r.root:>5} {r.time_us:>9.2f} {r.algbw_gbps:>7.2f} "
                     f"{r.busbw_gbps:>7.2f}  {r.algorithm:<13} "
                     f"{PROTOCOL_LABELS.get(r.protocol, r.protocol):<8}")
    avg = sum(r.busbw_gbps for r in rows) / max(len(rows), 1)
    lines.append(f"# Avg bus bandwidth    : {avg:.4f}")
    return "\n".join(lines)


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
        stepfactor: Annotated[float, typer.Option("--stepfactor", "-f",
                                                  help="Size multiplier per row.")] = 2.0,
        stepbytes: Annotated[str | None, typer.Option(
            "--stepbytes", "-i", help="Size increment (instead of a factor).")] = None,
        iters: Annotated[int, typer.Option(
            "--iters", "-n", min=1, help="nccl-tests' iteration count. A simulation is "
            "deterministic, so it does not change the result; accepted so that nccl-tests "
            "command lines run as they are (servers are --nodes).")] = 20,
        warmup: Annotated[int, typer.Option(
            "--warmup_iters", "-w", min=0, help="nccl-tests' warm-up iterations (accepted, "
            "no effect on a simulation).")] = 5,
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
        backend: Annotated[str, typer.Option(
            "--backend", help="analytic, flow or packet.")] = "analytic",
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per row.")
                            ] = False,
        csv_out: Annotated[bool, typer.Option("--csv", help="CSV rows.")] = False,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Write busbw vs size to this PNG.")] = None,
    ) -> None:
        """Simulate an nccl-tests sweep (all_reduce_perf etc.) on a cluster."""
        from fabricsim.backends.registry import BACKENDS

        if backend not in BACKENDS:
            raise unknown("backend", backend, BACKENDS, field="--backend")
        sc = scenario_with_overrides(scenario, system=system, nodes=nodes,
                                     gpus_per_node=gpus_per_node, fabric=fabric,
                                     topology=topology, oversubscription=oversubscription,
                                     routing=routing)
        fab = fabric_from_scenario(sc)
        sizes = sweep_sizes(parse_nccl_size(minbytes), parse_nccl_size(maxbytes), stepfactor,
                            parse_nccl_size(stepbytes) if stepbytes else None)
        curves: dict[str, tuple[list[int], list[float]]] = {}
        writer = csv.writer(sys.stdout) if csv_out else None
        if writer is not None:
            writer.writerow(list(Row.__dataclass_fields__))
        choices: list[str | None] = list(algo) if algo else [None]
        for a in choices:
            rows = run_sweep(fab, collective, sizes, datatype=datatype, op=op, algo=a,
                             proto=proto, backend=backend, gpus_per_thread=ngpus)
            curves[a or "auto"] = ([r.size_bytes for r in rows], [r.busbw_gbps for r in rows])
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
                typer.echo(format_table(rows, header))
        if plot is not None:
            from fabricsim.plots.busbw import plot_busbw

            plot_busbw(curves, plot, title=f"{collective} on {fab.n_gpus} GPUs "
                                           f"({sc.cluster.system}, {fab.info.fabric})")
            if not (json_out or csv_out):
                typer.echo(f"# wrote {plot}")
