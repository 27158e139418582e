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

This module holds the two verbs' request classes and their entry points; the work lives in
private parts, re-exported here (``__all__``): the shared checks and help texts
(``_llm_serve_checks``), the result types and their texts (``_llm_serve_results``), what both
verbs derive from a request (``_llm_serve_inputs``), a run's warnings (``_llm_serve_warnings``),
the simulation (``_llm_serve_simulate``) and the plan (``_llm_serve_plan``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gpucast.app._llm_load import check_load_options
from gpucast.app._llm_serve_checks import (
    _BLOCK_HELP,
    _ENGINES,
    _LENGTH_HELP,
    _PREEMPTION_HELP,
    LLM_REQUEST_BYTES,
    _at_least,
    _at_most_instances,
    _check_common,
    _check_deployment_knobs,
    _check_llm_requests,
    _no_rate_in_the_name,
    _one_model,
    _positive,
    check_one_language_model,
    is_llm_serving,
)
from gpucast.app._llm_serve_inputs import llm_validation, precision_text
from gpucast.app._llm_serve_plan import planned_llm_serve
from gpucast.app._llm_serve_results import (
    PlanLlmServeResult,
    SimulateLlmServeResult,
    cost_text,
    requests_text,
)
from gpucast.app._llm_serve_simulate import simulated_llm_serve
from gpucast.app._llm_serve_warnings import (
    OVERLOAD_WAIT_GROWTH,
    STEADY_GAP,
    STEADY_LATENCIES,
    short_run_warning,
    unsteady_warning,
)
from gpucast.app._request import resolve
from gpucast.domain.catalog import provider_option, region_option, spot_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import allow_large_option, check_jobs, jobs_option
from gpucast.domain.llm_infer import INFER_PRECISIONS
from gpucast.domain.options import documented, lower_list, lower_text, option

#: the public names, defined here or in the parts above (callers import them from here)
__all__ = [
    "LLM_REQUEST_BYTES",
    "OVERLOAD_WAIT_GROWTH",
    "STEADY_GAP",
    "STEADY_LATENCIES",
    "PlanLlmServeRequest",
    "PlanLlmServeResult",
    "SimulateLlmServeRequest",
    "SimulateLlmServeResult",
    "check_one_language_model",
    "cost_text",
    "is_llm_serving",
    "llm_validation",
    "plan_llm_serve",
    "precision_text",
    "requests_text",
    "short_run_warning",
    "simulate_llm_serve",
    "unsteady_warning",
]


# -- simulate serve (LLM) --------------------------------------------------------------------
@documented
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


def simulate_llm_serve(
    request: SimulateLlmServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> SimulateLlmServeResult:
    """TTFT, TPOT, latency percentiles, tokens/s, goodput and cost of serving a language model
    (see :class:`SimulateLlmServeRequest` and the module docstring)."""
    request = resolve(SimulateLlmServeRequest, request, options, config)
    return simulated_llm_serve(request)


# -- plan serve (LLM) ------------------------------------------------------------------------
@documented
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


def plan_llm_serve(
    request: PlanLlmServeRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> PlanLlmServeResult:
    """The cheapest GPU type x tensor-parallel degree x replicas (x disaggregation) that
    serves the requests within the SLOs, with the cost vs latency front (module docstring)."""
    request = resolve(PlanLlmServeRequest, request, options, config)
    return planned_llm_serve(request)
