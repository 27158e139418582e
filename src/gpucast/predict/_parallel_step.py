"""One training step of a layout (:func:`predict_training_step`): memory, time by term,
bottleneck and MFU, as :mod:`gpucast.predict.parallel`'s module docstring describes.
"""

from __future__ import annotations

from dataclasses import replace

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import (
    STEP_TERMS,
    ClusterShape,
    ParallelAssumptions,
    ParallelLayout,
    ParallelStepPrediction,
)
from gpucast.domain.prediction import Estimate
from gpucast.predict._parallel_layout import HOST_FORWARD_SHARE, cluster_shape, validate_layout
from gpucast.predict._parallel_memo import SearchMemo, _shapes_of
from gpucast.predict._parallel_memory import _all_stage_memory, _stage_layers
from gpucast.predict._parallel_time import _dp_comm_s, _pp_p2p_s, _stage_time, _StageTime
from gpucast.predict.roofline import RooflineEfficiency

#: The step terms a micro-batch paced by the host spends waiting on it, the wait included
_MICRO_BATCH_TERMS = frozenset(
    (
        "compute",
        "memory_bandwidth",
        "kernel_overhead",
        "tp_comm",
        "cp_comm",
        "moe_comm",
        "host_wait",
    )
)


def _bottleneck(terms: dict[str, float], host_paced_s: float) -> str:
    """The largest term; where the host paces the micro-batches (``host_paced_s`` > 0: their
    time in all), their terms count as one, the host's (``host_wait``), since faster GPUs or
    links would not shorten them."""
    if host_paced_s > 0:
        others = {k: v for k, v in terms.items() if k not in _MICRO_BATCH_TERMS}
        if host_paced_s >= max(others.values(), default=0.0):
            return "host_wait"
        return max(others, key=lambda k: others[k])
    return max(terms, key=lambda k: terms[k])


