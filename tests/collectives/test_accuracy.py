"""Pins the summary of benchmarks/accuracy_nccl.py so a model regression fails.

Bounds are issue 3's targets (>= 1 MiB: median <= 5 %, max <= 15 % on primary rows) plus
a guard on small sizes; the secondary GB200 vendor-slide row is pinned as *still wrong*
(so an improvement or a regression there shows up too).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from benchmark_module import load

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    return load("accuracy_nccl")


@pytest.fixture(scope="module")
def results() -> tuple[ModuleType, list[dict[str, Any]]]:
    b = _bench()
    return b, b.evaluate(b.cases())


def test_primary_targets(results: tuple[ModuleType, list[dict[str, Any]]]) -> None:
    b, res = results
    s = b.summary(res)["primary"]
    one = s["single_node_ge_1MiB"]
    assert one["rows"] >= 45
    assert one["median_abs_rel_error"] <= 0.05
    # The Azure ND H100 v5 rows (nccl-tests -g 8) at 1-8 MiB landed 18-35 % slow while
    # the model added the seven extra launches to every operation; with the host's issue
    # time as a floor (Protocol.host_floor) they are within 10 % (the worst ≥ 1 MiB row is
    # now 99, stas00's A100 at 8 MiB, -13 %).
    assert one["max_abs_rel_error"] <= 0.15
    assert s["lt_1MiB"]["rows"] >= 20
    # below 1 MiB these -g 8 rows sit on the floor, one host's issue time for all: Azure's
    # A100 host measures 45 us at 1 KiB, its H100 host 26 us (row 25, -33 %); 5.7 % median
    # while the launches were added and the mid sizes paid for it
    assert s["lt_1MiB"]["median_abs_rel_error"] <= 0.16
    assert s["lt_1MiB"]["max_abs_rel_error"] <= 0.34


def test_scale_out_rows_as_they_stand(results: tuple[ModuleType, list[dict[str, Any]]]
                                      ) -> None:
    """Multi-node busbw and small-message latency (measurements_2.csv), pinned where the
    model stands so that a change shows. Issue 10's targets: latency median <= 25 %,
    multi-node busbw median <= 8 % (the 2 x 1 A100 all-to-all, +48 %, is the outlier)."""
    b, res = results
    s = b.summary(res)["primary"]
    multi, lat = s["multi_node_ge_1MiB"], s["latency"]
    assert multi["rows"] >= 19 and lat["rows"] == 9
    assert multi["median_abs_rel_error"] <= 0.05
    assert lat["median_abs_rel_error"] <= 0.10
    by_row = {(r["row"], r["size_bytes"]): r for r in res}
    # 2 x 8 H100, NCCL's default (NVLSTree, bound by its kernels) from 1 to 8 GiB
    for size in (2**30, 2**31, 2**32, 2**33):
        rid = 1079 + (size.bit_length() - 31)
        assert abs(by_row[(rid, size)]["rel_error"]) <= 0.04
    # 2 x 8 A100: NCCL's tree kernels are slower than the tree's links allow, so NCCL's
    # default measures its ring's figure (the tree-kernel rate, protocols.tree_kernel_rate)
    for rid, size in ((1085, 2**30), (1086, 2**32)):
        assert abs(by_row[(rid, size)]["rel_error"]) <= 0.05
    # 4 HDR NICs per A100 server (user-defined system): NIC-bound, as measured (+11 %:
    # +9 % while rings had the size ramp, 2 % slower at 8 GiB)
    assert abs(by_row[(134, 2**33)]["rel_error"]) <= 0.12
    # row 133, 3 servers at 128 MiB (the peak of a sweep up to 128 MB): NCCL's choice is
    # the tree, whose chunk pipeline fill (16 NVLink chain stages of 512 KiB on 8
    # channels) puts the model 26 % below it; the fill is NCCL's mechanism, the row one
    # user's report
    assert abs(by_row[(133, 2**27)]["rel_error"]) <= 0.27


def test_secondary_rows_are_run_and_reported(
        results: tuple[ModuleType, list[dict[str, Any]]]) -> None:
    b, res = results
    sec = [r for r in res if "secondary" in r]
    assert {(r["row"], r["system"]) for r in sec} == set(b.SECONDARY)
    gb200 = [r for r in sec if r["system"] == "gb200-nvl72" and r["algo"] == "nvls"]
    # the vendor's figure (issue 10), which no constant is fitted on since NVLS on
    # NVSwitch gen4 is bound by its copy warps (Protocol.nvls_warp_rate, fitted on seven
    # published sources; their 64-72 GPU domains measure 835-898 GB/s at 8 GiB): the model
    # comes out 5 % above it (6.4 % until a rack's NVLS fill took 6 stages, 2026-12-03)
    assert 0.04 < gb200[0]["rel_error"] < 0.07
    assert b.summary(res)["all"]["ge_1MiB"]["rows"] > b.summary(res)["primary"]["ge_1MiB"][
        "rows"]


def test_range_error_is_zero_inside() -> None:
    b = _bench()
    c = b.Case(0, "dgx-h100", 1, 2.0**30, 367.5, span=(365.0, 370.0))
    assert b.rel_error(c, 368.0) == 0.0
    assert b.rel_error(c, 380.0) == pytest.approx(10 / 370)
    assert b.rel_error(c, 350.0) == pytest.approx(-15 / 365)


def test_published_rows_run_with_the_nccl_environment_they_document() -> None:
    """A published run's notes that turn NVLS off (NCCL_NVLS_ENABLE=0) or set channel
    bounds are honoured as `bench` honours them: two HGX B200 at 8 GiB with NVLS off and
    CollNet without SHARP (Together's run, 352 GB/s) get NCCL's ring or tree, not the
    NVLSTree the same run gets with NVLS on (713 GB/s); a row with nothing documented is
    predicted as before."""
    b = _bench()
    pub, _ = b.published().published_cases()
    by_id = {c.row: c for c in pub}
    off, on = by_id[3537], by_id[3536]
    assert dict(off.env) == {"NCCL_COLLNET_ENABLE": "1", "NCCL_NVLS_ENABLE": "0"}
    assert dict(on.env) == {"NCCL_NVLS_ENABLE": "1"}
    t_off, t_on = b.predict_us(off), b.predict_us(on)
    assert t_off > 1.8 * t_on
    assert abs(b.rel_error(off, b.predict(off))) < 0.15
    plain = next(c for c in pub if not c.env and c.nodes > 1)
    from fabricsim.collectives import predict_time

    assert b.predict_us(plain) == pytest.approx(predict_time(
        b.fabric_of(plain), plain.collective, plain.nbytes, algo=plain.algo,
        proto=plain.proto, gpus_per_thread=plain.gpus_per_thread) * 1e6)


def test_published_rows_whose_ratio_names_other_ranks_are_left_out() -> None:
    """nccl-tests prints busbw = algbw x a factor of the ranks, so a row whose two
    figures imply another rank count was transcribed with the wrong one. OCI's GB200 page
    gives one all-reduce (856 and 892 GB/s at 4 and 8 GiB, busbw/algbw 1.969: 64 ranks)
    that was vendored twice, once as 64 ranks (rows 3325-3326) and once as the 8 ranks
    its section's title names (rows 4505-4506); only the second is left out, and no
    other row of the file is."""
    b = _bench()
    pub, skipped = b.published().published_cases()
    ids = {c.row for c in pub}
    assert skipped["busbw/algbw contradicts the ranks the row gives"] == 2
    assert {3325, 3326} <= ids and not {4505, 4506} & ids
    row = {"collective": "all_reduce", "nodes": "2", "gpus_per_node": "4",
           "size_bytes": str(2**32), "busbw_gbps": "855.95", "algbw_gbps": "434.77"}
    assert not b.published().ranks_agree(row)
    assert b.published().ranks_agree({**row, "nodes": "16"})
