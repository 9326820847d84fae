"""How far off a collective prediction is likely to be: held-out error by group, and
whether a question lies inside what published measurements cover.

``benchmarks/accuracy_nccl.py --write-heldout`` runs the model on every published
nccl-tests row of ``data/reference/`` and keeps, for each group of rows (the same
:func:`group_of` as here), the error on the rows *held out* from every fit: rows whose
source no constant was fitted on. The result ships as ``collectives/heldout.json``;
:func:`band` reads it, so a prediction can say ``356 GB/s ± 14 %`` where 14 % is the
median absolute held-out error of its group, :func:`envelope_warning` says when the
system, the number of servers or the message size has no measurement near it, and
:func:`local_warning` when the measurements nearest it (the same system and scale) lean
further than that band.

Groups: the scope (one server or NVLink domain; several servers over ``InfiniBand``,
``RoCE``, ``EFA``, ``TCP``, ``Slingshot``; several NVLink racks joined by NICs) times the kind
(``latency``: below 1 MiB, time compared; ``bandwidth``: 1 MiB and more; all-to-all
apart). A group with fewer than :data:`MIN_ROWS` rows or :data:`MIN_SOURCES` sources
borrows the band of its kind over all scopes.

The same rows are also grouped by what NCCL runs: one server or several, the kind, and
the algorithm and protocol of NCCL's choice (:func:`choice_group`, e.g. ``several
servers, bandwidth, tree/LL128``). The model's error depends on the algorithm it times
as much as on the fabric, and often leans one way (the signed median):
:func:`choice_band` gives that group's figures where it has :data:`MIN_ROWS` rows from
:data:`MIN_CHOICE_SOURCES` sources, so ``bench`` can say, for instance, that its
tree/LL128 figures across servers have come out faster than measured.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 2)
>>> group_of(fab, "all_reduce", 2**30)
'InfiniBand, bandwidth'
>>> b = band(fab, "all_reduce", 2**30)
>>> 0 < b.median < 1, b.rows >= MIN_ROWS
(True, True)
>>> choice_group(fab, "all_reduce", 2**20, "tree", "ll128")
'several servers, bandwidth, tree/LL128'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from fabricsim.shipped import shipped_json
from fabricsim.units import format_bytes

if TYPE_CHECKING:
    from collections.abc import Callable

    from fabricsim.fabric.core import Fabric

#: Smallest message compared on bandwidth (below it, on time).
BANDWIDTH_MIN_BYTES = 2**20
#: A group needs this many held-out rows, from this many sources, to carry its own band.
MIN_ROWS = 10
MIN_SOURCES = 2
#: A group of NCCL's choice needs rows from this many sources to carry a band: one
#: cluster's run of one algorithm says more about that cluster than about the model.
MIN_CHOICE_SOURCES = 3
#: A signed median below this (either way) is no lean: it is inside the rows' scatter.
LEAN_MIN = 0.02
#: Servers beyond this factor of the largest validated run of a system are out of reach.
SCALE_REACH = 2.0
#: Published rows of the same system count as near a question within this factor of its
#: servers and :data:`LOCAL_SIZE_REACH` of its message sizes.
LOCAL_REACH = 2.0
LOCAL_SIZE_REACH = 4.0
#: Near rows (at least :data:`LOCAL_MIN_ROWS`) disagree with a band when their signed
#: median lies beyond twice the band and beyond this.
LOCAL_MIN_ERROR = 0.25
LOCAL_MIN_ROWS = 3
#: Held-out rows are also kept per band of message sizes a factor of this wide
#: (``[4^k, 4^(k+1))`` bytes): the model's record on a system at a few MiB can lean
#: far one way while its record over all sizes does not (two DGX H100: -31 % in median
#: at 4-16 MiB, the pooled sizes within a few percent).
LOCAL_BAND_RATIO = 4

_SCOPES = {"ib": "InfiniBand", "roce": "RoCE", "srd": "EFA", "tcp": "TCP",
           "slingshot": "Slingshot"}


def scope_of(fabric: Fabric, servers: int | None = None) -> str:
    """Where a collective on ``fabric`` runs: ``one server`` (one NVLink domain), a
    scale-out transport, or ``NVLink racks`` (several NVLink domains of more than 8
    GPUs joined by NICs).

    >>> from fabricsim.fabric import build_cluster
    >>> scope_of(build_cluster("aws-p5", 2)), scope_of(build_cluster("gb200-nvl72", 1))
    ('EFA', 'one server')
    """
    n = fabric.info.servers if servers is None else servers
    if n <= 1:
        return "one server"
    if fabric.info.gpus_per_server > 8:
        return "NVLink racks"
    return _SCOPES.get(fabric.info.transport, fabric.info.transport or "network")


def kind_of(collective: str, nbytes: float) -> str:
    """``latency`` below :data:`BANDWIDTH_MIN_BYTES`, else ``bandwidth`` (``all-to-all``
    for alltoall)."""
    if nbytes < BANDWIDTH_MIN_BYTES:
        return "latency"
    return "all-to-all" if collective == "alltoall" else "bandwidth"


def group_of(fabric: Fabric, collective: str, nbytes: float,
             servers: int | None = None) -> str:
    """The accuracy group of a collective of ``nbytes`` on ``fabric``."""
    return f"{scope_of(fabric, servers)}, {kind_of(collective, nbytes)}"


def choice_group(fabric: Fabric, collective: str, nbytes: float, algorithm: str,
                 protocol: str, servers: int | None = None) -> str:
    """The accuracy group of NCCL's choice: one server or several, the kind, and the
    algorithm/protocol that runs (the protocol as NCCL prints it)."""
    from fabricsim.protocols import PROTOCOL_LABELS

    n = fabric.info.servers if servers is None else servers
    where = "one server" if n <= 1 else "several servers"
    proto = PROTOCOL_LABELS.get(protocol.lower(), protocol)
    return f"{where}, {kind_of(collective, nbytes)}, {algorithm}/{proto}"


@dataclass(frozen=True)
class Band:
    """Held-out error of a group: median and 90th percentile of the absolute relative
    error (time for latency rows, bus bandwidth otherwise), over ``rows`` rows from
    ``sources`` independent sources; ``group`` is the group whose figures these are
    (the kind over all scopes when the asked group has too few rows)."""

    group: str
    median: float
    p90: float
    rows: int
    sources: int
    #: Median of the signed error: above 0 the model's figure (bus bandwidth, or time for
    #: latency rows) has come out above the measured one.
    signed_median: float = 0.0

    @classmethod
    def of(cls, name: str, figures: dict[str, Any]) -> Band:
        """The band of group ``name`` from its figures in the held-out table."""
        return cls(group=name, median=float(figures["median"]), p90=float(figures["p90"]),
                   rows=int(figures["rows"]), sources=int(figures["sources"]),
                   signed_median=float(figures.get("signed_median", 0.0)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        """``± 14 %``, as printed beside a figure."""
        return f"± {self.median * 100:.0f} %"

    def lean(self) -> str:
        """Which way the model's figures have erred, in words (the signed median; time is
        compared for latency rows, bus bandwidth otherwise).

        >>> Band("x, bandwidth", 0.28, 0.9, 59, 7, 0.21).lean()
        'median +21 %: the model has been faster than measured'
        >>> Band("x, latency", 0.2, 0.5, 20, 4, 0.15).lean()
        'median +15 %: the model has been slower than measured'
        >>> Band("x, bandwidth", 0.1, 0.4, 124, 14, 0.001).lean()
        'median +0 %: no lean either way'
        >>> Band("x, bandwidth", 0.1, 0.4, 124, 14, -0.002).lean()  # never "-0 %"
        'median +0 %: no lean either way'
        """
        if abs(self.signed_median) < LEAN_MIN:
            return f"median {round(self.signed_median * 100):+d} %: no lean either way"
        faster = self.signed_median > 0
        if self.group.split(", ")[1:2] == ["latency"]:
            faster = not faster
        return (f"median {self.signed_median * 100:+.0f} %: the model has been "
                f"{'faster' if faster else 'slower'} than measured")


@cache
def heldout() -> dict[str, Any]:
    """The shipped held-out table (``collectives/heldout.json``)."""
    return shipped_json("fabricsim.collectives", "heldout.json")


def band(fabric: Fabric, collective: str, nbytes: float, servers: int | None = None) -> Band:
    """The held-out error band of a prediction (see the module docs)."""
    groups = heldout()["groups"]
    name = group_of(fabric, collective, nbytes, servers)
    g = groups.get(name)
    if g is not None and g["rows"] >= MIN_ROWS and g["sources"] >= MIN_SOURCES:
        return Band.of(name, g)
    kind = f"all scopes, {kind_of(collective, nbytes)}"
    return Band.of(kind, groups[kind])


def choice_band(fabric: Fabric, collective: str, nbytes: float, algorithm: str,
                protocol: str, servers: int | None = None) -> Band | None:
    """The held-out error of NCCL's choice (:func:`choice_group`), or ``None`` where
    fewer than :data:`MIN_ROWS` rows from :data:`MIN_CHOICE_SOURCES` sources back it.

    >>> from fabricsim.fabric import build_cluster
    >>> b = choice_band(build_cluster("dgx-h100", 2), "all_reduce", 2**30, "ring", "simple")
    >>> b.group, b.sources >= MIN_CHOICE_SOURCES
    ('several servers, bandwidth, ring/Simple', True)
    """
    name = choice_group(fabric, collective, nbytes, algorithm, protocol, servers)
    g = heldout().get("by_choice", {}).get(name)
    if g is None or g["rows"] < MIN_ROWS or g["sources"] < MIN_CHOICE_SOURCES:
        return None
    return Band.of(name, g)


def local_key(system: str, servers: int, kind: str, size_band: int | None = None) -> str:
    """The key of the held-out rows of ``system`` at ``servers`` of one kind
    (:func:`kind_of`) in the shipped table's ``local`` part; with ``size_band``
    (:func:`size_band_of`), of those in one band of sizes (its ``local_sizes`` part).

    >>> local_key("gb200-nvl72", 20, "bandwidth")
    'gb200-nvl72|20|bandwidth'
    >>> local_key("dgx-h100", 2, "bandwidth", size_band_of(8 * 2**20))
    'dgx-h100|2|bandwidth|11'
    """
    key = f"{system}|{servers}|{kind}"
    return key if size_band is None else f"{key}|{size_band}"


def size_band_of(nbytes: float) -> int:
    """The band of message sizes ``nbytes`` falls in: ``k`` for
    ``[LOCAL_BAND_RATIO^k, LOCAL_BAND_RATIO^(k+1))`` bytes.

    >>> size_band_of(4 * 2**20), size_band_of(16 * 2**20 - 1), size_band_of(16 * 2**20)
    (11, 11, 12)
    """
    k, n = 0, max(int(nbytes), 1)
    while n >= LOCAL_BAND_RATIO:
        n //= LOCAL_BAND_RATIO
        k += 1
    return k


@dataclass(frozen=True)
class Local:
    """The held-out rows nearest a question: ``rows`` published rows from ``sources``
    sources of the same system at ``servers`` servers and of the same kind, whose signed
    error (bus bandwidth, or time for latency rows; above 0 the model's figure came out
    higher) runs from ``low`` to ``high`` around ``signed_median``. ``min_bytes`` and
    ``max_bytes``: the sizes those rows span; ``sized``: the rows are those of the
    question's band of sizes (:func:`size_band_of`), not of every size."""

    system: str
    servers: int
    kind: str
    rows: int
    sources: int
    signed_median: float
    low: float
    high: float
    min_bytes: int = 0
    max_bytes: int = 0
    sized: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def local_evidence(fabric: Fabric, collective: str, nbytes: float,
                   servers: int | None = None) -> Local | None:
    """The held-out rows of ``fabric``'s system nearest a collective of ``nbytes``: of
    the same kind, at the measured number of servers closest to the question's (within
    :data:`LOCAL_REACH`), and at least :data:`LOCAL_MIN_ROWS` of them: those of the
    question's band of sizes (:func:`size_band_of`) where there are enough, else those
    of every size if the question's size is within :data:`LOCAL_SIZE_REACH` of theirs;
    ``None`` where there are none.

    >>> from fabricsim.fabric import build_cluster
    >>> loc = local_evidence(build_cluster("gb200-nvl72", 20), "all_reduce", 2**34)
    >>> loc.servers, loc.kind, loc.rows >= LOCAL_MIN_ROWS, loc.sized
    (20, 'bandwidth', True, False)
    >>> loc = local_evidence(build_cluster("dgx-h100", 2), "all_reduce", 8 * 2**20)
    >>> loc.sized, loc.min_bytes >= 4 * 2**20, loc.max_bytes < 16 * 2**20
    (True, True, True)
    """
    table = heldout()
    kind = kind_of(collective, nbytes)
    band_ = size_band_of(nbytes)
    sized = _nearest(table.get("local_sizes", {}), fabric, kind, servers,
                     lambda b, v: int(b) == band_)
    if sized is not None:
        return sized
    return _nearest(table.get("local", {}), fabric, kind, servers,
                    lambda b, v: v["min_bytes"] / LOCAL_SIZE_REACH <= nbytes
                    <= v["max_bytes"] * LOCAL_SIZE_REACH)


