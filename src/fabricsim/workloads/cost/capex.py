"""Capital cost of a scale-out fabric, and the cost of a trained token.

The bill of materials comes from what the builder made (``fabric.info``) priced with the
catalog's street-price estimates:

* **NICs**: ``servers × nics_per_server × cat.nic(info.extra["nic"]).price_usd``.
* **Switches**, per tier (``info.extra["switches"]``: leaf, spine, core, dragonfly router,
  torus router): ``count × radix × cat.switch(info.extra["switch"]).price_per_port_usd``
  — a switch is bought whole, used ports or not.
* **Cables and optics** (``info.cables``):

  - NIC-to-leaf cables (``nic-leaf``, ``nic-router``): one passive copper cable (DAC) of the
    NIC's speed class when that class reaches at least :data:`DAC_MIN_REACH_M` (100G and
    200G DAC reach 3–5 m), otherwise one active optical cable (AOC). 400G and 800G DACs
    reach 2–2.5 m: too short from a server to a leaf in the next rack;
  - every link above the leaves (``leaf-spine``, ``spine-core``, dragonfly ``local`` and
    ``global``, ``torus``): **two transceivers** of the switch port's speed class, one
    at each end. Fibre, patch panels and installation are not counted.

  The speed class is the smallest catalog entry of that kind at least as fast as the link.

Not counted: NVSwitch chips and NVLink cables (in the server price; catalog price 0),
storage and management networks (separate budgets), racks, power and cooling.

Cloud parts: EFA interfaces and the AWS fabric have catalog price 0 because the instance
price includes them. To compare an *EFA-like* fabric (a lossy Ethernet fabric with a
multipath transport) with owned InfiniBand and RoCE, ``cloud_proxy=True`` prices a
zero-priced switch as the cheapest Ethernet switch of at least its port speed and a
zero-priced NIC as the cheapest NIC of at least its speed; each substitution is listed in
``notes``.

Example
-------
>>> import fabricsim as fs
>>> cap = fabric_capex(fs.build_cluster("dgx-h100", nodes=32, fabric="ib-ndr"))
>>> [i.item for i in cap.items][:4]
['nic', 'switch:leaf', 'switch:spine', 'cable:nic-leaf']
>>> cap.total_usd == sum(i.total_usd for i in cap.items)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricsim.catalog import get_catalog
from fabricsim.catalog.models import CableSpec
from fabricsim.errors import ConfigError, ModelError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular

__all__ = [
    "AUX_CABLES",
    "AUX_SWITCHES",
    "DAC_MIN_REACH_M",
    "HOURS_PER_YEAR",
    "CapexItem",
    "FabricCapex",
    "cable_for",
    "fabric_capex",
    "token_cost",
]

#: A DAC is used from NIC to leaf only if its class reaches at least this far (metres).
DAC_MIN_REACH_M = 3.0
#: Switch tiers and cable classes of other networks than the compute fabric.
AUX_SWITCHES = ("storage-switch", "mgmt-switch", "nvswitch-tier2")
AUX_CABLES = ("storage", "management", "nvlink-network")
HOURS_PER_YEAR = 365.0 * 24.0


@dataclass(frozen=True)
class CapexItem:
    """One line of the bill of materials.

    Examples
    --------
    >>> CapexItem("nic", "connectx-7", 8, 2200.0).total_usd
    17600.0
    """

    item: str
    """``nic``, ``switch:<tier>``, ``cable:<class>`` or ``optics:<class>``."""
    part: str
    """Catalog key priced."""
    count: int
    """Units bought (NICs, switches, cables, transceivers)."""
    unit_usd: float
    """Price of one unit (a switch: radix × price per port)."""

    @property
    def total_usd(self) -> float:
        """``count × unit_usd``."""
        return self.count * self.unit_usd

    @property
    def kind(self) -> str:
        """``nics``, ``switches``, ``cables`` or ``optics``."""
        head = self.item.split(":")[0]
        return {"nic": "nics", "switch": "switches", "cable": "cables"}.get(head, "optics")


@dataclass(frozen=True)
class FabricCapex(Tabular):
    """Bill of materials and capital cost of one fabric.

    Examples
    --------
    >>> c = FabricCapex("ib-ndr", "dgx-h100", 8, [CapexItem("nic", "x", 8, 1000.0)])
    >>> c.total_usd, c.per_gpu_usd, c.by_kind()["nics"]
    (8000.0, 1000.0, 8000.0)
    >>> c.to_dict()["by_kind_usd.nics"], c.to_dict()["items"]
    (8000.0, 1)
    """

    fabric: str
    system: str
    gpus: int
    items: list[CapexItem]
    notes: list[str] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        """Capital cost of the fabric in USD."""
        return float(sum(i.total_usd for i in self.items))

    @property
    def per_gpu_usd(self) -> float:
        """Capital cost per GPU served."""
        return self.total_usd / max(1, self.gpus)

    def by_kind(self) -> dict[str, float]:
        """USD by ``nics``, ``switches``, ``cables``, ``optics``."""
        out = {"nics": 0.0, "switches": 0.0, "cables": 0.0, "optics": 0.0}
        for i in self.items:
            out[i.kind] += i.total_usd
        return out

    def _record(self) -> dict[str, Any]:  # one row: the bill of materials is counted
        return {**self.as_dict(), "items": len(self.items)}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {"fabric": self.fabric, "system": self.system, "gpus": self.gpus,
                "total_usd": self.total_usd, "per_gpu_usd": self.per_gpu_usd,
                "by_kind_usd": self.by_kind(),
                "items": [{"item": i.item, "part": i.part, "count": i.count,
                           "unit_usd": i.unit_usd, "total_usd": i.total_usd}
                          for i in self.items],
                "notes": list(self.notes)}


def cable_for(kind: str, gbit_s: float) -> CableSpec:
    """The cheapest catalog cable of ``kind`` (dac, aoc, transceiver) at least ``gbit_s``.

    Examples
    --------
    >>> cable_for("transceiver", 400).name, cable_for("dac", 150).name
    ('transceiver-400g', 'dac-200g')
    """
    cat = get_catalog()
    fits = [c for c in cat.cables.values() if c.kind == kind and c.gbit_s >= gbit_s - 1e-9]
    if not fits:
        raise ModelError(f"the catalog has no {kind} of {gbit_s:g} Gb/s or faster; add one to "
                         f"cables.toml", field="cables")
    return min(fits, key=lambda c: (c.gbit_s, c.price_usd))


def _nic_price(name: str, gbit_s: float, proxy: bool, notes: list[str]) -> tuple[str, float]:
    cat = get_catalog()
    nic = cat.nic(name)
    if nic.price_usd > 0 or not proxy:
        return name, nic.price_usd
    fits = [n for n in cat.nics.values() if n.price_usd > 0 and n.max_gbit_s >= gbit_s - 1e-9]
    if not fits:
        return name, 0.0
    sub = min(fits, key=lambda n: (n.price_usd, n.max_gbit_s))
    notes.append(f"NIC {name} has no catalog price (a cloud's, or not sold alone); priced "
                 f"as {sub.name} "
                 f"(${sub.price_usd:,.0f})")
    return sub.name, sub.price_usd


def _switch_price(name: str, proxy: bool, notes: list[str]) -> tuple[str, float, int]:
    cat = get_catalog()
    sw = cat.switch(name)
    if sw.price_per_port_usd > 0 or not proxy:
        return name, sw.price_per_port_usd, sw.radix
    fits = [s for s in cat.switches.values() if s.family == "ethernet"
            and s.price_per_port_usd > 0 and s.port_gbit_s >= sw.port_gbit_s - 1e-9]
    if not fits:
        return name, 0.0, sw.radix
    sub = min(fits, key=lambda s: (s.price_per_port_usd, s.port_gbit_s))
    notes.append(f"switch {name} has no catalog price (a cloud's, or not sold alone); ports "
                 f"priced as {sub.name} "
                 f"(${sub.price_per_port_usd:,.0f}/port)")
    return sub.name, sub.price_per_port_usd, sw.radix


def fabric_capex(fabric: Fabric, *, cloud_proxy: bool = True) -> FabricCapex:
    """Capital cost of the scale-out fabric of ``fabric`` (see the module notes).

    Parameters
    ----------
    fabric : Fabric
        A cluster from :func:`fabricsim.build_cluster`.
    cloud_proxy : bool
        Price zero-priced (cloud) NICs and switches like the commodity parts of their
        speed, so an EFA-like fabric can be compared with owned ones.

    Returns
    -------
    FabricCapex

    Examples
    --------
    >>> import fabricsim as fs
    >>> ib = fabric_capex(fs.build_cluster("dgx-h100", nodes=16, fabric="ib-ndr"))
    >>> roce = fabric_capex(fs.build_cluster("dgx-h100", nodes=16, fabric="roce-400g"))
    >>> ib.total_usd > roce.total_usd
    True
    """
    cat = get_catalog()
    info = fabric.info
    extra = info.extra
    if "switch" not in extra or "nic" not in extra:
        raise ConfigError("this fabric does not record its switch and NIC parts; build it "
                          "with fabricsim.build_cluster", field="fabric")
    notes: list[str] = []
    items: list[CapexItem] = []
    nic_gbit = info.nic_bandwidth * 8 / 1e9
    sw_name = str(extra["switch"])
    port_gbit = cat.switch(sw_name).port_gbit_s

    n_nics = info.servers * info.nics_per_server
    if n_nics:
        part, price = _nic_price(str(extra["nic"]), nic_gbit, cloud_proxy, notes)
        items.append(CapexItem("nic", part, n_nics, price))

    part, per_port, radix = _switch_price(sw_name, cloud_proxy, notes)
    radix = int(extra.get("radix", radix)) if info.topology != "torus3d" else radix
    for tier, count in dict(extra.get("switches", {})).items():
        if tier in AUX_SWITCHES or int(count) <= 0:
            continue
        items.append(CapexItem(f"switch:{tier}", part, int(count), radix * per_port))

    for cls, count in dict(info.cables).items():
        if cls in AUX_CABLES or int(count) <= 0:
            continue
        if cls.startswith("nic-"):
            dac = cable_for("dac", nic_gbit)
            c = dac if dac.max_length_m >= DAC_MIN_REACH_M else cable_for("aoc", nic_gbit)
            items.append(CapexItem(f"cable:{cls}", c.name, int(count), c.price_usd))
        else:
            t = cable_for("transceiver", port_gbit)
            items.append(CapexItem(f"optics:{cls}", t.name, 2 * int(count), t.price_usd))
    return FabricCapex(fabric=info.fabric, system=info.system, gpus=fabric.n_gpus,
                       items=items, notes=notes)


def token_cost(tokens_per_s: float, gpus: int, gpu_hour_usd: float, capex_usd: float,
               lifetime_years: float = 4.0) -> dict[str, float]:
    """Cost of training tokens: GPU time plus the fabric's capex amortised over its life.

    ``usd_per_token = (gpus × gpu_hour_usd + capex_usd / (lifetime_years × 8760 h))
    / (3600 × tokens_per_s)``. ``gpu_hour_usd`` is the price of the GPU server time; if it
    is a cloud price that already includes the network, pass ``capex_usd=0``.

    Examples
    --------
    >>> c = token_cost(1e6, 1000, 3.0, 0.0)
    >>> round(c["usd_per_1t_tokens"])  # 1e12 tokens at 1M tokens/s = 277.8 h on 1000 GPUs
    833333
    >>> token_cost(1e6, 1000, 3.0, 8760 * 4 * 1000.0)["fabric_share"]
    0.25
    """
    if tokens_per_s <= 0:
        raise ModelError(f"tokens_per_s must be positive, got {tokens_per_s}",
                         field="tokens_per_s")
    if lifetime_years <= 0:
        raise ConfigError(f"must be positive, got {lifetime_years}", field="lifetime_years")
    gpu_per_h = gpus * gpu_hour_usd
    fab_per_h = capex_usd / (lifetime_years * HOURS_PER_YEAR)
    per_token = (gpu_per_h + fab_per_h) / (3600.0 * tokens_per_s)
    total = gpu_per_h + fab_per_h
    return {"usd_per_token": per_token, "usd_per_1t_tokens": per_token * 1e12,
            "gpu_usd_per_hour": gpu_per_h, "fabric_usd_per_hour": fab_per_h,
            "fabric_share": fab_per_h / total if total > 0 else 0.0}
