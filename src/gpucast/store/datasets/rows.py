"""Rows to predict (``gpucast predict cluster|checkpoint --input``): a CSV in CM-DARE-style
columns, every cell checked before anything is predicted or written.

The file is read as text (so the output keeps the input's cells exactly); each column the
model needs is parsed by :func:`number_column` or :func:`choice_column`, and the first bad
cell is a :class:`~gpucast.domain.errors.DataFormatError` naming the file, its line (the
header is line 1) and the column. :func:`read_cluster_rows` and :func:`read_checkpoint_rows`
are the two input formats; what needs a fitted model (a missing single-worker step time looked
up in the fit data) is left to the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from gpucast.domain.cmdare import (
    MAX_TENSOR_COL,
    PARAMS_COL,
    STEP_TIME_COL,
    TENSORS_COL,
)
from gpucast.domain.errors import DataFormatError

FloatArray = NDArray[np.float64]

#: Columns of ``predict cluster`` rows besides the CM-DARE speed columns.
WORKERS_COL = "Workers"
PS_COL = "Parameter Servers"
STRATEGY_COL = "Strategy"
#: Columns of ``predict checkpoint`` rows.
CHECKPOINT_SIZE_COL = "Checkpoint Size (MB)"
INDEX_SIZE_COL = "Index File Size"

#: What a ``predict cluster`` row must give.
CLUSTER_COLUMNS: tuple[str, ...] = (PARAMS_COL, TENSORS_COL, WORKERS_COL, PS_COL)
#: What a ``predict checkpoint`` row must give.
CHECKPOINT_COLUMNS: tuple[str, ...] = (CHECKPOINT_SIZE_COL,)


def line_of(position: int) -> int:
    """File line of the ``position``-th data row (line 1 is the header)."""
    return position + 2


def read_rows(path: Path, *, field_name: str = "input") -> pd.DataFrame:
    """The CSV at ``path`` as text cells (nothing converted, empty cells kept as "")."""
    from gpucast.store.files import read_csv_input

    fix = f"check the --{field_name} path"
    return read_csv_input(path, field_name, fix=fix, dtype=str, keep_default_na=False)


def require_columns(frame: pd.DataFrame, path: Path, columns: Sequence[str]) -> None:
    """A :class:`DataFormatError` for the first of ``columns`` that ``frame`` lacks."""
    for col in columns:
        if col not in frame.columns:
            raise DataFormatError(
                str(path), "missing column", column=col, fix=f"add a {col!r} column"
            )


#: The fix for a cell that is no plain finite number.
_PLAIN = "write a plain number such as 12.5 (no unit, no thousands separator)"


def number_column(
    frame: pd.DataFrame,
    path: Path,
    column: str,
    *,
    integer: bool = False,
    allow_zero: bool = False,
    optional: bool = False,
) -> FloatArray:
    """Column ``column`` as finite numbers > 0 (>= 0 with ``allow_zero``; whole numbers with
    ``integer``); empty cells are NaN when ``optional``, else an error. A column that is
    absent is all NaN when ``optional``."""
    out = np.full(len(frame), np.nan)
    if column not in frame.columns:
        if optional:
            return out
        require_columns(frame, path, [column])
    for i, cell in enumerate(frame[column].astype(str)):
        text = cell.strip()
        line = line_of(i)
        if not text:
            if optional:
                continue
            raise DataFormatError(
                str(path), "empty cell", line=line, column=column, fix="fill it or drop the row"
            )
        try:
            value = float(text)
        except ValueError:
            raise DataFormatError(
                str(path), f"not a number ({text!r})", line=line, column=column, fix=_PLAIN
            ) from None
        if not math.isfinite(value):
            raise DataFormatError(
                str(path), f"not a finite number ({text})", line=line, column=column, fix=_PLAIN
            )
        if value < 0 or (value == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise DataFormatError(
                str(path),
                f"must be {bound} (got {text})",
                line=line,
                column=column,
                fix=f"correct the cell to a number {bound}, or drop the row",
            )
        if integer and value != int(value):
            raise DataFormatError(
                str(path),
                f"must be a whole number (got {text})",
                line=line,
                column=column,
                fix=f"e.g. {max(1, round(value))}",
            )
        out[i] = value
    return out


def choice_column(
    frame: pd.DataFrame, path: Path, column: str, choices: Sequence[str], *, default: str
) -> NDArray[np.object_]:
    """Column ``column`` lower-cased, each cell one of ``choices``; empty cells (or no such
    column) are ``default``."""
    out = np.full(len(frame), default, dtype=object)
    if column not in frame.columns:
        return out
    for i, cell in enumerate(frame[column].astype(str)):
        text = cell.strip().lower() or default
        if text not in choices:
            raise DataFormatError(
                str(path),
                f"unknown {column.lower()} {text!r}",
                line=line_of(i),
                column=column,
                fix=f"use one of {', '.join(choices)}",
            )
        out[i] = text
    return out


def text_cell(frame: pd.DataFrame, column: str, position: int) -> str:
    """The stripped text of one cell ("" when the column is absent)."""
    if column not in frame.columns:
        return ""
    return str(frame[column].iloc[position]).strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterRows:
    """``predict cluster`` rows: the cells as read and the parsed columns (NaN: not given)."""

    path: Path
    raw: pd.DataFrame = field(compare=False)
    n_parameters: FloatArray = field(compare=False)
    n_tensors: FloatArray = field(compare=False)
    workers: FloatArray = field(compare=False)
    ps_shards: FloatArray = field(compare=False)
    single_worker_step_time_s: FloatArray = field(compare=False)
    max_tensor_mb: FloatArray = field(compare=False)
    strategy: NDArray[np.object_] = field(compare=False)

    def missing_step_time(self) -> list[int]:
        """Positions of the rows without a single-worker step time."""
        return [int(i) for i in np.flatnonzero(np.isnan(self.single_worker_step_time_s))]


def read_cluster_rows(
    path: Path, strategies: Sequence[str], *, default_strategy: str = "ps-async"
) -> ClusterRows:
    """Rows with ``Number of Parameters``, ``Number of Tensors``, ``Workers`` and ``Parameter
    Servers`` (0 allowed: a strategy without parameter servers; the caller checks the rest);
    optional ``Step Time (s)`` (the single-worker step time), ``Max Tensor Size (MB)`` and
    ``Strategy`` (one of ``strategies``; empty: ``default_strategy``)."""
    path = Path(path)
    raw = read_rows(path)
    require_columns(raw, path, CLUSTER_COLUMNS)
    return ClusterRows(
        path=path,
        raw=raw,
        n_parameters=number_column(raw, path, PARAMS_COL),
        n_tensors=number_column(raw, path, TENSORS_COL),
        workers=number_column(raw, path, WORKERS_COL, integer=True),
        ps_shards=number_column(raw, path, PS_COL, integer=True, allow_zero=True),
        single_worker_step_time_s=number_column(raw, path, STEP_TIME_COL, optional=True),
        max_tensor_mb=number_column(raw, path, MAX_TENSOR_COL, optional=True),
        strategy=choice_column(raw, path, STRATEGY_COL, strategies, default=default_strategy),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRows:
    """``predict checkpoint`` rows: the cells as read and the parsed sizes (MB)."""

    path: Path
    raw: pd.DataFrame = field(compare=False)
    checkpoint_mb: FloatArray = field(compare=False)
    index_mb: FloatArray | None = field(compare=False)  # None: no Index File Size column


def read_checkpoint_rows(path: Path) -> CheckpointRows:
    """Rows with ``Checkpoint Size (MB)`` (>= 0) and optionally ``Index File Size``."""
    path = Path(path)
    raw = read_rows(path)
    require_columns(raw, path, CHECKPOINT_COLUMNS)
    index = (
        number_column(raw, path, INDEX_SIZE_COL, allow_zero=True, optional=True)
        if INDEX_SIZE_COL in raw.columns
        else None
    )
    return CheckpointRows(
        path=path,
        raw=raw,
        checkpoint_mb=number_column(raw, path, CHECKPOINT_SIZE_COL, allow_zero=True),
        index_mb=index,
    )
