"""Fit the protocol model to a cluster's own nccl-tests logs, with held-out validation.

The model's constants come from published measurements of many clusters; a given cluster
differs (firmware, NCCL version, PCIe placement, the NIC efficiency it really reaches).
:func:`calibrate` fits one factor per link class and quantity — the usable share of the
line rate (``<class>.efficiency``) and the per-step overhead (``<class>.hop``) of the
``net`` (NIC and switches), ``nvlink`` and ``nvls`` classes — to the logs' times by
least squares on the log of predicted/measured time, with a weak prior at 1 so that a
factor the rows cannot determine stays put (its standard error says so). Rows are split
by size: every other row
(in size order, per test) is fitted, the others are held out, and the error on both is
reported before and after, with a standard error per factor from the fit's Jacobian.
Factors the logs cannot inform (no multi-node test: no ``net``) stay 1. Logs of one
thread driving several GPUs (nccl-tests ``-g``) also fit ``host.launch``: the host's time
to issue an operation on one GPU, the floor their small operations sit on
(``Protocol.host_floor``), which differs from host to host.

An efficiency factor scales the published efficiency down to what this cluster reaches,
so it is at most 1: a fit a little above (within :data:`EFFICIENCY_SLACK`, measurement
noise) is held at 1 with a note saying so; further above, the logs ran faster than the
system can, so they are not from that system, and :func:`calibrate` refuses (as
``fabricsim compare`` refuses a ``--system`` whose GPU is not the log's).

The result is a ``params.calibration`` mapping that every command accepts through a
scenario's ``cluster:`` section (:meth:`CalibrationResult.scenario`), applied by all three
backends through the protocol model (``Protocol.eff_array`` / ``hop_array``).

Example
-------
>>> from fabricsim.interop.nccl_tests import Row, NcclTest
>>> rows = tuple(Row(s, s // 4, "float", "sum", -1, t, 0, 0, None, t, 0, 0, None)
...              for s, t in ((2**24, 260.0), (2**26, 650.0), (2**28, 2300.0),
...                           (2**30, 8900.0)))
>>> hosts = ("a",) * 8
>>> test = NcclTest("all_reduce", rows, hosts, ("NVIDIA A100-SXM4-80GB",) * 8)
>>> res = calibrate([test], system="dgx-a100")
>>> sorted(res.factors), res.fitted_rows, res.held_out_rows
(['nvlink.efficiency', 'nvlink.hop'], 2, 2)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricsim.errors import ConfigError
from fabricsim.results import Tabular, flatten

__all__ = ["CalibrationResult", "calibrate"]

#: Weight of the prior that holds each factor near 1 (in log space, per row of residual):
#: small against a row's error, enough to keep undetermined factors from the bounds.
PRIOR = 0.05
#: Factors fitted, in order; a factor no test can inform stays 1.
FACTORS = ("net.efficiency", "net.hop", "nvlink.efficiency", "nvlink.hop",
           "nvls.efficiency", "nvls.hop", "host.launch")
#: How far above 1 a fitted efficiency factor may land and be held at 1 (with a note);
#: beyond it the logs are faster than the system's hardware model: refused.
EFFICIENCY_SLACK = 0.02
#: Link classes as the messages name them.
_CLASS_NAMES = {"net": "network", "nvlink": "NVLink", "nvls": "NVLink SHARP (NVLS)"}


#: A factor whose standard error is above this is not determined by the logs.
LOOSE = 0.25
#: What determines each factor: the nccl-tests runs to collect (one server, or two or
#: more, with NCCL's choice narrowed so the factor is what the time depends on).
COLLECT = {
    "nvlink.efficiency": "on one server: NCCL_ALGO=Ring NCCL_NVLS_ENABLE=0 "
                         "all_reduce_perf -b 1G -e 8G -f 2 -g 1",
    "nvlink.hop": "on one server: all_reduce_perf -b 8 -e 1M -f 2 -g 1",
    "nvls.efficiency": "on one server with NVSwitch: NCCL_ALGO=NVLS all_reduce_perf -b 1G "
                       "-e 8G -f 2 -g 1",
    "nvls.hop": "on one server with NVSwitch: NCCL_ALGO=NVLS all_reduce_perf -b 64K -e 16M "
                "-f 2 -g 1",
    "net.efficiency": "across 2 or more servers: NCCL_ALGO=Ring all_reduce_perf -b 1G -e 8G "
                      "-f 2 -g 1",
    "net.hop": "across 2 or more servers: all_reduce_perf -b 8 -e 1M -f 2 -g 1",
    "host.launch": "one thread driving several GPUs, as the logs do: all_reduce_perf -b 8 "
                   "-e 256K -f 2 -g 8",
}


@dataclass(frozen=True)
class CalibrationResult(Tabular):
    """Fitted factors with standard errors, and the error before/after on both halves.

    :meth:`as_dict` is the nested JSON the CLI prints; ``to_pandas()`` is one flat row
    (``factors.<name>``, ``stderr.<name>``, ``median_abs_time_error.<half>``).
    """

    system: str
    factors: dict[str, float]
    stderr: dict[str, float]
    fitted_rows: int
    held_out_rows: int
    fit_error_before: float
    fit_error_after: float
    held_out_error_before: float
    held_out_error_after: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: compute NICs per server the fit found in use (multi-node logs), else the system's
    nics: int | None = None
    #: factors the logs do not determine (standard error above :data:`LOOSE`): left at
    #: 1, not written, and what runs would determine them (:data:`COLLECT`)
    undetermined: tuple[str, ...] = ()

    @property
    def determined(self) -> dict[str, float]:
        """The factors the logs determine (what the written scenario carries)."""
        return {k: v for k, v in self.factors.items() if k not in self.undetermined}

    def _record(self) -> dict[str, Any]:
        return self.as_dict()

    def _rows(self) -> list[dict[str, Any]]:
        return [flatten(self._record())]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: factors, their errors, the fit's time errors."""
        return {"system": self.system, "nics_in_use": self.nics,
                "factors": {k: round(v, 4) for k, v in self.factors.items()},
                "stderr": {k: round(v, 4) for k, v in self.stderr.items()},
                "fitted_rows": self.fitted_rows, "held_out_rows": self.held_out_rows,
                "median_abs_time_error": {
                    "fitted_before": round(self.fit_error_before, 4),
                    "fitted_after": round(self.fit_error_after, 4),
                    "held_out_before": round(self.held_out_error_before, 4),
                    "held_out_after": round(self.held_out_error_after, 4)},
                "undetermined": {k: COLLECT.get(k, "") for k in self.undetermined},
                "notes": list(self.notes)}

    def scenario(self, name: str = "calibrated-cluster") -> dict[str, Any]:
        """A scenario mapping (for YAML) whose cluster carries the calibration: every
        command that takes a scenario uses it (``--nodes`` etc. still override)."""
        system: dict[str, Any] = {"base": self.system,
                                  "note": "calibrated to nccl-tests logs (fabricsim "
                                          "calibrate)"}
        if self.nics is not None:
            system["nics"] = self.nics
        return {"name": name,
                "description": f"{self.system} calibrated to nccl-tests logs "
                               f"(held-out median time error "
                               f"{self.held_out_error_before:.1%} -> "
                               f"{self.held_out_error_after:.1%})",
                "systems": {name: system},
                "cluster": {"system": name,
                            "params": {"calibration": {k: round(v, 4) for k, v in
                                                       self.determined.items()}}}}


