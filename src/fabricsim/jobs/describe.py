"""What a cluster is: counts, bisection, the bandwidth hierarchy and its bottleneck.

:func:`summarize` reads a :class:`~fabricsim.fabric.Fabric` and returns a
:class:`ClusterSummary` with stable field names (the ``describe`` command prints it and its
``--json`` form is :meth:`ClusterSummary.as_dict`). Bandwidths are in GB/s (1e9 bytes/s)
per direction, as nccl-tests and vendor sheets quote them.

The hierarchy follows seed 004's levels for one GPU: HBM → NVLink → PCIe → NIC → spine.
The bottleneck is the narrowest level on the path from a GPU to the scale-out network.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> s = summarize(build_cluster("dgx-h100", nodes=32))
>>> s.gpus, s.servers, s.bottleneck.split(":")[0]
(256, 32, 'nic')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from fabricsim.catalog import get_catalog
from fabricsim.fabric import Fabric, LinkKind, NodeKind
from fabricsim.fabric.ici import shape_name
from fabricsim.jobs.common import Cluster, Part, Progress, quiet
from fabricsim.results import Tabular, flatten
from fabricsim.scenario.schema import Scenario


@dataclass(frozen=True)
class HierarchyLevel:
    """One level of the bandwidth hierarchy, per GPU and per direction (GB/s)."""

    name: str
    bandwidth_gbps: float
    scope: str


@dataclass(frozen=True)
class ClusterSummary(Tabular):
    """Stable, JSON-ready description of a cluster (see module docs for units).

    :meth:`as_dict` is the nested JSON ``fabricsim describe --json`` prints;
    ``to_pandas()`` is one flat row (``switches.leaf``, ``hierarchy_gbps.<level>``, ...).
    """

    system: str
    gpu: str
    fabric: str
    topology: str
    transport: str
    gpus: int
    servers: int
    gpus_per_server: int
    nvlink_domain_gpus: int
    nics_per_server: int
    switches: dict[str, int]
    links: dict[str, int]
    cables: dict[str, int]
    transceivers: int
    tiers: int
    planes: int
    oversubscription: float
    bisection_bandwidth_gbps: float
    hierarchy: list[HierarchyLevel]
    bottleneck: str
    lossless: bool
    sharp: bool
    notes: list[str] = field(default_factory=list)
    #: TPU slices (empty for GPU clusters): shape, wraparound per dimension, twisted,
    #: slices, chips per slice, ICI bisection (GB/s, one direction).
    ici: dict[str, Any] = field(default_factory=dict)
    #: What NCCL is told or made to do on this cluster's network (empty without one):
    #: ``qps_per_connection`` (``NCCL_IB_QPS_PER_CONNECTION``), ``simple_buffer_bytes``
    #: (``NCCL_BUFFSIZE``: the cluster's ``params.buffsize`` or the platform's default),
    #: ``net_plugin_latency_us``
    #: (the latency the NICs' network plugin reports to NCCL's tuner; 0: NCCL's own
    #: transport), ``crossing_plugin_us`` (what the model charges each network crossing
    #: for it: ``Protocol.plugin_latency_share`` of it) and ``plugin_proto`` (the
    #: ``NCCL_PROTO`` the plugin sets; "": none).
    nccl: dict[str, Any] = field(default_factory=dict)

    def _record(self) -> dict[str, Any]:
        rec = self.as_dict()
        rec["hierarchy_gbps"] = {h.name: h.bandwidth_gbps for h in self.hierarchy}
        del rec["hierarchy"]
        return rec

    def _rows(self) -> list[dict[str, Any]]:
        return [flatten(self._record())]

    def as_dict(self) -> dict[str, Any]:
        """Every field, nested (the hierarchy as a list of levels)."""
        return asdict(self)


def _gbps(x: float) -> float:
    return round(float(x) / 1e9, 3)


def summarize(fabric: Fabric) -> ClusterSummary:
    """Summarise ``fabric``: counts, hierarchy per GPU, bisection and bottleneck."""
    info = fabric.info
    cat = get_catalog()
    kinds = fabric.node_kind
    switch_kinds = {
        "nvswitch": NodeKind.NVSWITCH, "pcie-switch": NodeKind.PCIE_SWITCH,
        "leaf": NodeKind.LEAF, "spine": NodeKind.SPINE, "core": NodeKind.CORE,
        "router": NodeKind.ROUTER, "storage": NodeKind.STORAGE_SWITCH,
        "management": NodeKind.MGMT_SWITCH,
    }
    switches = {name: int(np.count_nonzero(kinds == k)) for name, k in switch_kinds.items()}
    switches = {k: v for k, v in switches.items() if v}
    # links: physical cables/bundles, counted once per direction pair
    links: dict[str, int] = {}
    for k in np.unique(fabric.link_kind):
        sel = fabric.link_kind == k
        links[LinkKind(int(k)).label] = int(fabric.link_lanes[sel].sum() // 2)
    cables = {k: int(v) for k, v in info.cables.items() if v}
    transceivers = 2 * (cables.get("leaf-spine", 0) + cables.get("spine-core", 0)
                        + cables.get("dragonfly-global", 0))

    gpu = cat.gpu(info.gpu) if info.gpu else None
    levels: list[HierarchyLevel] = []
    if gpu is not None:
        levels.append(HierarchyLevel("hbm", _gbps(gpu.hbm_bandwidth), "inside the GPU"))
    nvl = fabric.links_of(LinkKind.NVLINK)
    g0 = int(fabric.gpus[0])
    if nvl.size:
        out_nv = nvl[fabric.link_src[nvl] == g0]
        levels.append(HierarchyLevel("nvlink", _gbps(fabric.link_capacity[out_nv].sum()),
                                     f"GPU to GPU in a {info.nvlink_domain_gpus}-GPU domain"))
    ici_links = fabric.links_of(LinkKind.ICI)
    ici: dict[str, Any] = {}
    if ici_links.size:
        e = info.extra.get("ici", {})
        out_ici = ici_links[fabric.link_src[ici_links] == g0]
        shape = shape_name(info.ici_slice)
        levels.append(HierarchyLevel("ici", _gbps(fabric.link_capacity[out_ici].sum()),
                                     f"chip to its torus neighbours in a {shape} slice"))
        ici = {"slice": list(info.ici_slice), "wrap": list(e.get("wrap", [])),
               "twisted": bool(e.get("twisted", False)), "slices": int(e.get("slices", 1)),
               "chips_per_slice": int(e.get("chips_per_slice", 0)),
               "bisection_gbps": _gbps(float(e.get("bisection_bandwidth", 0.0)))}
    pcie = fabric.links_of(LinkKind.PCIE)
    out_pcie = pcie[fabric.link_src[pcie] == g0]
    pcie_bw = float(fabric.link_capacity[out_pcie].max()) if out_pcie.size else 0.0
    if pcie_bw:
        levels.append(HierarchyLevel("pcie", _gbps(pcie_bw), "GPU to NIC and CPU"))
    nic_per_gpu = (info.nic_bandwidth * info.nics_per_server / max(info.gpus_per_server, 1))
    net_levels: list[HierarchyLevel] = []
    if nic_per_gpu:
        net_levels.append(HierarchyLevel("nic", _gbps(nic_per_gpu),
                                         "GPU share of the server's NICs"))
    # capacity above the NICs that GPUs send into, shared by all GPUs
    tiers_above = (
        (LinkKind.LEAF_SPINE, "spine", "GPU share of the leaf-to-spine uplinks"),
        (LinkKind.SPINE_CORE, "core", "GPU share of the spine-to-core uplinks"),
        (LinkKind.LOCAL, "local", "GPU share of the dragonfly group-local links"),
        (LinkKind.GLOBAL, "global", "GPU share of the dragonfly global links"),
        (LinkKind.TORUS, "torus", "GPU share of the torus links"),
    )
    for kind, name, scope in tiers_above:
        sel = fabric.links_of(kind)
        if sel.size and fabric.n_gpus:
            # tree tiers: half the links point up; mesh links all leave some node
            up = 2 if kind in (LinkKind.LEAF_SPINE, LinkKind.SPINE_CORE) else 1
            bw = float(fabric.link_capacity[sel].sum()) / up
            net_levels.append(HierarchyLevel(name, _gbps(bw / fabric.n_gpus), scope))
    levels.extend(net_levels)
    # bottleneck on the GPU -> network path
    path = [lv for lv in levels
            if lv.name in ("pcie", "nic", "spine", "core", "local", "global", "torus")]
    notes: list[str] = []
    if path:
        worst = min(path, key=lambda lv: lv.bandwidth_gbps)
        others = ", ".join(f"{lv.name} {lv.bandwidth_gbps:g}" for lv in path if lv is not worst)
        bottleneck = f"{worst.name}: {worst.bandwidth_gbps:g} GB/s per GPU ({others})"
        nic_lv = next((lv for lv in path if lv.name == "nic"), None)
        if worst.name == "pcie" and nic_lv is not None and nic_lv.bandwidth_gbps > \
                worst.bandwidth_gbps:
            notes.append(f"the NIC share ({nic_lv.bandwidth_gbps:g} GB/s) is faster than the "
                         f"PCIe link ({worst.bandwidth_gbps:g} GB/s) in front of it")
    else:
        bottleneck = "none: a single server without a network path"
    notes.extend(str(n) for n in info.extra.get("notes", []))
    from fabricsim.protocols import PROTOCOLS

    per_host = info.gpus_per_host
    if 0 < per_host < info.gpus_per_server:
        notes.append(f"each NVLink domain spans {info.gpus_per_server // per_host} hosts of "
                     f"{per_host} GPUs (compute trays), which NCCL joins by multi-node "
                     f"NVLink: a collective over GPUs of several of them pays "
                     f"{PROTOCOLS['simple'].mnnvl_step * 1e6:g} µs more on every NVLink "
                     f"and NVLS step, and its NVLS pipelines fill "
                     f"{PROTOCOLS['simple'].mnnvl_nvls_stages:g} chunk stages more (fitted on "
                     f"published GB200/GB300 runs)")
    nccl: dict[str, Any] = {}
    if info.nics_per_server and info.servers > 1:
        from fabricsim.collectives.pipeline import simple_buffer_bytes

        nccl = {"qps_per_connection": int(info.qps),
                "simple_buffer_bytes": simple_buffer_bytes(fabric),
                "net_plugin_latency_us": round(info.net_plugin_latency * 1e6, 3),
                "crossing_plugin_us": round(PROTOCOLS["simple"].plugin_latency_share
                                            * info.net_plugin_latency * 1e6, 3),
                "plugin_proto": info.plugin_proto}
        if info.nic_sustained_share < 1.0:
            notes.append(f"the NICs are measured to carry {info.nic_sustained_share:.0%} of "
                         f"their line rate under NCCL's traffic: every protocol's network "
                         f"share is capped there (the NIC's sustained_share)")
        if info.plugin_proto:
            notes.append(f"the NICs' network plugin sets NCCL_PROTO={info.plugin_proto} for "
                         f"the whole process (they do not deliver 128-byte blocks in order, "
                         f"which LL and LL128 need): bench runs {info.plugin_proto} only "
                         f"unless --proto or NCCL_PROTO says otherwise")
    return ClusterSummary(
        system=info.system, gpu=info.gpu, fabric=info.fabric, topology=info.topology,
        transport=info.transport, gpus=fabric.n_gpus, servers=info.servers,
        gpus_per_server=info.gpus_per_server, nvlink_domain_gpus=info.nvlink_domain_gpus,
        nics_per_server=info.nics_per_server, switches=switches, links=links, cables=cables,
        transceivers=transceivers, tiers=info.tiers, planes=info.planes,
        oversubscription=round(float(info.oversubscription), 4),
        bisection_bandwidth_gbps=_gbps(info.bisection_bandwidth), hierarchy=levels,
        bottleneck=bottleneck, lossless=info.lossless, sharp=info.sharp, notes=notes,
        ici=ici, nccl=nccl,
    )


class Describe(Part):
    """What a cluster is (``describe``): nothing runs on it."""

    kind: Literal["describe"] = "describe"
    cluster: Cluster


def describe_job(sc: Scenario) -> Describe:
    """The description of ``sc``'s cluster."""
    return Describe(cluster=Cluster.of(sc))


@dataclass(frozen=True)
class DescribeReport:
    """A cluster's :class:`ClusterSummary`."""

    job: Describe
    summary: ClusterSummary
    kind: str = "describe"

    @property
    def warnings(self) -> list[str]:
        return []

    def to_dict(self) -> dict[str, Any]:
        return self.summary.as_dict()

    def to_row(self) -> dict[str, Any]:
        return {k: v for k, v in flatten(self.summary.as_dict()).items()
                if isinstance(v, int | float | str | bool)}


def run_describe(job: Describe, fabric: Fabric, progress: Progress = quiet) -> DescribeReport:
    """Summarise ``fabric`` (``job``'s cluster, built)."""
    return DescribeReport(job=job, summary=summarize(fabric))
