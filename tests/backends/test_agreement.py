"""One answer whichever backend: analytic, flow and packet agree within 2 % on every
uncontended schedule (issue 10), over random schedules on several fabrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends import get_backend
from fabricsim.backends.agreement import PROTOCOL_CHOICES, uncontended_schedule
from fabricsim.collectives import build_schedule
from fabricsim.fabric import Fabric, build_cluster
from fabricsim.schedule import Schedule, Step

FABRICS = {
    "h100x2-ib": lambda: build_cluster("dgx-h100", 2),
    "h100x2-roce": lambda: build_cluster("dgx-h100", 2, fabric="roce-400g"),
    "h100x2-tcp": lambda: build_cluster("dgx-h100", 2, fabric="tcp-100g"),
    "h100x2-srd": lambda: build_cluster("dgx-h100", 2, fabric="efa"),
    "a100x1": lambda: build_cluster("dgx-a100", 1),
    "hosts4-ib": lambda: build_cluster("dgx-h100", 4, gpus_per_node=1),
}
#: TCP's slow start (a window of ``init_cwnd`` packets doubling each round trip) is a
#: transport behaviour the fluid backends do not model: their agreement is checked on a
#: connection whose window is already open.
PACKET_OPTIONS: dict[str, dict[str, int]] = {"h100x2-tcp": {"init_cwnd": 1_000_000}}
_BUILT: dict[str, Fabric] = {}


def _fabric(name: str) -> Fabric:
    if name not in _BUILT:
        _BUILT[name] = FABRICS[name]()
    return _BUILT[name]


def _times(fab: Fabric, sch, **packet: int):  # type: ignore[no-untyped-def]
    return {b: get_backend(b, **(packet if b == "packet" else {})).run(sch, fab).time
            for b in ("analytic", "flow", "packet")}


@settings(max_examples=examples(12))
@given(name=st.sampled_from(sorted(FABRICS)), seed=st.integers(0, 2**31 - 1),
       proto=st.sampled_from(PROTOCOL_CHOICES))
def test_backends_agree_on_uncontended_schedules(name: str, seed: int, proto: str) -> None:
    fab = _fabric(name)
    sch = uncontended_schedule(fab, seed, protocol=proto)
    t = _times(fab, sch, **PACKET_OPTIONS.get(name, {}))
    assert t["flow"] == pytest.approx(t["analytic"], rel=1e-9)
    assert t["packet"] == pytest.approx(t["analytic"], rel=0.02)


@pytest.mark.parametrize("name", ["h100x2-ib", "h100x2-roce", "h100x2-tcp", "h100x2-srd"])
def test_one_transfer_one_transport_model(name: str) -> None:
    """One raw 64 MiB transfer between two servers, the wire its only limit: the packet
    backend sends the transport's MTU (fabricsim.transport.DEFAULT_MTU) with its header,
    the framing the analytic and flow backends charge, so the three agree to 0.1 % on
    every transport (measured +0.0052 % ib, +0.0051 % roce, +0.0025 % tcp, +0.0099 % srd;
    with 4096 B packets on every transport tcp was +1.18 % and srd +0.99 %)."""
    fab = _fabric(name)
    one = Step(src=fab.gpus[:1], dst=fab.gpus[8:9], nbytes=np.array([64.0 * 2**20]))
    t = _times(fab, Schedule(steps=(one,)), **PACKET_OPTIONS.get(name, {}))
    assert t["flow"] == pytest.approx(t["analytic"], rel=1e-9)
    assert t["packet"] == pytest.approx(t["analytic"], rel=1e-3)


def test_the_issue_case_one_gpu_per_node_ring() -> None:
    """4 x 1 GPU ring all-reduce of 64 MiB on NDR: was analytic 38.9, flow 38.9, packet
    49.5 GB/s busbw (the packet backend ignored the protocol, the flow backend defaulted to
    'ideal' where the analytic one took Simple)."""
    fab = _fabric("hosts4-ib")
    sch = build_schedule(fab, "all_reduce", 64 * 2**20, algo="ring")
    t = _times(fab, sch)
    assert max(t.values()) / min(t.values()) < 1.005


def test_a_schedule_without_protocol_is_raw_transfers_everywhere() -> None:
    fab = _fabric("h100x2-ib")
    sch = uncontended_schedule(fab, 3, protocol="ideal")
    assert sch.protocol == ""
    t = _times(fab, sch)
    ideal = get_backend("analytic", protocol="ideal").run(sch, fab).time
    assert t["analytic"] == ideal and t["flow"] == pytest.approx(ideal, rel=1e-9)
