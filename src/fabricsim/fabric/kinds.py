"""Node and link kinds of a :class:`~fabricsim.fabric.core.Fabric`.

Kinds are small integers so that fabrics keep them in compact numpy arrays.

Example
-------
>>> NodeKind.GPU.label
'gpu'
>>> LinkKind.NVLINK.label
'nvlink'
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
from numpy.typing import NDArray


class NodeKind(IntEnum):
    """What a node of a fabric is."""

    GPU = 0
    CPU = 1
    PCIE_SWITCH = 2
    NIC = 3
    NVSWITCH = 4
    LEAF = 5
    SPINE = 6
    CORE = 7
    ROUTER = 8
    STORAGE_NIC = 9
    STORAGE_SWITCH = 10
    MGMT_SWITCH = 11
    STORAGE_TARGET = 12

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")

    @property
    def is_switch(self) -> bool:
        return self in _SWITCHES


_SWITCHES = {
    NodeKind.PCIE_SWITCH,
    NodeKind.NVSWITCH,
    NodeKind.LEAF,
    NodeKind.SPINE,
    NodeKind.CORE,
    NodeKind.ROUTER,
    NodeKind.STORAGE_SWITCH,
    NodeKind.MGMT_SWITCH,
}

#: Kinds of node that belong to the scale-out network (not inside a server).
NETWORK_SWITCH_KINDS = (NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE, NodeKind.ROUTER)


class LinkKind(IntEnum):
    """What a directed link of a fabric is; its class names bottlenecks in results."""

    NVLINK = 0
    PCIE = 1
    CPU_INTERCONNECT = 2
    NIC_LEAF = 3
    LEAF_SPINE = 4
    SPINE_CORE = 5
    LOCAL = 6
    GLOBAL = 7
    TORUS = 8
    NVLINK_NETWORK = 9
    STORAGE = 10
    MGMT = 11
    #: A TPU chip's inter-chip interconnect link to a torus neighbour (direct, no switch).
    ICI = 12

    @property
    def label(self) -> str:
        return _LINK_LABELS[self]


_LINK_LABELS = {
    LinkKind.NVLINK: "nvlink",
    LinkKind.PCIE: "pcie",
    LinkKind.CPU_INTERCONNECT: "cpu-interconnect",
    LinkKind.NIC_LEAF: "nic-leaf",
    LinkKind.LEAF_SPINE: "leaf-spine",
    LinkKind.SPINE_CORE: "spine-core",
    LinkKind.LOCAL: "dragonfly-local",
    LinkKind.GLOBAL: "dragonfly-global",
    LinkKind.TORUS: "torus",
    LinkKind.NVLINK_NETWORK: "nvlink-network",
    LinkKind.STORAGE: "storage",
    LinkKind.MGMT: "management",
    LinkKind.ICI: "ici",
}


#: Classes of link the protocol model is indexed by (:mod:`fabricsim.protocols`): NVLink,
#: PCIe (and CPU socket links), network, and for a transfer to or from a switch that
#: reduces or multicasts, ``nvls`` (its NVLink links) and ``sharp`` (its network links).
LINK_CLASSES: tuple[str, ...] = ("nvlink", "pcie", "net", "nvls", "sharp")


def link_class_of_kind() -> NDArray[np.int8]:
    """Array mapping ``LinkKind`` value -> index into :data:`LINK_CLASSES` (without the
    in-network classes, which depend on the transfer).

    >>> LINK_CLASSES[link_class_of_kind()[LinkKind.NIC_LEAF]]
    'net'
    """
    out = np.full(max(int(k) for k in LinkKind) + 1, 2, dtype=np.int8)
    out[int(LinkKind.NVLINK)] = 0
    out[int(LinkKind.NVLINK_NETWORK)] = 0
    out[int(LinkKind.ICI)] = 0
    out[int(LinkKind.PCIE)] = 1
    out[int(LinkKind.CPU_INTERCONNECT)] = 1
    return out
