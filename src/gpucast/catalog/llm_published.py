"""Published LLM inference figures (``data/llm_infer_published.csv``): offline-batch
throughput and time to first token of catalog models on catalog GPUs, each row with its
engine version, source and date, to check ``predict infer`` against
(``benchmarks/llm_inference_published.py``) -- nothing is fitted on them."""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import (
    parse_bool,
    parse_date,
    parse_int,
    read_rows,
    require_float,
    require_text,
)
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.llm_infer import PublishedInference

_PATH = "llm_infer_published.csv"
COLUMNS = (
    "source", "engine", "engine_version", "gpu", "model", "precision", "kv_precision", "tp",
    "batch_size", "max_num_seqs", "input_len", "output_len", "metric", "published", "expressible",
    "source_url", "as_of",
)  # fmt: skip
_TEXT = ("source", "engine", "engine_version", "gpu", "model", "precision", "kv_precision")
_INTS = ("tp", "batch_size", "max_num_seqs", "input_len", "output_len")


def parse_published_inference(text: str, path: str = _PATH) -> tuple[PublishedInference, ...]:
    """The rows of CSV text in the format of ``data/llm_infer_published.csv``."""
    rows: list[PublishedInference] = []
    for line, row in read_rows(text, path, COLUMNS):
        try:
            cells = {c: require_text(row[c], path=path, line=line, column=c) for c in _TEXT}
            num = {c: parse_int(row[c], path=path, line=line, column=c, minimum=1) for c in _INTS}
            rows.append(
                PublishedInference(
                    source=cells["source"],
                    engine=cells["engine"],
                    engine_version=cells["engine_version"],
                    gpu=cells["gpu"],
                    model=cells["model"],
                    precision=cells["precision"],
                    kv_precision=cells["kv_precision"],
                    tp=num["tp"],
                    batch_size=num["batch_size"],
                    max_num_seqs=num["max_num_seqs"],
                    input_len=num["input_len"],
                    output_len=num["output_len"],
                    metric=require_text(row["metric"], path=path, line=line, column="metric"),
                    published=require_float(
                        row["published"], path=path, line=line, column="published"
                    ),
                    expressible=parse_bool(
                        row["expressible"], path=path, line=line, column="expressible"
                    ),
                    source_url=require_text(
                        row["source_url"], path=path, line=line, column="source_url"
                    ),
                    as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
                    note=row.get("note", ""),
                )
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
    if not rows:
        raise DataFormatError(path, "has no rows")
    return tuple(rows)


@functools.lru_cache(maxsize=1)
def load_published_inference() -> tuple[PublishedInference, ...]:
    """Every row of the built-in ``llm_infer_published.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_published_inference(text, _PATH)
