"""Typed, frozen records for the hardware catalog.

Each class mirrors one TOML file in ``catalog/data``; the fields carry the unit in their
name (``latency_ns``, ``gbyte_s_per_direction``) exactly as the file does, and properties
give the same quantity in SI units (bytes, seconds, bytes/s, FLOP/s), which is what the
rest of fabricsim uses. Every record has ``name`` (its TOML key), ``source`` and ``note``.

Example
-------
>>> link = LinkSpec(name="x", family="ib", gbyte_s_per_direction=50.0, lanes=4,
...                 gbit_s_per_lane=100.0, latency_ns=100, lossless=True,
...                 flow_control="credit", source="IBTA")
>>> link.bandwidth
50000000000.0
>>> link.latency
1e-07
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from fabricsim._strict import StrictModel
from fabricsim.units import GBPS, GBPS_BITS

__all__ = [
    "NAME_RE",
    "CableSpec",
    "FabricSpec",
    "GpuSpec",
    "LinkSpec",
    "NicSpec",
    "Spec",
    "SwitchSpec",
    "SystemSpec",
    "TopologySpec",
]

#: Catalog keys: lowercase letters and digits in dash-separated words (``dgx-h100``).
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

LinkFamily = Literal["pcie", "nvlink", "ib", "ethernet", "efa", "ici"]
FlowControl = Literal["credit", "pfc", "none", "srd", "uet"]
SwitchFamily = Literal["nvswitch", "ib", "ethernet", "efa"]
NicKind = Literal["nic", "dpu", "efa"]
CableKind = Literal["dac", "aoc", "transceiver"]
Transport = Literal["ib", "roce", "srd", "tcp", "uet", "slingshot"]
TopologyName = Literal["fat-tree", "rail-optimized", "dragonfly", "torus3d"]

_TB = 1e12
_NS = 1e9
_GIB = 2**30

NonNegFloat = Field(ge=0.0, allow_inf_nan=False)
#: Lowest power cap (W) a system may run its GPUs at: data-centre GPUs refuse caps below
#: about a third of their TDP (an H100 SXM's floor is 200 W; an L4's TDP is 72 W).
MIN_GPU_POWER_W = 50.0


class Spec(StrictModel):
    """Fields shared by every catalog record."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str
    """The TOML key, stable lowercase-dash (``dgx-h100``)."""
    source: str = Field(min_length=1)
    """Where the figures come from: vendor doc, spec, ``seed 004``, reference row id."""
    note: str = ""
    """Which figure we use where sources disagree, and why; assumptions and estimates."""

    @field_validator("name")
    @classmethod
    def _name_is_lowercase_dash(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"name {v!r} must be lowercase words joined by '-'")
        return v

    @field_validator("source")
    @classmethod
    def _source_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("source must not be blank")
        return v


class LinkSpec(Spec):
    """A link technology (one port, one x16 slot, or a GPU's whole NVLink bundle)."""

    family: LinkFamily
    gbyte_s_per_direction: float = Field(gt=0.0)
    """Usable GB/s (1e9 B/s) per direction; for NVLink the per-GPU total."""
    lanes: int = Field(ge=0)
    """Lanes per direction (per link for NVLink); 0 when not meaningful."""
    gbit_s_per_lane: float = NonNegFloat
    """Nominal per-lane rate (GT/s for PCIe); 0 when not meaningful."""
    links_per_gpu: int = Field(default=0, ge=0)
    """NVLink and ICI only: links (ICI: ports) per GPU or TPU chip."""
    gbyte_s_per_link: float = Field(default=0.0, ge=0.0)
    """NVLink and ICI only: GB/s per link per direction."""
    latency_ns: float = NonNegFloat
    """Per-hop PHY/FEC/cable latency (switch and NIC latency excluded)."""
    lossless: bool
    flow_control: FlowControl

    @model_validator(mode="after")
    def _nvlink_fields(self) -> LinkSpec:
        if self.family in ("nvlink", "ici"):
            if self.links_per_gpu <= 0 or self.gbyte_s_per_link <= 0:
                raise ValueError(f"an {self.family} entry needs links_per_gpu > 0 and "
                                 "gbyte_s_per_link > 0")
            total = self.links_per_gpu * self.gbyte_s_per_link
            if abs(total - self.gbyte_s_per_direction) > 1e-6 * total:
                raise ValueError(
                    f"gbyte_s_per_direction {self.gbyte_s_per_direction} != links_per_gpu x "
                    f"gbyte_s_per_link = {total}"
                )
        elif self.links_per_gpu or self.gbyte_s_per_link:
            raise ValueError("links_per_gpu / gbyte_s_per_link are for nvlink and ici entries "
                             "only")
        return self

    @property
    def bandwidth(self) -> float:
        """Bytes/s per direction."""
        return self.gbyte_s_per_direction * GBPS

    @property
    def link_bandwidth(self) -> float:
        """Bytes/s per direction of ONE NVLink link (equals ``bandwidth`` otherwise)."""
        if self.family in ("nvlink", "ici"):
            return self.gbyte_s_per_link * GBPS
        return self.bandwidth

    @property
    def latency(self) -> float:
        """Per-hop latency in seconds."""
        return self.latency_ns / _NS