@dataclass(frozen=True)
class _Point:
    test: int
    collective: str
    size: int
    time_s: float
    nodes: int
    gpus_per_node: int
    ranks: int
    gpus_per_thread: int
    nccl_version: str | None = None


def _points(tests: Sequence[Any]) -> list[_Point]:
    out = []
    for i, t in enumerate(tests):
        if not t.rows or t.collective is None or t.ranks < 2:
            continue  # one rank (or none known: no device list) moves no data
        nodes = max(t.nodes, 1)
        gpn = t.gpus_per_node or max(t.ranks // nodes, 1)
        for r in t.rows:
            if r.size_bytes > 0 and r.time_us == r.time_us and r.time_us > 0:
                out.append(_Point(i, t.collective, r.size_bytes, r.time_us * 1e-6, nodes, gpn,
                                  max(t.ranks, 1), t.gpus_per_thread, t.nccl_version))
    return out


def calibrate(tests: Sequence[Any], *, system: str, catalog: Any = None,
              max_evaluations: int = 80) -> CalibrationResult:
    """Fit the calibration factors to ``tests`` (parsed nccl-tests tests on ``system``).

    With multi-node logs the compute NICs per server in use are fitted too: the system's
    count, half or a quarter of it, whichever fits the fitted rows best. Raises
    :class:`~fabricsim.errors.ConfigError` (field ``LOGS``) with fewer than 2 usable rows,
    and (field ``--system``) when the logs need an efficiency factor above
    1 + :data:`EFFICIENCY_SLACK`: they ran faster than ``system`` can.
    """
    return _within_hardware(_calibrate(tests, system=system, catalog=catalog,
                                       max_evaluations=max_evaluations))


def _within_hardware(res: CalibrationResult) -> CalibrationResult:
    """``res``, or a ConfigError when an efficiency factor is still above 1 (fits within
    :data:`EFFICIENCY_SLACK` were held at 1 by :func:`_fit`)."""
    over = {k: v for k, v in res.factors.items() if k.endswith(".efficiency") and v > 1.0}
    if over:
        k, v = max(over.items(), key=lambda kv: kv[1])
        cls = _CLASS_NAMES.get(k.split(".")[0], k.split(".")[0])
        raise ConfigError(
            f"the logs ran faster than {res.system} can: the fit needs {k} {v:.2f}, above "
            f"1 (more of the line rate than {res.system}'s {cls} is known to deliver); "
            f"are the logs from a {res.system}? pass the --system they ran on",
            field="--system")
    return res


def _calibrate(tests: Sequence[Any], *, system: str, catalog: Any,
               max_evaluations: int) -> CalibrationResult:
    """:func:`calibrate` before its check of the efficiency factors."""
    pts = _points(tests)
    if len(pts) < 2:
        raise ConfigError(f"calibration needs at least 2 timed rows with a known collective;"
                          f" the logs give {len(pts)}", field="LOGS")
    fit_idx: list[int] = []
    held_idx: list[int] = []
    by_test: dict[int, list[int]] = {}
    for j, p in enumerate(pts):
        by_test.setdefault(p.test, []).append(j)
    for js in by_test.values():
        js.sort(key=lambda j: pts[j].size)
        fit_idx += js[::2]
        held_idx += js[1::2]
    shapes = sorted({(p.nodes, p.gpus_per_node) for p in pts})
    multi = any(n > 1 for n, _ in shapes)
    if multi:  # NICs in use: the system's, or fewer (unused rails, a NIC per two GPUs)
        from fabricsim.catalog import get_catalog, with_systems

        base_cat = catalog if catalog is not None else get_catalog()
        full = base_cat.system(system).nics
        best: CalibrationResult | None = None
        for k in sorted({full, full // 2, full // 4} - {0}, reverse=True):
            cat = with_systems(base_cat, {"calibrating": {"base": system, "nics": k}})
            res = _fit(pts, fit_idx, held_idx, shapes, "calibrating", cat,
                       max_evaluations, multi)
            if best is None or res.fit_error_after < best.fit_error_after - 1e-4:
                best = CalibrationResult(**{**res.__dict__, "system": system, "nics": k})
        assert best is not None
        if best.nics != full:
            best = CalibrationResult(**{**best.__dict__, "notes": (
                *best.notes, f"the logs fit best with {best.nics} of the system's {full} "
                             f"NICs per server in use")})
        return best
    return _fit(pts, fit_idx, held_idx, shapes, system, catalog, max_evaluations, multi)


def _fit(pts: list[_Point], fit_idx: list[int], held_idx: list[int],
         shapes: list[tuple[int, int]], system: str, catalog: Any, max_evaluations: int,
         multi: bool) -> CalibrationResult:
    """The factor fit on one system definition (see :func:`calibrate`)."""
    from scipy.optimize import least_squares

    from fabricsim.collectives import predict_time
    from fabricsim.fabric import build_cluster

    probe = build_cluster(system, shapes[0][0], gpus_per_node=shapes[0][1], catalog=catalog)
    several = any(p.gpus_per_thread > 1 for p in pts)  # -g: the host's issue time shows
    active = [f for f in FACTORS if (multi or not f.startswith("net"))
              and (probe.info.nvls or not f.startswith("nvls"))
              and (several or not f.startswith("host"))]
    notes = []
    if not multi:
        notes.append("no multi-node test: the network factors (net.*) are not fitted")

    def predict(factors: dict[str, float], idx: list[int]) -> np.ndarray:
        """Predicted times of the rows ``idx`` (only those are simulated)."""
        params: dict[str, object] = {"calibration": factors} if factors else {}
        need = sorted({(pts[j].nodes, pts[j].gpus_per_node) for j in idx})
        fabs = {s: build_cluster(system, s[0], gpus_per_node=s[1], catalog=catalog,
                                 params=params) for s in need}
        out = np.empty(len(idx))
        done: dict[tuple[object, ...], float] = {}  # rows of many logs repeat: time each once
        for i, j in enumerate(idx):
            p = pts[j]
            key = (p.nodes, p.gpus_per_node, p.collective, p.size, p.ranks,
                   p.gpus_per_thread, p.nccl_version)
            hit = done.get(key)
            if hit is None:
                hit = done[key] = predict_time(fabs[(p.nodes, p.gpus_per_node)],
                                               p.collective, p.size,
                                               ranks=list(range(p.ranks)),
                                               gpus_per_thread=p.gpus_per_thread,
                                               nccl_version=p.nccl_version,
                                               back_to_back=True)  # as nccl-tests times
            out[i] = hit
        return out

    meas = np.array([p.time_s for p in pts])

    def resid(x: np.ndarray, idx: list[int]) -> np.ndarray:
        pred = predict(dict(zip(active, (float(v) for v in x), strict=True)), idx)
        return np.asarray(np.log(pred / meas[idx]))

    x0 = np.ones(len(active))

    def solve(free: list[int]) -> tuple[np.ndarray, dict[str, float]]:
        """Least squares over the factors ``free`` (indices into ``active``), the others
        held at 1; the fitted factors and their standard errors."""
        def objective(y: np.ndarray) -> np.ndarray:
            x = x0.copy()
            x[free] = y
            # a weak prior at 1 (the published calibration): factors the rows cannot
            # determine stay near it instead of wandering off to the bounds
            return np.concatenate([resid(x, fit_idx), PRIOR * np.log(y)])

        sol = least_squares(objective, np.ones(len(free)), bounds=(0.2, 5.0),
                            diff_step=0.02, max_nfev=max_evaluations)
        x = x0.copy()
        x[free] = sol.x
        err: dict[str, float] = {}
        dof = max(len(fit_idx) - len(free), 1)
        try:
            cov = np.linalg.pinv(sol.jac.T @ sol.jac) * float(sol.fun @ sol.fun) / dof
            err = {active[j]: float(math.sqrt(max(cov[i, i], 0.0)))
                   for i, j in enumerate(free)}
        except np.linalg.LinAlgError:  # pragma: no cover - pinv does not raise in practice
            err = {}
        return x, err

    # a factor the rows do not determine is left at 1: its fitted value is noise, and
    # writing it would change the model for no reason; the others are fitted again with
    # it held there, since their values fitted beside it only hold beside it (one pinned
    # at a bound, or an efficiency past the line rate where it stops having an effect, is
    # not loose: the rows push it past what is allowed, which the hardware check reports)
    free = list(range(len(active)))
    stderr: dict[str, float] = {}
    loose: tuple[str, ...] = ()
    x = x0.copy()
    while free:
        x, err = solve(free)
        stderr.update(err)
        pinned = {active[j] for j in free if min(abs(x[j] - 0.2), abs(x[j] - 5.0)) < 1e-3
                  or (active[j].endswith(".efficiency") and x[j] > 1.0 + EFFICIENCY_SLACK)}
        now = tuple(active[j] for j in free
                    if err.get(active[j], 0.0) > LOOSE and active[j] not in pinned)
        if not now:
            break
        loose += now
        free = [j for j in free if active[j] not in now]
        x = x0.copy()
    for i, k in enumerate(active):  # a share of the published efficiency: at most 1
        if k.endswith(".efficiency") and 1.0 < x[i] <= 1.0 + EFFICIENCY_SLACK:
            notes.append(f"{k} fitted {x[i]:.3f}, above the published efficiency by "
                         f"less than the {EFFICIENCY_SLACK:.0%} allowed for noise: held at "
                         f"1.0")
            x[i] = 1.0
    def med(idx: list[int], x: np.ndarray) -> float:
        if not idx:
            return math.nan
        r = resid(x, idx)
        return float(statistics.median(abs(math.expm1(v)) for v in r))

    # least squares weighs the rows' squares: one row far off can carry a factor that
    # leaves the typical row further off than before. Such a fit is not a calibration of
    # the cluster: the factors stay at 1 and the logs are said to determine none of them.
    # (each median simulates its rows, so each is computed once; at every factor 1 the
    # rows' error is the error before)
    moved = [k for i, k in enumerate(active) if x[i] != 1.0]
    before = med(fit_idx, x0)
    after = med(fit_idx, x) if moved else before
    if moved and after > before:
        notes.append(f"fitting {', '.join(moved)} left the rows' median error higher "
                     f"({before:.1%} -> {after:.1%}): a few rows pull it, the others "
                     f"disagree; not a calibration of this cluster")
        loose += tuple(moved)
        x, after, moved = x0.copy(), before, []
    factors = dict(zip(active, (float(v) for v in x), strict=True))
    held_before = med(held_idx, x0)

    return CalibrationResult(
        system=system, factors=factors, stderr=stderr, fitted_rows=len(fit_idx),
        held_out_rows=len(held_idx), fit_error_before=before, fit_error_after=after,
        held_out_error_before=held_before,
        held_out_error_after=med(held_idx, x) if moved else held_before,
        notes=tuple(notes), undetermined=loose)
