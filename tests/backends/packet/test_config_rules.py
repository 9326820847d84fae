"""Physical-validity rules of the packet section (backends/packet/config.py PACKET_RULES):
one case per rule, each asserting the error names the field, the reason and the rule."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends.packet.config import (
    PACKET_RULES,
    PacketConfig,
    extreme_violations,
    parse_packet_config,
)
from fabricsim.errors import ConfigError, SimulationError

#: rule name -> (packet overrides that break it, field named, words of the reason)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "finite": ({"switch_buffer": float("nan")}, "packet.switch_buffer", "finite"),
    "size-maximum": ({"switch_buffer": "1TB"}, "packet.switch_buffer", "deeper buffer"),
    "transfer-maximum": ({"traffic": {"nbytes": "2TiB"}}, "packet.traffic.nbytes",
                         "GPU's memory"),
    "time-maximum": ({"until": 120}, "packet.until", "milliseconds to seconds"),
    "rate-maximum": ({"dcqcn": {"min_rate": "2Tbps"}}, "packet.dcqcn.min_rate",
                     "no NIC port is faster"),
    "pfc-xon-below-xoff": ({"pfc": {"xoff": "10KB", "xon": "200KB"}}, "packet.pfc.xon",
                           "never resume"),
    "pfc-xoff-one-packet": ({"pfc": {"xoff": 1000}}, "packet.pfc.xoff",
                            "middle of every packet"),
    "pfc-headroom-one-packet": ({"pfc": {"headroom": 100}}, "packet.pfc.headroom",
                                "drop lossless packets"),
    "pfc-fits-buffer": ({"pfc": {"xoff": "10MB"}, "nic_buffer": "4MB"}, "packet.nic_buffer",
                        "must fit in the buffer"),
    "buffer-one-packet": ({"lossy_queue": 1000}, "packet.lossy_queue",
                          "drops every packet"),
    "ecn-kmin-below-kmax": ({"ecn": {"kmin": "300KB", "kmax": "200KB"}}, "packet.ecn.kmin",
                            "no ramp"),
    "ecn-kmin-in-buffer": ({"ecn": {"kmin": "40MB", "kmax": "50MB"}}, "packet.ecn.kmin",
                           "never mark"),
    "timers-positive": ({"dcqcn": {"cnp_interval": 0}}, "packet.dcqcn.cnp_interval",
                        "tick in microseconds"),
    "rto-minimum": ({"rto": "100ns"}, "packet.rto", "before any ACK can return"),
    "dcqcn-byte-counter-one-packet": ({"dcqcn": {"byte_counter": 0}},
                                      "packet.dcqcn.byte_counter", "rate increase"),
    "dcqcn-rai-below-rhai": ({"dcqcn": {"rai": "400Mbps", "rhai": "40Mbps"}},
                             "packet.dcqcn.rai", "hyper increase"),
    "credits-one-packet": ({"credit_bytes": 0}, "packet.credit_bytes",
                           "never let the link send"),
    "stuck-receiver-times-ordered": ({"stuck_receiver": {"rank": 1, "start": "1ms",
                                                         "end": "10us"}},
                                     "packet.stuck_receiver.end", "recover before it hangs"),
    "stuck-receiver-one-endpoint": ({"stuck_receiver": {"rank": 1, "node": "leaf0"}},
                                    "packet.stuck_receiver", "named once"),
    "traffic-moves-bytes": ({"traffic": {"pattern": "incast", "nbytes": 0}},
                            "packet.traffic.nbytes", "moves no data"),
    "incast-receiver-not-sender": ({"traffic": {"pattern": "incast", "ranks": [0, 1, 2],
                                                "receiver": 0}},
                                   "packet.traffic.ranks", "never leaves its GPU"),
    "traffic-ranks-exist": ({"traffic": {"pattern": "incast", "ranks": [1, 2],
                                         "senders": 3}},
                            "packet.traffic.senders", "one sender per listed rank"),
    "until-after-start": ({"until": 0}, "packet.until", "simulates nothing"),
    "dscp-valid": ({"classes": [{"name": "a", "dscp": [64]}]}, "packet.classes[0].dscp",
                   "6-bit field"),
    "cwnd-within-window": ({"window": 4, "init_cwnd": 10}, "packet.init_cwnd",
                           "largest window"),
    "uet-trim-in-queue": ({"transport": "uet", "uet": {"trim_threshold_bytes": "2MiB"}},
                          "packet.uet.trim_threshold_bytes", "never trims"),
}


def test_every_packet_rule_has_a_case() -> None:
    hard = {r.name for r in PACKET_RULES if not r.extreme}
    assert set(CASES) == hard


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_refuses_with_field_and_reason(name: str) -> None:
    data, field, reason = CASES[name]
    with pytest.raises(ConfigError) as e:
        parse_packet_config(data)
    assert e.value.field == field, str(e.value)
    assert reason in str(e.value) and f"rule {name}" in str(e.value)


def test_rules_apply_to_configs_built_in_python() -> None:
    with pytest.raises(ConfigError, match=r"packet\.pfc\.xon.*never resume"):
        PacketConfig(pfc={"xoff": 10_000, "xon": 200_000})


@pytest.mark.parametrize("data", [
    {"ecn": {"kmin": "100KB", "kmax": "100KB", "pmax": 1}},      # DCTCP-style step marking
    {"pfc": {"xoff": "256KB", "xon": "200KB", "headroom": "100KB"}},
    {"credit_bytes": 4122, "transport": "ib"},                  # exactly one IB packet
    {"stuck_receiver": {"rank": 1, "start": 0, "end": "1us"}},
    {"until": "1us", "traffic": {"start": 0}},
])
def test_edges_that_exist_are_accepted(data: dict[str, Any]) -> None:
    parse_packet_config(data)


@pytest.mark.parametrize("transport", ["ib", "roce", "tcp", "srd", "uet"])
def test_packets_are_the_transport_model_of_every_backend(transport: str) -> None:
    """MTU and header bytes come from fabricsim.transport, as the analytic and flow
    backends' framing does; an mtu that is set wins on every transport."""
    from fabricsim.backends.packet import config
    from fabricsim.transport import DEFAULT_MTU, TRANSPORT_HEADER_BYTES

    assert config.TRANSPORT_HEADER_BYTES is TRANSPORT_HEADER_BYTES
    cfg = PacketConfig()
    assert cfg.mtu_for(transport) == DEFAULT_MTU[transport]
    assert cfg.header_for(transport) == TRANSPORT_HEADER_BYTES[transport]
    assert PacketConfig(mtu=1500).mtu_for(transport) == 1500
    assert parse_packet_config({"transport": transport}).mtu_for(transport) == \
        DEFAULT_MTU[transport]


