"""LLM inference engines (``data/inference_engines.csv``) as EngineProfiles.

One row per engine: its structure (how it spreads a model over GPUs, how many sequences it
runs at once, how the LLM-Inference-Bench harness drove it), the efficiency parameters of
:mod:`gpucast.predict.llm_infer` with the ones fitted named in ``fitted_params`` (the others
are priors), what they were fitted on, a source and a date. ``benchmarks/
llm_inference_accuracy.py --profiles`` refits them and prints the rows; a test checks that
the file matches a refit on the published data. Parsing is strict and cached per process;
:func:`inference_engine` looks a name or alias up case-, dash- and space-insensitively.
"""

from __future__ import annotations

import dataclasses
import functools
from importlib import resources
from typing import Any, cast

from gpucast.catalog._csv import (
    claim_engine_names,
    parse_bool,
    parse_date,
    parse_float,
    parse_int,
    read_rows,
    require_text,
    split_bar,
)
from gpucast.catalog._intervals import INTERVAL_COLUMNS as _BAND_COLUMNS
from gpucast.catalog._intervals import parse_interval_rows
from gpucast.catalog._shipped import by_name_or_alias
from gpucast.domain.catalog import lookup_key
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownEngineError
from gpucast.domain.llm_infer import (
    ENGINE_PARAMS,
    EngineProfile,
    InferPrecision,
    MemoryShare,
    MultiGpu,
)
from gpucast.predict.intervals import IntervalTable

ENGINE_COLUMNS = (
    "name",
    "display_name",
    "aliases",
    "bench_framework",
    "default_precision",
    "kv_precisions",
    "kv_source_url",
    "weight_precisions",
    "weight_source_url",
    "multi_gpu",
    "vendors",
    "max_sequences",
    "memory_fraction",
    "memory_share",
    "prompt_chunk_tokens",
    "bench_identical_prompts",
    *ENGINE_PARAMS,
    "fitted_params",
    "fitted_on",
    "source_url",
    "as_of",
)
_PATH = "inference_engines.csv"


