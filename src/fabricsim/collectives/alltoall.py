"""All-to-all (direct and pairwise) and send/recv.

``direct`` posts every rank's ``n−1`` sends at once (as NCCL groups its point-to-point
calls); ``pairwise`` runs ``n−1`` rounds in which rank ``r`` sends to ``r+k``. ``S`` is each
rank's send buffer, ``S/n`` goes to each peer. Send/recv (nccl-tests ``sendrecv_perf``):
every rank sends ``S`` to its successor and receives from its predecessor.

Across servers a peer's bytes are split evenly over the sender's NICs (aws-p5: four EFA
per GPU). Before the data flows, one zero-byte round crosses the network (the receivers'
proxies post their buffers); the peers' rounds are in flight together, so it is paid
once. What is paid per peer is the network proxy's own work: one thread per GPU posts
each remote peer's send and its receive, on every part (channel) NCCL splits that
peer's bytes into, one after another, and each post costs what a network crossing
costs per channel (:func:`p2p_crossings`, :class:`~fabricsim.schedule.PeerParts`).
Peers on NVLink cost neither.

PXN (NCCL's PCI × NVLink, on by default since NCCL 2.12): a send to a peer on another
server whose NIC is on a different rail first crosses NVLink to the sender's server-mate
on the peer's rail, which sends it over its own NIC, so network traffic stays on rails (on
a rail-optimized fabric it never climbs to the spines). Used where servers have NVLink
and the group holds the same number of ranks on every server; the relay and its NVLink
hop run in the same pipelined step as the network transfer.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> g = Group.of(build_cluster("dgx-h100", 1), ranks=[0, 1, 2, 3])
>>> s = direct_steps(g, "alltoall", 4e6, 1)
>>> s[0].n, float(s[0].nbytes[0])
(12, 1000000.0)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabricsim.collectives.registry import Algorithm, Group, fill_step, register, step
from fabricsim.schedule.core import Crossings, PeerParts, Step

#: Largest number of point-to-point transfers an all-to-all schedule may hold.
MAX_PAIRS = 8_000_000

#: Bytes per channel of a peer up to which NCCL moves a point-to-point transfer with LL
#: (``NCCL_P2P_LL_THRESHOLD``, ``src/enqueue.cc``: LL when the peer's bytes are at most
#: this times the channels a peer may use); above it, Simple. Point-to-point never runs
#: LL128.
P2P_LL_THRESHOLD_BYTES = 16384
#: NCCL's point-to-point network chunk, bytes (``NCCL_P2P_NET_CHUNKSIZE``'s default): it
#: sizes send/recv and all-to-all between servers, their chunks and how many channels a
#: peer's bytes take (:func:`peer_parts`); nothing else.
P2P_NET_CHUNK_BYTES = 2**17
#: Point-to-point channels NCCL opens on one NVSwitch server: the power of two above its
#: collective channels (``ncclTopoComputeP2pChannels``, ``src/graph/paths.cc``), which
#: NCCL logs as "32 p2p channels, 32 p2p channels per peer" on A100 and H100 servers
#: (24 collective channels each).
P2P_CHANNELS_ONE_SERVER = 32


def _pow2_up(x: int) -> int:
    return 1 << max(int(x) - 1, 0).bit_length()


def _nvlinks_to_a_peer(group: Group) -> int:
    """NVLinks (lanes) between two GPUs of the group's first server: every NVLink of the
    GPU through NVSwitches, the links of one GPU pair in a switchless mesh."""
    from fabricsim.fabric.kinds import LinkKind, NodeKind

    f = group.fabric
    out = np.flatnonzero((f.link_src == group.nodes[0])
                         & (f.link_kind == int(LinkKind.NVLINK)))
    if out.size == 0:
        return 0
    lanes = f.link_lanes[out].astype(np.int64)
    to_switch = f.node_kind[f.link_dst[out]] == int(NodeKind.NVSWITCH)
    return int(lanes[to_switch].sum()) if to_switch.any() else int(lanes.max())


def p2p_channels_per_peer(group: Group) -> int:
    """Channels NCCL lets one point-to-point peer use (``p2pnChannelsPerPeer``,
    ``ncclTopoComputeP2pChannels`` in ``src/graph/paths.cc``): the power of two above
    the fewest any peer's path gets, at most the point-to-point channels. A peer over
    NVLink gets two per NVLink between the two GPUs, over PCIe two; a peer across the
    network two (one once the ranks outnumber twice the point-to-point channels), but at
    least as many as the GPU has NICs. NCCL logs "2 p2p channels per peer" on servers
    of eight NICs, "32" inside one NVSwitch server.

    >>> from fabricsim.fabric import build_cluster
    >>> p2p_channels_per_peer(Group.of(build_cluster("dgx-h100", 1)))
    32
    >>> p2p_channels_per_peer(Group.of(build_cluster("dgx-h100", 2)))
    2
    """
    from fabricsim.collectives.pipeline import nccl_channels

    if group.servers > 1:
        p2p = _pow2_up(nccl_channels(group))
        net = 2 if 2 * group.n <= 4 * p2p else 1
        least = max(net, group.fabric.info.nics_per_gpu)
        return min(_pow2_up(least), p2p)
    links = _nvlinks_to_a_peer(group)
    least = 2 * links if links else 2
    return min(_pow2_up(min(least, P2P_CHANNELS_ONE_SERVER)), P2P_CHANNELS_ONE_SERVER)


def p2p_protocol(group: Group, collective: str, nbytes: float,
                 channels_per_peer: int | None = None) -> str:
    """The protocol NCCL moves ``collective`` (``alltoall``: ``nbytes`` per rank, an
    ``n``-th to each peer; ``sendrecv``: ``nbytes`` to one peer) with: LL while a peer's
    bytes are at most :data:`P2P_LL_THRESHOLD_BYTES` per channel it may use
    (``channels_per_peer``, default :func:`p2p_channels_per_peer`), else Simple. NCCL
    decides this by size, not by a cost model, and never uses LL128 for point-to-point.

    >>> from fabricsim.fabric import build_cluster
    >>> g = Group.of(build_cluster("dgx-h100", 1))
    >>> p2p_protocol(g, "alltoall", 8 * 512 * 1024), p2p_protocol(g, "alltoall", 8 * 2**20)
    ('ll', 'simple')
    """
    per_peer = nbytes / group.n if collective == "alltoall" else nbytes
    if channels_per_peer is None:
        channels_per_peer = p2p_channels_per_peer(group)
    limit = P2P_LL_THRESHOLD_BYTES * channels_per_peer
    return "ll" if per_peer <= limit else "simple"


def _check(group: Group, collective: str) -> str | None:
    n = group.n
    if collective == "alltoall" and n * (n - 1) > MAX_PAIRS:
        return (f"alltoall over {n} ranks is {n * (n - 1):,} transfers (limit {MAX_PAIRS:,});"
                " simulate a smaller group (e.g. one expert-parallel group)")
    return None


def nic_split(group: Group) -> int:
    """NICs a peer's bytes are split over: the GPU's NICs across servers, else one."""
    return max(group.fabric.info.nics_per_gpu, 1) if group.servers > 1 else 1


def direct_steps(group: Group, collective: str, nbytes: float, channels: int) -> list[Step]:
    """All sends at once (alltoall) or one send per rank to its successor (sendrecv)."""
    n = group.n
    f = group.fabric
    k = nic_split(group)
    if collective == "sendrecv":  # one rank: it sends to itself (a local copy, as NCCL)
        return [step(f, group.nodes, np.roll(group.nodes, -1), nbytes / k, nic=j,
                     label=f"sendrecv nic{j}") for j in range(k)]
    if n == 1:
        return []
    i, d = np.meshgrid(np.arange(n), np.arange(1, n), indexing="ij")
    src = group.nodes[i.ravel()]
    dst = group.nodes[(i + d).ravel() % n]
    out = peer_round(group)  # one round for all peers; p2p_crossings charges each
    deps = (0,) if out else ()
    src, dst = _pxn(group, src, dst)
    return out + [step(f, src, dst, nbytes / n / k, deps=deps, nic=j,
                       label=f"alltoall nic{j}") for j in range(k)]


def peer_round(group: Group) -> list[Step]:
    """The one zero-byte network round ahead of a point-to-point exchange between
    servers (the receivers' proxies post their buffers; every peer's round is in flight
    at once), from the group's first rank to its first rank on another server; none on
    one server."""
    srv = group.server_of
    other = np.flatnonzero(srv != srv[0])
    if other.size == 0:
        return []
    return fill_step(group.fabric, int(group.nodes[0]), int(group.nodes[other[0]]), 1,
                     "peer setup")


def remote_peers(group: Group) -> int:
    """The most peers on other servers any rank of ``group`` has: the ranks less those
    of its least populated server (0 on one server).

    >>> from fabricsim.fabric import build_cluster
    >>> remote_peers(Group.of(build_cluster("dgx-h100", 2), ranks=[0, 1, 2, 8]))
    3
    """
    if group.servers < 2:
        return 0
    _, counts = np.unique(group.server_of, return_counts=True)
    return int(group.n - counts.min())


def peer_parts(group: Group, share: float) -> PeerParts:
    """NCCL's parts of one peer's bytes between servers (:class:`PeerParts`): at most
    :func:`p2p_channels_per_peer`, starting from that halved while the ranks times it
    outnumber the point-to-point channels (``src/enqueue.cc``), in chunks of
    :data:`P2P_NET_CHUNK_BYTES` (NCCL's default; other values are refused for these
    collectives, :meth:`NcclEnv.check_p2p
    <fabricsim.collectives.nccl_env.NcclEnv.check_p2p>`).

    >>> from fabricsim.fabric import build_cluster
    >>> p = peer_parts(Group.of(build_cluster("dgx-h100", 2)), 1 / 16)
    >>> p.least, p.most
    (1, 2)
    """
    from fabricsim.collectives.pipeline import nccl_channels

    p2p = _pow2_up(nccl_channels(group))
    most = p2p_channels_per_peer(group)
    least = most
    while least * group.n > p2p and least > 1:
        least //= 2
    return PeerParts(share=share, least=least, most=most, chunk_bytes=P2P_NET_CHUNK_BYTES)


def p2p_crossings(group: Group, collective: str, share: float | None = None
                  ) -> Crossings | None:
    """The network proxy's posts of an all-to-all or send/recv between servers, one after
    another: for each remote peer of the busiest rank a send and a receive on every part
    of the peer's bytes (:func:`peer_parts`), each costing the protocol's crossing cost
    per channel. No share of a network plugin's declared latency: the peers' transfers
    are in flight together, so their latencies overlap (:func:`direct_steps` pays one
    round). ``share``: a peer's bytes per byte of the operation (by default ``1/n`` for an
    all-to-all, 1 for send/recv). ``None`` on one server.

    >>> from fabricsim.fabric import build_cluster
    >>> c = p2p_crossings(Group.of(build_cluster("dgx-h100", 4)), "alltoall")
    >>> c.count, c.active(2**10, 0.0), c.active(2**30, 0.0), c.plugin_latency
    (48, 1, 2, 0.0)
    """
    if group.servers < 2:
        return None
    if collective == "sendrecv":  # one peer: a successor on another server, or none
        srv = group.server_of
        remote = int((srv != np.roll(srv, -1)).any())
    else:
        remote = remote_peers(group)
    if not remote:
        return None
    if share is None:
        share = 1.0 / group.n if collective == "alltoall" else 1.0
    return Crossings(count=2 * remote, channels=p2p_channels_per_peer(group),
                     parts=peer_parts(group, share))


def _pxn(group: Group, src: NDArray[np.int32], dst: NDArray[np.int32]
         ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """Transfers between servers whose endpoints sit on different rails, relayed PXN-style:
    ``a → b`` becomes ``a → r`` over NVLink and ``r → b`` over the network, where ``r`` is
    ``a``'s server-mate in ``b``'s column of the group's grid (its rail)."""
    s, d, _ = pxn_relay(group, src, dst, np.zeros(src.shape[0]))
    return s, d


