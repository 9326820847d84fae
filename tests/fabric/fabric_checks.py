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
    lengths = paths.lengths()
    assert ((lengths == 0) == (src == dst)).all(), "empty path iff src == dst"
    ne = np.flatnonzero(lengths > 0)
    first = paths.links[paths.ptr[ne]]
    last = paths.links[paths.ptr[ne + 1] - 1]
    assert np.array_equal(fab.link_src[first], src[ne]), "a path does not start at src"
    assert np.array_equal(fab.link_dst[last], dst[ne]), "a path does not end at dst"
    rid = paths.row_ids()
    s, d = fab.link_src[paths.links], fab.link_dst[paths.links]
    inner = rid[1:] == rid[:-1]
    assert np.array_equal(s[1:][inner], d[:-1][inner]), "a path is not a chain of links"
    # no node twice: (row, node) pairs over link sources plus the destination are unique
    key = np.concatenate([rid * fab.n_nodes + s, ne.astype(np.int64) * fab.n_nodes + dst[ne]])
    assert np.unique(key).size == key.size, "a path visits a node twice"


def kinds_of(fab: Fabric, path: np.ndarray) -> list[str]:
    return [fab.link_label(int(x)) for x in path]


AUX_KINDS = (int(LinkKind.STORAGE), int(LinkKind.MGMT))
