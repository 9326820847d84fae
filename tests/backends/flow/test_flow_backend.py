"""Flow backend: closed forms, known results, faults, background traffic, structure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from fabricsim.backends import get_backend
from fabricsim.backends.flow import FlowBackend, host_fat_tree
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.schedule import Schedule, Step

B = 50e9  # host_fat_tree link bandwidth (bytes/s)
A = 1e-6  # per-link latency (s)
S = 2.0**28


def ring(fab: Fabric, nbytes: float = S, order: np.ndarray | None = None) -> Schedule:
    g = fab.gpus if order is None else fab.gpus[order]
    n = g.shape[0]
    st_ = Step(src=g, dst=np.roll(g, -1), nbytes=np.full(n, nbytes / n), repeat=2 * (n - 1))
    return Schedule(steps=(st_,), collective="all_reduce", algorithm="ring")


def ring_closed_form(n: int, nbytes: float = S, bw: float = B, hops: int = 4) -> float:
    return 2 * (n - 1) * (nbytes / n / bw + hops * A)


def test_one_flow_is_latency_plus_size_over_bandwidth() -> None:
    fab = host_fat_tree(16)
    one = Step(src=fab.gpus[:1], dst=fab.gpus[9:10], nbytes=np.array([1e8]))
    r = FlowBackend().run(Schedule(steps=(one,)), fab)
    assert r.time == pytest.approx(4 * A + 1e8 / B, rel=1e-12)
    assert r.link_bytes.sum() == pytest.approx(4e8)


@pytest.mark.parametrize("exploit", [True, False])
def test_contention_free_ring_matches_closed_form(exploit: bool) -> None:
    fab = host_fat_tree(64)
    r = FlowBackend(exploit_repeats=exploit).run(ring(fab), fab)
    assert r.time == pytest.approx(ring_closed_form(64), rel=1e-9)
    assert (r.extra["skipped_epochs"] > 0) == exploit


def test_incast_gives_each_sender_one_nth() -> None:
    fab = host_fat_tree(16)
    n = 7
    st_ = Step(src=fab.gpus[1:n + 1], dst=np.full(n, fab.gpus[0]), nbytes=np.full(n, 1e8))
    r = FlowBackend().run(Schedule(steps=(st_,)), fab)
    tr = r.extra["transfers"]
    lat = np.array([fab.path_latency(fab.route(int(s), int(fab.gpus[0]))) for s in st_.src])
    # every sender gets B/n once all have started: they end within the latency spread
    assert tr["end"].max() == pytest.approx(lat.max() + n * 1e8 / B, rel=1e-3)
    assert tr["end"].max() - tr["end"].min() < 3 * A
    assert r.extra["bottlenecks"][0]["name"] == fab.link_name(int(fab.route(
        int(fab.gpus[1]), int(fab.gpus[0]))[-1]))


def cross_leaf_all_to_all(fab: Fabric, per_leaf: int, nbytes: float) -> Schedule:
    n = fab.n_gpus
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    keep = (a // per_leaf) != (b // per_leaf)
    st_ = Step(src=fab.gpus[a[keep]], dst=fab.gpus[b[keep]], nbytes=np.full(keep.sum(), nbytes))
    return Schedule(steps=(st_,), collective="all_to_all")


@pytest.mark.parametrize("routing", ["spray", "adaptive"])
def test_two_to_one_oversubscription_halves_cross_pod_all_to_all(routing: str) -> None:
    full = host_fat_tree(32, hosts_per_leaf=4, spines=4)
    over = host_fat_tree(32, hosts_per_leaf=4, spines=2)
    sch = cross_leaf_all_to_all(full, 4, 1e7)
    t_full = FlowBackend(routing=routing).run(sch, full).time
    t_over = FlowBackend(routing=routing).run(sch, over).time
    assert t_over / t_full == pytest.approx(2.0, rel=0.02)


def test_ecmp_oversubscribed_is_at_least_twice_as_slow() -> None:
    full = host_fat_tree(32, hosts_per_leaf=4, spines=4)
    over = host_fat_tree(32, hosts_per_leaf=4, spines=2)
    sch = cross_leaf_all_to_all(full, 4, 1e7)
    ratio = FlowBackend().run(sch, over).time / FlowBackend().run(sch, full).time
    assert 1.8 < ratio < 2.6


def test_degraded_link_slows_ring_by_its_factor() -> None:
    fab = host_fat_tree(16)
    base = FlowBackend().run(ring(fab), fab)
    name = fab.link_name(int(fab.route(int(fab.gpus[5]), int(fab.gpus[6]))[0]))
    faulty = FlowBackend(faults=[{"type": "link_degraded", "link": name, "factor": 0.25}])
    r = faulty.run(ring(fab), fab)
    expect = 2 * 15 * max(S / 16 / (0.25 * B) + 2 * A, S / 16 / B + 4 * A)
    assert r.time == pytest.approx(expect, rel=1e-9)
    assert r.time / base.time == pytest.approx(4.0, rel=0.02)  # latency dilutes it a bit
    assert r.extra["bottlenecks"][0]["name"] == name
    assert r.extra["faults"] == [f"{name} degraded to 0.25 of capacity"]


def interleaved(n: int, per_leaf: int) -> np.ndarray:
    """A ring order in which every neighbour sits on another leaf."""
    leaves = n // per_leaf
    return np.array([(i % leaves) * per_leaf + i // leaves for i in range(n)])


def test_more_queue_pairs_reduce_ecmp_collisions() -> None:
    fab = host_fat_tree(64, hosts_per_leaf=8, spines=8)
    sch = ring(fab, order=interleaved(64, 8))
    t = {q: FlowBackend(qps=q).run(sch, fab).time for q in (1, 4, 16)}
    ideal = FlowBackend(routing="spray").run(sch, fab).time
    assert ideal == pytest.approx(ring_closed_form(64), rel=1e-6)
    assert t[1] > 1.5 * ideal  # hash collisions on leaf uplinks
    assert t[16] < t[4] < t[1]
    assert t[16] < 0.75 * t[1]  # Meta: up to ~40 % faster with more QPs


def test_repeats_shortcut_is_exact_with_stragglers_and_flaps() -> None:
    fab = host_fat_tree(16)
    faults = [{"type": "slow_gpu", "gpu": 3, "delay": "30us"},
              {"type": "link_flapping", "kind": "leaf-spine", "index": 1, "period": "3ms",
               "duty": 0.6, "factor": 0.1, "start": "1ms"}]
    sch = ring(fab)
    fast = FlowBackend(faults=faults).run(sch, fab)
    slow = FlowBackend(faults=faults, exploit_repeats=False).run(sch, fab)
    assert fast.time == pytest.approx(slow.time, rel=1e-9)
    np.testing.assert_allclose(fast.link_bytes, slow.link_bytes, rtol=1e-9)
    np.testing.assert_allclose(fast.extra["rep_end"][0], slow.extra["rep_end"][0], rtol=1e-9)
    np.testing.assert_allclose(fast.extra["critical_time"], slow.extra["critical_time"],
                               rtol=1e-9, atol=1e-15)
    tr_f, tr_s = fast.extra["transfers"], slow.extra["transfers"]
    assert (tr_f["rep"] == 29).all() and (tr_s["rep"] == 29).all()
    np.testing.assert_allclose(tr_f["end"], tr_s["end"], rtol=1e-9)
    base = FlowBackend().run(sch, fab).time
    assert fast.time > base


def test_straggler_delay_adds_per_repetition() -> None:
    fab = host_fat_tree(16)
    r = FlowBackend(faults=[{"type": "slow_gpu", "gpu": 0, "delay": 5e-5}]).run(ring(fab), fab)
    # rank 0 sends within its leaf (2 links): each repetition lasts 50 us + 2 links + data
    assert r.time == pytest.approx(30 * (5e-5 + 2 * A + S / 16 / B), rel=1e-9)


def test_link_down_reroutes_and_missing_route_stalls() -> None:
    fab = host_fat_tree(16)
    sch = ring(fab)
    spine_links = [f"leaf0->spine{s}" for s in range(4)]
    r = FlowBackend(faults=[{"type": "link_down", "link": spine_links[0]}]).run(sch, fab)
    assert r.time == pytest.approx(ring_closed_form(16), rel=1e-9)
    down = FlowBackend(faults=[{"type": "link_down", "link": n} for n in spine_links])
    r2 = down.run(sch, fab)
    assert math.isinf(r2.time)
    assert r2.extra["stalled_steps"] == [0]
    assert r2.extra["stalled_transfers"] == [(0, 3)]


def test_flapping_link_with_zero_capacity_stalls_then_recovers() -> None:
    fab = host_fat_tree(16)
    name = fab.link_name(int(fab.route(int(fab.gpus[0]), int(fab.gpus[1]))[0]))
    fl = FlowBackend(faults=[{"type": "link_flapping", "link": name, "period": "2ms",
                              "duty": 0.5}])
    r = fl.run(ring(fab), fab)
    base = ring_closed_form(16)
    # data moves only half of the time on the ring's slowest member
    assert 1.6 * base < r.time < 2.4 * base


def test_background_traffic_and_weights() -> None:
    fab = host_fat_tree(16)
    sch = ring(fab)
    base = FlowBackend().run(sch, fab).time
    bg = [{"pattern": "incast", "src": [8, 9, 10], "dst": [1], "nbytes": "1GB"}]
    t1 = FlowBackend(background=bg).run(sch, fab).time
    t3 = FlowBackend(background=[{**bg[0], "weight": 3.0}]).run(sch, fab).time
    assert base < t1 < t3
    # host 1's downlink: ring flow weight 1 against 3 background flows
    assert t1 == pytest.approx(2 * 15 * (S / 16 / (B / 4) + 2 * A), rel=0.01)


def test_bytes_conserved_and_timeline_export(tmp_path: object) -> None:
    import pyarrow.parquet as pq

    fab = host_fat_tree(16)
    sch = ring(fab, order=interleaved(16, 4))
    r = FlowBackend(record_timeline=True, qps=2).run(sch, fab)
    st_ = sch.steps[0]
    expect = np.zeros(fab.n_links)
    for q in range(2):
        from fabricsim.backends.flow.routing import expand

        ex = expand(fab, st_.src, st_.dst, st_.nbytes, qps=2)
        expect = np.bincount(ex.links, weights=np.repeat(ex.size, np.diff(ex.flow_ptr)),
                             minlength=fab.n_links) * st_.repeat
        del q
    np.testing.assert_allclose(r.link_bytes, expect, rtol=1e-9)
    tl = r.extra["timeline"]
    np.testing.assert_allclose(tl.bytes[-1], r.link_bytes[tl.links], rtol=1e-9)
    assert (tl.utilization() <= 1 + 1e-9).all()
    paths = tl.write(tmp_path)  # type: ignore[arg-type]
    tab = pq.read_table(paths[0])
    assert set(tab.column_names) >= {"t_start", "link", "name", "utilization"}
    # every simulated repetition is recorded; skipped (identical) ones are not
    assert len(r.extra["transfers"]["end"]) == 16 * (30 - r.extra["skipped_epochs"])


@settings(max_examples=examples(15))
@given(st.integers(0, 63), st.floats(0.05, 1.0), st.floats(1.0, 4.0), st.integers(0, 3))
def test_adding_capacity_never_slows_a_collective(link: int, f: float, g: float,
                                                  seed: int) -> None:
    fab = host_fat_tree(16)
    sch = ring(fab, nbytes=2.0**24, order=np.random.default_rng(seed).permutation(16))
    slow = FlowBackend(seed=seed).run(sch, fab.with_links_scaled([link], f)).time
    fast = FlowBackend(seed=seed).run(sch, fab.with_links_scaled([link], f * g)).time
    assert fast <= slow * (1 + 1e-9)


def test_registry_and_bad_options() -> None:
    b = get_backend("flow", routing="adaptive", qps=2)
    assert isinstance(b, FlowBackend) and b.name == "flow"
    with pytest.raises(ConfigError, match="routing"):
        FlowBackend(routing="random")
    fab = host_fat_tree(4)
    with pytest.raises(ConfigError, match=r"faults\[0\].link"):
        FlowBackend(faults=[{"type": "link_down", "link": "gpu0->nowhere"}]).run(ring(fab), fab)
    with pytest.raises(ConfigError, match="period"):
        FlowBackend(faults=[{"type": "link_flapping", "kind": "nic-leaf"}]).run(ring(fab), fab)
