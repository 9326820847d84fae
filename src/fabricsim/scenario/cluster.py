"""The cluster a scenario describes, and its collective sweep: the lowest part of a scenario.

``cluster:`` is a :class:`ClusterSpec` (which servers, how many, the network between
them), ``collective:`` a :class:`CollectiveSpec`; a scenario's user-defined ``systems:``
extend the catalog (:func:`scenario_catalog`). :func:`fabric_from_cluster` is the one place
a cluster turns into a Fabric.

Example
-------
>>> fabric_from_cluster(ClusterSpec(system="dgx-h100", nodes=2)).n_gpus
16
>>> cluster_gpus(ClusterSpec(system="box", nodes=2), scenario_catalog(
...     {"box": {"base": "dgx-a100", "gpus": 4, "nvlink_domain_gpus": 4}}))
8
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from fabricsim._strict import StrictModel
from fabricsim.catalog import Catalog
from fabricsim.fabric import Fabric, build_cluster

__all__ = ["BuildOptions", "ClusterSpec", "CollectiveSpec", "ExpertParallelSpec", "cluster_gpus",
           "fabric_from_cluster", "scenario_catalog"]


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
    minbytes: int = 8
    maxbytes: int = 128 * 2**20
    stepfactor: int = Field(2, ge=2)
    datatype: str = "float"
    op: str = "sum"
    algo: str | None = None
    proto: str | None = None
    select: Literal["nccl", "fastest"] = "nccl"
    """How the algorithm and protocol are chosen where none is forced: ``nccl``, NCCL's
    own choice (its cost model); ``fastest``, the pair fabricsim's model times fastest."""
    backend: Literal["analytic", "flow", "packet", "hybrid"] = "analytic"
    ranks: list[int] | None = None
    gpus_per_thread: int = Field(1, ge=1, le=72)
    """nccl-tests' ``-g``: GPUs one thread drives (1: one process per GPU, as mpirun
    runs it); the thread's issue time per operation is then a floor on each iteration."""
    root: int = Field(0, ge=0)
    """Root rank of broadcast and reduce (nccl-tests' ``-r``)."""
    agg_iters: int = Field(1, ge=1, le=1 << 20)
    """Operations aggregated per launch (nccl-tests' ``-m``: one NCCL group)."""
    nccl_version: str | None = None
    """The NCCL release whose choice of algorithm and protocol the model makes (its tuning
    tables changed in 2.28 and 2.29; ``None``: the newest modelled,
    :data:`~fabricsim.collectives.nccl_model.DEFAULT_NCCL`)."""
    env: dict[str, str] = Field(default_factory=dict)
    """NCCL's environment variables the sweep runs under, as a launch script exports them
    (``{NCCL_ALGO: Ring, NCCL_MAX_NCHANNELS: 4}``): each honoured or refused by name as
    ``fabricsim bench`` reads the shell's
    (:func:`~fabricsim.collectives.nccl_env.nccl_env`); under ``bench`` a variable set in
    the shell replaces the same one here, and says so."""

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: object) -> dict[str, str]:
        from fabricsim.collectives.nccl_env import is_nccl_variable, nccl_env
        from fabricsim.errors import ConfigError

        if v is None:
            return {}
        if not isinstance(v, Mapping):
            raise ValueError(f"give NCCL's variables as a mapping of name to value, e.g. "
                             f"env: {{NCCL_ALGO: Ring, NCCL_MAX_NCHANNELS: 4}}, got {v!r}")
        out: dict[str, str] = {}
        for name, value in v.items():
            if not isinstance(name, str) or not is_nccl_variable(name):
                hint = (f"; NCCL's names are upper case: {name.upper()}" if isinstance(
                    name, str) and name.upper().startswith(("NCCL_", "OFI_NCCL_")) else
                    "; drop it")
                raise ValueError(f"{name!r} is not a variable NCCL reads: env: takes NCCL_* "
                                 f"names (and AWS's EFA plugin's OFI_NCCL_TUNER_TYPE){hint}")
            if isinstance(value, bool):
                raise ValueError(f"{name}: YAML read the value as {str(value).lower()} (it "
                                 f"does so for on/off, yes/no, true/false); write it as NCCL "
                                 f"reads it, 1 or 0, or quote it")
            if not isinstance(value, str | int):
                raise ValueError(f"{name}: give the value as NCCL reads it, a number or a "
                                 f"word (e.g. 0, 4, Ring), got {value!r}")
            out[name] = str(value)
        try:
            nccl_env(out)
        except ConfigError as e:
            raise ValueError(f"{e.field}: {e.message}" if e.field and e.field not in
                             e.message else e.message) from None
        return out

    @field_validator("nccl_version", mode="before")
    @classmethod
    def _release(cls, v: object) -> str | None:
        from fabricsim.collectives.nccl_model import release_name
        from fabricsim.errors import ConfigError

        if v is None:
            return None
        if isinstance(v, int | float) and not isinstance(v, bool):
            # YAML reads 2.30 as the number 2.3: a release is text
            raise ValueError(f"YAML read {v!r} as a number, which drops a release's "
                             "trailing zero (2.30 reads as 2.3); quote the release as NCCL "
                             "prints it, e.g. nccl_version: \"2.27.3\"")
        if not isinstance(v, str):
            raise ValueError(f"give the NCCL release as text, e.g. \"2.27.3\", got {v!r}")
        try:
            return release_name(v)
        except ConfigError as e:
            raise ValueError(e.message) from None

    @field_validator("minbytes", "maxbytes", mode="before")
    @classmethod
    def _size(cls, v: object) -> int:
        """Sizes as nccl-tests reads ``-b``/``-e`` (a bare ``M`` is binary: 1M = 2**20)."""
        from fabricsim.errors import UnitError
        from fabricsim.units import parse_nccl_size

        try:
            return parse_nccl_size(v if isinstance(v, int | str) else str(v), field=None)
        except UnitError as e:
            raise ValueError(e.message) from None


