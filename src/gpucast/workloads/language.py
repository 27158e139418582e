"""Language models, written here: BERT-base/large, GPT-2 small, Transformer-base, an LSTM LM.

* ``bert-base``: BERT-base (Devlin et al. 2019): vocabulary 30,522, 512 positions, 2 token
  types, 12 post-LayerNorm layers of hidden 768, 12 heads, feed-forward 3072 with GELU, and the
  **masked-language-model head** of HuggingFace's ``BertForMaskedLM`` (dense + GELU + LayerNorm,
  decoder tied to the word embeddings, own bias). No pooler (the MLM head does not use it), so
  the model has 109,514,298 parameters, exactly ``BertForMaskedLM``'s. As in ``BertForMaskedLM``
  the logits are computed at every position; the synthetic labels mark 15 % of positions for
  the loss (the rest are ``-100``, ignored). Sequence length 128 by default.
* ``bert-large``: the same with 24 layers of hidden 1024, 16 heads, feed-forward 4096
  (``BertForMaskedLM`` for bert-large-uncased: 335,174,458 parameters; the often-quoted
  335,141,888 is ``BertModel``, with the pooler and without the MLM head). Sequence length 512
  by default, as in the MLPerf Training BERT benchmark.
* ``gpt2-small``: GPT-2 124M (Radford et al. 2019): vocabulary 50,257, context 1024, 12
  pre-LayerNorm layers of hidden 768, 12 heads, feed-forward 3072 with GELU (tanh), final
  LayerNorm and a language-model head tied to the token embeddings: 124,439,808 parameters, as
  HuggingFace's ``GPT2LMHeadModel``. Next-token loss on every position. Sequence length 1024 by
  default (``seq_len`` option, at most the context).

* ``transformer-base``: the base Transformer of Vaswani et al. 2017 (table 3) for WMT
  English-German: 6 encoder and 6 decoder post-LayerNorm layers, d_model 512, 8 heads,
  feed-forward 2048 with ReLU, sinusoidal positions, and one embedding matrix shared by the
  encoder, the decoder and the pre-softmax projection (no output bias), label-smoothed (0.1)
  cross-entropy. The vocabulary is 32,768 shared subwords (``vocab``; tensor2tensor's
  ``wmt32k`` and the usual fairseq BPE-32k preprocessing; the paper's BPE had about 37,000):
  60,915,712 parameters (63,082,496 at 37,000). A sample is a sentence pair of ``seq_len``
  (128) source and ``seq_len`` target tokens, without padding.
* ``lstm-lm``: the word-level LSTM language model of PyTorch's ``examples/word_language_model``
  (``RNNModel``; Zaremba et al. 2014 "medium"): an embedding, dropout 0.5, a 2-layer LSTM of
  650 units, dropout and a linear decoder tied to the embedding, on WikiText-2's 33,278-word
  vocabulary, BPTT windows of 35 tokens (``seq_len``): 28,434,378 parameters (``tied=false``:
  50,065,078; the "large" 1500-unit model, ``hidden=1500``: 85,974,278). Next-token loss at
  every position; the hidden state starts at zero in every batch.

Attention uses ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels on GPUs);
dropout defaults to 0.1 as in both papers (``dropout`` option).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import boolean, positive_int, probability, reject_unknown
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
    def __init__(self, hidden: int, inner: int, dropout: float, activation: nn.Module) -> None:
        super().__init__(
            nn.Linear(hidden, inner),
            activation,
            nn.Linear(inner, hidden),
            nn.Dropout(dropout),
        )


class _PostLNLayer(nn.Module):
    """A BERT (or Transformer-base) encoder layer: attention and feed-forward, each followed by
    add & LayerNorm. GELU and LayerNorm eps 1e-12 as in BERT unless given."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        inner: int,
        dropout: float,
        *,
        activation: nn.Module | None = None,
        eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.attention = _SelfAttention(hidden, heads, dropout, causal=False)
        self.attention_dropout = nn.Dropout(dropout)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.mlp = _MLP(hidden, inner, dropout, activation or nn.GELU())
        self.ln2 = nn.LayerNorm(hidden, eps=eps)

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
        self.mlp = _MLP(hidden, inner, dropout, nn.GELU(approximate="tanh"))

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


def _seq_len(options: dict[str, Any], default_seq: int, max_seq: int) -> int:
    seq_len = positive_int("seq_len", options.get("seq_len", default_seq))
    if seq_len > max_seq:
        raise InvalidSpecError(
            "seq_len",
            f"must be <= {max_seq} (the model's positions)",
            got=seq_len,
            fix=f"choose seq_len up to {max_seq}, e.g. -o seq_len={max_seq}",
        )
    return seq_len


