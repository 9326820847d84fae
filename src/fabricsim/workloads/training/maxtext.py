"""Read a MaxText config (YAML) into a ``training:`` section.

MaxText jobs are YAML files over ``base.yml`` (``MaxText/configs/*.yml``): ``model_name``
picks the model, ``per_device_batch_size`` and ``max_target_length`` the batch and
sequence, the ``ici_*_parallelism`` (inside a slice or server) and ``dcn_*_parallelism``
(across them) degrees shard the mesh, ``remat_policy`` sets the recomputation and
``quantization`` the low precision. :func:`read_maxtext` maps those onto fabricsim's fields:
the FSDP axes as ``zero: fsdp`` (GSPMD shards parameters, gradients and optimizer state
over them), ``tensor`` as TP, ``sequence`` (or ``context``) as CP, ``stage`` as PP,
``expert`` as EP; a degree of -1 takes every device the others leave, as in MaxText. The
global batch is ``per_device_batch_size`` times the devices, as MaxText counts it. A key
this reader does not know is refused when it is a parallelism degree (a MaxText version it
does not know), listed as ignored otherwise. The cluster is not in the file: give it.

Example
-------
>>> m = read_maxtext('''
... base_config: "base.yml"
... model_name: "llama2-70b"
... per_device_batch_size: 6
... max_target_length: 4096
... remat_policy: "full"
... ici_fsdp_parallelism: -1
... ici_tensor_parallelism: 1
... ''')
>>> f = m.fields
>>> f["model"], f["zero"], f["micro_batch"], f["seq_len"], f["recompute"]
('llama2-70b', 'fsdp', 6, 4096, 'full')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import yaml

from fabricsim.errors import ConfigError

__all__ = ["MAXTEXT_MODELS", "MaxTextConfig", "read_maxtext"]

FIELD = "--from-maxtext"

#: MaxText ``model_name`` -> fabricsim model preset.
MAXTEXT_MODELS = {
    "llama2-7b": "llama2-7b", "llama2-13b": "llama2-13b", "llama2-70b": "llama2-70b",
    "llama3-8b": "llama3-8b", "llama3-70b": "llama3-70b", "llama3.1-8b": "llama3-8b",
    "llama3.1-70b": "llama3-70b", "llama3.1-405b": "llama3-405b",
    "llama3.3-70b": "llama3-70b", "mixtral-8x7b": "mixtral-8x7b",
    "mixtral-8x22b": "mixtral-8x22b", "deepseek3-671b": "deepseek-v3",
    "gpt3-175b": "gpt3-175b", "qwen3-30b-a3b": "qwen3-30b-a3b",
    "qwen3-235b-a22b": "qwen3-235b-a22b", "gpt-oss-120b": "gpt-oss-120b",
    "kimi-k2-1t": "kimi-k2", "llama4-17b-16e": "llama4-scout",
}
#: Mesh axes (MaxText's names) -> the fabricsim field they set; FSDP-like axes -> "dp".
_AXES = {"data": "dp", "fsdp": "dp", "fsdp_transpose": "dp", "tensor": "tp",
         "tensor_transpose": "tp", "tensor_sequence": "tp", "sequence": "cp",
         "context": "cp", "context_autoregressive": "cp", "stage": "pp", "pipeline": "pp",
         "expert": "ep", "autoregressive": "tp"}
#: remat_policy -> recompute: "full" recomputes every layer, "minimal*"/"save_*" policies
#: keep the big matmul outputs (Megatron's selective), "none" keeps everything.
_REMAT = {"full": "full", "none": "none", "minimal": "selective",
          "minimal_with_context": "selective", "save_dot_except_mlp": "selective",
          "save_dot_except_mlpwi": "selective", "save_dot_with_context_except_mlp":
          "selective", "save_qkv_proj": "selective", "save_out_proj": "selective",
          "qkv_proj_offloaded": "selective", "minimal_offloaded": "selective",
          "custom": "selective"}


class MaxTextConfig(NamedTuple):
    """A MaxText config read: ``training:`` fields, what was derived, what was ignored."""

    fields: Mapping[str, object]
    applied: tuple[str, ...]
    ignored: tuple[str, ...]


def _degree(v: Any, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v == 0 or v < -1:
        raise ConfigError(f"{key} must be a positive integer or -1 (the devices the other "
                          f"axes leave), got {v!r}", field=FIELD)
    return v


class _NoAliases(yaml.SafeLoader):
    """YAML without aliases (``*name``): a MaxText config has none, and a few of them
    nested expand a small file into an exponentially large value (an alias bomb)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise ConfigError("YAML aliases (*name) are not read in a MaxText config; write "
                              "the values out", field=FIELD)
        return super().compose_node(parent, index)


