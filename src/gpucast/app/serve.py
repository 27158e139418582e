"""``gpucast.plan_serve`` and ``gpucast.simulate_serve``: serving models on GPUs, MIG slices
and CPU servers.

* :func:`plan_serve` -- the cheapest deployments that serve some models within a latency SLO,
  and the cost vs tail-latency Pareto front (:func:`gpucast.plan.serve.plan_serving`);
* :func:`simulate_serve` -- latency percentiles, SLO attainment, throughput and cost of one
  deployment under a request stream (:func:`gpucast.simulate.serving.simulate_serving`).

Both take their inputs -- server options and prices (one MIG pricing rule), latency curves,
request overheads, arrivals, host capacity -- from :mod:`gpucast.inputs.serving`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import lower_list, option, split_list
from gpucast.domain.serving import BatchingPolicy, LatencyCurve
from gpucast.domain.serving_plan import PLACEMENTS, ServePlan, ServeRequest
from gpucast.domain.workload import PRECISIONS

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.app.llm_serve import PlanLlmServeResult, SimulateLlmServeResult
    from gpucast.simulate.serving import ServingResult

HOST_CAPACITY_HELP = (
    "Requests/s the host path of one server (CPU, NIC, serving framework, client) carries; "
    "each request waits median-latency x load/(capacity - load) more. Default: unlimited."
)


# -- shared parsers and checks ----------------------------------------------------------------
def _float_or_nan(flag: str, example: str) -> Any:
    """A number as typed (nan and inf pass, for ``__post_init__`` to reject with its range)."""

    def parse(value: Any) -> float:
        try:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        except (TypeError, ValueError):
            raise InvalidSpecError(
                flag, "must be a number", got=value, fix=f"e.g. --{flag} {example}"
            ) from None

    return parse


def _check_positive(flag: str, value: float | None, what: str, fix: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(flag, f"must be > 0 {what}".rstrip(), got=value, fix=fix)


def _check_at_least(flag: str, value: int, low: int) -> None:
    if isinstance(value, bool) or value < low:
        raise InvalidSpecError(flag, f"must be >= {low}", got=value, fix=f"e.g. --{flag} {low}")


def _check_precision(value: str) -> None:
    if value not in PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(PRECISIONS)}", got=value, fix="e.g. fp32"
        )


def _check_host_capacity(value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(
            "host-capacity-rps",
            "must be > 0 requests per second",
            got=value,
            fix="e.g. --host-capacity-rps 330, or leave it out for an unlimited host",
        )


def parse_slo(text: str) -> tuple[float, float]:
    """``p99<50ms``, ``p95<=0.1s``, ``50ms`` or ``50`` (ms) -> (percentile, seconds)."""
    match = re.fullmatch(
        r"\s*(?:p(?P<p>\d+(?:\.\d+)?)\s*<=?\s*)?(?P<v>\d+(?:\.\d+)?)\s*(?P<u>ms|s|us)?\s*",
        text,
    )
    if match is None:
        raise InvalidSpecError(
            "slo", "must look like p99<50ms (percentile < latency)", got=text, fix="--slo p99<50ms"
        )
    percentile = float(match["p"]) if match["p"] else 99.0
    value = float(match["v"])
    unit = match["u"] or "ms"
    seconds = value * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[unit]
    if not 0 < percentile <= 100:
        raise InvalidSpecError("slo percentile", "must be in (0, 100]", got=percentile)
    if seconds <= 0:
        raise InvalidSpecError("slo", "must be > 0", got=text, fix="--slo p99<50ms")
    return percentile, seconds


def parse_model_rate(text: str, default_rate: float | None) -> tuple[str, float | None]:
    """``resnet50:150`` -> ("resnet50", 150.0); ``resnet50`` -> ("resnet50", default_rate).

    A user model ``module:factory`` keeps its colon: only a numeric last part is a rate."""
    name, sep, tail = text.rpartition(":")
    if sep:
        try:
            return name, float(tail)
        except ValueError:
            pass
    return text, default_rate


def _model_items(value: Any) -> tuple[str, ...]:
    """``--model`` values: ``NAME[:RATE]`` text (comma-separated or repeated) or, in a config
    file, mappings ``{name: resnet50, rate: 150}``."""
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, dict):
            rate = item.get("rate")
            out.append(str(item.get("name")) + ("" if rate is None else f":{rate}"))
        else:
            out += [str(v) for v in split_list(item)]
    return tuple(out)


def _serve_default(name: str) -> Any:
    """The default of :class:`ServeRequest` field ``name`` (the planner's search grid)."""
    return ServeRequest.__dataclass_fields__[name].default


def _ms(seconds: tuple[float, ...]) -> tuple[float, ...]:
    """Seconds as milliseconds, whole ones as ints (so ``--help`` shows ``0,2,5,10``)."""
    ms = [round(s * 1e3, 9) for s in seconds]
    return tuple(int(m) if m.is_integer() else m for m in ms)


def _llm(options: dict[str, Any], config: Path | str | None) -> bool:
    """Whether ``--model`` names a language model (:mod:`gpucast.app.llm_serve` serves it)."""
    from gpucast.app.llm_serve import is_llm_serving

    return is_llm_serving(options, config)


def _llm_options(options: dict[str, Any]) -> dict[str, Any]:
    return {("model" if k == "models" else k): v for k, v in options.items()}


# -- plan serve -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanServeRequest:
    """Models to serve within a latency SLO, and where to look (``gpucast plan serve``)."""

    VERB: ClassVar[str] = "plan serve"

    models: tuple[str, ...] = option(
        (),
        flag="model",
        parse=_model_items,
        help="NAME:RATE (requests/s), e.g. resnet50:150.",
        example="resnet50:150",
    )
    rate: float | None = option(None, help="Rate for a --model without one.", example="150")
    trace: Path | None = option(
        None,
        help="Arrivals of the (single) --model: Azure LLM / Functions / CSV.",
        example="trace.csv",
    )
    slo: str | None = option(None, help="e.g. p99<50ms.", example="p99<50ms")
    slo_ms: float | None = option(None, help="SLO latency, ms.", example="50")
    slo_percentile: float | None = option(None, help="e.g. 99.", example="99")
    gpus: tuple[str, ...] = option((), flag="gpu", help="Only these GPU types.", example="T4")
    migs: tuple[str, ...] = option(
        (), flag="mig", help="GPU:PROFILE, e.g. A100-40GB:1g.5gb.", example="A100-40GB:1g.5gb"
    )
    no_mig: bool = option(False, help="Whole GPUs only.")
    no_cpu: bool = option(False, help="No CPU servers.")
    providers: tuple[str, ...] = option(
        (), flag="provider", parse=lower_list, help="aws | gcp | azure.", example="gcp"
    )
    regions: tuple[str, ...] = option(
        (), flag="region", help="Region filter.", example="us-central1"
    )
    spot: bool = option(False, help="Spot prices.")
    precision: str = option("fp32", help="fp32 | fp16 | bf16.", example="fp16")
    max_batch_sizes: tuple[int, ...] = option(
        _serve_default("max_batch_sizes"), help="Largest batches tried.", example="1,4,8,32"
    )
    max_delays_ms: tuple[float, ...] = option(
        _ms(_serve_default("max_delays_s")), help="Max queue delays tried, ms.", example="0,2,5"
    )
    instances: tuple[int, ...] = option(
        _serve_default("instances"), help="Model instances per server tried.", example="1,2"
    )
    max_servers: int = option(
        _serve_default("max_servers"), help="At most this many servers.", example="64"
    )
    budget_usd_per_hour: float | None = option(None, help="Cost cap, US$/h.", example="5")
    placements: tuple[str, ...] = option(
        PLACEMENTS,
        flag="placement",
        parse=lower_list,
        help="dedicated | shared (co-locate all models).",
        example="dedicated",
    )
    latency_tables: tuple[str, ...] = option(
        (),
        flag="latency-table",
        help="MODEL@SERVER=CSV measured curve (batch_size,latency_s).",
        example="resnet50@T4=t4.csv",
    )
    duration_s: float = option(
        _serve_default("duration_s"),
        help="Simulated seconds (with --trace: the trace's span).",
        example="60",
    )
    host_capacity_rps: float | None = option(
        None,
        kind="float",
        parse=_float_or_nan("host-capacity-rps", "330"),
        help=HOST_CAPACITY_HELP,
        example="330",
    )
    seed: int = option(0, help="Same seed, same plan.", example="0")

    def __post_init__(self) -> None:
        if isinstance(self.models, str):  # one model given as text: "resnet50:150"
            object.__setattr__(self, "models", _model_items(self.models))
        if not self.models:
            raise InvalidSpecError("model", "is required", fix="e.g. --model resnet50:150")
        if self.trace is not None and len(self.models) != 1:
            raise InvalidSpecError(
                "trace", "applies to exactly one --model", fix="give one --model with --trace"
            )
        for name, rate in self.model_rates:
            if rate is None:
                if self.trace is None:
                    raise InvalidSpecError(
                        f"rate of {name}",
                        "is missing",
                        fix=f"write --model {name}:150 or add --rate",
                    )
            elif not (math.isfinite(rate) and rate > 0):
                raise InvalidSpecError(
                    f"rate of {name}", "must be > 0 requests per second", got=rate,
                    fix=f"e.g. --model {name}:150",
                )  # fmt: skip
        if self.slo is None and self.slo_ms is None:
            raise InvalidSpecError("slo", "is required", fix="e.g. --slo p99<50ms or --slo-ms 50")
        percentile, slo_s = self.slo_target
        if not (math.isfinite(slo_s) and slo_s > 0):
            raise InvalidSpecError("slo", "must be > 0 ms", got=slo_s * 1e3, fix="e.g. --slo-ms 50")
        if not 0 < percentile <= 100:
            raise InvalidSpecError(
                "slo-percentile", "must be in (0, 100]", got=percentile, fix="e.g. 99"
            )
        _check_precision(self.precision)
        for b in self.max_batch_sizes:
            _check_at_least("max-batch-sizes", b, 1)
        if not self.max_batch_sizes:
            raise InvalidSpecError("max-batch-sizes", "is empty", fix="e.g. 1,4,8,32")
        if not self.max_delays_ms or any(
            not (math.isfinite(d) and d >= 0) for d in self.max_delays_ms
        ):
            raise InvalidSpecError(
                "max-delays-ms", "must be ms >= 0", got=list(self.max_delays_ms),
                fix="e.g. --max-delays-ms 0,2,5,10",
            )  # fmt: skip
        for i in self.instances:
            _check_at_least("instances", i, 1)
        if not self.instances:
            raise InvalidSpecError("instances", "is empty", fix="e.g. --instances 1,2")
        _check_at_least("max-servers", self.max_servers, 1)
        _check_positive("budget-usd-per-hour", self.budget_usd_per_hour, "US$/h", "e.g. 5")
        bad = [p for p in self.placements if p not in PLACEMENTS]
        if bad or not self.placements:
            raise InvalidSpecError(
                "placement", f"must be among {', '.join(PLACEMENTS)}", got=list(self.placements)
            )
        _check_positive("duration-s", self.duration_s, "seconds", "e.g. --duration-s 60")
        _check_host_capacity(self.host_capacity_rps)
        _check_positive("rate", self.rate, "requests per second", "e.g. --rate 150")
        from gpucast.inputs.serving import parse_latency_table_item

        for item in self.latency_tables:
            parse_latency_table_item(item)
        _check_at_least("seed", self.seed, 0)

    @property
    def model_rates(self) -> tuple[tuple[str, float | None], ...]:
        """(model, rate) per ``--model``; the rate ``None`` when it comes from the trace."""
        return tuple(parse_model_rate(item, self.rate) for item in self.models)

    @property
    def slo_target(self) -> tuple[float, float]:
        """(percentile, seconds) of the SLO."""
        if self.slo is not None:
            percentile, slo_s = parse_slo(self.slo)
        else:
            assert self.slo_ms is not None
            percentile, slo_s = 99.0, self.slo_ms / 1e3
        if self.slo_percentile is not None:
            percentile = self.slo_percentile
        return percentile, slo_s


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanServeResult:
    """The serving plan (its ``assumptions`` are the sources of every input) and the
    warnings gathered on the way (e.g. skipped malformed trace rows)."""

    plan: ServePlan
    warnings: tuple[str, ...] = ()
    #: model -> its validated error in the regime of the recommended deployment
    validation: Mapping[str, str] = field(default_factory=dict)

    @property
    def best(self) -> Any:
        return self.plan.best

    def to_dict(self) -> dict[str, Any]:
        """What ``gpucast plan serve --json`` prints: :meth:`ServePlan.to_dict` and the
        validated error of the recommended deployment's regime."""
        return {**self.plan.to_dict(), "validation": dict(self.validation)}

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate (cheapest first), with its Pareto and recommended marks."""
        import pandas as pd

        pareto = set(self.plan.pareto)
        rows = [
            {
                "candidate": i,
                "description": c.describe(),
                "placement": c.placement,
                "servers": c.servers,
                "cost_usd_per_hour": c.cost_usd_per_hour,
                "cost_usd_per_million": c.cost_usd_per_million,
                "tail_latency_s": c.tail_latency_s,
                "meets_slo": c.meets_slo,
                "headroom": c.headroom,
                "latency_headroom": c.latency_headroom,
                "bound": c.bound,
                "pareto": i in pareto,
                "recommended": i == self.plan.recommended,
            }
            for i, c in enumerate(self.plan.candidates)
        ]
        return pd.DataFrame(rows)


def plan_serve(
    request: PlanServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> PlanServeResult | PlanLlmServeResult:
    """The cheapest deployments that serve the models within the SLO (see
    :class:`PlanServeRequest` for the options): server type (GPU, MIG slice, CPU), count,
    batching and co-location, with the Pareto front of cost vs tail latency."""
    if request is None and _llm(options, config):  # a model of llm_models.csv: token level
        from gpucast.app.llm_serve import plan_llm_serve

        return plan_llm_serve(config=config, **_llm_options(options))
    from gpucast.catalog import load_catalog
    from gpucast.domain.serving_plan import ModelLoad
    from gpucast.inputs import serving as inputs
    from gpucast.plan.serve import plan_serving

    request = resolve(PlanServeRequest, request, options, config)
    loads: list[ModelLoad] = []
    traffic: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    duration_s = request.duration_s
    for name, rate in request.model_rates:
        if request.trace is not None:
            trace = inputs.read_trace_arrivals(request.trace, request.seed)
            times = trace.times_s
            trace_rate = (times.size - 1) / float(times[-1])
            if rate is not None:
                times = times * (trace_rate / rate)
            rate = rate or trace_rate
            traffic[name] = times
            duration_s = float(times[-1])
            sources[f"arrivals {name}"] = trace.source
            warnings += trace.warnings
        assert rate is not None  # the request checked it
        loads.append(ModelLoad(name=name, rate_rps=rate))
    percentile, slo_s = request.slo_target
    serve_request = ServeRequest(
        models=tuple(loads),
        slo_s=slo_s,
        slo_percentile=percentile,
        budget_usd_per_hour=request.budget_usd_per_hour,
        duration_s=duration_s,
        seed=request.seed,
        max_batch_sizes=request.max_batch_sizes,
        max_delays_s=tuple(d / 1e3 for d in request.max_delays_ms),
        instances=request.instances,
        max_servers=request.max_servers,
        placements=request.placements,
    )
    catalog = load_catalog()
    servers, targets = inputs.build_server_options(
        gpus=request.gpus,
        migs=request.migs,
        no_mig=request.no_mig,
        no_cpu=request.no_cpu,
        providers=request.providers,
        regions=request.regions,
        spot=request.spot,
        catalog=catalog,
    )
    if request.host_capacity_rps is not None:
        host = inputs.given_host_capacity(request.host_capacity_rps)
        servers = [dataclasses.replace(o, host_capacity_rps=host.value) for o in servers]
        sources["host_capacity"] = host.source
    profiles = inputs.model_profiles(
        loads,
        servers,
        targets,
        precision=request.precision,
        max_batch=max(serve_request.max_batch_sizes),
        measured=inputs.read_latency_tables(request.latency_tables),
    )
    sources["latency"] = profiles.source
    sources["prices"] = "catalog spot" if request.spot else "catalog on-demand"
    sources["arrivals"] = sources.get("arrivals", "Poisson at each model's rate")
    plan = plan_serving(
        serve_request,
        servers,
        profiles.value,
        arrivals=traffic or None,
        assumptions=sources,
    )
    best = plan.best
    gpus = [] if best is None else [g.server.gpu or "cpu" for g in best.groups]
    return PlanServeResult(
        plan=plan,
        warnings=tuple(warnings),
        validation=serving_validation(
            gpus, request.precision, calibrated=request.host_capacity_rps is not None
        ),
    )


# -- simulate serve -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServeRequest:
    """Traffic through one model on catalog GPUs with dynamic batching
    (``gpucast simulate serve``)."""

    VERB: ClassVar[str] = "simulate serve"

    model: str = option(help="Workload name, e.g. resnet50.", example="resnet50")
    gpu: str = option(help="Catalog GPU, e.g. P4, T4, A100-40GB.", example="T4")
    rate: float = option(help="Mean arrival rate, requests/s.", example="150")
    arrivals: str = option(
        "poisson",
        help="poisson | constant | bursty | trace:FILE (Azure LLM / Functions trace or "
        "arrival_s CSV).",
        example="poisson",
    )
    max_batch: int = option(8, help="Largest dynamic batch.", example="8")
    max_delay_ms: float = option(10.0, help="Max queue delay, ms.", example="10")
    preferred: tuple[int, ...] = option((), help="Preferred batch sizes, e.g. 4,8.", example="4,8")
    instances: int = option(1, help="Model instances per GPU.", example="2")
    servers: int = option(1, help="Number of GPUs (load balanced).", example="2")
    mig: str | None = option(None, help="Run on one MIG slice, e.g. 1g.10gb.", example="1g.10gb")
    duration_s: float = option(60.0, help="Simulated seconds.", example="60")
    slo_ms: float | None = option(None, help="Latency SLO, ms.", example="100")
    latency_table: Path | None = option(
        None, help="CSV batch_size,latency_s measured per batch.", example="lat.csv"
    )
    precision: str = option("fp32", help="fp32 | fp16 | bf16.", example="fp16")
    network_gbps: float | None = option(
        None, help="Client network, Gb/s (default: the offer's).", example="10"
    )
    price: float | None = option(
        None, help="US$/h per GPU (default: catalog); a MIG slice costs its share.", example="0.6"
    )
    host_capacity_rps: float | None = option(
        None,
        kind="float",
        parse=_float_or_nan("host-capacity-rps", "330"),
        help=HOST_CAPACITY_HELP,
        example="330",
    )
    calibrate_p50_ms: float | None = option(
        None,
        kind="float",
        parse=_float_or_nan("calibrate-p50-ms", "33.9"),
        help="Median latency you measured at this load, ms: fits --host-capacity-rps to it.",
        example="33.9",
    )
    seed: int = option(0, help="Same seed, same result.", example="0")

    def __post_init__(self) -> None:
        from gpucast.inputs.serving import check_arrival_kind

        if not self.model:
            raise InvalidSpecError("model", "must not be empty", fix="e.g. --model resnet50")
        _check_positive("rate", self.rate, "requests per second", "e.g. --rate 150")
        check_arrival_kind(self.arrivals)
        _check_at_least("max-batch", self.max_batch, 1)
        if not (math.isfinite(self.max_delay_ms) and self.max_delay_ms >= 0):
            raise InvalidSpecError(
                "max-delay-ms", "must be >= 0", got=self.max_delay_ms, fix="e.g. 10"
            )
        for b in self.preferred:
            if isinstance(b, bool) or not 1 <= b <= self.max_batch:
                raise InvalidSpecError(
                    "preferred", f"must be between 1 and --max-batch {self.max_batch}",
                    got=list(self.preferred), fix="e.g. --preferred 4,8",
                )  # fmt: skip
        _check_at_least("instances", self.instances, 1)
        _check_at_least("servers", self.servers, 1)
        _check_positive("duration-s", self.duration_s, "", "e.g. --duration-s 60")
        _check_positive("slo-ms", self.slo_ms, "", "e.g. --slo-ms 100")
        _check_precision(self.precision)
        _check_positive("network-gbps", self.network_gbps, "Gb/s", "e.g. --network-gbps 10")
        if self.price is not None and not (math.isfinite(self.price) and self.price >= 0):
            raise InvalidSpecError(
                "price", "must be >= 0 US$/h per GPU", got=self.price, fix="e.g. --price 0.6"
            )
        _check_host_capacity(self.host_capacity_rps)
        if self.calibrate_p50_ms is not None:
            if self.host_capacity_rps is not None:
                raise InvalidSpecError(
                    "calibrate-p50-ms",
                    "cannot be combined with --host-capacity-rps",
                    fix="give the capacity, or the measured median to fit it from, not both",
                )
            _check_positive("calibrate-p50-ms", self.calibrate_p50_ms, "ms", "e.g. 33.9")
        _check_at_least("seed", self.seed, 0)

    @property
    def batching(self) -> BatchingPolicy:
        return BatchingPolicy(
            max_batch_size=self.max_batch,
            max_queue_delay_s=self.max_delay_ms / 1e3,
            preferred_batch_sizes=self.preferred,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServeResult:
    """The simulated serving run, what it ran on, and its warnings (skipped trace rows, an
    overloaded host path)."""

    request: SimulateServeRequest
    server: str  # e.g. "T4" or "A100-40GB/1g.10gb"
    serving: ServingResult
    batching: BatchingPolicy
    latency_curve: LatencyCurve
    host_capacity_rps: float | None
    warnings: tuple[str, ...] = ()
    #: model -> its validated error in this run's regime (GPU, precision)
    validation: Mapping[str, str] = field(default_factory=dict)

    @property
    def sources(self) -> dict[str, str]:
        return dict(self.serving.sources)

    def to_dict(self) -> dict[str, Any]:
        """What ``gpucast simulate serve --json`` prints: the run with a 30-bin timeline,
        the host capacity, the batching policy and the latency curve."""
        out: dict[str, Any] = dict(self.serving.to_dict(timeline_bins=30))
        out["host_capacity_rps"] = self.host_capacity_rps
        out["batching"] = self.batching.to_dict()
        out["latency_curve"] = self.latency_curve.to_dict()
        out["validation"] = dict(self.validation)
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per simulated server (device)."""
        import pandas as pd

        return pd.DataFrame([s.to_dict() for s in self.serving.servers])


def serving_validation(gpus: list[str], precision: str, *, calibrated: bool) -> dict[str, str]:
    """The serving models' validated error for these GPUs (catalog names) and precision;
    with a host capacity given or calibrated, else as predicted from the catalog alone."""
    from gpucast.catalog.validation import validation_for

    key = "serving" if calibrated else "serving-uncalibrated"
    return {
        "serving latency (roofline curve + simulator)": validation_for(
            key, sorted(set(gpus)), precision, 1
        ).text()
    }


def simulate_serve(
    request: SimulateServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> SimulateServeResult | SimulateLlmServeResult:
    """Latency percentiles, SLO attainment, throughput and cost of serving a model on
    ``servers`` GPUs (or MIG slices) with dynamic batching (see :class:`SimulateServeRequest`).
    """
    if request is None and _llm(options, config):  # a model of llm_models.csv: token level
        from gpucast.app.llm_serve import simulate_llm_serve

        return simulate_llm_serve(config=config, **options)
    from gpucast.catalog import load_catalog
    from gpucast.domain.serving import Deployment, ModelDeployment, ServerGroup, ServerSpec
    from gpucast.inputs import serving as inputs
    from gpucast.simulate.serving import simulate_serving, with_host_capacity

    request = resolve(SimulateServeRequest, request, options, config)
    policy = request.batching
    server = inputs.gpu_server(load_catalog(), request.gpu, request.mig, request.price)
    sources: dict[str, str] = {"price": server.price.source}
    overhead_s = 0.0
    model_memory_gib = 0.0
    if request.latency_table is not None:
        curve = inputs.read_latency_table(request.latency_table)
    else:
        work = inputs.inference_work(request.model, request.precision)
        curve = inputs.roofline_curve(
            work, server.spec, request.precision, policy.largest_batch, mig=server.mig
        )
        model_memory_gib = work.memory_gib(policy.largest_batch)
        gbps = request.network_gbps or (server.offer.network_gbps if server.offer else None)
        if gbps:
            overhead = inputs.request_overhead(work, gbps)
            overhead_s = overhead.value
            sources["request_overhead"] = overhead.source
    sources["latency"] = curve.source
    arrivals = inputs.arrivals(request.arrivals, request.rate, request.duration_s, request.seed)
    sources["arrivals"] = arrivals.source
    host_capacity_rps = request.host_capacity_rps
    spec = ServerSpec(
        name=server.name,
        kind=server.kind,
        memory_gib=server.memory_gib,
        price_usd_per_hour=server.price.value,
        models=(
            ModelDeployment(
                model=request.model,
                latency=curve,
                batching=policy,
                instances=request.instances,
                memory_gib=model_memory_gib,
                request_overhead_s=overhead_s,
            ),
        ),
        host_capacity_rps=host_capacity_rps,
    )
    if host_capacity_rps is not None:
        sources["host_capacity"] = inputs.given_host_capacity(host_capacity_rps).source
    deployment = Deployment(groups=(ServerGroup(server=spec, count=request.servers),))
    traffic = {request.model: arrivals.times_s}
    if request.calibrate_p50_ms is not None:
        host = inputs.calibrated_host_capacity(
            deployment, traffic, request.calibrate_p50_ms / 1e3, seed=request.seed
        )
        host_capacity_rps = host.value
        deployment = with_host_capacity(deployment, host_capacity_rps)
        sources["host_capacity"] = host.source
    result = simulate_serving(
        deployment,
        traffic,
        seed=request.seed,
        slo_s=None if request.slo_ms is None else request.slo_ms / 1e3,
        sources=sources,
    )
    warnings = list(arrivals.warnings)
    for s in result.servers:
        if s.host_utilisation is not None and s.host_utilisation >= 1.0:
            warnings.append(
                f"{s.name} #{s.replica}: the host path is overloaded ({s.host_utilisation:.0%} "
                "of --host-capacity-rps); its latencies are a lower bound. Add servers or "
                "raise the host capacity."
            )
    return SimulateServeResult(
        request=request,
        server=server.name,
        serving=result,
        batching=policy,
        latency_curve=curve,
        host_capacity_rps=host_capacity_rps,
        warnings=tuple(warnings),
        validation=serving_validation(
            [server.name.split("/")[0]], request.precision, calibrated=host_capacity_rps is not None
        ),
    )