def _common_options(
    name: str, options: dict[str, Any], default_seq: int, max_seq: int, default_layers: int = 12
) -> tuple[int, int, float]:
    reject_unknown(name, options, ("seq_len", "layers", "dropout"))
    seq_len = _seq_len(options, default_seq, max_seq)
    layers = positive_int("layers", options.get("layers", default_layers))
    dropout = probability("dropout", options.get("dropout", 0.1))
    return seq_len, layers, dropout


BERT_VOCAB = 30522
GPT2_VOCAB = 50257


def _bert(
    name: str, options: dict[str, Any], *, hidden: int, heads: int, layers: int, seq_len: int
) -> Workload:
    seq_len, layers, dropout = _common_options(name, options, seq_len, 512, layers)

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return BertForMaskedLM(
                vocab=BERT_VOCAB,
                positions=512,
                hidden=hidden,
                layers=layers,
                heads=heads,
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
        name=name,
        family="language",
        sample_unit="sequences",
        build_model=build_model,
        make_batch=make_batch,
        loss=_token_loss,
        description=f"BERT-{name.removeprefix('bert-')} MLM, {layers} layers, hidden {hidden}, "
        f"{heads} heads, seq {seq_len}",
        options={"seq_len": seq_len, "layers": layers, "dropout": dropout},
    )


def bert_base(**options: Any) -> Workload:
    """``bert-base`` with the MLM head; options ``seq_len`` (128), ``layers`` (12), ``dropout``."""
    return _bert("bert-base", options, hidden=768, heads=12, layers=12, seq_len=128)


def bert_large(**options: Any) -> Workload:
    """``bert-large`` with the MLM head; options ``seq_len`` (512), ``layers`` (24),
    ``dropout``."""
    return _bert("bert-large", options, hidden=1024, heads=16, layers=24, seq_len=512)


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
        options={"seq_len": seq_len, "layers": layers, "dropout": dropout},
    )


# ---------------------------------------------------------------------------------------------
# Transformer-base (Vaswani et al. 2017), encoder-decoder


