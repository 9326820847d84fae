"""Invariant checks shared by the fabric tests."""

from __future__ import annotations

import numpy as np

from fabricsim.fabric import Fabric, LinkKind, NodeKind, Paths

SWITCH_KINDS = (NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE, NodeKind.ROUTER,
                NodeKind.STORAGE_SWITCH)


def ports_used(fab: Fabric) -> np.ndarray:
    """Ports in use per node: lanes summed over its outgoing links (one per cable)."""
    return np.bincount(fab.link_src, weights=fab.link_lanes, minlength=fab.n_nodes)


def assert_ports_within_radix(fab: Fabric, radix: int, kinds=SWITCH_KINDS) -> None:
    used = ports_used(fab)
    for kind in kinds:
        nodes = fab.nodes_of(kind)
        if nodes.size:
            worst = int(used[nodes].max())
            assert worst <= radix, f"{kind.label} uses {worst} ports > radix {radix}"


def assert_reverse_pairs(fab: Fabric) -> None:
    rev = fab.reverse_link
    assert (rev >= 0).all(), "a link has no reverse"
    assert np.array_equal(rev[rev], np.arange(fab.n_links))
    assert np.allclose(fab.link_capacity[rev], fab.link_capacity)
    assert np.array_equal(fab.link_lanes[rev], fab.link_lanes)
    assert np.array_equal(fab.link_kind[rev], fab.link_kind)


def assert_valid_paths(fab: Fabric, src: np.ndarray, dst: np.ndarray, paths: Paths) -> None:
    """Every row is a chain of links from src to dst that visits no node twice."""
    assert len(paths) == src.size
    for i in range(src.size):
        row = paths.row(i)
        if src[i] == dst[i]:
            assert row.size == 0
            continue
        assert row.size > 0
        s, d = fab.link_src[row], fab.link_dst[row]
        assert s[0] == src[i] and d[-1] == dst[i], (i, fab.link_name(int(row[0])))
        assert np.array_equal(s[1:], d[:-1]), f"row {i} is not a chain"
        nodes = np.concatenate([s, d[-1:]])
        assert np.unique(nodes).size == nodes.size, f"row {i} visits a node twice"


def kinds_of(fab: Fabric, path: np.ndarray) -> list[str]:
    return [fab.link_label(int(x)) for x in path]


AUX_KINDS = (int(LinkKind.STORAGE), int(LinkKind.MGMT))
