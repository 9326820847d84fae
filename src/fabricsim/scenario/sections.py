"""The scenario's ``training:`` and ``inference:`` sections: a model (preset or shape)
and how it is split to train it or to serve it.

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
from fabricsim.workloads.serving.config import ServingConfig
from fabricsim.workloads.training.parallel import ParallelConfig

__all__ = ["EXTRA_FIELDS", "check_non_negative", "check_positive",
           "goodput_settings", "serving_from_section", "training_from_section"]

#: Keys of ``training:`` that are neither model shape nor parallelism (the goodput's
#: checkpoint bandwidth in GB/s and restart time in minutes among them).
EXTRA_FIELDS = ("model", "total_tokens", "gpu_hour_usd", "backend", "checkpoint_gbps",
                "restart_min")


def training_from_section(section: dict[str, Any] | None, prefix: str = "training"
                          ) -> tuple[TransformerSpec, ParallelConfig, dict[str, Any]]:
    """Split and validate a ``training:`` mapping; errors name ``training.<field>``.

    ``from_megatron`` (a pasted Megatron-LM/NeMo argument list, as ``--from-megatron``)
    sets the fields it maps; the section's own keys win over it, and the arguments it
    ignores are listed in ``extra["notes"]``.

    >>> m, cfg, extra = training_from_section({"model": "llama3-70b", "from_megatron":
    ...     "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --lr 1e-4",
    ...     "pp": 2})
    >>> cfg.tp, cfg.pp, extra["notes"]
    (8, 2, ['from_megatron ignored (no effect on the step time): --lr 1e-4'])
    """
    data = dict(section or {})
    notes: list[str] = []
    pasted = data.pop("from_megatron", None)
    if pasted is not None:
        data, notes = _with_megatron(pasted, data, prefix)
    extra = {k: data.pop(k, None) for k in EXTRA_FIELDS}
    extra["notes"] = notes
    shape = {k: data.pop(k) for k in list(data) if k in MODEL_FIELDS and k != "seq"}
    if "seq" in data:  # 'seq' shapes the model's default and the run's sequence length
        shape["seq"] = data.pop("seq")
    model = _model(extra["model"], shape, "llama3-8b", prefix)
    try:
        cfg = ParallelConfig.model_validate(data)
    except ValidationError as e:
        raise _section_error(e, prefix, set(ParallelConfig.model_fields) | set(MODEL_FIELDS)
                             | set(EXTRA_FIELDS)) from None
    for k in ("total_tokens", "gpu_hour_usd", "checkpoint_gbps", "restart_min"):
        v = extra[k]
        if isinstance(v, str):  # YAML 1.1 reads 1.5e12 (no sign in the exponent) as text
            with contextlib.suppress(ValueError):
                v = extra[k] = float(v)
        extra[k] = (check_non_negative if k == "restart_min" else check_positive)(
            v, f"{prefix}.{k}")
    return model, cfg, extra


def goodput_settings(extra: dict[str, Any]) -> dict[str, float]:
    """A ``training:`` section's ``checkpoint_gbps`` (GB/s) and ``restart_min`` as the
    keywords of :func:`fabricsim.workloads.training.goodput.goodput_on_fabric` (the ones it does
    not give keep that function's defaults).

    >>> goodput_settings({"checkpoint_gbps": 100.0, "restart_min": 5.0})
    {'restart_s': 300.0, 'checkpoint_write_bytes_per_s': 100000000000.0}
    >>> goodput_settings({})
    {}
    """
    out: dict[str, float] = {}
    if extra.get("restart_min") is not None:
        out["restart_s"] = float(extra["restart_min"]) * 60.0
    if extra.get("checkpoint_gbps") is not None:
        out["checkpoint_write_bytes_per_s"] = float(extra["checkpoint_gbps"]) * 1e9
    return out


def _with_megatron(pasted: object, data: dict[str, Any], prefix: str
                   ) -> tuple[dict[str, Any], list[str]]:
    """A section's ``from_megatron`` list merged under its own keys, and a note naming
    the arguments with no effect on the step time."""
    from fabricsim.workloads.training.megatron import parse_megatron_args

    field = f"{prefix}.from_megatron"
    if not isinstance(pasted, str):
        raise ConfigError(f"must be the argument list as one string, got {pasted!r}",
                          field=field)
    try:
        parsed, ignored = parse_megatron_args(pasted)
    except ConfigError as e:
        raise ConfigError(e.message, field=field) from None
    merged = {**parsed, **data}
    if "model" not in merged and not any(k in MODEL_FIELDS for k in merged):
        raise ConfigError("the Megatron list sets no model shape and the section names no "
                          "model: add model (e.g. llama3-70b), or --num-layers, "
                          "--hidden-size, --ffn-hidden-size, --num-attention-heads to the "
                          "list and vocab to the section", field=f"{prefix}.model")
    notes = [f"from_megatron ignored (no effect on the step time): {', '.join(ignored)}"] \
        if ignored else []
    return merged, notes


def _model(name: object, shape: dict[str, Any], default: str, prefix: str
           ) -> TransformerSpec:
    """A section's model: the preset ``name`` (``default`` when neither a name nor a
    shape is given) with the ``shape`` fields changed, or a whole custom shape."""
    if name is None and not shape:
        name = default
    base = get_model(str(name), field=f"{prefix}.model") if name is not None else None
    model = custom_model(base, shape, prefix=prefix) if shape else base
    assert model is not None
    return model


#: Section keys people write for a field by another name (a CLI flag's, Megatron's), and
#: the field (or setting) they mean.
KEY_ALIASES = {
    "virtual_pipeline_model_parallel_size": "vp", "schedule": "pp_schedule",
    "fp8": "precision: fp8", "fp4": "precision: fp4", "sp": "sequence_parallel",
    "recompute_num_layers": "recompute_layers", "recompute_granularity": "recompute",
    "global_batch_size": "global_batch", "micro_batch_size": "micro_batch",
    "gbs": "global_batch", "mbs": "micro_batch", "seq_length": "seq_len",
    "tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp", "expert_model_parallel_size": "ep",
    "tpot_target": "tpot_target_ms", "max_num_seqs": "max_batch",
}


def _section_error(e: ValidationError, prefix: str, known: set[str]) -> ConfigError:
    """The first error of a section's validation, naming ``<prefix>.<field>``; a field
    that is not one gets the field meant (:data:`KEY_ALIASES`, or the closest spelling)
    and the known fields."""
    import difflib

    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    got = err.get("input")
    got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) else ""
    hint = ""
    if err["type"] == "extra_forbidden":
        key = loc.replace("-", "_").lower()
        meant = KEY_ALIASES.get(key)
        if meant is None or meant.split()[0].rstrip(":") not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
            meant = close[0] if close else None
        hint = (f"; did you mean {meant}?" if meant else "") + \
            f" (known fields: {', '.join(sorted(known))})"
    return ConfigError(f"{err['msg']}{got_s}{hint}", field=f"{prefix}.{loc}")


def serving_from_section(section: dict[str, Any] | None, prefix: str = "inference", *,
                         model: TransformerSpec | None = None
                         ) -> tuple[TransformerSpec, ServingConfig]:
    """Split and validate an ``inference:`` mapping (the model, as in ``training:``, and
    the :class:`ServingConfig` fields); errors name ``inference.<field>``. ``model``
    serves a model given elsewhere (a section that names none).

    Examples
    --------
    >>> m, s = serving_from_section({"model": "llama3-70b", "tp": 4, "precision": "fp8"})
    >>> m.name, s.tp, s.precision, s.prompt_len
    ('llama3-70b', 4, 'fp8', 1024)
    >>> serving_from_section({"model": "llama3-70b", "tpot_target_ms": -5})
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: inference.tpot_target_ms: Input should be greater than 0, \
got -5 (--tpot-target on the command line)
    """
    data = dict(section or {})
    name = data.pop("model", None)
    shape = {k: data.pop(k) for k in list(data) if k in MODEL_FIELDS}
    if model is None or name is not None or shape:
        model = _model(name, shape, "llama3-70b", prefix)
    try:
        cfg = ServingConfig.model_validate(data)
    except ValidationError as e:
        err = _section_error(e, prefix, set(ServingConfig.model_fields) | set(MODEL_FIELDS)
                             | {"model"})
        key = (err.field or "").removeprefix(f"{prefix}.")
        if key in ServingConfig.model_fields:  # the same field as fabricsim infer's flag
            flag = "--" + key.removesuffix("_ms").replace("_", "-")
            err = ConfigError(f"{err.message} ({flag} on the command line)", field=err.field)
        raise err from None
    return model, cfg


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
