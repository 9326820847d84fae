"""How far apart independent published runs of one configuration are, beside the model.

Two sources that ran nccl-tests on the same system, the same number of servers, the same
collective and size, with the same forced algorithm or protocol and the same documented
NCCL environment, should agree; how much they do not is measurement and site variation
(firmware, topology, cabling, background load, clocks) that no model of the configuration
can remove. This script finds every such configuration among the primary rows of
``data/reference/`` (:func:`accuracy_nccl.all_cases`) measured by two sources or more, and
scores each source as if the other sources' median were a prediction of it::

    agreement error = (median of the other sources - this source) / this source

(in bus bandwidth; in time for latency rows), the sign convention of the held-out table.
Beside it, the model's leave-one-source-out error on the very same rows
(:func:`accuracy_nccl.heldout_errors`). Where the two are close, the model is as near the
published runs as they are to each other, and a lower error there is not to be had from
these data.

The NCCL release is not part of the configuration (most sources do not state it); each
line says how many of its configurations mix releases.

Prints one JSON line per group (scope × size band), then one per configuration.

Usage: python benchmarks/source_agreement.py [--no-model]

>>> agreement_errors([("a", 100.0), ("b", 80.0), ("b", 90.0)])
{'a': -0.15, 'b': 0.1765}
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_nccl as acc

MIB = 2**20

#: Size bands (bytes, upper bound exclusive) the groups split bandwidth rows into.
BANDS: tuple[tuple[str, float, float], ...] = (
    ("< 1 MiB", 0.0, MIB),
    ("1-16 MiB", MIB, 16 * MIB + 1),
    ("32-256 MiB", 16 * MIB + 1, 256 * MIB + 1),
    ("> 256 MiB", 256 * MIB + 1, float("inf")),
)


def band_of(nbytes: float) -> str:
    """The size band of ``nbytes`` (:data:`BANDS`)."""
    return next(name for name, lo, hi in BANDS if lo <= nbytes < hi)


def agreement_errors(values: list[tuple[str, float]]) -> dict[str, float]:
    """Each source's error when the median of the other sources' values predicts it
    (``values``: (source, measured value) pairs, several per source allowed: a source's
    own value is the median of its pairs). Fewer than two sources: empty."""
    per: dict[str, list[float]] = defaultdict(list)
    for src, v in values:
        per[src].append(v)
    own = {s: statistics.median(v) for s, v in per.items()}
    if len(own) < 2:
        return {}
    out = {}
    for s, v in own.items():
        others = statistics.median(x for t, x in own.items() if t != s)
        out[s] = round((others - v) / v, 4)
    return out


def document_of(source: str) -> str:
    """The document a source is: a page vendored twice (:data:`accuracy_nccl.SAME_DOCUMENT`)
    is one source, not two that agree with each other.

    >>> document_of("azure-aibg-nda100v4") == document_of(
    ...     "Azure/AI-benchmarking-guide Azure_Results/ND_A100_v4_results.md")
    True
    """
    return acc.SAME_DOCUMENT.get(source, source)


def config_key(c: acc.Case) -> tuple[Any, ...]:
    """What makes two rows the same configuration: system (with the row's own NIC set-up),
    servers, collective, size, forced algorithm and protocol, documented NCCL environment,
    GPUs per nccl-tests thread, and latency (time) or bandwidth row."""
    return (*acc.fabric_key(c), c.collective, int(c.nbytes), c.algo or "", c.proto or "",
            tuple(sorted(c.env)), c.gpus_per_thread, c.measured_time_us is not None)


def _spread(errs: list[float]) -> dict[str, float]:
    a = sorted(abs(e) for e in errs)
    return {"median": round(statistics.median(a), 4),
            "p90": round(a[min(int(0.9 * len(a)), len(a) - 1)], 4)}


def agreement(cs: list[acc.Case], model: list[float | None] | None = None
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(groups, configurations) for the rows ``cs``; ``model``: the model's held-out
    error of each row of ``cs`` (same order; ``None`` for a row of a source some constant
    was fitted on), to put beside the sources' disagreement."""
    rows: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, c in enumerate(cs):
        if not c.secondary and c.span is None:
            rows[config_key(c)].append(i)
    configs = []
    by_group: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for idx in rows.values():
        vals = [(document_of(cs[i].source), cs[i].measured_time_us
                 if cs[i].measured_time_us is not None else cs[i].measured_busbw)
                for i in idx]
        errs = agreement_errors(vals)
        if not errs:
            continue
        c0 = cs[idx[0]]
        fab = acc.fabric_of(c0)
        scope = "one server" if fab.info.servers <= 1 else "several servers"
        kind = "latency" if c0.measured_time_us is not None else band_of(c0.nbytes)
        group = f"{scope}, {kind}"
        releases = {cs[i].nccl_version for i in idx}
        item: dict[str, Any] = {
            "config": {"system": c0.system, "nodes": c0.nodes, "gpus": fab.n_gpus,
                       "collective": c0.collective, "size_bytes": int(c0.nbytes),
                       "algo": c0.algo or "auto", "proto": c0.proto or "auto",
                       "env": dict(c0.env)},
            "group": group, "sources": errs,
            "mixed_releases": len(releases) > 1}
        by_group[group]["sources"].extend(errs.values())
        by_group[group]["mixed"].append(float(len(releases) > 1))
        if model is not None:
            own: dict[str, list[float]] = defaultdict(list)
            for i in idx:
                e = model[i]
                if e is not None:
                    own[cs[i].source].append(e)
            m = {s: round(statistics.median(v), 4) for s, v in own.items()}
            item["model"] = m
            by_group[group]["model"].extend(m.values())
        configs.append(item)
    groups = []
    for g in sorted(by_group):
        d = by_group[g]
        out: dict[str, Any] = {"group": g, "configurations": len(d["mixed"]),
                               "comparisons": len(d["sources"]),
                               "mixed_releases": int(sum(d["mixed"])),
                               "sources_disagree": _spread(d["sources"])}
        if model is not None and d["model"]:
            out["model_held_out"] = {**_spread(d["model"]), "sources": len(d["model"])}
        groups.append(out)
    return groups, configs


def held_out(cs: list[acc.Case], errors: list[float]) -> list[float | None]:
    """``errors`` (one per row of ``cs``, :func:`accuracy_nccl.heldout_errors`) with
    ``None`` for the rows of sources some constant was fitted on: their errors are in
    sample, not held out."""
    fitted = acc.fitted_among(cs)
    return [None if c.source in fitted else e for c, e in zip(cs, errors, strict=True)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-model", action="store_true",
                    help="only the sources' disagreement (skips the held-out fit)")
    args = ap.parse_args(argv)
    cs = acc.all_cases()
    model = None if args.no_model else held_out(cs, acc.heldout_errors(cs)[0])
    groups, configs = agreement(cs, model)
    for g in groups:
        print(json.dumps(g))
    for c in configs:
        print(json.dumps(c))


if __name__ == "__main__":
    main()
