"""What a web job computes: one or two designs (scenario YAML texts), one kind of answer.

A job is ``kind`` × designs. Every design gets its cluster (the bandwidth hierarchy and a
picture of the topology's tiers and rails); then, by kind:

- ``describe`` — the cluster alone;
- ``bench`` — the scenario's collective (all-reduce 1 KiB – 1 GiB when it names none)
  against message size, the tuner's choice and every algorithm that applies, each as a
  bus-bandwidth curve (analytic backend, as ``fabricsim bench``);
- ``train`` — one step of the ``training:`` job: time, throughput, MFU, memory, where the
  time goes (NVLink vs scale-out communication) and goodput (as ``fabricsim train``);
- ``scale`` — the same job at ⅛, ¼, ½ and all of the cluster's GPUs (weak scaling, as
  ``fabricsim scale``): efficiency, its main loss and the cost of communication;
- ``plan`` — the job on the scenario's fabric and on InfiniBand NDR and RoCEv2 400G: step
  time, capital cost and cost per million tokens (as ``fabricsim plan``);
- ``simulate`` — the flow-level run with and without the scenario's faults and
  background traffic: slowdown by cause and the links that limited it;
- ``packet`` — the ``packet:`` experiment, every variant: drops, pauses and how far PFC
  pauses spread, queue depth and flow completion times.

Everything returned is JSON-ready (no NaN or infinity) and carries the figures the page
draws (:mod:`fabricsim.web.figures`).

Example
-------
>>> text = "cluster: {system: dgx-h100, nodes: 2}\\n"
>>> out = run_job("bench", [text], limits=Limits(max_sizes=4))
>>> out["designs"][0]["bench"]["curves"][0]["name"], len(out["figures"]["busbw"]["data"]) > 1
('auto', True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fabricsim.errors import ConfigError, FabricsimError
from fabricsim.fabric import Fabric, NodeKind
from fabricsim.results import jsonable
from fabricsim.scenario import Scenario
from fabricsim.web.limits import Limits

__all__ = ["KINDS", "Progress", "parse_design", "run_job", "topology_view"]

#: What a job can compute (see the module docs).
KINDS = ("describe", "bench", "train", "scale", "plan", "infer", "simulate", "packet")
#: Kinds that need a ``training:`` section, and those that need a ``packet:`` one.
NEEDS_TRAINING = ("train", "scale", "plan")
NEEDS_PACKET = ("packet",)
#: The fabrics a ``plan`` job compares the design's own fabric with.
PLAN_FABRICS = ("ib-ndr", "roce-400g")

#: A progress callback: (fraction done in [0, 1], what is being done).
Progress = Callable[[float, str], None]


def _quiet(_frac: float, _msg: str) -> None:
    return None


def parse_design(text: str, kind: str, limits: Limits, *, field: str = "scenario"
                 ) -> Scenario:
    """Parse and check one design's scenario text for ``kind`` within ``limits``; the
    same errors as ``fabricsim validate`` (field, line), raised as ConfigError.

    >>> parse_design("cluster: {system: dgx-h100, nodes: 2}", "bench", Limits()).cluster.nodes
    2
    >>> try:
    ...     parse_design("cluster: {nodes: 4096}", "simulate", Limits())
    ... except ConfigError as e:
    ...     print(e.field, "limited to 1024 GPUs; this design has 32768" in str(e))
    cluster.nodes True

    A training job's section is read and its layout resolved on the design's GPUs, so a
    layout that cannot split is refused at submission, not when the job runs:

    >>> from fabricsim.errors import FabricsimError
    >>> try:
    ...     parse_design("cluster: {system: dgx-h100, nodes: 2}\\n"
    ...                  "training: {model: gpt3-175b, tp: 64}", "train", Limits())
    ... except FabricsimError as e:
    ...     print(e.field)
    training.tp
    """
    from fabricsim.scenario import load_scenario_text
    from fabricsim.scenario.fabric import scenario_gpus

    if len(text.encode("utf-8")) > limits.max_scenario_bytes:
        raise ConfigError(f"the scenario is {len(text.encode('utf-8')):,} bytes; the web "
                          f"limit is {limits.max_scenario_bytes:,}", field=field)
    sc = load_scenario_text(text, source=field)
    gpus = scenario_gpus(sc)
    cap = limits.gpu_cap(kind)
    if gpus > cap:
        cli = "fabricsim " + ("bench" if kind == "describe" else kind)
        raise ConfigError(f"{kind} jobs on the web are limited to {cap} GPUs; this design "
                          f"has {gpus}. Use fewer nodes, or run it with the CLI ({cli}), "
                          "which has no such limit", field="cluster.nodes")
    if kind in NEEDS_TRAINING and sc.training is None:
        raise ConfigError(f"a {kind} job needs a training: section (model and parallel "
                          "layout); see docs/scenarios.md", field="training")
    if kind in NEEDS_TRAINING:  # the section's fields and layout, before the job is queued
        from fabricsim.scenario.sections import training_from_section

        model, cfg, _extra = training_from_section(sc.training)
        cfg.resolve(model, gpus)
    if kind == "infer":
        if sc.inference is None:
            raise ConfigError("an infer job needs an inference: section (model, tp, batch, "
                              "prompt and output lengths; start from the shipped "
                              "serve-llama3-70b)", field="inference")
        from fabricsim.scenario.serving import serving_job

        serving_job(sc)
    if kind == "simulate" and not sc.faults and not sc.background:
        raise ConfigError("a simulate job compares the fabric with and without faults or "
                          "background traffic: add a faults: or background: section "
                          "(start from a shipped flow-* scenario)", field="faults")
    if kind in NEEDS_PACKET and sc.packet is None:
        raise ConfigError("a packet job needs a packet: section; start from a shipped "
                          "packet-* scenario", field="packet")
    return sc


# -- the cluster -------------------------------------------------------------------------

#: Most boxes drawn per tier of the topology picture.
MAX_DRAWN = 16


def topology_view(fab: Fabric, max_drawn: int = MAX_DRAWN) -> dict[str, Any]:
    """The tiers of ``fab`` (servers, leaves, spines, cores) with their counts, the boxes
    drawn (at most ``max_drawn`` per tier) and the links among drawn boxes, each server
    uplink labelled with its rail (the NIC's index in its server).

    >>> import fabricsim as fs
    >>> v = topology_view(fs.build_cluster("dgx-h100", nodes=32))
    >>> [(t["name"], t["count"]) for t in v["tiers"]]
    [('servers', 32), ('leaf', 8), ('spine', 4)]
    >>> sorted({e["rail"] for e in v["edges"] if e["rail"] is not None})
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    kinds = np.asarray(fab.node_kind)
    servers = int(fab.info.servers) or int(np.max(fab.node_server) + 1)
    tiers: list[dict[str, Any]] = [{"name": "servers", "count": servers,
                                    "drawn": [f"server{i}" for i in
                                              range(min(servers, max_drawn))]}]
    drawn: dict[int, tuple[int, int]] = {}  # switch node -> (tier, position)
    for kind, name in ((NodeKind.LEAF, "leaf"), (NodeKind.SPINE, "spine"),
                       (NodeKind.CORE, "core")):
        ids = np.flatnonzero(kinds == int(kind))
        if ids.size == 0:
            continue
        t = len(tiers)
        shown = ids[:max_drawn]
        for pos, n in enumerate(shown.tolist()):
            drawn[n] = (t, pos)
        tiers.append({"name": name, "count": int(ids.size),
                      "drawn": [fab.node_name(int(n)) for n in shown]})
    src, dst = np.asarray(fab.link_src), np.asarray(fab.link_dst)
    counts: dict[tuple[int, int, int, int, int | None], int] = {}
    nic = kinds == int(NodeKind.NIC)
    key: tuple[int, int, int, int, int | None]
    for l in range(fab.n_links):
        a, b = int(src[l]), int(dst[l])
        if b not in drawn:
            continue
        if nic[a]:
            s = int(fab.node_server[a])
            if s >= max_drawn:
                continue
            key = (0, s, *drawn[b], int(fab.node_local[a]))
        elif a in drawn and drawn[a][0] < drawn[b][0]:
            key = (*drawn[a], *drawn[b], None)
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
    edges = [{"from": [k[0], k[1]], "to": [k[2], k[3]], "rail": k[4], "links": v}
             for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))]
    return {"tiers": tiers, "edges": edges, "topology": fab.info.topology,
            "rails": int(fab.info.nics_per_server)}


