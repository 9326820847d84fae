"""The algorithm registry and the group of ranks an algorithm compiles for.

Each algorithm is an :class:`Algorithm`: a name, the collectives it implements, a
``build(group, collective, nbytes, channels) -> steps`` function, and a ``check`` that says
why it cannot apply to a group (or ``None``). Lookup is by name in :data:`ALGORITHMS`;
modules register their algorithms on import with :func:`register`.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives import ALGORITHMS
>>> g = Group.of(build_cluster("dgx-h100", 1))
>>> g.n, g.servers, g.per_server
(8, 1, 8)
>>> ALGORITHMS["ring"].check(g, "all_reduce") is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fabricsim.errors import ConfigError, ScheduleError, unknown
from fabricsim.fabric.core import Fabric, pair_hash, with_nics
from fabricsim.fabric.kinds import NodeKind
from fabricsim.schedule.core import Channels, Crossings, Pipeline, Step

IntArray = NDArray[np.int32]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Group:
    """The ranks a collective runs over, with their placement on servers.

    ``ranks`` are indices into ``fabric.gpus`` in ring order; ``nodes`` their node ids.
    """

    fabric: Fabric
    ranks: IntArray
    nodes: IntArray = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", self.fabric.gpus[self.ranks].astype(np.int32))

    @staticmethod
    def of(fabric: Fabric, ranks: ArrayLike | None = None) -> Group:
        """Validate ``ranks`` (default: every GPU) and build the group."""
        if ranks is None:
            r = np.arange(fabric.n_gpus, dtype=np.int32)
        else:
            r = np.asarray(ranks).ravel()
            if r.size and not np.issubdtype(r.dtype, np.integer):
                raise ConfigError("ranks must be integer indices into fabric.gpus",
                                  field="ranks")
            r = r.astype(np.int32)
        if r.size < 1:
            raise ConfigError("a collective needs at least one rank", field="ranks")
        if r.min() < 0 or r.max() >= fabric.n_gpus:
            raise ConfigError(f"ranks must lie in 0..{fabric.n_gpus - 1} (the fabric has "
                              f"{fabric.n_gpus} GPUs)", field="ranks")
        if np.bincount(r, minlength=fabric.n_gpus).max() > 1:
            raise ConfigError("ranks must not repeat", field="ranks")
        return Group(fabric=fabric, ranks=r)

    @property
    def n(self) -> int:
        return int(self.ranks.shape[0])

    @cached_property
    def server_of(self) -> IntArray:
        """Server index of every member (-1 if outside a server)."""
        return self.fabric.node_server[self.nodes].astype(np.int32)

    @cached_property
    def by_server(self) -> list[IntArray]:
        """Member positions grouped per server, servers in order of first appearance."""
        _, first, inv = np.unique(self.server_of, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank_of_group = np.empty_like(order)
        rank_of_group[order] = np.arange(order.size)
        g = rank_of_group[inv.ravel()]
        idx = np.argsort(g, kind="stable")
        bounds = np.searchsorted(g[idx], np.arange(order.size + 1))
        return [idx[bounds[i]:bounds[i + 1]].astype(np.int32) for i in range(order.size)]

    @property
    def servers(self) -> int:
        return len(self.by_server)

    @cached_property
    def per_server(self) -> int:
        """Members per server if every server holds the same number, else 0."""
        sizes = {len(x) for x in self.by_server}
        return sizes.pop() if len(sizes) == 1 else 0

    @cached_property
    def spans_hosts(self) -> bool:
        """Whether members of one server sit on different hosts of it (compute trays, each
        its own operating system, :attr:`FabricInfo.gpus_per_host
        <fabricsim.fabric.FabricInfo.gpus_per_host>`): NCCL then joins them by multi-node
        NVLink.

        >>> from fabricsim.fabric import build_cluster
        >>> rack = build_cluster("gb200-nvl72", 1)
        >>> Group.of(rack, range(4)).spans_hosts, Group.of(rack, range(8)).spans_hosts
        (False, True)
        >>> Group.of(build_cluster("dgx-h100", 2)).spans_hosts
        False
        """
        per = self.fabric.info.gpus_per_host
        if per <= 0:
            return False
        host = self.fabric.node_local[self.nodes] // per
        return any(np.unique(host[idx]).size > 1 for idx in self.by_server)

    def grid(self) -> IntArray:
        """Member positions as a ``servers × per_server`` array (uniform groups only)."""
        if not self.per_server:
            raise ScheduleError("this algorithm needs the same number of ranks on every "
                                "server; pass ranks that fill servers evenly", field="ranks")
        return self._grid.copy()

    @cached_property
    def _grid(self) -> IntArray:
        return np.stack(self.by_server).astype(np.int32)

    def nvswitches(self, server: int) -> IntArray:
        """NVSwitch node ids inside ``server``."""
        f = self.fabric
        return np.flatnonzero((f.node_kind == NodeKind.NVSWITCH) & (f.node_server == server)
                              ).astype(np.int32)

    def nvswitch_grid(self, servers: IntArray) -> IntArray:
        """NVSwitch node ids of each of ``servers`` (``len(servers) × K``), by plane."""
        f = self.fabric
        sw = np.flatnonzero(f.node_kind == NodeKind.NVSWITCH).astype(np.int32)
        srv = f.node_server[sw]
        order = np.lexsort((sw, srv))
        sw, srv = sw[order], srv[order]
        k = self.nvswitch_planes
        if k == 0:
            return np.zeros((len(servers), 0), dtype=np.int32)
        start = np.searchsorted(srv, servers)
        return np.asarray(sw[start[:, None] + np.arange(k)[None, :]], dtype=np.int32)

    @cached_property
    def nvswitch_planes(self) -> int:
        """NVSwitch chips per server of this group (0 when GPUs are not on NVSwitches)."""
        return int(self.nvswitches(int(self.server_of[0])).size) if self.server_of[0] >= 0 \
            else 0


def channel_nic(fabric: Fabric, channel: int) -> int:
    """The NIC index (among a GPU's NICs) that ``channel`` uses across servers.

    As NCCL spreads channels over every NIC on a GPU's PCIe switch: channels
    ``0..g-1`` (``g`` GPUs per server, one rail each) use each GPU's first NIC, the next
    ``g`` its second, and so on, so ``g × nics_per_gpu`` channels use every NIC once.

    >>> from fabricsim.fabric import build_cluster
    >>> p5 = build_cluster("aws-p5", 2)
    >>> [channel_nic(p5, c) for c in (0, 7, 8, 31, 32)]
    [0, 0, 1, 3, 0]
    """
    k = max(fabric.info.nics_per_gpu, 1)
    g = max(fabric.info.gpus_per_server, 1)
    return (channel // g) % k


def channel_hashes(fabric: Fabric, src: IntArray, dst: IntArray, channel: int,
                   nic: int | None = None) -> NDArray[np.uint64]:
    """Flow hashes for one channel: inside a server the channel index (so channel ``c``
    rides NVSwitch plane ``c``), across the network a pair hash seeded by the channel that
    leaves and enters through NIC ``nic`` (default :func:`channel_nic`) of each GPU."""
    same = fabric.node_server[src] == fabric.node_server[dst]
    h = with_nics(pair_hash(src, dst, seed=channel + 1),
                  channel_nic(fabric, channel) if nic is None else nic)
    h[same] = np.uint64(channel)
    return h


def step(fabric: Fabric, src: ArrayLike, dst: ArrayLike, nbytes: float | ArrayLike, *,
         channel: int = 0, repeat: int = 1, deps: tuple[int, ...] = (), reduce_at: str = "",
         label: str = "", nic: int | None = None) -> Step:
    """A :class:`Step` with channel-aware flow hashes (``nic``: the NIC index its
    cross-server transfers use, default the channel's)."""
    s = np.asarray(src, dtype=np.int32).ravel()
    d = np.asarray(dst, dtype=np.int32).ravel()
    nb = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), s.shape).copy()
    return Step(src=s, dst=d, nbytes=nb, repeat=repeat, deps=deps, reduce_at=reduce_at,
                label=label, channel=channel, hashes=channel_hashes(fabric, s, d, channel, nic))