def test_an_unset_mtu_stays_unset_through_the_backend() -> None:
    from fabricsim.backends.packet import PacketBackend

    assert PacketBackend(config=PacketConfig(paths=2)).config.mtu_for("tcp") == 8948
    assert PacketBackend(config=PacketConfig(mtu=4096)).config.mtu_for("tcp") == 4096
    assert PacketBackend(config={"paths": 2}, transport="srd").config.mtu_for("srd") == 8192


def test_rules_on_one_packet_judge_the_packet_that_runs() -> None:
    """Without packet.transport the section is read with InfiniBand's packet (4122 B on
    the wire); a run on a TCP fabric sends 8948 + 90 B packets and checks them again."""
    from fabricsim.backends.packet import PacketBackend
    from fabricsim.fabric import build_cluster
    from fabricsim.schedule import Schedule, Step

    small = {"pfc": {"xoff": "8KB"}}
    with pytest.raises(ConfigError, match=r"packet\.pfc\.xoff: 8 KB .* \(9\.038 KB on the "
                       r"wire\).*rule pfc-xoff-one-packet"):
        parse_packet_config({**small, "transport": "tcp"})
    fab = build_cluster("dgx-h100", 2, gpus_per_node=1, fabric="tcp-100g")
    sch = Schedule(steps=(Step(src=fab.gpus[:1], dst=fab.gpus[1:2], nbytes=[1e5]),))
    be = PacketBackend(config=small)                     # IB's packet: accepted
    with pytest.raises(ConfigError) as e:
        be.run(sch, fab)
    assert e.value.field == "packet.pfc.xoff" and "rule pfc-xoff-one-packet" in str(e.value)
    assert PacketBackend(config={**small, "mtu": 4096}).run(sch, fab).extra["complete"]
    assert be.config.transport is None                   # the backend's own is untouched


