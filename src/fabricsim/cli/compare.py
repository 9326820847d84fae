"""``fabricsim compare``: a real nccl-tests log next to the model's prediction.

Reads the result rows of an nccl-tests ``*_perf`` log (both the current format with a
``root`` column and ``#wrong`` counts, and the older one without ``root``), predicts each
size on the cluster given by flags or scenario, and prints measured and predicted busbw
with the relative error, then the median and max error.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
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
    check_out_file,
    fabric_from_scenario,
    print_json_line,
    scenario_with_overrides,
)
from fabricsim.errors import ConfigError
from fabricsim.fabric.cluster import MAX_GPUS
from fabricsim.interop.nccl_debug import catalog_gpu, check_system_gpu
from fabricsim.interop.nccl_tests import NcclTest, Row, parse_nccl_tests


@dataclass(frozen=True)
class NcclLog:
    """One test of a log, as ``compare`` uses it (see
    :class:`fabricsim.interop.nccl_tests.NcclTest`)."""

    rows: list[Row]
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

    @classmethod
    def of(cls, t: NcclTest) -> NcclLog:
        return cls(rows=list(t.rows), ranks=t.ranks, collective=t.collective, hosts=t.hosts,
                   gpus=t.gpus, gpus_per_thread=t.gpus_per_thread)


#: Largest log ``compare`` reads (nccl-tests logs are kilobytes; a 64 MiB one is a mistake).
MAX_LOG_BYTES = 64 * 2**20
def system_for_log(parsed: NcclLog) -> str:
    """The preset system whose GPU is the log's, or a ConfigError saying what to do."""
    from fabricsim.catalog import get_catalog

    if not parsed.gpus:
        raise ConfigError("the log names no GPU (no 'Using devices' list); pass --system "
                          "(e.g. --system dgx-a100)", field="--system")
    model = parsed.gpus[0]
    mixed = sorted(set(parsed.gpus))
    if len(mixed) > 1:
        raise ConfigError(f"the log ran on different GPUs ({', '.join(mixed)}); fabricsim "
                          f"models one GPU per cluster: pass --system for the one to model "
                          f"(the others are then modelled as it)", field="--system")
    gpu = catalog_gpu(model)
    systems = [name for name, s in get_catalog().systems.items() if s.gpu == gpu]
    if gpu is None or not systems:
        raise ConfigError(f"the log's GPU {model!r} is not in the catalog; pass --system, or "
                          "define a system for it in a scenario's systems: section "
                          "(docs/scenarios.md)", field="--system")
    return systems[0]


def system_for_logs(files: Sequence[tuple[Path, Sequence[NcclTest]]], system: str | None,
                    *, one: str) -> str:
    """The one system to model every test of ``files`` on (calibrate, diagnose):
    ``system`` when given, refused (:func:`check_system_gpu`) if its GPU is not the logs';
    else the preset of the logs' GPU. Logs of different GPUs are a ConfigError naming
    LOGS, whose fix is ``one`` (what to give instead)."""
    seen: dict[str, tuple[str, str]] = {}  # catalog GPU (or the name) -> (model, file)
    for path, tests in files:
        for t in tests:
            for model in t.gpus:
                seen.setdefault(catalog_gpu(model) or model.strip().lower(),
                                (model, path.name))
    if len(seen) > 1:
        (m1, f1), (m2, f2) = list(seen.values())[:2]
        raise ConfigError(f"the logs ran on different GPUs ({m1!r} in {f1}, {m2!r} in "
                          f"{f2}); {one}", field="LOGS")
    if not seen:
        if system is None:
            raise ConfigError("the logs name no GPU (no 'Using devices' list); pass --system "
                              "(e.g. --system dgx-h100)", field="--system")
        return system
    model = next(iter(seen.values()))[0]
    if system is None:
        return system_for_log(NcclLog(rows=[], ranks=0, collective=None, gpus=(model,)))
    check_system_gpu(system, model)
    return system


#: Most log files one command reads (a cluster acceptance run is hundreds).
MAX_LOG_FILES = 20_000


