"""What can go wrong and what else runs on the fabric: the flow backend's inputs.

``FaultSpec`` and ``BackgroundSpec`` are what a scenario's ``faults:`` and ``background:``
entries validate to (:mod:`fabricsim.scenario.schema` reads them with these models) and
what :class:`~fabricsim.backends.flow.FlowBackend` takes, so the backend never imports the
scenario package.

Example
-------
>>> FaultSpec(type="link_degraded", kind="leaf-spine", index=0, factor=0.5).factor
0.5
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from fabricsim._strict import StrictModel


class _Spec(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FaultSpec(_Spec):
    """Something that goes wrong.

    ``link`` names a link as ``"<node>-><node>"`` with node names as
    :meth:`~fabricsim.fabric.Fabric.node_name` prints them (``server0/nic3->leaf0.0``), or
    selects by ``kind`` (a link class such as ``leaf-spine``) and ``index`` (the n-th link
    of that class). ``gpu`` is a rank, ``node`` a server index.
    """

    type: Literal["link_down", "link_degraded", "link_flapping", "slow_gpu", "slow_node",
                  "slow_nic"]
    link: str | None = None
    kind: str | None = None
    index: int | None = Field(None, ge=0)
    factor: float | None = Field(None, gt=0)
    gpu: int | None = Field(None, ge=0)
    node: int | None = Field(None, ge=0)
    delay: str | float | None = None
    period: str | float | None = None
    duty: float | None = Field(None, gt=0, le=1)
    start: str | float = 0.0

    @field_validator("factor")
    @classmethod
    def _factor(cls, v: float | None) -> float | None:
        if v is not None and v > 1:
            raise ValueError("factor is the fraction of capacity left (0 < factor <= 1)")
        return v

    _t = field_validator("start", "delay", "period")(lambda v: _duration(v))

    @model_validator(mode="after")
    def _one_way_to_name_a_link(self) -> FaultSpec:
        if self.link is not None and (self.kind is not None or self.index is not None):
            raise ValueError("name the link by link: or by kind: and index:, not both")
        return self


def _duration(v: str | float | None) -> str | float | None:
    """A time as given, once checked to parse as a duration >= 0 (``-1s`` is refused)."""
    if v is None:
        return None
    from fabricsim.units import parse_time

    try:
        parse_time(v)
    except Exception as e:  # the units module's own error, worded for the field
        raise ValueError(str(getattr(e, "message", e))) from None
    return v


class BackgroundSpec(_Spec):
    """Traffic from another source sharing the fabric (storage, other jobs)."""

    name: str = "background"
    #: What the source is, for the reports: the flow backend shares links max-min fairly
    #: whatever the class (priorities per class are the packet backend's).
    traffic_class: Literal["storage", "checkpoint", "compute", "inference", "management",
                           "other"] = "storage"
    pattern: Literal["incast", "permutation", "all_to_all", "pairs"] = "permutation"
    src: list[int] | None = None
    dst: list[int] | None = None
    nbytes: int | str = "1GiB"
    weight: float = Field(1.0, gt=0)
    start: str | float = 0.0

    _t = field_validator("start")(lambda v: _duration(v))
