"""``fabricsim cluster``: many jobs on one fabric from a scenario's jobs: list; the JSON
every face gives, placements compared, and bad input refused naming the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricsim import jobs
from fabricsim.cli.app import main
from fabricsim.scenario import load_scenario_text

ROOT = Path(__file__).resolve().parents[2]
TWO = """
cluster: {system: dgx-h100, nodes: 8, fabric: roce-400g, topology: fat-tree,
          oversubscription: 2}
placement: spread
jobs:
  - {name: a, gpus: 16, training: {model: llama2-7b, tp: 1, global_batch: 64, seq_len: 2048}}
  - {name: b, gpus: 16, training: {model: llama2-7b, tp: 1, global_batch: 64, seq_len: 2048}}
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_json_is_the_job_and_compares_placements(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    sc = _write(tmp_path, TWO)
    assert main(["cluster", str(sc), "--placements", "packed,random", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [p["placement"] for p in d["placements"]] == ["packed", "random"]
    first = d["placements"][0]
    assert [j["job"] for j in first["jobs"]] == ["a", "b"]
    for j in first["jobs"]:
        assert j["step_shared_s"] >= j["step_alone_s"] > 0
        assert j["slowdown"] == pytest.approx(j["step_shared_s"] / j["step_alone_s"])
    assert first["hosts"] == {"a": [0, 1], "b": [2, 3]}
    png = tmp_path / "c.png"
    assert main(["cluster", str(sc), "--placements", "packed", "--plot", str(png),
                 "--quiet"]) == 0
    assert png.stat().st_size > 1000
    assert main(["cluster", str(sc), "--plot", str(tmp_path)]) == 2  # a folder: refused
    capsys.readouterr()
    # one answer whichever face asks: the CLI's JSON is the job's report
    job = jobs.job_from_scenario("cluster", load_scenario_text(TWO),
                                 placements=("packed", "random"))
    assert json.loads(json.dumps(jobs.run(job).to_dict())) == d


def test_the_shipped_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    ex = ROOT / "examples" / "clusters" / "four-jobs.yaml"
    assert main(["cluster", str(ex), "--placements", "packed", "--quiet"]) == 0
    assert main(["cluster", str(ex), "--placements", "packed"]) == 0
    out = capsys.readouterr().out
    assert "pretrain-70b" in out and "placement packed" in out


@pytest.mark.parametrize(("extra", "words"), [
    ("  - {name: c, gpus: 128, training: {model: llama2-7b}}\n", "jobs.c.gpus"),
    ("  - {name: a, gpus: 8, training: {model: llama2-7b}}\n", "two jobs are named 'a'"),
    ("  - {name: c, gpus: 16, hosts: [0, 1], training: {model: llama2-7b}}\n"
     "  - {name: d, gpus: 16, hosts: [1, 2], training: {model: llama2-7b}}\n",
     "hosts [1] are already taken by 'c'"),
    ("  - {name: c, gpus: 12, training: {model: llama2-7b}}\n", "multiple of 8"),
    ("  - {name: c, gpus: 8, training: {model: llama2-7b, backend: flow}}\n",
     "jobs.c.training.backend"),
    ("  - {name: c, gpus: 8, training: {model: llama3-405b, tp: 8}}\n",
     "jobs.c.training: job 'c': llama3-405b needs"),
])
def test_bad_jobs_exit_2_naming_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        extra: str, words: str) -> None:
    text = TWO.replace("placement: spread", "placement: packed") + extra
    path = _write(tmp_path, text)
    for cmd in ("cluster", "validate"):  # validate refuses what cluster would
        assert main([cmd, str(path)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err


def test_no_jobs_or_a_bad_policy_are_refused(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    plain = _write(tmp_path, "cluster: {system: dgx-h100, nodes: 2}\n")
    assert main(["cluster", str(plain)]) == 2
    assert "jobs:" in capsys.readouterr().err
    sc = _write(tmp_path, TWO)
    assert main(["cluster", str(sc), "--placements", "packed,compact"]) == 2
    err = capsys.readouterr().err
    assert "compact" in err and "packed" in err


def test_the_documented_scenario_is_valid() -> None:
    text = (ROOT / "docs" / "cluster.md").read_text(encoding="utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    job = jobs.job_from_scenario("cluster", load_scenario_text(block))
    assert [j.name for j in job.jobs] == ["pretrain-70b", "finetune-8b"]
    assert job.jobs[1].hosts == tuple(range(40, 48)) and job.placements == ("spread",)


def test_the_placement_sweep_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    """Sweeps run the cluster kind: on InfiniBand's destination-balanced tables spreading
    the jobs costs nothing; on RoCE's hashed ECMP it does, and packing does not."""
    from fabricsim.sweeps import read_results

    store = tmp_path / "p.duckdb"
    ex = ROOT / "examples" / "sweeps" / "cluster-placement.yaml"
    assert main(["sweep", str(ex), "--store", str(store), "--quiet"]) == 0
    df = read_results(store)
    got = {(r["in__placement"], r["in__cluster__fabric"]): r["mean_slowdown"]
           for _, r in df.iterrows()}
    assert len(got) == 6 and all(v >= 1.0 for v in got.values())
    assert got[("packed", "roce-400g")] == got[("spread", "ib-ndr")] == 1.0
    assert got[("spread", "roce-400g")] > 1.005


def test_the_scheduler_sweep_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep replays the trace per point: the first 8 hours here. On InfiniBand's
    destination-balanced tables neither scheduler loses GPU-hours to interference; on
    RoCE's hashed ECMP the topology-blind one does, and each row's figures are the
    replay's summary."""
    from fabricsim.sweeps import read_results

    ex = (ROOT / "examples" / "sweeps" / "trace-schedulers.yaml").read_text(encoding="utf-8")
    short = tmp_path / "s.yaml"
    short.write_text(ex.replace("hours: 24", "hours: 8"), encoding="utf-8")
    monkeypatch.chdir(ROOT)  # the trace's path is relative to the repository
    store = tmp_path / "s.duckdb"
    assert main(["sweep", str(short), "--store", str(store), "--quiet"]) == 0
    df = read_results(store)
    got = {(r["in__trace__scheduler"], r["in__cluster__fabric"]): r
           for _, r in df.iterrows()}
    assert len(got) == 4 and all(r["status"] == "ok" for r in got.values())
    assert got[("fifo", "ib-ndr")]["interference_gpu_hours"] == 0.0
    assert got[("fifo", "roce-400g")]["interference_gpu_hours"] > \
        got[("topology", "roce-400g")]["interference_gpu_hours"]
    capsys.readouterr()


def test_failed_servers_from_flags_or_the_scenario(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    sc = _write(tmp_path, TWO.replace("placement: spread", "placement: packed"))
    assert main(["cluster", str(sc), "--fail-servers", "0-1", "--repair-hours", "8",
                 "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["placements"][0]["failure"]
    assert f["servers"] == [0, 1] and f["repair_hours"] == 8.0
    assert [j["job"] for j in f["jobs"]] == ["a"]
    assert f["jobs"][0]["repair_s"] == 8 * 3600.0
    # the same from the scenario's failure: section
    text = TWO.replace("placement: spread", "placement: packed") + \
        "failure: {servers: [0, 1], repair_hours: 8}\n"
    assert main(["cluster", str(_write(tmp_path, text)), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["placements"][0]["failure"] == f
    assert main(["cluster", str(sc), "--fail-servers", "0-1"]) == 0
    assert "wait for repair" in capsys.readouterr().out


def test_a_compute_tray_fails_alone(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Four GPUs of one NVL72 rack fail (a compute tray): one replica of the 4,032-GPU
    job is hit, not nine; a spare costs the same as for a rack, shrinking far less."""
    ex = ROOT / "examples" / "clusters" / "rack-failure.yaml"
    assert main(["cluster", str(ex), "--fail-gpus", "288-291", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["placements"][0]["failure"]
    assert (f["servers"], f["gpus"]) == ([], [288, 289, 290, 291])
    (j,) = f["jobs"]
    assert (j["gpus_lost"], j["servers_lost"], j["replicas_lost"]) == (4, 1, 1)
    gh = j["gpu_hours_lost"]
    assert gh["with_spares"] < gh["shrink"] < gh["wait"]
    text = ex.read_text(encoding="utf-8").replace("failure: {servers: [3], repair_hours: 4}",
                                                  "failure: {gpus: [288, 289, 290, 291]}")
    assert main(["cluster", str(_write(tmp_path, text)), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["placements"][0]["failure"] == f
    for bad, words in (("failure: {repair_hours: 4}", "name the servers"),
                       ("failure: {gpus: [5000]}", "failure.gpus")):
        code = main(["cluster", str(_write(tmp_path, text.replace(
            "failure: {gpus: [288, 289, 290, 291]}", bad))), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and words in err and "Traceback" not in err, err


def test_a_rack_fails_under_a_4k_gpu_job(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped example: one GB200 NVL72 rack (a server of that cluster) of a
    4,032-GPU job fails; a spare loses least, shrinking beats waiting, and goodput over a
    failure trace orders the same way."""
    ex = ROOT / "examples" / "clusters" / "rack-failure.yaml"
    assert main(["cluster", str(ex), "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["placements"][0]["failure"]
    (j,) = f["jobs"]  # the fine-tune runs on other racks
    assert (j["job"], j["gpus"], j["servers_lost"]) == ("pretrain-405b", 4032, 1)
    assert j["replicas_lost"] == 9  # a 72-GPU rack holds slices of 9 of the 63 replicas
    gh, g = j["gpu_hours_lost"], j["goodput"]
    assert gh["with_spares"] < gh["shrink"] < gh["wait"]
    assert g["wait"] < g["shrink"] < g["with_spares"] < 1.0
    assert j["best_without_spares"] == "shrink"


@pytest.mark.parametrize(("flag", "words"), [
    ("3-1", "--fail-servers"), ("a,b", "--fail-servers"), ("99", "failure.servers"),
])
def test_bad_failed_servers_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   flag: str, words: str) -> None:
    assert main(["cluster", str(_write(tmp_path, TWO)), "--fail-servers", flag]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_the_trace_example_compares_schedulers(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A synthetic day on 64 DGX H100 over RoCE: the topology-aware scheduler keeps jobs
    under one leaf group, so far fewer GPU-hours go to interference than first-in
    first-out on the lowest free servers, and fewer jobs are left queued."""
    ex = ROOT / "examples" / "clusters" / "trace-day.yaml"
    png = tmp_path / "replay.png"
    assert main(["cluster", str(ex), "--schedulers", "fifo,topology", "--json",
                 "--plot", str(png)]) == 0
    d = json.loads(capsys.readouterr().out)
    tr = d["trace"]
    assert (tr["source"], tr["format"], tr["model"]) == ("synthetic-day.csv", "helios",
                                                         "llama3-8b")
    fifo, topo = tr["replays"]
    assert (fifo["scheduler"], topo["scheduler"]) == ("fifo", "topology")
    assert fifo["jobs"] == topo["jobs"] == tr["jobs"] == len(fifo["job_list"])
    assert topo["interference_gpu_hours"] < 0.2 * fifo["interference_gpu_hours"]
    assert topo["queued_at_end"] <= fifo["queued_at_end"]
    assert 0.5 < fifo["utilisation"] < 0.9
    assert png.stat().st_size > 1000
    # the same answer from the job layer, as a script or the web's worker would get it
    sc = load_scenario_text(ex.read_text(encoding="utf-8"))
    job = jobs.job_from_scenario("cluster", sc, schedulers=("fifo", "topology"),
                                 base_dir=ex.parent)
    assert json.loads(json.dumps(jobs.run(job).to_dict())) == d
    assert main(["cluster", str(ex)]) == 0
    out = capsys.readouterr().out
    assert "synthetic-day.csv (helios)" in out and "fragmented" in out


TRACE = """
cluster: {system: dgx-h100, nodes: 8}
trace: {file: t.csv}
"""


@pytest.mark.parametrize(("csv", "extra", "flags", "words"), [
    ("a;b\n", "", (), "trace.format"),
    ("name,submit_s,gpus,duration_s\na,0,8,60\nb,x,8,60\n", "", (), "t.csv line 3"),
    ("name,submit_s,gpus,duration_s\na,0,128,60\n", "", (),
     "t.csv line 2 (job 'a') needs 128 GPUs; the cluster has 64"),
    ("name,submit_s,gpus,duration_s\na,0,8,60\n", "failure: {servers: [0]}\n", (),
     "failure"),
    ("name,submit_s,gpus,duration_s\na,0,8,60\n", "", ("--schedulers", "sjf"),
     "unknown scheduler 'sjf'"),
    ("name,submit_s,gpus,duration_s\na,0,16,60\n",
     "", (), None),
    ("name,submit_s,gpus,duration_s\na,0,16,60\n",
     "", ("--placements", "packed"), "drop placement"),  # the scheduler places
])
def test_bad_traces_exit_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           csv: str, extra: str, flags: tuple[str, ...],
                                           words: str | None) -> None:
    (tmp_path / "t.csv").write_text(csv, encoding="utf-8")
    sc = _write(tmp_path, TRACE + extra)
    code = main(["cluster", str(sc), "--quiet", *flags])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if words is None:
        assert code == 0, err
    else:
        assert code == 2 and words in err, err


def test_trace_refusals_outside_the_file(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.csv").write_text("name,submit_s,gpus,duration_s\na,0,16,60\n",
                                    encoding="utf-8")
    cases = [
        (TRACE.replace("t.csv", "missing.csv"), (), "trace file 'missing.csv' does not"),
        (TRACE.replace("{file: t.csv}", "{file: t.csv, training: {model: llama3-70b, "
                       "tp: 8, global_batch: 64}}"), (), "trace.training.global_batch"),
        (TRACE.replace("{file: t.csv}", "{file: t.csv, training: {model: llama3-405b, "
                       "tp: 8}}"), (), "t.csv line 2 (job 'a', 16 GPUs)"),
        (TRACE.replace("{file: t.csv}", "{file: t.csv, start_hours: 5}"), (),
         "no job is submitted in the window"),
        (TWO, ("--schedulers", "fifo"), "no trace: section"),
        (TRACE.replace("{file: t.csv}", "{hours: 4}"), (), "give the trace's file, or"),
        (TRACE.replace("{file: t.csv}", "{file: t.csv, synthetic: {load: 1}}"), (),
         "one of the two"),
        (TRACE.replace("{file: t.csv}", "{synthetic: {load: 0.01}, hours: 0.01}"), (),
         "it has no job at all"),
        (TRACE.replace("{file: t.csv}", "{synthetic: {load: 1}, format: helios}"), (),
         "drop format"),
        (TRACE + "placement: spread\n", (), "drop placement"),
        (TRACE, ("--placements", "spread"), "drop placement"),
    ]
    for text, flags, words in cases:
        code = main(["cluster", str(_write(tmp_path, text)), "--quiet", *flags])
        err = capsys.readouterr().err
        assert code == 2 and words in err and "Traceback" not in err, (words, err)


def test_the_web_refuses_a_trace_file() -> None:
    from fabricsim.errors import ConfigError
    from fabricsim.web.jobs import Limits, parse_design

    with pytest.raises(ConfigError) as e:
        parse_design(TRACE, "cluster", Limits())
    assert e.value.field == "trace.file" and "fabricsim cluster" in str(e.value)


def test_links_failing_under_the_jobs(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Leaf uplinks down or degraded under running jobs: hashed ECMP moves their flows to
    the other uplinks; jobs whose traffic climbs to the spine slow down, the others do
    not, and each job's lost GPU-hours per hour of the fault follow from its steps."""
    text = TWO + ("faults:\n  - {type: link_down, kind: leaf-spine, index: 0}\n"
                  "  - {type: link_degraded, kind: leaf-spine, index: 1, factor: 0.25}\n")
    assert main(["cluster", str(_write(tmp_path, text)), "--placements",
                 "packed,spread", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for p in d["placements"]:
        f = p["faults"]
        assert len(f["faults"]) == 2 and "down" in f["faults"][0]
        for j, share in zip(f["jobs"], p["jobs"], strict=True):
            assert j["step_healthy_s"] == share["step_shared_s"]
            assert j["gpu_hours_lost_per_hour"] == pytest.approx(
                j["gpus"] * (1 - j["step_healthy_s"] / j["step_faulted_s"]))
    spread = d["placements"][1]["faults"]["jobs"]
    assert max(j["slowdown"] for j in spread) > 1.01  # their traffic crosses the spine
    assert main(["cluster", str(_write(tmp_path, text))]) == 0
    assert "step faulted" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "words"), [
    ("faults:\n  - {type: slow_gpu, gpu: 1, delay: 5us}\n", "faults[0].type"),
    ("faults:\n  - {type: link_down, kind: nic-leaf, index: 0}\n",
     "failure: {servers: [0]}"),
    ("background:\n  - {name: s, pattern: incast, nbytes: 1GiB}\n", "background"),
])
def test_faults_a_cluster_cannot_run_are_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 extra: str, words: str) -> None:
    assert main(["cluster", str(_write(tmp_path, TWO + extra)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err


LOOP = """
cluster: {system: dgx-h100, nodes: 64, fabric: roce-400g}
jobs:
  - name: moe
    gpus: 128
    training: {model: mixtral-8x7b, tp: 2, ep: 8, global_batch: 256, seq_len: 4096}
  - name: burn-in
    gpus: 128
    collective: {collective: alltoall, size: 1GiB, gap: 1ms}
"""


def test_a_collective_loop_beside_a_training_job(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An all-to-all burn-in run back to back (1 ms apart) beside a MoE job: packed, each
    under its own leaf group, nothing; dealt over both groups, their traffic meets on the
    spine and the MoE job names the burn-in as what slows it. The loop's step is one
    collective and the gap."""
    assert main(["cluster", str(_write(tmp_path, LOOP)), "--placements", "packed,spread",
                 "--json"]) == 0
    packed, spread = json.loads(capsys.readouterr().out)["placements"]
    assert [j["slowdown"] for j in packed["jobs"]] == [1.0, 1.0]
    moe, loop = spread["jobs"]
    assert moe["slowdown"] > 1.02 and [c["job"] for c in moe["culprits"]] == ["burn-in"]
    assert loop["model"] == "alltoall 1 GiB" and loop["step_alone_s"] > 1e-3
    from fabricsim.collectives import predict_time
    from fabricsim.fabric import build_cluster

    own = predict_time(build_cluster("dgx-h100", 16, fabric="roce-400g"), "alltoall", 2**30)
    assert loop["step_alone_s"] - 1e-3 == pytest.approx(own, rel=0.1)  # as bench times it


@pytest.mark.parametrize(("job", "words"), [
    ("{name: x, gpus: 16, collective: {collective: all_to_all}}",
     "jobs.x.collective.collective: unknown collective 'all_to_all'"),
    ("{name: x, gpus: 16, collective: {collective: alltoall, size: 0}}",
     "jobs.x.collective.size"),
    ("{name: x, gpus: 16, collective: {collective: alltoall, gap: -1s}}",
     "jobs.x.collective.gap"),
    ("{name: x, gpus: 1, collective: {collective: alltoall}}", "at least 2 GPUs"),
    ("{name: x, gpus: 16}", "an inference: section or a collective: loop"),
    ("{name: x, gpus: 16, collective: {collective: alltoall}, training: {model: llama2-7b}}",
     "one of them"),
])
def test_bad_loops_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str,
                               words: str) -> None:
    text = "cluster: {system: dgx-h100, nodes: 8}\njobs:\n  - " + job + "\n"
    assert main(["cluster", str(_write(tmp_path, text)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err


CKPT = """
cluster: {system: dgx-h100, nodes: 16, fabric: roce-400g, topology: fat-tree,
          oversubscription: 2}
checkpoints:
  - {job: big, to: [14, 15], every: 30min}
jobs:
  - {name: big, gpus: 64, training: {model: llama3-8b, tp: 8, global_batch: 64}}
  - {name: small, gpus: 32, training: {model: llama2-7b, tp: 1, global_batch: 64,
                                       seq_len: 2048}}
"""


def test_a_checkpoint_burst_and_what_it_costs(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A job writes its checkpoint (Llama 3 8B at 14 B a parameter) to two storage
    servers that no job may take: the burst's length follows from the write (or the
    storage's own rate), each job's step during it is no faster than without it, and the
    GPU-hours per hour are those per burst times the bursts an hour."""
    assert main(["cluster", str(_write(tmp_path, CKPT)), "--json"]) == 0
    p = json.loads(capsys.readouterr().out)["placements"][0]
    assert all(14 not in h and 15 not in h for h in p["hosts"].values())
    (c,) = p["checkpoints"]
    assert c["bytes"] == pytest.approx(14 * 8.03e9, rel=0.01)
    assert c["burst_s"] >= c["burst_alone_s"] > 0
    assert c["write_gbytes_per_s"] <= 2 * 8 * 50.0  # two servers' eight 400G NICs
    assert c["gpu_hours_lost_per_hour"] == pytest.approx(c["gpu_hours_lost_per_burst"] * 2)
    by = {j["job"]: j for j in c["jobs"]}
    assert by["big"]["step_during_s"] >= by["big"]["step_s"] * 0.999
    slow = CKPT.replace("every: 30min}", "every: 30min, rate: 10GB/s}")
    assert main(["cluster", str(_write(tmp_path, slow)), "--json"]) == 0
    (c2,) = json.loads(capsys.readouterr().out)["placements"][0]["checkpoints"]
    assert c2["burst_s"] == pytest.approx(c["bytes"] / 10e9)  # the storage's pace
    assert main(["cluster", str(_write(tmp_path, CKPT))]) == 0
    assert "step during the burst" in capsys.readouterr().out


@pytest.mark.parametrize(("ck", "words"), [
    ("{job: nobody, to: [14]}", "checkpoints[0].job: unknown training job 'nobody'"),
    ("{job: big, to: [99]}", "storage servers [99]"),
    ("{job: big, to: [14, 14]}", "listed twice"),
    ("{job: big, to: [0]}", "already taken by 'storage servers'"),
    ("{job: big, to: [14], every: 0s}", "checkpoints[0].every"),
    ("{job: big, to: [14], rate: fast}", "checkpoints[0].rate"),
])
def test_bad_checkpoints_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     ck: str, words: str) -> None:
    text = CKPT.replace("{job: big, to: [14, 15], every: 30min}", ck)
    if "to: [0]" in ck:
        text = text.replace("{name: big, gpus: 64,", "{name: big, gpus: 64, hosts: [0, 1, 2, "
                                                      "3, 4, 5, 6, 7],")
    assert main(["cluster", str(_write(tmp_path, text)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err


SERVE = """
cluster: {system: dgx-h100, nodes: 64, fabric: roce-400g}
jobs:
  - name: moe
    gpus: 128
    training: {model: mixtral-8x7b, tp: 2, ep: 8, global_batch: 256, seq_len: 4096}
  - name: serve-405b
    gpus: 64
    inference: {model: llama3-405b, tp: 16, batch: 64, prompt_len: 2048, output_len: 512,
                precision: fp8}
"""


def test_a_serving_job_beside_a_training_job(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Four replicas of a 2-server (TP 16) Llama 3 405B instance beside a MoE training
    job: alone, a replica decodes as `fabricsim infer` has it on two servers of its own;
    dealt over both leaf groups, its TP all-reduces meet the MoE job's all-to-alls on
    spine links (the MoE job is named as the culprit) and the MoE job is slowed by them;
    the replica's 2 MiB all-reduces are bound by their kernels' rate (trees with LL128,
    the stream after the latencies), not by links the MoE job keeps 15 % busy, so its
    step stays within 2 % of its time alone."""
    assert main(["cluster", str(_write(tmp_path, SERVE)), "--placements", "packed,spread",
                 "--json"]) == 0
    packed, spread = json.loads(capsys.readouterr().out)["placements"]
    assert main(["infer", "--model", "llama3-405b", "--tp", "16", "--batch", "64",
                 "--prompt-len", "2048", "--output-len", "512", "--precision", "fp8",
                 "--system", "dgx-h100", "--nodes", "2", "--fabric", "roce-400g",
                 "--json"]) == 0
    infer = json.loads(capsys.readouterr().out)
    serve = packed["jobs"][1]
    assert serve["model"].startswith("serve llama3-405b tp16")
    assert serve["step_alone_s"] == pytest.approx(infer["tpot_s"], rel=1e-6)
    m2, s2 = spread["jobs"]
    assert 1.0 <= s2["slowdown"] < 1.02 and [c["job"] for c in s2["culprits"]] == ["moe"]
    assert any(x["others_busy"] > 0 for x in s2["links"])
    assert m2["slowdown"] > 1.0 and [c["job"] for c in m2["culprits"]] == ["serve-405b"]
    bad = SERVE.replace("gpus: 64\n    inference", "gpus: 40\n    inference")
    assert main(["cluster", str(_write(tmp_path, bad)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "jobs.serve-405b.gpus" in err and "multiple of 16" in err
    worse = SERVE.replace("tp: 16, batch: 64", "tp: 1, batch: 64")
    assert main(["cluster", str(_write(tmp_path, worse)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "job 'serve-405b'" in err and "Traceback" not in err, err
