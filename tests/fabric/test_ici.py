"""TPU slices: shapes the pod allows, the ICI torus, its routes and its published figures."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from fabricsim.errors import ConfigError
from fabricsim.fabric import LinkKind, build_cluster
from fabricsim.fabric.ici import PodRules, legal_shapes, slice_wrap, twistable

V5P = PodRules((2, 2, 1), (16, 16, 24), 4, True)
V5E = PodRules((2, 4), (16, 16), 0, False)


@pytest.mark.parametrize(("system", "nodes", "shape", "wrap"), [
    ("tpu-v5p", 1, (2, 2, 1), (False, False, False)),
    ("tpu-v5p", 8, (2, 4, 4), (False, False, False)),      # sub-cube: a mesh
    ("tpu-v5p", 16, (4, 4, 4), (True, True, True)),        # one cube: a torus
    ("tpu-v5p", 32, (4, 4, 8), (True, True, True)),
    ("tpu-v5e", 32, (16, 16), (True, True)),               # the whole 2-D pod
    ("tpu-v5e", 16, (8, 16), (False, True)),               # only the full edge wraps
    ("tpu-v4", 1024, (16, 16, 16), (True, True, True)),
])
def test_default_slice_is_the_compact_legal_shape(system: str, nodes: int, shape: tuple[int, ...],
                                                 wrap: tuple[bool, ...]) -> None:
    fab = build_cluster(system, nodes=nodes)
    assert fab.info.ici_slice == shape
    assert tuple(fab.info.extra["ici"]["wrap"]) == wrap
    assert fab.info.nvlink_domain_gpus == fab.n_gpus
    per_chip = {2: 4, 3: 6}[len(shape)]
    assert fab.links_of(LinkKind.ICI).size <= per_chip * fab.n_gpus


def test_the_pod_rules() -> None:
    assert legal_shapes(V5P, 128)[0] == (4, 4, 8)
    assert legal_shapes(V5P, 96) == []  # not whole cubes, and more than one cube
    assert twistable((4, 4, 8), V5P) and twistable((8, 16, 16), V5P)
    assert not twistable((8, 8, 8), V5P) and not twistable((16, 16, 24), V5P)
    assert slice_wrap((8, 8), V5E) == (False, False)
    assert legal_shapes(V5P, 48) == []  # 4x4x3: below a cube, dimensions are powers of 2


@pytest.mark.parametrize(("system", "nodes", "tb_s", "rel"), [
    ("tpu-v5e", 32, 1.6, 1e-9),   # Cloud TPU v5e page: bisection 1.6 TB/s per pod
    ("tpu-v6e", 32, 3.2, 1e-9),   # Cloud TPU v6e page: 3.2 TB/s per pod
    ("tpu-v4", 1024, 24.0, 0.05),  # Cloud TPU v4 page: 24 TB/s per 4,096-chip pod
])
def test_pod_bisection_matches_google(system: str, nodes: int, tb_s: float, rel: float) -> None:
    fab = build_cluster(system, nodes=nodes)
    assert fab.info.extra["ici"]["bisection_bandwidth"] / 1e12 == pytest.approx(tb_s, rel=rel)


def test_twisting_raises_the_bisection() -> None:
    plain = build_cluster("tpu-v5p", nodes=32).info.extra["ici"]["bisection_bandwidth"]
    twist = build_cluster("tpu-v5p", nodes=32, params={"ici_twisted": True}
                          ).info.extra["ici"]["bisection_bandwidth"]
    assert twist == pytest.approx(2 * plain)


def _ici_graph(fab):  # type: ignore[no-untyped-def]
    g = nx.DiGraph()
    for link in fab.links_of(LinkKind.ICI):
        g.add_edge(int(fab.link_src[link]), int(fab.link_dst[link]))
    return g


@pytest.mark.parametrize("params", [{}, {"ici_twisted": True}, {"ici_slice": "2x4x4"}])
def test_routes_are_contiguous_minimal_and_stay_on_ici(params: dict[str, object]) -> None:
    nodes = 8 if params.get("ici_slice") else 32
    fab = build_cluster("tpu-v5p", nodes=nodes, params=params)
    n = fab.n_gpus
    src, dst = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    keep = src != dst
    src, dst = fab.gpus[src[keep]], fab.gpus[dst[keep]]
    hashes = np.arange(src.size, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    paths = fab.router.route_many(src, dst, hashes, fab.link_up)
    dist = dict(nx.all_pairs_shortest_path_length(_ici_graph(fab)))
    for i in range(src.size):
        row = paths.row(i)
        assert (fab.link_kind[row] == LinkKind.ICI).all()
        assert (fab.link_src[row[1:]] == fab.link_dst[row[:-1]]).all()
        assert fab.link_src[row[0]] == src[i] and fab.link_dst[row[-1]] == dst[i]
        assert row.size == dist[int(src[i])][int(dst[i])]


def test_a_down_link_is_routed_around() -> None:
    fab = build_cluster("tpu-v5p", nodes=16)
    a, b = int(fab.gpus[0]), int(fab.gpus[63])
    first = fab.route(a, b)
    down = fab.with_links_down([int(first[0])])
    other = down.route(a, b)
    assert int(first[0]) not in other.tolist() and down.link_up[other].all()


def test_slices_beyond_one_are_joined_by_the_dcn() -> None:
    fab = build_cluster("tpu-v5p", nodes=32, params={"ici_slice": "4x4x4"})
    assert fab.info.extra["ici"]["slices"] == 2
    across = fab.route(int(fab.gpus[0]), int(fab.gpus[64]))
    kinds = {LinkKind(int(k)).label for k in fab.link_kind[across]}
    assert "ici" not in kinds and "nic-leaf" in kinds


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"system": "tpu-v5p", "nodes": 24, "params": {"ici_slice": "4x6x4"}}, "params.ici_slice"),
    ({"system": "tpu-v5p", "nodes": 32, "params": {"ici_slice": "4x4"}}, "params.ici_slice"),
    ({"system": "tpu-v5p", "nodes": 32, "params": {"ici_slice": "4x4x-8"}}, "params.ici_slice"),
    ({"system": "tpu-v5p", "nodes": 32, "params": {"ici_slice": "16x16x32"}},
     "params.ici_slice"),
    ({"system": "tpu-v5p", "nodes": 24, "params": {"ici_slice": "4x4x8"}}, "nodes"),
    ({"system": "tpu-v5p", "nodes": 128, "params": {"ici_twisted": True}}, "params.ici_twisted"),
    ({"system": "tpu-v5p", "nodes": 32, "params": {"ici_twisted": "yes"}}, "params.ici_twisted"),
    ({"system": "tpu-v5e", "nodes": 64}, "nodes"),
    ({"system": "tpu-v5p", "nodes": 4, "gpus_per_node": 2}, "gpus_per_node"),
    ({"system": "dgx-h100", "nodes": 4, "params": {"ici_slice": "4x4x4"}}, "params.ici_slice"),
    ({"system": "tpu-v5p", "nodes": 4, "params": {"nvlink_domain": 16}}, "params.nvlink_domain"),
])
def test_illegal_slices_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_cluster(**kwargs)  # type: ignore[arg-type]
    assert e.value.field == field
