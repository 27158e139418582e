"""``gpucast.predict_infer``: one offline batch of a published LLM on GPUs with an engine.

The model comes from ``catalog/data/llm_models.csv`` (published hyper-parameters; a Hugging
Face name such as ``meta-llama/Llama-2-7b-hf`` works too), the engine's structure and fitted
efficiencies from ``catalog/data/inference_engines.csv`` (vLLM, TensorRT-LLM, llama.cpp,
DeepSpeed-MII fitted on LLM-Inference-Bench; eager PyTorch priors only), the prediction from
:mod:`gpucast.predict.llm_infer` (prefill -> TTFT, decode steps bound by reading the weights
and the KV cache, tensor-parallel all-reduces, KV-cache capacity, MoE experts). Without
``--tp`` the fewest GPUs of 1, 2, 4, 8 on which the model and one whole sequence fit are
used. Every result names the rows its engine was fitted on and the error validated for its
regime (``catalog/data/validation.csv``: ``benchmarks/llm_inference_accuracy.py``), and states
80% intervals of the latency, tokens/s and TTFT that held-out rows earned
(``catalog/data/llm_infer_intervals.csv``, :mod:`gpucast.predict.llm_infer_intervals`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gpu_memory import engine_share_note
from gpucast.domain.llm_infer import (
    INFER_PRECISIONS,
    check_kv_units,
    check_precision,
    check_weight_units,
)
from gpucast.domain.options import documented, lower_text, option

if TYPE_CHECKING:
    from gpucast.domain.catalog import Catalog, GpuSpec
    from gpucast.domain.llm_infer import EngineProfile, InferencePrediction
    from gpucast.domain.provenance import Validation
    from gpucast.predict.llm_infer_intervals import StatedBand

_PRECISION_HELP = f"Weight precision: {', '.join(INFER_PRECISIONS)} (default: the engine's, fp16)."


def _positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidSpecError(name, "must be an integer >= 1", got=value, fix=f"e.g. --{name} 16")


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictInferRequest:
    """A batch of sequences to generate with a published LLM (``gpucast predict infer``)."""

    VERB: ClassVar[str] = "predict infer"

    model: str = option(
        help="A model of catalog/data/llm_models.csv (or its Hugging Face name).",
        example="llama-2-7b",
    )
    gpu: str = option(help="Catalog GPU name.", example="A100-80GB")
    batch_size: int = option(1, help="Sequences generated together.", example="16")
    input_len: int = option(help="Prompt tokens per sequence.", example="1024")
    output_len: int = option(help="Generated tokens per sequence.", example="1024")
    framework: str = option(
        "vllm",
        help="Inference engine: vllm, tensorrt-llm, llama.cpp, deepspeed-mii, eager-pytorch.",
        example="vllm",
    )
    tp: int | None = option(
        None,
        help="GPUs (tensor-parallel ranks; llama.cpp splits layers). Default: the fewest of "
        "1, 2, 4, 8 that hold the model.",
        example="2",
    )
    precision: str | None = option(None, parse=lower_text, help=_PRECISION_HELP, example="int8")
    kv_precision: str | None = option(
        None,
        parse=lower_text,
        help="KV-cache precision (default: the weights', fp16 under int8/int4 weights).",
        example="fp8",
    )
    max_num_seqs: int | None = option(
        None,
        help="Most sequences the engine runs at once (vLLM --max-num-seqs, TensorRT-LLM's "
        "engine max_batch_size). Default: the engine profile's (256; llama.cpp 1).",
        example="1024",
    )

    @staticmethod
    def missing_fix(name: str, given: Mapping[str, Any]) -> str | None:
        """A model predict infer does not cover is refused before the LLM fields it would
        ask for (QA 40 V #4: a CNN was asked for --input-len, then refused)."""
        if isinstance(given.get("model"), str):
            _known_llm(given["model"])
        return None

    def __post_init__(self) -> None:
        for name in ("batch_size", "input_len", "output_len", "tp", "max_num_seqs"):
            _positive(name.replace("_", "-"), getattr(self, name))
        if self.precision is not None:
            check_precision("precision", self.precision)
        if self.kv_precision is not None:
            check_precision("kv-precision", self.kv_precision)


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictInferResult:
    """The prediction, the engine it used (and what that was fitted on), its validation."""

    prediction: InferencePrediction
    engine: EngineProfile
    validation: Validation
    #: the 80% band (ratios of measured / predicted) and the held-out regimes it rests on
    band: StatedBand
    assumptions: dict[str, str] = field(default_factory=dict)
    #: when the KV cache cannot hold the batch: the degree of 1, 2, 4, 8 with the most
    #: generated tokens/s per GPU, and what it gives ("" when none does better)
    hint: str = ""
    #: ``avg_power_w`` (one GPU over the batch), ``batch_energy_j`` (all its GPUs) and
    #: ``energy_j_per_token`` (per generated token); empty without the GPU's power facts
    energy: dict[str, float] = field(default_factory=dict)

    def interval(self, quantity: str) -> tuple[float, float]:
        """The 80% interval of ``latency_s``, ``ttft_s``, ``tokens_per_s`` or
        ``total_tokens_per_s`` (a rate's is the latency's, inverted)."""
        p = self.prediction
        lat_lo, lat_hi = self.band.latency
        if quantity == "latency_s":
            return p.latency_s * lat_lo, p.latency_s * lat_hi
        if quantity == "ttft_s":
            return p.ttft_s * self.band.ttft[0], p.ttft_s * self.band.ttft[1]
        value = float(getattr(p, quantity))
        return value / lat_hi, value / lat_lo

    def to_dict(self) -> dict[str, Any]:
        engine = self.engine
        quantities = ("latency_s", "ttft_s", "tokens_per_s", "total_tokens_per_s")
        return {
            **self.prediction.to_dict(),
            "interval_80": {
                **{q: list(self.interval(q)) for q in quantities},
                "regimes": list(self.band.regimes),
                "note": self.band.note,
            },
            "engine_profile": {
                "name": engine.name,
                "display_name": engine.display_name,
                "fitted_params": list(engine.fitted_params),
                "fitted_on": engine.fitted_on,
                "provenance": engine.provenance(),
                "source_url": engine.source_url,
                "parameters": engine.params(),
            },
            "data": engine.fitted_on or "no measurements (priors)",
            "validation": self.validation.to_dict(),
            "assumptions": dict(self.assumptions),
            "hint": self.hint,
            "energy": dict(self.energy),
        }


def infer_band(engine: EngineProfile, gpu: GpuSpec) -> StatedBand:
    """The 80% band of ``engine``'s latency and TTFT on ``gpu``
    (:func:`gpucast.predict.llm_infer_intervals.stated_ratios` on the shipped
    ``llm_infer_intervals.csv``): by whether the engine was fitted, the GPU is the fitted
    one, the engine has its own factor on it, and else whether it is of the fitted GPU's
    vendor."""
    from gpucast.catalog.engines import load_llm_infer_intervals
    from gpucast.predict.llm_infer_intervals import stated_ratios

    table, fitted_gpu, vendor = load_llm_infer_intervals()
    return stated_ratios(
        table,
        engine_fitted=bool(engine.fitted_params),
        gpu_fitted=gpu.name == fitted_gpu,
        same_vendor=gpu.vendor.lower() == vendor.lower(),
        gpu_calibrated=gpu.name in engine.gpu_factors,
    )


def inference_energy(p: InferencePrediction, catalog: Catalog) -> tuple[dict[str, float], str]:
    """The batch's GPU power and energy: each GPU busy for the prefill and decode compute and
    memory time at the power model's draw, idle for the rest (overheads, communication), and
    what that rests on."""
    from gpucast.app.llm import llm_energy

    energy, note = llm_energy(catalog, idle="overheads, communication")
    b = p.breakdown
    watts = energy.power.average_w(
        p.gpu,
        compute_s=b.get("prefill_compute", 0.0) + b.get("decode_compute", 0.0),
        memory_s=b.get("prefill_memory", 0.0)
        + b.get("decode_weights", 0.0)
        + b.get("decode_kv_cache", 0.0),
        kernel_s=0.0,
        wall_s=p.latency_s,
    )
    if watts is None:
        return {}, note
    batch_j = watts[0] * p.tp * p.latency_s
    return {
        "avg_power_w": watts[0],
        "batch_energy_j": batch_j,
        "energy_j_per_token": batch_j / (p.batch_size * p.output_len),
    }, note


#: A larger degree is hinted at when it gives this much more generated tokens/s per GPU.
HINT_GAIN = 1.1


def more_gpus_hint(chosen: InferencePrediction, others: Sequence[InferencePrediction]) -> str:
    """When ``chosen``'s KV cache cannot hold its batch at once: the prediction of
    ``others`` (other degrees of the same batch) with the most generated tokens/s per GPU, if
    it beats ``chosen``'s by :data:`HINT_GAIN`, as one sentence ("" otherwise)."""
    if chosen.waves <= 1.0 + 1e-9:
        return ""
    per_gpu = chosen.tokens_per_s / chosen.tp
    fitting = [o for o in others if o.fits and o.tp != chosen.tp]
    if not fitting:
        return ""
    best = max(fitting, key=lambda o: (o.tokens_per_s / o.tp, -o.tp))
    if best.tokens_per_s / best.tp < HINT_GAIN * per_gpu:
        return ""
    held = (
        f"holds all {best.batch_size} sequences at once"
        if best.waves <= 1.0 + 1e-9
        else f"holds {best.concurrent_sequences:.1f} of {best.batch_size} at once"
    )
    return (
        f"the KV cache holds {chosen.concurrent_sequences:.1f} of {chosen.batch_size} "
        f"sequences on {chosen.tp} GPU{'s' if chosen.tp > 1 else ''}; --tp {best.tp} {held}: "
        f"{best.tokens_per_s:,.0f} generated tokens/s, {best.tokens_per_s / best.tp:,.0f} per "
        f"GPU (vs {per_gpu:,.0f} at tp {chosen.tp})"
    )


def _known_llm(name: str) -> Any:
    """The LLM spec of ``name``; a model predict infer does not cover (a CNN) in one line
    pointing to the verb that does."""
    from gpucast.catalog.llm import llm_model, load_llm_models
    from gpucast.domain.errors import UnknownModelError

    try:
        return llm_model(name)
    except UnknownModelError as exc:
        raise UnknownModelError(
            name,
            [m.name for m in load_llm_models()],
            fix="predict infer covers the LLMs of catalog/data/llm_models.csv; for a CNN's "
            "serving latency use gpucast simulate serve --model NAME --gpu GPU",
        ) from exc


def predict_infer(
    request: PredictInferRequest | None = None, /, **options: Any
) -> PredictInferResult:
    """TTFT, batch latency, tokens/s and memory of one batch (module docstring)."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.units import GIB
    from gpucast.inputs.llm_serving import (
        check_tp_within_node,
        largest_node_gpus,
        links_text,
        node_links,
    )
    from gpucast.predict.llm_infer import (
        TP_CHOICES,
        lighter_text,
        node_degrees,
        precisions_text,
        predict_inference,
        smallest_fitting_tp,
        tp_problem,
    )

    request = resolve(PredictInferRequest, request, options)
    spec = _known_llm(request.model)
    catalog = load_catalog()
    gpu, node = node_links(catalog.gpu(request.gpu))  # as its node links it
    check_tp_within_node(gpu.name, request.tp)
    engine = inference_engine(request.framework)
    check_weight_units(request.precision, gpu, catalog, engine.name)
    check_kv_units(request.kv_precision, gpu, engine, catalog)

    def at(tp: int) -> InferencePrediction:
        return predict_inference(
            spec, gpu, engine, batch_size=request.batch_size, input_len=request.input_len,
            output_len=request.output_len, tp=tp, precision=request.precision,
            kv_precision=request.kv_precision, node=node, max_sequences=request.max_num_seqs,
        )  # fmt: skip

    largest = largest_node_gpus(gpu.name)

    def fewest(within_node: bool = False) -> int:
        return smallest_fitting_tp(
            spec, gpu, engine, input_len=request.input_len, output_len=request.output_len,
            precision=request.precision, kv_precision=request.kv_precision, node=node,
            node_gpus=largest, choices=node_degrees(largest) if within_node else TP_CHOICES,
        )  # fmt: skip

    predict = at(request.tp or 1)  # checks the lengths and the tp before any search
    chosen = "given"
    if request.tp is None:
        chosen = "the fewest GPUs of 1, 2, 4, 8 that hold the weights and one sequence"
        tp = fewest()
        check_tp_within_node(gpu.name, tp, model=spec.name, weights=predict.precision)
        if tp != predict.tp:
            predict = at(tp)
    elif not predict.fits:
        need = fewest(within_node=True)  # or raises: it fits at no degree its node holds
        kv_gib = predict.kv_bytes_per_token * (request.input_len + request.output_len) / GIB
        raise InvalidSpecError(
            "tp",
            f"{spec.name} in {predict.precision} does not fit on {request.tp} x {gpu.name} "
            f"with {engine.display_name}: {predict.memory.weights_bytes / GIB:.1f} GiB of "
            f"weights + {kv_gib / request.tp:.2f} GiB of KV cache per GPU, "
            f"{predict.memory.capacity_bytes / GIB:.1f} GiB available",
            got=request.tp,
            fix=f"use --tp {need}{lighter_text(predict.precision)}",
        )
    others = []
    if predict.waves > 1.0 + 1e-9:  # the cache is the limit: would more GPUs pay for themselves?
        for tp in node_degrees(largest):  # a hint the node holds
            splits = engine.multi_gpu != "tensor" or tp_problem(spec, tp) is None
            if tp != predict.tp and splits:
                others.append(at(tp))
    validation = validation_for(
        f"llm-infer:{engine.name}", [gpu.name], predict.precision, predict.tp
    )
    energy, energy_note = inference_energy(predict, catalog)
    band = infer_band(engine, gpu)
    return PredictInferResult(
        prediction=predict,
        engine=engine,
        validation=validation,
        band=band,
        assumptions={
            "batch": f"{request.batch_size} sequences of {request.input_len} prompt tokens, "
            f"each generating {request.output_len} (an offline batch, as LLM-Inference-Bench)",
            "gpus": f"{predict.tp} x {gpu.name} ({chosen})",
            "engine": engine.provenance(),
            "precision": precisions_text(
                predict.precision,
                predict.kv_precision,
                weights_given=bool(request.precision),
                kv_given=bool(request.kv_precision),
                sep=", ",
            ),
            **({"intra-node links": links_text(gpu, predict.tp)} if predict.tp > 1 else {}),
            "memory": engine_share_note(
                engine.display_name,
                gpu.memory_gib,
                predict.memory.weights_bytes,
                engine.memory_fraction,
                engine.memory_share == "free",
                engine.params(gpu.name)["memory_reserve_gib"],
            ),
            "energy": energy_note,
        },
        hint=more_gpus_hint(predict, others),
        energy=energy,
    )
