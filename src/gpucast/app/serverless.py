"""``gpucast.simulate_serverless``: GPU functions under a keep-alive policy (issue #19).

Invocations come from a folder of the Azure Functions 2019 trace (``--trace DIR``, one day)
or are generated with the published characteristics (``--synthetic N``); each function serves
one of ``--models`` (assigned in turn: function i serves model i mod len(models)) on a
``--gpu``: the model's inference memory is held while the instance is loaded, a cold start
costs the model's predicted cold start (container, CUDA context, weights through
``--storage``/``--network-gbps``/PCIe, first call), and an invocation runs one forward pass of
the model (``--durations trace``: the trace's average duration, at least that). The keep-alive
``--policy`` (``fixed:10m``, ``histogram``, ``prewarm``) decides when instances are loaded
(:func:`gpucast.simulate.serverless.simulate_keep_alive`, vectorised over per-minute counts).
On an Azure Functions 2019 trace the unit of keep-alive is the application by default
(``--unit app``: an app's functions share one instance loading each distinct model once, and
the trace's app memory is counted while it idles; :mod:`gpucast.inputs.serverless_apps`);
``--unit function`` gives each function its own instance.

A measured cold start replaces the predicted one, phase by phase: ``--coldstart-run ID`` (a
stored ``gpucast measure coldstart`` run; one per model, comma-separated) or
``--coldstart-run latest`` (:mod:`gpucast.inputs.coldstart`); ``--container-s`` and
``--cuda-context-s`` set those phases outright, for every model.

Reported: cold-start rate, p50/p99 latency, GPU-hours billed (``--billing``, as ``plan
serverless`` bills: ``instance``, loaded instances with their keep-alive, by default, or
``execution``, execution plus cold starts), warm-but-idle memory-time, and costs at the
GPU's price: what the billed hours cost, and what the memory held warm while idle costs (its
share of the GPU's memory x the GPU's price).

The requests and verbs are here, the other public names re-exported (``__all__``); the work
lives in private parts: the shared request fields and their checks (``_serverless_options``),
the result types (``_serverless_results``), the load read from the request and the checks that
need it (``_serverless_load``) and the assumptions, validations and SLO standing reported
(``_serverless_notes``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app._serverless_load import _check_pool, _check_servable_share, _check_warmup, _load
from gpucast.app._serverless_notes import (
    _always_on_text,
    _coldstart_measured,
    _coldstart_validation,
    _keepalive_validation,
    _load_assumptions,
    _slo_standing,
    _warmup_text,
)
from gpucast.app._serverless_options import (
    DEFAULT_GPU,
    MAX_MINUTES,
    MAX_SYNTHETIC,
    SYNTHETIC_BYTES_PER_FUNCTION_MINUTE,
    SYNTHETIC_MINUTES,
    ServerlessLoad,
)
from gpucast.app._serverless_results import (
    PlanServerlessResult,
    SimulateServerlessResult,
    _functions,
    served_by,
)
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.gpu_memory import usable_gib
from gpucast.domain.limits import check_pool_gpus
from gpucast.domain.options import default_mark, defaults_used, documented, lower_text, option
from gpucast.domain.units import format_slo_latency

if TYPE_CHECKING:
    from gpucast.plan.serverless import AlwaysOnSizing

__all__ = [
    "DEFAULT_GPU",
    "DEFAULT_PLAN_POLICIES",
    "DEFAULT_SLO",
    "MAX_MINUTES",
    "MAX_SYNTHETIC",
    "SYNTHETIC_BYTES_PER_FUNCTION_MINUTE",
    "SYNTHETIC_MINUTES",
    "PlanServerlessRequest",
    "PlanServerlessResult",
    "ServerlessLoad",
    "SimulateServerlessRequest",
    "SimulateServerlessResult",
    "plan_serverless",
    "served_by",
    "simulate_serverless",
]
#: the SLO of ``plan serverless`` without --slo
DEFAULT_SLO = "p99<2s"


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServerlessRequest(ServerlessLoad):
    """A serverless GPU workload to simulate (``gpucast simulate serverless``)."""

    VERB: ClassVar[str] = "simulate serverless"

    policy: str = option(
        "fixed:10m",
        help="Keep-alive: fixed:DURATION (e.g. fixed:10m; counted in whole minutes, the "
        "trace's bins: fixed:30s runs as 1 min), histogram (hybrid histogram, Shahrad et al. "
        "ATC'20) or prewarm (from predicted arrivals).",
        example="histogram",
    )
    pool_gpus: int | None = option(
        None,
        help="Also simulate the functions multiplexed on a pool of N such GPUs: models cached "
        "in GPU memory (LRU), all kept in host memory and swapped in over PCIe on a miss "
        "(Torpor-style).",
        example="4",
    )
    slo: str | None = option(
        None,
        parse=lower_text,
        help="Latency SLO of an invocation, cold starts included, as plan serverless's: "
        "pNN<LATENCY (ms or s); prints the share of invocations within LATENCY and whether "
        "the pNN latency is (an LLM request beyond the context window: a miss).",
        example="p99<500ms",
    )

    def __post_init__(self) -> None:
        ServerlessLoad.__post_init__(self)
        check_pool_gpus(self.pool_gpus)
        from gpucast.app.serve import parse_slo
        from gpucast.domain.serverless import parse_policy

        parse_policy(self.policy)
        if self.slo is not None:
            parse_slo(self.slo)


def simulate_serverless(
    request: SimulateServerlessRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    config: Path | str | None = None,
    **options: Any,
) -> SimulateServerlessResult:
    """Simulate GPU functions under a keep-alive policy (module docstring). ``db``: the
    store ``--coldstart-run`` reads (default: ``$GPUCAST_DB``)."""
    from gpucast.domain.serverless import parse_policy
    from gpucast.simulate.serverless import simulate_keep_alive

    request = resolve(SimulateServerlessRequest, request, options, config)
    policy = parse_policy(request.policy)
    load = _load(request, db)
    _check_warmup(request, load)
    trace, funcs, gpu, exec_s = load.trace, load.functions, load.gpu, load.exec_s
    price, price_source = load.price, load.price_source
    result = simulate_keep_alive(
        trace.counts,
        policy=policy,
        exec_s=exec_s,
        cold_s=load.cold_s,
        memory_gib=load.memory_gib,
        functions=trace.names,
        exec_spread=load.exec_spread,
        warmup_s=request.warmup_s,
        instance_gpus=load.gpus,
        rejected=load.rejected,
    )
    pool = None
    if request.pool_gpus is not None:
        from gpucast.simulate.serverless import simulate_gpu_pool

        _check_pool(request.pool_gpus, load)
        pool = simulate_gpu_pool(
            trace.counts,
            gpus=request.pool_gpus,
            capacity_gib=request.pool_gpus * usable_gib(gpu.memory_gib),
            memory_gib=load.memory_gib,
            swap_s=load.swap_s,
            cold_s=load.cold_s,
            exec_s=exec_s,
            exec_spread=load.exec_spread,
            warmup_s=request.warmup_s,
            instance_gpus=load.gpus,
            rejected=load.rejected,
        )
    assumptions = {
        **_load_assumptions(request, load),
        "warm-up": _warmup_text(result.warmup_s, result.horizon_s),
        "concurrency": "invocations of one minute are billed in full; scale-out instances "
        "beyond the first are not kept warm",
        "policy": policy.describe(),
    }
    if pool is not None:
        assumptions["pool"] = (
            f"{request.pool_gpus} x {gpu.name} always on, their memory one cache of every "
            "function's model (each function its own weights), swapped in over PCIe at "
            f"{load.pcie_gbs:g} GB/s; each {pool.bin_s:g} s bin's execution GPU-seconds "
            f"checked against {request.pool_gpus} x {pool.bin_s:g} s (any call on any GPU); "
            "latency without queueing, not given when a bin is overloaded; billed the pool's "
            "GPU-hours or the execution GPU-hours, the larger"
        )
    return SimulateServerlessResult(
        result=result,
        functions=funcs,
        gpu=gpu.name,
        gpu_memory_gib=gpu.memory_gib,
        price_usd_per_hour=price,
        price_source=price_source,
        trace_source=trace.source,
        arrival_process=trace.arrival_process,
        warnings=load.warnings + (pool.warnings if pool is not None else ()),
        assumptions=assumptions,
        pool=pool,
        pool_gpus=request.pool_gpus,
        billing=request.billing,
        unit=load.unit,
        apps=load.apps,
        host_memory_mb=load.host_memory_mb,
        defaults=defaults_used(request, ("gpu", "models")),
        slo=None if request.slo is None else _slo_standing(request.slo, result, load),
        validation=_keepalive_validation(load),
        cold_start_validation=_coldstart_validation(load),
        cold_start_measured=_coldstart_measured(load),
    )


# -- plan serverless: serverless vs always-on for the same load ------------------------------

#: keep-alive policies `plan serverless` compares by default
DEFAULT_PLAN_POLICIES: tuple[str, ...] = ("fixed:10m", "fixed:1h", "histogram", "prewarm")


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanServerlessRequest(ServerlessLoad):
    """Serverless vs always-on deployments of one load (``gpucast plan serverless``)."""

    VERB: ClassVar[str] = "plan serverless"

    slo: str | None = option(
        None,
        parse=lower_text,
        help="Latency SLO of an invocation, cold starts included: pNN<LATENCY (ms or s; "
        f"default {DEFAULT_SLO}).",
        example="p99<500ms",
    )
    policies: tuple[str, ...] = option(
        DEFAULT_PLAN_POLICIES,
        help="Keep-alive policies of the serverless candidates (fixed:DURATION in whole "
        "minutes, histogram, prewarm); one given twice is one candidate.",
        example="fixed:10m,histogram",
    )
    max_utilisation: float = option(
        0.7,
        help="Always-on GPUs are sized for the peak minute at this utilisation.",
        example="0.7",
    )
    # invocations stays the default: it is the meaning the README and `simulate serverless`
    # give p50/p99 (one percentile over every call), and a new default would change the
    # plans users already have; `functions` is the scope that sees rare functions' cold starts
    slo_scope: str = option(
        "invocations",
        help="What --slo is judged on: invocations (the percentile over every call of every "
        "function; busy functions dominate it) or functions (each function's own percentile "
        "over its own calls, met by at least --slo-functions of the invoked functions: the "
        "cold starts of rarely called functions, which the keep-alive policy decides).",
        example="functions",
    )
    slo_functions: float = option(
        0.95,
        help="With --slo-scope functions: the share of invoked functions (0-1] that must meet "
        "--slo on their own calls.",
        example="0.99",
    )
    budget_usd: float | None = option(
        None,
        help="Cost cap, US$ over the load's counted minutes (the US$ column: the trace or "
        "--minutes after --warmup): the choice is the cheapest meeting --slo within it.",
        example="50",
    )

    def __post_init__(self) -> None:
        ServerlessLoad.__post_init__(self)
        from gpucast.app.serve import parse_slo
        from gpucast.domain.serverless import parse_policy
        from gpucast.plan.serverless import SLO_SCOPES

        parse_slo(self.slo or DEFAULT_SLO)
        if self.slo_scope not in SLO_SCOPES:
            raise InvalidSpecError(
                "slo-scope",
                f"must be one of {', '.join(SLO_SCOPES)}",
                got=self.slo_scope,
                fix="e.g. --slo-scope functions",
            )
        if isinstance(self.slo_functions, bool) or not (
            math.isfinite(self.slo_functions) and 0 < self.slo_functions <= 1
        ):
            raise InvalidSpecError(
                "slo-functions",
                "must be a share of functions in (0, 1]",
                got=self.slo_functions,
                fix="e.g. --slo-functions 0.95",
            )
        if not self.policies:
            raise InvalidSpecError(
                "policies", "needs at least one policy", fix="e.g. --policies histogram"
            )
        for text in self.policies:
            parse_policy(text, flag="policies")
        if not (math.isfinite(self.max_utilisation) and 0 < self.max_utilisation <= 1):
            raise InvalidSpecError("max-utilisation", "must be in (0, 1]", got=self.max_utilisation)
        if self.budget_usd is not None and not (
            math.isfinite(self.budget_usd) and self.budget_usd > 0
        ):
            raise InvalidSpecError(
                "budget-usd", "must be > 0 US$", got=self.budget_usd, fix="e.g. --budget-usd 50"
            )


def plan_serverless(
    request: PlanServerlessRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    config: Path | str | None = None,
    **options: Any,
) -> PlanServerlessResult:
    """Serverless (per keep-alive policy) vs always-on deployments of the same load: the
    cheapest meeting the latency SLO, and why (:mod:`gpucast.plan.serverless`). ``db``: the
    store ``--coldstart-run`` reads (default: ``$GPUCAST_DB``)."""
    from gpucast.app.serve import parse_slo
    from gpucast.domain.serverless import parse_policy
    from gpucast.plan.serverless import plan_serverless as plan

    request = resolve(PlanServerlessRequest, request, options, config)
    percentile, slo_s = parse_slo(request.slo or DEFAULT_SLO)
    load = _load(request, db)
    _check_warmup(request, load)
    if not load.trace.counts.any():  # every candidate would 'miss' at a latency of nan
        raise InvalidInputError(
            f"{'synthetic' if request.trace is None else 'trace'}: the load has no invocations: "
            "nothing to plan",
            fix="raise --synthetic or --minutes (45% of generated functions are invoked at most "
            "hourly)"
            if request.trace is None
            else "give a trace (or --day) with invocations",
        )
    if request.slo_scope == "invocations":
        _check_servable_share(load, percentile, request.warmup_s)
    always_on: AlwaysOnSizing | None = None
    always_on_warnings: tuple[str, ...] = ()
    if load.trace.tokens:  # language models batch continuously when always on
        from gpucast.app._serverless_llm import llm_always_on

        always_on, always_on_warnings = llm_always_on(
            models=tuple(f.model for f in load.functions), names=load.trace.names,
            paths=load.trace.paths, offsets_s=load.trace.offsets_s, gpu=load.gpu.name,
            percentile=percentile, slo_s=slo_s, warmup_s=request.warmup_s, price=load.price,
        )  # fmt: skip
    result = plan(
        load.trace.counts,
        exec_s=load.exec_s,
        cold_s=load.cold_s,
        memory_gib=load.memory_gib,
        swap_s=load.swap_s,
        gpu_memory_gib=usable_gib(load.gpu.memory_gib),  # the one rule: what it can fill
        price_usd_per_hour=load.price,
        # one candidate per distinct policy: fixed:5m,fixed:5m (or fixed:10m,fixed:600s) once
        policies=list(dict.fromkeys(parse_policy(p, flag="policies") for p in request.policies)),
        slo_percentile=percentile,
        slo_s=slo_s,
        billing=request.billing,
        max_utilisation=request.max_utilisation,
        gpu_name=load.gpu.name,
        exec_spread=load.exec_spread,
        slo_scope=request.slo_scope,
        slo_function_share=request.slo_functions,
        warmup_s=request.warmup_s,
        unit=load.unit,
        instance_gpus=load.gpus,
        always_on=always_on,
        always_on_by_peak=not load.trace.tokens,  # a request at a time: not how LLMs serve
        budget_usd=request.budget_usd,
        rejected=load.rejected,
    )
    limit = format_slo_latency(slo_s)
    slo = (
        f"p{percentile:g} of invocation latency (execution + cold start or swap) over every "
        f"call of every function <= {limit} (--slo-scope invocations; busy functions make "
        "most calls)"
        if request.slo_scope == "invocations"
        else f"each invoked function's own p{percentile:g} over its own calls (execution + "
        f"cold start or swap) <= {limit} for >= {request.slo_functions * 100:g}% of the "
        f"invoked {load.unit}s (--slo-scope functions)"
    ) + default_mark(request, "slo")
    assumptions = {
        **_load_assumptions(request, load),
        "warm-up": _warmup_text(result.warmup_s, result.horizon_s),
        "always-on": _always_on_text(request, result),
        "slo": slo,
    }
    units = int(load.trace.counts.shape[0])
    names = tuple(load.trace.names) if load.unit == "function" else None
    count = _functions(load.apps, units)
    return PlanServerlessResult(
        plan=result,
        gpu=load.gpu.name,
        functions=count,
        unit=load.unit,
        units=units,
        apps=load.apps,
        function_names=names or (),
        price_usd_per_hour=load.price,
        sources={
            "trace": load.trace.source,
            "price": load.price_source,
            **{
                f"model {f.model} ({served_by(k, len(load.functions), names, count)})": f.source
                for k, f in enumerate(load.functions)
            },
        },
        assumptions=assumptions,
        validation=_keepalive_validation(load),
        cold_start_validation=_coldstart_validation(load),
        cold_start_measured=_coldstart_measured(load),
        arrival_process=load.trace.arrival_process,
        warnings=load.warnings + always_on_warnings,
        models=load.functions,
        defaults=defaults_used(request, ("gpu", "models", "slo")),
    )
