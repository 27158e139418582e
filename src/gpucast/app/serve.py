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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app._units import servers_with_units, skipped_assumption
from gpucast.domain.catalog import offers_option, provider_option, region_option, spot_option
from gpucast.domain.embeddings import check_cache_policy
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import (
    allow_large_option,
    check_price,
    check_seed,
    check_simulated_requests,
)
from gpucast.domain.options import fields_of, lower_list, lower_text, option, split_list
from gpucast.domain.serving import SERVING_PRECISIONS, BatchingPolicy, ClosedLoop, LatencyCurve
from gpucast.domain.serving_plan import (
    PLACEMENTS,
    PLAN_TRACE_WINDOW_S,
    ServePlan,
    ServeRequest,
    check_model_rate,
)
from gpucast.domain.workload import (
    WorkloadOptions,
    check_precision_units,
    workload_options_field,
)

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.app.llm_serve import PlanLlmServeResult, SimulateLlmServeResult
    from gpucast.app.mig_serve import MigMixInputs, PlanMigServeResult
    from gpucast.domain.catalog import Catalog, GpuSpec
    from gpucast.simulate.serving import Saturation, ServingResult

ENGINE_HELP = (
    "Inference engine: eager-pytorch (default) or tensorrt (TensorRT-class: fused kernels, "
    "int8/fp8); its efficiencies are fitted sets (catalog serving_engines.csv)."
)
SERVING_PRECISION_HELP = "fp32 | fp16 | bf16 | fp8 | int8 (default: the engine's)."


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


# -- the shared-host options of plan serve and simulate serve --------------------------------
def _host_capacity_option() -> Any:
    return option(
        None,
        kind="float",
        parse=_float_or_nan("host-capacity-rps", "330"),
        help="Requests/s the shared host path of one server (client, CPU, serving framework) "
        "carries at most; requests in it slow each other as it fills, beyond it they queue. "
        "Default: unlimited.",
        example="330",
    )


def _host_ms_option() -> Any:
    return option(
        None,
        kind="float",
        parse=_float_or_nan("host-ms", "10"),
        help="A request's time on the shared host path when alone (client, (de)serialisation, "
        "framework), ms; with --host-capacity-rps it stretches as the host fills. Default: 0.",
        example="10",
    )


def _host_concurrency_option() -> Any:
    return option(
        64, help="Requests the shared host works on at once (more wait their turn).", example="64"
    )


def _check_positive(flag: str, value: float | None, what: str, fix: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(flag, f"must be > 0 {what}".rstrip(), got=value, fix=fix)


def _check_at_least(flag: str, value: int, low: int) -> None:
    if isinstance(value, bool) or value < low:
        raise InvalidSpecError(flag, f"must be >= {low}", got=value, fix=f"e.g. --{flag} {low}")


#: Ceilings on what one serving request may describe (beyond them it is a typo, not a
#: deployment): batch sizes, servers, instances, simulated time and the physical inputs.
MAX_BATCH_SIZE = 65_536
MAX_SERVERS = 10_000
MAX_INSTANCES = 1_024
MAX_DURATION_S = 30 * 86_400.0
#: a dynamic batcher's queue delay is micro- to milliseconds; a minute or more is a typo (1e12
#: ms held requests for 31 years and read as an overloaded server: QA 38 I #16)
MAX_DELAY_MS = 60_000.0
#: bytes a simulated request costs (arrival, batch, latency arrays and per-stage times)
REQUEST_BYTES = 96


def _check_at_most(flag: str, value: float | None, high: float, unit: str = "") -> None:
    if value is not None and not math.isnan(value) and value > high:  # NaN: the field's own check
        shown = f"{value:,.0f}" if math.isfinite(value) and abs(value) < 1e18 else f"{value:.3g}"
        raise InvalidSpecError(
            flag,
            f"must be at most {high:,g}{' ' + unit if unit else ''}",
            got=shown,
            fix=f"e.g. --{flag} {min(high, 100):g}",
        )


def _check_precision(value: str | None) -> None:
    if value is not None and value not in SERVING_PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(SERVING_PRECISIONS)}", got=value,
            fix="e.g. --precision fp16",
        )  # fmt: skip


def _check_units(precision: str, gpu: GpuSpec, catalog: Catalog) -> None:
    """A serving precision the GPU has no units for (fp8 on a T4, bf16 on a P4, fp16 on a K80):
    its one line, as ``predict infer`` and ``predict train`` refuse it."""
    check_precision_units(
        precision, gpu, catalog, runs="has units for", or_else="", choices=SERVING_PRECISIONS
    )


def _check_engine(value: str) -> None:
    from gpucast.catalog.serving_engines import serving_engine

    serving_engine(value)


