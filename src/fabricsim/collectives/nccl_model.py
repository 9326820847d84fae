"""NCCL's own cost model, used to choose an (algorithm, protocol) the way NCCL chooses it.

NCCL does not pick the algorithm and protocol that run fastest: it picks the ones its
tuning model (``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime`` in
``src/graph/tuning.cc``, as each release from 2.23 to 2.29.7 has it:
:data:`NCCL_RELEASES`) predicts fastest, from per-(algorithm, protocol) base latencies,
per-hop latencies by link class, the bandwidth its topology search found, per-channel
caps and a size correction for trees. That model was never meant to predict run time,
only to rank candidates, and its ranking differs from the fastest one in places (it
keeps LL128 off mid-size messages across servers, it prefers trees early on large
clusters). A simulator that wants NCCL's times must first make NCCL's choice, then time
that choice with its own mechanism; :class:`NcclModel` gives the first half.

What this module reads from a group: GPUs per server (``ppn``) and servers (``nodes``,
NVLink domains, as NCCL counts nodes under MNNVL), the GPUs' architecture (NCCL's
compute-capability row), NVLink or PCIe inside a server, the NICs' speed, the CPU vendor of
the host (NCCL's LL bandwidth row and network overhead across servers) and the latency the
network plugin reports (0 for NCCL's own InfiniBand/RoCE transport; AWS's EFA plugin
reports 75 us or 35 us by instance family, to steer NCCL to trees).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.collectives.registry import Group
>>> m = NcclModel.of(Group.of(build_cluster("dgx-h100", 16)))
>>> round(m.latency_us("all_reduce", "ring", "ll"), 1)    # 6.6 + 14N + 2(N-1)·2.7
311.6
>>> round(m.latency_us("all_reduce", "tree", "ll"), 1)    # 6.8 + 2(7·0.6 + 4·5.0)
55.2
>>> m.best("all_reduce", 1024, [("ring", "ll"), ("tree", "ll"), ("tree", "simple")])
('tree', 'll')
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabricsim.collectives.pipeline import nvlink_rate
from fabricsim.collectives.plugin_tuner import region_tuner
from fabricsim.collectives.registry import Group
from fabricsim.errors import ConfigError
from fabricsim.protocols import NVLSTREE_HEAD_BUSBW_GBYTE_S, tuning_hardware

#: NCCL's rows: 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell (compute capability 10.0 and
#: above, so Rubin too).
ARCH_ROW = {"nvlink2": 0, "nvlink3": 1, "nvlink4": 2, "nvlink5": 3}
#: Architecture row of GPUs without NVLink, by catalog name prefix.
PCIE_ARCH_ROW = (("v100", 0), ("a100", 1), ("a10", 1), ("l4", 1), ("l40", 1),
                 ("h100", 2), ("h200", 2), ("h20", 2), ("b200", 3), ("rtx-pro", 3))

ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvlstree")
PROTOS = ("ll", "ll128", "simple")

#: base latency (us) per algorithm, per protocol (LL, LL128, Simple)
BASE_LAT: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0), "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0), "nvlstree": (0.0, 0.0, 0.0)}
#: latency (us) per hop by hardware class: NVLink, PCIe, network
HW_LAT: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4),
               "collnet_direct": (0.0, 0.0, 3.7), "collnet_chain": (0.0, 0.0, 2.8),
               "nvls": (0.0, 0.0, 25.0), "nvlstree": (0.0, 0.0, 25.0)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7),
             "collnet_direct": (0.0, 0.0, 3.7), "collnet_chain": (0.0, 0.0, 2.8),
             "nvls": (0.0, 0.0, 0.0), "nvlstree": (0.0, 0.0, 0.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0),
            "collnet_direct": (0.0, 0.0, 31.0), "collnet_chain": (0.0, 0.0, 30.0),
            "nvls": (0.0, 0.0, 18.0), "nvlstree": (0.0, 0.0, 14.0)},
}
#: Total LL bandwidth cap (GB/s), by row then by 1 / 2 / more nodes. One node: the GPU's
#: row; several: the host's (row 0 Intel and others, row 1 AMD).
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
             (282.0, 90.0, 70.0))
#: Per-channel caps (GB/s) by architecture row, then 1 / 2 / more nodes (NCCL 2.27 and
#: before; the Blackwell rows of later releases follow).
PER_CH_RING_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (73.4,) * 3)
PER_CH_TREE_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (73.4, 73.4, 58.0))
PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
               (77.4, 82.8, 72.0))
#: Blackwell's tree caps (tree LL128, tree) from NCCL 2.28, which measured them (before,
#: twice Hopper's), and its ring LL128 cap from 2.29.7; 1 / 2 / more nodes.
BLACKWELL_TREE_LL128_228 = (55.6, 31.67, 20.0)
BLACKWELL_TREE_228 = (70.0, 42.8, 24.0)
BLACKWELL_RING_LL128_2297 = 40.0
#: NCCL 2.28+: the share of an NVLS head's NVLink speed its multimem kernels move (by
#: architecture row; no NVLS before Hopper).
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: NCCL 2.28+ caps NVLSTree per channel at the figures the timing model uses as the
#: kernel's rate (:data:`~fabricsim.protocols.NVLSTREE_HEAD_BUSBW_GBYTE_S`, 2.28.9's),
#: except that before 2.28.9 Blackwell's beyond two servers was 43.1.
NVLSTREE_CAP_BLACKWELL_228 = 43.1
#: NCCL 2.28.9+: NVLSTree's network hop (us; was 14), and 2.29.2's correction of
#: NVLSTree at 512 MiB (the tree table's Simple row gained one entry).
NVLSTREE_NET_LAT_2289 = 20.9
NVLSTREE_CORRECTION_512M = 0.9
#: NCCL releases whose tuning changed, each with what changed (the model follows the
#: release a run used; before 2.28 it reads the tables of 2.23 to 2.27).
NCCL_RELEASES: dict[tuple[int, int, int], str] = {
    (2, 27, 3): "LL128 across servers where NICs reach their GPUs through the Grace CPU "
                "and NVLink-C2C (path P2C, NCCL_LL128_C2C; PHB before, without LL128)",
    (2, 28, 0): "NVLS and NVLSTree rated by their kernels' efficiency; Blackwell's own "
                "tree caps",
    (2, 28, 9): "NVLSTree's network hop 20.9 us (was 14); Blackwell's NVLSTree cap 43.8",
    (2, 29, 2): "NVLSTree's size correction on Blackwell with x86 hosts; 45 GB/s among "
                "Blackwell's search speeds in a server",
    (2, 29, 7): "Blackwell's ring LL128 cap 40 GB/s per channel; 80 GB/s among its "
                "search speeds across servers",
}
#: From this release NCCL runs LL128 over a NIC its GPU reaches through NVLink-C2C and
#: the Grace CPU's PCIe (path P2C, ``NCCL_LL128_C2C`` default 1); before, that path was
#: PHB, beyond the PXN that LL128 between servers needs on Hopper and later.
LL128_C2C_NCCL = (2, 27, 3)
#: The release a question is answered for when it names none: the newest modelled.
DEFAULT_NCCL = (2, 29, 7)
#: Tree all-reduce bandwidth factor by floor(log2(bytes / 64)), 64 B .. 256 MiB.
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9,
              .9, .9, .9, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
               .7, .8, .9, .9),
}
#: Per-channel speeds (GB/s) NCCL's ring search tries, highest first, by architecture row
#: (Volta and Ampere share one), inside a server and with a network.
SEARCH_SPEEDS_INTRA = ((40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),) * 2 + (
    (60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3),
    (90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18))
SEARCH_SPEEDS_NET = ((48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2,
                      .24, .12),) * 2 + (
    (48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, .24, .12),
    (96, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, .24, .12))
#: NVLink bytes NCCL's topology counts per byte the link carries (20.6 of 25 GB/s per
#: NVLink 4 link, 40.1 of 50 per NVLink 5 link).
NVLINK_COUNTED = 0.81
#: Ring search channels at most (MAXCHANNELS / 2).
MAX_SEARCH_CHANNELS = 32
#: NVLS heads per server at most (``NCCL_MAX_NVLS_ARITY``).
NVLS_MAX_HEADS = 32
#: Algorithms of fabricsim's registry and the NCCL algorithm each is.
NCCL_ALGO_OF = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvlstree",
                "nvls_sharp": "nvls"}


def nccl_release(text: str | None) -> tuple[int, int, int]:
    """The NCCL release ``text`` names (``"2.26.2"``, ``"2.27"``, ``"v2.29.7-1"``, NCCL's
    log form ``"2.21.5+cuda12.4"``; ``None`` or empty: :data:`DEFAULT_NCCL`), as
    (major, minor, patch); anything but an NCCL 2 release is refused. Releases before 2.23
    are rated with 2.23's tables (the model's oldest).

    >>> nccl_release("2.26.2"), nccl_release("v2.29.7-1"), nccl_release("2.27.x")
    ((2, 26, 2), (2, 29, 7), (2, 27, 0))
    """
    if text is None or not str(text).strip():
        return DEFAULT_NCCL
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+|x))?(?:[-+ (].*)?$", str(text).strip())
    if m is None or int(m[1]) != 2:
        raise ConfigError(
            f"{text!r} is not an NCCL release; give it as "
            "MAJOR.MINOR[.PATCH], e.g. 2.26.2 (NCCL prints it as "
            "'NCCL version 2.26.2+cuda12.8'; leave it out for "
            f"{'.'.join(map(str, DEFAULT_NCCL))})", field="nccl_version")
    return 2, int(m[2]), int(m[3]) if m[3] and m[3] != "x" else 0


def release_name(text: str | None) -> str:
    """:func:`nccl_release` as text, ``"2.27.3"``: the form jobs and logs carry it in.

    >>> release_name("v2.28.9-1"), release_name(None)
    ('2.28.9', '2.29.7')
    """
    return ".".join(map(str, nccl_release(text)))


#: The oldest release whose tuning tables the model reads; older ones are rated with them.
OLDEST_NCCL = (2, 23, 0)
#: The release whose LL kernels overlap loading the user's data with polling for the peer's
#: flag (``prims_ll.h`` rewritten in 2.10.3); older releases run LL over NVLink at
#: :data:`~fabricsim.protocols.SERIAL_LL_NVLINK` of the later rate.
LL_OVERLAP_NCCL = (2, 10, 3)


def release_note(text: str | None) -> str:
    """What the model does with NCCL release ``text`` when it is not one it models (``""``
    when it is, or when none is named): a release newer than :data:`DEFAULT_NCCL` is
    rated with that release's tuning tables, one older than :data:`OLDEST_NCCL` with
    2.23's. The answer then is the nearest modelled release's, and says so.

    >>> release_note("2.26.2"), release_note(None)
    ('', '')
    >>> note = release_note("2.30.7")
    >>> note.startswith("NCCL 2.30.7 is newer than the newest release modelled (2.29.7)")
    True
    >>> note.endswith("made with 2.29.7's tuning tables")
    True
    >>> "half the later rate" in release_note("2.8.4"), "LL" in release_note("2.18.5")
    (True, False)
    """
    if text is None or not str(text).strip():
        return ""
    v, name = nccl_release(text), release_name(text)
    if v > DEFAULT_NCCL:
        newest = release_name(None)
        return (f"NCCL {name} is newer than the newest release modelled ({newest}): its "
                f"choice of algorithm and protocol is made with {newest}'s tuning tables")
    if v < OLDEST_NCCL:
        oldest = ".".join(map(str, OLDEST_NCCL[:2]))
        note = (f"NCCL {name} is older than the oldest tuning tables modelled ({oldest}): "
                f"its choice of algorithm and protocol is made with {oldest}'s")
        if v < LL_OVERLAP_NCCL:
            note += ("; its LL kernels, before 2.10.3, move data over NVLink at half the "
                     "later rate, as the analytic backend times them (the flow and packet "
                     "backends time LL as 2.10.3 and later run it)")
        return note
    return ""


#: NCCL releases with NVIDIA's known slow NVLSTree across four servers or more of Blackwell
#: GPUs (NCCL issue #2035, "a known issue", fixed in 2.30.3): from, to (exclusive).
NVLSTREE_SLOW_RELEASES = ((2, 29, 0), (2, 30, 3))


def known_issue_note(text: str | None, gpu_generation: str, servers: int,
                     algorithms: Sequence[str]) -> str:
    """A known NCCL performance issue the answer does not model (``""``: none applies), for
    release ``text`` (``None``: :data:`DEFAULT_NCCL`), GPUs of NVLink ``gpu_generation``
    (``tuning_hardware(fabric)[1]``) on ``servers`` servers, where ``algorithms`` ran.

    NCCL issue #2035: NVLSTree all-reduce across 4, 8 and 16 servers of eight B300 ran at
    about 200 GB/s busbw on 2.29.7 (800 on two servers); NVIDIA called it a known issue,
    fixed in 2.30.3 (the reporter measured 380 on 2.30.4 at four servers). Together's
    HGX B200 cluster (8 x 400G InfiniBand, 2.29.7) measured 275-290 GB/s busbw at 8 GiB on
    4-64 servers in its canonical rebaseline of 2026-04-27; the model's NVLSTree, rated at
    NCCL's own per-head figure, gives about 345 there.

    >>> known_issue_note(None, "nvlink5", 8, ["nvlstree"])[:38]
    'NCCL 2.29.7 runs NVLSTree across 4 or '
    >>> known_issue_note("2.30.3", "nvlink5", 8, ["nvlstree"])
    ''
    >>> known_issue_note(None, "nvlink4", 8, ["nvlstree"])
    ''
    """
    v = nccl_release(text)
    lo, hi = NVLSTREE_SLOW_RELEASES
    if not (lo <= v < hi and gpu_generation.startswith("nvlink5") and servers >= 4
            and "nvlstree" in algorithms):
        return ""
    return (f"NCCL {release_name(text)} runs NVLSTree across 4 or more Blackwell servers "
            "(or NVLink domains) below its own rating, a known issue fixed in 2.30.3 "
            "(NVIDIA/nccl#2035: about 200 GB/s busbw on 4-16 B300 servers). Published "
            "2.29.7 runs on 4-64 HGX B200 (8 x 400G) measure 275-290 GB/s at 8 GiB; the "
            "model's NVLSTree, at NCCL's rating, does not include the slowdown "
            "(docs/collectives.md, \"NCCL releases\")")


def _speeds(row: int, nodes: int, version: tuple[int, int, int]) -> tuple[float, ...]:
    """The speeds NCCL ``version``'s search tries for architecture ``row`` (2.29.2 added
    45 GB/s to Blackwell's inside a server, 2.29.7 80 GB/s to its across servers)."""
    speeds: tuple[float, ...] = (SEARCH_SPEEDS_INTRA if nodes == 1 else SEARCH_SPEEDS_NET)[row]
    if row == 3 and nodes == 1 and version >= (2, 29, 2):
        speeds = tuple(sorted({*speeds, 45.0}, reverse=True))
    if row == 3 and nodes > 1 and version >= (2, 29, 7):
        speeds = tuple(sorted({*speeds, 80.0}, reverse=True))
    return speeds


