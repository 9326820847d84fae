"""Collective benchmarks (``bench``): an nccl-tests sweep of one collective on a cluster.

A :class:`CollectiveBench` is the collective, its sizes (nccl-tests' ``-b``/``-e``/``-f``
or ``-i``), data type, reduction op, the algorithms to run (``None``: NCCL's own choice,
the tuner's; several overlay), protocol, backend, ranks, GPUs per nccl-tests thread
(``-g``), NCCL's environment (``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_NVLS_ENABLE``,
``NCCL_COLLNET_ENABLE``, ...: :mod:`~fabricsim.collectives.nccl_env`) and the NCCL release
whose choice is made. A scenario's ``collective:`` section gives the defaults, its
``env:`` the variables (:func:`bench_job`: under ``bench`` the shell's replace them one by
one). Faults and background
traffic run on the flow backend; any other backend refuses them.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("cluster: {system: dgx-h100, nodes: 2}\\n"
...                         "collective: {minbytes: 1M, maxbytes: 4M}")
>>> job = bench_job(sc)
>>> job.sizes
(1048576, 2097152, 4194304)
>>> r = run_bench(job, job.cluster.build())
>>> [row.algorithm for row in r.rows[None]], r.to_row()["size_bytes"]
(['tree', 'tree', 'nvlstree'], 4194304)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from fabricsim.collectives.busbw import SizeRow
from fabricsim.collectives.nccl_env import MAX_QPS, NcclEnv
from fabricsim.errors import ConfigError, FabricsimError, unknown
from fabricsim.fabric import Fabric
from fabricsim.jobs.common import (
    Cluster,
    Faults,
    Part,
    Progress,
    quiet,
    section_env,
    section_fields,
)
from fabricsim.scenario.cluster import CollectiveSpec
from fabricsim.scenario.schema import Scenario

if TYPE_CHECKING:
    from fabricsim.collectives.registry import Group

__all__ = ["DATATYPES", "DEFAULT_SWEEP", "MAX_SWEEP_POINTS", "REDOPS", "BenchReport",
           "BenchRow", "CollectiveBench", "bench_job", "bench_sizes", "run_bench",
           "run_notes"]

#: nccl-tests data types and their sizes in bytes.
DATATYPES = {"int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4,
             "int64": 8, "uint64": 8, "half": 2, "float16": 2, "float": 4, "float32": 4,
             "double": 8, "float64": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
#: nccl-tests reduction ops.
REDOPS = ("sum", "prod", "min", "max", "avg")
#: Most rows one sweep may have (nccl-tests' own default sweep has 31).
MAX_SWEEP_POINTS = 1000
#: The sweep of a scenario that names no collective: all-reduce from 1 KiB to 1 GiB.
DEFAULT_SWEEP = CollectiveSpec(collective="all_reduce", minbytes="1KiB", maxbytes="1GiB")


def bench_sizes(minbytes: int, maxbytes: int, factor: float = 2.0,
                stepbytes: int | None = None, field_name: str = "--stepfactor") -> list[int]:
    """Sizes from ``minbytes`` to ``maxbytes`` by ``factor`` (or by ``stepbytes``), as
    nccl-tests steps them.

    >>> bench_sizes(8, 64, 2)
    [8, 16, 32, 64]
    >>> bench_sizes(0, 3000, stepbytes=1000)
    [0, 1000, 2000, 3000]
    """
    if minbytes < 0 or maxbytes < minbytes:
        raise ConfigError(f"need 0 <= minbytes <= maxbytes, got {minbytes} and {maxbytes}",
                          field="--minbytes")
    if stepbytes:
        points = (maxbytes - minbytes) // stepbytes + 1
    else:
        if not (math.isfinite(factor) and factor > 1):
            raise ConfigError(f"step factor must be a number > 1, got {factor}",
                              field=field_name)
        lo = max(minbytes, 1)
        points = int(math.log(max(maxbytes, lo) / lo) / math.log(factor) + 1e-9) + 1 + \
            (minbytes == 0)
    if points > MAX_SWEEP_POINTS:
        raise ConfigError(f"this sweep has {points:,} sizes; the limit is "
                          f"{MAX_SWEEP_POINTS:,}. Use a larger --stepfactor/--stepbytes or a "
                          f"narrower -b/-e range",
                          field=field_name if not stepbytes else "--stepbytes")
    if stepbytes:
        return list(range(minbytes, maxbytes + 1, stepbytes))
    out, s = [], float(max(minbytes, 1) if minbytes == 0 else minbytes)
    if minbytes == 0:
        out.append(0)
    while s <= maxbytes * (1 + 1e-12):
        out.append(int(s))
        s *= factor
    return out


@dataclass(frozen=True)
class BenchRow(SizeRow):
    """One simulated nccl-tests row (:class:`~fabricsim.collectives.busbw.SizeRow`), with
    the algorithm and protocol that ran."""

    algorithm: str
    protocol: str
    #: Median absolute held-out error of this row's accuracy group (a fraction: the
    #: figure is ``busbw ± band``; :mod:`fabricsim.collectives.accuracy`).
    band: float = 0.0
    band_group: str = ""
    #: The same for the group of NCCL's choice, where enough rows back it (else 0 and
    #: ""; :func:`fabricsim.collectives.accuracy.choice_band`).
    choice_band: float = 0.0
    choice_group: str = ""
    #: Why published measurements do not cover this row ("" when they do).
    envelope: str = ""
    #: What the published rows nearest this one say, where they lean further than the
    #: band ("" elsewhere; :func:`fabricsim.collectives.accuracy.local_warning`).
    local: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class CollectiveBench(Part):
    """One collective swept over message sizes (see the module docs)."""

    kind: Literal["bench"] = "bench"
    cluster: Cluster
    collective: str
    sizes: tuple[int, ...] = Field(min_length=1, max_length=MAX_SWEEP_POINTS)
    datatype: str = "float"
    op: str = "sum"
    algos: tuple[str | None, ...] = (None,)
    every_algorithm: bool = False
    """Also every algorithm that runs this collective, each as its own curve (those
    that cannot run here are listed as skipped, with the reason)."""
    proto: str | None = None
    select: Literal["nccl", "fastest"] = "nccl"
    """Where no pair is forced: NCCL's own choice (``nccl``) or the fastest pair by
    fabricsim's model (``fastest``; :class:`~fabricsim.collectives.tuner.Tuner`)."""
    backend: Literal["analytic", "flow", "packet", "hybrid"] = "analytic"
    ranks: tuple[int, ...] | None = None
    gpus_per_thread: int = Field(1, ge=1, le=72)
    root: int = Field(0, ge=0)
    """Root rank of broadcast and reduce (nccl-tests' ``-r``)."""
    agg_iters: int = Field(1, ge=1)
    """Operations aggregated per launch (nccl-tests' ``-m``: one NCCL group)."""
    nccl_version: str | None = None
    """The NCCL release whose choice the model makes (``None``: the newest modelled)."""
    env: NcclEnv = NcclEnv()
    #: The shell's variables that replaced the scenario's ``collective.env`` (bench), each
    #: as a sentence the run warns with.
    env_replaced: tuple[str, ...] = ()
    #: The variables of ``env`` that came from the scenario's ``collective.env`` (not
    #: replaced by the shell's): a refusal of one names it as that field.
    env_from_section: tuple[str, ...] = ()
    faults: Faults = Faults()
    time_limit_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    flow_precision: float = Field(0.0, ge=0.0, le=0.1)
    """Flow backend: finishes within this fraction of a transfer's duration settled as
    one event (:attr:`~fabricsim.backends.flow.FlowBackend.precision`; 0: exact)."""

    def group_on(self, fabric: Fabric) -> Group:
        """The job's ranks on ``fabric``, checked against it (a ConfigError naming
        ``collective.ranks``), and what the NCCL variables ask of the fabric that the model
        does not run refused (:meth:`NcclEnv.check_fabric
        <fabricsim.collectives.nccl_env.NcclEnv.check_fabric>`), a variable of the
        scenario's section named as its field, ``collective.env.NAME``."""
        from fabricsim.collectives import Group

        try:
            group = Group.of(fabric, list(self.ranks) if self.ranks else None)
        except ConfigError as e:
            raise ConfigError(e.message, field="collective.ranks") from None
        with section_fields(self.env_from_section):
            self.env.check_fabric(group)
        return group

    def channels_on(self, group: Group) -> tuple[int | None, int | None]:
        """The channels the job's NCCL variables set on ``group``: the rings' and trees'
        (:meth:`NcclEnv.channels_of <fabricsim.collectives.nccl_env.NcclEnv.channels_of>`)
        and NVLS's (:meth:`NcclEnv.nvls_channels_of
        <fabricsim.collectives.nccl_env.NcclEnv.nvls_channels_of>`), ``None`` where they
        leave NCCL's own; every timing of the job takes both."""
        return self.env.channels_of(group), self.env.nvls_channels_of(group)