class _CrossAttention(nn.Module):
    """Decoder-to-encoder attention: queries from the decoder, keys and values from the memory."""

    def __init__(self, hidden: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.q = nn.Linear(hidden, hidden)
        self.kv = nn.Linear(hidden, 2 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        head_dim = hidden // self.heads
        q = self.q(x).view(batch, seq, self.heads, head_dim).transpose(1, 2)
        kv = self.kv(memory).view(batch, memory.shape[1], 2, self.heads, head_dim)
        k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)
        attended = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(attended.transpose(1, 2).reshape(batch, seq, hidden))


class _DecoderLayer(nn.Module):
    """Post-LayerNorm decoder layer: causal self-attention, cross-attention, ReLU feed-forward."""

    def __init__(self, hidden: int, heads: int, inner: int, dropout: float) -> None:
        super().__init__()
        self.self_attention = _SelfAttention(hidden, heads, dropout, causal=True)
        self.cross_attention = _CrossAttention(hidden, heads, dropout)
        self.dropout = nn.Dropout(dropout)
        self.ln1 = nn.LayerNorm(hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = _MLP(hidden, inner, dropout, nn.ReLU())
        self.ln3 = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.dropout(self.self_attention(x)))
        x = self.ln2(x + self.dropout(self.cross_attention(x, memory)))
        return self.ln3(x + self.mlp(x))


def sinusoidal_positions(length: int, hidden: int) -> torch.Tensor:
    """Vaswani et al.'s fixed encodings: sin on even, cos on odd features, ``(length, hidden)``."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    frequency = torch.exp(
        torch.arange(0, hidden, 2, dtype=torch.float32) * (-9.210340371976184 / hidden)
    )
    table = torch.zeros(length, hidden)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class TransformerSeq2Seq(nn.Module):
    """The base Transformer: one embedding shared by encoder, decoder and the output layer."""

    def __init__(
        self,
        *,
        vocab: int,
        hidden: int,
        layers: int,
        heads: int,
        inner: int,
        dropout: float,
        positions: int,
    ) -> None:
        super().__init__()
        self.scale = math.sqrt(hidden)
        self.embeddings = nn.Embedding(vocab, hidden)
        self.register_buffer("positions", sinusoidal_positions(positions, hidden), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            _PostLNLayer(hidden, heads, inner, dropout, activation=nn.ReLU(), eps=1e-5)
            for _ in range(layers)
        )
        self.decoder = nn.ModuleList(
            _DecoderLayer(hidden, heads, inner, dropout) for _ in range(layers)
        )
        _init_transformer(self)
        nn.init.normal_(self.embeddings.weight, std=hidden**-0.5)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(tokens) * self.scale + self.positions[: tokens.shape[1]]
        return self.dropout(x)

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        memory = self._embed(source)
        for layer in self.encoder:
            memory = layer(memory)
        x = self._embed(target)
        for layer in self.decoder:
            x = layer(x, memory)
        return F.linear(x, self.embeddings.weight)  # tied pre-softmax projection


TRANSFORMER_VOCAB = 32768


def transformer_base(**options: Any) -> Workload:
    """``transformer-base``; options ``seq_len`` (128 source and target tokens), ``vocab``
    (32,768), ``layers`` (6 + 6), ``dropout`` (0.1), ``label_smoothing`` (0.1)."""
    reject_unknown(
        "transformer-base", options, ("seq_len", "vocab", "layers", "dropout", "label_smoothing")
    )
    seq_len = _seq_len(options, 128, 4096)
    vocab = positive_int("vocab", options.get("vocab", TRANSFORMER_VOCAB))
    layers = positive_int("layers", options.get("layers", 6))
    dropout = probability("dropout", options.get("dropout", 0.1))
    smoothing = probability("label_smoothing", options.get("label_smoothing", 0.1))

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return TransformerSeq2Seq(
                vocab=vocab,
                hidden=512,
                layers=layers,
                heads=8,
                inner=2048,
                dropout=dropout,
                positions=seq_len,
            )

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        source = torch.randint(0, vocab, (batch_size, seq_len), device=device)
        # Teacher forcing: the decoder reads the target shifted right by one token.
        target = torch.randint(0, vocab, (batch_size, seq_len + 1), device=device)
        return (source, target[:, :-1]), target[:, 1:]

    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), label_smoothing=smoothing
        )

    return Workload(
        name="transformer-base",
        family="language",
        sample_unit="sentence pairs",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
        description=f"Transformer base (Vaswani 2017), {layers}+{layers} layers, d 512, 8 heads, "
        f"vocab {vocab}, seq {seq_len}",
        options={
            "seq_len": seq_len,
            "vocab": vocab,
            "layers": layers,
            "dropout": dropout,
            "label_smoothing": smoothing,
        },
    )


# ---------------------------------------------------------------------------------------------
# LSTM word language model (PyTorch examples, word_language_model)


class LSTMLanguageModel(nn.Module):
    """Embedding, dropout, a stacked LSTM, dropout, a linear decoder (tied to the embedding)."""

    def __init__(self, *, vocab: int, hidden: int, layers: int, dropout: float, tied: bool) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, hidden)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.LSTM(
            hidden, hidden, layers, dropout=dropout if layers > 1 else 0.0, batch_first=True
        )
        self.decoder = nn.Linear(hidden, vocab)
        if tied:
            self.decoder.weight = self.encoder.weight
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        if not tied:
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # A fresh zero state per batch (the example carries it over, detached: same cost).
        output, _ = self.rnn(self.dropout(self.encoder(tokens)))
        return self.decoder(self.dropout(output))


WIKITEXT2_VOCAB = 33278


def lstm_lm(**options: Any) -> Workload:
    """``lstm-lm``; options ``hidden`` (650, embedding size too), ``layers`` (2), ``seq_len``
    (35, the BPTT window), ``vocab`` (33,278), ``dropout`` (0.5), ``tied`` (true)."""
    reject_unknown("lstm-lm", options, ("hidden", "layers", "seq_len", "vocab", "dropout", "tied"))
    hidden = positive_int("hidden", options.get("hidden", 650))
    layers = positive_int("layers", options.get("layers", 2))
    seq_len = positive_int("seq_len", options.get("seq_len", 35))
    vocab = positive_int("vocab", options.get("vocab", WIKITEXT2_VOCAB))
    dropout = probability("dropout", options.get("dropout", 0.5))
    tied = boolean("tied", options.get("tied", True))

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return LSTMLanguageModel(
                vocab=vocab, hidden=hidden, layers=layers, dropout=dropout, tied=tied
            )

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        stream = torch.randint(0, vocab, (batch_size, seq_len + 1), device=device)
        return (stream[:, :-1],), stream[:, 1:]

    return Workload(
        name="lstm-lm",
        family="language",
        sample_unit="sequences",
        build_model=build_model,
        make_batch=make_batch,
        loss=_token_loss,
        description=f"{layers}-layer LSTM language model, {hidden} hidden, vocab {vocab}, "
        f"{'tied' if tied else 'untied'}, bptt {seq_len}",
        options={
            "hidden": hidden,
            "layers": layers,
            "seq_len": seq_len,
            "vocab": vocab,
            "dropout": dropout,
            "tied": tied,
        },
    )
