"""Accuracy of the collective model against published nccl-tests numbers.

Runs every nccl_intranode / nccl_internode / sharp_nvls row of
data/reference/measurements.csv (vendored published measurements) that the model covers,
on the matching system preset, and prints one JSON line per row (predicted vs measured
busbw, relative error) and a summary: median and max relative busbw error for sizes
>= 1 MiB and, apart, < 1 MiB.

Rows the model cannot run (no preset) print as {"not_covered": reason}. Secondary rows (a
reason from the reference data's own notes: single user report, approximate, vendor slide)
are run and printed with "secondary": reason; the summary gives "primary" statistics
without them and "all" statistics with them. Published ranges (rows 115, 141) count as
0 error inside the range.

``--fit`` re-fits the protocol constants (least squares on log busbw error over the
primary single-server rows, including the 1 KiB latencies of row 1087 measured with one
process per GPU; multi-node rows are held out) and prints the fitted values; the library's
constants were set from it.

Then every published nccl-tests row of data/reference/nccl_tests.csv (90 sources, none
used by any fit: benchmarks/published_nccl.py), the error per source, and the held-out
error per accuracy group (fabricsim.collectives.accuracy): rows of sources no constant
was fitted on, by group, by NCCL's choice, and by group once each source's own level is
divided out (``held_out_after_source_level``: the error of the model's shape, which one
factor per cluster cannot remove). ``--write-heldout`` writes that table where the
library reads it for the ``± band`` and the out-of-envelope warning of ``fabricsim bench``.

Usage: python benchmarks/accuracy_nccl.py [--fit | --write-heldout]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricsim.catalog import get_catalog, with_systems
from fabricsim.collectives import Tuner
from fabricsim.collectives.busbw import busbw_factor
from fabricsim.fabric import build_cluster

CSV = Path(__file__).resolve().parents[1] / "data" / "reference" / "measurements.csv"
CSV2 = CSV.with_name("measurements_2.csv")
MIB = 2**20


@dataclass
class Case:
    row: int
    system: str
    nodes: int
    nbytes: float
    measured_busbw: float  # GB/s
    algo: str | None = None
    proto: str | None = None
    collective: str = "all_reduce"
    cluster: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    #: measured range (lo, hi) in GB/s where the source gives one; error is 0 inside it
    span: tuple[float, float] | None = None
    #: a small-message latency row: the measured time (us) is compared, not busbw
    measured_time_us: float | None = None
    #: GPUs one nccl-tests thread drove (``-g``): rows 1-48 ran ``-g 8`` in one process
    gpus_per_thread: int = 1
    #: the independent source the row comes from (leave-one-source-out holds it out whole)
    source: str = ""
    #: the fabric as the source names it (``nvlink`` for one server)
    fabric: str = ""
    #: the NCCL environment the run documents that the model honours (``NCCL_NVLS_ENABLE``,
    #: ``NCCL_COLLNET_ENABLE``, channel bounds), as (name, value) pairs
    env: tuple[tuple[str, str], ...] = ()
    #: the NCCL release the run used, where its source says (``None``: the model's default)
    nccl_version: str | None = None

    @property
    def secondary(self) -> str:
        return SECONDARY.get((self.row, self.system), "")


#: Rows the model cannot run (no preset for the measured system), with the reason.
NOT_COVERED = {
    120: "2x H100 PCIe joined by an NVLink bridge: no system preset has bridged PCIe GPUs",
}

#: Systems of the rows no preset matches, defined as a user would (catalog.with_systems).
USER_SYSTEMS = {
    # rows 133-134: A100 servers with 4 HDR NICs (one per PCIe switch, shared by 2 GPUs)
    "a100-4hdr": {"base": "dgx-a100", "gpu": "a100-sxm-40gb", "nics": 4},
    # row 135: an A800 server with a single HDR NIC
    "a800-1hdr": {"base": "dgx-a800", "nics": 1},
}
CATALOG = with_systems(get_catalog(), USER_SYSTEMS)

#: Rows that are run and printed but kept out of the primary summary, each for a reason the
#: reference data gives itself (README: single user reports and vendor figures are ranges,
#: rows whose notes say so are secondary). Keyed by (row, system) where one row holds several
#: systems. The "all" summary includes them.
SECONDARY = {
    (97, "dgx-a100"): "single user report (stas00, older NCCL, -n 50): 32 KiB point 2x slower "
                      "than Azure's rows 6-7 on the same system; the two curves disagree",
    (98, "dgx-a100"): "single user report (stas00): 1 MiB point 2x slower than Azure's row 11 "
                      "on the same system and size",
    (121, "dgx-a100"): "notes: 'approximate, user-reported' (~200); contradicts rows 24, 102, 122",
    (170, "gb200-nvl72"): "vendor slide quoted second-hand (notes: 'vendor slide'); one GB200 "
                          "figure, no curve, group size not stated",
    (135, "a800-1hdr"): "the maintainer's expected figure, not a measurement (the user's 15.3 "
                        "GB/s was measured with storage traffic on the same NIC)",
}

def _size(config: str) -> float | None:
    m = re.search(r"msg=(\d+)B", config)
    return float(m.group(1)) if m else None


def cases() -> list[Case]:
    with open(CSV, encoding="utf-8") as fh:
        rows = {int(r["id"]): r for r in csv.DictReader(fh)}
    out: list[Case] = []
    for rid, r in rows.items():
        if r["topic"] != "nccl_intranode" or rid in NOT_COVERED or rid == 121:
            continue
        size = _size(r["config"])
        if size is None:
            continue
        value = r["value"].split("|")[-1]
        gpt = int(m.group(1)) if (m := re.search(r"-g (\d+)", r["config"])) else 1
        v = re.search(r"NCCL (2\.\d+\.\d+)", r["config"] + r["notes"])
        ver = v.group(1) if v else None
        if "A100" in r["config"]:
            out.append(Case(rid, "dgx-a100", 1, size, float(value), gpus_per_thread=gpt,
                            nccl_version=ver))
        elif "H100" in r["config"]:
            out.append(Case(rid, "dgx-h100", 1, size, float(value), gpus_per_thread=gpt,
                            nccl_version=ver))
    g8 = 8 * 2**30
    out += [
        Case(115, "dgx-h100", 1, 4 * 2**30, 367.5, algo="ring", note="range 365-370",
             span=(365.0, 370.0)),
        Case(121, "dgx-a100", 1, 4 * 2**30, 200.0, note="~200, approximate"),
        Case(116, "dgx-h100", 1, 4 * 2**30, 420, algo="nvls", cluster={"gpus_per_node": 5}),
        Case(116, "dgx-h100", 1, 4 * 2**30, 440, algo="nvls", cluster={"gpus_per_node": 6}),
        Case(116, "dgx-h100", 1, 4 * 2**30, 460, algo="nvls", cluster={"gpus_per_node": 7}),
        Case(116, "dgx-h100", 1, 4 * 2**30, 480, algo="nvls", cluster={"gpus_per_node": 8}),
        Case(117, "dgx-h100", 1, g8, 480, algo="nvls"),
        Case(117, "dgx-h100", 1, g8, 370, algo="ring"),
        Case(122, "dgx-a100", 1, 4 * 2**30, 232.54),
        Case(131, "dgx-a100", 4, g8, 192, algo="ring", note="multi-node ring, 8 HDR NICs"),
        Case(132, "dgx-a100", 4, g8, 24 * 8, algo="ring", note="24 GB/s per 200G NIC x 8"),
        Case(132, "dgx-a100", 4, g8, 12 * 8, algo="ring", cluster={"fabric": "roce-100g"},
             note="12 GB/s per 100G NIC x 8"),
        Case(141, "dgx-h100", 4, g8, 48.5 * 8, algo="ring", note="48-49 GB/s per NDR NIC x 8",
             span=(48.0 * 8, 49.0 * 8)),
        Case(133, "a100-4hdr", 3, 128 * MIB, 96.0,
             note="peak of a sweep up to 128 MB, NCCL's default algorithm"),
        Case(134, "a100-4hdr", 2, g8, 86.0,
             note="size not stated (nccl-tests' peak, taken at 8 GiB)"),
        Case(135, "a800-1hdr", 2, g8, 24.0, note="expected figure for one HDR NIC per node"),
        Case(169, "dgx-h200", 1, g8, 482.26, algo="nvls"),
        Case(169, "dgx-h200", 1, g8, 367.61, algo="ring"),
        Case(170, "dgx-h100", 1, g8, 480, algo="nvls"),
        Case(170, "dgx-h100", 1, g8, 370, algo="ring"),
        Case(170, "gb200-nvl72", 1, g8, 850, algo="nvls"),
        Case(170, "gb200-nvl72", 1, g8, 680, algo="ring"),
        Case(171, "aws-p5", 1, g8, 480, algo="nvls"),
    ]
    return _with_sources(out + scale_out_cases())


def source_key(text: str) -> str:
    """The independent source a reference row names: its repository and file, or its
    issue thread (the part of ``source`` before any parenthesis)."""
    return text.split(" (", 1)[0].strip()


def _with_sources(cs: list[Case]) -> list[Case]:
    keys: dict[int, str] = {}
    for path in (CSV, CSV2):
        with open(path, encoding="utf-8") as fh:
            keys.update({int(r["id"]): source_key(r["source"]) for r in csv.DictReader(fh)})
    for c in cs:
        c.source = keys[c.row]
        c.fabric = "nvlink" if c.nodes == 1 else str(c.cluster.get("fabric", "default"))
    return cs


#: Azure NDmv4 (8 x A100, 8 x HDR per VM) is the dgx-a100 preset.
_NDV4 = "dgx-a100"


def scale_out_cases() -> list[Case]:
    """Rows of measurements_2.csv: multi-node busbw and small-message latency."""
    with open(CSV2, encoding="utf-8") as fh:
        rows = {int(r["id"]): r for r in csv.DictReader(fh)}

    def val(rid: int) -> float:
        return float(rows[rid]["value"].split("|")[0])

    g1, g4 = float(2**30), float(4 * 2**30)
    out = [
        Case(1015, _NDV4, 1, g1, val(1015), collective="alltoall"),
        Case(1016, _NDV4, 2, g1, val(1016), collective="alltoall"),
        Case(1017, _NDV4, 2, g1, val(1017), collective="alltoall",
             cluster={"gpus_per_node": 1}),
        Case(1046, _NDV4, 2, g1, val(1046), collective="all_gather"),
        Case(1047, _NDV4, 2, g4, val(1047), collective="all_gather"),
        Case(1085, _NDV4, 2, g1, val(1085)),
        Case(1086, _NDV4, 2, g4, val(1086)),
    ]
    for rid in range(1078, 1083):  # 2 x 8 H100 on NDR, NCCL's default algorithm
        out.append(Case(rid, "dgx-h100", 2, _size(rows[rid]["config"]) or 0.0, val(rid)))
    for rid in (1083, 1084):  # NCCL_ALGO=NVLSTree: our automatic choice is compared
        out.append(Case(rid, "dgx-h100", 2, _size(rows[rid]["config"]) or 0.0, val(rid),
                        note="NCCL forced NVLSTree; model: automatic choice"))
    # row 1087: 1 KiB latency (us) per collective, three shapes (notes carry two of them)
    lat = {"2x8": ((2, {}), (33.74, 35.85, 49.75)),
           "1x8": ((1, {}), (12.53, 16.96, 9.34)),
           "2x1": ((2, {"gpus_per_node": 1}), (16.08, 21.27, 29.84))}
    for (nodes, cl), times in lat.values():
        for coll, t in zip(("all_gather", "all_reduce", "alltoall"), times, strict=True):
            out.append(Case(1087, _NDV4, nodes, 1024.0, 0.0, collective=coll, cluster=cl,
                            measured_time_us=t))
    return out


_FABRICS: dict[tuple[Any, ...], Any] = {}
_CATALOGS: dict[str, Any] = {}


def choose(c: Case, tuner: Tuner | None = None) -> Any:
    """What the row's run is by the model (:class:`fabricsim.collectives.tuner.Choice`):
    the choice of the NCCL release the run used (where its source says; else the model's
    default, as ``bench`` makes it), narrowed by what the run forced and by the NCCL
    environment it documents (as ``bench`` narrows it)."""
    from fabricsim.collectives.nccl_env import nccl_env
    from fabricsim.collectives.tuner import default_tuner

    fab = fabric_of(c)
    env = nccl_env(dict(c.env))
    algos, protos = env.choices(c.collective, c.algo, c.proto)
    t = tuner or default_tuner(fab)
    group = t.group_of(fab, None)
    return t.choose_among(fab, c.collective, c.nbytes, None, algos, protos,
                          env.channels_of(group),
                          gpus_per_thread=c.gpus_per_thread, nccl_version=c.nccl_version,
                          back_to_back=True,  # nccl-tests' iterations, one after another
                          nvls_channels=env.nvls_channels_of(group))


def predict_us(c: Case, tuner: Tuner | None = None) -> float:
    """The time (us) the row's run takes by the model (:func:`choose`)."""
    return float(choose(c, tuner).time) * 1e6


