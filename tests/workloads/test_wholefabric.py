"""Every sibling group of a step's part on the flow backend at once (issue 39):
``WholeFabricComm`` against closed forms and the single-group path, the fused schedules,
and ``train --whole-fabric`` on every face."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fabricsim as fs
from fabricsim.backends.flow import FlowBackend
from fabricsim.cli.app import main
from fabricsim.collectives import run_collective
from fabricsim.errors import ConfigError, SimulationError
from fabricsim.schedule.core import Schedule, Step
from fabricsim.workloads.comm import nic_sharing_factor
from fabricsim.workloads.wholefabric import (
    WholeFabricComm,
    disjoint,
    siblings_schedule,
    side_by_side,
)


def test_siblings_sharing_nics_slow_down_by_the_closed_form() -> None:
    """Eight 2-rank DP groups on two PCIe servers of 8 GPUs and 4 NICs: each pair of
    groups shares a NIC, so together they take twice one group alone, the factor the
    analytic step model applies (nic_sharing_factor) without running the siblings."""
    fab = fs.build_cluster("pcie-8gpu", nodes=2)
    comm = WholeFabricComm(fab)
    t = comm.time_all("all_reduce", [[i, 8 + i] for i in range(8)], 2**30)
    c = comm.calls[0]
    assert c.siblings_met and c.groups == 8
    assert t == c.time_s
    assert c.slowdown == pytest.approx(nic_sharing_factor(fab, [0, 8]), rel=0.01)
    assert c.limited_by == "nic-leaf"


def test_one_group_is_the_bench_path() -> None:
    """Alone, a part takes what ``run_collective`` on the flow backend gives the group."""
    fab = fs.build_cluster("dgx-h100", nodes=4, fabric="roce-400g")
    ranks = [0, 8, 16, 24]
    comm = WholeFabricComm(fab)
    t = comm.time("all_reduce", ranks, 2**28)
    ref = run_collective(fab, "all_reduce", 2**28, ranks=ranks,
                         backend=FlowBackend(precision=1e-3)).time
    assert t == pytest.approx(ref, rel=1e-12)
    assert comm.calls[0].alone_s == comm.calls[0].time_s


def test_hashed_paths_collide_where_rails_do_not() -> None:
    """Pipeline sends of every stage pair at once: on a plain fat-tree with hashed ECMP
    they collide on leaf-spine links (slower than one pair alone); rail-optimized, each
    pair stays on its rail and nothing changes."""
    def sends(topology: str) -> float:
        fab = fs.build_cluster("dgx-h100", nodes=8, fabric="roce-400g", topology=topology)
        comm = WholeFabricComm(fab)
        comm.time_all("sendrecv", [[g, g + 32] for g in range(32)], 2**26)
        return comm.calls[0].slowdown

    assert sends("fat-tree") > 1.5
    assert sends("rail-optimized") == pytest.approx(1.0, abs=1e-9)


def test_cached_and_counted() -> None:
    fab = fs.build_cluster("pcie-8gpu", nodes=2)
    comm = WholeFabricComm(fab)
    groups = [[i, 8 + i] for i in range(8)]
    a = comm.time_all("all_reduce", groups, 2**24)
    b = comm.time_all("all_reduce", groups, 2**24)
    assert a == b and len(comm.calls) == 1
    s = comm.summary()
    assert s["flows"] == comm.calls[0].transfers > 0
    assert 0 < s["flows_simulated"] <= s["flows"]
    assert s["worst_slowdown"] >= 1.0 and s["runs"] == 1


def test_side_by_side_fuses_alike_steps_and_merges_others() -> None:
    a = Schedule(steps=(Step(src=[0], dst=[1], nbytes=[4.0], repeat=2),
                        Step(src=[1], dst=[0], nbytes=[4.0], deps=(0,))))
    b = Schedule(steps=(Step(src=[2], dst=[3], nbytes=[4.0], repeat=2),
                        Step(src=[3], dst=[2], nbytes=[4.0], deps=(0,))))
    fused = side_by_side([a, b])
    assert len(fused.steps) == 2
    assert fused.steps[1].deps == (0,) and fused.steps[1].src.tolist() == [1, 3]
    c = Schedule(steps=(Step(src=[4], dst=[5], nbytes=[4.0], repeat=3),))
    merged = side_by_side([a, c])  # not alike: each at its own pace
    assert len(merged.steps) == 3 and merged.steps[2].repeat == 3


def test_fused_siblings_keep_every_transfer() -> None:
    fab = fs.build_cluster("dgx-h100", nodes=4)
    groups = [[i, 8 + i, 16 + i, 24 + i] for i in range(8)]
    one = siblings_schedule(fab, "reduce_scatter", groups[:1], 2**24)
    every = siblings_schedule(fab, "reduce_scatter", groups, 2**24)
    assert len(every.steps) == len(one.steps)
    assert sum(s.n for s in every.steps) == 8 * sum(s.n for s in one.steps)
    np.testing.assert_array_equal(every.steps[0].src[:one.steps[0].n], one.steps[0].src)


def test_disjoint_keeps_one_exchange_per_rank() -> None:
    assert disjoint([[0, 1], [1, 2], [2, 3], [3, 4]]) == [[0, 1], [2, 3]]


def test_limits_and_bad_precision() -> None:
    fab = fs.build_cluster("pcie-8gpu", nodes=2)
    with pytest.raises(ConfigError) as e:
        WholeFabricComm(fab, precision=0.2)
    assert e.value.field == "--flow-precision"
    comm = WholeFabricComm(fab, time_limit_s=1e-9)
    with pytest.raises(SimulationError) as s:
        comm.time_all("all_reduce", [[0, 8], [1, 9]], 2**24)
    assert s.value.field == "--time-limit"


SCENARIO = "train-mixtral-whole-fabric"


def test_train_whole_fabric_reports_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    """The shipped scenario: every part with its siblings, the flows simulated, and the
    step against each group alone (slower: hashed leaf-spine collisions)."""
    assert main(["train", SCENARIO, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    w = d["whole_fabric"]
    assert w["flows"] == sum(c["transfers"] for c in w["calls"]) > 1000
    assert w["flows_simulated"] == sum(c["simulated"] for c in w["calls"])
    assert w["slowdown"] == pytest.approx(d["step_time_s"] / w["step_time_alone_s"])
    assert w["slowdown"] > 1.01
    assert {c["kind"] for c in w["calls"]} >= {"sendrecv", "alltoall", "reduce_scatter"}
    assert "leaf-spine" in w["limiting_links"]
    once = w["all_at_once"]  # every part started together: a bound, slower still
    assert once["refused"] is None
    assert max(p["slowdown"] for p in once["parts"]) > max(c["slowdown"] for c in w["calls"])
    # rail-optimized, the same job's groups do not meet; its parts still share NICs
    assert main(["train", SCENARIO, "--topology", "rail-optimized", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["whole_fabric"]
    assert all(c["slowdown"] == pytest.approx(1.0, abs=1e-9) for c in r["calls"])
    assert r["step_time_parts_apart_s"] == pytest.approx(r["step_time_alone_s"], rel=1e-9)
    assert 1.0 <= r["slowdown"] < 1.02


@pytest.mark.parametrize("extra, field", [
    (["--backend", "analytic"], "--whole-fabric"),
    (["--no-whole-fabric", "--flow-precision", "1e-3"], "--flow-precision"),
    (["--flow-precision", "0.5"], "--flow-precision"),
    (["--no-whole-fabric", "--time-limit", "10"], "--time-limit"),
    (["--time-limit", "0"], "--time-limit"),
])
def test_train_whole_fabric_refusals(capsys, extra: list[str], field: str  # type: ignore[no-untyped-def]
                                     ) -> None:
    assert main(["train", SCENARIO, *extra]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_whole_fabric_with_faults_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("cluster: {system: dgx-h100, nodes: 2, fabric: roce-400g}\n"
                 "training: {model: llama2-7b, tp: 8, backend: flow, whole_fabric: true}\n"
                 "faults: [{type: slow_nic, node: 1, index: 3, factor: 0.5}]\n")
    assert main(["train", str(f)]) == 2


def test_copies_in_their_own_components_are_run_once_and_change_nothing() -> None:
    """Four all-to-all groups of two servers each on a rail-optimized fabric share no link:
    four components posing the same problem, so one is run; its time is the time of
    running all four (the full fused schedule on the same backend)."""
    from fabricsim.collectives import Group, get_algorithm
    from fabricsim.collectives.tuner import build, default_tuner

    fab = fs.build_cluster("dgx-h100", nodes=8, fabric="ib-ndr", topology="rail-optimized")
    groups = [list(range(16 * k, 16 * k + 16)) for k in range(4)]
    comm = WholeFabricComm(fab)
    t = comm.time_all("alltoall", groups, 2**27)
    c = comm.calls[0]
    assert (c.components, c.distinct) == (4, 1)
    assert c.simulated * 4 == c.transfers
    choice = default_tuner(fab).choose(fab, "alltoall", 2**27, ranks=groups[0])
    every = side_by_side([build(Group.of(fab, g), "alltoall", 2**27,
                                get_algorithm(choice.algorithm), choice.protocol)
                          for g in groups])
    assert t == pytest.approx(FlowBackend(precision=1e-3).run(every, fab).time, rel=1e-12)


def test_groups_sharing_links_are_all_run() -> None:
    """Hashed leaf-spine paths join the pipeline sends into shared components: every
    group of those is simulated, none assumed a copy."""
    fab = fs.build_cluster("dgx-h100", nodes=8, fabric="roce-400g", topology="fat-tree")
    comm = WholeFabricComm(fab)
    comm.time_all("sendrecv", [[g, g + 32] for g in range(32)], 2**26)
    c = comm.calls[0]
    assert c.components < c.groups
    assert c.distinct > c.components


def test_a_part_too_big_to_route_is_refused_up_front() -> None:
    fab = fs.build_cluster("dgx-h100", nodes=8, fabric="ib-ndr")
    comm = WholeFabricComm(fab, memory_limit_bytes=2**20)
    with pytest.raises(ConfigError) as e:
        comm.time_all("alltoall", [list(range(16 * k, 16 * k + 16)) for k in range(4)],
                      2**27)
    assert e.value.field == "--whole-fabric"
    assert "GiB" in e.value.message and "drop --whole-fabric" in e.value.message


def test_every_part_at_once() -> None:
    """Two parts whose GPUs share a NIC slow each other when started together; a part
    set too big is not run, and says why."""
    fab = fs.build_cluster("pcie-8gpu", nodes=2)
    comm = WholeFabricComm(fab)
    comm.time_all("all_reduce", [[0, 8]], 2**26)
    comm.time_all("reduce_scatter", [[1, 9]], 2**26)
    both = comm.all_at_once()
    assert both["refused"] is None and both["flows"] > 0
    assert [p["kind"] for p in both["parts"]] == ["all_reduce", "reduce_scatter"]
    assert all(p["slowdown"] > 1.1 for p in both["parts"])
    comm.max_flows_at_once = 1
    assert "more than the 1 this runs at once" in comm.all_at_once()["refused"]
    apart = WholeFabricComm(fs.build_cluster("dgx-h100", nodes=2))
    apart.time_all("all_reduce", [[0, 8]], 2**26)  # NIC 0
    apart.time_all("reduce_scatter", [[1, 9]], 2**26)  # NIC 1: nothing shared
    assert [round(p["slowdown"], 6) for p in apart.all_at_once()["parts"]] == [1.0, 1.0]


@pytest.mark.parametrize("kind", ["scale", "plan", "plan-parallel"])
def test_kinds_by_shape_say_whole_fabric_is_not_used(kind: str) -> None:
    """A scenario asking for whole-fabric runs, given to a kind that times steps by
    shape: not silently dropped, a note (its reports' warnings) says so."""
    from fabricsim import jobs
    from fabricsim.scenario import load_scenario

    sc = load_scenario(SCENARIO)
    job = jobs.job_from_scenario(kind, sc)
    assert any(f"training.whole_fabric is not used by {kind}" in n
               for n in job.training.notes)
    plain = sc.model_copy(update={"training": sc.training.model_copy(  # type: ignore[union-attr]
        update={"whole_fabric": None})})
    assert not any("whole_fabric" in n for n in jobs.job_from_scenario(kind, plain)
                   .training.notes)


def test_two_parts_always_on_one_nic_halve_it() -> None:
    """The mean field against its closed form: a data-parallel all-reduce and a pipeline
    send through the same NIC, each on the wire the whole step, each gets half of it:
    every bandwidth-bound part takes about twice its time (max-min between two saturating
    flows; 1.85x here, as each part's latency, launch and protocol keep its payload off
    the wire 14 % of its time); half the step each, about 1.4x."""
    fab = fs.build_cluster("pcie-8gpu", nodes=2)
    comm = WholeFabricComm(fab)
    comm.part("dp")
    comm.time_all("all_reduce", [[0, 8]], 2**28)
    comm.part("pp")
    comm.time_all("sendrecv", [[1, 9]], 2**28)
    out = comm.overlap(1.0, {"dp": 1.0, "pp": 1.0})
    assert [p["part"] for p in out["parts"]] == ["dp", "pp"]
    assert all(1.8 < p["slowdown"] <= 2.0 for p in out["parts"])
    assert out["busiest_shared_links"][0]["link"].startswith("server")
    # the cache answers with the slowed time: the step model asked again sees it
    assert comm.time_all("all_reduce", [[0, 8]], 2**28) == out["parts"][0]["overlapped_s"]
    assert comm.calls[0].overlapped_s == out["parts"][0]["overlapped_s"]
    half = WholeFabricComm(fab)
    half.part("dp")
    half.time_all("all_reduce", [[0, 8]], 2**28)
    half.part("pp")
    half.time_all("sendrecv", [[1, 9]], 2**28)
    slow = half.overlap(1.0, {"dp": 0.5, "pp": 0.5})["parts"][0]["slowdown"]
    assert 1.3 < slow < 1.5


def test_parts_of_one_kind_or_inside_servers_do_not_load_each_other() -> None:
    """Parts the step model runs one after the other (one kind) and parts inside one
    server (an NVSwitch meets no other part) keep their times."""
    fab = fs.build_cluster("pcie-8gpu", nodes=2)
    comm = WholeFabricComm(fab)
    comm.part("dp")
    comm.time_all("all_reduce", [[0, 8]], 2**28)
    comm.time_all("reduce_scatter", [[1, 9]], 2**28)
    comm.part("tp")
    comm.time_all("all_reduce", [[0, 1]], 2**28)
    out = comm.overlap(1.0, {"dp": 1.0, "tp": 1.0})
    assert out["parts"] == []
    assert all(c.overlapped_s == 0.0 for c in comm.calls)


def test_train_whole_fabric_steps_with_its_parts_beside_each_other(capsys) -> None:  # type: ignore[no-untyped-def]
    """The step ``--whole-fabric`` reports has its parts overlapping (the mean field) and
    says the step with the parts apart; on the hashed fat-tree the parts slow each other,
    on the rail-optimized one their groups meet nowhere."""
    assert main(["train", SCENARIO, "--json"]) == 0
    w = json.loads(capsys.readouterr().out)["whole_fabric"]
    parts = w["overlap"]["parts"]
    assert {p["part"] for p in parts} >= {"dp", "pp", "ep"}
    assert all(p["slowdown"] >= 0.999 for p in parts)
    assert max(p["slowdown"] for p in parts) > 1.01
    assert w["step_time_alone_s"] < w["step_time_parts_apart_s"]
    assert main(["train", SCENARIO]) == 0
    assert "with its parts beside each other" in " ".join(capsys.readouterr().out.split())