def _count(collective: str, size: int, tsize: int, n: int) -> int:
    """The ``count`` column as nccl-tests prints it: elements per rank for the collectives
    whose buffers are split among ranks (all_gather, reduce_scatter, alltoall), aligned
    to 16 bytes as nccl-tests aligns them; else the buffer's elements.

    >>> _count("all_reduce", 1 << 20, 4, 8), _count("all_gather", 1 << 20, 4, 8)
    (262144, 32768)
    """
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (size // tsize // n) & ~(max(16 // tsize, 1) - 1)
    return size // tsize


def _ranks(ranks: Any) -> tuple[int, ...] | None:
    """``collective.ranks`` (``None``: every GPU); fewer than two is refused, not read
    as every GPU."""
    if ranks is None:
        return None
    if len(ranks) < 2:
        raise ConfigError(f"a collective moves data between ranks; give at least two "
                          f"(got {list(ranks)}) or leave ranks out for every GPU",
                          field="collective.ranks")
    return tuple(ranks)


def bench_job(sc: Scenario, *, collective: str | None = None,
              sizes: tuple[int, ...] | None = None, datatype: str | None = None,
              op: str | None = None, algos: tuple[str, ...] = (), proto: str | None = None,
              backend: str | None = None, gpus_per_thread: int | None = None,
              env: NcclEnv | None = None, every_algorithm: bool = False,
              time_limit_s: float | None = None, root: int | None = None,
              agg_iters: int | None = None, select: str | None = None,
              flow_precision: float = 0.0, nccl_version: str | None = None
              ) -> CollectiveBench:
    """The benchmark of ``sc``'s ``collective:`` section (:data:`DEFAULT_SWEEP` when it
    has none), each argument given replacing the section's (nccl-tests' ``-g``, ``-r``
    and ``-m`` too: ``gpus_per_thread``, ``root``, ``agg_iters``; and the NCCL release,
    ``nccl_version``). ``env`` (the shell's variables, as ``bench`` reads them) is laid
    over the section's ``env:``, each variable it sets replacing the section's
    (:meth:`~fabricsim.collectives.nccl_env.NcclEnv.over`; the run warns where one did).

    >>> from fabricsim.collectives.nccl_env import nccl_env
    >>> from fabricsim.scenario import load_scenario_text
    >>> sc = load_scenario_text("collective: {env: {NCCL_ALGO: Ring, NCCL_PROTO: LL}}")
    >>> job = bench_job(sc, env=nccl_env({"NCCL_ALGO": "Tree"}))
    >>> dict(job.env.variables)
    {'NCCL_ALGO': 'Tree', 'NCCL_PROTO': 'LL'}
    >>> job.env_replaced[0]
    "NCCL_ALGO=Tree in the environment replaces the scenario's NCCL_ALGO: Ring"
    """
    from fabricsim.backends.registry import BACKENDS
    from fabricsim.collectives.tuner import SELECTIONS, check_collective

    spec = sc.collective or DEFAULT_SWEEP
    name = check_collective(collective or spec.collective)
    shell = env
    # the shell's variables (bench) over the scenario's, read as one environment
    replaced = tuple(f"{k}={v} in the environment replaces the scenario's {k}: "
                     f"{spec.env[k]}" for k, v in (env.variables if env else {}).items()
                     if k in spec.env and spec.env[k].strip() != v)
    env = section_env(name, spec.env, forced=bool(algos or spec.algo), shell=env)
    dtype = datatype or spec.datatype
    if dtype not in DATATYPES:
        raise unknown("datatype", dtype, DATATYPES, field="collective.datatype")
    red = op or spec.op
    if red not in REDOPS:
        raise unknown("reduction op", red, REDOPS, field="collective.op")
    how = select or spec.select
    if how not in SELECTIONS:
        raise unknown("selection", how, SELECTIONS, field="collective.select")
    be = backend or spec.backend
    if be not in BACKENDS:
        raise unknown("backend", be, BACKENDS, field="collective.backend")
    if sizes is None:
        sizes = tuple(bench_sizes(int(spec.minbytes), int(spec.maxbytes),
                                  float(spec.stepfactor), field_name="collective.stepfactor"))
    release = spec.nccl_version if nccl_version is None else nccl_version
    if release is not None:
        from fabricsim.collectives.nccl_model import release_name

        try:
            release = release_name(release)
        except ConfigError as e:
            raise ConfigError(e.message, field="--nccl-version (collective.nccl_version)"
                              ) from None
    faults = Faults.of(sc)
    if (faults or time_limit_s is not None or flow_precision) and be != "flow":
        what = f"the scenario's {faults.describe()}" if faults else (
            "--time-limit" if time_limit_s is not None else "--flow-precision")
        raise ConfigError(f"{what} need(s) the flow backend; run with --backend flow "
                          f"(or backend: flow in collective:), got {be}",
                          field="collective.backend")
    chosen: tuple[str | None, ...] = tuple(algos) or ((spec.algo,) if spec.algo else (None,))
    cluster = Cluster.of(sc).with_nccl(env)
    return CollectiveBench(
        cluster=cluster, collective=name, sizes=tuple(sizes), datatype=dtype, op=red,
        algos=chosen, every_algorithm=every_algorithm, proto=proto or spec.proto,
        select=how, backend=be, ranks=_ranks(spec.ranks),
        gpus_per_thread=spec.gpus_per_thread if gpus_per_thread is None else gpus_per_thread,
        env=env, env_replaced=replaced, env_from_section=tuple(
            k for k in spec.env if k not in (shell.variables if shell else {})),
        faults=faults, time_limit_s=time_limit_s,
        root=spec.root if root is None else root,
        agg_iters=spec.agg_iters if agg_iters is None else agg_iters,
        flow_precision=flow_precision, nccl_version=release)


def _best(fabric: Fabric, coll: str, size: int, algos: list[str | None],
          protos: list[str | None], gpus_per_thread: int, ranks: list[int] | None,
          channels: int | None = None, select: str = "nccl",
          nccl_version: str | None = None, plugin_tuner: bool = True,
          back_to_back: bool = True, nvls_channels: int | None = None) -> Any:
    """The allowed (algorithm, protocol) at ``size`` the tuner picks (``None`` in
    ``algos``/``protos``: any): by NCCL's cost model, or the fastest (``select``); timed
    per operation of many issued back to back, as nccl-tests times them (broadcast and
    reduce overlap: ``Tuner.choose``)."""
    from fabricsim.collectives.tuner import default_tuner

    return default_tuner(fabric, select).choose_among(
        fabric, coll, size, ranks, algos, protos, channels, gpus_per_thread=gpus_per_thread,
        nccl_version=nccl_version, plugin_tuner=plugin_tuner, back_to_back=back_to_back,
        nvls_channels=nvls_channels)


def _sweep(job: CollectiveBench, fabric: Fabric, algo: str | None, backend: Any,
           on_size: Callable[[int, int, int], None] | None) -> list[BenchRow]:
    """The rows of one algorithm (``None``: NCCL's choice under the job's environment)."""
    from fabricsim.collectives import run_collective
    from fabricsim.collectives.accuracy import (
        band,
        choice_band,
        envelope_warning,
        local_warning,
    )
    from fabricsim.collectives.busbw import bandwidths
    from fabricsim.collectives.tuner import ROOTED_COLLECTIVES
    from fabricsim.protocols import PROTOCOL_LABELS, PROTOCOLS

    coll, env = job.collective, job.env
    algos, protos = env.choices(coll, algo, job.proto)
    ranks = list(job.ranks) if job.ranks else None
    group = job.group_on(fabric)  # the ranks checked against the cluster, once
    channels, nvls = job.channels_on(group)
    if channels is not None and job.backend != "analytic" and group.servers > 1:
        named = env.channel_settings()
        raise ConfigError(f"{named} across servers: honoured by the analytic backend; the "
                          "flow and packet backends run the model's own channels there "
                          "(inside one server, where a limit caps a ring's spread, every "
                          "backend gives the same answer): unset it (or drop it from the "
                          "scenario's collective.env) or use --backend analytic",
                          field=named.split("=")[0])
    tsize = DATATYPES[job.datatype]
    n = group.n
    align = tsize * (n if coll in ("all_gather", "reduce_scatter", "alltoall") else 1)
    reduces = coll in ("all_reduce", "reduce_scatter", "reduce")
    servers = group.servers
    rows = []
    for i, s in enumerate(job.sizes):
        size = (s // align) * align
        if on_size is not None:
            on_size(i, len(job.sizes), size)
        if job.backend == "analytic":
            c = _best(fabric, coll, size, algos, protos, job.gpus_per_thread, ranks,
                      channels, job.select, job.nccl_version, env.plugin_tuner,
                      nvls_channels=nvls)
            t, alg_name, pr = c.time, c.algorithm, c.protocol
        else:
            if len(algos) > 1 or len(protos) > 1 or job.select != "nccl":
                c = _best(fabric, coll, size, algos, protos, job.gpus_per_thread, ranks,
                          channels, select=job.select, nccl_version=job.nccl_version,
                          plugin_tuner=env.plugin_tuner, nvls_channels=nvls)
                a_run, p_run = c.algorithm, c.protocol
            else:
                a_run, p_run = algos[0], protos[0]
            r = run_collective(fabric, coll, size, ranks, algo=a_run, proto=p_run,
                               backend=backend, channels=channels, nvls_channels=nvls)
            t, alg_name, pr = r.time, r.algorithm, r.protocol
            if coll in ROOTED_COLLECTIVES:  # back to back, rooted chains overlap: this
                # backend's one operation, by the share the analytic model keeps of it
                one, many = (_best(fabric, coll, size, [alg_name], [pr], 1, ranks,
                                   nccl_version=job.nccl_version, back_to_back=b).time
                             for b in (False, True))
                t *= many / one if one > 0 else 1.0
            if pr in PROTOCOLS:  # -g: the host's issue time, as the analytic choice has it
                t = max(t, PROTOCOLS[pr].host_floor(job.gpus_per_thread, fabric))
        if job.agg_iters > 1:  # one launch shared by the group's operations
            t -= PROTOCOLS[pr].launch * (1.0 - 1.0 / job.agg_iters) if pr in PROTOCOLS \
                else 0.0
        alg, bus = bandwidths(coll, size, t, n)
        b = band(fabric, coll, size, servers)
        cb = choice_band(fabric, coll, size, alg_name, pr, servers)
        rows.append(BenchRow(size_bytes=size, count=_count(coll, size, tsize, n),
                             type=job.datatype, redop=job.op if reduces else "none",
                             root=job.root if coll in ("broadcast", "reduce") else -1,
                             time_us=t * 1e6, algbw_gbps=alg / 1e9, busbw_gbps=bus / 1e9,
                             algorithm=alg_name, protocol=PROTOCOL_LABELS.get(pr, pr),
                             band=b.median, band_group=b.group,
                             choice_band=cb.median if cb else 0.0,
                             choice_group=cb.group if cb else "",
                             envelope=envelope_warning(fabric, [size], servers) or "",
                             local=local_warning(fabric, coll, size, servers) or ""))
    return rows


@dataclass(frozen=True)
class BenchReport:
    """The sweep's rows per algorithm asked for (``None``: NCCL's choice), and the
    algorithms that could not run (with every_algorithm), each with the reason."""

    job: CollectiveBench
    rows: dict[str | None, list[BenchRow]]
    skipped: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    kind: str = "bench"
    #: ``NCCL_PROTO`` the cluster's network plugin set, where the user set none (``""``).
    plugin_proto: str = ""
    #: What the model charges this run for its placement, in sentences (:func:`run_notes`).
    notes: tuple[str, ...] = ()
    #: A known slowdown of the NCCL release whose choice this is, where the algorithms
    #: that ran meet it and the model does not include it (``""``: none;
    #: :func:`~fabricsim.collectives.nccl_model.known_issue_note`).
    known_issue: str = ""
    #: A user's channel limit the model leaves out for what ran inside one server (``""``:
    #: none; :meth:`~fabricsim.collectives.nccl_env.NcclEnv.channels_note`).
    channels_note: str = ""

    @property
    def warnings(self) -> list[str]:
        """:attr:`run_warnings`, then the rows' own: sizes no published measurement
        covers, and where the published rows nearest the question lean further than its
        band (each row carries these as its ``envelope`` and ``local`` fields)."""
        out = self.run_warnings
        out += sorted({r.envelope for rows in self.rows.values() for r in rows
                       if r.envelope})
        # in the order of the sizes they were given for (one per band of sizes that leans)
        out += list(dict.fromkeys(r.local for rows in self.rows.values() for r in rows
                                  if r.local))
        return out

    @property
    def run_warnings(self) -> list[str]:
        """The run's own warnings, which no row carries: algorithms that cannot run here,
        a selection with nothing left to choose, a plugin's protocol, NCCL variables
        without effect, a release answered with another's tables."""
        out = [f"{a} cannot run here: {why}" for a, why in self.skipped.items()]
        if self.job.select != "nccl" and self.job.proto is not None \
                and None not in self.job.algos:
            out.append(f"select {self.job.select}: without effect, the algorithm and the "
                       f"protocol are both forced (--algo, --proto): one pair runs")
        env = self.job.env
        out += self.job.env_replaced
        if self.plugin_proto:
            from fabricsim.protocols import PROTOCOL_LABELS

            out.append(f"protocol {PROTOCOL_LABELS.get(self.plugin_proto, self.plugin_proto)} "
                       f"only: the network plugin sets NCCL_PROTO={self.plugin_proto} (AWS's "
                       "EFA plugin, where the EFA device does not deliver 128-byte blocks "
                       "in order); --proto or NCCL_PROTO overrides it")
        if env.no_effect:
            out.append(f"{', '.join(env.no_effect)}: set, without effect on time")
        if env.as_modelled:
            out.append(f"{', '.join(env.as_modelled)}: set to what the model does already")
        if note := env.check_p2p(self.job.collective):
            out.append(note)
        if not env.plugin_tuner:
            out.append("OFI_NCCL_TUNER_TYPE=Internal: NCCL's own model picks the algorithm "
                       "and protocol where AWS's EFA plugin would (p5, p5en, p6 from three "
                       "instances on)")
        if note := env.nvls_note([r.algorithm for rows in self.rows.values() for r in rows]):
            out.append(note)
        if self.job.select == "nccl":
            from fabricsim.collectives.nccl_model import release_note

            note = release_note(self.job.nccl_version)
            if note:
                out.append(note)
        if self.known_issue:
            out.append(self.known_issue)
        if self.channels_note:
            out.append(self.channels_note)
        return out

    def accuracy(self) -> list[dict[str, Any]]:
        """The held-out error band of each accuracy group the rows fall in, with its
        figures (:class:`fabricsim.collectives.accuracy.Band`) and which way it leans
        (``lean``, :meth:`~fabricsim.collectives.accuracy.Band.lean`): first the groups
        by scope (``"by": "scope"``), then those of NCCL's choice (``"by": "choice"``)."""
        from fabricsim.collectives.accuracy import Band, heldout

        table = heldout()
        rows = [r for rs in self.rows.values() for r in rs]
        out = []
        for by, key, col in (("scope", "groups", "band_group"),
                             ("choice", "by_choice", "choice_group")):
            groups = table.get(key, {})
            seen = dict.fromkeys(getattr(r, col) for r in rows)
            out += [{"group": g, "by": by, **groups[g], "lean": Band.of(g, groups[g]).lean()}
                    for g in seen if g in groups]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every algorithm's curve (``auto``: NCCL's choice), a column per figure, and
        what was skipped."""
        return {"collective": self.job.collective, "gpus": self.gpus,
                "backend": self.job.backend,
                "curves": [{"name": a or "auto", "sizes": [r.size_bytes for r in rows],
                            "time_us": [r.time_us for r in rows],
                            "algbw_gbps": [r.algbw_gbps for r in rows],
                            "busbw_gbps": [r.busbw_gbps for r in rows],
                            "choice": [f"{r.algorithm}/{r.protocol}".lower() for r in rows],
                            "band": [r.band for r in rows],
                            "band_group": [r.band_group for r in rows],
                            "choice_band": [r.choice_band for r in rows],
                            "choice_group": [r.choice_group for r in rows]}
                           for a, rows in self.rows.items()],
                "accuracy": self.accuracy(),
                "skipped": dict(self.skipped), "warnings": self.warnings,
                "notes": list(self.notes), "nccl_env": dict(self.job.env.variables)}

    def limit(self, fabric: Fabric) -> str:
        """Why the largest size of the first curve takes the time it does: the busiest
        link of its schedule on ``fabric`` (the analytic backend), its class and
        utilisation, and on Ethernet's hashed ECMP what spreads flows over uplinks.
        Empty where the sweep ran on another backend."""
        from fabricsim.collectives import run_collective
        from fabricsim.collectives.registry import Group

        if self.job.backend != "analytic":
            return ""
        r = next(iter(self.rows.values()))[-1]
        if r.size_bytes <= 0:
            return ""
        ranks = list(self.job.ranks) if self.job.ranks else None
        channels, nvls = self.job.channels_on(Group.of(fabric, ranks))
        res = run_collective(fabric, self.job.collective, r.size_bytes, ranks,
                             algo=r.algorithm, proto=r.protocol.lower(),
                             channels=channels, nvls_channels=nvls).result
        top = res.top_links(fabric, 1)
        if not top:
            return ""
        link = top[0]
        if res.extra.get("limited_by") == "kernels":  # the kernels' own rate
            return (f"{r.size_bytes:,} B ({r.algorithm}/{r.protocol}) is limited by the "
                    f"algorithm's kernels ({self._kernel_bound(fabric, r)}), not by links: "
                    f"the busiest, {link.name}, is at {link.utilization:.0%} of its "
                    f"capacity")
        out = (f"{r.size_bytes:,} B ({r.algorithm}/{r.protocol}) is limited by "
               f"{link.kind} links, the busiest {link.name} at {link.utilization:.0%} of "
               f"its capacity")
        ex = res.extra
        if ex.get("channels"):
            full = f"{ex['channels_full_bytes']:,} B"
            out += (f"; NCCL runs this size on {ex['channels_active']} of its "
                    f"{ex['channels']} channels")
            out += (f" under {self.job.env.channel_settings()} (at most "
                    f"{ex['channels_limit']}, from "
                    f"{full}), each moving its slice at one channel's share of the links"
                    if ex.get("channels_limit") else
                    f", each moving its larger slice at one channel's share of the links "
                    f"(all of them from {full})")
        share = fabric.info.nic_sustained_share
        if share < 1.0 and _net_class(link.kind):
            out += (f"; the NICs are measured to carry at most {share:.0%} of their line "
                    f"rate under NCCL's traffic (the NIC's sustained_share): that is this "
                    f"link's ceiling")
        if link.kind in ("leaf-spine", "spine-core") and fabric.info.transport == "roce":
            out += ("; on Ethernet each flow hashes onto one uplink (ECMP), so several share "
                    "one while others idle: --routing adaptive (Spectrum-X, UEC spraying) "
                    "spreads them"
                    + ("" if fabric.info.qps >= MAX_QPS else
                       ", and so do more queue pairs per connection "
                       + (f"than the {fabric.info.qps} set " if fabric.info.qps > 1 else "")
                       + "(NCCL_IB_QPS_PER_CONNECTION)"))
        return out

    def _kernel_bound(self, fabric: Fabric, r: Any) -> str:
        """Which of the kernels' own bounds (:meth:`Schedule.kernel_floor
        <fabricsim.schedule.Schedule.kernel_floor>`) sets the time of row ``r``, in words."""
        from fabricsim.backends.base import kernel_bounds
        from fabricsim.collectives import build_schedule
        from fabricsim.collectives.registry import Group
        from fabricsim.protocols import PROTOCOLS

        proto = PROTOCOLS.get(r.protocol.lower())
        ranks = list(self.job.ranks) if self.job.ranks else None
        channels, nvls = self.job.channels_on(Group.of(fabric, ranks))
        sched = build_schedule(fabric, self.job.collective, r.size_bytes, ranks,
                               algo=r.algorithm, proto=r.protocol.lower(),
                               channels=channels, nvls_channels=nvls)
        bounds = kernel_bounds(sched, proto)
        if not bounds:
            return "their own rate"
        least = min(bounds, key=lambda k: bounds[k])
        if least == "tree_channels":
            return (f"under {r.protocol} at most {bounds[least] / sched.tree_channels / 1e9:g} "
                    f"GB/s a tree channel between servers, fitted on published runs")
        if least == "copy_warps":
            return (f"their {sched.copy_warps} copy warps at "
                    f"{bounds[least] / sched.copy_warps / 1e9:g} GB/s each, the rate fitted "
                    f"on published Blackwell runs")
        if least == "nvls_channels":
            per = proto.nvlstree_channel_rate / 1e9 if proto is not None else 0.0
            return (f"their {sched.nvls_channels} NVLS channels at {per:g} GB/s of bus "
                    f"bandwidth each from 4 servers on (64 KiB chunks), the rate fitted on "
                    f"published runs")
        return "their own rate per channel, NCCL's figure"

    def headroom(self, fabric: Fabric, at_least: float = 1.1) -> str:
        """Where NCCL's own choice (the auto curve, nothing forced, analytic backend) is
        at least ``at_least`` times slower than the fastest pair by fabricsim's model: the
        size where the gap is largest, both pairs and the factor ("" where there is no
        such size, or the sweep is not NCCL's choice).

        >>> from fabricsim.scenario import load_scenario_text
        >>> sc = load_scenario_text("cluster: {system: dgx-a100, nodes: 2}\\n"
        ...                         "collective: {minbytes: 16M, maxbytes: 16M}")
        >>> job = bench_job(sc)
        >>> fab = job.cluster.build()
        >>> run_bench(job, fab).headroom(fab)[:60]
        "16,777,216 B: NCCL's choice ring/LL128 takes 1.14x the time "
        """
        from fabricsim.collectives.tuner import default_tuner

        rows = self.rows.get(None)
        if (not rows or self.job.backend != "analytic" or self.job.select != "nccl"
                or self.job.proto is not None or self.job.env.restricts):
            return ""
        from fabricsim.collectives.registry import Group

        fastest = default_tuner(fabric, "fastest")
        ranks = list(self.job.ranks) if self.job.ranks else None
        # under the same channel limit as NCCL's choice ran
        channels, nvls = self.job.channels_on(Group.of(fabric, ranks))
        worst: tuple[float, BenchRow, Any] | None = None
        for r in rows:
            f = fastest.choose(fabric, self.job.collective, r.size_bytes, ranks,
                               channels=channels, gpus_per_thread=self.job.gpus_per_thread,
                               back_to_back=True, nvls_channels=nvls)
            gap = r.time_us / max(f.time * 1e6, 1e-12)
            if gap >= at_least and (worst is None or gap > worst[0]):
                worst = (gap, r, f)
        if worst is None:
            return ""
        gap, r, f = worst
        from fabricsim.protocols import PROTOCOL_LABELS

        return (f"{r.size_bytes:,} B: NCCL's choice {r.algorithm}/{r.protocol} takes "
                f"{gap:.2f}x the time this model gives {f.algorithm}/"
                f"{PROTOCOL_LABELS.get(f.protocol, f.protocol)} (--select fastest; on a "
                f"real cluster try NCCL_ALGO/NCCL_PROTO)")

    def to_row(self) -> dict[str, Any]:
        """The largest size of the first algorithm asked for (the figures a sweep of
        designs keeps)."""
        r = next(iter(self.rows.values()))[-1]
        return {"gpus": self.gpus, "size_bytes": r.size_bytes, "time_us": r.time_us,
                "algbw_gbps": r.algbw_gbps, "busbw_gbps": r.busbw_gbps,
                "algorithm": r.algorithm, "protocol": r.protocol}


def run_bench(job: CollectiveBench, fabric: Fabric, progress: Progress = quiet,
              on_size: Callable[[int, int, int], None] | None = None) -> BenchReport:
    """Run ``job``'s sweep on ``fabric`` (its cluster, built): every algorithm asked for,
    then (with ``every_algorithm``) every other one that runs the collective."""
    from fabricsim.collectives import ALGORITHMS, Group
    from fabricsim.collectives.nccl_model import known_issue_note
    from fabricsim.protocols import tuning_hardware

    n_ranks = len(job.ranks) if job.ranks else fabric.n_gpus
    if job.root >= n_ranks:
        raise ConfigError(f"root {job.root} is not a rank of this run (0..{n_ranks - 1})",
                          field="-r/--root (collective.root)")
    if fabric.n_gpus < 2:
        raise ConfigError(f"a collective moves data between GPUs and this cluster has "
                          f"{fabric.n_gpus}; give --nodes 2 or --gpus-per-node 2 or more",
                          field="cluster.nodes")
    from fabricsim.catalog import get_catalog

    cat = get_catalog()
    if fabric.info.gpu in cat.gpus:  # the same rule a scenario's collective: obeys
        mem = float(cat.gpu(fabric.info.gpu).memory_bytes)
        if max(job.sizes) > mem:
            raise ConfigError(f"{max(job.sizes) / 2**30:.3g} GiB is more than a "
                              f"{fabric.info.gpu}'s {mem / 2**30:.3g} GiB: a collective's buffer "
                              f"lives in GPU memory; give a smaller -e/--maxbytes",
                              field="collective.maxbytes")
    per_server = fabric.info.gpus_per_server
    g = job.gpus_per_thread
    if g > per_server or per_server % g:
        raise ConfigError(f"-g {g}: one process drives GPUs of its own server, and "
                          f"{fabric.info.system} servers have {per_server}; give a -g that "
                          f"divides {per_server}",
                          field="--ngpus (collective.gpus_per_thread)")
    backend: Any = job.backend
    if job.faults or job.time_limit_s is not None or job.flow_precision:
        from fabricsim.backends.flow import FlowBackend

        backend = FlowBackend(faults=list(job.faults.faults),
                              background=list(job.faults.background), seed=job.faults.seed,
                              time_limit_s=job.time_limit_s, precision=job.flow_precision)
    names: list[str | None] = list(job.algos)
    if job.every_algorithm:
        names += [a for a, alg in ALGORITHMS.items()
                  if job.collective in alg.collectives and a not in names]
    rows: dict[str | None, list[BenchRow]] = {}
    skipped: dict[str, str] = {}
    for i, a in enumerate(names):
        progress(i / len(names), f"{job.collective} with {a or 'the tuner'}")
        try:
            rows[a] = _sweep(job, fabric, a, backend, on_size)
        except FabricsimError as e:  # an algorithm that cannot run here, beside the asked
            if not job.every_algorithm or a in job.algos:
                raise
            cause = e.__cause__ if isinstance(e.__cause__, FabricsimError) else e
            skipped[str(a)] = cause.message
    forced = fabric.info.plugin_proto if job.proto is None \
        and job.env.protocol_set(job.collective) is None else ""
    notes = run_notes(fabric, job.ranks, job.env.plugin_tuner)
    alone = _alone_note(job, fabric, rows)
    ran = [r.algorithm for rs in rows.values() for r in rs]
    issue = known_issue_note(job.nccl_version, tuning_hardware(fabric)[1],
                             fabric.info.servers, ran)
    servers = Group.of(fabric, list(job.ranks) if job.ranks else None).servers
    return BenchReport(job=job, rows=rows, skipped=skipped,
                       gpus=len(job.ranks) if job.ranks else fabric.n_gpus,
                       plugin_proto=forced, notes=(*notes, alone) if alone else notes,
                       known_issue=issue,
                       channels_note=job.env.channels_note(servers, job.collective, [
                           a for a in ran if _nccl_runs(a)]))


def _nccl_runs(algorithm: str) -> bool:
    """Whether NCCL itself runs ``algorithm`` (not one of the model's own alternatives,
    such as halving-doubling, nor XLA's).

    >>> _nccl_runs("ring"), _nccl_runs("halving_doubling")
    (True, False)
    """
    from fabricsim.collectives.registry import ALGORITHMS

    a = ALGORITHMS.get(algorithm)
    return a is not None and a.auto and a.runtime == "nccl"


def _alone_note(job: CollectiveBench, fabric: Fabric,
                rows: dict[str | None, list[BenchRow]]) -> str:
    """For a broadcast or reduce on the analytic backend, what one operation alone takes
    at the sweep's largest size (with the job's NCCL channel bounds), beside the time per
    operation of many back to back that the rows give (as nccl-tests times them;
    ``Tuner.choose``'s ``back_to_back``); ``""`` otherwise."""
    from fabricsim.collectives import Group
    from fabricsim.collectives.tuner import ROOTED_COLLECTIVES
    from fabricsim.protocols import PROTOCOLS

    curve = next(iter(rows.values()), [])
    if job.collective not in ROOTED_COLLECTIVES or not curve or job.backend != "analytic":
        return ""
    r = curve[-1]
    proto = r.protocol.lower()
    if proto not in PROTOCOLS:
        return ""
    ranks = list(job.ranks) if job.ranks else None
    one = _best(fabric, job.collective, r.size_bytes, [r.algorithm], [proto],
                job.gpus_per_thread, ranks, job.env.channels_of(Group.of(fabric, ranks)),
                nccl_version=job.nccl_version, back_to_back=False).time * 1e6
    return (f"{job.collective} is timed as nccl-tests runs it, operations back to back, "
            f"which overlap down its chain from the root: each costs one rank's share. "
            f"One alone (an application waiting for a single {job.collective}) takes "
            f"{one:,.1f} µs at {r.size_bytes:,} B, {one / max(r.time_us, 1e-12):.1f}x the "
            f"{r.time_us:,.1f} µs above")


def _net_class(kind: str) -> bool:
    """Whether links of ``kind`` (a :class:`~fabricsim.fabric.LinkKind` label) are of the
    ``net`` class, whose rate a NIC's measured share caps (``Protocol.eff_array``).

    >>> _net_class("nic-leaf"), _net_class("nvlink"), _net_class("pcie")
    (True, False, False)
    """
    from fabricsim.fabric.kinds import LINK_CLASSES, LinkKind, link_class_of_kind

    cls = link_class_of_kind()
    return any(k.label == kind and LINK_CLASSES[cls[k]] == "net" for k in LinkKind)


def run_notes(fabric: Fabric, ranks: Sequence[int] | None = None,
              plugin_tuner: bool = True) -> tuple[str, ...]:
    """What the model charges a collective over ``ranks`` (default: every GPU) of
    ``fabric`` for where they sit, in sentences: where they span several hosts of one
    NVLink domain (a GB200 or GB300 rack's compute trays, joined by multi-node NVLink),
    the extra time every NVLink and NVLS step pays (``Protocol.mnnvl_step``); and where
    the network plugin's tuner picks the algorithm (:func:`plugin_tuner_note`; not with
    ``plugin_tuner`` off, ``OFI_NCCL_TUNER_TYPE=Internal``).

    >>> from fabricsim.fabric import build_cluster
    >>> rack = build_cluster("gb200-nvl72", 1)
    >>> run_notes(rack, range(4)), len(run_notes(rack, range(8)))
    ((), 1)
    >>> print(run_notes(rack)[0][:68])
    the 72 GPUs sit on 18 hosts of one NVLink domain (4 GPUs to a host):
    """
    from fabricsim.collectives import Group
    from fabricsim.protocols import PROTOCOLS

    group = Group.of(fabric, None if ranks is None else list(ranks))
    notes = []
    if group.spans_hosts:
        per = fabric.info.gpus_per_host
        hosts = np.unique(fabric.node_local[group.nodes] // per
                          + fabric.node_server[group.nodes] * (fabric.info.gpus_per_server // per))
        domains = "one NVLink domain" if group.servers == 1 else \
            f"{group.servers} NVLink domains"
        notes.append(f"the {group.n} GPUs sit on {hosts.size} hosts of {domains} ({per} GPUs "
                     f"to a host): NCCL joins them by multi-node NVLink, and every NVLink and "
                     f"NVLS step costs {PROTOCOLS['simple'].mnnvl_step * 1e6:g} µs more "
                     f"than on one board, and an NVLS pipeline fills "
                     f"{PROTOCOLS['simple'].mnnvl_nvls_stages:g} chunk stages more (both "
                     f"fitted on published GB200/GB300 runs)")
    plugin = plugin_tuner_note(fabric, group) if plugin_tuner else ""
    if plugin:
        notes.append(plugin)
    return tuple(notes)


def plugin_tuner_note(fabric: Fabric, group: Group) -> str:
    """A sentence where the NICs' network plugin, not NCCL, picks the algorithm and protocol
    of ``group``'s collectives (``""``: NCCL does).

    >>> from fabricsim.collectives import Group
    >>> from fabricsim.fabric import build_cluster
    >>> print(plugin_tuner_note(f := build_cluster("aws-p5", 4), Group.of(f))[:74])
    AWS's EFA plugin picks the algorithm and protocol of all_reduce over these
    >>> plugin_tuner_note(f := build_cluster("aws-p5", 2), Group.of(f))
    ''
    """
    from fabricsim.collectives.plugin_tuner import MIN_SERVERS, region_tuner

    tuner = region_tuner(fabric.info.nccl_tuner_regions) if fabric.info.nccl_tuner_regions \
        else None
    if tuner is None or group.servers < MIN_SERVERS or group.n % group.servers:
        return ""
    colls = [c for (ppn, c) in tuner.regions if ppn == group.n // group.servers]
    if not colls:
        return ""
    return (f"AWS's EFA plugin picks the algorithm and protocol of {', '.join(colls)} over "
            f"these {group.servers} instances from the regions it measured (aws-ofi-nccl "
            f"{tuner.release}, region tuner; NCCL decides where they do not reach)")
