"""Transformer language models, written here: a BERT-base encoder and GPT-2 small.

* ``bert-base``: BERT-base (Devlin et al. 2019): vocabulary 30,522, 512 positions, 2 token
  types, 12 post-LayerNorm layers of hidden 768, 12 heads, feed-forward 3072 with GELU, and the
  **masked-language-model head** of HuggingFace's ``BertForMaskedLM`` (dense + GELU + LayerNorm,
  decoder tied to the word embeddings, own bias). No pooler (the MLM head does not use it), so
  the model has 109,514,298 parameters, exactly ``BertForMaskedLM``'s. As in ``BertForMaskedLM``
  the logits are computed at every position; the synthetic labels mark 15 % of positions for
  the loss (the rest are ``-100``, ignored). Sequence length 128 by default.
* ``gpt2-small``: GPT-2 124M (Radford et al. 2019): vocabulary 50,257, context 1024, 12
  pre-LayerNorm layers of hidden 768, 12 heads, feed-forward 3072 with GELU (tanh), final
  LayerNorm and a language-model head tied to the token embeddings: 124,439,808 parameters, as
  HuggingFace's ``GPT2LMHeadModel``. Next-token loss on every position. Sequence length 1024 by
  default (``seq_len`` option, at most the context).

Attention uses ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels on GPUs);
dropout defaults to 0.1 as in both papers (``dropout`` option).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import positive_int, probability, reject_unknown
from gpucast.workloads.base import Batch, Workload


class _SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, dropout: float, causal: bool) -> None:
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        qkv = self.qkv(x).view(batch, seq, 3, self.heads, hidden // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attended = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=self.causal
        )
        return self.out(attended.transpose(1, 2).reshape(batch, seq, hidden))


class _MLP(nn.Sequential):
    def __init__(self, hidden: int, inner: int, dropout: float, approximate: str) -> None:
        super().__init__(
            nn.Linear(hidden, inner),
            nn.GELU(approximate=approximate),
            nn.Linear(inner, hidden),
            nn.Dropout(dropout),
        )


class _PostLNLayer(nn.Module):
    """A BERT encoder layer: attention and feed-forward, each followed by add & LayerNorm."""

    def __init__(self, hidden: int, heads: int, inner: int, dropout: float) -> None:
        super().__init__()
        self.attention = _SelfAttention(hidden, heads, dropout, causal=False)
        self.attention_dropout = nn.Dropout(dropout)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.mlp = _MLP(hidden, inner, dropout, "none")
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attention_dropout(self.attention(x)))
        return self.ln2(x + self.mlp(x))


class _PreLNLayer(nn.Module):
    """A GPT-2 block: LayerNorm before causal attention and before the feed-forward."""

    def __init__(self, hidden: int, heads: int, inner: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.attention = _SelfAttention(hidden, heads, dropout, causal=True)
        self.attention_dropout = nn.Dropout(dropout)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.mlp = _MLP(hidden, inner, dropout, "tanh")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention_dropout(self.attention(self.ln1(x)))
        return x + self.mlp(self.ln2(x))


def _init_transformer(module: nn.Module) -> None:
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.normal_(sub.weight, std=0.02)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
        elif isinstance(sub, nn.Embedding):
            nn.init.normal_(sub.weight, std=0.02)


class BertForMaskedLM(nn.Module):
    def __init__(
        self, *, vocab: int, positions: int, hidden: int, layers: int, heads: int, dropout: float
    ) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.embedding_ln = nn.LayerNorm(hidden, eps=1e-12)
        self.embedding_dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(
            *(_PostLNLayer(hidden, heads, 4 * hidden, dropout) for _ in range(layers))
        )
        self.head_transform = nn.Sequential(
            nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden, eps=1e-12)
        )
        self.head_bias = nn.Parameter(torch.zeros(vocab))
        _init_transformer(self)

    def forward(self, tokens: torch.Tensor, token_types: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = (
            self.word_embeddings(tokens)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_types)
        )
        x = self.layers(self.embedding_dropout(self.embedding_ln(x)))
        return F.linear(self.head_transform(x), self.word_embeddings.weight, self.head_bias)


class GPT2LMHead(nn.Module):
    def __init__(
        self, *, vocab: int, context: int, hidden: int, layers: int, heads: int, dropout: float
    ) -> None:
        super().__init__()
        self.token_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(context, hidden)
        self.embedding_dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(
            *(_PreLNLayer(hidden, heads, 4 * hidden, dropout) for _ in range(layers))
        )
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        _init_transformer(self)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token_embeddings(tokens) + self.position_embeddings(positions)
        x = self.ln_f(self.layers(self.embedding_dropout(x)))
        return F.linear(x, self.token_embeddings.weight)  # tied language-model head


def _token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def _common_options(
    name: str, options: dict[str, Any], default_seq: int, max_seq: int
) -> tuple[int, int, float]:
    reject_unknown(name, options, ("seq_len", "layers", "dropout"))
    seq_len = positive_int("seq_len", options.get("seq_len", default_seq))
    if seq_len > max_seq:
        raise InvalidSpecError(
            "seq_len",
            f"must be <= {max_seq} (the model's positions)",
            got=seq_len,
            fix=f"choose --seq-len up to {max_seq}",
        )
    layers = positive_int("layers", options.get("layers", 12))
    dropout = probability("dropout", options.get("dropout", 0.1))
    return seq_len, layers, dropout


BERT_VOCAB = 30522
GPT2_VOCAB = 50257


def bert_base(**options: Any) -> Workload:
    """``bert-base`` with the MLM head; options ``seq_len`` (128), ``layers`` (12), ``dropout``."""
    seq_len, layers, dropout = _common_options("bert-base", options, 128, 512)

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return BertForMaskedLM(
                vocab=BERT_VOCAB,
                positions=512,
                hidden=768,
                layers=layers,
                heads=12,
                dropout=dropout,
            )

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        tokens = torch.randint(0, BERT_VOCAB, (batch_size, seq_len), device=device)
        token_types = torch.zeros(batch_size, seq_len, dtype=torch.long, device=device)
        token_types[:, seq_len // 2 :] = 1  # sentence A / sentence B
        labels = torch.randint(0, BERT_VOCAB, (batch_size, seq_len), device=device)
        masked = torch.rand(batch_size, seq_len, device=device) < 0.15
        labels = torch.where(masked, labels, torch.full_like(labels, -100))
        return (tokens, token_types), labels

    return Workload(
        name="bert-base",
        family="language",
        sample_unit="sequences",
        build_model=build_model,
        make_batch=make_batch,
        loss=_token_loss,
        description=f"BERT-base MLM, {layers} layers, hidden 768, 12 heads, seq {seq_len}",
    )


def gpt2_small(**options: Any) -> Workload:
    """``gpt2-small``; options ``seq_len`` (1024), ``layers`` (12), ``dropout`` (0.1)."""
    seq_len, layers, dropout = _common_options("gpt2-small", options, 1024, 1024)

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return GPT2LMHead(
                vocab=GPT2_VOCAB,
                context=1024,
                hidden=768,
                layers=layers,
                heads=12,
                dropout=dropout,
            )

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        # One extra token so that the targets are the inputs shifted by one.
        stream = torch.randint(0, GPT2_VOCAB, (batch_size, seq_len + 1), device=device)
        return (stream[:, :-1],), stream[:, 1:]

    return Workload(
        name="gpt2-small",
        family="language",
        sample_unit="sequences",
        build_model=build_model,
        make_batch=make_batch,
        loss=_token_loss,
        description=f"GPT-2 small, {layers} layers, hidden 768, 12 heads, seq {seq_len}",
    )
