"""Packet-level runs (``packet``): a scenario's ``packet:`` experiment, every variant.

A :class:`PacketRun` is the scenario's typed ``packet:`` section
(:class:`~fabricsim.scenario.sections.PacketSection`: the base and its variants), the
variants to run, the scenario's faults (the packet backend applies the ones it models and
refuses the others, naming them) and seed, and what a command line adds (``--force``,
``--event-budget``, ``--time-limit``). :func:`run_packet` runs each variant and returns
their summaries side by side.

Traffic comes from ``packet.traffic`` (``incast``, ``all_to_all``, ``pairs`` or
``collective``: a ring all-reduce of ``nbytes`` over all ranks, or of the scenario's
``collective.maxbytes`` when ``nbytes`` is not given there) plus ``packet.background``
(each entry its own steps, on the traffic class named by ``traffic_class`` or ``dscp``).

Example
-------
>>> from fabricsim.scenario import Scenario
>>> sc = Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 4,
...     "gpus_per_node": 1, "fabric": "roce-400g"}, "packet": {"traffic": {
...     "pattern": "incast", "senders": 3, "nbytes": "1MB"}}})
>>> job = packet_job(sc)
>>> run = run_packet(job).runs[0]
>>> run.summary["transport"], run.summary["complete"], run.summary["drops"]["lossless"]
('roce', True, 0)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field

from fabricsim.backends.base import Result
from fabricsim.backends.flow.specs import BackgroundSpec, FaultSpec
from fabricsim.backends.packet.backend import PacketBackend
from fabricsim.backends.packet.config import PacketConfig, TrafficSpec
from fabricsim.backends.packet.report import jain
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.jobs.common import Cluster, Part, Progress, quiet
from fabricsim.results import Tabular, scalars
from fabricsim.scenario.cluster import ClusterSpec
from fabricsim.scenario.schema import Scenario
from fabricsim.scenario.sections import PacketSection
from fabricsim.schedule import Schedule, Step

__all__ = ["PacketOutcome", "PacketReport", "PacketRun", "apply_faults", "hops_from",
           "loss_estimate", "packet_job", "packet_schedule", "pause_spread", "ring_all_reduce",
           "run_packet", "run_packet_scenario", "run_variant", "summarize", "traffic_steps"]


@dataclass
class PacketOutcome(Tabular):
    """One finished packet run: its fabric, config, schedule, Result and summary.

    ``to_dict()`` / ``to_pandas()``: one row of the summary's scalar figures
    (``summary.drops.lossless``, ...) and the Result's (``result.*``)."""

    fabric: Fabric
    config: PacketConfig
    schedule: Schedule
    result: Result
    summary: dict[str, Any]

    def _record(self) -> dict[str, Any]:
        return {"summary": scalars(self.summary), "result": self.result}


def ring_all_reduce(ranks: np.ndarray, nbytes: float, *, label: str = "ring",
                    deps: tuple[int, ...] = (), delay: float = 0.0) -> Step:
    """One step of a ring all-reduce: ``2(n-1)`` repetitions of ``nbytes/n`` to the next
    rank (reduce-scatter then all-gather)."""
    n = len(ranks)
    return Step(src=ranks, dst=np.roll(ranks, -1), nbytes=np.array([nbytes / max(n, 1)]),
                repeat=max(2 * (n - 1), 1), label=label, deps=deps, delay=delay,
                reduce_at="dst")


