"""The report of any scenario: one section per thing the scenario asks, with figures.

:func:`write_report` writes ``report.md``, a self-contained ``report.html`` (figures
embedded) and the PNGs into a folder. Sections, in order, when the scenario has them:

- **cluster** — always: what the cluster is and its bandwidth hierarchy;
- **collective** — a ``collective:`` sweep (all-reduce from 1 KiB to 1 GiB when the
  scenario has nothing but a cluster): bus bandwidth and time against size with the
  algorithm/protocol chosen at each size (analytic backend);
- **faults** — ``faults:`` or ``background:`` (without ``packet:``): the flow-level run
  with and without them, the slowdown by cause, the links that limited it (the links the
  scenario names always shown) and the tables (Parquet);
- **training** — a ``training:`` job: one step, where its time goes (NVLink vs
  scale-out communication), and the fabric presets compared on speed and cost;
- **packet** — a ``packet:`` experiment: every variant side by side, queues, pauses,
  throughput and flow completion times.

Example
-------
>>> import tempfile
>>> from fabricsim.scenario import Scenario
>>> sc = Scenario.model_validate({"name": "tiny", "cluster": {"system": "dgx-h100",
...     "nodes": 2}, "collective": {"minbytes": "1MiB", "maxbytes": "16MiB"}})
>>> files = write_report(sc, tempfile.mkdtemp())
>>> files.sections
['1. The cluster', '2. all_reduce against message size', 'Files written']
>>> sorted(p.name for p in files.files)
['collective.png', 'hierarchy.png', 'report.html', 'report.md']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fabricsim.fabric import Fabric
from fabricsim.reports.document import Doc, ReportFiles
from fabricsim.scenario import Scenario
from fabricsim.units import format_bytes

__all__ = ["MAX_SWEEP_POINTS", "kinds", "section_cluster", "section_collective",
           "section_faults", "section_packet", "section_training", "write_report"]

#: Sizes one collective sweep of a report draws at most (a wider sweep takes every
#: k-th size).
MAX_SWEEP_POINTS = 40




def kinds(sc: Scenario) -> list[str]:
    """The sections a scenario gets, in report order (a scenario with only a cluster
    gets an all-reduce sweep, :data:`fabricsim.jobs.collective.DEFAULT_SWEEP`).

    >>> kinds(Scenario.model_validate({"collective": {}, "faults": [{"type": "slow_node",
    ...     "node": 0, "delay": "1us"}]}))
    ['cluster', 'collective', 'faults']
    >>> kinds(Scenario.model_validate({"cluster": {"nodes": 2}}))
    ['cluster', 'collective']
    """
    out = ["cluster"]
    if sc.collective is not None:
        out.append("collective")
    if (sc.faults or sc.background) and sc.packet is None:
        out.append("faults")
    if sc.training is not None:
        out.append("training")
    if sc.packet is not None:
        out.append("packet")
    if out == ["cluster"]:
        out.append("collective")
    return out


def section_cluster(doc: Doc, fabrics: dict[str, Fabric], *, stem: str = "hierarchy"
                    ) -> None:
    """What the cluster is (one row per fabric) and its bandwidth hierarchy per GPU."""
    from fabricsim.jobs.describe import summarize
    from fabricsim.plots.hierarchy import plot_hierarchy

    doc.step("cluster")
    sums = {label: summarize(f) for label, f in fabrics.items()}
    first = next(iter(sums.values()))
    doc.heading("The cluster")
    doc.add(f"{first.servers} × {first.system} ({first.gpus} × {first.gpu}), "
            f"{first.nvlink_domain_gpus}-GPU NVLink domains, {first.nics_per_server} NICs per "
            f"server, {first.topology} {first.tiers}-tier network at "
            f"{first.oversubscription:g}:1.", "")
    rows = []
    for label, s in sums.items():
        rows.append([label, s.transport, "yes" if s.lossless else "no",
                     ", ".join(f"{k} {v}" for k, v in s.switches.items()
                               if k not in ("nvswitch", "pcie-switch")) or "-",
                     sum(s.cables.values()), s.transceivers,
                     f"{s.bisection_bandwidth_gbps:,.0f}", s.bottleneck])
    doc.table(["fabric", "transport", "lossless", "network switches", "cables", "optics",
               "bisection GB/s", "GPU→network bottleneck"], rows)
    doc.add("Bandwidth hierarchy for one GPU (GB/s, one direction):", "")
    doc.table([lv.name for lv in first.hierarchy],
              [[f"{lv.bandwidth_gbps:,.1f}" for lv in first.hierarchy]])
    doc.figure(plot_hierarchy(sums, doc.out / f"{stem}.png"), "bandwidth hierarchy")


def sweep_sizes(minbytes: int, maxbytes: int, factor: int = 2,
                limit: int = MAX_SWEEP_POINTS) -> list[int]:
    """nccl-tests' sizes from ``minbytes`` to ``maxbytes`` by ``factor``, at most ``limit``
    of them (every k-th, always ending at ``maxbytes``).

    >>> sweep_sizes(1024, 2**20, 4)
    [1024, 4096, 16384, 65536, 262144, 1048576]
    >>> len(sweep_sizes(8, 2**40, 2, limit=10)) <= 11
    True
    """
    sizes = [max(int(minbytes), 1)]
    while sizes[-1] * factor <= maxbytes:
        sizes.append(sizes[-1] * factor)
    if sizes[-1] != maxbytes and maxbytes > sizes[-1]:
        sizes.append(int(maxbytes))
    if len(sizes) > limit:
        k = -(-len(sizes) // limit)
        keep = sizes[::k]
        sizes = keep if keep[-1] == sizes[-1] else [*keep, sizes[-1]]
    return sizes


def section_collective(doc: Doc, sc: Scenario, fab: Fabric) -> None:
    """The scenario's collective sweep: busbw and time against size, choices marked."""
    from fabricsim import jobs
    from fabricsim.jobs.collective import DEFAULT_SWEEP
    from fabricsim.plots.busbw import Sweep, choice_spans, plot_collective

    doc.step("collective sweep")
    spec = sc.collective or DEFAULT_SWEEP
    lo, hi = int(spec.minbytes), int(spec.maxbytes)
    sizes = sweep_sizes(lo, hi, spec.stepfactor)
    label = fab.info.fabric or "fabric"
    # against size on the analytic backend (the faults have a section of their own)
    calm = sc.model_copy(update={"faults": [], "background": []})
    job = jobs.job_from_scenario("bench", calm, sizes=tuple(sizes), backend="analytic")
    # the section's NCCL variables may add to the cluster (queue pairs, buffer, SHARP)
    ran_on = fab if job.cluster.spec == sc.cluster else job.cluster.build()
    rows = next(iter(jobs.run(job, ran_on).rows.values()))
    sw = Sweep(sizes=[r.size_bytes for r in rows], busbw_gbps=[r.busbw_gbps for r in rows],
               time_s=[r.time_us * 1e-6 for r in rows],
               choice=[f"{r.algorithm}/{r.protocol}".lower() for r in rows])
    n = len(spec.ranks) if spec.ranks else fab.n_gpus
    fixed = " (fixed by the scenario)" if spec.algo or spec.proto else \
        " (chosen by least predicted time, as NCCL's tuner does)"
    if job.env.variables:  # as read: an empty value is unset
        fixed += " under the scenario's " + ", ".join(
            f"{k}={v}" for k, v in job.env.variables.items())
    if sc.collective is None:
        fixed += ". The scenario names no workload, so this is the all-reduce NCCL would run"
    doc.heading(f"{spec.collective} against message size")
    doc.add(f"{n} ranks on {label}, {format_bytes(lo)} to {format_bytes(hi)}; analytic "
            f"backend, nccl-tests' bus bandwidth; algorithm and protocol{fixed}. The same "
            f"sweep as nccl-tests output: `fabricsim bench {spec.collective} "
            f"SCENARIO.yaml`.", "")
    spans = choice_spans(sw.sizes, sw.choice)
    doc.table(["sizes", "algorithm/protocol", "busbw at the largest (GB/s)",
               "time at the largest"],
              [[f"{format_bytes(a)} – {format_bytes(b)}", c,
                f"{sw.busbw_gbps[sw.sizes.index(b)]:,.1f}",
                _time(sw.time_s[sw.sizes.index(b)])] for a, b, c in spans])
    doc.figure(plot_collective({label: sw}, doc.out / "collective.png",
                               title=f"{spec.collective}, {n} GPUs on {label}"),
               f"{spec.collective} bus bandwidth and time against size")


