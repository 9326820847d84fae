"""NCCL's environment variables: each one honoured as NCCL reads it, or refused by name.

A :class:`NcclEnv` is read once (:func:`nccl_env`) from a mapping such as ``os.environ``;
every ``NCCL_*`` variable in it is one of:

* **honoured** — ``NCCL_ALGO`` and ``NCCL_PROTO`` (a list, ``^`` and a list to exclude,
  or NCCL 2.24's per-collective form ``"ring;allreduce:tree,ring"``) narrow the tuner's
  choice (``NCCL_ALGO`` not for all-to-all and send/recv, which NCCL runs point to
  point); ``NCCL_NVLS_ENABLE`` (0, 1, 2) and ``NCCL_COLLNET_ENABLE`` (0, 1) turn NVLink
  SHARP and in-network reduction off or on; ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS``
  and ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` (the communicator's ``minCTAs`` / ``maxCTAs``)
  clamp the ring and tree channels the model runs across servers, and inside one server
  the NCCL channels a ring all-reduce, reduce-scatter or all-gather is spread over
  (:meth:`NcclEnv.channels_of`), the larger minimum and the smaller maximum where both
  are set, as NCCL's ``src/graph/connect.cc`` combines them. NCCL
  clamps NVLS's own channels with the ``CTAS`` pair as well (``src/transport/nvls.cc``):
  the model takes them for NVLSTree's per-channel bound from 4 servers on
  (:meth:`NcclEnv.nvls_channels_of`) and says what it keeps (:meth:`NcclEnv.nvls_note`);
  ``NCCL_IB_QPS_PER_CONNECTION`` (1-128) is the queue pairs per connection
  between servers, on every backend (the cluster's ``params.qps``: hashed ECMP spreads
  them); ``NCCL_BUFFSIZE`` (1 MiB-1 GiB) is the Simple buffer per connection, whose
  eighth is the chunk of a tree, a broadcast/reduce chain and an NVLS round (the
  cluster's ``params.buffsize``); ``NCCL_CROSS_NIC`` 0 or 2 is what the model does
  already (rings stay on one rail), and so is 1 on a network without rails (refused on
  a rail-optimized one: :meth:`NcclEnv.check_fabric`); ``NCCL_TUNER_PLUGIN`` naming
  AWS's EFA plugin (``*ofi*``) and the plugin's own ``OFI_NCCL_TUNER_TYPE``
  (``Region``, its default, or ``Internal``: NCCL's own model chooses) say whether the
  plugin's region tuner picks the algorithm and protocol on AWS's p5, p5en and p6
  (:mod:`fabricsim.collectives.plugin_tuner`);
* **without effect on time** — :data:`NO_EFFECT` (logging, interface and GID selection,
  time-outs, plugins' interface names, variables no NCCL release reads), accepted and
  listed as such;
* **as modelled at some values** — :data:`AS_MODELLED`: settings published recipes carry
  whose given value is what the model does already (``NCCL_NET_GDR_C2C=1``, NCCL's
  default from 2.27; a ``NCCL_NET_GDR_LEVEL`` that keeps GPU Direct RDMA;
  ``NCCL_IB_SPLIT_DATA_ON_QPS`` 0 or 1; ...), accepted at those values and refused at
  others, each with its reason; ``NCCL_P2P_NET_CHUNKSIZE`` changes nothing but send/recv
  and all-to-all, and is refused for those at other than NCCL's 128 KiB;
* **refused** — anything else, by name, with what is supported: settings the model does
  not represent (``NCCL_IB_HCA``, ``NCCL_CROSS_NIC=1`` on rails, the
  ``PAT`` algorithm, ...) and contradictions (``NCCL_ALGO=NVLS`` with
  ``NCCL_NVLS_ENABLE=0``, a minimum above the maximum).

Example
-------
>>> nccl_env({"NCCL_ALGO": "Ring"}).allowed_algorithms(["ring", "tree"])
['ring']
>>> e = nccl_env({"NCCL_ALGO": "ring;allreduce:tree", "NCCL_MAX_NCHANNELS": "8"})
>>> e.allowed_algorithms(["ring", "tree"], "all_reduce"), e.channels(16)
(['tree'], 8)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fabricsim.collectives.alltoall import P2P_NET_CHUNK_BYTES
from fabricsim.errors import ConfigError
from fabricsim.fabric.cluster import BUFFSIZE_RANGE

if TYPE_CHECKING:
    from fabricsim.collectives.registry import Group

__all__ = ["AS_MODELLED", "HONOURED", "NCCL_ALGOS", "NCCL_PROTOS", "NO_EFFECT", "NcclEnv",
           "is_nccl_variable", "nccl_env"]


#: NCCL_ALGO names -> fabricsim algorithms (CollNet runs as SHARP; with NVLS, NVLS+SHARP).
NCCL_ALGOS = {"ring": ("ring",), "tree": ("tree",), "nvls": ("nvls",),
              "nvlstree": ("nvlstree",), "collnetdirect": ("sharp", "nvls_sharp"),
              "collnetchain": ("sharp", "nvls_sharp"), "collnet": ("sharp", "nvls_sharp")}
#: NCCL_PROTO names -> fabricsim protocols.
NCCL_PROTOS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
#: NCCL's names of collectives in the per-collective form -> fabricsim's.
_FUNCS = {"broadcast": "broadcast", "reduce": "reduce", "allgather": "all_gather",
          "reducescatter": "reduce_scatter", "allreduce": "all_reduce"}
#: Variables fabricsim honours (see the module docs).
HONOURED = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE",
            "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS",
            "NCCL_IB_QPS_PER_CONNECTION", "NCCL_CROSS_NIC", "NCCL_BUFFSIZE",
            "NCCL_P2P_NET_CHUNKSIZE", "NCCL_TUNER_PLUGIN", "OFI_NCCL_TUNER_TYPE")
#: Variables that change no timing (logging, device and interface selection, time-outs).
NO_EFFECT = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
             "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_IB_GID_INDEX",
             "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_IB_SL", "NCCL_IB_TC",
             "NCCL_IB_PKEY", "NCCL_ASYNC_ERROR_HANDLING", "NCCL_TOPO_DUMP_FILE",
             "NCCL_GRAPH_DUMP_FILE", "NCCL_HOSTID", "NCCL_COMM_ID", "NCCL_CUMEM_ENABLE",
             "NCCL_IGNORE_CPU_AFFINITY", "NCCL_SET_THREAD_NAME", "NCCL_LAUNCH_MODE",
             "NCCL_NET_PLUGIN", "NCCL_PROFILER_PLUGIN",
             # set-up a recipe carries: CUDA-graph mixing (nccl-tests captures none), the
             # host's work queue, SR-IOV functions merged into one device, the size above
             # which a message rides adaptive routing (the fabric's routing is
             # params.routing), a topology file naming the machine the preset describes,
             # the socket transport's threads (the model's transports are RDMA), the
             # network plugins' interface names and acknowledgements
             "NCCL_GRAPH_MIXING_SUPPORT", "NCCL_WORK_FIFO_BYTES", "NCCL_IB_MERGE_VFS",
             "NCCL_IB_AR_THRESHOLD", "NCCL_TOPO_FILE", "NCCL_SOCKET_NTHREADS",
             "NCCL_NSOCKS_PERTHREAD", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME",
             "NCCL_GPUDIRECTTCPX_FORCE_ACK", "NCCL_FASTRAK_IFNAME",
             # read by no NCCL release 2.19-2.30 (recipes set it all the same)
             "NCCL_MNNVLS_ENABLE")
#: NCCL's point-to-point network chunk (``NCCL_P2P_NET_CHUNKSIZE``), bytes: it sizes
#: send/recv and all-to-all (their chunks and how many channels a peer's bytes take), and
#: nothing else; the model times those at this default.
DEFAULT_P2P_NET_CHUNK = P2P_NET_CHUNK_BYTES
#: The GPU Direct RDMA levels (``NCCL_NET_GDR_LEVEL``) under which the model's GPUs still
#: reach their NICs directly: NCCL's path names from PIX up, or its old numbering 1-5.
GDR_LEVELS_KEPT = ("pix", "pxb", "pxn", "p2c", "phb", "sys", "1", "2", "3", "4", "5")


def _is(*values: str) -> Callable[[str], bool]:
    """A test that a variable's value is one of ``values`` (compared lower-case).

    >>> _is("0", "0x0")(" 0x0 "), _is("1")("2")
    (True, False)
    """
    return lambda v: v.strip().lower() in values


#: Variables published recipes set whose given value is what the model does already:
#: name -> (whether a value is so, the values accepted, why). Other values are refused
#: with the reason. Defaults are NCCL's (``NCCL_PARAM`` in its source, 2.27-2.30).
AS_MODELLED: Mapping[str, tuple[Callable[[str], bool], str, str]] = MappingProxyType({
    "NCCL_NET_GDR_C2C": (_is("1"), "1", "the model's NICs read and write GPU memory "
                         "directly, on a Grace host over its C2C link too (NCCL's "
                         "default from 2.27); staging through host memory is not modelled "
                         "(on x86 hosts the variable changes nothing: unset it)"),
    "NCCL_NET_GDR_LEVEL": (_is(*GDR_LEVELS_KEPT), "PIX, PXB, PXN, P2C, PHB, SYS or 1-5",
                           "the model's GPUs reach their NICs by GPU Direct RDMA (each NIC "
                           "beside its GPU); a level that turns it off (LOC, 0, NVL, NVB, "
                           "C2C) stages through host memory, which is not modelled"),
    "NCCL_NET_GDR_READ": (_is("1"), "1", "the model's NICs read the data they send from "
                          "GPU memory; with 0 it is first copied to host memory, which is "
                          "not modelled"),
    "NCCL_MNNVL_ENABLE": (_is("1", "2"), "1 or 2 (NCCL's default)", "the model joins the "
                          "trays of a GB200/GB300 rack by multi-node NVLink; 0 turns that "
                          "off, which is not modelled (on systems of one host per NVLink "
                          "domain it changes nothing: unset it)"),
    "NCCL_IB_SPLIT_DATA_ON_QPS": (_is("0", "1"), "0 or 1", "either way a connection's "
                                  "bytes spread evenly over its queue pairs, as the model "
                                  "spreads them (NCCL_IB_QPS_PER_CONNECTION)"),
    "NCCL_IB_DISABLE": (_is("0"), "0", "the model's transports between servers are RDMA; "
                        "NCCL over TCP sockets is not modelled (where a network plugin "
                        "carries the traffic, as on AWS, it changes nothing: unset it)"),
    "NCCL_NET": (lambda v: v.strip().lower() != "socket", "the fabric's RDMA transport "
                 "(IB, a plugin's name)", "NCCL over TCP sockets is not modelled"),
    "NCCL_PXN_DISABLE": (_is("0"), "0", "NCCL's default: a GPU may reach a NIC of its "
                         "server through another GPU (PXN), as the model routes "
                         "all-to-all and send/recv"),
    "NCCL_IB_PCI_RELAXED_ORDERING": (_is("1", "2"), "1 or 2 (NCCL's default)",
                                     "the model's NICs run at their line rate over PCIe; "
                                     "without relaxed ordering virtualized hosts lose "
                                     "bandwidth, which it does not model"),
    "NCCL_TESTS_SPLIT_MASK": (_is("0", "0x0"), "0 (no split)", "nccl-tests runs one "
                              "communicator over every rank, as the model does; a mask "
                              "splits it into several, which it does not model"),
})
#: NCCL's bounds on channels and queue pairs.
MAX_CHANNELS = 64
MAX_QPS = 128


@dataclass(frozen=True)
class NcclEnv:
    """What NCCL's environment variables allow: algorithm and protocol sets per
    collective (key ``""``: every collective; ``None``: NCCL's own choice), SHARP/NVLS
    switches (``None``: the fabric's default), channel bounds and queue pairs."""

    algorithms: Mapping[str, frozenset[str]] | None = None
    protocols: Mapping[str, frozenset[str]] | None = None
    collnet: bool | None = None
    nvls: bool | None = None
    min_channels: int | None = None
    max_channels: int | None = None
    qps: int | None = None
    #: ``NCCL_BUFFSIZE`` in bytes (``None``: NCCL's default for the platform).
    buffsize_bytes: int | None = None
    #: ``NCCL_P2P_NET_CHUNKSIZE`` in bytes (``None``: NCCL's default): it sizes send/recv
    #: and all-to-all only (:meth:`check_p2p`).
    p2p_net_chunk_bytes: int | None = None
    #: ``NCCL_CROSS_NIC=1``: a ring may leave a server on one NIC and enter the next on
    #: another. The model's rings keep one NIC index, which on a network without rails
    #: is as good as any; on a rail-optimized one it is refused (:meth:`check_fabric`).
    cross_nic: bool = False
    #: ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` as set (NCCL clamps NVLS's channels with
    #: them too: :meth:`nvls_channels_of`, :meth:`nvls_note`).
    ctas: tuple[int | None, int | None] = (None, None)
    #: Variables set that change no timing (reported, not used).
    no_effect: tuple[str, ...] = ()
    #: Variables set to what the model does already (:data:`AS_MODELLED`; reported).
    as_modelled: tuple[str, ...] = ()
    #: Whether the network plugin's own tuner, where the fabric's plugin has one (AWS's EFA
    #: plugin on p5, p5en, p6), picks before NCCL's model (``OFI_NCCL_TUNER_TYPE``).
    plugin_tuner: bool = True
    #: The variables this was read from, as set (``NCCL_*`` and ``OFI_NCCL_TUNER_TYPE``
    #: with a value; :meth:`over` lays others over them).
    variables: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def over(self, base: Mapping[str, str]) -> NcclEnv:
        """These variables laid over ``base`` (a scenario's ``collective.env``), each one
        set here replacing the same name there, read again as one environment.

        >>> e = nccl_env({"NCCL_ALGO": "Tree"}).over({"NCCL_ALGO": "Ring",
        ...                                            "NCCL_MAX_NCHANNELS": "4"})
        >>> sorted(e.allowed_algorithms(["ring", "tree"])), e.max_channels
        (['tree'], 4)
        """
        if not base:
            return self
        if not self.variables and self != NcclEnv():
            raise ConfigError("these settings were not read from variables (nccl_env), so "
                              "they cannot be laid over others: read them with nccl_env",
                              field="env")
        return nccl_env({**base, **self.variables})

    def algorithm_set(self, collective: str = "") -> frozenset[str] | None:
        """The algorithms allowed for ``collective`` (``None``: any)."""
        if self.algorithms is None:
            return None
        return self.algorithms.get(collective, self.algorithms.get(""))

    def protocol_set(self, collective: str = "") -> frozenset[str] | None:
        """The protocols allowed for ``collective`` (``None``: any)."""
        if self.protocols is None:
            return None
        return self.protocols.get(collective, self.protocols.get(""))

    def allowed_algorithms(self, candidates: Sequence[str],
                           collective: str = "") -> list[str]:
        """``candidates`` NCCL may run for ``collective`` under these settings."""
        allowed = self.algorithm_set(collective)
        out = [a for a in candidates if allowed is None or a in allowed]
        if self.nvls is False:
            out = [a for a in out if not a.startswith("nvls")]
        if self.collnet is not True:
            out = [a for a in out if a not in ("sharp", "nvls_sharp")]
        return out

    def choices(self, collective: str, algo: str | None = None, proto: str | None = None
                ) -> tuple[list[str | None], list[str | None]]:
        """The algorithms and protocols NCCL may pick from for ``collective`` under these
        settings, beside a forced ``algo`` / ``proto`` (``[None]``: the tuner's own
        choice); :meth:`Tuner.choose_among` ranks them.

        >>> nccl_env({"NCCL_NVLS_ENABLE": "0"}).choices("all_reduce")[0]
        ['ring', 'tree']
        >>> nccl_env({}).choices("all_reduce", proto="simple")
        ([None], ['simple'])
        >>> nccl_env({"NCCL_ALGO": "Ring"}).choices("alltoall")  # point-to-point: not NCCL_ALGO's
        ([None], [None])
        >>> nccl_env({"NCCL_PROTO": "Simple"}).choices("alltoall")
        ([None], ['simple'])
        """
        from fabricsim.collectives.registry import ALGORITHMS
        from fabricsim.collectives.tuner import P2P_COLLECTIVES

        algos: list[str | None] = [algo]
        # NCCL's point-to-point collectives take no NCCL_ALGO (nor NVLS or CollNet)
        if algo is None and self.restricts and collective not in P2P_COLLECTIVES:
            auto = [a.name for a in ALGORITHMS.values()
                    if a.auto and a.runtime == "nccl" and collective in a.collectives]
            extra = ["sharp", "nvls_sharp"] if self.collnet else []
            algos = list(self.allowed_algorithms([*auto, *extra], collective))
            if not algos:
                runs = sorted({*auto, *extra})
                raise ConfigError(f"NCCL_ALGO/NCCL_NVLS_ENABLE leave no algorithm to run "
                                  f"{collective}: NCCL runs it with {', '.join(runs)}; "
                                  f"allow {'it' if len(runs) == 1 else 'one of them'}",
                                  field="NCCL_ALGO")
        allowed = self.protocol_set(collective)
        protos: list[str | None] = [proto] if proto is not None or allowed is None \
            else list(sorted(allowed))
        return algos, protos

    def channels_of(self, group: Group) -> int | None:
        """The channels the model runs for ``group`` under ``NCCL_MIN/MAX_NCHANNELS``
        (its default channels clamped); ``None`` where neither is set. Inside one server,
        where the model's rings stripe every NVSwitch plane whatever their number, these
        are NCCL's own channels clamped (:func:`~fabricsim.collectives.pipeline.nccl_channels`):
        they cap the channels a ring is spread over
        (:func:`~fabricsim.collectives.pipeline.ring_spread`), so ``NCCL_MAX_NCHANNELS=4``
        runs a ring on 4 of a DGX H100's 16.

        >>> from fabricsim.fabric import build_cluster
        >>> from fabricsim.collectives.registry import Group
        >>> g = Group.of(build_cluster("dgx-h100", 2))
        >>> nccl_env({"NCCL_MAX_NCHANNELS": "4"}).channels_of(g), nccl_env({}).channels_of(g)
        (4, None)
        >>> one = Group.of(build_cluster("dgx-h100", 1))
        >>> nccl_env({"NCCL_MAX_NCHANNELS": "4"}).channels_of(one)
        4
        >>> nccl_env({"NCCL_MIN_NCHANNELS": "4"}).channels_of(one)
        16
        """
        if self.min_channels is None and self.max_channels is None:
            return None
        from fabricsim.collectives.pipeline import nccl_channels
        from fabricsim.collectives.tuner import default_channels

        if group.servers == 1:
            return self.channels(nccl_channels(group))
        return self.channels(default_channels(group))

    def check_fabric(self, group: Group) -> None:
        """Refuse what these settings ask of ``group``'s fabric that the model does not
        run: ``NCCL_CROSS_NIC=1`` across servers on a rail-optimized network, where a ring
        changing NIC index between servers crosses the spines and NCCL's rings differ
        from the model's (on other topologies every NIC reaches every other alike, so it
        changes nothing).

        >>> from fabricsim.fabric import build_cluster
        >>> from fabricsim.collectives.registry import Group
        >>> e = nccl_env({"NCCL_CROSS_NIC": "1"})
        >>> e.check_fabric(Group.of(build_cluster("dgx-h100", 2, topology="fat-tree")))
        >>> e.check_fabric(Group.of(build_cluster("dgx-h100", 2)))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        fabricsim.errors.ConfigError: NCCL_CROSS_NIC: NCCL_CROSS_NIC=1 (rings may change ...
        """
        info = group.fabric.info
        if self.cross_nic and group.servers > 1 and info.topology == "rail-optimized":
            raise ConfigError("NCCL_CROSS_NIC=1 (rings may change rail between servers) is "
                              "not modelled on a rail-optimized network: fabricsim's rings "
                              "stay on one rail, as with 0 or 2 (NCCL's default); on a "
                              "fat-tree or dragonfly, where every NIC reaches every other "
                              "alike, it is what the model does", field="NCCL_CROSS_NIC")

    def cluster_params(self) -> dict[str, Any]:
        """The cluster's ``params`` these settings set, on every backend: queue pairs per
        connection (``qps``), the Simple buffer (``buffsize``), and ``sharp`` where
        ``NCCL_COLLNET_ENABLE=1`` has the fabric's SHARP switches take part.

        >>> nccl_env({"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_ALGO": "Ring"}).cluster_params()
        {'qps': 4}
        """
        return {k: v for k, v in (("qps", self.qps), ("buffsize", self.buffsize_bytes),
                                  ("sharp", True if self.collnet else None)) if v is not None}

    def channel_settings(self) -> str:
        """The channel bounds in force, each named by the variable that set it (a ``CTAS``
        one where it is the binding one), as ``NAME=value`` (``''``: none).

        >>> nccl_env({"NCCL_MAX_CTAS": "4", "NCCL_ALGO": "Ring"}).channel_settings()
        'NCCL_MAX_CTAS=4'
        >>> nccl_env({"NCCL_MAX_CTAS": "8", "NCCL_MAX_NCHANNELS": "4"}).channel_settings()
        'NCCL_MAX_NCHANNELS=4'
        >>> NcclEnv(max_channels=4).channel_settings()
        'NCCL_MAX_NCHANNELS=4'
        """
        lo, hi = self.ctas
        return _settings(
            ("NCCL_MIN_CTAS" if lo is not None and lo == self.min_channels
             else "NCCL_MIN_NCHANNELS", self.min_channels),
            ("NCCL_MAX_CTAS" if hi is not None and hi == self.max_channels
             else "NCCL_MAX_NCHANNELS", self.max_channels))

    def channels(self, default: int) -> int:
        """``default`` channels clamped to ``NCCL_MIN/MAX_NCHANNELS``."""
        return _clamp(default, self.min_channels, self.max_channels)

    def nvls_channels_of(self, group: Group) -> int | None:
        """NVLS's channels on ``group`` under ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``: NCCL's
        own (:func:`~fabricsim.collectives.pipeline.nvls_channels`) clamped by them, as
        NCCL sets ``nvlsChannels`` (``src/transport/nvls.cc``); ``None`` where neither is
        set. ``NCCL_MIN/MAX_NCHANNELS`` do not move them.

        >>> from fabricsim.fabric import build_cluster
        >>> from fabricsim.collectives.registry import Group
        >>> g = Group.of(build_cluster("dgx-h100", 8))
        >>> [nccl_env(e).nvls_channels_of(g) for e in ({"NCCL_MIN_CTAS": "24"},
        ...     {"NCCL_MAX_CTAS": "8"}, {"NCCL_MIN_CTAS": "4"}, {"NCCL_MIN_NCHANNELS": "24"})]
        [24, 8, 16, None]
        """
        lo, hi = self.ctas
        if lo is None and hi is None:
            return None
        from fabricsim.collectives.pipeline import nvls_channels

        return _clamp(nvls_channels(group), lo, hi)

    def nvls_note(self, algorithms: Sequence[str]) -> str:
        """What the model takes and leaves of ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` where
        NVLS or NVLSTree ran (``algorithms``: those that ran): NCCL clamps NVLS's channels
        with them (:meth:`nvls_channels_of`); the model bounds NVLSTree's rate from 4
        servers by those channels and keeps NVLS's own for the rest (``''``: not set, or
        no NVLS ran).

        >>> nccl_env({"NCCL_MIN_CTAS": "24"}).nvls_note(["nvlstree", "tree"])[:35]
        'NCCL_MIN_CTAS=24 sets NVLS channels'
        >>> nccl_env({"NCCL_MIN_NCHANNELS": "24"}).nvls_note(["nvlstree"])
        ''
        """
        lo, hi = self.ctas
        ran = sorted({a for a in algorithms if a in ("nvls", "nvlstree")})
        if (lo is None and hi is None) or not ran:
            return ""
        named = _settings(("NCCL_MIN_CTAS", lo), ("NCCL_MAX_CTAS", hi))
        return (f"{named} sets NVLS channels in NCCL too (src/transport/nvls.cc): the model "
                f"bounds NVLSTree's rate from 4 servers on by those channels and keeps "
                f"NVLS's own (16 on Hopper, 24-32 on Blackwell) for its chunk pipeline, "
                f"network crossings and copy warps, so its {'/'.join(ran)} times below "
                f"that scale do not change with it (docs/collectives.md, "
                f"\"Channels of NVLSTree\")")

    def channels_note(self, servers: int, collective: str, algorithms: Sequence[str]) -> str:
        """What the model leaves out when ``NCCL_MIN/MAX_NCHANNELS`` (or the ``CTAS`` pair)
        is set inside one server (``servers`` 1) and something other than a ring
        all-reduce, reduce-scatter or all-gather ran (``algorithms``: those that ran):
        there the limit caps only such a ring's spread, while NCCL clamps the ring and tree
        channels every collective runs on (``''``: nothing left out; NVLS: :meth:`nvls_note`).

        >>> e = nccl_env({"NCCL_MAX_NCHANNELS": "4"})
        >>> e.channels_note(1, "broadcast", ["ring"])[:42]
        'NCCL_MAX_NCHANNELS=4 caps, inside one serv'
        >>> e.channels_note(1, "all_reduce", ["ring", "nvls"])
        ''
        >>> e.channels_note(2, "broadcast", ["ring"])
        ''
        >>> nccl_env({"NCCL_MIN_CTAS": "24"}).channels_note(1, "broadcast", ["ring"])[:21]
        'NCCL_MIN_CTAS=24 caps'
        """
        if (self.min_channels is None and self.max_channels is None) or servers != 1:
            return ""
        ring_coll = collective in ("all_reduce", "reduce_scatter", "all_gather")
        left = sorted({a for a in algorithms if a not in ("nvls", "nvlstree")
                       and not (a == "ring" and ring_coll)})
        if not left:
            return ""
        return (f"{self.channel_settings()} caps, inside one server, the channels of a "
                f"ring all-reduce, reduce-scatter or all-gather only; the model's "
                f"{collective} with {'/'.join(left)} here does not change with it, where "
                "NCCL would clamp its channels too")

    def check_p2p(self, collective: str) -> str:
        """``NCCL_P2P_NET_CHUNKSIZE`` for ``collective``: refused for send/recv and
        all-to-all at other than NCCL's default (it sets their chunks and how many channels
        a peer's bytes take, which the model derives otherwise); for any other collective a
        note that it changes nothing there (``''``: not set, or the default).

        >>> nccl_env({"NCCL_P2P_NET_CHUNKSIZE": "524288"}).check_p2p("all_reduce")[:40]
        'NCCL_P2P_NET_CHUNKSIZE=524288: set, with'
        >>> nccl_env({"NCCL_P2P_NET_CHUNKSIZE": "524288"}).check_p2p("alltoall")
        Traceback (most recent call last):
        ...
        fabricsim.errors.ConfigError: NCCL_P2P_NET_CHUNKSIZE: NCCL_P2P_NET_CHUNKSIZE=524288 ...
        """
        from fabricsim.collectives.tuner import P2P_COLLECTIVES

        c = self.p2p_net_chunk_bytes
        if c is None or c == DEFAULT_P2P_NET_CHUNK:
            return ""
        if collective in P2P_COLLECTIVES:
            raise ConfigError(f"NCCL_P2P_NET_CHUNKSIZE={c} is not modelled for {collective}: "
                              f"it sets the chunks and the channels of NCCL's point-to-point "
                              f"transfers between servers, which the model times at NCCL's "
                              f"default; unset it (or {DEFAULT_P2P_NET_CHUNK})",
                              field="NCCL_P2P_NET_CHUNKSIZE")
        return (f"NCCL_P2P_NET_CHUNKSIZE={c}: set, without effect on {collective} (it sizes "
                f"send/recv and all-to-all)")

    @property
    def restricts(self) -> bool:
        """True when the settings narrow the tuner's choice of algorithm or protocol."""
        return (self.algorithms is not None or self.protocols is not None
                or self.nvls is False or bool(self.collnet))

    def describe(self) -> str:
        """The honoured settings, as a user would have written them ('' if none)."""
        out = []
        if self.min_channels is not None or self.max_channels is not None:
            out.append(f"channels {self.min_channels or 1}-{self.max_channels or MAX_CHANNELS}")
        if self.qps is not None:
            out.append(f"{self.qps} QPs per connection")
        if self.buffsize_bytes is not None:
            out.append(f"a {self.buffsize_bytes / 2**20:g} MiB Simple buffer")
        if not self.plugin_tuner:
            out.append("NCCL's own choice where the network plugin has a tuner")
        return ", ".join(out)


def _list(var: str, text: str, table: Mapping[str, Any]) -> frozenset[str]:
    neg = text.startswith("^")
    words = [w.strip().lower() for w in text.lstrip("^").split(",") if w.strip()]
    if "pat" in words and table is NCCL_ALGOS:
        raise ConfigError(f"{var}={text!r}: NCCL's PAT algorithm is not modelled; valid: "
                          f"{', '.join(sorted(table))}", field=var)
    bad = [w for w in words if w not in table]
    if bad or not words:
        raise ConfigError(f"{var}={text!r}: unknown name(s) {', '.join(bad) or '(none)'}; "
                          f"valid: {', '.join(sorted(table))} (a leading ^ excludes)",
                          field=var)
    return frozenset(set(table) - set(words) if neg else set(words))


def _names(var: str, value: str, table: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """A list, or NCCL 2.24's per-collective form: ``list;func:list;...`` where only the
    first entry may omit ``func``."""
    out: dict[str, frozenset[str]] = {}
    for i, part in enumerate(p.strip() for p in value.strip().split(";")):
        if not part:
            continue
        if ":" in part:
            func, _, rest = part.partition(":")
            key = func.strip().lower()
            if key not in _FUNCS:
                raise ConfigError(f"{var}={value!r}: unknown collective {func.strip()!r}; "
                                  f"valid: {', '.join(_FUNCS)}", field=var)
            out[_FUNCS[key]] = _list(var, rest.strip(), table)
        elif i == 0:
            out[""] = _list(var, part, table)
        else:
            raise ConfigError(f"{var}={value!r}: only the first entry may omit the "
                              f"collective (write e.g. allreduce:{part})", field=var)
    if not out:
        raise ConfigError(f"{var}={value!r}: give a list such as Ring,Tree", field=var)
    return out


def _int(var: str, value: str, lo: int, hi: int) -> int:
    """``value`` as NCCL reads a number (``strtoll`` with base 0: decimal, ``0x`` hex or
    ``0`` octal), refused unless all of it is the number and it lies in ``lo..hi``: NCCL
    itself reads ``16M`` as 16 and carries on.

    >>> _int("NCCL_BUFFSIZE", "0x1000000", 1, 2**30), _int("NCCL_MAX_NCHANNELS", " 8", 1, 64)
    (16777216, 8)
    """
    v = value.strip()
    base = 16 if v[:2].lower() == "0x" else 8 if len(v) > 1 and v[0] == "0" else 10
    digits = v[2:] if base == 16 else v
    try:
        if not digits.isalnum():
            raise ValueError(v)
        n = int(digits, base)
    except ValueError:
        lead = len(v) - len(v.lstrip("0123456789"))
        read = f" (NCCL would read {v[:lead]!r} of it)" if 0 < lead < len(v) else ""
        raise ConfigError(f"{var}={value!r}: must be a whole number {lo}..{hi}{read}; "
                          f"give it in bytes or units, decimal or 0x hex", field=var) from None
    if not lo <= n <= hi:
        raise ConfigError(f"{var}={value!r}: must be {lo}..{hi}", field=var)
    return n


def _flag(var: str, value: str, legal: tuple[str, ...] = ("0", "1")) -> str:
    v = value.strip()
    if v not in legal:
        raise ConfigError(f"{var}={value!r}: must be {' or '.join(legal)}", field=var)
    return v


def _refuse_unknown(env: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The variables set without effect, and those set to what the model does already
    (:data:`AS_MODELLED`); any other unknown ``NCCL_*`` refused."""
    quiet: list[str] = []
    modelled: list[str] = []
    for var in sorted(env):
        if not var.startswith("NCCL_") or var in HONOURED or not env[var].strip():
            continue  # an empty value is unset to NCCL too
        if var in NO_EFFECT:
            quiet.append(var)
            continue
        if var in AS_MODELLED:
            ok, values, why = AS_MODELLED[var]
            if not ok(env[var]):
                raise ConfigError(f"{var}={env[var].strip()!r} is not modelled: {why}. "
                                  f"Accepted: {values}; or unset it", field=var)
            modelled.append(var)
            continue
        if var == "NCCL_IB_HCA":
            raise ConfigError("which NICs NCCL uses is not modelled: every NIC of a server "
                              "carries traffic. Unset it, or model fewer NICs with a system "
                              "of your own (catalog: nics: N)", field=var)
        raise ConfigError(f"not modelled by fabricsim; unset it. Honoured: "
                          f"{', '.join(HONOURED)}; accepted at the values the model "
                          f"follows: {', '.join(AS_MODELLED)}; accepted without effect "
                          f"on time: {', '.join(NO_EFFECT)}", field=var)
    return tuple(quiet), tuple(modelled)


def nccl_env(env: Mapping[str, str]) -> NcclEnv:
    """Read every ``NCCL_*`` variable of ``env`` (e.g. ``os.environ``) as NCCL reads it;
    unknown, unsupported or contradictory ones raise :class:`ConfigError` naming them.

    >>> e = nccl_env({"NCCL_ALGO": "^Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"})
    >>> e.allowed_algorithms(["ring", "tree", "nvls", "nvlstree"]), sorted(e.protocol_set())
    (['ring'], ['simple'])
    >>> nccl_env({"NCCL_IB_HCA": "mlx5_0"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: NCCL_IB_HCA: which NICs NCCL uses is not modelled: ...
    """
    quiet, modelled = _refuse_unknown(env)

    def get(*names: str) -> tuple[str, str] | None:
        for n in names:
            if env.get(n, "").strip():
                return n, env[n]
        return None

    algos = protos = None
    if (a := get("NCCL_ALGO")) is not None:
        algos = {k: frozenset(x for n in v for x in NCCL_ALGOS[n])
                 for k, v in _names(*a, NCCL_ALGOS).items()}
    if (p := get("NCCL_PROTO")) is not None:
        protos = {k: frozenset(NCCL_PROTOS[n] for n in v)
                  for k, v in _names(*p, NCCL_PROTOS).items()}
    collnet = None
    if (c := get("NCCL_COLLNET_ENABLE")) is not None:
        collnet = _flag(*c) == "1"
    nvls = None
    if (v := get("NCCL_NVLS_ENABLE")) is not None:
        nvls = {"0": False, "1": True, "2": None}[_flag(*v, ("0", "1", "2"))]
    qps = None
    bounds = {n: _int(*v, 1, MAX_CHANNELS) for n in ("NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS",
                                                     "NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS")
              if (v := get(n)) is not None}
    mins = {n: v for n, v in bounds.items() if "_MIN_" in n}
    maxs = {n: v for n, v in bounds.items() if "_MAX_" in n}
    lo = max(mins.values()) if mins else None
    hi = min(maxs.values()) if maxs else None
    if lo is not None and hi is not None and lo > hi:
        lo_name = max(mins, key=mins.__getitem__)
        hi_name = min(maxs, key=maxs.__getitem__)
        raise ConfigError(f"{lo_name}={lo} is above {hi_name}={hi}; give a minimum at most "
                          f"the maximum", field=lo_name)
    if (q := get("NCCL_IB_QPS_PER_CONNECTION")) is not None:
        qps = _int(*q, 1, MAX_QPS)
    cross_nic = (x := get("NCCL_CROSS_NIC")) is not None and \
        _flag(*x, ("0", "1", "2")) == "1"
    if cross_nic:  # what the model does without rails; refused on them (check_fabric)
        modelled = (*modelled, "NCCL_CROSS_NIC")
    buffsize = None
    if (b := get("NCCL_BUFFSIZE")) is not None:
        buffsize = _int(*b, *BUFFSIZE_RANGE)
    p2p_chunk = None
    if (c := get("NCCL_P2P_NET_CHUNKSIZE")) is not None:
        p2p_chunk = _int(*c, 1, 2**30)
    plugin_tuner = _plugin_tuner(get("NCCL_TUNER_PLUGIN"), get("OFI_NCCL_TUNER_TYPE"))
    every = algos.get("", frozenset()) if algos else frozenset()
    if nvls is False and algos is not None and all(
            s and s <= {"nvls", "nvlstree"} for s in algos.values()):
        raise ConfigError(f"NCCL_ALGO={env['NCCL_ALGO']!r} asks for NVLS only, and "
                          f"NCCL_NVLS_ENABLE=0 turns NVLS off; change one of them",
                          field="NCCL_NVLS_ENABLE")
    if collnet is not True and algos is not None and every and every <= {
            "sharp", "nvls_sharp"}:
        raise ConfigError(f"NCCL_ALGO={env['NCCL_ALGO']!r} asks for CollNet only, which "
                          f"needs NCCL_COLLNET_ENABLE=1", field="NCCL_COLLNET_ENABLE")
    return NcclEnv(algorithms=algos, protocols=protos, collnet=collnet, nvls=nvls,
                   min_channels=lo, max_channels=hi, qps=qps, buffsize_bytes=buffsize,
                   p2p_net_chunk_bytes=p2p_chunk, cross_nic=cross_nic,
                   no_effect=quiet, as_modelled=modelled,
                   ctas=(bounds.get("NCCL_MIN_CTAS"), bounds.get("NCCL_MAX_CTAS")),
                   plugin_tuner=plugin_tuner, variables=MappingProxyType(
                       {k: env[k].strip() for k in sorted(env)
                        if is_nccl_variable(k) and env[k].strip()}))  # empty: unset


def is_nccl_variable(name: str) -> bool:
    """Whether NCCL (or AWS's EFA plugin, whose tuner type it honours) reads a variable
    of this name: ``NCCL_*``, or ``OFI_NCCL_TUNER_TYPE``.

    >>> is_nccl_variable("NCCL_ALGO"), is_nccl_variable("FI_PROVIDER")
    (True, False)
    """
    return name.startswith("NCCL_") or name == "OFI_NCCL_TUNER_TYPE"


def _clamp(n: int, lo: int | None, hi: int | None) -> int:
    """``n`` raised to ``lo`` and cut to ``hi`` where set (a minimum above the maximum is
    refused when the variables are read, so the order does not matter).

    >>> _clamp(16, 24, None), _clamp(16, None, 8), _clamp(16, 4, 32)
    (24, 8, 16)
    """
    if lo is not None:
        n = max(n, lo)
    if hi is not None:
        n = min(n, hi)
    return n


def _settings(*pairs: tuple[str, int | None]) -> str:
    """``NAME=value`` for each pair whose value is set, space-separated."""
    return " ".join(f"{n}={v}" for n, v in pairs if v is not None)


def _plugin_tuner(library: tuple[str, str] | None, kind: tuple[str, str] | None) -> bool:
    """Whether the network plugin's tuner picks first: ``NCCL_TUNER_PLUGIN`` may name only
    AWS's EFA plugin (its tuner library or the network library that carries it), whose
    ``OFI_NCCL_TUNER_TYPE`` is ``Region`` (its default) or ``Internal`` (off: NCCL's own
    model); its ``Model`` tuner, and other tuner plugins, are not modelled.

    >>> _plugin_tuner(None, ("OFI_NCCL_TUNER_TYPE", "Internal"))
    False
    >>> _plugin_tuner(("NCCL_TUNER_PLUGIN", "libnccl-ofi-tuner.so"), None)
    True
    """
    if library is not None and "ofi" not in library[1].lower():
        raise ConfigError(f"{library[1].strip()!r} is not modelled: fabricsim has NCCL's own "
                          f"choice and, on AWS's p5, p5en and p6, the EFA plugin's region "
                          f"tuner (NCCL_TUNER_PLUGIN unset or naming aws-ofi-nccl's library; "
                          f"OFI_NCCL_TUNER_TYPE=Internal leaves the choice to NCCL)",
                          field=library[0])
    if kind is None:
        return True
    value = kind[1].strip().lower()
    if value not in ("region", "internal"):
        raise ConfigError(f"{kind[1].strip()!r} is not modelled: Region (the EFA plugin's "
                          f"measured regions, its default) or Internal (NCCL's own choice)",
                          field=kind[0])
    return value == "region"