def expand_log_paths(paths: Sequence[Path]) -> list[Path]:
    """Files, folders (every file in them, recursively, in name order) and glob patterns
    (``runs/*.log``, for a shell that did not expand them) as the files they name; a
    name that matches nothing is a ConfigError naming LOGS.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for n in ("b.log", "a.log"):
    ...     _ = (d / n).write_text("x")
    >>> [p.name for p in expand_log_paths([d])]
    ['a.log', 'b.log']
    """
    import glob

    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(x for x in p.rglob("*") if x.is_file()
                           and not x.name.startswith("."))
            if not found:
                raise ConfigError(f"folder {str(p)!r} holds no files", field="LOGS")
            out += found
        elif p.exists():
            out.append(p)
        elif any(c in str(p) for c in "*?["):
            found = sorted(Path(x) for x in glob.glob(str(p), recursive=True)
                           if Path(x).is_file())
            if not found:
                raise ConfigError(f"no file matches {str(p)!r}", field="LOGS")
            out += found
        else:
            raise ConfigError(f"log file {str(p)!r} does not exist", field="LOGS")
        if len(out) > MAX_LOG_FILES:
            raise ConfigError(f"more than {MAX_LOG_FILES:,} log files; give a narrower "
                              f"folder or pattern", field="LOGS")
    return out


def read_log_files(paths: list[Path], *, warn: bool = True
                   ) -> list[tuple[Path, list[NcclTest]]]:
    """Every test of every log in ``paths``, per file (bounded reads; a missing file or
    a bad row is a ConfigError naming LOGS), with each file's notes (failed, truncated
    tests) on stderr."""
    from fabricsim.scenario.loader import read_text_file

    out: list[tuple[Path, list[NcclTest]]] = []
    files = expand_log_paths(paths)
    unread: list[str] = []
    for p in files:
        try:
            f = parse_nccl_tests(read_text_file(p, MAX_LOG_BYTES, "nccl-tests log", "LOGS"),
                                 p.name)
        except ConfigError as e:
            if e.field not in ("LOG", "LOGS"):
                raise
            if len(files) == 1:
                raise ConfigError(e.message, field="LOGS") from None
            # one unreadable file of many (a README, a scheduler's .err file) is said and
            # set aside; the others are the evidence
            typer.echo(f"warning: skipped {p.name}: {e.message}", err=True)
            unread.append(p.name)
            continue
        if warn:
            for note in f.notes:
                typer.echo(f"warning: {p.name}: {note}", err=True)
        out.append((p, list(f.tests)))
    if not out:
        raise ConfigError(f"none of the {len(files)} files is an nccl-tests log "
                          f"({', '.join(unread[:3])}{' ...' if len(unread) > 3 else ''})",
                          field="LOGS")
    return out


def read_logs(paths: list[Path], *, warn: bool = True) -> list[NcclTest]:
    """Every test of every log in ``paths`` (:func:`read_log_files`, flattened)."""
    return [t for _, tests in read_log_files(paths, warn=warn) for t in tests]


def _debug_facts(text: str) -> Any:
    """The NCCL_DEBUG=INFO facts in a log (:mod:`fabricsim.interop.nccl_debug`), or None
    when it has no INFO lines naming the network."""
    from fabricsim.interop.nccl_debug import read_nccl_debug

    if "NCCL INFO" not in text:
        return None
    try:
        log = read_nccl_debug(text)
    except ConfigError:
        return None
    return log if log.nics and log.nodes > 1 else None


def _with_log_network(sc: Any, info: Any, system: str, k: int) -> Any:
    """``sc`` with the network the log's NCCL INFO lines name (NICs per host, link layer,
    SHARP) on ``system``, as ``describe --from-nccl-log`` rebuilds it; said on stderr."""
    from fabricsim.interop.nccl_debug import cluster_of
    from fabricsim.scenario.loader import validate_scenario

    lc = cluster_of(info, system)
    cluster = {**sc.cluster.model_dump(exclude_unset=True), **lc.cluster}
    if "nodes" in sc.cluster.model_fields_set:
        cluster["nodes"] = sc.cluster.nodes
    if k == 0:
        typer.echo(f"note: the network from the log's NCCL INFO lines: {len(info.nics)} "
                   f"{info.link_layer} NICs per host{' with SHARP' if info.sharp else ''} "
                   f"(fabric {lc.cluster.get('fabric', 'the preset')}; speeds from {system})",
                   err=True)
    return validate_scenario({"cluster": cluster, "systems": lc.systems})


