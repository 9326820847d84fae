"""Read a Megatron-LM / NeMo argument list into a ``training:`` section.

Users run Megatron with a long list of flags; ``fabricsim train --from-megatron "..."``
takes that list as it is pasted and maps the flags that shape the job (parallel sizes,
batch, sequence, pipeline split, recomputation, precision, overlap, model shape) onto
fabricsim's fields. Flags that do not change the step time (learning rate, data paths,
logging) are reported as ignored, never dropped silently.

Example
-------
>>> section, ignored = parse_megatron_args(
...     "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
...     "--num-layers-per-virtual-pipeline-stage 1 --num-layers 126 --sequence-parallel "
...     "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
...     "--recompute-granularity full --recompute-method block --recompute-num-layers 2 "
...     "--micro-batch-size 1 --global-batch-size 2048 --seq-length 8192 --lr 8e-5")
>>> section["tp"], section["pp"], section["vp"], section["recompute"]
(8, 16, 8, 'full')
>>> section["recompute_layers_per_chunk"]  # of each 1-layer chunk: every layer
2
>>> ignored
['--lr 8e-5']
>>> parse_megatron_args("--pipeline-model-parallel-layout 'Et|(tt|)*30mL' "
...                     "--moe-token-dispatcher-type flex")[0]["pipeline_layout"]
'Et|(tt|)*30mL'
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from fabricsim.errors import ConfigError

__all__ = ["MEGATRON_FLAGS", "MegatronArgs", "MegatronLine", "parse_megatron_args",
           "read_megatron_line"]


class MegatronArgs(NamedTuple):
    """A Megatron-LM / NeMo argument list as ``training:`` fields.

    ``fields`` maps each field the list sets (model shape, parallel layout, batch,
    precision, recomputation, overlap) to its value, read-only; a scenario's training
    section validates them with its own keys over them. ``ignored`` names the arguments
    with no effect on the step time, as given.
    """

    fields: Mapping[str, object]
    ignored: list[str]


class MegatronLine(NamedTuple):
    """A whole launch line read (:func:`read_megatron_line`): its :class:`MegatronArgs`,
    the values Megatron itself would derive or default that were used (``applied``: a
    derived FFN width, a padded vocabulary), and the cluster a launcher prefix gives
    (``launcher``: ``torchrun --nnodes N --nproc_per_node G`` is
    ``{"nodes": N, "gpus_per_node": G}``)."""

    args: MegatronArgs
    applied: tuple[str, ...]
    launcher: Mapping[str, int]


def _window(v: str, flag: str) -> int:
    """Megatron's ``--window-size`` (left, right context: ``128 0`` or ``(128,0)``) as the
    causal window's width; a right context other than 0 is not causal attention."""
    parts = [x for x in v.replace("(", " ").replace(")", " ").replace(",", " ").split()
             if x]
    if len(parts) != 2 or not all(x.lstrip("-").isdigit() for x in parts):
        raise ConfigError(f"{flag} takes two integers (left and right context, e.g. "
                          f"'128 0'), got {v!r}", field="--from-megatron")
    left, right = int(parts[0]), int(parts[1])
    if right != 0 or left < 1:
        raise ConfigError(f"{flag} {v}: only a causal window (left >= 1, right 0) is "
                          f"modelled", field="--from-megatron")
    return left


def _int(v: str, flag: str) -> int:
    try:
        return int(v)
    except ValueError:
        raise ConfigError(f"{flag} takes an integer, got {v!r}", field="--from-megatron") \
            from None


def _float(v: str, flag: str) -> float:
    try:
        return float(v)
    except ValueError:
        raise ConfigError(f"{flag} takes a number, got {v!r}", field="--from-megatron") \
            from None


