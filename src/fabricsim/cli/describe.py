"""``fabricsim describe``: what a cluster is made of and where its bandwidth narrows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fabricsim.cli.common import JsonOpt, ScenarioArg, check_out_file, console, print_json
from fabricsim.cli.options import NET_ROUTING, NO_CLUSTER_FLAGS, ClusterFlags, load, with_groups
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.jobs.describe import ClusterSummary


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
    ) -> None:
        """Describe a cluster: GPUs, switches per tier, cables, bisection, hierarchy, bottleneck.

        Example: fabricsim describe --system dgx-h100 --nodes 32 --fabric ib-ndr
        """
        from fabricsim import jobs

        check_out_file(export, "--export", (".json", ".graphml"))
        job = jobs.job_from_scenario("describe", load(scenario, cluster))
        fab = job.cluster.build()
        if export is not None:
            export_fabric(fab, export)
        summary = jobs.run(job, fab).summary
        if json_out:
            print_json(summary.as_dict())
        else:
            print_summary(summary)


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


def print_summary(s: ClusterSummary) -> None:
    """Render a ClusterSummary as rich tables."""
    head = Table(title=f"{s.servers} × {s.system} on {s.fabric} ({s.topology})",
                 title_justify="left", show_header=False)
    head.add_column("what")
    head.add_column("value")
    rows = [
        ("GPUs", f"{s.gpus} × {s.gpu} ({s.gpus_per_server} per server)"),
        ("NVLink domain", f"{s.nvlink_domain_gpus} GPUs"),
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
