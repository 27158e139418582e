"""Published language-model hyper-parameters (``data/llm_models.csv``) as TransformerSpecs.

One row per model, with the ``config.json`` or paper it comes from (``source_url``) and the
date it was read (``as_of``). Parsing is strict (every bad cell names its line and column) and
cached per process; :func:`llm_model` looks a name up case-, dash- and space-insensitively and
lists the close matches when it is unknown.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import cast

from gpucast.catalog._csv import (
    parse_bool,
    parse_date,
    parse_float,
    parse_int,
    read_rows,
    require_text,
)
from gpucast.catalog._intervals import parse_interval_rows
from gpucast.domain.catalog import lookup_key
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownModelError
from gpucast.domain.llm import (
    ATTENTION_BIASES,
    MODEL_KINDS,
    NORM_TYPES,
    POSITION_TYPES,
    AttentionBias,
    ModelKind,
    NormType,
    PositionType,
    TransformerSpec,
)
from gpucast.predict.intervals import IntervalTable

LLM_COLUMNS = (
    "name",
    "kind",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn_hidden",
    "vocab",
    "max_context",
    "activation",
    "gated_mlp",
    "n_experts",
    "experts_per_token",
    "tied_embeddings",
    "norm",
    "position",
    "attention_bias",
    "mlp_bias",
    "lm_head_bias",
    "parallel_block",
    "published_params",
    "published_active_params",
    "source_url",
    "as_of",
)
_PATH = "llm_models.csv"


def _choice(value: str, choices: tuple[str, ...], *, path: str, line: int, column: str) -> str:
    if value not in choices:
        raise DataFormatError(
            path,
            f"must be one of {', '.join(choices)}, got {value!r}",
            line=line,
            column=column,
        )
    return value


def parse_llm_models(text: str, path: str = _PATH) -> tuple[TransformerSpec, ...]:
    """TransformerSpecs from CSV text in the format of ``data/llm_models.csv``."""
    specs: list[TransformerSpec] = []
    seen: dict[str, int] = {}
    for line, row in read_rows(text, path, LLM_COLUMNS):

        def whole(column: str, _row: dict[str, str] = row, _line: int = line) -> int:
            return parse_int(_row[column], path=path, line=_line, column=column, minimum=1)

        def flag(column: str, _row: dict[str, str] = row, _line: int = line) -> bool:
            return parse_bool(_row[column], path=path, line=_line, column=column)

        def count(column: str, _row: dict[str, str] = row, _line: int = line) -> float | None:
            return parse_float(_row[column], path=path, line=_line, column=column, optional=True)

        def pick(
            column: str, choices: tuple[str, ...], _row: dict[str, str] = row, _line: int = line
        ) -> str:
            return _choice(_row[column], choices, path=path, line=_line, column=column)

        name = require_text(row["name"], path=path, line=line, column="name")
        key = lookup_key(name)
        if key in seen:
            raise DataFormatError(
                path, f"model {name!r} is already on line {seen[key]}", line=line, column="name"
            )
        seen[key] = line
        try:
            spec = TransformerSpec(
                name=name,
                kind=cast(ModelKind, pick("kind", MODEL_KINDS)),
                layers=whole("layers"),
                hidden=whole("hidden"),
                heads=whole("heads"),
                kv_heads=whole("kv_heads"),
                head_dim=whole("head_dim"),
                ffn_hidden=whole("ffn_hidden"),
                vocab=whole("vocab"),
                max_context=whole("max_context"),
                pretrain_seq_len=(  # optional column (a user's file may lack it)
                    whole("pretrain_seq_len") if row.get("pretrain_seq_len", "").strip() else None
                ),
                activation=require_text(
                    row["activation"], path=path, line=line, column="activation"
                ),
                gated_mlp=flag("gated_mlp"),
                n_experts=whole("n_experts"),
                experts_per_token=whole("experts_per_token"),
                tied_embeddings=flag("tied_embeddings"),
                norm=cast(NormType, pick("norm", NORM_TYPES)),
                position=cast(PositionType, pick("position", POSITION_TYPES)),
                attention_bias=cast(AttentionBias, pick("attention_bias", ATTENTION_BIASES)),
                mlp_bias=flag("mlp_bias"),
                lm_head_bias=flag("lm_head_bias"),
                parallel_block=flag("parallel_block"),
                published_params=count("published_params"),
                published_active_params=count("published_active_params"),
                source_url=require_text(
                    row["source_url"], path=path, line=line, column="source_url"
                ),
                as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
        specs.append(spec)
    return tuple(specs)


@functools.lru_cache(maxsize=1)
def load_llm_models() -> tuple[TransformerSpec, ...]:
    """Every model of the built-in ``llm_models.csv``, in file order."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_llm_models(text, _PATH)


_HF = "https://huggingface.co/"


def hf_repo(spec: TransformerSpec) -> str | None:
    """The Hugging Face repository (``org/name``) of a model whose source is its
    ``config.json`` there, e.g. ``meta-llama/Llama-2-7b-hf``; ``None`` otherwise."""
    if not spec.source_url.startswith(_HF):
        return None
    parts = spec.source_url[len(_HF) :].split("/")
    return f"{parts[0]}/{parts[1]}" if len(parts) >= 2 and parts[0] and parts[1] else None


def llm_model(name: str) -> TransformerSpec:
    """The model called ``name`` (case-, dash-, underscore- and space-insensitive), or by its
    Hugging Face repository (``meta-llama/Llama-2-7b-hf``)."""
    key = lookup_key(name)
    models = load_llm_models()
    for spec in models:
        if lookup_key(spec.name) == key:
            return spec
    for spec in models:
        repo = hf_repo(spec)
        if repo is not None and lookup_key(repo) == key:
            return spec
    raise UnknownModelError(
        name, [m.name for m in models], fix="see catalog/data/llm_models.csv for the models"
    )


_TRAIN_INTERVALS_PATH = "llm_train_intervals.csv"


def parse_llm_train_intervals(
    text: str, path: str = _TRAIN_INTERVALS_PATH
) -> tuple[IntervalTable, dict[str, str]]:
    """(the bands of LLM training step times, what each rests on by regime) from CSV text in
    the format of ``data/llm_train_intervals.csv`` (the columns of
    :func:`gpucast.catalog._intervals.parse_interval_rows`; regimes ``llm_train/tuned`` and
    ``llm_train/any_stack``) -- ``benchmarks/steptime_accuracy.py --section llm
    --intervals``'s output."""
    table, rows = parse_interval_rows(text, path)
    return table, {row["name"].strip(): row["source"].strip() for _, row in rows}


@functools.lru_cache(maxsize=1)
def load_llm_train_intervals() -> tuple[IntervalTable, dict[str, str]]:
    """The built-in ``llm_train_intervals.csv`` (:func:`parse_llm_train_intervals`)."""
    path = _TRAIN_INTERVALS_PATH
    text = resources.files("gpucast.catalog").joinpath("data", path).read_text(encoding="utf-8")
    return parse_llm_train_intervals(text, path)
