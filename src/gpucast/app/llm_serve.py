"""``gpucast.simulate_llm_serve`` and ``gpucast.plan_llm_serve``: serving a language model.

``gpucast simulate serve --model NAME`` and ``gpucast plan serve --model NAME`` run these when
``NAME`` is a model of ``catalog/data/llm_models.csv`` (:func:`is_llm_serving`); CNNs and
other workloads keep the request-level path of :mod:`gpucast.app.serve`.

* :func:`simulate_llm_serve` -- token-level simulation of one deployment (replicas of ``tp``
  GPUs, or prefill and decode pools) under a request stream with token counts: TTFT, TPOT,
  inter-token and end-to-end latency percentiles, tokens/s, requests/s, goodput under the
  SLOs, cost per million tokens, preemptions (:mod:`gpucast.simulate.llm_serving`);
* :func:`plan_llm_serve` -- the cheapest GPU type x tensor-parallel degree x replicas (x
  disaggregation) meeting a TTFT and a TPOT SLO, with the cost vs latency front
  (:mod:`gpucast.plan.llm_serve`).

The iteration times come from the fitted engine profiles of ``gpucast predict infer``
(:func:`gpucast.predict.llm_infer.iteration_cost`), the requests from
:mod:`gpucast.inputs.llm_serving`, the prices from the catalog's offers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app import _llm_load as load
from gpucast.app._llm_load import check_load_options
from gpucast.app._request import resolve
from gpucast.domain.catalog import provider_option, region_option, spot_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import (
    allow_large_option,
    check_jobs,
    check_price,
    check_seed,
    check_simulated_requests,
    jobs_option,
)
from gpucast.domain.llm_infer import (
    COMPUTE_MODE,
    INFER_PRECISIONS,
    check_precision,
    check_weight_units,
    weights_run_on,
)
from gpucast.domain.options import lower_list, lower_text, option

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pandas as pd

    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.llm import TransformerSpec
    from gpucast.domain.llm_infer import EngineProfile
    from gpucast.domain.llm_serving import IterationCost, LlmRequests
    from gpucast.plan.llm_serve import LlmServePlan
    from gpucast.simulate.llm_serving import LlmServingResult
    from gpucast.simulate.serving import Saturation

_ENGINES = "vllm, tensorrt-llm, deepspeed-mii, llama.cpp, eager-pytorch"
_LENGTH_HELP = "N, uniform:LO:HI or lognormal:MEDIAN:SIGMA"
_BLOCK_HELP = "KV-cache block, tokens."
_PREEMPTION_HELP = (
    "recompute | swap: what a sequence preempted for KV-cache blocks does (recompute its "
    "prompt, or swap its blocks to host memory over PCIe)."
)


def _one_model(value: Any) -> str:
    """``--model`` as the serving verbs take it: one name (a one-item list passes)."""
    if isinstance(value, list | tuple):
        if len(value) != 1:
            raise InvalidSpecError(
                "model", "takes one language model", got=list(value), fix="e.g. --model llama-3-8b"
            )
        value = value[0]
    return str(value)


def _positive(flag: str, value: float | None, what: str = "") -> None:
    if value is not None and (isinstance(value, bool) or not (math.isfinite(value) and value > 0)):
        raise InvalidSpecError(flag, f"must be > 0{what}", got=value, fix=f"e.g. --{flag} 1")


def _no_rate_in_the_name(model: str) -> None:
    """``simulate serve --model NAME:RATE`` (plan serve's form): one line naming --rate, not
    an unknown model."""
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.errors import UnknownModelError

    head, sep, tail = model.rpartition(":")
    if not sep:
        return
    try:
        llm_model(model)
    except UnknownModelError:
        try:
            llm_model(head)
        except UnknownModelError:
            return
        raise InvalidSpecError(
            "model",
            "takes no rate in simulate serve (NAME:RATE is plan serve's form)",
            got=model,
            fix=f"--model {head} --rate {tail}",
        ) from None


def _at_least(flag: str, value: int | None, low: int) -> None:
    if value is not None and (isinstance(value, bool) or value < low):
        raise InvalidSpecError(flag, f"must be an integer >= {low}", got=value,
                               fix=f"e.g. --{flag} {max(low, 1)}")  # fmt: skip


def _sampling_text(count: int, most: int) -> str:
    """How a run of more than ``most`` requests is searched (plan.llm_serve)."""
    return (
        f"{count:,} requests: each row simulates a share of its instances serving at least "
        f"{most:,} of them (round robin makes replicas alike; counts and tokens/s scaled to "
        "the whole), the pick all of them; GPU x degrees whose work alone costs more than a "
        "deployment found to meet the SLOs are not searched (a shorter --duration-s searches "
        "every one)"
    )


def _at_most_instances(flag: str, value: int, what: str = "") -> None:
    from gpucast.domain.llm_serving import MAX_SERVING_INSTANCES as most

    if value > most:
        raise InvalidSpecError(
            flag, f"must be at most {most} instances{what}", got=value,
            fix=f"round robin gives each replica 1/N of the stream: simulate {most} or fewer "
            "(e.g. one replica at --rate R/N)",
        )  # fmt: skip


def _check_common(request: Any) -> None:
    from gpucast.domain.llm_serving import parse_token_lengths  # numpy: not at CLI start-up

    for flag, value in (("input-len", request.input_len), ("output-len", request.output_len)):
        parse_token_lengths(value, flag)
    if request.precision is not None:
        check_precision("precision", request.precision)
    if request.kv_precision is not None:
        check_precision("kv-precision", request.kv_precision)
    _at_least("max-num-seqs", request.max_num_seqs, 1)
    _at_least("max-batched-tokens", request.max_batched_tokens, 1)
    _positive("slo-ttft-ms", request.slo_ttft_ms)
    _positive("slo-tpot-ms", request.slo_tpot_ms)
    _positive("rate", request.rate, " requests per second")
    _positive("time-scale", request.time_scale)
    _positive("duration-s", request.duration_s, " seconds")
    check_seed(request.seed)


def _check_deployment_knobs(request: Any) -> None:
    """What ``simulate serve`` and ``plan serve`` of a language model share beyond
    :func:`_check_common`: the KV-cache block and preemption of the scheduler, the price per
    GPU-hour and the KV-transfer link that override the catalog's."""
    from gpucast.domain.llm_serving import ENGINE_BLOCK_SIZES, PREEMPTION_MODES

    _positive("kv-link-gbps", request.kv_link_gbps, " Gbit/s")
    block = request.block_size
    if isinstance(block, bool) or block not in ENGINE_BLOCK_SIZES:
        raise InvalidSpecError(
            "block-size", f"must be one of {', '.join(map(str, ENGINE_BLOCK_SIZES))} tokens "
            "(vLLM's --block-size choices)", got=block, fix="e.g. --block-size 16",
        )  # fmt: skip
    if request.preemption not in PREEMPTION_MODES:
        raise InvalidSpecError(
            "preemption", f"must be one of {', '.join(PREEMPTION_MODES)}",
            got=request.preemption, fix="e.g. --preemption swap",
        )  # fmt: skip
    check_price(request.price)


#: Bytes one synthetic request costs the token-level simulator at its peak (arrival, token
#: counts, per-request state and results): measured, peak RSS 2.83 GB for 6,000,000 requests
#: against 0.14 GB for 6,000 (simulate serve --model llama-3-8b --gpu H100-SXM --rate 1e5
#: --duration-s 60 vs --rate 100), about 460 B each; a CNN's costs 96 (app/serve.py).
LLM_REQUEST_BYTES = 460


def _check_llm_requests(
    request: Any,
    rate_rps: float | None,
    allow_large: bool | None,
    *,
    field: str = "rate",
    fix: str = "lower --rate or --duration-s",
) -> None:
    """Synthetic arrivals (rate x duration, default 60 s) within the work ceiling of
    :func:`gpucast.domain.limits.check_simulated_requests`; a trace's requests are its rows.
    ``field`` / ``fix``: the flag the rate came from (plan serve's ``--model NAME:RATE``)."""
    from gpucast.inputs.llm_serving import DEFAULT_DURATION_S

    if request.arrivals.startswith("trace:") or getattr(request, "trace", None) is not None:
        return
    duration_s = DEFAULT_DURATION_S if request.duration_s is None else request.duration_s
    check_simulated_requests(
        field, rate_rps, duration_s, allow_large, bytes_per_request=LLM_REQUEST_BYTES, fix=fix
    )


def is_llm_serving(options: dict[str, Any], config: Path | str | None = None) -> bool:
    """Whether a serving verb's options (keyword or flag names, or the config file) name a
    language model of ``catalog/data/llm_models.csv`` as ``model``."""
    from gpucast.inputs.llm_serving import is_llm_model

    model = options.get("model", options.get("models"))
    if model is None and config is not None:
        from gpucast.app.config import read_config

        values = read_config(config)
        model = values.get("model", values.get("models"))
    return is_llm_model(model)


def check_one_language_model(
    verb: str, options: dict[str, Any], config: Path | str | None = None
) -> None:
    """One clear error where ``--model`` (or the config file's) gives several models and a
    language model of ``llm_models.csv`` is among them: the LLM verbs serve one language
    model a run; several models (``NAME:RATE,...``, ``plan serve``) are planned together at
    request level, for built-in workloads and ``module:factory`` models only."""
    from gpucast.domain.options import split_list
    from gpucast.inputs.llm_serving import is_llm_model

    model = options.get("model", options.get("models"))
    if model is None and config is not None:
        from gpucast.app.config import read_config

        values = read_config(config)
        model = values.get("model", values.get("models"))
    items = [
        str(item.get("name")) if isinstance(item, dict) else str(item) for item in split_list(model)
    ]
    llms = [item for item in items if is_llm_model(item)]
    if len(items) < 2 or not llms:
        return
    takes = (
        "plan serve takes one language model a run (served token by token, its TTFT and TPOT "
        "SLOs), several models (NAME:RATE,...) only of the built-in workloads (resnet50, "
        "bert-base, ...) and module:factory models, planned at request level"
        if verb == "plan serve"
        else f"{verb} takes one model a run"
    )
    raise InvalidSpecError(
        "model",
        f"{', '.join(llms)} {'is a language model' if len(llms) == 1 else 'are language models'}"
        f" (catalog/data/llm_models.csv); {takes}",
        got=", ".join(items),
        fix=f"run {verb} once per language model, e.g. --model {llms[0]}",
    )


# -- simulate serve (LLM) --------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateLlmServeRequest:
    """A language model served on GPUs under a request stream (``gpucast simulate serve
    --model LLM``)."""

    VERB: ClassVar[str] = "simulate serve"

    model: str = option(
        help="A language model of catalog/data/llm_models.csv.", parse=_one_model,
        example="llama-3-8b",
    )  # fmt: skip
    gpu: str = option(help="Catalog GPU, e.g. H100-SXM.", example="H100-SXM")
    framework: str = option("vllm", help=f"Inference engine: {_ENGINES}.", example="vllm")
    tp: int | None = option(
        None, help="GPUs per replica (tensor parallel). Default: the fewest that hold it.",
        example="2",
    )  # fmt: skip
    precision: str | None = option(
        None, help=f"Weights: {', '.join(INFER_PRECISIONS)} (default: the engine's).",
        example="fp8", parse=lower_text,
    )  # fmt: skip
    kv_precision: str | None = option(
        None, parse=lower_text, help="KV-cache precision.", example="fp8"
    )
    arrivals: str = option(
        "poisson",
        help="poisson | constant | bursty | trace:FILE (an Azure LLM trace or an arrival_s CSV "
        "with prompt_tokens,output_tokens columns: its token counts; an Azure Functions trace "
        "or an arrival_s CSV alone: lengths from --input-len and --output-len).",
        example="trace:AzureLLMInferenceTrace_conv.csv",
    )
    rate: float | None = option(
        None, help="Requests/s (a trace: rescaled to it).", example="5"
    )  # fmt: skip
    time_scale: float | None = option(
        None, help="Replay the trace K times faster (2: twice the rate).", example="2"
    )
    duration_s: float | None = option(
        None, help="Seconds of arrivals (default: 60, a trace: all of it).", example="60"
    )
    input_len: str = option("1024", help=f"Prompt tokens: {_LENGTH_HELP}.", example="1024")
    output_len: str = option("256", help=f"Output tokens: {_LENGTH_HELP}.", example="256")
    replicas: int = option(1, help="Serving instances of tp GPUs (round robin).", example="2")
    prefill_instances: int = option(
        0, help="Disaggregated: prefill-only instances (with --decode-instances).", example="1"
    )
    decode_instances: int = option(0, help="Disaggregated: decode-only instances.", example="2")
    kv_link_gbps: float | None = option(
        None, help="KV-cache transfer link, in Gbit/s per GPU (gigabits per second, as NICs are "
        "rated; --pcie-gbps is GB/s) (default: the node's NIC share).",
        example="400",
    )  # fmt: skip
    max_num_seqs: int | None = option(
        None, help="Sequences per iteration (default: the engine's, vLLM 256).", example="128"
    )
    max_batched_tokens: int | None = option(
        None, help="Token budget per iteration (default: 2048 chunked, else max(context, 2048)).",
        example="4096",
    )  # fmt: skip
    block_size: int = option(16, help=_BLOCK_HELP, example="16")
    chunked_prefill: bool = option(False, help="Mix prompt chunks into decode iterations.")
    preemption: str = option("recompute", help=_PREEMPTION_HELP, example="swap")
    slo_ttft_ms: float | None = option(None, help="Time-to-first-token SLO, ms.", example="500")
    slo_tpot_ms: float | None = option(None, help="Time-per-output-token SLO, ms.", example="50")
    price: float | None = option(
        None, help="US$/h per GPU (default: the catalog's cheapest offer).", example="2.5"
    )
    providers: tuple[str, ...] = provider_option()
    regions: tuple[str, ...] = region_option()
    spot: bool = spot_option()
    horizon_s: float | None = option(
        None, help="Stop at this time (default: when every request is done).", example="600"
    )
    allow_large: bool = allow_large_option()
    seed: int = option(0, help="Same seed, same result.", example="0")
    clients: int | None = option(
        None, help="Closed loop: this many users, each sending its next request --think-ms "
        "after its last token (vLLM's --max-concurrency with no think time); instead of "
        "--rate.", example="16",
    )  # fmt: skip
    think_ms: float = option(
        0.0, help="Closed loop: think time after each response, ms (fixed).", example="500"
    )
    find_saturation: bool = option(
        False, help="Search the highest request rate the deployment holds (without --rate, "
        "the run is at that rate).",
    )  # fmt: skip
    band: bool = option(
        False,
        help="Also simulate at the edges of the engine's 80% iteration-time band (two more "
        "runs): TTFT/TPOT/latency percentiles and SLO attainment as an 80% interval.",
    )

    def __post_init__(self) -> None:
        from gpucast.inputs.serving import check_arrival_kind

        if not self.model:
            raise InvalidSpecError("model", "must not be empty", fix="e.g. --model llama-3-8b")
        _no_rate_in_the_name(self.model)
        check_arrival_kind(self.arrivals)
        _check_common(self)
        _at_least("tp", self.tp, 1)
        _at_least("replicas", self.replicas, 1)
        _at_least("prefill-instances", self.prefill_instances, 0)
        _at_least("decode-instances", self.decode_instances, 0)
        if (self.prefill_instances > 0) != (self.decode_instances > 0):
            raise InvalidSpecError(
                "prefill-instances", "and --decode-instances go together",
                fix="e.g. --prefill-instances 1 --decode-instances 2",
            )  # fmt: skip
        if self.prefill_instances and self.replicas != 1:
            raise InvalidSpecError(
                "replicas", "does not apply to disaggregated serving (its instances are "
                "--prefill-instances + --decode-instances)", got=self.replicas,
                fix="drop --replicas, or drop --prefill-instances / --decode-instances",
            )  # fmt: skip
        _at_most_instances("replicas", self.replicas)
        _at_most_instances("prefill-instances", self.prefill_instances + self.decode_instances,
                           " (with --decode-instances)")  # fmt: skip
        _check_deployment_knobs(self)
        _positive("horizon-s", self.horizon_s, " seconds")
        check_load_options(self)
        _check_llm_requests(self, self.rate, self.allow_large)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateLlmServeResult:
    """The simulated run, the deployment and where every input came from."""

    request: SimulateLlmServeRequest
    serving: LlmServingResult
    deployment: str
    tp: int
    precision: str
    scheduler: dict[str, Any]
    iteration: dict[str, Any]
    assumptions: dict[str, str]
    warnings: tuple[str, ...] = ()
    validation: dict[str, str] = field(default_factory=dict)
    #: ``--band``: the runs with every iteration at the band's lower / upper factor
    band: tuple[float, float, LlmServingResult, LlmServingResult] | None = None
    #: the requests' arrival process, as ``simulate serve`` names it for a CNN
    arrival_process: str = ""
    #: ``--find-saturation``: the highest rate held, the probes (the CNN path's result type)
    saturation: Saturation | None = None
    #: ``--clients``: the users, the rate they achieved, Little's law (:mod:`._llm_load`)
    closed_loop: dict[str, Any] | None = None

    def band_dict(self) -> dict[str, Any] | None:
        """``--band``: per latency percentile and for SLO attainment and tokens/s, the values
        of the fast and the slow edge runs (an 80% interval when the engine's error is one
        factor on every iteration, as the validation measured it)."""
        if self.band is None:
            return None
        low, high, fast, slow = self.band
        a: dict[str, Any] = fast.to_dict()
        b: dict[str, Any] = slow.to_dict()
        out: dict[str, Any] = {"iteration_factor": [low, high]}
        for key in ("ttft_s", "tpot_s", "latency_s"):
            out[key] = {q: [a[key][q], b[key][q]] for q in ("p50", "p90", "p99")}
        out["slo_attainment"] = [b["slo_attainment"], a["slo_attainment"]]
        out["tokens_per_s"] = [b["tokens_per_s"], a["tokens_per_s"]]
        return out

    def band_text(self) -> str | None:
        """``--band`` in one line: TTFT and TPOT p50 / p99 at the fast and slow edges (ms)."""
        band = self.band_dict()
        if band is None:
            return None
        low, high = band["iteration_factor"]
        edges = "  ".join(
            f"{label} p50 [{_ms_pair(band[key]['p50'])}] p99 [{_ms_pair(band[key]['p99'])}]"
            for label, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"))
        )
        return f"80% band (iterations x{low:.2f} .. x{high:.2f}): {edges} ms"

    def rate_window_text(self) -> str:
        """Which seconds the throughput, goodput and cost per token are measured over
        (:attr:`~gpucast.simulate.llm_serving.LlmServingResult.rate_window_s`)."""
        window = self.serving.rate_window_s
        if window is None:
            return f"over the whole run ({self.serving.span_s:.1f} s)"
        lo, hi = window
        return (
            f"over {lo:.1f}-{hi:.1f} s, the steady part of the run (the warm-up and the drain "
            "after the last arrival left out)"
        )

    def instance_lines(self, limit: int = 8) -> list[str]:
        """The instances in words: one line each up to ``limit`` of them, else one line per
        role with the range over its instances (``--json`` keeps every one)."""
        stats = self.serving.instances
        if len(stats) <= limit:
            return [
                f"{s.role} #{s.replica}: busy {s.busy_fraction:.0%}, {s.requests} requests, "
                f"peak KV {s.peak_kv_utilisation:.0%}, {s.preemptions} preemptions"
                + (f", KV link busy {s.link_busy_fraction:.0%}" if s.role == "prefill" else "")
                for s in stats
            ]
        lines = []
        for role in dict.fromkeys(s.role for s in stats):
            group = [s for s in stats if s.role == role]
            busy = [s.busy_fraction for s in group]
            reqs = [s.requests for s in group]
            lines.append(
                f"{role}: {len(group)} instances, busy {min(busy):.0%}-{max(busy):.0%}, "
                f"{min(reqs)}-{max(reqs)} requests each, peak KV up to "
                f"{max(s.peak_kv_utilisation for s in group):.0%}, "
                f"{sum(s.preemptions for s in group)} preemptions in all (--json: each)"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """``simulate serve --json`` for a language model: the fields of the CNN result
        (requests, served, dropped, in_flight, latency_s, offered_rps, throughput_rps,
        horizon_s, slo_*, cost_*, mean_batch_size, arrival_process, engine, models, servers,
        seed, sources, timeline, validation; not its host path, latency curve, request classes
        or saturation) plus TTFT / TPOT / ITL percentiles, tokens/s, goodput, cost per million
        tokens, drops and preemptions."""
        out = dict(self.serving.to_dict(timeline_bins=30))
        req = self.request
        per_model = ("requests", "served", "dropped", "in_flight", "latency_s", "offered_rps",
                     "throughput_rps", "slo_attainment")  # fmt: skip
        out["models"] = {req.model: {key: out[key] for key in per_model}}
        out.update(
            arrival_process=self.arrival_process,
            engine=req.framework,
            model=req.model,
            gpu=req.gpu,
            framework=req.framework,
            tp=self.tp,
            precision=self.precision,
            deployment=self.deployment,
            seed=req.seed,
            batching=self.scheduler,
            iteration_cost=self.iteration,
            assumptions=dict(self.assumptions),
            warnings=list(self.warnings),
            validation=dict(self.validation),
        )
        band = self.band_dict()
        if band is not None:
            out["band_80"] = band
        out["saturation"] = None if self.saturation is None else self.saturation.to_dict()
        out["closed_loop"] = self.closed_loop
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per request: arrival, tokens, TTFT, TPOT, latency, status, preemptions."""
        import pandas as pd

        s = self.serving
        r = s.requests
        return pd.DataFrame(
            {
                "arrival_s": r.arrival_s,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "ttft_s": s.ttft_s,
                "tpot_s": s.tpot_s,
                "latency_s": s.latency_s,
                "status": s.status,
                "preemptions": s.preemptions,
            }
        )


def llm_validation(engine: str, gpu: str, precision: str, tp: int) -> dict[str, str]:
    """The validated errors an LLM serving figure rests on: the engine's iteration times
    (LLM-Inference-Bench) with their 80% band (:func:`gpucast.app.infer.infer_band`) and the
    simulator's agreement with them."""
    from gpucast.app.infer import infer_band
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.validation import validation_for

    band = infer_band(inference_engine(engine), load_catalog().gpu(gpu))
    low, high = band.latency
    return {
        f"iteration times (llm-infer:{engine})": validation_for(
            f"llm-infer:{engine}", [gpu], precision, tp
        ).text(),
        "iteration times, 80% band": f"x{low:.2f}-{high:.2f} of the engine's batch latency "
        f"({band.note}); the TTFT and TPOT percentiles are at the central iteration times "
        "(--band simulates the edges too)",
        "token-level simulator": validation_for("llm-serve", [gpu], precision, tp).text(),
    }


def precision_text(engine: EngineProfile, request: Any, gpus: list[GpuSpec]) -> str:
    """The weights' and KV cache's precisions a run or plan rests on (whether the engine's
    default), and how fp8 weights run on each of ``gpus`` without fp8 tensor cores."""
    from gpucast.predict.llm_infer import fp8_hardware_note, resolve_precisions

    weights, kv = resolve_precisions(engine, request.precision, request.kv_precision)
    text = f"{weights} weights / {kv} KV cache"
    text += "" if request.precision else " (the engine's default)"
    notes = dict.fromkeys(n for g in gpus if (n := fp8_hardware_note(g, weights)) is not None)
    return "; ".join([text, *notes])


def _given_lengths(request: Any) -> tuple[str, ...]:
    """The flags of ``--input-len`` / ``--output-len`` set to other than their defaults."""
    import dataclasses

    defaults = {f.name: f.default for f in dataclasses.fields(request)}
    return tuple(
        name.replace("_", "-")
        for name in ("input_len", "output_len")
        if getattr(request, name) != defaults[name]
    )


def _scheduler(request: Any, engine_max_seqs: int) -> Any:
    from gpucast.domain.llm_serving import SchedulerConfig

    return SchedulerConfig(
        max_num_seqs=request.max_num_seqs or engine_max_seqs,
        max_batched_tokens=request.max_batched_tokens,
        block_size=request.block_size,
        chunked_prefill=request.chunked_prefill,
        preemption=request.preemption,
    )


def simulate_llm_serve(
    request: SimulateLlmServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> SimulateLlmServeResult:
    """TTFT, TPOT, latency percentiles, tokens/s, goodput and cost of serving a language model
    (see :class:`SimulateLlmServeRequest` and the module docstring)."""
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.llm_serving import Disaggregation, parse_token_lengths
    from gpucast.domain.provenance import Sourced
    from gpucast.domain.serving import ClosedLoop
    from gpucast.inputs import llm_serving as inputs
    from gpucast.simulate.llm_closed_loop import simulate_llm_closed_loop
    from gpucast.simulate.llm_serving import simulate_llm_serving

    request = resolve(SimulateLlmServeRequest, request, options, config)
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
        short = short_run_warning(
            _arrival_span_s(result.requests), p50 if result.finished.any() else None, "its"
        )
        warnings += short or unsteady_warning(result)
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


#: A queue grows when each second of arrivals adds at least this many seconds of wait: fewer
#: than about 98% of the offered requests are served, the saturation search's tolerance
#: (QA 35 N #12: 0.1 before, so llama-3-8b offered 15 req/s where it serves 14.5 ran 1,200 s to
#: a TTFT p50 of 93 s without a warning).
OVERLOAD_WAIT_GROWTH = 0.02


def short_run_warning(span_s: float, latency_p50_s: float | None, what: str) -> list[str]:
    """One line when the arrivals span less than two median request latencies: the batch
    never filled, and the rates (over :attr:`LlmServingResult.rate_window_s`, which then
    cannot leave the warm-up out) and latencies are a warm-up's, not a steady server's."""
    if latency_p50_s is None or not math.isfinite(latency_p50_s) or span_s <= 0:
        return []
    if span_s >= 2.0 * latency_p50_s:
        return []
    return [
        f"the arrivals span {span_s:.3g} s, less than two of {what} median request latencies "
        f"({latency_p50_s:.3g} s): the batches never filled, so its rates and latencies are a "
        f"warm-up's, not a steady server's; a --duration-s of at least "
        f"{math.ceil(8 * latency_p50_s):,} s (8 latencies) measures them"
    ]


#: A steady server serves what arrives: served requests/s this share off the requests
#: arriving over the rates' window means the requests in flight grew or shrank over it
#: (:func:`unsteady_warning`).
STEADY_GAP = 0.02
#: Median latencies a run spans for its rates to be steady within :data:`STEADY_GAP`: near
#: capacity a batch fills over several latencies and the requests in flight swing by tens
#: (llama-3-8b on an H100 at 13 req/s: 2-4% off at 120 s, within 1.4% from 240 s, seeds 0-2,
#: latency ~15 s).
STEADY_LATENCIES = 20


def unsteady_warning(result: LlmServingResult, what: str = "the run") -> list[str]:
    """One line when the run is too short to tell its steady rates: the requests/s served
    over :attr:`LlmServingResult.rate_window_s` is :data:`STEADY_GAP` or more off the
    requests arriving there (dropped ones left out) and the arrivals span fewer than
    :data:`STEADY_LATENCIES` median latencies of the window's requests. It says what a
    server that keeps up would read, and the --duration-s that measures it (QA 35 N #11:
    ``--rate 13`` read 11.86 of 12.35 req/s at 60 s, 13.06 of 13.12 at 600 s, US$ per
    million tokens a few % high, without a word)."""
    import numpy as np

    window, arriving = result.rate_window_s, result.window_arrival_rps()
    if window is None or not arriving:
        return []
    out = result.to_dict()
    served = float(out["throughput_rps"])  # type: ignore[arg-type]
    gap = served / arriving - 1.0
    lo, hi = window
    arrival = result.requests.arrival_s
    latency = result.latency_s[(arrival > lo) & (arrival <= hi) & result.finished]
    if abs(gap) < STEADY_GAP or latency.size == 0:
        return []
    typical = float(np.median(latency))
    need_s = STEADY_LATENCIES * typical
    if _arrival_span_s(result.requests) >= need_s:
        return []
    cost = float(out["cost_usd_per_million_tokens"])  # type: ignore[arg-type]
    return [
        f"{what} is too short to tell its steady rates: over its steady window "
        f"({lo:.1f}-{hi:.1f} s) it served {served:.2f} req/s of the {arriving:.2f} arriving "
        f"({abs(gap):.1%} {'under' if gap < 0 else 'over'}; {result.in_flight_at(lo):,} "
        f"requests in flight at the window's start, {result.in_flight_at(hi):,} at its end: "
        f"{'the batch still filling, or a queue' if gap < 0 else 'a burst draining'}), so "
        f"the throughput and the {cost:.3f} US$ per million output tokens are off by about as "
        f"much; a server that keeps up serves what arrives ({arriving:.2f} req/s: "
        f"{cost * served / arriving:.3f} US$ per million output tokens). A --duration-s of at "
        f"least {math.ceil(need_s):,} s ({STEADY_LATENCIES} median latencies of the "
        f"window's requests, {typical:.3g} s) measures them"
    ]


def _overload_warning(result: LlmServingResult) -> list[str]:
    """A queue that grew while requests arrived, in words. The wait of a request is its TTFT
    (disaggregated: its end-to-end latency, which holds the wait for a decode slot too); the
    run is overloaded when the median wait of the last quarter of the arrivals exceeds that
    of the second quarter (after the warm-up) by at least :data:`OVERLOAD_WAIT_GROWTH` s per
    second between them, and is beyond what 90% of the second quarter waited: a drift of
    milliseconds on a loaded but stable server is not a growing queue, however many requests
    are in flight when the last arrives. Only the requests that could run count (dropped ones
    are warned about apart), and only those that arrived before ``--horizon-s`` stopped the
    run (one without a first token or a finish by then waited at least until it)."""
    import numpy as np

    from gpucast.simulate.llm_serving import DROPPED

    keep = result.status != DROPPED
    if result.until_s is not None:
        keep &= result.requests.arrival_s <= result.until_s
    arrival = result.requests.arrival_s[keep]
    if arrival.size < 20:
        return []
    disaggregated = any(s.role == "prefill" for s in result.instances)
    stop = (result.finish_s if disaggregated else result.first_token_s)[keep]
    if result.until_s is not None:
        stop = np.where(np.isnan(stop), result.until_s, stop)
    if np.isnan(stop).any():  # pragma: no cover - every request runs to its end otherwise
        return []
    wait = stop - arrival
    q = arrival.size // 4
    second, last = wait[q : 2 * q], wait[arrival.size - q :]
    early, late = float(np.median(second)), float(np.median(last))
    between = float(np.median(arrival[arrival.size - q :]) - np.median(arrival[q : 2 * q]))
    growth = late - early
    if between <= 0 or growth < OVERLOAD_WAIT_GROWTH * between:
        return _horizon_queue_warning(result, float(np.median(arrival[q : 2 * q])))
    if late <= float(np.percentile(second, 90)):
        return _horizon_queue_warning(result, float(np.median(arrival[q : 2 * q])))
    end = float(arrival.max())
    left = int(np.count_nonzero(~(result.finish_s[keep] <= end)))
    summary = result.to_dict()
    what = "end-to-end latency" if disaggregated else "TTFT"
    return [
        f"overloaded: the queue grows with the run: {what} p50 {early:.2f} s for the second "
        f"quarter of the arrivals, {late:.2f} s for the last ({growth / between:.2f} s more "
        f"per second of arrivals); {summary['throughput_rps']:.2f} req/s served of "
        f"{summary['offered_rps']:.2f} offered, {left} requests still queued or running when "
        "the last arrived. Add --replicas, a faster GPU or tensor parallelism, or see plan "
        "serve."
    ]


def _horizon_queue_warning(result: LlmServingResult, start_s: float) -> list[str]:
    """A queue that grows up to ``--horizon-s``, in words: there the waits of the requests
    without a first token are cut at the horizon (the later one arrived, the less it shows),
    so the median-TTFT test cannot see the queue; the requests waiting for their first token
    are counted instead, as the saturation search counts them
    (:func:`gpucast.simulate.llm_load.waiting_trend`), from ``start_s`` to the horizon."""
    import numpy as np

    from gpucast.simulate.llm_load import LLM_TOLERANCE, waiting_trend

    until = result.until_s
    if until is None or until <= start_s:
        return []
    arrived = result.requests.arrival_s <= until
    rate = float(np.count_nonzero(arrived)) / until
    growth = waiting_trend(result, start_s, until)
    if growth <= LLM_TOLERANCE * rate:
        return []
    waiting = int(np.count_nonzero(arrived & ~(result.first_token_s <= until)))
    return [
        f"overloaded: the queue grows with the run: the requests waiting for their first "
        f"token grow by {growth:.2f} a second from {start_s:.1f} s to --horizon-s {until:g} "
        f"({waiting} waiting then, of {rate:.2f} req/s arriving). Add --replicas, a faster GPU "
        "or tensor parallelism, or see plan serve."
    ]


# -- plan serve (LLM) ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanLlmServeRequest:
    """A language model to serve within TTFT and TPOT SLOs, and where to look
    (``gpucast plan serve --model LLM``)."""

    VERB: ClassVar[str] = "plan serve"

    model: str = option(
        help="A language model of catalog/data/llm_models.csv (NAME or NAME:RATE).",
        parse=_one_model, example="llama-3-70b",
    )  # fmt: skip
    rate: float | None = option(None, help="Requests/s (a trace: rescaled to it).", example="5")
    trace: Path | None = option(
        None,
        help="Azure LLM trace (its token counts), arrival_s CSV (with prompt_tokens,"
        "output_tokens: its token counts) or Azure Functions.",
        example="AzureLLMInferenceTrace_conv.csv",
    )  # fmt: skip
    arrivals: str = option(
        "poisson", help="poisson | constant | bursty | trace:FILE (as simulate serve).",
        example="bursty",
    )  # fmt: skip
    time_scale: float | None = option(
        None, help="Replay the trace K times faster.", example="2"
    )  # fmt: skip
    duration_s: float | None = option(
        None,
        help="Seconds of arrivals (default 60; a trace: its busiest hour, or its first D s "
        "when given).",
        example="600",
    )
    input_len: str = option("1024", help=f"Prompt tokens: {_LENGTH_HELP}.", example="1024")
    output_len: str = option("256", help=f"Output tokens: {_LENGTH_HELP}.", example="256")
    slo_ttft_ms: float | None = option(None, help="Time-to-first-token SLO, ms.", example="500")
    slo_tpot_ms: float | None = option(None, help="Time-per-output-token SLO, ms.", example="50")
    slo_percentile: float = option(99.0, help="Percentile both SLOs hold at.", example="99")
    gpus: tuple[str, ...] = option((), flag="gpu", help="Only these GPU types.", example="H100")
    providers: tuple[str, ...] = option(
        (), flag="provider", parse=lower_list, help="aws | gcp | azure.", example="aws"
    )
    regions: tuple[str, ...] = option((), flag="region", help="Region filter.", example="us-east-1")
    spot: bool = option(False, help="Spot prices.")
    framework: str = option("vllm", help=f"Inference engine: {_ENGINES}.", example="vllm")
    precision: str | None = option(None, parse=lower_text, help="Weight precision.", example="fp8")
    kv_precision: str | None = option(
        None, parse=lower_text, help="KV-cache precision.", example="fp8"
    )
    tps: tuple[int, ...] = option(
        (1, 2, 4, 8), flag="tp", help="Tensor-parallel degrees tried.", example="2,4,8"
    )
    max_replicas: int = option(1024, help="At most this many instances.", example="16")
    no_disaggregation: bool = option(False, help="Do not try prefill/decode pools (Splitwise).")
    chunked_prefill: bool = option(False, help="Mix prompt chunks into decode iterations.")
    max_num_seqs: int | None = option(None, help="Sequences per iteration.", example="128")
    max_batched_tokens: int | None = option(None, help="Tokens per iteration.", example="4096")
    block_size: int = option(16, help=_BLOCK_HELP, example="16")
    preemption: str = option("recompute", help=_PREEMPTION_HELP, example="swap")
    kv_link_gbps: float | None = option(
        None, help="KV-cache transfer link of the disaggregated rows, Gbit/s per GPU "
        "(default: each instance's NIC share).", example="400",
    )  # fmt: skip
    price: float | None = option(
        None, help="US$/h per GPU, every GPU type (default: each one's cheapest catalog "
        "offer, on demand or --spot).", example="2.5",
    )  # fmt: skip
    budget_usd_per_hour: float | None = option(None, help="Cost cap, US$/h.", example="50")
    seed: int = option(0, help="Same seed, same plan.", example="0")
    band: bool = option(
        False,
        help="Re-simulate the pick at the edges of the engine's 80% iteration-time band: "
        "whether it still meets the SLOs when the engine runs slower than predicted.",
    )
    jobs: int | None = jobs_option()

    def __post_init__(self) -> None:
        from gpucast.inputs.serving import check_arrival_kind

        if not self.model:
            raise InvalidSpecError("model", "must not be empty", fix="e.g. --model llama-3-70b")
        check_arrival_kind(self.arrivals)
        if self.trace is not None and self.arrivals != "poisson":
            raise InvalidSpecError(
                "trace", "and --arrivals name two request streams",
                fix="give --trace FILE or --arrivals trace:FILE, not both",
            )  # fmt: skip
        _name, rate = self.model_rate
        if rate is not None and self.rate is not None:
            raise InvalidSpecError("rate", f"is given twice ({self.model} and --rate)")
        if rate is not None:
            from gpucast.domain.serving_plan import check_model_rate

            check_model_rate(self.model.rpartition(":")[0], rate, example=5)
        _check_common(self)
        if self.slo_ttft_ms is None and self.slo_tpot_ms is None:
            raise InvalidSpecError(
                "slo-ttft-ms", "is required (or --slo-tpot-ms, or both): a language model's SLOs "
                "are on the first token and the tokens after it",
                fix="e.g. --slo-ttft-ms 500 --slo-tpot-ms 50",
            )  # fmt: skip
        if not (math.isfinite(self.slo_percentile) and 0 < self.slo_percentile <= 100):
            raise InvalidSpecError(
                "slo-percentile", "must be in (0, 100]", got=self.slo_percentile, fix="e.g. 99"
            )
        if not self.tps:
            raise InvalidSpecError("tp", "is empty", fix="e.g. --tp 1,2,4,8")
        if self.no_disaggregation and self.kv_link_gbps is not None:
            raise InvalidSpecError(
                "kv-link-gbps", "prices the disaggregated rows, which --no-disaggregation drops",
                got=self.kv_link_gbps, fix="give one of --kv-link-gbps and --no-disaggregation",
            )  # fmt: skip
        for tp in self.tps:
            _at_least("tp", tp, 1)
        _at_least("max-replicas", self.max_replicas, 1)
        _at_most_instances("max-replicas", self.max_replicas)
        check_jobs(self.jobs)
        _positive("budget-usd-per-hour", self.budget_usd_per_hour, " US$/h")
        _check_deployment_knobs(self)
        if rate is not None:  # QA 38 I #8: the rate came from --model NAME:RATE, not --rate
            _check_llm_requests(
                self, rate, None, field="model",
                fix=f"lower the rate in --model {self.model.rpartition(':')[0]}:RATE, or "
                "--duration-s",
            )  # fmt: skip
        else:
            _check_llm_requests(self, self.rate, None)  # no --allow-large, as the CNN's

    @property
    def model_rate(self) -> tuple[str, float | None]:
        """``NAME`` or ``NAME:RATE`` -> (name, rate or None)."""
        from gpucast.catalog.llm import llm_model
        from gpucast.domain.errors import UnknownModelError

        try:
            llm_model(self.model)
        except UnknownModelError:
            head, sep, tail = self.model.rpartition(":")
            try:
                return (head, float(tail)) if sep and head else (self.model, None)
            except ValueError:
                return self.model, None
        return self.model, None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanLlmServeResult:
    """The plan, its sources and warnings."""

    request: PlanLlmServeRequest
    plan: LlmServePlan
    assumptions: dict[str, str]
    warnings: tuple[str, ...] = ()
    validation: dict[str, str] = field(default_factory=dict)

    @property
    def best(self) -> Any:
        return self.plan.best

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan
        req = self.request
        return {
            "kind": "llm-serve-plan",
            "model": req.model_rate[0],
            "slo": {
                "ttft_s": None if req.slo_ttft_ms is None else req.slo_ttft_ms / 1e3,
                "tpot_s": None if req.slo_tpot_ms is None else req.slo_tpot_ms / 1e3,
                "percentile": req.slo_percentile,
            },
            "recommended": plan.recommended,
            **({} if (no_pick := plan.no_pick_text()) is None else {"no_pick": no_pick}),
            "best": None if plan.best is None else plan.best.to_dict(),
            "pareto": list(plan.pareto),
            "candidates": [c.to_dict() for c in plan.candidates],
            "infeasible": list(plan.infeasible),
            "simulated": plan.simulated,
            "assumptions": dict(self.assumptions),
            "warnings": list(self.warnings),
            "validation": dict(self.validation),
            **({} if plan.best_band is None else {"best_band_80": plan.band_dict()}),
        }

    def band_text(self) -> str | None:
        """``--band`` in one line: the pick's SLO percentiles at the band's edges and whether
        it still meets the SLOs at the slow one."""
        band = self.plan.band_dict()
        if band is None:
            return None
        low, high = band["iteration_factor"]
        (t_fast, t_slow), (p_fast, p_slow) = band["ttft_s"], band["tpot_s"]
        still = band["meets_slo"][1]
        return (
            f"the pick with iterations x{low:.2f} .. x{high:.2f} (the engine's 80% band): TTFT "
            f"{t_fast * 1e3:.0f} .. {t_slow * 1e3:.0f} ms, TPOT {p_fast * 1e3:.1f} .. "
            f"{p_slow * 1e3:.1f} ms at the SLO percentile; "
            + ("still meets" if still else "misses")
            + " the SLOs at the slow edge"
        )

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        pareto = set(self.plan.pareto)
        rows = []
        for i, c in enumerate(self.plan.candidates):
            row = c.to_dict()
            row["pareto"] = i in pareto
            row["recommended"] = i == self.plan.recommended
            rows.append(row)
        return pd.DataFrame(rows)


def _band_of(engine: EngineProfile) -> Callable[[GpuSpec], tuple[float, float]]:
    """GPU -> ``engine``'s 80% iteration-time factors (:func:`gpucast.app.infer.infer_band`)."""
    from gpucast.app.infer import infer_band

    return lambda gpu: infer_band(engine, gpu).latency


def requests_text(out: Mapping[str, Any]) -> str:
    """What became of the requests, the preemptions and the mean decode batch: ``n/a`` when no
    decode step ran (one-token outputs), and the requests due after ``--horizon-s`` apart
    from those running at it."""
    late = out.get("not_arrived") or 0
    batch = out["mean_batch_size"]
    return (
        f"requests {out['requests']}: finished {out['finished']}, dropped {out['dropped']}, "
        f"running {out['running']}"
        + (f", {late} arriving after the horizon" if late else "")
        + f"; preemptions {out['preemptions']}; mean decode batch "
        + ("n/a (no decode steps)" if batch is None or batch != batch else f"{batch:.1f}")
    )


def cost_text(out: Mapping[str, Any]) -> str:
    """The price per hour and per million output tokens: ``n/a`` when no output token came
    within the run (a horizon before the first token) rather than an infinite price."""
    per_million = out["cost_usd_per_million_tokens"]
    tokens = (
        f"{per_million:.3f} US$ per million output tokens"
        if math.isfinite(per_million)
        else "US$ per million output tokens n/a (no output token within the horizon)"
    )
    return f"cost {out['cost_usd_per_hour']:.2f} US$/h, {tokens}"


def _ms_pair(values: list[float | None]) -> str:
    return ", ".join("-" if v is None or v != v else f"{v * 1e3:.1f}" for v in values)


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


def plan_llm_serve(
    request: PlanLlmServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> PlanLlmServeResult:
    """The cheapest GPU type x tensor-parallel degree x replicas (x disaggregation) that
    serves the requests within the SLOs, with the cost vs latency front (module docstring)."""
    from gpucast.app._workers import usable_cpus, worker_failures, worker_pool
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.llm_serving import parse_token_lengths
    from gpucast.domain.serving_plan import PLAN_TRACE_WINDOW_S
    from gpucast.inputs import llm_serving as inputs
    from gpucast.inputs.serving import PRICE_REPLACES_SPOT
    from gpucast.plan.llm_serve import SAMPLED_REQUESTS, plan_llm_serving
    from gpucast.simulate.llm_serving import PERCENTILE_RULE

    request = resolve(PlanLlmServeRequest, request, options, config)
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
    offers = inputs.gpu_offers(
        gpus=request.gpus, providers=request.providers, regions=request.regions,
        spot=request.spot, priced=request.price is not None,
    )  # fmt: skip
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
    mode = COMPUTE_MODE.get(request.precision or "", "")
    units = "fp8 tensor cores" if mode == "fp8" else f"{mode} units"
    # the GPUs asked for that are not tried, each with why (plan.infeasible lists them)
    skipped = inputs.unoffered_gpus(
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
        warnings=tuple(traffic.warnings) + tuple(_pick_warnings(plan, traffic.requests)),
        validation=validation,
    )


def _pick_warnings(plan: LlmServePlan, requests: LlmRequests) -> list[str]:
    """The pick's run too short to tell: a warm-up's latencies, or rates not yet steady."""
    best = plan.best
    if best is None:
        return []
    short = short_run_warning(_arrival_span_s(requests), best.latency_p50_s, "the pick's")
    if short or plan.best_result is None:
        return short
    return unsteady_warning(plan.best_result, "the pick's run")


def _arrival_span_s(requests: LlmRequests) -> float:
    arrival = requests.arrival_s
    return float(arrival[-1] - arrival[0]) if arrival.size else 0.0