def predict(c: Case, tuner: Tuner | None = None) -> float:
    """Predicted busbw (GB/s), or for a latency row the predicted time (us)."""
    t = predict_us(c, tuner)
    if c.measured_time_us is not None:
        return t
    n = fabric_of(c).n_gpus
    return c.nbytes / (t * 1e-6) * busbw_factor(c.collective, n) / 1e9


def rel_error(c: Case, predicted: float) -> float:
    """Relative busbw error (time error for latency rows); inside a published range it is
    0, outside it is measured from the nearer end."""
    if c.measured_time_us is not None:
        return (predicted - c.measured_time_us) / c.measured_time_us
    if c.span is not None:
        lo, hi = c.span
        if predicted < lo:
            return (predicted - lo) / lo
        if predicted > hi:
            return (predicted - hi) / hi
        return 0.0
    return (predicted - c.measured_busbw) / c.measured_busbw


def evaluate(cs: list[Case], tuner: Tuner | None = None) -> list[dict[str, Any]]:
    out = []
    for c in cs:
        p = predict(c, tuner)
        what = ({"measured_time_us": c.measured_time_us, "predicted_time_us": round(p, 2)}
                if c.measured_time_us is not None else
                {"measured_busbw_gbps": c.measured_busbw, "predicted_busbw_gbps": round(p, 2)})
        out.append({"row": c.row, "system": c.system, "nodes": c.nodes, **c.cluster,
                    "collective": c.collective, "size_bytes": int(c.nbytes),
                    "algo": c.algo or "auto", **what,
                    "rel_error": round(rel_error(c, p), 4),
                    **({"note": c.note} if c.note else {}),
                    **({"secondary": c.secondary} if c.secondary else {})})
    return out