def _nearest(part: dict[str, Any], fabric: Fabric, kind: str, servers: int | None,
             near: Callable[[str, dict[str, Any]], bool]) -> Local | None:
    """The entry of ``part`` (keys :func:`local_key`) of ``fabric``'s system and ``kind``
    at the servers nearest the question's (one server only near one server), with
    :data:`LOCAL_MIN_ROWS` rows and for which ``near(size band or "", entry)`` holds."""
    import math

    system = fabric.info.system
    n = fabric.info.servers if servers is None else servers
    best: tuple[float, Local] | None = None
    for key, v in part.items():
        sys_, srv, knd, *band_ = key.split("|")
        m = int(srv)
        if sys_ != system or knd != kind or v["rows"] < LOCAL_MIN_ROWS:
            continue
        if (m > 1) != (n > 1):  # inside one server against across servers: not near
            continue
        if not near(band_[0] if band_ else "", v):
            continue
        dist = abs(math.log(max(n, 1) / m))
        if dist > math.log(LOCAL_REACH) or (best is not None and dist >= best[0]):
            continue
        best = (dist, Local(system=system, servers=m, kind=kind, rows=int(v["rows"]),
                            sources=int(v["sources"]),
                            signed_median=float(v["signed_median"]),
                            low=float(v["low"]), high=float(v["high"]),
                            min_bytes=int(v["min_bytes"]), max_bytes=int(v["max_bytes"]),
                            sized=bool(band_)))
    return best[1] if best else None