def cluster_view(fab: Fabric) -> dict[str, Any]:
    """What the cluster is (``fabricsim describe``) and its topology picture."""
    from fabricsim.reports.cluster import summarize

    return {"summary": jsonable(summarize(fab).as_dict()), "topology": topology_view(fab)}


# -- the kinds ---------------------------------------------------------------------------


def _bench(sc: Scenario, fab: Fabric, limits: Limits, progress: Progress
           ) -> dict[str, Any]:
    from fabricsim.collectives import ALGORITHMS
    from fabricsim.reports.scenario import DEFAULT_SWEEP, collective_sweep, sweep_sizes
    from fabricsim.scenario.schema import CollectiveSpec
    from fabricsim.units import parse_size

    spec = sc.collective or CollectiveSpec.model_validate(DEFAULT_SWEEP)
    lo = parse_size(spec.minbytes, field="collective.minbytes")
    hi = parse_size(spec.maxbytes, field="collective.maxbytes")
    sizes = sweep_sizes(lo, hi, spec.stepfactor, limit=limits.max_sizes)
    algos = [spec.algo] if spec.algo else [
        a for a, alg in ALGORITHMS.items() if spec.collective in alg.collectives]
    curves: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    names: list[str | None] = [None, *algos] if not spec.algo else list(algos)
    for i, algo in enumerate(names):
        progress(i / len(names), f"{spec.collective} with {algo or 'the tuner'}")
        try:
            sw = collective_sweep(fab, spec.collective, sizes, ranks=spec.ranks, algo=algo,
                                  proto=spec.proto)
        except FabricsimError as e:
            skipped[str(algo)] = e.message
            continue
        curves.append({"name": algo or "auto", "sizes": sw.sizes,
                       "busbw_gbps": sw.busbw_gbps, "time_us": [t * 1e6 for t in sw.time_s],
                       "choice": sw.choice})
    return {"collective": spec.collective, "gpus": len(spec.ranks) if spec.ranks else
            fab.n_gpus, "curves": curves, "skipped": skipped}


