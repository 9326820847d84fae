"""The Fabric a scenario describes: its ``cluster:`` section and user-defined ``systems:``.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("systems:\\n  box:\\n    base: dgx-a100\\n"
...                         "cluster:\\n  system: box\\n  nodes: 2\\n")
>>> fabric_from_scenario(sc).n_gpus
16
"""

from __future__ import annotations

from fabricsim.catalog import Catalog
from fabricsim.fabric import Fabric
from fabricsim.scenario.cluster import cluster_gpus, fabric_from_cluster, scenario_catalog
from fabricsim.scenario.schema import Scenario

__all__ = ["fabric_from_scenario", "scenario_gpus"]


def scenario_gpus(sc: Scenario, catalog: Catalog | None = None) -> int:
    """GPUs the scenario's cluster will have, from its presets alone (nothing is built);
    ``catalog`` already holding the scenario's ``systems:`` saves merging them again.

    >>> from fabricsim.scenario import load_scenario_text
    >>> scenario_gpus(load_scenario_text("cluster: {system: dgx-h100, nodes: 4}"))
    32
    """
    return cluster_gpus(sc.cluster, catalog if catalog is not None
                        else scenario_catalog(sc.systems))


def fabric_from_scenario(sc: Scenario) -> Fabric:
    """Build the Fabric of a whole scenario (its cluster and user-defined systems)."""
    return fabric_from_cluster(sc.cluster, sc.systems)