def _row(group: Group) -> int:
    _, nv = tuning_hardware(group.fabric)
    if nv in ARCH_ROW:
        return ARCH_ROW[nv]
    gpu = group.fabric.info.gpu
    for prefix, row in PCIE_ARCH_ROW:
        if gpu.startswith(prefix):
            return row
    return 2


def _search(speeds: Sequence[float], total: float, channels_at: Callable[[float], int]
            ) -> tuple[int, float]:
    """The (channels, GB/s per channel) NCCL's ring search settles on
    (``ncclTopoCompute``, ``src/graph/search.cc``): speeds are tried highest first, each
    with as many channels as fit (``channels_at(speed)``, at most 32); the search stops
    once a solution carries ``total`` GB/s, or when the next speed is under half the best
    one found, and keeps the solution of most bandwidth (the first of equals)."""
    best: tuple[int, float] | None = None
    for s in speeds:
        if best is not None and s / best[1] <= 0.49:
            break
        n = min(MAX_SEARCH_CHANNELS, channels_at(s))
        if n >= 1 and (best is None or n * s > best[0] * best[1]):
            best = (n, float(s))
        if best is not None and best[0] * best[1] >= total:
            break
    return best if best is not None else (1, float(speeds[-1]))


def _tree_intra(speeds: Sequence[float], nvl: float, ch: int,
                channels_at: Callable[[float], int]) -> float:
    """GB/s per channel inside a server of NCCL's tree graph over two servers, which its
    tuning model rates a tree by there (``bw = nNodes <= 2 ? bwIntra : bwInter``,
    ``src/graph/tuning.cc``). The tree search runs on the ring's ``ch`` channels; its
    first pass finds the speed at which ``channels_at`` (the ring search's rule) fits
    them, the second raises the speed inside the server while it is under twice that and
    NVLink still carries every channel ("increase bwIntra for trees (2 nodes or
    collnet)", ``ncclTopoCompute``). ``ncclTopoDupChannels`` leaves it: the tree's
    channels are held to the ring's, so it has none to double."""
    i = next((k for k, s in enumerate(speeds) if channels_at(s) >= ch), len(speeds) - 1)
    inter = intra = float(speeds[i])
    while i > 0 and intra < 2 * inter and ch * speeds[i - 1] <= nvl:
        i -= 1
        intra = float(speeds[i])
    return intra


