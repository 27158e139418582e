"""What a serverless result says beside its numbers: the assumptions of the load, the cold
starts, the billing and the warm-up, the validations quoted, the SLO standing and how the
always-on candidate was sized.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucast.app._serverless_load import _hours, _Load
from gpucast.app._serverless_options import DEFAULT_GPU, ServerlessLoad
from gpucast.domain.options import default_mark

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpucast.app.serverless import PlanServerlessRequest
    from gpucast.domain.provenance import Validation
    from gpucast.inputs.serverless import GpuFunction
    from gpucast.plan.serverless import ServerlessPlan
    from gpucast.simulate.serverless import ServerlessResult


def _warmup_text(warmup_s: float, horizon_s: float) -> str:
    """The ``warm-up`` assumption line (both verbs)."""
    if warmup_s == 0:
        return (
            "none: every function starts unloaded at the trace's first minute, so its first "
            "call is a cold start under every policy (a rarely called function's own p99); "
            "--warmup 1h simulates the first hour without counting it"
        )
    return (
        f"the first {_hours(warmup_s)} simulated (policy state, histograms and loaded "
        "instances built as usual) but not counted: invocations, cold starts, latency, "
        f"GPU-hours and warm-but-idle memory are those of the {_hours(horizon_s - warmup_s)} "
        "after it (rounded up to whole minutes)"
    )


def _load_assumptions(request: ServerlessLoad, load: _Load) -> dict[str, str]:
    if load.trace.tokens:  # an LLM trace (an app's mix of functions also has a spread)
        from gpucast.inputs.serverless import LLM_ENGINE

        execution = (
            f"each request alone on its instance ({LLM_ENGINE}, batch 1: prefill then decode "
            "of its tokens); requests of one minute do not batch or queue; latency "
            "percentiles from each function's service times at 64 quantiles"
        )
    elif request.durations == "model":
        execution = (
            "one forward pass of the function's model at batch 1 (the serving engine's "
            "latency model, as simulate serve prices the device; the request's payload over "
            "the network and PCIe, which simulate serve adds, is left out)"
        )
    else:
        execution = "the trace's average duration per function, at least one forward pass"
    from gpucast.app._serverless_unit import app_memory_assumption, unit_assumption

    out = {
        "assignment": f"function i serves model i mod {len(request.models)} of --models "
        f"{','.join(request.models)}{default_mark(request, 'models')}",
        "one instance": f"one instance per {load.unit}; the first invocation of a cold minute "
        "pays the cold start, the others of that minute find it loaded",
        "execution": execution,
        "billing": _billing_text(request.billing),
        "unit": unit_assumption(load.unit, load.apps, len(request.models)),
    }
    several = sorted({(f.model, f.gpus) for f in load.functions if f.gpus > 1})
    if several:
        each = ", ".join(f"{model} {gpus} x {load.gpu.name}" for model, gpus in several)
        out["gpus per instance"] = (
            f"an instance holds all the GPUs its model is split over ({each}): it loads, keeps "
            "warm and is billed for all of them, so its GPU-hours are its hours times them"
        )
    if load.unit == "app" and load.apps is not None:
        out["app memory"] = app_memory_assumption(load.apps)
    out.update(_cold_start_assumptions(load.functions))
    runs = {f.model: f.coldstart_run for f in load.functions if f.coldstart_run is not None}
    if runs:
        each = ", ".join(f"{model}: run {run}" for model, run in runs.items())
        out["cold start"] = (
            f"measured phases of stored coldstart runs replace the predicted ones ({each}; "
            "each model's line says which); measured weights were read from the measuring "
            "host's disk, not --storage; phases a run lacks (the container start) stay predicted"
        )
    return out


def _cold_start_assumptions(functions: Sequence[GpuFunction]) -> dict[str, str]:
    """What the models' predicted cold starts assume (``GpuFunction.assumptions``, as predict
    coldstart says it), keyed ``cold start NAME``; one text where every model shares it, else
    each model's (QA 39 S #6: simulate/plan serverless dropped them)."""
    said: dict[str, dict[str, list[str]]] = {}
    for f in functions:
        for key, text in f.assumptions.items():
            models = said.setdefault(key, {}).setdefault(text, [])
            if f.model not in models:
                models.append(f.model)
    return {
        f"cold start {key}": next(iter(texts))
        if len(texts) == 1
        else "; ".join(f"{', '.join(models)}: {text}" for text, models in texts.items())
        for key, texts in said.items()
    }


