"""Search TP/PP/CP/EP/micro-batch/recomputation for the fastest configuration that fits.

Every candidate is checked for divisibility and memory first (cheap), then timed with
:func:`~fabricsim.workloads.training.step.simulate_step` sharing one cached
:class:`~fabricsim.workloads.comm.EngineComm`, so a collective of a given group shape
and size is predicted once for the whole search.

Example
-------
>>> import fabricsim as fs
>>> from fabricsim.workloads.models import get_model
>>> class Flat:  # a fixed-bandwidth stand-in, for the example only
...     def time(self, collective, ranks, nbytes):
...         return nbytes / 100e9
>>> fab = fs.build_cluster("dgx-h100", nodes=2)
>>> plan = plan_parallel(get_model("llama2-13b"), fab, global_batch=64, seq_len=4096,
...                      comm=Flat(), top=3)
>>> len(plan.results), plan.results[0].step_time_s <= plan.results[-1].step_time_s
(3, True)
>>> list(plan.to_pandas()["rank"]), plan.to_dict()["kept"]
([1, 2, 3], 3)
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from fabricsim.catalog import get_catalog
from fabricsim.errors import FabricsimError, ModelError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular, flatten
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.gpu import attention_kernel_eff, peak_flops
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.training.memory import memory_per_gpu
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import StepResult, simulate_step

__all__ = ["FSDP_ONLY", "STACK_FIELDS", "Plan", "candidates", "plan_parallel",
           "planner_zero", "stack_options"]

#: :class:`ParallelConfig` fields that describe the software stack, not the layout: a
#: job's values hold for every candidate layout the planner tries.
STACK_FIELDS = ("attention_kernel", "grad_reduce_dtype", "fp8_recipe", "fsdp_impl",
                "reshard_after_forward", "sequence_parallel", "tp_overlap",
                "tp_comm_overlap", "ep_overlap", "overlap_grad_reduce",
                "overlap_param_gather", "overlap_p2p_comm", "moe_dispatcher",
                "moe_node_limit", "moe_imbalance", "moe_capacity_factor",
                "moe_pad_to_capacity")

#: Options that only apply to fully sharded (``zero="fsdp"``) candidates.
FSDP_ONLY = ("fsdp_impl", "reshard_after_forward")


@dataclass
class Plan(Tabular):
    """Outcome of a search: the best results first, and what was tried.

    ``to_dict()`` is one row (the search's counts and the best result as ``best.*``);
    ``to_pandas()`` has a row per result kept, ranked from 1.
    """

    results: list[StepResult]
    evaluated: int
    rejected_memory: int
    rejected_shape: int
    seconds: float
    comm_calls: int = 0
    notes: list[str] = field(default_factory=list)

    def _record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"evaluated": self.evaluated, "kept": len(self.results),
                               "rejected_memory": self.rejected_memory,
                               "rejected_shape": self.rejected_shape,
                               "seconds": self.seconds, "comm_calls": self.comm_calls,
                               "notes": list(self.notes)}
        if self.results:
            rec["best"] = self.results[0].as_dict()
        return rec

    def _rows(self) -> list[dict[str, Any]]:
        return [{"rank": i, **flatten(r.as_dict())} for i, r in enumerate(self.results, 1)]


def stack_options(cfg: ParallelConfig) -> ParallelConfig:
    """The stack fields ``cfg`` sets explicitly (an FP8 recipe only with FP8), as
    ``options`` for :func:`plan_parallel`: a configuration giving only them.

    >>> stack_options(ParallelConfig(attention_kernel="flash1", tp=2)).model_fields_set
    {'attention_kernel'}
    """
    return ParallelConfig.model_validate(
        {k: getattr(cfg, k) for k in STACK_FIELDS if k in cfg.model_fields_set
         and (k != "fp8_recipe" or cfg.precision == "fp8")})


def planner_zero(cfg: ParallelConfig) -> tuple[int | str, ...]:
    """The ZeRO stages to search: the one ``cfg`` sets, else the planner's default (1).

    >>> planner_zero(ParallelConfig(zero="fsdp")), planner_zero(ParallelConfig())
    (('fsdp',), (1,))
    """
    return (cfg.zero,) if "zero" in cfg.model_fields_set else (1,)


def _divisors(n: int, cap: int) -> list[int]:
    return [d for d in range(1, min(n, cap) + 1) if n % d == 0]


def _pow2(cap: int) -> list[int]:
    out, v = [], 1
    while v <= cap:
        out.append(v)
        v *= 2
    return out


def candidates(model: TransformerSpec, world: int, gpus_per_server: int, *,
               global_batch: int, seq_len: int, precision: str = "bf16",
               zero: tuple[int | str, ...] = (1,), micro_batches: tuple[int, ...] = (1, 2, 4, 8),
               max_pp: int = 64) -> list[ParallelConfig]:
    """All configurations worth timing (sizes that divide; memory not yet checked).

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> c = candidates(get_model("llama2-7b"), 8, 8, global_batch=64, seq_len=4096)
    >>> all(8 % (x.tp * x.pp * x.cp) == 0 for x in c)
    True
    """
    tps = [t for t in _pow2(max(gpus_per_server, 1) * 2) if model.heads % t == 0
           and world % t == 0]
    # even splits, and powers of two with uneven stages (as Llama 3 405B's 126 layers
    # over 16 stages)
    pps = sorted({p for p in _divisors(model.layers, max_pp) + _pow2(max_pp)
                  if world % p == 0 and p <= model.layers})
    cps = [c for c in _pow2(8) if seq_len % c == 0 and (c == 1 or seq_len >= 8192)]
    eps = _divisors(model.experts, 64) if model.is_moe else [1]
    out: list[ParallelConfig] = []
    for tp, pp, cp in itertools.product(tps, pps, cps):
        if world % (tp * pp * cp):
            continue
        dp = world // (tp * pp * cp)
        for ep, mb, rc, z in itertools.product(eps, micro_batches,
                                               ("none", "selective", "full"), zero):
            # experts split like the dense layers (etp = tp), or folded out of TP
            # (etp = 1, NeMo's DeepSeek-V3 recipes: EP groups of consecutive GPUs)
            etps: list[int | None] = [None] if (dp * cp) % ep == 0 else []
            if model.is_moe and tp > 1 and ep > 1 and (tp * dp * cp) % ep == 0:
                etps.append(1)
            if not etps or global_batch % (mb * dp):
                continue
            if seq_len % (cp * tp):
                continue
            inter = [1] + ([v for v in (2, 4) if model.layers % (pp * v) == 0]
                           if pp > 1 else [])
            for v, etp in itertools.product(inter, etps):
                out.append(ParallelConfig(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, zero=z,
                                          micro_batch=mb, global_batch=global_batch,
                                          seq_len=seq_len, precision=precision,
                                          recompute=rc, vp=v))
    return out


def plan_parallel(model: TransformerSpec, fabric: Fabric, *, global_batch: int,
                  seq_len: int | None = None, precision: str = "bf16",
                  zero: tuple[int | str, ...] = (1,), comm: CommModel | None = None,
                  backend: str = "analytic", top: int = 10, max_pp: int = 64,
                  options: ParallelConfig | None = None) -> Plan:
    """Find the fastest configurations of ``model`` on ``fabric`` that fit in memory.

    Parameters
    ----------
    model, fabric
        What to train, and where.
    global_batch : int
        Sequences per step (kept fixed across candidates).
    seq_len : int, optional
        Sequence length (default the model's).
    zero : tuple
        ZeRO stages to try.
    comm : CommModel, optional
        Default: one cached :class:`EngineComm` shared by all candidates.
    top : int
        How many results to keep.
    options : ParallelConfig, optional
        Fields every candidate gets: those ``options`` gives (``model_fields_set``; e.g.
        ``ParallelConfig(tp_comm_overlap=True)``; overlap flags only where their traffic
        exists,
        ``fsdp_impl`` / ``reshard_after_forward`` only to the ``zero="fsdp"`` candidates,
        so ``zero`` must include ``"fsdp"`` for them).

    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> plan_parallel(get_model("llama2-7b"), fs.build_cluster("dgx-h100", nodes=1),
    ...               global_batch=8, options=ParallelConfig(fsdp_impl="megatron"))
    Traceback (most recent call last):
    ...
    fabricsim.errors.ModelError: options.fsdp_impl: fsdp_impl applies to fully sharded \
layouts, and the search tries zero=(1,): search zero=('fsdp',) (--zero fsdp) or drop fsdp_impl
    """
    t0 = time.perf_counter()
    seq = seq_len or model.seq
    world = fabric.n_gpus
    gpu = get_catalog().gpu(fabric.info.gpu)
    peak_flops(gpu, precision)  # a precision the GPU has no tensor cores for: say so
    given = {k: getattr(options, k) for k in options.model_fields_set} \
        if options is not None else {}
    if "attention_kernel" in given:  # a kernel that does not run there
        attention_kernel_eff(gpu, str(given["attention_kernel"]))
    for key in FSDP_ONLY:
        if key in given and not any(str(z) in ("3", "fsdp") for z in zero):
            raise ModelError(f"{key} applies to fully sharded layouts, and the search "
                             f"tries zero={tuple(zero)}: search zero=('fsdp',) (--zero "
                             f"fsdp) or drop {key}", field=f"options.{key}")
    comm = comm if comm is not None else EngineComm(fabric, backend=backend)
    cands = candidates(model, world, fabric.info.gpus_per_server, global_batch=global_batch,
                       seq_len=seq, precision=precision, zero=zero, max_pp=max_pp)
    results: list[StepResult] = []
    rej_mem = rej_shape = 0
    first_shape_error = ""
    for cfg in cands:
        if given:  # overlap flags only where there is traffic of their kind
            opts = {k: v for k, v in given.items()
                    if not (k == "tp_comm_overlap"
                            and not 1 < cfg.tp <= fabric.info.nvlink_domain_gpus)
                    and not (k in ("ep_overlap", "moe_node_limit") and cfg.ep == 1)
                    and not (k == "overlap_p2p_comm" and cfg.pp == 1)
                    and not (k in FSDP_ONLY and cfg.zero_stage < 3)}
            cfg = ParallelConfig.model_validate({**cfg.model_dump(), **opts})
        try:
            p = cfg.resolve(model, world)
        except ModelError as e:
            rej_shape += 1
            first_shape_error = first_shape_error or str(e)
            continue
        if memory_per_gpu(model, p).total > gpu.memory_bytes:
            rej_mem += 1
            continue
        try:
            results.append(simulate_step(model, cfg, fabric, comm, check_memory=False))
        except FabricsimError as e:
            rej_shape += 1
            first_shape_error = first_shape_error or str(e)
    results.sort(key=lambda r: r.step_time_s)
    notes = []
    if not results and rej_mem:
        notes.append(f"no configuration of {model.name} fits {world} x {gpu.name} "
                     f"({gpu.memory_gib:.0f} GiB) at global_batch={global_batch}")
    elif not results:
        notes.append(f"no layout of {model.name} on {world} GPUs at global_batch="
                     f"{global_batch} could run" + (f" (the first refused: "
                                                    f"{first_shape_error})"
                                                    if first_shape_error else
                                                    ": no sizes divide"))
    return Plan(results=results[:top], evaluated=len(results), rejected_memory=rej_mem,
                rejected_shape=rej_shape, seconds=time.perf_counter() - t0,
                comm_calls=int(getattr(comm, "calls", 0)), notes=notes)
