"""What both LLM serving verbs derive from a request: the token lengths it gave (a trace's own
lengths otherwise), the scheduler configuration, the precision text and the validated
errors the figures rest on (:func:`llm_validation`). Re-exported by
:mod:`gpucast.app.llm_serve`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.llm_infer import EngineProfile


def llm_validation(engine: str, gpu: str, precision: str, tp: int) -> dict[str, str]:
    """The validated errors an LLM serving figure rests on: the engine's iteration times
    (LLM-Inference-Bench) with their 80% band (:func:`gpucast.app.infer.infer_band`) and the
    simulator's agreement with them."""
    from gpucast.app.infer import infer_band
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.validation import validation_for

    band = infer_band(inference_engine(engine), load_catalog().gpu(gpu))
    low, high = band.latency
    return {
        f"iteration times (llm-infer:{engine})": validation_for(
            f"llm-infer:{engine}", [gpu], precision, tp
        ).text(),
        "iteration times, 80% band": f"x{low:.2f}-{high:.2f} of the engine's batch latency "
        f"({band.note}); the TTFT and TPOT percentiles are at the central iteration times "
        "(--band simulates the edges too)",
        "token-level simulator": validation_for("llm-serve", [gpu], precision, tp).text(),
    }


def precision_text(engine: EngineProfile, request: Any, gpus: list[GpuSpec]) -> str:
    """The weights' and KV cache's precisions a run or plan rests on (whether the engine's
    default), and how fp8 weights run on each of ``gpus`` without fp8 tensor cores."""
    from gpucast.predict.llm_infer import fp8_hardware_note, precisions_text, resolve_precisions

    weights, kv = resolve_precisions(engine, request.precision, request.kv_precision)
    text = precisions_text(
        weights, kv, weights_given=bool(request.precision), kv_given=bool(request.kv_precision)
    )
    note = fp8_hardware_note(gpus, weights)
    return text if note is None else f"{text}; {note}"


def _given_lengths(request: Any) -> tuple[str, ...]:
    """The flags of ``--input-len`` / ``--output-len`` set to other than their defaults."""
    import dataclasses

    defaults = {f.name: f.default for f in dataclasses.fields(request)}
    return tuple(
        name.replace("_", "-")
        for name in ("input_len", "output_len")
        if getattr(request, name) != defaults[name]
    )


def _scheduler(request: Any, engine_max_seqs: int) -> Any:
    from gpucast.domain.llm_serving import SchedulerConfig

    return SchedulerConfig(
        max_num_seqs=request.max_num_seqs or engine_max_seqs,
        max_batched_tokens=request.max_batched_tokens,
        block_size=request.block_size,
        chunked_prefill=request.chunked_prefill,
        preemption=request.preemption,
    )
