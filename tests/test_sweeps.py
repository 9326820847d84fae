"""Design-space sweeps (fabricsim.sweeps; fabricsim sweep / results; fabricsim.sweep)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fabricsim.cli.app import main
from fabricsim.errors import ConfigError
from fabricsim.sweeps import SweepSpec, points, read_results, run_sweep

BASE = {"cluster": {"system": "dgx-h100", "nodes": 2},
        "training": {"model": "llama3-8b", "global_batch": 16, "seq_len": 4096,
                     "zero": "fsdp"}}


def _spec(**kw: object) -> SweepSpec:
    return SweepSpec.model_validate({"name": "t", "kind": "train", "scenario": BASE,
                                     "axes": {"training.tp": [1, 2, 8],
                                              "cluster.fabric": ["ib-ndr", "roce-400g"]},
                                     **kw})


def test_grid_resume_and_one_row_per_point(tmp_path: Path) -> None:
    store = tmp_path / "r.duckdb"
    first = run_sweep(_spec(), store, limit=2)
    assert first == {"points": 6, "skipped": 0, "run": 2, "failed": 0, "stopped": 0,
                     "reasons": {}}
    second = run_sweep(_spec(), store, workers=2)
    assert second["skipped"] == 2 and second["run"] == 4
    assert run_sweep(_spec(), store)["run"] == 0
    df = read_results(store)
    assert len(df) == 6 and df["point_key"].is_unique
    assert set(df["in__training__tp"]) == {1, 2, 8}
    assert (df["status"] == "ok").all() and (df["mfu"] > 0).all()
    for col in ("step_time_s", "tokens_per_s_per_gpu", "goodput", "usd_per_million_tokens",
                "compute_s", "tp_s"):
        assert col in df.columns


def test_workers_change_nothing_but_speed(tmp_path: Path) -> None:
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    run_sweep(_spec(), a)
    run_sweep(_spec(), b, workers=2)
    da = read_results(a).sort_values("point_key").reset_index(drop=True)
    db = read_results(b).sort_values("point_key").reset_index(drop=True)
    assert list(da["step_time_s"]) == list(db["step_time_s"])


def test_failed_points_are_kept_with_their_error(tmp_path: Path) -> None:
    spec = _spec(axes={"training.tp": [8], "training.zero": [0, "fsdp"],
                       "training.model": ["llama3-70b"], "cluster.nodes": [4]})
    counts = run_sweep(spec, tmp_path / "r.duckdb")
    assert counts["failed"] == 1 and counts["run"] == 2
    df = read_results(tmp_path / "r.duckdb")
    bad = df[df["status"] == "error"]
    assert len(bad) == 1 and "GiB" in bad["error"].iloc[0]
    assert set(df["in__training__zero"]) == {"0", "fsdp"}   # a mixed axis is text


@pytest.mark.parametrize(("axes", "match"), [
    ({"training.nope": [1]}, "axes"),
    ({"cluster.nodes": [-1]}, "axes.cluster.nodes"),
    ({}, "no axes"),
    ({"training.tp": []}, "no values"),
])
def test_bad_sweeps_name_the_axis(axes: dict[str, list[object]], match: str) -> None:
    with pytest.raises(ConfigError, match=match.split(".")[0]) as e:
        points(_spec(axes=axes))
    assert match in (e.value.field or "") + e.value.message


def test_a_store_of_another_version_is_refused(tmp_path: Path) -> None:
    import duckdb

    store = tmp_path / "old.duckdb"
    db = duckdb.connect(str(store))
    db.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    db.execute("INSERT INTO meta VALUES ('store_version', '0')")
    db.close()
    with pytest.raises(ConfigError, match="format 0"):
        run_sweep(_spec(), store)
    with pytest.raises(ConfigError, match="format"):
        read_results(store)


def test_a_killed_sweep_continues_where_it_stopped(tmp_path: Path) -> None:
    """Kill the CLI mid-sweep (SIGKILL once some points are stored), run it again: every
    point ends up stored exactly once."""
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"name": "k", "kind": "bench",
                                "scenario": {"cluster": {"system": "dgx-h100"},
                                             "collective": {"maxbytes": "64MiB"}},
                                "axes": {"cluster.nodes": list(range(1, 25))}}))
    store = tmp_path / "k.duckdb"
    cmd = [sys.executable, "-c", "from fabricsim.cli.app import run; run()", "sweep",
           str(spec), "--store", str(store), "--json"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if store.exists() and _rows(store) >= 3:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    before = _rows(store)
    assert 0 < before <= 24
    assert main(["sweep", str(spec), "--store", str(store), "--json"]) == 0
    df = read_results(store)
    assert len(df) == 24 and df["point_key"].is_unique


def _rows(store: Path) -> int:
    import duckdb

    try:
        db = duckdb.connect(str(store), read_only=True)
    except duckdb.Error:
        return 0
    try:
        return int(db.execute("SELECT count(*) FROM points").fetchone()[0])  # type: ignore[index]
    except duckdb.Error:
        return 0
    finally:
        db.close()


def test_cli_results_and_bad_input(capsys, tmp_path: Path) -> None:
    spec = Path(__file__).resolve().parents[1] / "examples" / "sweeps" / "tp-pp-70b.yaml"
    store = tmp_path / "r.duckdb"
    assert main(["sweep", str(spec), "--store", str(store), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    # the README's example: a design space every point of which runs
    assert (counts["points"], counts["run"], counts["failed"]) == (16, 16, 0)
    assert counts["reasons"] == {}
    assert main(["results", str(store), "--columns", "in__training__tp,mfu", "--json",
                 "--parquet", str(tmp_path / "r.parquet")]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 16 and set(rows[0]) == {"in__training__tp", "mfu"}
    assert (tmp_path / "r.parquet").stat().st_size > 0
    assert main(["results", str(store), "--columns", "nope"]) == 2
    assert main(["results", str(store), "--columns", " , "]) == 2  # names no column
    assert main(["results", str(store), "--sql", "SELECT * FROM nowhere"]) == 2
    assert main(["sweep", str(spec), "--ray-address", "ray://nowhere:1"]) == 2
    assert main(["results", str(tmp_path / "missing.duckdb")]) == 2


def test_ray_local_mode_gives_the_same_rows(tmp_path: Path) -> None:
    """The Ray path (a local Ray instance, as on a cluster) stores what the pool does."""
    pytest.importorskip("ray")
    local, on_ray = tmp_path / "l.duckdb", tmp_path / "r.duckdb"
    spec = _spec(axes={"training.tp": [1, 8]})
    run_sweep(spec, local)
    counts = run_sweep(spec, on_ray, ray=True, workers=2)
    assert counts["run"] == 2
    a = read_results(local).sort_values("point_key").reset_index(drop=True)
    b = read_results(on_ray).sort_values("point_key").reset_index(drop=True)
    assert list(a["step_time_s"]) == list(b["step_time_s"])


def test_latin_hypercube_covers_every_value_evenly() -> None:
    spec = _spec(mode="lhs", samples=6, axes={"training.tp": [1, 2, 8],
                                              "cluster.nodes": [1, 2]})
    vals = [p.values for p in points(spec)]
    tps = [v["training.tp"] for v in vals]
    assert sorted(set(tps)) == [1, 2, 8]
    assert len(vals) >= 3


def test_fabric_repr_is_one_line() -> None:
    from fabricsim.fabric import build_cluster

    r = repr(build_cluster("dgx-h100", 2))
    assert "\n" not in r and r.startswith("Fabric(dgx-h100 x 2") and "16 GPUs" in r


def test_results_plots(capsys, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    spec = Path(__file__).resolve().parents[1] / "examples" / "sweeps" / "tp-pp-70b.yaml"
    store = tmp_path / "r.duckdb"
    assert main(["sweep", str(spec), "--store", str(store), "--json"]) == 0
    capsys.readouterr()
    hm, pf = tmp_path / "hm.png", tmp_path / "pf.png"
    assert main(["results", str(store), "--heatmap", "in__training__tp,in__training__pp,mfu",
                 "--plot", str(hm), "--json"]) == 0
    assert main(["results", str(store), "--pareto",
                 "usd_per_million_tokens,tokens_per_s_per_gpu", "--plot", str(pf),
                 "--json"]) == 0
    assert hm.stat().st_size > 5000 and pf.stat().st_size > 5000
    assert main(["results", str(store), "--pareto", "mfu"]) == 2
    assert main(["results", str(store), "--pareto", "nope,mfu"]) == 2
    sc = tmp_path / "sc.png"
    assert main(["results", str(store), "--scaling", "in__training__tp,mfu,in__training__pp",
                 "--plot", str(sc), "--json"]) == 0
    assert sc.stat().st_size > 5000
    assert main(["results", str(store), "--scaling", "mfu"]) == 2
    assert main(["results", str(store), "--scaling", "gpus,mfu", "--pareto", "a,b"]) == 2


def test_scaling_curves_a_line_per_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    pd = pytest.importorskip("pandas")
    plt = pytest.importorskip("matplotlib.pyplot")
    from fabricsim.plots.sweep import plot_scaling_curves

    kept: list[object] = []
    monkeypatch.setattr(plt, "close", lambda fig=None, *a, **k: kept.append(fig))
    df = pd.DataFrame({"gpus": [64, 128, 256, 64, 128, 256, 64],
                       "tok": [10.0, 9.0, 8.0, 9.5, 8.0, 6.0, 12.0],
                       "fabric": ["ib", "ib", "ib", "roce", "roce", "roce", "ib"]})
    plot_scaling_curves(df, "gpus", "tok", tmp_path / "s.png", series="fabric")
    ax = kept[-1].axes[0]  # type: ignore[attr-defined]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"ib", "roce"}
    assert list(lines["ib"].get_ydata()) == [11.0, 9.0, 8.0]  # the mean where X repeats
    assert ax.get_xscale() == "log" and ax.get_title() and ax.get_xlabel() == "gpus"


def test_pareto_front_is_the_undominated_rows() -> None:
    import pandas as pd

    from fabricsim.plots.sweep import pareto_front

    df = pd.DataFrame({"cost": [1.0, 2.0, 2.0, 3.0, 4.0], "speed": [1.0, 3.0, 2.0, 3.0, 5.0]})
    front = pareto_front(df, "cost", "speed")
    assert list(front.index) == [0, 1, 4]   # (3, 3) is beaten by (2, 3); (2, 2) by (2, 3)


def test_shared_fabrics_give_the_same_figures() -> None:
    from fabricsim.sweeps import FabricCache, run_point

    pts = points(_spec())
    cache = FabricCache()
    shared = [run_point("train", p.scenario, cache) for p in pts]
    assert shared == [run_point("train", p.scenario) for p in pts]


def test_tasks_hold_every_point_once_grouped_by_cluster() -> None:
    from fabricsim.sweeps import chunks, fabric_key

    pts = points(_spec(axes={"training.tp": [1, 2, 4, 8],
                             "cluster.fabric": ["ib-ndr", "roce-400g"],
                             "cluster.nodes": [1, 2]}))
    tasks = chunks(pts, 2)
    flat = [p.key for c in tasks for p in c]
    assert sorted(flat) == sorted(p.key for p in pts) and len(tasks) > 2
    keys = [fabric_key(p.scenario) for c in tasks for p in c]
    assert keys == sorted(keys)   # points of one cluster run one after another
    assert all(len({fabric_key(p.scenario) for p in c}) == 1 for c in tasks)


def test_an_internal_error_is_stored_and_the_sweep_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fabricsim.sweeps as sweeps

    real = sweeps._figures

    def flaky(kind: str, sc: Any, fabrics: object) -> dict[str, object]:
        if sc.training.tp == 2:
            raise ZeroDivisionError("a bug")
        return real(kind, sc, fabrics)  # type: ignore[arg-type]

    monkeypatch.setattr(sweeps, "_figures", flaky)
    counts = run_sweep(_spec(), tmp_path / "r.duckdb")
    reasons = counts.pop("reasons")
    assert counts == {"points": 6, "skipped": 0, "run": 6, "failed": 2, "stopped": 0}
    assert list(reasons.values()) == [2] and "ZeroDivisionError" in next(iter(reasons))
    df = read_results(tmp_path / "r.duckdb")
    bad = df[df["status"] == "error"]
    assert set(bad["in__training__tp"]) == {2}
    assert (bad["error"] == "internal error (ZeroDivisionError: a bug)").all()
    assert df[df["status"] == "ok"]["mfu"].notna().all()


def test_stores_that_are_not_ours_are_refused(tmp_path: Path) -> None:
    import duckdb

    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n" * 100)
    with pytest.raises(ConfigError, match="cannot open") as e:
        run_sweep(_spec(), text)
    assert e.value.field == "--store"
    with pytest.raises(ConfigError, match="cannot open"):
        read_results(text)
    other = tmp_path / "other.duckdb"
    db = duckdb.connect(str(other))
    db.execute("CREATE TABLE sales (x INTEGER)")
    db.close()
    with pytest.raises(ConfigError, match="not a fabricsim results store"):
        run_sweep(_spec(), other)
    with pytest.raises(ConfigError, match="not a fabricsim results store"):
        read_results(other)


def test_an_empty_store_reads_as_no_rows(tmp_path: Path) -> None:
    store = tmp_path / "r.duckdb"
    assert run_sweep(_spec(), store, limit=0)["run"] == 0
    assert len(read_results(store)) == 0


@pytest.mark.parametrize(("spec", "field"), [
    ({"axis": {"training.tp": [1]}}, "axis"),                # a typo is not ignored
    ({"axes": {"training.tp": [1]}, "samples": 0}, "samples"),
    ({"axes": {"training.tp": [1]}, "mode": "sobol"}, "mode"),
    (["training.tp"], "spec"),
])
def test_python_sweep_bad_specs_name_the_field(tmp_path: Path, spec: object,
                                               field: str) -> None:
    import fabricsim

    with pytest.raises(ConfigError) as e:
        fabricsim.sweep(spec, store=tmp_path / "r.duckdb")
    assert e.value.field == field


def test_cli_sweep_bad_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    for name, text in (("list.yaml", "- a\n- b\n"), ("typo.yaml", "axis: {training.tp: [1]}\n"),
                       ("bad.yaml", "axes: [\n")):
        (tmp_path / name).write_text(text)
        assert main(["sweep", str(tmp_path / name), "--store",
                     str(tmp_path / "r.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "mapping" in err and "axis" in err and "YAML" in err
    assert "Traceback" not in err


def test_points_carry_the_scenario_full_validation_gives() -> None:
    from fabricsim.scenario.schema import Scenario

    pts = points(_spec(axes={"training.tp": [1, 2], "training.seq_len": [2048, 4096],
                             "cluster.fabric": ["ib-ndr", "roce-400g"]}))
    assert len(pts) == 8
    for p in pts:
        assert p.model == Scenario.model_validate(p.scenario)
    with pytest.raises(ConfigError) as e:
        points(_spec(axes={"training": ["not a section"]}))
    assert e.value.field == "axes.training"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_time_limit_stops_cleanly_and_the_next_run_goes_on(tmp_path: Path,
                                                             workers: int) -> None:
    store = tmp_path / "r.duckdb"
    first = run_sweep(_spec(), store, workers=workers, time_limit_s=1e-9)
    assert first["stopped"] == 1 and 1 <= first["run"] < 6
    assert len(read_results(store)) == first["run"]   # what was done is kept
    second = run_sweep(_spec(), store, workers=workers)
    assert second["skipped"] == first["run"] and second["stopped"] == 0
    assert second["run"] == 6 - first["run"]
    df = read_results(store)
    assert len(df) == 6 and df["point_key"].is_unique


def test_sweep_time_limit_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    spec = Path(__file__).resolve().parents[1] / "examples" / "sweeps" / "tp-pp-70b.yaml"
    store = tmp_path / "r.duckdb"
    assert main(["sweep", str(spec), "--store", str(store), "--time-limit", "0"]) == 2
    assert main(["sweep", str(spec), "--store", str(store), "--time-limit", "1e-9",
                 "--quiet"]) == 0
    assert "run the same command again to go on" in capsys.readouterr().out


@pytest.mark.parametrize(("kind", "axes", "base", "field"), [
    ("bench", {"training.tp": [1, 2]}, {"collective": {"collective": "all_reduce"}},
     "axes.training.tp"),
    ("train", {"collective.maxbytes": ["1MB", "2MB"]}, {}, "axes.collective.maxbytes"),
    ("train", {"packet.mtu": [1024, 4096]}, {}, "axes.packet.mtu"),
    ("bench", {"cluster.nodes": [1, 2]}, {}, "collective"),
])
def test_axes_a_kind_does_not_read_are_refused(kind: str, axes: dict[str, list[object]],
                                               base: dict[str, object], field: str) -> None:
    """An axis that cannot change what a sweep computes would give identical points;
    a bench sweep without a collective would fail at every point. Both are refused
    before anything runs."""
    spec = SweepSpec.model_validate({"kind": kind, "axes": axes, "scenario": {
        "cluster": {"system": "dgx-h100", "nodes": 2},
        "training": {"model": "llama3-8b", "global_batch": 16}, **base}})
    with pytest.raises(ConfigError) as e:
        points(spec)
    assert e.value.field == field


def test_failed_points_say_why_in_the_summary(capsys, tmp_path: Path) -> None:
    """A point that fails is kept with its reason, and the sweep's summary names each
    reason with the number of points it stopped (it used to say only '(12 failed)')."""
    spec = tmp_path / "s.yaml"
    spec.write_text("kind: train\nscenario:\n  cluster: {system: dgx-h100, nodes: 4}\n"
                    "  training: {model: llama3-70b, global_batch: 64, seq_len: 4096}\n"
                    "axes:\n  training.tp: [2, 8]\n  training.pp: [1, 4]\n")
    assert main(["sweep", str(spec), "--store", str(tmp_path / "r.duckdb")]) == 0
    out = capsys.readouterr().out
    assert "4 points: 4 run now (2 failed)" in out
    assert " ".join(out.split()).count("1 point failed: training: llama3-70b needs") == 2
    assert main(["sweep", str(spec), "--store", str(tmp_path / "j.duckdb"), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert sum(counts["reasons"].values()) == counts["failed"] == 2


def test_a_results_query_is_read_only_and_bounded(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 40: --sql ran any statement (COPY ... TO wrote files, read_text read any) and
    a 300-million-row query filled memory."""
    import fabricsim.sweeps as sw

    store = tmp_path / "r.duckdb"
    run_sweep(_spec(), store, limit=2)
    assert len(read_results(store, "SELECT * FROM points WHERE status = 'ok';")) == 2
    out = tmp_path / "leak.csv"
    for sql, words in ((f"COPY points TO '{out}'", "one read-only query"),
                       ("SELECT * FROM read_text('/etc/hostname')", "may not read or write"),
                       ("ATTACH 'x.duckdb' AS x", "one read-only query"),
                       ("SELECT 1; SELECT 2", "one read-only query")):
        with pytest.raises(ConfigError, match=words) as e:
            read_results(store, sql)
        assert e.value.field == "--sql"
    assert not out.exists()
    monkeypatch.setattr(sw, "MAX_QUERY_ROWS", 1000)
    with pytest.raises(ConfigError, match="more than 1,000 rows"):
        read_results(store, "SELECT * FROM range(300000000)")