def test_equal_thresholds_refused_unless_step_marking() -> None:
    with pytest.raises(ConfigError, match=r"packet\.ecn\.kmin: 200 KB is not below "
                       r"packet\.ecn\.kmax \(200 KB"):
        parse_packet_config({"ecn": {"kmin": "200KB", "kmax": "200KB"}})


def test_overflowing_size_string_is_not_a_traceback() -> None:
    with pytest.raises(ConfigError, match=r"packet\.switch_buffer.*finite"):
        parse_packet_config({"switch_buffer": "1e400"})


def test_loss_above_one_percent_is_extreme_not_invalid() -> None:
    cfg = parse_packet_config({"loss_rate": 0.5})
    [(rule, field, detail)] = extreme_violations(cfg)
    assert (rule.name, field) == ("loss-plausible", "packet.loss_rate") and "50.0%" in detail
    assert extreme_violations(parse_packet_config({"loss_rate": 0.01})) == []


# ---------------------------------------------------------------- property

def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


_time = st.floats(1e-6, 2e-4, allow_nan=False)


@st.composite
def _packet(draw: st.DrawFn) -> dict[str, Any]:
    """A packet section near the edges of the rules, valid or not (about half pass);
    ``None`` leaves a default."""
    xoff = draw(st.integers(4_000, 1_000_000))
    kmin = draw(st.integers(0, 2_000_000))
    kmax = kmin + draw(st.integers(1, 2_000_000))
    t0 = draw(_time)
    raw: dict[str, Any] = {
        "fabric": draw(st.sampled_from([None, "roce-400g", "ib-ndr"])),
        "transport": draw(st.sampled_from([None, "roce", "tcp", "ib"])),
        "mtu": draw(_maybe(st.sampled_from([1024, 2048, 4096, 1500]))),
        "switch_buffer": draw(_maybe(st.integers(500_000, 40_000_000))),
        "credit_bytes": draw(_maybe(st.integers(3_000, 500_000))),
        "loss_rate": draw(st.sampled_from([0.0, 0.0, 1e-3, 0.03])),
        "rto": draw(_maybe(_time)),
        "until": draw(_maybe(st.floats(1e-6, 1e-3, allow_nan=False))),
        "pfc": {"xoff": xoff, "xon": draw(_maybe(st.integers(0, xoff + 10_000))),
                "headroom": draw(_maybe(st.integers(3_000, 1_000_000))),
                "watchdog": {"enabled": draw(st.booleans()), "detect": draw(_time)}},
        "ecn": {"kmin": kmin, "kmax": kmax, "pmax": draw(st.sampled_from([0.01, 0.2, 1.0]))},
        "dcqcn": {"enabled": draw(st.booleans()), "timer": draw(_time),
                  "cnp_interval": draw(_time),
                  "byte_counter": draw(st.integers(4_000, 10_000_000))},
        "stuck_receiver": draw(_maybe(st.fixed_dictionaries({
            "rank": st.integers(0, 3), "start": st.just(t0),
            "end": st.just(t0 + draw(st.floats(0, 5e-4, allow_nan=False)))}))),
        "traffic": {"pattern": draw(st.sampled_from(["incast", "pairs", "collective"])),
                    "nbytes": draw(st.integers(1, 300_000)),
                    "start": draw(st.sampled_from([0.0, 1e-6, 5e-5]))},
        "event_budget": 3_000_000,
    }

    def prune(d: dict[str, Any]) -> dict[str, Any]:
        return {k: prune(v) if isinstance(v, dict) else v for k, v in d.items()
                if v is not None}
    return prune(raw)


