"""Fabrics: nodes, directed links and routing; builders for servers and networks."""

from fabricsim.fabric.builder import FabricBuilder
from fabricsim.fabric.cluster import TOPOLOGIES, build_cluster, register_topology
from fabricsim.fabric.core import Fabric, FabricInfo, pair_hash
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.network import Network, ScaleOutSpec, ShortestPathRouter
from fabricsim.fabric.paths import Paths, Router
from fabricsim.fabric.server import ServerTemplate

__all__ = [
    "TOPOLOGIES",
    "Fabric",
    "FabricBuilder",
    "FabricInfo",
    "LinkKind",
    "Network",
    "NodeKind",
    "Paths",
    "Router",
    "ScaleOutSpec",
    "ServerTemplate",
    "ShortestPathRouter",
    "build_cluster",
    "pair_hash",
    "register_topology",
]
