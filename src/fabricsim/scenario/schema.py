"""The YAML scenario schema: cluster, workload, faults and background traffic.

Validated once at the boundary with pydantic; inner code trusts the types. Values are also
checked against physics (thresholds in order, transports the fabric carries, ...) by the
rules of :mod:`fabricsim.scenario.rules`, applied when a Scenario is validated. Sections owned
by a workload (``training``, ``packet``) are plain mappings here and are validated by the
module that reads them, which reports errors under the same dotted field path.

Example
-------
>>> s = Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 4}})
>>> s.cluster.system, s.cluster.nodes, s.cluster.fabric
('dgx-h100', 4, None)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from fabricsim._strict import StrictModel
from fabricsim.backends.flow.specs import BackgroundSpec as BackgroundSpec
from fabricsim.backends.flow.specs import FaultSpec as FaultSpec


class _Model(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterSpec(_Model):
    """Which servers, how many, and the network between them."""

    system: str = "dgx-h100"
    nodes: int = Field(1, ge=1, le=1_000_000)
    gpus_per_node: int | None = Field(None, ge=1)
    fabric: str | None = None
    topology: str | None = None
    oversubscription: float = Field(1.0, ge=1.0, le=64.0, allow_inf_nan=False)
    tiers: int | None = Field(None, ge=2, le=3)
    planes: int | None = Field(None, ge=1)
    radix: int | None = Field(None, ge=4)
    params: dict[str, Any] = Field(default_factory=dict)
    storage: bool = False
    management: bool = False


class CollectiveSpec(_Model):
    """A collective sweep in the manner of nccl-tests."""

    collective: str = "all_reduce"
    minbytes: int | str = "8"
    maxbytes: int | str = "128MiB"
    stepfactor: int = Field(2, ge=2)
    datatype: str = "float"
    op: str = "sum"
    algo: str | None = None
    proto: str | None = None
    backend: Literal["analytic", "flow", "packet"] = "analytic"
    ranks: list[int] | None = None


class Scenario(_Model):
    """A whole scenario file."""

    name: str = "scenario"
    description: str = ""
    systems: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """User-defined system presets (fields of a catalog system; ``base`` inherits one)."""
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    collective: CollectiveSpec | None = None
    training: dict[str, Any] | None = None
    inference: dict[str, Any] | None = None
    """Serving (``fabricsim infer``, the web app's infer job): the model and its serving
    layout, :func:`fabricsim.scenario.sections.serving_from_section`."""
    packet: dict[str, Any] | None = None
    faults: list[FaultSpec] = Field(default_factory=list)
    background: list[BackgroundSpec] = Field(default_factory=list)
    seed: int = 0
    gpu_hour_usd: float | None = Field(None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _physical(self) -> Scenario:
        """Apply the physical-validity rules (:mod:`fabricsim.scenario.rules`): a value no
        real fabric can have is a ConfigError naming its field, even if its type is right."""
        from fabricsim.scenario.rules import check_scenario

        check_scenario(self)
        return self