_INCAST = {"mtu": 1024, "loss_rate": 0.0, "pfc": {"xoff": 4000},
           "ecn": {"kmin": 0, "kmax": 1, "pmax": 0.01},
           "traffic": {"pattern": "incast", "nbytes": 59393, "start": 0.0},
           "event_budget": 3_000_000}


@settings(max_examples=examples(12), deadline=None)
@given(packet=_packet(), nodes=st.integers(2, 4))
@example(packet={**_INCAST, "rto": 1e-6}, nodes=4)  # the timer gives up under incast
@example(packet={**_INCAST, "pfc": {"xoff": 4000, "headroom": 3000}}, nodes=4)
@example(packet={**_INCAST, "mtu": 4096, "pfc": {"xoff": 4150}}, nodes=2)  # IB's, not RoCE's
def test_a_scenario_that_validates_runs_inside_its_budget(packet: dict[str, Any],
                                                          nodes: int) -> None:
    """Whatever passes the rules runs to the end without a traceback; the only refusal
    left is the event budget (a clean SimulationError naming packet.event_budget).
    Misconfigurations the rules let through are modelled failure modes, reported as
    such: a retransmission timer shorter than the queueing delay gives up
    (``retry_exceeded``, the flow named); headroom set below the in-flight bytes of a
    link drops lossless packets. With the default headroom no lossless packet drops."""
    from fabricsim.jobs.packet import run_packet_scenario
    from fabricsim.scenario import Scenario

    try:
        sc = Scenario.model_validate({
            "cluster": {"system": "dgx-h100", "nodes": nodes, "gpus_per_node": 1,
                        "fabric": "roce-400g"}, "packet": packet})
    except ConfigError:
        return
    try:
        run = run_packet_scenario(sc, force=True)
    except SimulationError as e:
        assert e.field == "packet.event_budget", str(e)
        return
    except ConfigError as e:  # a rule on one packet, judged again with the fabric's transport
        assert "transport" not in packet and "one packet" in str(e), str(e)
        return
    s = run.summary
    assert s["status"] in ("ok", "until", "retry_exceeded")
    assert s["events"] <= packet["event_budget"]
    if s["status"] == "retry_exceeded":
        assert "rto" in packet or packet["loss_rate"] > 0 or "stuck_receiver" in packet
        assert s["retry_exceeded"]["flow"] >= 0
    if s["status"] == "ok":
        assert s["complete"]
        if "headroom" not in packet.get("pfc", {}):
            assert s["drops"]["lossless"] == 0
    if s["drops"]["lossless"] > 0:  # set below what this fabric needs: said before the run
        assert any(w.startswith("packet.pfc.headroom") for w in s["warnings"]), s



def _incast_run(packet: dict[str, Any]) -> dict[str, Any]:
    from fabricsim.jobs.packet import run_packet_scenario
    from fabricsim.scenario import Scenario

    sc = Scenario.model_validate({
        "cluster": {"system": "dgx-h100", "nodes": 4, "gpus_per_node": 1,
                    "fabric": "roce-400g"}, "packet": {**_INCAST, **packet}})
    return run_packet_scenario(sc, force=True).summary  # type: ignore[no-any-return]


def test_settings_that_do_not_suit_the_fabric_are_warned_about() -> None:
    """Headroom above one packet but below the longest link's in-flight bytes, and a
    retransmission timer below the base round trip, pass the rules (they need the
    fabric to judge) and are named before the run's outcome shows them."""
    low = _incast_run({"pfc": {"xoff": 4000, "headroom": 3000}})
    assert [w.split(":")[0] for w in low["warnings"]] == ["packet.pfc.headroom"]
    assert low["drops"]["lossless"] > 0
    fast = _incast_run({"rto": 2e-6})
    assert [w.split(":")[0] for w in fast["warnings"]] == ["packet.rto"]
    assert fast["timeouts"] > 0
    assert _incast_run({})["warnings"] == []
    assert _incast_run({"pfc": {"xoff": 4000, "headroom": 200_000}, "rto": 1e-3}
                       )["warnings"] == []
