"""How NCCL's chunked algorithms fill their pipelines: chunk sizes, channels, stages.

NCCL's Simple protocol forwards a chunk only once all of it has arrived (the flag is
posted after the data), so tree, NVLS, NVLSTree and the broadcast/reduce chains are
store-and-forward pipelines of chunks: before the stream is steady, the first chunk
crosses every stage (:class:`~fabricsim.schedule.Pipeline`). What that costs follows from
three facts NCCL sets, all from its source (``src/enqueue.cc`` ``calcCollChunking``,
``src/init.cc``, ``src/transport/nvls.cc``, ``src/graph/connect.cc``; NCCL 2.23-2.27):

* **chunk sizes**: the Simple step is ``NCCL_BUFFSIZE / NCCL_STEPS`` = 4 MiB / 8 =
  512 KiB by default, another buffer where the cluster gives one (``params.buffsize``;
  :func:`simple_step_bytes`); tree and chains move one step per chunk; NVLS starts at
  ``NCCL_NVLS_CHUNKSIZE`` = 128 KiB, NVLSTree too but at most 64 KiB from 4 servers on,
  and both shrink for small messages by the rules in :data:`NVLS_SHRINK` and
  :data:`NVLSTREE_SHRINK`. The AWS EFA plugin sets ``NCCL_BUFFSIZE`` = 8 MiB and both
  NVLS chunk limits to 512 KiB on its platforms (aws-ofi-nccl ``platform-aws.cpp``).
* **channels**: across servers NCCL's topology search finds one channel per NIC rail
  (at most one NCCL network device per GPU) and doubles the count when it connects
  channels (``ncclTopoPostset``): 16 on a DGX H100 or p5 with eight rails, 8 on a p4d
  with four NICs (AWS's documentation says 8). NVLS runs its own 16 channels on Hopper,
  24 inside one Blackwell NVLink domain and 32 across domains, over at most 32 heads.
* **stages**: a tree chunk goes up the chain inside a server and the tree between
  servers, and down again; an NVLS chunk is scattered into the switch and reduced and
  multicast out of it; NVLSTree adds the tree between servers in the middle.

LL and LL128 forward line by line (each 8- or 128-byte line carries its own flag), so their
pipelines fill at line granularity inside a server. Over the network a step moves whole:
NCCL's proxy posts it once the GPU has written all of it. A tree's LL128 chunks therefore
fill its network hops (:func:`tree_ll128_pipelines`, NCCL's own LL128 tree chunking); a
ring's steps already move one chunk each, and LL's chunks at the sizes it runs are small.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> g = Group.of(build_cluster("dgx-h100", 4))
>>> p = nvlstree_pipeline(g)
>>> p.ops, p.chunk_bytes, p.chunk(2**30), p.chunk(4 * 2**20)
(128, 65536.0, 65536.0, 32768.0)
"""

from __future__ import annotations

import math

import numpy as np

from fabricsim.collectives.registry import Group
from fabricsim.fabric.core import Fabric
from fabricsim.fabric.kinds import LINK_CLASSES, link_class_of_kind
from fabricsim.protocols import tree_kernel_rate, tuning_hardware
from fabricsim.schedule.core import Channels, Crossings, Pipeline

KIB = 1024.0
#: Steps of a connection's buffer (``NCCL_STEPS``).
NCCL_STEPS = 8
#: NCCL's Simple buffer per connection (``NCCL_BUFFSIZE``'s default), and the one the AWS
#: EFA plugin sets on its platforms (aws-ofi-nccl ``platform-aws.cpp``).
DEFAULT_BUFFSIZE_BYTES = 4 * 2**20
AWS_BUFFSIZE_BYTES = 8 * 2**20
#: Simple's grain (``ncclProtoGrainSize``): chunks are whole multiples of it.
SIMPLE_GRAIN_BYTES = 512
#: ``NCCL_NVLS_CHUNKSIZE``'s default.
NVLS_CHUNK_BYTES = 128 * KIB
#: NVLSTree's chunk limit from 4 servers on (``NCCL_NVLSTREE_MAX_CHUNKSIZE`` unset).
NVLSTREE_MAX_CHUNK_BYTES = 64 * KIB
#: What the AWS EFA plugin sets on its platforms for NVLS: ``NCCL_NVLS_CHUNKSIZE`` and
#: ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` 512 KiB.
AWS_NVLS_CHUNK_BYTES = 512 * KIB
#: ``calcCollChunking``'s shrinking for NVLS: below ``k`` chunks per op, the chunk drops
#: to the given size (applied in order, each test with the chunk the previous left).
NVLS_SHRINK = ((64.0, 64 * KIB), (8.0, 32 * KIB), (2.0, 16 * KIB))
NVLSTREE_SHRINK = ((32.0, 256 * KIB), (16.0, 128 * KIB), (4.0, 64 * KIB), (1.0, 32 * KIB))
#: NCCL's most NVLS heads (``NCCL_MAX_NVLS_ARITY``) and channels.
NVLS_MAX_HEADS = 32
MAX_CHANNELS = 64


