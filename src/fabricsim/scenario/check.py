"""Check every section of a scenario with the module that will read it, without running it.

What ``fabricsim validate`` and the web app's live validation report: the cluster is
built, the collective's name and sizes are parsed, the ``training:`` section resolved to a
model and a parallel layout, the ``inference:`` section served once on the cluster, the
``packet:`` section to a packet configuration, faults to links of the built fabric. The
first error is raised (a :class:`~fabricsim.errors.FabricsimError` naming the field).

Example
-------
>>> from fabricsim.scenario import Scenario
>>> check_sections(Scenario.model_validate({"cluster": {"system": "dgx-h100", "nodes": 2}}))
['16 GPUs on 2 × dgx-h100', 'ib-ndr rail-optimized']
"""

from __future__ import annotations

from fabricsim.errors import ConfigError
from fabricsim.scenario.fabric import fabric_from_scenario
from fabricsim.scenario.schema import Scenario
from fabricsim.units import parse_size

__all__ = ["check_sections"]


def check_sections(sc: Scenario, kind: str | None = None) -> list[str]:
    """Check every section of ``sc``; returns what was found (raises on the first error).

    The ``training:`` section is resolved against the cluster (sizes, flags, memory per
    GPU) when the file is checked as a whole (``kind`` None: ``fabricsim validate``) or for
    a training step (``"train"``); for other kinds of job it is only parsed, since they
    do not run it on this cluster (``scale`` sizes it per GPU count)."""
    fab = fabric_from_scenario(sc)
    parts = [f"{fab.n_gpus} GPUs on {fab.info.servers} × {fab.info.system}",
             f"{fab.info.fabric} {fab.info.topology}"]
    if sc.collective is not None:
        from fabricsim.collectives.tuner import check_collective

        coll = check_collective(sc.collective.collective)
        lo = parse_size(sc.collective.minbytes, field="collective.minbytes")
        hi = parse_size(sc.collective.maxbytes, field="collective.maxbytes")
        if lo > hi:
            raise ConfigError(f"minbytes ({lo}) is larger than maxbytes ({hi})",
                              field="collective.minbytes")
        parts.append(f"collective {coll}")
    if sc.training is not None:
        from fabricsim.scenario.sections import training_from_section
        from fabricsim.workloads.training.step import check_layout

        model, cfg, _extra = training_from_section(sc.training)
        if kind in (None, "train"):
            p = check_layout(model, cfg, fab)
            parts.append(f"training {model.name} (tp {p.tp}, pp {p.pp}, dp {p.dp})")
        else:
            parts.append(f"training {model.name}")
    if sc.inference is not None:
        from fabricsim.scenario.serving import serving_job
        from fabricsim.workloads.serving.run import run_serving

        model, serve, _notes = serving_job(sc)
        if kind in (None, "infer"):  # the layout on this cluster: sizes, memory, context
            run_serving(model, serve, fab)
            parts.append(f"inference {model.name} (tp {serve.tp}, pp {serve.pp})")
        else:
            parts.append(f"inference {model.name}")
    if sc.packet is not None:
        from fabricsim.backends.packet.config import parse_packet_config

        parse_packet_config(sc.packet)
        parts.append("packet settings")
    if sc.faults:
        from fabricsim.backends.flow import plan_faults

        plan_faults(fab, sc.faults)
        parts.append(f"{len(sc.faults)} fault(s)")
    if sc.background:
        parts.append(f"{len(sc.background)} background flow set(s)")
    return parts
