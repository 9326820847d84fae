"""Search TP/PP/CP/EP/micro-batch/recomputation for the fastest configuration that fits.

Every candidate is checked for divisibility and memory first (cheap), then timed with
:func:`~fabricsim.workloads.step.simulate_step` sharing one cached
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabricsim.catalog import get_catalog
from fabricsim.errors import FabricsimError, ModelError
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular, flatten
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.compute import attention_kernel_eff, peak_flops
from fabricsim.workloads.memory import memory_per_gpu
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.parallel import ParallelConfig
from fabricsim.workloads.step import StepResult, simulate_step

__all__ = ["Plan", "candidates", "plan_parallel"]


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
                                          recompute=rc, interleave=v))
    return out


def plan_parallel(model: TransformerSpec, fabric: Fabric, *, global_batch: int,
                  seq_len: int | None = None, precision: str = "bf16",
                  zero: tuple[int | str, ...] = (1,), comm: CommModel | None = None,
                  backend: str = "analytic", top: int = 10, max_pp: int = 64,
                  options: Mapping[str, Any] | None = None) -> Plan:
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
    options : mapping, optional
        Other :class:`ParallelConfig` fields every candidate gets (e.g.
        ``{"tp_comm_overlap": True}``; overlap flags only where their traffic exists).
    """
    t0 = time.perf_counter()
    seq = seq_len or model.seq
    world = fabric.n_gpus
    gpu = get_catalog().gpu(fabric.info.gpu)
    peak_flops(gpu, precision)  # a precision the GPU has no tensor cores for: say so
    if options and "attention_kernel" in options:  # a kernel that does not run there
        attention_kernel_eff(gpu, str(options["attention_kernel"]))
    comm = comm if comm is not None else EngineComm(fabric, backend=backend)
    cands = candidates(model, world, fabric.info.gpus_per_server, global_batch=global_batch,
                       seq_len=seq, precision=precision, zero=zero, max_pp=max_pp)
    results: list[StepResult] = []
    rej_mem = rej_shape = 0
    for cfg in cands:
        if options:  # overlap flags only where there is traffic of their kind
            opts = {k: v for k, v in options.items()
                    if not (k == "tp_comm_overlap"
                            and not 1 < cfg.tp <= fabric.info.nvlink_domain_gpus)
                    and not (k == "ep_overlap" and cfg.ep == 1)}
            cfg = ParallelConfig.model_validate({**cfg.model_dump(), **opts})
        try:
            p = cfg.resolve(model, world)
        except ModelError:
            rej_shape += 1
            continue
        if memory_per_gpu(model, p).total > gpu.memory_bytes:
            rej_mem += 1
            continue
        try:
            results.append(simulate_step(model, cfg, fabric, comm, check_memory=False))
        except FabricsimError:
            rej_shape += 1
    results.sort(key=lambda r: r.step_time_s)
    notes = []
    if not results:
        notes.append(f"no configuration of {model.name} fits {world} x {gpu.name} "
                     f"({gpu.memory_gib:.0f} GiB) at global_batch={global_batch}")
    return Plan(results=results[:top], evaluated=len(results), rejected_memory=rej_mem,
                rejected_shape=rej_shape, seconds=time.perf_counter() - t0,
                comm_calls=int(getattr(comm, "calls", 0)), notes=notes)
