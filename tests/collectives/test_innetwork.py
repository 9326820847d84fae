"""SHARP (CollNet) and NVLS+SHARP: in-network all-reduce with pipelined phases (issue 10)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.collectives import predict_time, run_collective
from fabricsim.errors import ScheduleError
from fabricsim.fabric import LinkKind, build_cluster


def _busbw(fab, algo: str | None, size: float = 2**33) -> float:  # type: ignore[no-untyped-def]
    n = fab.n_gpus
    return size / predict_time(fab, "all_reduce", size, algo=algo) * 2 * (n - 1) / n / 1e9


@pytest.fixture(scope="module")
def h100_16():  # type: ignore[no-untyped-def]
    return build_cluster("dgx-h100", 16, params={"sharp": True})


def test_sharp_moves_one_shard_per_nic_each_way(h100_16) -> None:  # type: ignore[no-untyped-def]
    """Every NIC carries S/g up and S/g down: half of a ring's 2(m-1)/m S/g."""
    size = 2**30
    r = run_collective(h100_16, "all_reduce", size, algo="sharp", proto="simple",
                       backend=AnalyticBackend())
    nic_up = h100_16.links_of(LinkKind.NIC_LEAF)
    nic_up = nic_up[h100_16.node_kind[h100_16.link_src[nic_up]] == 3]  # NIC -> leaf
    assert np.allclose(r.result.link_bytes[nic_up], size / 8)


def test_pipelined_phases_beat_running_them_in_turn(h100_16) -> None:  # type: ignore[no-untyped-def]
    """Pipelined, SHARP is limited by its slowest phase; before, its three phases ran one
    after another (249 GB/s busbw on 2 servers, below the ring)."""
    assert _busbw(h100_16, "sharp") > _busbw(h100_16, "ring")
    assert _busbw(h100_16, "nvls_sharp") > max(_busbw(h100_16, "sharp"),
                                               _busbw(h100_16, "nvls"))
    # NVLS+SHARP is the automatic choice for big messages once SHARP is on
    big = predict_time(h100_16, "all_reduce", 2**33)
    assert big == pytest.approx(predict_time(h100_16, "all_reduce", 2**33, algo="nvls_sharp"))


def test_nvls_sharp_needs_both_switch_kinds() -> None:
    with pytest.raises(ScheduleError, match="SHARP"):
        predict_time(build_cluster("dgx-h100", 2), "all_reduce", 2**30, algo="nvls_sharp")
    with pytest.raises(ScheduleError, match="NVLS"):
        predict_time(build_cluster("dgx-a100", 2, params={"sharp": True}), "all_reduce",
                     2**30, algo="nvls_sharp")
    with pytest.raises(ScheduleError, match="server"):
        predict_time(build_cluster("dgx-h100", 1, params={"sharp": True}), "all_reduce",
                     2**30, algo="nvls_sharp")


def test_not_offered_without_sharp() -> None:
    fab = build_cluster("dgx-h100", 16)
    r = run_collective(fab, "all_reduce", 2**33)
    assert r.algorithm not in ("sharp", "nvls_sharp")


# ---------------------------------------------------------------- PXN (all-to-all)
def test_pxn_keeps_all_to_all_on_its_rails() -> None:
    """16 DGX H100, rail-optimized at 4:1: every rail's leaf holds all 16 servers, so with
    PXN (NVLink hop to the server-mate on the peer's rail) no byte climbs to a spine, and
    the oversubscribed uplinks do not slow the all-to-all (13.6 GB/s busbw before PXN)."""
    fab = build_cluster("dgx-h100", 16, oversubscription=4)
    r = run_collective(fab, "alltoall", 2**30, backend=AnalyticBackend())
    spine = fab.links_of(LinkKind.LEAF_SPINE)
    assert r.result.link_bytes[spine].sum() == 0
    full = build_cluster("dgx-h100", 16)
    assert r.time == pytest.approx(run_collective(full, "alltoall", 2**30).time, rel=1e-6)
    # every NIC still sends its GPU's share of the remote bytes (15/16 of S, relayed)
    nic_up = fab.links_of(LinkKind.NIC_LEAF)
    nic_up = nic_up[fab.node_kind[fab.link_src[nic_up]] == 3]
    assert np.allclose(r.result.link_bytes[nic_up], 2**30 * 120 / 128)
