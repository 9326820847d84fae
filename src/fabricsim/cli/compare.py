"""``fabricsim compare``: a real nccl-tests log next to the model's prediction.

Reads the result rows of an nccl-tests ``*_perf`` log (both the current format with a
``root`` column and ``#wrong`` counts, and the older one without ``root``), predicts each
size on the cluster given by flags or scenario, and prints measured and predicted busbw
with the relative error, then the median and max error.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricsim.cli.common import (
    FabricOpt,
    GpusPerNodeOpt,
    NodesOpt,
    OversubOpt,
    SystemOpt,
    TopologyOpt,
    fabric_from_scenario,
    print_json_line,
    scenario_with_overrides,
)
from fabricsim.errors import ConfigError


@dataclass(frozen=True)
class LogRow:
    """One size of an nccl-tests log: out-of-place and in-place time (us) and busbw (GB/s)."""

    size_bytes: int
    count: int
    type: str
    redop: str
    time_us: float
    busbw_gbps: float
    time_us_inplace: float
    busbw_gbps_inplace: float


@dataclass(frozen=True)
class NcclLog:
    """Parsed log: its rows, the rank count from the device list, and the collective.

    ``hosts`` and ``gpus`` hold, per rank of the ``Using devices`` list, the host name and
    the GPU model nccl-tests printed (``NVIDIA A100-SXM4-80GB``).
    """

    rows: list[LogRow]
    ranks: int
    collective: str | None
    hosts: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    #: GPUs each nccl-tests thread drove (``-g``, printed as ``nGpus`` in the header)
    gpus_per_thread: int = 1

    @property
    def nodes(self) -> int:
        """Distinct hosts in the device list (0 if the log has none)."""
        return len(set(self.hosts))


#: Largest log ``compare`` reads (nccl-tests logs are kilobytes; a 64 MiB one is a mistake).
MAX_LOG_BYTES = 64 * 2**20
_DEVICE = re.compile(r"#\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+"
                     r"device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
#: GPU model words as nccl-tests prints them -> catalog GPU, most specific first.
_GPU_WORDS = (("gb200", "gb200"), ("b200", "b200"), ("h200", "h200-sxm"),
              ("h800", "h800-sxm"), ("h100 pcie", "h100-pcie"), ("h100", "h100-sxm"),
              ("h20", "h20"), ("a800", "a800-sxm"), ("a100-sxm4-40gb", "a100-sxm-40gb"),
              ("a100", "a100-sxm"), ("v100", "v100-sxm"), ("l40s", "l40s"))


def catalog_gpu(model: str) -> str | None:
    """The catalog GPU of a model name as nccl-tests prints it (None if unknown).

    Examples
    --------
    >>> catalog_gpu("NVIDIA A100-SXM4-80GB"), catalog_gpu("NVIDIA H100 80GB HBM3")
    ('a100-sxm', 'h100-sxm')
    >>> catalog_gpu("Tesla K80") is None
    True
    """
    low = model.lower()
    return next((gpu for word, gpu in _GPU_WORDS if word in low), None)


def system_for_log(parsed: NcclLog) -> str:
    """The preset system whose GPU is the log's, or a ConfigError saying what to do."""
    from fabricsim.catalog import get_catalog

    if not parsed.gpus:
        raise ConfigError("the log names no GPU (no 'Using devices' list); pass --system "
                          "(e.g. --system dgx-a100)", field="--system")
    model = parsed.gpus[0]
    gpu = catalog_gpu(model)
    systems = [name for name, s in get_catalog().systems.items() if s.gpu == gpu]
    if gpu is None or not systems:
        raise ConfigError(f"the log's GPU {model!r} is not in the catalog; pass --system, or "
                          "define a system for it in a scenario's systems: section "
                          "(docs/scenarios.md)", field="--system")
    return systems[0]


_COLLS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "alltoall",
          "sendrecv")


def _num(tok: str) -> float:
    return float("nan") if tok.upper() == "N/A" else float(tok)


