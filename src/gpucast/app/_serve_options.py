"""The option parsers, checks and limits that ``plan serve`` and ``simulate serve`` share:
the engine/precision help texts, the shared-host options (capacity, ms, concurrency), the
range checks (with the ceilings one serving request may describe), the calibration-point and
SLO parsers (:func:`parse_slo`, one for every serving verb), ``--model NAME:RATE`` parsing and
the hand-off of a language model to token-level serving (:func:`language_model_values`).
Re-exported by :mod:`gpucast.app.serve`, whose request classes are built from them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import fields_of, lower_text, option, split_list
from gpucast.domain.serving import SERVING_PRECISIONS
from gpucast.domain.serving_plan import ServeRequest
from gpucast.domain.workload import check_precision_units

if TYPE_CHECKING:
    from gpucast.domain.catalog import Catalog, GpuSpec


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