#: Megatron flag -> (fabricsim field, converter). ``None`` as converter: a switch (no
#: value) that sets the field to True.
MEGATRON_FLAGS: dict[str, tuple[str, Callable[[str, str], Any] | None]] = {
    "--tensor-model-parallel-size": ("tp", _int),
    "--pipeline-model-parallel-size": ("pp", _int),
    "--context-parallel-size": ("cp", _int),
    "--expert-model-parallel-size": ("ep", _int),
    "--expert-tensor-parallel-size": ("etp", _int),
    "--virtual-pipeline-model-parallel-size": ("vp", _int),
    "--num-layers-per-virtual-pipeline-stage": ("_layers_per_vstage", _int),
    "--num-virtual-stages-per-pipeline-rank": ("_vstages", _int),
    "--micro-batch-size": ("micro_batch", _int),
    "--global-batch-size": ("global_batch", _int),
    "--seq-length": ("seq_len", _int),
    "--sequence-parallel": ("sequence_parallel", None),
    "--recompute-granularity": ("recompute", lambda v, f: v),
    "--recompute-activations": ("_recompute_act", None),
    "--recompute-method": ("_recompute_method", lambda v, f: v),
    "--recompute-num-layers": ("_recompute_num_layers", _int),
    "--cpu-offloading-num-layers": ("offload_layers", _int),
    "--recompute-modules": ("recompute_modules", lambda v, f: v.split()),
    "--fp8-format": ("_fp8", lambda v, f: v),
    "--fp8-recipe": ("fp8_recipe", lambda v, f: v),
    "--fp4-format": ("_fp4", lambda v, f: v),
    "--fp4-recipe": ("_fp4_recipe", lambda v, f: v),
    "--kv-channels": ("head_dim", _int),
    "--window-size": ("attn_window", _window),
    "--window-attn-skip-freq": ("window_skip_freq", _int),
    "--moe-ffn-hidden-size": ("moe_ffn", _int),
    "--bf16": ("precision", None),
    "--use-distributed-optimizer": ("zero", None),
    "--grad-reduce-in-bf16": ("_grad_bf16", None),
    "--accumulate-allreduce-grads-in-fp32": ("_grad_fp32", None),
    "--main-grads-dtype": ("_main_grads", lambda v, f: v),
    "--megatron-fsdp-main-grads-dtype": ("_mfsdp_main", lambda v, f: v),
    "--megatron-fsdp-grad-comm-dtype": ("_mfsdp_comm", lambda v, f: v),
    "--use-megatron-fsdp": ("_megatron_fsdp", None),
    "--use-torch-fsdp2": ("_torch_fsdp2", None),
    "--data-parallel-sharding-strategy": ("_dp_shard", lambda v, f: v),
    "--overlap-grad-reduce": ("overlap_grad_reduce", None),
    "--overlap-param-gather": ("overlap_param_gather", None),
    "--tp-comm-overlap": ("tp_comm_overlap", None),
    "--overlap-moe-expert-parallel-comm": ("ep_overlap", None),
    "--moe-token-dispatcher-type": ("_dispatcher", lambda v, f: v),
    "--moe-enable-deepep": ("_deepep", None),
    "--moe-flex-dispatcher-backend": ("_flex_backend", lambda v, f: v),
    "--overlap-p2p-communication": ("overlap_p2p_comm", None),
    "--no-overlap-p2p-communication": ("overlap_p2p_comm", None),
    "--decoder-first-pipeline-num-layers": ("first_stage_layers", _int),
    "--decoder-last-pipeline-num-layers": ("last_stage_layers", _int),
    "--pipeline-model-parallel-layout": ("pipeline_layout", lambda v, f: v),
    "--account-for-embedding-in-pipeline-split": ("_acc_emb", None),
    "--account-for-loss-in-pipeline-split": ("_acc_loss", None),
    "--num-layers": ("layers", _int),
    "--hidden-size": ("hidden", _int),
    "--ffn-hidden-size": ("ffn", _int),
    "--num-attention-heads": ("heads", _int),
    "--num-query-groups": ("kv_heads", _int),
    "--group-query-attention": ("_gqa", None),
    "--num-experts": ("experts", _int),
    "--vocab-size": ("_vocab", _int),
    "--tokenizer-type": ("_tokenizer", lambda v, f: v),
    "--merge-file": ("_merge_file", lambda v, f: v),
    "--make-vocab-size-divisible-by": ("_vocab_div", _int),
    "--swiglu": ("_swiglu", None),
    "--untie-embeddings-and-output-weights": ("_untie", None),
    "--fp16": ("_fp16", None),
    "--nnodes": ("_nnodes", lambda v, f: v),
    "--nproc_per_node": ("_nproc", _int),
    "--nproc-per-node": ("_nproc", _int),
    "--moe-router-topk": ("top_k", _int),
    "--moe-shared-expert-intermediate-size": ("_shared_width", _int),
    "--moe-layer-freq": ("_layer_freq", lambda v, f: v),
    "--multi-latent-attention": ("_mla", None),
    "--q-lora-rank": ("_q_lora", _int),
    "--kv-lora-rank": ("_kv_lora", _int),
    "--qk-head-dim": ("_qk_dim", _int),
    "--qk-pos-emb-head-dim": ("_qk_pos", _int),
    "--v-head-dim": ("_v_dim", _int),
    "--moe-router-num-groups": ("router_groups", _int),
    "--moe-expert-capacity-factor": ("moe_capacity_factor", _float),
    "--moe-pad-expert-input-to-capacity": ("moe_pad_to_capacity", None),
    "--moe-router-group-topk": ("router_group_topk", _int),
    "--hybrid-layer-pattern": ("_hybrid", lambda v, f: v),
    "--hybrid-override-pattern": ("_hybrid", lambda v, f: v),
    "--mamba-num-heads": ("mamba_heads", _int),
    "--mamba-head-dim": ("mamba_head_dim", _int),
    "--mamba-state-dim": ("mamba_state", _int),
    "--mamba-num-groups": ("mamba_groups", _int),
    "--moe-latent-size": ("moe_latent", _int),
}

