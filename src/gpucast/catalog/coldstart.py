"""Cold-start facts (``data/coldstart.csv``): storage classes and links (read bandwidth, GB/s)
and phase durations (s), one row each with its source and date.

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import cast

from gpucast.catalog._csv import parse_date, read_rows, require_float, require_text
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.serverless import FACT_KINDS, ColdStartFact, ColdStartFacts, FactKind

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