class GpuSpec(Spec):
    """A GPU: memory, dense compute, and which NVLink / PCIe it has."""

    memory_gib: float = Field(gt=0.0)
    hbm_tbyte_s: float = Field(gt=0.0)
    bf16_dense_tflops: float = Field(gt=0.0)
    fp8_dense_tflops: float = NonNegFloat
    """0 when the GPU has no FP8 tensor cores."""
    fp4_dense_tflops: float = Field(0.0, ge=0.0)
    """Dense NVFP4 tensor throughput; 0 when the GPU has no FP4 tensor cores."""
    nvlink: str
    """Key into links (family nvlink), or ``""`` for none."""
    pcie: str
    """Key into links (family pcie): the GPU's host interface."""
    tdp_w: float = Field(gt=0.0)
    ici: str = ""
    """Key into links (family ici): a TPU chip's inter-chip interconnect; ``""`` for none."""
    c2c_gbyte_s: float = Field(0.0, ge=0.0)
    """NVLink-C2C bandwidth to its Grace CPU, GB/s per direction per GPU (the route
    activations offloaded to host memory take); 0 when the host is reached over PCIe."""

    @property
    def bf16_flops(self) -> float:
        """Dense BF16 tensor FLOP/s."""
        return self.bf16_dense_tflops * _TB

    @property
    def fp8_flops(self) -> float:
        """Dense FP8 tensor FLOP/s (0 if unsupported)."""
        return self.fp8_dense_tflops * _TB

    @property
    def fp4_flops(self) -> float:
        """Dense FP4 (NVFP4) tensor FLOP/s (0 if unsupported)."""
        return self.fp4_dense_tflops * _TB

    @property
    def memory_bytes(self) -> int:
        """Device memory in bytes."""
        return round(self.memory_gib * _GIB)

    @property
    def hbm_bandwidth(self) -> float:
        """Memory bandwidth in bytes/s."""
        return self.hbm_tbyte_s * _TB

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink != ""


class NicSpec(Spec):
    """A network adapter (NIC, DPU or AWS EFA interface)."""

    kind: NicKind
    max_gbit_s: float = Field(gt=0.0)
    """Total line rate over all ports, Gb/s."""
    ports: int = Field(ge=1)
    pcie: str
    """Key into links (family pcie): host attach."""
    latency_ns: float = NonNegFloat
    """One-way processing latency at one end (estimate)."""
    price_usd: float = NonNegFloat
    nccl_net_latency_us: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    """Latency NCCL's network plugin for this NIC reports to NCCL's tuner, us: 0 for
    NCCL's own InfiniBand/RoCE transport; AWS's EFA plugin reports a figure chosen to steer
    NCCL's choice (75 us on p4d and p5, 35 us from p5en on). It moves NCCL's choice of
    algorithm and protocol, not any transfer's time."""
    sustained_share: float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    """Most of its line rate the device carries under NCCL's traffic, as measured (1: no
    ceiling measured below what the protocol and the transport's framing leave). It caps
    every protocol's network efficiency on fabrics with this NIC
    (:meth:`fabricsim.protocols.Protocol.eff_array`): p4d's first EFA moves about 340 of
    its 400 Gb/s in all-reduce tests, where framing and Simple's own share would give
    379."""
    in_order_128b: bool = True
    """Whether the NIC delivers every 128-byte-aligned block of a transfer in order, which
    NCCL's LL and LL128 protocols need from the network (their flags travel inside the
    data). Where it does not, AWS's EFA plugin sets ``NCCL_PROTO=simple`` for the whole
    process (aws-ofi-nccl ``platform-aws.cpp``: p4d's first EFA over send/receive)."""

    @property
    def bandwidth(self) -> float:
        """Total line rate in bytes/s."""
        return self.max_gbit_s * GBPS_BITS

    @property
    def latency(self) -> float:
        return self.latency_ns / _NS


