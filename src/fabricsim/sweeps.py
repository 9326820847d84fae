"""Design-space sweeps: many scenarios, one flat row each, kept in a DuckDB file.

A sweep is a base scenario plus axes — any scenario field, by its dotted name
(``cluster.fabric``, ``cluster.nodes``, ``training.tp``, ``collective.maxbytes``) — run as
a grid (every combination), ``samples`` random combinations, or a Latin hypercube of
``samples`` points (``mode: lhs``: each axis's values equally represented). Every point is the base
with its values set, validated as a scenario and keyed by a hash of that resolved
scenario; a point already in the store is not run again, so a killed sweep continues where
it stopped. Points run in a local process pool (``workers``) and are written as each
finishes; a point that fails is stored with its error and the sweep goes on.

Each point runs the job of the sweep's ``kind`` (any kind of :data:`fabricsim.jobs.KINDS`:
``train``, ``bench``, ``infer``, ``simulate``, ``packet`` ...), exactly as ``fabricsim
<kind> SCENARIO`` runs it, and keeps its report's ``to_row()``: for ``train`` the step's
throughput, MFU, memory, breakdown, exposed communication and its cost, goodput; for
``bench`` the collective at the sweep's largest size (time, algorithm and bus bandwidth,
the algorithm and protocol chosen). Rows have every axis as a column and every figure in
a typed column with its unit in the name; a point that fails keeps its reason.

Example
-------
>>> spec = {"name": "demo", "kind": "bench",
...         "scenario": {"cluster": {"system": "dgx-h100", "nodes": 2},
...                      "collective": {"collective": "all_reduce", "maxbytes": "1GiB"}},
...         "axes": {"cluster.fabric": ["ib-ndr", "roce-400g"]}}
>>> pts = points(SweepSpec.model_validate(spec))
>>> [p.values for p in pts]
[{'cluster.fabric': 'ib-ndr'}, {'cluster.fabric': 'roce-400g'}]
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field

from fabricsim._duckdb_meta import stamp_format
from fabricsim._strict import StrictModel, config_error
from fabricsim.errors import ConfigError, FabricsimError

if TYPE_CHECKING:
    from fabricsim.fabric import Fabric
    from fabricsim.jobs.common import Cluster

__all__ = ["STORE_VERSION", "FabricCache", "Point", "SweepSpec", "auto_workers", "chunks",
           "fabric_key",
           "load_sweep", "points", "read_results", "run_point", "run_sweep", "sweep_spec"]

#: Format of the results store; a store of another version is refused with a clear error.
STORE_VERSION = 1
#: Most points one sweep may have.
MAX_POINTS = 100_000
#: Results are written at least this often (seconds) and in batches of at most this many.
FLUSH_S = 2.0
FLUSH_ROWS = 2000
#: Figures stored as integers; every other number is a float, whatever type it came as,
#: so a column's type does not depend on which point was written first.
INT_FIGURES = frozenset({"gpus"})
#: Most points in one task of a pool or Ray (they share the task's start-up and Fabrics).
CHUNK_MAX = 256


class SweepSpec(StrictModel):
    """A sweep file: the base scenario (``base``: a file, ``scenario``: inline, merged
    over it), the axes, how to combine them, and what each point computes."""

    model_config = ConfigDict(extra="forbid")

    name: str = "sweep"
    kind: str = "train"
    base: str | None = None
    scenario: dict[str, Any] = Field(default_factory=dict)
    axes: dict[str, list[Any]] = Field(default_factory=dict)
    mode: Literal["grid", "random", "lhs"] = "grid"
    samples: int = Field(16, ge=1, le=MAX_POINTS)
    seed: int = 0


@dataclass(frozen=True)
class Point:
    """One combination: its axis values, resolved scenario (a mapping) and key; ``model``
    is the validated Scenario (reused when the point runs in this process)."""

    values: dict[str, Any]
    scenario: dict[str, Any]
    key: str
    model: Any = field(default=None, compare=False, repr=False)


def sweep_spec(data: Any, *, field_name: str = "SPEC") -> SweepSpec:
    """A SweepSpec from a mapping (a sweep file's contents); a ConfigError naming the
    field for anything else or an unknown or bad field.

    >>> sweep_spec({"axes": {"training.tp": [1, 2]}}).kind
    'train'
    >>> sweep_spec({"axis": {"training.tp": [1, 2]}})
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: axis: Extra inputs are not permitted
    >>> sweep_spec({"axes": {"training.tp": [1]}, "mode": "grid", "samples": 0})
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: samples: Input should be greater than or equal to 1, got 0
    """
    from pydantic import ValidationError

    if isinstance(data, SweepSpec):
        return data
    if not isinstance(data, dict):
        raise ConfigError("a sweep is a mapping (name, kind, base, scenario, axes, mode, "
                          f"samples, seed), got {type(data).__name__}", field=field_name)
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        raise config_error(e) from None


def load_sweep(path: Path) -> SweepSpec:
    """Read and check a sweep YAML file (see :func:`sweep_spec`)."""
    import yaml

    from fabricsim.scenario.loader import MAX_SCENARIO_BYTES, read_text_file

    text = read_text_file(path, MAX_SCENARIO_BYTES, "sweep file", "SPEC")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}", field="SPEC") from None
    return sweep_spec(data)


def _tree_copy(x: Any) -> Any:
    """A copy of a YAML-like tree (mappings and lists are copied, scalars shared): the
    base scenario, copied once per point, faster than copy.deepcopy."""
    if isinstance(x, dict):
        return {k: _tree_copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_tree_copy(v) for v in x]
    return copy.deepcopy(x) if not isinstance(x, str | int | float | bool | None) else x


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"axis {dotted!r}: {p!r} is not a section", field="axes")
    node[parts[-1]] = value


def _base(spec: SweepSpec, root: Path | None) -> dict[str, Any]:
    import yaml

    base: dict[str, Any] = {}
    if spec.base:
        from fabricsim.scenario.loader import MAX_SCENARIO_BYTES, read_text_file

        path = Path(spec.base)
        if not path.is_absolute() and root is not None:
            path = root / path
        text = read_text_file(path, MAX_SCENARIO_BYTES, "base scenario", "base")
        loaded = yaml.safe_load(text)
        if not isinstance(loaded, dict):
            raise ConfigError("the base scenario must be a mapping of sections", field="base")
        base = loaded
    out = copy.deepcopy(base)
    for k, v in spec.scenario.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


class _Checker:
    """Validates scenario mappings as :class:`Scenario`, the part other than ``training``
    once per distinct value: the scenario rules do not read the workload sections, so
    points that differ only in their training section share one validation (the section
    itself validated on its own). Raises pydantic's ValidationError or a ConfigError (a
    rule), as ``Scenario.model_validate`` does; what validation noticed (old field names)
    becomes the scenario's notes."""

    def __init__(self) -> None:
        self._checked: dict[str, Any] = {}

    def __call__(self, sc: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        from fabricsim.scenario.loader import noted
        from fabricsim.scenario.schema import Scenario
        from fabricsim.scenario.sections import TrainingSection

        training = sc.get("training")
        rest = json.dumps({k: v for k, v in sc.items() if k != "training"},
                          sort_keys=True, default=str)
        model = self._checked.get(rest)
        if model is not None and isinstance(training, dict) and \
                all(isinstance(k, str) for k in training):
            try:
                section, notes = noted(TrainingSection, training)
            except (ValidationError, ConfigError):
                pass  # validated whole below: its error names the field in the scenario
            else:
                return model.model_copy(update={"training": section}).with_notes(notes)
        whole, notes = noted(Scenario, sc)
        self._checked[rest] = whole.model_copy(update={"training": None})
        return whole.with_notes(notes)


#: The kinds whose jobs read a scenario's ``collective.env`` (NCCL's variables).
ENV_KINDS = ("bench", "simulate")


def kind_reads(kind: str) -> tuple[str, ...]:
    """Scenario sections a sweep of ``kind`` reads: an axis elsewhere would change
    nothing (the kind's :attr:`fabricsim.jobs.Kind.reads`)."""
    from fabricsim.jobs import kind_of

    return kind_of(kind).reads


def points(spec: SweepSpec, root: Path | None = None) -> list[Point]:
    """Every point of ``spec``, validated; raises ConfigError naming the axis for a field
    the scenario does not have or a value it refuses, and for an empty sweep."""
    from pydantic import ValidationError


    if not spec.axes:
        raise ConfigError("the sweep has no axes; give at least one, e.g. "
                          "axes: {cluster.fabric: [ib-ndr, roce-400g]}", field="axes")
    empty = [k for k, v in spec.axes.items() if not v]
    if empty:
        raise ConfigError(f"axis {empty[0]!r} has no values", field=f"axes.{empty[0]}")
    names = list(spec.axes)
    from fabricsim.jobs import KINDS

    reads = kind_reads(spec.kind)
    for n in names:
        if n.startswith("collective.env") and spec.kind not in ENV_KINDS:
            raise ConfigError(f"a {spec.kind} sweep does not read collective.env (NCCL's "
                              f"variables reach {' and '.join(ENV_KINDS)}): drop axis "
                              f"{n!r} or use kind: bench", field=f"axes.{n}")
        if n.split(".")[0] not in reads:
            other = next((k for k, kd in KINDS.items() if n.split(".")[0] in kd.reads), None)
            raise ConfigError(f"a {spec.kind} sweep reads {', '.join(reads)}; axis {n!r} "
                              f"would change nothing it computes: drop it"
                              + (f" or use kind: {other}" if other else ""),
                              field=f"axes.{n}")
    size = math.prod(len(v) for v in spec.axes.values())
    if spec.mode == "grid":
        if size > MAX_POINTS:
            raise ConfigError(f"the grid has {size:,} points; the limit is {MAX_POINTS:,}: "
                              "use mode: random with samples, or fewer values",
                              field="axes")
        combos = list(itertools.product(*(spec.axes[n] for n in names)))
    elif spec.mode == "random":
        rng = random.Random(spec.seed)
        combos = [tuple(rng.choice(spec.axes[n]) for n in names)
                  for _ in range(spec.samples)]
    else:  # Latin hypercube over the value indices: every value of an axis equally often
        from scipy.stats import qmc

        u = qmc.LatinHypercube(d=len(names), seed=spec.seed).random(spec.samples)
        combos = [tuple(spec.axes[n][min(int(x * len(spec.axes[n])), len(spec.axes[n]) - 1)]
                        for n, x in zip(names, row, strict=True)) for row in u]
    base = _base(spec, root)
    if spec.kind == "bench" and not base.get("collective") and not any(
            n.startswith("collective") for n in names):
        raise ConfigError("a bench sweep times the scenario's collective: give the base "
                          "scenario a collective: section (e.g. {collective: all_reduce, "
                          "maxbytes: 1GB})", field="collective")
    out: list[Point] = []
    seen: set[str] = set()
    check = _Checker()
    for combo in combos:
        sc = _tree_copy(base)
        values = dict(zip(names, combo, strict=True))
        for k, v in values.items():
            _set(sc, k, v)
        try:
            model = check(sc)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            axis = next((n for n in names if loc.startswith(n) or n.startswith(loc)), None)
            raise ConfigError(f"{err['msg']} ({loc})", field=f"axes.{axis}" if axis
                              else "scenario") from None
        except ConfigError as e:
            raise ConfigError(f"{e.message}", field=f"axes ({e.field})") from None
        try:  # the point's job, built up front: a value it refuses names the axis
            from fabricsim.jobs import job_from_scenario

            job_from_scenario(spec.kind, model)
        except ConfigError as e:
            axis = next((n for n in names if e.field and e.field.startswith(n)), None)
            raise ConfigError(e.message, field=f"axes.{axis}" if axis else e.field
                              ) from None
        key = hashlib.sha256(json.dumps({"kind": spec.kind, "scenario": sc},
                                        sort_keys=True, default=str).encode()).hexdigest()[:24]
        if key in seen:
            continue
        seen.add(key)
        out.append(Point(values=values, scenario=sc, key=key, model=model))
    return out


def _column(name: str) -> str:
    return name.replace(".", "__").replace("-", "_")


class FabricCache:
    """The Fabrics of the last few distinct clusters, for points that share one.

    Building a cluster and compiling its collectives is most of a training point's cost;
    points whose jobs run on the same cluster (its section, user-defined systems, and
    what the job adds to it, such as a bench's queue pairs from ``collective.env``) get
    the same Fabric (and so its cached collective models), which gives bit-identical
    figures. A sweep runs its points sorted by cluster, so a few entries suffice; one
    cache per run or task.

    >>> from fabricsim.jobs.common import Cluster
    >>> from fabricsim.scenario.cluster import ClusterSpec
    >>> cache = FabricCache()
    >>> a = Cluster(spec=ClusterSpec(system="dgx-h100", nodes=2))
    >>> cache.get(a) is cache.get(Cluster(spec=ClusterSpec(nodes=2, system="dgx-h100")))
    True
    """

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._fabrics: dict[str, Fabric] = {}

    def get(self, cluster: Cluster) -> Fabric:
        """The Fabric of ``cluster`` (a job's :class:`~fabricsim.jobs.common.Cluster`),
        built on first use."""
        key = json.dumps(cluster.model_dump(mode="json"), sort_keys=True, default=str)
        fab = self._fabrics.pop(key, None)
        if fab is None:
            fab = cluster.build()
            if len(self._fabrics) >= self.size:
                self._fabrics.pop(next(iter(self._fabrics)))
        self._fabrics[key] = fab
        return fab


def fabric_key(scenario: dict[str, Any]) -> str:
    """What the Fabric of ``scenario`` depends on: its cluster and systems sections."""
    return json.dumps([scenario.get("cluster"), scenario.get("systems")], sort_keys=True,
                      default=str)


def run_point(kind: str, scenario: dict[str, Any],
              fabrics: FabricCache | None = None) -> dict[str, Any]:
    """The figures of one point (flat, JSON-safe), or ``{"error": ...}``; ``fabrics``
    shares clusters between points (a fresh Fabric per point without it)."""
    from fabricsim.scenario.loader import validate_scenario

    try:
        sc = validate_scenario(scenario)
    except FabricsimError as e:
        return {"error": str(e)}
    return _figures(kind, sc, fabrics)


def _figures(kind: str, sc: Any, fabrics: FabricCache | None) -> dict[str, Any]:
    """:func:`run_point` of the validated Scenario ``sc``: the job of
    ``kind`` run as ``fabricsim <kind>`` runs it, its report's ``to_row()`` and its
    warnings (``warnings``, one text), or ``{"error": ...}`` saying why it failed."""
    from fabricsim import jobs

    try:
        job = jobs.job_from_scenario(kind, sc)
        fab = None if jobs.kind_of(kind).own_fabric else \
            (fabrics or FabricCache(1)).get(job.cluster)
        report = jobs.run(job, fab)
        out: dict[str, Any] = dict(report.to_row())
        if report.warnings:
            out["warnings"] = "; ".join(report.warnings)
        return out
    except FabricsimError as e:
        return {"error": str(e)}


def _connect(path: Path, *, read_only: bool) -> Any:
    """A DuckDB connection to ``path``, or a ConfigError saying why not (not a DuckDB
    file, in use by another process, a directory)."""
    import duckdb

    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"cannot open {str(path)!r} as a results store: {first}",
                          field="--store" if not read_only else "STORE") from None