#: Flags that take several values (argparse nargs="+").
_MULTI_VALUE = frozenset({"--recompute-modules", "--window-size"})

#: Megatron-FSDP's --data-parallel-sharding-strategy as a ZeRO stage (Megatron's default:
#: optim_grads_params, ZeRO-3).
_SHARDING: dict[str, int | str] = {"no_shard": 0, "optim": 1, "optim_grads": 2,
                                   "optim_grads_params": "fsdp"}

#: Switches whose field takes a value other than True.
_SWITCH_VALUES = {"--bf16": "bf16", "--use-distributed-optimizer": 1,
                  "--no-overlap-p2p-communication": False}


def parse_megatron_args(text: str) -> MegatronArgs:
    """Map a Megatron/NeMo argument list onto ``training:`` fields
    (:func:`read_megatron_line` also returns what was derived and the launcher's cluster).

    >>> s = parse_megatron_args("--tensor-model-parallel-size=4 --bf16 --fp8-format hybrid")[0]
    >>> s["tp"], s["precision"], s["sequence_parallel"], s["zero"]
    (4, 'fp8', False, 0)
    """
    return read_megatron_line(text).args


def read_megatron_line(text: str) -> MegatronLine:
    """Map a Megatron/NeMo argument list onto ``training:`` fields.

    Returns the fields and the arguments that were ignored (as given). Both
    ``--flag value`` and ``--flag=value`` are read. Raises
    :class:`~fabricsim.errors.ConfigError` (field ``--from-megatron``) on a value that
    is not a number where one is needed, or on settings fabricsim cannot express.

    >>> s = parse_megatron_args("--tensor-model-parallel-size=4 --bf16 --fp8-format hybrid")[0]
    >>> s["tp"], s["precision"], s["sequence_parallel"], s["zero"]
    (4, 'fp8', False, 0)
    """
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"cannot split the argument list: {e}", field="--from-megatron") \
            from None
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}
    ignored: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        flag, eq, val = w.partition("=")
        spec = MEGATRON_FLAGS.get(flag)
        if spec is None:
            j = i + 1
            while j < len(words) and not words[j].startswith("--"):
                j += 1
            ignored.append(" ".join(words[i:j]))
            i = j
            continue
        field, conv = spec
        if conv is None:
            out[field] = _SWITCH_VALUES.get(flag, True)
            i += 1
            continue
        if not eq:
            if i + 1 >= len(words) or words[i + 1].startswith("--"):
                raise ConfigError(f"{flag} needs a value", field="--from-megatron")
            j = i + 2
            if flag in _MULTI_VALUE:  # nargs="+": every word up to the next flag
                while j < len(words) and not words[j].startswith("--"):
                    j += 1
            val = " ".join(words[i + 1:j])
            i = j
        else:
            i += 1
        value = conv(val, flag)
        if field in out and field in seen and out[field] != value:
            # argparse keeps the last; two different sizes in one pasted line are a
            # line assembled from two runs, whose step would be neither's
            raise ConfigError(f"{seen[field]} {out[field]} and {flag} {value} in one line: "
                              f"the sizes contradict each other (Megatron would silently "
                              f"take the last); keep one", field="--from-megatron")
        out[field] = value
        seen[field] = flag
    shard = out.get("_dp_shard")
    if shard is not None and shard not in _SHARDING:
        raise ConfigError(f"--data-parallel-sharding-strategy must be one of "
                          f"{', '.join(_SHARDING)}, got {shard!r}", field="--from-megatron")
    if shard is not None and not out.get("_megatron_fsdp"):  # read by Megatron-FSDP only
        ignored.append(f"--data-parallel-sharding-strategy {out.pop('_dp_shard')} (no "
                       f"--use-megatron-fsdp: it applies to Megatron-FSDP only)")
    hydra = [w for w in ignored if not w.startswith("-") and "=" in w.split()[0]]
    if hydra:
        raise ConfigError(f"{hydra[0].split()[0]} is a NeMo/Hydra override, not a Megatron "
                          f"argument: paste the NeMo line with --from-nemo, or Megatron-LM's "
                          f"flags (e.g. --tensor-model-parallel-size 4) here",
                          field="--from-megatron")
    if out.get("_fp8") not in (None, "e4m3", "hybrid"):
        raise ConfigError(f"--fp8-format must be e4m3 or hybrid, got {out['_fp8']!r}",
                          field="--from-megatron")
    if "kv_heads" in out and not out.get("_gqa"):  # Megatron reads it only under GQA
        ignored.append(f"--num-query-groups {out.pop('kv_heads')} (no "
                       f"--group-query-attention: Megatron then runs multi-head attention)")
    if out.get("overlap_param_gather") and not (
            out.get("zero") or out.get("_megatron_fsdp") or out.get("_torch_fsdp2")):
        raise ConfigError("--overlap-param-gather needs --use-distributed-optimizer (or "
                          "Megatron-FSDP), as Megatron asserts", field="--from-megatron")
    if out.get("overlap_param_gather") and not out.get("overlap_grad_reduce"):
        raise ConfigError("--overlap-param-gather needs --overlap-grad-reduce, as Megatron "
                          "asserts", field="--from-megatron")
    if out.get("_dispatcher") == "allgather":  # no all-gather dispatcher is modelled
        ignored.append("--moe-token-dispatcher-type allgather (timed as alltoall)")
    if "_recompute_num_layers" in out and "_recompute_method" not in out:
        ignored.append(f"--recompute-num-layers {out.pop('_recompute_num_layers')} (no "
                       f"--recompute-method: Megatron reads it only with one)")
    low = "NVFP4" if out.get("_fp4") else "BF16"
    if "fp8_recipe" in out and not out.get("_fp8"):  # Megatron reads it under --fp8-format
        ignored.append(f"--fp8-recipe {out.pop('fp8_recipe')} (no --fp8-format: {low})")
    if "_fp4_recipe" in out and not out.get("_fp4"):  # and this under --fp4-format
        ignored.append(f"--fp4-recipe {out.pop('_fp4_recipe')} (no --fp4-format: not FP4)")
    applied: list[str] = []
    launcher = _launcher(out, applied)
    if out.get("_fp16"):
        if out.get("precision") == "bf16":
            raise ConfigError("--fp16 and --bf16 both given: Megatron trains in one; keep "
                              "one", field="--from-megatron")
        out["precision"] = "bf16"
        applied.append("--fp16 timed as BF16 (the same tensor-core rate and 2-byte "
                       "tensors)")
    if (launcher or ("hidden" in out and "heads" in out)) and not any(
            out.get(k) for k in ("precision", "_fp8", "_fp4", "_fp16")):
        applied.append("no --bf16 or --fp16: Megatron trains in FP32, which is not "
                       "modelled; timed as BF16")
    _derive_shape(out, applied)
    return MegatronLine(MegatronArgs(MappingProxyType(_finish(out)), ignored),
                        tuple(applied), MappingProxyType(launcher))


