"""Read NeMo 2 / Megatron-Bridge recipe overrides into a ``training:`` section.

NeMo 2 runs a recipe (``nemo llm pretrain --factory llama3_8b``, or a script's
``--factory``/``--recipe``) with dotted overrides: ``trainer.num_nodes=2``,
``trainer.strategy.tensor_model_parallel_size=4``, ``data.global_batch_size=256``,
``model.config.num_layers=16``, ``trainer.plugins=bf16_with_fp8_mixed``. Megatron-Bridge
recipes take the same settings under ``model.*`` and ``train.*``
(``model.tensor_model_parallel_size=4``, ``train.global_batch_size=256``).
:func:`read_nemo` maps the recipe to a model preset and the overrides to fabricsim's
fields, takes the cluster from ``trainer.num_nodes`` / ``trainer.devices``, and lists what
it ignored (logging, checkpoints, optimizer, steps). A key under a prefix it reads
(``trainer.strategy.``, ``data.``, ``model.``, ``train.``) that it does not know is a
ConfigError naming it: a NeMo version it does not know is refused, not half read. What a
recipe sets itself and the overrides leave alone (its own layout and batch) is not in the
line: give it (or accept fabricsim's defaults), as the notes say.

Example
-------
>>> n = read_nemo("nemo llm pretrain --factory llama3_8b trainer.num_nodes=2 "
...               "trainer.strategy.tensor_model_parallel_size=2 data.global_batch_size=32 "
...               "data.seq_length=4096 trainer.max_steps=100")
>>> n.fields["model"], n.fields["tp"], n.fields["global_batch"], dict(n.launcher)
('llama3-8b', 2, 32, {'nodes': 2})
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from fabricsim.errors import ConfigError

__all__ = ["NEMO_RECIPES", "NemoOverrides", "read_nemo"]

FIELD = "--from-nemo"

#: Recipe names (NeMo 2's ``llm.<name>``, Megatron-Bridge's ``<name>_pretrain_config``)
#: -> fabricsim model preset.
NEMO_RECIPES = {
    "llama3_8b": "llama3-8b", "llama3_70b": "llama3-70b", "llama31_8b": "llama3-8b",
    "llama31_70b": "llama3-70b", "llama31_405b": "llama3-405b", "llama3_405b": "llama3-405b",
    "llama2_7b": "llama2-7b", "llama2_13b": "llama2-13b", "llama2_70b": "llama2-70b",
    "mixtral_8x7b": "mixtral-8x7b", "mixtral_8x22b": "mixtral-8x22b",
    "nemotron3_8b": "nemotron3-8b", "nemotron3_22b": "nemotron3-22b",
    "nemotron4_15b": "nemotron4-15b", "nemotron4_340b": "nemotron4-340b",
    "gpt3_175b": "gpt3-175b", "deepseek_v3": "deepseek-v3", "qwen3_30b_a3b": "qwen3-30b-a3b",
    "qwen3_235b_a22b": "qwen3-235b-a22b", "llama4_e16": "llama4-scout",
    "gpt_oss_120b": "gpt-oss-120b", "kimi_k2": "kimi-k2",
}


def _int(v: str, key: str) -> int:
    if not re.fullmatch(r"-?\d+", v):
        raise ConfigError(f"{key} takes an integer, got {v!r}", field=FIELD)
    return int(v)


def _bool(v: str, key: str) -> bool:
    low = v.lower()
    if low not in ("true", "false", "1", "0"):
        raise ConfigError(f"{key} takes True or False, got {v!r}", field=FIELD)
    return low in ("true", "1")


def _vp(v: str, key: str) -> int:
    return 1 if v.lower() in ("none", "null") else _int(v, key)


def _recompute(v: str, key: str) -> str:
    low = v.lower()
    if low in ("none", "null"):
        return "none"
    if low not in ("full", "selective"):
        raise ConfigError(f"{key} must be full, selective or None, got {v!r}", field=FIELD)
    return low


_STRATEGY: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "tensor_model_parallel_size": ("tp", _int),
    "pipeline_model_parallel_size": ("pp", _int),
    "context_parallel_size": ("cp", _int),
    "expert_model_parallel_size": ("ep", _int),
    "expert_tensor_parallel_size": ("etp", _int),
    "virtual_pipeline_model_parallel_size": ("vp", _vp),
    "sequence_parallel": ("sequence_parallel", _bool),
}
_MODEL: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "num_layers": ("layers", _int), "hidden_size": ("hidden", _int),
    "ffn_hidden_size": ("ffn", _int), "num_attention_heads": ("heads", _int),
    "num_query_groups": ("kv_heads", _int), "seq_length": ("seq_len", _int),
    "num_moe_experts": ("experts", _int), "moe_router_topk": ("top_k", _int),
    "moe_ffn_hidden_size": ("moe_ffn", _int),
    "recompute_granularity": ("recompute", _recompute),
    "recompute_num_layers": ("recompute_layers", _int),
}
_DATA: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "global_batch_size": ("global_batch", _int), "micro_batch_size": ("micro_batch", _int),
    "seq_length": ("seq_len", _int),
}
#: Keys of the read prefixes with no effect on the step time.
_HARMLESS = {"recompute_method", "init_method_std", "make_vocab_size_divisible_by",
             "tokenizer", "num_workers", "pin_memory", "index_mapping_dir", "split",
             "ckpt_load_strictness", "ckpt_async_save", "ckpt_parallel_load",
             "gradient_as_bucket_view", "task_encoder.seq_length", "seed", "train_iters",
             "eval_iters", "eval_interval", "exit_duration_in_mins", "manual_gc",
             "manual_gc_interval", "rampup_batch_size", "decoder_seq_length"}
#: Precision plugins (NeMo 2) and mixed-precision recipes (Megatron-Bridge).
_PRECISION = {"bf16_mixed": "bf16", "bf16-mixed": "bf16", "bf16_with_fp8_mixed": "fp8",
              "bf16_with_fp8_current_scaling_mixed": "fp8",
              "bf16_with_fp8_delayed_scaling_mixed": "fp8",
              "bf16_with_fp8_subchannel_scaling_mixed": "fp8",
              "bf16_with_mxfp8_mixed": "fp8", "bf16_with_nvfp4_mixed": "fp4"}
_RECIPE_OF = {"bf16_with_fp8_mixed": "delayed", "bf16_with_fp8_delayed_scaling_mixed":
              "delayed", "bf16_with_fp8_current_scaling_mixed": "tensorwise",
              "bf16_with_fp8_subchannel_scaling_mixed": "blockwise",
              "bf16_with_mxfp8_mixed": "mxfp8"}


class NemoOverrides(NamedTuple):
    """A NeMo 2 / Megatron-Bridge command line read: ``training:`` fields, the cluster
    its trainer settings name (``launcher``), what was derived and what was ignored."""

    fields: Mapping[str, object]
    launcher: Mapping[str, int]
    applied: tuple[str, ...]
    ignored: tuple[str, ...]


def _recipe_name(word: str) -> str:
    w = word.rsplit(".", 1)[-1]
    for suffix in ("_pretrain_config", "_pretrain_recipe", ".pretrain_recipe",
                   "_pretrain"):
        w = w.removesuffix(suffix)
    return w.replace("-", "_").lower()


def read_nemo(text: str) -> NemoOverrides:
    """The ``training:`` fields of a NeMo 2 / Megatron-Bridge recipe command line (the
    recipe and its ``key=value`` overrides); see the module."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"cannot split the command line: {e}", field=FIELD) from None
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    launcher: dict[str, int] = {}
    applied: list[str] = []
    ignored: list[str] = []
    recipe = None
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("--factory", "-f", "--recipe", "recipe"):
            if i + 1 >= len(words):
                raise ConfigError(f"{w} needs a recipe name", field=FIELD)
            recipe = words[i + 1]
            i += 2
            continue
        if w.startswith(("--factory=", "--recipe=", "recipe=")):
            recipe = w.split("=", 1)[1]
            i += 1
            continue
        i += 1
        if "=" not in w or w.startswith("-"):
            continue  # the launcher and script: nemo llm pretrain, python x.py, --yes
        key, _, val = w.partition("=")
        key = key.removeprefix("recipe.").removeprefix("pretrain.").removeprefix("cfg.")
        val = val.strip("'\"")
        field: str | None = None
        conv: Callable[[str, str], Any] | None = None
        if key in ("trainer.num_nodes", "trainer.devices"):
            launcher["nodes" if key.endswith("num_nodes") else "gpus_per_node"] = \
                _int(val, key)
            continue
        if key in ("trainer.plugins", "mixed_precision", "model.mixed_precision"):
            prec = _PRECISION.get(val)
            if prec is None:
                raise ConfigError(f"{key}={val}: known precision recipes "
                                  f"{', '.join(_PRECISION)}", field=FIELD)
            out["precision"] = prec
            if val in _RECIPE_OF:
                out["fp8_recipe"] = _RECIPE_OF[val]
            continue
        for prefix, table in (("trainer.strategy.", _STRATEGY), ("model.config.", _MODEL),
                              ("model.", {**_STRATEGY, **_MODEL}), ("data.", _DATA),
                              ("train.", _DATA)):
            if key.startswith(prefix):
                sub = key[len(prefix):]
                if sub in table:
                    field, conv = table[sub]
                elif sub in _HARMLESS or sub.split(".")[0] in _HARMLESS:
                    ignored.append(key)
                    field = ""
                else:
                    raise ConfigError(
                        f"unknown key {key}: not in the NeMo 2 / Megatron-Bridge versions "
                        f"this reader knows; remove it or give the job as fabricsim flags",
                        field=FIELD)
                break
        if field is None:
            ignored.append(key)
            continue
        if not field or conv is None:
            continue
        value = conv(val, key)
        if field in out and out[field] != value:
            raise ConfigError(f"{seen[field]}={out[field]} and {key}={value} contradict each "
                              f"other; keep one", field=FIELD)
        out[field], seen[field] = value, key
    if recipe is None:
        raise ConfigError("no recipe: give --factory NAME (NeMo 2) or --recipe NAME "
                          "(Megatron-Bridge), e.g. --factory llama3_8b", field=FIELD)
    preset = NEMO_RECIPES.get(_recipe_name(recipe))
    if preset is None:
        raise ConfigError(f"recipe {recipe!r} has no fabricsim preset; known: "
                          f"{', '.join(NEMO_RECIPES)}", field=FIELD)
    out["model"] = preset
    applied.append(f"model {preset} from the recipe {recipe}; what the recipe sets and "
                   f"the overrides leave alone (its layout, batch, precision) takes "
                   f"fabricsim's defaults unless given")
    if launcher:
        applied.append("cluster from the trainer: " + ", ".join(
            f"{k.replace('_', ' ')} {v}" for k, v in launcher.items()))
    return NemoOverrides(MappingProxyType(out), MappingProxyType(launcher), tuple(applied),
                         tuple(ignored))
