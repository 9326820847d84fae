"""A flow-level scenario run and its outputs, sized for people.

:func:`simulate_scenario` runs a scenario's collective with and without its faults and
background traffic on the flow backend and explains the slowdown (``fabricsim simulate``
and ``fabricsim report`` print it). :func:`write_flow_outputs` writes what a reader keeps:

- ``transfers.parquet`` — every transfer's start and end;
- ``link_utilization.parquet`` — utilisation of every used link, resampled to
  :data:`DEFAULT_BINS` intervals (``full=True``: one row per link per instant at which
  any rate changed, which can be hundreds of MB);
- ``link_utilization.png`` — the links that limited the run (and every link a fault or
  background source touches), ranked by the time they limited it;
- ``fault_impact.png`` — fault-free against degraded progress, and where the time went;
- ``summary.json``; with ``csv=True`` also a CSV beside each Parquet table.

Example
-------
>>> from fabricsim.scenario import Scenario
>>> sc = Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 2},
...     "collective": {"maxbytes": "16MiB", "algo": "ring"},
...     "faults": [{"type": "slow_nic", "node": 0, "index": 0, "factor": 0.5}]})
>>> s = simulate_scenario(sc)
>>> s["slowdown"] > 1.0, s["causes"][0]["description"]
(True, 'server0/nic0 at 0.5 of its bandwidth')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fabricsim.backends.flow.results import Timeline, transfers_table
from fabricsim.jobs.flow import FlowReport
from fabricsim.scenario import Scenario
from fabricsim.units import format_bytes

__all__ = ["DEFAULT_BINS", "human_size", "simulate_scenario", "write_flow_outputs",
           "write_table"]

#: Time intervals the link-utilisation table is resampled to unless the full table is
#: asked for: finer than any plot or reader needs, and a few MB for a 256-GPU run.
DEFAULT_BINS = 200


def human_size(n: float) -> str:
    """A file size to read: ``human_size(3_400_000) == '3.2 MiB'``.

    >>> human_size(512), human_size(2048), human_size(3_400_000)
    ('512 B', '2.0 KiB', '3.2 MiB')
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class Coded:
    """A string column stored as codes into ``values`` (written as a Parquet dictionary
    column: a table of 10⁶ rows naming a few thousand links stays small and fast)."""

    codes: np.ndarray
    values: list[str]

    def tolist(self) -> list[str]:
        return [self.values[int(c)] for c in self.codes]


def simulate_scenario(sc: Scenario, *, routing: str = "ecmp", qps: int = 1,
                      size: str | None = None, out: Path | None = None,
                      time_limit_s: float | None = None,
                      progress: Callable[..., None] | None = None, csv: bool = False,
                      full: bool = False, rank: str = "critical") -> dict[str, Any]:
    """Run ``sc``'s flow job (:func:`fabricsim.jobs.flow.flow_job`) and return its
    JSON-ready summary; with ``out``, the outputs of :func:`write_flow_outputs` are
    written there and listed (path, bytes) in ``summary["outputs"]``. ``progress`` is
    the flow backend's progress callback."""
    from fabricsim.jobs.flow import flow_job, run_flow

    job = flow_job(sc, size=size, routing=routing, qps=qps, time_limit_s=time_limit_s,
                   record=out is not None)
    run = run_flow(job, job.cluster.build(), step_progress=progress)
    if out is not None:
        write_flow_outputs(run, out, csv=csv, full=full, rank=rank)
    return run.to_dict()


def write_table(columns: dict[str, Any], out_dir: Path, stem: str, *, csv: bool = False
                ) -> list[Path]:
    """Write equal-length ``columns`` as ``<stem>.parquet`` (and ``<stem>.csv`` when
    ``csv``) into ``out_dir``; returns the paths.

    >>> import tempfile
    >>> [p.name for p in write_table({"a": [1, 2]}, Path(tempfile.mkdtemp()), "x", csv=True)]
    ['x.parquet', 'x.csv']
    """
    from fabricsim._extras import require

    pa = require("pyarrow", "io", "writing Parquet/CSV tables")
    pq = require("pyarrow.parquet", "io", "writing Parquet/CSV tables")
    out_dir.mkdir(parents=True, exist_ok=True)
    cols = {k: pa.DictionaryArray.from_arrays(pa.array(v.codes, pa.int32()),
                                              pa.array(v.values, pa.string()))
            if isinstance(v, Coded) else v for k, v in columns.items()}
    tab = pa.table(cols)
    paths = [out_dir / f"{stem}.parquet"]
    pq.write_table(tab, paths[0], compression="zstd")
    if csv:
        pacsv = require("pyarrow.csv", "io", "writing Parquet/CSV tables")
        paths.append(out_dir / f"{stem}.csv")
        plain = tab.cast(pa.schema([pa.field(f.name, pa.string())
                                    if pa.types.is_dictionary(f.type) else f
                                    for f in tab.schema]))
        pacsv.write_csv(plain, paths[1])
    return paths