def _launcher(raw: dict[str, Any], applied: list[str]) -> dict[str, int]:
    """The cluster of a launcher prefix (torchrun's ``--nnodes``, ``--nproc_per_node``)."""
    out: dict[str, int] = {}
    if "_nnodes" in raw:
        v = str(raw.pop("_nnodes"))
        lo, _, hi = v.partition(":")  # torchrun's elastic range MIN:MAX
        if not (lo.isdigit() and (not hi or hi.isdigit())) or int(hi or lo) < 1:
            raise ConfigError(f"--nnodes takes a node count (or MIN:MAX), got {v!r}",
                              field="--from-megatron")
        out["nodes"] = int(hi or lo)
    if "_nproc" in raw:
        out["gpus_per_node"] = int(raw.pop("_nproc"))
        if out["gpus_per_node"] < 1:
            raise ConfigError("--nproc_per_node must be at least 1", field="--from-megatron")
    if out:
        applied.append("cluster from the launcher: " + ", ".join(
            f"{k.replace('_', ' ')} {v}" for k, v in out.items()))
    return out


#: Vocabulary sizes of the tokenizers whose size is fixed (GPT-2's BPE: 50,257 tokens;
#: Llama 2's SentencePiece: 32,000), before Megatron's padding.
TOKENIZER_VOCAB = {"GPT2BPETokenizer": 50257, "Llama2Tokenizer": 32000}


