"""FLOP counts of a transformer, per token and per layer.

Forward FLOPs per token of one dense layer (a multiply-add is 2 FLOPs), as in Narayanan et
al. 2021 (arXiv 2104.04473, eq. 3) and Korthikanti et al. 2022 (arXiv 2205.05198):

* QKV projections ``2·h·(q + 2·kv)``, output projection ``2·q·h`` (``q = heads·d``,
  ``kv = kv_heads·d``);
* attention scores and weighted values ``2·s·q + 2·s·q`` (``4·s·h`` for plain MHA; with a
  causal mask the useful half is ``2·s·h``, see :func:`attention_flops`);
* MLP ``2·(2 or 3)·h·ffn`` (times ``top_k`` plus shared experts for MoE, plus a router
  ``2·h·experts``);
* the output head ``2·h·vocab`` once per token.

For GPT-3-like shapes this is ``24·h² + 4·s·h`` per layer and token, so a training step
(forward + backward = 3× forward) is Narayanan's ``72·B·s·l·h²·(1 + s/6h + V/12hl)``;
with full recomputation 4× forward (their ``96·...``). Model FLOPs (the MFU numerator)
never count recomputation; hardware FLOPs do.

Example
-------
>>> from fabricsim.workloads.models import get_model
>>> m = get_model("gpt3-175b")
>>> round(training_flops_per_token(m, 2048) / (6 * m.params), 3)
1.028
"""

from __future__ import annotations

from fabricsim.errors import ConfigError
from fabricsim.workloads.models import TransformerSpec

__all__ = [
    "RECOMPUTE",
    "attention_flops",
    "forward_flops_per_token",
    "layer_forward_flops",
    "mixer_core_flops",
    "recompute_flops_per_token",
    "training_flops_per_token",
]

RECOMPUTE = ("none", "selective", "full")


def attention_flops(m: TransformerSpec, seq: int, causal: bool = False) -> float:
    """Forward FLOPs per token of the attention core (``QKᵀ`` and ``AV``) of one layer.

    ``causal=False`` counts the full ``s×s`` matrix, as Megatron-LM's and MosaicML's MFU
    formulas do; ``causal=True`` counts the useful lower triangle only. Layers with a
    sliding window (``attn_window``) meet at most that many keys per query (causal: the
    band ``w − w²/2s`` on average); the figure is the mean over the model's layers.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> attention_flops(get_model("gpt3-175b"), 2048) == 4 * 2048 * 12288
    True
    >>> oss = get_model("gpt-oss-120b")  # a 128-token window on half of the layers
    >>> round(attention_flops(oss, 4096, causal=True)
    ...       / attention_flops(oss.model_copy(update={"attn_window": None}), 4096,
    ...                         causal=True), 3)
    0.531
    """
    if m.is_hybrid:
        return mixer_core_flops(m, seq, causal) / m.layers
    per_key = 2.0 * m.heads * m.core_width
    keys = seq / 2 if causal else float(seq)  # keys a query meets, on average
    if m.windowed_layers:  # sliding windows: a query meets at most the window's last keys
        w = min(m.attn_window or seq, seq)
        keys = m.layer_mean(keys, (w - w * w / (2.0 * seq)) if causal else float(w))
    return per_key * keys


def mixer_core_flops(m: TransformerSpec, seq: int, causal: bool = False) -> float:
    """Forward FLOPs per token of every token mixer's core together, summed over the
    layers: attention's ``QKᵀ`` and ``AV`` in each attention block; a Mamba-2 scan's
    ``7·inner·state`` (Megatron-LM's estimate for the SSD kernels) and its 4-tap
    convolution; a gated delta-net's ``8·v_heads·head_dim²`` (its state update and read,
    Megatron-LM's count) and convolution. The recurrent cores grow with tokens, not with
    the sequence: what makes a hybrid model cheap at long context.

    >>> from fabricsim.workloads.models import get_model
    >>> m = get_model("nemotron-h-8b")
    >>> round(mixer_core_flops(m, 8192) / (m.blocks("*") * 4 * 8192 * 4096), 2)
    1.33
    """
    n_attn = m.blocks("*")
    per_key = 2.0 * m.heads * m.core_width
    out = n_attn * per_key * (seq / 2 if causal else float(seq))
    d, qk, v = m.mamba_inner, m.gdn_qk, m.gdn_v
    out += m.blocks("M") * (7.0 * d * m.mamba_state + 2.0 * 4 * (d + m.mamba_bc))
    out += m.blocks("G") * (8.0 * v * m.gdn_head_dim + 2.0 * 4 * (2 * qk + v))
    return out


