"""The checks of a ``plan serve`` / ``simulate serve`` request, run as it is built (the
requests' ``__post_init__``): one clear error naming the flag, its range and a fix for each
bad value -- :func:`check_plan_serve_request` (and :func:`check_plan_mix` for ``--mix``) and
:func:`check_simulate_serve_request`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpucast.app._serve_options import (
    MAX_BATCH_SIZE,
    MAX_DELAY_MS,
    MAX_DURATION_S,
    MAX_INSTANCES,
    MAX_SERVERS,
    REQUEST_BYTES,
    _check_at_least,
    _check_at_most,
    _check_engine,
    _check_host_capacity,
    _check_host_ms,
    _check_positive,
    _check_precision,
    _model_items,
    check_one_slo,
    parse_calibration_point,
    parse_slo,
)
from gpucast.domain.embeddings import check_cache_policy
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_price, check_seed, check_simulated_requests
from gpucast.domain.options import split_list
from gpucast.domain.serving_plan import PLACEMENTS, check_model_rate

if TYPE_CHECKING:
    from gpucast.app.serve import PlanServeRequest, SimulateServeRequest


def check_plan_serve_request(request: PlanServeRequest) -> None:
    """Check a :class:`gpucast.app.serve.PlanServeRequest` (``--mix``: :func:`check_plan_mix`)."""
    if isinstance(request.models, str):  # one model given as text: "resnet50:150"
        object.__setattr__(request, "models", _model_items(request.models))
    if isinstance(request.mix, str):
        object.__setattr__(request, "mix", tuple(split_list(request.mix)))
    check_price(request.price)
    if request.mix:
        check_plan_mix(request)
        return
    if not request.models:
        raise InvalidSpecError("model", "is required", fix="e.g. --model resnet50:150")
    from gpucast.app.llm_serve import check_one_language_model
    from gpucast.inputs.serving import check_arrival_kind

    check_one_language_model(request.VERB, {"models": request.models})

    check_arrival_kind(request.arrivals)
    if request.trace is not None and request.arrivals not in ("poisson", f"trace:{request.trace}"):
        raise InvalidSpecError(
            "trace", "and --arrivals name two different arrival processes",
            fix="give one: --trace FILE or --arrivals trace:FILE",
        )  # fmt: skip
    if request.trace_path is not None and len(request.models) != 1:
        raise InvalidSpecError(
            "trace", "applies to exactly one --model", fix="give one --model with --trace"
        )
    for name, rate in request.model_rates:
        if rate is not None or request.trace_path is None:  # a trace gives the rate
            check_model_rate(name, rate)
    if request.slo is None and request.slo_ms is None:
        raise InvalidSpecError("slo", "is required", fix="e.g. --slo 'p99<50ms' or --slo-ms 50")
    check_one_slo(request.slo, request.slo_ms, request.slo_percentile)
    percentile, slo_s = request.slo_target
    if not (math.isfinite(slo_s) and slo_s > 0):
        raise InvalidSpecError("slo", "must be > 0 ms", got=slo_s * 1e3, fix="e.g. --slo-ms 50")
    if not 0 < percentile <= 100:
        raise InvalidSpecError(
            "slo-percentile", "must be in (0, 100]", got=percentile, fix="e.g. 99"
        )
    _check_engine(request.engine)
    _check_precision(request.precision)
    if request.precision is not None:
        from gpucast.catalog.serving_engines import serving_engine

        serving_engine(request.engine).check_precision(request.precision)
    for b in request.max_batch_sizes:
        _check_at_least("max-batch-sizes", b, 1)
        _check_at_most("max-batch-sizes", b, MAX_BATCH_SIZE)
    if not request.max_batch_sizes:
        raise InvalidSpecError("max-batch-sizes", "is empty", fix="e.g. 1,4,8,32")
    if not request.max_delays_ms or any(
        not (math.isfinite(d) and d >= 0) for d in request.max_delays_ms
    ):
        raise InvalidSpecError(
            "max-delays-ms", "must be ms >= 0", got=list(request.max_delays_ms),
            fix="e.g. --max-delays-ms 0,2,5,10",
        )  # fmt: skip
    for d in request.max_delays_ms:
        _check_at_most("max-delays-ms", d, MAX_DELAY_MS, "ms (a minute)")
    for i in request.instances:
        _check_at_least("instances", i, 1)
    if not request.instances:
        raise InvalidSpecError("instances", "is empty", fix="e.g. --instances 1,2")
    _check_at_least("max-servers", request.max_servers, 1)
    _check_positive("budget-usd-per-hour", request.budget_usd_per_hour, "US$/h", "e.g. 5")
    bad = [p for p in request.placements if p not in PLACEMENTS]
    if bad or not request.placements:
        raise InvalidSpecError(
            "placement", f"must be among {', '.join(PLACEMENTS)}", got=list(request.placements)
        )
    _check_positive("duration-s", request.duration_s, "seconds", "e.g. --duration-s 60")
    _check_at_most("duration-s", request.duration_s, MAX_DURATION_S, "s (30 days)")
    _check_at_most("max-servers", request.max_servers, MAX_SERVERS)
    _check_host_capacity(request.host_capacity_rps)
    _check_host_ms(request.host_ms)
    _check_at_most("host-ms", request.host_ms, 1e6, "ms")
    _check_at_least("host-concurrency", request.host_concurrency, 1)
    check_simulated_requests(
        "duration-s",
        sum(r for _, r in request.model_rates if r is not None) or None,
        request.run_s,
        None,  # plan serve has no --allow-large
        bytes_per_request=REQUEST_BYTES,
        fix="lower the rates in --model (NAME:RATE) or --rate, or --duration-s",
    )
    if not (math.isfinite(request.saturation_s) and request.saturation_s >= 0):
        raise InvalidSpecError(
            "saturation-s", "must be >= 0 seconds", got=request.saturation_s,
            fix="e.g. --saturation-s 30, or 0 to skip the search",
        )  # fmt: skip
    _check_positive("rate", request.rate, "requests per second", "e.g. --rate 150")
    from gpucast.inputs.serving import parse_latency_table_item

    for item in request.latency_tables:
        parse_latency_table_item(item)
    check_seed(request.seed)


def check_plan_mix(request: PlanServeRequest) -> None:
    """``--mix`` plans MIG layouts: its own models and SLOs, one GPU, no trace."""
    if request.models or request.slo is not None or request.slo_ms is not None:
        raise InvalidSpecError(
            "mix", "gives the models and their SLOs: drop --model / --slo / --slo-ms",
            fix="e.g. --mix resnet50:400:50,bert-base:120:100",
        )  # fmt: skip
    request.mix_models  # noqa: B018 -- parses every item, one clear error for a bad one
    if len(request.gpus) > 1 or request.migs or request.no_mig:
        raise InvalidSpecError(
            "mix", "plans the MIG layouts of one GPU type: give at most one --gpu and no "
            "--mig / --no-mig", fix="e.g. --mix ... --gpu A100-40GB",
        )  # fmt: skip
    if request.trace is not None or request.arrivals.startswith("trace:"):
        raise InvalidSpecError(
            "mix", "takes generated arrivals (poisson, constant, bursty), not a trace",
            fix="drop --trace, or plan one model with --model",
        )  # fmt: skip
    from gpucast.inputs.serving import check_arrival_kind

    check_arrival_kind(request.arrivals)
    if request.slo_percentile is not None and not 0 < request.slo_percentile <= 100:
        raise InvalidSpecError(
            "slo-percentile", "must be in (0, 100]", got=request.slo_percentile, fix="e.g. 99"
        )
    _check_engine(request.engine)
    _check_precision(request.precision)
    for b in request.max_batch_sizes:
        _check_at_least("max-batch-sizes", b, 1)
        _check_at_most("max-batch-sizes", b, MAX_BATCH_SIZE)
    _check_at_least("max-servers", request.max_servers, 1)
    _check_at_most("max-servers", request.max_servers, MAX_SERVERS)
    _check_positive("duration-s", request.duration_s, "seconds", "e.g. --duration-s 60")
    _check_at_most("duration-s", request.duration_s, MAX_DURATION_S, "s (30 days)")
    check_simulated_requests(
        "duration-s",
        sum(m[1] for m in request.mix_models),
        request.run_s,
        None,  # plan serve has no --allow-large
        bytes_per_request=REQUEST_BYTES,
        fix="lower the rates in --mix (NAME:RATE:SLO_MS) or --duration-s",
    )
    from gpucast.inputs.serving import parse_latency_table_item

    for item in request.latency_tables:
        parse_latency_table_item(item)
    check_seed(request.seed)


def check_simulate_serve_request(request: SimulateServeRequest) -> None:
    """Check a :class:`gpucast.app.serve.SimulateServeRequest`."""
    from gpucast.app._llm_load import check_think_needs_clients
    from gpucast.inputs.serving import check_arrival_kind

    if request.cache_fraction is not None and not (
        math.isfinite(request.cache_fraction) and 0.0 < request.cache_fraction <= 1.0
    ):
        raise InvalidSpecError(
            "cache-fraction", "must be in (0, 1]", got=request.cache_fraction,
            fix="e.g. --cache-fraction 0.1, or leave it out (every row in HBM)",
        )  # fmt: skip
    if not (math.isfinite(request.dram_fraction) and 0.0 <= request.dram_fraction <= 1.0):
        raise InvalidSpecError(
            "dram-fraction", "must be in [0, 1]", got=request.dram_fraction,
            fix="e.g. --dram-fraction 0.5 (the rest on NVMe), or leave it out (1: all)",
        )  # fmt: skip
    check_cache_policy(request.cache_policy, "cache-policy")

    if not request.model:
        raise InvalidSpecError("model", "must not be empty", fix="e.g. --model resnet50")
    _check_positive("rate", request.rate, "requests per second", "e.g. --rate 150")
    check_arrival_kind(request.arrivals)
    is_trace = request.arrivals.startswith("trace:")
    if request.clients is not None:
        _check_at_least("clients", request.clients, 1)
        if request.rate is not None or request.arrivals != "poisson":
            raise InvalidSpecError(
                "clients",
                "is a closed loop: its clients set the rate, not --rate or --arrivals",
                fix="drop --rate/--arrivals, or drop --clients for open-loop traffic",
            )
    elif request.rate is None and not is_trace:
        raise InvalidSpecError(
            "rate", "is required (or --clients for a closed loop, or a trace)",
            fix="e.g. --rate 150",
        )  # fmt: skip
    if not (math.isfinite(request.think_ms) and request.think_ms >= 0):
        raise InvalidSpecError(
            "think-ms", "must be >= 0 ms", got=request.think_ms, fix="e.g. --think-ms 10"
        )
    check_think_needs_clients(request.think_ms, request.clients)
    _check_at_least("max-batch", request.max_batch, 1)
    if not (math.isfinite(request.max_delay_ms) and request.max_delay_ms >= 0):
        raise InvalidSpecError(
            "max-delay-ms", "must be >= 0", got=request.max_delay_ms, fix="e.g. --max-delay-ms 10"
        )
    for b in request.preferred:
        if isinstance(b, bool) or not 1 <= b <= request.max_batch:
            fits = sorted({max(1, request.max_batch // 2), request.max_batch})  # a fix that holds
            raise InvalidSpecError(
                "preferred", f"must be between 1 and --max-batch {request.max_batch}",
                got=list(request.preferred),
                fix=f"e.g. --preferred {','.join(map(str, fits))}, or raise --max-batch",
            )  # fmt: skip
    if request.max_queue is not None:
        _check_at_least("max-queue", request.max_queue, 1)
    _check_positive("queue-timeout-ms", request.queue_timeout_ms, "ms",
                    "e.g. --queue-timeout-ms 100")  # fmt: skip
    _check_at_least("instances", request.instances, 1)
    _check_at_least("servers", request.servers, 1)
    _check_positive("duration-s", request.duration_s, "", "e.g. --duration-s 60")
    _check_positive("slo-ms", request.slo_ms, "", "e.g. --slo-ms 100")
    check_one_slo(request.slo, request.slo_ms, None)
    if request.slo is not None:
        parse_slo(request.slo)
    _check_engine(request.engine)
    _check_precision(request.precision)
    _check_positive("network-gbps", request.network_gbps, "Gbit/s", "e.g. --network-gbps 10")
    _check_positive("pcie-gbps", request.pcie_gbps, "GB/s", "e.g. --pcie-gbps 16")
    _check_positive("input-kb", request.input_kb, "KB", "e.g. --input-kb 150")
    check_price(request.price)
    check_seed(request.seed)
    _check_at_most("max-batch", request.max_batch, MAX_BATCH_SIZE)
    _check_at_most("max-delay-ms", request.max_delay_ms, MAX_DELAY_MS, "ms (a minute)")
    _check_at_most("servers", request.servers, MAX_SERVERS)
    _check_at_most("instances", request.instances, MAX_INSTANCES)
    _check_at_most("duration-s", request.duration_s, MAX_DURATION_S, "s (30 days)")
    _check_at_most("network-gbps", request.network_gbps, 1e5, "Gbit/s")
    _check_at_most("pcie-gbps", request.pcie_gbps, 1e4, "GB/s")
    _check_at_most("input-kb", request.input_kb, 1e7, "KB")
    _check_at_most("host-ms", request.host_ms, 1e6, "ms")
    _check_at_most("calibrate-p50-ms", request.calibrate_p50_ms, 1e6, "ms")
    check_simulated_requests(
        "rate", request.rate, request.run_s, request.allow_large, bytes_per_request=REQUEST_BYTES
    )
    _check_host_capacity(request.host_capacity_rps)
    _check_host_ms(request.host_ms)
    _check_at_least("host-concurrency", request.host_concurrency, 1)
    points = [parse_calibration_point(p) for p in request.calibrate_at]
    if request.calibrate_p50_ms is not None:
        _check_positive("calibrate-p50-ms", request.calibrate_p50_ms, "ms", "e.g. 33.9")
    if points and request.calibrate_p50_ms is None and len(points) < 2:
        raise InvalidSpecError(
            "calibrate-at",
            "needs a second load: --calibrate-p50-ms at this rate, or another --calibrate-at",
            fix="e.g. --calibrate-p50-ms 33.9 --calibrate-at 203=49.6",
        )
    if (request.calibrate_p50_ms is not None or points) and request.host_ms is not None:
        raise InvalidSpecError(
            "host-ms", "cannot be combined with a calibration (it is what is fitted)",
            fix="give the host time, or the measured median(s) to fit it from, not both",
        )  # fmt: skip
    if (request.calibrate_p50_ms is not None or points) and request.clients is not None:
        raise InvalidSpecError(
            "calibrate-p50-ms",
            "needs open-loop traffic at a known rate",
            fix="calibrate with --rate, then give the clients --host-ms and --host-capacity-rps",
        )
    if request.find_saturation and request.clients is not None:
        raise InvalidSpecError(
            "find-saturation", "offers ever higher open-loop rates; it has no closed loop",
            fix="drop --clients (the search uses --arrivals, default Poisson)",
        )  # fmt: skip
    check_seed(request.seed)
    _check_positive("deadline-ms", request.deadline_ms, "ms", "e.g. --deadline-ms 50")
    _check_at_most("deadline-ms", request.deadline_ms, 86_400_000.0, "ms (1 day)")
    if request.scheduler not in ("fifo", "edf", "priority"):
        raise InvalidSpecError(
            "scheduler", "must be fifo, edf or priority", got=request.scheduler, fix="e.g. edf"
        )
    classes = request.classes
    if request.scheduler != "fifo" and not classes and request.deadline_ms is None:
        raise InvalidSpecError(  # it was ignored without a word (QA 38 I #17)
            "scheduler", "orders requests by their deadlines or classes, and none is given",
            got=request.scheduler,
            fix="add --deadline-ms D or --request-class NAME:SHARE:DEADLINE_MS:PRIORITY,..., "
            "or drop --scheduler",
        )  # fmt: skip
    if classes and request.deadline_ms is not None:
        raise InvalidSpecError(
            "deadline-ms", "is per class with --request-class",
            fix="give each class its deadline (NAME:SHARE:DEADLINE_MS)",
        )  # fmt: skip
    if (classes or request.deadline_ms is not None) and (
        request.clients is not None
        or request.find_saturation
        or request.calibrate_p50_ms is not None
        or points
    ):
        raise InvalidSpecError(
            "request-class" if classes else "deadline-ms",
            "works with open-loop arrivals only (no --clients, --find-saturation or calibration)",
            fix="drop those options",
        )
