"""Job traces of shared GPU clusters, read into arrivals a scheduler replays.

Four formats, told apart by their content when not named:

* ``philly`` — Microsoft's Philly trace (``cluster_job_log``): one JSON array of jobs,
  each with ``jobid``, ``submitted_time`` and ``attempts`` (``start_time``,
  ``end_time``, ``detail``: the servers and their GPUs). A job's GPUs are those of its
  first attempt; it runs from its first attempt's start to its last attempt's end.
  Times are ``YYYY-MM-DD HH:MM:SS``; a missing one is ``None``, ``"None"`` or ``""``.
* ``pai`` — Alibaba PAI's GPU trace of 2020 (``pai_task_table.csv``, no header row):
  ``job_name, task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem,
  plan_gpu, gpu_type``. A job's GPUs are ``Σ inst_num × plan_gpu / 100`` over its tasks,
  rounded up (``plan_gpu`` is a percentage of one GPU); it runs from its first task's
  start to its last task's end (seconds; 0 means unknown).
* ``helios`` — Shanghai AI Lab's Helios trace (``cluster_log.csv``, with a header row):
  ``job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time,
  end_time, duration, queue``; ``duration`` in seconds; CPU-only jobs (``gpu_num`` 0)
  are skipped.
* ``csv`` — this project's own: a header ``name,submit_s,gpus,duration_s`` and one
  job per line.

A job's ``duration_s`` is what it ran in the trace; a replay takes it as the job's
running time alone on the fabric (its work) and stretches it by the slowdown the other
jobs cause. ``submit_s`` counts from the first submission in the file. Jobs without a
GPU, a start or an end are skipped and counted; a line that cannot be read is refused
with its number.

Example
-------
>>> jobs, notes = parse_trace("name,submit_s,gpus,duration_s\\na,0,8,3600\\nb,60,16,600\\n")
>>> [(j.name, j.submit_s, j.gpus, j.duration_s) for j in jobs]
[('a', 0.0, 8, 3600.0), ('b', 60.0, 16, 600.0)]
>>> parse_trace("hello")
Traceback (most recent call last):
...
fabricsim.errors.ConfigError: trace.format: cannot tell the format of <trace>: not a \
Philly JSON array, nor a CSV with a Helios or fabricsim header, nor PAI's 10-column task \
table; give trace.format: philly, pai, helios or csv
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fabricsim.errors import ConfigError

__all__ = ["FORMATS", "TraceJob", "detect_format", "parse_trace", "synthetic_day"]

#: Trace formats :func:`parse_trace` reads.
FORMATS = ("philly", "pai", "helios", "csv")
_HELIOS = ("job_id", "gpu_num", "submit_time", "duration")
_OURS = ("name", "submit_s", "gpus", "duration_s")


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: its name, when it was submitted (seconds from the trace's
    first submission), its GPUs, how long it ran, and where it was read (line or
    entry)."""

    name: str
    submit_s: float
    gpus: int
    duration_s: float
    line: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "submit_s": self.submit_s, "gpus": self.gpus,
                "duration_s": self.duration_s, "line": self.line}


def parse_trace(text: str, fmt: str | None = None, source: str = "<trace>"
                ) -> tuple[list[TraceJob], dict[str, int]]:
    """The jobs of a trace (sorted by submission) and counts of what was skipped and why
    (``{"no GPU": 3, ...}``); ``fmt`` one of :data:`FORMATS`, or ``None`` to tell it from
    the text. A line that cannot be read is refused naming ``source`` and the line."""
    if fmt is None:
        fmt = detect_format(text, source)
    if fmt not in FORMATS:
        from fabricsim.errors import unknown

        raise unknown("trace format", fmt, FORMATS, field="trace.format")
    skipped: dict[str, int] = {}
    raw = {"philly": _philly, "pai": _pai, "helios": _helios, "csv": _ours}[fmt](
        text, source, skipped)
    if not raw:
        why = ", ".join(f"{n} {k}" for k, n in skipped.items()) or "it is empty"
        raise ConfigError(f"{source}: no job with GPUs, a start and an end to replay "
                          f"({why})", field="trace.file")
    t0 = min(r[1] for r in raw)
    jobs = [TraceJob(n, s - t0, g, d, ln) for n, s, g, d, ln in raw]
    jobs.sort(key=lambda j: (j.submit_s, j.line))
    return jobs, skipped


