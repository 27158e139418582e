"""Published hyper-parameters of a transformer language model, as a frozen value.

:class:`TransformerSpec` holds what a model's ``config.json`` (or paper) says -- layers,
widths, heads, the MLP's form, experts -- and derives exact parameter counts from them, so a
training or serving model needs nothing else about the network. Loaded from
``catalog/data/llm_models.csv`` by :func:`gpucast.catalog.llm.load_llm_models`.

Parameter count (``h`` hidden, ``d`` head width, ``a`` heads, ``g`` KV heads, ``f`` MLP
width, ``V`` vocabulary, ``E`` experts, ``k`` experts per token)::

    attention  = h*a*d (q) + 2*h*g*d (k, v: grouped-query attention) + a*d*h (o)  [+ biases]
    expert MLP = 3*h*f if gated (SwiGLU: gate, up, down) else 2*h*f               [+ biases]
    layer      = attention + E * expert MLP + h*E (router, MoE only) + norms
    total      = V*h (+ context*h for learned positions) + L * layer + final norm
                 + V*h (LM head, unless tied to the embedding)

A norm holds ``h`` scales (RMSNorm) or ``2h`` (LayerNorm: scale and shift); a layer has two,
or one when attention and MLP run in parallel off the same norm (GPT-J). ``active_params``
counts ``k`` experts instead of ``E`` -- the parameters one token passes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal, get_args

from gpucast.domain.errors import InvalidSpecError

ModelKind = Literal["decoder", "encoder"]
NormType = Literal["rmsnorm", "layernorm"]
PositionType = Literal["rope", "learned", "alibi"]
AttentionBias = Literal["none", "qkv", "all"]

MODEL_KINDS: tuple[str, ...] = get_args(ModelKind)
NORM_TYPES: tuple[str, ...] = get_args(NormType)
POSITION_TYPES: tuple[str, ...] = get_args(PositionType)
ATTENTION_BIASES: tuple[str, ...] = get_args(AttentionBias)


def _choice(owner: str, name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidSpecError(f"{owner}.{name}", f"must be one of {', '.join(choices)}", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformerSpec:
    """One transformer language model's published shape; counts are derived, never stored.

    ``published_params`` / ``published_active_params`` are the figures the authors give
    (checked against the derived counts by the tests), ``None`` where none is published.
    """

    name: str
    kind: ModelKind = "decoder"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    max_context: int
    #: the sequence length it was pre-trained at, where shorter than its context (Llama 3.1:
    #: 8,192, extended to 131,072 after); the training verbs' default (None: max_context)
    pretrain_seq_len: int | None = None
    activation: str = "silu"  # of the MLP: silu (SwiGLU when gated), gelu, relu
    gated_mlp: bool = True  # three matrices (gate, up, down) instead of two
    n_experts: int = 1
    experts_per_token: int = 1
    tied_embeddings: bool = False
    norm: NormType = "rmsnorm"
    position: PositionType = "rope"
    attention_bias: AttentionBias = "none"
    mlp_bias: bool = False
    lm_head_bias: bool = False
    parallel_block: bool = False  # attention and MLP off one norm (GPT-J, PaLM)
    published_params: float | None = None
    published_active_params: float | None = None
    source_url: str = ""
    as_of: date | None = None

    def __post_init__(self) -> None:
        owner = f"model {self.name}"
        for name in (
            "layers",
            "hidden",
            "heads",
            "kv_heads",
            "head_dim",
            "ffn_hidden",
            "vocab",
            "max_context",
            "n_experts",
            "experts_per_token",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSpecError(f"{owner}.{name}", "must be an integer >= 1", got=value)
        if self.pretrain_seq_len is not None and (
            isinstance(self.pretrain_seq_len, bool)
            or not isinstance(self.pretrain_seq_len, int)
            or not 1 <= self.pretrain_seq_len <= self.max_context
        ):
            raise InvalidSpecError(
                f"{owner}.pretrain_seq_len",
                f"must be an integer from 1 to max_context ({self.max_context}), or empty",
                got=self.pretrain_seq_len,
            )
        if self.heads % self.kv_heads:
            raise InvalidSpecError(
                f"{owner}.kv_heads",
                f"must divide the {self.heads} attention heads (grouped-query attention)",
                got=self.kv_heads,
            )
        if self.experts_per_token > self.n_experts:
            raise InvalidSpecError(
                f"{owner}.experts_per_token",
                f"must be <= n_experts ({self.n_experts})",
                got=self.experts_per_token,
            )
        _choice(owner, "kind", self.kind, MODEL_KINDS)
        _choice(owner, "norm", self.norm, NORM_TYPES)
        _choice(owner, "position", self.position, POSITION_TYPES)
        _choice(owner, "attention_bias", self.attention_bias, ATTENTION_BIASES)
        for name in ("published_params", "published_active_params"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise InvalidSpecError(f"{owner}.{name}", "must be > 0", got=value)

    @property
    def training_seq_len(self) -> int:
        """The training verbs' default tokens per sequence: the pre-training length where the
        catalog gives one, else the context."""
        return self.pretrain_seq_len or self.max_context

    # -- widths ------------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the query (and attention output) projection: ``heads * head_dim``."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the key (and of the value) projection: ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one (expert) MLP: 3 when gated (SwiGLU/GeGLU), else 2."""
        return 3 if self.gated_mlp else 2

    # -- parameters per part -----------------------------------------------------------------
    @property
    def attention_matmul_params(self) -> int:
        """Weights of q, k, v and o of one layer (no biases)."""
        h = self.hidden
        return h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h

    @property
    def attention_params(self) -> int:
        """One layer's attention: weights plus biases (``qkv``: q, k, v; ``all``: also o)."""
        bias = 0
        if self.attention_bias in ("qkv", "all"):
            bias += self.q_dim + 2 * self.kv_dim
        if self.attention_bias == "all":
            bias += self.hidden
        return self.attention_matmul_params + bias

    @property
    def expert_matmul_params(self) -> int:
        """Weights of one (expert) MLP (no biases)."""
        return self.mlp_matrices * self.hidden * self.ffn_hidden

    @property
    def expert_params(self) -> int:
        """One (expert) MLP: weights plus biases when ``mlp_bias``."""
        bias = (self.mlp_matrices - 1) * self.ffn_hidden + self.hidden if self.mlp_bias else 0
        return self.expert_matmul_params + bias

    @property
    def router_params(self) -> int:
        """The MoE router's linear layer (``hidden x n_experts``); 0 for a dense model."""
        return self.hidden * self.n_experts if self.is_moe else 0

    @property
    def norm_params(self) -> int:
        """One norm: ``h`` scales (RMSNorm) or ``2h`` (LayerNorm scale and shift)."""
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    @property
    def norms_per_layer(self) -> int:
        return 1 if self.parallel_block else 2

    @property
    def layer_params(self) -> int:
        """One layer with all its experts."""
        return (
            self.attention_params
            + self.n_experts * self.expert_params
            + self.router_params
            + self.norms_per_layer * self.norm_params
        )

    @property
    def layer_active_params(self) -> int:
        """One layer as one token sees it: ``experts_per_token`` experts."""
        return (
            self.attention_params
            + self.experts_per_token * self.expert_params
            + self.router_params
            + self.norms_per_layer * self.norm_params
        )

    @property
    def embedding_params(self) -> int:
        """Token embedding, plus the position table for learned positions."""
        positions = self.max_context * self.hidden if self.position == "learned" else 0
        return self.vocab * self.hidden + positions

    @property
    def lm_head_params(self) -> int:
        """The output projection's own parameters: 0 when tied to the embedding."""
        if self.tied_embeddings:
            return 0
        return self.vocab * self.hidden + (self.vocab if self.lm_head_bias else 0)

    # -- totals ------------------------------------------------------------------------------
    @property
    def total_params(self) -> int:
        """Every parameter of the model (all experts)."""
        return (
            self.embedding_params
            + self.layers * self.layer_params
            + self.norm_params  # final norm
            + self.lm_head_params
        )

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (``experts_per_token`` of the experts)."""
        return (
            self.embedding_params
            + self.layers * self.layer_active_params
            + self.norm_params
            + self.lm_head_params
        )

    @property
    def matmul_params_per_token(self) -> int:
        """Weights one token is multiplied by: the ``2 N`` of forward FLOPs per token.

        The layers' active matmul weights plus the LM head (``V x h``, even when tied: the
        product is computed either way); the input embedding is a lookup, and biases and norms
        are element-wise, so neither counts (Kaplan et al. 2020, "Scaling Laws for Neural
        Language Models", section 2.1, with the LM head added as in Narayanan et al. 2021).
        """
        per_layer = (
            self.attention_matmul_params
            + self.experts_per_token * self.expert_matmul_params
            + self.router_params
        )
        return self.layers * per_layer + self.vocab * self.hidden