def _time(s: float) -> str:
    from fabricsim.units import format_time

    return "0" if s == 0 else format_time(s).replace("us", "µs")


def section_faults(doc: Doc, sc: Scenario) -> None:
    """Faults and background traffic on the flow backend: slowdown, causes, the links
    that limited the run, and the tables."""
    from fabricsim import jobs
    from fabricsim.reports.flow import write_flow_outputs

    doc.step("flow simulation with faults")
    run = jobs.run(jobs.job_from_scenario("simulate", sc, record=True,
                                          time_limit_s=doc.time_left()))
    s = run.summary
    paths = write_flow_outputs(run, doc.out)
    doc.written.extend(p for p in paths if p.suffix != ".png")
    doc.heading("Faults and background traffic")
    doc.add(f"{s['collective']} of {format_bytes(s['nbytes'])} ({s['algorithm']}, "
            f"{s['protocol']}) on the flow backend (max-min fair sharing, {s['routing']} "
            f"routing), with and without what the scenario adds "
            f"(`fabricsim simulate SCENARIO.yaml --out DIR` writes the same tables).", "")
    slow = "stalls (a transfer has no route)" if s["stalled"] else f"×{s['slowdown']:.3f}"
    rows: list[list[object]] = [["fault-free", _time(s["baseline_time_s"]), "×1"],
                                ["with everything", "—" if s["stalled"] else
                                 _time(s["time_s"]), slow]]
    for c in s["causes"] if len(s["causes"]) > 1 else []:
        sl = c["slowdown_alone"]
        rows.append([f"alone: {c['description']}", "—" if sl is None else
                     _time(s["baseline_time_s"] * sl), "stall" if sl is None else f"×{sl:.3f}"])
    doc.table(["run", "time", "slowdown"], rows)
    doc.figure(doc.out / "fault_impact.png", "fault-free vs degraded")
    named = sorted({n for c in s["causes"] for n in c.get("links", [])})
    doc.add("Links that limited the run (by the time they held back the slowest transfer"
            + (f"; the scenario's own link{'s' if len(named) > 1 else ''} "
               + ", ".join(f"`{x}`" for x in named) + " always shown" if named else "")
            + "):", "")
    doc.table(["link", "kind", "time limiting", "utilisation", "cause"],
              [[f"`{b['name']}`", b["kind"], _time(b["critical_time"]),
                f"{b['utilization']:.0%}", b["fault"] or ""] for b in s["bottlenecks"]])
    doc.figure(doc.out / "link_utilization.png", "link utilisation heatmap")


