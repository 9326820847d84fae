"""Scaling curves: throughput per GPU as a job grows, against one node.

Two questions. **Strong scaling** (``global_batch=``: what a training run asks) keeps the
global batch fixed: more GPUs mean more data-parallel replicas, each with fewer
micro-batches per step, so the pipeline bubble, the exposed data-parallel traffic and the
all-to-all grow as a share of the step. **Weak scaling** (the default) keeps the model
split (TP, PP, CP, EP), the micro-batch and the work of each data-parallel replica fixed
and grows data parallelism: at every size a replica processes
``seqs_per_replica`` sequences per step, so the global batch is ``seqs_per_replica·dp`` and
tokens per GPU per step stay constant. ``seqs_per_replica`` defaults to
``micro_batch·accumulation·(4·pp if pp > 1 else 1)``; :func:`weak_scaling_batch` derives
it from a job's own global batch at its own size (what ``fabricsim scale`` does with a
scenario's ``global_batch``).

Sizes that cannot hold the split (not a whole number of servers, not a multiple of
``tp·pp·cp``, EP not dividing ``dp·cp`` …) are returned as ``{"gpus": n, "feasible":
False, "reason": …}`` and the others are still computed; only when no size is feasible
is an error raised.

Scaling efficiency at N GPUs = tokens/s per GPU at N / tokens/s per GPU on one node (or
on the smallest feasible size in the sweep when the model needs more than one node).
Every point names where its step time goes (``losses``: shares of the step for the
pipeline bubble and each exposed communication kind) and its largest loss.

Example
-------
>>> from fabricsim.workloads.models import get_model
>>> class Flat:
...     def time(self, collective, ranks, nbytes):
...         return 1e-5 + nbytes / 50e9
>>> pts = scaling_curve(get_model("llama2-7b"), "dgx-h100", [8, 64],
...                     ParallelConfig(micro_batch=1, seq_len=4096, recompute="full"),
...                     comm_factory=lambda fab: Flat())
>>> pts[0]["scaling_efficiency"], pts[1]["global_batch"]
(1.0, 64)
>>> pts = scaling_curve(get_model("llama2-7b"), "dgx-h100", [4, 12],
...                     ParallelConfig(tp=8, seq_len=4096), comm_factory=lambda f: Flat())
Traceback (most recent call last):
...
fabricsim.errors.ModelError: gpus: no GPU count in the sweep can hold this job: ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fabricsim.catalog import Catalog
from fabricsim.errors import FabricsimError, ModelError
from fabricsim.fabric import Fabric, build_cluster
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.goodput import GoodputInputs, goodput_on_fabric
from fabricsim.workloads.training.parallel import ParallelConfig

__all__ = ["MAX_SIZES", "scaling_curve", "weak_scaling_batch"]

#: GPU counts one curve may hold (each is a whole simulated job).
MAX_SIZES = 64


def weak_scaling_batch(cfg: ParallelConfig, world: int) -> int | None:
    """Sequences per data-parallel replica implied by ``cfg.global_batch`` at ``world``
    GPUs, or ``None`` when ``cfg`` has no global batch or it does not split evenly.

    Examples
    --------
    >>> weak_scaling_batch(ParallelConfig(tp=8, pp=4, global_batch=512), 256)
    64
    >>> weak_scaling_batch(ParallelConfig(tp=8), 256) is None
    True
    """
    mp = cfg.tp * cfg.pp * cfg.cp
    if cfg.global_batch is None or world % mp:
        return None
    dp = cfg.dp or world // mp
    if cfg.global_batch % (dp * cfg.micro_batch):
        return None
    return cfg.global_batch // dp


def scaling_curve(model: TransformerSpec, system: str, gpus: Sequence[int],
                  cfg: ParallelConfig, *, fabric: str | None = None,
                  topology: str | None = None, oversubscription: float = 1.0,
                  accumulation: int = 1, seqs_per_replica: int | None = None,
                  global_batch: int | None = None,
                  backend: str = "analytic", gpu_hour_usd: float | None = None,
                  comm_factory: Callable[[Fabric], CommModel] | None = None,
                  gpus_per_node: int | None = None, catalog: Catalog | None = None,
                  build: Callable[[int, int | None], Fabric] | None = None,
                  goodput: GoodputInputs | None = None) -> list[dict[str, Any]]:
    """Simulate ``model`` at each GPU count in ``gpus`` and report scaling efficiency.

    Parameters
    ----------
    seqs_per_replica : int, optional
        Sequences each data-parallel replica processes per step (a multiple of
        ``micro_batch``); default ``micro_batch·accumulation·(4·pp if pp > 1 else 1)``.
    global_batch : int, optional
        Strong scaling: this many sequences per step at every size (sizes it does not
        split over are infeasible, with the reason); ``seqs_per_replica`` is then unused.
    gpus_per_node, catalog, build
        The servers as the job's cluster has them: GPUs used per server, a catalog with
        user-defined systems (:func:`fabricsim.catalog.with_systems`), and ``build``, the
        cluster at a size (``build(nodes, gpus_per_node)``) when it is more than
        ``build_cluster(system, nodes, ...)`` (a calibration's ``params``, ``tiers``,
        ``planes``, ``radix`` ...: the same at every size).
    goodput
        Checkpoint bandwidth and restart time for the goodput.

    Returns
    -------
    list of dict
        One per size, sorted by GPUs. Feasible sizes have ``feasible=True``, ``gpus``,
        ``global_batch``, ``num_micro``, ``tokens_per_s``, ``tokens_per_s_per_gpu``,
        ``mfu``, ``step_time_s``, ``comm_fraction``, ``idle_gpu_equivalent``,
        ``comm_usd_per_day``, ``memory_per_gpu_gib``, ``fits``, ``scaling_efficiency``,
        ``baseline_gpus``, ``losses`` (share of the step per loss: ``bubble``, ``tp``,
        ``ep``, ``cp``, ``pp``, ``dp``) and ``main_loss``; infeasible ones
        ``feasible=False`` and a ``reason``. ``goodput`` is the share of wall time that
        trains once failures, checkpoints and restarts are counted
        (:func:`~fabricsim.workloads.training.goodput.goodput_on_fabric`);
        ``effective_tokens_per_s_per_gpu`` multiplies it in.
    """
    from fabricsim.catalog import get_catalog
    from fabricsim.workloads.training.step import simulate_step

    per_node = gpus_per_node or (catalog or get_catalog()).system(system).gpus
    mp = cfg.tp * cfg.pp * cfg.cp
    spr = seqs_per_replica or cfg.micro_batch * accumulation * (4 * cfg.pp if cfg.pp > 1
                                                                 else 1)
    if global_batch is not None and global_batch < 1:
        raise ModelError(f"global_batch must be >= 1, got {global_batch}",
                         field="global_batch")
    if spr < 1 or spr % cfg.micro_batch:
        raise ModelError(f"sequences per replica ({spr}) must be a positive multiple of "
                         f"micro_batch = {cfg.micro_batch}", field="seqs_per_replica")
    if len(set(gpus)) > MAX_SIZES:
        raise ModelError(f"at most {MAX_SIZES} GPU counts per sweep, got {len(set(gpus))}",
                         field="gpus")
    out: list[dict[str, Any]] = []
    errors: list[FabricsimError] = []
    for n in sorted(set(gpus)):
        if n < 1:
            raise ModelError(f"GPU counts must be >= 1, got {n}", field="gpus")
        reason = None
        if n >= per_node and n % per_node:
            reason = (f"{n} GPUs is not a whole number of {system} servers "
                      f"({per_node} GPUs each)")
        elif n % mp:
            reason = f"{n} GPUs cannot hold tp·pp·cp = {mp}"
        if reason is not None:
            out.append({"gpus": n, "feasible": False, "reason": reason})
            continue
        dp = n // mp
        if global_batch is not None and global_batch % (dp * cfg.micro_batch):
            out.append({"gpus": n, "feasible": False, "reason": (
                f"global batch {global_batch} does not split over dp={dp} replicas of "
                f"micro-batch {cfg.micro_batch}")})
            continue
        gb = global_batch if global_batch is not None else spr * dp
        c = cfg.model_copy(update={"dp": None, "global_batch": gb})
        try:
            nodes, gpn = (n // per_node, gpus_per_node) if n >= per_node else (1, n)
            fab = build(nodes, gpn) if build is not None else build_cluster(
                system, nodes, gpus_per_node=gpn, fabric=fabric, topology=topology,
                oversubscription=oversubscription, catalog=catalog)
            c.resolve(model, n)
        except FabricsimError as e:
            out.append({"gpus": n, "feasible": False, "reason": str(e)})
            errors.append(e)
            continue
        comm = comm_factory(fab) if comm_factory else EngineComm(fab, backend=backend)
        r = simulate_step(model, c, fab, comm, gpu_hour_usd=gpu_hour_usd, check_memory=False)
        try:  # failures and restarts: what share of wall time trains at this size
            gi = goodput or GoodputInputs()
            g = goodput_on_fabric(fab, params=model.params, step_time_s=r.step_time_s,
                                  gpus=n, gpu_hour_usd=r.gpu_hour_usd,
                                  checkpoint_write_bytes_per_s=gi.checkpoint_write_bytes_per_s,
                                  restart_s=gi.restart_s)
            gp: float | None = g.goodput
            gdetail: dict[str, Any] = {"job_mtbf_hours": g.job_mtbf_hours,
                                       "failures_per_day": g.failures_per_day,
                                       "usd_lost_per_day": g.usd_lost_per_day}
        except ModelError as e:  # failures outpace progress: the job would not finish
            gp, gdetail = 0.0, {"goodput_note": str(e)}
        out.append({"gpus": n, "feasible": True, "global_batch": r.parallel["global_batch"],
                    "num_micro": r.parallel["num_micro"], "tokens_per_s": r.tokens_per_s,
                    "tokens_per_s_per_gpu": r.tokens_per_s / n, "mfu": r.mfu,
                    "step_time_s": r.step_time_s, "comm_fraction": r.comm_fraction,
                    "idle_gpu_equivalent": r.idle_gpus, "comm_usd_per_day": r.comm_usd_per_day,
                    "memory_per_gpu_gib": r.memory_per_gpu_gib,
                    "fits": r.memory.total <= r.gpu_memory_bytes, "goodput": gp,
                    "effective_tokens_per_s_per_gpu": r.tokens_per_s / n * (gp or 0.0),
                    **gdetail,
                    "losses": (losses := {k: r.breakdown[k] / r.step_time_s for k in
                                          ("bubble", "tp", "ep", "cp", "pp", "dp")}),
                    "main_loss": max(losses, key=lambda k: losses[k])
                    if max(losses.values()) > 0 else "none"})
    ok = [p for p in out if p["feasible"]]
    if out and not ok and len(errors) == len(out) and len({str(e) for e in errors}) == 1:
        raise errors[0]  # one cause at every size: the job's own, with its field
    if out and not ok:
        raise ModelError("no GPU count in the sweep can hold this job: " + "; ".join(
            f"{p['gpus']} GPUs: {p['reason']}" for p in out), field="gpus")
    if ok:
        base_pt = next((p for p in ok if p["gpus"] == per_node), ok[0])
        base = base_pt["tokens_per_s_per_gpu"]
        for p in ok:
            p["scaling_efficiency"] = p["tokens_per_s_per_gpu"] / base
            p["baseline_gpus"] = base_pt["gpus"]
    return out
