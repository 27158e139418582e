"""Shipped 80% bands as CSV: one row per regime, the band as ratios of measured / predicted.

Every interval file of ``data/`` (``llm_infer_intervals.csv``, ``llm_train_intervals.csv``)
has the columns of :data:`INTERVAL_COLUMNS` -- the band, its quantile level, the held-out
predictions and their MAPE, the groups held out, a source and a date -- plus its own.
:func:`parse_interval_rows` checks them strictly and returns the
:class:`~gpucast.predict.intervals.IntervalTable` with each row for the file's own columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpucast.catalog._csv import parse_date, parse_int, read_rows, require_float, require_text
from gpucast.domain.errors import DataFormatError
from gpucast.predict.intervals import IntervalTable

INTERVAL_COLUMNS = (
    "name", "ratio_low", "ratio_high", "level", "n", "mape_pct", "groups", "source", "as_of",
)  # fmt: skip


def parse_interval_rows(
    text: str, path: str, extra: Sequence[str] = ()
) -> tuple[IntervalTable, list[tuple[int, dict[str, str]]]]:
    """(the table, each ``(line, row)``) from CSV ``text`` with :data:`INTERVAL_COLUMNS` and
    ``extra``; raises :class:`DataFormatError` naming the line and column of a bad cell."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    n: dict[str, int] = {}
    mape: dict[str, float] = {}
    level: dict[str, float] = {}
    rows = list(read_rows(text, path, (*INTERVAL_COLUMNS, *extra)))
    for line, row in rows:
        name = require_text(row["name"], path=path, line=line, column="name")
        if name in n:
            raise DataFormatError(path, f"{name!r} appears twice", line=line, column="name")
        values = {}
        for column in ("ratio_low", "ratio_high", "level", "mape_pct"):
            values[column] = require_float(row[column], path=path, line=line, column=column)
        if not 0.0 < values["ratio_low"] <= values["ratio_high"]:
            raise DataFormatError(
                path, "must be > 0 and not exceed ratio_high", line=line, column="ratio_low",
                fix="ratio_low and ratio_high are the band's lower and upper multipliers",
            )  # fmt: skip
        if not 0.5 < values["level"] < 1.0:
            raise DataFormatError(path, "must be in (0.5, 1)", line=line, column="level")
        lo[name], hi[name] = math.log(values["ratio_low"]), math.log(values["ratio_high"])
        level[name], mape[name] = values["level"], values["mape_pct"]
        n[name] = parse_int(row["n"], path=path, line=line, column="n", minimum=1)
        require_text(row["source"], path=path, line=line, column="source")
        parse_date(row["as_of"], path=path, line=line, column="as_of")
    if not n:
        raise DataFormatError(path, "holds no band", fix="one row per regime")
    return IntervalTable(q_low=lo, q_high=hi, n=n, mape_pct=mape, level=level), rows
