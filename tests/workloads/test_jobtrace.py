"""Job traces read from Philly, PAI, Helios and our own CSV: GPUs, submission and
duration as each format defines them, the format told from the text, what is skipped
counted, and a line that cannot be read refused with its number."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricsim.errors import ConfigError
from fabricsim.workloads.jobtrace import detect_format, parse_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_philly_gpus_of_the_first_attempt_time_to_the_last() -> None:
    jobs, skipped = parse_trace(_read("philly.json"))
    assert [(j.gpus, j.submit_s, j.duration_s) for j in jobs] == [
        (16, 0.0, 3600.0),  # two servers of 8
        (1, 300.0, 1200.0),  # first attempt's start to the last attempt's end
    ]
    assert jobs[0].name == "application_1506638472019_10238" and jobs[1].line == 2
    assert skipped == {"never started": 1, "no start or end": 1}


def test_pai_sums_instances_times_the_gpu_percentage() -> None:
    jobs, skipped = parse_trace(_read("pai_task_table.csv"))
    assert [(j.name[:4], j.gpus, j.submit_s, j.duration_s) for j in jobs] == [
        ("4f05", 3, 0.0, 3600.0),  # 1 × 50 % + 2 × 100 % = 2.5, rounded up
        ("6aec", 8, 126.0, 7400.0),
    ]
    assert skipped == {"no GPU": 1, "no start or end": 1}


def test_helios_and_our_csv() -> None:
    jobs, skipped = parse_trace(_read("helios.csv"))
    assert [(j.name, j.gpus, j.submit_s, j.duration_s, j.line) for j in jobs] == [
        ("j1", 16, 0.0, 3600.0, 2), ("j3", 1, 120.0, 300.0, 4)]
    assert skipped == {"no GPU": 1}  # a CPU-only job
    ours, none = parse_trace("name,submit_s,gpus,duration_s\nb,50,8,10\na,0,1,5\n")
    assert [j.name for j in ours] == ["a", "b"] and none == {}  # sorted by submission


@pytest.mark.parametrize(("name", "fmt"), [
    ("philly.json", "philly"), ("pai_task_table.csv", "pai"), ("helios.csv", "helios")])
def test_the_format_is_told_from_the_text(name: str, fmt: str) -> None:
    assert detect_format(_read(name)) == fmt
    assert parse_trace(_read(name)) == parse_trace(_read(name), fmt)


@pytest.mark.parametrize(("text", "fmt", "words"), [
    ("a;b;c\n1;2;3\n", None, "cannot tell the format"),
    ("name,submit_s,gpus,duration_s\na,0,8,60\nb,x,8,60\n", None, "line 3: submit_s 'x'"),
    ("name,submit_s,gpus,duration_s\na,0,8\n", None, "line 2: 3 fields"),
    ("name,submit_s,gpus,duration_s\na,0,2.5,60\n", None, "line 2: gpus '2.5'"),
    ("name,submit_s,gpus,duration_s\na,0,8,0\n", None, "line 2: duration_s '0'"),
    ("name,submit_s,gpus,duration_s\na,-5,8,60\n", None, "line 2: submit_s '-5'"),
    ("job_id,gpu_num,submit_time,duration\nj,8,yesterday,60\n", None,
     "line 2: submit_time 'yesterday' is not a time"),
    ("[1, 2]", None, "job 1: not a Philly job"),
    ("[{\"submitted_time\": ", "philly", "line 1: not JSON"),
    ("a,b,c\n", "pai", "line 1: 3 fields; PAI's task table has 10"),
    ("name,submit_s,gpus,duration_s\n", None, "no job with GPUs"),
    ("x", "slurm", "unknown trace format 'slurm'"),
])
def test_bad_traces_are_refused_naming_the_line(text: str, fmt: str | None,
                                                words: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_trace(text, fmt, source="t.csv")
    assert words in str(e.value), str(e.value)
    assert e.value.field in ("trace.file", "trace.format")


# --- hostile text: whatever a file holds, the reader answers or refuses by name --------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis_budget import examples  # noqa: E402

_HEADERS = ("name,submit_s,gpus,duration_s",
            "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
            "duration,queue", "")
_CELL = st.one_of(st.integers(-5, 10**6).map(str), st.floats(allow_nan=True).map(str),
                  st.text(max_size=8), st.just("None"), st.just("2020-04-01 00:00:03"))


@settings(max_examples=examples(60), deadline=None)
@given(header=st.sampled_from(_HEADERS),
       rows=st.lists(st.lists(_CELL, min_size=0, max_size=12), max_size=6),
       fmt=st.sampled_from([None, "csv", "helios", "pai", "philly"]))
def test_any_table_is_read_or_refused_by_name(header: str, rows: list[list[str]],
                                              fmt: str | None) -> None:
    text = "\n".join([header, *(",".join(r) for r in rows)])
    try:
        jobs, skipped = parse_trace(text, fmt, source="t")
    except ConfigError as e:
        assert e.field in ("trace.file", "trace.format")
        return
    for j in jobs:
        assert j.gpus >= 1 and j.duration_s > 0 and j.submit_s >= 0
    assert all(n > 0 for n in skipped.values())


@settings(max_examples=examples(40), deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6)),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.sampled_from(
                                                ["jobid", "submitted_time", "attempts",
                                                 "start_time", "end_time", "detail",
                                                 "gpus"]), inner, max_size=4)),
                    max_leaves=12))
def test_any_json_is_read_or_refused_by_name(value: object) -> None:
    import json

    try:
        jobs, _ = parse_trace(json.dumps([value]), "philly", source="t")
    except ConfigError as e:
        assert e.field in ("trace.file", "trace.format")
        return
    assert all(j.gpus >= 1 and j.duration_s >= 0 for j in jobs)
