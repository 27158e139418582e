"""Cell checks shared by the tidy-frame importers (Zeus, Pollux, LLM-Inference-Bench).

A CSV is read as text (:func:`read_cells`), then each column is parsed by
:func:`number_column` or :func:`text_column`; the first bad cell is a
:class:`~gpucast.domain.errors.DataFormatError` naming the file, its line (the header is line
1), the column and a fix. :func:`cell_problem` gives the same verdict without raising, for
importers that skip bad rows instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from gpucast.domain.errors import DataFormatError

FloatArray = NDArray[np.float64]


def line_of(position: int) -> int:
    """File line of the ``position``-th data row (line 1 is the header)."""
    return position + 2


def read_cells(path: Path, *, fix: str) -> pd.DataFrame:
    """The CSV at ``path`` as text cells (nothing converted, empty cells ""), header names
    stripped of surrounding spaces."""
    from gpucast.store.files import read_csv_input

    frame = read_csv_input(Path(path), "data", fix=fix, dtype=str, keep_default_na=False)
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def require_columns(frame: pd.DataFrame, path: Path, columns: Sequence[str], *, fix: str) -> None:
    """A :class:`DataFormatError` for the first of ``columns`` that ``frame`` lacks."""
    for column in columns:
        if column not in frame.columns:
            raise DataFormatError(str(path), "missing column", line=1, column=column, fix=fix)


def is_missing(text: str) -> bool:
    """Whether a cell marks an absent value: empty or ``nan`` (any case)."""
    return text.strip().lower() in ("", "nan")


def cell_problem(
    text: str, *, integer: bool = False, allow_zero: bool = False, allow_missing: bool = False
) -> str | None:
    """Why ``text`` is not a finite number > 0 (>= 0 with ``allow_zero``; whole with
    ``integer``), or ``None`` when it is fine. With ``allow_missing`` an empty cell or
    ``nan`` is fine (a value the source marks as absent)."""
    text = text.strip()
    if is_missing(text):
        return None if allow_missing else ("empty cell" if not text else "missing value (nan)")
    try:
        value = float(text)
    except ValueError:
        return f"not a number ({text!r})"
    if not math.isfinite(value):
        return f"not a finite number ({text})"
    if value < 0 or (value == 0 and not allow_zero):
        return f"must be {'>= 0' if allow_zero else '> 0'} (got {text})"
    if integer and value != int(value):
        return f"must be a whole number (got {text})"
    return None


def number_column(
    frame: pd.DataFrame,
    path: Path,
    column: str,
    *,
    fix: str,
    integer: bool = False,
    allow_zero: bool = False,
    allow_missing: bool = False,
) -> FloatArray:
    """Column ``column`` as floats, every cell checked by :func:`cell_problem` (empty and
    ``nan`` cells are NaN when ``allow_missing``)."""
    require_columns(frame, path, [column], fix=fix)
    out = np.full(len(frame), np.nan)
    for i, cell in enumerate(frame[column].astype(str)):
        problem = cell_problem(
            cell, integer=integer, allow_zero=allow_zero, allow_missing=allow_missing
        )
        if problem is not None:
            raise DataFormatError(str(path), problem, line=line_of(i), column=column, fix=fix)
        if not is_missing(cell):
            out[i] = float(cell)
    return out


def text_column(frame: pd.DataFrame, path: Path, column: str, *, fix: str) -> NDArray[np.object_]:
    """Column ``column`` stripped; an empty cell is an error."""
    require_columns(frame, path, [column], fix=fix)
    values = frame[column].astype(str).str.strip().to_numpy(dtype=object)
    for i, value in enumerate(values):
        if not value:
            raise DataFormatError(str(path), "empty cell", line=line_of(i), column=column, fix=fix)
    return values


def require_rows(frame: pd.DataFrame, path: Path, *, fix: str) -> None:
    """A :class:`DataFormatError` when ``frame`` has no data rows."""
    if frame.empty:
        raise DataFormatError(str(path), "has no data rows", fix=fix)