class ExpertParallelSpec(_Model):
    """MoE dispatch and combine kernels (``fabricsim bench ep_dispatch``): the layer's
    shape, the EP sizes to sweep, the kernel families and the routing
    (:mod:`fabricsim.collectives.ep`). DeepSeek-V3's shape by default."""

    kernels: list[str] = Field(default_factory=lambda: ["auto"], min_length=1, max_length=8)
    phases: list[Literal["dispatch", "combine"]] = Field(
        default_factory=lambda: ["dispatch", "combine"],  # type: ignore[arg-type]
        min_length=1, max_length=2)
    tokens: int = Field(4096, ge=1, le=1_048_576)
    hidden: int = Field(7168, ge=1, le=1_048_576)
    top_k: int = Field(8, ge=1, le=1024)
    experts: int = Field(256, ge=1, le=65_536)
    ep: list[int] | None = Field(None, min_length=1, max_length=32)
    """EP sizes (each the first that many GPUs); ``None``: every GPU of the cluster."""
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"
    routing: Literal["uniform", "zipf", "histogram"] = "uniform"
    skew: float = Field(0.0, ge=0.0, le=10.0, allow_inf_nan=False)
    load: list[float] | None = Field(None, max_length=65_536)
    node_limit: int | None = Field(None, ge=1)
    capacity_factor: float | None = Field(None, gt=0.0, le=64.0, allow_inf_nan=False)
    pad_to_capacity: bool = False
    backend: Literal["analytic", "flow", "packet"] = "analytic"


def scenario_catalog(systems: Mapping[str, Mapping[str, object]] | None) -> Catalog:
    """The shipped catalog with a scenario's user-defined ``systems:`` added (the shipped
    one when it defines none).

    >>> scenario_catalog({"box": {"base": "dgx-a100"}}).system("box").gpus
    8
    """
    from fabricsim.catalog import get_catalog, with_systems

    return with_systems(get_catalog(), systems) if systems else get_catalog()


def fabric_from_cluster(c: ClusterSpec,
                        systems: Mapping[str, Mapping[str, object]] | None = None) -> Fabric:
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


def cluster_gpus(c: ClusterSpec, catalog: Catalog) -> int:
    """GPUs the cluster will have, from its presets alone (nothing is built)."""
    if c.gpus_per_node is not None:
        return int(c.nodes) * int(c.gpus_per_node)
    return int(c.nodes) * int(catalog.system(c.system).gpus)


@dataclass(frozen=True)
class BuildOptions:
    """The :func:`~fabricsim.fabric.build_cluster` settings of a cluster beyond its
    system, size, fabric and topology (a calibration's ``params``, ``tiers``, ``planes``,
    ``radix``), which a job rebuilt at other sizes or on other fabrics keeps.

    >>> BuildOptions.of(ClusterSpec(tiers=3)).tiers
    3
    """

    params: tuple[tuple[str, Any], ...] = ()
    tiers: int | None = None
    planes: int | None = None
    radix: int | None = None

    @classmethod
    def of(cls, c: ClusterSpec) -> BuildOptions:
        return cls(params=tuple(sorted(c.params.items())), tiers=c.tiers, planes=c.planes,
                   radix=c.radix)

    def keywords(self) -> dict[str, Any]:
        """As :func:`~fabricsim.fabric.build_cluster`'s keyword arguments."""
        return {"params": dict(self.params), "tiers": self.tiers, "planes": self.planes,
                "radix": self.radix}
