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
>>> t.rows[1].wrong, t.rows[1].time_us_inplace
(None, 30.5)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fabricsim.errors import ConfigError

__all__ = ["COLLECTIVES", "NCCL_ALGOS", "NCCL_PROTOS", "NcclEnv", "NcclTest", "NcclTestsFile",
           "Row", "format_nccl_tests", "nccl_env", "parse_nccl_tests"]

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
_START = re.compile(r"Collective test starting:\s*(\S+)")
_FAIL = re.compile(r"(Test NCCL failure|Test failure|NCCL WARN|Test CUDA failure)\s*(.*)")


@dataclass(frozen=True)
class Row:
    """One size: out-of-place and in-place time (us), algbw and busbw (GB/s), ``#wrong``
    (``None`` for ``N/A``; NaN figures where the log prints ``N/A``)."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
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


def _num(tok: str) -> float:
    return math.nan if tok.upper() == "N/A" else float(tok)


def _wrong(tok: str) -> int | None:
    if tok.upper() == "N/A":
        return None
    try:
        return int(float(tok))
    except ValueError:
        return None


def _collective_of(name: str) -> str | None:
    low = name.lower().replace("-", "_")
    for c in sorted(COLLECTIVES, key=len, reverse=True):
        if c in low or c.replace("_", "") in low:
            return c
    return None


def _row(tok: list[str], has_root: bool | None) -> Row | None:
    """A result row, read from the start (trailing extra columns are kept)."""
    if len(tok) < 10 or not tok[0].isdigit() or not tok[1].isdigit():
        return None
    root = has_root if has_root is not None else \
        (len(tok) >= 13 and re.fullmatch(r"-?\d+", tok[4]) is not None)
    i = 5 if root else 4
    if len(tok) < i + 8:
        return None
    try:
        return Row(size_bytes=int(tok[0]), count=int(tok[1]), type=tok[2], redop=tok[3],
                   root=int(tok[4]) if root else -1,
                   time_us=_num(tok[i]), algbw_gbps=_num(tok[i + 1]),
                   busbw_gbps=_num(tok[i + 2]), wrong=_wrong(tok[i + 3]),
                   time_us_inplace=_num(tok[i + 4]), algbw_gbps_inplace=_num(tok[i + 5]),
                   busbw_gbps_inplace=_num(tok[i + 6]), wrong_inplace=_wrong(tok[i + 7]),
                   extra=tuple(tok[i + 8:]))
    except ValueError:
        return None


def _from_json_lines(lines: list[str]) -> NcclTestsFile | None:
    """fabricsim ``bench --json`` output (one object per row), or None if it is not."""
    rows: list[Row] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            return None
        if not isinstance(d, dict) or "size_bytes" not in d or "time_us" not in d:
            return None
        t, bus = float(d["time_us"]), float(d.get("busbw_gbps", math.nan))
        alg = float(d.get("algbw_gbps", math.nan))
        rows.append(Row(size_bytes=int(d["size_bytes"]), count=int(d.get("count", 0)),
                        type=str(d.get("type", "float")), redop=str(d.get("redop", "sum")),
                        root=int(d.get("root", -1)), time_us=t, algbw_gbps=alg,
                        busbw_gbps=bus, wrong=None,
                        time_us_inplace=float(d.get("time_us_inplace", t)),
                        algbw_gbps_inplace=float(d.get("algbw_gbps_inplace", alg)),
                        busbw_gbps_inplace=float(d.get("busbw_gbps_inplace", bus)),
                        wrong_inplace=None,
                        extra=tuple(str(d[k]) for k in ("algorithm", "protocol") if k in d)))
    if not rows:
        return None
    return NcclTestsFile(tests=(NcclTest(collective=None, rows=tuple(rows),
                                         source="fabricsim bench --json"),))


def parse_nccl_tests(text: str, name: str = "") -> NcclTestsFile:
    """Parse nccl-tests output (or fabricsim's ``bench --json``). ``name`` (the file
    name) helps name the collective when the log does not.

    Raises :class:`~fabricsim.errors.ConfigError` (field ``LOG``) when nothing in the text
    is nccl-tests output; a failed or truncated test is returned with ``failures`` /
    ``complete=False`` instead.
    """
    lines = text.splitlines()
    if lines and lines[0].lstrip().startswith("{"):
        parsed = _from_json_lines(lines)
        if parsed is not None:
            coll = _collective_of(name)
            t = parsed.tests[0]
            return NcclTestsFile(tests=(NcclTest(collective=coll, rows=t.rows,
                                                 source=t.source),))
    version: str | None = None
    tests: list[NcclTest] = []
    cur: dict[str, Any] | None = None

    def new(coll: str | None) -> dict[str, Any]:
        return {"collective": coll, "rows": [], "hosts": [], "gpus": [], "gpt": 1,
                "header": {}, "failures": [], "avg": None, "has_root": None}

    def close() -> None:
        nonlocal cur
        if cur is not None and (cur["rows"] or cur["hosts"] or cur["failures"]):
            tests.append(NcclTest(
                collective=cur["collective"], rows=tuple(cur["rows"]),
                hosts=tuple(cur["hosts"]), gpus=tuple(cur["gpus"]),
                gpus_per_thread=cur["gpt"], header=dict(cur["header"]),
                failures=tuple(cur["failures"]),
                complete=cur["avg"] is not None and not cur["failures"],
                avg_busbw_gbps=cur["avg"]))
        cur = None

    for raw in lines:
        s = raw.strip()
        if not s:
            continue
        if (m := _VERSION.search(s)) and s.startswith("#"):
            version = m.group(1)
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
        row = _row(s.split(), cur["has_root"])
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
    return NcclTestsFile(tests=tuple(tests), version=version, notes=notes)


def format_nccl_tests(rows: Sequence[Row], *, collective: str, header: Sequence[str] = (),
                      devices: Sequence[tuple[str, int, str]] = (), gpus_per_thread: int = 1,
                      extra_columns: Sequence[str] = ()) -> str:
    """``rows`` in nccl-tests' layout (current format, with ``root``): a starting line,
    the run header, ``Using devices``, both column groups, ``#wrong`` (``N/A`` when
    ``None``), the average busbw and a concluding line. ``devices`` are (host, device,
    GPU model) per rank; ``extra_columns`` name trailing columns (``row.extra``).

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
    lines.append(f"# nThread 1 nGpus {gpus_per_thread} minBytes {min(sizes, default=0)} "
                 f"maxBytes {max(sizes, default=0)} step: 2(factor) warmup iters: 5 "
                 f"iters: 20 agg iters: 1 validation: 0 graph: 0")
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


