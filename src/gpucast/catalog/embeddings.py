"""Recommendation models by their embedding tables (``data/embedding_tables.csv``).

Shipped: ``dlrm-dcnv2`` (the MLPerf Training reference, Criteo 1TB multi-hot), ``wide-deep``
(NVIDIA DeepLearningExamples' TensorFlow2 Wide & Deep on Outbrain: 16 deep tables and the
wide part's 16 dim-1 tables) and ``two-tower`` (TorchRec's retrieval example: user and item
tables, two MLP towers). One row per (model, table): ``rows``, ``dim``, ``pooling`` (mean
lookups per sample) and the model's dense part (``dense_params``,
``dense_train_flops_per_sample``, ``global_batch``, repeated on each row and checked to agree),
each with ``source_url`` and ``as_of``. A user's own tables (``--tables FILE``) use the same
columns; only ``table``, ``rows``, ``dim`` and ``pooling`` are required there. An optional
``locality`` column gives a table its own access pattern (a ``dlrm_datasets`` window --
``2021``, ``2022`` or ``2022/<trace>`` -- or a Zipf exponent such as ``1.05``); tables
without one share the plan's one hit-rate curve.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import parse_float, parse_int, read_rows, require_float, require_text
from gpucast.domain.embeddings import LOCALITY_FIX, AccessLocality, EmbeddingTable, RecModel
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownModelError

TABLE_COLUMNS = ("table", "rows", "dim", "pooling")
MODEL_COLUMNS = ("dense_params", "dense_train_flops_per_sample", "global_batch")
CATALOG_COLUMNS = ("model", *TABLE_COLUMNS, *MODEL_COLUMNS, "source_url", "as_of")
#: every column the loader reads; any other is reported (a misspelt ``locality`` or
#: ``dense_params`` would otherwise leave its tables on the defaults without a word)
READ_COLUMNS = (*CATALOG_COLUMNS, "locality")


def parse_rec_models(
    text: str, path: str, *, required: tuple[str, ...] = CATALOG_COLUMNS, default_model: str = ""
) -> tuple[RecModel, ...]:
    """Models from CSV text; a malformed cell names the file, line and column."""
    tables: dict[str, list[EmbeddingTable]] = {}
    dense: dict[str, tuple[float, float, int, str]] = {}
    for line, row in read_rows(text, path, required):
        model = row.get("model") or default_model
        model = require_text(model, path=path, line=line, column="model")
        name = require_text(row["table"], path=path, line=line, column="table")
        table = EmbeddingTable(
            name=name,
            rows=parse_int(row["rows"], path=path, line=line, column="rows", minimum=1),
            dim=parse_int(row["dim"], path=path, line=line, column="dim", minimum=1),
            pooling=require_float(row["pooling"], path=path, line=line, column="pooling"),
            locality=_locality(row.get("locality", ""), path=path, line=line),
        )
        if any(t.name == name for t in tables.get(model, [])):
            raise DataFormatError(
                path, f"second row for table {name!r}", line=line, column="table",
                fix="give each table one row: rename one of them, or merge the two",
            )  # fmt: skip
        tables.setdefault(model, []).append(table)
        params = parse_float(
            row.get("dense_params", ""), path=path, line=line, column="dense_params",
            optional=True, positive=False,
        )  # fmt: skip
        flops = parse_float(
            row.get("dense_train_flops_per_sample", ""), path=path, line=line,
            column="dense_train_flops_per_sample", optional=True, positive=False,
        )  # fmt: skip
        batch_text = row.get("global_batch", "")
        batch = (
            parse_int(batch_text, path=path, line=line, column="global_batch", minimum=1)
            if batch_text
            else 0
        )
        facts = (params or 0.0, flops or 0.0, batch, row.get("source_url", ""))
        if model in dense and dense[model][:3] != facts[:3] and any(facts[:3]):
            raise DataFormatError(
                path,
                f"dense facts differ from the first row of model {model!r}",
                line=line,
                fix="repeat the model's dense_params, FLOPs and global_batch on every row",
            )
        dense.setdefault(model, facts)
    return tuple(
        RecModel(
            name=m,
            tables=tuple(ts),
            dense_params=dense[m][0],
            dense_train_flops_per_sample=dense[m][1],
            global_batch=dense[m][2] or 1,
            source_url=dense[m][3],
        )
        for m, ts in tables.items()
    )


def _locality(text: str, *, path: str, line: int) -> AccessLocality | None:
    """The optional ``locality`` cell: a dlrm_datasets window (``2022``, ``2021/<trace>``) or
    a Zipf exponent; empty: the plan's one global curve."""
    if not text.strip():
        return None
    try:
        return AccessLocality.parse(text)
    except InvalidSpecError as error:
        problem = error.message.removeprefix("locality: ")
        raise DataFormatError(
            path, problem, line=line, column="locality", fix=error.fix or LOCALITY_FIX
        ) from None


@functools.lru_cache(maxsize=1)
def load_rec_models() -> tuple[RecModel, ...]:
    """The shipped models (cached)."""
    text = resources.files("gpucast.catalog").joinpath("data", "embedding_tables.csv")
    return parse_rec_models(text.read_text(encoding="utf-8"), "catalog/data/embedding_tables.csv")


def rec_model(name: str) -> RecModel:
    """A shipped model by name (case-insensitive)."""
    models = load_rec_models()
    for m in models:
        if m.name.lower() == name.lower():
            return m
    raise UnknownModelError(
        name,
        [m.name for m in models],
        fix="pass --tables FILE with columns table,rows,dim,pooling for your own tables",
    )
