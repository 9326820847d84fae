"""NCCL's three protocols as a timing model: per-hop latency against usable bandwidth.

NCCL moves data with one of three protocols (see NCCL's ``src/graph/tuning.cc`` for its own
tuning tables, which this model follows in structure but not in numbers):

* **LL** (low latency): 8-byte stores carrying a 4-byte flag each; the receiver polls the
  flag, so there is no fence per chunk. Lowest latency, about a quarter of the bandwidth.
* **LL128**: 128-byte lines with 8 bytes of flag (120/128 useful); near-Simple bandwidth on
  NVLink at a fraction of its latency.
* **Simple**: large chunks with a memory fence per chunk: full bandwidth, highest latency.

Each protocol here is three numbers per link class — a fixed overhead per step repetition
(``hop_latency``: synchronisation, flag polling, chunk pipeline fill), the fraction of a
link's line rate it achieves (``efficiency``), and a per-call launch overhead. Links fall in
five classes: ``nvlink``, ``pcie`` (also CPU socket links), ``net`` (NIC and switch links),
and for a transfer to or from a switch that reduces or multicasts, ``nvls`` (its NVLink
links) and ``sharp`` (its network links).

Every constant is calibrated against ``/work/shared/reference/measurements.csv``; the row
ids are given beside each value and in ``docs/collectives.md``.

Example
-------
>>> p = PROTOCOLS["simple"]
>>> p.efficiency["nvlink"] > PROTOCOLS["ll"].efficiency["nvlink"]
True
>>> PROTOCOLS["ll"].hop_latency["nvlink"] < p.hop_latency["nvlink"]
True
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.errors import unknown
from fabricsim.fabric.kinds import LinkKind

#: Link classes the protocol tables are indexed by.
LINK_CLASSES: tuple[str, ...] = ("nvlink", "pcie", "net", "nvls", "sharp")


def link_class_of_kind() -> NDArray[np.int8]:
    """Array mapping ``LinkKind`` value -> index into :data:`LINK_CLASSES` (without innet)."""
    out = np.full(max(int(k) for k in LinkKind) + 1, 2, dtype=np.int8)
    out[int(LinkKind.NVLINK)] = 0
    out[int(LinkKind.NVLINK_NETWORK)] = 0
    out[int(LinkKind.PCIE)] = 1
    out[int(LinkKind.CPU_INTERCONNECT)] = 1
    return out


@dataclass(frozen=True)
class Protocol:
    """Timing constants of one protocol (seconds; efficiencies are fractions of line rate).

    ``hop_latency[c]``: overhead added to every step repetition whose transfers cross
    link class ``c`` (the dearest class of the path counts). ``efficiency[c]``: fraction of
    a link's capacity this protocol moves as payload. ``launch``: once per collective call
    (kernel launch and group set-up, as nccl-tests measures it).
    """

    name: str
    hop_latency: Any = field(default_factory=dict)
    efficiency: Any = field(default_factory=dict)
    launch: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "hop_latency", MappingProxyType(dict(self.hop_latency)))
        object.__setattr__(self, "efficiency", MappingProxyType(dict(self.efficiency)))

    def hop_array(self) -> NDArray[np.float64]:
        """``hop_latency`` as an array in :data:`LINK_CLASSES` order."""
        return np.array([self.hop_latency[c] for c in LINK_CLASSES], dtype=np.float64)

    def eff_array(self) -> NDArray[np.float64]:
        """``efficiency`` as an array in :data:`LINK_CLASSES` order."""
        return np.array([self.efficiency[c] for c in LINK_CLASSES], dtype=np.float64)

    def scaled(self, **changes: Any) -> Protocol:
        """A copy with some fields replaced (used by calibration)."""
        return replace(self, **changes)


# Calibrated constants (see docs/collectives.md, "Calibration"). Row ids refer to
# /work/shared/reference/measurements.csv.
#
# Simple efficiency on NVLink: large-message ring all-reduce busbw / NVLink line rate;
#   DGX A100 231.6/300 (row 24), 234.9/300 (row 102); H100 ~370/450 (rows 115, 117, 169);
#   one value for both generations splits the difference (0.795: −3 % A100, +3 % H100).
# Simple efficiency on the network: 24 GB/s per 200G NIC (25 GB/s line, row 132), 48-49
#   GB/s per 400G NIC (row 141): 0.96.
# sharp efficiency: no SHARP measurement in the reference data; taken equal to the network
#   efficiency (assumption, stated in docs/collectives.md).
# nvls efficiency: H100 NVLS all-reduce moves (1+1/n)·S per NVLink direction;
#   busbw 478.9 (row 48) = algbw 273.6 GB/s -> 308 GB/s per 450 GB/s GPU: 0.685; rows
#   116 (5..8 GPUs give algbw 258..273, all ~308 GB/s per link) confirm the link-bound form.
# Latencies: fitted to the small- and mid-size points of the A100 (rows 1-24, 97-102) and
#   H100 (rows 25-48) curves by benchmarks/accuracy_nccl.py --fit.
PROTOCOLS: dict[str, Protocol] = {
    "ll": Protocol(
        name="ll",
        hop_latency={"nvlink": 1.0e-6, "pcie": 1.5e-6, "net": 3.0e-6, "nvls": 1.0e-6, "sharp": 3.0e-6},
        efficiency={"nvlink": 0.20, "pcie": 0.20, "net": 0.24, "nvls": 0.17, "sharp": 0.24},
        launch=20e-6,
    ),
    "ll128": Protocol(
        name="ll128",
        hop_latency={"nvlink": 1.5e-6, "pcie": 2.0e-6, "net": 4.0e-6, "nvls": 1.5e-6, "sharp": 4.0e-6},
        efficiency={"nvlink": 0.55, "pcie": 0.55, "net": 0.70, "nvls": 0.47, "sharp": 0.70},
        launch=25e-6,
    ),
    "simple": Protocol(
        name="simple",
        hop_latency={"nvlink": 10e-6, "pcie": 10e-6, "net": 14e-6, "nvls": 10e-6, "sharp": 14e-6},
        efficiency={"nvlink": 0.795, "pcie": 0.80, "net": 0.96, "nvls": 0.685, "sharp": 0.96},
        launch=25e-6,
    ),
}

#: Physics only: no overheads, full line rate. For tests and for upper bounds.
IDEAL = Protocol(name="ideal", hop_latency=dict.fromkeys(LINK_CLASSES, 0.0),
                 efficiency=dict.fromkeys(LINK_CLASSES, 1.0), launch=0.0)

#: Display names as NCCL prints them.
PROTOCOL_LABELS = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}


def get_protocol(name: str) -> Protocol:
    """The protocol called ``name`` (case-insensitive: ``LL``, ``LL128``, ``Simple``).

    Examples
    --------
    >>> get_protocol("LL128").name
    'll128'
    """
    key = name.lower()
    if key == "ideal":
        return IDEAL
    if key not in PROTOCOLS:
        raise unknown("protocol", name, PROTOCOL_LABELS.values(), field="proto")
    return PROTOCOLS[key]