def detect_format(text: str, source: str = "<trace>") -> str:
    """The format of a trace's text (:data:`FORMATS`), or a ConfigError naming
    ``trace.format`` when it cannot be told."""
    head = text.lstrip()[:1]
    if head == "[":
        return "philly"
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    cols = [c.strip().lower() for c in first.split(",")]
    if all(c in cols for c in _HELIOS):
        return "helios"
    if all(c in cols for c in _OURS):
        return "csv"
    if len(cols) == 10:
        return "pai"
    raise ConfigError(f"cannot tell the format of {source}: not a Philly JSON array, nor a "
                      f"CSV with a Helios or fabricsim header, nor PAI's 10-column task "
                      f"table; give trace.format: philly, pai, helios or csv",
                      field="trace.format")


def _bad(source: str, line: int, what: str) -> ConfigError:
    return ConfigError(f"{source} line {line}: {what}", field="trace.file")


def _skip(skipped: dict[str, int], why: str) -> None:
    skipped[why] = skipped.get(why, 0) + 1


def _time(v: object, source: str, line: int, name: str) -> float | None:
    """Seconds of a ``YYYY-MM-DD HH:MM:SS`` stamp (no zone), ``None`` when missing."""
    if v is None or (isinstance(v, str) and v.strip() in ("", "None", "null", "NaN")):
        return None
    try:
        return datetime.strptime(str(v).strip()[:19], "%Y-%m-%d %H:%M:%S").replace(
            tzinfo=UTC).timestamp()
    except ValueError:
        raise _bad(source, line, f"{name} {v!r} is not a time YYYY-MM-DD HH:MM:SS") from None


def _number(v: str, source: str, line: int, name: str) -> float | None:
    v = v.strip()
    if v in ("", "None", "NaN", "nan", "NA"):
        return None
    try:
        x = float(v)
    except ValueError:
        raise _bad(source, line, f"{name} {v!r} is not a number") from None
    if not math.isfinite(x) or x < 0:
        raise _bad(source, line, f"{name} {v!r} must be a finite number >= 0")
    return x


Raw = tuple[str, float, int, float, int]


def _philly(text: str, source: str, skipped: dict[str, int]) -> list[Raw]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _bad(source, e.lineno, f"not JSON: {e.msg}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{source}: a Philly job log is a JSON array of jobs",
                          field="trace.file")
    out: list[Raw] = []
    for i, job in enumerate(data, start=1):
        if not isinstance(job, dict) or "submitted_time" not in job:
            raise ConfigError(f"{source} job {i}: not a Philly job (an object with jobid, "
                              f"submitted_time and attempts)", field="trace.file")
        name = str(job.get("jobid", f"job{i}"))
        submit = _time(job.get("submitted_time"), source, i, "submitted_time")
        attempts = job.get("attempts") or []
        if not isinstance(attempts, list) or submit is None or not attempts:
            _skip(skipped, "never started")
            continue
        first, last = attempts[0], attempts[-1]
        if not isinstance(first, dict) or not isinstance(last, dict):
            raise ConfigError(f"{source} job {i} ({name}): attempts are objects",
                              field="trace.file")
        gpus = sum(len(d.get("gpus") or []) for d in first.get("detail") or []
                   if isinstance(d, dict))
        start = _time(first.get("start_time"), source, i, "start_time")
        end = _time(last.get("end_time"), source, i, "end_time")
        if gpus == 0:
            _skip(skipped, "no GPU")
        elif start is None or end is None or end < start:
            _skip(skipped, "no start or end")
        else:
            out.append((name, submit, gpus, end - start, i))
    return out


