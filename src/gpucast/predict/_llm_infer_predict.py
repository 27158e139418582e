"""One prediction of :mod:`gpucast.predict.llm_infer`: an offline batch (:func:`predict_inference`
and its notes), each request of a trace served alone (:func:`request_latency_s`) and the fewest
GPUs that hold a model (:func:`smallest_fitting_tp`).

Private part of :mod:`gpucast.predict.llm_infer`, which re-exports its public names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import (
    BYTES_PER_VALUE,
    COMPUTE_MODE,
    EngineProfile,
    InferenceMemory,
    InferencePrediction,
)
from gpucast.domain.parallel import SWITCHED, NodeLinks
from gpucast.domain.units import GIB, count_of
from gpucast.predict._llm_infer_checks import (
    TP_CHOICES,
    _check_lengths,
    _check_run,
    fp8_hardware_note,
    lighter_weights_fix,
    node_degrees,
    resolve_precisions,
)
from gpucast.predict._llm_infer_evaluate import (
    FloatArray,
    _Case,
    _Cases,
    _cases,
    _evaluate,
    _shape,
    kv_bytes_per_token,
    tp_problem,
)
from gpucast.predict.parallel import group_link_gbps

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


def gpu_factor_note(engine: EngineProfile, gpu: str) -> str:
    """What a GPU's latency factor for ``engine`` is and rests on."""
    return (
        f"{engine.display_name} on {gpu}: every term x{engine.gpu_factors[gpu]:.2f}, from its "
        f"own measurements there ({engine.gpu_factor_sources.get(gpu, 'no source given')})"
    )