def traffic_steps(spec: TrafficSpec, fabric: Fabric, default_bytes: float | None = None
                  ) -> list[Step]:
    """Steps of one traffic spec on ``fabric``'s ranks."""
    g = fabric.gpus
    n = len(g)
    nb = spec.nbytes if default_bytes is None else default_bytes
    if spec.ranks is not None:
        bad = [r for r in spec.ranks if not 0 <= r < n]
        if bad:
            raise ConfigError(f"ranks {bad} do not exist ({n} ranks)",
                              field="packet.traffic.ranks")
    if spec.pattern == "incast":
        if spec.receiver >= n:
            raise ConfigError(f"receiver rank {spec.receiver} does not exist ({n} ranks)",
                              field="packet.traffic.receiver")
        others = spec.ranks or [r for r in range(n) if r != spec.receiver]
        k = spec.senders or len(others)
        if k > len(others):
            raise ConfigError(f"{k} senders but only {len(others)} other ranks",
                              field="packet.traffic.senders")
        src = g[others[:k]]
        return [Step(src=src, dst=np.full(k, g[spec.receiver]), nbytes=np.array([nb]),
                     repeat=spec.repeat, delay=spec.start, label="incast")]
    ranks = np.asarray(spec.ranks if spec.ranks is not None else
                       range(spec.senders or n), dtype=np.int64)
    k = len(ranks)
    if spec.pattern == "all_to_all":
        a, b = np.meshgrid(ranks, ranks, indexing="ij")
        m = a != b
        return [Step(src=g[a[m]], dst=g[b[m]], nbytes=np.array([nb]), repeat=spec.repeat,
                     delay=spec.start, label="all_to_all")]
    if spec.pattern == "pairs":
        return [Step(src=g[ranks], dst=g[np.roll(ranks, -max(k // 2, 1))], nbytes=np.array([nb]),
                     repeat=spec.repeat, delay=spec.start, label="pairs")]
    return [ring_all_reduce(g[ranks], nb, delay=spec.start, label="all_reduce")]


def packet_schedule(fabric: Fabric, cfg: PacketConfig, collective_bytes: float | None = None
                    ) -> tuple[Schedule, list[int]]:
    """The schedule of a packet run and the indices of its main-traffic steps
    (``collective_bytes``: the scenario's ``collective.maxbytes``, the size of the
    default ring all-reduce when ``packet.traffic`` is not given)."""
    main = cfg.traffic or TrafficSpec()
    default = None
    if main.pattern == "collective" and cfg.traffic is None and collective_bytes is not None:
        default = float(collective_bytes)
    steps = traffic_steps(main, fabric, default)
    classes = [cfg.class_index(main.traffic_class, main.dscp)] * len(steps)
    main_idx = list(range(len(steps)))
    for bg in cfg.background:
        extra = traffic_steps(bg, fabric)
        steps += extra
        classes += [cfg.class_index(bg.traffic_class, bg.dscp)] * len(extra)
    sch = Schedule(steps=tuple(steps), collective=main.pattern,
                   meta={"step_classes": classes})
    return sch, main_idx


def pause_spread(fabric: Fabric, result: Result) -> dict[str, Any]:
    """How far PFC pauses reached: paused ports, and the largest hop distance from the
    stuck node (or from the first paused port) to a paused port's switch."""
    e = result.extra
    first = e["pause_first"]
    paused = np.flatnonzero(np.isfinite(first))
    out: dict[str, Any] = {"ports_paused": int(paused.size),
                           "pause_time_total_s": float(e["pause_time"].sum()),
                           "pause_time_max_s": float(e["pause_time"].max(initial=0.0))}
    if paused.size == 0:
        out.update(max_hops=0, last_pause_s=None)
        return out
    origin = e["stuck_node"] if e["stuck_node"] >= 0 else int(
        fabric.link_dst[paused[np.argmin(first[paused])]])
    dist = hops_from(fabric, origin)
    d = dist[fabric.link_src[paused]]
    out.update(max_hops=int(d[d >= 0].max(initial=0)), first_pause_s=float(first[paused].min()),
               last_pause_s=float(first[paused].max()),
               switches_reached=int(np.unique(fabric.link_src[paused]).size))
    return out


def hops_from(fabric: Fabric, origin: int) -> np.ndarray:
    dist = np.full(fabric.n_nodes, -1, dtype=np.int64)
    dist[origin] = 0
    adj: list[list[int]] = [[] for _ in range(fabric.n_nodes)]
    for s, d in zip(fabric.link_src.tolist(), fabric.link_dst.tolist(), strict=True):
        adj[d].append(s)
    q = deque([origin])
    while q:
        u = q.popleft()
        for v in adj[u]:
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def summarize(run_fabric: Fabric, schedule: Schedule, result: Result, main_idx: list[int],
              cfg: PacketConfig) -> dict[str, Any]:
    """A JSON-ready summary of a packet run."""
    e = result.extra
    fct = e["fct"]
    dur = fct["end"] - fct["start"]
    classes = schedule.meta.get("step_classes", [0] * len(schedule.steps))
    steps_of_flow = np.repeat(np.arange(len(schedule.steps)), [s.n for s in schedule.steps])
    fstep = steps_of_flow[fct["flow"]] if len(dur) else np.zeros(0, np.int64)
    per_class: dict[str, Any] = {}
    for ci, c in enumerate(cfg.classes):
        m = np.isin(fstep, [i for i, k in enumerate(classes) if k == ci])
        if m.any():
            d = dur[m]
            per_class[c.name] = {"flows": int(m.sum()), "fct_p50_s": float(np.median(d)),
                                 "fct_p99_s": float(np.quantile(d, 0.99)),
                                 "fct_max_s": float(d.max())}
    main_end = [float(result.step_end[i]) for i in main_idx]
    main_start = [float(result.step_start[i]) for i in main_idx]
    sizes = np.concatenate([s.nbytes for s in schedule.steps])[fct["flow"]] if len(dur) \
        else np.zeros(0)
    thr = sizes / np.maximum(dur, 1e-15)
    return {
        "time_s": result.time, "status": e["status"], "complete": e["complete"],
        "warnings": list(e.get("warnings", [])),
        "transport": e["transport"],
        "main_traffic_time_s": (max(main_end) - min(main_start)) if main_end and
        np.all(np.isfinite(main_end)) else None,
        "events": e["events"], "data_packets": e["data_packets"], "wall_s": e["wall_s"],
        "drops": e["drops"], "retransmits": e["retransmits"], "timeouts": e["timeouts"],
        "naks": e["naks"], "cnps": e["cnps"], "ecn_marks": e["ecn_marks"],
        "pause_frames": e["pause_frames"], "watchdog_triggers": e["watchdog_triggers"],
        "link_changes": e["link_changes"],
        "fct_by_class": per_class, "jain_throughput": jain(thr),
        "queue_max_bytes": float(e["queue_max"].max(initial=0.0)),
        "bottleneck": run_fabric.link_name(result.bottleneck_link)
        if result.bottleneck_link >= 0 else None,
        "pause": pause_spread(run_fabric, result),
        **{k: e[k] for k in ("deadlock", "stalled", "retry_exceeded") if k in e},
    }


def loss_estimate(fabric: Fabric, schedule: Schedule, cfg: PacketConfig, transport: str
                  ) -> str:
    """What a run's ``loss_rate`` costs: the scale-out links of its longest path, the share
    of packets lost on the way, and the events that implies against the budget."""
    from fabricsim.backends.packet.budget import events_lower_bound
    from fabricsim.backends.packet.build import CREDIT_MODES, INTRA_LINKS

    steps = schedule.steps
    src = np.concatenate([s.src for s in steps])
    dst = np.concatenate([s.dst for s in steps])
    paths = fabric.route_many(src, dst)
    intra = np.isin(fabric.link_kind[paths.links], np.array([int(k) for k in INTRA_LINKS]))
    rows = paths.row_ids()
    ext = np.bincount(rows, weights=~intra, minlength=len(src)).astype(np.int64)
    credit = np.bincount(rows, weights=intra | (transport in CREDIT_MODES),
                         minlength=len(src)).astype(np.int64)
    h = int(ext.max(initial=0))
    q = (1.0 - cfg.loss_rate) ** h
    est = events_lower_bound(schedule, paths.lengths(), credit, mtu=int(cfg.mtu_for(transport)),
                             ack_every=cfg.ack_every, tcp=transport == "tcp")
    need = est.events / max(q, 1e-300)
    return (f"over the {h} scale-out links of the longest path {1 - q:.1%} of packets are "
            f"lost, each delivered packet is sent about {1 / max(q, 1e-300):,.3g} times "
            "(more with go-back-N), so the run needs at least "
            f"{need:,.3g} events against the budget of {cfg.event_budget:,}")


class PacketRun(Part):
    """A packet-level experiment: the ``packet:`` section's variants to run (``None``:
    the base) on the cluster, with the scenario's faults and seed."""

    kind: Literal["packet"] = "packet"
    cluster: Cluster
    name: str = "scenario"
    description: str = ""
    packet: PacketSection
    variants: tuple[str | None, ...] = (None,)
    collective_bytes: int | None = None
    faults: tuple[FaultSpec, ...] = ()
    seed: int = 0
    force: bool = False
    event_budget: int | None = Field(None, ge=1000)
    time_limit_s: float | None = Field(None, gt=0, allow_inf_nan=False)


def packet_job(sc: Scenario, *, variants: Sequence[str] | None = None, force: bool = False,
               event_budget: int | None = None, time_limit_s: float | None = None
               ) -> PacketRun:
    """The packet experiment of ``sc``: the base and every variant, or the ``variants``
    named (``base`` for the base)."""
    if sc.packet is None:
        raise ConfigError(f"scenario {sc.name!r} has no packet: section, so there is no "
                          f"packet-level experiment to run; add one (docs/packet.md) or run "
                          f"`fabricsim report` / `fabricsim simulate` on it", field="packet")
    names: list[str | None] = [None, *sc.packet.names()]
    if variants:
        known = {"base", *sc.packet.names()}
        for v in variants:
            if v not in known:
                from fabricsim.errors import unknown

                raise unknown("variant", v, sorted(known), field="--variant")
        names = [None if v == "base" else v for v in variants]
    return PacketRun(cluster=Cluster.of(sc), name=sc.name, description=sc.description,
                     packet=sc.packet, variants=tuple(names),
                     collective_bytes=int(sc.collective.maxbytes)
                     if sc.collective is not None else None,
                     faults=tuple(sc.faults), seed=sc.seed, force=force,
                     event_budget=event_budget, time_limit_s=time_limit_s)


@dataclass(frozen=True)
class PacketReport:
    """Every variant run, side by side, and those a time limit left out."""

    job: PacketRun
    runs: list[PacketOutcome]
    skipped: list[str] = field(default_factory=list)
    kind: str = "packet"

    @property
    def warnings(self) -> list[str]:
        out = [f"{r.summary['variant']}: {w}" for r in self.runs
               for w in r.summary.get("warnings", [])]
        if self.skipped:
            out.append(f"--time-limit reached; not run: {', '.join(self.skipped)}")
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"scenario": self.job.name, "description": self.job.description,
                             "runs": [r.summary for r in self.runs]}
        if self.skipped:
            d["skipped"] = list(self.skipped)
        d["warnings"] = self.warnings
        return d

    def to_row(self) -> dict[str, Any]:
        """The base run's (or the first variant's) figures."""
        s = self.runs[0].summary
        p99 = max((c["fct_p99_s"] for c in s["fct_by_class"].values()), default=None)
        return {"variant": s["variant"], "transport": s["transport"], "time_s": s["time_s"],
                "main_traffic_time_s": s["main_traffic_time_s"], "fct_p99_s": p99,
                "drops": sum(s["drops"].values()), "retransmits": s["retransmits"],
                "pause_time_total_s": s["pause"]["pause_time_total_s"],
                "ports_paused": s["pause"]["ports_paused"], "cnps": s["cnps"],
                "watchdog_triggers": s["watchdog_triggers"]}


def run_packet(job: PacketRun, fabric: Fabric | None = None, progress: Progress = quiet
               ) -> PacketReport:
    """Run every variant of ``job`` (each on the cluster, or on the fabric preset a
    variant names); after ``time_limit_s`` no further variant is started."""
    import time

    deadline = None if job.time_limit_s is None else time.perf_counter() + job.time_limit_s
    runs: list[PacketOutcome] = []
    skipped: list[str] = []
    for i, name in enumerate(job.variants):
        if deadline is not None and runs and time.perf_counter() > deadline:
            skipped = [n or "base" for n in job.variants[i:]]
            break
        progress(i / len(job.variants), f"packet run {name or 'base'} ({i + 1} of "
                                        f"{len(job.variants)})")
        runs.append(run_variant(job, name, fabric))
    return PacketReport(job=job, runs=runs, skipped=skipped)


def run_variant(job: PacketRun, variant: str | None, fabric: Fabric | None = None
                ) -> PacketOutcome:
    """Simulate one variant of ``job`` (``None``: the base) with the packet backend.

    A legal but extreme setting (``loss_rate`` above
    :data:`~fabricsim.backends.packet.config.MAX_PLAUSIBLE_LOSS`) is refused with its
    estimated cost unless the job says ``force``; a run estimated beyond the event
    budget is refused up front, naming ``packet.event_budget`` and ``--event-budget``.
    """
    from fabricsim.backends.packet.config import extreme_violations
    from fabricsim.errors import SimulationError
    from fabricsim.scenario.cluster import fabric_from_cluster

    over: dict[str, object] = {} if job.event_budget is None else \
        {"event_budget": job.event_budget}
    cfg = job.packet.with_settings(variant, **over)
    spec = job.cluster.spec
    if cfg.fabric is not None and cfg.fabric != spec.fabric:
        spec = spec.model_copy(update={"fabric": cfg.fabric})
        fabric = None
    if over or cfg.fabric is not None:  # the scenario's rules on what actually runs
        from fabricsim.scenario.rules import check_scenario

        check_scenario(_Parts(spec, job, cfg))
    base = fabric if fabric is not None else fabric_from_cluster(spec, job.cluster.systems)
    faulted, applied = apply_faults(list(job.faults), cfg.faults, base)
    schedule, main_idx = packet_schedule(faulted, cfg, job.collective_bytes)
    # the backend applies every fault itself (static ones to the fabric, timed ones in
    # the engine): hand it the fabric as built and the scenario's faults with its own
    cfg = cfg.model_copy(update={"faults": [
        *(f.model_dump() for f in job.faults), *cfg.faults]})
    backend = PacketBackend(config=cfg, seed=job.seed)
    extreme = extreme_violations(cfg)
    if extreme and not job.force:
        rule, fld, detail = extreme[0]
        cost = loss_estimate(faulted, schedule, cfg, backend.transport_for(faulted)) \
            if rule.name == "loss-plausible" and schedule.steps else ""
        err = rule.error(fld, detail + (f"; {cost}" if cost else ""))
        raise ConfigError(f"{err.message}; the setting is legal but extreme: pass --force "
                          "to run it anyway", field=fld)
    try:
        result = backend.run(schedule, base)
    except SimulationError as e:
        if e.field != "packet.event_budget":
            raise
        raise SimulationError(f"{e.message} (on the command line: --event-budget N)",
                              field=e.field) from None
    summary = summarize(faulted, schedule, result, main_idx, cfg)
    summary["variant"] = variant or "base"
    if applied:
        summary["faults"] = applied
    return PacketOutcome(fabric=faulted, config=cfg, schedule=schedule, result=result,
                         summary=summary)


@dataclass(frozen=True)
class _Parts:
    """What the scenario rules read, for one packet run (its cluster and settings)."""

    cluster: ClusterSpec
    job: PacketRun
    cfg: PacketConfig

    @property
    def collective(self) -> None:
        return None

    @property
    def systems(self) -> dict[str, dict[str, Any]]:
        return self.job.cluster.systems

    @property
    def faults(self) -> tuple[FaultSpec, ...]:
        return self.job.faults

    @property
    def background(self) -> tuple[BackgroundSpec, ...]:
        return ()

    @property
    def packet(self) -> PacketSection:
        return PacketSection(base=self.cfg)


def apply_faults(faults: list[Any], packet_faults: list[Any], fabric: Fabric
                 ) -> tuple[Fabric, list[str]]:
    """The fabric with the static link faults applied (the scenario's ``faults`` and
    ``packet.faults``, which a variant can override) and the descriptions of every fault,
    timed ones included (:mod:`~fabricsim.backends.packet.faults`). Errors name the field
    (``faults[i].link`` or ``packet.faults[i].link``); faults the packet backend does not
    model are refused, naming the fault."""
    from fabricsim.backends.packet.faults import plan_packet_faults

    a = plan_packet_faults(fabric, faults, "faults")
    b = plan_packet_faults(a.fabric, packet_faults, "packet.faults")
    return b.fabric, [*a.descriptions, *b.descriptions]


def run_packet_scenario(sc: Scenario, variant: str | None = None, *, force: bool = False,
                        event_budget: int | None = None) -> PacketOutcome:
    """One run of ``sc``'s packet experiment: the base (``variant`` None) or the variant
    named, as ``fabricsim packet SCENARIO --variant V`` runs it."""
    return run_variant(packet_job(sc, force=force, event_budget=event_budget), variant)