def _stats(res: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    bw = [r for r in res if "measured_time_us" not in r]
    for name, sub in (("ge_1MiB", [r for r in bw if r["size_bytes"] >= MIB]),
                      ("lt_1MiB", [r for r in bw if r["size_bytes"] < MIB]),
                      ("single_node_ge_1MiB", [r for r in bw if r["size_bytes"] >= MIB
                                               and r["nodes"] == 1]),
                      ("multi_node_ge_1MiB", [r for r in bw if r["size_bytes"] >= MIB
                                              and r["nodes"] > 1]),
                      ("latency", [r for r in res if "measured_time_us" in r])):
        if sub:
            errs = [abs(r["rel_error"]) for r in sub]
            worst = max(sub, key=lambda r: abs(r["rel_error"]))
            out[name] = {"rows": len(errs),
                         "median_abs_rel_error": round(statistics.median(errs), 4),
                         "max_abs_rel_error": round(max(errs), 4),
                         "worst_row": worst["row"], "worst_system": worst["system"],
                         "worst_size": worst["size_bytes"]}
    return out


def summary(res: list[dict[str, Any]]) -> dict[str, Any]:
    """Primary summary (secondary rows left out) and the same over all rows run."""
    return {"summary": True,
            "primary": _stats([r for r in res if "secondary" not in r]),
            "all": _stats(res),
            "secondary_rows": sorted({f"{r}:{s}" for r, s in SECONDARY}),
            "not_covered_rows": sorted(NOT_COVERED)}


#: Constants the fit may move: (protocol or "all", field). "<class>_hop" / "<class>_eff" are
#: entries of hop_latency (us) / efficiency; launch (us) is shared by every protocol. Not
#: fitted: NVLS's hop and LL128's NVLink efficiency, which come from NCCL's tuning model
#: (see fabricsim.protocols).
FIT_PARAMS: tuple[tuple[str, str], ...] = (
    ("all", "launch"), ("all", "launch_per_gpu"), ("ll", "nvlink_hop"), ("ll", "nvlink_eff"),
    ("ll128", "nvlink_hop"), ("ll128", "nvlinkscale_nvlink3"),
    ("simple", "nvlink_hop"), ("simple", "nvlink_eff"),
    ("simple", "nvls_eff"), ("simple", "ramp_bytes"), ("simple", "ramp_power"),
)


def _get(proto: Any, what: str) -> float:
    if what in ("launch", "launch_per_gpu"):
        return max(float(getattr(proto, what)) * 1e6, 0.1)
    if what in ("ramp_bytes", "ramp_power"):
        return float(getattr(proto, what))
    if what.startswith("hopscale_"):
        return float(proto.hop_scale.get(what[9:], 1.0))
    if what.startswith("nvlinkscale_"):
        return float(proto.nvlink_scale.get(what[12:], 1.0))
    cls, kind = what.split("_")
    return float(proto.hop_latency[cls]) * 1e6 if kind == "hop" else float(proto.efficiency[cls])


def fit(cs: list[Case]) -> Tuner:  # pragma: no cover - calibration tool
    """Least squares on log busbw over the primary rows (>= 1 MiB weight 1, < 1 MiB 0.5).
    Secondary rows (see SECONDARY) are left out of the fit as out of the summary."""
    import numpy as np
    from scipy.optimize import least_squares

    from fabricsim import protocols

    base = {k: protocols.PROTOCOLS[k] for k in ("ll", "ll128", "simple")}
    fitted: dict[str, Tuner] = {}

    def apply(x: Any) -> Tuner:
        new = dict(base)
        for (p, what), v in zip(FIT_PARAMS, np.exp(x), strict=True):
            for q in (("ll", "ll128", "simple") if p == "all" else (p,)):
                pr = new[q]
                if what in ("launch", "launch_per_gpu"):
                    new[q] = pr.scaled(**{what: float(v) * 1e-6})
                elif what in ("ramp_bytes", "ramp_power"):
                    new[q] = pr.scaled(**{what: float(v)})
                elif what.startswith("nvlinkscale_"):
                    ns = dict(pr.nvlink_scale)
                    ns[what[12:]] = float(v)
                    new[q] = pr.scaled(nvlink_scale=ns)
                elif what == "hopscale_nvlink4":  # Hopper and Blackwell share the value
                    hs = dict(pr.hop_scale)
                    for gen in ("nvlink4", "nvlink4-h800", "nvlink5"):
                        hs[gen] = float(v)
                    new[q] = pr.scaled(hop_scale=hs)
                else:
                    cls, kind = what.split("_")
                    hop, eff = dict(pr.hop_latency), dict(pr.efficiency)
                    if kind == "hop":
                        hop[cls] = float(v) * 1e-6
                    else:
                        eff[cls] = float(v)
                    new[q] = pr.scaled(hop_latency=hop, efficiency=eff)
        fitted["tuner"] = Tuner(new)  # a model of its own: the library's is not touched
        return fitted["tuner"]

    # one server only: the fitted constants are NVLink's and the launch's; multi-node rows
    # and the two-server latencies are held out to validate the network model
    use = [c for c in cs if not c.secondary and c.nodes == 1]
    w = np.array([1.0 if c.nbytes >= MIB or c.measured_time_us else 0.5 ** 0.5
                  for c in use])

    def resid(x: Any) -> Any:
        t = apply(x)
        return w * np.array([np.log1p(rel_error(c, predict(c, t))) for c in use])

    x0 = np.log([_get(base["simple" if p == "all" else p], what) for p, what in FIT_PARAMS])
    r = least_squares(resid, x0, diff_step=1e-3, max_nfev=400)
    print(json.dumps({"fit": {f"{p}.{what}": round(float(v), 4) for (p, what), v in
                              zip(FIT_PARAMS, np.exp(r.x), strict=True)},
                      "cost": float(r.cost), "nfev": int(r.nfev)}))
    return apply(r.x)


#: Values (us) among which the leave-one-source-out fit picks the protocols' cost of a
#: network crossing per channel (``Protocol.crossing_per_channel``).
CROSSING_GRID_US: tuple[float, ...] = tuple(round(0.25 * i, 2) for i in range(13))


def grid_errors(cs: list[Case], rows: list[int], values: tuple[Any, ...],
                tuner_of: Any) -> dict[Any, dict[int, float]]:
    """Each of ``rows``' error (index into ``cs`` -> error) under ``tuner_of(value, backend)``
    for every trial value: one shared analytic backend routes each schedule once for all
    of them."""
    from fabricsim.backends.analytic import AnalyticBackend

    shared = AnalyticBackend()
    errs: dict[Any, dict[int, float]] = {}
    for v in values:
        t = tuner_of(v, shared)
        errs[v] = {i: rel_error(cs[i], predict(cs[i], t)) for i in rows}
    return errs


def crossing_fit(cs: list[Case]) -> dict[str, Any]:
    """The crossing cost per channel, fitted on the rows of several servers of every
    source (:data:`CROSSING_GRID_US`; loss: each source's median absolute log error,
    summed over sources, so that no source outweighs another by its row count and no
    source's outlying rows (a regressed run) pull the value), and the same fit
    with each source left out in turn. Returns the value over all sources (``all_us``, the
    library's), each source's held-out value (``loso_us``) and, per index into ``cs`` of a
    primary row of several servers, its error predicted with its own source left out
    (``errors``)."""
    multi = [i for i, c in enumerate(cs)
             if not c.secondary and fabric_of(c).info.servers > 1]
    from fabricsim.protocols import PROTOCOLS

    nvlink5 = PROTOCOLS["simple"].nvlink_scale.get("nvlink5", 1.0)
    errs = grid_errors(cs, multi, CROSSING_GRID_US,
                       lambda us, backend: _tuner(us, nvlink5, backend))
    every, loso = grid_fit(cs, multi, errs)
    return {"all_us": every, "loso_us": loso, "sources": len(loso),
            "errors": {i: errs[loso[cs[i].source]][i] for i in multi}}


def source_loss(errs: dict[int, float], idx: list[int]) -> float:
    """One source's loss in a fit: the median absolute log error of its rows ``idx``
    (``errs``: row index -> relative error)."""
    return statistics.median(abs(math.log1p(max(errs[i], -0.999))) for i in idx)


def rows_by_source(cs: list[Case], rows: list[int]) -> dict[str, list[int]]:
    """``rows`` (indices into ``cs``) grouped by their source, sources in name order.

    >>> cs = [Case(row=1, system="dgx-h100", nodes=1, nbytes=1.0, measured_busbw=1.0,
    ...            source=s) for s in "bab"]
    >>> rows_by_source(cs, [0, 1, 2])
    {'a': [1], 'b': [0, 2]}
    """
    by_src: dict[str, list[int]] = {}
    for i in rows:
        by_src.setdefault(cs[i].source, []).append(i)
    return dict(sorted(by_src.items()))


def _library_tuner(backend: Any, **given: float) -> Tuner:
    """:func:`_tuner` with the library's crossing cost and NVLink 5 share and the
    constants ``given`` (its keywords) as trial values."""
    from fabricsim.protocols import PROTOCOLS

    simple = PROTOCOLS["simple"]
    return _tuner(simple.crossing_per_channel * 1e6, simple.nvlink_scale.get("nvlink5", 1.0),
                  backend, **given)


def grid_fit(cs: list[Case], rows: list[int],
             errs: dict[Any, dict[int, float]]) -> tuple[Any, dict[str, Any]]:
    """The value of ``errs`` (value -> row index -> error) that fits ``rows`` of every
    source best, and the best with each source left out. The loss is each source's median
    absolute log error (:func:`source_loss`), summed over sources, so that no source
    outweighs another by its row count and no source's outlying rows pull the value."""
    by_src = rows_by_source(cs, rows)

    def best(skip: str | None) -> Any:
        return min(errs, key=lambda v: sum(source_loss(errs[v], idx)
                                           for s, idx in by_src.items() if s != skip))

    return best(None), {s: best(s) for s in sorted(by_src)}


#: Values among which the leave-one-source-out fit picks Simple's share of NVLink 5 against
#: the share fitted on Ampere and Hopper (``Protocol.nvlink_scale["nvlink5"]``).
NVLINK5_GRID: tuple[float, ...] = tuple(round(0.80 + 0.02 * i, 2) for i in range(11))


def _tuner(crossing_us: float, nvlink5: float, backend: Any = None,
           ring_step_us: float | None = None, mnnvl_us: float | None = None,
           plugin_share: float | None = None, tree_ll128_gbs: float | None = None,
           mnnvl_nvls_stages: float | None = None,
           nvls_warp_gbs: float | None = None,
           nvlstree_warp_gbs: float | None = None,
           ll_step: float | None = None, ll128_nvlink3: float | None = None,
           nvlstree_channel_gbs: float | None = None) -> Tuner:
    """The library's protocols with the crossing cost and Simple's NVLink 5 share given
    (LL128's follows it: it runs at 0.92 of Simple's share), and Simple's NVLink step on
    a ring, the multi-node NVLink step, the share of a network plugin's declared latency a
    crossing pays, LL128's rate per tree channel between servers (GB/s), the NVLS
    stages a rack's hosts add to a fill, Simple's rates per copy warp of NVLS and of
    NVLSTree (GB/s), the factor on LL's NVLink step on Hopper (NVLink 4, ``ll_step``),
    LL128's factor on NVLink 3 (A100, ``ll128_nvlink3``) and Simple's bus bandwidth per
    NVLS channel of NVLSTree from 4 servers on (GB/s, ``nvlstree_channel_gbs``) where given
    (``None``: the library's)."""
    from fabricsim import protocols

    out = {k: p.scaled(crossing_per_channel=crossing_us * 1e-6,
                       mnnvl_step=p.mnnvl_step if mnnvl_us is None else mnnvl_us * 1e-6,
                       plugin_latency_share=p.plugin_latency_share if plugin_share is None
                       else plugin_share,
                       mnnvl_nvls_stages=p.mnnvl_nvls_stages if mnnvl_nvls_stages is None
                       else mnnvl_nvls_stages)
           for k, p in protocols.PROTOCOLS.items()}
    for name in ("simple", "ll128"):
        p = out[name]
        out[name] = p.scaled(nvlink_scale={**dict(p.nvlink_scale), "nvlink5": nvlink5})
    if tree_ll128_gbs is not None:
        out["ll128"] = out["ll128"].scaled(tree_channel_rate=tree_ll128_gbs * 1e9)
    for algo, gbs in (("nvls", nvls_warp_gbs), ("nvlstree", nvlstree_warp_gbs)):
        if gbs is not None:
            p = out["simple"]
            out["simple"] = p.scaled(nvls_warp_rate={**dict(p.nvls_warp_rate),
                                                     algo: gbs * 1e9})
    if ll_step is not None:
        p = out["ll"]
        out["ll"] = p.scaled(hop_scale={**dict(p.hop_scale), "nvlink4": ll_step})
    if nvlstree_channel_gbs is not None:
        out["simple"] = out["simple"].scaled(nvlstree_channel_rate=nvlstree_channel_gbs * 1e9)
    if ll128_nvlink3 is not None:
        p = out["ll128"]
        out["ll128"] = p.scaled(nvlink_scale={**dict(p.nvlink_scale),
                                              "nvlink3": ll128_nvlink3})
    if ring_step_us is not None:
        p = out["simple"]
        out["simple"] = p.scaled(fixed_step_latency={**dict(p.fixed_step_latency),
                                                     "nvlink": ring_step_us * 1e-6})
    return Tuner(out, backend=backend)


#: Values (us) among which :func:`ring_step_fit` picks Simple's NVLink step on a ring.
RING_STEP_GRID_US: tuple[float, ...] = tuple(round(2.0 + 0.5 * i, 1) for i in range(11))


def _line(sizes: Any, times: Any) -> tuple[float, float]:
    """(a, b) of ``t = a + b S`` fitted to ``times`` (us) at ``sizes`` (bytes), least
    squares on relative residuals."""
    import numpy as np

    m = np.vstack([np.ones_like(sizes), sizes]).T / times[:, None]
    (a, b), *_ = np.linalg.lstsq(m, np.ones_like(times), rcond=None)
    return float(a), float(b)


def _ring_curve_rows(cs: list[Case], one_server: bool = False) -> list[list[int]]:
    """Held-out curves (index lists into ``cs``) where NCCL's choice is a ring with Simple:
    one source, system, scale, set-up and collective, four sizes or more from 1 MiB."""
    curves: dict[tuple[Any, ...], list[int]] = {}
    for i in held_out(cs):
        c = cs[i]
        if c.measured_time_us is not None or c.nbytes < MIB or c.measured_busbw <= 0:
            continue
        if one_server and fabric_of(c).info.servers != 1:
            continue
        ch = choose(c)
        if (ch.algorithm, ch.protocol) != ("ring", "simple"):
            continue
        key = (c.source, c.system, c.nodes, c.collective, fabric_key(c))
        curves.setdefault(key, []).append(i)
    return [idx for _, idx in sorted(curves.items(), key=lambda kv: repr(kv[0]))
            if len({cs[i].nbytes for i in idx}) >= 4]


def _times_us(cs: list[Case], idx: list[int], busbw: list[float]) -> Any:
    import numpy as np

    n = fabric_of(cs[idx[0]]).n_gpus
    size = np.array([cs[i].nbytes for i in idx])
    return size * busbw_factor(cs[idx[0]].collective, n) / np.array(busbw) / 1e3


def ring_step_fit(cs: list[Case]) -> dict[str, Any]:
    """Simple's NVLink step on a ring (``Protocol.fixed_step_latency``,
    :data:`RING_STEP_GRID_US`) fitted on the fixed time of the held-out ring curves of one
    server whose steps cost a fixed time (:func:`ring_curves`; not A100's, which keep the
    ramp: ``fabricsim.collectives.ring``): each curve, measured and modelled, fitted as
    ``t = a + S / bw``, the loss each source's median ``|log(a_model / a_measured)|``
    summed over sources (as in :func:`crossing_fit`). The step is the fixed part of a
    ring's time, so it is fitted on that part alone: fitted on the rows instead, it would
    also make up for errors in the curves' rate. Returns the value over every source
    (``all``), each source left out (``loso``), and the sources and curves it rests on."""
    import numpy as np

    from fabricsim.backends.analytic import AnalyticBackend
    from fabricsim.collectives.registry import Group, get_algorithm

    ring = get_algorithm("ring")
    measured: list[tuple[list[int], Any, float]] = []  # (rows, sizes, measured intercept)
    for idx in _ring_curve_rows(cs, one_server=True):
        if ring.fixed_steps is None or not ring.fixed_steps(  # rings keeping the ramp
                Group.of(fabric_of(cs[idx[0]])), cs[idx[0]].collective):
            continue
        size = np.array([cs[i].nbytes for i in idx])
        a = _line(size, _times_us(cs, idx, [cs[i].measured_busbw for i in idx]))[0]
        if a > 0:
            measured.append((idx, size, a))
    shared = AnalyticBackend()
    loss: dict[float, dict[str, list[float]]] = {}
    for v in RING_STEP_GRID_US:
        t = _library_tuner(shared, ring_step_us=v)
        per: dict[str, list[float]] = {}
        for idx, size, a_meas in measured:
            a_mod = _line(size, _times_us(cs, idx, [predict(cs[i], t) for i in idx]))[0]
            per.setdefault(cs[idx[0]].source, []).append(
                abs(math.log(max(a_mod, 1e-9) / a_meas)))
        loss[v] = per
    sources = sorted({cs[idx[0]].source for idx, _, _ in measured})

    def best(without: str | None) -> float:
        return min(RING_STEP_GRID_US, key=lambda v: sum(
            statistics.median(x) for s, x in loss[v].items() if s != without))

    return {"all": best(None), "loso": {s: best(s) for s in sources},
            "sources": len(sources), "curves": len(measured)}


def nvlink5_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of the rows Simple's NVLink 5 share is fitted on: primary rows
    of held-out sources, 1 MiB and up, inside one NVLink domain of Blackwell GPUs (or
    later, on Blackwell's row of NCCL's tables), where NCCL's choice is a ring or
    point-to-point with Simple."""
    from fabricsim.protocols import tuning_hardware

    out = []
    for i in held_out(cs):
        c = cs[i]
        if c.nbytes < MIB:
            continue
        fab = fabric_of(c)
        if fab.info.servers > 1 or tuning_hardware(fab)[1] != "nvlink5":
            continue
        ch = choose(c)
        if ch.protocol == "simple" and ch.algorithm in ("ring", "direct"):
            out.append(i)
    return out


def nvlink5_fit(cs: list[Case]) -> dict[str, Any]:
    """Simple's share of NVLink 5 (:data:`NVLINK5_GRID`) fitted on :func:`nvlink5_rows`
    of every source, and with each source left out in turn; the loss as in
    :func:`crossing_fit` (each source's median absolute log error, summed)."""
    from fabricsim.protocols import PROTOCOLS

    rows = nvlink5_rows(cs)
    lib_us = PROTOCOLS["simple"].crossing_per_channel * 1e6
    errs = grid_errors(cs, rows, NVLINK5_GRID,
                       lambda v, backend: _tuner(lib_us, v, backend))
    every, loso = grid_fit(cs, rows, errs)
    return {"all": every, "loso": loso, "sources": len(loso), "rows": len(rows)}


#: Values (us) among which :func:`mnnvl_fit` picks the multi-node NVLink step.
MNNVL_GRID_US: tuple[float, ...] = tuple(round(0.25 * i, 2) for i in range(9))


def mnnvl_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of held-out rows whose GPUs sit on several hosts of one NVLink
    domain (a rack's compute trays, joined by multi-node NVLink)."""
    from fabricsim.collectives.registry import Group

    return [i for i in held_out(cs) if Group.of(fabric_of(cs[i])).spans_hosts]


def one_constant_fit(cs: list[Case], rows: list[int], grid: tuple[float, ...],
                     keyword: str) -> dict[str, Any]:
    """One constant of :func:`_tuner` (its ``keyword``, from ``grid``) fitted on ``rows``
    of every source and with each source left out in turn, the other constants at the
    library's; the loss as in :func:`crossing_fit`. Also each source's own best value
    (``by_source``; ``None`` where the grid does not move its loss): the sources that move
    it, and those it leaves alone."""
    errs = grid_errors(cs, rows, grid,
                       lambda v, backend: _library_tuner(backend, **{keyword: v}))
    every, loso = grid_fit(cs, rows, errs)
    own = {s: (min(grid, key=lambda v: source_loss(errs[v], idx))
               if len({round(source_loss(errs[v], idx), 4) for v in grid}) > 1 else None)
           for s, idx in rows_by_source(cs, rows).items()}
    return {"all": every, "loso": loso, "sources": len(loso), "rows": len(rows),
            "by_source": own}


#: Values among which :func:`mnnvl_joint_fit` picks the NVLS stages a rack's hosts add.
MNNVL_NVLS_GRID: tuple[float, ...] = tuple(0.5 * i for i in range(19))


def mnnvl_joint_fit(cs: list[Case]) -> dict[str, Any]:
    """The two costs of a group across a rack's hosts fitted together on
    :func:`mnnvl_rows`, each source left out in turn: the multi-node NVLink step
    (``Protocol.mnnvl_step``, :data:`MNNVL_GRID_US`) and the NVLS stages such a group's
    fill takes more (``Protocol.mnnvl_nvls_stages``, :data:`MNNVL_NVLS_GRID`). They act on
    the same rows, so a source left out is predicted with both fitted without it; the
    loss as in :func:`crossing_fit`. Values are ``(step_us, stages)`` pairs; also each
    source's own best pair (``by_source``; ``None`` where the grid does not move its
    loss)."""
    rows = mnnvl_rows(cs)
    grid = tuple((us, k) for us in MNNVL_GRID_US for k in MNNVL_NVLS_GRID)
    errs = grid_errors(cs, rows, grid, lambda v, backend: _library_tuner(
        backend, mnnvl_us=v[0], mnnvl_nvls_stages=v[1]))
    every, loso = grid_fit(cs, rows, errs)
    own: dict[str, tuple[float | None, float | None]] = {}
    for s, idx in rows_by_source(cs, rows).items():
        loss = {v: round(source_loss(errs[v], idx), 4) for v in grid}
        b = min(grid, key=lambda v: loss[v])
        # a component the source's loss does not move (the other held at its best) is None
        moved = [len({loss[v] for v in grid if v[1 - k] == b[1 - k]}) > 1 for k in (0, 1)]
        own[s] = (b[0] if moved[0] else None, b[1] if moved[1] else None)
    return {"all": every, "loso": loso, "sources": len(loso), "rows": len(rows),
            "by_source": own}


def _part(joint: dict[str, Any], k: int) -> dict[str, Any]:
    """Element ``k`` of every pair of :func:`mnnvl_joint_fit`'s result."""
    return {"all": joint["all"][k], "loso": {s: v[k] for s, v in joint["loso"].items()},
            "sources": joint["sources"], "rows": joint["rows"],
            "by_source": {s: v[k] for s, v in joint["by_source"].items()}}


def mnnvl_fit(cs: list[Case], joint: dict[str, Any] | None = None) -> dict[str, Any]:
    """The multi-node NVLink step of :func:`mnnvl_joint_fit` (``joint``, when already
    fitted): ``all``, ``loso``, ``by_source`` in microseconds."""
    return _part(mnnvl_joint_fit(cs) if joint is None else joint, 0)


def mnnvl_nvls_fit(cs: list[Case], joint: dict[str, Any] | None = None) -> dict[str, Any]:
    """The NVLS stages of :func:`mnnvl_joint_fit` (``joint``, when already fitted) that a
    group across a rack's hosts adds to an NVLS or NVLSTree fill."""
    return _part(mnnvl_joint_fit(cs) if joint is None else joint, 1)


#: Values among which :func:`plugin_fit` picks the share of a network plugin's declared
#: latency that each crossing pays.
PLUGIN_GRID: tuple[float, ...] = tuple(round(0.02 * i, 2) for i in range(11))


def plugin_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of held-out rows of several servers whose network plugin
    declares a latency to NCCL (aws-ofi-nccl on EFA)."""
    return [i for i in held_out(cs) if fabric_of(cs[i]).info.servers > 1
            and fabric_of(cs[i]).info.net_plugin_latency > 0]


def plugin_fit(cs: list[Case]) -> dict[str, Any]:
    """The share of the network plugin's declared latency each crossing pays
    (``Protocol.plugin_latency_share``, :data:`PLUGIN_GRID`) fitted on :func:`plugin_rows`
    (:func:`one_constant_fit`)."""
    return one_constant_fit(cs, plugin_rows(cs), PLUGIN_GRID, "plugin_share")


#: Values (GB/s) among which :func:`tree_ll128_fit` picks LL128's rate per tree channel
#: between servers (1000: no bound within reach).
TREE_LL128_GRID_GBS: tuple[float, ...] = (3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0, 10.0,
                                          12.0, 15.0, 20.0, 1000.0)


def tree_ll128_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of held-out rows of several servers where NCCL's choice is a
    tree with LL128."""
    return [i for i in held_out(cs) if fabric_of(cs[i]).info.servers > 1
            and (lambda c: (c.algorithm, c.protocol))(choose(cs[i])) == ("tree", "ll128")]


def tree_ll128_fit(cs: list[Case]) -> dict[str, Any]:
    """LL128's rate per channel of a tree between servers (``Protocol.tree_channel_rate``,
    :data:`TREE_LL128_GRID_GBS`) fitted on :func:`tree_ll128_rows`
    (:func:`one_constant_fit`)."""
    return one_constant_fit(cs, tree_ll128_rows(cs), TREE_LL128_GRID_GBS, "tree_ll128_gbs")


#: Values (GB/s) among which :func:`nvls_warp_fit` picks Simple's rate per copy warp of
#: NVLS or NVLSTree (1000: no bound within reach).
NVLS_WARP_GRID_GBS: tuple[float, ...] = (*(round(2.0 + 0.1 * i, 1) for i in range(16)),
                                         1000.0)


def nvls_warp_rows(cs: list[Case], algo: str = "nvls") -> list[int]:
    """Indices into ``cs`` of held-out rows where NCCL's choice is ``algo`` (NVLS or
    NVLSTree) and the model charges its copy warps
    (:func:`~fabricsim.collectives.pipeline.nvls_copy_warps`: Blackwell GPUs); for
    NVLSTree also the rows of :func:`mnnvl_rows`, whose NVLS stages trade against its
    rate (a slower fill or slower warps), so that the two fits share their rows: the
    rate fitted there and the stages fitted there (with the step) are each other's
    optimum, where NVLSTree's rows alone drift with the stages."""
    from fabricsim.protocols import tuning_hardware

    rows = [i for i in held_out(cs)
            if tuning_hardware(fabric_of(cs[i]))[1].startswith("nvlink5")
            and choose(cs[i]).algorithm == algo]
    return sorted({*rows, *mnnvl_rows(cs)}) if algo == "nvlstree" else rows


def nvls_warp_fit(cs: list[Case], algo: str = "nvls") -> dict[str, Any]:
    """Simple's rate per copy warp of ``algo`` (NVLS or NVLSTree;
    ``Protocol.nvls_warp_rate``, :data:`NVLS_WARP_GRID_GBS`) fitted on
    :func:`nvls_warp_rows` (:func:`one_constant_fit`)."""
    return one_constant_fit(cs, nvls_warp_rows(cs, algo), NVLS_WARP_GRID_GBS,
                            f"{algo}_warp_gbs")


#: Values among which :func:`ampere_ll128_fit` picks LL128's factor on NVLink 3.
AMPERE_LL128_GRID: tuple[float, ...] = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def ampere_ll128_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of primary rows on A100 GPUs (NVLink 3) where NCCL's choice runs
    LL128, one server or several, run with one process per GPU: under ``-g 8`` one thread
    issues the operation on eight GPUs, and whether that issue overlaps the kernels
    depends on a release most such sources do not print (docs/collectives.md, "Known
    gaps"), so their rows do not say how fast LL128's kernel is."""
    from fabricsim.protocols import tuning_hardware

    return [i for i, c in enumerate(cs)
            if not c.secondary and c.gpus_per_thread == 1
            and tuning_hardware(fabric_of(c))[1] == "nvlink3"
            and choose(c).protocol == "ll128"]


def _one_entry_tuner(proto: str, table: str, key: str, value: float, backend: Any) -> Tuner:
    """The library's protocols with one entry of one of ``proto``'s tables (a mapping
    field such as ``nvlink_scale`` or ``hop_scale``) set to ``value``."""
    from fabricsim import protocols

    out = dict(protocols.PROTOCOLS)
    p = out[proto]
    out[proto] = p.scaled(**{table: {**dict(getattr(p, table)), key: value}})
    return Tuner(out, backend=backend)


def ampere_ll128_fit(cs: list[Case]) -> dict[str, Any]:
    """LL128's factor on NVLink 3 (``Protocol.nvlink_scale["nvlink3"]``) fitted on
    :func:`ampere_ll128_rows` of every source (:data:`AMPERE_LL128_GRID`; the loss as in
    :func:`crossing_fit`) and with each source left out in turn."""
    rows = ampere_ll128_rows(cs)
    errs = grid_errors(cs, rows, AMPERE_LL128_GRID, lambda v, backend: _one_entry_tuner(
        "ll128", "nvlink_scale", "nvlink3", v, backend))
    every, loso = grid_fit(cs, rows, errs)
    return {"all": every, "loso": loso, "sources": len(loso), "rows": len(rows)}


#: Factors on LL's NVLink step (``Protocol.hop_scale["nvlink5"]``) among which
#: :func:`blackwell_ll_fit` picks the one that fits Blackwell's LL rows in one NVLink domain.
BLACKWELL_LL_GRID: tuple[float, ...] = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5)


def blackwell_ll_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of held-out rows of one NVLink domain of Blackwell GPUs (NVLink 5:
    an HGX board, a GB200/GB300 tray or several trays of one rack) where NCCL's choice
    runs LL: no network step, so the crossing cost plays no part."""
    from fabricsim.protocols import tuning_hardware

    return [i for i in held_out(cs)
            if fabric_of(cs[i]).info.servers == 1
            and tuning_hardware(fabric_of(cs[i]))[1].startswith("nvlink5")
            and choose(cs[i]).protocol == "ll"]


def blackwell_ll_fit(cs: list[Case]) -> dict[str, Any]:
    """What :func:`blackwell_ll_rows` say LL's NVLink step costs on Blackwell, as a factor
    on the step fitted on 8-GPU Hopper and Ampere servers (the library's is 1: no factor):
    the value of :data:`BLACKWELL_LL_GRID` that fits every source best, each source left
    out in turn (the loss as in :func:`crossing_fit`), and each source's signed median
    error with the library's step (``signed``). Reported, not applied: the rows disagree
    on where the cost lies (docs/collectives.md, "Known gaps")."""
    import statistics as st

    from fabricsim import protocols

    rows = blackwell_ll_rows(cs)
    lib = protocols.PROTOCOLS["ll"].hop_scale.get("nvlink5", 1.0)
    grid = tuple(sorted({*BLACKWELL_LL_GRID, lib}))  # the library's own value, always
    errs = grid_errors(cs, rows, grid, lambda v, backend: _one_entry_tuner(
        "ll", "hop_scale", "nvlink5", v, backend))
    every, loso = grid_fit(cs, rows, errs)
    by_src: dict[str, list[float]] = {}
    for i in rows:
        by_src.setdefault(cs[i].source, []).append(errs[lib][i])
    return {"library": lib, "all": every, "loso": loso, "sources": len(loso),
            "rows": len(rows),
            "signed": {k: round(st.median(v), 3) for k, v in sorted(by_src.items())}}


#: Factors on LL's NVLink step on H100, H200 and H20 (NVLink 4) among which
#: :func:`ll_step_fit` picks the one that fits LL's rows of one Hopper server. A100's
#: stays 1: its sources disagree (one process per GPU wants 1.3, the 2021 ``-g 8`` runs of
#: unknown release 1.9; docs/collectives.md), so only Hopper's is fitted.
LL_STEP_GRID: tuple[float, ...] = (0.4, 0.5, 0.6, 0.7, 0.8, 1.0)


def ll_step_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of held-out rows of one server of Hopper GPUs (NVLink 4, one
    host) where NCCL's choice runs LL: its ring's steps over NVLink and nothing else."""
    from fabricsim.collectives.registry import Group
    from fabricsim.protocols import tuning_hardware

    out = []
    for i in held_out(cs):
        fab = fabric_of(cs[i])
        if fab.info.servers == 1 and not Group.of(fab).spans_hosts \
                and tuning_hardware(fab)[1] == "nvlink4" \
                and choose(cs[i]).protocol == "ll":
            out.append(i)
    return out


#: Bus bandwidths (GB/s) per NVLS channel among which :func:`nvlstree_channel_fit` picks
#: NVLSTree's from 4 servers on (40: no bound on Hopper's 16 channels, whose kernels NCCL
#: rates at 364 GB/s).
NVLSTREE_CHANNEL_GRID: tuple[float, ...] = (14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0, 30.0,
                                            40.0)


def nvlstree_channel_rows(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of held-out rows where NCCL's choice runs NVLSTree across 4
    servers or more, NCCL's own NVLS channels or those a run sets with ``NCCL_MIN_CTAS`` /
    ``NCCL_MAX_CTAS`` (``NcclEnv.nvls_channels_of``), which the model takes."""
    return [i for i in held_out(cs)
            if fabric_of(cs[i]).info.servers >= 4
            and choose(cs[i]).algorithm == "nvlstree"]


def nvlstree_channel_fit(cs: list[Case]) -> dict[str, Any]:
    """Simple's bus bandwidth per NVLS channel of NVLSTree from 4 servers on
    (``Protocol.nvlstree_channel_rate``), fitted on :func:`nvlstree_channel_rows` of every
    source and with each left out (:func:`one_constant_fit`)."""
    return one_constant_fit(cs, nvlstree_channel_rows(cs), NVLSTREE_CHANNEL_GRID,
                            "nvlstree_channel_gbs")


def ll_step_fit(cs: list[Case]) -> dict[str, Any]:
    """The factor on LL's NVLink step on Hopper (``Protocol.hop_scale["nvlink4"]``),
    fitted on :func:`ll_step_rows` of every source and with each left out
    (:func:`one_constant_fit`)."""
    return one_constant_fit(cs, ll_step_rows(cs), LL_STEP_GRID, "ll_step")


def ring_curves(cs: list[Case], errors: list[float]) -> list[dict[str, Any]]:
    """Every held-out curve where NCCL's choice is a ring with Simple
    (:func:`_ring_curve_rows`), measured and as the library models it, fitted as a fixed
    time plus bytes over a rate (``t = a + S / bw``, least squares on relative
    residuals): the measured ``intercept_us`` (a) and ``algbw_gbs`` (bw), the model's
    (``model_intercept_us``, ``model_algbw_gbs``), the largest relative residual of the
    measured straight line (``linear_within``) and the model's signed median error on the
    curve's rows of 32-128 MiB (``model_32_128MiB``; ``errors`` as :func:`heldout_errors`
    gives them). Measured curves that fit a straight line say a ring's cost at mid size
    is a fixed time."""
    import numpy as np

    out: list[dict[str, Any]] = []
    for idx in _ring_curve_rows(cs):
        c0 = cs[idx[0]]
        size = np.array([cs[i].nbytes for i in idx])
        t = _times_us(cs, idx, [cs[i].measured_busbw for i in idx])
        a, b = _line(size, t)
        am, bm = _line(size, _times_us(cs, idx, [predict(cs[i]) for i in idx]))
        mid = [errors[i] for i in idx if 32 * MIB <= cs[i].nbytes <= 128 * MIB]
        out.append({"source": c0.source, "system": c0.system,
                    "servers": fabric_of(c0).info.servers, "collective": c0.collective,
                    "rows": len(idx), "intercept_us": round(a, 1),
                    "algbw_gbs": round(1e-3 / b, 1) if b > 0 else None,
                    "model_intercept_us": round(am, 1),
                    "model_algbw_gbs": round(1e-3 / bm, 1) if bm > 0 else None,
                    "linear_within": round(float(np.abs((a + b * size) / t - 1).max()), 3),
                    "model_32_128MiB": round(float(np.median(mid)), 3) if mid else None})
    return out


def heldout_errors(cs: list[Case]) -> tuple[list[float], dict[str, Any]]:
    """Every row's error as the held-out table counts it: the library's model, except that
    a row of several servers is predicted with the crossing cost fitted without its source
    (:func:`crossing_fit`), and every row of a source Simple's NVLink 5 share was fitted
    on with the share fitted without it (:func:`nvlink5_fit`, together with its own
    crossing cost), likewise the rows of a source the ring step or the multi-node NVLink
    step or its NVLS stages, the plugin's share, LL128's tree channel rate, LL's NVLink
    step, LL128's A100 factor or NVLSTree's rate per NVLS channel was fitted on
    (:func:`ring_step_fit`, :func:`mnnvl_fit`, :func:`mnnvl_nvls_fit`, :func:`plugin_fit`,
    :func:`tree_ll128_fit`, :func:`ll_step_fit`, :func:`ampere_ll128_fit`,
    :func:`nvlstree_channel_fit`); and the fits themselves (the crossing fit's keys,
    ``nvlink5``, ``ring_step``, ``mnnvl``, ``plugin``, ``tree_ll128``, ``mnnvl_nvls``,
    ``ll_step``, ``ampere_ll128`` and ``nvlstree_channel``)."""
    from fabricsim.backends.analytic import AnalyticBackend
    from fabricsim.protocols import PROTOCOLS

    fit_ = crossing_fit(cs)
    nv5 = nvlink5_fit(cs)
    ring = ring_step_fit(cs)
    joint = mnnvl_joint_fit(cs)
    mn = mnnvl_fit(cs, joint)
    pl = plugin_fit(cs)
    tr = tree_ll128_fit(cs)
    mk = mnnvl_nvls_fit(cs, joint)
    nw = nvls_warp_fit(cs)
    tw = nvls_warp_fit(cs, "nvlstree")
    ls = ll_step_fit(cs)
    amp = ampere_ll128_fit(cs)
    nc = nvlstree_channel_fit(cs)
    fit_ = {**fit_, "nvlink5": nv5, "ring_step": ring, "mnnvl": mn, "plugin": pl,
            "tree_ll128": tr, "mnnvl_nvls": mk, "nvls_warp": nw, "nvlstree_warp": tw,
            "ll_step": ls, "ampere_ll128": amp, "nvlstree_channel": nc}
    base = [r["rel_error"] for r in evaluate(cs)]
    out = [fit_["errors"].get(i, e) for i, e in enumerate(base)]
    simple = PROTOCOLS["simple"]
    lib_us = simple.crossing_per_channel * 1e6
    # each of _tuner's constants fitted leave-one-source-out: its fit and the library's value
    fits = {"nvlink5": (nv5, simple.nvlink_scale.get("nvlink5", 1.0)),
            "ring_step_us": (ring, simple.fixed_step_latency["nvlink"] * 1e6),
            "mnnvl_us": (mn, simple.mnnvl_step * 1e6),
            "plugin_share": (pl, simple.plugin_latency_share),
            "tree_ll128_gbs": (tr, PROTOCOLS["ll128"].tree_channel_rate / 1e9),
            "mnnvl_nvls_stages": (mk, simple.mnnvl_nvls_stages),
            "nvls_warp_gbs": (nw, simple.nvls_warp_rate["nvls"] / 1e9),
            "nvlstree_warp_gbs": (tw, simple.nvls_warp_rate["nvlstree"] / 1e9),
            "ll_step": (ls, PROTOCOLS["ll"].hop_scale.get("nvlink4", 1.0)),
            "ll128_nvlink3": (amp, PROTOCOLS["ll128"].nvlink_scale["nvlink3"]),
            "nvlstree_channel_gbs": (nc, simple.nvlstree_channel_rate / 1e9)}
    library = {k: lib for k, (_, lib) in fits.items()}
    shared = AnalyticBackend()
    tuners: dict[tuple[float, ...], Tuner] = {}
    # sources of nvlink5_rows, of ring_step_fit's curves, of mnnvl_rows (both of their
    # fits), of plugin_rows, of tree_ll128_rows or of nvls_warp_rows (none fitted on):
    # every row of theirs with the values fitted without them
    for src in sorted({s for f, _ in fits.values() for s in f["loso"]}):
        given = {k: f["loso"].get(src, lib) for k, (f, lib) in fits.items()}
        if given == library:
            continue
        for i, c in enumerate(cs):
            if c.source != src or c.secondary:
                continue
            us = fit_["loso_us"].get(src, lib_us) if i in fit_["errors"] else lib_us
            key = (us, *given.values())
            if key not in tuners:
                tuners[key] = _tuner(us, backend=shared, **given)
            out[i] = rel_error(c, predict(c, tuners[key]))
    return out, fit_


def fit_sources(cs: list[Case] | None = None) -> set[str]:
    """Sources some constant was fitted on: every single-server row of the fit (see
    :func:`fit`). Rows of any other source are held out from every fit. ``cs``:
    :func:`cases`, when already read."""
    return {c.source for c in (cases() if cs is None else cs)
            if c.nodes == 1 and not c.secondary}


#: Published sources (``nccl_tests.csv`` keys) that are the same document as a source the
#: protocol fit was fitted on (measurements.csv): Azure's benchmarking guide pages, vendored
#: twice. They count as fitted, not held out.
SAME_DOCUMENT: dict[str, str] = {
    "azure-aibg-nda100v4": "Azure/AI-benchmarking-guide Azure_Results/ND_A100_v4_results.md",
    "azure-aibg-ndh100v5": "Azure/AI-benchmarking-guide Azure_Results/ND_H100_v5_results.md",
}


def fitted_among(cs: list[Case]) -> set[str]:
    """:func:`fit_sources` of the rows of ``cs`` from measurements*.csv (ids below 3000),
    the only rows any constant of the protocol fit was fitted on, and the published
    sources that are the same documents (:data:`SAME_DOCUMENT`)."""
    fitted = fit_sources([c for c in cs if c.row < 3000])
    return fitted | {k for k, doc in SAME_DOCUMENT.items() if doc in fitted}


def held_out(cs: list[Case]) -> list[int]:
    """Indices into ``cs`` of the rows every held-out figure counts: primary rows of the
    sources no constant of the protocol fit was fitted on (:func:`fitted_among`)."""
    fitted = fitted_among(cs)
    return [i for i, c in enumerate(cs) if not c.secondary and c.source not in fitted]


def fabric_key(c: Case) -> tuple[Any, ...]:
    """What a row's fabric is built from: system, servers and the row's own set-up."""
    return (c.system, c.nodes, tuple(sorted((k, repr(v)) for k, v in c.cluster.items())))


def fabric_of(c: Case) -> Any:
    key = fabric_key(c)
    if key not in _FABRICS:
        _FABRICS[key] = build_cluster(c.system, c.nodes, catalog=catalog(), **c.cluster)
    return _FABRICS[key]


def catalog() -> Any:
    """:data:`CATALOG` with the published rows' own NIC configurations
    (``published_nccl.nic_variants``)."""
    if "published" not in _CATALOGS:
        _CATALOGS["published"] = with_systems(CATALOG, published().nic_variants())
    return _CATALOGS["published"]


def published() -> Any:
    """``benchmarks/published_nccl.py`` (loaded from beside this file, whoever runs it)."""
    import importlib.util

    sys.modules.setdefault("accuracy_nccl", sys.modules[__name__])
    if "published_nccl" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "published_nccl", Path(__file__).with_name("published_nccl.py"))
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["published_nccl"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["published_nccl"]


def all_cases() -> list[Case]:
    """The rows of measurements*.csv (:func:`cases`) and of nccl_tests.csv."""
    return cases() + list(published().published_cases()[0])


def _spread(errs: list[float]) -> dict[str, float]:
    a = sorted(abs(e) for e in errs)
    return {"median": round(statistics.median(a), 4),
            "p90": round(a[min(int(0.9 * len(a)), len(a) - 1)], 4),
            "signed_median": round(statistics.median(errs), 4)}


def groups_of(c: Case, fab: Any) -> list[str]:
    """The accuracy groups row ``c`` on ``fab`` counts in: its own
    (:func:`fabricsim.collectives.accuracy.group_of`), its kind over all scopes, and its
    kind across servers or, on one server at 1-16 MiB, that band."""
    from fabricsim.collectives.accuracy import group_of, kind_of

    kind = kind_of(c.collective, c.nbytes)
    into = [group_of(fab, c.collective, c.nbytes), f"all scopes, {kind}"]
    if fab.info.servers > 1:
        into.append(f"several servers, {kind}")
    elif MIB <= c.nbytes <= 16 * MIB:
        into.append("one server, 1-16 MiB")
    return into


def after_source_level(cs: list[Case], errors: list[float]) -> dict[str, Any]:
    """The held-out rows of each group (:func:`groups_of`) once every source's own level
    in that group is divided out: a row's error ``e`` becomes ``(1 + e) / (1 + m) - 1``,
    ``m`` the signed median of its source's rows there. What is left is the error of the
    model's shape (across sizes, algorithms and scales), which one factor per cluster
    cannot remove; the gap to the held-out figure is what such a factor (``fabricsim
    calibrate`` on a cluster's own runs) can. In sample per source: each source sets its
    own level.

    >>> c = Case(row=5000, system="dgx-h100", nodes=1, nbytes=2.0**30, measured_busbw=1.0,
    ...          source="a cluster")
    >>> t = after_source_level([c, c], [0.2, 0.2])
    >>> t["one server, bandwidth"]["median"], t["one server, bandwidth"]["level_median"]
    (0.0, 0.2)
    """
    by: dict[str, dict[str, list[float]]] = {}
    for i in held_out(cs):
        c = cs[i]
        for g in groups_of(c, fabric_of(c)):
            by.setdefault(g, {}).setdefault(c.source, []).append(errors[i])
    out: dict[str, Any] = {}
    for g, per in sorted(by.items()):
        levels = {s: statistics.median(v) for s, v in per.items()}
        left = [(1 + e) / (1 + levels[s]) - 1 for s, v in per.items() for e in v]
        out[g] = {"rows": len(left), "sources": len(per), **_spread(left),
                  "level_median": round(statistics.median(abs(m) for m in levels.values()),
                                        4)}
    return out


def heldout_table(cs: list[Case], errors: list[float]) -> dict[str, Any]:
    """Held-out error per accuracy group (:mod:`fabricsim.collectives.accuracy`) over the
    primary rows of sources no constant was fitted on, the same rows grouped by NCCL's
    choice (``by_choice``: the algorithm and protocol the library's model runs), and the
    measured envelope (servers and sizes) per system over every row; ``local``: the same
    held-out rows per system, number of servers and kind, with their range of errors and
    sizes (:func:`fabricsim.collectives.accuracy.local_warning`); ``local_sizes``: the
    same, per band of sizes as well (:func:`fabricsim.collectives.accuracy.size_band_of`).
    """
    from fabricsim.collectives.accuracy import choice_group, kind_of, local_key, size_band_of

    fitted = fitted_among(cs)
    kept = set(held_out(cs))
    by: dict[str, list[tuple[float, str]]] = {}
    by_choice: dict[str, list[tuple[float, str]]] = {}
    local: dict[str, list[tuple[float, str, float]]] = {}
    local_sizes: dict[str, list[tuple[float, str, float]]] = {}
    envelope: dict[str, dict[str, int]] = {}
    variants = published().nic_variants()
    for i, (c, e) in enumerate(zip(cs, errors, strict=True)):
        fab = fabric_of(c)
        preset = str(variants.get(c.system, {}).get("base", c.system))  # NICs as run
        env = envelope.setdefault(preset, {"max_servers": 0, "min_bytes": 2**62,
                                           "max_bytes": 0})
        env["max_servers"] = max(env["max_servers"], fab.info.servers)
        env["min_bytes"] = min(env["min_bytes"], int(c.nbytes))
        env["max_bytes"] = max(env["max_bytes"], int(c.nbytes))
        if i not in kept:
            continue
        kind = kind_of(c.collective, c.nbytes)
        for g in groups_of(c, fab):
            by.setdefault(g, []).append((e, c.source))
        ch = choose(c)
        by_choice.setdefault(choice_group(fab, c.collective, c.nbytes, ch.algorithm,
                                          ch.protocol), []).append((e, c.source))
        # across servers, the system as run: a row whose NICs differ from its preset's
        # speaks for that variant (its own name), not for the preset a user's question
        # builds; on one server the NICs carry nothing
        as_run = c.system if fab.info.servers > 1 else preset
        local.setdefault(local_key(as_run, fab.info.servers, kind), []).append(
            (e, c.source, c.nbytes))
        local_sizes.setdefault(local_key(as_run, fab.info.servers, kind,
                                         size_band_of(c.nbytes)), []).append(
            (e, c.source, c.nbytes))

    def table(groups: dict[str, list[tuple[float, str]]]) -> dict[str, Any]:
        return {g: {"rows": len(v), "sources": len({s for _, s in v}),
                    **_spread([e for e, _ in v])} for g, v in sorted(groups.items())}

    def spots(groups: dict[str, list[tuple[float, str, float]]]) -> dict[str, Any]:
        """:func:`table`'s figures, with the range of errors and of sizes."""
        figures = table({k: [(e, s) for e, s, _ in v] for k, v in groups.items()})
        return {k: {**figures[k], "low": round(min(e for e, _, _ in v), 4),
                    "high": round(max(e for e, _, _ in v), 4),
                    "min_bytes": int(min(b for _, _, b in v)),
                    "max_bytes": int(max(b for _, _, b in v))}
                for k, v in sorted(groups.items())}

    return {"generated_by": "python benchmarks/accuracy_nccl.py --write-heldout",
            "held_out_from": sorted(fitted), "groups": table(by),
            "by_choice": table(by_choice), "local": spots(local),
            "local_sizes": spots(local_sizes), "envelope": dict(sorted(envelope.items()))}


def per_source(cs: list[Case], errors: list[float]) -> dict[str, dict[str, Any]]:
    by: dict[str, list[float]] = {}
    for c, e in zip(cs, errors, strict=True):
        by.setdefault(c.source, []).append(e)
    return {s: {"rows": len(v), **_spread(v)} for s, v in sorted(by.items())}


HELDOUT_JSON = (Path(__file__).resolve().parents[1] / "src" / "fabricsim" / "collectives"
                / "heldout.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--write-heldout", action="store_true",
                    help=f"write the held-out table the library ships ({HELDOUT_JSON.name})")
    args = ap.parse_args(argv)
    cs = cases()
    res = evaluate(cs, fit(cs) if args.fit else None)
    for r in res:
        print(json.dumps(r))
    for rid, why in sorted(NOT_COVERED.items()):
        print(json.dumps({"row": rid, "not_covered": why}))
    for (rid, system), why in sorted(SECONDARY.items()):
        print(json.dumps({"row": rid, "system": system, "secondary": why}))
    print(json.dumps(summary(res)))
    if args.fit:
        return 0
    pub, skipped = published().published_cases()
    pres = evaluate(pub)
    for c, r in zip(pub, pres, strict=True):
        print(json.dumps({**r, "source": c.source}))
    print(json.dumps({"published_not_covered": dict(skipped)}))
    every = cs + pub
    errors, cross = heldout_errors(every)
    from fabricsim.protocols import PROTOCOLS

    print(json.dumps({"crossing_per_channel_us": {
        "library": PROTOCOLS["simple"].crossing_per_channel * 1e6,
        "fitted_on_every_source": cross["all_us"], "sources": cross["sources"],
        "left_out": cross["loso_us"]}}))
    nv5 = cross["nvlink5"]
    print(json.dumps({"simple_nvlink5_share": {
        "library": PROTOCOLS["simple"].nvlink_scale.get("nvlink5", 1.0),
        "fitted_on_every_source": nv5["all"], "sources": nv5["sources"],
        "rows": nv5["rows"], "left_out": nv5["loso"]}}))
    rs = cross["ring_step"]
    print(json.dumps({"simple_ring_nvlink_step_us": {
        "library": PROTOCOLS["simple"].fixed_step_latency["nvlink"] * 1e6,
        "fitted_on_every_source": rs["all"], "sources": rs["sources"], "curves": rs["curves"],
        "left_out": rs["loso"]}}))
    mn = cross["mnnvl"]
    print(json.dumps({"mnnvl_step_us": {
        "library": PROTOCOLS["simple"].mnnvl_step * 1e6, "fitted_on_every_source": mn["all"],
        "sources": mn["sources"], "rows": mn["rows"], "left_out": mn["loso"],
        "best_by_source": mn["by_source"]}}))
    pl = cross["plugin"]
    print(json.dumps({"plugin_latency_share": {
        "library": PROTOCOLS["simple"].plugin_latency_share, "fitted_on_every_source": pl["all"],
        "sources": pl["sources"], "rows": pl["rows"], "left_out": pl["loso"],
        "best_by_source": pl["by_source"]}}))
    tr = cross["tree_ll128"]
    print(json.dumps({"ll128_tree_channel_gbyte_s": {
        "library": PROTOCOLS["ll128"].tree_channel_rate / 1e9,
        "fitted_on_every_source": tr["all"], "sources": tr["sources"], "rows": tr["rows"],
        "left_out": tr["loso"], "best_by_source": tr["by_source"]}}))
    mk = cross["mnnvl_nvls"]
    print(json.dumps({"mnnvl_nvls_stages": {
        "library": PROTOCOLS["simple"].mnnvl_nvls_stages, "fitted_on_every_source": mk["all"],
        "sources": mk["sources"], "rows": mk["rows"], "left_out": mk["loso"],
        "best_by_source": mk["by_source"]}}))
    ls = cross["ll_step"]
    print(json.dumps({"ll_hopper_step_factor": {
        "library": PROTOCOLS["ll"].hop_scale.get("nvlink4", 1.0),
        "fitted_on_every_source": ls["all"], "sources": ls["sources"], "rows": ls["rows"],
        "left_out": ls["loso"], "best_by_source": ls["by_source"]}}))
    amp = cross["ampere_ll128"]
    print(json.dumps({"ll128_nvlink3_factor": {
        "library": PROTOCOLS["ll128"].nvlink_scale.get("nvlink3", 1.0),
        "fitted_on_every_source": amp["all"], "sources": amp["sources"],
        "rows": amp["rows"], "left_out": amp["loso"]}}))
    nc = cross["nvlstree_channel"]
    print(json.dumps({"nvlstree_channel_busbw_gbyte_s": {
        "library": PROTOCOLS["simple"].nvlstree_channel_rate / 1e9,
        "fitted_on_every_source": nc["all"], "sources": nc["sources"], "rows": nc["rows"],
        "left_out": nc["loso"], "best_by_source": nc["by_source"]}}))
    bll = blackwell_ll_fit(every)
    print(json.dumps({"ll_nvlink5_step_factor": {
        "library": bll["library"], "fitted_on_held_out_sources": bll["all"],
        "sources": bll["sources"], "rows": bll["rows"], "left_out": bll["loso"],
        "signed_median_by_source": bll["signed"], "applied": False}}))
    for curve in ring_curves(every, errors):
        print(json.dumps({"ring_simple_curve": curve}))
    print(json.dumps({"per_source": per_source(every, errors)}))
    table = heldout_table(every, errors)
    print(json.dumps({"held_out": table["groups"]}))
    print(json.dumps({"held_out_by_choice": table["by_choice"]}))
    print(json.dumps({"held_out_after_source_level": after_source_level(every, errors)}))
    if args.write_heldout:
        HELDOUT_JSON.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