def parse_nccl_log(text: str, name: str = "") -> NcclLog:
    """The first test with results of an nccl-tests log
    (:func:`fabricsim.interop.nccl_tests.parse_nccl_tests` reads them all).

    Examples
    --------
    >>> log = parse_nccl_log("#  Rank  0 Group  0 Pid 1 on h device  0 [0x07] GPU\\n"
    ...                      "  1048576  262144  float  sum  -1  50.0  20.97  36.70  0"
    ...                      "  49.0  21.40  37.45  0\\n", "all_reduce_perf.log")
    >>> log.collective, log.ranks, log.rows[0].busbw_gbps_inplace
    ('all_reduce', 1, 37.45)
    """
    f = parse_nccl_tests(text, name)
    t = next((t for t in f.tests if t.rows), None)
    if t is None:
        raise ConfigError("the log holds no result rows: " + "; ".join(f.notes or (
            "every test failed",)), field="LOG")
    return NcclLog.of(t)


def check_log_layout(t: NcclTest, nodes: int | None, gpus_per_node: int | None) -> None:
    """Refuse --nodes / --gpus-per-node that contradict the hosts and ranks of a log's
    device list (a log without one cannot be checked): the error names the value that
    matches.

    >>> t = NcclTest("all_reduce", (), hosts=("a",) * 8 + ("b",) * 8)
    >>> check_log_layout(t, 2, 8)
    >>> check_log_layout(t, 3, None)
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: --nodes: --nodes 3 does not match the log, which ran 16 \
ranks on 2 hosts (8 each); pass --nodes 2 or leave --nodes out
    """
    if not t.hosts:
        return
    gpn = t.gpus_per_node
    shape = f"{t.ranks} ranks on {t.nodes} host{'s' if t.nodes > 1 else ''}" + \
        (f" ({gpn} each)" if gpn else " (unevenly)")
    if nodes is not None and nodes != t.nodes:
        raise ConfigError(f"--nodes {nodes} does not match the log, which ran {shape}; pass "
                          f"--nodes {t.nodes} or leave --nodes out", field="--nodes")
    if gpus_per_node is not None and gpn and gpus_per_node != gpn:
        raise ConfigError(f"--gpus-per-node {gpus_per_node} does not match the log, which "
                          f"ran {shape}; pass --gpus-per-node {gpn} or leave "
                          f"--gpus-per-node out", field="--gpus-per-node")


def check_given(t: NcclTest, system: str | None, nodes: int | None,
                gpus_per_node: int | None) -> None:
    """Refuse a given --system, --nodes or --gpus-per-node that contradicts the log's
    device list (:func:`check_system_gpu`, :func:`check_log_layout`)."""
    if system is not None and t.gpus:
        check_system_gpu(system, t.gpus[0])
    check_log_layout(t, nodes, gpus_per_node)


def _cluster_for(t: NcclTest, *, system: str | None, nodes: int | None,
                 gpus_per_node: int | None) -> tuple[str, int | None, int | None]:
    """System, nodes and GPUs per node of a test: from its device list unless given
    (the caller checks given ones against it: :func:`check_given`)."""
    log = NcclLog.of(t)
    if system is None:
        system = system_for_log(log)
    if nodes is None and log.nodes:
        nodes = log.nodes
    if gpus_per_node is None and log.nodes and log.ranks % log.nodes == 0:
        gpus_per_node = log.ranks // log.nodes
    return system, nodes, gpus_per_node


def log_release(logged: str | None, name: str = "the log") -> str | None:
    """The NCCL release a log names, as the model reads it; one it cannot read is said on
    stderr and left out (``None``: the newest modelled)."""
    from fabricsim.collectives.nccl_model import release_name

    if not logged:
        return None
    try:
        return release_name(logged)
    except ConfigError as e:
        typer.echo(f"warning: {name}'s NCCL version: {e.message}", err=True)
        return None


