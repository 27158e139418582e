"""The checks of :mod:`gpucast.predict.llm_infer`'s requests and the words of their fixes:
lengths, tensor-parallel degrees (:func:`check_tp`, :func:`split_problem`), precisions
(:func:`resolve_precisions`, :func:`fp8_hardware_note`, :func:`precisions_text`) and the lighter
weights to try (:func:`lighter_weights_fix`).

Private part of :mod:`gpucast.predict.llm_infer`, which re-exports its public names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import BYTES_PER_VALUE, COMPUTE_MODE, EngineProfile, check_precision
from gpucast.predict._llm_infer_evaluate import tp_problem

#: Tensor-parallel degrees offered when none is given (GPUs of one node).
TP_CHOICES: tuple[int, ...] = (1, 2, 4, 8)


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
