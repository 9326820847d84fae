"""nccl-tests output, read and written exactly.

:func:`parse_nccl_tests` reads what ``all_reduce_perf`` and its siblings print: the
version line, the run header (``nThread``/``nGpus``/sizes), every ``Using devices`` rank
(host and GPU model, so nodes, GPUs per node and the GPU come from the log), every test in
the file (a file may hold several), both timings (out-of-place and in-place, with
``#wrong`` as a count or ``N/A``), failed tests (``Test NCCL failure ...``) and truncated
ones — reported, never a traceback. It also reads fabricsim's own ``bench --json`` lines.
Both the current format (with a ``root`` column) and the older one (without) are read;
trailing columns (fabricsim's algorithm and protocol) are kept.

:func:`format_nccl_tests` writes rows in nccl-tests' layout.

Example
-------
>>> text = '''# nccl-tests version 2.13.9 nccl-headers=21903 nccl-library=21903
... # Collective test starting: all_reduce_perf
... # nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20
... # Using devices
... #  Rank  0 Group  0 Pid  101 on node-a device  0 [0x18] NVIDIA H100 80GB HBM3
... #  Rank  1 Group  0 Pid  102 on node-b device  0 [0x18] NVIDIA H100 80GB HBM3
... #  size count type redop root  time algbw busbw #wrong  time algbw busbw #wrong
...    1024  256 float  sum  -1 30.10  0.03  0.03      0 29.90  0.03  0.03      0
...    2048  512 float  sum  -1 31.00  0.07  0.07    N/A 30.50  0.07  0.07    N/A
... # Avg bus bandwidth    : 0.05
... '''
>>> f = parse_nccl_tests(text)
>>> t = f.tests[0]
>>> f.version, t.collective, t.ranks, t.nodes, t.gpu_model, len(t.rows), t.complete
('2.13.9', 'all_reduce', 2, 2, 'NVIDIA H100 80GB HBM3', 2, True)
>>> t.rows[1].wrong, t.rows[1].time_us_inplace, f.nccl_version
(None, 30.5, '2.19.3')
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabricsim.collectives.busbw import SizeRow
from fabricsim.collectives.nccl_env import NCCL_ALGOS as NCCL_ALGOS
from fabricsim.collectives.nccl_env import NCCL_PROTOS as NCCL_PROTOS
from fabricsim.collectives.nccl_env import NcclEnv as NcclEnv
from fabricsim.collectives.nccl_env import nccl_env as nccl_env
from fabricsim.errors import ConfigError

__all__ = [
    "COLLECTIVES",
    "MAX_ROW_BYTES",
    "NCCL_ALGOS",
    "NCCL_PROTOS",
    "NcclEnv",
    "NcclTest",
    "NcclTestsFile",
    "Row",
    "format_bench",
    "format_nccl_tests",
    "gpu_label",
    "nccl_env",
    "parse_nccl_tests",
]

#: Collectives nccl-tests runs (``<name>_perf``), as fabricsim names them.
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
               "alltoall", "sendrecv")
_BINARIES = {"all_reduce": "all_reduce_perf", "reduce_scatter": "reduce_scatter_perf",
             "all_gather": "all_gather_perf", "broadcast": "broadcast_perf",
             "reduce": "reduce_perf", "alltoall": "alltoall_perf",
             "sendrecv": "sendrecv_perf"}
_DEVICE = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+"
                     r"device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$")
_VERSION = re.compile(r"nccl-tests version\s+(\S+)")
#: The NCCL library nccl-tests ran with: its header's ``nccl-library=21903`` (major *
#: 10000 + minor * 100 + patch) or NCCL's own INFO line ``NCCL version 2.19.3+cuda12.2``.
_LIBRARY = re.compile(r"nccl-library=(\d{5,})")
_NCCL_INFO_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_START = re.compile(r"Collective test starting:\s*(\S+)")
_FAIL = re.compile(r"(Test NCCL failure|Test failure|NCCL WARN|Test CUDA failure)\s*(.*)")


@dataclass(frozen=True)
class Row(SizeRow):
    """One size of a log: out-of-place (:class:`SizeRow`'s time and bandwidths) and
    in-place time (us), algbw and busbw (GB/s), ``#wrong`` (``None`` for ``N/A``; NaN
    algbw/busbw where the log prints ``N/A``). Parsed rows are checked: sizes and counts
    whole and at most :data:`MAX_ROW_BYTES`, times positive, bandwidths finite and not
    negative."""

    wrong: int | None
    time_us_inplace: float
    algbw_gbps_inplace: float
    busbw_gbps_inplace: float
    wrong_inplace: int | None
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class NcclTest:
    """One test of a log (one ``*_perf`` run)."""

    collective: str | None
    rows: tuple[Row, ...]
    hosts: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    gpus_per_thread: int = 1
    header: dict[str, str] = field(default_factory=dict)
    failures: tuple[str, ...] = ()
    complete: bool = True
    avg_busbw_gbps: float | None = None
    source: str = "nccl-tests"
    #: the NCCL release the file names (:attr:`NcclTestsFile.nccl_version`)
    nccl_version: str | None = None

    @property
    def ranks(self) -> int:
        """Ranks in the device list (or, without one, 0)."""
        return len(self.hosts)

    @property
    def nodes(self) -> int:
        """Distinct hosts in the device list."""
        return len(set(self.hosts))

    @property
    def gpus_per_node(self) -> int:
        """Ranks per host when every host has the same number, else 0."""
        if not self.hosts:
            return 0
        counts = {self.hosts.count(h) for h in set(self.hosts)}
        return counts.pop() if len(counts) == 1 else 0

    @property
    def gpu_model(self) -> str:
        """The GPU model nccl-tests printed (the first rank's)."""
        return self.gpus[0] if self.gpus else ""

    @property
    def failed(self) -> bool:
        return bool(self.failures)


@dataclass(frozen=True)
class NcclTestsFile:
    """Everything in one file: the nccl-tests version and its tests."""

    tests: tuple[NcclTest, ...]
    version: str | None = None
    notes: tuple[str, ...] = ()
    #: the NCCL release the tests ran with, where the file says (NCCL's INFO line, else
    #: the header's ``nccl-library``)
    nccl_version: str | None = None


#: Largest size (and element count) a result row may claim: 1 PiB per rank, the bound of
#: ``fabricsim bench`` sweeps and far beyond any GPU's memory; more is a corrupt row.
MAX_ROW_BYTES = 2**50


def _bad(where: str, column: str, value: object, want: str) -> ConfigError:
    return ConfigError(f"{where}: {column} {value!r} is not {want}; correct or delete that "
                       f"row", field="LOG")


def _finite(value: object, where: str, column: str, want: str) -> float:
    """``value`` (a log token or a JSON value) as a finite float, or a ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _bad(where, column, value, want)
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise _bad(where, column, value, want) from None
    if not math.isfinite(x):
        raise _bad(where, column, value, want)
    return x


def _whole(value: object, where: str, column: str, what: str = "bytes") -> int:
    """A size or element count: a whole number in [0, MAX_ROW_BYTES]."""
    want = f"a whole number of {what} from 0 to {MAX_ROW_BYTES:,} (1 PiB)"
    x = _finite(value, where, column, want)
    if not (0 <= x <= MAX_ROW_BYTES and x == int(x)):
        raise _bad(where, column, value, want)
    return int(x)


def _time(value: object, where: str, column: str) -> float:
    """A measured time: a finite number of microseconds above 0."""
    want = "a time in microseconds above 0"
    x = _finite(value, where, column, want)
    if x <= 0:
        raise _bad(where, column, value, want)
    return x


def _rate(value: object, where: str, column: str) -> float:
    """A bandwidth in GB/s: finite and not negative; ``N/A`` (or absent) is NaN."""
    if value is None or (isinstance(value, str) and value.upper() == "N/A"):
        return math.nan
    want = "a bandwidth in GB/s (0 or more, or N/A)"
    x = _finite(value, where, column, want)
    if x < 0:
        raise _bad(where, column, value, want)
    return x


def _root(value: object, where: str, column: str = "root") -> int:
    want = "a rank number (-1 for none)"
    x = _finite(value, where, column, want)
    if not (x >= -1 and x == int(x)):
        raise _bad(where, column, value, want)
    return int(x)


def _wrong(tok: str, where: str, column: str) -> int | None:
    """``#wrong`` (or the older format's ``error``, e.g. ``0e+00``); ``N/A`` is None."""
    if tok.upper() == "N/A":
        return None
    want = "a count of wrong elements (0 or more, or N/A)"
    x = _finite(tok, where, column, want)
    if x < 0:
        raise _bad(where, column, tok, want)
    return int(x)


def _collective_of(name: str) -> str | None:
    low = name.lower().replace("-", "_")
    for c in sorted(COLLECTIVES, key=len, reverse=True):
        if c in low or c.replace("_", "") in low:
            return c
    return None


def _row(tok: list[str], has_root: bool | None, where: str) -> Row | None:
    """A result row, read from the start (trailing extra columns are kept); None for a
    line that is not one. A row with a nonsense figure (not a number, negative, NaN, a
    size beyond :data:`MAX_ROW_BYTES`) is a ConfigError naming ``where`` and the column."""
    if len(tok) < 10 or not tok[0].isdigit() or not tok[1].isdigit():
        return None
    root = has_root if has_root is not None else \
        (len(tok) >= 13 and re.fullmatch(r"-?\d+", tok[4]) is not None)
    i = 5 if root else 4
    if len(tok) < i + 8:
        return None
    return Row(size_bytes=_whole(tok[0], where, "size"),
               count=_whole(tok[1], where, "count", "elements"), type=tok[2], redop=tok[3],
               root=_root(tok[4], where) if root else -1,
               time_us=_time(tok[i], where, "out-of-place time"),
               algbw_gbps=_rate(tok[i + 1], where, "out-of-place algbw"),
               busbw_gbps=_rate(tok[i + 2], where, "out-of-place busbw"),
               wrong=_wrong(tok[i + 3], where, "out-of-place #wrong"),
               time_us_inplace=_time(tok[i + 4], where, "in-place time"),
               algbw_gbps_inplace=_rate(tok[i + 5], where, "in-place algbw"),
               busbw_gbps_inplace=_rate(tok[i + 6], where, "in-place busbw"),
               wrong_inplace=_wrong(tok[i + 7], where, "in-place #wrong"),
               extra=tuple(tok[i + 8:]))


def _from_json_lines(lines: list[str], name: str = "") -> NcclTestsFile | None:
    """fabricsim ``bench --json`` output (one object per row), or None if it is not. A row
    with a nonsense figure is a ConfigError naming the file, the line and the key."""
    rows: list[Row] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            return None
        if not isinstance(d, dict) or "size_bytes" not in d or "time_us" not in d:
            return None
        at = f"{name} line {n}" if name else f"line {n}"
        t = _time(d["time_us"], at, "time_us")
        alg = _rate(d.get("algbw_gbps"), at, "algbw_gbps")
        bus = _rate(d.get("busbw_gbps"), at, "busbw_gbps")
        rows.append(Row(size_bytes=_whole(d["size_bytes"], at, "size_bytes"),
                        count=_whole(d.get("count", 0), at, "count", "elements"),
                        type=str(d.get("type", "float")), redop=str(d.get("redop", "sum")),
                        root=_root(d.get("root", -1), at), time_us=t, algbw_gbps=alg,
                        busbw_gbps=bus, wrong=None,
                        time_us_inplace=_time(d.get("time_us_inplace", t), at,
                                              "time_us_inplace"),
                        algbw_gbps_inplace=_rate(d["algbw_gbps_inplace"], at,
                                                 "algbw_gbps_inplace")
                        if "algbw_gbps_inplace" in d else alg,
                        busbw_gbps_inplace=_rate(d["busbw_gbps_inplace"], at,
                                                 "busbw_gbps_inplace")
                        if "busbw_gbps_inplace" in d else bus,
                        wrong_inplace=None,
                        extra=tuple(str(d[k]) for k in ("algorithm", "protocol") if k in d)))
    if not rows:
        return None
    return NcclTestsFile(tests=(NcclTest(collective=None, rows=tuple(rows),
                                         source="fabricsim bench --json"),))


#: What launchers put in front of every line a rank prints: ``srun -l`` (``0: ``),
#: ``mpirun --tag-output`` (``[1,0]<stdout>:``), torchrun's log prefix (``[default0]:``).
_LAUNCHER_PREFIX = re.compile(r"^(?:\s*\d+: |\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:|"
                              r"\[default\d+\]:)")


def strip_launcher_prefixes(text: str) -> str:
    r"""``text`` without the launcher prefix on each line, when most lines carry one
    (a file that only some lines of happen to match is left alone).

    >>> strip_launcher_prefixes("0: # nThread 1\n0:        8  2  float\n")
    '# nThread 1\n       8  2  float\n'
    """
    lines = text.splitlines(keepends=True)
    hits = sum(1 for ln in lines if _LAUNCHER_PREFIX.match(ln))
    if not lines or hits * 2 < sum(1 for ln in lines if ln.strip()):
        return text
    return "".join(_LAUNCHER_PREFIX.sub("", ln, count=1) for ln in lines)


#: NCCL Inspector's collective names -> fabricsim's.
_INSPECTOR_COLLS = {"AllReduce": "all_reduce", "AllGather": "all_gather",
                    "ReduceScatter": "reduce_scatter", "Broadcast": "broadcast",
                    "Reduce": "reduce", "AllToAll": "alltoall"}


def _json_objects(text: str) -> list[Any] | None:
    """Every JSON value in ``text`` one after another (one per line, or pretty-printed and
    concatenated, as NCCL Inspector writes them); None if the text is not such a stream."""
    dec = json.JSONDecoder()
    out: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            return None
        out.append(obj)


def _from_inspector(text: str, name: str = "") -> NcclTestsFile | None:
    """NCCL Inspector's per-collective JSON (``NCCL_INSPECTOR_ENABLE=1``, NCCL 2.28+:
    ``header`` with the communicator, rank and sizes, ``metadata`` with the host,
    ``coll_perf`` with the collective, its message size, time and bandwidths), or None if
    the text is not that. One test per communicator and collective; per size, the median
    over every rank and call recorded. The message size is nccl-tests' (all-gather and
    reduce-scatter count every rank's share, as the bandwidths Inspector prints do). A record
    with a nonsense figure is a ConfigError naming the file, the record and the key."""
    objs = _json_objects(text)
    if not objs or not all(isinstance(o, dict) and "header" in o for o in objs) \
            or not any("coll_perf" in o for o in objs):
        return None
    objs = [o for o in objs if "coll_perf" in o]  # p2p_perf and other records: not tests
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    version = None
    for k, o in enumerate(objs, 1):
        at = f"{name} record {k}" if name else f"record {k}"
        head, meta, perf = o["header"], o.get("metadata") or {}, o["coll_perf"]
        if not isinstance(head, dict) or not isinstance(perf, dict):
            raise ConfigError(f"{at}: header and coll_perf must be objects", field="LOG")
        coll = _INSPECTOR_COLLS.get(str(perf.get("coll")))
        if coll is None:
            continue
        t = _time(perf.get("coll_exec_time_us"), at, "coll_exec_time_us")
        alg = _rate(perf.get("coll_algobw_gbs"), at, "coll_algobw_gbs")
        bus = _rate(perf.get("coll_busbw_gbs"), at, "coll_busbw_gbs")
        msg = _whole(perf.get("coll_msg_size_bytes"), at, "coll_msg_size_bytes")
        nranks = _whole(head.get("n_ranks"), at, "n_ranks", "ranks")
        # all-gather and reduce-scatter record one rank's share: nccl-tests' size (and the
        # algorithm bandwidth NCCL Inspector prints) counts every rank's
        size = msg * nranks if coll in ("all_gather", "reduce_scatter") else msg
        g = groups.setdefault((str(head.get("id", "")), coll), {
            "coll": coll, "nranks": nranks, "nnodes": head.get("nnodes"), "sizes": {},
            "hosts": {}})
        g["sizes"].setdefault(size, []).append((t, alg, bus))
        rank = head.get("rank")
        if isinstance(rank, int) and isinstance(meta.get("hostname"), str):
            g["hosts"][rank] = meta["hostname"]
        version = version or meta.get("inspector_output_format_version")
    if not groups:
        return None
    tests = []
    for g in groups.values():
        rows = []
        for size in sorted(g["sizes"]):
            vals = g["sizes"][size]
            t, alg, bus = (statistics.median(v[i] for v in vals) for i in range(3))
            rows.append(Row(size_bytes=size, count=0, type="float", redop="sum", root=-1,
                            time_us=t, algbw_gbps=alg, busbw_gbps=bus, wrong=None,
                            time_us_inplace=t, algbw_gbps_inplace=alg,
                            busbw_gbps_inplace=bus, wrong_inplace=None,
                            extra=(f"{len(vals)} records",)))
        hosts: tuple[str, ...] = tuple(g["hosts"][r] for r in range(g["nranks"])) \
            if len(g["hosts"]) == g["nranks"] else ()
        nnodes = g["nnodes"]
        if not hosts and isinstance(nnodes, int) and nnodes > 0 and \
                g["nranks"] % nnodes == 0:
            # one process's file (Inspector writes one per process): the header's shape,
            # as placeholder hosts, so the cluster is the one the communicator spanned
            per = g["nranks"] // nnodes
            hosts = tuple(f"node{r // per}" for r in range(g["nranks"]))
        head = {"nranks": str(g["nranks"]), "nnodes": str(g["nnodes"])}
        if len(g["hosts"]) != g["nranks"] and hosts:
            head["hosts"] = "from the header"
        tests.append(NcclTest(collective=g["coll"], rows=tuple(rows), hosts=hosts,
                              header=head, source="NCCL Inspector"))
    return NcclTestsFile(tests=tuple(tests), version=None,
                         notes=(f"NCCL Inspector output (format {version})",) if version
                         else ())


def parse_nccl_tests(text: str, name: str = "") -> NcclTestsFile:
    """Parse nccl-tests output (or fabricsim's ``bench --json``). ``name`` (the file
    name) helps name the collective when the log does not.

    Raises :class:`~fabricsim.errors.ConfigError` (field ``LOG``) when nothing in the text
    is nccl-tests output; a failed or truncated test is returned with ``failures`` /
    ``complete=False`` instead.
    """
    text = strip_launcher_prefixes(text)
    lines = text.splitlines()
    if lines and lines[0].lstrip().startswith("{"):
        inspected = _from_inspector(text, name)
        if inspected is not None:
            return inspected
        parsed = _from_json_lines(lines, name)
        if parsed is not None:
            coll = _collective_of(name)
            t = parsed.tests[0]
            return NcclTestsFile(tests=(NcclTest(collective=coll, rows=t.rows,
                                                 source=t.source),))
    version: str | None = None
    library: str | None = None
    nccl_info: str | None = None
    tests: list[NcclTest] = []
    cur: dict[str, Any] | None = None

    def new(coll: str | None) -> dict[str, Any]:
        return {"collective": coll, "rows": [], "hosts": [], "gpus": [], "gpt": 1,
                "header": {}, "failures": [], "avg": None, "has_root": None}

    def close() -> None:
        nonlocal cur
        if cur is not None and cur["hosts"] and not cur["rows"] and not cur["failures"]:
            # a test that listed its devices and printed nothing more: it died (killed,
            # hung, a crashed rank); that is evidence against its hosts, not a bad file
            cur["failures"].append("aborted: the test ends before its first result row")
        if cur is not None and (cur["rows"] or cur["hosts"] or cur["failures"]):
            tests.append(NcclTest(
                collective=cur["collective"], rows=tuple(cur["rows"]),
                hosts=tuple(cur["hosts"]), gpus=tuple(cur["gpus"]),
                gpus_per_thread=cur["gpt"], header=dict(cur["header"]),
                failures=tuple(cur["failures"]),
                complete=cur["avg"] is not None and not cur["failures"],
                avg_busbw_gbps=cur["avg"]))
        cur = None

    for lineno, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if nccl_info is None and (m := _NCCL_INFO_VERSION.search(s)):
            nccl_info = m.group(1)
        if (m := _VERSION.search(s)) and s.startswith("#"):
            version = m.group(1)
            if (lib := _LIBRARY.search(s)) is not None:
                code = int(lib.group(1))
                library = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
            continue
        if (m := _START.search(s)) and s.startswith("#"):
            close()
            cur = new(_collective_of(m.group(1)))
            continue
        if s.startswith("#") and re.search(r"\bnThread\s+\d+", s):
            if cur is not None and (cur["rows"] or cur["avg"] is not None):
                close()  # a second test without a 'starting' line
            if cur is None:
                cur = new(None)
            for k, v in re.findall(r"(nThread|nGpus|minBytes|maxBytes|iters|warmup iters|"
                                   r"agg iters|validation|graph)\s*:?\s+(\S+)", s):
                cur["header"][k] = v
            if "nGpus" in cur["header"]:
                cur["gpt"] = max(int(cur["header"]["nGpus"]), 1)
            continue
        if cur is None:
            cur = new(None)
        if (m := _DEVICE.match(s)):
            cur["hosts"].append(m.group(2))
            cur["gpus"].append(m.group(4))
            continue
        if s.startswith("#") and re.search(r"\bsize\b.*\bcount\b", s):
            cur["has_root"] = "root" in s.split()
            continue
        if (m := re.search(r"Avg bus bandwidth\s*:\s*(\S+)", s)):
            try:
                cur["avg"] = float(m.group(1))
            except ValueError:
                cur["avg"] = math.nan
            continue
        if (m := _FAIL.search(s)):
            cur["failures"].append(s)
            continue
        if s.startswith("#"):
            continue
        row = _row(s.split(), cur["has_root"],
                   f"{name} line {lineno}" if name else f"line {lineno}")
        if row is not None:
            cur["rows"].append(row)
    close()
    if not any(t.rows or t.failures for t in tests):
        raise ConfigError("no nccl-tests result rows found (expected lines such as "
                          "'1048576 262144 float sum -1 50.0 20.97 36.70 0 ...'); is this "
                          "nccl-tests output?", field="LOG")
    named = _collective_of(name)
    if named is not None:  # the file name names the collective of unnamed tests
        tests = [t if t.collective else NcclTest(**{**t.__dict__, "collective": named})
                 for t in tests]
    notes = tuple(f"test {i + 1} ({t.collective or '?'}) failed: {t.failures[0]}"
                  for i, t in enumerate(tests) if t.failed) + tuple(
        f"test {i + 1} ({t.collective or '?'}) is truncated: no 'Avg bus bandwidth' line"
        for i, t in enumerate(tests) if not t.failed and not t.complete and t.rows)
    release = nccl_info or library
    if release is not None:
        tests = [NcclTest(**{**t.__dict__, "nccl_version": release}) for t in tests]
    return NcclTestsFile(tests=tuple(tests), version=version, notes=notes,
                         nccl_version=release)


def format_nccl_tests(rows: Sequence[Row], *, collective: str, header: Sequence[str] = (),
                      devices: Sequence[tuple[str, int, str]] = (), gpus_per_thread: int = 1,
                      extra_columns: Sequence[str] = (), min_bytes: int | None = None,
                      max_bytes: int | None = None, step: str = "2(factor)",
                      run: Mapping[str, int] | None = None) -> str:
    """``rows`` in nccl-tests' layout (current format, with ``root``): a starting line,
    the run header, ``Using devices``, both column groups, ``#wrong`` (``N/A`` when
    ``None``), the average busbw and a concluding line. ``devices`` are (host, device,
    GPU model) per rank; ``extra_columns`` name trailing columns (``row.extra``);
    ``min_bytes``, ``max_bytes`` and ``step`` fill the run line as nccl-tests prints the
    sweep it was asked for (default: the rows' smallest and largest size, factor 2).

    >>> r = Row(1024, 256, "float", "sum", -1, 30.0, 0.03, 0.06, None, 30.0, 0.03, 0.06,
    ...         None)
    >>> out = format_nccl_tests([r], collective="all_reduce")
    >>> out.splitlines()[0], "N/A" in out
    ('# Collective test starting: all_reduce_perf', True)
    >>> parse_nccl_tests(out).tests[0].rows[0] == r
    True
    """
    binary = _BINARIES.get(collective, f"{collective}_perf")
    lines = [f"# Collective test starting: {binary}"]
    sizes = [r.size_bytes for r in rows]
    lo = min(sizes, default=0) if min_bytes is None else min_bytes
    hi = max(sizes, default=0) if max_bytes is None else max_bytes
    how = {"nthreads": 1, "warmup": 5, "iters": 20, "agg": 1, "validation": 1, "graph": 0,
           "unalign": 0, **(run or {})}
    lines.append(f"# nThread {how['nthreads']} nGpus {gpus_per_thread} minBytes {lo} "
                 f"maxBytes {hi} step: {step} warmup iters: {how['warmup']} "
                 f"iters: {how['iters']} agg iters: {how['agg']} validation: "
                 f"{how['validation']} graph: {how['graph']} unalign: {how['unalign']}")
    lines += [f"# {h}" for h in header]
    lines.append("#")
    if devices:
        lines.append("# Using devices")
        for rank, (host, dev, model) in enumerate(devices):
            lines.append(f"#  Rank {rank:>2} Group  0 Pid {rank + 1:>6} on {host:>10} device "
                         f"{dev:>2} [0x00] {model}")
        lines.append("#")
    ex = "".join(f" {c:>9}" for c in extra_columns)
    lines += [f"#{'':>59}out-of-place{'':>23}in-place",
              f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>6} "
              f"{'time':>8} {'algbw':>7} {'busbw':>7} {'#wrong':>6} {'time':>8} {'algbw':>7} "
              f"{'busbw':>7} {'#wrong':>6}{ex}",
              f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>6} {'(us)':>8} "
              f"{'(GB/s)':>7} {'(GB/s)':>7} {'':>6} {'(us)':>8} {'(GB/s)':>7} {'(GB/s)':>7}"]

    def w(x: int | None) -> str:
        return "N/A" if x is None else str(x)

    for r in rows:
        extra = "".join(f" {x:>9}" for x in r.extra)
        lines.append(f"{r.size_bytes:>12} {r.count:>12} {r.type:>8} {r.redop:>6} "
                     f"{r.root:>6} {r.time_us:>8.2f} {r.algbw_gbps:>7.2f} "
                     f"{r.busbw_gbps:>7.2f} {w(r.wrong):>6} {r.time_us_inplace:>8.2f} "
                     f"{r.algbw_gbps_inplace:>7.2f} {r.busbw_gbps_inplace:>7.2f} "
                     f"{w(r.wrong_inplace):>6}{extra}")
    avg = sum(r.busbw_gbps for r in rows) / max(len(rows), 1)
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:.4f}", "#",
              f"# Collective test concluded: {binary}"]
    return "\n".join(lines)