def local_warning(fabric: Fabric, collective: str, nbytes: float,
                  servers: int | None = None) -> str | None:
    """Where the published rows nearest a question (:func:`local_evidence`) lean
    further than its group's band (their signed median beyond twice the band and beyond
    :data:`LOCAL_MIN_ERROR`), what they say; else ``None``. The band is a median over
    many systems; this is the model's record on the system, scale and (where rows of the
    question's band of sizes exist) sizes asked about.

    >>> from fabricsim.fabric import build_cluster
    >>> print(local_warning(build_cluster("dgx-a100", 16), "all_reduce", 2**30))
    ... # doctest: +ELLIPSIS
    published runs of dgx-a100 at 16 servers (12 bandwidth rows, 1 source) ...
    >>> local_warning(build_cluster("dgx-h100", 2), "all_reduce", 2**30) is None
    True
    >>> print(local_warning(build_cluster("hgx-b200", 64), "all_reduce", 2**20))
    ... # doctest: +ELLIPSIS
    published runs of hgx-b200 at 64 servers, 1 MiB to 2 MiB (10 bandwidth rows, 1 source) ...
    """
    loc = local_evidence(fabric, collective, nbytes, servers)
    if loc is None:
        return None
    b = band(fabric, collective, nbytes, servers)
    if abs(loc.signed_median) <= max(2 * b.median, LOCAL_MIN_ERROR):
        return None
    what = "time" if loc.kind == "latency" else "bus bandwidth"
    src = "source" if loc.sources == 1 else "sources"
    where = "one server" if loc.servers == 1 else f"{loc.servers} servers"
    if loc.sized:
        lo, hi = format_bytes(loc.min_bytes), format_bytes(loc.max_bytes)
        where += f", {lo}" if lo == hi else f", {lo} to {hi}"
    return (f"published runs of {loc.system} at {where} ({loc.rows} "
            f"{loc.kind} rows, {loc.sources} {src}) lean beyond the \u00b1 "
            f"{b.median * 100:.0f} % band: the model's {what} came out "
            f"{loc.low * 100:+.0f} to {loc.high * 100:+.0f} % against them (median "
            f"{loc.signed_median * 100:+.0f} %)")


