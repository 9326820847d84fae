"""Scaling curves: throughput per GPU as a job grows, against one node.

Weak scaling keeps the model split (TP, PP, CP, EP) and the micro-batch fixed and grows
data parallelism; the global batch grows with it (``micro_batch·dp·accumulation``).
Scaling efficiency at N GPUs = tokens/s per GPU at N / tokens/s per GPU on one node (or
on the smallest size in the sweep when the model needs more than one node).

Example
-------
>>> from fabricsim.workloads.models import get_model
>>> class Flat:
...     def time(self, collective, ranks, nbytes):
...         return 1e-5 + nbytes / 50e9
>>> pts = scaling_curve(get_model("llama2-7b"), "dgx-h100", [8, 64],
...                     ParallelConfig(micro_batch=1, seq_len=4096, recompute="full"),
...                     comm_factory=lambda fab: Flat())
>>> pts[0]["scaling_efficiency"]
1.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fabricsim.errors import ModelError
from fabricsim.fabric import Fabric, build_cluster
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.parallel import ParallelConfig

__all__ = ["scaling_curve"]


def scaling_curve(model: TransformerSpec, system: str, gpus: Sequence[int],
                  cfg: ParallelConfig, *, fabric: str | None = None,
                  topology: str | None = None, oversubscription: float = 1.0,
                  accumulation: int = 1, backend: str = "analytic",
                  gpu_hour_usd: float | None = None,
                  comm_factory: Callable[[Fabric], CommModel] | None = None
                  ) -> list[dict[str, Any]]:
    """Simulate ``model`` at each GPU count in ``gpus`` and report scaling efficiency.

    Returns one dict per size with ``gpus``, ``tokens_per_s``, ``tokens_per_s_per_gpu``,
    ``mfu``, ``step_time_s``, ``comm_fraction``, ``idle_gpu_equivalent``,
    ``comm_usd_per_day`` and ``scaling_efficiency``.
    """
    from fabricsim.catalog import get_catalog
    from fabricsim.workloads.step import simulate_step

    per_node = get_catalog().system(system).gpus
    out: list[dict[str, Any]] = []
    for n in sorted(set(gpus)):
        if n < 1:
            raise ModelError(f"GPU counts must be >= 1, got {n}", field="gpus")
        if n >= per_node and n % per_node:
            raise ModelError(f"{n} GPUs is not a whole number of {system} servers "
                             f"({per_node} GPUs each)", field="gpus")
        nodes, gpn = (n // per_node, None) if n >= per_node else (1, n)
        fab = build_cluster(system, nodes, gpus_per_node=gpn, fabric=fabric,
                            topology=topology, oversubscription=oversubscription)
        mp = cfg.tp * cfg.pp * cfg.cp
        if n % mp:
            raise ModelError(f"{n} GPUs cannot hold tp·pp·cp = {mp}", field="gpus")
        dp = n // mp
        c = cfg.model_copy(update={"dp": None,
                                   "global_batch": cfg.micro_batch * dp * accumulation *
                                   (4 * cfg.pp if cfg.pp > 1 else 1)})
        comm = comm_factory(fab) if comm_factory else EngineComm(fab, backend=backend)
        r = simulate_step(model, c, fab, comm, gpu_hour_usd=gpu_hour_usd, check_memory=False)
        out.append({"gpus": n, "tokens_per_s": r.tokens_per_s,
                    "tokens_per_s_per_gpu": r.tokens_per_s / n, "mfu": r.mfu,
                    "step_time_s": r.step_time_s, "comm_fraction": r.comm_fraction,
                    "idle_gpu_equivalent": r.idle_gpus, "comm_usd_per_day": r.comm_usd_per_day,
                    "memory_per_gpu_gib": r.memory_per_gpu_gib,
                    "fits": r.memory.total <= r.gpu_memory_bytes})
    if out:
        base_pt = next((p for p in out if p["gpus"] == per_node), out[0])
        base = base_pt["tokens_per_s_per_gpu"]
        for p in out:
            p["scaling_efficiency"] = p["tokens_per_s_per_gpu"] / base
            p["baseline_gpus"] = base_pt["gpus"]
    return out
