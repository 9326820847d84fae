"""How far off a training-step prediction is likely to be: the held-out error of runs
like it, and whether it lies where published runs reach.

``benchmarks/accuracy_training.py --loso --write`` predicts every published run of the
benchmark with its class's constant fitted on the *other* sources only (leave one source
out) and keeps, per group, the median and 90th percentile of the absolute error, the
runs and sources behind them, and the largest run. The result ships as
``workloads/training/heldout.json``; :func:`band` reads it so that ``fabricsim train``
says ``… ± 9 % (held out: Ampere BF16, 12 runs of 5 sources)``, and warns when a job is
outside what was checked: a class with no held-out figure (its constant rests on one
source), MoE layers (one run), or more GPUs than the largest run.

Example
-------
>>> b = band("ampere", "bf16", "", gpus=1024, moe=False)
>>> b.group, b.runs >= 10, 0 < b.median < b.p90 < 1, b.warnings
('ampere/bf16', True, True, [])
>>> band("hopper", "fp8", "torchao", gpus=128, moe=False).warnings[0][:40]
'no held-out figure for hopper/fp8/torcha'
>>> "blackwell/fp4 run" in band("blackwell", "fp4", "tensorwise", gpus=64, moe=False
...                             ).warnings[0]
True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fabricsim.shipped import shipped_json
from fabricsim.workloads.gpu import UNMEASURED

__all__ = ["HYBRID_WARNING", "MIN_RUNS", "Band", "band", "heldout"]

#: A class needs this many held-out runs, of at least two sources, for its own band;
#: with fewer it borrows the band of every run.
MIN_RUNS = 5


@dataclass(frozen=True)
class Band:
    """The held-out error of a group of published runs (fractions: ``step ± median``)
    and what a job lies outside of."""

    group: str
    median: float
    p90: float
    runs: int
    sources: int
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def heldout() -> dict[str, Any]:
    """The shipped held-out table (``workloads/training/heldout.json``)."""
    return shipped_json("fabricsim.workloads.training", "heldout.json")


#: What the NeMo tables say of hybrid models (Mamba-2 / gated delta-net blocks), which no
#: training benchmark run holds out: ``benchmarks/accuracy_nemo.py`` runs NVIDIA's
#: Nemotron 3 Nano rows with nothing fitted on them.
HYBRID_WARNING = ("hybrid model (recurrent Mamba / delta-net blocks): no held-out run; "
                  "NVIDIA's published Nemotron 3 Nano steps on five systems run 28-35 % "
                  "faster in the model than measured, Nemotron 3 Super's mostly 62-115 % "
                  "(their scan kernels cost more than their FLOPs and memory traffic say): "
                  "read this step as optimistic")


def band(generation: str, precision: str, recipe: str, *, gpus: int, moe: bool,
         hybrid: bool = False) -> Band:
    """The band of a job on ``gpus`` GPUs of ``generation`` in ``precision`` (``recipe``:
    its FP8 scaling recipe, ignored in BF16), with MoE layers or not, a hybrid model of
    recurrent and attention blocks or not."""
    data = heldout()
    # an FP8 scaling recipe names FP8 runs only (NVFP4 has its own block scaling)
    cls = precision if precision in ("bf16", "fp4") else f"{precision}/{recipe}"
    group = f"{generation}/{cls}"
    g = data["classes"].get(group)
    warnings = []
    if g is None or g["runs"] < MIN_RUNS or g["sources"] < 2:
        if generation in UNMEASURED:
            warnings.append(f"no published run of a {generation} GPU exists yet: its "
                            f"per-generation constants are {UNMEASURED[generation]}'s, and "
                            f"the band is every dense run's, not a measured error")
        elif g is None:
            warnings.append(f"no published {group} run is held out in the training "
                            f"benchmark: the band is every dense run's")
        elif g["runs"] == 0:
            warnings.append(f"no held-out figure for {group}: its constant rests on one "
                            f"source; the band is every dense run's")
        g, group = data["all"], "dense"
    if moe:
        warnings.append(f"MoE layers: {data['moe']['runs']} published run held out, off by "
                        f"{data['moe']['median']:.0%}; the band is for dense models")
    if hybrid:
        warnings.append(HYBRID_WARNING)
    if gpus > data["largest_gpus"]:
        warnings.append(f"{gpus:,} GPUs is beyond the largest published run checked "
                        f"({data['largest_gpus']:,})")
    return Band(group, g["median"], g["p90"], g["runs"], g["sources"], warnings)