def envelope_warning(fabric: Fabric, sizes: list[int] | tuple[int, ...],
                     servers: int | None = None) -> str | None:
    """Why the published measurements do not cover a run of ``sizes`` on ``fabric``
    (``None`` when they do): a system with no measurement, more servers than
    :data:`SCALE_REACH` times its largest measured run, or sizes outside the measured
    range.

    >>> from fabricsim.fabric import build_cluster
    >>> envelope_warning(build_cluster("dgx-h100", 2), [2**20, 2**30]) is None
    True
    >>> print(envelope_warning(build_cluster("dgx-h100", 512), [2**30]))
    no published run of dgx-h100 near 512 servers (largest: 8): the band is extrapolated
    """
    env = heldout()["envelope"]
    system = fabric.info.system
    n = fabric.info.servers if servers is None else servers
    if system not in env:
        return (f"no published run of {system} is in the reference data: the band comes "
                f"from other systems")
    e = env[system]
    why = []
    if n > SCALE_REACH * e["max_servers"]:
        why.append(f"near {n} servers (largest: {e['max_servers']})")
    lo, hi = min(sizes), max(sizes)
    if lo < e["min_bytes"] / 4 or hi > e["max_bytes"] * 4:
        why.append(f"at {lo}-{hi} bytes (measured: {e['min_bytes']}-{e['max_bytes']})")
    if not why:
        return None
    return f"no published run of {system} {' or '.join(why)}: the band is extrapolated"