def _release(given: str | None, logged: str | None) -> str:
    """The NCCL release ``compare`` models: the flag's, else the log's (said on stderr),
    else the newest modelled."""
    from fabricsim.collectives.nccl_model import release_name, release_note

    v: str | None
    if given is not None:
        try:
            v = release_name(given)
        except ConfigError as e:
            raise ConfigError(e.message, field="--nccl-version") from None
    else:
        v = log_release(logged)
        if v is not None:
            typer.echo(f"note: NCCL {v}'s choice of algorithm and protocol (the release the "
                       "log names)", err=True)
    note = release_note(v)
    if note:
        typer.echo(f"note: {note}", err=True)
    return v or release_name(None)


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare(
        log: Annotated[Path, typer.Argument(
            help="nccl-tests output (e.g. all_reduce_perf), or fabricsim bench --json.")],
        scenario: Annotated[Path | None, typer.Argument(help="Scenario YAML (optional).")
                            ] = None,
        system: SystemOpt = None,
        nodes: NodesOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        fabric: FabricOpt = None,
        topology: TopologyOpt = None,
        oversubscription: OversubOpt = None,
        collective: Annotated[str | None, typer.Option(
            "--collective", "-c", help="Collective of the log (default: from the log or "
            "the file name).")] = None,
        algo: Annotated[str | None, typer.Option("--algo", help="Force an algorithm.")
                        ] = None,
        proto: Annotated[str | None, typer.Option("--proto", help="Force a protocol.")
                         ] = None,
        in_place: Annotated[bool, typer.Option(
            "--in-place", help="Compare the in-place columns (default out-of-place).")
        ] = False,
        nccl_version: Annotated[str | None, typer.Option(
            "--nccl-version", help="The NCCL release whose algorithm and protocol choice "
            "to make (default: the one the log names, in NCCL's INFO lines or nccl-tests' "
            "nccl-library, else the newest modelled).")] = None,
        threshold: Annotated[float, typer.Option(
            "--threshold", help="Flag sizes whose time is off by more than this share "
            "(0.2 = 20 %).")] = 0.2,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="Write measured vs model busbw and time (log size axis, the "
            "model's algorithm/protocol marked) to this PNG.")
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per row.")
                            ] = False,
    ) -> None:
        """Compare a measured nccl-tests log with the model, size by size: time and busbw,
        sizes off by more than --threshold flagged; every test in the file, each on the
        cluster its log describes (GPU model, hosts, ranks) unless flags say otherwise.

        Example: fabricsim compare all_reduce_perf.log --plot compare.png
        """
        from fabricsim.collectives.busbw import busbw_factor
        from fabricsim.collectives.tuner import check_collective, choose
        from fabricsim.plots.busbw import Sweep
        from fabricsim.scenario.loader import read_text_file

        if not (math.isfinite(threshold) and threshold > 0):
            raise ConfigError(f"--threshold must be a positive share (0.2 = 20 %), got "
                              f"{threshold}", field="--threshold")
        check_out_file(plot, "--plot")
        if not log.exists() and not log.is_symlink():
            raise ConfigError(f"log file {str(log)!r} does not exist", field="LOG")
        text = read_text_file(log, MAX_LOG_BYTES, "nccl-tests log", "LOG")
        parsed = parse_nccl_tests(text, log.name)
        for note in parsed.notes:
            typer.echo(f"warning: {note}", err=True)
        release = _release(nccl_version, parsed.nccl_version)
        info = _debug_facts(text) if scenario is None and fabric is None else None
        tests = [t for t in parsed.tests if t.rows]
        if not tests:
            raise ConfigError("the log holds no result rows: " + "; ".join(
                parsed.notes or ("every test failed",)), field="LOG")
        curves: dict[str, Sweep] = {}
        for k, t in enumerate(tests):
            coll_name = collective or t.collective
            if coll_name is None:
                raise ConfigError("cannot tell the collective from the log or the file "
                                  "name; pass --collective all_reduce (or another)",
                                  field="--collective")
            coll = check_collective(coll_name)
            if t.ranks > MAX_GPUS:
                raise ConfigError(f"the log's test {k + 1} claims {t.ranks:,} ranks, more "
                                  f"than the {MAX_GPUS:,} GPUs fabricsim builds; is it a "
                                  f"real nccl-tests log?", field="LOG")
            check_given(t, system, nodes, gpus_per_node)
            if system is not None and len(set(t.gpus)) > 1:
                typer.echo(f"warning: test {k + 1} ran on different GPUs "
                           f"({', '.join(sorted(set(t.gpus)))}); every one is modelled as "
                           f"{system}'s", err=True)
            sys_k: str | None = system
            nodes_k, gpn_k = nodes, gpus_per_node
            if scenario is None:
                sys_k, nodes_k, gpn_k = _cluster_for(t, system=system, nodes=nodes,
                                                     gpus_per_node=gpus_per_node)
            sc = scenario_with_overrides(scenario, system=sys_k, nodes=nodes_k,
                                         gpus_per_node=gpn_k, fabric=fabric,
                                         topology=topology,
                                         oversubscription=oversubscription)
            if info is not None and sys_k is not None:
                sc = _with_log_network(sc, info, sys_k, k)
            fab = fabric_from_scenario(sc)
            n = t.ranks or fab.n_gpus
            if n > fab.n_gpus:
                match = f"--nodes {t.nodes} --gpus-per-node {t.gpus_per_node}" \
                    if t.gpus_per_node else "--nodes/--gpus-per-node"
                raise ConfigError(f"the log has {n} ranks but the cluster has {fab.n_gpus} "
                                  f"GPUs; pass {match} to match", field="--nodes")
            ranks = list(range(n))
            errs: list[float] = []
            flagged = 0
            out_rows: list[dict[str, Any]] = []
            picks: list[str] = []
            for r in t.rows:
                meas_t = r.time_us_inplace if in_place else r.time_us
                meas_b = r.busbw_gbps_inplace if in_place else r.busbw_gbps
                pick = choose(fab, coll, r.size_bytes, ranks=ranks, algo=algo, proto=proto,
                              gpus_per_thread=t.gpus_per_thread, nccl_version=release,
                              back_to_back=True)  # nccl-tests' iterations
                tp = pick.time
                picks.append(f"{pick.algorithm}/{pick.protocol}".lower())
                pred_b = r.size_bytes / tp * busbw_factor(coll, n) / 1e9 if tp > 0 else 0.0
                err = (tp * 1e6 - meas_t) / meas_t if meas_t > 0 else math.nan
                flag = bool(err == err and abs(err) > threshold)
                flagged += flag
                if err == err:
                    errs.append(abs(err))
                out_rows.append({"test": k + 1, "collective": coll, "size_bytes": r.size_bytes,
                                 "measured_time_us": meas_t,
                                 "predicted_time_us": round(tp * 1e6, 3),
                                 "time_error": round(err, 4) if err == err else None,
                                 "measured_busbw_gbps": None if math.isnan(meas_b) else meas_b,
                                 "predicted_busbw_gbps": round(pred_b, 3), "flag": flag})
            label = f"{coll} #{k + 1}" if len(tests) > 1 else coll
            sizes = [x["size_bytes"] for x in out_rows]
            curves[f"{label} measured"] = Sweep(
                sizes=sizes, busbw_gbps=[x["measured_busbw_gbps"] or 0.0 for x in out_rows],
                time_s=[x["measured_time_us"] * 1e-6 for x in out_rows])
            curves[f"{label} model"] = Sweep(
                sizes=sizes, busbw_gbps=[x["predicted_busbw_gbps"] for x in out_rows],
                time_s=[x["predicted_time_us"] * 1e-6 for x in out_rows], choice=picks)
            summ = {"test": k + 1, "collective": coll, "rows": len(errs),
                    "median_abs_time_error": round(statistics.median(errs), 4) if errs
                    else None, "max_abs_time_error": round(max(errs), 4) if errs else None,
                    "flagged": flagged, "threshold": threshold,
                    "cluster": f"{sc.cluster.system} x {sc.cluster.nodes}"}
            if json_out:
                for row in out_rows:
                    print_json_line(row)
                print_json_line({"summary": summ})
                continue
            typer.echo(f"# {log.name} test {k + 1}: {coll} on {n} ranks vs "
                       f"{sc.cluster.system} x {sc.cluster.nodes} ({fab.info.fabric}); "
                       f"{'in-place' if in_place else 'out-of-place'}; '*' = time off by "
                       f"more than {threshold:.0%}")
            typer.echo(f"#{'size':>11} {'time':>10} {'model':>10} {'error':>7} "
                       f"{'busbw':>8} {'model':>8}")
            typer.echo(f"#{'(B)':>11} {'(us)':>10} {'(us)':>10} {'(%)':>7} "
                       f"{'(GB/s)':>8} {'(GB/s)':>8}")
            for row in out_rows:
                e = row["time_error"]
                mb = row["measured_busbw_gbps"]
                typer.echo(f"{row['size_bytes']:>12} {row['measured_time_us']:>10.2f} "
                           f"{row['predicted_time_us']:>10.2f} "
                           f"{'n/a' if e is None else f'{100 * e:.1f}':>7} "
                           f"{'n/a' if mb is None else f'{mb:.2f}':>8} "
                           f"{row['predicted_busbw_gbps']:>8.2f}"
                           f"{'  *' if row['flag'] else ''}")
            if errs:
                typer.echo(f"# median |error| {100 * statistics.median(errs):.1f} %, "
                           f"max |error| {100 * max(errs):.1f} % over {len(errs)} sizes; "
                           f"{flagged} flagged")
        if plot is not None:
            from fabricsim.plots.busbw import plot_collective

            # busbw and time on log size axes; the model's algorithm/protocol marked
            plot_collective(curves, plot, title=f"{log.name}: measured vs model")
            if not json_out:
                typer.echo(f"# wrote {plot}")