def full_table(tl: Timeline) -> dict[str, Any]:
    """:meth:`Timeline.table` (one row per link per instant), names as :class:`Coded`."""
    n_int = max(tl.t.shape[0] - 1, 0)
    u = tl.utilization()
    db = np.diff(tl.bytes, axis=0)
    rows = np.repeat(np.arange(n_int), tl.links.size)
    cols = np.tile(np.arange(tl.links.size), n_int)
    return {"t_start": tl.t[:-1][rows], "t_end": tl.t[1:][rows], "link": tl.links[cols],
            "name": Coded(cols, tl.names), "kind": Coded(cols, tl.kinds),
            "bytes": db[rows, cols], "utilization": u[rows, cols]}


def resampled_table(tl: Timeline, bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """Long-format utilisation on ``bins`` equal intervals: the columns of
    :meth:`Timeline.table` (``t_start, t_end, link, name, kind, bytes, utilization``;
    ``name`` and ``kind`` as :class:`Coded`).

    >>> tl = Timeline(t=np.array([0.0, 1.0, 2.0]), links=np.array([3]),
    ...               bytes=np.array([[0.0], [5.0], [15.0]]), capacity=np.array([10.0]),
    ...               names=["a->b"], kinds=["leaf-spine"])
    >>> resampled_table(tl, 2)["utilization"].tolist()
    [0.5, 1.0]
    """
    edges, util = tl.resample(bins)
    nb, nl = util.shape
    rows = np.repeat(np.arange(nb), nl)
    cols = np.tile(np.arange(nl), nb)
    width = np.diff(edges)
    return {"t_start": edges[:-1][rows], "t_end": edges[1:][rows],
            "link": tl.links[cols], "name": Coded(cols, tl.names),
            "kind": Coded(cols, tl.kinds),
            "bytes": (util * width[:, None] * tl.capacity[None, :])[rows, cols],
            "utilization": util[rows, cols]}


def scenario_links(run: FlowReport) -> tuple[int, ...]:
    """Link ids the scenario names: those its faults touch (background sources are
    credited on the links they limit)."""
    return tuple(sorted({int(l) for ls in run.hit.extra["fault_links"].values()
                         for l in ls}))


def write_flow_outputs(run: FlowReport, out: Path, *, csv: bool = False, full: bool = False,
                       figures: bool = True, rank: str = "critical") -> list[Path]:
    """Write the tables, figures and ``summary.json`` of ``run`` into ``out``; fills
    ``run.summary["outputs"]`` with ``{"path", "bytes"}`` of each file written. ``rank``
    orders the heatmap's links (:data:`fabricsim.plots.heatmap.RANKS`)."""
    from fabricsim.plots.fault import plot_flow_fault
    from fabricsim.plots.heatmap import link_heatmap

    out.mkdir(parents=True, exist_ok=True)
    tl: Timeline = run.hit.extra["timeline"]
    s, sch = run.summary, run.schedule
    paths = write_table(transfers_table(run.hit.extra["transfers"], sch), out, "transfers",
                        csv=csv)
    table = full_table(tl) if full else resampled_table(tl)
    paths += write_table(table, out, "link_utilization", csv=csv)
    if figures:
        how = {"critical": "the time they limited the run", "utilization":
               "mean utilisation", "bytes": "bytes carried"}.get(rank, rank)
        title = (f"{s['scenario']}: {sch.collective} {format_bytes(sch.nbytes)} "
                 f"({sch.algorithm}), links by {how}")
        paths.append(link_heatmap(tl, out / "link_utilization.png", title=title,
                                  highlight=scenario_links(run), rank=rank,
                                  critical=run.hit.extra["critical_time"]))
        paths.append(plot_flow_fault(run.base, run.hit, out / "fault_impact.png",
                                     causes=s["causes"], title=f"{s['scenario']}: "
                                     "fault-free vs with faults"))
    p = out / "summary.json"
    listed = [{"path": str(x), "bytes": x.stat().st_size} for x in paths]
    s["outputs"] = listed
    p.write_text(json.dumps({**s, "outputs": listed}, indent=2) + "\n", encoding="utf-8")
    s["outputs"] = [*listed, {"path": str(p), "bytes": p.stat().st_size}]
    return [*paths, p]


def outputs_markdown(outputs: Sequence[dict[str, Any]], root: Path | None = None
                     ) -> list[str]:
    """A Markdown table of written files and their sizes, and the total.

    >>> outputs_markdown([{"path": "a/x.parquet", "bytes": 2048}], Path("a"))[2]
    '| x.parquet | 2.0 KiB |'
    """
    rows = ["| file | size |", "|---|---|"]
    total = 0
    for o in outputs:
        p = Path(o["path"])
        name = str(p.relative_to(root)) if root is not None and p.is_relative_to(root) \
            else str(p)
        rows.append(f"| {name} | {human_size(o['bytes'])} |")
        total += int(o["bytes"])
    rows.append(f"| **total** | **{human_size(total)}** |")
    return rows
