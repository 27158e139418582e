"""LLM inference of one offline batch: prefill, decode, KV cache, tensor parallelism.

Pure: a :class:`~gpucast.domain.llm.TransformerSpec`, a :class:`~gpucast.domain.catalog.GpuSpec`
and an :class:`~gpucast.domain.llm_infer.EngineProfile` in, an
:class:`~gpucast.domain.llm_infer.InferencePrediction` out. One vectorised evaluation
(:func:`_evaluate`) serves both a single prediction and the fit over hundreds of published
rows, so the two cannot drift. Notation: ``B`` sequences, ``I`` prompt and ``O`` generated
tokens each, ``t`` tensor-parallel GPUs, ``L`` layers, ``h`` hidden, ``d`` head width, ``a``
heads, ``g`` KV heads, ``E`` experts of which ``k`` per token, ``V`` vocabulary, ``b_w`` /
``b_kv`` bytes per weight / KV value (:data:`~gpucast.domain.llm_infer.BYTES_PER_VALUE`).

Memory per GPU (the accounting of :mod:`gpucast.predict.parallel`, for inference)
    Weights: each matrix split ``t`` ways (q, o, the MLP / every expert, the vocabulary-
    parallel embedding and LM head); when ``t`` exceeds the KV heads each GPU keeps one KV
    head, so ``k``/``v`` are replicated; router and norms are replicated. *All* experts are
    held. KV cache per token per GPU: ``2 L g_local d b_kv`` with ``g_local = g / t`` (1 when
    ``t > g``): grouped-query attention shrinks it by ``a / g``. The engine takes
    ``memory_fraction`` of the GPU (vLLM's ``gpu_memory_utilization``, a documented default;
    TensorRT-LLM: of what the weights leave) less a fitted ``memory_reserve_gib``
    (activations of the largest forward pass, CUDA graphs, communication buffers), never more
    than the usable bytes of the one rule (:func:`gpucast.domain.gpu_memory.engine_room_bytes`);
    what the weights leave of that is KV cache. Sequences that do not fit at once run in turns:
    ``c = min(B, max_sequences, KV capacity / (KV per token x (I + O)))`` at a time
    (time-averaged, as continuous batching admits and preempts them), in ``B / c`` waves.
    With llama.cpp's layer split each GPU holds ``L / n`` layers and their KV cache.

Prefill (compute-bound) -> TTFT
    ``2 N I c`` FLOPs (``N``: the matmul weights a token passes through,
    :attr:`TransformerSpec.matmul_params_per_token`, active experts only) plus the attention
    scores ``4 I^2 a d L c / 2`` (causal; fused kernels skip the masked half), over ``t`` GPUs at
    ``compute_efficiency`` of the tensor-core peak; plus streaming the weights once per forward
    pass (once per prompt chunk for llama.cpp) and writing the prompt's KV cache; plus per
    layer two all-reduces of the chunk's ``2 c I h`` activation bytes. llama.cpp pipelines its
    prompt chunks through its GPUs: ``(chunks + n - 1) / n`` chunk times. TTFT is the prefill
    of the first wave.

Decode (memory-bound), one step of the ``c`` running sequences at mean context
``s = I + (O + 1) / 2``
    ``step = weights / (eta_w BW) + c s KV_token / (eta_kv BW) + c (2 N + 4 a d L s) / (eta_c
    peak) + step_overhead + c sequence_overhead + collectives``: every weight is read once per
    step -- for a mixture of experts the experts that the step's tokens route to, expected
    ``E (1 - (1 - k / E)^c)`` per layer (``k`` when every sequence is the same, as in some of
    the benchmark's harnesses), never the input embedding table -- and the whole KV cache of
    every running sequence. Tensor parallelism adds two all-reduces per layer of ``2 c h``
    bytes, each ``collective_latency_s`` plus :func:`gpucast.predict.comm.
    hierarchical_collective_s` over the GPU's NVLink (:func:`gpucast.predict.parallel.
    group_link_gbps`: on a meshed node, the group's links only; on cards bridged in pairs,
    PCIe beyond a pair); llama.cpp's layer split one hand-off per GPU boundary. Summed over ``O``
    steps and the waves: ``latency = waves x (prefill + O step)``; ``tokens_per_s = B O /
    latency``.

The parameters of each engine (:data:`~gpucast.domain.llm_infer.ENGINE_PARAMS`) are fitted by
:class:`LlmInferenceModel` on published measurements (least squares on log latency and log
TTFT, robust loss, a weak pull towards the priors). Not modelled: speculative decoding,
prefix caching, chunked prefill overlapping decode, sliding-window attention (counted as
full), CPU offload, expert parallelism, quantisation kernels' own overheads (int8/int4 are
priced by their bytes and the fp16 tensor-core peak only: not validated; fp8 by its bytes and
the fp8 peak at the engine's ``fp8_compute_ratio`` -- the step-time model's fp8 / 16-bit
efficiency, fitted on MLPerf Training fp8 runs -- and checked against NVIDIA's published
TensorRT-LLM figures on H100/H200/GH200/L40S, ``benchmarks/llm_inference_published.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidInputError, InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.gpu_memory import engine_room_bytes
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import (
    BYTES_PER_VALUE,
    COMPUTE_MODE,
    ENGINE_PARAMS,
    FRACTION_PARAMS,
    EngineProfile,
    InferenceMemory,
    InferencePrediction,
    check_precision,
)
from gpucast.domain.llm_serving import IterationCost
from gpucast.domain.parallel import SWITCHED, NodeLinks
from gpucast.domain.units import GIB, count_of
from gpucast.predict import comm
from gpucast.predict.base import Estimator, register
from gpucast.predict.parallel import group_link_gbps

FloatArray = npt.NDArray[np.float64]

#: Bytes of one activation value crossing GPUs (16-bit activations whatever the weights).
ACTIVATION_BYTES = 2.0
#: Tensor-parallel degrees offered when none is given (GPUs of one node).
TP_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
#: The terms of :attr:`InferencePrediction.breakdown`.
TERMS: tuple[str, ...] = (
    "prefill_compute",
    "prefill_memory",
    "decode_weights",
    "decode_kv_cache",
    "decode_compute",
    "overhead",
    "communication",
)


# -- model shapes ----------------------------------------------------------------------------
def kv_local_heads(spec: TransformerSpec, tp: int) -> float:
    """KV heads one GPU holds under ``tp``-way tensor parallelism (1 when ``tp`` exceeds
    them: each GPU keeps a copy of one head)."""
    return spec.kv_heads / tp if tp <= spec.kv_heads else 1.0


def kv_bytes_per_token(spec: TransformerSpec, precision: str = "fp16", tp: int = 1) -> float:
    """Bytes of KV cache one token holds on one of ``tp`` GPUs: ``2 L g_local d b_kv``."""
    check_precision("kv-precision", precision)
    heads = kv_local_heads(spec, tp)
    return 2.0 * spec.layers * heads * spec.head_dim * BYTES_PER_VALUE[precision]


def tp_problem(spec: TransformerSpec, tp: int) -> str | None:
    """Why ``tp`` cannot split ``spec`` (``None``: it can)."""
    if spec.heads % tp:
        return f"{tp} does not divide the {spec.heads} attention heads"
    if spec.kv_heads % tp and tp % spec.kv_heads:
        return f"{tp} and the {spec.kv_heads} KV heads do not divide one another"
    if spec.ffn_hidden % tp:
        return f"{tp} does not divide the MLP width {spec.ffn_hidden}"
    return None


@dataclass(frozen=True, slots=True)
class _Shape:
    """Per-GPU counts of one (model, layout): parameters, not bytes."""

    held: float  # parameters one GPU holds
    streamed_dense: float  # parameters read per forward pass on the critical path, no experts
    streamed_expert: float  # one expert of every layer on the critical path
    matmul_per_token: float  # matmul weights a token passes through, per GPU on the path
    attention_per_context: float  # 4 a d L per GPU on the path (x context = score FLOPs)
    kv_values_held: float  # KV values one token holds on one GPU
    kv_values_path: float  # KV values one token is read from on the critical path
    allreduce_ranks: int
    boundaries: int  # GPU boundaries a forward pass crosses (layer split)
    pipeline: int  # prompt chunks in flight at once (layer split)


def _shape(spec: TransformerSpec, gpus: int, multi_gpu: str) -> _Shape:
    h, d, n_layers = spec.hidden, spec.head_dim, spec.layers
    kv_pair = 2.0 * h * spec.kv_dim
    attention_rest = spec.attention_params - kv_pair  # q, o and the biases
    norms = spec.norms_per_layer * spec.norm_params
    head = float(spec.lm_head_params or spec.vocab * h)  # tied: the embedding is the head
    embedding_only = float(spec.embedding_params if spec.lm_head_params else 0.0)
    if multi_gpu == "layer":
        per_layer_dense = float(spec.attention_params + spec.router_params + norms)
        held = float(spec.total_params) / gpus
        kv_held = 2.0 * n_layers * spec.kv_heads * d / gpus
        kv_path = 2.0 * n_layers * spec.kv_heads * d
        return _Shape(
            held=held,
            streamed_dense=n_layers * per_layer_dense + head + spec.norm_params,
            streamed_expert=n_layers * float(spec.expert_params),
            matmul_per_token=float(spec.matmul_params_per_token),
            attention_per_context=4.0 * spec.q_dim * n_layers,
            kv_values_held=kv_held,
            kv_values_path=kv_path,
            allreduce_ranks=1,
            boundaries=gpus - 1,
            pipeline=gpus,
        )
    t = gpus
    g_local = kv_local_heads(spec, t)
    kv_local_pair = 2.0 * h * d * g_local
    per_layer_dense = attention_rest / t + kv_local_pair + spec.router_params + norms
    experts_held = n_layers * spec.n_experts * spec.expert_params / t
    held = (
        n_layers * per_layer_dense + experts_held + (head + embedding_only) / t + spec.norm_params
    )
    matmul = (
        n_layers
        * (
            2.0 * h * spec.q_dim / t
            + kv_local_pair
            + spec.experts_per_token * spec.expert_matmul_params / t
            + spec.router_params
        )
        + spec.vocab * h / t
    )
    kv = 2.0 * n_layers * g_local * d
    return _Shape(
        held=held,
        streamed_dense=n_layers * per_layer_dense + head / t + spec.norm_params,
        streamed_expert=n_layers * spec.expert_params / t,
        matmul_per_token=matmul,
        attention_per_context=4.0 * spec.q_dim * n_layers / t,
        kv_values_held=kv,
        kv_values_path=kv,
        allreduce_ranks=t,
        boundaries=0,
        pipeline=1,
    )


# -- the vectorised evaluation ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Cases:
    """Everything :func:`_evaluate` needs about ``n`` cases, as arrays of length ``n``."""

    held_bytes: FloatArray
    streamed_dense_bytes: FloatArray
    streamed_expert_bytes: FloatArray
    n_experts: FloatArray
    experts_per_token: FloatArray
    matmul_per_token: FloatArray
    attention_per_context: FloatArray
    kv_held_bytes: FloatArray  # per token per GPU
    kv_path_bytes: FloatArray  # per token on the critical path
    allreduce_ranks: FloatArray
    boundaries: FloatArray
    pipeline: FloatArray
    layers: FloatArray
    hidden: FloatArray
    bandwidth_bytes_s: FloatArray
    peak_flops: FloatArray
    memory_bytes: FloatArray  # the GPU's
    memory_fraction: FloatArray
    of_free: FloatArray  # 1: memory_fraction of what the weights leave
    link_gbps: FloatArray
    sequences: FloatArray
    input_len: FloatArray
    output_len: FloatArray
    chunk_tokens: FloatArray  # prompt tokens per forward pass (= input_len: whole prompt)
    identical: FloatArray  # 1: every sequence the same (MoE routing)
    max_sequences: FloatArray


@dataclass(frozen=True, slots=True, kw_only=True)
class _Case:
    spec: TransformerSpec
    gpu: GpuSpec
    engine: EngineProfile
    gpus: int
    sequences: int
    input_len: int
    output_len: int
    precision: str
    kv_precision: str
    chunk_tokens: int = 0
    identical: bool = False
    #: how the node joins the TP group's GPUs (a mesh: fewer links; bridged pairs: PCIe)
    node: NodeLinks = SWITCHED


def _fp8_ratio(engine: EngineProfile, gpu: GpuSpec) -> float:
    """fp8 matmuls' efficiency relative to the fitted 16-bit one; 1 on a GPU without fp8
    tensor cores (priced at its 16-bit peak)."""
    return engine.fp8_compute_ratio if gpu.fp8_tflops is not None else 1.0


def _cases(cases: Sequence[_Case]) -> _Cases:
    cols: dict[str, list[float]] = {f.name: [] for f in dataclasses.fields(_Cases)}
    shapes: dict[tuple[str, int, str], _Shape] = {}
    for c in cases:
        key = (c.spec.name, c.gpus, c.engine.multi_gpu)
        if key not in shapes:
            shapes[key] = _shape(c.spec, c.gpus, c.engine.multi_gpu)
        s = shapes[key]
        wb, kvb = BYTES_PER_VALUE[c.precision], BYTES_PER_VALUE[c.kv_precision]
        chunk = c.chunk_tokens or c.engine.prompt_chunk_tokens or c.input_len
        values = {
            "held_bytes": s.held * wb,
            "streamed_dense_bytes": s.streamed_dense * wb,
            "streamed_expert_bytes": s.streamed_expert * wb,
            "n_experts": c.spec.n_experts,
            "experts_per_token": c.spec.experts_per_token,
            "matmul_per_token": s.matmul_per_token,
            "attention_per_context": s.attention_per_context,
            "kv_held_bytes": s.kv_values_held * kvb,
            "kv_path_bytes": s.kv_values_path * kvb,
            "allreduce_ranks": s.allreduce_ranks,
            "boundaries": s.boundaries,
            "pipeline": s.pipeline,
            "layers": c.spec.layers,
            "hidden": c.spec.hidden,
            "bandwidth_bytes_s": c.gpu.memory_bandwidth_gbps * 1e9,
            "peak_flops": c.gpu.matrix_tflops(COMPUTE_MODE[c.precision])
            * 1e12
            * (_fp8_ratio(c.engine, c.gpu) if COMPUTE_MODE[c.precision] == "fp8" else 1.0),
            "memory_bytes": c.gpu.memory_gib * GIB,
            "memory_fraction": c.engine.memory_fraction,
            "of_free": 1.0 if c.engine.memory_share == "free" else 0.0,
            "link_gbps": group_link_gbps(c.gpu, c.gpus, c.node),
            "sequences": c.sequences,
            "input_len": c.input_len,
            "output_len": c.output_len,
            "chunk_tokens": min(chunk, c.input_len),
            "identical": 1.0 if c.identical else 0.0,
            "max_sequences": c.engine.max_sequences,
        }
        for name, value in values.items():
            cols[name].append(float(value))
    return _Cases(**{k: np.asarray(v, dtype=np.float64) for k, v in cols.items()})


Params = Mapping[str, Any]  # name -> float or array over the cases


def _experts_touched(x: _Cases, tokens: FloatArray) -> FloatArray:
    e, k = x.n_experts, x.experts_per_token
    touched = e * (1.0 - np.power(1.0 - k / e, np.maximum(tokens, 1.0)))
    return np.asarray(np.where(e > 1, touched, 1.0), dtype=np.float64)


def _collectives_s(x: _Cases, p: Params, tokens: FloatArray) -> FloatArray:
    """Tensor parallelism's two all-reduces per layer of ``tokens`` activations, or the layer
    split's hand-offs, of one forward pass."""
    message = ACTIVATION_BYTES * tokens * x.hidden
    ranks = x.allreduce_ranks
    ring = comm.hierarchical_collective_s(message, ranks, ranks, x.link_gbps, 1.0, 0.0, passes=2.0)
    tensor = np.where(ranks > 1, 2.0 * x.layers * (p["collective_latency_s"] + ring), 0.0)
    hand_off = x.boundaries * (
        p["collective_latency_s"] + comm.transfer_time_s(message, x.link_gbps)
    )
    return np.asarray(tensor + hand_off, dtype=np.float64)


