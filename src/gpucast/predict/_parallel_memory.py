"""Memory per GPU of a layout (:mod:`gpucast.predict.parallel`'s module docstring): the
per-GPU shapes (:class:`_Shapes`, LoRA's adapters included), each stage's parameters, model
state and activations, and the peak over the stages (:func:`training_memory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import ParallelAssumptions, ParallelLayout, ParallelMemory
from gpucast.domain.units import GIB
from gpucast.predict._parallel_layout import (
    ACTIVATION_BYTES,
    FP8_BYTES,
    GRADIENT_BYTES_PER_PARAM,
    LOGIT_BYTES,
    OPTIMIZER_BYTES_PER_PARAM,
    weight_bytes_per_param,
)
from gpucast.predict.memory import usable_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shapes:
    """Per-GPU parameter counts and FLOPs that do not depend on the stage."""

    kv_local: int  # KV heads per tensor-parallel rank (>= 1: replicated when tp > kv_heads)
    layer_dense: float  # one layer's non-expert weights per GPU (attention, norms, router)
    layer_expert: float  # one layer's expert (or dense MLP) weights per GPU
    layer_lora: float  # one layer's adapter parameters per GPU
    embedding: float  # first stage
    lm_head: float  # last stage (incl. the final norm; a copy of a tied embedding when pp > 1)
    experts_sharded: bool  # the MLP is an expert MLP (ZeRO over dp*cp/ep)


def _lora_widths(spec: TransformerSpec, targets: Sequence[str], *, routed: bool) -> float:
    """The sum of ``d_in + d_out`` over one layer's adapted matrices: every expert's copy
    (``routed`` False: the parameters), or the copies one token passes (True: the traffic)."""
    h, f = spec.hidden, spec.ffn_hidden
    dims = {
        "q": (h, spec.q_dim),
        "k": (h, spec.kv_dim),
        "v": (h, spec.kv_dim),
        "o": (spec.q_dim, h),
        "gate": (h, f) if spec.gated_mlp else (0, 0),
        "up": (h, f),
        "down": (f, h),
    }
    total = 0.0
    for target in targets:
        d_in, d_out = dims[target]
        copies = 1
        if target in ("gate", "up", "down"):
            copies = spec.experts_per_token if routed else spec.n_experts
        total += copies * (d_in + d_out)
    return total


def _lora_params_per_layer(spec: TransformerSpec, rank: int, targets: Sequence[str]) -> float:
    return rank * _lora_widths(spec, targets, routed=False)


def _lora_traffic_per_layer(
    spec: TransformerSpec,
    layout: ParallelLayout,
    seq_len: int,
    level: str,
    kv_local: int,
    *,
    unfused: bool = True,
) -> float:
    """Element-wise bytes one layer of a LoRA micro-batch moves that its kept activations do
    not count (:func:`_stage_time` prices the rest as 6x the kept bytes): a frozen matrix's
    input is still written and read in forward and its gradient in backward (4x its bytes,
    not kept for a weight gradient), and each adapter runs unfused beside its matrix (Megatron
    / NeMo's ``ParallelLinearAdapter``, PEFT's ``lora.Linear``) -- forward reads the input and
    writes its ``d_out`` output, then adds it to the base output (read two, write one);
    backward reads the output gradient twice (B's gradient, the path to A), reads the input
    again for A's gradient and writes and adds its input gradient (write one, read two, write
    one): ``6 (d_in + d_out)`` elements a token, split ``t`` ways (``unfused`` False: none)."""
    if not layout.lora:
        return 0.0
    kept = _activation_bytes_per_layer(spec, layout, seq_len, level, kv_local)
    whole = _activation_bytes_per_layer(
        spec, replace(layout, lora_rank=0), seq_len, level, kv_local
    )
    tokens = layout.micro_batch_size * seq_len / layout.cp
    widths = _lora_widths(spec, layout.lora_targets, routed=True)
    adapters = 6.0 * ACTIVATION_BYTES * tokens * widths / layout.tp if unfused else 0.0
    return 4.0 * (whole - kept) + adapters


def _shapes(spec: TransformerSpec, layout: ParallelLayout) -> _Shapes:
    t, h = layout.tp, spec.hidden
    kv_local = max(1, spec.kv_heads // t)
    bias = spec.attention_params - spec.attention_matmul_params
    attention = 2 * h * spec.q_dim / t + 2 * h * spec.head_dim * kv_local + bias / t
    norms = spec.norms_per_layer * spec.norm_params
    expert = spec.n_experts / layout.ep * spec.expert_params / t
    embedding = spec.vocab * h / t + (spec.embedding_params - spec.vocab * h)
    if spec.tied_embeddings:
        head = spec.vocab * h / t if layout.pp > 1 else 0.0
    else:
        head = spec.lm_head_params / t
    return _Shapes(
        kv_local=kv_local,
        layer_dense=attention + norms + spec.router_params,
        layer_expert=expert,
        layer_lora=_lora_params_per_layer(spec, layout.lora_rank, layout.lora_targets) / t
        if layout.lora
        else 0.0,
        embedding=embedding,
        lm_head=head + spec.norm_params,
        experts_sharded=spec.is_moe,
    )


def _stage_layers(spec: TransformerSpec, pp: int) -> list[int]:
    base, extra = divmod(spec.layers, pp)
    return [base + (1 if i < extra else 0) for i in range(pp)]


def _activation_bytes_per_layer(
    spec: TransformerSpec, layout: ParallelLayout, seq_len: int, level: str, kv_local: int
) -> float:
    """Bytes one layer keeps for one micro-batch on one GPU (Korthikanti et al. 2022).

    ``level``: ``none`` (scores materialised), ``selective`` (no scores) or ``full`` (the
    layer input only).
    """
    t, c, b = layout.tp, layout.cp, layout.micro_batch_size
    s_local = seq_len / c
    sbh = s_local * b * spec.hidden
    sp_div = t if layout.sp_active else 1
    if level == "full":
        return ACTIVATION_BYTES * sbh / sp_div
    replicated = 10.0 * sbh / sp_div
    q_and_out = 4.0 * s_local * b * spec.q_dim / t
    k_and_v = 4.0 * s_local * b * spec.head_dim * kv_local
    mlp = (8.0 if spec.gated_mlp else 4.0) * s_local * b * spec.ffn_hidden
    if layout.lora:  # a frozen matrix's input serves only its weight gradient: not kept
        targets = set(layout.lora_targets)
        frozen_inputs = [not targets & {"q", "k", "v"}, not targets & {"gate", "up"}]
        replicated -= 2.0 * sbh / sp_div * sum(frozen_inputs)  # attention / MLP input
        if "down" not in targets:  # the down projection's input (the gated product)
            mlp -= 2.0 * s_local * b * spec.ffn_hidden
    mlp *= spec.experts_per_token / t
    scores = 5.0 * spec.heads * s_local * seq_len * b / t if level == "none" else 0.0
    return replicated + q_and_out + k_and_v + mlp + scores


def _in_flight_layers(layout: ParallelLayout, stage: int, layers: int) -> tuple[float, float]:
    """(micro-batches in flight, layer-activations held) on ``stage`` under 1F1B."""
    p, m, v = layout.pp, layout.micro_batches, layout.virtual_stages
    if v == 1:
        n = min(p - stage, m)
        return float(n), float(n * layers)
    chunks = min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1)
    return chunks / v, chunks * layers / v


@dataclass(frozen=True, slots=True, kw_only=True)
class _StageParams:
    """Parameters of one stage on one GPU before ZeRO sharding."""

    dense: float  # sharded over dp*cp by ZeRO
    expert: float  # sharded over dp*cp/ep by ZeRO
    trained_dense: float  # the dense ones with gradients (LoRA: the adapters)
    trained_expert: float
    adapters: float  # LoRA adapter weights (trained, never ZeRO-3-sharded here)


def _stage_params(layout: ParallelLayout, shapes: _Shapes, stage: int, layers: int) -> _StageParams:
    dense = layers * shapes.layer_dense
    dense += shapes.embedding if stage == 0 else 0.0
    dense += shapes.lm_head if stage == layout.pp - 1 else 0.0
    expert = layers * shapes.layer_expert
    if not shapes.experts_sharded:
        dense, expert = dense + expert, 0.0
    if layout.lora:
        adapters = layers * shapes.layer_lora
        return _StageParams(
            dense=dense,
            expert=expert,
            trained_dense=adapters,
            trained_expert=0.0,
            adapters=adapters,
        )
    return _StageParams(
        dense=dense, expert=expert, trained_dense=dense, trained_expert=expert, adapters=0.0
    )


def _zero_groups(layout: ParallelLayout) -> tuple[int, int]:
    """Ranks ZeRO shards over: (dense, expert) = (dp * cp, dp * cp / ep)."""
    dense = layout.dp * layout.cp
    return dense, max(1, dense // layout.ep)


class _StageState(NamedTuple):
    """The bytes a stage's GPU holds whatever its micro-batches (:func:`_stage_state`)."""

    weights: float
    gradients: float
    optimizer: float
    gather: float  # ZeRO-3: the gathered weights of two layers (prefetch)


