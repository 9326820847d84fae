"""How far off a serving prediction is likely to be: the held-out error of published
figures like it, and whether it lies where they reach.

``benchmarks/accuracy_inference.py --loso --write`` predicts every published serving
figure with the hardware constants refitted without its source and keeps, per kind
(``throughput``, ``latency``: first-token and inter-token) the median and 90th percentile of the
absolute error, with the engines, GPU generations and the largest instance they cover
(an engine counts by family: TensorRT-LLM's runtimes and versions as one).
The result ships as ``workloads/serving/heldout.json``; :func:`band` reads it so that
``fabricsim infer`` says ``± 16 % (p90 30 %)`` beside its latencies, and warns
when an instance lies outside what was checked: an engine, a GPU generation, an instance
wider than one server, or a mixture-of-experts model no published figure covers.

Example
-------
>>> b = band("throughput", engine="trtllm", generation="hopper", gpus=8, moe=False)
>>> b.kind, 0 < b.median < b.p90 < 1, b.warnings
('throughput', True, [])
>>> band("throughput", engine="sglang", generation="hopper", gpus=8, moe=False).warnings
['no published sglang figure is held out: its overheads are unvalidated']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fabricsim.shipped import shipped_json

__all__ = ["ServingBand", "band", "heldout"]


@dataclass(frozen=True)
class ServingBand:
    """The held-out error of published serving figures of one kind (fractions)."""

    kind: str
    median: float
    p90: float
    figures: int
    sources: int
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def heldout() -> dict[str, Any]:
    """The shipped held-out table (``workloads/serving/heldout.json``)."""
    return shipped_json("fabricsim.workloads.serving", "heldout.json")


def band(kind: str, *, engine: str, generation: str, gpus: int, moe: bool,
         hybrid: bool = False) -> ServingBand:
    """The band of a ``kind`` figure (``throughput`` or ``latency``) of an instance of
    ``gpus`` GPUs of ``generation`` served by ``engine`` (``hybrid``: a model with
    recurrent Mamba / delta-net blocks)."""
    data = heldout()
    g = data["kinds"][kind]
    warnings = []
    families = {e.split("-")[0] for e in data["engines"]}
    if engine.split("-")[0] not in families:
        warnings.append(f"no published {engine} figure is held out: its overheads are "
                        f"unvalidated")
    if g["sources"] < 2:
        warnings.append(f"the {kind} band rests on one source")
    if generation not in data["generations"]:
        warnings.append(f"no published serving figure on {generation} GPUs is held out")
    if gpus > data["largest_instance_gpus"]:
        warnings.append(f"an instance of {gpus} GPUs is wider than any published one "
                        f"checked ({data['largest_instance_gpus']})")
    if moe:
        warnings.append("no published mixture-of-experts serving figure is held out")
    if hybrid:
        warnings.append("no published serving figure of a hybrid (Mamba / delta-net) model "
                        "is held out: its recurrent state and scans are modelled, not "
                        "checked")
    return ServingBand(kind, g["median"], g["p90"], g["figures"], g["sources"], warnings)
