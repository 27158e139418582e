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

The public names are here (``__all__``); the code lives in private parts: the model shapes and
the vectorised evaluation (``_llm_infer_evaluate``), the requests' checks and the words of their
fixes (``_llm_infer_checks``), one prediction (``_llm_infer_predict``) and the fit
(``_llm_infer_fit``); one iteration of a serving engine is here.
"""

from __future__ import annotations

import numpy as np

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.gpu_memory import engine_room_bytes
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile
from gpucast.domain.llm_serving import IterationCost
from gpucast.domain.parallel import SWITCHED, NodeLinks
from gpucast.domain.units import GIB
from gpucast.predict._llm_infer_checks import (
    TP_CHOICES,
    _check_run,
    check_tp,
    fp8_hardware_note,
    lighter_precisions,
    lighter_text,
    lighter_weights_fix,
    node_degrees,
    precisions_text,
    resolve_precisions,
    split_problem,
    tp_fix,
)
from gpucast.predict._llm_infer_evaluate import (
    ACTIVATION_BYTES,
    FloatArray,
    Params,
    _Case,
    _cases,
    _collectives_s,
    _experts_touched,
    kv_bytes_per_token,
    kv_local_heads,
    tp_problem,
)
from gpucast.predict._llm_infer_fit import (
    PRIORS,
    ROW_COLUMNS,
    TTFT_COLUMNS,
    LlmInferenceModel,
    identifiable,
)
from gpucast.predict._llm_infer_predict import (
    TERMS,
    gpu_factor_note,
    predict_inference,
    request_latency_s,
    smallest_fitting_tp,
)

__all__ = [
    "ACTIVATION_BYTES",
    "PRIORS",
    "ROW_COLUMNS",
    "TERMS",
    "TP_CHOICES",
    "TTFT_COLUMNS",
    "FloatArray",
    "LlmInferenceModel",
    "Params",
    "check_tp",
    "fp8_hardware_note",
    "gpu_factor_note",
    "identifiable",
    "iteration_cost",
    "kv_bytes_per_token",
    "kv_local_heads",
    "lighter_precisions",
    "lighter_text",
    "lighter_weights_fix",
    "node_degrees",
    "precisions_text",
    "predict_inference",
    "request_latency_s",
    "resolve_precisions",
    "smallest_fitting_tp",
    "split_problem",
    "tp_fix",
    "tp_problem",
]


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