def _evaluate(x: _Cases, p: Params) -> dict[str, FloatArray]:
    """Every quantity of the module docstring, per case."""
    bw, peak = x.bandwidth_bytes_s, x.peak_flops
    eta_w, eta_kv = p["weight_bandwidth_efficiency"], p["kv_bandwidth_efficiency"]
    eta_c = p["compute_efficiency"]
    n_in, n_out = x.input_len, x.output_len
    # -- how many sequences run at once
    room = engine_room_bytes(
        x.memory_bytes / GIB, x.held_bytes, x.memory_fraction, x.of_free,
        p["memory_reserve_gib"] * GIB,
    )  # fmt: skip
    kv_room = np.maximum(room, 0.0)
    capacity = np.maximum(x.held_bytes + room, 0.0)  # for weights and KV cache
    per_sequence = x.kv_held_bytes * (n_in + n_out)
    fits = (room >= 0.0) & (kv_room >= per_sequence)
    concurrent = np.minimum(np.minimum(x.sequences, x.max_sequences), kv_room / per_sequence)
    c = np.maximum(concurrent, 1.0)
    waves = x.sequences / c
    # -- prefill of one wave
    chunks = np.ceil(n_in / x.chunk_tokens)
    routed = np.where(x.identical > 0, x.chunk_tokens, c * x.chunk_tokens)
    pass_weights = x.streamed_dense_bytes + x.streamed_expert_bytes * _experts_touched(x, routed)
    pre_flops = c * (2.0 * n_in * x.matmul_per_token + 0.5 * x.attention_per_context * n_in**2)
    pre_compute = pre_flops / (eta_c * peak)
    pre_memory = chunks * pass_weights / (eta_w * bw) + c * n_in * x.kv_path_bytes / (eta_kv * bw)
    pre_comm = chunks * _collectives_s(x, p, c * x.chunk_tokens)
    pre_overhead = chunks * p["step_overhead_s"] + c * p["sequence_overhead_s"]
    serial = pre_compute + pre_memory + pre_comm + pre_overhead
    depth = x.pipeline
    pipelined = (chunks + depth - 1.0) / (depth * chunks)  # 1 without a layer split
    prefill = serial * pipelined
    # -- one decode step of the c running sequences at the mean context
    s = n_in + (n_out + 1.0) / 2.0
    decoding = np.where(x.identical > 0, 1.0, c)
    step_weights = (
        x.streamed_dense_bytes + x.streamed_expert_bytes * _experts_touched(x, decoding)
    ) / (eta_w * bw)
    step_kv = c * s * x.kv_path_bytes / (eta_kv * bw)
    step_compute = c * (2.0 * x.matmul_per_token + x.attention_per_context * s) / (eta_c * peak)
    step_overhead = p["step_overhead_s"] + c * p["sequence_overhead_s"]
    step_comm = _collectives_s(x, p, c)
    step = step_weights + step_kv + step_compute + step_overhead + step_comm
    decode = n_out * step
    latency = waves * (prefill + decode)
    scale = waves * pipelined
    return {
        "fits": fits.astype(np.float64),
        "concurrent": c,
        "waves": waves,
        "prefill_s": prefill,
        "step_s": step,
        "decode_s": waves * decode,
        "latency_s": latency,
        "capacity_bytes": capacity,
        "kv_bytes": c * per_sequence,
        "kv_sequences": kv_room / per_sequence,  # what the KV cache holds at once
        "prefill_compute": scale * pre_compute,
        "prefill_memory": scale * pre_memory,
        "decode_weights": waves * n_out * step_weights,
        "decode_kv_cache": waves * n_out * step_kv,
        "decode_compute": waves * n_out * step_compute,
        "overhead": scale * pre_overhead + waves * n_out * step_overhead,
        "communication": scale * pre_comm + waves * n_out * step_comm,
    }


