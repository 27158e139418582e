"""The vectorised evaluation of :mod:`gpucast.predict.llm_infer`: each (model, layout)'s per-GPU
counts (:func:`_shape`), the cases as arrays (:class:`_Cases`, :func:`_cases`) and every quantity
of that module's docstring per case (:func:`_evaluate`): one evaluation for a single prediction
and for the fit over hundreds of published rows.

Private part of :mod:`gpucast.predict.llm_infer`, which re-exports its public names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.gpu_memory import engine_room_bytes
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import BYTES_PER_VALUE, COMPUTE_MODE, EngineProfile, check_precision
from gpucast.domain.parallel import SWITCHED, NodeLinks
from gpucast.domain.units import GIB
from gpucast.predict import comm
from gpucast.predict.parallel import group_link_gbps

FloatArray = npt.NDArray[np.float64]

#: Bytes of one activation value crossing GPUs (16-bit activations whatever the weights).
ACTIVATION_BYTES = 2.0


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
