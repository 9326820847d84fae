"""The demo report: the seeds' 256-GPU reference design, InfiniBand NDR vs RoCEv2.

32 DGX H100 servers (256 GPUs), rail-optimized and non-blocking, on the two fabrics the
seeds weigh against each other. :func:`write_demo` writes ``report.md`` and its plots to a
folder; every number in it is computed by fabricsim when the report is written.

Example
-------
>>> import tempfile
>>> out = write_demo(tempfile.mkdtemp(), sections=("cluster",))
>>> out.name
'report.md'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabricsim.fabric import Fabric, build_cluster
from fabricsim.reports.cluster import summarize

#: The two designs compared, as (label, fabric preset).
DESIGNS = (("InfiniBand NDR", "ib-ndr"), ("RoCEv2 400G", "roce-400g"))
SYSTEM = "dgx-h100"
NODES = 32


@dataclass
class DemoContext:
    """What the sections share: output folder, fabrics, and the report's lines."""

    out: Path
    fabrics: dict[str, Fabric]
    lines: list[str] = field(default_factory=list)
    progress: Callable[[str], None] = lambda msg: None

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return [*out, ""]


def section_cluster(ctx: DemoContext) -> None:
    """Section 1: what the cluster is, on each fabric."""
    from fabricsim.plots.hierarchy import plot_hierarchy

    ctx.progress("cluster")
    sums = {label: summarize(f) for label, f in ctx.fabrics.items()}
    first = next(iter(sums.values()))
    ctx.add("## 1. The cluster", "",
            f"{first.servers} × {first.system} ({first.gpus} × {first.gpu}), "
            f"{first.nvlink_domain_gpus}-GPU NVLink domains, {first.nics_per_server} NICs per "
            f"server, {first.topology} {first.tiers}-tier network at "
            f"{first.oversubscription:g}:1.", "")
    rows = []
    for label, s in sums.items():
        rows.append([label, s.transport, "yes" if s.lossless else "no",
                     ", ".join(f"{k} {v}" for k, v in s.switches.items()
                               if k not in ("nvswitch", "pcie-switch")),
                     sum(s.cables.values()), s.transceivers,
                     f"{s.bisection_bandwidth_gbps:,.0f}", s.bottleneck])
    ctx.add(*_table(["fabric", "transport", "lossless", "network switches", "cables",
                     "optics", "bisection GB/s", "GPU→network bottleneck"], rows))
    levels = first.hierarchy
    ctx.add("Bandwidth hierarchy for one GPU (GB/s, one direction):", "")
    ctx.add(*_table([lv.name for lv in levels], [[f"{lv.bandwidth_gbps:,.1f}"
                                                   for lv in levels]]))
    plot_hierarchy(sums, ctx.out / "hierarchy.png")
    ctx.add("![bandwidth hierarchy](hierarchy.png)", "")


#: Sections in report order; later capabilities add theirs here.
SECTIONS: dict[str, Callable[[DemoContext], None]] = {
    "cluster": section_cluster,
}


def write_demo(out: str | Path, *, sections: Sequence[str] | None = None,
               progress: Callable[[str], None] | None = None) -> Path:
    """Write ``report.md`` and plots for the reference design into ``out``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    fabrics = {label: build_cluster(SYSTEM, NODES, fabric=name, topology="rail-optimized")
               for label, name in DESIGNS}
    ctx = DemoContext(out=folder, fabrics=fabrics, progress=progress or (lambda m: None))
    ctx.add("# fabricsim demo: 256 × H100, InfiniBand NDR vs RoCEv2", "",
            "The seeds' reference design: 32 servers of 8 H100 GPUs. Every figure below is "
            "computed by fabricsim as this report is written.", "")
    for name in sections or list(SECTIONS):
        SECTIONS[name](ctx)
    path = folder / "report.md"
    path.write_text("\n".join(ctx.lines) + "\n", encoding="utf-8")
    return path
