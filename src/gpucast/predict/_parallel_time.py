"""The time terms of one training step (:mod:`gpucast.predict.parallel`'s module docstring):
a stage's micro-batch on one GPU (its work, :func:`_stage_work`, through the roofline; its
tensor-, context- and expert-parallel traffic, :func:`_comm_work`; :func:`_stage_time`), the
data-parallel collectives (:func:`_dp_comm_s`) and the pipeline's point-to-point sends
(:func:`_pp_p2p_s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import ClusterShape, ParallelAssumptions, ParallelLayout
from gpucast.domain.prediction import Estimate
from gpucast.predict import comm
from gpucast.predict._parallel_layout import (
    _MOE_KERNELS_PER_LAYER,
    _OPTIMIZER_KERNELS_PER_LAYER,
    ACTIVATION_BYTES,
    GRADIENT_BYTES_PER_PARAM,
    LOGIT_BYTES,
    OPTIMIZER_STEP_BYTES_PER_PARAM,
    FloatArray,
    _Flag,
    _Num,
)
from gpucast.predict._parallel_memory import (
    _activation_bytes_per_layer,
    _lora_traffic_per_layer,
    _Shapes,
    _stage_params,
    _zero_groups,
)
from gpucast.predict.roofline import RooflineEfficiency, RooflineWorkload, predict_step_time


@dataclass(frozen=True, slots=True, kw_only=True)
class _StageTime:
    estimate: Estimate  # roofline of one micro-batch (forward + backward + recompute)
    optimizer: Estimate  # roofline of the optimizer step
    matmul_flops: float  # per micro-batch, one GPU
    tp_s: float  # exposed TP communication per micro-batch
    cp_s: float  # exposed context-parallel communication per micro-batch
    moe_s: float  # all-to-all per micro-batch

    @property
    def micro_batch_s(self) -> float:
        return self.estimate.value + self.tp_s + self.cp_s + self.moe_s


def _wide_factor(gpu: GpuSpec, precision: str, efficiency: RooflineEfficiency) -> float:
    """How many FLOPs at ``precision``'s rate one FLOP of 16-bit matrix work costs: 1 but in
    fp8, where it is the fp8 rate (efficiency x peak) over the bf16 one."""
    if precision != "fp8":
        return 1.0
    fp8 = efficiency.compute_efficiency("fp8") * gpu.matrix_tflops("fp8")
    wide = efficiency.compute_efficiency("bf16") * gpu.matrix_tflops("bf16")
    return max(1.0, fp8 / wide)


class _StageWork(NamedTuple):
    """What one micro-batch of one stage does on one GPU, whatever the GPU
    (:func:`_stage_work`)."""

    matmul: float  # every matrix FLOP: forward, backward, recompute, the head on the last
    sixteen_bit: float  # those of the attention core and the LM head (16-bit under fp8)
    attn: float  # the attention core's forward of one layer
    memory_bytes: float  # element-wise traffic
    kernels: int

    def priced(self, wide: float) -> float:
        """The FLOPs at the layout's precision's rate (:func:`_wide_factor` ``wide``): fp8
        covers the linear layers (Transformer Engine's fp8_autocast); the attention core and
        the LM head run at 16 bits, priced as that many more FLOPs at the fp8 rate."""
        return self.matmul + (wide - 1.0) * self.sixteen_bit


def _stage_work(
    spec: TransformerSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    seq_len: int,
    layers: int,
    last: bool,
    assumptions: ParallelAssumptions,
) -> _StageWork:
    """The FLOPs, bytes and kernels of one micro-batch on one GPU of a stage of ``layers``
    layers (``last``: it holds the LM head), as :func:`_stage_time` prices them (the module
    docstring)."""
    t, c, b = layout.tp, layout.cp, layout.micro_batch_size
    s_local = seq_len / c
    tokens = b * s_local
    h = spec.hidden
    full = layout.recompute == "full"
    # -- FLOPs of one micro-batch on one GPU
    layer_matmul = (
        2 * h * spec.q_dim / t
        + 2 * h * spec.head_dim * shapes.kv_local
        + spec.experts_per_token * spec.expert_matmul_params / t
        + spec.router_params
    )
    fwd_mm = 2.0 * tokens * layer_matmul
    attn = 4.0 * b * s_local * seq_len * spec.q_dim / t * (0.5 if assumptions.causal else 1.0)
    lora = 2.0 * tokens * shapes.layer_lora
    if layout.lora:
        fwd = fwd_mm + attn + lora
        bwd = fwd_mm + 2.0 * attn + 2.0 * lora
    else:
        fwd = fwd_mm + attn
        bwd = 2.0 * fwd
    recompute = fwd if full else (attn if layout.recompute == "selective" else 0.0)
    matmul = layers * (fwd + bwd + recompute)
    # the attention core's FLOPs of one micro-batch: forward, backward (2x) and any recompute
    attn_all = layers * attn * (4.0 if recompute else 3.0)
    head_all = 0.0
    if last:
        head_all = 2.0 * tokens * spec.vocab * h / t * (2.0 if layout.lora else 3.0)
        matmul += head_all
    # -- element-wise bytes and kernels
    traffic_level = "none" if layout.recompute == "none" else "selective"
    acts = _activation_bytes_per_layer(spec, layout, seq_len, traffic_level, shapes.kv_local)
    memory = layers * acts * (8.0 if full else 6.0)
    memory += layers * _lora_traffic_per_layer(
        spec, layout, seq_len, traffic_level, shapes.kv_local, unfused=assumptions.lora_unfused
    )
    kernels_fwd = assumptions.kernels_per_layer_forward + (
        _MOE_KERNELS_PER_LAYER if spec.is_moe else 0
    )
    kernels = layers * kernels_fwd * (4 if full else 3)
    if last:
        logits = LOGIT_BYTES * tokens * spec.vocab / t
        memory += 2.0 * logits
        kernels += 6
    return _StageWork(
        matmul=matmul,
        sixteen_bit=attn_all + head_all,
        attn=attn,
        memory_bytes=memory,
        kernels=kernels,
    )


class _CommWork(NamedTuple):
    """What a stage's micro-batch sends over TP, CP and expert parallelism, whatever the GPU
    and its links (:func:`_comm_work`): floats, or arrays of them for many stages."""

    tp: _Num
    tp_message: _Num  # bytes of one TP collective: b s h / c activations
    tp_count: _Num  # TP collectives of a micro-batch
    cp: _Num
    cp_chunk: _Num  # bytes of one ring pass of a rank's K and V chunk
    cp_passes: _Num
    cp_attn: _Num  # the attention core's FLOPs the ring hides under (its passes of a layer)
    layers: _Num
    ep: _Num
    moe_routed: _Num  # bytes of the routed tokens one all-to-all moves
    moe_count: _Num  # all-to-alls of a micro-batch


def _comm_work(
    spec: TransformerSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    seq_len: int,
    layers: int,
    last: bool,
    attn: float,
) -> _CommWork:
    """:class:`_CommWork` of a stage of ``layers`` layers (``last``: with the LM head);
    ``attn``: the attention core's forward of one layer (:class:`_StageWork`)."""
    t, c, b = layout.tp, layout.cp, layout.micro_batch_size
    tokens = b * (seq_len / c)
    passes = 4.0 if layout.recompute == "full" else 3.0
    sp_div = t if layout.sp_active else 1
    return _CommWork(
        tp=t,
        tp_message=ACTIVATION_BYTES * tokens * spec.hidden,
        tp_count=layers * (6 if passes == 4.0 else 4) + (2 if last else 0),
        cp=c,
        cp_chunk=2.0 * ACTIVATION_BYTES * b * (seq_len / c) * spec.head_dim * shapes.kv_local,
        cp_passes=passes,
        cp_attn=passes * attn,
        layers=layers,
        ep=layout.ep,
        moe_routed=ACTIVATION_BYTES * tokens * spec.experts_per_token * spec.hidden / sp_div,
        moe_count=layers * (6 if passes == 4.0 else 4),
    )


def _group_gbps(links: ClusterShape, gpus: _Num) -> FloatArray:
    """:meth:`ClusterShape.group_gbps` of each of ``gpus`` (a count or an array of them)."""
    counts = np.asarray(gpus)
    flat = counts.reshape(-1).tolist()
    rate = {k: links.group_gbps(int(k)) for k in set(flat)}
    return np.asarray([rate[k] for k in flat], dtype=np.float64).reshape(counts.shape)


def _comm_s(
    w: _CommWork, links: ClusterShape, wide: _Num, rate: _Num, tp_overlap: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The exposed TP, CP and expert-parallel seconds of a stage's micro-batch (floats, or
    arrays for many stages) on ``links``; ``wide`` (:func:`_wide_factor`) and ``rate`` (FLOP/s
    of the layout's precision) price the attention the CP ring hides under."""
    gpn = links.gpus_per_node
    nic_per_gpu = links.node_network_gbps / gpn
    near, far = links.nvlink_hop_latency_s, links.hop_latency_s
    t, c, e = (np.asarray(v) for v in (w.tp, w.cp, w.ep))
    # -- tensor parallelism: all-reduces (or all-gather + reduce-scatter) of b s h / c
    one = comm.hierarchical_collective_s(
        w.tp_message,
        t,
        np.minimum(t, gpn),
        _group_gbps(links, t),
        links.node_network_gbps,
        np.where(t <= gpn, near, far),  # type: ignore[arg-type]
        passes=2.0,
    )
    tp_s = np.where(t > 1, w.tp_count * one * (1.0 - tp_overlap), 0.0)
    # -- context parallelism: ring passes of the K and V chunks, hidden under attention
    in_node = c * t <= gpn
    gbps = np.where(in_node, links.group_gbps(2), nic_per_gpu)  # a ring: one peer each way
    link = comm.transfer_time_s(w.cp_chunk, gbps) + np.where(in_node, near, far)
    ring = w.cp_passes * (c - 1) * link
    attn_s = w.cp_attn * wide / rate
    cp_s = np.where(c > 1, w.layers * np.maximum(0.0, ring - attn_s), 0.0)
    # -- expert parallelism: all-to-all of the routed tokens
    on_node = np.maximum(1, np.minimum(e, gpn // t))
    intra_s = w.moe_routed * (on_node - 1) / e * 8.0 / (_group_gbps(links, on_node) * 1e9)
    inter_s = w.moe_routed * (e - on_node) / e * 8.0 / (nic_per_gpu * 1e9)
    latency = np.where(on_node == e, near, far)
    moe_s = np.where(e > 1, w.moe_count * (np.maximum(intra_s, inter_s) + latency), 0.0)
    return tp_s, cp_s, moe_s


def _stage_time(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    shapes: _Shapes,
    cluster: ClusterShape,
    seq_len: int,
    layers: int,
    stage: int,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
    intervals: dict[str, tuple[float, float, str, str]],
) -> _StageTime:
    b = layout.micro_batch_size
    last = stage == layout.pp - 1
    work = _stage_work(spec, layout, shapes, seq_len, layers, last, assumptions)
    wide = _wide_factor(gpu, layout.precision, efficiency)
    workload = RooflineWorkload(
        name=f"{spec.name} stage {stage}",
        batch_size=b,
        matmul_flops=work.priced(wide),
        memory_bytes=work.memory_bytes,
        n_kernels=work.kernels,
    )
    # fp8 here is the LLM path its efficiency was fitted and validated on (whole GPT-3 runs)
    estimate = predict_step_time(
        workload, gpu, layout.precision, efficiency=efficiency, intervals=intervals,
        precision_validated=True,
    )  # fmt: skip
    # -- the optimizer step, once per step
    params = _stage_params(layout, shapes, stage, layers)
    z_dense, z_expert = _zero_groups(layout)
    shard_params = params.trained_dense + params.trained_expert
    if layout.zero_stage >= 1:
        shard_params = params.trained_dense / z_dense + params.trained_expert / z_expert
    optimizer = predict_step_time(
        RooflineWorkload(
            name=f"{spec.name} stage {stage} optimizer",
            batch_size=b,
            matmul_flops=0.0,
            memory_bytes=OPTIMIZER_STEP_BYTES_PER_PARAM * shard_params,
            n_kernels=_OPTIMIZER_KERNELS_PER_LAYER * max(1, layers),
        ),
        gpu,
        layout.precision,
        efficiency=efficiency,
        intervals=intervals,
        precision_validated=True,
    )
    rate = (
        efficiency.compute_efficiency(layout.precision) * gpu.matrix_tflops(layout.precision) * 1e12
    )
    tp_s, cp_s, moe_s = (
        float(term)
        for term in _comm_s(
            _comm_work(spec, layout, shapes, seq_len, layers, last, work.attn),
            cluster,
            wide,
            rate,
            assumptions.tp_overlap_fraction,
        )
    )
    return _StageTime(
        estimate=estimate,
        optimizer=optimizer,
        matmul_flops=work.matmul,
        tp_s=tp_s,
        cp_s=cp_s,
        moe_s=moe_s,
    )


def _dp_comm_s(
    layout: ParallelLayout,
    shapes: _Shapes,
    stage: int,
    cluster: ClusterShape,
    stage_layers: int,
    micro_batch_s: float,
    assumptions: ParallelAssumptions,
) -> float:
    """Exposed data-parallel communication of one stage (see the module docstring)."""
    if layout.dp * layout.cp == 1:
        return 0.0
    traffic = _dp_traffic(layout, shapes, stage, cluster, stage_layers)
    return comm.exposed_comm_s(
        traffic.total_s,
        traffic.window_micro_batches * micro_batch_s,
        overlap_fraction=assumptions.dp_overlap_fraction,
        backward_fraction=traffic.backward_fraction,
    )


class _DpTraffic(NamedTuple):
    """A stage's data-parallel collectives of one step (s), the micro-batches whose backward
    they can hide under and the share of those that is backward."""

    total_s: float
    window_micro_batches: int
    backward_fraction: float


class _DpCollective(NamedTuple):
    """One data-parallel collective of a stage's step: bytes per pass, ranks, ranks on a node
    and passes."""

    n_bytes: float
    size: int
    on_node: int
    passes: float


def _dp_collectives(
    layout: ParallelLayout, shapes: _Shapes, stage: int, gpus_per_node: int, stage_layers: int
) -> list[_DpCollective]:
    """:func:`_dp_traffic`'s collectives of one step, those that move anything."""
    group = layout.dp * layout.cp
    m = layout.micro_batches
    zero = layout.zero_stage
    params = _stage_params(layout, shapes, stage, stage_layers)
    _, expert_group = _zero_groups(layout)
    # (bytes per pass, passes) for the dense and the expert parameters
    grad = GRADIENT_BYTES_PER_PARAM
    if zero <= 1:
        dense = [(grad * params.trained_dense, 2.0)]
        expert = [(grad * params.trained_expert, 2.0)]
    elif zero == 2:
        dense = [(grad * params.trained_dense, m + 1.0)]
        expert = [(grad * params.trained_expert, m + 1.0)]
    else:  # all-gathers of every (16-bit) weight, reduce-scatters of the trained gradients
        dense = [(ACTIVATION_BYTES * params.dense, 2.0 * m), (grad * params.trained_dense, m)]
        expert = [(ACTIVATION_BYTES * params.expert, 2.0 * m), (grad * params.trained_expert, m)]
    out = []
    for parts, size, stride in (
        (dense, group, layout.tp),
        (expert, expert_group, layout.tp * layout.ep),
    ):
        on_node = max(1, min(size, gpus_per_node // stride))
        out += [
            _DpCollective(n_bytes=n_bytes, size=size, on_node=on_node, passes=float(passes))
            for n_bytes, passes in parts
            if n_bytes > 0 and size > 1
        ]
    return out


def _dp_window(layout: ParallelLayout) -> tuple[int, float]:
    """The micro-batches whose backward a layout's data-parallel collectives can hide under,
    and the share of those that is backward."""
    zero = layout.zero_stage
    return (
        1 if zero <= 1 else layout.micro_batches,
        1.0 if zero == 3 else comm.DEFAULT_BACKWARD_FRACTION,
    )


def _dp_traffic(
    layout: ParallelLayout,
    shapes: _Shapes,
    stage: int,
    cluster: ClusterShape,
    stage_layers: int,
) -> _DpTraffic:
    """:func:`_dp_comm_s`'s collectives before overlap (``dp * cp`` > 1)."""
    gpn = cluster.gpus_per_node
    collective = comm.collective_function(cluster.collective)
    total = 0.0
    for one in _dp_collectives(layout, shapes, stage, gpn, stage_layers):
        total += float(
            collective(
                one.n_bytes,
                one.size,
                one.on_node,
                cluster.group_gbps(one.on_node),
                cluster.node_network_gbps * one.on_node / gpn,
                cluster.hop_latency_s,
                passes=one.passes,
            )
        )
    window, backward = _dp_window(layout)
    return _DpTraffic(total_s=total, window_micro_batches=window, backward_fraction=backward)


def _pp_sends(
    spec: TransformerSpec, layout: ParallelLayout, seq_len: int, gpus_per_node: int
) -> tuple[float, float, bool]:
    """The pipeline's blocking sends of one step (``pp`` > 1; the module docstring): the bytes
    of one, how many, and whether they cross nodes."""
    m, p, v = layout.micro_batches, layout.pp, layout.virtual_stages
    message = ACTIVATION_BYTES * layout.micro_batch_size * seq_len / layout.cp
    message *= spec.hidden / layout.tp  # Megatron sends 1/t per TP rank
    # ranks are ordered tp, cp, dp, pp (pp outermost): a pipeline of more GPUs than a node
    # holds has adjacent stages on different nodes, even where a stage is smaller than a node
    # (QA session 37: dp=2 cp=2 pp=4 on two 8-GPU nodes was priced on NVLink alone); its
    # blocking sends wait on the slowest boundary, the NICs
    return message, 2.0 * (v * m + p - 1), layout.gpus > gpus_per_node


def _sends_s(message: _Num, count: _Num, across: _Flag, links: ClusterShape) -> FloatArray:
    """Seconds of ``count`` sends of ``message`` bytes (floats, or arrays of them) to the next
    stage's GPU: over a GPU's share of the node's NICs ``across`` nodes, else inside it."""
    gpn = links.gpus_per_node
    inter = comm.transfer_time_s(message, links.node_network_gbps / gpn) + links.hop_latency_s
    intra = comm.transfer_time_s(message, links.group_gbps(2)) + links.nvlink_hop_latency_s
    return np.asarray(count * np.where(across, inter, intra), dtype=np.float64)


def _pp_p2p_s(
    spec: TransformerSpec, layout: ParallelLayout, links: ClusterShape, seq_len: int
) -> float:
    """The pipeline's blocking sends of one step (``pp`` > 1; the module docstring)."""
    message, count, across = _pp_sends(spec, layout, seq_len, links.gpus_per_node)
    return float(_sends_s(message, count, across, links))