def pxn_relay(group: Group, src: NDArray[np.int32], dst: NDArray[np.int32],
              nbytes: NDArray[np.float64]
              ) -> tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.float64]]:
    """:func:`_pxn` for transfers of different sizes: the relayed transfers' two legs
    each carry the transfer's bytes."""
    f = group.fabric
    if group.servers < 2 or not group.per_server or not f.info.nvlink:
        return src, dst, nbytes
    grid = group.grid()
    row = np.empty(group.n, dtype=np.int64)
    col = np.empty(group.n, dtype=np.int64)
    r_idx, c_idx = np.indices(grid.shape)
    row[grid.ravel()] = r_idx.ravel()
    col[grid.ravel()] = c_idx.ravel()
    pos = np.full(f.n_nodes, -1, dtype=np.int64)
    pos[group.nodes] = np.arange(group.n)
    ps, pd = pos[src], pos[dst]
    relay = (row[ps] != row[pd]) & (col[ps] != col[pd])
    if not relay.any():
        return src, dst, nbytes
    mid = group.nodes[grid[row[ps[relay]], col[pd[relay]]]]
    keep = ~relay
    new_src = np.concatenate([src[keep], src[relay], mid]).astype(np.int32)
    new_dst = np.concatenate([dst[keep], mid, dst[relay]]).astype(np.int32)
    new_nb = np.concatenate([nbytes[keep], nbytes[relay], nbytes[relay]])
    return new_src, new_dst, new_nb


def pairwise_steps(group: Group, collective: str, nbytes: float, channels: int
                   ) -> list[Step]:
    """``n−1`` rounds; in round ``k`` rank ``r`` sends ``S/n`` to rank ``r+k``."""
    n = group.n
    f = group.fabric
    out: list[Step] = []
    prev: tuple[int, ...] = ()
    for k in range(1, n):
        here = []
        for c in range(channels):
            here.append(len(out))
            out.append(step(f, group.nodes, np.roll(group.nodes, -k), nbytes / n / channels,
                            channel=c, deps=prev, label=f"pairwise round{k} ch{c}"))
        prev = tuple(here)
    return out


DIRECT = register(Algorithm(
    name="direct", build=direct_steps, check=_check, crossings=p2p_crossings,
    collectives=frozenset({"alltoall", "sendrecv"}),
    description="All point-to-point sends posted at once (NCCL's grouped send/recv)."))
PAIRWISE = register(Algorithm(
    name="pairwise", build=pairwise_steps, check=_check, collectives=frozenset({"alltoall"}),
    description="n-1 rounds of shifted exchanges (rank r sends to r+k in round k).",
    auto=False))
