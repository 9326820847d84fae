"""Run a scenario's ``packet:`` section: build its traffic, simulate, summarise.

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
>>> run = run_packet_scenario(sc)
>>> run.summary["transport"], run.summary["complete"], run.summary["drops"]["lossless"]
('roce', True, 0)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabricsim.backends.base import Result
from fabricsim.backends.packet.backend import PacketBackend
from fabricsim.backends.packet.config import PacketConfig, TrafficSpec, parse_packet_config
from fabricsim.backends.packet.report import jain
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular, scalars
from fabricsim.scenario import Scenario
from fabricsim.schedule import Schedule, Step
from fabricsim.units import parse_size


@dataclass
class PacketRun(Tabular):
    """A finished packet scenario: its fabric, config, schedule, Result and summary.

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


def packet_schedule(sc: Scenario, fabric: Fabric, cfg: PacketConfig) -> tuple[Schedule,
                                                                              list[int]]:
    """The schedule of a packet scenario and the indices of its main-traffic steps."""
    main = cfg.traffic or TrafficSpec()
    default = None
    if main.pattern == "collective" and cfg.traffic is None and sc.collective is not None:
        default = float(parse_size(sc.collective.maxbytes))
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


def fabric_of(sc: Scenario) -> Fabric:
    """The fabric a scenario describes (its cluster and user-defined systems)."""
    from fabricsim.scenario.fabric import fabric_from_scenario

    return fabric_from_scenario(sc)


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
    from fabricsim.backends.packet.build import INTRA_LINKS

    steps = schedule.steps
    src = np.concatenate([s.src for s in steps])
    dst = np.concatenate([s.dst for s in steps])
    paths = fabric.route_many(src, dst)
    intra = np.isin(fabric.link_kind[paths.links], np.array([int(k) for k in INTRA_LINKS]))
    rows = paths.row_ids()
    ext = np.bincount(rows, weights=~intra, minlength=len(src)).astype(np.int64)
    credit = np.bincount(rows, weights=intra | (transport == "ib"),
                         minlength=len(src)).astype(np.int64)
    h = int(ext.max(initial=0))
    q = (1.0 - cfg.loss_rate) ** h
    est = events_lower_bound(schedule, paths.lengths(), credit, mtu=int(cfg.mtu),
                             ack_every=cfg.ack_every, tcp=transport == "tcp")
    need = est.events / max(q, 1e-300)
    return (f"over the {h} scale-out links of the longest path {1 - q:.1%} of packets are "
            f"lost, each delivered packet is sent about {1 / max(q, 1e-300):,.3g} times "
            "(more with go-back-N), so the run needs at least "
            f"{need:,.3g} events against the budget of {cfg.event_budget:,}")


def run_packet_scenario(sc: Scenario, variant: str | None = None, *, force: bool = False,
                        **overrides: Any) -> PacketRun:
    """Simulate ``sc`` with the packet backend: its ``packet:`` section, patched by the
    named ``variant`` (from ``packet.variants``) and by ``overrides``.

    A legal but extreme setting (``loss_rate`` above
    :data:`~fabricsim.backends.packet.config.MAX_PLAUSIBLE_LOSS`) is refused with its
    estimated cost unless ``force``.
    """
    from fabricsim.backends.packet.config import extreme_violations
    from fabricsim.scenario.rules import check_scenario, packet_data

    data = merge(packet_data(sc, variant), overrides)
    cfg = parse_packet_config(data)
    if cfg.fabric is not None:
        sc = sc.model_copy(update={"cluster": sc.cluster.model_copy(
            update={"fabric": cfg.fabric})})
    if overrides or cfg.fabric is not None:  # the scenario's rules on what actually runs
        check_scenario(sc.model_copy(update={"packet": data}))
    base = fabric_of(sc)
    fabric, applied = apply_faults(sc.faults, cfg.faults, base)
    schedule, main_idx = packet_schedule(sc, fabric, cfg)
    # the backend applies every fault itself (static ones to the fabric, timed ones in
    # the engine): hand it the fabric as built and the scenario's faults with its own
    cfg = cfg.model_copy(update={"faults": [
        *(f.model_dump() for f in sc.faults), *cfg.faults]})
    backend = PacketBackend(config=cfg, seed=sc.seed)
    extreme = extreme_violations(cfg)
    if extreme and not force:
        rule, field, detail = extreme[0]
        cost = loss_estimate(fabric, schedule, cfg, backend.transport_for(fabric)) \
            if rule.name == "loss-plausible" and schedule.steps else ""
        err = rule.error(field, detail + (f"; {cost}" if cost else ""))
        raise ConfigError(f"{err.message}; the setting is legal but extreme: pass --force "
                          "to run it anyway", field=field)
    result = backend.run(schedule, base)
    summary = summarize(fabric, schedule, result, main_idx, cfg)
    summary["variant"] = variant or "base"
    if applied:
        summary["faults"] = applied
    return PacketRun(fabric=fabric, config=cfg, schedule=schedule, result=result,
                     summary=summary)


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


def variant_names(sc: Scenario) -> list[str]:
    """Names of the variants a scenario defines (``packet.variants``)."""
    v = (sc.packet or {}).get("variants") or {}
    if not isinstance(v, dict):
        raise ConfigError("variants must map a name to packet overrides",
                          field="packet.variants")
    return [str(k) for k in v]


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge mapping ``over`` into a copy of ``base``."""
    from fabricsim.scenario.rules import merge as _merge

    return _merge(base, over)