def _pai(text: str, source: str, skipped: dict[str, int]) -> list[Raw]:
    jobs: dict[str, list[float]] = {}  # name -> [gpus, start, end, first line]
    for ln, row in enumerate(_csv_rows(text, source), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 10:
            raise _bad(source, ln, f"{len(row)} fields; PAI's task table has 10 (job_name, "
                       f"task_name, inst_num, status, start_time, end_time, plan_cpu, "
                       f"plan_mem, plan_gpu, gpu_type)")
        if ln == 1 and row[0].strip() == "job_name":
            continue  # a header some copies carry
        inst = _number(row[2], source, ln, "inst_num") or 0.0
        pct = _number(row[8], source, ln, "plan_gpu") or 0.0
        start = _number(row[4], source, ln, "start_time") or 0.0
        end = _number(row[5], source, ln, "end_time") or 0.0
        j = jobs.setdefault(row[0].strip(), [0.0, math.inf, 0.0, float(ln)])
        j[0] += inst * pct / 100.0
        if start > 0:
            j[1] = min(j[1], start)
        if end > 0:
            j[2] = max(j[2], end)
    out: list[Raw] = []
    for name, (g, first, last, at) in jobs.items():
        if g <= 0:
            _skip(skipped, "no GPU")
        elif not math.isfinite(first) or last <= first:
            _skip(skipped, "no start or end")
        else:
            out.append((name, first, math.ceil(g - 1e-9), last - first, int(at)))
    return out


def _rows(text: str, source: str, need: tuple[str, ...]
          ) -> tuple[list[tuple[int, dict[str, str]]], str]:
    reader = iter(_csv_rows(text, source))
    header = [c.strip().lower() for c in next(reader, [])]
    miss = [c for c in need if c not in header]
    if miss:
        raise _bad(source, 1, f"the header lacks {', '.join(miss)}")
    rows = []
    for ln, row in enumerate(reader, start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(header):
            raise _bad(source, ln, f"{len(row)} fields; the header has {len(header)}")
        rows.append((ln, dict(zip(header, row, strict=True))))
    return rows, ",".join(header)


def _csv_rows(text: str, source: str) -> list[list[str]]:
    """Every row of a CSV text; a line the csv module cannot split is refused with its
    number (a carriage return inside a field, an unclosed quote)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    out = []
    try:
        for row in reader:
            out.append(row)
    except csv.Error as e:
        raise _bad(source, reader.line_num, f"not CSV: {e}") from None
    return out


def _helios(text: str, source: str, skipped: dict[str, int]) -> list[Raw]:
    rows, _ = _rows(text, source, _HELIOS)
    out: list[Raw] = []
    for ln, r in rows:
        gpus = _number(r["gpu_num"], source, ln, "gpu_num")
        submit = _time(r["submit_time"], source, ln, "submit_time")
        dur = _number(r["duration"], source, ln, "duration")
        if not gpus:
            _skip(skipped, "no GPU")
        elif submit is None or dur is None or dur <= 0:
            _skip(skipped, "no start or end")
        else:
            out.append((r["job_id"].strip(), submit, math.ceil(gpus), dur, ln))
    return out


def _ours(text: str, source: str, skipped: dict[str, int]) -> list[Raw]:
    rows, _ = _rows(text, source, _OURS)
    out: list[Raw] = []
    for ln, r in rows:
        name = r["name"].strip() or f"line{ln}"
        submit = _number(r["submit_s"], source, ln, "submit_s")
        gpus = _number(r["gpus"], source, ln, "gpus")
        dur = _number(r["duration_s"], source, ln, "duration_s")
        if submit is None or gpus is None or dur is None:
            raise _bad(source, ln, "submit_s, gpus and duration_s each need a number")
        if gpus != int(gpus) or gpus < 1:
            raise _bad(source, ln, f"gpus {r['gpus'].strip()!r} must be a whole number >= 1")
        if dur <= 0:
            raise _bad(source, ln, f"duration_s {r['duration_s'].strip()!r} must be > 0")
        out.append((name, submit, int(gpus), dur, ln))
    return out


#: A synthetic day's job sizes (GPUs), their shares and median minutes (lognormal, sigma
#: 1.4, at most 20 h): most jobs take one GPU for minutes, a few of 16-128 GPUs run for
#: hours and hold most of the GPU time (the shape Helios's published summaries give).
SYNTHETIC_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
SYNTHETIC_SHARES = (0.56, 0.08, 0.10, 0.14, 0.05, 0.04, 0.02, 0.01)
SYNTHETIC_MEDIAN_MIN = (4, 6, 10, 20, 60, 90, 120, 180)


def synthetic_day(gpus: int = 512, load: float = 1.1, hours: float = 24.0,
                  seed: int = 2026) -> list[TraceJob]:
    """A synthetic trace (not real data): Poisson arrivals whose rate offers ``load``
    times ``gpus`` in expectation over ``hours``, sizes and durations drawn from
    :data:`SYNTHETIC_SIZES` (seeded: the same jobs every time).

    >>> day = synthetic_day(256, hours=2)
    >>> len(day), day[0].name, min(j.gpus for j in day) >= 1
    (21, 'job00001', True)
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    sigma = 1.4
    mean_gpu_s = sum(s * g * m * 60 * float(np.exp(sigma ** 2 / 2)) for s, g, m in zip(
        SYNTHETIC_SHARES, SYNTHETIC_SIZES, SYNTHETIC_MEDIAN_MIN, strict=True))
    rate = load * gpus / mean_gpu_s  # jobs per second
    t, out = 0.0, list[TraceJob]()
    while True:
        t += float(rng.exponential(1.0 / rate))
        if t >= hours * 3600:
            break
        k = int(rng.choice(len(SYNTHETIC_SIZES), p=SYNTHETIC_SHARES))
        dur = min(float(rng.lognormal(np.log(SYNTHETIC_MEDIAN_MIN[k] * 60), sigma)),
                  20 * 3600.0)
        rng.integers(1, 60)  # a user id (kept so the stream matches the shipped file)
        out.append(TraceJob(f"job{len(out) + 1:05d}", float(round(t)),
                            SYNTHETIC_SIZES[k], float(max(1, round(dur))), len(out) + 2))
    return out