def _billing_text(billing: str) -> str:
    """The assumption line that names the bill (both verbs)."""
    if billing == "instance":
        return (
            "instance: the GPU is billed while an instance is loaded (busy and "
            "keep-alive minutes, cold starts), at the same price per GPU-hour as always-on "
            "(--billing execution: execution and cold starts only)"
        )
    return (
        "execution: execution and cold-start seconds only, at the same price per "
        "GPU-hour as always-on; the keep-alive is not billed (--billing instance: it is)"
    )


def _coldstart_validation(load: _Load) -> Validation | None:
    """The validated error of the models' predicted cold start on ``load``'s GPU, as predict
    coldstart names it (a language model at fp16 on its instance's GPUs, a DNN at fp32); None
    where every model's cold start was measured (``--coldstart-run``: QA 39 S, the line then
    described a prediction nobody made; :func:`_coldstart_measured` says what was measured)."""
    from gpucast.catalog.validation import validation_for

    if all(f.coldstart_source is not None for f in load.functions):
        return None
    gpus = max(f.gpus for f in load.functions)
    return validation_for("coldstart", [load.gpu.name], _precision(load), gpus)


def _precision(load: _Load) -> str:
    """The precision ``load``'s models run at: a language model fp16 (vLLM's), a DNN fp32."""
    from gpucast.inputs.llm_serving import is_llm_model

    return "fp16" if is_llm_model(load.functions[0].model) else "fp32"


def _coldstart_measured(load: _Load) -> dict[str, str]:
    """Each model whose cold start a stored run measured (``--coldstart-run``): the run's
    provenance, in place of the predicted cold start's validation."""
    return {f.model: f.coldstart_source for f in load.functions if f.coldstart_source}


def _keepalive_validation(load: _Load) -> Validation:
    """The keep-alive simulator's validated error on ``load``'s GPU at its models' precision
    (the serverless-keepalive row of validation.csv, any precision: the regime named as the
    cold start's, not fp32 for an fp16 language model, QA 41 QF F6): ``simulate serverless``
    and ``plan serverless`` name the same."""
    from gpucast.catalog.validation import validation_for

    return validation_for("serverless-keepalive", [load.gpu.name], _precision(load))


def _slo_standing(text: str, result: ServerlessResult, load: _Load) -> dict[str, Any]:
    """``--slo`` against the simulated invocations (execution + cold start), judged as plan
    serverless judges --slo-scope invocations: the latency at the percentile within it."""
    import numpy as np

    from gpucast.app.serve import parse_slo
    from gpucast.simulate.serverless import slo_standing, with_rejected

    percentile, slo_s = parse_slo(text)
    warm = result.invocations - result.cold_starts
    at_s, share = slo_standing(
        np.asarray(load.exec_s, dtype=np.float64),
        with_rejected(((0.0, warm), (load.cold_s, result.cold_starts)), result.rejected),
        percentile=percentile, slo_s=slo_s, spread=load.exec_spread,
    )  # fmt: skip
    return {
        "percentile": percentile,
        "latency_s": slo_s,
        "latency_at_percentile_s": at_s,
        "share_within": share,
        "met": None if np.isnan(at_s) else bool(at_s <= slo_s + 1e-12),
    }


def _always_on_text(request: PlanServerlessRequest, plan: ServerlessPlan) -> str:
    """The ``always-on`` assumption line: how the always-on candidate was sized."""
    if plan.always_on_sizing == "none":
        return (
            "none: a language model's always-on deployment is sized as `gpucast plan serve` "
            "sizes it, which found none here (the warning says why)"
        )
    if plan.always_on_sizing == "peak minute":
        return (
            "sized for the peak minute's GPU-seconds"
            + (" after the warm-up" if plan.warmup_s > 0 else "")
            + f" at {request.max_utilisation:.0%} utilisation and for every model resident "
            "(memory packed perfectly; an instance of several GPUs takes all of them); no "
            "queueing delay below that utilisation; no cold starts"
        )
    percentile, slo_s = plan.slo_percentile, plan.slo_s
    return (
        "each function's model served with continuous batching on replicas of its own "
        "(vLLM, colocated), sized as `gpucast plan serve --model MODEL --trace FILE --gpu "
        f"{request.gpu or DEFAULT_GPU} --slo-ttft-ms {slo_s * 1e3:g} --slo-percentile "
        f"{percentile:g} "
        "--no-disaggregation` sizes it (the fewest replicas whose first tokens come within "
        "the SLO, on the trace's busiest hour), then replicas added until the end-to-end "
        f"p{percentile:g} of the requests"
        + (" after the warm-up" if plan.warmup_s > 0 else "")
        + " (token-level simulator, as `simulate serve`; what the serverless candidates are "
        "judged on) is within it; --max-utilisation not used; priced at the serverless "
        "price per GPU-hour; no cold starts"
    )
