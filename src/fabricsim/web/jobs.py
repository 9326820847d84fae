"""What a web job computes: one or two designs (scenario YAML texts), one kind of answer.

A job is ``kind`` × designs. Each design is parsed into the job of that kind
(:func:`fabricsim.jobs.job_from_scenario`) and run with :func:`fabricsim.jobs.run`, as the
CLI runs it: the design's answer is the report's ``to_dict()`` — what ``fabricsim <kind>
--json`` prints — plus what the page draws from it. Every design gets its cluster (the
bandwidth hierarchy and a picture of the topology's tiers and rails); then, by kind:

- ``describe`` — the cluster alone;
- ``bench`` — the scenario's collective (all-reduce 1 KiB – 1 GiB when it names none)
  against message size, the tuner's choice and (on the analytic backend) every algorithm
  that applies, each as a bus-bandwidth curve (as ``fabricsim bench``);
- ``train`` — one step of the ``training:`` job: time, throughput, MFU, memory, where the
  time goes (NVLink vs scale-out communication) and goodput (as ``fabricsim train``; on
  the flow backend with the scenario's faults);
- ``scale`` — the same job at ⅛, ¼, ½ and all of the cluster's GPUs (weak scaling, as
  ``fabricsim scale``): efficiency, its main loss and the cost of communication;
- ``plan`` — the job on the scenario's fabric and on InfiniBand NDR, RoCEv2 400G and EFA:
  step time, capital cost and cost per million tokens (as ``fabricsim plan``);
- ``simulate`` — the flow-level run with and without the scenario's faults and
  background traffic: slowdown by cause and the links that limited it;
- ``packet`` — the ``packet:`` experiment, every variant: drops, pauses and how far PFC
  pauses spread, queue depth and flow completion times;
- ``cluster`` — the ``jobs:`` list placed by the scenario's ``placement``: each job's
  step alone and shared, its slowdown, the GPU-hours it loses per hour and the links and
  jobs that cause it (as ``fabricsim cluster``), kept under ``jobs`` (``cluster`` is
  every design's cluster).

Everything returned is JSON-ready (no NaN or infinity) and carries the figures the page
draws (:mod:`fabricsim.web.figures`).

Example
-------
>>> text = "cluster: {system: dgx-h100, nodes: 2}\\n"
>>> out = run_job("bench", [text])
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

__all__ = ["ANSWER_KEY", "KINDS", "Progress", "design_job", "parse_design", "run_design",
           "run_job", "topology_view"]

#: What a job can compute (see the module docs).
KINDS = ("describe", "bench", "ep", "train", "scale", "plan", "infer", "simulate", "packet",
         "cluster")

#: Where a design's answer is kept when the kind's name is taken (``cluster``: the
#: design's own cluster view).
ANSWER_KEY = {"cluster": "jobs"}
#: A progress callback: (fraction done in [0, 1], what is being done).
Progress = Callable[[float, str], None]


def _quiet(_frac: float, _msg: str) -> None:
    return None


def design_job(kind: str, sc: Scenario, limits: Limits) -> Any:
    """The job of ``kind`` that design ``sc`` describes, as the web runs it: the
    ``fabricsim <kind> SCENARIO`` job, and for ``bench`` on the analytic backend every
    algorithm's curve beside the tuner's; within ``limits`` (a larger request is refused
    naming the field and the fix)."""
    from fabricsim import jobs

    if kind not in KINDS:
        raise ConfigError(f"unknown job kind {kind!r}; one of {', '.join(KINDS)}",
                          field="kind")
    if kind == "bench":
        job = jobs.job_from_scenario("bench", sc)
        if job.backend == "analytic":
            job = job.model_copy(update={"every_algorithm": True})
        if len(job.sizes) > limits.max_sizes:
            raise ConfigError(f"the collective sweep has {len(job.sizes)} sizes; a web job "
                              f"draws at most {limits.max_sizes}: raise collective."
                              f"stepfactor or narrow minbytes..maxbytes (or run fabricsim "
                              f"bench, which has no such limit)", field="collective.stepfactor")
        return job
    _refuse_extreme(_extreme_faults(kind, sc), kind)
    job = jobs.job_from_scenario(kind, sc)
    if kind == "packet":
        _refuse_extreme(_extreme_packet(job), kind)
    if kind == "simulate":
        _bound_transfers(sc, job, limits)
    if kind == "packet" and len(job.variants) > limits.max_variants:
        raise ConfigError(f"the packet section has {len(job.variants)} runs (the base and "
                          f"its variants); a web job runs at most {limits.max_variants}: "
                          f"keep fewer variants, or run fabricsim packet, which has no such "
                          f"limit", field="packet.variants")
    return job


def _bound_transfers(sc: Scenario, job: Any, limits: Limits) -> None:
    """Refuse a flow run whose all-to-all collective or background traffic is more
    point-to-point transfers than ``limits.max_flow_transfers`` (their count, not the
    GPUs, sets a flow run's memory)."""
    from fabricsim.scenario.fabric import scenario_gpus

    gpus = scenario_gpus(sc)
    if job.collective.collective in ("alltoall", "sendrecv"):
        n = len(job.collective.ranks) if job.collective.ranks else gpus
        count, where = n * (n - 1), f"an all-to-all of {n} ranks"
        _over(count, where, "collective.ranks", limits)
    for i, b in enumerate(job.faults.background):
        src = len(b.src) if b.src else gpus
        dst = len(b.dst) if b.dst else gpus
        count = src * dst if b.pattern == "all_to_all" else max(src, dst)
        _over(count, f"background[{i}] ({b.pattern} of {src} ranks)", f"background[{i}]",
              limits)


def _over(count: int, what: str, field: str, limits: Limits) -> None:
    if count > limits.max_flow_transfers:
        raise ConfigError(f"{what} is {count:,} transfers; a web simulate job runs at most "
                          f"{limits.max_flow_transfers:,} (an all-to-all of about 512 "
                          f"ranks): use fewer ranks, or run fabricsim simulate, which has "
                          f"no such limit", field=field)


def _refuse_extreme(found: Any, kind: str) -> None:
    """Settings that are legal but extreme (a link below 1 % of its capacity, a packet
    loss above 1 %) run on the command line only with ``--force``; the web app has no
    such switch and refuses them at submission, saying so. ``found``: ``(field,
    message)`` of the first one, or ``None``."""
    if found is not None:
        where, msg = found
        raise ConfigError(f"{msg}; the setting is legal but extreme, and the web app does "
                          f"not run it: run it with the CLI (fabricsim {kind} SCENARIO "
                          f"--force)", field=where)


def _extreme_faults(kind: str, sc: Scenario) -> tuple[str | None, str] | None:
    """The scenario's first extreme fault (checked before the job, whose own refusal
    would tell a web user to pass --force)."""
    from fabricsim.scenario.rules import violations

    if kind not in ("simulate", "train", "packet", "bench"):
        return None
    return next(((e.field, e.message) for e in violations(sc, extreme=True)), None)


def _extreme_packet(job: Any) -> tuple[str | None, str] | None:
    """The first extreme packet setting of any variant of a packet job."""
    from fabricsim.backends.packet.config import extreme_violations

    for v in job.variants:
        ex = extreme_violations(job.packet.with_settings(v))
        if ex:
            rule, name, detail = ex[0]
            return name, rule.error(name, detail).message
    return None


def parse_design(text: str, kind: str, limits: Limits, *, field: str = "scenario"
                 ) -> Scenario:
    """Parse and check one design's scenario text for ``kind`` within ``limits``: the
    same errors as ``fabricsim validate`` and ``fabricsim <kind>`` (field, line), raised
    as ConfigError; the job is built, so a design that cannot run is refused at
    submission, not when the job runs.

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
    if sc.trace is not None and sc.trace.file is not None:
        raise ConfigError("the web app reads no file of the server, so it cannot replay "
                          "a trace file: run fabricsim cluster FILE, or give trace: "
                          "{synthetic: {load: 1.1}} for a synthetic day",
                          field="trace.file")
    gpus = scenario_gpus(sc)
    cap = limits.gpu_cap(kind)
    if gpus > cap:
        cli = "fabricsim " + ("bench" if kind == "describe" else kind)
        raise ConfigError(f"{kind} jobs on the web are limited to {cap} GPUs; this design "
                          f"has {gpus}. Use fewer nodes, or run it with the CLI ({cli}), "
                          "which has no such limit", field="cluster.nodes")
    job = design_job(kind, sc, limits)
    if kind in ("train", "scale", "plan"):  # the layout on the design's GPUs, now
        t = job if kind == "train" else job.training
        t.parallel.resolve(t.model, gpus)
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
    from fabricsim.jobs.describe import summarize

    return {"summary": jsonable(summarize(fab).as_dict()), "topology": topology_view(fab)}


# -- the kinds ---------------------------------------------------------------------------


def _view(kind: str, report: Any, fab: Fabric) -> dict[str, Any]:
    """The design's answer: the report (``to_dict()``, as the CLI's ``--json``) and what
    the page draws from it (a training step's communication split between NVLink and
    the scale-out network)."""
    d: dict[str, Any] = report.to_dict()
    if kind == "train":
        from fabricsim.reports.scenario import training_parts

        parts, nvlink = training_parts(fab, report.step)
        comm = {k: v for k, v in parts.items() if k not in ("compute", "bubble", "optimizer")}
        d["nvlink_kinds"] = sorted(nvlink)
        d["exposed_nvlink_s"] = sum(v for k, v in comm.items() if k in nvlink)
        d["exposed_scale_out_s"] = sum(v for k, v in comm.items() if k not in nvlink)
    return d


def run_design(kind: str, sc: Scenario, limits: Limits, progress: Progress = _quiet
               ) -> dict[str, Any]:
    """One design's answer to ``kind`` (see the module docs)."""
    from fabricsim import jobs

    progress(0.0, "building the cluster")
    job = design_job(kind, sc, limits)
    fab = job.cluster.build()
    out: dict[str, Any] = {"name": sc.name, "cluster": cluster_view(fab)}
    if kind == "simulate" or (kind == "train" and job.whole_fabric):
        job = job.model_copy(update={"time_limit_s": limits.max_wall_s * 0.8})
    if kind != "describe":  # (the cluster kind's answer beside the design's cluster)
        out[ANSWER_KEY.get(kind, kind)] = _view(kind, jobs.run(job, fab, progress), fab)
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
