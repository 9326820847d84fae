"""Fit the protocol model's shared constants on every published source, and measure the
fit the only honest way: leave one source out.

The constants of :mod:`fabricsim.protocols` (launch cost, per-hop overhead per link class
and protocol, efficiency per link class and protocol, Simple's size ramp) are one set for
every system. This script fits them on all the nccl-tests rows of ``data/reference/``
(``measurements*.csv`` and ``nccl_tests.csv``), every source weighted alike, and for each
source refits them without it and predicts its rows: that prediction's error is the
held-out error the README and ``fabricsim bench``'s band report.

How it stays fast: the time of every candidate (algorithm, protocol) of every row is
linear in the hop overheads, the launch and the inverse efficiencies as long as the same
link stays the bottleneck, so the model is run once at the current constants and once
per constant moved a little (the Jacobian, ``--jacobian``, a few minutes), and the fits
run on that linear model, choosing per row the fastest candidate as NCCL's tuner does.
``--at FILE`` linearises around other constants (a JSON list in PARAMS order).

What it found (2026-11-28, docs/collectives.md): no refit of these shared constants
meets the held-out targets. Refitting them all moves InfiniBand bandwidth from 44 % to
16 % held out, but makes latency worse (22 % to 30 %) and drives some constants to
values no hardware has (a 60 us Simple network hop, LL at 5 % of line rate): the
structure, not the constants, is what is missing. The library's constants are not taken
from this script.

Usage: python benchmarks/fit_collectives.py [--jacobian [--at FILE]] [--fit]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import accuracy_nccl as acc  # noqa: E402

from fabricsim.collectives.registry import Group  # noqa: E402
from fabricsim.collectives.tuner import (  # noqa: E402
    REFERENCE_BYTES,
    ROOTED_COLLECTIVES,
    Tuner,
    candidates,
)
from fabricsim.protocols import PROTOCOLS, Protocol  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "fabricsim_fit_jacobian.npz"

#: (protocol or "all", what, step). ``*_hop`` in us, ``*_ieff`` is 1/efficiency,
#: ``launch`` / ``launch_per_gpu`` in us, ``ramp_bytes`` multiplicative (log).
PARAMS: tuple[tuple[str, str, float], ...] = (
    ("all", "launch", 1.0), ("all", "launch_per_gpu", 1.0),
    ("ll", "nvlink_hop", 0.5), ("ll128", "nvlink_hop", 0.5), ("simple", "nvlink_hop", 1.0),
    ("ll", "net_hop", 1.0), ("ll128", "net_hop", 1.0), ("simple", "net_hop", 1.0),
    ("simple", "nvls_hop", 1.0),
    ("ll", "net_ieff", 0.1), ("ll128", "net_ieff", 0.05), ("simple", "net_ieff", 0.05),
    ("ll", "nvlink_ieff", 0.1), ("ll128", "nvlink_ieff", 0.05),
    ("simple", "nvlink_ieff", 0.05), ("simple", "nvls_ieff", 0.05),
    ("simple", "ramp_bytes", 0.1), ("simple", "ramp_power", 0.05),
)
_TIED = {"net": ("net", "sharp")}  # SHARP's network links take the network's constants


def value(protos: dict[str, Protocol], p: str, what: str) -> float:
    pr = protos["simple" if p == "all" else p]
    if what in ("launch", "launch_per_gpu"):
        return float(getattr(pr, what)) * 1e6
    if what == "ramp_bytes":
        return float(np.log(pr.ramp_bytes))
    if what == "ramp_power":
        return float(pr.ramp_power)
    cls, kind = what.rsplit("_", 1)
    return float(pr.hop_latency[cls]) * 1e6 if kind == "hop" else 1.0 / float(
        pr.efficiency[cls])


def apply(x: NDArray[np.float64], base: dict[str, Protocol] | None = None
          ) -> dict[str, Protocol]:
    """Protocols with the parameters set to ``x`` (in PARAMS order and units)."""
    out = dict(base or {k: PROTOCOLS[k] for k in ("ll", "ll128", "simple")})
    for (p, what, _), v in zip(PARAMS, x, strict=True):
        for q in (("ll", "ll128", "simple") if p == "all" else (p,)):
            pr = out[q]
            if what in ("launch", "launch_per_gpu"):
                out[q] = pr.scaled(**{what: max(float(v), 0.0) * 1e-6})
            elif what == "ramp_bytes":
                out[q] = pr.scaled(ramp_bytes=float(np.exp(v)))
            elif what == "ramp_power":
                out[q] = pr.scaled(ramp_power=float(v))
            else:
                cls, kind = what.rsplit("_", 1)
                hop, eff = dict(pr.hop_latency), dict(pr.efficiency)
                for c in _TIED.get(cls, (cls,)):
                    if kind == "hop":
                        hop[c] = max(float(v), 0.0) * 1e-6
                    else:
                        eff[c] = float(min(1.0, 1.0 / max(float(v), 1.0)))
                out[q] = pr.scaled(hop_latency=hop, efficiency=eff)
    return out


def x0() -> NDArray[np.float64]:
    base = {k: PROTOCOLS[k] for k in ("ll", "ll128", "simple")}
    return np.array([value(base, p, w) for p, w, _ in PARAMS])


@dataclass
class Table:
    """Per (row, candidate): its row, the time at ``x_ref`` and the Jacobian (s per unit
    of each parameter)."""

    x_ref: NDArray[np.float64]
    row: NDArray[np.int64]
    t0: NDArray[np.float64]
    jac: NDArray[np.float64]
    extra_gpus: NDArray[np.float64]  # gpus_per_thread - 1 of each row
    measured_s: NDArray[np.float64]  # measured time of each row
    source: list[str]
    group: list[str]
    use: NDArray[np.bool_]           # primary rows (secondary and spans left out)


def _cand_times(cs: list[acc.Case], protos: dict[str, Protocol]) -> list[list[float]]:
    tuner = Tuner(protos, prune=False)
    out = []
    for c in cs:
        fab = acc.fabric_of(c)
        g = Group.of(fab)
        ts = []
        for a, p in candidates(g, c.collective, c.algo, c.proto, tuner.protocols):
            m, f = tuner.model(g, c.collective, a, p), c.nbytes / REFERENCE_BYTES
            # nccl-tests' operations back to back: a rooted chain's overlap
            ts.append(m.back_to_back(f) if c.collective in ROOTED_COLLECTIVES
                      else m.time(f))
        out.append(ts)
    return out


def measured_seconds(c: acc.Case) -> float:
    from fabricsim.collectives.busbw import busbw_factor

    if c.measured_time_us is not None:
        return c.measured_time_us * 1e-6
    busbw = c.measured_busbw if c.span is None else sum(c.span) / 2
    n = acc.fabric_of(c).n_gpus
    return c.nbytes * busbw_factor(c.collective, n) / (busbw * 1e9)


def jacobian(x: NDArray[np.float64] | None = None) -> Table:
    """Run the model at ``x`` (the library's constants when ``None``) and at each
    parameter moved by its step."""
    from fabricsim.collectives.accuracy import group_of

    cs = acc.all_cases()
    x = x0() if x is None else x
    t = time.time()
    base = _cand_times(cs, apply(x))
    print(json.dumps({"base_s": round(time.time() - t, 1), "rows": len(cs)}), flush=True)
    cols = []
    for j, (_, what, step) in enumerate(PARAMS):
        xj = x.copy()
        xj[j] += step
        tj = _cand_times(cs, apply(xj))
        cols.append([(b2 - b1) / step for r1, r2 in zip(base, tj, strict=True)
                     for b1, b2 in zip(r1, r2, strict=True)])
        print(json.dumps({"param": what, "done_s": round(time.time() - t, 1)}), flush=True)
    row = np.array([i for i, r in enumerate(base) for _ in r])
    table = Table(
        x_ref=x, row=row, t0=np.array([b for r in base for b in r]), jac=np.array(cols).T,
        extra_gpus=np.array([c.gpus_per_thread - 1 for c in cs], dtype=float),
        measured_s=np.array([measured_seconds(c) for c in cs]),
        source=[c.source for c in cs],
        group=[group_of(acc.fabric_of(c), c.collective, c.nbytes) for c in cs],
        use=np.array([not c.secondary and c.span is None for c in cs]))
    np.savez(CACHE, x_ref=table.x_ref, row=table.row, t0=table.t0, jac=table.jac,
             extra_gpus=table.extra_gpus,
             measured_s=table.measured_s, source=np.array(table.source),
             group=np.array(table.group), use=table.use)
    return table


def load_table() -> Table:
    d = np.load(CACHE)
    return Table(x_ref=d["x_ref"], row=d["row"], t0=d["t0"], jac=d["jac"],
                 extra_gpus=d["extra_gpus"],
                 measured_s=d["measured_s"], source=[str(s) for s in d["source"]],
                 group=[str(g) for g in d["group"]], use=d["use"])


_LPG = next(i for i, p in enumerate(PARAMS) if p[1] == "launch_per_gpu")


def predict(tab: Table, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Predicted time (s) of every row on the linear model at ``x``: its fastest
    candidate, or the host's issue time where one thread drives several GPUs and takes
    longer (``Protocol.host_floor``)."""
    dx = x - tab.x_ref
    t = tab.t0 + tab.jac @ dx
    t = np.maximum(t, 1e-7)
    best = np.full(len(tab.measured_s), np.inf)
    np.minimum.at(best, tab.row, t)
    return np.maximum(best, (tab.extra_gpus + 1.0) * max(float(x[_LPG]), 0.0) * 1e-6)


def fit(tab: Table, rows: NDArray[np.bool_], start: NDArray[np.float64]
        ) -> NDArray[np.float64]:
    """Least squares on log time over ``rows``, each source weighted alike, robust to a
    few odd runs (soft L1)."""
    from scipy.optimize import least_squares

    src = np.array(tab.source)
    counts = {s: int(np.sum(rows & (src == s))) for s in set(src[rows])}
    w = np.array([1.0 / np.sqrt(counts.get(s, 1)) for s in src])[rows]
    lo = np.array([{"ramp_bytes": np.log(1e4), "ramp_power": 0.2}.get(w_, 0.0)
                   for _, w_, _ in PARAMS])
    hi = np.array([{"ramp_bytes": np.log(1e9), "ramp_power": 2.0}.get(w_, np.inf)
                   for _, w_, _ in PARAMS])
    for i, (_, w_, _) in enumerate(PARAMS):
        if w_.endswith("_ieff"):  # an efficiency between 20 % and 100 % of line rate
            lo[i], hi[i] = 1.0, 5.0
        elif w_.endswith("_hop") or w_.startswith("launch"):
            hi[i] = 100.0

    def resid(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(w * np.log(predict(tab, x)[rows] / tab.measured_s[rows]))

    r = least_squares(resid, np.clip(start, lo + 1e-9, hi - 1e-9), bounds=(lo, hi),
                      loss="soft_l1", f_scale=0.1, x_scale="jac")
    return np.asarray(r.x)


def errors(tab: Table, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Relative error as the accuracy benchmark reports it: time for latency rows, busbw
    (the inverse ratio) for bandwidth rows."""
    pred = predict(tab, x)
    ratio = pred / tab.measured_s
    bw = np.array([not g.endswith("latency") for g in tab.group])
    return np.where(bw, 1.0 / ratio - 1.0, ratio - 1.0)


def loso(tab: Table, x_all: NDArray[np.float64]) -> tuple[NDArray[np.float64],
                                                          dict[str, list[float]]]:
    """Each source's rows predicted by constants fitted without it."""
    src = np.array(tab.source)
    out = np.zeros(len(src))
    folds = {}
    for s in sorted(set(src)):
        keep = tab.use & (src != s)
        xs = fit(tab, keep, x_all)
        folds[s] = [float(v) for v in xs]
        mine = src == s
        out[mine] = errors(tab, xs)[mine]
    return out, folds


def summarise(tab: Table, err: NDArray[np.float64]) -> dict[str, dict[str, float]]:
    from collections import defaultdict

    by: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(tab.group):
        if tab.use[i]:
            by[g].append(i)
            by["all scopes, " + g.split(", ")[1]].append(i)
    return {g: {"rows": len(ix), "median": round(float(np.median(np.abs(err[ix]))), 4),
                "p90": round(float(np.quantile(np.abs(err[ix]), 0.9)), 4),
                "signed": round(float(np.median(err[ix])), 4)}
            for g, ix in sorted(by.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jacobian", action="store_true")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--at", type=Path, help="a JSON list of parameters to linearise at")
    args = ap.parse_args(argv)
    at = np.array(json.loads(args.at.read_text())) if args.at else None
    tab = jacobian(at) if args.jacobian else load_table()
    x = x0()
    print(json.dumps({"current": summarise(tab, errors(tab, x))}))
    if args.fit:
        xa = fit(tab, tab.use, x)
        print(json.dumps({"fitted": {f"{p}.{w}": round(float(v), 4)
                                     for (p, w, _), v in zip(PARAMS, xa, strict=True)}}))
        print(json.dumps({"x": [float(v) for v in xa]}))
        print(json.dumps({"in_sample": summarise(tab, errors(tab, xa))}))
        err, _ = loso(tab, xa)
        print(json.dumps({"leave_one_source_out": summarise(tab, err)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
