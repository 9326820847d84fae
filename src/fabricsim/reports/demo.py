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
from fabricsim.scenario import FaultSpec
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.parallel import ParallelConfig

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


#: Sizes of the all-reduce sweep (bytes): 1 KiB to 8 GiB, factor 2.
SWEEP = tuple(2**k for k in range(10, 34))
#: The training step shown: Llama 3 70B, TP8 × PP4 (interleaved) × DP8, ZeRO-1.
TRAINING_SCENARIO = "train-llama3-70b-256.yaml"
#: The fault: one NIC link of server 0 comes up at a quarter of its speed (e.g. a 400G
#: port that trained down to 100G), both directions.
FAULT_LINK = "server0/nic0<->leaf0.0"
FAULT_FACTOR = 0.25


def section_allreduce(ctx: DemoContext) -> None:
    """Section 2: all-reduce bus bandwidth against size, with the algorithm NCCL would pick."""
    from fabricsim.collectives import run_collective
    from fabricsim.plots.busbw import plot_busbw

    ctx.progress("all-reduce sweep")
    curves: dict[str, tuple[list[float], list[float]]] = {}
    rows: list[list[object]] = []
    shown = {2**20, 2**26, 2**30, 2**33}
    for label, fab in ctx.fabrics.items():
        sizes: list[float] = []
        bws: list[float] = []
        for size in SWEEP:
            r = run_collective(fab, "all_reduce", size)
            sizes.append(size)
            bws.append(r.busbw / 1e9)
            if size in shown:
                rows.append([label, _size(size), f"{r.time * 1e6:,.1f}",
                             f"{r.busbw / 1e9:,.1f}", f"{r.algorithm}/{r.protocol}",
                             r.result.bottleneck_kind or "-"])
        curves[label] = (sizes, bws)
    ctx.add("## 2. All-reduce on 256 GPUs", "",
            "nccl-tests conventions (busbw = algbw × 2(n−1)/n); the algorithm and protocol "
            "are chosen by least predicted time, as NCCL's tuner does. Run the same with "
            "`fabricsim bench all_reduce --system dgx-h100 --nodes 32 --fabric ib-ndr`.", "")
    ctx.add(*_table(["fabric", "size", "time (µs)", "busbw (GB/s)", "algorithm/protocol",
                     "bottleneck link class"], rows))
    plot_busbw(curves, ctx.out / "allreduce.png", title="all_reduce, 32 × DGX H100")
    ctx.add("![all-reduce bus bandwidth](allreduce.png)", "")


def _size(n: int) -> str:
    from fabricsim.units import format_bytes

    return format_bytes(n)


def _fault() -> FaultSpec:
    return FaultSpec(type="link_degraded", link=FAULT_LINK, factor=FAULT_FACTOR)


def _training_inputs() -> tuple[TransformerSpec, ParallelConfig, float]:
    from importlib import resources

    from fabricsim.scenario import load_scenario_text
    from fabricsim.workloads.spec import training_from_section

    text = (resources.files("fabricsim") / "scenarios" / TRAINING_SCENARIO).read_text(
        encoding="utf-8")
    sc = load_scenario_text(text, source=TRAINING_SCENARIO)
    model, cfg, _extra = training_from_section(sc.training)
    return model, cfg, float(sc.gpu_hour_usd or 0.0) or 2.5


def section_training(ctx: DemoContext) -> None:
    """Section 3: one training step of Llama 3 70B on each fabric."""
    from fabricsim.workloads.cost import fabric_capex
    from fabricsim.workloads.step import simulate_step

    ctx.progress("training step")
    model, cfg, price = _training_inputs()
    rows: list[list[object]] = []
    results = {}
    capex = {}
    for label, fab in ctx.fabrics.items():
        r = simulate_step(model, cfg, fab, gpu_hour_usd=price)
        results[label] = r
        capex[label] = fabric_capex(fab).total_usd
        b = r.breakdown
        comm = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in b.items()
                         if k not in ("compute", "bubble", "optimizer") and v > 0)
        rows.append([label, f"{r.step_time_s:.2f}", f"{r.tokens_per_s:,.0f}",
                     f"{r.mfu * 100:.1f} %", f"{b['compute'] * 1e3:,.0f}",
                     f"{b['bubble'] * 1e3:,.0f}", comm or "-",
                     f"{r.idle_gpus:.1f}", f"${r.comm_usd_per_day:,.0f}",
                     f"${capex[label] / 1e6:,.2f}M"])
    p = cfg.model_dump()
    ctx.add("## 3. A training step", "",
            f"Llama 3 70B, TP {p.get('tp')} × PP {p.get('pp')} (interleaved "
            f"{p.get('interleave')}) × DP, ZeRO-{p.get('zero')}, sequence {p.get('seq_len')}, "
            f"global batch {p.get('global_batch')}, at ${price:g}/GPU-hour "
            f"(`fabricsim train {TRAINING_SCENARIO}`).", "")
    ctx.add(*_table(["fabric", "step (s)", "tokens/s", "MFU", "compute (ms)", "bubble (ms)",
                     "exposed comm (ms)", "idle GPU equiv.", "lost to comm per day",
                     "fabric capex"], rows))
    from fabricsim.plots.training import plot_step_breakdown

    plot_step_breakdown({k: v.breakdown for k, v in results.items()},
                        ctx.out / "training.png",
                        title="Llama 3 70B step: where the time goes")
    ctx.add("![training step breakdown](training.png)", "")
    (la, ra), (lb, rb) = list(results.items())[:2]
    net = {k: v.breakdown.get("pp", 0.0) + v.breakdown.get("dp", 0.0)
           for k, v in results.items()}
    faster = la if ra.step_time_s <= rb.step_time_s else lb
    gap = abs(ra.step_time_s / rb.step_time_s - 1)
    ctx.add(f"Exposed communication over the scale-out network (pipeline and data parallel) "
            f"is {net[la] * 1e3:,.0f} ms on {la} and {net[lb] * 1e3:,.0f} ms on {lb} per "
            f"step; tensor parallelism stays inside the NVLink domain. The steps differ by "
            f"{abs(ra.step_time_s - rb.step_time_s) * 1e3:.1f} ms ({gap * 100:.4f} %, "
            f"{faster} ahead), while the {lb} fabric costs "
            f"{(1 - capex[lb] / capex[la]) * 100:.0f} % less than {la} "
            f"(`fabricsim plan {TRAINING_SCENARIO} --fabrics ib-ndr,roce-400g,efa`).", "")


