"""Cold-start facts (``data/coldstart.csv``): storage classes and links (read bandwidth, GB/s)
and phase durations (s), one row each with its source and date; and published load times
of large models with their testbeds (``data/coldstart_published.csv``), to check the
cold-start model against (``benchmarks/coldstart_published.py``).

Parsing is strict (a bad cell names its file, line and column) and cached per process.
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
    require_float,
    require_text,
)
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.serverless import (
    FACT_KINDS,
    ColdStartFact,
    ColdStartFacts,
    FactKind,
    PublishedColdStart,
)

COLDSTART_COLUMNS = ("name", "kind", "value", "source_url", "as_of")
_PATH = "coldstart.csv"


def parse_coldstart(text: str, path: str = _PATH) -> ColdStartFacts:
    """ColdStartFacts from CSV text in the format of ``data/coldstart.csv``."""
    rows: list[ColdStartFact] = []
    seen: dict[tuple[str, str], int] = {}
    for line, row in read_rows(text, path, COLDSTART_COLUMNS):
        name = require_text(row["name"], path=path, line=line, column="name").lower()
        kind = require_text(row["kind"], path=path, line=line, column="kind")
        if kind not in FACT_KINDS:
            raise DataFormatError(
                path, f"kind must be one of {', '.join(FACT_KINDS)}", line=line, column="kind"
            )
        try:
            fact = ColdStartFact(
                name=name,
                kind=cast(FactKind, kind),
                value=require_float(
                    row["value"], path=path, line=line, column="value", positive=kind != "phase"
                ),
                source_url=require_text(
                    row["source_url"], path=path, line=line, column="source_url"
                ),
                as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
                note=row.get("note", ""),
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
        if (kind, name) in seen:
            raise DataFormatError(
                path, f"{kind} {name!r} is already on line {seen[(kind, name)]}", line=line
            )
        seen[(kind, name)] = line
        rows.append(fact)
    if not rows:
        raise DataFormatError(path, "has no rows")
    return ColdStartFacts(rows=tuple(rows))


@functools.lru_cache(maxsize=1)
def load_coldstart_facts() -> ColdStartFacts:
    """Every row of the built-in ``coldstart.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_coldstart(text, _PATH)


PUBLISHED_COLUMNS = (
    "source", "model", "gpu", "instance", "storage", "network_gbps", "loader", "concurrency",
    "measured", "published_s", "expressible", "source_url", "as_of",
)  # fmt: skip
_PUBLISHED_PATH = "coldstart_published.csv"


def parse_published_coldstarts(
    text: str, path: str = _PUBLISHED_PATH
) -> tuple[PublishedColdStart, ...]:
    """The rows of CSV text in the format of ``data/coldstart_published.csv``."""
    rows: list[PublishedColdStart] = []
    for line, row in read_rows(text, path, PUBLISHED_COLUMNS):

        def text_of(column: str, row: dict[str, str] = row, line: int = line) -> str:
            return require_text(row[column], path=path, line=line, column=column)

        concurrency = row["concurrency"]
        try:
            rows.append(
                PublishedColdStart(
                    source=text_of("source"),
                    model=text_of("model"),
                    gpu=text_of("gpu"),
                    instance=row["instance"].lower() or None,
                    storage=text_of("storage").lower(),
                    network_gbps=parse_float(
                        row["network_gbps"],
                        path=path,
                        line=line,
                        column="network_gbps",
                        optional=True,
                    ),
                    loader=text_of("loader"),
                    concurrency=parse_int(
                        concurrency, path=path, line=line, column="concurrency", minimum=1
                    )
                    if concurrency
                    else None,
                    measured=text_of("measured"),
                    published_s=require_float(
                        row["published_s"], path=path, line=line, column="published_s"
                    ),
                    expressible=parse_bool(
                        row["expressible"], path=path, line=line, column="expressible"
                    ),
                    source_url=text_of("source_url"),
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
def load_published_coldstarts() -> tuple[PublishedColdStart, ...]:
    """Every row of the built-in ``coldstart_published.csv``."""
    text = (
        resources.files("gpucast.catalog")
        .joinpath("data", _PUBLISHED_PATH)
        .read_text(encoding="utf-8")
    )
    return parse_published_coldstarts(text, _PUBLISHED_PATH)
