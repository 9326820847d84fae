"""Which node, NIC or link is bad: tomography over pairwise nccl-tests runs.

Cluster acceptance tests run a collective between pairs of servers (or along rings) and
keep one log per run. :func:`diagnose` takes those runs, predicts each one on a healthy
model of the cluster (same system and size, servers taken in the order of their host
names), and turns "how much slower than predicted" into suspects:

1. each run's slowdown is ``s = max(0, log(measured / predicted) - baseline)``, where the
   baseline is the median over all runs (the model's own error on this cluster, which
   every run shares); a failed run counts as ``log(10)``;
2. every run crosses components: its two hosts (their GPUs, NICs and NIC-to-leaf cables,
   which pairwise runs cannot tell apart) and the network links its routes use;
3. components crossed by exactly the same runs are one unknown (named by its host when it
   has one; the others are listed as indistinguishable), and non-negative least squares
   (``scipy.optimize.nnls``) finds per-group slowdowns ``x >= 0`` with ``A x ≈ s``: a
   group shared by every slow run and by no fast one takes the blame.

Suspects come ranked with their evidence: the runs through them, how much slower each
was, and which failed. When nothing can be told apart (no run slower than the others, or
too few runs to separate components) the report says why instead of guessing.

Example
-------
>>> import numpy as np
>>> from fabricsim.fabric import build_cluster
>>> runs = [PairRun(("n0", "n1"), "all_reduce", 2**30, 1e4),
...         PairRun(("n1", "n2"), "all_reduce", 2**30, 1e4),
...         PairRun(("n0", "n2"), "all_reduce", 2**30, 3e4)]
>>> rep = diagnose(runs, system="dgx-h100", baseline_us=lambda r: 1e4)
>>> rep.suspects[0].component, rep.identified
('host n0', False)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricsim.errors import ConfigError
from fabricsim.results import Tabular, flatten

__all__ = ["DiagnoseReport", "PairRun", "Suspect", "diagnose", "runs_from_tests"]

#: Slowdown charged to a failed run (as if it took 10x the predicted time).
FAILED_LOG_SLOWDOWN = math.log(10.0)
#: Runs within this share of the cluster's typical run are "not slow".
NOISE = 0.03


@dataclass(frozen=True)
class PairRun:
    """One run between two hosts: the collective, its largest size and the measured
    time (``None`` for a run that failed)."""

    hosts: tuple[str, str]
    collective: str
    size_bytes: int
    time_us: float | None
    failure: str = ""


@dataclass(frozen=True)
class Suspect:
    """A component and what points at it."""

    component: str
    slowdown: float
    runs: int
    slow_runs: tuple[tuple[str, float], ...] = ()
    failed_runs: tuple[str, ...] = ()
    #: components these runs cannot tell apart from ``component`` (same runs cross them)
    also: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        """``component`` and the ones indistinguishable from it."""
        return (self.component, *self.also)

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "also": list(self.also),
                "slowdown": round(self.slowdown, 4), "runs": self.runs,
                "slow_runs": [{"pair": p, "slower_by": round(f, 4)} for p, f in
                              self.slow_runs],
                "failed_runs": list(self.failed_runs)}


@dataclass(frozen=True)
class DiagnoseReport(Tabular):
    """Suspects, best first; ``identified`` when the top one stands out (its slowdown at
    least twice the next and above the noise) and is a single component (no other is
    crossed by exactly the same runs); ``why`` says what is missing otherwise.

    :meth:`as_dict` is the nested JSON the CLI prints; ``to_pandas()`` has a row per
    suspect (best first) with the report's figures on each."""

    suspects: tuple[Suspect, ...]
    runs: int
    baseline_ratio: float
    identified: bool
    why: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def _record(self) -> dict[str, Any]:
        return {"runs": self.runs, "baseline_ratio": self.baseline_ratio,
                "identified": self.identified, "why": self.why, "notes": list(self.notes),
                "suspects": len(self.suspects)}

    def _rows(self) -> list[dict[str, Any]]:
        base = flatten(self._record())
        return [{**base, "rank": i, **flatten({"component": s.component,
                                               "also": list(s.also), "slowdown": s.slowdown,
                                               "runs_crossing": s.runs,
                                               "slow_runs": len(s.slow_runs),
                                               "failed_runs": len(s.failed_runs)})}
                for i, s in enumerate(self.suspects, 1)] or [base]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary with every suspect."""
        return {"runs": self.runs, "baseline_ratio": round(self.baseline_ratio, 4),
                "identified": self.identified, "why": self.why, "notes": list(self.notes),
                "suspects": [s.to_dict() for s in self.suspects]}


def runs_from_tests(tests: Sequence[Any]) -> tuple[list[PairRun], list[str]]:
    """Pair runs from parsed nccl-tests tests (:class:`~.nccl_tests.NcclTest`): tests on
    exactly two hosts, timed at their largest size (failed ones kept as failures); the
    others are listed as skipped, with the reason."""
    runs: list[PairRun] = []
    skipped: list[str] = []
    for i, t in enumerate(tests):
        hosts = tuple(sorted(set(t.hosts)))
        if t.header.get("hosts") == "from the header":
            skipped.append(f"test {i + 1}: one process's NCCL Inspector records name no "
                           f"host of the other ranks; give every rank's file")
            continue
        if len(hosts) != 2:
            skipped.append(f"test {i + 1}: {len(hosts)} host(s); diagnose reads two-host "
                           f"runs")
            continue
        if t.failed or not t.rows:
            runs.append(PairRun((hosts[0], hosts[1]), t.collective or "all_reduce", 0, None,
                                t.failures[0] if t.failures else "no result rows"))
            continue
        row = max(t.rows, key=lambda r: r.size_bytes)
        runs.append(PairRun((hosts[0], hosts[1]), t.collective or "all_reduce",
                            row.size_bytes, row.time_us))
    return runs, skipped


def _components(fabric: Any, a: int, b: int) -> list[str]:
    """Network links (above the leaves) the routes between servers ``a`` and ``b`` use."""
    from fabricsim.fabric.kinds import LinkKind

    nics_a = np.unique(fabric.gpu_nics[fabric.node_server[fabric.gpus] == a].ravel())
    nics_b = np.unique(fabric.gpu_nics[fabric.node_server[fabric.gpus] == b].ravel())
    src = np.concatenate([nics_a, nics_b]).astype(np.int32)
    dst = np.concatenate([nics_b, nics_a]).astype(np.int32)
    paths = fabric.route_many(src, dst)
    net = {int(LinkKind.LEAF_SPINE), int(LinkKind.SPINE_CORE), int(LinkKind.GLOBAL),
           int(LinkKind.LOCAL), int(LinkKind.TORUS)}
    links = {int(x) for x in paths.links if int(fabric.link_kind[x]) in net}
    return [f"link {fabric.link_name(x)}" for x in sorted(links)]


def diagnose(runs: Sequence[PairRun], *, system: str | None = None, fabric: Any = None,
             baseline_us: Callable[[PairRun], float] | None = None,
             catalog: Any = None) -> DiagnoseReport:
    """Rank suspect hosts and links from pairwise runs (module docstring).

    ``fabric`` is the cluster (default: ``system`` built with one server per host);
    ``baseline_us`` predicts a run on the healthy cluster (default: the analytic model on
    ``fabric``, ranks of the two servers). Raises
    :class:`~fabricsim.errors.ConfigError` (field ``LOGS``) with no usable run.
    """
    if not runs:
        raise ConfigError("no two-host runs to diagnose; give logs of runs between pairs "
                          "of servers (nccl-tests across two hosts)", field="LOGS")
    hosts = sorted({h for r in runs for h in r.hosts})
    server = {h: i for i, h in enumerate(hosts)}
    if fabric is None and baseline_us is None:
        if system is None:
            raise ConfigError("diagnose needs the system (--system) or the GPU in the logs",
                              field="--system")
        from fabricsim.fabric import build_cluster

        fabric = build_cluster(system, max(len(hosts), 2), catalog=catalog)
    if baseline_us is None:
        from fabricsim.collectives import predict_time

        fab = fabric
        per = fab.info.gpus_per_server

        def baseline_us(r: PairRun) -> float:
            a, b = server[r.hosts[0]], server[r.hosts[1]]
            ranks = [*range(a * per, (a + 1) * per), *range(b * per, (b + 1) * per)]
            return float(predict_time(fab, r.collective, r.size_bytes, ranks=ranks,
                                      back_to_back=True)) * 1e6  # as nccl-tests times

    ok = [r for r in runs if r.time_us is not None and r.time_us > 0]
    logs = {id(r): math.log(r.time_us / max(baseline_us(r), 1e-9))  # type: ignore[operator]
            for r in ok}
    base = statistics.median(logs.values()) if logs else 0.0
    comps: list[list[str]] = []
    for r in runs:
        crossed = [f"host {r.hosts[0]}", f"host {r.hosts[1]}"]
        if fabric is not None:
            crossed += _components(fabric, server[r.hosts[0]], server[r.hosts[1]])
        comps.append(crossed)
    # components crossed by exactly the same runs cannot be told apart: one column each
    # group, named by its host if it has one (the simplest explanation), the rest kept
    incidence: dict[str, list[int]] = {}
    for i, cs in enumerate(comps):
        for c in cs:
            incidence.setdefault(c, []).append(i)
    groups: dict[tuple[int, ...], list[str]] = {}
    for c in sorted(incidence, key=lambda c: (not c.startswith("host"), c)):
        groups.setdefault(tuple(incidence[c]), []).append(c)
    members = list(groups.values())
    names = [g[0] for g in members]
    a_mat = np.zeros((len(runs), len(names)))
    for j, key in enumerate(groups):
        a_mat[list(key), j] = 1.0
    s = np.zeros(len(runs))
    for i, r in enumerate(runs):
        s[i] = FAILED_LOG_SLOWDOWN if r.time_us is None else max(0.0, logs[id(r)] - base)
    notes = [f"hosts map to model servers in name order ({hosts[0]} -> server 0, ...); "
             f"network links are the model's, not necessarily the cluster's cabling"]
    if not (s > math.log(1 + NOISE)).any():
        return DiagnoseReport((), len(runs), math.exp(base), False,
                              why=f"no run is slower than the cluster's typical run by more "
                                  f"than {NOISE:.0%} and none failed: nothing to suspect",
                              notes=tuple(notes))
    from scipy.optimize import nnls

    lam = 1e-3  # a touch of ridge: among equal explanations prefer the fewest components
    a_aug = np.vstack([a_mat, math.sqrt(lam) * np.eye(len(names))])
    x, _ = nnls(a_aug, np.concatenate([s, np.zeros(len(names))]))
    order = np.argsort(-x, kind="stable")
    suspects = []
    for j in order:
        if x[j] <= math.log(1.01):  # below 1 %: not a suspect
            break
        idx = [int(i) for i in np.flatnonzero(a_mat[:, j] > 0)]
        slow = tuple((f"{runs[i].hosts[0]}-{runs[i].hosts[1]}", math.exp(s[i]) - 1)
                     for i in idx if runs[i].time_us is not None and s[i] > 0)
        failed = tuple(f"{runs[i].hosts[0]}-{runs[i].hosts[1]}" for i in idx
                       if runs[i].time_us is None)
        suspects.append(Suspect(names[j], float(math.exp(x[j]) - 1), len(idx), slow,
                                failed, also=tuple(members[j][1:])))
    why = ""
    top = suspects[0].slowdown if suspects else 0.0
    nxt = suspects[1].slowdown if len(suspects) > 1 else 0.0
    stands_out = bool(suspects) and top > NOISE and top >= 2 * nxt
    identified = stands_out and not suspects[0].also
    if suspects and not stands_out:
        why = (f"the top two suspects explain the slow runs about equally "
               f"({suspects[0].component} {top:.0%}, {suspects[1].component} {nxt:.0%}): "
               "add runs that separate them (pairs with other partners)")
    elif suspects and not identified:
        why = (f"these runs cannot tell apart {' and '.join(suspects[0].names()[:4])}"
               f"{' and more' if len(suspects[0].names()) > 4 else ''} (the same runs cross "
               "them): add runs that cross only some of them")
    return DiagnoseReport(tuple(suspects[:10]), len(runs), math.exp(base), identified,
                          why=why, notes=tuple(notes))