class _Store:
    """The DuckDB file: one table ``points`` (a row per point) and ``meta``."""

    def __init__(self, path: Path) -> None:

        self.path = path
        self.db = _connect(path, read_only=False)
        tables = {r[0] for r in self.db.execute("SHOW TABLES").fetchall()}
        if tables and "meta" not in tables:
            self.db.close()
            raise ConfigError(f"{path} is a DuckDB file but not a fabricsim results store "
                              f"(tables: {', '.join(sorted(tables))}): use another --store "
                              "file", field="--store")
        other = stamp_format(self.db, "meta", "store_version", STORE_VERSION)
        if other is not None:
            self.db.close()
            raise ConfigError(f"{path} is a results store of format {other}; this fabricsim"
                              f" writes format {STORE_VERSION}: use another --store file",
                              field="--store")

    def done(self) -> set[str]:
        tables = {r[0] for r in self.db.execute("SHOW TABLES").fetchall()}
        if "points" not in tables:
            return set()
        return {r[0] for r in self.db.execute("SELECT point_key FROM points").fetchall()}

    def add(self, rows: list[dict[str, Any]]) -> None:
        import pandas as pd

        # a column no row of the batch has a value for says nothing and has no type
        df = pd.DataFrame(rows).dropna(axis=1, how="all")
        tables = {r[0] for r in self.db.execute("SHOW TABLES").fetchall()}
        self.db.register("incoming", df)
        try:
            if "points" not in tables:
                self.db.execute("CREATE TABLE points AS SELECT * FROM incoming")
                return
            have = {r[0] for r in self.db.execute("DESCRIBE points").fetchall()}
            types = {r[0]: r[1] for r in self.db.execute("DESCRIBE incoming").fetchall()}
            for col in df.columns:
                if col not in have:
                    self.db.execute(f'ALTER TABLE points ADD COLUMN "{col}" {types[col]}')
            self.db.execute("INSERT INTO points BY NAME SELECT * FROM incoming")
        finally:
            self.db.unregister("incoming")

    def close(self) -> None:
        self.db.close()


