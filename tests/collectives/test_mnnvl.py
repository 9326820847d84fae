"""Steps between a rack's hosts (multi-node NVLink): where a group's GPUs sit on several
compute trays of one NVLink domain, every NVLink and NVLS step costs
``Protocol.mnnvl_step`` more (``Schedule.mnnvl``), and an NVLS fill takes
``Protocol.mnnvl_nvls_stages`` more stages, in every backend alike; one tray, or one HGX
board, pays nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from backend_delta import assert_every_backend_adds

from fabricsim.backends.base import fill_efficiency, pipeline_fill
from fabricsim.catalog import get_catalog
from fabricsim.collectives.registry import Group, get_algorithm
from fabricsim.collectives.tuner import build
from fabricsim.fabric import build_cluster
from fabricsim.protocols import PROTOCOLS


def test_racks_have_hosts_of_a_tray_and_boards_are_one_host() -> None:
    assert build_cluster("gb200-nvl72", 1).info.gpus_per_host == 4
    assert build_cluster("gb300-nvl72", 1).info.gpus_per_host == 4
    assert build_cluster("dgx-h100", 1).info.gpus_per_host == 0
    assert build_cluster("hgx-b200", 2).info.gpus_per_host == 0


def test_a_group_spans_hosts_only_across_trays() -> None:
    rack = build_cluster("gb200-nvl72", 2)
    assert not Group.of(rack, range(4)).spans_hosts          # one tray
    assert Group.of(rack, range(8)).spans_hosts              # two trays
    assert not Group.of(rack, [0, 72]).spans_hosts           # one GPU per rack: the NICs
    assert Group.of(rack).spans_hosts
    assert not Group.of(build_cluster("hgx-b200", 2)).spans_hosts


@pytest.mark.parametrize("proto", ["ll", "ll128", "simple"])
def test_every_nvlink_step_pays_it_in_every_backend(proto: str) -> None:
    """An all-gather ring over two GB200 trays (8 GPUs) takes 7 steps, every one over
    NVLink: the schedule across trays takes 7 × ``mnnvl_step`` more than the same
    schedule on one host, in each backend."""
    rack = build_cluster("gb200-nvl72", 1)
    sched = build(Group.of(rack, range(8)), "all_gather", 2**16, get_algorithm("ring"), proto)
    assert sched.mnnvl
    one_host = replace(sched, mnnvl=False)
    want = 7 * PROTOCOLS[proto].mnnvl_step
    assert want > 0
    assert_every_backend_adds(sched, one_host, rack, want)


def test_nvls_steps_through_the_switch_pay_it_too() -> None:
    """NVLS over two trays: its three fill steps and its reduce-multicast step go through
    the switch between the trays' GPUs, four steps in all; and its chunk pipeline fills
    ``mnnvl_nvls_stages`` NVLS stages more, each one chunk's time on the switch."""
    rack = build_cluster("gb200-nvl72", 1)
    simple = PROTOCOLS["simple"]
    sched = build(Group.of(rack, range(8)), "all_reduce", 2**16, get_algorithm("nvls"),
                  "simple")
    one_host = replace(sched, mnnvl=False)
    assert sched.mnnvl and sched.pipeline is not None
    eff = fill_efficiency(simple, rack)
    (cls, n, rate), = sched.pipeline.stages
    chunk = sched.pipeline.chunk(float(sched.nbytes))
    stages = simple.mnnvl_nvls_stages * chunk / (rate * eff["nvls"])
    assert cls == "nvls" and n == 3.0 and stages > 0
    assert pipeline_fill(sched, simple, rack) - pipeline_fill(one_host, simple, rack) == \
        pytest.approx(stages)
    assert_every_backend_adds(sched, one_host, rack, 4 * simple.mnnvl_step + stages)


def test_one_tray_and_one_board_pay_nothing() -> None:
    rack = build_cluster("gb200-nvl72", 1)
    tray = build(Group.of(rack, range(4)), "all_reduce", 2**20, get_algorithm("ring"), "ll")
    assert not tray.mnnvl
    board = build(Group.of(build_cluster("hgx-b200", 1)), "all_reduce", 2**20,
                  get_algorithm("ring"), "ll")
    assert not board.mnnvl
    # the field survives a schedule rebuilt from another's timing fields
    assert tray.timing_fields()["mnnvl"] is False


