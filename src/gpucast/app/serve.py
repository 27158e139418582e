"""``gpucast.plan_serve`` and ``gpucast.simulate_serve``: serving models on GPUs, MIG slices
and CPU servers.

* :func:`plan_serve` -- the cheapest deployments that serve some models within a latency SLO,
  and the cost vs tail-latency Pareto front (:func:`gpucast.plan.serve.plan_serving`);
* :func:`simulate_serve` -- latency percentiles, SLO attainment, throughput and cost of one
  deployment under a request stream (:func:`gpucast.simulate.serving.simulate_serving`).

Both take their inputs -- server options and prices (one MIG pricing rule), latency curves,
request overheads, arrivals, host capacity -- from :mod:`gpucast.inputs.serving`.

This module holds the two verbs' request classes and their dispatch (a language model to
:mod:`gpucast.app.llm_serve`); the work lives in private parts, re-exported here (``__all__``):
the shared option parsers, checks and SLO parsing (``_serve_options``), the requests' checks
(``_serve_checks``), the result types (``_serve_results``), the request-level plan
(``_serve_plan``), ``--mix`` on MIG slices (``_serve_mig``) and the simulation
(``_serve_simulate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app._serve_checks import check_plan_serve_request, check_simulate_serve_request
from gpucast.app._serve_mig import mig_mix_inputs, plan_mig_serve
from gpucast.app._serve_options import (
    ENGINE_HELP,
    LLM_SLO_HELP,
    MAX_BATCH_SIZE,
    MAX_DELAY_MS,
    MAX_DURATION_S,
    MAX_INSTANCES,
    MAX_SERVERS,
    REQUEST_BYTES,
    SERVING_PRECISION_HELP,
    _float_or_nan,
    _host_capacity_option,
    _host_concurrency_option,
    _host_ms_option,
    _model_items,
    _ms,
    _serve_default,
    check_one_slo,
    language_model_values,
    llm_request_values,
    parse_calibration_point,
    parse_model_rate,
    parse_slo,
    slo_of_one_latency,
)
from gpucast.app._serve_plan import planned_serve
from gpucast.app._serve_results import PlanServeResult, SimulateServeResult
from gpucast.app._serve_simulate import BURST_BUSY_FRACTION, serving_validation, simulated_serve
from gpucast.domain.catalog import offers_option, provider_option, region_option, spot_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import allow_large_option
from gpucast.domain.options import documented, lower_list, lower_text, option, split_list
from gpucast.domain.serving import BatchingPolicy, ClosedLoop
from gpucast.domain.serving_plan import PLACEMENTS
from gpucast.domain.workload import WorkloadOptions, workload_options_field

if TYPE_CHECKING:
    from gpucast.app.llm_serve import PlanLlmServeResult, SimulateLlmServeResult
    from gpucast.app.mig_serve import PlanMigServeResult

#: the public names, defined here or in the parts above (callers import them from here)
__all__ = [
    "BURST_BUSY_FRACTION",
    "ENGINE_HELP",
    "LLM_SLO_HELP",
    "MAX_BATCH_SIZE",
    "MAX_DELAY_MS",
    "MAX_DURATION_S",
    "MAX_INSTANCES",
    "MAX_SERVERS",
    "REQUEST_BYTES",
    "SERVING_PRECISION_HELP",
    "PlanServeRequest",
    "PlanServeResult",
    "SimulateServeRequest",
    "SimulateServeResult",
    "check_one_slo",
    "language_model_values",
    "llm_request_values",
    "mig_mix_inputs",
    "parse_calibration_point",
    "parse_model_rate",
    "parse_slo",
    "plan_serve",
    "serving_validation",
    "simulate_serve",
    "slo_of_one_latency",
]


# -- plan serve -----------------------------------------------------------------------------
@documented
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
    mix: tuple[str, ...] = option(
        (),
        parse=lambda value: tuple(split_list(value)),
        help="Models sharing MIG GPUs, NAME:RATE:SLO_MS each (e.g. "
        "resnet50:400:50,bert-base:120:100): PARIS picks heterogeneous MIG layouts of one "
        "--gpu (default A100-40GB), ELSA dispatches; compared with homogeneous layouts and "
        "whole GPUs (instead of --model/--slo).",
        example="resnet50:400:50,bert-base:120:100",
    )
    trace: Path | None = option(
        None,
        help="Arrivals of the (single) --model: Azure LLM / Functions / CSV "
        "(= --arrivals trace:FILE).",
        example="trace.csv",
    )
    arrivals: str = option(
        "poisson",
        help="poisson | constant | bursty | trace:FILE, each model at its rate (a trace "
        "time-scaled to it). --trace FILE replaces it: with --trace the default poisson is "
        "not used (another --arrivals is refused).",
        example="constant",
    )
    slo: str | None = option(
        None, parse=lower_text, help=f"e.g. p99<50ms. {LLM_SLO_HELP}", example="p99<50ms"
    )
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
    price: float | None = option(
        None, help="US$/h per GPU, every GPU type (a MIG slice: its share; default: each "
        "one's cheapest catalog offer, on demand or --spot).", example="2.5",
    )  # fmt: skip
    offers_file: Path | None = offers_option()
    engine: str = option("eager-pytorch", help=ENGINE_HELP, example="tensorrt")
    precision: str | None = option(
        None, parse=lower_text, help=SERVING_PRECISION_HELP, example="fp16"
    )
    workload_options: WorkloadOptions = workload_options_field()
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
        help="MODEL@SERVER=CSV measured curve (batch_size,latency_s; measure infer-curve "
        "--csv writes one).",
        example="resnet50@T4=t4.csv",
    )
    duration_s: float | None = option(
        None,
        help=f"Simulated seconds (default {_serve_default('duration_s'):g}; a trace: its "
        "busiest hour, or its first D s when given).",
        example="60",
    )
    host_capacity_rps: float | None = _host_capacity_option()
    host_ms: float | None = _host_ms_option()
    host_concurrency: int = _host_concurrency_option()
    saturation_s: float = option(
        30.0,
        help="Seconds of each saturation-search run for the recommended deployment (0: skip).",
        example="30",
    )
    seed: int = option(0, help="Same seed, same plan.", example="0")

    def __post_init__(self) -> None:
        check_plan_serve_request(self)

    @property
    def mix_models(self) -> tuple[tuple[str, float, float], ...]:
        """(model, rate req/s, SLO seconds) per ``--mix`` item ``NAME:RATE:SLO_MS``."""
        out: list[tuple[str, float, float]] = []
        for item in self.mix:
            parts = str(item).rsplit(":", 2)
            try:
                if len(parts) != 3 or not parts[0]:
                    raise ValueError
                name, rate, slo_ms = parts[0], float(parts[1]), float(parts[2])
            except ValueError:
                raise InvalidSpecError(
                    "mix", "each item must be NAME:RATE:SLO_MS", got=item,
                    fix="e.g. --mix resnet50:400:50,bert-base:120:100",
                ) from None  # fmt: skip
            for what, value in (("rate", rate), ("SLO", slo_ms)):
                if not (math.isfinite(value) and value > 0):
                    raise InvalidSpecError(
                        f"mix {name}", f"{what} must be a finite number > 0", got=value,
                        fix="e.g. --mix resnet50:400:50",
                    )  # fmt: skip
            out.append((name, rate, slo_ms / 1e3))
        names = [m[0] for m in out]
        if len(set(names)) != len(names):
            raise InvalidSpecError("mix", "lists a model twice", got=names, fix="give each once")
        return tuple(out)

    @property
    def run_s(self) -> float:
        """Seconds of generated arrivals each candidate is simulated for: ``--duration-s`` or
        the planner's default (a trace's own span is read from it)."""
        return float(_serve_default("duration_s") if self.duration_s is None else self.duration_s)

    @property
    def arrival_kind(self) -> str:
        """The arrival process: ``--arrivals``, or ``trace:FILE`` for ``--trace FILE``."""
        return f"trace:{self.trace}" if self.trace is not None else self.arrivals

    @property
    def trace_path(self) -> Path | None:
        from gpucast.inputs.serving import trace_path

        return trace_path(self.arrival_kind)

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


def plan_serve(
    request: PlanServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> PlanServeResult | PlanLlmServeResult | PlanMigServeResult:
    """The cheapest deployments that serve the models within the SLO (see
    :class:`PlanServeRequest` for the options): server type (GPU, MIG slice, CPU), count,
    batching and co-location, with the Pareto front of cost vs tail latency."""
    from gpucast.app.llm_serve import PlanLlmServeRequest, plan_llm_serve

    llm = None
    if request is None:  # a model of llm_models.csv: token level
        llm = language_model_values(PlanServeRequest, PlanLlmServeRequest, options, config)
    if llm is not None:
        return plan_llm_serve(config=config, **llm)
    from gpucast.inputs.workload import check_workload_name

    request = resolve(PlanServeRequest, request, options, config)
    # close matches now, before any profiling, naming the flag that gave the name
    flag = "mix" if request.mix else "model"
    for name in [m[0] for m in request.mix_models] + [n for n, _ in request.model_rates]:
        check_workload_name(name, language_models=not request.mix, field=flag)
    if request.mix:  # PARIS + ELSA on MIG slices
        return plan_mig_serve(request)
    return planned_serve(request)


# -- simulate serve -------------------------------------------------------------------------
_MIG_HELP = (
    "Run on MIG slices of this profile (--servers of them, each priced at its share of the "
    "GPU), e.g. 1g.10gb."
)


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServeRequest:
    """Traffic through one model on catalog GPUs with dynamic batching
    (``gpucast simulate serve``): open-loop arrivals at ``rate`` (or a trace), or ``clients``
    in a closed loop; bounded queues shed load; ``find_saturation`` searches the peak."""

    VERB: ClassVar[str] = "simulate serve"

    model: str = option(help="Workload name, e.g. resnet50.", example="resnet50")
    gpu: str = option(help="Catalog GPU, e.g. P4, T4, A100-40GB.", example="T4")
    rate: float | None = option(
        None,
        help="Mean arrival rate, requests/s (with a trace: time-scales it to this rate).",
        example="150",
    )
    arrivals: str = option(
        "poisson",
        help="poisson | constant | bursty | trace:FILE (Azure LLM / Functions trace or "
        "arrival_s CSV).",
        example="poisson",
    )
    clients: int | None = option(
        None,
        help="Closed loop: this many clients, each sending its next request a think time "
        "after its response (instead of --rate).",
        example="16",
    )
    think_ms: float = option(0.0, help="Closed loop: mean think time, ms (exponential).",
                             example="10")  # fmt: skip
    max_batch: int = option(8, help="Largest dynamic batch.", example="8")
    max_delay_ms: float = option(10.0, help="Max queue delay, ms.", example="10")
    preferred: tuple[int, ...] = option((), help="Preferred batch sizes, e.g. 4,8.", example="4,8")
    max_queue: int | None = option(
        None, help="Reject requests arriving while this many are in the server and not yet in "
        "a batch (host path or queue; default: unbounded).",
        example="64",
    )  # fmt: skip
    queue_timeout_ms: float | None = option(
        None, help="Reject a request still waiting (host path or queue) this long after it "
        "arrived, ms.", example="100",
    )  # fmt: skip
    instances: int = option(1, help="Model instances per GPU.", example="2")
    servers: int = option(
        1, help="Number of GPUs, or of MIG slices with --mig (load balanced).", example="2"
    )
    mig: str | None = option(None, help=_MIG_HELP, example="1g.10gb")
    duration_s: float | None = option(
        None,
        help="Simulated seconds (default 60; a trace: its whole span, as a language model's "
        "run replays it; given, a trace is cut there).",
        example="60",
    )
    slo: str | None = option(
        None,
        parse=lower_text,
        help="Latency SLO pNN<LATENCY (ms or s), as plan serve's: the share of requests "
        f"within LATENCY, and whether that is NN%. {LLM_SLO_HELP}",
        example="p99<100ms",
    )
    slo_ms: float | None = option(None, help="Latency SLO, ms (= --slo p99<Lms).", example="100")
    latency_table: Path | None = option(
        None,
        help="CSV batch_size,latency_s measured per batch (measure infer-curve --csv writes one).",
        example="lat.csv",
    )
    engine: str = option("eager-pytorch", help=ENGINE_HELP, example="tensorrt")
    precision: str | None = option(
        None, parse=lower_text, help=SERVING_PRECISION_HELP, example="int8"
    )
    workload_options: WorkloadOptions = workload_options_field()
    network_gbps: float | None = option(
        None, help="Network link into each GPU's server, in Gbit/s (gigabits per second, as NICs "
        "are rated; --pcie-gbps is GB/s) (default: the offer's share).",
        example="10",
    )  # fmt: skip
    pcie_gbps: float | None = option(
        None,
        help="Host-to-device copy, in GB/s (gigabytes per second; --network-gbps and "
        "--kv-link-gbps are Gbit/s) (default: the GPU's PCIe x16).",
        example="16",
    )
    input_kb: float | None = option(
        None,
        help="Bytes a request carries over the link and PCIe, KB (default: the model's input "
        "tensors, floating-point elements at the serving precision: 4 B fp32, 2 B fp16/bf16, "
        "1 B int8/fp8), e.g. 150 for a 224x224x3 uint8 image.",
        example="150",
    )
    price: float | None = option(
        None, help="US$/h per GPU (default: catalog); a MIG slice costs its share.", example="0.6"
    )
    providers: tuple[str, ...] = provider_option("gcp")
    regions: tuple[str, ...] = region_option("us-central1")
    spot: bool = spot_option()
    offers_file: Path | None = offers_option()
    host_capacity_rps: float | None = _host_capacity_option()
    host_ms: float | None = _host_ms_option()
    host_concurrency: int = _host_concurrency_option()
    calibrate_p50_ms: float | None = option(
        None,
        kind="float",
        parse=_float_or_nan("calibrate-p50-ms", "33.9"),
        help="Median latency you measured at this load, ms: fits the host time (--host-ms) "
        "to it; with --calibrate-at, the host capacity too.",
        example="33.9",
    )
    calibrate_at: tuple[str, ...] = option(
        (),
        help="Another measured median RATE=P50_MS (req/s=ms); two loads fit the host time "
        "and capacity.",
        example="203=49.6",
    )
    find_saturation: bool = option(
        False, help="Search the highest rate the deployment holds and its peak throughput."
    )
    deadline_ms: float | None = option(
        None,
        help="Deadline of every request, ms: reports the deadline-miss rate and worst latency.",
        example="50",
    )
    request_classes: tuple[str, ...] = option(
        (),
        flag="request-class",
        help="Split the traffic into classes NAME:SHARE:DEADLINE_MS[:PRIORITY] (shares of "
        "--rate; priority 0 most urgent), e.g. urgent:0.1:30:0,bulk:0.9:1000:1.",
        example="urgent:0.1:30:0,bulk:0.9:1000:1",
    )
    scheduler: str = option(
        "fifo",
        help="With deadlines or classes: fifo, edf or priority, chosen at batch boundaries.",
        example="edf",
    )
    allow_large: bool = allow_large_option()
    seed: int = option(0, help="Same seed, same result.", example="0")
    cache_fraction: float | None = option(
        None,
        help="Recommendation model (dlrm): share of its embedding rows cached in HBM; lookups "
        "that miss are read from host DRAM (and SSD) in every batch (default: all in HBM).",
        example="0.1",
    )
    dram_fraction: float = option(
        1.0,
        help="With --cache-fraction: share of the rows in host DRAM, the rest on the "
        "catalog's NVMe drive (catalog/data/ssd.csv).",
        example="0.5",
    )
    cache_policy: str = option(
        "lru",
        parse=lower_text,
        help="With --cache-fraction: embedding cache policy, lru or lfu.",
        example="lfu",
    )
    data_dir: Path | None = option(
        None,
        help="With --cache-fraction: published data folder holding dlrm_datasets/ (the hit "
        "rate's locality; default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )

    def __post_init__(self) -> None:
        check_simulate_serve_request(self)

    @property
    def classes(self) -> tuple[tuple[str, float, float, int], ...]:
        """(name, share, deadline s, priority) of every ``--request-class``."""
        out = []
        for item in self.request_classes:
            parts = [p.strip() for p in str(item).split(":")]
            if len(parts) not in (3, 4) or not parts[0]:
                raise InvalidSpecError(
                    "request-class", "must be NAME:SHARE:DEADLINE_MS[:PRIORITY]", got=item,
                    fix="e.g. urgent:0.1:30:0",
                )  # fmt: skip
            try:
                share, deadline_ms = float(parts[1]), float(parts[2])
                priority = int(parts[3]) if len(parts) == 4 else 0
            except ValueError:
                raise InvalidSpecError(
                    "request-class", "SHARE and DEADLINE_MS are numbers, PRIORITY a whole number",
                    got=item, fix="e.g. urgent:0.1:30:0",
                ) from None  # fmt: skip
            if not (math.isfinite(share) and 0 < share <= 1):
                raise InvalidSpecError("request-class", "SHARE must be in (0, 1]", got=item)
            if not (math.isfinite(deadline_ms) and 0 < deadline_ms <= 86_400_000.0):
                raise InvalidSpecError(
                    "request-class", "DEADLINE_MS must be > 0 and <= 1 day", got=item
                )
            if not 0 <= priority <= 1000:
                raise InvalidSpecError("request-class", "PRIORITY must be 0..1000", got=item)
            out.append((parts[0], share, deadline_ms / 1e3, priority))
        names = [c[0] for c in out]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)  # QA 40 M #13: no fix
            raise InvalidSpecError(
                "request-class", f"names must differ ({twice!r} is given twice)",
                got=list(names), fix="give each class its own NAME, e.g. a:0.5:30:0,b:0.5:900:1",
            )  # fmt: skip
        if out and abs(sum(c[1] for c in out) - 1.0) > 1e-6:
            raise InvalidSpecError(
                "request-class", "shares must add up to 1", got=sum(c[1] for c in out),
                fix="e.g. urgent:0.1:30:0,bulk:0.9:1000:1",
            )  # fmt: skip
        return tuple(out)

    @property
    def batching(self) -> BatchingPolicy:
        return BatchingPolicy(
            max_batch_size=self.max_batch,
            max_queue_delay_s=self.max_delay_ms / 1e3,
            preferred_batch_sizes=self.preferred,
            max_queue_size=self.max_queue,
            queue_timeout_s=None if self.queue_timeout_ms is None else self.queue_timeout_ms / 1e3,
        )

    @property
    def run_s(self) -> float:
        """Seconds a generated stream, a closed loop or a saturation probe runs: --duration-s,
        default 60."""
        return 60.0 if self.duration_s is None else float(self.duration_s)

    @property
    def arrivals_s(self) -> float | None:
        """The --duration-s the arrivals are cut at: a trace's whole span unless one is given
        (QA 34 C #16: a CNN replayed a trace's first 60 s where a language model replays it
        whole), a generated stream's :attr:`run_s`."""
        if self.duration_s is None and self.arrivals.startswith("trace:"):
            return None
        return self.run_s

    @property
    def closed_loop(self) -> ClosedLoop | None:
        if self.clients is None:
            return None
        return ClosedLoop(clients=self.clients, think_s=self.think_ms / 1e3)

    @property
    def slo_target(self) -> tuple[float, float] | None:
        """(percentile, seconds) of ``--slo`` or ``--slo-ms`` (p99), None without an SLO."""
        if self.slo is not None:
            return parse_slo(self.slo)
        return None if self.slo_ms is None else (99.0, self.slo_ms / 1e3)

    @property
    def calibration_points(self) -> tuple[tuple[float, float], ...]:
        """(rate req/s, median s) of every ``--calibrate-at``."""
        return tuple(parse_calibration_point(p) for p in self.calibrate_at)


def simulate_serve(
    request: SimulateServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> SimulateServeResult | SimulateLlmServeResult:
    """Latency percentiles, SLO attainment, throughput, drops and cost of serving a model on
    ``servers`` GPUs (or MIG slices) with dynamic batching (see :class:`SimulateServeRequest`),
    and with ``find_saturation`` its peak throughput; a model of ``llm_models.csv`` is served
    token by token (:func:`gpucast.app.llm_serve.simulate_llm_serve`).
    """
    from gpucast.app.llm_serve import SimulateLlmServeRequest, simulate_llm_serve

    llm = None
    if request is None:  # a model of llm_models.csv: token level
        llm = language_model_values(SimulateServeRequest, SimulateLlmServeRequest, options, config)
    if llm is not None:
        return simulate_llm_serve(config=config, **llm)
    request = resolve(SimulateServeRequest, request, options, config)
    return simulated_serve(request)