def _hybrid_parts(m: TransformerSpec, seq: int, causal: bool) -> dict[str, float]:
    """A hybrid model's blocks other than MoE, by part, per token, averaged over them:
    the mixers' input projections (``qkv``), cores (``attn``) and output projections
    (``proj``), the MLP blocks' ``mlp``."""
    h, q, kv = m.hidden, m.heads * m.d_head, m.n_kv * m.d_head
    d, qk, v = m.mamba_inner, m.gdn_qk, m.gdn_v
    n = max(m.layers - m.moe_layers, 1)
    into = {"*": (2.0 * h * (q + 2 * kv) if m.attn_weights is None
                  else 2.0 * (m.attn_weights - q * h)),
            "M": 2.0 * h * (2 * d + m.mamba_bc + m.mamba_nheads),
            "G": 2.0 * h * (2 * qk + 2 * v + 2 * m.gdn_v_heads)}
    out_of = {"*": 2.0 * q * h, "M": 2.0 * d * h, "G": 2.0 * v * h}
    return {"qkv": m.block_mean(lambda k: into.get(k, 0.0)),
            "attn": mixer_core_flops(m, seq, causal) / n,
            "proj": m.block_mean(lambda k: out_of.get(k, 0.0)),
            "mlp": m.block_mean(lambda k: 2.0 * m.mlp_params(m.ffn) if k == "-" else 0.0)}


def layer_forward_flops(m: TransformerSpec, seq: int, moe: bool = False,
                        causal: bool = False) -> dict[str, float]:
    """Forward FLOPs per token of one layer, by part (``qkv``, ``attn``, ``proj``, ``mlp``).

    Of a hybrid model (``hybrid_pattern``): with ``moe`` its MoE block (``mlp`` only),
    otherwise the mean of its other blocks (mixers and MLPs), so that the dense and MoE
    layers weigh in as for a transformer. ``causal`` counts the attention core's useful
    half (:func:`attention_flops`).

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> m = get_model("gpt3-175b")
    >>> f = layer_forward_flops(m, 2048)
    >>> (f["qkv"] + f["proj"] + f["mlp"]) == 24 * m.hidden ** 2
    True
    """
    h, q, kv = m.hidden, m.heads * m.d_head, m.n_kv * m.d_head
    if moe:
        mlp = (2.0 * (m.top_k * m.expert_params + m.shared_experts * m.shared_expert_params)
               + 2.0 * h * m.experts + 2.0 * m.latent_params)
        if m.is_hybrid:
            return {"qkv": 0.0, "attn": 0.0, "proj": 0.0, "mlp": mlp}
    elif m.is_hybrid:
        return _hybrid_parts(m, seq, causal)
    else:
        mlp = 2.0 * m.mlp_params(m.ffn)
    qkv = 2.0 * h * (q + 2 * kv) if m.attn_weights is None \
        else 2.0 * (m.attn_weights - q * h)  # MLA: every projection but the output's
    return {"qkv": qkv, "attn": attention_flops(m, seq, causal), "proj": 2.0 * q * h,
            "mlp": mlp}


def forward_flops_per_token(m: TransformerSpec, seq: int) -> float:
    """Forward FLOPs per token of the whole model (layers and output head).

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> m = get_model("llama2-7b")
    >>> round(forward_flops_per_token(m, 4096) / 1e9, 2)
    15.36
    """
    dense = m.layers - m.moe_layers
    total = dense * sum(layer_forward_flops(m, seq).values())
    if m.moe_layers:
        total += m.moe_layers * sum(layer_forward_flops(m, seq, moe=True).values())
    return total + 2.0 * m.hidden * m.vocab


def recompute_flops_per_token(m: TransformerSpec, seq: int, recompute: str,
                              modules: frozenset[str] | None = None) -> float:
    """Extra forward FLOPs per token that activation recomputation adds.

    ``full`` reruns every layer's forward; ``selective`` reruns the attention core only
    (Korthikanti et al. 2022); ``none`` adds nothing. The output head is never rerun.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> m = get_model("gpt3-175b")
    >>> recompute_flops_per_token(m, 2048, "none")
    0.0
    """
    if recompute == "none":
        return 0.0
    if recompute == "selective":
        mods = modules or frozenset(("core_attn",))
        dense = m.layers - m.moe_layers
        out = m.layers * attention_flops(m, seq) if "core_attn" in mods else 0.0
        if "mlp" in mods:
            out += dense * 2.0 * m.mlp_params(m.ffn)
        if "moe" in mods:
            out += m.moe_layers * layer_forward_flops(m, seq, moe=True)["mlp"]
        elif "shared_experts" in mods:
            out += m.moe_layers * 2.0 * m.shared_experts * m.shared_expert_params
        if "mla_up_proj" in mods:
            out += m.layers * 2.0 * m.mla_up_params
        return out
    if recompute == "full":
        return forward_flops_per_token(m, seq) - 2.0 * m.hidden * m.vocab
    raise ConfigError(f"must be one of {', '.join(RECOMPUTE)}, got {recompute!r}",
                      field="recompute")


def training_flops_per_token(m: TransformerSpec, seq: int, recompute: str = "none",
                             modules: frozenset[str] | None = None) -> float:
    """FLOPs per token of one training step: 3× forward, plus recomputation.

    With ``recompute="none"`` these are the model FLOPs of MFU; otherwise hardware FLOPs.

    Examples
    --------
    >>> from fabricsim.workloads.models import get_model
    >>> m = get_model("gpt3-175b")
    >>> l, h, s, v = m.layers, m.hidden, 2048, m.vocab
    >>> narayanan = 96 * s * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h)) / s
    >>> abs(training_flops_per_token(m, s, "full") / narayanan - 1) < 1e-9
    True
    """
    return 3.0 * forward_flops_per_token(m, seq) + recompute_flops_per_token(
        m, seq, recompute, modules)