def training_parts(fab: Fabric, result: Any) -> tuple[dict[str, float], set[str]]:
    """A step's breakdown and the communication kinds that ran on NVLink (TP, and CP with
    it, while ``tp × cp`` fits the NVLink domain)."""
    par = result.parallel
    dom = fab.info.nvlink_domain_gpus
    nv = set()
    if par.get("tp", 1) <= dom:
        nv.add("tp")
        if par.get("tp", 1) * par.get("cp", 1) <= dom:
            nv.add("cp")
    return dict(result.breakdown), nv


def section_training(doc: Doc, sc: Scenario, fab: Fabric, *,
                     compare: Sequence[str] = ("ib-ndr", "roce-400g", "efa")) -> None:
    """One training step, where its time goes, and the fabrics compared on cost."""
    from fabricsim import jobs
    from fabricsim.plots.training import comm_by_network, plot_step_breakdown

    doc.step("training step")
    job = jobs.job_from_scenario("train", sc)
    report = jobs.run(job, fab)
    r = report.step
    backend = job.backend
    parts, nv = training_parts(fab, r)
    p = r.parallel
    label = fab.info.fabric or "fabric"
    split = comm_by_network(parts, nv)
    doc.heading("A training step")
    doc.add(f"{r.model} on {r.world} GPUs: TP {p['tp']} × PP {p['pp']} × DP {p['dp']}"
            + (f" × CP {p['cp']}" if p.get("cp", 1) > 1 else "")
            + (f", EP {p['ep']}" if p.get("ep", 1) > 1 else "")
            + f"; {backend} backend (`fabricsim train SCENARIO.yaml`).", "")
    doc.table(["step", "tokens/s", "MFU", "compute", "bubble", "exposed comm on NVLink",
               "exposed comm on scale-out", "idle GPU equiv.", "lost to comm per day"],
              [[_time(r.step_time_s), f"{r.tokens_per_s:,.0f}", f"{r.mfu:.1%}",
                _time(parts.get("compute", 0.0)), _time(parts.get("bubble", 0.0)),
                _time(split["NVLink"]), _time(split["scale-out"]), f"{r.idle_gpus:.1f}",
                f"${r.comm_usd_per_day:,.0f}"]])
    if report.fault_free is not None:
        d = report.to_dict()["faults"]
        doc.add(f"With the scenario's {job.faults.describe()} the step takes "
                f"{_time(r.step_time_s)} against {_time(d['fault_free_step_time_s'])} "
                f"fault-free (×{d['slowdown']:.3f}): {d['idle_gpu_equivalent']:.1f} idle GPU "
                f"equivalents, ${d['usd_per_day']:,.0f} per day.", "")
    for w in report.warnings:
        doc.add(f"**Warning.** {w}", "")
    designs = {label: parts}
    names = [f for f in compare if f != label]
    rows: list[dict[str, Any]] = []
    if names and not job.faults and doc.deadline_allows(20.0):
        doc.step("fabrics compared")
        plan = jobs.run(jobs.job_from_scenario("plan", sc, fabrics=(label, *names)))
        for o, d in zip(plan.options, plan.rows(), strict=True):
            designs.setdefault(o.fabric, dict(o.step.breakdown))
            rows.append(d)
    doc.figure(plot_step_breakdown(designs, doc.out / "training.png", nvlink=nv,
                                   title=f"{r.model}, {r.world} GPUs: where a step's time "
                                   "goes"), "training step breakdown")
    if rows:
        from fabricsim.plots.plan import plot_plan

        doc.add("The same job on other fabric presets (same layout; fabric capex amortised "
                "over 4 years; `fabricsim plan SCENARIO.yaml --fabrics "
                + ",".join([label, *names]) + "`):", "")
        doc.table(["fabric", "tokens/s per GPU", "MFU", "fabric capex per GPU",
                   "fabric capex", "USD per 1T tokens", "fabric share"],
                  [[d["fabric"], f"{d['tokens_per_s_per_gpu']:,.1f}", f"{d['mfu']:.2%}",
                    f"${d['capex_per_gpu_usd']:,.0f}", f"${d['capex_usd'] / 1e6:,.2f}M",
                    f"${d['usd_per_1t_tokens']:,.0f}", f"{d['fabric_share']:.1%}"]
                   for d in rows])
        doc.figure(plot_plan(rows, doc.out / "fabrics.png",
                             title=f"{r.model} on {r.world} GPUs: fabrics compared"),
                   "fabric comparison with cost")