def _aws(fabric: Fabric) -> bool:
    return fabric.info.transport == "srd"


def simple_buffer_bytes(fabric: Fabric) -> int:
    """NCCL's Simple buffer per connection on ``fabric``: the cluster's
    ``params.buffsize`` (``NCCL_BUFFSIZE``) where given, else NCCL's default
    (:data:`DEFAULT_BUFFSIZE_BYTES`), or the AWS EFA plugin's (:data:`AWS_BUFFSIZE_BYTES`)
    on its platforms.

    >>> from fabricsim.fabric import build_cluster
    >>> simple_buffer_bytes(build_cluster("aws-p5", 2)) // 2**20
    8
    """
    given = fabric.info.nccl_buffsize_bytes
    if given:
        return int(given)
    return AWS_BUFFSIZE_BYTES if _aws(fabric) else DEFAULT_BUFFSIZE_BYTES


def simple_step_bytes(fabric: Fabric) -> float:
    """NCCL's Simple step on ``fabric``: its buffer (:func:`simple_buffer_bytes`) over
    ``NCCL_STEPS`` (8), rounded down to Simple's 512-byte grain. A tree's and a
    broadcast/reduce chain's chunk is one step, and an NVLS chunk at most one
    (``calcCollChunking``, ``src/enqueue.cc``). NCCL's ring chunk is four steps, but the
    model's rings move one share per step and keep no chunk: from the 1 MiB the cluster
    allows up, a connection never runs short of data in flight.

    >>> from fabricsim.fabric import build_cluster
    >>> simple_step_bytes(build_cluster("dgx-h100", 2)) / 1024
    512.0
    >>> simple_step_bytes(build_cluster("dgx-h100", 2, params={"buffsize": 2**24})) / 1024
    2048.0
    """
    step = simple_buffer_bytes(fabric) // NCCL_STEPS
    return float(step // SIMPLE_GRAIN_BYTES * SIMPLE_GRAIN_BYTES)


def _class_rate(fabric: Fabric, node: int, cls: str) -> float:
    """Line rate (bytes/s) of the links of class ``cls`` leaving ``node``."""
    classes = link_class_of_kind()[fabric.link_kind]
    mask = (fabric.link_src == node) & (classes == LINK_CLASSES.index(cls))
    return float(fabric.link_capacity[mask].sum())


def nvlink_rate(group: Group) -> float:
    """NVLink bytes/s one GPU of ``group`` sends (all its NVLinks; 0 without NVLink)."""
    return _class_rate(group.fabric, int(group.nodes[0]), "nvlink")


def nic_rate(fabric: Fabric) -> float:
    """Scale-out bytes/s of one server (all its NICs)."""
    return fabric.info.nic_bandwidth * fabric.info.nics_per_server


def nccl_channels(group: Group) -> int:
    """NCCL's ring/tree channels for ``group``: across servers two per network device
    (one device per NIC rail, at most one per GPU); inside a server two per GPU.

    >>> from fabricsim.fabric import build_cluster
    >>> nccl_channels(Group.of(build_cluster("aws-p4d", 2)))
    8
    """
    info = group.fabric.info
    gpus = max(group.per_server or info.gpus_per_server, 1)
    devices = min(info.nics_per_server, gpus) if group.servers > 1 else gpus
    return int(np.clip(2 * max(devices, 1), 2, MAX_CHANNELS))


def nvls_channels(group: Group) -> int:
    """NCCL's NVLS channels: 16 on Hopper; on Blackwell 24 inside one NVLink domain,
    32 across domains (``src/transport/nvls.cc``)."""
    if tuning_hardware(group.fabric)[1].startswith("nvlink5"):
        return 32 if group.servers > 1 else 24
    return 16


def nvlstree_capped_channels(group: Group) -> int:
    """NCCL's NVLS channels (:func:`nvls_channels`) of an NVLSTree all-reduce over
    ``group`` where NCCL caps its chunk at 64 KiB (from 4 servers on,
    ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` unset: ``calcCollChunking`` in ``src/enqueue.cc``),
    whose rate a protocol bounds per channel (``Protocol.nvlstree_channel_rate``); 0 on
    fewer servers.

    >>> from fabricsim.fabric import build_cluster
    >>> [nvlstree_capped_channels(Group.of(build_cluster("dgx-h100", n))) for n in (2, 4)]
    [0, 16]
    """
    return nvls_channels(group) if group.servers >= 4 else 0


#: Warps of one of NCCL's thread blocks (``NCCL_MAX_NTHREADS`` 640 / 32).
BLOCK_WARPS = 20


def nvls_copy_warps(group: Group, tree: bool = False) -> int:
    """Warps of NCCL's NVLS (``tree``: NVLSTree) all-reduce that copy the whole message,
    over all its channels, on Blackwell GPUs; 0 elsewhere.

    Without registered buffers each NVLS channel's block splits its warps in groups
    (``src/device/all_reduce.h``): ``reduce`` warps load-reduce and multicast the rank's
    shard through the switch (7 of them up to 6 ranks, else 5), the NVLSTree block gives
    4 more to the tree's broadcast (and 5 reduce), and the rest is halved between
    ``scatter`` (the input into the rank's own NVLS buffer) and ``gather`` (the result back
    out of it), the fewer to gather. Scatter and gather each copy the whole message,
    whatever the ranks, so the slower group bounds a rank at ``channels × gather warps``
    times one warp's rate: a bound that does not grow with the ranks, where the switch's
    share of the traffic (``(1 + 1/n)·S`` each way) shrinks with them. Blackwell's NVLS
    runs at that bound (seven sources: one server's busbw rises from 8 to 72 GPUs as
    ``2(n-1)/n``, not as the links would have it); Hopper's runs at its links (its busbw
    follows ``(1 + 1/n)`` from 5 to 8 GPUs, nccl issue 1455), so its warps' rate, not
    known, is above what they need, and none is charged there. The channels are NCCL
    2.27's and later for every release: 2.25-2.26 ran 32 NVLS channels on one Blackwell
    domain (``src/transport/nvls.cc``), and the one such source (CoreWeave's rack, 2.26)
    measures 5 % below the later releases' racks, not a third above, so the bound may be
    the GPU's rather than its channels' (see docs/collectives.md).

    >>> from fabricsim.fabric import build_cluster
    >>> nvls_copy_warps(Group.of(build_cluster("hgx-b200", 1)))  # 24 channels x 7
    168
    >>> nvls_copy_warps(Group.of(build_cluster("hgx-b200", 2)), tree=True)  # 32 x 5
    160
    >>> nvls_copy_warps(Group.of(build_cluster("dgx-h100", 1)))
    0
    """
    if not tuning_hardware(group.fabric)[1].startswith("nvlink5"):
        return 0
    ranks = group.per_server or group.n
    reduce = 5 if tree else (7 if ranks <= 6 else 5)
    bcast = 4 if tree else 0
    gather = (BLOCK_WARPS - reduce - bcast) // 2
    return nvls_channels(group) * gather


def nvls_heads(group: Group) -> int:
    """NVLS heads: one per GPU of a server, at most :data:`NVLS_MAX_HEADS`."""
    return max(1, min(group.per_server or group.n, NVLS_MAX_HEADS))


def tree_depth(n: int) -> int:
    """Depth of a heap-ordered binary tree of ``n`` members (0 for one).

    >>> [tree_depth(n) for n in (1, 2, 3, 4, 8, 10)]
    [0, 1, 1, 2, 3, 3]
    """
    return max(0, math.ceil(math.log2(n + 1)) - 1)


def tree_direction_share(servers: int) -> float:
    """How many times its even share of a NIC direction one tree channel's chunk gets
    while a double binary tree fills: NCCL runs half its tree channels on each of the two
    trees (``src/graph/connect.cc``), and over two servers the trees are mirror images,
    so while chunks go up (and again while they come down) each direction of a NIC
    carries only half the channels: 2. From three servers on, an inner member of one tree
    takes two children's chunks in while, as a leaf of the other, it sends one out: 1.
    NCCL's own model doubles NVLSTree's network bandwidth over two nodes for the same
    reason (``src/graph/tuning.cc``).

    >>> [tree_direction_share(m) for m in (2, 3, 8)]
    [2.0, 1.0, 1.0]
    """
    return 2.0 if servers == 2 else 1.0


def tree_pipeline(group: Group) -> Pipeline | None:
    """NCCL's tree all-reduce: chunks of one Simple step up the chain inside each server
    and the double binary tree between servers, and down again, on every channel."""
    if group.servers < 2 or not group.per_server or nic_rate(group.fabric) <= 0:
        return None
    c = nccl_channels(group)
    g, m = group.per_server, group.servers
    # a channel's network hop runs at its share of the NICs or at its kernel's own rate
    stages = [("net", 2.0 * tree_depth(m), tree_net_rate(group, c))]
    nvl = nvlink_rate(group)
    if g > 1 and nvl > 0:
        stages.append(("nvlink", 2.0 * (g - 1), nvl / c))
    step = simple_step_bytes(group.fabric)
    return Pipeline(stages=tuple(stages), ops=c, chunk_bytes=step)


#: LL128's step as NCCL sizes it, in payload bytes: ``NCCL_LL128_BUFFSIZE`` (120 elements ×
#: 640 threads × 8 steps × 8 bytes) over ``NCCL_STEPS``, times 15/16 (each 128-byte line
#: carries 120 bytes of data); ``src/enqueue.cc``, ``src/include/device.h``.
LL128_STEP_BYTES = 120 * 640 * 8 * 8 // 8 * 15 / 16
#: NCCL rounds an LL128 chunk down to a multiple of its grain: 16 lines of 120 data bytes
#: (``calcCollChunking``, NCCL 2.23-2.29).
LL128_GRAIN_BYTES = 1920.0
#: The tree's LL128 chunk halves only while above these sizes (``calcCollChunking``: a
#: first rule while above 128 KiB, a second while above 32 KiB).
LL128_TREE_MIN_CHUNK = (128 * KIB, 32 * KIB)


def ll128_tree_shrink(servers: int, per_server: int) -> tuple[tuple[float, float], ...]:
    """NCCL's rule for a tree's LL128 chunk as :class:`Pipeline` shrink steps: with
    ``n = 1 + floor(log2(servers)) + 0.1 × GPUs per server``, the chunk halves while the
    message is below ``n × 64 / ppn`` chunks per channel and the chunk above 128 KiB, then
    while below ``n × 16 / ppn`` and above 32 KiB (``src/enqueue.cc``,
    ``calcCollChunking``, NCCL 2.23-2.29).

    NCCL divides in whole chunks (``nBytes / (nChannels * chunkSize) < k``), so a message
    keeps halving its chunk while under ``ceil(k)`` chunks per channel.

    >>> [(k, int(c)) for k, c in ll128_tree_shrink(2, 8)]
    [(23, 288000), (23, 144000), (23, 72000), (6, 36000), (6, 18000)]
    """
    ppn = max(per_server, 1)
    steps = 1 + (max(servers, 1).bit_length() - 1) + 0.1 * ppn
    out = []
    c = float(LL128_STEP_BYTES)
    for k, floor in zip((math.ceil(steps * 64 / ppn - 1e-9), math.ceil(steps * 16 / ppn - 1e-9)),
                        LL128_TREE_MIN_CHUNK, strict=True):
        while c > floor:
            c /= 2
            out.append((k, c))
    return tuple(out)


def tree_net_rate(group: Group, channels: int) -> float:
    """Line bytes/s one tree channel's network hop moves: its share of the server's NICs
    (twice over two servers, :func:`tree_direction_share`), or its kernel's own rate where
    that is lower.

    >>> from fabricsim.fabric import build_cluster
    >>> g = Group.of(build_cluster("dgx-h100", 2))
    >>> tree_net_rate(g, 16) <= nic_rate(g.fabric) / 16 * 2
    True
    """
    m = group.servers
    kernel = tree_kernel_rate(group.fabric, m, channels) / channels
    net = nic_rate(group.fabric) / channels * tree_direction_share(m)
    return min(net, kernel) if kernel > 0 else net


def tree_ll128_pipelines(group: Group) -> tuple[Pipeline, ...]:
    """The tree's LL128 fill across servers. LL128 forwards line by line through a server,
    but over the network NCCL's proxy posts a step only once the GPU has written all of it,
    and the far side sees it only once it has all arrived: each network hop up the tree and
    down again holds one chunk, NCCL's tree LL128 chunk (:func:`ll128_tree_shrink`) at the
    channel's rate (:func:`tree_net_rate`).

    >>> from fabricsim.fabric import build_cluster
    >>> (p,) = tree_ll128_pipelines(Group.of(build_cluster("dgx-h100", 2)))
    >>> p.protocols, p.ops, int(p.chunk(2**24))
    (frozenset({'ll128'}), 16, 71040)
    """
    if group.servers < 2 or not group.per_server or nic_rate(group.fabric) <= 0:
        return ()
    c = nccl_channels(group)
    stage = ("net", 2.0 * tree_depth(group.servers), tree_net_rate(group, c))
    return (Pipeline(stages=(stage,), ops=c, chunk_bytes=LL128_STEP_BYTES,
                     shrink=ll128_tree_shrink(group.servers, group.per_server),
                     protocols=frozenset({"ll128"}), grain=LL128_GRAIN_BYTES),)


def chain_pipeline(group: Group) -> Pipeline | None:
    """NCCL's ring broadcast and reduce: chunks of one Simple step down the chain of all
    ranks (NVLink hops inside servers, network hops between them) on every channel."""
    if group.n < 3:
        return None
    c = nccl_channels(group)
    m = max(group.servers, 1)
    stages = []
    nvl = nvlink_rate(group)
    if group.n - m > 0 and nvl > 0:
        stages.append(("nvlink", float(group.n - m), nvl / c))
    if m > 1 and nic_rate(group.fabric) > 0:
        stages.append(("net", float(m - 1), nic_rate(group.fabric) / c))
    if not stages:
        return None
    step = simple_step_bytes(group.fabric)
    return Pipeline(stages=tuple(stages), ops=c, chunk_bytes=step)


def nvls_pipeline(group: Group) -> Pipeline | None:
    """NVLS inside one server: three warp groups pass each round of chunks on, each a
    Simple primitive with its own handshake: scatter (the input into the rank's own
    unicast buffer, one slot per head), reduce + multicast (the head's ``multimem``
    load-reduce and store through the switch), gather (the result out of that buffer);
    NCCL's ``src/device/all_reduce.h``, ``RunWorkColl<..., NCCL_ALGO_NVLS, ...>``.

    The fill counts all three as stages. NVLSTree's scatter and gather are the same
    copies and its fill does not count them (:func:`nvlstree_pipeline`): the one-server
    rows, fitted and held out, want the longer fill here (with two stages one server's
    bandwidth goes 6.0 -> 7.0 % held out), the two-server rows the shorter one there.
    Why is not resolved: the stage counts are the rows', not NCCL's source's."""
    nvl = nvlink_rate(group)
    if nvl <= 0 or group.servers > 1:
        return None
    ops = nvls_channels(group) * nvls_heads(group)
    chunk = AWS_NVLS_CHUNK_BYTES if _aws(group.fabric) else NVLS_CHUNK_BYTES
    return Pipeline(stages=(("nvls", 3.0, nvl / ops),), ops=ops,
                    chunk_bytes=min(chunk, simple_step_bytes(group.fabric)),
                    shrink=NVLS_SHRINK)


def nvlstree_pipeline(group: Group) -> Pipeline | None:
    """NVLSTree: a chunk's reduce through the switch, up the double binary tree between
    servers and down again (a head on its own NIC), and its multicast back through the
    switch (``src/device/all_reduce.h``, ``RunWorkColl<..., NCCL_ALGO_NVLS_TREE, ...>``):
    two NVLS stages and two network stages per tree level. Its scatter and gather warps
    copy into and out of the rank's own unicast buffer, the memory the multicast object
    binds on that GPU (``src/transport/nvls.cc``: "Reduce UC -> MC", "Broadcast MC ->
    UC"), not over NVLink: here they add no stage of their own to the fill, as five HGX
    sources of two servers measure it (one server's NVLS counts them: see
    :func:`nvls_pipeline`).

    >>> from fabricsim.fabric import build_cluster
    >>> p = nvlstree_pipeline(Group.of(build_cluster("dgx-h100", 2)))
    >>> [(cls, n) for cls, n, _ in p.stages]
    [('nvls', 2.0), ('net', 2.0)]
    """
    nvl = nvlink_rate(group)
    info = group.fabric.info
    if nvl <= 0 or group.servers < 2 or nic_rate(group.fabric) <= 0:
        return None
    ch, heads = nvls_channels(group), nvls_heads(group)
    ops = ch * heads
    nic_gpu = nic_rate(group.fabric) / max(info.gpus_per_server, 1)
    if _aws(group.fabric):
        chunk = AWS_NVLS_CHUNK_BYTES
    else:
        chunk = NVLS_CHUNK_BYTES if group.servers < 4 else min(NVLS_CHUNK_BYTES,
                                                                NVLSTREE_MAX_CHUNK_BYTES)
    # a head's first chunk crosses its NIC at the NIC's share: NVLSTree's kernel rate
    # (nvlstree_kernel_rate) bounds what its four warp groups move together, the steady
    # stream (the schedule's kernel floor), not one group's hop. (A tree channel is one
    # warp group that receives, reduces and sends each chunk: its rate bounds every hop.)
    net = nic_gpu / ch * tree_direction_share(group.servers)
    stages = (("nvls", 2.0, nvl / ops), ("net", 2.0 * tree_depth(group.servers), net))
    return Pipeline(stages=stages, ops=ops, chunk_bytes=chunk, shrink=NVLSTREE_SHRINK)


def _crossings(group: Group, count: float, channels: int, traffic_per_byte: float,
               ll_ranks: int = 1) -> Crossings:
    """``group``'s :class:`Crossings`, with its network plugin's declared latency."""
    return Crossings(count=count, channels=channels, traffic_per_byte=traffic_per_byte,
                     ll_ranks=ll_ranks, plugin_latency=group.fabric.info.net_plugin_latency)


def ring_server_hops(rounds: int, n: int, m: int) -> int:
    """How many of a rail-aligned ring's ``rounds`` steps over ``n`` ranks on ``m``
    servers cross between servers: each lap of ``n`` steps crosses all ``m`` boundaries
    (0 on one server).

    >>> ring_server_hops(30, 16, 2), ring_server_hops(7, 8, 1)
    (4, 0)
    """
    return round(rounds * m / n) if m > 1 else 0


def ring_crossings(group: Group, collective: str) -> Crossings | None:
    """A ring's network crossings in sequence: every lap crosses each of the ``m`` server
    boundaries once, and a ring all-reduce runs ``2(n-1)`` of its ``n`` ranks' steps (two
    laps), reduce-scatter and all-gather ``n-1``; the broadcast and reduce chains cross
    ``m-1``. NCCL's ring channels carry it.

    >>> from fabricsim.fabric import build_cluster
    >>> c = ring_crossings(Group.of(build_cluster("dgx-h100", 4)), "all_reduce")
    >>> c.count, c.channels, c.traffic_per_byte, c.ll_ranks
    (8, 16, 2.0, 32)
    """
    m, n = group.servers, group.n
    if m < 2 or nic_rate(group.fabric) <= 0:
        return None
    if collective in ("broadcast", "reduce"):
        count = m - 1
    else:
        rounds = 2 * (n - 1) if collective == "all_reduce" else n - 1
        count = max(ring_server_hops(rounds, n, m), 1)
    return _crossings(group, count, nccl_channels(group),
                      traffic_per_byte=2.0 if collective == "all_reduce" else 1.0, ll_ranks=n)


def ring_spread(group: Group, collective: str, limit: int | None = None) -> Channels | None:
    """The channels a ring all-reduce, reduce-scatter or all-gather inside one NVLink
    domain is spread over, where one channel's rate sets its pace (:attr:`Schedule.spread
    <fabricsim.schedule.Schedule.spread>`); ``None`` across servers and for the
    broadcast and reduce chains.

    NCCL runs an operation on fewer channels the smaller it is (:class:`Channels`: for
    ring LL one channel per 32 KiB on 8 GPUs, ``nBytes < nc × nthreads × 8 × nRanks`` in
    ``src/enqueue.cc``), each channel one thread block moving its slice step by step. So
    from 32 KiB to 512 KiB on one 8-GPU server every active channel carries the same
    32 KiB and the time stays flat, as one process per GPU measures it: 29.2, 29.1, 29.0
    and 30.2 us at 32, 128, 256 and 512 KiB on Azure ML's ND96asr_v4 (A100), 19.3, 19.9,
    20.4 and 20.7 on NVIDIA's DGX Cloud H100, 18.8-21.2 on AWS p5; then it grows with the
    bytes per channel (37.3 and 63.1 us at 1 and 2 MiB on the A100). The model gives each
    active channel its share of the links' rate, so fewer channels move the bytes at
    that share of it. NCCL's communicator has 24 ring channels on one A100 or H100 server
    (twice its search's 12); the spread counts :func:`nccl_channels`' 16, because LL's
    total rate stops growing at about 16 channels' worth (docs/collectives.md, Known gaps),
    and 24 capped there time as 16 do. ``limit``: the channels a user's
    ``NCCL_MIN/MAX_NCHANNELS`` leave (:meth:`NcclEnv.channels_of
    <fabricsim.collectives.nccl_env.NcclEnv.channels_of>`), ``None``: NCCL's own.

    >>> from fabricsim.fabric import build_cluster
    >>> c = ring_spread(Group.of(build_cluster("dgx-h100", 1)), "all_reduce")
    >>> c.channels, c.traffic_per_byte, c.ll_ranks
    (16, 2.0, 8)
    >>> ring_spread(Group.of(build_cluster("dgx-h100", 2)), "all_reduce") is None
    True
    >>> ring_spread(Group.of(build_cluster("dgx-h100", 1)), "all_gather", limit=4).limit
    4
    """
    if group.servers != 1 or group.n < 2 or \
            collective not in ("all_reduce", "reduce_scatter", "all_gather"):
        return None
    return Channels(nccl_channels(group),
                    traffic_per_byte=2.0 if collective == "all_reduce" else 1.0,
                    ll_ranks=group.n, limit=limit or 0)


def tree_crossings(group: Group, collective: str) -> Crossings | None:
    """A tree all-reduce's network crossings in sequence: up the tree between servers and
    down again, ``2 × depth``, on NCCL's ring/tree channels.

    >>> from fabricsim.fabric import build_cluster
    >>> tree_crossings(Group.of(build_cluster("dgx-h100", 8)), "all_reduce").count
    6
    """
    if group.servers < 2 or nic_rate(group.fabric) <= 0:
        return None
    return _crossings(group, 2 * tree_depth(group.servers), nccl_channels(group),
                      traffic_per_byte=2.0)


def nvlstree_crossings(group: Group, collective: str) -> Crossings | None:
    """NVLSTree's network crossings in sequence: its tree between servers, up and down,
    on the NVLS channels."""
    if group.servers < 2 or nic_rate(group.fabric) <= 0:
        return None
    return _crossings(group, 2 * tree_depth(group.servers), nvls_channels(group),
                      traffic_per_byte=2.0)


def switch_crossings(group: Group, collective: str) -> Crossings | None:
    """In-network reduction (SHARP / CollNet): up to the switch tree and back, two
    crossings, on NCCL's channels."""
    if group.servers < 2 or nic_rate(group.fabric) <= 0:
        return None
    return _crossings(group, 2, nccl_channels(group), traffic_per_byte=2.0)
