"""``fabricsim describe``: what a cluster is made of and where its bandwidth narrows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fabricsim.cli.common import JsonOpt, ScenarioArg, check_out_file, console, print_json
from fabricsim.cli.options import NET_ROUTING, NO_CLUSTER_FLAGS, ClusterFlags, load, with_groups
from fabricsim.collectives.pipeline import DEFAULT_BUFFSIZE_BYTES
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.fabric.ici import shape_name
from fabricsim.jobs.describe import ClusterSummary
from fabricsim.scenario import Scenario


def register(app: typer.Typer) -> None:
    @app.command("describe")
    @with_groups(NET_ROUTING)
    def describe(
        scenario: ScenarioArg = None,
        cluster: ClusterFlags = NO_CLUSTER_FLAGS,
        json_out: JsonOpt = False,
        export: Annotated[Path | None, typer.Option(
            "--export", help="Also write the fabric's nodes and links: .json or .graphml.")
        ] = None,
        from_nccl_log: Annotated[Path | None, typer.Option(
            "--from-nccl-log", metavar="LOG",
            help="Rebuild the cluster from an NCCL_DEBUG=INFO log (hosts, GPUs per host, "
                 "NICs and link layer, SHARP) or NCCL's topology dump (GPUs, NICs and "
                 "their speed); cluster flags given override it.")
        ] = None,
    ) -> None:
        """Describe a cluster: GPUs, switches per tier, cables, bisection, hierarchy, bottleneck.

        Example: fabricsim describe --system dgx-h100 --nodes 32 --fabric ib-ndr
        """
        from fabricsim import jobs

        check_out_file(export, "--export", (".json", ".graphml"))
        read = None
        if from_nccl_log is not None:
            if scenario is not None:
                raise ConfigError("give a scenario or --from-nccl-log, not both",
                                  field="--from-nccl-log")
            read, sc = scenario_from_nccl_log(from_nccl_log, cluster)
        else:
            sc = load(scenario, cluster)
        job = jobs.job_from_scenario("describe", sc)
        fab = job.cluster.build()
        if export is not None:
            export_fabric(fab, export)
        summary = jobs.run(job, fab).summary
        if json_out:
            out = summary.as_dict()
            if read is not None:
                out["nccl_log"] = read
            print_json(out)
        else:
            if read is not None:
                print_log_facts(read)
            print_summary(summary)


def scenario_from_nccl_log(path: Path, cluster: ClusterFlags
                           ) -> tuple[dict[str, Any], Scenario]:
    """The facts an ``NCCL_DEBUG=INFO`` log gives and the scenario it rebuilds, with the
    cluster flags given laid over it (``--system`` chooses the preset the log is read as)."""
    from fabricsim.interop.nccl_debug import (
        MAX_LOG_BYTES,
        cluster_of,
        read_nccl_debug,
        read_topo_dump,
    )
    from fabricsim.scenario.loader import read_text_file, validate_scenario

    text = read_text_file(path, MAX_LOG_BYTES, "NCCL log", field="--from-nccl-log")
    text = text.removeprefix("\ufeff")
    if text.lstrip().startswith(("<system", "<?xml")):  # NCCL_TOPO_DUMP_FILE's XML
        log = read_topo_dump(text, name="--from-nccl-log")
    else:
        log = read_nccl_debug(text, name="--from-nccl-log")
    system = cluster.given.get("system")
    lc = cluster_of(log, str(system) if system is not None else None)
    sc = validate_scenario({"cluster": lc.cluster, "systems": lc.systems})
    rest = ClusterFlags.of({k: v for k, v in cluster.given.items() if k != "system"})
    return {**log.to_dict(), **lc.to_dict()}, rest.apply(sc)


def print_log_facts(read: dict[str, Any]) -> None:
    """What the NCCL log said, and what the catalog had to supply."""
    t = Table(title=f"read from the NCCL log ({read['lines']:,} lines)", title_justify="left",
              show_header=False)
    t.add_column("what")
    t.add_column("value")
    facts = read["from_log"]
    hosts = read["hosts"]
    t.add_row("hosts", f"{facts['nodes']}" + (f" ({', '.join(hosts[:4])}"
                                              f"{', ...' if len(hosts) > 4 else ''})"
                                              if hosts else ""))
    t.add_row("GPUs per host", str(facts["gpus_per_node"])
              + (f" × {read['gpu_model']}" if read["gpu_model"] else ""))
    t.add_row("network", f"{facts['network']}, {facts['nics_per_node']} NICs per host"
              + (" with SHARP" if facts["sharp"] else ""))
    t.add_row("NCCL", f"{facts['nccl_version']}; {facts['channels']} channels"
              + ("; NVLS" if facts["nvls"] else ""))
    for k, v in read["assumed"].items():
        t.add_row(f"{k} (not in the log)" if "given" not in v else k, v)
    console.print(t)
    for w in read["warnings"][:5]:
        console.print(f"[yellow]NCCL WARN[/] {w}")


def export_fabric(fab: Fabric, path: Path) -> None:
    """Write ``fab`` as JSON (nodes, links, info) or GraphML (via networkx)."""
    suffix = path.suffix.lower()
    if suffix not in (".json", ".graphml"):
        raise ConfigError(f"cannot export to {path.name!r}; use a .json or .graphml file",
                          field="--export")
    if fab.n_links > 2_000_000:
        raise ConfigError(f"the fabric has {fab.n_links:,} links; export is limited to "
                          "2,000,000 (use fewer nodes)", field="--export")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".json":
        path.write_text(fab.to_json(), encoding="utf-8")
    else:
        import networkx as nx

        g = fab.to_networkx()
        nx.write_graphml(nx.DiGraph(g), path)


def _ici_row(ici: dict[str, object]) -> str:
    """``4x4x8 torus (twisted), 2 slices of 128 chips; ICI bisection 6,400 GB/s``."""
    shape = shape_name(ici["slice"])  # type: ignore[arg-type]
    wrap = ici["wrap"]
    kind = ("torus" if all(wrap) else "mesh" if not any(wrap)  # type: ignore[arg-type]
            else "torus/mesh")
    n = int(ici["slices"])  # type: ignore[call-overload]
    return (f"{shape} {kind}{' (twisted)' if ici['twisted'] else ''}, {n} slice"
            f"{'s' if n > 1 else ''} of {ici['chips_per_slice']} chips; ICI bisection "
            f"{float(ici['bisection_gbps']):,.0f} GB/s per direction")  # type: ignore[arg-type]


def nccl_row(nccl: dict[str, Any]) -> str:
    """``1 QP per connection; network plugin reports 75 µs, sets NCCL_PROTO=simple``
    (and the Simple buffer where it is not NCCL's 4 MiB).

    >>> nccl_row({"qps_per_connection": 4, "net_plugin_latency_us": 0.0,
    ...           "plugin_proto": ""})
    "4 QPs per connection; NCCL's own network transport"
    >>> nccl_row({"qps_per_connection": 1, "simple_buffer_bytes": 2**24,
    ...           "net_plugin_latency_us": 0.0, "plugin_proto": ""})
    "1 QP per connection; 16 MiB Simple buffer; NCCL's own network transport"
    >>> nccl_row({"qps_per_connection": 1, "net_plugin_latency_us": 75.0,
    ...           "crossing_plugin_us": 6.0, "plugin_proto": ""})
    "1 QP per connection; network plugin reports 75 µs to NCCL's tuner (6 µs per crossing)"
    """
    q = int(nccl["qps_per_connection"])
    out = f"{q} QP{'s' if q > 1 else ''} per connection; "
    buf = int(nccl.get("simple_buffer_bytes", DEFAULT_BUFFSIZE_BYTES))
    if buf != DEFAULT_BUFFSIZE_BYTES:
        out += f"{buf / 2**20:g} MiB Simple buffer; "
    lat, proto = float(nccl["net_plugin_latency_us"]), str(nccl["plugin_proto"])
    if not lat and not proto:
        return out + "NCCL's own network transport"
    paid = float(nccl.get("crossing_plugin_us", 0.0))
    said = [f"reports {lat:g} µs to NCCL's tuner"
            + (f" ({paid:g} µs per crossing)" if paid else "")] if lat else []
    if proto:
        said.append(f"sets NCCL_PROTO={proto}")
    return out + "network plugin " + ", ".join(said)


def print_summary(s: ClusterSummary) -> None:
    """Render a ClusterSummary as rich tables."""
    head = Table(title=f"{s.servers} × {s.system} on {s.fabric} ({s.topology})",
                 title_justify="left", show_header=False)
    head.add_column("what")
    head.add_column("value")
    rows = [
        ("GPUs", f"{s.gpus} × {s.gpu} ({s.gpus_per_server} per server)"),
        (("ICI slice", _ici_row(s.ici)) if s.ici else
         ("NVLink domain", f"{s.nvlink_domain_gpus} GPUs")),
        ("NICs per server", str(s.nics_per_server)),
        ("transport", f"{s.transport} ({'lossless' if s.lossless else 'lossy'}"
                      f"{', SHARP' if s.sharp else ''})"),
        ("switches", ", ".join(f"{k} {v}" for k, v in s.switches.items())),
        ("tiers / planes", f"{s.tiers} / {s.planes}"),
        ("cables", ", ".join(f"{k} {v}" for k, v in s.cables.items())
         + f"; optical transceivers {s.transceivers}"),
        ("oversubscription", f"{s.oversubscription:g}:1"),
        ("bisection bandwidth", f"{s.bisection_bandwidth_gbps:,.1f} GB/s per direction"),
        ("bottleneck", s.bottleneck),
    ]
    if s.nccl:
        rows.append(("NCCL", nccl_row(s.nccl)))
    for k, v in rows:
        head.add_row(k, v)
    console.print(head)
    hier = Table(title="bandwidth hierarchy (per GPU, per direction)", title_justify="left")
    hier.add_column("level")
    hier.add_column("GB/s", justify="right")
    hier.add_column("scope")
    for lv in s.hierarchy:
        hier.add_row(lv.name, f"{lv.bandwidth_gbps:,.1f}", lv.scope)
    console.print(hier)
    for n in s.notes:
        console.print(f"note: {n}")