def _derive_shape(raw: dict[str, Any], applied: list[str]) -> None:
    """What Megatron derives when the list defines a model: the FFN width from the hidden
    size (4h, or SwiGLU's two thirds of it rounded down to 64), the gated MLP and untied
    embeddings from their switches, and the vocabulary padded to a multiple of
    ``--make-vocab-size-divisible-by`` (128) times the tensor-parallel size."""
    defines = "hidden" in raw and "heads" in raw
    swiglu = bool(raw.pop("_swiglu", False))
    untie = bool(raw.pop("_untie", False))
    if defines:
        raw["gated"] = swiglu
        raw["tied_embeddings"] = not untie
        if "ffn" not in raw:
            h = int(raw["hidden"])
            raw["ffn"] = int(4 * h * 2 / 3 / 64) * 64 if swiglu else 4 * h
            applied.append(f"ffn {raw['ffn']} from --hidden-size {h} (Megatron's "
                           f"{'SwiGLU ' if swiglu else ''}default)")
    _derive_hybrid(raw, applied)
    _derive_moe(raw, applied)
    _derive_mla(raw, applied)
    div = raw.pop("_vocab_div", 128)
    tokenizer = raw.pop("_tokenizer", None)
    if raw.pop("_merge_file", None) is not None and tokenizer is None:
        # a BPE merges file and no tokenizer type: GPT-2's BPE, the one tokenizer
        # Megatron reads from --vocab-file and --merge-file
        tokenizer = "GPT2BPETokenizer"
        applied.append("--merge-file with no --tokenizer-type: GPT-2's BPE tokenizer")
    if "_vocab" not in raw and tokenizer in TOKENIZER_VOCAB:
        raw["_vocab"] = TOKENIZER_VOCAB[tokenizer]
        applied.append(f"vocab {raw['_vocab']} from the {tokenizer} tokenizer")
    if "_vocab" in raw:
        v = int(raw.pop("_vocab"))
        if v < 1 or div < 1:
            raise ConfigError("--vocab-size and --make-vocab-size-divisible-by must be at "
                              "least 1", field="--from-megatron")
        multiple = div * int(raw.get("tp", 1))
        padded = -(-v // multiple) * multiple
        raw["vocab"] = padded
        if padded != v:
            applied.append(f"vocab {v} padded to {padded} (a multiple of "
                           f"{div} x TP {raw.get('tp', 1)}, as Megatron pads it)")


#: Megatron's multi-latent-attention defaults (``arguments.py``: ``--q-lora-rank`` None,
#: i.e. no query compression, ``--kv-lora-rank`` 32, ``--qk-head-dim`` 128,
#: ``--qk-pos-emb-head-dim`` 64, ``--v-head-dim`` 128).
MLA_DEFAULTS = {"_q_lora": None, "_kv_lora": 32, "_qk_dim": 128, "_qk_pos": 64,
                "_v_dim": 128}
_MLA_FLAGS = {"_q_lora": "--q-lora-rank", "_kv_lora": "--kv-lora-rank",
              "_qk_dim": "--qk-head-dim", "_qk_pos": "--qk-pos-emb-head-dim",
              "_v_dim": "--v-head-dim"}


def _derive_mla(raw: dict[str, Any], applied: list[str]) -> None:
    """Multi-head latent attention (``--multi-latent-attention``) as the model's fields:
    the attention core's widths, the KV cache of one latent per token, and the weights of
    the down- and up-projections Megatron builds (DeepSeek's layout: queries through a
    ``--q-lora-rank`` latent when given, keys and values through ``--kv-lora-rank``)."""
    given = {k: raw.pop(k) for k in list(_MLA_FLAGS) if k in raw}
    if not raw.pop("_mla", False):
        if given:
            raise ConfigError(f"{_MLA_FLAGS[next(iter(given))]} needs "
                              f"--multi-latent-attention (Megatron reads it only then)",
                              field="--from-megatron")
        return
    if "hidden" not in raw or "heads" not in raw:
        return
    v = {**MLA_DEFAULTS, **given}
    h, heads = int(raw["hidden"]), int(raw["heads"])
    q_lora, kv_lora = v["_q_lora"], int(v["_kv_lora"])
    qk, pos, vd = int(v["_qk_dim"]), int(v["_qk_pos"]), int(v["_v_dim"])
    q_w = h * heads * (qk + pos) if q_lora is None else \
        h * int(q_lora) + int(q_lora) * heads * (qk + pos)
    up = kv_lora * heads * (qk + vd)
    raw["attn_core_width"] = qk + pos + vd
    raw["v_head_dim"] = vd
    raw["kv_latent"] = kv_lora + pos
    raw["attn_weights"] = q_w + h * (kv_lora + pos) + up + heads * vd * h
    raw["mla_up_params"] = up + (0 if q_lora is None else int(q_lora) * heads * (qk + pos))
    raw["mla_up_width"] = heads * (qk + vd) + (0 if q_lora is None else heads * (qk + pos))
    if raw.pop("head_dim", None) is not None:
        applied.append("--kv-channels not used: multi-latent attention's heads are "
                       "--qk-head-dim + --qk-pos-emb-head-dim wide")
    missing = [f"{_MLA_FLAGS[k]} {MLA_DEFAULTS[k]}" for k in _MLA_FLAGS
               if k not in given and MLA_DEFAULTS[k] is not None]
    applied.append(f"multi-latent attention: {raw['attn_weights'] / 1e6:.1f}M attention "
                   f"weights per layer, a {raw['kv_latent']}-element KV latent"
                   + ("; queries not compressed (no --q-lora-rank)" if q_lora is None else "")
                   + (f"; Megatron's defaults {', '.join(missing)}" if missing else ""))


def _layer_pattern(text: str, layers: int) -> list[int]:
    """Megatron's ``--moe-layer-freq``: an integer k (every k-th layer MoE, from the first)
    or a list expression such as ``([0]+[1]*15)`` or ``[0,1,1,1]`` (1: MoE)."""
    t = text.strip()
    if t.isdigit():
        k = int(t)
        if k < 1:
            raise ConfigError(f"--moe-layer-freq must be at least 1, got {t}",
                              field="--from-megatron")
        return [1 if i % k == 0 else 0 for i in range(layers)]
    out: list[int] = []
    body = t[1:-1] if t.startswith("(") and t.endswith(")") else t
    for term in body.replace(" ", "").split("+"):
        lst, star, times = term.partition("*")
        if not (lst.startswith("[") and lst.endswith("]")) or (star and not times.isdigit()):
            raise ConfigError(f"--moe-layer-freq {text!r}: expected an integer or a list "
                              f"expression such as ([0]+[1]*15)", field="--from-megatron")
        items = [x for x in lst[1:-1].split(",") if x]
        if any(x not in ("0", "1") for x in items):
            raise ConfigError(f"--moe-layer-freq {text!r}: list entries must be 0 or 1",
                              field="--from-megatron")
        reps = int(times) if star else 1
        if len(out) + len(items) * reps > layers:  # checked before anything is built
            raise ConfigError(f"--moe-layer-freq {text!r} describes more layers than "
                              f"--num-layers {layers}", field="--from-megatron")
        out += [int(x) for x in items] * reps
    if len(out) != layers:
        raise ConfigError(f"--moe-layer-freq {text!r} describes {len(out)} layers but "
                          f"--num-layers is {layers}", field="--from-megatron")
    return out


def _derive_hybrid(raw: dict[str, Any], applied: list[str]) -> None:
    """A hybrid model's block pattern (``--hybrid-layer-pattern``): its pipeline marks
    (``|``) dropped, its layers the pattern's blocks; multi-token-prediction blocks
    (after ``/``) refused."""
    pat = raw.pop("_hybrid", None)
    if pat is None:
        return
    pat = str(pat).strip().strip("\"'")
    if "/" in pat:
        raise ConfigError(f"--hybrid-layer-pattern {pat!r}: multi-token-prediction blocks "
                          f"(after /) are not modelled; drop them", field="--from-megatron")
    if "|" in pat:
        applied.append("pipeline marks (|) of --hybrid-layer-pattern dropped: stages split "
                       "its blocks evenly")
        pat = pat.replace("|", "")
    raw["hybrid_pattern"] = pat
    if "layers" not in raw:
        raw["layers"] = len(pat)
        applied.append(f"layers {len(pat)} from --hybrid-layer-pattern (one per block)")


def _derive_moe(raw: dict[str, Any], applied: list[str]) -> None:
    """Megatron's shared experts (one MLP ``--moe-shared-expert-intermediate-size`` wide,
    as that many expert widths) and dense layers (``--moe-layer-freq``)."""
    shared = raw.pop("_shared_width", None)
    if shared is not None:
        width = int(raw.get("moe_ffn") or raw.get("ffn") or 0)
        if width <= 0:
            raise ConfigError("--moe-shared-expert-intermediate-size needs "
                              "--moe-ffn-hidden-size (or --ffn-hidden-size) to compare with",
                              field="--from-megatron")
        n = max(1, round(int(shared) / width))
        raw["shared_experts"] = n
        note = "" if n * width == int(shared) else f" (rounded from {int(shared) / width:.2f})"
        applied.append(f"shared experts {n} from --moe-shared-expert-intermediate-size "
                       f"{shared} / expert width {width}{note}")
    freq = raw.pop("_layer_freq", None)
    if freq is not None and "layers" in raw:
        pattern = _layer_pattern(str(freq), int(raw["layers"]))
        dense = pattern.count(0)
        raw["dense_layers"] = dense
        leading = pattern[:dense] == [0] * dense
        applied.append(f"{dense} dense layer{'s' * (dense != 1)} from --moe-layer-freq"
                       + ("" if leading else " (modelled as the first layers: the pipeline "
                          "split may differ from Megatron's)"))


def _finish(raw: dict[str, Any]) -> dict[str, Any]:
    """Turn Megatron's forms into fabricsim's fields."""
    out = {k: v for k, v in raw.items() if not k.startswith("_")}
    if raw.get("_fp8") and raw.get("_fp4"):
        raise ConfigError("--fp8-format and --fp4-format both given: Megatron trains in one "
                          "low precision; keep one", field="--from-megatron")
    if raw.get("_fp8"):
        out["precision"] = "fp8"
    if raw.get("_fp4"):
        recipe = raw.get("_fp4_recipe", "nvfp4")
        if recipe != "nvfp4":
            raise ConfigError(f"--fp4-recipe {recipe}: only NVFP4 (Transformer Engine's "
                              f"NVFP4BlockScaling) is modelled; use --fp4-recipe nvfp4",
                              field="--from-megatron")
        out["precision"] = "fp4"
    if raw.get("_megatron_fsdp") and raw.get("_torch_fsdp2"):
        raise ConfigError("--use-megatron-fsdp and --use-torch-fsdp2 both given: Megatron "
                          "runs one FSDP; keep one", field="--from-megatron")
    # the gradient reduction's width: Megatron's DDP reduces in FP32 unless told BF16
    # (arguments.py turns accumulate_allreduce_grads_in_fp32 on for --bf16 with FP32 main
    # grads); Megatron-FSDP in its main-grad dtype (default: the parameters', BF16);
    # --use-torch-fsdp2 with no mixed-precision policy in the parameters' dtype
    if raw.get("_megatron_fsdp"):
        dtype = raw.get("_mfsdp_comm") or raw.get("_mfsdp_main") or "auto"
        out["grad_reduce_dtype"] = "fp32" if dtype == "fp32" else "bf16"
    elif raw.get("_torch_fsdp2"):
        out["grad_reduce_dtype"] = "bf16"
    else:
        out["grad_reduce_dtype"] = "bf16" if raw.get("_grad_bf16") \
            or raw.get("_main_grads") == "bf16" else "fp32"
    if raw.get("_torch_fsdp2"):  # what Megatron's arguments.py asserts for torch FSDP2
        for key, what in (("pp", "pipeline"), ("ep", "expert")):
            if out.get(key, 1) > 1:
                raise ConfigError(f"--use-torch-fsdp2 with {what} parallelism ({key}="
                                  f"{out[key]}): Megatron refuses it; use "
                                  f"--use-megatron-fsdp or {key} 1", field="--from-megatron")
        if out.get("zero") == 1:
            raise ConfigError("--use-torch-fsdp2 with --use-distributed-optimizer: Megatron "
                              "refuses it (FSDP2 shards the optimizer itself); drop "
                              "--use-distributed-optimizer", field="--from-megatron")
        out["zero"], out["fsdp_impl"] = "fsdp", "pytorch"
    if raw.get("_megatron_fsdp"):  # what Megatron-FSDP shards (default: everything)
        out["zero"] = _SHARDING[raw.get("_dp_shard") or "optim_grads_params"]
        if out["zero"] == "fsdp":
            out["fsdp_impl"] = "megatron"
    # Megatron's defaults where fabricsim's differ (fabricsim follows NeMo's recipes):
    # no sequence parallelism, no overlap, plain data parallelism unless asked
    for key, default in (("sequence_parallel", False), ("overlap_grad_reduce", False),
                         ("overlap_param_gather", False), ("zero", 0)):
        out.setdefault(key, default)
    vp_flags = [f for f, k in (("--virtual-pipeline-model-parallel-size", "vp"),
                               ("--num-layers-per-virtual-pipeline-stage",
                                "_layers_per_vstage"),
                               ("--num-virtual-stages-per-pipeline-rank", "_vstages"),
                               ("--pipeline-model-parallel-layout", "pipeline_layout"))
                if raw.get(k) is not None]
    if len(vp_flags) > 1:  # Megatron asserts at most one of them
        raise ConfigError(f"{' and '.join(vp_flags)} both set the virtual pipeline size; "
                          f"keep one", field="--from-megatron")
    for flag, key in (("--pipeline-model-parallel-size", "pp"),
                      ("--num-layers-per-virtual-pipeline-stage", "_layers_per_vstage"),
                      ("--num-virtual-stages-per-pipeline-rank", "_vstages")):
        if raw.get(key) is not None and raw[key] < 1:
            raise ConfigError(f"{flag} must be a positive integer, got {raw[key]}",
                              field="--from-megatron")
    if raw.get("_vstages") is not None:
        out["vp"] = raw["_vstages"]
    if not vp_flags and out.get("pp", 1) > 1:
        out["vp"] = 1  # Megatron-LM without a virtual-pipeline flag runs plain 1F1B
    if raw.get("_recompute_act") and out.get("recompute") is None:
        out["recompute"] = "selective"  # Megatron: --recompute-activations
    per_vstage = raw.get("_layers_per_vstage")
    if per_vstage is not None:
        layers, pp = out.get("layers"), out.get("pp", 1)
        if layers is None:
            raise ConfigError("--num-layers-per-virtual-pipeline-stage needs --num-layers "
                              "in the same list (or use --virtual-pipeline-model-parallel-"
                              "size)", field="--from-megatron")
        extra = 2 if raw.get("_acc_emb") and raw.get("_acc_loss") else 0
        if (layers + extra) % (pp * per_vstage):
            raise ConfigError(f"{layers + extra} layers do not split into pp={pp} stages of "
                              f"{per_vstage}-layer virtual stages", field="--from-megatron")
        out["vp"] = (layers + extra) // (pp * per_vstage)
    if raw.get("_acc_emb") or raw.get("_acc_loss"):
        if not (raw.get("_acc_emb") and raw.get("_acc_loss")):
            raise ConfigError("fabricsim counts the embedding and the loss together: give "
                              "both --account-for-embedding-in-pipeline-split and "
                              "--account-for-loss-in-pipeline-split", field="--from-megatron")
        out["account_for_embedding_loss"] = True
    kind = raw.get("_dispatcher")
    if kind is not None and kind not in ("alltoall", "allgather", "flex"):
        raise ConfigError(f"--moe-token-dispatcher-type must be alltoall, allgather or "
                          f"flex, got {kind!r}", field="--from-megatron")
    if raw.get("_deepep") or raw.get("_flex_backend") or kind == "flex":
        # Megatron's flex dispatcher: DeepEP's normal kernels, or HybridEP when asked
        out["moe_dispatcher"] = "hybridep" if str(raw.get("_flex_backend")).lower() \
            == "hybridep" else "deepep"
    method, n = raw.get("_recompute_method"), raw.get("_recompute_num_layers")
    if out.get("recompute") not in (None, "full", "selective"):
        raise ConfigError(f"--recompute-granularity must be full or selective, got "
                          f"{out['recompute']!r}", field="--from-megatron")
    if method == "block" and n is not None:
        out["recompute_layers_per_chunk"] = n  # per model chunk: resolved per stage
    elif method == "uniform" and n not in (None, 1):
        raise ConfigError("--recompute-method uniform with --recompute-num-layers > 1 "
                          "recomputes groups of layers, which fabricsim models as full "
                          "recomputation; drop --recompute-num-layers or use block",
                          field="--from-megatron")
    return out