def format_bench(rows: Sequence[Any], header: str, collective: str = "all_reduce",
                 fabric: Any = None, gpus_per_thread: int = 1,
                 sweep: tuple[int, int, str] | None = None,
                 run: Mapping[str, int] | None = None) -> str:
    """A simulated sweep's rows (:class:`fabricsim.jobs.collective.BenchRow`) in
    nccl-tests' layout: out-of-place and in-place columns (the model has one
    time for both), ``#wrong`` as ``N/A`` (nothing is validated), then the algorithm and
    protocol chosen as two extra columns."""
    from fabricsim.protocols import PROTOCOL_LABELS

    out = [Row(r.size_bytes, r.count, r.type, r.redop, r.root, r.time_us, r.algbw_gbps,
                  r.busbw_gbps, None, r.time_us, r.algbw_gbps, r.busbw_gbps, None,
                  extra=(r.algorithm, PROTOCOL_LABELS.get(r.protocol, r.protocol)))
           for r in rows]
    devices: list[tuple[str, int, str]] = []
    if fabric is not None and fabric.n_gpus <= 4096:
        import numpy as np

        srv = fabric.node_server[fabric.gpus]
        local = fabric.node_local[fabric.gpus]
        model = gpu_label(fabric.info.gpu)
        devices = [(f"node{int(a):04d}", int(b), model) for a, b in
                   zip(np.asarray(srv), np.asarray(local), strict=True)]
    lo, hi, step = sweep if sweep is not None else (None, None, "2(factor)")
    return format_nccl_tests(out, collective=collective, header=[header.lstrip("# ")],
                             devices=devices, gpus_per_thread=gpus_per_thread,
                             extra_columns=("algorithm", "protocol"), min_bytes=lo,
                             max_bytes=hi, step=step, run=run)


def gpu_label(gpu: str) -> str:
    """The GPU model as nccl-tests prints it, for the catalog GPU ``gpu``."""
    labels = {"h100-sxm": "NVIDIA H100 80GB HBM3", "a100-sxm": "NVIDIA A100-SXM4-80GB",
              "a100-sxm-40gb": "NVIDIA A100-SXM4-40GB", "h200-sxm": "NVIDIA H200",
              "h800-sxm": "NVIDIA H800", "a800-sxm": "NVIDIA A800-SXM4-80GB",
              "b200": "NVIDIA B200", "gb200": "NVIDIA GB200", "v100-sxm": "Tesla V100-SXM2-32GB",
              "h20": "NVIDIA H20", "h100-pcie": "NVIDIA H100 PCIe", "l40s": "NVIDIA L40S"}
    return labels.get(gpu, gpu)