def read_maxtext(text: str) -> MaxTextConfig:
    """The ``training:`` fields of a MaxText config (YAML text); see the module."""
    try:
        cfg = yaml.load(text, Loader=_NoAliases)
    except yaml.YAMLError as e:
        raise ConfigError(f"not a YAML file: {e}", field=FIELD) from None
    if not isinstance(cfg, dict):
        raise ConfigError("a MaxText config is a mapping of keys (model_name: ..., "
                          "per_device_batch_size: ...)", field=FIELD)
    out: dict[str, Any] = {}
    applied: list[str] = []
    name = cfg.get("model_name")
    for key in ("model_name", "remat_policy", "quantization", "dtype"):
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise ConfigError(f"{key} must be a string, got {type(cfg[key]).__name__}",
                              field=FIELD)
    if name is None or str(name) == "default":
        raise ConfigError("no model_name: give MaxText's model (e.g. model_name: "
                          "\"llama2-70b\")", field=FIELD)
    preset = MAXTEXT_MODELS.get(str(name))
    if preset is None:
        raise ConfigError(f"model_name {name!r} has no fabricsim preset; known: "
                          f"{', '.join(MAXTEXT_MODELS)}", field=FIELD)
    out["model"] = preset
    degrees: dict[str, list[int]] = {}
    used: set[str] = {"model_name"}
    for key, v in cfg.items():
        k = str(key)
        if k.endswith("_parallelism") and k.startswith(("ici_", "dcn_")):
            axis = k[4:-len("_parallelism")]
            if axis not in _AXES:
                raise ConfigError(f"unknown key {k}: not a mesh axis of the MaxText versions "
                                  f"this reader knows ({', '.join(sorted(_AXES))})",
                                  field=FIELD)
            degrees.setdefault(_AXES[axis], []).append(_degree(v, k))
            used.add(k)
    auto = [k for k, ds in degrees.items() if -1 in ds]
    if len(auto) > 1:
        raise ConfigError(f"-1 given on more than one kind of axis ({', '.join(auto)}): "
                          f"MaxText fills one", field=FIELD)
    for field, ds in degrees.items():
        if field == "dp" or -1 in ds:
            continue
        prod = 1
        for d in ds:
            prod *= d
        if prod > 1:
            out[field] = prod
    # FSDP where an fsdp axis shards (base.yml's default: ici_fsdp_parallelism -1); the
    # "data" axis alone replicates the weights
    fsdp = [cfg.get(f"{w}_{a}_parallelism", -1 if (w, a) == ("ici", "fsdp") else 1)
            for w in ("ici", "dcn") for a in ("fsdp", "fsdp_transpose")]
    if any(d != 1 for d in fsdp):
        out["zero"], out["fsdp_impl"] = "fsdp", "pytorch"
        applied.append("GSPMD's FSDP sharding timed as FSDP (weights gathered per layer, "
                       "gradients reduce-scattered)")
    else:
        out["zero"] = 0
    # base.yml's dcn_data_parallelism is -1: data parallelism fills what the other axes
    # leave unless the config fixes it
    if "dp" in degrees and -1 not in degrees["dp"] and "dcn_data_parallelism" in cfg:
        prod = 1
        for d in degrees["dp"]:
            prod *= d
        out["dp"] = prod
    if "per_device_batch_size" in cfg:
        pdbs = cfg["per_device_batch_size"]
        used.add("per_device_batch_size")
        if isinstance(pdbs, bool) or not isinstance(pdbs, (int, float)) or pdbs <= 0:
            raise ConfigError(f"per_device_batch_size must be a positive number, got "
                              f"{pdbs!r}", field=FIELD)
        share = int(out.get("tp", 1)) * int(out.get("cp", 1))
        # one data-parallel rank's micro-batch: the batch of every device of one stage
        micro = pdbs * share
        if micro != int(micro):
            raise ConfigError(f"per_device_batch_size {pdbs} x the {share} devices of a "
                              f"data-parallel rank is not a whole number of sequences",
                              field=FIELD)
        out["micro_batch"] = int(micro)
        pp = int(out.get("pp", 1))
        if pp > 1:
            out["vp"] = 1  # MaxText's pipeline is not timed as interleaved
        if pp > 1 and "dp" in out:  # MaxText's pipeline: one micro-batch per stage
            out["global_batch"] = int(micro) * int(out["dp"]) * pp
        elif pp > 1:
            applied.append(f"pipelining with data parallelism filling the cluster: give "
                           f"--global-batch {pdbs} x the GPUs for MaxText's global batch; "
                           f"fabricsim's default used")
        applied.append(f"global batch: per_device_batch_size {pdbs} x every device, as "
                       f"MaxText counts it")
    if "max_target_length" in cfg:
        used.add("max_target_length")
        v = cfg["max_target_length"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"max_target_length must be a positive integer, got {v!r}",
                              field=FIELD)
        out["seq_len"] = v
    remat = str(cfg.get("remat_policy", "full"))
    used.add("remat_policy")
    if remat not in _REMAT:
        raise ConfigError(f"remat_policy {remat!r}: known {', '.join(_REMAT)}", field=FIELD)
    out["recompute"] = _REMAT[remat]
    quant = str(cfg.get("quantization", "") or "")
    used.add("quantization")
    if quant in ("fp8", "nanoo_fp8", "fp8_full", "te_fp8_delayedscaling"):
        out["precision"] = "fp8"
    elif quant not in ("", "bf16"):
        raise ConfigError(f"quantization {quant!r}: fabricsim models BF16 and FP8 training "
                          f"(fp8, nanoo_fp8)", field=FIELD)
    dtype = str(cfg.get("dtype", "bfloat16"))
    used.add("dtype")
    if dtype not in ("bfloat16", "float32"):
        raise ConfigError(f"dtype {dtype!r}: bfloat16 or float32", field=FIELD)
    if dtype == "float32":
        applied.append("dtype float32: FP32 training is not modelled; timed as BF16")
    if cfg.get("gradient_accumulation_steps", 1) not in (1, None):
        steps = cfg["gradient_accumulation_steps"]
        used.add("gradient_accumulation_steps")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ConfigError(f"gradient_accumulation_steps must be a positive integer, got "
                              f"{steps!r}", field=FIELD)
        applied.append(f"gradient_accumulation_steps {steps}: the global batch is {steps} "
                       f"micro-batches per data-parallel rank (give --global-batch for it)")
    ignored = tuple(sorted(str(k) for k in cfg if str(k) not in used))
    return MaxTextConfig(MappingProxyType(out), tuple(applied), ignored)