def test_an_nccl_variable_is_an_axis_of_a_bench_sweep(tmp_path: Path) -> None:
    """collective.env.<NAME> sweeps one of NCCL's variables as the shell sets it for
    bench: the ring all-gather on one DGX H100 at 1 GiB on 2, 4 and 16 of NCCL's 16
    channels, each row what `NCCL_MAX_NCHANNELS=n fabricsim bench` gives; a value NCCL
    refuses names the axis."""
    from fabricsim import jobs
    from fabricsim.collectives.nccl_env import nccl_env
    from fabricsim.scenario import load_scenario_text

    base = {"cluster": {"system": "dgx-h100", "nodes": 1},
            "collective": {"collective": "all_gather", "minbytes": "1G", "maxbytes": "1G"}}
    spec = SweepSpec.model_validate({"name": "ch", "kind": "bench", "scenario": base,
                                     "axes": {"collective.env.NCCL_MAX_NCHANNELS":
                                              [2, 4, 16]}})
    assert run_sweep(spec, tmp_path / "r.duckdb")["run"] == 3
    df = read_results(tmp_path / "r.duckdb")
    axis = df["in__collective__env__NCCL_MAX_NCHANNELS"].astype(int)
    busbw = list(df.assign(n=axis).sort_values("n")["busbw_gbps"])
    assert sorted(axis) == [2, 4, 16]
    sc = load_scenario_text(json.dumps(base))
    for n, got in zip((2, 4, 16), busbw, strict=True):
        job = jobs.job_from_scenario("bench", sc, env=nccl_env({"NCCL_MAX_NCHANNELS": str(n)}))
        assert got == pytest.approx(jobs.run(job).rows[None][0].busbw_gbps, rel=1e-9)
    assert busbw[0] < busbw[1] < busbw[2]
    with pytest.raises(ConfigError, match="NCCL_MAX_NCHANNELS") as e:
        points(spec.model_copy(update={"axes": {"collective.env.NCCL_MAX_NCHANNELS": [0]}}))
    assert "axes" in (e.value.field or "")


