"""The :class:`Schedule`: a DAG of transfers that a collective or a training step compiles to.

A schedule is data. It is a tuple of :class:`Step` s; a step is a set of transfers (arrays
``src``, ``dst``, ``nbytes``, all fabric node ids) that start together once every step in
its ``deps`` has finished, and finishes when its last transfer does. ``repeat`` says the
same step runs that many times back to back (each repetition waits for the previous one):
a ring all-reduce over N ranks is one step of N transfers repeated 2(N−1) times, so a
131,072-GPU ring stays a few arrays and backends can solve a repeated step once.
Independent chains (NCCL channels) are steps with no dependency between them.

``reduce_at`` marks where a reduction happens: ``"dst"`` (the receiving GPU adds what it
gets), ``"switch"`` (in-network: SHARP or NVLS, the destination is a switch node), or
``""`` (plain copy).

Example
-------
>>> import numpy as np
>>> s = Step(src=np.array([0, 1]), dst=np.array([1, 0]), nbytes=np.array([8.0, 8.0]),
...          repeat=3, label="ring")
>>> sch = Schedule(steps=(s,), collective="all_reduce", algorithm="ring", nbytes=16)
>>> sch.total_bytes(), sch.n_transfers()
(48.0, 6)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fabricsim.errors import ScheduleError

IntArray = NDArray[np.int32]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Step:
    """Concurrent transfers ``src[i] -> dst[i]`` of ``nbytes[i]`` bytes, run ``repeat`` times.

    ``rounds`` says how many pipelined algorithm steps one repetition stands for (a ring's
    ``2(n-1)`` steps folded into one steady-state step): per-step costs that are not
    latency, such as a straggler's delay, are charged that many times.
    """

    src: IntArray
    dst: IntArray
    nbytes: FloatArray
    repeat: int = 1
    deps: tuple[int, ...] = ()
    reduce_at: str = ""
    label: str = ""
    channel: int = 0
    hashes: NDArray[np.uint64] | None = None
    delay: float = 0.0
    rounds: int = 1

    def __post_init__(self) -> None:
        src = np.asarray(self.src, dtype=np.int32).ravel()
        dst = np.asarray(self.dst, dtype=np.int32).ravel()
        nb = np.asarray(self.nbytes, dtype=np.float64).ravel()
        if nb.shape[0] == 1 and src.shape[0] != 1:
            nb = np.full(src.shape[0], nb[0])
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "nbytes", nb)
        if not (src.shape == dst.shape == nb.shape):
            raise ScheduleError(f"step {self.label!r}: src, dst and nbytes differ in length "
                                f"({src.shape[0]}, {dst.shape[0]}, {nb.shape[0]})")
        if nb.size and (not np.isfinite(nb).all() or nb.min() < 0):
            raise ScheduleError(f"step {self.label!r}: transfer sizes must be finite and >= 0")
        if self.repeat < 1:
            raise ScheduleError(f"step {self.label!r}: repeat must be >= 1, got {self.repeat}")
        if self.delay < 0:
            raise ScheduleError(f"step {self.label!r}: delay must be >= 0")
        if self.rounds < 1:
            raise ScheduleError(f"step {self.label!r}: rounds must be >= 1, got {self.rounds}")
        if self.reduce_at not in ("", "dst", "switch"):
            raise ScheduleError(f"reduce_at must be '', 'dst' or 'switch', got "
                                f"{self.reduce_at!r}")
        if self.hashes is not None:
            h = np.asarray(self.hashes, dtype=np.uint64).ravel()
            if h.shape != src.shape:
                raise ScheduleError("hashes must have one entry per transfer")
            object.__setattr__(self, "hashes", h)

    @property
    def n(self) -> int:
        return int(self.src.shape[0])

    def total_bytes(self) -> float:
        """Bytes moved by all repetitions of this step."""
        return float(self.nbytes.sum()) * self.repeat


@dataclass(frozen=True)
class Pipeline:
    """The fill of a store-and-forward pipeline of chunks (NCCL's Simple protocol, and LL128
    over the network, where a step must arrive whole).

    A chunked algorithm moves its buffer through ``stages`` one chunk at a time: a stage
    forwards a chunk only once the whole of it has arrived (Simple posts a chunk's flag
    after its data). The steady stream is the schedule's bandwidth term; before it, the
    first chunk crosses every stage: ``sum(t_s) - max(t_s)`` extra, ``t_s`` the time a
    stage takes to move one chunk. ``ops`` chunks move at once (NCCL's channels, times
    NVLS heads where each head owns a share). The chunk starts at ``chunk_bytes`` and
    shrinks for small messages by ``shrink``: for each ``(k, smaller)`` in order, if the
    message is below ``k · ops · chunk`` and the chunk exceeds ``smaller``, it becomes
    ``smaller`` (NCCL's ``calcCollChunking``); it never exceeds a share of the message.

    ``stages`` are ``(link class, count, line bytes/s one op has on that stage)``; the
    protocol's efficiency on the class turns line rate into payload rate. Only the
    protocols in ``protocols`` fill this way (LL and LL128 forward line by line).

    >>> p = Pipeline(stages=(("net", 2, 1e9),), ops=4, chunk_bytes=65536.0)
    >>> p.chunk(2**30), p.chunk(65536)
    (65536.0, 16384.0)
    >>> round(p.fill(2**30, {"net": 1.0}) * 1e6, 2)  # one extra stage of one chunk
    65.54
    """

    stages: tuple[tuple[str, float, float], ...]
    ops: int
    chunk_bytes: float
    shrink: tuple[tuple[float, float], ...] = ()
    protocols: frozenset[str] = frozenset({"simple"})
    #: Once shrunk, the chunk is rounded down to a multiple of this (0: not rounded), as
    #: NCCL aligns a chunk to its protocol's grain (LL128: 1,920 bytes of data).
    grain: float = 0.0

    def __post_init__(self) -> None:
        if self.ops < 1 or not self.chunk_bytes > 0:
            raise ScheduleError("a pipeline needs ops >= 1 and a chunk > 0 bytes")
        if any(not r > 0 or c < 0 for _, c, r in self.stages):
            raise ScheduleError("pipeline stages need a rate > 0 and a count >= 0")

    def chunk(self, nbytes: float) -> float:
        """The chunk (bytes) one op moves per stage for a message of ``nbytes``."""
        c = self.chunk_bytes
        for k, smaller in self.shrink:
            if nbytes < k * self.ops * c and c > smaller:
                c = smaller
        if self.grain > 0 and c >= self.grain:
            c = c // self.grain * self.grain
        return min(c, nbytes / self.ops)

    def with_more(self, cls: str, extra: float) -> Pipeline:
        """This pipeline with ``extra`` more stages on each stage entry of link class
        ``cls`` (unchanged where it has none).

        >>> p = Pipeline(stages=(("nvls", 2, 1e9), ("net", 2, 1e9)), ops=1, chunk_bytes=1.0)
        >>> p.with_more("nvls", 2.0).stages
        (('nvls', 4.0, 1000000000.0), ('net', 2, 1000000000.0))
        """
        if not any(c == cls for c, _, _ in self.stages):
            return self
        return replace(self, stages=tuple((c, n + extra if c == cls else n, r)
                                          for c, n, r in self.stages))

    def fill(self, nbytes: float, efficiency: Mapping[str, float]) -> float:
        """Seconds the first chunk of a ``nbytes`` message adds before the stream is
        steady, with ``efficiency`` the payload share of line rate per link class."""
        if nbytes <= 0 or not self.stages:
            return 0.0
        c = self.chunk(nbytes)
        per = [c / (r * max(efficiency.get(cls, 1.0), 1e-9)) for cls, _, r in self.stages]
        total = sum(n * t for (_, n, _), t in zip(self.stages, per, strict=True))
        return max(total - max(per), 0.0)


#: NCCL's least traffic per channel (``MinTrafficPerChannel``, 16 KiB since 2.23): an
#: operation is spread over at most ``ceil(traffic / 16 KiB)`` channels.
MIN_TRAFFIC_PER_CHANNEL = 16 * 1024


@dataclass(frozen=True)
class Channels:
    """How many of NCCL's channels an operation of a given size runs on.

    NCCL spreads a collective over its channels by two rules (``src/enqueue.cc``, NCCL
    2.23-2.27): at most ``ceil(traffic / 16 KiB)`` channels, traffic being twice the
    message for all-reduce and the message otherwise; and, while the message is below
    ``channels × thread bytes``, one channel fewer (``thread bytes``: the protocol's
    threads per channel times its bytes per thread, times the ranks for ring LL). Each
    active channel then carries its share of the message.

    ``channels``: NCCL's own channels, which together move the links' full rate;
    ``traffic_per_byte``: 2 for all-reduce, 1 otherwise; ``ll_ranks``: factor on LL's
    thread bytes (the ranks for a ring, as NCCL scales ring LL's threshold; else 1);
    ``limit``: the channels a user's ``NCCL_MIN/MAX_NCHANNELS`` (or ``CTAS``) leave the
    communicator (0: ``channels``). NCCL applies the size rules from that count down, so
    ``NCCL_MAX_NCHANNELS=4`` caps every size at 4 of the 16, a quarter of the rate.

    >>> c = Channels(channels=16, traffic_per_byte=2.0, ll_ranks=8)
    >>> c.active(8, 4096.0), c.active(256 * 1024, 4096.0 * 8), c.active(2**20, 4096.0 * 8)
    (1, 8, 16)
    >>> c.share(256 * 1024, 4096.0 * 8)
    0.5
    >>> Channels(16, 2.0, ll_ranks=8, limit=4).share(2**20, 4096.0 * 8)
    0.25
    >>> c4 = Channels(16, 2.0, ll_ranks=8, limit=4)
    >>> c4.capped(64 * 1024, 4096.0 * 8), c4.capped(2**20, 4096.0 * 8)
    (1.0, 0.25)
    """

    channels: int
    traffic_per_byte: float = 1.0
    ll_ranks: int = 1
    limit: int = 0

    def __post_init__(self) -> None:
        if self.channels < 1 or not self.traffic_per_byte > 0 or self.ll_ranks < 1 \
                or self.limit < 0:
            raise ScheduleError("channels need channels >= 1, positive traffic and "
                                "thread factors and a limit >= 0")

    @property
    def most(self) -> int:
        """The channels the communicator has: :attr:`limit`, else :attr:`channels`."""
        return self.limit or self.channels

    def active(self, nbytes: float, thread_bytes: float) -> int:
        """Channels an operation of ``nbytes`` runs on (at least 1)."""
        by_traffic = -(-self.traffic_per_byte * max(nbytes, 0.0) // MIN_TRAFFIC_PER_CHANNEL)
        nc = int(min(self.most, max(by_traffic, 1)))
        if thread_bytes > 0:
            nc = min(nc, max(int(nbytes // thread_bytes), 1))
        return max(nc, 1)

    def share(self, nbytes: float, thread_bytes: float) -> float:
        """The fraction of the links' rate an operation of ``nbytes`` runs at: its active
        channels out of NCCL's own (at most 1: more channels than NCCL's do not make the
        links faster)."""
        return min(self.active(nbytes, thread_bytes) / self.channels, 1.0)

    def capped(self, nbytes: float, thread_bytes: float) -> float:
        """The share of its rate the user's :attr:`limit` alone leaves an operation of
        ``nbytes``: the limit over the channels NCCL would run it on without one, at most
        1 (a size that runs on no more channels than the limit keeps its rate)."""
        free = replace(self, limit=0).active(nbytes, thread_bytes)
        return min(self.most / free, 1.0)


@dataclass(frozen=True)
class PeerParts:
    """How many parts NCCL splits one peer's point-to-point bytes into between servers,
    each on a channel of its own (``addP2pToPlan``, ``src/enqueue.cc``, NCCL 2.19-2.30).

    A peer starts from ``least`` channels (NCCL's channels per peer, halved while the
    ranks times them outnumber the point-to-point channels), at most one per half chunk
    of its bytes; while a part is larger than a chunk and doubling stays within ``most``
    (the channels a peer may use), the parts double. ``share``: a peer's bytes per byte
    of the operation (``1/n`` for an all-to-all of ``n`` ranks, 1 for send/recv);
    ``chunk_bytes``: NCCL's point-to-point network chunk (``NCCL_P2P_NET_CHUNKSIZE``).

    >>> p = PeerParts(share=1 / 256, least=1, most=4)
    >>> p.active(32 * 2**20), p.active(256 * 2**20), p.active(2**30)
    (1, 4, 4)
    >>> PeerParts(share=1.0, least=2, most=4).active(8)
    1
    """

    share: float
    least: int
    most: int
    chunk_bytes: float = 128 * 1024

    def __post_init__(self) -> None:
        if not self.share > 0 or self.least < 1 or self.most < self.least \
                or not self.chunk_bytes > 0:
            raise ScheduleError("peer parts need a positive share and chunk and "
                                "1 <= least <= most")

    def active(self, nbytes: float, thread_bytes: float = 0.0) -> int:
        """Parts (channels) one peer's bytes of an operation of ``nbytes`` take
        (``thread_bytes`` is not used: NCCL sizes point-to-point parts by its chunk)."""
        peer = self.share * max(nbytes, 0.0)
        smallest = self.chunk_bytes / 2
        parts = int(min(self.least, max(-(-peer // smallest), 1)))
        size = max(smallest, peer / parts)
        while size > self.chunk_bytes and parts <= self.most // 2:
            parts *= 2
            size = peer / parts
        return parts


@dataclass(frozen=True)
class Crossings:
    """The server-to-server crossings a chunk of a collective makes one after another, and
    how many of NCCL's channels the operation runs on.

    Every crossing of the scale-out network is a step of NCCL's network proxy: the GPU
    hands the step over, the proxy posts it to the NIC, the far side completes it. That
    costs more the more channels the operation runs on (the protocol's
    ``crossing_per_channel``), and NCCL runs small operations on few channels
    (:meth:`active`, by :class:`Channels`' rules).

    ``count``: crossings in sequence (a ring all-reduce crosses every server boundary on
    each of its two laps, a tree twice per level); ``channels``, ``traffic_per_byte`` and
    ``ll_ranks`` as for :class:`Channels`.

    >>> c = Crossings(count=2, channels=16, traffic_per_byte=2.0)
    >>> c.active(8, 5120.0), c.active(64 * 1024, 5120.0), c.active(2**20, 5120.0)
    (1, 8, 16)
    """

    count: float
    channels: int
    traffic_per_byte: float = 1.0
    ll_ranks: int = 1
    #: Seconds the network plugin declares to NCCL per operation (aws-ofi-nccl on EFA;
    #: 0 for NCCL's own InfiniBand and RoCE transport): each crossing pays the
    #: protocol's ``plugin_latency_share`` of it, whatever the channels.
    plugin_latency: float = 0.0
    #: Point-to-point crossings (send/recv, all-to-all): each is one post of NCCL's proxy
    #: per part of a peer's bytes (:class:`PeerParts`), in place of the collective
    #: channel rule.
    parts: PeerParts | None = None
    #: NCCL's channel rule for these channels (:class:`Channels`), built once.
    rule: Channels = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.count < 0 or self.channels < 1 or not self.traffic_per_byte > 0 \
                or self.ll_ranks < 1 or not self.plugin_latency >= 0.0:
            raise ScheduleError("crossings need count >= 0, channels >= 1, positive "
                                "traffic and thread factors and a plugin latency >= 0")
        object.__setattr__(self, "rule", Channels(self.channels, self.traffic_per_byte,
                                                  self.ll_ranks))

    def active(self, nbytes: float, thread_bytes: float) -> int:
        """Channels an operation of ``nbytes`` runs on (at least 1; :meth:`Channels.active`,
        or for point-to-point crossings the parts of a peer's bytes, :meth:`PeerParts.active`)."""
        if self.parts is not None:
            return self.parts.active(nbytes, thread_bytes)
        return self.rule.active(nbytes, thread_bytes)


@dataclass(frozen=True, eq=False)
class Schedule:
    """A DAG of steps; steps may depend only on earlier steps (so it is acyclic)."""

    steps: tuple[Step, ...]
    collective: str = ""
    algorithm: str = ""
    protocol: str = ""
    nbytes: int = 0
    ranks: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: Most message bytes per second the collective's kernels can move, whatever the links
    #: allow (0: no limit). A GPU's thread blocks reduce and forward data at a finite rate;
    #: where that rate is below the network's (NCCL's tree kernels), it sets the time.
    kernel_bytes_per_s: float = 0.0
    #: The chunk pipeline's fill (:class:`Pipeline`), ``None`` where there is none.
    pipeline: Pipeline | None = None
    #: Further chunk pipelines, each for the protocols it names, where a protocol fills
    #: other than :attr:`pipeline` says (a tree's LL128 fills by its network steps alone);
    #: a backend times a protocol with the first of ``pipeline`` and these that names it.
    pipelines: tuple[Pipeline, ...] = ()
    #: Its network crossings in sequence (:class:`Crossings`), ``None`` where none counts.
    crossings: Crossings | None = None
    #: The channels its steps are spread over where one channel's rate sets their pace
    #: (:class:`Channels`; ``None``: the links' rate alone): a ring inside one NVLink
    #: domain. An operation NCCL runs on fewer than all its channels
    #: (:meth:`Channels.active`) moves its bytes at that share of the links' rate: each
    #: active channel carries a larger slice at one channel's rate
    #: (:func:`fabricsim.backends.base.channel_share`).
    spread: Channels | None = None
    #: Factors on the protocol's per-hop latency, by protocol then link class, where this
    #: algorithm's step costs other than the protocol's own (fitted on rings): NCCL's tree
    #: chain steps (:data:`fabricsim.collectives.tree.TREE_HOP_SCALE`). Empty: none.
    hop_scale: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: Its steps each cost a fixed time plus their bytes over the rate, with no size ramp
    #: (NCCL's rings: every step waits for its slice's flag whatever the message size);
    #: they pay the protocol's ``fixed_step_latency`` where it has one.
    fixed_steps: bool = False
    #: Its NVLink transfers join GPUs on different hosts of one NVLink domain (a rack's
    #: compute trays: multi-node NVLink), whose NVLink and NVLS steps pay the protocol's
    #: ``mnnvl_step``.
    mnnvl: bool = False
    #: Channels of a tree between servers (0: not one): where the protocol bounds what one
    #: such channel moves (``Protocol.tree_channel_rate``), its kernels move at most that
    #: many times it.
    tree_channels: int = 0
    #: Warps of the collective's kernels (over all its channels) that copy the whole
    #: message between the user's buffers and NCCL's own (0: none that bound it): NVLS's
    #: scatter and gather warps on GPUs whose copies set its pace. Where the protocol
    #: bounds what one such warp moves (``Protocol.nvls_warp_rate``), the kernels move at
    #: most that many times it.
    copy_warps: int = 0
    #: NCCL's NVLS channels of an NVLSTree all-reduce across 4 servers or more (0: not
    #: one), where NCCL caps its chunk at 64 KiB: where the protocol bounds what one such
    #: channel moves (``Protocol.nvlstree_channel_rate``, bus bandwidth), the kernels move
    #: at most that many times it.
    nvls_channels: int = 0

    def __post_init__(self) -> None:
        if not (self.kernel_bytes_per_s >= 0.0):  # also rejects NaN
            raise ScheduleError(f"kernel_bytes_per_s must be >= 0, got "
                                f"{self.kernel_bytes_per_s!r}")
        for name in ("copy_warps", "tree_channels", "nvls_channels"):
            if getattr(self, name) < 0:
                raise ScheduleError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for proto, per in self.hop_scale.items():
            for cls, f in per.items():
                if not (0.0 < f < float("inf")):
                    raise ScheduleError(f"hop_scale[{proto!r}][{cls!r}] must be a positive "
                                        f"number, got {f!r}")
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "pipelines", tuple(self.pipelines))
        object.__setattr__(self, "ranks", np.asarray(self.ranks, dtype=np.int32))
        for i, s in enumerate(self.steps):
            for d in s.deps:
                if not 0 <= d < i:
                    raise ScheduleError(
                        f"step {i} ({s.label!r}) depends on step {d}; a step may depend only "
                        "on earlier steps")

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def total_bytes(self) -> float:
        return float(sum(s.total_bytes() for s in self.steps))

    def n_transfers(self) -> int:
        """Transfers counting every repetition."""
        return int(sum(s.n * s.repeat for s in self.steps))

    def kernel_floor(self, tree_channel_rate: float = 0.0, warp_rate: float = 0.0,
                     nvls_channel_rate: float = 0.0) -> float:
        """Least time (s) the kernels need to move :attr:`nbytes` (0 without a limit): at
        :attr:`kernel_bytes_per_s`; where a protocol bounds a tree's channels
        (``tree_channel_rate``, bytes/s), at most :attr:`tree_channels` times that; and
        where it bounds a copy warp (``warp_rate``, bytes/s), at most :attr:`copy_warps`
        times that; where it bounds an NVLS channel of NVLSTree (``nvls_channel_rate``,
        bus bandwidth), at most :attr:`nvls_channels` times that, as message bytes/s.

        Every backend reports ``max(network time, start + kernel_floor() + launch)``,
        ``start`` the schedule's own latency (the kernels stream once it is through).

        >>> Schedule(steps=(), nbytes=10**9, kernel_bytes_per_s=1e11).kernel_floor()
        0.01
        >>> Schedule(steps=(), nbytes=10**9, kernel_bytes_per_s=1e11,
        ...          tree_channels=10).kernel_floor(5e9)
        0.02
        >>> Schedule(steps=(), nbytes=10**9, copy_warps=100).kernel_floor(warp_rate=2.5e9)
        0.004
        """
        rates = self.kernel_bounds(tree_channel_rate, warp_rate, nvls_channel_rate).values()
        return float(self.nbytes) / min(rates) if rates else 0.0

    def kernel_bounds(self, tree_channel_rate: float = 0.0, warp_rate: float = 0.0,
                      nvls_channel_rate: float = 0.0) -> dict[str, float]:
        """The kernels' own bounds (bytes/s) that apply, by name: ``kernels``
        (:attr:`kernel_bytes_per_s`), ``tree_channels``, ``copy_warps`` and
        ``nvls_channels`` (their counts times the protocol's rate each; an NVLS channel's
        bus bandwidth as message bytes/s of an all-reduce over :attr:`ranks`,
        ``n / (2(n - 1))``); :meth:`kernel_floor` takes the least.

        >>> Schedule(steps=(), tree_channels=10, copy_warps=100).kernel_bounds(5e9, 2.5e9)
        {'tree_channels': 50000000000.0, 'copy_warps': 250000000000.0}
        >>> b = Schedule(steps=(), ranks=range(32), nvls_channels=16).kernel_bounds(
        ...     nvls_channel_rate=20e9)
        >>> round(b["nvls_channels"] / 1e9, 1)  # 16 x 20 GB/s of busbw, as algbw
        165.2
        """
        n = len(self.ranks)
        per_message = n / (2 * (n - 1)) if n > 1 else 0.0
        rates = {"kernels": self.kernel_bytes_per_s,
                 "tree_channels": self.tree_channels * tree_channel_rate,
                 "copy_warps": self.copy_warps * warp_rate,
                 "nvls_channels": self.nvls_channels * nvls_channel_rate * per_message}
        return {k: r for k, r in rates.items() if r > 0.0}

    def timing_fields(self) -> dict[str, Any]:
        """What a backend charges besides the steps (kernel rate, chunk pipeline, network
        crossings, hop scale, steps of a fixed cost, multi-node NVLink), as keywords for a
        :class:`Schedule` built from this one's steps (merged with others, say), so that
        none is left behind.

        >>> Schedule(steps=(), kernel_bytes_per_s=1e9).timing_fields()["kernel_bytes_per_s"]
        1000000000.0
        >>> Schedule(steps=(), fixed_steps=True).timing_fields()["fixed_steps"]
        True
        """
        return {"kernel_bytes_per_s": self.kernel_bytes_per_s, "pipeline": self.pipeline,
                "pipelines": self.pipelines,
                "crossings": self.crossings, "hop_scale": self.hop_scale,
                "fixed_steps": self.fixed_steps, "mnnvl": self.mnnvl,
                "tree_channels": self.tree_channels, "copy_warps": self.copy_warps,
                "nvls_channels": self.nvls_channels}

    def with_meta(self, **meta: Any) -> Schedule:
        return replace(self, meta={**self.meta, **meta})

    def critical_path_steps(self) -> list[int]:
        """Longest chain of step indices by number of repetitions (a structural view)."""
        best: list[tuple[int, list[int]]] = []
        for i, s in enumerate(self.steps):
            prev = max((best[d] for d in s.deps), default=(0, []), key=lambda x: x[0])
            best.append((prev[0] + s.repeat, [*prev[1], i]))
        return max(best, default=(0, []), key=lambda x: x[0])[1]


def concurrency_groups(schedule: Schedule) -> tuple[list[list[Step]], NDArray[np.int64]]:
    """Steps that run side by side (same ``deps``, ``repeat`` and ``delay``: channels).

    Returns the groups and, for every step, the index of its group.

    >>> s = Step(src=[0], dst=[1], nbytes=[1.0])
    >>> groups, of = concurrency_groups(Schedule(steps=(s, s, Step(src=[1], dst=[0],
    ...                                          nbytes=[1.0], deps=(0,)))))
    >>> len(groups), of.tolist()
    (2, [0, 0, 1])
    """
    keys: dict[tuple[tuple[int, ...], int, float], int] = {}
    members: list[list[Step]] = []
    group_of = np.zeros(len(schedule.steps), dtype=np.int64)
    for i, st in enumerate(schedule.steps):
        k = (st.deps, st.repeat, st.delay)
        if k not in keys:
            keys[k] = len(members)
            members.append([])
        members[keys[k]].append(st)
        group_of[i] = keys[k]
    return members, group_of


def chain(steps: list[Step]) -> list[Step]:
    """Make each step depend on the one before it (a sequential chain)."""
    out: list[Step] = []
    for i, s in enumerate(steps):
        out.append(replace(s, deps=(i - 1,) if i else ()))
    return out


def merge_parallel(schedules: list[Schedule], **kw: Any) -> Schedule:
    """Run schedules side by side (no dependency between them): renumber their deps."""
    steps: list[Step] = []
    for sch in schedules:
        off = len(steps)
        steps.extend(replace(s, deps=tuple(d + off for d in s.deps)) for s in sch.steps)
    return Schedule(steps=tuple(steps), **kw)


def as_int_array(x: ArrayLike) -> IntArray:
    return np.asarray(x, dtype=np.int32).ravel()
