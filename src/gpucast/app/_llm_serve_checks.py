"""The checks and help texts the LLM serving requests share (``simulate serve`` and ``plan
serve`` for a model of ``catalog/data/llm_models.csv``): one model a run, positive and
bounded values, the deployment knobs (KV-cache block, preemption), the simulated-request
ceiling (:data:`LLM_REQUEST_BYTES`), and whether a run serves a language model at all
(:func:`is_llm_serving`, :func:`check_one_language_model`). Re-exported by
:mod:`gpucast.app.llm_serve`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_price, check_seed, check_simulated_requests
from gpucast.domain.llm_infer import check_precision

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
