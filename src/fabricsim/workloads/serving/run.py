"""What a :class:`~fabricsim.workloads.serving.config.ServingConfig` asks for: a static
batch, with continuous batching and disaggregated serving where it names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricsim.fabric import Fabric
from fabricsim.workloads.comm import CommModel, EngineComm
from fabricsim.workloads.models import TransformerSpec
from fabricsim.workloads.serving.batching import ContinuousResult, continuous_batching
from fabricsim.workloads.serving.config import ServingConfig
from fabricsim.workloads.serving.disaggregated import DisaggregatedResult, disaggregated_serving
from fabricsim.workloads.serving.static import InferenceResult, simulate_inference

__all__ = ["ServingRun", "run_serving"]

@dataclass(frozen=True)
class ServingRun:
    """What a :class:`~fabricsim.workloads.serving.config.ServingConfig` asks for: the static batch,
    and continuous batching and disaggregated serving when it names them."""

    static: InferenceResult
    continuous: ContinuousResult | None = None
    disaggregated: DisaggregatedResult | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the static batch's summary with ``continuous`` and
        ``disaggregated`` beside it where they ran."""
        d = self.static.as_dict()
        if self.continuous is not None:
            d["continuous"] = self.continuous.as_dict()
        if self.disaggregated is not None:
            d["disaggregated"] = self.disaggregated.as_dict()
        return d


def run_serving(model: TransformerSpec, cfg: ServingConfig, fabric: Fabric,
                comm: CommModel | None = None) -> ServingRun:
    """Serve ``model`` on ``fabric`` as ``cfg`` (an ``inference:`` section or
    ``fabricsim infer``'s flags) says: the static batch, plus continuous batching when it
    names a TPOT target or a batch cap, plus disaggregated serving when it names a
    prefill instance.

    Examples
    --------
    >>> import fabricsim as fs
    >>> from fabricsim.workloads.models import get_model
    >>> from fabricsim.workloads.serving.config import ServingConfig
    >>> r = run_serving(get_model("llama3-8b"), ServingConfig(tp=1, tpot_target_ms=20),
    ...                 fs.build_cluster("dgx-h100", 1))
    >>> r.continuous is not None and r.continuous.tpot_s <= 0.02, r.disaggregated is None
    (True, True)
    """
    comm = comm if comm is not None else EngineComm(fabric)
    kw: dict[str, Any] = dict(tp=cfg.tp, pp=cfg.pp, ep=cfg.ep, precision=cfg.precision,
                              kv_precision=cfg.kv_precision, engine=cfg.engine, comm=comm,
                              attention_dp=cfg.attention_dp, ep_kernel=cfg.ep_kernel,
                              redundant_experts=cfg.redundant_experts)
    static = simulate_inference(model, fabric, batch=cfg.batch, prompt_len=cfg.prompt_len,
                                output_len=cfg.output_len, **kw)
    cont = None
    if cfg.tpot_target_ms is not None or cfg.max_batch is not None:
        cont = continuous_batching(
            model, fabric, prompt_len=cfg.prompt_len, output_len=cfg.output_len,
            tpot_target_s=cfg.tpot_target_ms / 1e3 if cfg.tpot_target_ms is not None
            else None, max_batch=cfg.max_batch, **kw)
    dis = None
    if cfg.prefill_tp is not None:
        dis = disaggregated_serving(model, fabric, prefill_tp=cfg.prefill_tp,
                                    batch=cfg.batch, prompt_len=cfg.prompt_len,
                                    output_len=cfg.output_len, **kw)
    return ServingRun(static, cont, dis)