def parse_inference_engines(text: str, path: str = _PATH) -> tuple[EngineProfile, ...]:
    """EngineProfiles from CSV text in the format of ``data/inference_engines.csv``."""
    engines: list[EngineProfile] = []
    seen: dict[str, int] = {}
    for line, row in read_rows(text, path, ENGINE_COLUMNS):
        name = require_text(row["name"], path=path, line=line, column="name")
        identical = parse_bool(
            row["bench_identical_prompts"], path=path, line=line, column="bench_identical_prompts"
        )
        params: dict[str, Any] = {}
        for column in ENGINE_PARAMS:
            value = parse_float(row[column], path=path, line=line, column=column, positive=False)
            params[column] = float(value if value is not None else 0.0)
        try:
            engine = EngineProfile(
                name=name,
                display_name=require_text(
                    row["display_name"], path=path, line=line, column="display_name"
                ),
                aliases=split_bar(row["aliases"]),
                bench_framework=row["bench_framework"],
                default_precision=cast(InferPrecision, row["default_precision"]),
                kv_precisions=split_bar(row["kv_precisions"]),
                kv_source_url=row["kv_source_url"],
                weight_precisions=split_bar(row["weight_precisions"]),
                weight_source_url=row["weight_source_url"],
                multi_gpu=cast(MultiGpu, row["multi_gpu"]),
                vendors=split_bar(row["vendors"]),
                max_sequences=parse_int(
                    row["max_sequences"], path=path, line=line, column="max_sequences", minimum=1
                ),
                memory_fraction=float(
                    parse_float(
                        row["memory_fraction"], path=path, line=line, column="memory_fraction"
                    )
                    or 0.0
                ),
                memory_share=cast(MemoryShare, row["memory_share"]),
                prompt_chunk_tokens=parse_int(
                    row["prompt_chunk_tokens"], path=path, line=line, column="prompt_chunk_tokens"
                ),
                bench_identical_prompts=identical,
                **params,
                fitted_params=split_bar(row["fitted_params"]),
                fitted_on=row["fitted_on"],
                source_url=require_text(
                    row["source_url"], path=path, line=line, column="source_url"
                ),
                as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
                note=row.get("note", ""),
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
        claim_engine_names(seen, (name, *engine.aliases), path=path, line=line)
        engines.append(engine)
    return tuple(engines)


GPU_FACTOR_COLUMNS = ("engine", "gpu", "latency_factor", "rows", "models", "source", "as_of")
_FACTORS_PATH = "llm_infer_gpu_factors.csv"


def parse_gpu_factors(
    text: str, engines: tuple[EngineProfile, ...], path: str = _FACTORS_PATH
) -> tuple[EngineProfile, ...]:
    """``engines`` with the latency factors of CSV text in the format of
    ``data/llm_infer_gpu_factors.csv`` (one row per engine and GPU with measurements of it off
    the fitted GPU: ``benchmarks/llm_inference_accuracy.py --gpu-factors``'s output)."""
    names = {e.name: e for e in engines}
    factors: dict[str, dict[str, float]] = {}
    sources: dict[str, dict[str, str]] = {}
    for line, row in read_rows(text, path, GPU_FACTOR_COLUMNS):
        engine = require_text(row["engine"], path=path, line=line, column="engine")
        if engine not in names:
            raise DataFormatError(
                path, f"engine {engine!r} is not in {_PATH}", line=line, column="engine"
            )
        gpu = require_text(row["gpu"], path=path, line=line, column="gpu")
        factor = parse_float(row["latency_factor"], path=path, line=line, column="latency_factor")
        n = parse_int(row["rows"], path=path, line=line, column="rows", minimum=1)
        if gpu in factors.get(engine, {}):
            raise DataFormatError(path, f"{engine} on {gpu} is listed twice", line=line)
        parse_date(row["as_of"], path=path, line=line, column="as_of")
        factors.setdefault(engine, {})[gpu] = float(factor or 0.0)
        sources.setdefault(engine, {})[gpu] = (
            f"{n} rows of {require_text(row['models'], path=path, line=line, column='models')}"
            f"; {require_text(row['source'], path=path, line=line, column='source')}"
        )
    try:
        return tuple(
            dataclasses.replace(
                e, gpu_factors=factors.get(e.name, {}), gpu_factor_sources=sources.get(e.name, {})
            )
            for e in engines
        )
    except InvalidSpecError as exc:
        raise DataFormatError(path, exc.message) from exc


def _data(name: str) -> str:
    return resources.files("gpucast.catalog").joinpath("data", name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def load_inference_engines() -> tuple[EngineProfile, ...]:
    """Every engine of the built-in ``inference_engines.csv``, in file order, with the
    latency factors of ``llm_infer_gpu_factors.csv``."""
    engines = parse_gpu_factors(_data(_FACTORS_PATH), parse_inference_engines(_data(_PATH), _PATH))
    ratio, source = _fp8_ratio()
    return tuple(
        dataclasses.replace(e, fp8_compute_ratio=ratio, fp8_source=source) for e in engines
    )


def _fp8_ratio() -> tuple[float, str]:
    """fp8's efficiency over the 16-bit one from the shipped step-time model (fitted on
    MLPerf Training fp8 runs), or 1 and no source without one."""
    from gpucast.catalog.steptime import shipped_step_time_model

    model = shipped_step_time_model()
    eta = None if model is None else model.eta_compute_
    if model is None or eta is None or not model.fp8_source_:
        return 1.0, ""
    return eta["fp8"] / eta["tensor16"], model.fp8_source_


def inference_engine(name: str) -> EngineProfile:
    """The engine called ``name`` or one of its aliases (``vllm``, ``trt-llm``, ...)."""
    engines = load_inference_engines()
    return by_name_or_alias(
        engines,
        name,
        lambda e: (e.name, *e.aliases),
        lookup_key,
        lambda known: UnknownEngineError(name, known, fix=f"use --framework {' | '.join(known)}"),
    )


INTERVAL_COLUMNS = (*_BAND_COLUMNS[:7], "fitted_gpu", "vendor", *_BAND_COLUMNS[7:])
_INTERVALS_PATH = "llm_infer_intervals.csv"


def parse_llm_infer_intervals(
    text: str, path: str = _INTERVALS_PATH
) -> tuple[IntervalTable, str, str]:
    """(the interval table, the GPU the engines were fitted on, its vendor) from CSV text in
    the format of ``data/llm_infer_intervals.csv``: one row per ``regime/quantity`` of
    :func:`gpucast.predict.llm_infer_intervals.interval_table` (the columns of
    :func:`gpucast.catalog._intervals.parse_interval_rows`, and the fitted GPU and its vendor)
    -- ``benchmarks/llm_inference_accuracy.py --intervals``'s output."""
    table, rows = parse_interval_rows(text, path, ("fitted_gpu", "vendor"))
    fitted = {
        (
            require_text(row["fitted_gpu"], path=path, line=line, column="fitted_gpu"),
            require_text(row["vendor"], path=path, line=line, column="vendor"),
        )
        for line, row in rows
    }
    if len(fitted) != 1:
        raise DataFormatError(path, "every row must name the same fitted_gpu and vendor")
    gpu, vendor = fitted.pop()
    return table, gpu, vendor


@functools.lru_cache(maxsize=1)
def load_llm_infer_intervals() -> tuple[IntervalTable, str, str]:
    """The built-in ``llm_infer_intervals.csv`` (:func:`parse_llm_infer_intervals`)."""
    text = (
        resources.files("gpucast.catalog")
        .joinpath("data", _INTERVALS_PATH)
        .read_text(encoding="utf-8")
    )
    return parse_llm_infer_intervals(text, _INTERVALS_PATH)