def section_packet(doc: Doc, sc: Scenario, *, variants: Sequence[str | None] | None = None,
                   prefix: str = "packet_", title: str = "") -> list[Any]:
    """A packet-level experiment: every variant side by side, and its four figures."""
    from fabricsim import jobs
    from fabricsim.jobs.packet import run_variant
    from fabricsim.plots.packet import write_all

    job = jobs.job_from_scenario("packet", sc, variants=[v or "base" for v in variants]
                                 if variants is not None else None)
    runs = []
    for v in job.variants:
        doc.step(f"packet run: {v or 'base'}")
        runs.append(run_variant(job, v))
    doc.heading(title or "Packet level")
    doc.add(f"{sc.description or sc.name}: the packet backend (every packet, queue, PFC "
            f"pause and ECN mark), {len(runs)} configuration"
            f"{'s' if len(runs) > 1 else ''} (`fabricsim packet {sc.name}`).", "")
    rows = []
    for run in runs:
        s = run.summary
        p99 = max((c["fct_p99_s"] for c in s["fct_by_class"].values()), default=None)
        main = s.get("main_traffic_time_s")
        rows.append([s["variant"], str(s.get("status", "")).replace("_", " "),
                     s["transport"], _time(s["time_s"]),
                     "—" if main is None else _time(main),
                     "—" if p99 is None else _time(p99), f"{sum(s['drops'].values()):,}",
                     _time(s["pause"]["pause_time_total_s"]),
                     f"{s['pause']['ports_paused']} / {s['pause']['max_hops']}",
                     f"{s['cnps']:,}", str(s["watchdog_triggers"])])
    doc.table(["variant", "status", "transport", "run time", "main traffic done", "p99 FCT",
               "drops", "time paused (all ports)", "ports paused / hops", "CNPs",
               "watchdog trips"], rows)
    for run in runs:
        for w in run.summary.get("warnings", []):
            doc.add(f"**{run.summary['variant']}: warning.** {w}", "")
        dead = run.summary.get("deadlock")
        if dead:
            cycle = " → ".join(f"`{x}`" for x in dead.get("cycle", []))
            doc.add(f"**{run.summary['variant']}: PFC deadlock.** The pause cycle {cycle} "
                    f"closed at {_time(float(dead.get('closed_at_s') or 0.0))}; nothing on "
                    f"it moves again (detected at "
                    f"{_time(float(dead.get('t_detect_s') or 0.0))}).", "")
    files = write_all(runs, doc.out, prefix=prefix, title=sc.name)
    alts = {"pause_map": "pause spread over hops", "queues": "queue depth and pauses",
            "throughput": "goodput over time", "fct_cdf": "flow completion times"}
    for f in files:
        key = f.stem[len(prefix):] if f.stem.startswith(prefix) else f.stem
        doc.figure(f, alts.get(key, key))
    return runs


def write_report(sc: Scenario, out: str | Path, *, time_limit_s: float | None = None,
                 progress: Callable[[str], None] | None = None) -> ReportFiles:
    """Write the report of ``sc`` into folder ``out`` (see the module docs)."""
    from fabricsim.scenario.fabric import fabric_from_scenario

    doc = Doc(Path(out), progress=progress or (lambda m: None),
              deadline=None if time_limit_s is None else time.perf_counter() + time_limit_s)
    doc.out.mkdir(parents=True, exist_ok=True)
    parts = kinds(sc)
    doc.add(f"# fabricsim report: {sc.name}", "")
    if sc.description:
        doc.add(sc.description, "")
    doc.add("Sections: " + ", ".join(parts) + ". Every figure is computed by fabricsim as "
            "this report is written.", "")
    fab = fabric_from_scenario(sc)
    section_cluster(doc, {fab.info.fabric or "fabric": fab})
    if "collective" in parts:
        section_collective(doc, sc, fab)
    if "faults" in parts:
        section_faults(doc, sc)
    if "training" in parts:
        section_training(doc, sc, fab)
    if "packet" in parts:
        section_packet(doc, sc)
    return doc.write()