def _caster(values: list[Any]) -> Callable[[Any], Any]:
    """One column type per axis: int, float or bool when every value is one, else text
    (an axis of 0 and "fsdp" is stored as "0" and "fsdp")."""
    if all(isinstance(v, bool) for v in values):
        return bool
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return int
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return float
    return str


def _casters(spec: SweepSpec) -> dict[str, Callable[[Any], Any]]:
    return {k: _caster(v) for k, v in spec.axes.items()}


def _row(spec: SweepSpec, casters: dict[str, Callable[[Any], Any]], p: Point,
         figures: dict[str, Any], wall: float) -> dict[str, Any]:
    row: dict[str, Any] = {"point_key": p.key, "sweep": spec.name, "kind": spec.kind,
                           "status": "error" if "error" in figures else "ok",
                           "error": figures.get("error", ""), "wall_s": wall}
    row.update({f"in__{_column(k)}": casters[k](v) for k, v in p.values.items()})
    row.update({_column(k): float(v) if type(v) is int and k not in INT_FIGURES else v
                for k, v in figures.items() if k != "error"})
    return row


def _need_store() -> None:
    from fabricsim._extras import require

    require("duckdb", "store", "the sweep results store")
    require("pandas", "store", "sweep results as DataFrames")


def _warm(kind: str) -> None:
    """Import what a point needs and load the catalog: run in the parent before a pool
    forks (the workers inherit it) and as each worker's initializer (other start
    methods, Ray)."""
    import fabricsim.jobs  # noqa: F401
    from fabricsim.catalog import get_catalog

    get_catalog()