def test_the_step_is_the_same_for_every_protocol() -> None:
    # a latency of the path, not of a protocol: one value, added after a tree's scaling
    values = {PROTOCOLS[p].mnnvl_step for p in ("ll", "ll128", "simple")}
    assert len(values) == 1 and values.pop() > 0


def test_gpus_per_host_must_divide_the_domain() -> None:
    base = get_catalog().system("gb200-nvl72")
    with pytest.raises(ValueError, match="gpus_per_host"):
        type(base).model_validate({**base.model_dump(), "gpus_per_host": 5})
    assert type(base).model_validate({**base.model_dump(), "gpus_per_host": 8})


def test_moe_kernels_between_trays_pay_it_too() -> None:
    # the EP kernels' NVLink legs cross the same trays as NCCL's steps; their fixed costs
    # are fitted with it (collectives.ep.KERNEL_OVERHEAD_S)
    import numpy as np

    from fabricsim.collectives.ep import EpConfig, build_ep_schedule

    rack = build_cluster("gb200-nvl72", 1)
    cfg = EpConfig(tokens=128, hidden=7168, top_k=8, experts=64)
    two = build_ep_schedule(rack, cfg, "dispatch", "nvlink-onesided",
                            ranks=np.arange(8, dtype=np.int32))
    one = build_ep_schedule(rack, cfg, "dispatch", "nvlink-onesided",
                            ranks=np.arange(4, dtype=np.int32))
    assert two.mnnvl and not one.mnnvl


def test_describe_says_a_domain_spans_hosts() -> None:
    from fabricsim.jobs.describe import summarize

    notes = summarize(build_cluster("gb200-nvl72", 1)).notes
    assert any("18 hosts of 4 GPUs" in n and "0.75 µs" in n for n in notes)
    assert not any("hosts of" in n for n in summarize(build_cluster("dgx-h100", 2)).notes)


def test_a_bad_gpus_per_host_is_exit_2_naming_it(tmp_path: object,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from fabricsim.cli.app import main

    path = Path(str(tmp_path)) / "rack.yaml"
    path.write_text("systems:\n  myrack: {base: gb200-nvl72, gpus_per_host: 5}\n"
                    "cluster: {system: myrack, nodes: 1}\n"
                    "collective: {collective: all_reduce, minbytes: 1MiB, maxbytes: 1MiB}\n")
    assert main(["bench", "scenario", str(path)]) == 2
    err = capsys.readouterr().err
    assert "systems.myrack" in err and "gpus_per_host (5) must divide" in err


def test_bench_notes_a_run_across_trays_and_not_one_tray(
        capsys: pytest.CaptureFixture[str]) -> None:
    from fabricsim.cli.app import main
    from fabricsim.jobs.collective import run_notes

    rack = build_cluster("gb200-nvl72", 2)
    note = run_notes(rack)
    assert len(note) == 1 and "144 GPUs sit on 36 hosts of 2 NVLink domains" in note[0]
    assert run_notes(rack, range(4)) == ()  # one tray: one host
    assert run_notes(build_cluster("dgx-h100", 2)) == ()
    args = ["bench", "all_reduce", "--system", "gb200-nvl72", "--nodes", "1", "-b", "1M",
            "-e", "1M"]
    assert main(args) == 0
    assert "# note: the 72 GPUs sit on 18 hosts of one NVLink domain" in capsys.readouterr().out
    assert main([*args[:6], "--gpus-per-node", "4", *args[6:]]) == 0
    assert "# note:" not in capsys.readouterr().out


def test_a_fill_without_nvls_stages_is_left_alone_on_a_rack() -> None:
    """Only NVLS stages take more on a rack: a tree's fill across two racks (network and
    NVLink stages) is the same with the schedule's hosts joined or not."""
    racks = build_cluster("gb200-nvl72", 2)
    sched = build(Group.of(racks), "all_reduce", 2**26, get_algorithm("tree"), "simple")
    assert sched.mnnvl and sched.pipeline is not None
    assert all(cls != "nvls" for cls, _, _ in sched.pipeline.stages)
    simple = PROTOCOLS["simple"]
    fill = pipeline_fill(sched, simple, racks)
    assert fill > 0
    assert fill == pipeline_fill(replace(sched, mnnvl=False), simple, racks)
