"""Published nccl-tests runs of ``data/reference/nccl_tests.csv`` as model cases.

The file holds 2,601 rows from 90 independent sources (cloud vendors' and integrators'
repositories, nccl-tests and NCCL issue threads), none of which the model's constants
were fitted on when they were gathered. :func:`published_cases` maps each row onto a
cluster the model can build (system preset, servers, GPUs per server, fabric) or says why
it cannot (:data:`NOT_COVERED_REASONS`):

- ``fabric: nvlink`` is one server; ``mnnvl`` is one NVLink domain (GB200/GB300 trays of
  4 GPUs inside one rack: one "node" of the preset with ``4 x trays`` GPUs); ``mnnvl+ib`` /
  ``mnnvl+roce-400g`` span racks, split evenly (the published runs name 2 x 16 trays, not
  18 + 14), or the ``nvlink_domains`` the row names (NVLink partitions placed on
  different racks, InfiniBand between them);
- a forced ``NCCL_ALGO`` / ``NCCL_PROTO`` is forced in the model too, ``-g N`` in the
  notes (one process driving N GPUs) is the model's ``gpus_per_thread``,
  ``NCCL_IB_QPS_PER_CONNECTION=N`` the cluster's ``params.qps`` and ``NCCL_BUFFSIZE=B``
  its ``params.buffsize``;
- NICs as the row gives them (``nics_per_node``, ``nic_gbps``) where they differ from
  the preset's: a user-defined variant of it (:func:`nic_variant`);
- the comparison is on time for sizes below 1 MiB (what a latency user reads) and on bus
  bandwidth from 1 MiB up (the same ratio, inverted).

Example
-------
>>> cs, skipped = published_cases()
>>> len(cs) > 800, all(c.source for c in cs)
(True, True)
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from pathlib import Path

from accuracy_nccl import MIB, Case

from fabricsim.collectives.pipeline import AWS_BUFFSIZE_BYTES, DEFAULT_BUFFSIZE_BYTES

CSV = Path(__file__).resolve().parents[1] / "data" / "reference" / "nccl_tests.csv"

_ALGOS = {"Ring": "ring", "Tree": "tree", "NVLS": "nvls", "NVLSTree": "nvlstree"}
_PROTOS = {"Simple": "simple", "LL128": "ll128", "LL": "ll"}
_FABRICS = {"ib-ndr": "ib-ndr", "ib-hdr": "ib-hdr", "ib-xdr": "ib-xdr", "efa": "efa",
            "roce-400g": "roce-400g", "roce-100g": "roce-100g", "roce-200g": "roce-200g",
            "slingshot-11": "slingshot-11"}
#: Per-tray GPU count of the NVL72 systems' compute trays.
_TRAY_GPUS = 4
_RACK_GPUS = 72


def nic_variant(r: dict[str, str]) -> tuple[str, dict[str, object]] | None:
    """The system a row ran on when its NICs differ from its preset's: the row's NICs per
    GPU (``nics_per_node`` over ``gpus_per_node``, per tray on NVL72) and their speed
    (``nic_gbps`` where given) on the preset's GPUs, as a user would define it
    (``catalog.with_systems``); ``None`` when the preset already matches. OCI's HGX B300
    has 16 x 400G NICs where the preset has 8 x 800G, and its GB300 trays 8 x 400G per 4
    GPUs: on a 400G fabric the preset would carry half their bandwidth.

    >>> nic_variant({"system": "hgx-b300", "nics_per_node": "16", "nic_gbps": "400",
    ...              "gpus_per_node": "8"})
    ('hgx-b300-16x400g', {'base': 'hgx-b300', 'nics': 16, 'nic_gbit_s': 400.0})
    >>> nic_variant({"system": "dgx-h100", "nics_per_node": "8", "nic_gbps": "400",
    ...              "gpus_per_node": "8"}) is None
    True
    """
    from fabricsim.catalog import get_catalog

    if not r.get("nics_per_node"):
        return None
    preset = get_catalog().system(r["system"])
    gpn = int(r["gpus_per_node"] or 8)
    nics = int(r["nics_per_node"])
    if nics * preset.gpus % gpn:
        return None
    want = nics * preset.gpus // gpn
    gbit = float(r["nic_gbps"]) if r.get("nic_gbps") else preset.nic_gbit_s
    if want == preset.nics and gbit == preset.nic_gbit_s:
        return None
    spec: dict[str, object] = {"base": r["system"], "nics": want, "nic_gbit_s": gbit}
    return f"{r['system']}-{want}x{gbit:g}g", spec


def nic_variants() -> dict[str, dict[str, object]]:
    """Every row's :func:`nic_variant`, by name (for the benchmark's catalog)."""
    out: dict[str, dict[str, object]] = {}
    with open(CSV, encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            try:
                v = nic_variant(r)
            except Exception:  # a system without a preset: not run at all
                continue
            if v is not None:
                out[v[0]] = v[1]
    return out


def _cluster(r: dict[str, str]) -> tuple[int, dict[str, object]] | str:
    """(servers, build_cluster keywords) for a row, or why it cannot be built."""
    system, fabric = r["system"], r["fabric"]
    nodes, gpn = int(r["nodes"]), int(r["gpus_per_node"] or 8)
    nvl72 = system in ("gb200-nvl72", "gb300-nvl72")
    if fabric == "nvlink":
        if nodes != 1:
            return "fabric nvlink on several servers"
        return 1, {"gpus_per_node": gpn} if (gpn != 8 or nvl72) else {}
    if fabric.startswith("mnnvl"):
        if not nvl72:
            return "multi-node NVLink on a system that has none"
        gpus = nodes * gpn
        if fabric == "mnnvl":
            if gpus > _RACK_GPUS:
                return "one NVLink domain larger than a rack"
            return 1, {"gpus_per_node": gpus}
        # the NVLink domains the run names (partitions placed on different racks), else
        # the fewest racks that hold its trays
        fewest = math.ceil(gpus / _RACK_GPUS)
        racks = int(r.get("nvlink_domains") or 0) or fewest
        if racks < fewest:
            return "more GPUs per NVLink domain than a rack holds"
        if gpus % racks:
            return "trays not evenly split across racks"
        scale_out = fabric.split("+", 1)[1]
        kw: dict[str, object] = {"gpus_per_node": gpus // racks}
        if scale_out in _FABRICS:
            kw["fabric"] = _FABRICS[scale_out]
        elif scale_out != "ib":
            return f"scale-out fabric {scale_out!r} has no preset"
        return racks, kw
    if fabric == "ib":
        return nodes, {} if gpn == 8 else {"gpus_per_node": gpn}
    if fabric not in _FABRICS:
        return f"fabric {fabric!r} has no preset"
    kw = {} if _FABRICS[fabric] == "efa" else {"fabric": _FABRICS[fabric]}
    if gpn != 8:
        kw["gpus_per_node"] = gpn
    return nodes, kw


#: The NCCL variables a row's notes document that change the model's answer and that it
#: honours as ``bench`` does (collectives.nccl_env); NCCL_ALGO/NCCL_PROTO come from their
#: own columns and queue pairs from the cluster.
_ENV_RE = (r"\b(NCCL_NVLS_ENABLE|NCCL_COLLNET_ENABLE|NCCL_MIN_CTAS|NCCL_MAX_CTAS|"
           r"NCCL_MIN_NCHANNELS|NCCL_MAX_NCHANNELS)=(\d+)")
#: A protocol a row's environment excludes (``NCCL_PROTO=^LL128``; a forced protocol is
#: the ``proto`` column's).
_PROTO_OUT_RE = r"\b(NCCL_PROTO)=(\^[A-Za-z0-9,]+)"


def ranks_agree(r: dict[str, str], tolerance: float = 0.02) -> bool:
    """Whether a row's bus and algorithm bandwidths agree with the ranks it gives
    (``nodes × gpus_per_node``): nccl-tests prints ``busbw = algbw ×`` a factor of the
    ranks (:func:`fabricsim.collectives.busbw_factor`), so a row whose ratio is another
    rank count's was transcribed with the wrong one. Checked from 1 MiB up, where the
    printed figures carry enough digits; rows without both figures pass.

    >>> row = {"collective": "all_reduce", "nodes": "2", "gpus_per_node": "4",
    ...        "size_bytes": "4294967296", "busbw_gbps": "855.95", "algbw_gbps": "434.77"}
    >>> ranks_agree(row), ranks_agree({**row, "nodes": "16"})
    (False, True)
    """
    from fabricsim.collectives import busbw_factor
    from fabricsim.errors import FabricsimError

    try:
        bus, alg = float(r["busbw_gbps"]), float(r["algbw_gbps"])
        n = int(r["nodes"]) * int(r["gpus_per_node"])
        want = busbw_factor(r["collective"], n)
    except (KeyError, ValueError, FabricsimError):
        return True
    if bus <= 0 or alg <= 0 or float(r.get("size_bytes") or 0) < MIB:
        return True
    return abs(bus / alg - want) <= tolerance * want


def published_cases() -> tuple[list[Case], Counter[str]]:
    """The rows the model can run as cases, and a count of the others by reason."""
    from fabricsim.catalog import get_catalog
    from fabricsim.collectives import get_algorithm

    systems = set(get_catalog().systems)
    out: list[Case] = []
    skipped: Counter[str] = Counter()
    with open(CSV, encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["system"] not in systems:
                skipped["system has no preset"] += 1
                continue
            if r["algo"] and r["algo"] not in _ALGOS:
                skipped[f"NCCL_ALGO={r['algo']} not modelled"] += 1
                continue
            if r["algo"] and r["collective"] not in get_algorithm(
                    _ALGOS[r["algo"]]).collectives:
                skipped[f"NCCL_ALGO={r['algo']} for {r['collective']} not modelled"] += 1
                continue
            if re.search(r"-R 2\b", r["notes"]):
                skipped["symmetric-memory kernels (nccl-tests -R 2) not modelled"] += 1
                continue
            built = _cluster(r)
            if isinstance(built, str):
                skipped[built] += 1
                continue
            if not ranks_agree(r):
                skipped["busbw/algbw contradicts the ranks the row gives"] += 1
                continue
            nodes, kw = built
            size = float(r["size_bytes"])
            t_us = float(r["time_us"]) if r["time_us"] else None
            busbw = float(r["busbw_gbps"]) if r["busbw_gbps"] else 0.0
            use_time = size < MIB
            if use_time and not t_us:
                skipped["small size without a time"] += 1
                continue
            if not use_time and busbw <= 0:
                if not t_us:
                    skipped["no bandwidth and no time"] += 1
                    continue
                use_time = True
            g = re.search(r"-g (\d+)", r["notes"])
            gpt = int(g.group(1)) if g else 1
            per_server = int(kw.get("gpus_per_node", 8))  # type: ignore[call-overload]
            if per_server % gpt:
                gpt = 1
            params: dict[str, int] = {}
            q = re.search(r"NCCL_IB_QPS_PER_CONNECTION=(\d+)", r["notes"])
            if q and int(q.group(1)) > 1 and nodes > 1:  # the run's own queue pairs
                params["qps"] = int(q.group(1))
            b = re.search(r"NCCL_BUFFSIZE=(\d+)", r["notes"])
            efa = r["fabric"] == "efa" or r["system"].startswith("aws-")  # EFA plugin sets it
            if b and int(b.group(1)) != (AWS_BUFFSIZE_BYTES if efa else DEFAULT_BUFFSIZE_BYTES):
                params["buffsize"] = int(b.group(1))  # (not the platform's default)
            if params:
                kw = {**kw, "params": {**kw.get("params", {}), **params}}
            env = tuple(re.findall(_ENV_RE, r["notes"])) + tuple(
                re.findall(_PROTO_OUT_RE, r["notes"]))
            variant = nic_variant(r)
            out.append(Case(
                int(r["id"]), variant[0] if variant else r["system"], nodes, size, busbw,
                algo=_ALGOS.get(r["algo"]) if r["algo"] else None,
                proto=_PROTOS.get(r["proto"]) if r["proto"] else None,
                collective=r["collective"], cluster=kw,
                measured_time_us=t_us if use_time else None,
                source=r["source_key"], fabric=r["fabric"], gpus_per_thread=gpt, env=env,
                nccl_version=r["nccl_version"] or None))
    return out, skipped