def _check_host_ms(value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise InvalidSpecError("host-ms", "must be >= 0 ms", got=value, fix="e.g. --host-ms 10")


def parse_calibration_point(text: str) -> tuple[float, float]:
    """``RATE=P50_MS`` (e.g. ``150=33.9``) -> (rate req/s, median seconds)."""
    rate_text, sep, p50_text = str(text).partition("=")
    try:
        if not sep:
            raise ValueError
        rate, p50_ms = float(rate_text), float(p50_text)
    except ValueError:
        raise InvalidSpecError(
            "calibrate-at", "must be RATE=P50_MS", got=text, fix="e.g. --calibrate-at 203=49.6"
        ) from None
    if not (math.isfinite(rate) and rate > 0 and math.isfinite(p50_ms) and p50_ms > 0):
        raise InvalidSpecError(
            "calibrate-at", "needs a rate > 0 req/s and a median > 0 ms", got=text,
            fix="e.g. --calibrate-at 203=49.6",
        )  # fmt: skip
    return rate, p50_ms / 1e3


def _check_host_capacity(value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(
            "host-capacity-rps",
            "must be > 0 requests per second",
            got=value,
            fix="e.g. --host-capacity-rps 330, or leave it out for an unlimited host",
        )


#: --slo's help on a language model: which latencies its SLOs are on.
LLM_SLO_HELP = (
    "A language model's SLOs are on TTFT and TPOT, not end to end: --slo-ttft-ms and "
    "--slo-tpot-ms instead."
)


def parse_slo(text: str) -> tuple[float, float]:
    """``p99<50ms``, ``p95<=0.1s`` or ``50ms`` (p99) -> (percentile, seconds): the ``--slo``
    of every serving verb. A latency without its unit (``p99<2``) is refused, as a keep-alive
    without one is: milliseconds or seconds would be a guess."""
    match = re.fullmatch(
        r"\s*(?:p(?P<p>\d+(?:\.\d+)?)\s*<=?\s*)?(?P<v>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*"
        r"(?P<u>ms|s|us)?\s*",
        text,
    )
    if match is None:
        raise InvalidSpecError(
            "slo",
            "must look like p99<50ms (percentile < latency)",
            got=text,
            fix="--slo 'p99<50ms' (quoted: the shell reads an unquoted < as a redirect)",
        )
    percentile = float(match["p"]) if match["p"] else 99.0
    value = float(match["v"])
    unit = match["u"]
    if unit is None:
        bound = f"p{match['p']}<" if match["p"] else ""
        raise InvalidSpecError(
            "slo", "needs the latency's unit (ms or s)", got=text,
            fix=f"e.g. --slo '{bound}{match['v']}ms' for milliseconds or '{bound}{match['v']}s' "
            "for seconds",
        )  # fmt: skip
    seconds = value * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[unit]
    if not 0 < percentile <= 100:
        raise InvalidSpecError(
            "slo percentile", "must be in (0, 100]", got=percentile,
            fix=f"e.g. --slo 'p99<{match['v']}{unit}' (the share of requests within the latency)",
        )  # fmt: skip
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidSpecError(
            "slo", "must be a finite latency > 0", got=text, fix="e.g. --slo 'p99<50ms'"
        )
    return percentile, seconds


def check_one_slo(slo: str | None, slo_ms: float | None, slo_percentile: float | None) -> None:
    """``--slo pNN<L`` gives both the percentile and the latency: ``--slo-ms`` or
    ``--slo-percentile`` beside it would silently override half of what the user wrote, so
    every serving verb refuses the pair here."""
    if slo is None:
        return
    for flag, value in (("--slo-ms", slo_ms), ("--slo-percentile", slo_percentile)):
        if value is not None:
            raise InvalidSpecError(
                "slo", f"and {flag} both give the SLO (got --slo '{slo}' {flag} {value:g})",
                fix="give one, e.g. --slo 'p99<100ms' alone",
            )  # fmt: skip


def slo_of_one_latency(flag: str, value: object, verb: str) -> InvalidSpecError:
    """The error for ``--slo``/``--slo-ms`` (one latency) on a language model: its SLOs are
    on TTFT and TPOT, not end to end (which grows with each request's output length); the fix
    carries the percentile and latency given over to ``--slo-ttft-ms``."""
    try:
        p, seconds = (
            parse_slo(lower_text(value)) if flag == "slo" else (99.0, float(value) / 1e3)  # type: ignore[arg-type]
        )
    except (InvalidSpecError, TypeError, ValueError):
        p, seconds = 99.0, 0.5
    at = f" --slo-percentile {p:g}" if verb.startswith("plan") else ""
    return InvalidSpecError(
        flag,
        "gives one latency, but a language model's SLOs are two: TTFT (time to the first "
        "token) and TPOT (time per output token after it), not end to end (which grows with "
        "each request's output length)",
        got=value,
        fix=f"e.g. --slo-ttft-ms {seconds * 1e3:g} --slo-tpot-ms 50{at} "
        f"(the first token within {seconds * 1e3:g} ms, then 50 ms per token)",
    )


def llm_request_values(own_cls: type, llm_cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """The values of ``llm_cls`` (the verb's request for a language model) from ``given``,
    keyed by the field names of ``own_cls`` (its request for any other model) and those of
    ``llm_cls`` that ``own_cls`` has no flag for: an option of ``own_cls`` becomes the LLM
    field of the same flag; one LLM serving has not is one clear error (``--slo``: a language
    model's SLOs are two)."""
    llm_flags = {f.name: f.flag for f in fields_of(llm_cls) if f.info.cli}
    by_flag = {flag: name for name, flag in llm_flags.items()}
    own_flags = {f.flag: f.name for f in fields_of(own_cls) if f.info.cli}
    values: dict[str, Any] = {}
    for flag, name in own_flags.items():
        value = given.get(name)
        if value is None or value == []:
            continue
        if flag in by_flag:
            values[by_flag[flag]] = value
        elif flag in ("slo", "slo-ms"):
            raise slo_of_one_latency(flag, value, llm_cls.VERB)  # type: ignore[attr-defined]
        else:
            raise InvalidSpecError(
                flag,
                "is not an option of LLM serving (the model is a language model of "
                "catalog/data/llm_models.csv)",
                fix=f"use --framework {value} (a language model's inference engine)"
                if flag == "engine"
                else f"see gpucast {llm_cls.VERB} --help for the LLM options",  # type: ignore[attr-defined]
            )  # fmt: skip
    for name, flag in llm_flags.items():
        if flag not in own_flags and given.get(name) is not None:
            values[name] = given[name]
    return values


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
            if not item.get("name") or set(item) - {"name", "rate"}:  # QA 38 I #19: "None:150"
                raise InvalidSpecError(
                    "model", "a mapping takes the keys name and rate", got=item,
                    fix="e.g. {name: resnet50, rate: 150}, or the text resnet50:150",
                )  # fmt: skip
            rate = item.get("rate")
            out.append(str(item["name"]) + ("" if rate is None else f":{rate}"))
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


def language_model_values(
    own_cls: type, llm_cls: type, given: Mapping[str, Any], config: Path | str | None = None
) -> dict[str, Any] | None:
    """One rule for the command line and the API of a serving verb that also serves language
    models: where ``--model`` (or the config file's) names a model of ``llm_models.csv``, the
    values of ``llm_cls`` (:func:`llm_request_values`; a key neither request has is passed on,
    so the LLM request refuses it with its "did you mean"); ``None`` where it names none --
    and then an option only LLM serving has, given, is one clear error rather than ignored.
    Several models with a language model among them: one error (one LLM a run)."""
    from gpucast.app.llm_serve import check_one_language_model, is_llm_serving

    model = {"model": given.get("model", given.get("models"))}
    check_one_language_model(own_cls.VERB, model, config)  # type: ignore[attr-defined]
    own = {f.name: f.flag for f in fields_of(own_cls) if f.info.cli}
    if is_llm_serving(model, config):
        values = llm_request_values(own_cls, llm_cls, given)
        values.update({k: v for k, v in given.items() if k not in own and k not in values})
        return values
    own_flags = set(own.values())
    for f in fields_of(llm_cls):
        if f.info.cli and f.flag not in own_flags and given.get(f.name) not in (None, []):
            raise InvalidSpecError(
                f.flag,
                "applies to language models only (catalog/data/llm_models.csv)",
                fix="drop it, or serve an LLM, e.g. --model llama-3-8b",
            )
    return None


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
        if isinstance(self.models, str):  # one model given as text: "resnet50:150"
            object.__setattr__(self, "models", _model_items(self.models))
        if isinstance(self.mix, str):
            object.__setattr__(self, "mix", tuple(split_list(self.mix)))
        check_price(self.price)
        if self.mix:
            self._check_mix()
            return
        if not self.models:
            raise InvalidSpecError("model", "is required", fix="e.g. --model resnet50:150")
        from gpucast.app.llm_serve import check_one_language_model
        from gpucast.inputs.serving import check_arrival_kind

        check_one_language_model(self.VERB, {"models": self.models})

        check_arrival_kind(self.arrivals)
        if self.trace is not None and self.arrivals not in ("poisson", f"trace:{self.trace}"):
            raise InvalidSpecError(
                "trace", "and --arrivals name two different arrival processes",
                fix="give one: --trace FILE or --arrivals trace:FILE",
            )  # fmt: skip
        if self.trace_path is not None and len(self.models) != 1:
            raise InvalidSpecError(
                "trace", "applies to exactly one --model", fix="give one --model with --trace"
            )
        for name, rate in self.model_rates:
            if rate is not None or self.trace_path is None:  # a trace gives the rate
                check_model_rate(name, rate)
        if self.slo is None and self.slo_ms is None:
            raise InvalidSpecError("slo", "is required", fix="e.g. --slo 'p99<50ms' or --slo-ms 50")
        check_one_slo(self.slo, self.slo_ms, self.slo_percentile)
        percentile, slo_s = self.slo_target
        if not (math.isfinite(slo_s) and slo_s > 0):
            raise InvalidSpecError("slo", "must be > 0 ms", got=slo_s * 1e3, fix="e.g. --slo-ms 50")
        if not 0 < percentile <= 100:
            raise InvalidSpecError(
                "slo-percentile", "must be in (0, 100]", got=percentile, fix="e.g. 99"
            )
        _check_engine(self.engine)
        _check_precision(self.precision)
        if self.precision is not None:
            from gpucast.catalog.serving_engines import serving_engine

            serving_engine(self.engine).check_precision(self.precision)
        for b in self.max_batch_sizes:
            _check_at_least("max-batch-sizes", b, 1)
            _check_at_most("max-batch-sizes", b, MAX_BATCH_SIZE)
        if not self.max_batch_sizes:
            raise InvalidSpecError("max-batch-sizes", "is empty", fix="e.g. 1,4,8,32")
        if not self.max_delays_ms or any(
            not (math.isfinite(d) and d >= 0) for d in self.max_delays_ms
        ):
            raise InvalidSpecError(
                "max-delays-ms", "must be ms >= 0", got=list(self.max_delays_ms),
                fix="e.g. --max-delays-ms 0,2,5,10",
            )  # fmt: skip
        for d in self.max_delays_ms:
            _check_at_most("max-delays-ms", d, MAX_DELAY_MS, "ms (a minute)")
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
        _check_at_most("duration-s", self.duration_s, MAX_DURATION_S, "s (30 days)")
        _check_at_most("max-servers", self.max_servers, MAX_SERVERS)
        _check_host_capacity(self.host_capacity_rps)
        _check_host_ms(self.host_ms)
        _check_at_most("host-ms", self.host_ms, 1e6, "ms")
        _check_at_least("host-concurrency", self.host_concurrency, 1)
        check_simulated_requests(
            "duration-s",
            sum(r for _, r in self.model_rates if r is not None) or None,
            self.run_s,
            None,  # plan serve has no --allow-large
            bytes_per_request=REQUEST_BYTES,
            fix="lower the rates in --model (NAME:RATE) or --rate, or --duration-s",
        )
        if not (math.isfinite(self.saturation_s) and self.saturation_s >= 0):
            raise InvalidSpecError(
                "saturation-s", "must be >= 0 seconds", got=self.saturation_s,
                fix="e.g. --saturation-s 30, or 0 to skip the search",
            )  # fmt: skip
        _check_positive("rate", self.rate, "requests per second", "e.g. --rate 150")
        from gpucast.inputs.serving import parse_latency_table_item

        for item in self.latency_tables:
            parse_latency_table_item(item)
        check_seed(self.seed)

    def _check_mix(self) -> None:
        """``--mix`` plans MIG layouts: its own models and SLOs, one GPU, no trace."""
        if self.models or self.slo is not None or self.slo_ms is not None:
            raise InvalidSpecError(
                "mix", "gives the models and their SLOs: drop --model / --slo / --slo-ms",
                fix="e.g. --mix resnet50:400:50,bert-base:120:100",
            )  # fmt: skip
        self.mix_models  # noqa: B018 -- parses every item, one clear error for a bad one
        if len(self.gpus) > 1 or self.migs or self.no_mig:
            raise InvalidSpecError(
                "mix", "plans the MIG layouts of one GPU type: give at most one --gpu and no "
                "--mig / --no-mig", fix="e.g. --mix ... --gpu A100-40GB",
            )  # fmt: skip
        if self.trace is not None or self.arrivals.startswith("trace:"):
            raise InvalidSpecError(
                "mix", "takes generated arrivals (poisson, constant, bursty), not a trace",
                fix="drop --trace, or plan one model with --model",
            )  # fmt: skip
        from gpucast.inputs.serving import check_arrival_kind

        check_arrival_kind(self.arrivals)
        if self.slo_percentile is not None and not 0 < self.slo_percentile <= 100:
            raise InvalidSpecError(
                "slo-percentile", "must be in (0, 100]", got=self.slo_percentile, fix="e.g. 99"
            )
        _check_engine(self.engine)
        _check_precision(self.precision)
        for b in self.max_batch_sizes:
            _check_at_least("max-batch-sizes", b, 1)
            _check_at_most("max-batch-sizes", b, MAX_BATCH_SIZE)
        _check_at_least("max-servers", self.max_servers, 1)
        _check_at_most("max-servers", self.max_servers, MAX_SERVERS)
        _check_positive("duration-s", self.duration_s, "seconds", "e.g. --duration-s 60")
        _check_at_most("duration-s", self.duration_s, MAX_DURATION_S, "s (30 days)")
        check_simulated_requests(
            "duration-s",
            sum(m[1] for m in self.mix_models),
            self.run_s,
            None,  # plan serve has no --allow-large
            bytes_per_request=REQUEST_BYTES,
            fix="lower the rates in --mix (NAME:RATE:SLO_MS) or --duration-s",
        )
        from gpucast.inputs.serving import parse_latency_table_item

        for item in self.latency_tables:
            parse_latency_table_item(item)
        check_seed(self.seed)

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
        validated error of the recommended deployment's regime, and the warnings the text
        prints on stderr (QA 38 I #22: --json dropped them)."""
        return {
            **self.plan.to_dict(),
            "validation": dict(self.validation),
            "warnings": list(self.warnings),
        }

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
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.domain.serving_plan import ModelLoad
    from gpucast.inputs import serving as inputs
    from gpucast.inputs.workload import check_workload_name
    from gpucast.plan.serve import plan_serving

    request = resolve(PlanServeRequest, request, options, config)
    # close matches now, before any profiling, naming the flag that gave the name
    flag = "mix" if request.mix else "model"
    for name in [m[0] for m in request.mix_models] + [n for n, _ in request.model_rates]:
        check_workload_name(name, language_models=not request.mix, field=flag)
    if request.mix:  # PARIS + ELSA on MIG slices
        return _plan_mig_serve(request)
    loads: list[ModelLoad] = []
    traffic: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    duration_s = request.run_s
    kind = request.arrival_kind
    processes: list[str] = []
    for k, (name, rate) in enumerate(request.model_rates):
        # a trace: its first --duration-s seconds, or (not given) its busiest hour
        stream = inputs.arrivals(
            kind, rate, request.duration_s if request.trace_path else duration_s,
            request.seed + k, window_s=PLAN_TRACE_WINDOW_S,
        )  # fmt: skip
        times = stream.times_s
        traffic[name] = times
        if request.trace_path is not None:
            duration_s = stream.duration_s
            if rate is None or stream.cut:  # the servers are sized for what is replayed
                rate = inputs.arrival_rate_of(times)
        warnings += stream.warnings
        processes.append(f"{name}: {stream.source}")
        assert rate is not None  # the request checked it
        loads.append(ModelLoad(name=name, rate_rps=rate))
    sources["arrivals"] = "; ".join(processes)
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
    catalog = load_catalog(offers_file(request.offers_file))
    servers, targets = inputs.build_server_options(
        gpus=request.gpus,
        migs=request.migs,
        no_mig=request.no_mig,
        no_cpu=request.no_cpu,
        providers=request.providers,
        regions=request.regions,
        spot=request.spot,
        catalog=catalog,
        price_usd_per_gpu_hour=request.price,
    )
    host_changes: dict[str, Any] = {"host_concurrency": request.host_concurrency}
    if request.host_capacity_rps is not None:
        host = inputs.given_host_capacity(request.host_capacity_rps)
        host_changes["host_capacity_rps"] = host.value
        sources["host_capacity"] = host.source
    if request.host_ms is not None:
        host_changes["host_s"] = request.host_ms / 1e3
        sources["host_time"] = f"{request.host_ms:g} ms on the host path alone (given)"
    servers = [dataclasses.replace(o, **host_changes) for o in servers]
    engine_profile = serving_engine(request.engine)
    precision = request.precision or engine_profile.default_precision
    # the GPU types without units for the precision (fp8 on a T4, fp16 on a K80) are skipped
    servers, no_units = servers_with_units(servers, catalog, precision, choices=SERVING_PRECISIONS)
    if no_units:
        said = skipped_assumption(precision, no_units, auto=False)
        sources[said.name] = f"{said.value} ({said.source}; {said.override})"
    engine = inputs.serving_efficiency(request.engine, precision)
    sources["engine"] = engine.source
    profiles = inputs.model_profiles(
        loads,
        servers,
        targets,
        precision=precision,
        max_batch=max(serve_request.max_batch_sizes),
        measured=inputs.read_latency_tables(request.latency_tables),
        engine=engine.value,
        workload_options=dict(request.workload_options),
    )
    sources["latency"] = profiles.source
    sources["payload"] = "; ".join(
        inputs.payload_text(
            inputs.inference_work(m.name, precision, dict(request.workload_options)), precision
        )
        for m in loads
    )
    sources["prices"] = _prices_text(request.price, spot=request.spot) + (
        "; a MIG row rents whole GPUs: n slices of a profile cost ceil(n / the slices one GPU "
        "holds) GPUs (simulate serve --mig charges the one slice it runs, its share)"
        if any(o.kind == "mig" for o in servers)
        else ""
    )
    guessed = _estimated_servers(servers, catalog, gpus_given=request.price is not None)
    if guessed:
        sources["estimated prices"] = guessed
    plan = plan_serving(
        serve_request,
        servers,
        profiles.value,
        arrivals=traffic,
        assumptions=sources,
        saturation_s=request.saturation_s,
    )
    best = plan.best
    gpus = [] if best is None else [g.server.gpu or "cpu" for g in best.groups]
    # the pick's batch latencies are a measured table's where one was given for it
    items = map(inputs.parse_latency_table_item, request.latency_tables)
    tables = {(m, s): path for m, s, path in items}
    used = [
        tables[(m.model, g.server.name)]
        for g in (() if best is None else best.groups)
        for m in g.models
        if (m.model, g.server.name) in tables
    ]
    return PlanServeResult(
        plan=plan,
        warnings=tuple(warnings),
        validation=serving_validation(
            gpus,
            precision,
            calibrated=request.host_capacity_rps is not None or request.host_ms is not None,
            engine=engine_profile.name,
            measured=used[0] if used else None,
            mig=best is not None and any(g.server.kind == "mig" for g in best.groups),
        ),
    )


def _prices_text(price_usd_per_gpu_hour: float | None, *, spot: bool) -> str:
    """Where plan serve's prices come from: the catalog's, or ``--price`` for every GPU."""
    market = "catalog spot" if spot else "catalog on-demand"
    if price_usd_per_gpu_hour is None:
        return market
    from gpucast.inputs.serving import PRICE_REPLACES_SPOT

    replaced = f"; {PRICE_REPLACES_SPOT}" if spot else ""
    return (
        f"{price_usd_per_gpu_hour:.4g} US$/h per GPU for every GPU type (given with --price; a "
        f"MIG slice its share){replaced}; CPU servers at the {market} price"
    )


def _estimated_servers(servers: Sequence[Any], catalog: Any, *, gpus_given: bool = False) -> str:
    """The server options priced from offers whose prices were never read from a source
    (``Offer.price_estimated``), named with their offer; "" when none (``gpus_given``: the
    GPUs are priced by ``--price``, only CPU servers can be)."""
    from gpucast.domain.catalog import estimated_prices_note

    guessed = {(o.provider, o.region, o.instance_type) for o in catalog.offers if o.price_estimated}
    return estimated_prices_note(
        f"{s.name} ({s.provider}/{s.region} {s.instance_type})"
        for s in servers
        if s.kind != "mig"
        and not (gpus_given and s.kind == "gpu")
        and (s.provider, s.region, s.instance_type) in guessed
    )


def mig_mix_inputs(request: PlanServeRequest) -> MigMixInputs:
    """What ``plan serve --mix`` plans with: the GPU, its price, the slice types, every full
    layout (and the whole GPU), the homogeneous baselines and each model's latency curve per
    slice type (see :mod:`gpucast.plan.mig_serve`)."""
    from gpucast.app.mig_serve import DEFAULT_MIX_GPU, MigMixInputs
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.domain.serving_plan import ModelLoad
    from gpucast.inputs import serving as inputs
    from gpucast.plan.mig_serve import WHOLE, Layout, MixModel, SliceType
    from gpucast.predict.mig import (
        check_layout,
        enumerate_layouts,
        layout_prices_usd_per_hour,
        placeable_profiles,
    )

    catalog = load_catalog(offers_file(request.offers_file))
    gpu_name = request.gpus[0] if request.gpus else DEFAULT_MIX_GPU
    spec = catalog.gpu(gpu_name)
    precision = request.precision or serving_engine(request.engine).default_precision
    _check_units(precision, spec, catalog)
    # one error without placements, naming --gpu where the user gave it
    usable = placeable_profiles(
        spec, catalog.mig_gpu_names(), field="gpu" if request.gpus else "mig layout"
    )
    mix = [MixModel(name=n, rate_rps=r, slo_s=s) for n, r, s in request.mix_models]
    options, targets = inputs.build_server_options(
        gpus=[spec.name],
        no_cpu=True,
        providers=request.providers,
        regions=request.regions,
        spot=request.spot,
        catalog=catalog,
        price_usd_per_gpu_hour=request.price,
    )
    whole = next(o for o in options if o.kind == "gpu")
    price = whole.price_usd_per_hour
    keep = {p.name for p in usable}
    kept = [o for o in options if o.kind == "gpu" or o.mig_profile in keep]
    engine_profile = serving_engine(request.engine)
    precision = request.precision or engine_profile.default_precision
    engine = inputs.serving_efficiency(request.engine, precision)
    max_batch = max(request.max_batch_sizes)
    loads = [ModelLoad(name=m.name, rate_rps=m.rate_rps) for m in mix]
    profiles = inputs.model_profiles(
        loads, kept, targets, precision=precision, max_batch=max_batch,
        measured=inputs.read_latency_tables(request.latency_tables), engine=engine.value,
        workload_options=dict(request.workload_options),
    )  # fmt: skip
    by_slice = {
        (model, WHOLE if o.kind == "gpu" else str(o.mig_profile)): prof
        for (model, name), prof in profiles.value.items()
        for o in kept
        if o.name == name
    }
    slice_types = {WHOLE: SliceType(name=WHOLE, memory_gib=spec.memory_gib)}
    slice_types |= {p.name: SliceType(name=p.name, memory_gib=p.memory_gib) for p in usable}
    whole_layout = Layout(label="whole GPU", slices=(WHOLE,), prices_usd_per_hour=(price,))

    def as_layout(names: list[str], label: str | None = None) -> Layout:
        placed = check_layout(spec, names)
        return Layout(
            label=label or " + ".join(placed.names),
            slices=placed.names,
            prices_usd_per_hour=layout_prices_usd_per_hour(
                price, [i.profile for i in placed.instances], slices=spec.mig_slices
            ),
        )

    layouts = [as_layout(list(lay.names)) for lay in enumerate_layouts(spec)] + [whole_layout]
    homogeneous = [
        as_layout([p.name] * p.max_instances, f"{p.max_instances}x {p.name}")
        for p in sorted(usable, key=lambda p: (p.compute_slices, p.memory_gib))
    ]
    return MigMixInputs(
        gpu=spec.name,
        gpu_given=bool(request.gpus),
        price_usd_per_hour=price,
        offer=f"{whole.provider} {whole.instance_type}",
        mix=tuple(mix),
        slice_types=slice_types,
        layouts=tuple(layouts),
        baselines=(*homogeneous, whole_layout),
        profiles=by_slice,
        latency_source=profiles.source,
        engine_source=engine.source,
        engine=engine_profile.name,
        precision=precision,
        max_batch=max_batch,
    )


def _plan_mig_serve(request: PlanServeRequest) -> PlanMigServeResult:
    """``plan serve --mix``: see :mod:`gpucast.plan.mig_serve`."""
    from gpucast.app.mig_serve import PlanMigServeResult
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs import serving as inputs
    from gpucast.plan.mig_serve import plan_mig_mix

    m_in = mig_mix_inputs(request)
    mix = m_in.mix
    traffic: dict[str, Any] = {}
    processes = []
    for k, m in enumerate(mix):
        stream = inputs.arrivals(request.arrivals, m.rate_rps, request.run_s, request.seed + k)
        traffic[m.name] = stream.times_s
        processes.append(f"{m.name}: {stream.source}")
    percentile = request.slo_percentile if request.slo_percentile is not None else 99.0
    plan = plan_mig_mix(
        mix,
        gpu=m_in.gpu,
        slice_types=m_in.slice_types,
        layouts=m_in.layouts,
        baselines=m_in.baselines,
        profiles=m_in.profiles,
        gpu_price_usd_per_hour=m_in.price_usd_per_hour,
        arrivals=traffic,
        horizon_s=request.run_s,
        max_batch=m_in.max_batch,
        target_attainment=percentile / 100.0,
        max_gpus=request.max_servers,
        seed=request.seed,
    )
    assumptions = {
        "gpu": f"{m_in.gpu}"
        + ("" if m_in.gpu_given else " (the default; --gpu picks another MIG GPU)"),
        "price": f"{m_in.price_usd_per_hour:.4g} US$/h per GPU ({m_in.offer}, "
        + ("spot" if request.spot else "on demand")
        + "); a slice costs its layout's share, max(compute/7, memory/8)",
        "layouts": f"{len(m_in.layouts) - 1} full MIG layouts of {m_in.gpu} "
        "(gpucast.predict.mig) and the whole GPU",
        "latency": m_in.latency_source,
        "engine": m_in.engine_source,
        "arrivals": "; ".join(processes),
        "target": f"p{percentile:g}: a choice meets the mix when {percentile:g}% of the "
        "requests finish within their model's SLO (--slo-percentile)",
        "simulation": f"{request.run_s:g} s per run in the event engine; slices as "
        "separate servers without the network/PCIe stages (a request's transfer time is "
        "added to its round trip)",
    }
    validation = serving_validation(
        [m_in.gpu], m_in.precision, calibrated=False, engine=m_in.engine, mig=True
    )
    validation["PARIS + ELSA vs homogeneous layouts"] = validation_for(
        "mig-paris-elsa", [m_in.gpu], m_in.precision, 1
    ).text()
    return PlanMigServeResult(plan=plan, assumptions=assumptions, validation=validation)


# -- simulate serve -------------------------------------------------------------------------
_MIG_HELP = (
    "Run on MIG slices of this profile (--servers of them, each priced at its share of the "
    "GPU), e.g. 1g.10gb."
)


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
        from gpucast.app._llm_load import check_think_needs_clients
        from gpucast.inputs.serving import check_arrival_kind

        if self.cache_fraction is not None and not (
            math.isfinite(self.cache_fraction) and 0.0 < self.cache_fraction <= 1.0
        ):
            raise InvalidSpecError(
                "cache-fraction", "must be in (0, 1]", got=self.cache_fraction,
                fix="e.g. --cache-fraction 0.1, or leave it out (every row in HBM)",
            )  # fmt: skip
        if not (math.isfinite(self.dram_fraction) and 0.0 <= self.dram_fraction <= 1.0):
            raise InvalidSpecError(
                "dram-fraction", "must be in [0, 1]", got=self.dram_fraction,
                fix="e.g. --dram-fraction 0.5 (the rest on NVMe), or leave it out (1: all)",
            )  # fmt: skip
        check_cache_policy(self.cache_policy, "cache-policy")

        if not self.model:
            raise InvalidSpecError("model", "must not be empty", fix="e.g. --model resnet50")
        _check_positive("rate", self.rate, "requests per second", "e.g. --rate 150")
        check_arrival_kind(self.arrivals)
        is_trace = self.arrivals.startswith("trace:")
        if self.clients is not None:
            _check_at_least("clients", self.clients, 1)
            if self.rate is not None or self.arrivals != "poisson":
                raise InvalidSpecError(
                    "clients",
                    "is a closed loop: its clients set the rate, not --rate or --arrivals",
                    fix="drop --rate/--arrivals, or drop --clients for open-loop traffic",
                )
        elif self.rate is None and not is_trace:
            raise InvalidSpecError(
                "rate", "is required (or --clients for a closed loop, or a trace)",
                fix="e.g. --rate 150",
            )  # fmt: skip
        if not (math.isfinite(self.think_ms) and self.think_ms >= 0):
            raise InvalidSpecError(
                "think-ms", "must be >= 0 ms", got=self.think_ms, fix="e.g. --think-ms 10"
            )
        check_think_needs_clients(self.think_ms, self.clients)
        _check_at_least("max-batch", self.max_batch, 1)
        if not (math.isfinite(self.max_delay_ms) and self.max_delay_ms >= 0):
            raise InvalidSpecError(
                "max-delay-ms", "must be >= 0", got=self.max_delay_ms, fix="e.g. --max-delay-ms 10"
            )
        for b in self.preferred:
            if isinstance(b, bool) or not 1 <= b <= self.max_batch:
                fits = sorted({max(1, self.max_batch // 2), self.max_batch})  # a fix that holds
                raise InvalidSpecError(
                    "preferred", f"must be between 1 and --max-batch {self.max_batch}",
                    got=list(self.preferred),
                    fix=f"e.g. --preferred {','.join(map(str, fits))}, or raise --max-batch",
                )  # fmt: skip
        if self.max_queue is not None:
            _check_at_least("max-queue", self.max_queue, 1)
        _check_positive("queue-timeout-ms", self.queue_timeout_ms, "ms",
                        "e.g. --queue-timeout-ms 100")  # fmt: skip
        _check_at_least("instances", self.instances, 1)
        _check_at_least("servers", self.servers, 1)
        _check_positive("duration-s", self.duration_s, "", "e.g. --duration-s 60")
        _check_positive("slo-ms", self.slo_ms, "", "e.g. --slo-ms 100")
        check_one_slo(self.slo, self.slo_ms, None)
        if self.slo is not None:
            parse_slo(self.slo)
        _check_engine(self.engine)
        _check_precision(self.precision)
        _check_positive("network-gbps", self.network_gbps, "Gbit/s", "e.g. --network-gbps 10")
        _check_positive("pcie-gbps", self.pcie_gbps, "GB/s", "e.g. --pcie-gbps 16")
        _check_positive("input-kb", self.input_kb, "KB", "e.g. --input-kb 150")
        check_price(self.price)
        check_seed(self.seed)
        _check_at_most("max-batch", self.max_batch, MAX_BATCH_SIZE)
        _check_at_most("max-delay-ms", self.max_delay_ms, MAX_DELAY_MS, "ms (a minute)")
        _check_at_most("servers", self.servers, MAX_SERVERS)
        _check_at_most("instances", self.instances, MAX_INSTANCES)
        _check_at_most("duration-s", self.duration_s, MAX_DURATION_S, "s (30 days)")
        _check_at_most("network-gbps", self.network_gbps, 1e5, "Gbit/s")
        _check_at_most("pcie-gbps", self.pcie_gbps, 1e4, "GB/s")
        _check_at_most("input-kb", self.input_kb, 1e7, "KB")
        _check_at_most("host-ms", self.host_ms, 1e6, "ms")
        _check_at_most("calibrate-p50-ms", self.calibrate_p50_ms, 1e6, "ms")
        check_simulated_requests(
            "rate", self.rate, self.run_s, self.allow_large, bytes_per_request=REQUEST_BYTES
        )
        _check_host_capacity(self.host_capacity_rps)
        _check_host_ms(self.host_ms)
        _check_at_least("host-concurrency", self.host_concurrency, 1)
        points = [parse_calibration_point(p) for p in self.calibrate_at]
        if self.calibrate_p50_ms is not None:
            _check_positive("calibrate-p50-ms", self.calibrate_p50_ms, "ms", "e.g. 33.9")
        if points and self.calibrate_p50_ms is None and len(points) < 2:
            raise InvalidSpecError(
                "calibrate-at",
                "needs a second load: --calibrate-p50-ms at this rate, or another --calibrate-at",
                fix="e.g. --calibrate-p50-ms 33.9 --calibrate-at 203=49.6",
            )
        if (self.calibrate_p50_ms is not None or points) and self.host_ms is not None:
            raise InvalidSpecError(
                "host-ms", "cannot be combined with a calibration (it is what is fitted)",
                fix="give the host time, or the measured median(s) to fit it from, not both",
            )  # fmt: skip
        if (self.calibrate_p50_ms is not None or points) and self.clients is not None:
            raise InvalidSpecError(
                "calibrate-p50-ms",
                "needs open-loop traffic at a known rate",
                fix="calibrate with --rate, then give the clients --host-ms and "
                "--host-capacity-rps",
            )
        if self.find_saturation and self.clients is not None:
            raise InvalidSpecError(
                "find-saturation", "offers ever higher open-loop rates; it has no closed loop",
                fix="drop --clients (the search uses --arrivals, default Poisson)",
            )  # fmt: skip
        check_seed(self.seed)
        _check_positive("deadline-ms", self.deadline_ms, "ms", "e.g. --deadline-ms 50")
        _check_at_most("deadline-ms", self.deadline_ms, 86_400_000.0, "ms (1 day)")
        if self.scheduler not in ("fifo", "edf", "priority"):
            raise InvalidSpecError(
                "scheduler", "must be fifo, edf or priority", got=self.scheduler, fix="e.g. edf"
            )
        classes = self.classes
        if self.scheduler != "fifo" and not classes and self.deadline_ms is None:
            raise InvalidSpecError(  # it was ignored without a word (QA 38 I #17)
                "scheduler", "orders requests by their deadlines or classes, and none is given",
                got=self.scheduler,
                fix="add --deadline-ms D or --request-class NAME:SHARE:DEADLINE_MS:PRIORITY,..., "
                "or drop --scheduler",
            )  # fmt: skip
        if classes and self.deadline_ms is not None:
            raise InvalidSpecError(
                "deadline-ms", "is per class with --request-class",
                fix="give each class its deadline (NAME:SHARE:DEADLINE_MS)",
            )  # fmt: skip
        if (classes or self.deadline_ms is not None) and (
            self.clients is not None
            or self.find_saturation
            or self.calibrate_p50_ms is not None
            or points
        ):
            raise InvalidSpecError(
                "request-class" if classes else "deadline-ms",
                "works with open-loop arrivals only (no --clients, --find-saturation or "
                "calibration)",
                fix="drop those options",
            )

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
            raise InvalidSpecError("request-class", "names must differ", got=list(names))
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


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServeResult:
    """The simulated serving run, what it ran on, and its warnings (skipped trace rows, an
    overloaded server, shed requests)."""

    request: SimulateServeRequest
    server: str  # e.g. "T4" or "A100-40GB/1g.10gb"
    serving: ServingResult
    batching: BatchingPolicy
    latency_curve: LatencyCurve
    host_capacity_rps: float | None
    warnings: tuple[str, ...] = ()
    #: model -> its validated error in this run's regime (GPU, precision)
    validation: Mapping[str, str] = field(default_factory=dict)
    arrival_process: str = ""
    engine: str = ""
    precision: str = "fp32"
    host_s: float = 0.0
    saturation: Saturation | None = None
    #: per request class (with --deadline-ms / --request-class): misses, worst latency
    classes: tuple[Any, ...] = ()  # gpucast.simulate.realtime.ClassOutcome
    scheduler: str | None = None
    #: with --cache-fraction: the tiers' lookup shares and miss bytes (CachedCurve)
    embedding_cache: Any = None

    @property
    def sources(self) -> dict[str, str]:
        return dict(self.serving.sources)

    def to_dict(self) -> dict[str, Any]:
        """What ``gpucast simulate serve --json`` prints: the run with a 30-bin timeline,
        the arrival process, the host path, the batching policy, the latency curve and,
        when searched, the saturation."""
        out: dict[str, Any] = dict(self.serving.to_dict(timeline_bins=30))
        out["arrival_process"] = self.arrival_process
        out["engine"] = self.engine
        out["precision"] = self.precision
        out["host_capacity_rps"] = self.host_capacity_rps
        out["host_s"] = self.host_s
        out["batching"] = self.batching.to_dict()
        out["latency_curve"] = self.latency_curve.to_dict()
        out["saturation"] = None if self.saturation is None else self.saturation.to_dict()
        out["validation"] = dict(self.validation)
        out["warnings"] = list(self.warnings)  # as a language model's run has them
        out["scheduler"] = self.scheduler
        out["classes"] = [dataclasses.asdict(c) for c in self.classes]
        out["embedding_cache"] = (
            None if self.embedding_cache is None else self.embedding_cache.to_dict()
        )
        target = self.request.slo_target
        out["slo_percentile"] = None if target is None else target[0]
        # the SLO's percentile is within it when at least that share of requests is (a
        # dropped request misses it)
        attained = out["slo_attainment"]
        out["slo_met"] = (
            None
            if target is None or attained is None or math.isnan(attained)
            else bool(attained >= target[0] / 100.0 - 1e-12)
        )
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per simulated server (device)."""
        import pandas as pd

        return pd.DataFrame([s.to_dict() for s in self.serving.servers])


def serving_validation(
    gpus: list[str],
    precision: str,
    *,
    calibrated: bool,
    engine: str = "eager-pytorch",
    measured: Path | None = None,
    mig: bool = False,
) -> dict[str, str]:
    """The serving models' validated error for these GPUs (catalog names) and precision: the
    latency model with a host path given or calibrated, else as predicted from the catalog
    alone; and the engine's device throughput where it was checked. ``measured``: a latency
    table gives the device's batch latency, so no roofline curve's error applies to it.
    ``mig``: MIG slices serve, so the slice speed's validation too."""
    from gpucast.catalog.validation import validation_for

    names = sorted(set(gpus))
    key = "serving" if calibrated else "serving-uncalibrated"
    text = validation_for(key, names, precision, 1).text()
    if measured is not None:
        out = {
            "serving latency (your latency table + simulator)": f"the batch latencies are "
            f"{measured.name}'s, as measured; the simulator's queueing was validated with the "
            f"roofline curve: {text}"
        }
    else:
        out = {"serving latency (roofline curve + simulator)": text}
        if engine != "eager-pytorch":
            out[f"device throughput ({engine})"] = validation_for(
                f"serving-engine:{engine}", names, precision, 1
            ).text()
    if mig:
        out["MIG slice speed"] = validation_for("mig-slice", names, precision, 1).text()
    return out


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
    import numpy as np

    from gpucast.catalog import load_catalog, offers_file
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.domain.serving import Deployment, ModelDeployment, ServerGroup, ServerSpec
    from gpucast.inputs import serving as inputs
    from gpucast.simulate.realtime import check_deadlines, deadline_outcomes
    from gpucast.simulate.serving import (
        analytic_capacity_rps,
        find_saturation,
        simulate_closed_loop,
        simulate_serving,
        with_host_path,
    )

    request = resolve(SimulateServeRequest, request, options, config)
    from gpucast.inputs.workload import check_workload_name

    check_workload_name(request.model, language_models=True, field="model")  # before profiling
    policy = request.batching
    engine_profile = serving_engine(request.engine)
    precision = request.precision or engine_profile.default_precision
    catalog = load_catalog(offers_file(request.offers_file))
    _check_units(precision, catalog.gpu(request.gpu), catalog)
    server = inputs.gpu_server(
        catalog, request.gpu, request.mig, request.price, providers=request.providers,
        regions=request.regions, spot=request.spot,
    )  # fmt: skip
    sources: dict[str, str] = {"price": server.price.source}
    engine = inputs.serving_efficiency(request.engine, precision)
    work = inputs.inference_work(request.model, precision, dict(request.workload_options))
    if request.input_kb is not None:
        work = dataclasses.replace(
            work,
            input_bytes_per_sample=request.input_kb * 1e3,
            input_float_elements_per_sample=None,
        )
        sources["payload"] = f"{request.input_kb:g} KB per request (given)"
    else:
        sources["payload"] = inputs.payload_text(work, precision)
    table_warnings: list[str] = []
    if request.latency_table is not None:
        curve = inputs.read_latency_table(request.latency_table)
        table_warnings = inputs.latency_table_warnings(curve, policy.largest_batch, "latency-table")
    else:
        curve = inputs.roofline_curve(
            work, server.spec, precision, policy.largest_batch, mig=server.mig,
            engine=engine.value,
        )  # fmt: skip
        sources["engine"] = engine.source
    model_memory_gib = work.memory_gib(policy.largest_batch)
    slices = server.mig.max_instances if server.mig else 1
    gbps = request.network_gbps or (
        inputs.network_share_gbps(server.offer) / slices if server.offer else None
    )
    overhead = inputs.request_overhead(work, gbps or math.inf) if gbps else None
    pcie = request.pcie_gbps or inputs.pcie_gbps(server.spec).value / slices
    miss_bytes = 0.0  # a request's embedding misses read over PCIe (--cache-fraction)
    cached = None
    if request.cache_fraction is not None:
        from gpucast.inputs.embeddings import embedding_cache_curve

        cached = embedding_cache_curve(
            curve,
            request.model,
            dict(request.workload_options),
            precision,
            server.spec,
            cache_fraction=request.cache_fraction,
            dram_fraction=request.dram_fraction,
            policy=request.cache_policy,
            data_dir=request.data_dir,
        )
        from gpucast.catalog.validation import validation_for

        curve = cached.value.curve
        miss_bytes = cached.value.pcie_bytes_per_request
        checked = validation_for("embedding-serving-cache", [server.spec.name], precision)
        sources["embedding cache"] = f"{cached.source}; validated: {checked.text()}"
    sources["latency"] = curve.source
    if overhead is not None:
        sources["network"] = overhead.source
    sources["pcie"] = (
        f"{pcie:g} GB/s (given)" if request.pcie_gbps else inputs.pcie_gbps(server.spec).source
    )
    if miss_bytes:
        sources["pcie"] += (
            f"; its share counts the input copies and the embedding misses ({miss_bytes:,.0f} B "
            "a request from host memory, read inside the device time)"
        )
    closed = request.closed_loop
    traffic: dict[str, Any] = {}
    trace = None
    horizon_s = request.run_s
    if closed is None:
        arrivals = inputs.arrivals(request.arrivals, request.rate, request.arrivals_s, request.seed)
        traffic = {request.model: arrivals.times_s}
        horizon_s = arrivals.duration_s  # a trace shorter than --duration-s ends with it
        process = arrivals.source
        trace = arrivals if request.arrivals.startswith("trace:") else None
        warnings = list(arrivals.warnings)
    else:
        process = closed.describe()
        warnings = []
    sources["arrivals"] = process
    if request.cache_fraction is None:  # the embedding cache's options, given without it
        ignored = []
        if request.dram_fraction != 1.0:
            ignored.append(f"--dram-fraction {request.dram_fraction:g}")
        if request.cache_policy != "lru":
            ignored.append(f"--cache-policy {request.cache_policy}")
        if ignored:
            warnings.append(
                f"{' and '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect "
                "without --cache-fraction (no embedding cache: every row is in HBM); add "
                "--cache-fraction to put a recommendation model's rows behind an HBM cache"
            )
    elif request.dram_fraction < request.cache_fraction:
        warnings.append(
            f"--dram-fraction {request.dram_fraction:g} is below --cache-fraction "
            f"{request.cache_fraction:g}: the HBM cache's rows are also in DRAM (inclusive "
            "tiers), so DRAM serves no lookups and every HBM miss reads the SSD; give "
            f"--dram-fraction >= {request.cache_fraction:g} for a DRAM tier"
        )
    if request.cache_fraction is not None:
        from gpucast.inputs.embeddings import fitted_window

        if fitted_window(request.data_dir, "2022") is None:  # QA 39: an assumption line only
            warnings.append(
                f"--cache-fraction {request.cache_fraction:g} is priced at uniform access (hit "
                "rate = the cache's share of the rows): no dlrm_datasets locality data; "
                "production lookups are skewed, so the misses are likely overstated; pass "
                "--data-dir ../shared/data (or set $GPUCAST_SHARED_DATA)"
            )
    base = ModelDeployment(
        model=request.model,
        latency=curve,
        batching=policy,
        instances=request.instances,
        memory_gib=model_memory_gib,
        request_overhead_s=overhead.value if overhead is not None else 0.0,
        input_bytes=work.input_bytes_per_sample,
    )
    deployments: tuple[ModelDeployment, ...] = (base,)
    scheduler: str | None = None
    if request.deadline_ms is not None:
        deployments = (dataclasses.replace(base, deadline_s=request.deadline_ms / 1e3),)
        scheduler = request.scheduler
    elif request.classes:
        deployments = tuple(
            dataclasses.replace(
                base, model=f"{request.model}/{name}", deadline_s=deadline_s, priority=priority
            )
            for name, _share, deadline_s, priority in request.classes
        )
        scheduler = request.scheduler
        # each request of the stream belongs to a class with its share's probability
        # (a thinned Poisson stream is Poisson)
        times = traffic.pop(request.model)
        pick = np.random.default_rng(request.seed).choice(
            len(deployments), size=times.size, p=[c[1] for c in request.classes]
        )
        for k, dep in enumerate(deployments):
            traffic[dep.model] = times[pick == k]
    spec = ServerSpec(
        name=server.name,
        kind=server.kind,
        memory_gib=server.memory_gib,
        price_usd_per_hour=server.price.value,
        models=deployments,
        host_capacity_rps=request.host_capacity_rps,
        host_s=(request.host_ms or 0.0) / 1e3,
        host_concurrency=request.host_concurrency,
        network_gbps=gbps,
        pcie_gbps=pcie,
    )
    if request.host_capacity_rps is not None:
        sources["host_capacity"] = inputs.given_host_capacity(request.host_capacity_rps).source
    if request.host_ms is not None:
        sources["host_time"] = f"{request.host_ms:g} ms on the host path alone (given)"
    deployment = Deployment(
        groups=(ServerGroup(server=spec, count=request.servers),),
        scheduling=scheduler or "none",  # type: ignore[arg-type]
    )
    if scheduler is not None:  # named as the flag the deadlines came from
        check_deadlines(deployment, "request-class" if request.classes else "deadline-ms")
    host_capacity_rps = request.host_capacity_rps
    if request.calibrate_p50_ms is not None or request.calibrate_at:
        points: list[tuple[Mapping[str, Any], float]] = []
        if request.calibrate_p50_ms is not None:
            points.append((traffic, request.calibrate_p50_ms / 1e3))
        for rate, p50_s in request.calibration_points:
            other = inputs.arrivals(request.arrivals, rate, request.arrivals_s, request.seed)
            points.append(({request.model: other.times_s}, p50_s))
        fit = inputs.calibrated_host_path(
            deployment, points, capacity_rps=request.host_capacity_rps, seed=request.seed
        )
        host_capacity_rps = fit.value.capacity_rps
        deployment = with_host_path(
            deployment, capacity_rps=host_capacity_rps, host_s=fit.value.host_s
        )
        sources["host_path"] = fit.source
    slo_s = None if request.slo_target is None else request.slo_target[1]
    if closed is None:
        result = simulate_serving(
            deployment, traffic, seed=request.seed, slo_s=slo_s,
            horizon_s=horizon_s, sources=sources,
        )  # fmt: skip
    else:
        result = simulate_closed_loop(
            deployment, {request.model: closed}, request.run_s, seed=request.seed,
            slo_s=slo_s, sources=sources,
        )  # fmt: skip
    if miss_bytes:
        result = _with_pcie_misses(result, miss_bytes, pcie)
    saturation = None
    if request.find_saturation:
        kind = request.arrivals if closed is None else "poisson"
        at = inputs.arrivals_at(kind, request.seed, trace=trace)
        saturation = find_saturation(
            deployment,
            lambda rate, span: {request.model: at(rate, span)},
            duration_s=request.run_s,
            start_rps=analytic_capacity_rps(deployment, request.model),
            seed=request.seed,
        )
    warnings += table_warnings + _overload_warnings(result, searched=saturation is not None)
    classes = deadline_outcomes(result, deployment) if scheduler is not None else ()
    host_s = deployment.groups[0].server.host_s
    return SimulateServeResult(
        request=request,
        server=server.name,
        serving=result,
        batching=policy,
        latency_curve=curve,
        host_capacity_rps=host_capacity_rps,
        warnings=tuple(warnings),
        validation=serving_validation(
            [server.name.split("/")[0]],
            precision,
            calibrated=host_capacity_rps is not None or host_s > 0,
            engine=engine_profile.name,
            measured=request.latency_table,
            mig=server.kind == "mig",
        ),
        arrival_process=process,
        engine=engine_profile.name,
        precision=precision,
        host_s=host_s,
        saturation=saturation,
        classes=classes,
        scheduler=scheduler,
        embedding_cache=None if cached is None else cached.value,
    )


def _with_pcie_misses(
    result: ServingResult, bytes_per_request: float, pcie_gbps: float
) -> ServingResult:
    """Each server's PCIe share with its embedding misses added: the simulator queues the
    input copies on the link, and the misses' reads sit inside the device time."""
    h = result.horizon_s
    servers = tuple(
        dataclasses.replace(
            s,
            stages=dict(s.stages)
            | {
                "pcie": min(
                    1.0,
                    s.stages.get("pcie", 0.0)
                    + (s.requests * bytes_per_request / (pcie_gbps * 1e9 * h) if h > 0 else 0.0),
                )
            },
        )
        for s in result.servers
    )
    return dataclasses.replace(result, servers=servers)


def _steady_backlog(result: ServingResult, served_rps: float) -> float:
    """The requests a server that keeps up still holds at the horizon (Little's law at the
    served requests' median latency), plus the one arriving at it: a backlog beyond this
    grew; one within it is the tail of the traffic (a trace ends on an arrival, so its last
    request is always in flight: a 3-request trace read as overloaded, QA 38 I #6)."""
    import numpy as np

    done = result.arrival_s + result.latency_s  # NaN where dropped
    ran = (result.arrival_s >= result.warmup_s) & (done <= result.horizon_s)
    lat = result.latency_s[ran]
    return 1.0 + (served_rps * float(np.median(lat)) if lat.size else 0.0)


def _overload_warnings(result: ServingResult, *, searched: bool = False) -> list[str]:
    """Shed requests and a backlog the servers did not clear, in words (``searched``: the
    saturation search ran, so its result is pointed to, not the flag)."""
    out: list[str] = []
    counts = result.counts()
    offered, served = result.offered_rps(), result.throughput_rps()
    if counts["dropped"]:
        out.append(
            f"{counts['dropped']} of {counts['requests']} requests were rejected "
            f"({counts.get('queue_full', 0)} queue full, {counts.get('timeout', 0)} timed out): "
            "the servers shed load. Add servers or instances."
        )
    dropped_rps = counts["dropped"] / result.window_s if result.window_s > 0 else 0.0
    if (
        counts["requests"]
        and served + dropped_rps < 0.98 * offered
        and counts["in_flight"] > _steady_backlog(result, served)
    ):
        peak = _busiest_stage(result)
        if peak < BURST_BUSY_FRACTION:  # QA 38 I #14: a burst at the end, not a growing queue
            out.append(
                f"behind at the end: {offered:.1f} req/s offered, {served:.1f} served; "
                f"{counts['in_flight']} requests still queued or running when the run ended, "
                f"though no server or host-path stage was busy more than {peak:.0%} of it: a "
                "burst not yet cleared, not a queue that grows with the run. A longer "
                "--duration-s shows the latency bursts cause; add servers to absorb them."
            )
        else:
            out.append(
                f"overloaded: {offered:.1f} req/s offered, {served:.1f} served; "
                f"{counts['in_flight']} requests still queued or running at the end, latency "
                "grows with the run. Add servers, or "
                + ("see the saturation found below." if searched else "see --find-saturation.")
            )
    return out


#: A backlog at the horizon on servers busy less than this share of the run is a burst
#: they have not cleared yet: a queue that grows keeps its bottleneck busy nearly all the time.
BURST_BUSY_FRACTION = 0.9


def _busiest_stage(result: ServingResult) -> float:
    """The highest busy fraction of any server's GPU or host-path stage over the run."""
    return max((max(s.busy_fraction, *s.stages.values()) for s in result.servers), default=1.0)
