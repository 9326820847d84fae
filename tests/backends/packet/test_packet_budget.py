"""Up-front refusal of runs beyond the packet backend's endpoint limit and event budget."""

from __future__ import annotations

import pytest

from fabricsim.backends.packet import PacketBackend
from fabricsim.backends.packet.build import build_state
from fabricsim.errors import SimulationError
from fabricsim.fabric import build_cluster
from fabricsim.jobs.packet import ring_all_reduce, run_packet_scenario
from fabricsim.scenario import Scenario
from fabricsim.schedule import Schedule


def _big(packet: dict[str, object]) -> Scenario:
    # the reviewer's case: 4,096 GPUs, a 1 MB all-reduce = 8,190 rounds of 244-byte packets
    return Scenario.model_validate({
        "cluster": {"system": "dgx-h100", "nodes": 512, "fabric": "roce-400g"},
        "collective": {"op": "all_reduce", "maxbytes": "1MB"}, "packet": packet})


@pytest.fixture
def no_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refusals must come before the event loop starts (checked without a clock)."""
    import fabricsim.backends.packet.backend as backend

    def _must_not_run(*_a: object, **_k: object) -> float:
        raise AssertionError("the event loop started before the run was refused")

    monkeypatch.setattr(backend, "_run", _must_not_run)


def test_too_many_endpoints_is_refused_at_once(no_event_loop: None) -> None:
    with pytest.raises(SimulationError, match=r"packet\.max_endpoints.*4,096 endpoints"):
        run_packet_scenario(_big({}))


def test_many_tiny_transfers_are_priced_up_front(no_event_loop: None) -> None:
    """With the endpoint limit raised, the run must still be refused before it starts:
    33.5 M one-packet transfers cost ~294 M events (the old bytes/MTU x 2 hops estimate
    said 189 M, under the 200 M budget, and the run failed after 242 s)."""
    with pytest.raises(SimulationError, match=r"packet\.event_budget: this run needs at "
                       r"least 29\d,\d{3},\d{3} events"):
        run_packet_scenario(_big({"max_endpoints": 5000}))


@pytest.mark.parametrize(("nodes", "gpn", "nbytes", "mode"), [
    (4, 8, 64e3, "roce"), (4, 8, 64e3, "ib"), (8, 1, 1e6, "tcp"), (16, 1, 16e3, "roce"),
])
def test_estimate_matches_the_events_of_an_uncongested_run(nodes: int, gpn: int,
                                                           nbytes: float, mode: str) -> None:
    """Without pauses, losses or DCQCN cuts, every event is one the estimate counts."""
    fab = build_cluster("dgx-h100", nodes=nodes, gpus_per_node=gpn, fabric="roce-400g")
    sch = Schedule(steps=(ring_all_reduce(fab.gpus, nbytes),))
    be = PacketBackend(transport=mode)
    st = build_state(sch, fab, be.config, mode=mode, seed=0)
    r = be.run(sch, fab)
    assert r.extra["status"] == "ok"
    assert st.events_estimate <= r.extra["events"]
    assert st.events_estimate >= 0.98 * r.extra["events"]


def test_budget_between_estimate_and_old_estimate_refuses_up_front() -> None:
    fab = build_cluster("dgx-h100", nodes=4, fabric="roce-400g")
    sch = Schedule(steps=(ring_all_reduce(fab.gpus, 64e3),))   # 2 KB per transfer
    events = PacketBackend(transport="roce").run(sch, fab).extra["events"]
    with pytest.raises(SimulationError, match="needs at least"):
        PacketBackend(transport="roce", event_budget=int(events * 0.9)).run(sch, fab)


def test_a_faulted_run_is_priced_up_front_too(no_event_loop: None) -> None:
    """Timed faults only add events (two per flap): a flapping link does not let an
    oversized run past the estimate, which is quoted with the limit."""
    flap = {"type": "link_flapping", "link": "leaf0.0->spine0.0", "period": "300us",
            "duty": 0.7}
    with pytest.raises(SimulationError, match=r"packet\.event_budget: this run needs at "
                       r"least 29\d,\d{3},\d{3} events.*200,000,000"):
        run_packet_scenario(_big({"max_endpoints": 5000, "faults": [flap]}))