def striped_step(fabric: Fabric, src: IntArray, dst: IntArray, nbytes: FloatArray,
                 across: IntArray, *, deps: tuple[int, ...] = (), reduce_at: str = "",
                 label: str = "") -> Step:
    """One channel-0 :class:`Step` whose transfers between servers (``across``: their
    indices) are striped over every NIC of the sending GPU, as a GPU with several NICs
    moves one head's data: NCCL gives each GPU:NIC pair its own channel, and AWS's EFA
    plugin stripes messages over the NICs it groups into one device (aws-ofi-nccl,
    ``OFI_NCCL_MIN_STRIPE_SIZE``). With one NIC per GPU it is :func:`step`.

    >>> import numpy as np
    >>> from fabricsim.fabric import build_cluster
    >>> p5 = build_cluster("aws-p5", 2)
    >>> s = striped_step(p5, p5.gpus[:1], p5.gpus[8:9], np.array([4e6]), np.array([0]))
    >>> len(s.src), float(s.nbytes.sum())
    (4, 4000000.0)
    """
    src = np.asarray(src, dtype=np.int32).ravel()
    dst = np.asarray(dst, dtype=np.int32).ravel()
    nb = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape).copy()
    k = max(fabric.info.nics_per_gpu, 1)
    if k == 1 or len(across) == 0:
        return step(fabric, src, dst, nb, deps=deps, reduce_at=reduce_at, label=label)
    keep = np.ones(src.size, dtype=bool)
    keep[across] = False
    ss, dd, bb = [src[keep]], [dst[keep]], [nb[keep]]
    hh = [channel_hashes(fabric, src[keep], dst[keep], 0)]
    for j in range(k):
        ss.append(src[across])
        dd.append(dst[across])
        bb.append(nb[across] / k)
        hh.append(channel_hashes(fabric, src[across], dst[across], 0, nic=j))
    return Step(src=np.concatenate(ss), dst=np.concatenate(dd), nbytes=np.concatenate(bb),
                deps=deps, reduce_at=reduce_at, label=label, channel=0,
                hashes=np.concatenate(hh))