def _stage_state(layout: ParallelLayout, shapes: _Shapes, stage: int, layers: int) -> _StageState:
    """A stage's weights, gradients, optimizer state and ZeRO-3 gather buffer on one GPU."""
    w_bytes = weight_bytes_per_param(layout.precision)
    params = _stage_params(layout, shapes, stage, layers)
    z_dense, z_expert = _zero_groups(layout)
    zero = layout.zero_stage

    def shard(n_dense: float, n_expert: float, from_stage: int) -> float:
        if zero >= from_stage:
            return n_dense / z_dense + n_expert / z_expert
        return n_dense + n_expert

    # LoRA's frozen base needs one copy, at the precision its matmuls read (fp8: NeMo's
    # fp8_params, Transformer Engine's fp8_model_init); trained weights keep 16-bit too
    frozen_bytes = FP8_BYTES if layout.lora and layout.precision == "fp8" else w_bytes
    gather = 0.0
    if zero == 3 and z_dense > 1:
        gather = 2.0 * w_bytes * (shapes.layer_dense + shapes.layer_expert)
    return _StageState(
        weights=frozen_bytes * shard(params.dense, params.expert, 3) + w_bytes * params.adapters,
        gradients=GRADIENT_BYTES_PER_PARAM * shard(params.trained_dense, params.trained_expert, 2),
        optimizer=OPTIMIZER_BYTES_PER_PARAM * shard(params.trained_dense, params.trained_expert, 1),
        gather=gather,
    )