class SwitchSpec(Spec):
    """A switch ASIC/box: radix ports at ``port_gbit_s``."""

    family: SwitchFamily
    radix: int = Field(ge=2)
    port_gbit_s: float = Field(gt=0.0)
    latency_ns: float = NonNegFloat
    """Port-to-port latency, no queueing."""
    cut_through: bool
    buffer_mib: float = NonNegFloat
    """Total packet buffer; 0 = not modelled (credit-limited or unknown)."""
    price_per_port_usd: float = NonNegFloat
    in_network_reduction: bool = False
    """The ASIC can sum flows inside the switch: NVLink SHARP (NVLS) on NVSwitch gen3+,
    SHARP on NVIDIA Quantum InfiniBand switches. Whether a fabric uses it is the fabric's
    setting; this says only that the hardware can."""

    @property
    def port_bandwidth(self) -> float:
        """Bytes/s per port per direction."""
        return self.port_gbit_s * GBPS_BITS

    @property
    def latency(self) -> float:
        return self.latency_ns / _NS

    @property
    def buffer_bytes(self) -> int:
        return round(self.buffer_mib * 2**20)


class CableSpec(Spec):
    """A cable or optical module of one speed class."""

    kind: CableKind
    gbit_s: float = Field(gt=0.0)
    price_usd: float = NonNegFloat
    """Price of one cable (DAC, AOC) or ONE transceiver module."""
    max_length_m: float = Field(gt=0.0)


class FabricSpec(Spec):
    """A scale-out fabric preset: transport, link, switch and NIC kinds, and latencies."""

    transport: Transport
    link: str
    """Key into links."""
    port_gbit_s: float = Field(gt=0.0)
    switch: str
    """Key into switches."""
    nic: str
    """Key into nics."""
    lossless: bool
    flow_control: FlowControl
    sharp: bool
    """In-network reduction (InfiniBand SHARP) available."""
    switch_latency_ns: float = NonNegFloat
    """Per switch hop, port-to-port."""
    nic_latency_ns: float = NonNegFloat
    """Per end (sender and receiver each pay it)."""

    @property
    def port_bandwidth(self) -> float:
        """Bytes/s per port per direction."""
        return self.port_gbit_s * GBPS_BITS

    @property
    def switch_latency(self) -> float:
        return self.switch_latency_ns / _NS

    @property
    def nic_latency(self) -> float:
        return self.nic_latency_ns / _NS


#: Platforms with network-plugin tuner regions (:mod:`fabricsim.collectives.plugin_tuner`).
TunerRegions = Literal["", "aws-p5", "aws-p5en", "aws-p6-b200", "aws-p6-b300"]