def _training(sc: Scenario) -> tuple[Any, Any, dict[str, Any]]:
    """The job of a scenario's ``training:`` section, priced as the CLI prices it (the
    section's ``gpu_hour_usd``, else the scenario's)."""
    from fabricsim.scenario.fabric import training_price
    from fabricsim.scenario.sections import training_from_section

    m, cfg, extra = training_from_section(sc.training)
    return m, cfg, training_price(extra, sc)


def _train(sc: Scenario, fab: Fabric, progress: Progress) -> dict[str, Any]:
    from fabricsim.reports.scenario import training_parts
    from fabricsim.scenario.sections import goodput_settings
    from fabricsim.workloads.training.goodput import goodput_on_fabric
    from fabricsim.workloads.training.step import simulate_step

    m, cfg, extra = _training(sc)
    progress(0.1, f"one training step of {m.name}")
    r = simulate_step(m, cfg, fab, gpu_hour_usd=extra.get("gpu_hour_usd"),
                      backend=extra.get("backend") or "analytic",
                      total_tokens=extra.get("total_tokens"))
    kw: dict[str, Any] = goodput_settings(extra)
    gp = goodput_on_fabric(fab, params=m.params, step_time_s=r.step_time_s,
                           gpu_hour_usd=r.gpu_hour_usd, **kw)
    parts, nvlink = training_parts(fab, r)
    comm = {k: v for k, v in parts.items() if k not in ("compute", "bubble", "optimizer")}
    return {"model": m.name, "gpus": r.world, "parallel": r.parallel,
            "step_time_s": r.step_time_s, "tokens_per_s": r.tokens_per_s,
            "tokens_per_s_per_gpu": r.tokens_per_s / r.world, "mfu": r.mfu,
            "memory_per_gpu_gib": r.memory_per_gpu_gib, "comm_fraction": r.comm_fraction,
            "comm_usd_per_day": r.comm_usd_per_day, "breakdown_s": parts,
            "nvlink_kinds": sorted(nvlink),
            "exposed_nvlink_s": sum(v for k, v in comm.items() if k in nvlink),
            "exposed_scale_out_s": sum(v for k, v in comm.items() if k not in nvlink),
            "gpu_hour_usd": r.gpu_hour_usd, "goodput": gp.goodput,
            "job_mtbf_hours": gp.job_mtbf_hours, "failures_per_day": gp.failures_per_day,
            "checkpoint_interval_s": gp.checkpoint_interval_s,
            "usd_lost_per_day": gp.usd_lost_per_day, "warnings": list(r.warnings),
            "notes": list(extra.get("notes", [])),
            **({"run": r.run(r.total_tokens)} if r.total_tokens else {})}


