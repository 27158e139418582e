"""``plan serve`` for a language model: the traffic, the candidate GPU types x tensor-parallel
degrees x replicas (x disaggregation) searched by :func:`gpucast.plan.llm_serve.plan_llm_serving`
(in worker processes where the search is large), the requests no deployment can serve, and
the plan's assumptions, validated errors and warnings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucast.app._llm_serve_checks import _sampling_text
from gpucast.app._llm_serve_inputs import _given_lengths, _scheduler, llm_validation, precision_text
from gpucast.app._llm_serve_results import PlanLlmServeResult
from gpucast.app._llm_serve_warnings import _pick_warnings
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm_infer import (
    COMPUTE_MODE,
    check_kv_units,
    check_weight_units,
    kv_runs_on,
    weights_run_on,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpucast.app.llm_serve import PlanLlmServeRequest
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.llm import TransformerSpec
    from gpucast.domain.llm_infer import EngineProfile
    from gpucast.domain.llm_serving import LlmRequests


def _band_of(engine: EngineProfile) -> Callable[[GpuSpec], tuple[float, float]]:
    """GPU -> ``engine``'s 80% iteration-time factors (:func:`gpucast.app.infer.infer_band`)."""
    from gpucast.app.infer import infer_band

    return lambda gpu: infer_band(engine, gpu).latency


def _check_servable_share(requests: LlmRequests, spec: TransformerSpec, percentile: float) -> None:
    """Requests beyond the model's context window are rejected by every deployment of it:
    where they are more than ``100 - percentile``% of the load, none meets the SLOs, and one
    error says so before anything is simulated (:mod:`gpucast.app._context_window`; it
    searched every GPU up to the replica cap, 41 s for llama-2-7b on Azure's conversation
    trace, to print 'no deployment meets')."""
    from gpucast.app._context_window import beyond_context_error

    need = requests.input_tokens + requests.output_tokens
    error = beyond_context_error(
        beyond=int((need > spec.max_context).sum()), total=int(need.size),
        longest=int(need.max()), windows=((spec.name, spec.max_context),),
        percentile=percentile, percentile_flag="plan serve: --slo-percentile",
    )  # fmt: skip
    if error is not None:
        raise error