def _run_one(kind: str, scenario: dict[str, Any], fabrics: FabricCache,
             model: Any = None) -> tuple[dict[str, Any], float]:
    """One point's figures and wall time (``model``: its validated Scenario, if at hand).
    An error that is not the user's (a bug) is recorded with its type rather than raised,
    so one bad point cannot stop a long sweep."""
    t0 = time.perf_counter()
    try:
        figures = run_point(kind, scenario, fabrics) if model is None else \
            _figures(kind, model, fabrics)
    except Exception as e:  # stored with the point, see above
        figures = {"error": f"internal error ({type(e).__name__}: {e})"}
    return figures, time.perf_counter() - t0


def _work_chunk(kind: str, scenarios: list[dict[str, Any]]
                ) -> list[tuple[dict[str, Any], float]]:
    """A task: its points in order, sharing Fabrics and validations."""
    fabrics = FabricCache()
    check = _Checker()
    out = []
    for sc in scenarios:
        try:
            model = check(sc)
        except Exception:  # run_point validates again, and reports it
            model = None
        out.append(_run_one(kind, sc, fabrics, model))
    return out


def chunks(todo: list[Point], workers: int) -> list[list[Point]]:
    """``todo`` cut into tasks of one cluster each (its points share a Fabric), about 8
    per worker in all, at most :data:`CHUNK_MAX` points each; clusters in sorted order.

    >>> pts = [Point({}, {"cluster": {"nodes": n % 2}}, str(n)) for n in range(10)]
    >>> [[p.key for p in c] for c in chunks(pts, 1)]
    [['0', '2'], ['4', '6'], ['8'], ['1', '3'], ['5', '7'], ['9']]
    """
    groups: dict[str, list[Point]] = {}
    for p in todo:
        groups.setdefault(fabric_key(p.scenario), []).append(p)
    size = max(1, min(CHUNK_MAX, math.ceil(len(todo) / (8 * max(workers, 1)))))
    out: list[list[Point]] = []
    for key in sorted(groups):
        group = groups[key]
        out += [group[i:i + size] for i in range(0, len(group), size)]
    return out