class SystemSpec(Spec):
    """A server (or rack, for NVL72) preset: the internal topology the builder lays out."""

    description: str = Field(min_length=1)
    gpu: str
    gpus: int = Field(ge=1)
    nvlink_domain_gpus: int = Field(ge=1)
    """GPUs per NVLink domain; 1 when the GPUs have no NVLink."""
    gpus_per_host: int = Field(0, ge=0)
    """GPUs under one operating system (a rack's compute tray: 4 in a GB200 NVL72); 0: the
    whole NVLink domain is one host (every HGX/DGX server). Where a domain spans several
    hosts, NCCL joins them by multi-node NVLink, whose steps cost more
    (:data:`fabricsim.protocols.PROTOCOLS`, ``mnnvl_step``)."""
    nvswitches: int = Field(ge=0)
    nvswitch: str
    """Key into switches (family nvswitch), ``""`` when ``nvswitches == 0``."""
    cpus: int = Field(ge=0)
    cpu_vendor: Literal["intel", "amd", "arm"] = "intel"
    """Maker of the host CPUs. NCCL's tuner reads it: across servers an AMD host gets a
    lower LL bandwidth row and twice the network overhead per step
    (``src/graph/tuning.cc``), which moves NCCL's protocol switch points."""
    pcie: str
    """Key into links: PCIe generation of the GPU/NIC attach in this box."""
    pcie_switches: int = Field(ge=0)
    gpu_pcie_links: int = Field(1, ge=1, le=4)
    """PCIe x16 links from each GPU towards its NICs and host (1 on every shipping box;
    2 on Vera Rubin, whose 1.6 Tb/s of ConnectX-9 per GPU a single Gen6 x16 cannot feed)."""
    nics: int = Field(ge=0)
    """Compute (scale-out) NICs or interfaces."""
    nic: str
    nic_gbit_s: float = Field(gt=0.0)
    """Per-NIC port rate used, Gb/s."""
    nic_via_c2c: bool = False
    """The NICs reach their GPUs' memory through the GPU's own Grace CPU: its PCIe root
    port, then NVLink-C2C (HPE's quad-GH200 node). NCCL classes that path PHB, and from
    2.27.3 P2C; it runs LL128 across servers over P2C but not over PHB
    (``NCCL_LL128_C2C``, ``src/graph/tuning.cc``)."""
    storage_nics: int = Field(ge=0)
    storage_nic: str
    """Key into nics, ``""`` when ``storage_nics == 0``."""
    nccl_tuner_regions: TunerRegions = ""
    """The instance type whose measured regions the NICs' network plugin tunes NCCL with
    (AWS's EFA plugin, aws-ofi-nccl, on p5/p5e, p5en, p6-b200, p6-b300), overruling NCCL's
    choice of algorithm and protocol from three instances on; ``""``: NCCL's own choice.
    The regions ship with the package (``collectives/aws_ofi_nccl_regions.json``)."""
    default_fabric: str
    """Key into fabrics."""
    default_topology: TopologyName
    gpu_hour_usd: float = NonNegFloat
    gpu_power_w: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    """Power cap the box runs its GPUs at, W (0: the GPU's TDP). Meta's Grand Teton caps
    its H100s at 500 W; a cap below the TDP lowers the tensor-core clock. A cap must be
    at least :data:`MIN_GPU_POWER_W` (no data-centre GPU runs below it)."""

    ici_host_shape: list[int] = Field(default_factory=list)
    """TPU hosts only: how the host's chips sit in the slice torus (``[2, 2, 1]`` on v4,
    v5p and TPU7x; ``[2, 4]`` on v5e and v6e); empty for GPU servers."""
    ici_max_slice: list[int] = Field(default_factory=list)
    """TPU hosts only: the largest slice the pod schedules (``[16, 16, 24]`` on v5p)."""
    ici_cube: int = Field(0, ge=0)
    """TPU hosts only: edge of the cube that optical circuit switches join (4), whose whole
    multiples get wraparound links; 0 for a pod that is one fixed torus (v5e, v6e)."""
    ici_twist: bool = False
    """TPU hosts only: the pod can wire ``k×k×2k`` and ``k×2k×2k`` slices as twisted tori."""

    @model_validator(mode="after")
    def _counts_consistent(self) -> SystemSpec:
        if self.ici_host_shape:
            if math.prod(self.ici_host_shape) != self.gpus or min(self.ici_host_shape) < 1:
                raise ValueError(f"ici_host_shape {self.ici_host_shape} must hold the "
                                 f"{self.gpus} chips of the host")
            if len(self.ici_max_slice) != len(self.ici_host_shape) \
                    or len(self.ici_host_shape) not in (2, 3):
                raise ValueError("ici_max_slice needs one size per dimension of "
                                 "ici_host_shape (2 or 3)")
        elif self.ici_max_slice or self.ici_cube or self.ici_twist:
            raise ValueError("ici_max_slice, ici_cube and ici_twist need ici_host_shape")
        if self.nvlink_domain_gpus > self.gpus or self.gpus % self.nvlink_domain_gpus:
            raise ValueError(
                f"nvlink_domain_gpus ({self.nvlink_domain_gpus}) must divide gpus ({self.gpus})"
            )
        if self.gpus_per_host and self.nvlink_domain_gpus % self.gpus_per_host:
            raise ValueError(f"gpus_per_host ({self.gpus_per_host}) must divide "
                             f"nvlink_domain_gpus ({self.nvlink_domain_gpus})")
        if (self.nvswitches == 0) != (self.nvswitch == ""):
            raise ValueError("nvswitch must be '' exactly when nvswitches == 0")
        if (self.storage_nics == 0) != (self.storage_nic == ""):
            raise ValueError("storage_nic must be '' exactly when storage_nics == 0")
        if 0.0 < self.gpu_power_w < MIN_GPU_POWER_W:
            raise ValueError(f"gpu_power_w {self.gpu_power_w:g} W is below any GPU's power "
                             f"floor; give 0 (the GPU's TDP) or at least {MIN_GPU_POWER_W:g}")
        return self

    @property
    def nic_bandwidth(self) -> float:
        """Bytes/s per compute NIC per direction (at ``nic_gbit_s``)."""
        return self.nic_gbit_s * GBPS_BITS

    @property
    def total_nic_bandwidth(self) -> float:
        """Bytes/s per direction over all compute NICs of the box."""
        return self.nics * self.nic_bandwidth


ParamValue = int | float | bool | str | list[int]


class TopologySpec(Spec):
    """A topology family and its default parameters."""

    description: str = Field(min_length=1)
    tiers: int = Field(ge=0)
    """Switch tiers (0 for a direct network)."""
    oversubscription: float = Field(ge=1.0)
    """Downlink:uplink bandwidth at the lowest tier (1.0 = non-blocking)."""
    params: dict[str, ParamValue] = Field(default_factory=dict)
    """Family-specific defaults (``dims`` for torus3d, group sizes for dragonfly, ...)."""