def test_a_point_runs_on_the_cluster_its_job_adds_to(tmp_path: Path) -> None:
    """A bench job puts the section's NCCL_IB_QPS_PER_CONNECTION into its cluster: the
    sweep's shared fabrics are built from the job's cluster, so points of 4, 1 and 4
    queue pairs on the shipped bench-roce-qps each give what bench gives (the second 4
    is not handed the fabric of 1 queue pair, nor the reverse)."""
    from fabricsim import jobs
    from fabricsim.collectives.nccl_env import nccl_env
    from fabricsim.scenario.loader import load_scenario
    from fabricsim.sweeps import FabricCache, run_point

    base = {"cluster": {"system": "dgx-h100", "nodes": 16, "fabric": "roce-400g",
                        "topology": "fat-tree"},
            "collective": {"minbytes": "4G", "maxbytes": "4G"}}
    cache = FabricCache()
    got = [run_point("bench", {**base, "collective": {
        **base["collective"], "env": {"NCCL_IB_QPS_PER_CONNECTION": q}}}, cache)["busbw_gbps"]
        for q in (4, 1, 4)]
    sc = load_scenario("bench-roce-qps")
    want = {q: jobs.run(jobs.job_from_scenario(
        "bench", sc, sizes=(4 * 2**30,),
        env=nccl_env({"NCCL_IB_QPS_PER_CONNECTION": str(q)}))).rows[None][0].busbw_gbps
        for q in (4, 1)}
    assert got == pytest.approx([want[4], want[1], want[4]], rel=1e-9)
    assert want[4] > 1.2 * want[1]


@pytest.mark.parametrize("kind", ["train", "packet"])
def test_an_nccl_variable_axis_is_refused_where_the_kind_does_not_read_it(kind: str
                                                                         ) -> None:
    """Only bench and simulate read collective.env: a train or packet sweep over one
    would store points that cannot differ."""
    spec = SweepSpec.model_validate({"name": "x", "kind": kind, "scenario": BASE,
                                     "axes": {"collective.env.NCCL_ALGO": ["Ring", "Tree"]}})
    with pytest.raises(ConfigError, match=r"does not read collective\.env") as e:
        points(spec)
    assert e.value.field == "axes.collective.env.NCCL_ALGO"