def _pool_results(todo: list[Point], kind: str, workers: int
                  ) -> Iterator[tuple[Point, tuple[dict[str, Any], float]]]:
    """Run the points on a local process pool, a task per chunk; yield each
    (point, result) as its chunk completes."""
    _warm(kind)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_warm, initargs=(kind,))
    try:
        futs = {pool.submit(_work_chunk, kind, [p.scenario for p in c]): c
                for c in chunks(todo, workers)}
        for fut in as_completed(futs):
            yield from zip(futs[fut], fut.result(), strict=True)
    finally:  # also when the caller stops early (a time limit): drop what has not started
        pool.shutdown(wait=True, cancel_futures=True)


def _ray_results(todo: list[Point], kind: str, workers: int, address: str | None
                 ) -> Iterator[tuple[Point, tuple[dict[str, Any], float]]]:
    """Run the points as Ray tasks, a task per chunk; yield each (point, result) as its
    chunk completes."""
    from fabricsim._extras import require

    ray = require("ray", "ray", "running a sweep on Ray")
    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:
            kw["num_cpus"] = max(workers, 1)
        try:
            ray.init(address=address, **kw)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise ConfigError(f"cannot reach the Ray cluster at {address!r}: {e}",
                              field="--ray-address") from None
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", workers)))
        task = ray.remote(_work_chunk)
        pending = {task.remote(kind, [p.scenario for p in c]): c
                   for c in chunks(todo, cpus)}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield from zip(pending.pop(ref), ray.get(ref), strict=True)
    finally:
        if started:
            ray.shutdown()


