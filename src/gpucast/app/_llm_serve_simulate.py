"""``simulate serve`` for a language model: the traffic (open loop, closed loop or a trace), the
deployment (replicas of ``tp`` GPUs, or prefill and decode pools), the token-level
simulation (:mod:`gpucast.simulate.llm_serving`), the optional saturation search and the
assumptions and warnings of the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucast.app import _llm_load as load
from gpucast.app._llm_serve_checks import LLM_REQUEST_BYTES
from gpucast.app._llm_serve_inputs import _given_lengths, _scheduler, llm_validation, precision_text
from gpucast.app._llm_serve_results import SimulateLlmServeResult
from gpucast.app._llm_serve_warnings import (
    _arrival_span_s,
    _overload_warning,
    short_run_warning,
    unsteady_warning,
)
from gpucast.domain.limits import check_simulated_requests

if TYPE_CHECKING:
    from gpucast.app.llm_serve import SimulateLlmServeRequest
    from gpucast.domain.llm_serving import IterationCost, LlmRequests
    from gpucast.simulate.llm_serving import LlmServingResult


def simulated_llm_serve(request: SimulateLlmServeRequest) -> SimulateLlmServeResult:
    """The simulated run of a checked request (:func:`gpucast.app.llm_serve.simulate_llm_serve`
    dispatches here)."""
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.llm_serving import Disaggregation, parse_token_lengths
    from gpucast.domain.provenance import Sourced
    from gpucast.domain.serving import ClosedLoop
    from gpucast.inputs import llm_serving as inputs
    from gpucast.simulate.llm_closed_loop import simulate_llm_closed_loop
    from gpucast.simulate.llm_serving import simulate_llm_serving

    spec = llm_model(request.model)
    engine = inference_engine(request.framework)
    lengths = (
        parse_token_lengths(request.input_len, "input-len"),
        parse_token_lengths(request.output_len, "output-len"),
    )

    def traffic_at(
        rate: float | None, span: float | None, arrivals: str = request.arrivals
    ) -> inputs.LlmTraffic:
        return inputs.llm_traffic(
            arrivals, spec=spec, rate_rps=rate, duration_s=span, time_scale=request.time_scale,
            input_len=lengths[0], output_len=lengths[1], seed=request.seed,
            given_lengths=_given_lengths(request),
        )  # fmt: skip

    duration = inputs.DEFAULT_DURATION_S if request.duration_s is None else request.duration_s
    sampled = request.clients is not None or (
        request.find_saturation
        and request.rate is None
        and not request.arrivals.startswith("trace:")
    )  # the run's requests follow from the deployment: first a sample of their lengths
    kind = "constant" if request.clients is not None else request.arrivals
    sample_rate = load.SAMPLE_REQUESTS / duration
    traffic = traffic_at(sample_rate, duration, kind) if sampled else traffic_at(
        request.rate, request.duration_s
    )  # fmt: skip
    scheduler = _scheduler(request, engine.max_sequences)

    def model_for(reqs: LlmRequests) -> inputs.ServingModel:
        fits = (reqs.input_tokens + reqs.output_tokens) <= spec.max_context
        longest = (
            (int(reqs.input_tokens[fits].max()), int(reqs.output_tokens[fits].max()))
            if fits.any()
            else (1, 1)
        )
        scheduler.check_budget(reqs, spec.max_context)
        return inputs.serving_model(
            request.model, request.gpu, request.framework, tp=request.tp,
            precision=request.precision, kv_precision=request.kv_precision,
            longest_tokens=longest, max_tokens=max(budget, scheduler.max_num_seqs),
            price_usd_per_gpu_hour=request.price, providers=request.providers,
            regions=request.regions, spot=request.spot,
        )  # fmt: skip

    budget = scheduler.budget(spec.max_context)
    model = model_for(traffic.requests)
    if request.clients is not None:  # the pool of the users' requests, sized by the capacity
        from gpucast.domain.limits import check_work
        from gpucast.simulate.llm_load import analytic_capacity_rps

        capacity = analytic_capacity_rps(
            traffic.requests, model.cost, scheduler.max_num_seqs, instances=request.replicas
        )
        size = load.pool_size(request.clients, duration, capacity)
        check_work(
            "clients", size, what="requests drawn for the users (the most the analytic "
            "capacity serves in --duration-s)", bytes_per_item=LLM_REQUEST_BYTES,
            allow_large=request.allow_large, fix="use fewer --clients or a shorter --duration-s",
        )  # fmt: skip
        traffic = traffic_at(size / duration, duration, "constant")
        model = model_for(traffic.requests)
    reqs = traffic.requests
    disagg = None
    link_source = ""
    if request.prefill_instances:
        link = (
            inputs.kv_link_gbps(model.offer)
            if request.kv_link_gbps is None
            else Sourced(request.kv_link_gbps, f"{request.kv_link_gbps:g} Gbit/s (given)")
        )
        disagg = Disaggregation(
            prefill_instances=request.prefill_instances,
            decode_instances=request.decode_instances,
            kv_link_gbps=link.value,
        )
        link_source = link.source
        instances = request.prefill_instances + request.decode_instances
        deployment = (
            f"{request.prefill_instances} prefill + {request.decode_instances} decode "
            f"instances of {model.tp} x {model.gpu.name} (Splitwise)"
        )
    else:
        instances = request.replicas
        deployment = (
            f"{request.replicas} replica{'s' if request.replicas > 1 else ''} of "
            f"{model.tp} x {model.gpu.name}"
        )
    price = model.price_per_gpu.value * model.tp * instances
    sources = {
        "arrivals": traffic.source,
        "lengths": traffic.lengths,
        "iteration times": model.cost.source,
        "price": model.price_per_gpu.source,
    }

    slo_ttft_s = None if request.slo_ttft_ms is None else request.slo_ttft_ms / 1e3
    slo_tpot_s = None if request.slo_tpot_ms is None else request.slo_tpot_ms / 1e3

    def serve(cost: IterationCost, served: LlmRequests, until_s: float | None) -> LlmServingResult:
        return simulate_llm_serving(
            served, cost, scheduler, max_context=spec.max_context,
            replicas=1 if disagg else request.replicas, disaggregation=disagg,
            price_usd_per_hour=price, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
            until_s=until_s, swap_gbps=inputs.swap_gbps(model.gpu), sources=sources,
        )  # fmt: skip

    saturation = None
    if request.find_saturation:
        saturation = load.search(
            lambda rate, span: serve(model.cost, traffic_at(rate, span).requests, span),
            reqs, model.cost, scheduler.max_num_seqs, replicas=request.replicas,
            prefill_instances=request.prefill_instances,
            decode_instances=request.decode_instances, duration_s=duration,
        )  # fmt: skip
        if sampled:  # no --rate: the run is at the rate found
            found = load.run_rate(saturation)
            check_simulated_requests(
                "duration-s", found, duration, request.allow_large,
                bytes_per_request=LLM_REQUEST_BYTES,
            )  # fmt: skip
            traffic = traffic_at(found, request.duration_s)
            reqs = traffic.requests
            sources.update(
                arrivals=f"{traffic.source}, the saturation rate found (--rate sets another)",
                lengths=traffic.lengths,
            )
    loop = (
        None
        if request.clients is None
        else ClosedLoop(clients=request.clients, think_s=request.think_ms / 1e3, think="constant")
    )
    pool_spent = False

    def run(cost: IterationCost) -> LlmServingResult:
        nonlocal pool_spent
        if loop is None:
            return serve(cost, reqs, request.horizon_s)
        out, pool_spent = simulate_llm_closed_loop(
            reqs, cost, scheduler, loop=loop, duration_s=duration, max_context=spec.max_context,
            replicas=request.replicas, price_usd_per_hour=price, slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s, until_s=request.horizon_s,
            swap_gbps=inputs.swap_gbps(model.gpu), sources=sources,
        )  # fmt: skip
        return out

    if loop is not None:
        sources["arrivals"] = (
            f"{loop.describe()}, sending until {duration:g} s (--duration-s); token counts "
            f"drawn for {reqs.count:,} requests, as many as the analytic capacity could serve "
            "at most"
        )
    result = run(model.cost)
    band = None
    if request.band:
        from gpucast.app.infer import infer_band

        low, high = infer_band(model.engine, model.gpu).latency
        band = (low, high, run(model.cost.scaled(low)), run(model.cost.scaled(high)))
    warnings = list(traffic.warnings)
    if pool_spent:
        warnings.append(
            f"the closed loop sent every one of the {reqs.count:,} requests drawn before "
            f"{duration:g} s: its users stopped early (the rates are over the time they sent)"
        )
    others = {k: v for k, v in result.drop_reasons.items() if "context" not in k}
    if others:  # those beyond the context window were named with the traffic
        reasons = ", ".join(f"{n} {why}" for why, n in others.items())
        warnings.append(
            f"{sum(others.values())} of {result.requests.count} requests dropped: {reasons}"
        )
    overload = _overload_warning(result)
    warnings += overload
    # a closed loop's own line says its run is too short (closed_loop_warning); an overloaded
    # run's latencies are its queue's, not a warm-up's
    if loop is None and not overload:
        p50 = result.to_dict()["latency_s"]["p50"]  # type: ignore[index]
        trace = request.arrivals.startswith("trace:")
        short = short_run_warning(
            _arrival_span_s(result.requests), p50 if result.finished.any() else None, "its",
            trace=trace,
        )  # fmt: skip
        warnings += short or unsteady_warning(result, trace=trace)
    closed_loop = (
        None if loop is None else load.closed_loop_dict(result, loop.clients, loop.think_s)
    )
    if closed_loop is not None:
        warnings += load.closed_loop_warning(closed_loop, duration, request.replicas)
    if (kv_link := result.kv_link) is not None and kv_link.bound:
        from gpucast.plan.llm_serve import link_text

        warnings.append(f"{link_text(kv_link)} (offered {result.offered_rps():.3g} req/s)")
    assumptions = {
        "gpus": f"{model.tp} x {model.gpu.name} per instance ({model.tp_source})",
        "engine": model.engine.provenance(),
        "scheduler": scheduler.describe(spec.max_context),
        "routing": "round robin in arrival order over the instances"
        if loop is None
        else "users dealt round robin to the replicas, each keeping its replica",
        "precision": precision_text(model.engine, request, [model.gpu]),
    }
    if model.tp > 1:
        assumptions["intra-node links"] = inputs.links_text(model.gpu, model.tp)
    if link_source:
        assumptions["kv transfer"] = link_source
    return SimulateLlmServeResult(
        request=request,
        serving=result,
        deployment=deployment,
        tp=model.tp,
        precision=model.precision,
        scheduler={
            "max_num_seqs": scheduler.max_num_seqs,
            "max_batched_tokens": budget,
            "block_size": scheduler.block_size,
            "chunked_prefill": scheduler.chunked_prefill,
            "preemption": scheduler.preemption,
            "kv_capacity_tokens": model.cost.kv_capacity_tokens,
            "description": scheduler.describe(spec.max_context),
        },
        iteration={
            "decode_step_s_at_batch_1": model.cost.iteration_s(1, 1, 1024, 1024),
            "kv_capacity_tokens": model.cost.kv_capacity_tokens,
            "source": model.cost.source,
        },
        assumptions=assumptions,
        warnings=tuple(warnings),
        validation=llm_validation(model.engine.name, model.gpu.name, model.precision, model.tp),
        band=band,
        arrival_process=sources["arrivals"],
        saturation=saturation,
        closed_loop=closed_loop,
    )
