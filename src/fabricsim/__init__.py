"""fabricsim: simulate and plan the networks that GPU clusters train and serve models on.

Three things, kept apart: a :class:`Fabric` (where bytes can go), a :class:`Schedule`
(what must be sent) and a :class:`Backend` (how long it takes).

Example
-------
>>> import fabricsim as fs
>>> fab = fs.build_cluster("dgx-h100", nodes=2)
>>> fab.n_gpus
16
"""

from fabricsim.backends import Backend, IdealBackend, Result, get_backend
from fabricsim.catalog import get_catalog
from fabricsim.errors import (
    ConfigError,
    FabricsimError,
    ModelError,
    NoRouteError,
    ScheduleError,
    SimulationError,
    TopologyError,
    UnitError,
    UnknownPresetError,
)
from fabricsim.fabric import Fabric, FabricInfo, LinkKind, NodeKind, build_cluster
from fabricsim.scenario import Scenario, load_scenario
from fabricsim.schedule import Schedule, Step

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "ConfigError",
    "Fabric",
    "FabricInfo",
    "FabricsimError",
    "IdealBackend",
    "LinkKind",
    "ModelError",
    "NoRouteError",
    "NodeKind",
    "Result",
    "Scenario",
    "Schedule",
    "ScheduleError",
    "SimulationError",
    "Step",
    "TopologyError",
    "UnitError",
    "UnknownPresetError",
    "__version__",
    "build_cluster",
    "get_backend",
    "get_catalog",
    "load_scenario",
]