def _stage_memory(
    spec: TransformerSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    seq_len: int,
    stage: int,
    layers: int,
    framework_bytes: float,
    usable: float,
) -> ParallelMemory:
    first, last = stage == 0, stage == layout.pp - 1
    state = _stage_state(layout, shapes, stage, layers)
    in_flight, layer_acts = _in_flight_layers(layout, stage, layers)
    if layout.recompute == "full":
        per_layer = _activation_bytes_per_layer(spec, layout, seq_len, "full", shapes.kv_local)
        working = _activation_bytes_per_layer(spec, layout, seq_len, "selective", shapes.kv_local)
        activations = layer_acts * per_layer + working
    else:
        per_layer = _activation_bytes_per_layer(
            spec, layout, seq_len, layout.recompute, shapes.kv_local
        )
        activations = layer_acts * per_layer
    s_local = seq_len / layout.cp
    if first:  # the embedding's dropout mask, 1 byte per element
        sp_div = layout.tp if layout.sp_active else 1
        activations += in_flight * s_local * layout.micro_batch_size * spec.hidden / sp_div
    logits = (
        LOGIT_BYTES * s_local * layout.micro_batch_size * spec.vocab / layout.tp if last else 0.0
    )
    return ParallelMemory(
        stage=stage,
        weights_bytes=state.weights,
        gradients_bytes=state.gradients,
        optimizer_bytes=state.optimizer,
        activations_bytes=activations,
        logits_bytes=logits,
        gather_buffer_bytes=state.gather,
        framework_bytes=framework_bytes,
        usable_bytes=usable,
        in_flight_micro_batches=in_flight,
    )


def _all_stage_memory(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    seq_len: int,
    assumptions: ParallelAssumptions,
    shapes: _Shapes | None = None,
) -> list[ParallelMemory]:
    """Per-GPU memory of the stages that can need the most (:func:`_candidate_stages`);
    ``shapes``: the layout's (:func:`_shapes`), if known."""
    shapes = shapes or _shapes(spec, layout)
    usable = usable_bytes(
        gpu, reserved_gib=assumptions.reserved_gib, reserved_fraction=assumptions.reserved_fraction
    )
    framework = assumptions.framework_overhead_gib * GIB
    return [
        _stage_memory(spec, layout, shapes, seq_len, i, n, framework, usable)
        for i, n in _candidate_stages(_stage_layers(spec, layout.pp))
    ]


def _candidate_stages(layers: Sequence[int]) -> list[tuple[int, int]]:
    """(stage, layers) of the stages that can need the most memory: the first (embedding), the
    last (LM head, logits) and, per layer count, the earliest middle stage. Middle stages
    with as many layers hold the same weights and states, and a later stage never holds more
    micro-batches in flight (1F1B, interleaved or not), so the earliest bounds the rest."""
    last = len(layers) - 1
    chosen = {0, last}
    seen: set[int] = set()
    for i in range(1, last):
        if layers[i] not in seen:
            seen.add(layers[i])
            chosen.add(i)
    return [(i, layers[i]) for i in sorted(chosen)]


def training_memory(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    *,
    seq_len: int,
    assumptions: ParallelAssumptions | None = None,
) -> ParallelMemory:
    """Per-GPU bytes on the stage that needs the most; see the module docstring."""
    opts = assumptions or ParallelAssumptions()
    stages = _all_stage_memory(spec, gpu, layout, seq_len, opts)
    return max(stages, key=lambda mem: mem.total_bytes)
