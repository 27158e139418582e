"""Strict CSV reading for catalog files: every bad cell names its file, line and column."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import date
from typing import TypeVar

from gpucast.domain.catalog import lookup_key
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.store.files import check_header


def unread_columns(text: str, read: Sequence[str]) -> tuple[str, ...]:
    """The header's columns not in ``read``: a user's file with a misspelt optional column
    (``localty``, ``in_degre``) would otherwise leave its rows on the defaults unsaid."""
    header = next(csv.reader(io.StringIO(text)), [])
    return tuple(c.strip() for c in header if c.strip() and c.strip() not in read)


def unread_columns_warning(path: object, unread: Sequence[str], read: Sequence[str]) -> str:
    """One warning line naming ``unread`` columns and the ones read; empty where none."""
    if not unread:
        return ""
    return (
        f"{path}: column(s) {', '.join(unread)} not read (a misspelling?); the columns read are "
        f"{', '.join(read)}"
    )


def bad_cell(path: str, problem: str, *, line: int, column: str, want: str) -> DataFormatError:
    """The one shape of a bad cell's error: where (file, line, column), what is wrong, and
    the fix, what to write there (``want``: "a number > 0 such as 2.5")."""
    return DataFormatError(
        path, problem, line=line, column=column, fix=f"write {want} in that cell"
    )


def _number_wanted(positive: bool | None) -> str:
    """What a number cell wants: > 0, >= 0 or any sign (None)."""
    sign = {True: " > 0", False: " >= 0", None: ""}[positive]
    return f"a number{sign} such as 2.5"


def _whole_wanted(minimum: int) -> str:
    return f"a whole number >= {minimum} such as {max(minimum, 8)}"


def read_rows(
    text: str, path: str, required: Sequence[str]
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` for each data row; line numbers are 1-based file lines.

    Raises :class:`DataFormatError` when the header lacks a required column or a row has the
    wrong number of cells.
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise DataFormatError(path, "file is empty", fix="expected a CSV header line") from None
    header = [h.strip() for h in header]
    check_header(header, path)
    missing = [c for c in required if c not in header]
    if missing:
        raise DataFormatError(
            path,
            f"missing column(s) {', '.join(missing)}",
            line=1,
            column=missing[0],
            fix=f"the header must contain: {', '.join(required)}",
        )
    for cells in reader:
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise DataFormatError(
                path,
                f"expected {len(header)} cells, got {len(cells)}",
                line=line,
                fix="check for unquoted commas or a missing cell",
            )
        yield line, {h: c.strip() for h, c in zip(header, cells, strict=True)}


def named_rows(
    text: str, path: str, required: Sequence[str], *, lower: bool = True
) -> Iterator[tuple[int, dict[str, str], str]]:
    """:func:`read_rows` of a file keyed by its ``name`` column: ``(line, row, name)``, the
    name lower-cased unless ``lower`` is False; a name twice or no row at all is an error."""
    seen: set[str] = set()
    for line, row in read_rows(text, path, required):
        name = require_text(row["name"], path=path, line=line, column="name")
        name = name.lower() if lower else name
        if name in seen:
            raise DataFormatError(
                path, f"name {name!r} appears twice", line=line, fix="rename or merge the rows"
            )
        seen.add(name)
        yield line, row, name
    if not seen:
        raise DataFormatError(path, "has no rows", fix="add one row under the header")


def provenance(row: Mapping[str, str], *, path: str, line: int) -> str:
    """``(source_url, as of date)`` of a row, both checked."""
    url = require_text(row["source_url"], path=path, line=line, column="source_url")
    as_of = parse_date(row["as_of"], path=path, line=line, column="as_of")
    return f"({url}, as of {as_of})"


_T = TypeVar("_T")


def by_name(rows: Mapping[str, _T], name: str, *, field: str, file: str, kind: str = "") -> _T:
    """The row called ``name`` (case-insensitive); an unknown name is one line naming the
    known ones (``kind``: what a row is, e.g. "drive")."""
    key = name.strip().lower()
    if key not in rows:
        what = f"unknown {kind} {name!r}" if kind else f"unknown {name!r}"
        raise InvalidSpecError(field, what, fix=f"use one of {', '.join(rows)} ({file})")
    return rows[key]


def parse_float(
    value: str,
    *,
    path: str,
    line: int,
    column: str,
    optional: bool = False,
    positive: bool = True,
) -> float | None:
    """A finite number (> 0 when ``positive``); empty gives ``None`` only when ``optional``."""
    want = _number_wanted(positive)
    if value == "":
        if optional:
            return None
        raise bad_cell(path, "value is required", line=line, column=column, want=want)
    number = _finite(value, path=path, line=line, column=column, want=want)
    if number < 0 or (positive and number == 0):
        raise bad_cell(
            path,
            f"must be {'> 0' if positive else '>= 0'}, got {value!r}",
            line=line,
            column=column,
            want=want,
        )
    return number


def _finite(
    value: str, *, path: str, line: int, column: str, want: str = _number_wanted(None)
) -> float:
    """``value`` as a finite number, of any sign (each caller checks its own range and says
    what it wants in ``want``)."""
    try:
        number = float(value)
    except ValueError:
        raise bad_cell(
            path, f"not a number: {value!r}", line=line, column=column, want=want
        ) from None
    if not math.isfinite(number):
        raise bad_cell(path, f"not a finite number: {value!r}", line=line, column=column, want=want)
    return number


def require_float(value: str, *, path: str, line: int, column: str, positive: bool = True) -> float:
    number = parse_float(value, path=path, line=line, column=column, positive=positive)
    assert number is not None  # optional=False never gives None
    return number


def parse_int(value: str, *, path: str, line: int, column: str, minimum: int = 0) -> int:
    """A whole number >= ``minimum`` (``"8.0"`` is accepted as 8); one message for the one
    constraint, whatever breaks it (-5, 0 or 2.5 where the minimum is 1)."""
    want = _whole_wanted(minimum)
    if value == "":
        raise bad_cell(path, "value is required", line=line, column=column, want=want)
    number = _finite(value, path=path, line=line, column=column, want=want)
    if number != int(number) or number < minimum:
        raise bad_cell(
            path, f"must be a whole number >= {minimum}, got {value!r}", line=line,
            column=column, want=want,
        )  # fmt: skip
    return int(number)


def parse_date(value: str, *, path: str, line: int, column: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise DataFormatError(
            path, f"not a date: {value!r}", line=line, column=column, fix="use YYYY-MM-DD"
        ) from None


def parse_bool(value: str, *, path: str, line: int, column: str) -> bool:
    """``true``/``false`` (also ``yes``/``no``, ``1``/``0``; any case)."""
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise DataFormatError(
        path, f"not a boolean: {value!r}", line=line, column=column, fix="use true or false"
    )


def require_text(value: str, *, path: str, line: int, column: str) -> str:
    if not value:
        raise bad_cell(path, "value is required", line=line, column=column, want="its value")
    return value


def split_bar(text: str) -> tuple[str, ...]:
    """A ``|``-separated cell as its stripped, non-empty items."""
    return tuple(t.strip() for t in text.split("|") if t.strip())


def claim_engine_names(seen: dict[str, int], names: Sequence[str], *, path: str, line: int) -> None:
    """Note an engine's name and aliases (by :func:`lookup_key`) as on ``line`` of ``path``;
    one already on an earlier line is a DataFormatError naming that line."""
    for key in {lookup_key(n) for n in names}:
        if key in seen:
            raise DataFormatError(
                path, f"engine name or alias {key!r} is already on line {seen[key]}",
                line=line, column="aliases",
            )  # fmt: skip
        seen[key] = line
