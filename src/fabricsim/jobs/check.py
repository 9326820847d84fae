"""Check every section of a scenario with the job that will read it, without running it.

What ``fabricsim validate`` and the web app's live validation report: the cluster is
built, the collective's name and sizes are read, the ``training:`` section becomes a
training job resolved on the cluster (sizes, flags, memory per GPU), the ``inference:``
section a serving job served once, the ``packet:`` section (read with the scenario) is
counted, faults are placed on links of the built fabric. The first error is raised (a
:class:`~fabricsim.errors.FabricsimError` naming the field).

Example
-------
>>> from fabricsim.scenario import Scenario
>>> check_sections(Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 2}}))
['16 GPUs on 2 × dgx-h100', 'ib-ndr rail-optimized']
"""

from __future__ import annotations

from pathlib import Path

from fabricsim.errors import ConfigError
from fabricsim.jobs.common import Cluster
from fabricsim.scenario.schema import Scenario

__all__ = ["check_sections"]


def check_sections(sc: Scenario, kind: str | None = None,
                   base_dir: Path | None = None) -> list[str]:
    """Check every section of ``sc``; returns what was found (raises on the first error).

    The ``training:`` section is resolved against the cluster (sizes, flags, memory per
    GPU) when the file is checked as a whole (``kind`` None: ``fabricsim validate``) or for
    a training step (``"train"``); for other kinds of job its job is only built, since
    they do not run it on this cluster (``scale`` sizes it per GPU count). A trace file
    is read relative to ``base_dir`` (the scenario's folder)."""
    fab = Cluster.of(sc).build()
    parts = [f"{fab.n_gpus} GPUs on {fab.info.servers} × {fab.info.system}",
             f"{fab.info.fabric} {fab.info.topology}"]
    if sc.collective is not None:
        from fabricsim.collectives.tuner import check_collective

        coll = check_collective(sc.collective.collective)
        if int(sc.collective.minbytes) > int(sc.collective.maxbytes):
            raise ConfigError(f"minbytes ({sc.collective.minbytes}) is larger than maxbytes "
                              f"({sc.collective.maxbytes})", field="collective.minbytes")
        # the section as bench builds its job (data type, op, release, NCCL variables)
        from fabricsim.jobs.collective import bench_job

        bench = bench_job(sc.model_copy(update={"faults": [], "background": []}))
        bench.group_on(fab)  # its ranks and variables against the fabric, as bench runs them
        under = " ".join(f"{k}={v}" for k, v in bench.env.variables.items())
        parts.append(f"collective {coll}" + (f" under {under}" if under else ""))
    if sc.expert_parallel is not None:
        from fabricsim.jobs.ep import check_ep, ep_job

        layer = ep_job(sc)
        sizes = check_ep(layer, fab.n_gpus)
        parts.append(f"expert parallel {layer.tokens} tokens x top-{layer.top_k} of "
                     f"{layer.experts} experts at EP {', '.join(map(str, sizes))}")
    if sc.training is not None:
        from fabricsim.jobs.training import training_job
        from fabricsim.workloads.training.step import check_layout

        job = training_job(sc)
        if kind in (None, "train"):
            p = check_layout(job.model, job.parallel, fab)
            parts.append(f"training {job.model.name} (tp {p.tp}, pp {p.pp}, dp {p.dp})")
        else:
            parts.append(f"training {job.model.name}")
    if sc.jobs or sc.trace is not None:
        from fabricsim.jobs.cluster import check_jobs, check_trace, cluster_job

        shared = cluster_job(sc, base_dir=base_dir)
        check_jobs(shared, fab)
        if shared.jobs:
            parts.append(f"{len(shared.jobs)} jobs placed {', '.join(shared.placements)} "
                         f"({sum(j.gpus for j in shared.jobs)} GPUs)")
        if shared.trace is not None:
            kept = check_trace(shared, fab)
            parts.append(f"trace {shared.trace.source}: {len(kept)} jobs in "
                         f"{shared.trace.hours:g} h, {', '.join(shared.schedulers)}")
    if sc.inference is not None:
        from fabricsim.jobs.serving import serving_job
        from fabricsim.workloads.serving.run import run_serving

        served = serving_job(sc)
        if kind in (None, "infer"):  # the layout on this cluster: sizes, memory, context
            run_serving(served.model, served.serving, fab)
            parts.append(f"inference {served.model.name} (tp {served.serving.tp}, pp "
                         f"{served.serving.pp})")
        else:
            parts.append(f"inference {served.model.name}")
    if sc.packet is not None:
        parts.append("packet settings" + (f" ({len(sc.packet.variants)} variant(s))"
                                          if sc.packet.variants else ""))
    if sc.faults:
        from fabricsim.backends.flow import plan_faults

        plan_faults(fab, sc.faults)
        parts.append(f"{len(sc.faults)} fault(s)")
    if sc.background:
        parts.append(f"{len(sc.background)} background flow set(s)")
    return parts