#: NCCL_ALGO names -> fabricsim algorithms (CollNet runs as SHARP; with NVLS, NVLS+SHARP).
NCCL_ALGOS = {"ring": ("ring",), "tree": ("tree",), "nvls": ("nvls",),
              "nvlstree": ("nvlstree",), "collnetdirect": ("sharp", "nvls_sharp"),
              "collnetchain": ("sharp", "nvls_sharp"), "collnet": ("sharp", "nvls_sharp")}
#: NCCL_PROTO names -> fabricsim protocols.
NCCL_PROTOS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}


@dataclass(frozen=True)
class NcclEnv:
    """What NCCL's environment variables allow: algorithm and protocol sets (``None``:
    NCCL's own choice), and SHARP/NVLS switches (``None``: the fabric's default)."""

    algorithms: frozenset[str] | None = None
    protocols: frozenset[str] | None = None
    collnet: bool | None = None
    nvls: bool | None = None

    def allowed_algorithms(self, candidates: Sequence[str]) -> list[str]:
        """``candidates`` NCCL may run under these settings."""
        out = [a for a in candidates if self.algorithms is None or a in self.algorithms]
        if self.nvls is False:
            out = [a for a in out if not a.startswith("nvls")]
        if self.collnet is not True:
            out = [a for a in out if a not in ("sharp", "nvls_sharp")]
        return out


def _names(var: str, value: str, table: dict[str, Any]) -> set[str]:
    text = value.strip()
    if ";" in text or ":" in text:  # per-collective form: 'allreduce:tree,ring;...'
        raise ConfigError(f"{var}={value!r}: the per-collective form is not supported; give "
                          f"a plain list such as {var}=Ring,Tree", field=var)
    neg = text.startswith("^")
    words = [w.strip().lower() for w in text.lstrip("^").split(",") if w.strip()]
    bad = [w for w in words if w not in table]
    if bad or not words:
        raise ConfigError(f"{var}={value!r}: unknown name(s) {', '.join(bad) or '(none)'}; "
                          f"valid: {', '.join(sorted(table))} (a leading ^ excludes)",
                          field=var)
    chosen = set(words)
    return set(table) - chosen if neg else chosen


def _flag(var: str, value: str) -> bool:
    v = value.strip()
    if v not in ("0", "1"):
        raise ConfigError(f"{var}={value!r}: must be 0 or 1", field=var)
    return v == "1"


def nccl_env(env: dict[str, str] | Any) -> NcclEnv:
    """Read ``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_COLLNET_ENABLE`` and
    ``NCCL_NVLS_ENABLE`` from a mapping (e.g. ``os.environ``) as NCCL reads them.

    >>> e = nccl_env({"NCCL_ALGO": "^Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"})
    >>> e.allowed_algorithms(["ring", "tree", "nvls", "nvlstree"]), sorted(e.protocols)
    (['ring'], ['simple'])
    """
    algos = protos = None
    if env.get("NCCL_ALGO"):
        algos = frozenset(a for n in _names("NCCL_ALGO", env["NCCL_ALGO"], NCCL_ALGOS)
                          for a in NCCL_ALGOS[n])
    if env.get("NCCL_PROTO"):
        protos = frozenset(NCCL_PROTOS[n] for n in
                           _names("NCCL_PROTO", env["NCCL_PROTO"], NCCL_PROTOS))
    collnet = _flag("NCCL_COLLNET_ENABLE", env["NCCL_COLLNET_ENABLE"]) \
        if env.get("NCCL_COLLNET_ENABLE") else None
    nvls = _flag("NCCL_NVLS_ENABLE", env["NCCL_NVLS_ENABLE"]) \
        if env.get("NCCL_NVLS_ENABLE") else None
    return NcclEnv(algorithms=algos, protocols=protos, collnet=collnet, nvls=nvls)
