"""Transformer model descriptions: presets and user-defined models.

A :class:`TransformerSpec` holds the shape of a decoder-only transformer (dense or MoE).
Parameter counts follow the layer shapes exactly (no biases, two norms per layer):

* attention: ``h·(heads·d) + 2·h·(kv_heads·d) + (heads·d)·h`` (Q, K, V, O; GQA when
  ``kv_heads < heads``);
* MLP: ``3·h·ffn`` when gated (SwiGLU), ``2·h·ffn`` otherwise; MoE layers hold
  ``experts + shared_experts`` such MLPs of width ``moe_ffn`` and a router ``h·experts``;
* embeddings ``vocab·h``, plus the same again for an untied output head.

Example
-------
>>> m = get_model("llama2-70b")
>>> round(m.params / 1e9, 1)
69.0
>>> m = get_model("mixtral-8x7b")
>>> round(m.params / 1e9, 1), round(m.active_params / 1e9, 1)
(46.7, 12.9)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field, create_model, model_validator

from fabricsim._strict import StrictModel
from fabricsim.errors import ConfigError, unknown

__all__ = ["BLOCKS", "MODEL_FIELDS", "PRESETS", "ModelShape", "TransformerSpec", "custom_model",
           "get_model", "model_names"]


#: Block kinds of a hybrid model (``hybrid_pattern``), as Megatron-LM names them.
BLOCKS = {"M": "Mamba-2", "G": "gated delta-net", "*": "attention", "-": "MLP", "E": "MoE"}


class TransformerSpec(StrictModel):
    """Shape of a decoder-only transformer.

    Parameters
    ----------
    name : str
        Label used in reports.
    layers, hidden, heads : int
        Transformer layers, model width ``h`` and attention heads.
    kv_heads : int or None
        Key/value heads (grouped-query attention); ``None`` means ``heads``.
    head_dim : int or None
        Width of one head; ``None`` means ``hidden // heads``.
    ffn : int
        MLP inner width of dense layers.
    vocab, seq : int
        Vocabulary size and default training sequence length.
    max_context : int or None
        The longest context (prompt + output) the model serves, its position limit;
        ``None``: no limit known (serving longer than that is refused).
    gated : bool
        SwiGLU-style MLP (three matrices) instead of two.
    tied_embeddings : bool
        Output head shares the input embedding matrix.
    attn_core_width : int or None
        Query-key plus value width of one head in the attention core where it is not
        ``2·head_dim`` (DeepSeek's MLA: 192 + 128).
    v_head_dim : int or None
        Value width of one head where it differs from the query-key width (DeepSeek's
        MLA: 128 of ``attn_core_width``'s 320); ``None``: half of ``attn_core_width``.
        Sets the attention core's stored inputs and output (activation memory).
    attn_weights : int or None
        Weights of one layer's attention where the Q/K/V/O formula does not give them
        (multi-head latent attention: the query and key/value down- and up-projections
        and the output projection); ``None``: the formula.
    kv_latent : int or None
        Multi-head latent attention's KV cache: the elements one token keeps per layer
        (the compressed key/value latent and the RoPE key, 512 + 64 for DeepSeek-V3 and
        Kimi K2), shared by every head, so each tensor-parallel rank holds all of it;
        ``None``: keys and values of every KV head, ``2·kv_heads·head_dim``, split over TP.
    mla_up_params, mla_up_width : int
        Multi-head latent attention (DeepSeek): weights of one layer's up-projections from
        the query and key/value latents, and the elements per token they produce (only
        used to cost recomputing them, ``recompute_modules`` ``mla_up_proj``; 0: no MLA).
    experts, top_k, moe_ffn, shared_experts, dense_layers : int
        Mixture of experts: routed experts per MoE layer, experts each token visits, the
        inner width of one expert (0 means ``ffn``), always-on shared experts, and how
        many leading layers stay dense. ``experts == 1`` is a dense model.
    attn_window, window_skip_freq : int or None
        Sliding-window attention (GPT-OSS: a 128-token window on every other layer): a
        token attends to the last ``attn_window`` tokens only, except in every
        ``window_skip_freq``-th layer, which attends to the whole sequence (Megatron's
        ``--window-size`` and ``--window-attn-skip-freq``; ``None``: every layer
        windowed). Given as a frequency, it follows a change of ``layers``.
    hybrid_pattern : str or None
        A hybrid model's blocks in order, one character each, as Megatron-LM's
        ``--hybrid-layer-pattern`` writes them: ``M`` a Mamba-2 mixer, ``G`` a gated
        delta-net mixer (linear attention), ``*`` an attention block, ``-`` a dense MLP,
        ``E`` an MoE block. Each block is one of ``layers`` (a block, not an attention +
        MLP pair); ``None``: a plain transformer, every layer attention + MLP.
    mamba_heads, mamba_head_dim, mamba_state, mamba_groups : int
        A Mamba-2 mixer's heads, head width, state size per head channel and B/C groups
        (Megatron's ``--mamba-num-heads``, ``--mamba-head-dim``, ``--mamba-state-dim``,
        ``--mamba-num-groups``); ``mamba_heads`` 0: ``2·hidden / mamba_head_dim``.
    moe_latent : int or None
        Latent MoE (Megatron's ``--moe-latent-size``; Nemotron 3 Super): each MoE layer
        projects a token from ``hidden`` down to this width, its routed experts work and
        travel at it, and the result is projected back up; shared experts stay at
        ``hidden``. ``None``: experts at ``hidden``.
    gdn_qk_heads, gdn_v_heads, gdn_head_dim : int
        A gated delta-net mixer's query/key heads, value heads and head width (Qwen3-Next:
        16, 32, 128).
    router_groups, router_group_topk : int
        Group-limited routing (Megatron's ``--moe-router-num-groups`` and
        ``--moe-router-group-topk``; DeepSeek-V3: 8 and 4): the routed experts form
        ``router_groups`` equal groups of consecutive experts, and a token's ``top_k``
        experts come from its best ``router_group_topk`` groups. Where a group sits on
        one server (DeepSeek-V3's EP 64 over eight servers) this is node-limited routing.
        ``router_groups == 1`` or ``router_group_topk`` ``None``: no limit.

    Examples
    --------
    >>> TransformerSpec(name="tiny", layers=2, hidden=64, heads=4, ffn=256, vocab=100,
    ...                 seq=32).params
    144192
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    layers: int = Field(ge=1, le=10_000)
    hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int | None = Field(None, ge=1)
    head_dim: int | None = Field(None, ge=1)
    attn_core_width: int | None = Field(None, ge=1)
    v_head_dim: int | None = Field(None, ge=1)
    attn_weights: int | None = Field(None, ge=1)
    kv_latent: int | None = Field(None, ge=1)
    mla_up_params: int = Field(0, ge=0)
    mla_up_width: int = Field(0, ge=0)
    ffn: int = Field(ge=1)
    vocab: int = Field(ge=1)
    seq: int = Field(2048, ge=1)
    gated: bool = True
    tied_embeddings: bool = False
    experts: int = Field(1, ge=1)
    top_k: int = Field(1, ge=1)
    moe_ffn: int = Field(0, ge=0)
    shared_experts: int = Field(0, ge=0)
    dense_layers: int = Field(0, ge=0)
    router_groups: int = Field(1, ge=1)
    router_group_topk: int | None = Field(None, ge=1)
    attn_window: int | None = Field(None, ge=1)
    window_skip_freq: int | None = Field(None, ge=1)
    max_context: int | None = Field(None, ge=1)
    hybrid_pattern: str | None = Field(None, min_length=1)
    mamba_heads: int = Field(0, ge=0)
    mamba_head_dim: int = Field(64, ge=1)
    mamba_state: int = Field(128, ge=1)
    mamba_groups: int = Field(8, ge=1)
    gdn_qk_heads: int = Field(16, ge=1)
    gdn_v_heads: int = Field(32, ge=1)
    gdn_head_dim: int = Field(128, ge=1)
    moe_latent: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> TransformerSpec:
        if self.kv_heads is not None and (self.kv_heads > self.heads
                                          or self.heads % self.kv_heads):
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads "
                             f"({self.heads}), or give head_dim")
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= experts ({self.experts})")
        if self.router_groups > 1 and self.router_group_topk is not None:
            if self.experts % self.router_groups:
                raise ValueError(f"router_groups ({self.router_groups}) must divide "
                                 f"experts ({self.experts})")
            if self.router_group_topk > self.router_groups:
                raise ValueError(f"router_group_topk ({self.router_group_topk}) must be "
                                 f"<= router_groups ({self.router_groups})")
            if self.top_k > self.router_group_topk * self.experts // self.router_groups:
                raise ValueError(f"top_k ({self.top_k}) experts do not fit in "
                                 f"router_group_topk ({self.router_group_topk}) groups of "
                                 f"{self.experts // self.router_groups}")
        if self.v_head_dim is not None and self.v_head_dim >= self.core_width:
            raise ValueError(f"v_head_dim ({self.v_head_dim}) must be less than the "
                             f"attention core's query-key plus value width "
                             f"({self.core_width}): give attn_core_width too")
        if self.dense_layers > self.layers:
            raise ValueError(f"dense_layers ({self.dense_layers}) must be <= layers")
        if self.hybrid_pattern is not None:
            self._check_pattern(self.hybrid_pattern)
        if self.window_skip_freq is not None and self.attn_window is None:
            raise ValueError("window_skip_freq needs attn_window (the window's width in "
                             "tokens)")
        if self.attn_weights is not None:
            out = self.heads * self.d_head * self.hidden
            if self.attn_weights < out:
                raise ValueError(
                    f"attn_weights ({self.attn_weights}) must hold at least the output "
                    f"projection, heads·head_dim·hidden = {out}; a model changed from an "
                    f"MLA preset (deepseek-v3, kimi-k2) in hidden, heads or head_dim "
                    f"needs its attn_weights given too")
        return self

    def _check_pattern(self, pat: str) -> None:
        bad = sorted(set(pat) - set(BLOCKS))
        if bad:
            raise ValueError(f"hybrid_pattern has {''.join(bad)!r}: its blocks are M (Mamba-2), "
                             f"G (gated delta-net), * (attention), - (MLP) and E (MoE), one "
                             f"character each (pipeline marks | and MTP / are not part of it)")
        if len(pat) != self.layers:
            raise ValueError(f"hybrid_pattern has {len(pat)} blocks but layers is "
                             f"{self.layers}: a hybrid model's layers are its blocks, give "
                             f"layers={len(pat)}")
        if ("E" in pat) != (self.experts > 1):
            raise ValueError("hybrid_pattern has MoE blocks (E) but experts is 1: give "
                             "experts" if "E" in pat else
                             f"experts is {self.experts} but hybrid_pattern has no MoE "
                             f"block (E): add E blocks or set experts=1")
        if self.dense_layers:
            raise ValueError("dense_layers does not apply to a hybrid model: its "
                             "hybrid_pattern places the MLP (-) and MoE (E) blocks")
        if self.attn_window is not None:
            raise ValueError("attn_window (sliding-window attention) is not modelled in a "
                             "hybrid model: drop it or hybrid_pattern")
        if not set(pat) & set("MG*"):
            raise ValueError("hybrid_pattern has no token mixer (M, G or *): a model needs "
                             "one")

    # --- derived shapes -------------------------------------------------------------
    def blocks(self, kind: str) -> int:
        """Blocks of ``kind`` (a :data:`BLOCKS` character). A plain transformer's layer
        is one attention block and one MLP (``-``) or MoE (``E``) block.

        >>> m = get_model("nemotron-h-8b")
        >>> m.blocks("M"), m.blocks("*"), m.blocks("-"), m.blocks("E")
        (24, 4, 24, 0)
        >>> get_model("llama2-7b").blocks("*")
        32
        """
        if self.hybrid_pattern is not None:
            return self.hybrid_pattern.count(kind)
        return {"*": self.layers, "E": self.moe_layers,
                "-": self.layers - self.moe_layers}.get(kind, 0)

    @property
    def is_hybrid(self) -> bool:
        """True for a model of blocks (``hybrid_pattern``)."""
        return self.hybrid_pattern is not None

    def block_mean(self, per_block: Callable[[str], float], moe: bool = False) -> float:
        """``per_block`` of a hybrid model's MoE block (``moe``), or its mean over the
        other blocks (mixers and MLPs) weighted by their counts: what a "dense layer" and
        an "MoE layer" of a hybrid model are, so that per-layer formulas carry over.

        >>> m = get_model("nemotron-h-8b")
        >>> m.block_mean(lambda k: k == "-")  # MLP blocks among its 52
        0.46153846153846156
        """
        if moe:
            return per_block("E")
        kinds = [k for k in "*MG-" if self.blocks(k)]
        n = sum(self.blocks(k) for k in kinds)
        return sum(self.blocks(k) * per_block(k) for k in kinds) / max(n, 1)

    @property
    def attention_share(self) -> float:
        """Attention blocks per layer: 1 for a transformer, fewer for a hybrid."""
        return self.blocks("*") / self.layers

    @property
    def layer_weight(self) -> float:
        """Transformer layers per layer: 1, or ½ for a hybrid model, whose block (a mixer
        or an MLP) is half of one: one norm, one TP all-reduce, half the kernels."""
        return 0.5 if self.is_hybrid else 1.0

    @property
    def mamba_inner(self) -> int:
        """A Mamba-2 mixer's inner width ``heads·head_dim``."""
        return self.mamba_nheads * self.mamba_head_dim

    @property
    def mamba_nheads(self) -> int:
        """A Mamba-2 mixer's heads (``mamba_heads``, else ``2·hidden / head_dim``)."""
        return self.mamba_heads or 2 * self.hidden // self.mamba_head_dim

    @property
    def mamba_bc(self) -> int:
        """A Mamba-2 mixer's ``B`` and ``C`` widths together, ``2·groups·state``."""
        return 2 * self.mamba_groups * self.mamba_state

    @property
    def gdn_qk(self) -> int:
        """A gated delta-net's query (and key) width, ``qk_heads·head_dim``."""
        return self.gdn_qk_heads * self.gdn_head_dim

    @property
    def gdn_v(self) -> int:
        """A gated delta-net's value width, ``v_heads·head_dim``."""
        return self.gdn_v_heads * self.gdn_head_dim

    def mixer_params(self, kind: str) -> int:
        """Weights of one token mixer of ``kind`` (``*``, ``M`` or ``G``): attention's
        Q/K/V/O; Mamba-2's input projection (``x``, gate ``z``, ``B``, ``C``, one ``dt``
        per head), its 4-tap convolution and per-head ``A``, ``D``, ``dt`` bias, the
        gated norm and output projection; a gated delta-net's projections (q, k, v, the
        output gate, ``a`` and ``b`` per value head), convolution, norm and output.

        >>> round(get_model("nemotron-h-8b").mixer_params("M") / 1e6, 1)
        109.6
        """
        h = self.hidden
        if kind == "*":
            return self.attn_params
        if kind == "M":
            d, nh, bc = self.mamba_inner, self.mamba_nheads, self.mamba_bc
            return h * (2 * d + bc + nh) + 4 * (d + bc) + 3 * nh + d + d * h
        qk, v = self.gdn_qk, self.gdn_v
        return h * (2 * qk + 2 * v + 2 * self.gdn_v_heads) + 4 * (2 * qk + v) + v + v * h

    def recurrent_state(self) -> int:
        """Elements of state one sequence keeps across all recurrent mixers (Mamba-2: each
        head's ``head_dim × state`` matrix and the convolution's last 3 inputs; gated
        delta-net: each value head's ``head_dim²`` matrix and its convolution's), whatever
        the context's length: what replaces a KV cache in those layers.

        >>> get_model("llama3-8b").recurrent_state()
        0
        """
        d = self.mamba_inner
        mamba = d * self.mamba_state + 3 * (d + self.mamba_bc)
        gdn = self.gdn_v * self.gdn_head_dim + 3 * (2 * self.gdn_qk + self.gdn_v)
        return self.blocks("M") * mamba + self.blocks("G") * gdn

    @property
    def d_head(self) -> int:
        """Width of one attention head."""
        return self.head_dim or self.hidden // self.heads

    @property
    def core_width(self) -> int:
        """Query-key plus value width of one head in the attention core (``QKᵀ`` and
        ``AV``): ``2·d_head``, or ``attn_core_width`` where they differ (DeepSeek's MLA:
        192 + 128)."""
        return self.attn_core_width or 2 * self.d_head

    @property
    def attn_io_widths(self) -> tuple[int, int, int, int]:
        """Elements per token of the attention core's query, key, value and output
        (summed over heads): ``heads·d, kv_heads·d, kv_heads·d, heads·d`` (GQA), or
        for MLA ``heads·qk, heads·qk, heads·v, heads·v`` with ``qk + v =``
        :attr:`core_width` (keys carry the shared RoPE part, broadcast to every head)."""
        if self.attn_core_width is None:
            q, kv = self.heads * self.d_head, self.n_kv * self.d_head
            return q, kv, kv, q
        v = self.v_head_dim or self.core_width // 2
        qk = self.core_width - v
        return self.heads * qk, self.heads * qk, self.heads * v, self.heads * v

    @property
    def windowed_layers(self) -> int:
        """Layers with sliding-window attention (0 without a window)."""
        if self.attn_window is None:
            return 0
        f = self.window_skip_freq
        return self.layers if f is None else self.layers - self.layers // f

    def layer_mean(self, full: float, windowed: float) -> float:
        """Mean over the layers of a quantity that is ``full`` in a full-attention layer
        and ``windowed`` in a sliding-window one."""
        win = self.windowed_layers
        return ((self.layers - win) * full + win * windowed) / self.layers

    @property
    def n_kv(self) -> int:
        """Key/value heads."""
        return self.kv_heads or self.heads

    @property
    def is_moe(self) -> bool:
        """True when some layers route tokens to experts."""
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        """Number of MoE layers (a hybrid model's MoE blocks)."""
        if self.hybrid_pattern is not None:
            return self.hybrid_pattern.count("E")
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def expert_ffn(self) -> int:
        """Inner width of one expert."""
        return self.moe_ffn or self.ffn

    @property
    def attn_params(self) -> int:
        """Attention weights of one layer (Q, K, V, O; ``attn_weights`` where given)."""
        if self.attn_weights is not None:
            return self.attn_weights
        h, q, kv = self.hidden, self.heads * self.d_head, self.n_kv * self.d_head
        return h * q + 2 * h * kv + q * h

    def mlp_params(self, width: int) -> int:
        """Weights of one MLP of inner width ``width``."""
        return (3 if self.gated else 2) * self.hidden * width

    def block_params(self, kind: str) -> int:
        """Weights of one block of a hybrid model, its norm included."""
        if kind == "-":
            return self.mlp_params(self.ffn) + self.hidden
        if kind == "E":
            return self.moe_layer_params
        return self.mixer_params(kind) + self.hidden

    @property
    def dense_layer_params(self) -> int:
        """Weights of one dense layer (attention, MLP, two norms); of a hybrid model, the
        mean of its blocks other than MoE."""
        if self.hybrid_pattern is not None:
            return round(self.block_mean(self.block_params))
        return self.attn_params + self.mlp_params(self.ffn) + 2 * self.hidden

    @property
    def expert_width_in(self) -> int:
        """The width routed experts take tokens at, and dispatch and combine move:
        ``moe_latent`` for a latent MoE, else ``hidden``."""
        return self.moe_latent or self.hidden

    @property
    def expert_params(self) -> int:
        """Weights of one routed expert (at :attr:`expert_width_in`)."""
        return (3 if self.gated else 2) * self.expert_width_in * self.expert_ffn

    @property
    def shared_expert_params(self) -> int:
        """Weights of one shared expert's width of MLP (at ``hidden``)."""
        return self.mlp_params(self.expert_ffn)

    @property
    def latent_params(self) -> int:
        """Weights of a latent MoE layer's down- and up-projections (0 without one)."""
        return 2 * self.hidden * self.moe_latent if self.moe_latent else 0

    @property
    def moe_layer_params(self) -> int:
        """Weights of one MoE layer: attention, all experts, shared experts, router (a
        hybrid model's MoE block has no attention and one norm)."""
        experts = (self.experts * self.expert_params
                   + self.shared_experts * self.shared_expert_params
                   + self.hidden * self.experts + self.latent_params)
        if self.hybrid_pattern is not None:
            return experts + self.hidden
        return self.attn_params + experts + 2 * self.hidden

    @property
    def embedding_params(self) -> int:
        """Input embedding plus (if untied) output head."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def layer_params(self) -> int:
        """Weights of all transformer layers (a hybrid model's blocks)."""
        if self.hybrid_pattern is not None:
            return sum(self.block_params(k) for k in self.hybrid_pattern)
        dense = self.layers - self.moe_layers
        return dense * self.dense_layer_params + self.moe_layers * self.moe_layer_params

    @property
    def params(self) -> int:
        """Total parameters."""
        return self.layer_params + self.embedding_params + self.hidden

    @property
    def active_params(self) -> int:
        """Parameters a token touches (MoE: ``top_k`` routed + shared experts)."""
        if not self.is_moe:
            return self.params
        idle = self.moe_layers * (self.experts - self.top_k) * self.expert_params
        return self.params - idle

    @property
    def expert_total_params(self) -> int:
        """Weights of routed experts (sharded by expert parallelism)."""
        return self.moe_layers * self.experts * self.expert_params


#: Names of the fields a scenario's ``training:`` section may set to shape a model.
MODEL_FIELDS = tuple(n for n in TransformerSpec.model_fields if n != "name")


class _ShapeBase(StrictModel):
    """Changes to a model's shape: any of :data:`MODEL_FIELDS`, each optional (``None``:
    the preset's). Which fields were given is ``model_fields_set``; their values are
    checked when the changed model is built (:func:`custom_model`).

    >>> ModelShape(layers=16).given()
    {'layers': 16}
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def given(self) -> dict[str, Any]:
        """The fields given, by name."""
        return {k: getattr(self, k) for k in MODEL_FIELDS if k in self.model_fields_set}


if TYPE_CHECKING:  # the type checker sees the base; the fields are TransformerSpec's
    ModelShape = _ShapeBase
else:
    ModelShape = create_model(
        "ModelShape", __base__=_ShapeBase, __module__=__name__,
        **{n: (TransformerSpec.model_fields[n].annotation | None, None) for n in MODEL_FIELDS})
    ModelShape.__doc__ = _ShapeBase.__doc__

_P: dict[str, dict[str, Any]] = {
    # GPT-3 175B (Brown et al. 2020, Table 2.1); learned positions ignored.
    "gpt3-175b": dict(layers=96, hidden=12288, heads=96, ffn=49152, vocab=50257, seq=2048,
                      gated=False, tied_embeddings=True),
    # Llama 2 (Touvron et al. 2023) and Llama 3 (Meta 2024) model cards / config.json.
    "llama2-7b": dict(layers=32, hidden=4096, heads=32, ffn=11008, vocab=32000, seq=4096),
    "llama2-13b": dict(layers=40, hidden=5120, heads=40, ffn=13824, vocab=32000, seq=4096),
    "llama2-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000,
                       seq=4096),
    "llama3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                      seq=8192),
    "llama3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672,
                       vocab=128256, seq=8192),
    "llama3-405b": dict(layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248,
                        vocab=128256, seq=8192),
    # Mixtral 8x7B (Jiang et al. 2024): 8 experts, top-2, Mistral-7B shapes.
    "mixtral-8x7b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336,
                         vocab=32000, seq=4096, experts=8, top_k=2),
    # DeepSeek-V3 (DeepSeek-AI 2024): 61 layers, first 3 dense, 256 routed experts of
    # width 2048 + 1 shared, top-8. Multi-head latent attention: queries and keys of 192
    # (128 + 64 RoPE), values of 128 per head in the attention core; its projections at
    # their real size (queries 7,168 -> 1,536 -> 128 x 192, keys/values 7,168 -> 512 + 64
    # -> 128 x 256, output 128 x 128 -> 7,168: 187.1M weights per layer), so the totals
    # are 671.0B / 37.6B against the published 671B / 37B.
    "deepseek-v3": dict(layers=61, hidden=7168, heads=128, ffn=18432, vocab=129280,
                        seq=4096, experts=256, top_k=8, moe_ffn=2048, shared_experts=1,
                        # group-limited routing: 8 groups of 32, the best 4 (config.json:
                        # n_group, topk_group)
                        router_groups=8, router_group_topk=4,
                        dense_layers=3, attn_core_width=192 + 128, v_head_dim=128,
                        kv_latent=512 + 64,
                        attn_weights=(7168 * 1536 + 1536 * 128 * 192 + 7168 * 576
                                      + 512 * 128 * 256 + 128 * 128 * 7168),
                        # MLA up-projections: queries 1,536 -> 128 x 192, keys/values
                        # 512 -> 128 x (128 + 128) (config.json: q/kv_lora_rank)
                        mla_up_params=1536 * 128 * 192 + 512 * 128 * 256,
                        mla_up_width=128 * 192 + 128 * 256),
    # Mixtral 8x22B (NeMo MixtralConfig8x22B; Mistral AI model card: 141B total, 39B
    # active): 56 layers, 8 experts of 16,384, top-2.
    "mixtral-8x22b": dict(layers=56, hidden=6144, heads=48, kv_heads=8, ffn=16384,
                          vocab=32768, seq=4096, experts=8, top_k=2),
    # Qwen3 MoE (Megatron-Bridge Qwen3MoEModelProvider30B_A3B / 235B_A22B, Hugging Face
    # config.json): heads of 128 (wider than hidden/heads), 4 KV groups, every layer MoE
    # with 128 experts, top-8, no shared expert; QK-norm. Published 30.5B / 3.3B active and
    # 235B / 22B active.
    "qwen3-30b-a3b": dict(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                          ffn=6144, vocab=151936, seq=4096, experts=128, top_k=8,
                          moe_ffn=768),
    "qwen3-235b-a22b": dict(layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128,
                            ffn=12288, vocab=151936, seq=4096, experts=128, top_k=8,
                            moe_ffn=1536),
    # GPT-OSS-120B (OpenAI model card; Megatron-Bridge GPTOSSProvider120B): 36 layers, 64
    # heads of 64, 8 KV groups, every layer MoE with 128 experts of 2,880, top-4; a
    # 128-token sliding window on every other layer (18 of 36). Biases, attention sinks
    # and the clamped GLU are not costed (a few MFLOP per token). Published 116.8B / 5.1B.
    "gpt-oss-120b": dict(layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64,
                         ffn=2880, vocab=201088, seq=4096, experts=128, top_k=4,
                         moe_ffn=2880, attn_window=128, window_skip_freq=2),
    # Kimi K2 (Moonshot AI config.json; Megatron-Bridge KimiK2Provider): DeepSeek-V3's
    # shape with 64 MLA heads, 384 routed experts of 2,048 (top-8, no group limit), one
    # shared expert, one leading dense layer. MLA weights per layer: queries 7,168 ->
    # 1,536 -> 64 x 192, keys/values 7,168 -> 512 + 64 -> 64 x 256, output 64 x 128 ->
    # 7,168. Published 1.04T total, 32B active.
    "kimi-k2": dict(layers=61, hidden=7168, heads=64, ffn=18432, vocab=163840, seq=4096,
                    experts=384, top_k=8, moe_ffn=2048, shared_experts=1, dense_layers=1,
                    attn_core_width=192 + 128, v_head_dim=128, kv_latent=512 + 64,
                    attn_weights=(7168 * 1536 + 1536 * 64 * 192 + 7168 * 576
                                  + 512 * 64 * 256 + 64 * 128 * 7168),
                    mla_up_params=1536 * 64 * 192 + 512 * 64 * 256,
                    mla_up_width=64 * 192 + 64 * 256),
    # Llama 4 Scout text model (NeMo Llama4Experts16Config): 48 layers, every one MoE with
    # 16 experts of 8,192, top-1, plus a shared expert of 8,192. Its chunked attention
    # (8,192-token chunks on 3 of 4 layers) is not modelled: it changes nothing up to
    # 8,192 tokens. Published 109B / 17B active.
    "llama4-scout": dict(layers=48, hidden=5120, heads=40, kv_heads=8, head_dim=128,
                         ffn=16384, vocab=202048, seq=8192, experts=16, top_k=1,
                         moe_ffn=8192, shared_experts=1),
    # Llama 4 Maverick text model (Meta's Hugging Face config.json: interleave_moe_layer_step
    # 2, intermediate_size 8,192 per expert, intermediate_size_mlp 16,384 in the dense
    # layers): 48 layers, every other one MoE with 128 routed experts, top-1, and a
    # shared expert of 8,192; the 24 dense layers are modelled as the first ones (the
    # pipeline split may differ). Chunked attention as for Scout. Published 400B / 17B.
    "llama4-maverick": dict(layers=48, hidden=5120, heads=40, kv_heads=8, head_dim=128,
                            ffn=16384, vocab=202048, seq=8192, experts=128, top_k=1,
                            moe_ffn=8192, shared_experts=1, dense_layers=24),
    # Grok-1 (xai-org/grok-1 README and model.py): 64 layers, embedding 6,144, 48 query
    # heads of 128 and 8 KV heads, 8 experts, 2 per token, gated MLP of widening factor 8
    # (ffn_size: int(8 x 6,144) x 2 // 3 = 32,768), SentencePiece vocabulary of 131,072.
    # Published 314B parameters (about a quarter active).
    "grok-1": dict(layers=64, hidden=6144, heads=48, kv_heads=8, head_dim=128, ffn=32768,
                   vocab=131072, seq=8192, experts=8, top_k=2, tied_embeddings=True),
    # Nemotron (NeMo Nemotron3Config8B/22B, Nemotron4Config15B/340B; NeMo-Framework-
    # Launcher yamls): squared-ReLU MLP (two matrices), 256k SentencePiece vocabulary,
    # untied; Nemotron-3 with full multi-head attention, Nemotron-4 with 8 KV groups.
    "nemotron3-8b": dict(layers=32, hidden=4096, heads=32, ffn=16384, vocab=256000,
                         seq=4096, gated=False),
    "nemotron3-22b": dict(layers=40, hidden=6144, heads=48, ffn=24576, vocab=256000,
                          seq=4096, gated=False),
    "nemotron4-15b": dict(layers=32, hidden=6144, heads=48, kv_heads=8, ffn=24576,
                          vocab=256000, seq=4096, gated=False),
    "nemotron4-340b": dict(layers=96, hidden=18432, heads=96, kv_heads=8, head_dim=192,
                           ffn=73728, vocab=256000, seq=4096, gated=False),
    # Nemotron-H (Megatron-LM examples/post_training/modelopt/conf/nvidia/Nemotron-H-8B-
    # Base-8K.sh and -56B-Base-8K.sh; Megatron-Bridge docs/models/llm/nemotronh.md):
    # hybrid blocks, Mamba-2 mixers with an MLP block after each, attention in 8 % of the
    # blocks, squared-ReLU MLPs, 8 KV groups, untied embeddings, 131,072-token vocabulary.
    "nemotron-h-8b": dict(layers=52, hidden=4096, heads=32, kv_heads=8, head_dim=128,
                          ffn=21504, vocab=131072, seq=8192, gated=False,
                          hybrid_pattern="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-"
                                         "M-M-",
                          mamba_heads=128, mamba_head_dim=64, mamba_state=128),
    "nemotron-h-56b": dict(layers=118, hidden=8192, heads=64, kv_heads=8, head_dim=128,
                           ffn=32768, vocab=131072, seq=8192, gated=False,
                           hybrid_pattern="M-M-M-M*-" + "M-M-M-M-M*-" * 9 + "M-M-M-M-M-",
                           mamba_heads=256, mamba_head_dim=64, mamba_state=256),
    # Nemotron 3 Nano 30B-A3B (Megatron-LM .../NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh):
    # 23 Mamba-2 and 23 MoE blocks and 6 attention blocks (2 KV groups), 128 routed
    # experts of 1,856 (top-6) and a shared expert of 3,712 (two widths), squared ReLU.
    # Published 30B total, 3.5B active.
    "nemotron-3-nano": dict(layers=52, hidden=2688, heads=32, kv_heads=2, head_dim=128,
                            ffn=1856, vocab=131072, seq=8192, gated=False, experts=128,
                            top_k=6, moe_ffn=1856, shared_experts=2,
                            hybrid_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EM"
                                           "EMEMEME",
                            mamba_heads=64, mamba_head_dim=64, mamba_state=128),
    # Nemotron 3 Super 120B-A12B (Megatron-LM .../NVIDIA-Nemotron-3-Super-120B-A12B-
    # BF16.sh): 40 Mamba-2, 40 latent-MoE and 8 attention blocks (2 KV groups); 512
    # routed experts of 2,688 (top-22) working at a 1,024-wide latent, a shared expert of
    # 5,376 at 4,096; squared ReLU. Its multi-token-prediction layers are not modelled.
    "nemotron-3-super": dict(layers=88, hidden=4096, heads=32, kv_heads=2, head_dim=128,
                             ffn=2688, vocab=131072, seq=8192, gated=False, experts=512,
                             top_k=22, moe_ffn=2688, shared_experts=2, moe_latent=1024,
                             hybrid_pattern="MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEME"
                                            "M*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME",
                             mamba_heads=128, mamba_head_dim=64, mamba_state=128),
    # Qwen3-Next-80B-A3B (Hugging Face config.json): 48 layers, three gated delta-net
    # mixers to one gated attention (16 heads of 256, 2 KV groups; the query projection
    # also makes the output gate), every layer MoE with 512 experts of 512 (top-10) and a
    # shared expert of 512: 96 blocks. Published 80B total, 3B active.
    "qwen3-next-80b-a3b": dict(layers=96, hidden=2048, heads=16, kv_heads=2, head_dim=256,
                               attn_weights=2048 * 16 * 256 * 2 + 2 * 2048 * 2 * 256
                               + 16 * 256 * 2048,
                               ffn=5120, vocab=151936, seq=4096, experts=512, top_k=10,
                               moe_ffn=512, shared_experts=1,
                               hybrid_pattern="GEGEGE*E" * 12, gdn_qk_heads=16,
                               gdn_v_heads=32, gdn_head_dim=128),
    # NeMo's GPT-3 5B and 20B (NeMo-Framework-Launcher conf/training/gpt3/5b.yaml, 20b.yaml):
    # GELU MLP of 4h, tied embeddings, GPT-2 vocabulary.
    "gpt3-5b": dict(layers=24, hidden=4096, heads=32, ffn=16384, vocab=50257, seq=2048,
                    gated=False, tied_embeddings=True),
    "gpt3-20b": dict(layers=44, hidden=6144, heads=48, ffn=24576, vocab=50257, seq=2048,
                     gated=False, tied_embeddings=True),
    # MPT (MosaicML llm-foundry yamls): GELU MLP of 4h, tied embeddings, ALiBi. The
    # 760M and 3B yamls use 12 and 20 heads so that heads are 128 wide (FlashAttention).
    "mpt-125m": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=50368, seq=2048,
                     gated=False, tied_embeddings=True),
    "mpt-350m": dict(layers=24, hidden=1024, heads=16, ffn=4096, vocab=50368, seq=2048,
                     gated=False, tied_embeddings=True),
    "mpt-760m": dict(layers=24, hidden=1536, heads=12, ffn=6144, vocab=50368, seq=2048,
                     gated=False, tied_embeddings=True),
    "mpt-1b": dict(layers=24, hidden=2048, heads=16, ffn=8192, vocab=50368, seq=2048,
                   gated=False, tied_embeddings=True),
    "mpt-3b": dict(layers=32, hidden=2560, heads=20, ffn=10240, vocab=50368, seq=2048,
                   gated=False, tied_embeddings=True),
    "mpt-7b": dict(layers=32, hidden=4096, heads=32, ffn=16384, vocab=50368, seq=2048,
                   gated=False, tied_embeddings=True),
    "mpt-13b": dict(layers=40, hidden=5120, heads=40, ffn=20480, vocab=50368, seq=2048,
                    gated=False, tied_embeddings=True),
    "mpt-30b": dict(layers=48, hidden=7168, heads=64, ffn=28672, vocab=50368, seq=2048,
                    gated=False, tied_embeddings=True),
    "mpt-70b": dict(layers=80, hidden=8192, heads=64, ffn=32768, vocab=50368, seq=2048,
                    gated=False, tied_embeddings=True),
    # BLOOM-176B (BigScience 2022): 70 layers, h=14336, 112 heads, vocab 250,880.
    "bloom-176b": dict(layers=70, hidden=14336, heads=112, ffn=57344, vocab=250880,
                       seq=2048, gated=False, tied_embeddings=True),
}

#: The longest context (prompt + output tokens) each preset serves: its released
#: config's position limit (Hugging Face config.json ``max_position_embeddings``; GPT-3's
#: ``n_ctx``; NeMo's GPT-3 and Nemotron yamls). The Llama 3 8B / 70B presets are Llama 3's
#: 8,192 (Llama 3.1's 131,072 with ``max_context: 131072``); the 405B exists only as
#: Llama 3.1. MPT and BLOOM (ALiBi, no learned or rotary limit) have none.
_CONTEXT: dict[str, int] = {
    "gpt3-175b": 2048, "gpt3-5b": 2048, "gpt3-20b": 2048,
    "llama2-7b": 4096, "llama2-13b": 4096, "llama2-70b": 4096,
    "llama3-8b": 8192, "llama3-70b": 8192, "llama3-405b": 131072,
    "mixtral-8x7b": 32768, "mixtral-8x22b": 65536, "deepseek-v3": 163840,
    "qwen3-30b-a3b": 40960, "qwen3-235b-a22b": 40960, "gpt-oss-120b": 131072,
    "kimi-k2": 131072, "llama4-scout": 10485760, "llama4-maverick": 1048576,
    "grok-1": 8192,
    "nemotron3-8b": 4096, "nemotron3-22b": 4096, "nemotron4-15b": 4096,
    "nemotron4-340b": 4096,
    "nemotron-h-8b": 8192, "nemotron-h-56b": 8192, "nemotron-3-nano": 1048576,
    "nemotron-3-super": 1048576,
    "qwen3-next-80b-a3b": 262144,
}

PRESETS: dict[str, TransformerSpec] = {
    k: TransformerSpec(name=k, max_context=_CONTEXT.get(k), **v) for k, v in _P.items()
}


def model_names() -> list[str]:
    """Names of the model presets.

    Examples
    --------
    >>> "llama3-405b" in model_names()
    True
    """
    return sorted(PRESETS)


def get_model(name: str, field: str = "model") -> TransformerSpec:
    """Return the preset ``name``; an unknown name raises with the nearest names.

    Examples
    --------
    >>> get_model("gpt3-175b").layers
    96
    """
    if isinstance(name, TransformerSpec):
        return name
    try:
        return PRESETS[name]
    except KeyError:
        raise unknown("model", name, PRESETS, field=field) from None


def custom_model(base: TransformerSpec | None, shape: ModelShape,
                 prefix: str = "training") -> TransformerSpec:
    """Apply ``shape`` (the :data:`MODEL_FIELDS` it gives) to ``base`` and validate.

    Errors name ``<prefix>.<field>``.

    Examples
    --------
    >>> custom_model(get_model("llama2-7b"), ModelShape(layers=16)).layers
    16
    >>> custom_model(None, ModelShape(layers=2))
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: training.hidden: Field required
    """
    from pydantic import ValidationError

    data: dict[str, Any] = base.model_dump() if base is not None else {}
    overrides = shape.given()
    data.update(overrides)
    if base is not None and overrides:
        data["name"] = f"{base.name}*"
    try:
        return TransformerSpec.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        got = err.get("input")
        got_s = f", got {got!r}" if got is not None and not isinstance(got, dict) else ""
        msg = str(err["msg"]).removeprefix("Value error, ")
        first = msg.split(" ", 1)[0]
        if not loc and first in TransformerSpec.model_fields:
            loc = first  # a cross-field check names the field it is about first
        raise ConfigError(f"{msg}{got_s}", field=f"{prefix}.{loc}" if loc else prefix) \
            from None
