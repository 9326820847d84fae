"""Readable outputs of a flow run: bottleneck links, link utilisation over time, export.

``Result.extra`` of the flow backend holds (all SI units):

``transfers``
    dict of arrays ``step, rep, transfer, start, end, nbytes``: every transfer of the first
    repetition of every step, or of every simulated repetition with
    ``record_timeline=True`` (repetitions skipped as identical have none).
``rep_start`` / ``rep_end``
    list (one array per step) of the start and end of every repetition.
``bottlenecks``
    list of dicts ``link, name, kind, critical_time, utilization``: links by the time the
    slowest-moving transfer of each repetition spent moving bytes while they limited it
    (the link of its path its traffic fills the most); latency and straggler delay are
    credited to no link.
``critical_time``
    array by link id of that time (s).
``timeline``
    :class:`Timeline` (``record_timeline=True`` only).
``stalled_steps`` / ``stalled_transfers``
    steps that could not finish (no route, or nothing could move) and (step, transfer)
    pairs without a route; ``time`` is ``inf`` then.
``skipped_epochs``, ``kernel_calls``, ``routing``, ``qps``, ``faults``
    how the run went.

Example
-------
>>> import numpy as np
>>> tl = Timeline(t=np.array([0.0, 1.0, 2.0]), links=np.array([3]),
...               bytes=np.array([[0.0], [5.0], [15.0]]), capacity=np.array([10.0]),
...               names=["a->b"], kinds=["leaf-spine"])
>>> tl.utilization().tolist()
[[0.5], [1.0]]
>>> tl.table()["utilization"].tolist()
[0.5, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.fabric.core import Fabric
from fabricsim.schedule.core import Schedule

F8 = NDArray[np.float64]


@dataclass(frozen=True)
class Timeline:
    """Cumulative bytes of the used links at the instants ``t`` (rows) of a run."""

    t: F8
    links: NDArray[np.int64]
    bytes: F8
    capacity: F8
    names: list[str]
    kinds: list[str]

    @staticmethod
    def from_snapshots(fabric: Fabric, t: F8, cum_bytes: F8) -> Timeline:
        """Keep only links that carried bytes; merge snapshots at the same instant."""
        if cum_bytes.shape[0] == 0:
            cum_bytes = np.zeros((1, fabric.n_links))
            t = np.zeros(1)
        used = np.flatnonzero(cum_bytes[-1] > 0)
        keep = np.concatenate([np.diff(t) > 0, [True]])
        keep[0] = True
        return Timeline(t=t[keep], links=used.astype(np.int64), bytes=cum_bytes[keep][:, used],
                        capacity=fabric.link_capacity[used].astype(np.float64),
                        names=[fabric.link_name(int(l)) for l in used],
                        kinds=[fabric.link_label(int(l)) for l in used])

    def utilization(self) -> F8:
        """Mean utilisation of each link (columns) in each interval (rows), 0..1."""
        dt = np.diff(self.t)
        db = np.diff(self.bytes, axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = db / (dt[:, None] * self.capacity[None, :])
        return np.nan_to_num(u, nan=0.0, posinf=0.0)

    def resample(self, bins: int = 100) -> tuple[F8, F8]:
        """Utilisation on ``bins`` equal intervals: (bin edges, [bins, links])."""
        end = float(self.t[-1]) if self.t.size else 0.0
        edges = np.linspace(0.0, end, bins + 1) if end > 0 else np.zeros(bins + 1)
        if end <= 0 or self.links.size == 0:
            return edges, np.zeros((bins, self.links.size))
        cum = np.stack([np.interp(edges, self.t, self.bytes[:, k])
                        for k in range(self.links.size)], axis=1)
        u = np.diff(cum, axis=0) / (np.diff(edges)[:, None] * self.capacity[None, :])
        return edges, u

    def table(self) -> dict[str, Any]:
        """Long-format columns: t_start, t_end, link, name, kind, bytes, utilization."""
        n_int = max(self.t.shape[0] - 1, 0)
        u = self.utilization()
        db = np.diff(self.bytes, axis=0)
        rows = np.repeat(np.arange(n_int), self.links.size)
        cols = np.tile(np.arange(self.links.size), n_int)
        return {"t_start": self.t[:-1][rows], "t_end": self.t[1:][rows],
                "link": self.links[cols], "name": [self.names[c] for c in cols],
                "kind": [self.kinds[c] for c in cols], "bytes": db[rows, cols],
                "utilization": u[rows, cols]}

    def write(self, out_dir: str | Path, stem: str = "link_utilization") -> list[Path]:
        """Write the table as Parquet and CSV (pyarrow) into ``out_dir``; returns paths."""
        return write_table(self.table(), out_dir, stem)


def write_table(columns: dict[str, Any], out_dir: str | Path, stem: str) -> list[Path]:
    """Write equal-length ``columns`` as ``<stem>.parquet`` and ``<stem>.csv`` (pyarrow).

    Examples
    --------
    >>> import tempfile
    >>> [p.name for p in write_table({"a": [1, 2]}, tempfile.mkdtemp(), "x")]
    ['x.parquet', 'x.csv']
    """
    from fabricsim._extras import require

    pa = require("pyarrow", "io", "writing Parquet/CSV tables")
    pacsv = require("pyarrow.csv", "io", "writing Parquet/CSV tables")
    pq = require("pyarrow.parquet", "io", "writing Parquet/CSV tables")

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    tab = pa.table(columns)
    pq_path, csv_path = d / f"{stem}.parquet", d / f"{stem}.csv"
    pq.write_table(tab, pq_path)
    pacsv.write_csv(tab, csv_path)
    return [pq_path, csv_path]


def transfers_table(transfers: dict[str, Any], schedule: Schedule | None = None
                    ) -> dict[str, Any]:
    """Per-transfer columns ``step, rep, transfer, src, dst, label, nbytes, start, end,
    duration`` (seconds) from ``Result.extra["transfers"]``, sorted by start.

    ``src``/``dst`` (global ranks) and ``label`` come from ``schedule`` (-1 and "" without
    it).

    Examples
    --------
    >>> import numpy as np
    >>> tr = {"step": np.array([0]), "rep": np.array([0]), "transfer": np.array([0]),
    ...       "start": np.array([0.5]), "end": np.array([2.0]), "nbytes": np.array([8.0])}
    >>> transfers_table(tr)["duration"].tolist()
    [1.5]
    """
    step = np.asarray(transfers["step"], dtype=np.int64)
    idx = np.asarray(transfers["transfer"], dtype=np.int64)
    start = np.asarray(transfers["start"], dtype=np.float64)
    order = np.lexsort((idx, step, start))
    step, idx, start = step[order], idx[order], start[order]
    end = np.asarray(transfers["end"], dtype=np.float64)[order]
    src = np.full(step.shape, -1, dtype=np.int64)
    dst = np.full(step.shape, -1, dtype=np.int64)
    label = [""] * int(step.shape[0])
    if schedule is not None:
        for s_i, st in enumerate(schedule.steps):
            rows = np.flatnonzero(step == s_i)
            ok = rows[idx[rows] < st.src.shape[0]]
            src[ok] = np.asarray(st.src)[idx[ok]]
            dst[ok] = np.asarray(st.dst)[idx[ok]]
            for r in ok.tolist():
                label[r] = st.label
    return {"step": step, "rep": np.asarray(transfers["rep"], dtype=np.int64)[order],
            "transfer": idx, "src": src, "dst": dst, "label": label,
            "nbytes": np.asarray(transfers["nbytes"], dtype=np.float64)[order],
            "start": start, "end": end, "duration": end - start}


def write_transfers(transfers: dict[str, Any], out_dir: str | Path,
                    schedule: Schedule | None = None, stem: str = "transfers") -> list[Path]:
    """Write :func:`transfers_table` as Parquet and CSV into ``out_dir``; returns paths.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> tr = {k: np.zeros(1) for k in ("step", "rep", "transfer", "start", "end", "nbytes")}
    >>> [p.suffix for p in write_transfers(tr, tempfile.mkdtemp())]
    ['.parquet', '.csv']
    """
    return write_table(transfers_table(transfers, schedule), out_dir, stem)


def bottlenecks(fabric: Fabric, critical_time: F8, link_bytes: F8, total: float,
                n: int = 5) -> list[dict[str, Any]]:
    """The ``n`` links that limited the most critical-path time, busiest first.

    Examples
    --------
    >>> import numpy as np
    >>> from fabricsim.backends.flow.testing import host_fat_tree
    >>> fab = host_fat_tree(4)
    >>> ct = np.zeros(fab.n_links); ct[2] = 1.0
    >>> bottlenecks(fab, ct, np.full(fab.n_links, 25e9), 1.0)[0]["name"]
    'gpu2->leaf1'
    """
    order = np.argsort(-critical_time, kind="stable")[:n]
    out = []
    for l in order:
        if critical_time[l] <= 0:
            break
        cap = float(fabric.link_capacity[l])
        out.append({"link": int(l), "name": fabric.link_name(int(l)),
                    "kind": fabric.link_label(int(l)),
                    "critical_time": float(critical_time[l]),
                    "utilization": float(link_bytes[l] / (cap * total))
                    if total > 0 and np.isfinite(total) and cap > 0 else 0.0})
    return out
