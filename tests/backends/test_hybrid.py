"""The hybrid backend (issue 39): a flow run corrected by packet runs of its congested
links, checked against the full packet backend on fabrics small enough to run it."""

from __future__ import annotations

import numpy as np
import pytest

from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.hybrid import HybridBackend
from fabricsim.backends.packet import PacketBackend
from fabricsim.errors import ConfigError
from fabricsim.schedule import Schedule, Step


def _incast(n_senders: int = 12) -> tuple[Schedule, object]:
    """Hosts of three other leaves send 200 kB each to host 0, over RoCE."""
    fab = host_fat_tree(16, hosts_per_leaf=4, bandwidth=12.5e9)
    g = np.asarray(fab.gpus)
    st = Step(src=g[4:4 + n_senders], dst=np.full(n_senders, g[0]),
              nbytes=np.full(n_senders, 2e5))
    return Schedule(steps=(st,)), fab


def test_incast_corrected_toward_the_packet_run() -> None:
    """The flow run finishes every incast sender together (fair shares); at packet level
    DCQCN and PFC let some finish early and others late. The hybrid simulates the
    incast link and moves each completion toward the packet run's: its spread of
    completions is the packet run's to within 10 %, and the flow run's is zero."""
    sch, fab = _incast()
    hy = HybridBackend(links=4, transport="roce").run(sch, fab)
    pk = PacketBackend(transport="roce").run(sch, fab)
    assert "leaf0->gpu0" in [s["link"] for s in hy.extra["links"]]
    f = hy.extra["fct"]
    fct_pk = np.asarray(pk.extra["fct"]["end"]) - np.asarray(pk.extra["fct"]["start"])
    spread = float(np.ptp(fct_pk))
    assert float(np.ptp(f["flow"])) < 0.01 * spread
    assert float(np.ptp(f["hybrid"])) == pytest.approx(spread, rel=0.1)
    for q in (0.1, 0.5, 0.99):
        err_h = abs(np.quantile(f["hybrid"], q) / np.quantile(fct_pk, q) - 1)
        err_f = abs(np.quantile(f["flow"], q) / np.quantile(fct_pk, q) - 1)
        assert err_h <= max(err_f, 0.05)


def test_a_pool_gives_the_same_answer() -> None:
    sch, fab = _incast(8)
    one = HybridBackend(links=3, transport="roce").run(sch, fab)
    two = HybridBackend(links=3, transport="roce", workers=2).run(sch, fab)
    np.testing.assert_array_equal(one.extra["fct"]["hybrid"], two.extra["fct"]["hybrid"])
    assert one.time == two.time


def test_uncongested_links_are_not_simulated() -> None:
    """A shift inside one leaf (one transfer per link at a time) leaves nothing to
    simulate: the hybrid is the flow run."""
    fab = host_fat_tree(16, hosts_per_leaf=4, bandwidth=12.5e9)
    g = np.asarray(fab.gpus)
    sch = Schedule(steps=(Step(src=g[:4], dst=g[[1, 2, 3, 0]], nbytes=np.full(4, 1e5)),))
    hy = HybridBackend(transport="roce").run(sch, fab)
    assert hy.extra["links_simulated"] == 0
    assert hy.time == hy.extra["flow_time"]


@pytest.mark.parametrize("kw, field", [({"links": 0}, "links"), ({"workers": 0}, "workers"),
                                       ({"min_flows": 1}, "min_flows")])
def test_bad_settings(kw: dict[str, int], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        HybridBackend(**kw)  # type: ignore[arg-type]
    assert e.value.field == field


def test_ray_gives_the_same_answer() -> None:
    pytest.importorskip("ray")
    sch, fab = _incast(8)
    on_ray = HybridBackend(links=3, transport="roce", ray_address="local").run(sch, fab)
    here = HybridBackend(links=3, transport="roce").run(sch, fab)
    np.testing.assert_array_equal(on_ray.extra["fct"]["hybrid"], here.extra["fct"]["hybrid"])


def test_bench_takes_the_hybrid_backend(capsys) -> None:  # type: ignore[no-untyped-def]
    """``bench --backend hybrid``: the nccl-tests rows from the corrected flow run. Two
    servers' all-to-all is NIC-bound (each NIC's transfers share its send queue: no
    congestion for the packet level to add), so it equals the flow backend's row."""
    import json

    from fabricsim.cli.app import main

    args = ["bench", "alltoall", "--nodes", "2", "--fabric", "roce-400g", "-b", "16M",
            "-e", "16M", "--json", "-q"]
    assert main([*args, "--backend", "hybrid"]) == 0
    hy = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert main([*args, "--backend", "flow"]) == 0
    fl = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert hy["time_us"] == pytest.approx(fl["time_us"], rel=0.02)


def test_an_unreachable_ray_cluster_is_named() -> None:
    pytest.importorskip("ray")
    sch, fab = _incast(8)
    with pytest.raises(ConfigError) as e:
        HybridBackend(links=2, transport="roce", ray_address="ray://nowhere:1").run(sch, fab)
    assert e.value.field == "ray_address" and "ray://host:10001" in e.value.message
