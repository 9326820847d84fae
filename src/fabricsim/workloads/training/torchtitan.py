"""Read a torchtitan job config (TOML) into a ``training:`` section.

torchtitan runs from a TOML file (``torchtitan/models/<model>/train_configs/*.toml``):
``[model]`` names the model and its converters (``float8``, ``mx``), ``[training]`` the
batch and sequence, ``[parallelism]`` the FSDP2 / tensor / pipeline / context / expert
degrees, ``[activation_checkpoint]`` the recomputation. :func:`read_torchtitan` maps those
onto fabricsim's fields (FSDP2 as ``zero: fsdp`` on PyTorch's implementation), says what
it derived, and lists what it ignored. It knows torchtitan's two layouts: the current one
(``[parallelism]``, ``training.local_batch_size``) and the 2024 one (the degrees and
``batch_size`` under ``[training]``). A key it does not know in a section it reads is a
ConfigError naming it: a config of a torchtitan version it does not know is refused, not
half read. The cluster is not in the file (torchtitan is launched by ``torchrun``): give
it as for any job.

Example
-------
>>> t = read_torchtitan('''
... [model]
... name = "llama3"
... flavor = "8B"
... [training]
... local_batch_size = 2
... seq_len = 8192
... [parallelism]
... data_parallel_shard_degree = 8
... tensor_parallel_degree = 2
... [activation_checkpoint]
... mode = "full"
... ''')
>>> f = t.fields
>>> f["model"], f["tp"], f["zero"], f["global_batch"], f["micro_batch"], f["recompute"]
('llama3-8b', 2, 'fsdp', 16, 2, 'full')
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from fabricsim.errors import ConfigError

__all__ = ["TORCHTITAN_MODELS", "TorchtitanConfig", "read_torchtitan"]

FIELD = "--from-torchtitan"

#: torchtitan (model name, flavor) -> fabricsim model preset.
TORCHTITAN_MODELS: dict[tuple[str, str], str] = {
    ("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b",
    ("llama3", "405B"): "llama3-405b",
    ("llama3.1", "8B"): "llama3-8b", ("llama3.1", "70B"): "llama3-70b",
    ("llama3.1", "405B"): "llama3-405b",
    ("deepseek_v3", "671B"): "deepseek-v3",
    ("qwen3", "30B-A3B"): "qwen3-30b-a3b", ("qwen3", "235B-A22B"): "qwen3-235b-a22b",
}

#: Keys read from each section, by torchtitan layout; everything else in these sections
#: that is listed in ``_HARMLESS`` is ignored, anything else refused.
_READ = {
    "model": {"name", "flavor", "converters"},
    "training": {"local_batch_size", "batch_size", "global_batch_size", "seq_len",
                 "mixed_precision_param", "mixed_precision_reduce", "dtype",
                 # 2024 layout: the parallel degrees lived here
                 "data_parallel_replicate_degree", "data_parallel_shard_degree",
                 "tensor_parallel_degree", "context_parallel_degree",
                 "enable_float8_linear"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree",
                    "tensor_parallel_degree", "pipeline_parallel_degree",
                    "context_parallel_degree", "expert_parallel_degree",
                    "expert_tensor_parallel_degree", "pipeline_parallel_microbatch_size",
                    "pipeline_parallel_schedule", "fsdp_reshard_after_forward",
                    "enable_async_tensor_parallel"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
}
#: Keys of those sections with no effect on the step time (paths, steps, data, logging).
_HARMLESS = {
    "model": {"tokenizer_path", "hf_assets_path", "print_after_conversion"},
    "training": {"max_norm", "steps", "dataset", "dataset_path", "warmup_steps", "seed",
                 "deterministic", "gc_freq", "gc_debug", "enable_cpu_offload",
                 "max_norm_type", "debug_moe_force_load_balance", "compile"},
    "parallelism": {"pipeline_parallel_split_points", "module_fqns_per_model_part",
                    "pipeline_parallel_layers_per_stage", "disable_loss_parallel",
                    "enable_compiled_autograd", "pipeline_parallel_first_stage_less_layers",
                    "pipeline_parallel_last_stage_less_layers", "context_parallel_rotate_method",
                    "tensor_parallel_only_attention"},
    "activation_checkpoint": {"per_op_sac_force_recompute_mm_shapes_by_fqns",
                              "early_stop", "preserve_rng_state", "determinism_check",
                              "debug"},
}


class TorchtitanConfig(NamedTuple):
    """A torchtitan TOML read: ``training:`` fields, what was derived (``applied``), and
    the keys with no effect on the step time (``ignored``)."""

    fields: Mapping[str, object]
    applied: tuple[str, ...]
    ignored: tuple[str, ...]


def _int(v: Any, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{key} must be an integer, got {v!r}", field=FIELD)
    return v


def read_torchtitan(text: str) -> TorchtitanConfig:
    """The ``training:`` fields of a torchtitan job config (TOML text); see the module."""
    try:
        cfg = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not a TOML file: {e}", field=FIELD) from None
    applied: list[str] = []
    ignored: list[str] = []
    for sec, keys in _READ.items():
        body = cfg.get(sec, {})
        if not isinstance(body, dict):
            raise ConfigError(f"[{sec}] must be a table", field=FIELD)
        for k in body:
            if k not in keys and k not in _HARMLESS[sec]:
                raise ConfigError(
                    f"unknown key {sec}.{k}: not in the torchtitan configs this reader knows "
                    f"(2024-2025; [parallelism] or the older [training] degrees); remove it "
                    f"or give the job as fabricsim flags", field=FIELD)
            if k in _HARMLESS[sec]:
                ignored.append(f"{sec}.{k}")
    ignored += sorted(s for s in cfg if s not in _READ)
    model = cfg.get("model", {})
    train = cfg.get("training", {})
    par = {**{k: v for k, v in train.items() if k.endswith("_degree")},
           **cfg.get("parallelism", {})}
    out: dict[str, Any] = {}
    name, flavor = model.get("name"), str(model.get("flavor", ""))
    if name is None:
        raise ConfigError("no [model] name: torchtitan's configs name the model (e.g. name = "
                          "\"llama3\", flavor = \"8B\")", field=FIELD)
    preset = TORCHTITAN_MODELS.get((str(name), flavor))
    if preset is None:
        known = ", ".join(f"{n} {f}" for n, f in TORCHTITAN_MODELS)
        raise ConfigError(f"[model] {name} {flavor!r} has no fabricsim preset; known: "
                          f"{known} (or give --model and the shape as flags)", field=FIELD)
    out["model"] = preset
    for key, field in (("tensor_parallel_degree", "tp"), ("pipeline_parallel_degree", "pp"),
                       ("context_parallel_degree", "cp"), ("expert_parallel_degree", "ep"),
                       ("expert_tensor_parallel_degree", "etp")):
        if key in par:
            v = _int(par[key], key)
            if v < 1:
                raise ConfigError(f"{key} must be at least 1, got {v}", field=FIELD)
            if field != "etp" or out.get("ep", 1) > 1:
                out[field] = v
    shard = _int(par.get("data_parallel_shard_degree", -1), "data_parallel_shard_degree")
    rep = _int(par.get("data_parallel_replicate_degree", 1), "data_parallel_replicate_degree")
    if rep < 1 or shard == 0 or shard < -1:
        raise ConfigError("data_parallel_replicate_degree must be >= 1 and "
                          "data_parallel_shard_degree >= 1 or -1 (the rest)", field=FIELD)
    if shard != 1:
        out["zero"], out["fsdp_impl"] = "fsdp", "pytorch"
    if shard > 1 or rep > 1:
        if shard > 0:
            out["dp"] = shard * rep
        if rep > 1 and shard > 1:
            out["fsdp_shard_size"] = shard
            applied.append(f"HSDP: {rep} replicas of {shard}-rank FSDP shard groups")
        elif rep > 1 and shard == -1:
            applied.append(f"HSDP ({rep} replicas of the rest as shards) timed as FSDP "
                           f"over every data-parallel rank (give --fsdp-shard-size)")
    reshard = par.get("fsdp_reshard_after_forward")
    if reshard in ("always", "never"):
        out["reshard_after_forward"] = reshard == "always"
    local = train.get("local_batch_size", train.get("batch_size"))
    mb_pp = par.get("pipeline_parallel_microbatch_size")
    if local is not None:
        local = _int(local, "training.local_batch_size")
        dp = out.get("dp")
        glob = train.get("global_batch_size", -1)
        if isinstance(glob, int) and glob > 0:
            out["global_batch"] = glob
        elif dp is not None:
            out["global_batch"] = local * dp
        elif out.get("pp", 1) == 1:
            applied.append(f"local batch {local} per data-parallel rank (shard degree -1: "
                           f"the data-parallel size, and so the global batch, follow from "
                           f"the cluster)")
        else:
            applied.append(f"local batch {local} per data-parallel rank with pipelining and "
                           f"shard degree -1: give --global-batch (local batch x "
                           f"data-parallel size) for torchtitan's; fabricsim's default used")
        pp_micro = _int(mb_pp, "pipeline_parallel_microbatch_size") if mb_pp is not None \
            else 1
        out["micro_batch"] = pp_micro if out.get("pp", 1) > 1 else local
    if out.get("pp", 1) > 1:
        sched = str(par.get("pipeline_parallel_schedule", "1F1B"))
        if "interleaved" not in sched.lower() and "looped" not in sched.lower():
            out["vp"] = 1  # torchtitan's default schedule, 1F1B, does not interleave
    if "seq_len" in train:
        out["seq_len"] = _int(train["seq_len"], "training.seq_len")
    mode = cfg.get("activation_checkpoint", {}).get("mode", "selective")
    if mode not in ("none", "selective", "full"):
        raise ConfigError(f"activation_checkpoint.mode must be none, selective or full, got "
                          f"{mode!r}", field=FIELD)
    out["recompute"] = mode
    convs = model.get("converters", [])
    convs = [convs] if isinstance(convs, str) else list(convs)
    # converter names: "float8"/"mx", or newer torchtitan's "quantize.linear.float8"/...mx
    kinds = {str(c).rsplit(".", 1)[-1] for c in convs}
    if "float8" in kinds or train.get("enable_float8_linear"):
        out["precision"], out["fp8_recipe"] = "fp8", "torchao"
    elif "mx" in kinds:
        out["precision"], out["fp8_recipe"] = "fp8", "mxfp8"
    reduce = train.get("mixed_precision_reduce", "float32")
    out["grad_reduce_dtype"] = "bf16" if reduce == "bfloat16" else "fp32"
    param = train.get("mixed_precision_param", "bfloat16")
    if param not in ("bfloat16", "float32"):
        raise ConfigError(f"training.mixed_precision_param {param!r}: bfloat16 or float32",
                          field=FIELD)
    if param == "float32" and out.get("precision") != "fp8":
        applied.append("mixed_precision_param float32: FP32 training is not modelled; timed "
                       "as BF16")
    return TorchtitanConfig(MappingProxyType(out), tuple(applied), tuple(ignored))
