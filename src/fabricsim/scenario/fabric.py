"""The Fabric a scenario describes: its ``cluster:`` section and user-defined ``systems:``.

The one place a scenario turns into a Fabric, shared by the CLI commands and the
backends' scenario runners.

Example
-------
>>> from fabricsim.scenario import load_scenario_text
>>> sc = load_scenario_text("systems:\\n  box:\\n    base: dgx-a100\\n"
...                         "cluster:\\n  system: box\\n  nodes: 2\\n")
>>> fabric_from_scenario(sc).n_gpus
16
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.fabric import Fabric, build_cluster
from fabricsim.scenario.schema import ClusterSpec, Scenario


def scenario_catalog(systems: Mapping[str, Mapping[str, Any]] | None) -> Catalog:
    """The shipped catalog with a scenario's user-defined ``systems:`` added (the shipped
    one when it defines none).

    >>> scenario_catalog({"box": {"base": "dgx-a100"}}).system("box").gpus
    8
    """
    from fabricsim.catalog import get_catalog, with_systems

    return with_systems(get_catalog(), systems) if systems else get_catalog()


def fabric_from_cluster(c: ClusterSpec, systems: Mapping[str, Mapping[str, Any]] | None = None
                        ) -> Fabric:
    """Build the Fabric a ClusterSpec describes (``systems``: user-defined presets). An
    error naming one of the builder's arguments names it as the scenario's
    ``cluster.<field>``.

    >>> from fabricsim.errors import ConfigError
    >>> try:
    ...     fabric_from_cluster(ClusterSpec(system="dgx-h100", nodes=1_000_000))
    ... except ConfigError as e:
    ...     print(e.field)
    cluster.nodes
    """
    from fabricsim.errors import FabricsimError

    catalog = scenario_catalog(systems)
    try:
        return build_cluster(c.system, c.nodes, gpus_per_node=c.gpus_per_node,
                             fabric=c.fabric, topology=c.topology,
                             oversubscription=c.oversubscription, tiers=c.tiers,
                             planes=c.planes, radix=c.radix, params=dict(c.params),
                             storage=c.storage, management=c.management, catalog=catalog)
    except FabricsimError as e:
        head = (e.field or "").split(".")[0]
        if head in ClusterSpec.model_fields:
            e.field = f"cluster.{e.field}"
            e.args = (f"{e.field}: {e.message}",)
        raise


def scenario_gpus(sc: Scenario, catalog: Any = None) -> int:
    """GPUs the scenario's cluster will have, from its presets alone (nothing is built);
    ``catalog`` already holding the scenario's ``systems:`` saves merging them again.

    >>> from fabricsim.scenario import load_scenario_text
    >>> scenario_gpus(load_scenario_text("cluster: {system: dgx-h100, nodes: 4}"))
    32
    """
    c = sc.cluster
    if c.gpus_per_node is not None:
        return int(c.nodes) * int(c.gpus_per_node)
    if catalog is None:
        catalog = scenario_catalog(sc.systems)
    return int(c.nodes) * int(catalog.system(c.system).gpus)


def fabric_from_scenario(sc: Scenario) -> Fabric:
    """Build the Fabric of a whole scenario (its cluster and user-defined systems)."""
    return fabric_from_cluster(sc.cluster, sc.systems)


def cluster_build_kw(c: ClusterSpec) -> dict[str, Any]:
    """The :func:`~fabricsim.fabric.build_cluster` settings of a cluster beyond its
    system, size, fabric and topology (a calibration's ``params``, ``tiers``, ``planes``,
    ``radix``), which a job rebuilt at other sizes (``scale``) keeps.

    >>> from fabricsim.scenario import load_scenario_text
    >>> cluster_build_kw(load_scenario_text("cluster: {system: dgx-h100, nodes: 4, "
    ...                                     "tiers: 3}").cluster)["tiers"]
    3
    """
    return dict(params=dict(c.params), tiers=c.tiers, planes=c.planes, radix=c.radix)


def training_price(extra: dict[str, Any], sc: Scenario) -> dict[str, Any]:
    """``extra`` (a ``training:`` section's non-layout fields) with the scenario's
    top-level ``gpu_hour_usd`` where the section names no price of its own.

    >>> from fabricsim.scenario import load_scenario_text
    >>> sc = load_scenario_text("gpu_hour_usd: 10\\ncluster: {system: dgx-h100, nodes: 1}")
    >>> training_price({}, sc)["gpu_hour_usd"], training_price({"gpu_hour_usd": 3.0}, sc)
    (10.0, {'gpu_hour_usd': 3.0})
    """
    from fabricsim.scenario.sections import check_positive

    if extra.get("gpu_hour_usd") is None and sc.gpu_hour_usd is not None:
        extra = {**extra, "gpu_hour_usd": check_positive(sc.gpu_hour_usd, "gpu_hour_usd")}
    return extra
