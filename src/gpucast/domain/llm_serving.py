"""LLM serving as frozen values: requests with token counts, a scheduler, an iteration's cost.

The token-level serving simulator (:mod:`gpucast.simulate.llm_serving`) takes

* :class:`LlmRequests` -- arrival times with each request's prompt and output tokens (a
  replayed trace or synthetic draws);
* :class:`IterationCost` -- the time of one engine iteration as a function of the tokens it
  runs, the sequences in it and the KV cache it touches, built by
  :func:`gpucast.predict.llm_infer.iteration_cost` from the same formulas as
  ``gpucast predict infer``;
* :class:`SchedulerConfig` -- how the engine batches (vLLM's knobs: ``max_num_seqs``,
  ``max_num_batched_tokens``, the KV block size, chunked prefill, preemption mode);
* :class:`Disaggregation` -- Splitwise-style separate prefill and decode pools.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import count_of

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PreemptionMode = Literal["recompute", "swap"]
PREEMPTION_MODES: tuple[str, ...] = get_args(PreemptionMode)
#: vLLM's defaults (``EngineArgs``): KV block of 16 tokens, 1% of the blocks kept free when a
#: new sequence is admitted, 4 GiB of CPU swap space per GPU.
DEFAULT_BLOCK_SIZE = 16
DEFAULT_WATERMARK = 0.01
DEFAULT_SWAP_SPACE_GIB = 4.0
#: KV-cache block sizes (tokens) a paged-attention engine takes: vLLM's ``--block-size``
#: choices (8, 16, 32; 64 and 128 in later releases); TensorRT-LLM's ``tokens_per_block`` is
#: a power of two too.
ENGINE_BLOCK_SIZES = (8, 16, 32, 64, 128)
#: Most serving instances one simulation takes (replicas, or prefill + decode instances):
#: round robin gives each 1/N of the stream, so a larger fleet is one replica at rate / N.
MAX_SERVING_INSTANCES = 1024
#: vLLM's token budget per iteration with chunked prefill (``max_num_batched_tokens`` of the
#: V1 engine for online serving on data-centre GPUs is 2048 in its docs' examples; V0: 512).
DEFAULT_CHUNKED_BUDGET = 2048
#: Without chunked prefill vLLM V0 sets ``max_num_batched_tokens = max(max_model_len, 2048)``.
MIN_PREFILL_BUDGET = 2048


def _int_at_least(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InvalidSpecError(name, f"must be an integer >= {low}", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmRequests:
    """Requests sorted by arrival: seconds from 0, prompt tokens, tokens to generate (>= 1)."""

    arrival_s: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    source: str = ""

    def __post_init__(self) -> None:
        arrival = np.array(self.arrival_s, dtype=np.float64, copy=True)
        inp = np.array(self.input_tokens, dtype=np.int64, copy=True)
        out = np.array(self.output_tokens, dtype=np.int64, copy=True)
        if not (arrival.ndim == inp.ndim == out.ndim == 1) or not (
            arrival.size == inp.size == out.size
        ):
            raise InvalidSpecError(
                "requests", "arrival_s, input_tokens and output_tokens must be 1-D of one length"
            )
        if arrival.size and (not np.all(np.isfinite(arrival)) or np.any(arrival < 0)):
            raise InvalidSpecError("requests.arrival_s", "must be finite seconds >= 0")
        if arrival.size > 1 and np.any(np.diff(arrival) < 0):
            raise InvalidSpecError("requests.arrival_s", "must be sorted")
        if np.any(inp < 1):
            raise InvalidSpecError("requests.input_tokens", "must be >= 1 token each")
        if np.any(out < 1):
            raise InvalidSpecError("requests.output_tokens", "must be >= 1 token each")
        for name, arr in (("arrival_s", arrival), ("input_tokens", inp), ("output_tokens", out)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def count(self) -> int:
        return int(self.arrival_s.size)

    def take(self, index: npt.ArrayLike) -> LlmRequests:
        """The requests at ``index`` (a sorted index keeps the arrival order)."""
        i = np.asarray(index)
        return LlmRequests(
            arrival_s=self.arrival_s[i],
            input_tokens=self.input_tokens[i],
            output_tokens=self.output_tokens[i],
            source=self.source,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """vLLM-style iteration-level batching.

    Each iteration the running sequences decode one token and waiting requests are admitted
    first come, first served while ``max_num_seqs`` sequences, ``max_batched_tokens`` tokens
    and the paged KV cache (``block_size``-token blocks, ``watermark`` of them kept free at
    admission) allow. Without ``chunked_prefill`` an iteration that admits prompts runs only
    their prefill (the decodes wait, vLLM V0's default); with it every iteration runs the
    decodes first and fills the rest of the token budget with prompt chunks (vLLM V1,
    Sarathi-Serve). When a decode finds no free block the latest-arrived running sequence is
    preempted: ``recompute`` drops its KV cache and re-prefills prompt + generated tokens
    later; ``swap`` moves it to ``swap_space_gib`` of CPU memory per GPU over PCIe (falling
    back to recompute when that is full). ``max_batched_tokens`` ``None``: the defaults of
    :data:`DEFAULT_CHUNKED_BUDGET` / ``max(context, 2048)`` (resolved by :meth:`budget`).
    """

    max_num_seqs: int = 256
    max_batched_tokens: int | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    chunked_prefill: bool = False
    preemption: PreemptionMode = "recompute"
    watermark: float = DEFAULT_WATERMARK
    swap_space_gib: float = DEFAULT_SWAP_SPACE_GIB

    def __post_init__(self) -> None:
        _int_at_least("max-num-seqs", self.max_num_seqs, 1)
        if self.max_batched_tokens is not None:
            _int_at_least("max-batched-tokens", self.max_batched_tokens, 1)
        _int_at_least("block-size", self.block_size, 1)
        if self.preemption not in PREEMPTION_MODES:
            raise InvalidSpecError(
                "preemption", f"must be one of {', '.join(PREEMPTION_MODES)}",
                got=self.preemption, fix="e.g. --preemption recompute",
            )  # fmt: skip
        if not (math.isfinite(self.watermark) and 0.0 <= self.watermark < 1.0):
            raise InvalidSpecError("watermark", "must be in [0, 1)", got=self.watermark)
        if not (math.isfinite(self.swap_space_gib) and self.swap_space_gib >= 0.0):
            raise InvalidSpecError("swap-space-gib", "must be >= 0", got=self.swap_space_gib)

    def budget(self, max_context: int) -> int:
        """Tokens one iteration may run."""
        if self.max_batched_tokens is not None:
            return self.max_batched_tokens
        if self.chunked_prefill:
            return DEFAULT_CHUNKED_BUDGET
        return max(max_context, MIN_PREFILL_BUDGET)

    def check_budget(self, requests: LlmRequests, max_context: int) -> None:
        """One clear error when, without chunked prefill, a request within the context window
        is longer than the token budget: its prefill (a recompute re-runs prompt and the
        tokens generated so far, up to prompt + output - 1) never fits one iteration, so it
        could never be scheduled (vLLM refuses such a budget at start-up)."""
        if self.chunked_prefill or self.max_batched_tokens is None:
            return  # the default budget holds the context window
        inp, out = requests.input_tokens, requests.output_tokens
        full = np.where(inp + out <= max_context, inp + out - 1, 0)
        if full.size == 0 or int(full.max()) <= self.max_batched_tokens:
            return
        worst = int(np.argmax(full))
        need = int(full[worst])
        raise InvalidSpecError(
            "max-batched-tokens",
            "without chunked prefill one iteration must hold a request's input + output - 1 "
            f"tokens ({int(inp[worst])} + {int(out[worst])} - 1 = {need}; "
            f"{int(np.count_nonzero(full > self.max_batched_tokens))} of {full.size} requests "
            "could never be scheduled)",
            got=self.max_batched_tokens,
            fix=f"raise --max-batched-tokens to >= {need} or add --chunked-prefill",
        )

    def describe(self, max_context: int) -> str:
        mode = "chunked prefill" if self.chunked_prefill else "prefill-first"
        return (
            f"continuous batching ({mode}): <= {count_of(self.max_num_seqs, 'sequence')}, "
            f"<= {self.budget(max_context)} tokens per iteration, {self.block_size}-token KV "
            f"blocks, preemption by {self.preemption}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Disaggregation:
    """Splitwise-style serving: ``prefill_instances`` run only prompts, then each request's KV
    cache crosses ``kv_link_gbps`` (Gbit/s per GPU, each of the ``tp`` GPUs sends its shard
    over its own link) plus ``transfer_latency_s`` to one of ``decode_instances``, which
    only decode. The first token leaves the prefill instance. The link of a prefill instance
    is a server: its transfers queue behind each other (first come, first served), each
    holding it for :meth:`serialise_s`, so it carries at most ``kv_link_gbps`` x 1e9 / 8 /
    (KV bytes per GPU of a request) requests per second."""

    prefill_instances: int
    decode_instances: int
    kv_link_gbps: float
    transfer_latency_s: float = 1e-4

    def __post_init__(self) -> None:
        _int_at_least("prefill-instances", self.prefill_instances, 1)
        _int_at_least("decode-instances", self.decode_instances, 1)
        if not (math.isfinite(self.kv_link_gbps) and self.kv_link_gbps > 0):
            raise InvalidSpecError("kv-link-gbps", "must be > 0", got=self.kv_link_gbps)
        if not (math.isfinite(self.transfer_latency_s) and self.transfer_latency_s >= 0):
            raise InvalidSpecError("transfer-latency-s", "must be >= 0")

    def serialise_s(self, kv_bytes_per_gpu: float) -> float:
        """Seconds a request's KV cache holds the link (its bytes at the link's rate)."""
        return kv_bytes_per_gpu * 8.0 / (self.kv_link_gbps * 1e9)

    def transfer_s(self, kv_bytes_per_gpu: float) -> float:
        """Seconds from a request's prefill to its decode on an idle link."""
        return self.transfer_latency_s + self.serialise_s(kv_bytes_per_gpu)


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationCost:
    """Seconds of one engine iteration on one instance (``gpus`` GPUs).

    ``iteration_s = pipe x (passes x pass_s[T / passes] + token_s T + sequence_s n +
    kv_s_per_token K + attention_s_per_unit A)``: ``T`` tokens in the iteration's forward
    passes (one pass unless the engine splits prompts into ``prefill_chunk_tokens``), ``n``
    sequences, ``K`` KV-cache tokens read or written, ``A`` attention units (a decode token
    at context ``c``: ``c``; a prompt chunk of ``m`` tokens after ``p`` cached ones: ``m p +
    m^2 / 2``). ``pass_s[T]`` streams the weights a pass of ``T`` tokens touches, its
    tensor-parallel all-reduces and the engine's fixed step cost; ``pipe`` pipelines the
    passes of a layer split over ``pipeline_depth`` GPUs. ``kv_capacity_tokens``: KV cache
    the instance holds (tokens); ``kv_bytes_per_token``: bytes one token holds on one GPU.
    """

    pass_s: FloatArray
    token_s: float
    sequence_s: float
    kv_s_per_token: float
    attention_s_per_unit: float
    kv_capacity_tokens: int
    kv_bytes_per_token: float
    prefill_chunk_tokens: int = 0
    pipeline_depth: int = 1
    gpus: int = 1
    source: str = ""

    def __post_init__(self) -> None:
        table = np.array(self.pass_s, dtype=np.float64, copy=True)
        if table.ndim != 1 or table.size < 2 or not np.all(np.isfinite(table)):
            raise InvalidSpecError("iteration cost", "pass_s must be a finite 1-D table")
        table.setflags(write=False)
        object.__setattr__(self, "pass_s", table)
        for name in (
            "token_s", "sequence_s", "kv_s_per_token", "attention_s_per_unit",
            "kv_bytes_per_token",
        ):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(f"iteration cost.{name}", "must be >= 0", got=value)
        _int_at_least("iteration cost.kv_capacity_tokens", self.kv_capacity_tokens, 0)
        _int_at_least("iteration cost.pipeline_depth", self.pipeline_depth, 1)
        _int_at_least("iteration cost.gpus", self.gpus, 1)

    def scaled(self, factor: float) -> IterationCost:
        """Every iteration ``factor`` times as long (the KV capacity unchanged): the engine's
        iteration times at an edge of their validated band."""
        if not (math.isfinite(factor) and factor > 0):
            raise InvalidSpecError("iteration cost factor", "must be > 0", got=factor)
        return dataclasses.replace(
            self,
            pass_s=self.pass_s * factor,
            token_s=self.token_s * factor,
            sequence_s=self.sequence_s * factor,
            kv_s_per_token=self.kv_s_per_token * factor,
            attention_s_per_unit=self.attention_s_per_unit * factor,
        )

    @property
    def max_tokens(self) -> int:
        """The largest pass the table holds."""
        return int(self.pass_s.size - 1)

    def passes(self, prompt_tokens: int) -> int:
        """Forward passes a prompt of ``prompt_tokens`` needs (engines with a prompt chunk)."""
        chunk = self.prefill_chunk_tokens
        return 1 if chunk <= 0 or prompt_tokens <= chunk else -(-prompt_tokens // chunk)

    def iteration_s(
        self,
        tokens: int,
        sequences: int,
        kv_tokens: float,
        attention_units: float,
        passes: int = 1,
    ) -> float:
        """One iteration (class docstring)."""
        per_pass = -(-tokens // passes)
        table = self.pass_s
        base = float(table[min(per_pass, table.size - 1)])
        serial = (
            passes * base
            + self.token_s * tokens
            + self.sequence_s * sequences
            + self.kv_s_per_token * kv_tokens
            + self.attention_s_per_unit * attention_units
        )
        depth = self.pipeline_depth
        if depth > 1 and passes > 1:
            serial *= (passes + depth - 1.0) / (depth * passes)
        return serial


TokenKind = Literal["fixed", "uniform", "lognormal", "empirical"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenLengths:
    """A distribution of token counts per request: ``fixed`` (``a``), ``uniform`` integers in
    ``[a, b]``, ``lognormal`` with median ``a`` and log-standard deviation ``b``, or
    ``empirical`` (drawn with replacement from ``values``, e.g. a trace's column)."""

    kind: TokenKind
    a: float = 0.0
    b: float = 0.0
    values: tuple[int, ...] = ()
    text: str = ""

    def describe(self) -> str:
        return (
            self.text
            or {
                "fixed": f"{self.a:g}",
                "uniform": f"uniform {self.a:g}-{self.b:g}",
                "lognormal": f"lognormal, median {self.a:g}, sigma {self.b:g}",
                "empirical": f"resampled from {len(self.values)} values",
            }[self.kind]
        )

    def draw(self, rng: np.random.Generator, size: int) -> IntArray:
        """``size`` draws, each at least 1."""
        if self.kind == "fixed":
            out = np.full(size, self.a)
        elif self.kind == "uniform":
            out = rng.integers(int(self.a), int(self.b) + 1, size=size).astype(np.float64)
        elif self.kind == "lognormal":
            out = np.rint(self.a * np.exp(self.b * rng.standard_normal(size)))
        else:
            out = np.asarray(self.values, dtype=np.float64)[rng.integers(0, len(self.values), size)]
        return np.asarray(np.maximum(out, 1.0), dtype=np.int64)


def parse_token_lengths(text: object, field: str) -> TokenLengths:
    """``1024``, ``uniform:128:2048`` or ``lognormal:1024:0.8`` (median, sigma of the log)."""
    if isinstance(text, TokenLengths):
        return text
    if isinstance(text, int | np.integer) and not isinstance(text, bool):
        text = str(int(text))
    raw = str(text).strip()
    fix = f"e.g. --{field} 1024, --{field} uniform:128:2048 or --{field} lognormal:1024:0.8"
    parts = raw.split(":")
    try:
        if len(parts) == 1:
            value = int(parts[0])
            if value < 1:
                raise ValueError
            return TokenLengths(kind="fixed", a=value, text=raw)
        kind, *args = parts
        numbers = [float(x) for x in args]
    except ValueError:
        raise InvalidSpecError(field, "must be a token count >= 1 or a distribution", got=raw,
                               fix=fix) from None  # fmt: skip
    if kind == "uniform" and len(numbers) == 2:
        lo, hi = numbers
        if lo.is_integer() and hi.is_integer() and 1 <= lo <= hi:
            return TokenLengths(kind="uniform", a=lo, b=hi, text=raw)
    if kind == "lognormal" and len(numbers) == 2:
        median, sigma = numbers
        if math.isfinite(median) and median >= 1 and math.isfinite(sigma) and sigma >= 0:
            return TokenLengths(kind="lognormal", a=median, b=sigma, text=raw)
    raise InvalidSpecError(field, "must be N, uniform:LO:HI (1 <= LO <= HI) or "
                           "lognormal:MEDIAN:SIGMA (MEDIAN >= 1, SIGMA >= 0)", got=raw,
                           fix=fix)  # fmt: skip
