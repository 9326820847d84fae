"""Packet vs flow backend on NCCL-style tree all-reduce schedules (protocol "ideal")."""

from __future__ import annotations

import numpy as np
import pytest

import fabricsim.backends.flow as flow
from fabricsim.backends.packet import PacketBackend
from fabricsim.collectives import build_schedule
from fabricsim.fabric import build_cluster
from fabricsim.schedule import Schedule, Step


def _tree(nodes: int):  # type: ignore[no-untyped-def]
    fab = build_cluster("dgx-h100", nodes=nodes)
    return fab, build_schedule(fab, "all_reduce", 64e6, algo="tree", proto="simple")


def test_zero_byte_transfer_takes_its_path_latency() -> None:
    """A zero-byte transfer (a pipeline-fill step) sends one header-only packet."""
    fab = build_cluster("dgx-h100", nodes=2)
    a, b = int(fab.gpus[0]), int(fab.gpus[8])
    path = fab.route(a, b)
    sch = Schedule(steps=(Step(src=[a], dst=[b], nbytes=[0.0], repeat=3),))
    r = PacketBackend(switching="store-and-forward").run(sch, fab)   # IB: 26 B header
    one = float((26 / fab.link_capacity[path] + fab.link_latency[path]).sum())
    assert r.time == pytest.approx(3 * one, rel=1e-12)
    assert r.extra["data_packets"] == 3


def test_tree_all_reduce_agrees_with_the_flow_backend_on_two_servers() -> None:
    """Was -9.9 %: the packet backend skipped the 15 zero-byte pipeline-fill rounds
    (27.75 us) that the flow backend charges; the transfers themselves agreed."""
    fab, sch = _tree(2)
    rp = PacketBackend(header_bytes=0, protocol="ideal").run(sch, fab)
    rf = flow.FlowBackend(protocol="ideal").run(sch, fab)
    assert rp.time == pytest.approx(rf.time, rel=0.02)
    assert rp.step_end[0] == pytest.approx(rf.step_end[0], rel=1e-3)   # the fill step
    for i in range(1, len(sch.steps)):
        assert rp.step_end[i] == pytest.approx(rf.step_end[i], rel=0.02)


def test_one_server_tree_differs_only_by_credit_back_pressure() -> None:
    """On one server GPU 0 sends 3 tree flows and every other GPU 4, all over the same
    NVLinks: max-min (the flow backend) throttles GPU 0's flows to 112.5 GB/s; the packet
    backend has no end-to-end congestion control on NVLink, so GPU 0 overdrives the
    receivers it shares, their NVSwitch queues fill to the credit limit (~45 KB) and
    head-of-line blocking idles other links (+6.7 %). With credits deep enough to absorb
    the excess (16 MB: the queue peaks at ~6 MB) the two agree within 0.1 %."""
    fab, sch = _tree(1)
    tf = flow.FlowBackend(protocol="ideal").run(sch, fab).time
    small = PacketBackend(header_bytes=0, protocol="ideal").run(sch, fab)
    big = PacketBackend(header_bytes=0, credit_bytes=16e6, protocol="ideal").run(sch, fab)
    assert small.time > 1.04 * tf
    assert float(np.max(small.extra["queue_max"])) < 60e3          # credit-limited queues
    assert big.time == pytest.approx(tf, rel=0.005)
    assert float(np.max(big.extra["queue_max"])) > 1e6


@pytest.mark.parametrize(("nodes", "op"), [(1, "all_reduce"), (2, "all_reduce"),
                                           (2, "all_gather")])
def test_ring_schedules_agree_with_the_flow_backend(nodes: int, op: str) -> None:
    fab = build_cluster("dgx-h100", nodes=nodes)
    sch = build_schedule(fab, op, 64e6, algo="ring", proto="simple")
    tp = PacketBackend(header_bytes=0, protocol="ideal").run(sch, fab).time
    tf = flow.FlowBackend(protocol="ideal").run(sch, fab).time
    assert tp == pytest.approx(tf, rel=0.02)


def test_slingshot_runs_as_credits_with_its_own_packets() -> None:
    """Slingshot's HPC Ethernet: credit-based links (no drops) and
    2048-byte packets with 84 bytes of framing; an uncontended ring all-reduce on two
    quad-GH200 agrees with the flow backend, which charges the same framing."""
    from fabricsim.transport import framing_efficiency

    fab = build_cluster("quad-gh200", nodes=2)
    assert fab.info.transport == "slingshot" and fab.info.lossless
    assert framing_efficiency("slingshot") == pytest.approx(2048 / 2132)
    sch = build_schedule(fab, "all_reduce", 8e6, algo="ring", proto="simple")
    rp = PacketBackend(protocol="ideal").run(sch, fab)
    rf = flow.FlowBackend(protocol="ideal").run(sch, fab)
    assert rp.time == pytest.approx(rf.time, rel=0.02)
    # a 12:1 incast onto one GPU: credits hold the senders back, where TCP's lossy
    # queues overflow on the same fabric
    big = build_cluster("quad-gh200", nodes=4)
    dst, srcs = int(big.gpus[0]), [int(g) for g in big.gpus[4:16]]
    incast = Schedule(steps=(Step(src=srcs, dst=[dst] * 12, nbytes=[4e6] * 12),))
    sl = PacketBackend(protocol="ideal").run(incast, big)
    tcp = PacketBackend(protocol="ideal", transport="tcp").run(incast, big)
    assert sum(sl.extra["drops"].values()) == 0 < sum(tcp.extra["drops"].values())
    packets = rp.extra["data_packets"]
    ib = PacketBackend(protocol="ideal", transport="ib").run(sch, fab)
    assert packets > 1.9 * ib.extra["data_packets"]   # 2048 B payloads against 4096