def parse_nccl_log(text: str, name: str = "") -> NcclLog:
    """Parse nccl-tests output. ``name`` (the file name) helps guess the collective.

    Examples
    --------
    >>> log = parse_nccl_log("#  Rank  0 Group  0 Pid 1 on h device  0 [0x07] GPU\\n"
    ...                      "  1048576  262144  float  sum  -1  50.0  20.97  36.70  0"
    ...                      "  49.0  21.40  37.45  0\\n", "all_reduce_perf.log")
    >>> log.collective, log.ranks, log.rows[0].busbw_gbps_inplace
    ('all_reduce', 1, 37.45)
    """
    rows: list[LogRow] = []
    ranks = 0
    hosts: list[str] = []
    gpus: list[str] = []
    gpt = 1
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#") and (hdr := re.search(r"\bnGpus\s+(\d+)", s)):
            gpt = max(int(hdr.group(1)), 1)
            continue
        if re.match(r"#\s*Rank\s+\d+", s):
            ranks += 1
            dev = _DEVICE.match(s)
            if dev:
                hosts.append(dev.group(1))
                gpus.append(dev.group(2))
            continue
        if not s or s.startswith("#"):
            continue
        tok = s.split()
        if len(tok) < 12 or not tok[0].isdigit() or not tok[1].isdigit():
            continue
        try:
            out_t, _, out_bus = _num(tok[-8]), _num(tok[-7]), _num(tok[-6])
            in_t, _, in_bus = _num(tok[-4]), _num(tok[-3]), _num(tok[-2])
        except ValueError:
            continue
        rows.append(LogRow(int(tok[0]), int(tok[1]), tok[2], tok[3], out_t, out_bus, in_t,
                           in_bus))
    if not rows:
        raise ConfigError("no nccl-tests result rows found (expected lines such as "
                          "'1048576 262144 float sum -1 50.0 20.97 36.70 0 ...')",
                          field="LOG")
    coll = None
    low = name.lower().replace("-", "_")
    for c in sorted(_COLLS, key=len, reverse=True):
        if c in low or c.replace("_", "") in low:
            coll = c
            break
    return NcclLog(rows=rows, ranks=ranks, collective=coll, hosts=tuple(hosts),
                   gpus=tuple(gpus), gpus_per_thread=gpt)


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare(
        log: Annotated[Path, typer.Argument(help="nccl-tests output (e.g. all_reduce_perf).")],
        scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (optional).")
                            ] = None,
        system: SystemOpt = None,
        nodes: NodesOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        fabric: FabricOpt = None,
        topology: TopologyOpt = None,
        oversubscription: OversubOpt = None,
        collective: Annotated[str | None, typer.Option(
            "--collective", "-c", help="Collective of the log (default: from the file name).")
        ] = None,
        algo: Annotated[str | None, typer.Option("--algo", help="Force an algorithm.")
                        ] = None,
        proto: Annotated[str | None, typer.Option("--proto", help="Force a protocol.")
                         ] = None,
        in_place: Annotated[bool, typer.Option(
            "--in-place", help="Compare the in-place columns (default out-of-place).")
        ] = False,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per row.")
                            ] = False,
    ) -> None:
        """Compare a measured nccl-tests log with the model, size by size."""
        from fabricsim.collectives import predict_time
        from fabricsim.collectives.busbw import busbw_factor
        from fabricsim.collectives.tuner import check_collective
        from fabricsim.scenario.loader import read_text_file

        if not log.exists() and not log.is_symlink():
            raise ConfigError(f"log file {str(log)!r} does not exist", field="LOG")
        parsed = parse_nccl_log(read_text_file(log, MAX_LOG_BYTES, "nccl-tests log", "LOG"),
                                log.name)
        coll_name = collective or parsed.collective
        if coll_name is None:
            raise ConfigError("cannot tell the collective from the file name; pass "
                              "--collective all_reduce (or another)", field="--collective")
        coll = check_collective(coll_name)
        if scenario is None:  # the cluster comes from the log unless flags say otherwise
            from fabricsim.catalog import get_catalog

            found = system_for_log(parsed) if parsed.gpus or system is None else None
            if system is None:
                system = found
            elif found is not None and get_catalog().system(system).gpu != \
                    get_catalog().system(found).gpu:
                raise ConfigError(
                    f"--system {system} has {get_catalog().system(system).gpu} GPUs but the "
                    f"log ran on {parsed.gpus[0]!r} ({found}); drop --system or pass one "
                    "with that GPU", field="--system")
            if nodes is None and parsed.nodes:
                nodes = parsed.nodes
            if gpus_per_node is None and parsed.nodes and parsed.ranks % parsed.nodes == 0:
                gpus_per_node = parsed.ranks // parsed.nodes
        sc = scenario_with_overrides(scenario, system=system, nodes=nodes,
                                     gpus_per_node=gpus_per_node, fabric=fabric,
                                     topology=topology, oversubscription=oversubscription)
        fab = fabric_from_scenario(sc)
        n = parsed.ranks or fab.n_gpus
        if n > fab.n_gpus:
            raise ConfigError(f"the log has {n} ranks but the cluster has {fab.n_gpus} GPUs;"
                              " pass --nodes/--gpus-per-node to match", field="--nodes")
        ranks = list(range(n))
        errs: list[float] = []
        out_rows: list[dict[str, Any]] = []
        for r in parsed.rows:
            meas = r.busbw_gbps_inplace if in_place else r.busbw_gbps
            t = predict_time(fab, coll, r.size_bytes, ranks=ranks, algo=algo, proto=proto,
                             gpus_per_thread=parsed.gpus_per_thread)
            pred = r.size_bytes / t * busbw_factor(coll, n) / 1e9 if t > 0 else float("inf")
            err = (pred - meas) / meas if meas > 0 else float("nan")
            if err == err:
                errs.append(abs(err))
            out_rows.append({"size_bytes": r.size_bytes, "measured_busbw_gbps": meas,
                             "predicted_busbw_gbps": round(pred, 3),
                             "predicted_time_us": round(t * 1e6, 3),
                             "rel_error": round(err, 4)})
        if json_out:
            for row in out_rows:
                print_json_line(row)
        else:
            typer.echo(f"# {log.name}: {coll} on {n} ranks vs {sc.cluster.system} x "
                       f"{sc.cluster.nodes} ({fab.info.fabric}); "
                       f"{'in-place' if in_place else 'out-of-place'} busbw")
            typer.echo(f"#{'size':>11} {'measured':>10} {'predicted':>10} {'error':>8}")
            typer.echo(f"#{'(B)':>11} {'(GB/s)':>10} {'(GB/s)':>10} {'(%)':>8}")
            for row in out_rows:
                typer.echo(f"{row['size_bytes']:>12} {row['measured_busbw_gbps']:>10.2f} "
                           f"{row['predicted_busbw_gbps']:>10.2f} "
                           f"{100 * row['rel_error']:>8.1f}")
        if errs:
            summ = {"rows": len(errs), "median_abs_rel_error": round(statistics.median(errs), 4),
                    "max_abs_rel_error": round(max(errs), 4)}
            if json_out:
                print_json_line({"summary": summ})
            else:
                typer.echo(f"# median |error| {100 * summ['median_abs_rel_error']:.1f} %, "
                           f"max |error| {100 * summ['max_abs_rel_error']:.1f} % over "
                           f"{len(errs)} sizes")
