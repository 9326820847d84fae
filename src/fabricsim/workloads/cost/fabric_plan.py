"""Compare scale-out fabrics for one model and cluster size: speed, capex, cost per token.

For every fabric the same servers are joined by that fabric (same topology and
oversubscription), the job is timed — with the given parallel configuration, or with the
best configuration :func:`~fabricsim.workloads.training.planner.plan_parallel` finds on
that fabric — and the fabric is priced by
:func:`~fabricsim.workloads.cost.capex.fabric_capex`. The cost per trained token adds the
GPU time and the fabric's capex amortised over ``lifetime_years``
(:func:`~fabricsim.workloads.cost.capex.token_cost`).

Example
-------
>>> from fabricsim.workloads.models import get_model
>>> from fabricsim.workloads.training.parallel import ParallelConfig
>>> cfg = ParallelConfig(tp=8, micro_batch=1, global_batch=16, seq_len=4096)
>>> opts = compare_fabrics(get_model("llama3-8b"), system="dgx-h100", nodes=2,
...                        fabrics=["ib-ndr", "roce-400g"], cfg=cfg)
>>> [o.fabric for o in opts], opts[0].capex.total_usd > opts[1].capex.total_usd
(['ib-ndr', 'roce-400g'], True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fabricsim.catalog import Catalog, get_catalog
from fabricsim.errors import ConfigError, ModelError, unknown
from fabricsim.fabric import Fabric, build_cluster
from fabricsim.results import Tabular
from fabricsim.workloads.cost.capex import FabricCapex, fabric_capex, token_cost
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.goodput import GoodputInputs, goodput_on_fabric
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.planner import plan_parallel
from fabricsim.workloads.training.step import StepResult, simulate_step

__all__ = ["FabricOption", "compare_fabrics"]


@dataclass(frozen=True)
class FabricOption(Tabular):
    """One fabric's outcome: the step it runs, what it costs, and the cost of a token.
    ``to_dict()`` / ``to_pandas()`` flatten :meth:`as_dict` into one row; for all the
    options of :func:`compare_fabrics` at once, :func:`fabricsim.results.frame`."""

    fabric: str
    step: StepResult
    capex: FabricCapex
    cost: dict[str, float]
    planned: bool
    """True when the parallel configuration came from the planner."""
    goodput: float = 1.0
    """Share of wall time that trains once failures, checkpoints and restarts are counted
    (:func:`fabricsim.workloads.training.goodput.goodput_on_fabric`; the fabric's own switch and
    cable counts enter the failure rate)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        s = self.step
        return {"fabric": self.fabric, "planned": self.planned, "parallel": s.parallel,
                "step_time_s": s.step_time_s, "tokens_per_s": s.tokens_per_s,
                "tokens_per_s_per_gpu": s.tokens_per_s / s.world, "mfu": s.mfu,
                "comm_fraction": s.comm_fraction, "goodput": self.goodput,
                "effective_tokens_per_s": s.tokens_per_s * self.goodput,
                "capex": self.capex.as_dict(), **self.cost}


def compare_fabrics(model: TransformerSpec, *, system: str, nodes: int,
                    fabrics: Sequence[str], topology: str | None = None,
                    oversubscription: float = 1.0, gpus_per_node: int | None = None,
                    cfg: ParallelConfig | None = None, global_batch: int | None = None,
                    seq_len: int | None = None, precision: str = "bf16",
                    gpu_hour_usd: float | None = None, lifetime_years: float = 4.0,
                    backend: str = "analytic", cloud_proxy: bool = True,
                    build: Callable[[str], Fabric] | None = None,
                    zero: tuple[int | str, ...] = (1,),
                    options: ParallelConfig | None = None,
                    catalog: Catalog | None = None,
                    goodput: GoodputInputs | None = None) -> list[FabricOption]:
    """Time, price and compare ``model`` on ``nodes`` × ``system`` for each fabric.

    Parameters
    ----------
    model : TransformerSpec
        What is trained.
    system, nodes, gpus_per_node, topology, oversubscription
        The servers and how the fabrics join them (as :func:`fabricsim.build_cluster`).
    fabrics : sequence of str
        Fabric presets to compare (``ib-ndr``, ``roce-400g``, ``efa`` …).
    cfg : ParallelConfig, optional
        Use this configuration on every fabric; default: the planner's best per fabric.
    global_batch, seq_len, precision, zero, options
        For the planner (ignored when ``cfg`` is given): ``zero`` the ZeRO stages it
        tries, ``options`` the stack fields every layout gets (as
        :func:`~fabricsim.workloads.training.planner.plan_parallel`).
    build : callable, optional
        The cluster joined by a fabric preset (its name in, a Fabric out), when it is
        more than ``build_cluster(system, nodes, ..., fabric=name)`` (a calibration's
        ``params``, a scenario's systems).
    gpu_hour_usd : float, optional
        Default: the system preset's price.
    lifetime_years : float
        Amortisation period of the fabric capex.
    goodput : GoodputInputs, optional
        Checkpoint bandwidth and restart time for each fabric's goodput.
    catalog : Catalog, optional
        One with user-defined systems (:func:`fabricsim.catalog.with_systems`).

    Returns
    -------
    list of FabricOption, in the order of ``fabrics``.
    """
    cat = catalog or get_catalog()
    if not fabrics:
        raise ConfigError("give at least one fabric, e.g. ib-ndr,roce-400g,efa",
                          field="fabrics")
    for f in fabrics:
        if f not in cat.fabrics:
            raise unknown("fabric", f, list(cat.fabrics), field="fabrics")
    out: list[FabricOption] = []
    for f in fabrics:
        fab = build(f) if build is not None else build_cluster(
            system, nodes, gpus_per_node=gpus_per_node, fabric=f, topology=topology,
            oversubscription=oversubscription, catalog=catalog)
        # the system's price as built (a user-defined system's too), unless one is given
        price = gpu_hour_usd if gpu_hour_usd is not None else fab.info.gpu_hour_usd
        if cfg is not None:
            step = simulate_step(model, cfg, fab, backend=backend, gpu_hour_usd=price)
            planned = False
        else:
            gb = global_batch or max(fab.n_gpus, 512)
            plan = plan_parallel(model, fab, global_batch=gb, seq_len=seq_len,
                                 precision=precision, backend=backend, top=1,
                                 zero=zero, options=options)
            if not plan.results:
                raise ModelError("; ".join(plan.notes) or
                                 f"no configuration of {model.name} fits on {f}",
                                 field="training")
            step = plan.results[0]
            step = StepResult(**{**step.__dict__, "gpu_hour_usd": float(price)})
            planned = True
        capex = fabric_capex(fab, cloud_proxy=cloud_proxy)
        cost = token_cost(step.tokens_per_s, step.world, float(price), capex.total_usd,
                          lifetime_years)
        gi = goodput or GoodputInputs()
        gp = goodput_on_fabric(fab, params=model.params, step_time_s=step.step_time_s,
                               gpus=step.world, gpu_hour_usd=float(price),
                               checkpoint_write_bytes_per_s=gi.checkpoint_write_bytes_per_s,
                               restart_s=gi.restart_s).goodput
        out.append(FabricOption(fabric=f, step=step, capex=capex, cost=cost,
                                planned=planned, goodput=gp))
    return out