# -- one prediction --------------------------------------------------------------------------
def _check_lengths(spec: TransformerSpec, batch_size: int, input_len: int, output_len: int) -> None:
    for name, value in (
        ("batch-size", batch_size),
        ("input-len", input_len),
        ("output-len", output_len),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidSpecError(
                name, "must be an integer >= 1", got=value, fix=f"e.g. --{name} 16"
            )
    if input_len >= spec.max_context:
        raise InvalidSpecError(
            "input-len",
            f"is beyond {spec.name}'s context window of {spec.max_context} tokens",
            got=input_len,
            fix=f"use --input-len < {spec.max_context} (prompt + output <= {spec.max_context})",
        )
    if input_len + output_len > spec.max_context:
        raise InvalidSpecError(
            "output-len",
            f"prompt + output ({input_len} + {output_len}) is beyond {spec.name}'s context "
            f"window of {spec.max_context} tokens",
            got=output_len,
            fix=f"use --output-len <= {spec.max_context - input_len}",
        )


def split_problem(spec: TransformerSpec, engine: EngineProfile, tp: int) -> str | None:
    """Why ``tp`` GPUs cannot split ``spec`` the engine's way (``None``: they can): tensor
    parallelism divides the heads and the MLP (:func:`tp_problem`), a layer split (llama.cpp)
    needs a layer per GPU."""
    if engine.multi_gpu == "tensor":
        problem = tp_problem(spec, tp)
        return None if problem is None else f"cannot split {spec.name}: {problem}"
    if tp > spec.layers:
        return f"exceeds the {spec.layers} layers to split"
    return None


def tp_fix(spec: TransformerSpec, engine: EngineProfile) -> str:
    """The ``--tp`` values of :data:`TP_CHOICES` that split ``spec`` the engine's way."""
    good = [t for t in TP_CHOICES if split_problem(spec, engine, t) is None]
    return f"use --tp {' or '.join(str(t) for t in good)}"


def check_tp(spec: TransformerSpec, engine: EngineProfile, tp: int) -> None:
    """One clear error when ``tp`` GPUs cannot split ``spec`` the engine's way."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise InvalidSpecError("tp", "must be an integer >= 1", got=tp, fix="e.g. --tp 2")
    problem = split_problem(spec, engine, tp)
    if problem is not None:
        raise InvalidSpecError("tp", problem, got=tp, fix=tp_fix(spec, engine))


def _check_run(spec: TransformerSpec, gpu: GpuSpec, engine: EngineProfile, tp: int) -> None:
    """One clear error when ``engine`` cannot run ``spec`` on ``tp`` GPUs of type ``gpu``."""
    check_tp(spec, engine, tp)
    engine.check_runs_on(gpu.name, gpu.vendor)


def resolve_precisions(
    engine: EngineProfile, precision: str | None, kv_precision: str | None
) -> tuple[str, str]:
    """(weights, KV cache): the engine's default weights; the KV cache in the weights'
    precision for 16-bit and fp8 weights, fp16 under int8/int4 weight-only quantisation; one
    the engine cannot keep (:meth:`EngineProfile.check_kv_precision`) refused."""
    weights = precision or engine.default_precision
    check_precision("precision", weights)
    engine.check_weight_precision(weights)
    kv = kv_precision or (weights if weights in ("fp16", "bf16", "fp8") else "fp16")
    check_precision("kv-precision", kv)
    engine.check_kv_precision(kv)
    return weights, kv


def predict_inference(
    spec: TransformerSpec,
    gpu: GpuSpec,
    engine: EngineProfile,
    *,
    batch_size: int,
    input_len: int,
    output_len: int,
    tp: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    identical_sequences: bool = False,
    node: NodeLinks = SWITCHED,
    max_sequences: int | None = None,
) -> InferencePrediction:
    """One offline batch of ``batch_size`` sequences on ``tp`` GPUs (module docstring).

    ``precision`` of the weights (default: the engine's), ``kv_precision`` of the KV cache
    (default: the weights' for 16-bit and fp8 weights, fp16 under int8/int4 weight-only
    quantisation). ``tp`` is the GPU count: tensor-parallel ranks, or llama.cpp's layer split.
    ``node``: how the node joins the ``tp`` GPUs (a mesh: only their links; cards bridged in
    pairs: beyond 2 PCIe; :func:`gpucast.predict.parallel.group_link_gbps`).
    ``max_sequences``: the most sequences the engine runs at once (vLLM ``max_num_seqs``,
    TensorRT-LLM's engine ``max_batch_size``); default the engine profile's.
    """
    _check_lengths(spec, batch_size, input_len, output_len)
    if max_sequences is not None:
        if (
            isinstance(max_sequences, bool)
            or not isinstance(max_sequences, int)
            or (max_sequences < 1)
        ):
            raise InvalidSpecError(
                "max-num-seqs", "must be an integer >= 1", got=max_sequences,
                fix="e.g. --max-num-seqs 256",
            )  # fmt: skip
        engine = dataclasses.replace(engine, max_sequences=max_sequences)
    _check_run(spec, gpu, engine, tp)
    weights, kv = resolve_precisions(engine, precision, kv_precision)
    case = _Case(
        spec=spec, gpu=gpu, engine=engine, gpus=tp, sequences=batch_size, input_len=input_len,
        output_len=output_len, precision=weights, kv_precision=kv,
        identical=identical_sequences, node=node,
    )  # fmt: skip
    params = engine.params(gpu.name)
    out = {k: float(v[0]) for k, v in _evaluate(_cases([case]), params).items()}
    breakdown = {term: out[term] for term in TERMS}
    notes = _notes(spec, gpu, engine, tp, weights, kv, batch_size, out)
    if gpu.name in engine.gpu_factors:
        notes = (*notes, gpu_factor_note(engine, gpu.name))
    if node.bridged and tp > 2 and engine.multi_gpu == "tensor":
        link = group_link_gbps(gpu, tp, node) / 8
        notes = (
            *notes,
            f"{gpu.name} cards are bridged in pairs: tp={tp}'s all-reduces cross PCIe at "
            f"{link:g} GB/s",
        )
    memory = InferenceMemory(
        weights_bytes=float(_shape(spec, tp, engine.multi_gpu).held * BYTES_PER_VALUE[weights]),
        kv_cache_bytes=out["kv_bytes"],
        capacity_bytes=out["capacity_bytes"],
        gpu_bytes=gpu.memory_gib * GIB,
    )
    latency = out["latency_s"]
    return InferencePrediction(
        model=spec.name,
        gpu=gpu.name,
        engine=engine.name,
        precision=weights,
        kv_precision=kv,
        tp=tp,
        batch_size=batch_size,
        input_len=input_len,
        output_len=output_len,
        ttft_s=out["prefill_s"],
        latency_s=latency,
        prefill_s=out["prefill_s"] * out["waves"],
        decode_s=out["decode_s"],
        tpot_s=out["step_s"],
        tokens_per_s=batch_size * output_len / latency,
        total_tokens_per_s=batch_size * (input_len + output_len) / latency,
        concurrent_sequences=out["concurrent"],
        waves=out["waves"],
        kv_bytes_per_token=kv_bytes_per_token(spec, kv),
        weight_bytes=spec.total_params * BYTES_PER_VALUE[weights],
        memory=memory,
        fits=bool(out["fits"]),
        bottleneck=max(breakdown, key=lambda k: breakdown[k]),
        breakdown=breakdown,
        notes=notes,
    )


def request_latency_s(
    spec: TransformerSpec,
    gpu: GpuSpec,
    engine: EngineProfile,
    *,
    input_len: npt.ArrayLike,
    output_len: npt.ArrayLike,
    tp: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    node: NodeLinks = SWITCHED,
) -> FloatArray:
    """The latency of each request served alone (batch 1: its prefill then its decode steps)
    for arrays of prompt and output tokens: :func:`predict_inference`'s ``latency_s``, one
    vectorised evaluation for all of them (e.g. every request of a trace)."""
    n_in = np.asarray(input_len, dtype=np.float64)
    n_out = np.asarray(output_len, dtype=np.float64)
    if n_in.shape != n_out.shape or n_in.ndim != 1:
        raise InvalidSpecError("input_len/output_len", "must be 1-D arrays of equal length")
    if n_in.size == 0:
        return np.zeros(0)
    if not (np.all(n_in >= 1) and np.all(n_out >= 1)):
        raise InvalidSpecError("input_len/output_len", "every token count must be >= 1")
    _check_run(spec, gpu, engine, tp)
    weights, kv = resolve_precisions(engine, precision, kv_precision)
    one = _cases([
        _Case(spec=spec, gpu=gpu, engine=engine, gpus=tp, sequences=1, input_len=1,
              output_len=1, precision=weights, kv_precision=kv, node=node)
    ])  # fmt: skip
    columns = {
        f.name: np.repeat(getattr(one, f.name), n_in.size) for f in dataclasses.fields(_Cases)
    }
    chunk = engine.prompt_chunk_tokens
    columns["input_len"], columns["output_len"] = n_in, n_out
    columns["chunk_tokens"] = np.minimum(chunk, n_in) if chunk > 0 else n_in
    return _evaluate(_Cases(**columns), engine.params(gpu.name))["latency_s"]


def fp8_hardware_note(gpu: GpuSpec | Sequence[GpuSpec], weights: str) -> str | None:
    """fp8 weights on GPUs without fp8 tensor cores (Ampere-class GPUs: older ones are refused
    first, :func:`gpucast.domain.llm_infer.check_weight_units`), in words, once for all of them:
    how this model prices them."""
    gpus = [gpu] if isinstance(gpu, GpuSpec) else list(gpu)
    names = list(dict.fromkeys(g.name for g in gpus if g.fp8_tflops is None))
    if COMPUTE_MODE[weights] != "fp8" or not names:
        return None
    which = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return (
        f"{which} {'has' if len(names) == 1 else 'have'} no fp8 tensor cores: fp8 weights run "
        "weight-only (W8A16: read at 1 byte, dequantised to 16 bits, as vLLM's FP8 Marlin "
        "kernels do from compute capability 8.0), matmuls priced at "
        f"{'its' if len(names) == 1 else 'their'} fp16 peak; TensorRT-LLM's fp8 needs Ada, "
        "Hopper or later"
    )


def precisions_text(
    weights: str, kv: str, *, weights_given: bool, kv_given: bool, sep: str = " / "
) -> str:
    """``fp8 weights / fp8 KV cache`` with how they were chosen where the user did not: the
    engine's default, or an fp8 KV cache that follows fp8 weights (an engine started with
    its default KV dtype -- vLLM's ``--kv-cache-dtype auto`` -- keeps 16 bits)."""
    text = f"{weights} weights{sep}{kv} KV cache"
    if not weights_given:
        return text + (" (the engine's default weights)" if kv_given else " (the engine's default)")
    if not kv_given and kv == "fp8":
        text += (
            " (the KV cache follows fp8 weights; an engine started with its default KV dtype "
            "-- vLLM's --kv-cache-dtype auto -- keeps 16 bits: --kv-precision fp16 prices that)"
        )
    return text


def _notes(
    spec: TransformerSpec,
    gpu: GpuSpec,
    engine: EngineProfile,
    tp: int,
    weights: str,
    kv: str,
    batch_size: int,
    out: Mapping[str, float],
) -> tuple[str, ...]:
    notes = []
    if out["waves"] > 1.0 + 1e-9:
        # the last turn starts when the others' share of the batch latency has passed
        waves, ttft = out["waves"], out["prefill_s"]
        last = out["latency_s"] * (waves - 1.0) / waves + ttft
        first = (
            f"the TTFT ({ttft:.3g} s) is the first turn's: the last turn's first token comes "
            f"about {last:.3g} s in"
        )
        if out["kv_sequences"] > engine.max_sequences:  # the scheduler's cap binds, not memory
            notes.append(
                f"{engine.display_name} runs at most "
                f"{count_of(engine.max_sequences, 'sequence')} at once "
                f"(max_num_seqs / max_batch_size; the KV cache would hold "
                f"{out['kv_sequences']:.0f}): the {batch_size} run in {waves:.2f} turns; "
                f"--max-num-seqs N sets the cap your engine was built or started with; {first}"
            )
        else:
            notes.append(
                f"the KV cache holds {out['concurrent']:.1f} of the {batch_size} sequences at "
                f"once (time-averaged): they run in {waves:.2f} turns; {first}"
            )
    if spec.is_moe:
        notes.append(
            f"mixture of experts: all {spec.n_experts} experts held in memory, "
            f"{spec.experts_per_token} per token in the FLOPs"
        )
    if weights != engine.default_precision or kv not in ("fp16", "bf16"):
        fp8 = ""
        if COMPUTE_MODE[weights] == "fp8" and engine.fp8_source and gpu.fp8_tflops:
            fp8 = (
                f" (fp8 matmuls at {engine.fp8_compute_ratio:.2f}x that fraction of the fp8 "
                f"peak: {engine.fp8_source})"
            )
        notes.append(
            f"{weights} weights / {kv} KV cache priced by their bytes and the "
            f"{COMPUTE_MODE[weights]} tensor-core peak; the efficiencies were fitted at "
            f"{engine.default_precision}{fp8}"
        )
    if (no_fp8 := fp8_hardware_note(gpu, weights)) is not None:
        notes.append(no_fp8)
    if engine.multi_gpu == "layer" and tp > 1:
        notes.append(
            f"{engine.display_name} splits the layers over the {tp} GPUs (no tensor parallelism)"
        )
    return tuple(notes)


def smallest_fitting_tp(
    spec: TransformerSpec,
    gpu: GpuSpec,
    engine: EngineProfile,
    *,
    input_len: int,
    output_len: int,
    precision: str | None = None,
    kv_precision: str | None = None,
    choices: Sequence[int] = TP_CHOICES,
    node: NodeLinks = SWITCHED,
    node_gpus: int = 0,
) -> int:
    """The fewest GPUs of ``choices`` on which ``spec`` and one whole sequence fit; raises
    :class:`NoFeasiblePlanError` when none does, naming the memory at the largest degree a
    node holds (``node_gpus``: the most GPUs of the type one node holds, 0 where unknown)
    and the lighter weight precision that fits there, if one does."""
    weights = precision or engine.default_precision

    def at(tp: int, weights: str, kv: str | None) -> InferencePrediction | None:
        if engine.multi_gpu == "tensor" and tp_problem(spec, tp) is not None:
            return None
        return predict_inference(
            spec, gpu, engine, batch_size=1, input_len=input_len, output_len=output_len, tp=tp,
            precision=weights, kv_precision=kv, node=node,
        )  # fmt: skip

    for tp in choices:
        one = at(tp, weights, kv_precision)
        if one is not None and one.fits:
            return tp
    held = [t for t in choices if t in node_degrees(node_gpus)] or list(choices)
    last = next((p for t in reversed(held) if (p := at(t, weights, kv_precision))), None)
    need = "" if last is None else (
        f": at tp={last.tp} it needs {last.memory.weights_bytes / GIB:.1f} GiB of weights + "
        f"{last.kv_bytes_per_token * (input_len + output_len) / last.tp / GIB:.2f} GiB of KV "
        f"cache per GPU, {engine.display_name} fills {last.memory.capacity_bytes / GIB:.1f} GiB"
    )  # fmt: skip
    limit = 0 < node_gpus < max(TP_CHOICES)
    node_text = f": the largest {gpu.name} node holds {node_gpus}" if limit else ""
    raise NoFeasiblePlanError(
        f"gpu: {spec.name} in {weights} does not fit on {gpu.name} at any tensor-parallel "
        f"degree offered ({', '.join(str(t) for t in held)}{node_text}){need}",
        fix=lighter_weights_fix(weights, lambda w: _fits_on(at(t, w, None) for t in held)),
    )


def _fits_on(predictions: Iterable[InferencePrediction | None]) -> str | None:
    """``2 x L4``: the GPUs of the first prediction that fits, or None."""
    fit = next((p for p in predictions if p is not None and p.fits), None)
    return None if fit is None else f"{fit.tp} x {fit.gpu}"


def lighter_precisions(weights: str) -> list[str]:
    """The integer weight precisions with fewer bytes per weight than ``weights``."""
    return [p for p in ("int8", "int4") if BYTES_PER_VALUE[p] < BYTES_PER_VALUE[weights]]


def lighter_text(weights: str) -> str:
    """`` (or --precision int8 / int4)``: the lighter weight precisions to try, or nothing."""
    lighter = lighter_precisions(weights)
    return f" (or --precision {' / '.join(lighter)})" if lighter else ""


def node_degrees(node_gpus: int) -> tuple[int, ...]:
    """The degrees of :data:`TP_CHOICES` one node of ``node_gpus`` GPUs holds (all of them
    where ``node_gpus`` is 0: a GPU without a node in the catalog)."""
    return tuple(t for t in TP_CHOICES if node_gpus <= 0 or t <= node_gpus)


def lighter_weights_fix(weights: str, fits_on: Callable[[str], str | None]) -> str:
    """``use --precision P (it fits on ...)`` for the first weight precision lighter than
    ``weights`` on which ``fits_on(P)`` finds GPUs that hold the model (it returns where, e.g.
    ``2 x L4``), else a GPU with more memory -- never a precision that fits nowhere."""
    lighter = lighter_precisions(weights)
    for p in lighter:
        where = fits_on(p)
        if where is not None:
            return f"use --precision {p} (it fits on {where}), or a GPU with more memory"
    tried = f" ({' or '.join(lighter)} weights do not fit either)" if lighter else ""
    return f"use a GPU with more memory{tried}"


# -- the fit ---------------------------------------------------------------------------------
#: Columns :meth:`LlmInferenceModel.fit` reads from the throughput rows.
ROW_COLUMNS: tuple[str, ...] = (
    "framework", "model", "gpu", "gpus", "input_len", "output_len", "sequences",
    "prompt_chunk_tokens", "latency_s",
)  # fmt: skip
#: Columns of the TTFT rows (one sequence per prompt, the batch prefilled at once).
TTFT_COLUMNS: tuple[str, ...] = (
    "framework",
    "model",
    "gpu",
    "gpus",
    "input_len",
    "batch_size",
    "ttft_s",
)


#: Where every fit starts and what its weak pull is towards (the same for every engine, so a
#: refit does not depend on the values a profile already carries): the defaults of
#: :class:`EngineProfile`.
PRIORS: Mapping[str, float] = EngineProfile(name="prior", display_name="prior").params()


def _to_x(name: str, value: float) -> float:
    if name in FRACTION_PARAMS:
        v = min(max(value, 1e-6), 1.0 - 1e-6)
        return math.log(v / (1.0 - v))
    return math.log(max(value, 1e-9))


def _from_x(name: str, x: float) -> float:
    if name in FRACTION_PARAMS:
        return 1.0 / (1.0 + math.exp(-x))
    return math.exp(x)


def identifiable(rows: pd.DataFrame) -> tuple[str, ...]:
    """The parameters the rows can pin: one sequence at a time pins no per-sequence cost and
    no KV capacity; one GPU no collective latency; no prompt chunks and no TTFT leave the
    compute efficiency to the large batches."""
    names = list(ENGINE_PARAMS)
    if not (rows["sequences"] > 1).any():
        names.remove("sequence_overhead_s")
        names.remove("memory_reserve_gib")
    if not (rows["gpus"] > 1).any():
        names.remove("collective_latency_s")
    return tuple(names)


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"{what} lack column(s) {', '.join(missing)}",
            fix=f"give the columns {', '.join(columns)}",
        )


@register
class LlmInferenceModel(Estimator):
    """Engine parameters fitted on published LLM inference measurements.

    ``fit(rows, specs=..., gpus=..., engines=..., ttft=...)``: ``rows`` are offline batches
    (:data:`ROW_COLUMNS`: the engine's ``bench_framework`` name, a key of ``specs`` and of
    ``gpus``, the GPU count, lengths, concurrent sequences, the prompt chunk -- 0 for the
    whole prompt -- and the measured ``latency_s``); ``ttft`` optional time-to-first-token rows
    (:data:`TTFT_COLUMNS`). ``engines`` gives each engine's structure and priors. Every
    engine with rows gets its own fit of the :func:`identifiable` parameters; a *pooled* fit
    of all rows gives the parameters of an engine that has none (:meth:`profile`), which is
    what a leave-one-framework-out check measures. Least squares on log latency (and
    ``ttft_weight`` x log TTFT), soft-L1 loss at ``f_scale``, ``prior_weight`` pulling each
    parameter (logit or log) towards its prior.
    """

    kind: ClassVar[str] = "llm-infer"
    schema_version: ClassVar[int] = 1

    def __init__(
        self, *, prior_weight: float = 0.02, ttft_weight: float = 5.0, f_scale: float = 0.1
    ) -> None:
        self.prior_weight = prior_weight
        self.ttft_weight = ttft_weight
        self.f_scale = f_scale
        self.profiles_: dict[str, EngineProfile] | None = None
        self.pooled_: dict[str, float] | None = None
        self.pooled_on_: str = ""
        self._structure: dict[str, EngineProfile] = {}

    @property
    def is_fitted(self) -> bool:
        return self.profiles_ is not None

    # -- fitting -----------------------------------------------------------------------------
    def fit(
        self,
        rows: pd.DataFrame,
        *,
        specs: Mapping[str, TransformerSpec],
        gpus: Mapping[str, GpuSpec],
        engines: Sequence[EngineProfile],
        ttft: pd.DataFrame | None = None,
        fitted_on: str = "",
    ) -> Self:
        _require(rows, ROW_COLUMNS, "the throughput rows")
        if ttft is not None:
            _require(ttft, TTFT_COLUMNS, "the TTFT rows")
        by_bench = {e.bench_framework: e for e in engines if e.bench_framework}
        unknown = sorted(set(rows["framework"]) - set(by_bench))
        if unknown:
            raise InvalidInputError(
                f"rows of framework(s) {', '.join(unknown)} match no engine's bench_framework",
                fix="drop those rows or add the engines",
            )
        if rows.empty:
            raise InvalidInputError("no rows to fit", fix="give at least one throughput row")
        where = f"{fitted_on}: " if fitted_on else ""
        ttft = ttft if ttft is not None else pd.DataFrame(columns=list(TTFT_COLUMNS))
        ttft = ttft[ttft["framework"].isin(set(rows["framework"]))]
        profiles: dict[str, EngineProfile] = {}
        for engine in engines:
            own = (
                rows[rows["framework"] == engine.bench_framework]
                if engine.bench_framework
                else rows.iloc[:0]
            )
            if own.empty:
                continue
            own_ttft = ttft[ttft["framework"] == engine.bench_framework]
            names = identifiable(own)
            fitted = self._solve(own, own_ttft, specs, gpus, by_bench, engine.params(), names)
            fitted = {n: fitted[n] for n in names}
            profiles[engine.name] = engine.with_params(
                fitted,
                fitted_params=names,
                fitted_on=f"{where}{len(own)} throughput + {len(own_ttft)} TTFT rows",
            )
        self.pooled_ = self._solve(rows, ttft, specs, gpus, by_bench, PRIORS, identifiable(rows))
        self.pooled_on_ = (
            f"{where}pooled fit of {', '.join(sorted(set(rows['framework'])))}, "
            f"{len(rows)} throughput + {len(ttft)} TTFT rows"
        )
        self.profiles_ = profiles
        self._structure = {e.name: e for e in engines}
        return self

    def _solve(
        self,
        rows: pd.DataFrame,
        ttft: pd.DataFrame,
        specs: Mapping[str, TransformerSpec],
        gpus: Mapping[str, GpuSpec],
        engines: Mapping[str, EngineProfile],
        base: Mapping[str, float],
        names: Sequence[str],
    ) -> dict[str, float]:
        """``base`` with ``names`` fitted, starting from and pulled towards :data:`PRIORS`."""
        from scipy.optimize import least_squares

        x_rows = _cases(_row_cases(rows, specs, gpus, engines))
        y_rows = np.log(rows["latency_s"].to_numpy(dtype=np.float64))
        x_ttft = _cases(_ttft_cases(ttft, specs, gpus, engines)) if len(ttft) else None
        y_ttft = np.log(ttft["ttft_s"].to_numpy(dtype=np.float64)) if len(ttft) else None
        x0 = np.array([_to_x(n, PRIORS[n]) for n in names])

        def params(x: FloatArray) -> dict[str, float]:
            out = dict(base)
            out.update({n: _from_x(n, float(v)) for n, v in zip(names, x, strict=True)})
            return out

        def residuals(x: FloatArray) -> FloatArray:
            p = params(x)
            parts = [np.log(_evaluate(x_rows, p)["latency_s"]) - y_rows]
            if x_ttft is not None and y_ttft is not None:
                pred = _evaluate(x_ttft, p)["prefill_s"]
                parts.append(self.ttft_weight * (np.log(pred) - y_ttft))
            parts.append(self.prior_weight * (x - x0))
            return np.concatenate(parts)

        solution = least_squares(residuals, x0, loss="soft_l1", f_scale=self.f_scale)
        return {n: float(f"{v:.6g}") for n, v in params(solution.x).items()}

    # -- predicting --------------------------------------------------------------------------
    def profile(self, name: str) -> EngineProfile:
        """Engine ``name`` as fitted; an engine given to ``fit`` without rows gets the pooled
        parameters (its structure kept)."""
        self._require_fitted()
        assert self.profiles_ is not None and self.pooled_ is not None
        if name in self.profiles_:
            return self.profiles_[name]
        structure = self._structure.get(name)
        if structure is None:
            raise InvalidInputError(
                f"engine {name!r} was not given to fit",
                fix=f"use one of {', '.join(sorted(self.profiles_))}",
            )
        return structure.with_params(
            self.pooled_, fitted_params=ENGINE_PARAMS, fitted_on=self.pooled_on_
        )

    def predict(
        self,
        spec: TransformerSpec,
        gpu: GpuSpec,
        engine: str,
        **options: Any,
    ) -> InferencePrediction:
        """:func:`predict_inference` with the fitted profile of ``engine``."""
        return predict_inference(spec, gpu, self.profile(engine), **options)

    def predict_frame(
        self,
        rows: pd.DataFrame,
        *,
        specs: Mapping[str, TransformerSpec],
        gpus: Mapping[str, GpuSpec],
        ttft: bool = False,
    ) -> FloatArray:
        """Predicted ``latency_s`` of throughput rows (``ttft=True``: ``ttft_s`` of TTFT rows),
        each with its framework's fitted (or pooled) profile."""
        self._require_fitted()
        assert self.profiles_ is not None
        engines: dict[str, EngineProfile] = {}
        for e in [*self._structure.values(), *self.profiles_.values()]:
            if e.bench_framework:
                engines[e.bench_framework] = self.profile(e.name)
        out = np.empty(len(rows), dtype=np.float64)
        frame = rows.reset_index(drop=True)
        for framework, part in frame.groupby("framework", sort=False):
            if framework not in engines:
                raise InvalidInputError(f"no engine for framework {framework!r}", fix="fit it")
            cases = (_ttft_cases if ttft else _row_cases)(part, specs, gpus, engines)
            values = _evaluate(_cases(cases), engines[str(framework)].params())
            out[part.index.to_numpy()] = values["prefill_s" if ttft else "latency_s"]
        return out

    # -- state -------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        assert self.profiles_ is not None
        return {
            "prior_weight": self.prior_weight,
            "ttft_weight": self.ttft_weight,
            "f_scale": self.f_scale,
            "profiles": {k: v.to_dict() for k, v in self.profiles_.items()},
            "structure": {k: v.to_dict() for k, v in self._structure.items()},
            "pooled": dict(self.pooled_ or {}),
            "pooled_on": self.pooled_on_,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(
                prior_weight=float(state["prior_weight"]),
                ttft_weight=float(state["ttft_weight"]),
                f_scale=float(state["f_scale"]),
            )
            model.profiles_ = {
                str(k): EngineProfile.from_dict(v) for k, v in dict(state["profiles"]).items()
            }
            model._structure = {
                str(k): EngineProfile.from_dict(v) for k, v in dict(state["structure"]).items()
            }
            model.pooled_ = {n: float(state["pooled"][n]) for n in ENGINE_PARAMS}
            model.pooled_on_ = str(state["pooled_on"])
        except (KeyError, TypeError, ValueError, InvalidSpecError) as exc:
            raise InvalidInputError(
                f"llm-infer model state is malformed ({exc})", fix="refit the model"
            ) from None
        return model


def _column(rows: pd.DataFrame, name: str) -> list[int]:
    return [int(v) for v in rows[name].to_numpy()]


def _row_cases(
    rows: pd.DataFrame,
    specs: Mapping[str, TransformerSpec],
    gpus: Mapping[str, GpuSpec],
    engines: Mapping[str, EngineProfile],
) -> list[_Case]:
    out = []
    for framework, model, gpu, n_gpus, seqs, n_in, n_out, chunk in zip(
        rows["framework"].astype(str),
        rows["model"].astype(str),
        rows["gpu"].astype(str),
        _column(rows, "gpus"),
        _column(rows, "sequences"),
        _column(rows, "input_len"),
        _column(rows, "output_len"),
        _column(rows, "prompt_chunk_tokens"),
        strict=True,
    ):
        engine = engines[framework]
        out.append(
            _Case(
                spec=specs[model],
                gpu=gpus[gpu],
                engine=engine,
                gpus=n_gpus,
                sequences=seqs,
                input_len=n_in,
                output_len=n_out,
                precision=engine.default_precision,
                kv_precision=engine.default_precision,
                chunk_tokens=chunk,
                identical=engine.bench_identical_prompts,
            )
        )
    return out


def _ttft_cases(
    rows: pd.DataFrame,
    specs: Mapping[str, TransformerSpec],
    gpus: Mapping[str, GpuSpec],
    engines: Mapping[str, EngineProfile],
) -> list[_Case]:
    out = []
    for framework, model, gpu, n_gpus, batch, n_in in zip(
        rows["framework"].astype(str),
        rows["model"].astype(str),
        rows["gpu"].astype(str),
        _column(rows, "gpus"),
        _column(rows, "batch_size"),
        _column(rows, "input_len"),
        strict=True,
    ):
        engine = engines[framework]
        out.append(
            _Case(
                spec=specs[model],
                gpu=gpus[gpu],
                engine=engine,
                gpus=n_gpus,
                sequences=batch,
                input_len=n_in,
                output_len=1,
                precision=engine.default_precision,
                kv_precision=engine.default_precision,
                identical=engine.bench_identical_prompts,
            )
        )
    return out


# -- one iteration of a serving engine -------------------------------------------------------
def iteration_cost(
    spec: TransformerSpec,
    gpu: GpuSpec,
    engine: EngineProfile,
    *,
    tp: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    max_tokens: int = 8192,
    node: NodeLinks = SWITCHED,
) -> IterationCost:
    """The cost of one serving iteration (:class:`~gpucast.domain.llm_serving.IterationCost`)
    on ``tp`` GPUs, from the terms of :func:`_evaluate`: a pass streams the dense weights and
    the experts its tokens route to at ``weight_bandwidth_efficiency``, pays the tensor-
    parallel all-reduces of its tokens and ``step_overhead_s``; every token ``2 N`` FLOPs at
    ``compute_efficiency``; every sequence ``sequence_overhead_s``; every KV token read or
    written ``kv_bandwidth_efficiency``; attention ``4 a d L`` FLOPs per unit. A batch of equal
    prompts prefilled at once costs exactly the prefill of :func:`predict_inference`, and a
    decode step at context ``s`` its ``tpot_s`` (``tests/simulate/test_llm_serving.py``).
    ``pass_s`` is tabulated for passes of 0..``max_tokens`` tokens; the KV capacity is what
    the weights leave of the engine's share less its reserve."""
    _check_run(spec, gpu, engine, tp)
    weights, kv = resolve_precisions(engine, precision, kv_precision)
    case = _Case(
        spec=spec, gpu=gpu, engine=engine, gpus=tp, sequences=1, input_len=1, output_len=1,
        precision=weights, kv_precision=kv, node=node,
    )  # fmt: skip
    x = _cases([case])
    p = engine.params(gpu.name)
    bw, peak = float(x.bandwidth_bytes_s[0]), float(x.peak_flops[0])
    eta_w, eta_kv = p["weight_bandwidth_efficiency"], p["kv_bandwidth_efficiency"]
    eta_c = p["compute_efficiency"]
    tokens = np.arange(max(int(max_tokens), 1) + 1, dtype=np.float64)
    streamed = x.streamed_dense_bytes + x.streamed_expert_bytes * _experts_touched(x, tokens)
    pass_s = streamed / (eta_w * bw) + _collectives_s(x, p, tokens) + p["step_overhead_s"]
    room = engine_room_bytes(
        x.memory_bytes / GIB, x.held_bytes, x.memory_fraction, x.of_free,
        p["memory_reserve_gib"] * GIB,
    )  # fmt: skip
    kv_room = max(float(room[0]), 0.0)
    kv_token = float(x.kv_held_bytes[0])
    return IterationCost(
        pass_s=pass_s,
        token_s=2.0 * float(x.matmul_per_token[0]) / (eta_c * peak),
        sequence_s=p["sequence_overhead_s"],
        kv_s_per_token=float(x.kv_path_bytes[0]) / (eta_kv * bw),
        attention_s_per_unit=float(x.attention_per_context[0]) / (eta_c * peak),
        kv_capacity_tokens=int(kv_room // kv_token),
        kv_bytes_per_token=kv_token,
        prefill_chunk_tokens=engine.prompt_chunk_tokens,
        pipeline_depth=int(x.pipeline[0]),
        gpus=tp,
        source=f"{spec.name} on {tp} x {gpu.name}, {weights} weights / {kv} KV cache, "
        f"{engine.provenance()}"
        + (f"; {gpu_factor_note(engine, gpu.name)}" if gpu.name in engine.gpu_factors else ""),
    )


def gpu_factor_note(engine: EngineProfile, gpu: str) -> str:
    """What a GPU's latency factor for ``engine`` is and rests on."""
    return (
        f"{engine.display_name} on {gpu}: every term x{engine.gpu_factors[gpu]:.2f}, from its "
        f"own measurements there ({engine.gpu_factor_sources.get(gpu, 'no source given')})"
    )