def predict_training_step(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layout: ParallelLayout,
    *,
    seq_len: int,
    cluster: ClusterShape | None = None,
    efficiency: RooflineEfficiency | None = None,
    assumptions: ParallelAssumptions | None = None,
    memo: SearchMemo | None = None,
) -> ParallelStepPrediction:
    """One optimizer step of ``spec`` on ``layout.gpus`` GPUs of type ``gpu``.

    Raises :class:`InvalidSpecError` (naming the field) when the layout cannot run the model;
    a layout that runs but does not fit in memory is returned with ``fits`` False. ``memo``:
    what the layouts of one search share (:class:`SearchMemo`; :func:`rank_layouts` and
    :func:`best_layout` pass one per search).
    """
    links = cluster or cluster_shape(gpu)
    opts = assumptions or ParallelAssumptions()
    eff = efficiency or RooflineEfficiency()
    validate_layout(
        spec,
        layout,
        seq_len=seq_len,
        gpus_per_node=links.gpus_per_node,
        allow_cross_node_tp=links.allow_cross_node_tp,
        allow_uneven_pp=opts.allow_uneven_pp,
    )
    cache = memo if memo is not None else SearchMemo()
    shapes = _shapes_of(cache, spec, layout)
    layers = _stage_layers(spec, layout.pp)
    stage_memory = _all_stage_memory(spec, gpu, layout, seq_len, opts, shapes)
    # stages differ only by their layer count and by being first (the embedding's optimizer
    # state) or last (the head's FLOPs and optimizer state)
    flat = replace(layout, virtual_stages=1)
    times: list[_StageTime] = []
    for i, n in enumerate(layers):
        key = (flat, n, i == 0, i == layout.pp - 1)
        if key not in cache.stage_times:
            cache.stage_times[key] = _stage_time(
                spec, gpu, layout, shapes, links, seq_len, n, i, eff, opts, cache.intervals
            )
        times.append(cache.stage_times[key])
    slowest = max(range(layout.pp), key=lambda i: times[i].micro_batch_s)
    pace = times[slowest]
    m, p, v = layout.micro_batches, layout.pp, layout.virtual_stages
    roof = pace.estimate.breakdown
    terms = dict.fromkeys(STEP_TERMS, 0.0)
    terms["compute"] = m * roof["compute"]
    terms["memory_bandwidth"] = m * roof["memory_bandwidth"]
    terms["kernel_overhead"] = m * roof["overhead"]
    terms["optimizer"] = max(st.optimizer.value for st in times)
    terms["tp_comm"] = m * pace.tp_s
    terms["cp_comm"] = m * pace.cp_s
    terms["moe_comm"] = m * pace.moe_s
    # a host slower than the GPUs paces every micro-batch (no CUDA graphs, a Python-heavy stack)
    host_mb = (
        opts.host_layer_s * max(layers) * (1.0 + HOST_FORWARD_SHARE * (flat.recompute == "full"))
    )
    wait = max(0.0, host_mb - pace.micro_batch_s)
    terms["host_wait"] = m * wait
    terms["pp_bubble"] = (p - 1) / v * (pace.micro_batch_s + wait)
    if p > 1:
        terms["pp_p2p"] = _pp_p2p_s(spec, layout, links, seq_len)
    if flat not in cache.dp_comm_s:
        # a stage's share depends on its layer count and on holding the embedding or the head
        per_kind: dict[tuple[int, bool, bool], float] = {}
        for i, n in enumerate(layers):
            kind = (n, i == 0, i == layout.pp - 1)
            if kind not in per_kind:
                per_kind[kind] = _dp_comm_s(
                    layout, shapes, i, links, n, times[i].micro_batch_s, opts
                )
        cache.dp_comm_s[flat] = max(per_kind.values())
    terms["dp_comm"] = cache.dp_comm_s[flat]
    step = sum(terms.values())
    lower = step * pace.estimate.lower / pace.estimate.value
    upper = step * pace.estimate.upper / pace.estimate.value
    notes = list(pace.estimate.notes)
    if spec.layers % p:
        chunks = f" in {v} chunks each" if v > 1 else ""
        notes.append(
            f"uneven pipeline: stages hold {max(layers)} or {min(layers)} of {spec.layers} "
            f"layers{chunks}; the slowest sets the pace"
        )
    elif spec.layers % (p * v):
        notes.append(
            f"uneven chunks: each stage's {layers[0]} layers in {v} chunks that differ by a "
            "layer, priced at their mean (the bubble (pp - 1) / vpp of a stage's micro-batch)"
        )
    if layout.tp > spec.kv_heads:
        notes.append(
            f"tp={layout.tp} exceeds the {spec.kv_heads} KV heads: each KV head is replicated "
            f"{layout.tp // spec.kv_heads} times"
        )
    if seq_len > spec.max_context:
        notes.append(
            f"seq_len {seq_len} exceeds the {spec.max_context} tokens {spec.name} was "
            "published with (context extension)"
        )
    if layout.precision == "fp8":
        notes.append(
            "fp8: the linear layers at the fp8 rate; the attention core and the LM head at "
            "the bf16 rate (Transformer Engine's default)"
        )
    n_mm = float(spec.matmul_params_per_token)
    tokens = layout.global_batch_size * seq_len
    model_flops = (4.0 if layout.lora else 6.0) * n_mm * tokens
    gpus_per_stage = layout.dp * layout.tp * layout.cp
    hardware_flops = m * gpus_per_stage * sum(st.matmul_flops for st in times)
    memory = max(stage_memory, key=lambda mem: mem.total_bytes)
    estimate = Estimate(
        value=step,
        lower=lower,
        upper=upper,
        unit="s",
        bottleneck=_bottleneck(terms, m * (pace.micro_batch_s + wait) if wait > 0 else 0.0),
        source=pace.estimate.source,
        breakdown=terms,
        notes=tuple(notes),
    )
    return ParallelStepPrediction(
        model=spec.name,
        gpu=gpu.name,
        layout=layout,
        seq_len=seq_len,
        step_time=estimate,
        model_flops_per_step=model_flops,
        hardware_flops_per_step=hardware_flops,
        peak_flops_per_gpu=gpu.peak_tflops(layout.precision) * 1e12,
        memory=memory,
        notes=tuple(notes),
    )