def planned_llm_serve(request: PlanLlmServeRequest) -> PlanLlmServeResult:
    """The plan of a checked request (:func:`gpucast.app.llm_serve.plan_llm_serve` dispatches
    here)."""
    from gpucast.app._workers import usable_cpus, worker_failures, worker_pool
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.llm_serving import parse_token_lengths
    from gpucast.domain.serving_plan import PLAN_TRACE_WINDOW_S
    from gpucast.inputs import llm_serving as inputs
    from gpucast.inputs.serving import PRICE_REPLACES_SPOT, unoffered_gpus
    from gpucast.plan.llm_serve import SAMPLED_REQUESTS, plan_llm_serving
    from gpucast.simulate.llm_serving import PERCENTILE_RULE

    name, model_rate = request.model_rate
    spec = llm_model(name)
    engine = inference_engine(request.framework)
    from gpucast.predict.llm_infer import resolve_precisions

    resolve_precisions(engine, request.precision, request.kv_precision)  # before the search
    arrivals = request.arrivals if request.trace is None else f"trace:{request.trace}"
    traffic = inputs.llm_traffic(
        arrivals, spec=spec, rate_rps=request.rate or model_rate, duration_s=request.duration_s,
        time_scale=request.time_scale,
        input_len=parse_token_lengths(request.input_len, "input-len"),
        output_len=parse_token_lengths(request.output_len, "output-len"), seed=request.seed,
        field="trace", window_s=PLAN_TRACE_WINDOW_S, given_lengths=_given_lengths(request),
    )  # fmt: skip
    try:
        offers = inputs.gpu_offers(
            gpus=request.gpus, providers=request.providers, regions=request.regions,
            spot=request.spot, priced=request.price is not None,
        )  # fmt: skip
    except InvalidSpecError:
        if not request.gpus:
            raise
        # every GPU asked for is without an offer: each with why, as when some others are
        why = unoffered_gpus(
            request.gpus, set(), model=name, providers=request.providers,
            regions=request.regions, spot=request.spot,
        )  # fmt: skip
        filters = request.providers or request.regions or request.spot
        fix = "give other --gpu types" + (" or relax the filters" if filters else "")
        raise InvalidSpecError("gpu", "; ".join(why), fix=fix) from None
    # an engine that does not run on a GPU type is not offered it (TensorRT-LLM on an MI300X)
    # --price and --kv-link-gbps replace every offer's (the offer still says how many GPUs
    # an instance holds and how they are linked)
    choices = [
        inputs.gpu_choice(
            gpu, offer, price if request.price is None else request.price,
            link_gbps=request.kv_link_gbps,
        )
        for gpu, offer, price in offers
        if engine.runs_on(gpu.vendor)
    ]  # fmt: skip
    if offers and not choices:  # every GPU asked for is one the engine does not run on
        gpu = offers[0][0]
        engine.check_runs_on(gpu.name, gpu.vendor)
    # weights at a precision some GPU types have no units for (fp8, bf16): those are skipped
    # (as plan train skips them), refused in predict infer's line where none is left
    no_units = sorted(
        {c.gpu.name for c in choices if not weights_run_on(c.gpu, request.precision, engine.name)}
    )
    if choices and len(no_units) == len({c.gpu.name for c in choices}):
        check_weight_units(request.precision, choices[0].gpu, load_catalog(), engine.name)
    choices = [c for c in choices if c.gpu.name not in no_units]
    # an fp8 KV cache the engine keeps on fp8 tensor cores only: the same, for the KV cache
    no_kv = sorted(
        {c.gpu.name for c in choices if not kv_runs_on(c.gpu, request.kv_precision, engine.name)}
    )
    if choices and len(no_kv) == len({c.gpu.name for c in choices}):
        check_kv_units(request.kv_precision, choices[0].gpu, engine, load_catalog())
    choices = [c for c in choices if c.gpu.name not in no_kv]
    mode = COMPUTE_MODE.get(request.precision or "", "")
    units = "fp8 tensor cores" if mode == "fp8" else f"{mode} units"
    # the GPUs asked for that are not tried, each with why (plan.infeasible lists them)
    skipped = unoffered_gpus(
        request.gpus, {gpu.name for gpu, _offer, _price in offers}, model=name,
        providers=request.providers, regions=request.regions, spot=request.spot,
    )  # fmt: skip
    skipped += [
        f"{gpu}: {engine.display_name} runs on {' / '.join(engine.vendors)} GPUs only"
        for gpu in sorted({g.name for g, _offer, _price in offers if not engine.runs_on(g.vendor)})
    ]
    skipped += [
        f"{gpu}: no {units} for --precision {request.precision} ({engine.display_name})"
        for gpu in no_units
    ]
    skipped += [
        f"{gpu}: no fp8 tensor cores for --kv-precision {request.kv_precision} "
        f"({engine.display_name})"
        for gpu in no_kv
    ]
    scheduler = _scheduler(request, engine.max_sequences)
    scheduler.check_budget(traffic.requests, spec.max_context)
    _check_servable_share(traffic.requests, spec, request.slo_percentile)
    jobs = request.jobs or usable_cpus()
    with worker_failures():
        plan = plan_llm_serving(
            traffic.requests, spec, engine, choices, scheduler=scheduler,
            slo_ttft_s=None if request.slo_ttft_ms is None else request.slo_ttft_ms / 1e3,
            slo_tpot_s=None if request.slo_tpot_ms is None else request.slo_tpot_ms / 1e3,
            percentile=request.slo_percentile, tps=request.tps,
            max_replicas=request.max_replicas, disaggregation=not request.no_disaggregation,
            budget_usd_per_hour=request.budget_usd_per_hour, precision=request.precision,
            kv_precision=request.kv_precision,
            band_of=_band_of(engine) if request.band else None, skipped=skipped,
            executor=worker_pool(jobs), workers=jobs,
        )  # fmt: skip
    best = plan.best
    validation = (
        llm_validation(
            engine.name, best.gpu, request.precision or engine.default_precision, best.tp
        )
        if best is not None
        else {}
    )
    picked = _pick_warnings(plan, traffic.requests, trace=arrivals.startswith("trace:"))
    return PlanLlmServeResult(
        request=request,
        plan=plan,
        assumptions={
            "arrivals": traffic.source,
            "lengths": traffic.lengths,
            "engine": engine.provenance(),
            "scheduler": scheduler.describe(spec.max_context),
            "precision": precision_text(engine, request, [c.gpu for c in choices]),
            "prices": (
                f"{request.price:.4g} US$/h per GPU (given), every GPU type"
                + (f"; {PRICE_REPLACES_SPOT}" if request.spot else "")
                + "".join(
                    f"; {o.gpu} on the catalog's {o.instance_type} node (no offer of it)"
                    for _g, o, _p in offers
                    if o.provider == inputs.OWN_NODE_PROVIDER
                )
                if request.price is not None
                else ("catalog spot" if request.spot else "catalog on-demand")
                + " per GPU, of the cheapest instance with at least tp GPUs of the type"
            ),
            "tensor parallelism": "within one instance (NVLink or PCIe between its GPUs)"
            + (
                f"; the pick's: {inputs.links_text(load_catalog().gpu(best.gpu), best.tp)}"
                if best is not None and best.tp > 1
                else ""
            ),
            "routing": "round robin in arrival order over the instances",
            **(
                {"sampling": _sampling_text(traffic.requests.count, SAMPLED_REQUESTS)}
                if traffic.requests.count > SAMPLED_REQUESTS
                else {}
            ),
            "kv transfer": "disaggregated rows: "
            + (
                "each GPU's share of its node's network"
                if request.kv_link_gbps is None
                else f"{request.kv_link_gbps:g} Gbit/s per GPU (given)"
            ),
            **({} if (tie := plan.tie_note()) is None else {"pick": tie}),
            **(
                {"percentiles": f"{PERCENTILE_RULE} (a row's dropped requests: inf)"}
                if any(c.dropped for c in plan.candidates)
                else {}
            ),
        },
        warnings=tuple(traffic.warnings) + tuple(picked),
        validation=validation,
    )
