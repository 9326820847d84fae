"""Scenario files: schema and loader."""

from fabricsim.scenario.loader import load_scenario, load_scenario_text
from fabricsim.scenario.schema import (
    BackgroundSpec,
    ClusterSpec,
    CollectiveSpec,
    FaultSpec,
    Scenario,
)

__all__ = [
    "BackgroundSpec",
    "ClusterSpec",
    "CollectiveSpec",
    "FaultSpec",
    "Scenario",
    "load_scenario",
    "load_scenario_text",
]
