"""Request-level inference engines (``data/serving_engines.csv``) as ServingEngineProfiles.

One row per engine a CNN-style model is served with (eager PyTorch, TensorRT-class): the
precisions it runs, and where its efficiency figures come from. The figures are not copied
here: they are the fitted step-time model (``steptime.json``) and the fitted LLM engine rows
(``inference_engines.csv``), which :mod:`gpucast.inputs.serving` resolves. Parsing is strict
and cached per process; :func:`serving_engine` looks a name or alias up case-, dash- and
space-insensitively.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import claim_engine_names, parse_date, read_rows, require_text, split_bar
from gpucast.catalog._shipped import by_name_or_alias
from gpucast.domain.catalog import lookup_key
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownServingEngineError
from gpucast.domain.serving import ServingEngineProfile

SERVING_ENGINE_COLUMNS = (
    "name",
    "display_name",
    "aliases",
    "precisions",
    "default_precision",
    "gemm_efficiency_from",
    "stack",
    "source_url",
    "as_of",
)
_PATH = "serving_engines.csv"


def parse_serving_engines(text: str, path: str = _PATH) -> tuple[ServingEngineProfile, ...]:
    """ServingEngineProfiles from CSV text in the format of ``data/serving_engines.csv``."""
    engines: list[ServingEngineProfile] = []
    seen: dict[str, int] = {}
    for line, row in read_rows(text, path, SERVING_ENGINE_COLUMNS):
        name = require_text(row["name"], path=path, line=line, column="name")
        try:
            engine = ServingEngineProfile(
                name=name,
                display_name=require_text(
                    row["display_name"], path=path, line=line, column="display_name"
                ),
                aliases=split_bar(row["aliases"]),
                precisions=split_bar(row["precisions"]),
                default_precision=row["default_precision"],
                gemm_efficiency_from=require_text(
                    row["gemm_efficiency_from"],
                    path=path,
                    line=line,
                    column="gemm_efficiency_from",
                ),
                stack=require_text(row["stack"], path=path, line=line, column="stack"),
                vendors=split_bar(row.get("vendors", "")),  # empty or absent: any vendor
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
    if not engines:
        raise DataFormatError(path, "has no engine rows")
    return tuple(engines)


@functools.lru_cache(maxsize=1)
def load_serving_engines() -> tuple[ServingEngineProfile, ...]:
    """Every engine of the built-in ``serving_engines.csv``, in file order."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_serving_engines(text, _PATH)


def serving_engine(name: str) -> ServingEngineProfile:
    """The engine called ``name`` or one of its aliases (``trt``, ``pytorch``, ...)."""
    engines = load_serving_engines()
    return by_name_or_alias(
        engines,
        name,
        lambda e: (e.name, *e.aliases),
        lookup_key,
        lambda known: UnknownServingEngineError(
            name, known, fix=f"use --engine {' | '.join(known)}"
        ),
    )