Builder = Callable[[Group, str, float, int], list[Step]]
Check = Callable[[Group, str], "str | None"]


def _always(group: Group, collective: str) -> str | None:
    return None


@dataclass(frozen=True)
class Algorithm:
    """A named way to run some collectives, compiled to schedule steps by ``build``."""

    name: str
    collectives: frozenset[str]
    build: Builder
    check: Check = _always
    protocols: tuple[str, ...] = ("ll", "ll128", "simple")
    description: str = ""
    #: Considered by automatic selection (NCCL's own algorithms); others only when forced.
    auto: bool = True
    #: Who lays the collective out: ``"nccl"`` on GPUs, ``"xla"`` on TPU slices; automatic
    #: selection considers only the runtime of the group's fabric.
    runtime: str = "nccl"
    #: Automatic selection considers it only on groups spanning at least this many servers.
    auto_min_servers: int = 1
    #: ... and at most this many (0: no limit).
    auto_max_servers: int = 0
    #: Most message bytes/s its kernels move on a group with this many channels
    #: (:attr:`Schedule.kernel_bytes_per_s`); ``None``: only the links bound it.
    kernel_rate: Callable[[Group, int], float] | None = None
    #: Its chunk pipeline on a group, for a collective (:attr:`Schedule.pipeline`);
    #: ``None``: its steps already hold every chunk's cost.
    pipeline: Callable[[Group, str], Pipeline | None] | None = None
    #: Further chunk pipelines on a group, for a collective, each for the protocols it
    #: names (:attr:`Schedule.pipelines`); ``None``: none.
    pipelines: Callable[[Group, str], tuple[Pipeline, ...]] | None = None
    #: Its network crossings in sequence on a group, for a collective
    #: (:attr:`Schedule.crossings`); ``None``: none is charged.
    crossings: Callable[[Group, str], Crossings | None] | None = None
    #: The channels one of whose rate sets its steps' pace on a group, for a collective,
    #: under a user's limit on them (``None``: NCCL's own; :attr:`Schedule.spread`);
    #: ``None``: the links' rate alone.
    spread: Callable[[Group, str, int | None], Channels | None] | None = None
    #: Factors on the protocols' per-hop latencies for its steps, by protocol then link
    #: class (:attr:`Schedule.hop_scale`); empty: the protocols' own.
    hop_scale: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: Whether its steps on a group, for a collective, each cost a fixed time with no size
    #: ramp (:attr:`Schedule.fixed_steps`); ``None``: never.
    fixed_steps: Callable[[Group, str], bool] | None = None
    #: A tree between servers whose channels a protocol's own rate bounds
    #: (``Protocol.tree_channel_rate``, :attr:`Schedule.tree_channels`).
    tree_channels: bool = False
    #: Its kernels' warps on a group that copy the whole message between the user's
    #: buffers and NCCL's (``Protocol.nvls_warp_rate``, :attr:`Schedule.copy_warps`);
    #: ``None``: none bound it.
    copy_warps: Callable[[Group], int] | None = None
    #: Its NVLS channels on a group whose rate a protocol bounds per channel
    #: (``Protocol.nvlstree_channel_rate``, :attr:`Schedule.nvls_channels`); ``None``:
    #: none.
    nvls_channels: Callable[[Group], int] | None = None

    def why_not(self, group: Group, collective: str) -> str | None:
        """Why this algorithm cannot run ``collective`` on ``group`` (``None`` if it can)."""
        if collective not in self.collectives:
            return (f"{self.name} does not implement {collective} (it implements "
                    f"{', '.join(sorted(self.collectives))})")
        return self.check(group, collective)


#: Algorithms by name. Filled by the algorithm modules on import.
ALGORITHMS: dict[str, Algorithm] = {}


def register(algo: Algorithm) -> Algorithm:
    """Add ``algo`` to :data:`ALGORITHMS` (replacing one of the same name)."""
    ALGORITHMS[algo.name] = algo
    return algo


def get_algorithm(name: str) -> Algorithm:
    """The algorithm called ``name``; a did-you-mean error otherwise."""
    key = name.lower().replace("-", "_")
    if key not in ALGORITHMS:
        raise unknown("algorithm", name, ALGORITHMS, field="algo")
    return ALGORITHMS[key]


def fill_step(fabric: Fabric, src: int, dst: int, hops: int, label: str) -> list[Step]:
    """A zero-byte step repeated ``hops`` times: the pipeline fill of a chain or tree
    (the first chunk crossing ``hops`` extra hops before the stream is steady)."""
    if hops < 1:
        return []
    return [step(fabric, [src], [dst], 0.0, repeat=hops, label=label)]


def shift_deps(steps: Sequence[Step], offset: int) -> list[Step]:
    """Renumber the ``deps`` of ``steps`` by ``offset`` (to append them after others)."""
    from dataclasses import replace

    return [replace(s, deps=tuple(d + offset for d in s.deps)) for s in steps]