#: Points per worker below which a process pool does not pay for its start-up (a pool
#: costs about a second; an analytic point a few milliseconds).
POINTS_PER_WORKER = 200


def auto_workers(n_points: int) -> int:
    """Workers for ``n_points`` when none are asked: one per CPU, but no more than one
    per :data:`POINTS_PER_WORKER` points (1 for small sweeps).

    >>> auto_workers(10), auto_workers(10_000) >= 1
    (1, True)
    """
    return max(1, min(os.cpu_count() or 1, n_points // POINTS_PER_WORKER))


def run_sweep(spec: SweepSpec, store: Path, *, workers: int | None = None,
              root: Path | None = None,
              progress: Callable[[int, int], None] | None = None,
              limit: int | None = None, ray: bool = False,
              ray_address: str | None = None,
              time_limit_s: float | None = None) -> dict[str, Any]:
    """Run every point of ``spec`` not yet in ``store``; returns counts (points, skipped
    as already done, run, failed) and ``reasons``: why the points run now failed, each
    reason with the number of points it stopped. ``limit`` stops after that many new points.
    ``workers`` (default: :func:`auto_workers` of the points to run; one per CPU with
    ``ray``) sets the local pool's size. ``time_limit_s`` stops taking results after
    that much wall time (the points being computed finish; what is done is stored, and
    the counts say ``stopped``: run again to go on). With
    ``ray`` the points run as Ray tasks (the ``ray`` extra): on the cluster at
    ``ray_address``, or on a local Ray instance of ``workers`` CPUs when it is ``None``;
    results are stored here as they come back, as with the local pool.

    Points run sorted by cluster, those sharing one on the same Fabric
    (:class:`FabricCache`); on a pool or Ray they go in tasks of several points
    (:func:`chunks`), so a worker pays the start-up and a cluster's build once per task.
    """
    _need_store()
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be at least 1, got {workers}", field="workers")
    pts = points(spec, root)
    db = _Store(store)
    try:
        done = db.done()
        todo = [p for p in pts if p.key not in done]
        if limit is not None:
            todo = todo[:limit]
        if workers is None:
            workers = (os.cpu_count() or 1) if ray else auto_workers(len(todo))
        casters = _casters(spec)
        failed = 0
        reasons: dict[str, int] = {}
        finished = 0
        buffer: list[dict[str, Any]] = []
        last = time.perf_counter()

        def record(p: Point, figures: dict[str, Any], wall: float) -> None:
            # rows are written in batches (every FLUSH_S seconds or FLUSH_ROWS rows): a
            # killed sweep recomputes at most the last batch, never stores a point twice
            nonlocal failed, finished, last
            buffer.append(_row(spec, casters, p, figures, wall))
            failed += "error" in figures
            if "error" in figures:
                reasons[figures["error"]] = reasons.get(figures["error"], 0) + 1
            finished += 1
            if len(buffer) >= FLUSH_ROWS or time.perf_counter() - last >= FLUSH_S:
                db.add(buffer)
                buffer.clear()
                last = time.perf_counter()
            if progress:
                progress(finished, len(todo))

        if progress:
            progress(0, len(todo))
        results: Iterator[tuple[Point, tuple[dict[str, Any], float]]]
        if ray:
            results = _ray_results(todo, spec.kind, workers, ray_address)
        elif workers <= 1 or len(todo) <= 1:
            fabrics = FabricCache()
            results = ((p, _run_one(spec.kind, p.scenario, fabrics, p.model))
                       for p in sorted(todo, key=lambda p: fabric_key(p.scenario)))
        else:
            results = _pool_results(todo, spec.kind, workers)
        t_end = None if time_limit_s is None else time.perf_counter() + time_limit_s
        stopped = 0
        for p, (figures, wall) in results:
            record(p, figures, wall)
            if t_end is not None and time.perf_counter() > t_end:
                stopped = 1
                break
        close = getattr(results, "close", None)
        if close is not None:
            close()  # a pool stops here: started tasks finish, the rest are dropped
        if buffer:
            db.add(buffer)
        return {"points": len(pts), "skipped": sum(p.key in done for p in pts),
                "run": finished, "failed": failed, "stopped": stopped,
                "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1]))}
    finally:
        db.close()


def read_results(store: Path, sql: str | None = None) -> Any:
    """The store's rows as a pandas DataFrame (``sql`` over table ``points``)."""
    _need_store()

    if not store.exists():
        raise ConfigError(f"results store {str(store)!r} does not exist", field="STORE")
    db = _connect(store, read_only=True)
    try:
        tables = {r[0] for r in db.execute("SHOW TABLES").fetchall()}
        got = db.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchone() \
            if "meta" in tables else None
        if got is None:
            raise ConfigError(f"{store} is not a fabricsim results store (no format "
                              "version in it)", field="STORE")
        if got[0] != str(STORE_VERSION):
            raise ConfigError(f"{store} is a results store of format {got[0]}; this "
                              f"fabricsim reads format {STORE_VERSION}: re-run the sweep "
                              "into a new store", field="STORE")
        if sql is None and "points" not in tables:  # a sweep that stored nothing yet
            import pandas as pd

            return pd.DataFrame()
        if sql is None:
            return db.execute("SELECT * FROM points ORDER BY sweep, point_key").df()
        return _bounded_query(db, sql)
    finally:
        db.close()


#: Most rows a ``--sql`` query may return (the rows become one table in memory).
MAX_QUERY_ROWS = 1_000_000
#: DuckDB's memory for one results query.
QUERY_MEMORY = "1GB"


def _bounded_query(db: Any, sql: str) -> Any:
    """``sql`` run read-only and bounded: one query (it is run as a subquery, so a
    statement that is not a query does not parse), no file access (COPY, ATTACH,
    read_text, INSTALL and LOAD are refused by DuckDB's own switch, locked), at most
    :data:`MAX_QUERY_ROWS` rows and :data:`QUERY_MEMORY` of memory."""
    import duckdb

    db.execute("SET enable_external_access = false")
    db.execute(f"SET memory_limit = '{QUERY_MEMORY}'")
    db.execute("SET lock_configuration = true")
    text = sql.strip().rstrip(";").strip()
    try:
        df = db.execute(f"SELECT * FROM ({text}) AS q LIMIT {MAX_QUERY_ROWS + 1}").df()
    except duckdb.ParserException as e:
        first = str(e).splitlines()[0]
        raise ConfigError(f"give one read-only query over table 'points' (SELECT ..., "
                          f"WITH ...): {first}", field="--sql") from None
    except duckdb.PermissionException:
        raise ConfigError("a results query may not read or write files; query table "
                          "'points'", field="--sql") from None
    except duckdb.OutOfMemoryException:
        raise ConfigError(f"the query needs more than {QUERY_MEMORY} of memory; add a "
                          f"WHERE or a LIMIT", field="--sql") from None
    except duckdb.Error as e:
        raise ConfigError(f"the query failed: {e}", field="--sql") from None
    if len(df) > MAX_QUERY_ROWS:
        raise ConfigError(f"the query returns more than {MAX_QUERY_ROWS:,} rows; add a "
                          f"WHERE or a LIMIT", field="--sql")
    return df

