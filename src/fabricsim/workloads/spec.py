"""The scenario's ``training:`` section: a model (preset or shape) and its parallelism.

Example
-------
>>> m, cfg, extra = training_from_section({"model": "llama2-7b", "tp": 2, "layers": 16})
>>> m.layers, cfg.tp, extra["total_tokens"]
(16, 2, None)
>>> training_from_section({"model": "llama2-7b", "tp": 0})
Traceback (most recent call last):
...
fabricsim.errors.ConfigError: training.tp: Input should be greater than or equal to 1, got 0
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from pydantic import ValidationError

from fabricsim.errors import ConfigError
from fabricsim.workloads.models import MODEL_FIELDS, TransformerSpec, custom_model, get_model
from fabricsim.workloads.parallel import ParallelConfig

__all__ = ["EXTRA_FIELDS", "check_non_negative", "check_positive", "training_from_section"]

#: Keys of ``training:`` that are neither model shape nor parallelism.
EXTRA_FIELDS = ("model", "total_tokens", "gpu_hour_usd", "backend")


def training_from_section(section: dict[str, Any] | None, prefix: str = "training"
                          ) -> tuple[TransformerSpec, ParallelConfig, dict[str, Any]]:
    """Split and validate a ``training:`` mapping; errors name ``training.<field>``."""
    data = dict(section or {})
    extra = {k: data.pop(k, None) for k in EXTRA_FIELDS}
    shape = {k: data.pop(k) for k in list(data) if k in MODEL_FIELDS and k != "seq"}
    if "seq" in data:  # 'seq' shapes the model's default and the run's sequence length
        shape["seq"] = data.pop("seq")
    name = extra["model"]
    if name is None and not shape:
        name = "llama3-8b"
    base = get_model(str(name), field=f"{prefix}.model") if name is not None else None
    model = custom_model(base, shape, prefix=prefix) if shape else base
    assert model is not None
    try:
        cfg = ParallelConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        got = err.get("input")
        got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) else ""
        known = sorted(set(ParallelConfig.model_fields) | set(MODEL_FIELDS)
                       | set(EXTRA_FIELDS))
        hint = f" (known fields: {', '.join(known)})" if err["type"] == "extra_forbidden" \
            else ""
        raise ConfigError(f"{err['msg']}{got_s}{hint}", field=f"{prefix}.{loc}") from None
    for k in ("total_tokens", "gpu_hour_usd"):
        v = extra[k]
        if isinstance(v, str):  # YAML 1.1 reads 1.5e12 (no sign in the exponent) as text
            with contextlib.suppress(ValueError):
                v = extra[k] = float(v)
        extra[k] = check_positive(v, f"{prefix}.{k}")
    return model, cfg, extra


def check_positive(value: object, field: str) -> float | None:
    """``value`` as a float if it is a positive, finite number (``None`` passes through).

    Raises :class:`~fabricsim.errors.ConfigError` naming ``field`` otherwise — a price of
    $-3 or NaN per GPU-hour would print money that means nothing.

    Examples
    --------
    >>> check_positive(2.5, "gpu_hour_usd")
    2.5
    >>> check_positive(float("nan"), "--gpu-hour-usd")
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: --gpu-hour-usd: must be a positive, finite number, got nan
    """
    return _check_number(value, field, zero_ok=False)


def check_non_negative(value: object, field: str) -> float | None:
    """``value`` as a float if it is a finite number >= 0 (``None`` passes through), as
    :func:`check_positive` otherwise.

    >>> check_non_negative(0, "--restart-min")
    0.0
    """
    return _check_number(value, field, zero_ok=True)


def _check_number(value: object, field: str, *, zero_ok: bool) -> float | None:
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok)):
        what = "a finite number >= 0" if zero_ok else "a positive, finite number"
        raise ConfigError(f"must be {what}, got {value!r}", field=field)
    return float(value)