def _scale(sc: Scenario, fab: Fabric, progress: Progress) -> dict[str, Any]:
    from fabricsim.scenario.fabric import cluster_build_kw, scenario_catalog
    from fabricsim.scenario.sections import goodput_settings
    from fabricsim.workloads.training.scaling import scaling_curve, weak_scaling_batch

    m, cfg, extra = _training(sc)
    world = fab.n_gpus
    per = max(fab.info.gpus_per_server, 1)
    sizes = sorted({max(per, (world // k) // per * per) for k in (8, 4, 2, 1)})
    progress(0.1, f"{m.name} at {', '.join(map(str, sizes))} GPUs")
    c = sc.cluster
    pts = scaling_curve(m, c.system, sizes, cfg, fabric=c.fabric, topology=c.topology,
                        oversubscription=c.oversubscription,
                        seqs_per_replica=weak_scaling_batch(cfg, world),
                        gpu_hour_usd=extra.get("gpu_hour_usd"),
                        gpus_per_node=c.gpus_per_node, catalog=scenario_catalog(sc.systems),
                        cluster_kw=cluster_build_kw(c), goodput_kw=goodput_settings(extra))
    return {"model": m.name, "mode": "weak", "points": jsonable(pts)}


def _plan(sc: Scenario, progress: Progress) -> dict[str, Any]:
    from fabricsim.scenario.fabric import scenario_catalog
    from fabricsim.scenario.sections import goodput_settings
    from fabricsim.workloads.cost.fabric_plan import compare_fabrics

    m, cfg, extra = _training(sc)
    c = sc.cluster
    fabrics = list(dict.fromkeys([f for f in (c.fabric, *PLAN_FABRICS) if f]))
    progress(0.1, f"{m.name} on {', '.join(fabrics)}")
    opts = compare_fabrics(m, system=c.system, nodes=c.nodes, fabrics=fabrics,
                           topology=c.topology, oversubscription=c.oversubscription,
                           gpus_per_node=c.gpus_per_node, cfg=cfg,
                           gpu_hour_usd=extra.get("gpu_hour_usd"),
                           cluster_params=dict(c.params),
                           catalog=scenario_catalog(sc.systems),
                           goodput_kw=goodput_settings(extra))
    return {"model": m.name, "options": [jsonable(o.as_dict()) for o in opts]}


def _infer(sc: Scenario, fab: Fabric, progress: Progress) -> dict[str, Any]:
    from fabricsim.scenario.serving import serving_job
    from fabricsim.workloads.serving.run import run_serving

    m, cfg, notes = serving_job(sc)
    progress(0.1, f"serving {m.name}")
    run = run_serving(m, cfg, fab)
    return {"model": m.name, "serving": cfg.model_dump(), **run.as_dict(), "notes": notes}


def _simulate(sc: Scenario, limits: Limits, progress: Progress) -> dict[str, Any]:
    from fabricsim.reports.flow import simulate_scenario

    def step(done: float, total: float, *_: Any) -> None:
        progress(min(done / total, 1.0) if total else 0.0, "flow-level run")

    s = simulate_scenario(sc, time_limit_s=limits.max_wall_s * 0.8, progress=step)
    return jsonable(s)  # type: ignore[no-any-return]


def _packet(sc: Scenario, limits: Limits, progress: Progress) -> dict[str, Any]:
    from fabricsim.scenario.packet import run_packet_scenario, variant_names

    names: list[str | None] = [None, *variant_names(sc)][: limits.max_variants]
    runs = []
    for i, v in enumerate(names):
        progress(i / len(names), f"packet run {v or 'base'}")
        r = run_packet_scenario(sc, v)
        runs.append({"variant": v or "base", **jsonable(r.summary)})
    return {"runs": runs}


def run_design(kind: str, sc: Scenario, limits: Limits, progress: Progress = _quiet
               ) -> dict[str, Any]:
    """One design's answer to ``kind`` (see the module docs)."""
    from fabricsim.scenario.fabric import fabric_from_scenario

    progress(0.0, "building the cluster")
    fab = fabric_from_scenario(sc)
    out: dict[str, Any] = {"name": sc.name, "cluster": cluster_view(fab)}
    if kind == "bench":
        out["bench"] = _bench(sc, fab, limits, progress)
    elif kind == "train":
        out["train"] = _train(sc, fab, progress)
    elif kind == "scale":
        out["scale"] = _scale(sc, fab, progress)
    elif kind == "plan":
        out["plan"] = _plan(sc, progress)
    elif kind == "infer":
        out["infer"] = _infer(sc, fab, progress)
    elif kind == "simulate":
        out["simulate"] = _simulate(sc, limits, progress)
    elif kind == "packet":
        out["packet"] = _packet(sc, limits, progress)
    elif kind != "describe":
        raise ConfigError(f"unknown job kind {kind!r}; one of {', '.join(KINDS)}",
                          field="kind")
    return jsonable(out)  # type: ignore[no-any-return]


def run_job(kind: str, designs: Sequence[str], *, limits: Limits | None = None,
            progress: Progress = _quiet) -> dict[str, Any]:
    """Run ``kind`` on each design (scenario YAML texts, one or two); the designs'
    answers, the figures comparing them, and the wall time."""
    from fabricsim.web.figures import figures

    lim = limits or Limits()
    t0 = time.perf_counter()
    scs = [parse_design(t, kind, lim, field=f"designs[{i}]") for i, t in enumerate(designs)]
    out = []
    for i, sc in enumerate(scs):
        def part(frac: float, msg: str, i: int = i) -> None:
            progress((i + frac) / len(scs), f"design {'AB'[i]}: {msg}")

        try:
            out.append(run_design(kind, sc, lim, part))
        except FabricsimError as e:
            if len(scs) == 1:
                raise
            # which design failed, where the app's error reader finds it
            raise type(e)(f"design {'AB'[i]}: {e.message}", field=f"designs[{i}]."
                          f"{e.field}" if e.field else f"designs[{i}]") from e
    progress(1.0, "figures")
    return {"kind": kind, "designs": out, "figures": figures(kind, out),
            "wall_s": time.perf_counter() - t0}