def _nvls_search(speeds: Sequence[float], nvl: float, heads: int, nic: float
                 ) -> tuple[float, float]:
    """(GB/s inside, GB/s between servers) per head of NCCL's NVLS graph: a head pulls from
    every GPU through the switch and pushes back, twice over its own NVLinks, so the
    ``heads`` of a server load each GPU's NVLinks ``heads + 1`` times; across servers a
    head's own NIC may carry up to twice that (``ncclTopoSearchTryNvls`` and the second
    pass of ``ncclTopoCompute``). In one server no NIC holds the second pass back: it
    raises the speed between servers one step at a time while it is under twice the speed
    inside, up to the fastest speed."""
    intra = next((float(s) for s in speeds if (heads + 1) * s <= nvl), float(speeds[-1]))
    if nic <= 0:
        up = [float(s) for s in speeds if s >= 2 * intra]
        return intra, up[-1] if up else float(speeds[0])
    inter = next((float(s) for s in speeds if s <= nic and s <= 2 * intra), intra)
    return intra, max(inter, min(intra, nic))


@dataclass(frozen=True)
class NcclModel:
    """NCCL's tuning inputs for one group, and its predicted times.

    ``bw`` is GB/s per search channel, ``channels`` the search's channel count (NCCL's bus
    bandwidth is ``channels × bw``; its ring search gives the same speed inside and
    between servers, so NCCL's separate intra/inter figures are one here); ``net_latency_us`` is the
    network plugin's reported latency; ``amd_host`` selects NCCL's AMD rows.
    """

    nodes: int
    ppn: int
    ranks: int
    row: int
    nvlink: bool
    channels: int
    bw: float
    net_latency_us: float = 0.0
    amd_host: bool = False
    nvls: bool = False
    ll128: bool = True
    collnet: bool = False
    nvls_heads: int = 0
    nvls_bw_intra: float = 0.0
    nvls_bw_inter: float = 0.0
    #: GB/s per channel inside a server of NCCL's tree graph across two servers (0: ``bw``).
    tree_bw_intra: float = 0.0
    #: the NCCL release whose tuning model this is (see :data:`NCCL_RELEASES`)
    version: tuple[int, int, int] = DEFAULT_NCCL
    #: Arm hosts (Grace): NCCL 2.29.2+ leaves NVLSTree's size correction to x86 hosts
    arm_host: bool = False
    #: The network plugin's tuner regions that overrule NCCL's choice (``""``: none;
    #: :func:`~fabricsim.collectives.plugin_tuner.region_tuner`).
    tuner_regions: str = ""

    @staticmethod
    def of(group: Group, version: tuple[int, int, int] | None = None,
           plugin_tuner: bool = True) -> NcclModel:
        """NCCL's inputs for ``group``, from its fabric's hardware facts, as NCCL release
        ``version`` (default :data:`DEFAULT_NCCL`) rates them; with the network plugin's
        tuner regions where the fabric's plugin has them and ``plugin_tuner`` is on."""
        version = version or DEFAULT_NCCL
        info = group.fabric.info
        row = _row(group)
        nodes = max(group.servers, 1)
        ppn = max(group.per_server or group.n // nodes, 1)
        nvl = nvlink_rate(group) / 1e9 * NVLINK_COUNTED
        nvlink = nvl > 0
        if not nvlink:  # PCIe inside the server: NCCL counts width * GT/s / 80
            nvl = 24.0 if row < 2 else 48.0
        nic = info.nic_bandwidth / 1e9
        nics = max(min(info.nics_per_server, max(info.nics_per_gpu, 1) * ppn), 1)
        speeds = _speeds(row, nodes, version)
        def channels_at(s: float) -> int:
            # across servers every channel leaves and enters a server through one NIC of
            # its GPUs; NICs are shared by channels while their speed lasts
            fit = int(nvl // s)
            return fit if nodes == 1 else min(fit, nics * int(nic // s))

        ch, bw = _search(speeds, nvl, channels_at)
        heads = min(NVLS_MAX_HEADS, ppn if nodes == 1 else min(ppn, nics))
        nvls_intra, nvls_inter = _nvls_search(speeds, nvl, heads,
                                              0.0 if nodes == 1 else nic * nics / heads)
        # ncclTopoDupChannels: twice the channels at half the speed, except on post-Ampere
        # GPUs whose channels run under 50 GB/s when there are more than four
        if bw >= 25 and not (row >= 2 and bw < 50 and ch > 4):
            ch, bw = min(2 * ch, MAX_SEARCH_CHANNELS * 2), bw / 2
        tree = _tree_intra(speeds, nvl, ch, channels_at) if nodes == 2 else 0.0
        return NcclModel(nodes=nodes, ppn=ppn, ranks=group.n, row=row, nvlink=nvlink,
                         channels=ch, bw=bw, tree_bw_intra=tree,
                         net_latency_us=info.net_plugin_latency * 1e6,
                         amd_host=info.cpu_vendor == "amd",
                         nvls=info.nvls and ppn > 2, ll128=nvlink and not (
                             nodes > 1 and info.nic_via_c2c and version < LL128_C2C_NCCL),
                         collnet=info.sharp,
                         nvls_heads=heads, nvls_bw_intra=nvls_intra, nvls_bw_inter=nvls_inter,
                         version=version, arm_host=info.cpu_vendor == "arm",
                         tuner_regions=info.nccl_tuner_regions if plugin_tuner else "")

    # ------------------------------------------------------------------ model
    @property
    def _index2(self) -> int:
        return min(self.nodes - 1, 2)

    def _intra_hw(self) -> str:
        return "nvlink" if self.nvlink else "pcie"

    def latency_us(self, collective: str, algo: str, proto: str) -> float:
        """NCCL's latency term (us) of ``algo`` with ``proto`` for ``collective``."""
        p = PROTOS.index(proto)
        nodes, ppn, n = self.nodes, self.ppn, self.ranks
        base = BASE_LAT[algo][p]
        intra = HW_LAT[self._intra_hw()][algo][p]
        net_algo = "tree" if ppn == 1 else algo
        inter = HW_LAT["net"][net_algo][p] + self.net_latency_us
        if net_algo == "nvlstree" and self.version >= (2, 28, 9):
            inter += NVLSTREE_NET_LAT_2289 - HW_LAT["net"]["nvlstree"][2]
        if proto == "simple":
            inter += self.net_latency_us
        log2n = int(math.log2(nodes)) if nodes > 1 else 0
        if algo == "ring":
            if collective in ("broadcast", "reduce"):
                hw = self._intra_hw() if nodes == 1 else "net"
                return base + n * HW_LAT[hw]["tree" if proto == "simple" else "ring"][p]
            steps = 2 * (n - 1) if collective == "all_reduce" else n - 1
            inter_steps = 0 if nodes == 1 else (
                2 * (nodes - 1) if collective == "all_reduce" else nodes - 1)
            if nodes > 1:
                overhead = (2.0 if self.amd_host else 1.0) * (3 if proto == "simple" else 1)
                intra = max(intra, overhead)
            return base + (steps - inter_steps) * intra + inter_steps * inter
        if algo == "tree":
            return base + 2 * ((ppn - 1) * intra + log2n * inter)
        if algo == "collnet_direct":
            return 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
        if algo == "collnet_chain":
            return 2 * (ppn - 1) * intra + inter
        if algo == "nvls":
            return intra + (inter if nodes > 1 else 0.0)
        if algo == "nvlstree":
            return intra + 2 * log2n * inter
        raise ValueError(algo)

    def bandwidth_gbs(self, collective: str, algo: str, proto: str, nbytes: float
                      ) -> float:
        """NCCL's algorithm bandwidth (GB/s; time = bytes / bandwidth) of ``algo`` with
        ``proto`` for ``collective``; 0 where NCCL would not run it."""
        nodes, ppn, i2, row = self.nodes, self.ppn, self._index2, self.row
        if proto == "ll128" and not self.ll128:
            return 0.0
        if algo.startswith("collnet") and (proto != "simple" or not self.collnet):
            return 0.0
        if algo == "nvls" and nodes > 1 and not self.collnet:  # NVLS across servers: CollNet
            return 0.0
        if algo in ("nvls", "nvlstree") and (proto != "simple" or not self.nvls):
            return 0.0
        bw, ch = self.bw, self.channels
        if algo == "tree" and nodes == 2 and self.tree_bw_intra > 0:
            bw = self.tree_bw_intra  # NCCL rates a tree over two servers by its NVLink side
        if algo in ("nvls", "nvlstree"):  # the NVLS graph: one channel per head
            ch, bw = self.nvls_heads, self._nvls_bw(collective, algo)
            if bw <= 0:
                return 0.0
        bus = ch * bw
        ring_ll128, tree_ll128, tree = (PER_CH_RING_LL128[row][i2],
                                        PER_CH_TREE_LL128[row][i2], PER_CH_TREE[row][i2])
        if row == 3 and self.version >= (2, 28, 0):
            tree_ll128, tree = BLACKWELL_TREE_LL128_228[i2], BLACKWELL_TREE_228[i2]
        if row == 3 and self.version >= (2, 29, 7):
            ring_ll128 = BLACKWELL_RING_LL128_2297
        if algo == "ring" and proto == "ll":
            ll_row = row if nodes == 1 else (1 if self.amd_host else 0)
            bus = min(LL_MAX_BW[ll_row][i2], 0.5 * bus)
        elif algo == "ring" and proto == "ll128":
            bus = min(0.92 * bus, ch * ring_ll128)
        if algo == "tree" and collective == "all_reduce":
            bus = min(0.92 * bus, ch * tree)
        if algo == "tree" and proto == "ll":
            ll_row = row if nodes == 1 else (1 if self.amd_host else 0)
            bus = min(bus / 3.8, LL_MAX_BW[ll_row][i2])
        elif algo == "tree" and proto == "ll128":
            bus = min(bus * (7 / 9 if nodes == 1 else 120 / 128), ch * tree_ll128)
        if algo == "collnet_direct" and collective == "all_reduce":
            r = ppn / ch
            bus /= max(r - (r - 1) / 2, 1e-9)
            if row >= 2:
                bus *= 0.85
        steps = {"all_reduce": 2 * (self.ranks - 1)}.get(
            collective, self.ranks - 1 if collective in ("all_gather", "reduce_scatter")
            else self.ranks)
        new_nvls = self.version >= (2, 28, 0)
        if algo != "ring" and collective in ("all_gather", "reduce_scatter"):
            alg = bus  # NCCL leaves these as they are
        elif algo == "ring" or (algo in ("nvls", "nvlstree") and new_nvls):
            alg = bus * self.ranks / max(steps, 1)
        elif algo in ("nvls", "nvlstree"):
            alg = bus * 5 / 6
        else:
            alg = bus * 0.5
        if collective == "all_reduce" and (algo == "tree" or (
                algo == "nvlstree" and row == 3 and not self.arm_host
                and self.version >= (2, 29, 2))):
            table = TREE_CORRECTION[proto] + ((NVLSTREE_CORRECTION_512M,)
                                              if algo == "nvlstree" else ())
            log_size = int(math.log2(max(nbytes, 1) / 64)) if nbytes >= 64 else -1
            if 0 <= log_size < len(table):
                alg *= table[log_size]
        return alg

    def _nvls_bw(self, collective: str, algo: str) -> float:
        """GB/s per NVLS head NCCL's model rates ``algo`` (NVLS or NVLSTree) at: up to
        2.27 the lower of the graph's speeds inside and (halved beyond two servers for
        NVLSTree) between servers; from 2.28 the speed inside times the kernels'
        efficiency and the share of heads other than one's own (twice that for an
        all-reduce, which pipelines its reduce-scatter and all-gather halves), under the
        speed between servers (doubled for NVLSTree over two servers) and NVLSTree's
        per-channel cap; 0 with fewer than two heads (NCCL does not run it)."""
        intra, inter, nodes = self.nvls_bw_intra, self.nvls_bw_inter, self.nodes
        if self.version < (2, 28, 0):
            if algo == "nvls" and collective in ("all_gather", "reduce_scatter"):
                return min(intra * (self.ppn - 1) / self.ppn, inter * 0.9)
            return min(intra, inter if algo == "nvls" or nodes <= 2 else inter / 2)
        ch = self.nvls_heads
        if ch < 2:
            return 0.0
        share = intra * NVLS_EFFICIENCY[self.row] * (ch - 1) / ch
        share *= 2.0 if collective == "all_reduce" else (self.ppn - 1) / self.ppn
        if algo == "nvls":
            return min(share, inter)
        gen = {2: "nvlink4", 3: "nvlink5"}[self.row]  # NVLS runs from Hopper on
        cap = NVLSTREE_HEAD_BUSBW_GBYTE_S[gen][0 if nodes <= 2 else 1]
        if self.row == 3 and nodes > 2 and self.version < (2, 28, 9):
            cap = NVLSTREE_CAP_BLACKWELL_228
        return min(share, inter * (2 if nodes <= 2 else 1), cap)

    def time_us(self, collective: str, algo: str, proto: str, nbytes: float) -> float:
        """NCCL's predicted time (us) of ``algo`` with ``proto``; inf where it would not
        run it."""
        bw = self.bandwidth_gbs(collective, algo, proto, nbytes)
        if bw <= 0:
            return math.inf
        lat = self.latency_us(collective, algo, proto)
        if (algo == "ring" and proto == "simple" and collective == "all_reduce"
                and self.nodes > 1
                and nbytes / (2 * self.channels * self.ranks) >= 64):
            lat *= 1.4 if self.row >= 1 else 1.9
        return lat + nbytes / (1000 * bw)

    def best(self, collective: str, nbytes: float,
             pairs: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
        """The pair of ``pairs`` (fabricsim algorithm names) NCCL runs: the one the network
        plugin's tuner picks where it has regions (:mod:`~fabricsim.collectives.plugin_tuner`),
        else the one NCCL's model ranks first; ``None`` if some pair has no NCCL counterpart
        (then NCCL's model cannot rank them)."""
        best: tuple[float, int] | None = None
        runnable: list[tuple[str, str]] = []
        for i, (a, p) in enumerate(pairs):
            nccl = self.nccl_algo(a)
            if nccl is None:
                return None
            t = self.time_us(collective, nccl, p, nbytes)
            runnable.append((nccl, p) if not math.isinf(t) else ("", ""))
            if best is None or t < best[0]:
                best = (t, i)
        plugin = region_tuner(self.tuner_regions) if self.tuner_regions else None
        if plugin is not None:
            pick = plugin.pick(collective, nbytes, self.ranks, self.nodes, runnable)
            if pick is not None:
                return pairs[runnable.index(pick)]
        if best is None or math.isinf(best[0]):
            return None
        return pairs[best[1]]

    def nccl_algo(self, algo: str) -> str | None:
        """The NCCL algorithm fabricsim's ``algo`` is (``None``: not one of NCCL's)."""
        if algo == "sharp":
            return "collnet_direct" if self.ppn <= 8 else "collnet_chain"
        if algo == "nvls" and self.nodes > 1:  # fabricsim's NVLS with rail rings: not NCCL's
            return None
        return NCCL_ALGO_OF.get(algo)
