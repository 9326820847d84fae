"""What every job shares: the cluster it runs on, its price, its goodput settings, the
faults and traffic around it, and the report it returns.

A job is data: a frozen, typed model, built once from a scenario (and flags laid over
it) and run by :func:`fabricsim.jobs.run`. Its parts here:

- :class:`Cluster` — the ``cluster:`` section and the scenario's user-defined
  ``systems:``: what to build;
- :class:`Pricing` — the price of a GPU-hour and the length of a run;
- :class:`Goodput` — the checkpoint write bandwidth and restart time that failures cost;
- :class:`Faults` — the scenario's ``faults:`` and ``background:`` traffic, and its seed.

Every report has ``kind``, ``warnings`` (what the answer rests on that a user should
know: the same on every face), ``to_dict()`` (JSON-ready, the CLI's ``--json`` and the web
app's result) and ``to_row()`` (flat figures with their units in their names: a sweep's
row).

Example
-------
>>> c = Cluster.model_validate({"spec": {"system": "dgx-h100", "nodes": 2}})
>>> c.gpus(), c.build().n_gpus
(16, 16)
>>> Goodput(restart_min=5).inputs().restart_s
300.0
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from pydantic import ConfigDict, Field

from fabricsim._strict import StrictModel
from fabricsim.backends.flow.specs import BackgroundSpec, FaultSpec
from fabricsim.catalog import Catalog
from fabricsim.collectives.nccl_env import NcclEnv
from fabricsim.errors import ConfigError
from fabricsim.fabric import Fabric
from fabricsim.scenario.cluster import (
    BuildOptions,
    ClusterSpec,
    cluster_gpus,
    fabric_from_cluster,
    scenario_catalog,
)
from fabricsim.scenario.schema import Scenario
from fabricsim.workloads.training.goodput import DEFAULT_RESTART_S, GoodputInputs

__all__ = ["Cluster", "Faults", "Goodput", "Job", "Part", "Pricing", "Progress", "Report", "quiet",
           "section_env"]

#: A progress callback: (fraction done in [0, 1], what is being done).
Progress = Callable[[float, str], None]


def quiet(_frac: float, _msg: str) -> None:
    """A progress callback that says nothing."""
    return None


class Part(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Cluster(Part):
    """The cluster a job runs on: the scenario's ``cluster:`` section and its
    user-defined ``systems:``."""

    spec: ClusterSpec = Field(default_factory=ClusterSpec)
    systems: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @classmethod
    def of(cls, sc: Scenario) -> Cluster:
        """The cluster of scenario ``sc``."""
        return cls(spec=sc.cluster, systems=sc.systems)

    def catalog(self) -> Catalog:
        """The catalog with the user-defined systems."""
        return scenario_catalog(self.systems)

    def gpus(self) -> int:
        """GPUs the cluster has, from its presets (nothing is built)."""
        return cluster_gpus(self.spec, self.catalog())

    def build(self) -> Fabric:
        """The Fabric."""
        return fabric_from_cluster(self.spec, self.systems)

    def options(self) -> BuildOptions:
        """The builder settings a job rebuilt at other sizes keeps."""
        return BuildOptions.of(self.spec)

    def with_nccl(self, env: NcclEnv, *, qps: bool = True) -> Cluster:
        """This cluster with the ``params`` NCCL's variables ``env`` set laid over its
        section's (:meth:`~fabricsim.collectives.nccl_env.NcclEnv.cluster_params`; without
        the queue pairs where ``qps`` is false: a flow run keeps its own)."""
        params = env.cluster_params()
        if not qps:
            params.pop("qps", None)
        if not params:
            return self
        return self.model_copy(update={"spec": self.spec.model_copy(
            update={"params": {**self.spec.params, **params}})})


def section_env(collective: str, section: Mapping[str, str], *, forced: bool,
                shell: NcclEnv | None = None) -> NcclEnv:
    """NCCL's variables a collective section runs under: the ``shell``'s (bench reads
    them) laid over the section's ``env:``, checked against ``collective`` (a
    ``NCCL_P2P_NET_CHUNKSIZE`` it would time otherwise, and, unless an algorithm is
    ``forced``, an ``NCCL_ALGO`` that leaves it nothing); a variable of the section's
    that is refused is named as its field, ``collective.env.NAME``.

    >>> section_env("all_reduce", {"NCCL_ALGO": "Ring"}, forced=False).algorithms
    {'': frozenset({'ring'})}
    >>> section_env("broadcast", {"NCCL_ALGO": "NVLS"}, forced=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: collective.env.NCCL_ALGO: NCCL_ALGO/NCCL_NVLS_ENABLE ...
    """
    shell_names = set(shell.variables) if shell else set()
    with section_fields(set(section) - shell_names):
        env = (shell or NcclEnv()).over(section)
        env.check_p2p(collective)  # NCCL_P2P_NET_CHUNKSIZE: refused where it changes time
        if not forced:  # NCCL_ALGO leaving nothing to run the collective
            env.choices(collective)
    return env


@contextmanager
def section_fields(names: Collection[str]) -> Iterator[None]:
    """Inside, a :class:`ConfigError` about one of the variables ``names`` (those a
    scenario's collective section set) names its field as the scenario has it,
    ``collective.env.NAME``; any other passes as raised (a variable the shell set keeps
    its bare name, as the user typed it).

    >>> with section_fields({"NCCL_ALGO"}):  # doctest: +ELLIPSIS
    ...     raise ConfigError("no such algorithm", field="NCCL_ALGO")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: collective.env.NCCL_ALGO: no such algorithm
    """
    try:
        yield
    except ConfigError as e:
        if e.field is not None and e.field in names:
            raise ConfigError(e.message, field=f"collective.env.{e.field}") from None
        raise


class Pricing(Part):
    """What GPU time costs: ``gpu_hour_usd`` (``None``: the system preset's) and the
    tokens of a whole run (``total_tokens``, for its length and cost)."""

    gpu_hour_usd: float | None = Field(None, ge=0, allow_inf_nan=False)
    total_tokens: float | None = Field(None, gt=0, allow_inf_nan=False)


class Goodput(Part):
    """What failures cost: the aggregate checkpoint write bandwidth in GB/s
    (``None``: the servers' storage NICs) and minutes to restart (``None``: 10)."""

    checkpoint_gbps: float | None = Field(None, gt=0, allow_inf_nan=False)
    restart_min: float | None = Field(None, ge=0, allow_inf_nan=False)

    def inputs(self) -> GoodputInputs:
        """As :func:`~fabricsim.workloads.training.goodput.goodput_on_fabric` takes them."""
        return GoodputInputs(
            checkpoint_write_bytes_per_s=None if self.checkpoint_gbps is None
            else self.checkpoint_gbps * 1e9,
            restart_s=DEFAULT_RESTART_S if self.restart_min is None
            else self.restart_min * 60.0)


class Faults(Part):
    """What goes wrong and what else runs on the fabric: the scenario's ``faults:`` and
    ``background:`` traffic, and the seed of its random choices. Only the flow and
    packet backends run them; a job on the analytic backend with any is refused."""

    faults: tuple[FaultSpec, ...] = ()
    background: tuple[BackgroundSpec, ...] = ()
    seed: int = 0

    @classmethod
    def of(cls, sc: Scenario) -> Faults:
        """The faults and traffic of scenario ``sc``."""
        return cls(faults=tuple(sc.faults), background=tuple(sc.background), seed=sc.seed)

    def __bool__(self) -> bool:
        return bool(self.faults or self.background)

    def describe(self) -> str:
        """``'2 fault(s) and 1 background flow set(s)'``, or ``'none'``."""
        parts = [f"{len(self.faults)} fault(s)"] if self.faults else []
        parts += [f"{len(self.background)} background flow set(s)"] if self.background \
            else []
        return " and ".join(parts) or "none"

    def refuse_on(self, backend: str, field: str) -> None:
        """Refuse running these on ``backend`` unless it is the flow backend: a
        :class:`~fabricsim.errors.ConfigError` naming ``field`` (the backend's setting)."""
        if self and backend != "flow":
            raise ConfigError(
                f"the scenario has {self.describe()}, which only the flow backend "
                f"simulates; the {backend} backend would ignore them: set the backend to "
                f"flow (--backend flow, or backend: flow in the section) or remove the "
                f"faults: and background: sections", field=field)


class Job(Protocol):
    """What every job has: its kind and the cluster it runs on."""

    @property
    def kind(self) -> str: ...
    @property
    def cluster(self) -> Cluster: ...


class Report(Protocol):
    """What every job returns."""

    @property
    def kind(self) -> str: ...
    @property
    def warnings(self) -> list[str]: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_row(self) -> dict[str, Any]: ...
