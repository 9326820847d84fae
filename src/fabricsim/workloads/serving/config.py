"""How a model is served: one instance of ``tp × pp`` GPUs and its requests.

Example
-------
>>> ServingConfig(tp=4, tpot_target_ms=30).batch
1
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ServingConfig"]


class ServingConfig(BaseModel):
    """How a model is served: one instance of ``tp × pp`` GPUs and its requests (the
    ``inference:`` section; the same defaults as ``fabricsim infer``'s flags).

    ``tpot_target_ms`` / ``max_batch`` add continuous batching at that latency (or cap);
    ``prefill_tp`` adds disaggregated serving (a prefill instance of that many GPUs on
    other servers ships each request's KV cache to the decode instance).

    Examples
    --------
    >>> ServingConfig(tp=4, tpot_target_ms=30).batch
    1
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: int = Field(8, ge=1, le=1_000_000)
    pp: int = Field(1, ge=1, le=1_000_000)
    ep: int = Field(1, ge=1, le=1_000_000)
    batch: int = Field(1, ge=1, le=10_000_000)
    prompt_len: int = Field(1024, ge=1, le=1_000_000_000)
    output_len: int = Field(256, ge=1, le=1_000_000_000)
    precision: Literal["bf16", "fp8", "fp8-weights", "nvfp4"] = "bf16"
    kv_precision: Literal["bf16", "fp8"] | None = None
    engine: str = "trtllm"
    tpot_target_ms: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_batch: int | None = Field(None, ge=1, le=10_000_000)
    prefill_tp: int | None = Field(None, ge=1, le=1_000_000)
    attention_dp: int = Field(1, ge=1, le=1_000_000)
    redundant_experts: int = Field(0, ge=0, le=1_000_000)
    ep_kernel: str | None = None