class _FlowComm:
    """Collective times from the flow backend (optionally with faults) for the step model."""

    def __init__(self, fabric: Fabric, faults: Sequence[FaultSpec]) -> None:
        from fabricsim.backends.flow import FlowBackend

        self.fabric = fabric
        self.backend = FlowBackend(faults=list(faults))
        self.cache: dict[tuple[str, tuple[int, ...], float], float] = {}

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        from fabricsim.collectives import run_collective

        if len(ranks) <= 1 or nbytes <= 0:
            return 0.0
        key = (collective, tuple(ranks), float(nbytes))
        if key not in self.cache:
            self.cache[key] = run_collective(self.fabric, collective, nbytes, list(ranks),
                                             backend=self.backend).time
        return self.cache[key]


def section_fault(ctx: DemoContext) -> None:
    """Section 4: one degraded NIC link, simulated on the flow backend, and what it costs."""
    from fabricsim.collectives import run_collective
    from fabricsim.workloads.step import simulate_step

    ctx.progress("fault")
    label, fab = next(iter(ctx.fabrics.items()))
    model, cfg, price = _training_inputs()
    ranks = list(range(0, 64, 8))  # one rank per server of the first 8: a DP-like group
    from fabricsim.backends.flow import FlowBackend

    ok = run_collective(fab, "all_reduce", 2**30, ranks, backend=FlowBackend())
    bad = run_collective(fab, "all_reduce", 2**30, ranks, backend=FlowBackend(
        faults=[_fault()]))
    base = simulate_step(model, cfg, fab, comm=_FlowComm(fab, []), gpu_hour_usd=price)
    hurt = simulate_step(model, cfg, fab, comm=_FlowComm(fab, [_fault()]), gpu_hour_usd=price)
    slow = hurt.step_time_s / base.step_time_s - 1
    lost_gpus = fab.n_gpus * (1 - base.step_time_s / hurt.step_time_s)
    ctx.add("## 4. A fault and its cost", "",
            f"On the {label} design, one NIC link (`{FAULT_LINK}`) runs at "
            f"{FAULT_FACTOR * 100:g} % of its speed — a port that trained down, "
            "or a dirty optic. NCCL does not route around it: every collective whose ring "
            "crosses that NIC runs at its pace (the flow backend, max-min fair sharing).", "")
    ctx.add(*_table(["", "fault-free", "degraded", "slowdown"], [
        ["1 GiB all-reduce over 8 servers (rail 0)", f"{ok.time * 1e3:.2f} ms",
         f"{bad.time * 1e3:.2f} ms", f"{bad.time / ok.time:.2f}×"],
        ["training step (Llama 3 70B)", f"{base.step_time_s:.3f} s",
         f"{hurt.step_time_s:.3f} s", f"+{slow * 100:.1f} %"],
    ]))
    per_day = lost_gpus * 24 * price
    ctx.add(f"The whole synchronous job waits for the slowest group: the fault costs the "
            f"equivalent of **{lost_gpus:.1f} idle GPUs**, **${per_day:,.0f} per day** at "
            f"${price:g}/GPU-hour, until someone finds the link (`fabricsim simulate` "
            "names it among the top bottleneck links).", "")


#: Sections in report order.
SECTIONS: dict[str, Callable[[DemoContext], None]] = {
    "cluster": section_cluster,
    "allreduce": section_allreduce,
    "training": section_training,
    "fault": section_fault,
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
