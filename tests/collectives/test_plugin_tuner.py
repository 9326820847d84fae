"""The EFA plugin's region tuner: geometry, the shipped regions, and NCCL's choice with it."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from fabricsim.catalog import get_catalog
from fabricsim.catalog.models import TunerRegions
from fabricsim.collectives import Group
from fabricsim.collectives.nccl_env import nccl_env
from fabricsim.collectives.plugin_tuner import (
    Region,
    extend,
    region_tuner,
    tuner_platforms,
)
from fabricsim.collectives.tuner import Tuner, choose
from fabricsim.fabric import build_cluster
from fabricsim.jobs.collective import plugin_tuner_note

MIB = 2**20
PAIRS = [("ring", "ll"), ("ring", "ll128"), ("ring", "simple"), ("tree", "ll"),
         ("tree", "ll128"), ("tree", "simple"), ("nvlstree", "simple")]


def square(x0: float, x1: float, y0: float, y1: float) -> Region:
    """A region over [2**x0, 2**x1] bytes x [2**y0, 2**y1] ranks."""
    return Region("ring", "simple", np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]]))


def test_region_inside_edge_and_outside() -> None:
    r = square(10, 20, 3, 6)
    assert r.holds(2**15, 16)           # inside
    assert r.holds(2**20, 16)           # on the right edge: inside, as the plugin counts it
    assert r.holds(2**15, 8)            # on the bottom edge
    assert r.holds(2**10, 8)            # a corner
    assert not r.holds(2**21, 16)
    assert not r.holds(2**15, 128)
    assert not r.holds(2**9, 16)


def test_a_region_without_area_holds_its_edge_only() -> None:
    # the plugin's p5 table has such a one: a line along 16 ranks
    line = Region("nvlstree", "simple", np.array([[25.0, 4.0], [36.0, 4.0], [25.0, 4.0]]))
    assert line.holds(2**30, 16)
    assert not line.holds(2**30, 17)
    assert not line.holds(2**24, 16)


def test_a_concave_region() -> None:
    # an L: the notch (upper right) is outside
    ell = Region("tree", "ll", np.array([[0.0, 0.0], [4.0, 0.0], [4.0, 2.0], [2.0, 2.0],
                                          [2.0, 4.0], [0.0, 4.0]]))
    assert ell.holds(2**1, 2**3)
    assert ell.holds(2**3, 2**1)
    assert not ell.holds(2**3, 2**3)


@pytest.mark.parametrize(("a", "b", "to", "want"), [
    ((1.0, 2.0), (1.0, 5.0), (30.0, 20.0), (1.0, 20.0)),     # vertical: up to the top
    ((1.0, 2.0), (5.0, 2.0), (30.0, 20.0), (30.0, 2.0)),     # horizontal: out to the right
    ((0.0, 0.0), (1.0, 1.0), (30.0, 20.0), (20.0, 20.0)),    # slope 1 meets the top first
    ((0.0, 0.0), (4.0, 1.0), (30.0, 20.0), (30.0, 7.5)),     # slope 1/4 meets the right
])
def test_extend(a: tuple[float, float], b: tuple[float, float], to: tuple[float, float],
                want: tuple[float, float]) -> None:
    assert extend(a, b, to) == pytest.approx(want)


def test_shipped_platforms_match_the_catalog() -> None:
    assert set(typing.get_args(TunerRegions)) - {""} == set(tuner_platforms())
    cat = get_catalog()
    named = {s.nccl_tuner_regions for s in cat.systems.values()} - {""}
    assert named <= set(tuner_platforms())
    assert {"aws-p5", "aws-p5en", "aws-p6-b200"} <= named


@pytest.mark.parametrize("platform", ["aws-p5", "aws-p5en", "aws-p6-b200", "aws-p6-b300"])
def test_every_region_is_a_polygon_of_known_pairs(platform: str) -> None:
    tuner = region_tuner(platform)
    assert tuner is not None
    assert tuner.regions
    for (ppn, coll), regions in tuner.regions.items():
        assert ppn in (1, 2, 8)
        assert coll in ("all_reduce", "all_gather", "reduce_scatter")
        for r in regions:
            assert r.algorithm in ("ring", "tree", "nvlstree", "nvls", "pat")
            assert r.protocol in ("ll", "ll128", "simple")
            assert r.vertices.ndim == 2 and r.vertices.shape[1] == 2
            assert r.vertices.shape[0] >= 3
            assert np.isfinite(r.vertices).all()


def test_p5_picks_as_its_vertices_say() -> None:
    # p5/p5e, 8 GPUs an instance, all-reduce: tree/LL128 below the edge from (30 MiB, 16
    # ranks) to (36 MiB, 32 ranks) and (112 MiB, 64 ranks), ring/LL128 above it up to
    # 1-2 GiB, ring/Simple beyond (aws-ofi-nccl src/tuner/nccl_ofi_regions.cpp)
    t = region_tuner("aws-p5")
    assert t is not None
    assert t.pick("all_reduce", 32 * MIB, 32, 4, PAIRS) == ("tree", "ll128")
    assert t.pick("all_reduce", 64 * MIB, 32, 4, PAIRS) == ("ring", "ll128")
    assert t.pick("all_reduce", 64 * MIB, 64, 8, PAIRS) == ("tree", "ll128")
    assert t.pick("all_reduce", 128 * MIB, 64, 8, PAIRS) == ("ring", "ll128")
    assert t.pick("all_reduce", 4 * 2**30, 32, 4, PAIRS) == ("ring", "simple")
    # two instances or fewer: NCCL decides
    assert t.pick("all_reduce", 64 * MIB, 16, 2, PAIRS) is None
    # no regions for this collective or for 4 GPUs an instance
    assert t.pick("all_gather", 64 * MIB, 32, 4, PAIRS) is None
    assert t.pick("all_reduce", 64 * MIB, 16, 4, PAIRS) is None
    # a pair NCCL may not run here is passed over, as the plugin skips ignored entries
    assert t.pick("all_reduce", 64 * MIB, 32, 4, [("tree", "ll128")]) is None


def test_nccl_runs_the_plugins_pick_on_p5() -> None:
    fab = build_cluster("aws-p5", 4)
    assert (choose(fab, "all_reduce", 64 * MIB).algorithm,
            choose(fab, "all_reduce", 64 * MIB).protocol) == ("ring", "ll128")
    # the same cluster on NCCL's own transport (no plugin): NCCL's model picks the tree
    ib = build_cluster("dgx-h100", 4)
    assert choose(ib, "all_reduce", 64 * MIB).algorithm != "ring"
    # with NCCL_ALGO=tree the plugin's ring is not allowed: NCCL ranks what is
    env = nccl_env({"NCCL_ALGO": "tree"})
    c = Tuner().choose_among(fab, "all_reduce", 64 * MIB, None,
                             env.allowed_algorithms(["ring", "tree", "nvlstree"]), [None])
    assert c.algorithm == "tree"


def test_the_plugin_pick_is_faster_on_the_measured_p5_sweep() -> None:
    # SageMaker HyperPod p5, 4 instances, 64 MiB all-reduce (data/reference/nccl_tests.csv
    # row 5428): 152.4 GB/s busbw; the plugin's ring/LL128 lands within 10 %
    fab = build_cluster("aws-p5", 4)
    c = choose(fab, "all_reduce", 64 * MIB)
    busbw = 64 * MIB / c.time * 2 * 31 / 32 / 1e9
    assert busbw == pytest.approx(152.4, rel=0.10)


def test_bench_says_who_picks() -> None:
    fab = build_cluster("aws-p5", 4)
    note = plugin_tuner_note(fab, Group.of(fab))
    assert "aws-ofi-nccl v1.21.1" in note and "all_reduce" in note
    for other in (build_cluster("aws-p5", 2), build_cluster("dgx-h100", 4)):
        assert plugin_tuner_note(other, Group.of(other)) == ""


def test_the_plugin_tuner_is_switched_as_the_plugin_reads_it(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from fabricsim.cli.app import main
    from fabricsim.errors import ConfigError

    assert nccl_env({}).plugin_tuner
    assert not nccl_env({"OFI_NCCL_TUNER_TYPE": "Internal"}).plugin_tuner
    assert nccl_env({"OFI_NCCL_TUNER_TYPE": "region",
                     "NCCL_TUNER_PLUGIN": "libnccl-ofi-tuner.so"}).plugin_tuner
    with pytest.raises(ConfigError) as e:
        nccl_env({"OFI_NCCL_TUNER_TYPE": "Model"})
    assert e.value.field == "OFI_NCCL_TUNER_TYPE" and "Internal" in e.value.message
    with pytest.raises(ConfigError) as e:
        nccl_env({"NCCL_TUNER_PLUGIN": "libmytuner.so"})
    assert e.value.field == "NCCL_TUNER_PLUGIN" and "libmytuner.so" in e.value.message
    # off: NCCL's own model picks on p5 too
    fab = build_cluster("aws-p5", 4)
    assert Tuner().choose(fab, "all_reduce", 64 * MIB, plugin_tuner=False).algorithm == "tree"
    args = ["bench", "all_reduce", "--system", "aws-p5", "--nodes", "4", "-b", "64M", "-e",
            "64M"]
    monkeypatch.setenv("OFI_NCCL_TUNER_TYPE", "Internal")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "tree     LL128" in out and "AWS's EFA plugin picks" not in out
    monkeypatch.setenv("OFI_NCCL_TUNER_TYPE", "Model")
    assert main(args) == 2
    assert "OFI_NCCL_TUNER_TYPE" in capsys.readouterr().err
    monkeypatch.delenv("OFI_NCCL_TUNER_TYPE")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ring     LL128" in out and "AWS's EFA plugin picks" in out
