"""The YAML scenario schema: cluster, workload, faults and background traffic.

Validated once at the boundary with pydantic; inner code trusts the types. Values are also
checked against physics (thresholds in order, transports the fabric carries, ...) by the
rules of :mod:`fabricsim.scenario.rules`, applied when a Scenario is validated. The sections
that describe a job are typed too (:mod:`fabricsim.scenario.sections`): ``training:`` a
:class:`~fabricsim.scenario.sections.TrainingSection`, ``inference:`` a
:class:`~fabricsim.scenario.sections.ServingSection`, ``packet:`` a
:class:`~fabricsim.scenario.sections.PacketSection` (its base and every variant).

Example
-------
>>> s = Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 4}})
>>> s.cluster.system, s.cluster.nodes, s.cluster.fabric
('dgx-h100', 4, None)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from fabricsim._strict import StrictModel
from fabricsim.backends.flow.specs import BackgroundSpec as BackgroundSpec
from fabricsim.backends.flow.specs import FaultSpec as FaultSpec
from fabricsim.scenario.cluster import ClusterSpec as ClusterSpec
from fabricsim.scenario.cluster import CollectiveSpec as CollectiveSpec
from fabricsim.scenario.cluster import ExpertParallelSpec as ExpertParallelSpec
from fabricsim.scenario.sections import (
    MAX_CLUSTER_JOBS,
    MAX_GPU_HOUR_USD,
    CheckpointSection,
    FailureSection,
    PacketSection,
    ServingSection,
    SharedJobSection,
    TraceSection,
    TrainingSection,
)


class Scenario(StrictModel):
    """A whole scenario file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "scenario"
    description: str = ""
    systems: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """User-defined system presets (fields of a catalog system; ``base`` inherits one)."""
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    collective: CollectiveSpec | None = None
    expert_parallel: ExpertParallelSpec | None = None
    """MoE dispatch/combine kernels (``fabricsim bench ep_dispatch``)."""
    training: TrainingSection | None = None
    """A training job (``fabricsim train``, ``scale``, ``plan``): model and layout."""
    inference: ServingSection | None = None
    """Serving (``fabricsim infer``, the web app's infer job): the model and its serving
    layout."""
    packet: PacketSection | None = None
    """A packet-level experiment (``fabricsim packet``): its base and its variants."""
    jobs: list[SharedJobSection] = Field(default_factory=list, max_length=MAX_CLUSTER_JOBS)
    """Many training jobs sharing the cluster (``fabricsim cluster``), each with its GPUs
    and its own ``training:`` section."""
    placement: Literal["packed", "rail", "spread", "random"] = "packed"
    """How ``jobs`` without ``hosts`` get their servers (``fabricsim cluster``)."""
    failure: FailureSection | None = None
    """Servers failing under ``jobs`` (``fabricsim cluster``): what each job loses."""
    checkpoints: list[CheckpointSection] = Field(default_factory=list, max_length=100)
    """Jobs writing checkpoints to storage servers of the cluster (``fabricsim cluster``):
    what each burst costs the other jobs."""
    trace: TraceSection | None = None
    """A job trace replayed on the cluster through a scheduler (``fabricsim cluster``)."""
    faults: list[FaultSpec] = Field(default_factory=list)
    background: list[BackgroundSpec] = Field(default_factory=list)
    seed: int = 0
    gpu_hour_usd: float | None = Field(None, gt=0, le=MAX_GPU_HOUR_USD, allow_inf_nan=False)
    _notes: tuple[str, ...] = PrivateAttr(default=())

    @property
    def notes(self) -> tuple[str, ...]:
        """What reading the file noticed and a user should know (fields written by an
        old name); every job of the scenario shows them with its warnings."""
        return self._notes

    def with_notes(self, notes: tuple[str, ...]) -> Scenario:
        """This scenario with ``notes`` added to :attr:`notes`."""
        out = self.model_copy()
        out._notes = (*self._notes, *(n for n in notes if n not in self._notes))
        return out

    @model_validator(mode="after")
    def _physical(self) -> Scenario:
        """Apply the physical-validity rules (:mod:`fabricsim.scenario.rules`): a value no
        real fabric can have is a ConfigError naming its field, even if its type is right."""
        from fabricsim.scenario.rules import check_scenario

        check_scenario(self)
        return self
