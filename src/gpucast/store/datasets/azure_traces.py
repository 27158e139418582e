"""Arrival traces: the Azure LLM inference trace 2023 and plain ``arrival_s`` CSV files.

The Azure LLM trace (``AzureLLMInferenceTrace_{code,conv}.csv``) has columns ``TIMESTAMP``
(``YYYY-MM-DD HH:MM:SS.fffffff``), ``ContextTokens`` and ``GeneratedTokens``. A simpler trace
is a CSV with an ``arrival_s`` column (seconds) and, optionally, a pair of token columns
(:data:`TOKEN_COLUMNS`: ``ContextTokens,GeneratedTokens``, ``prompt_tokens,output_tokens``,
...; before session 38 they were ignored). Malformed rows (unparseable timestamp, a negative
or non-integer token count) are skipped and reported with their line numbers;
``ImportResult.skipped`` holds one line per skipped row.
"""

from __future__ import annotations

import csv
import math
from array import array
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets._import import ImportResult
from gpucast.store.files import check_header, not_utf8, open_input_text

AZURE_LLM_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
#: (prompt, output) token columns an ``arrival_s`` CSV may carry, the Azure trace's names first
TOKEN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ContextTokens", "GeneratedTokens"),
    ("context_tokens", "generated_tokens"),
    ("prompt_tokens", "output_tokens"),
    ("input_tokens", "output_tokens"),
)
#: ``frame.attrs`` key of the first request's time (seconds since the epoch for an Azure LLM
#: trace, the first ``arrival_s`` otherwise): ``arrival_s`` counts from it, and traces read
#: apart are aligned with it
ORIGIN_ATTR = "origin_s"
#: ``frame.attrs`` key of the file's format: :data:`AZURE_LLM_FORMAT` or ``"arrival_s"`` (a
#: CSV of one's own), so what replays it names the data it read (QA 41 QF F11)
FORMAT_ATTR = "format"
AZURE_LLM_FORMAT = "azure-llm"


def _parse_timestamp(text: str) -> float:
    """Seconds since the epoch of ``YYYY-MM-DD HH:MM:SS[.fraction]`` (any number of digits)."""
    text = text.strip()
    head, _, frac = text.partition(".")
    base = datetime.strptime(head, "%Y-%m-%d %H:%M:%S")
    if frac and not frac.isdigit():
        raise ValueError(f"bad fraction {frac!r}")
    return base.timestamp() + (float("0." + frac) if frac else 0.0)


#: The formats :func:`read_arrival_trace` reads, in a refusal's fix
TRACE_FORMATS = (
    "give an Azure LLM trace (TIMESTAMP,ContextTokens,GeneratedTokens) "
    "or a CSV with an arrival_s column (and prompt_tokens,output_tokens)"
)


def read_arrival_trace(path: Path, *, formats: str = TRACE_FORMATS) -> ImportResult:
    """Read an Azure LLM trace or an ``arrival_s`` CSV into a frame with ``arrival_s``
    (seconds from the first request, sorted) plus the token columns when present; the first
    request's own time is ``frame.attrs[ORIGIN_ATTR]``. ``formats``: the fix of a file with
    neither (a caller that reads more formats names them)."""
    path = Path(path)
    handle = open_input_text(path, "trace", fix="check the trace's path")
    try:
        with handle:
            return _read_arrival_rows(path, handle, formats)
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None


def _rows(reader: Any, path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of each row after the header (``reader`` is a :func:`csv.reader`); a
    row the csv module cannot split (a NUL byte) is a :class:`DataFormatError` naming its
    line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataFormatError(
                str(path), f"is not a readable CSV ({exc})", line=reader.line_num
            ) from None
        yield reader.line_num, row


def _read_arrival_rows(path: Path, handle: TextIO, formats: str) -> ImportResult:
    """Stream the rows into compact arrays (8 bytes per value: ``array``, not a list of
    Python floats), so a 10-million-request trace costs ~80 MB per column, not ~1 GB."""
    reader = csv.reader(handle)
    header = next(reader, [])
    check_header(header, path)
    columns = tuple(c.strip() for c in header)
    azure = all(c in columns for c in AZURE_LLM_COLUMNS)
    if not azure and "arrival_s" not in columns:
        raise DataFormatError(
            str(path),
            f"has columns {', '.join(columns) or '(none)'}",
            fix=formats,
        )
    width = len(columns)
    pair = next((p for p in TOKEN_COLUMNS if p[0] in columns and p[1] in columns), None)
    tokens = pair is not None
    if azure:
        i_t, i_c, i_g = (columns.index(c) for c in AZURE_LLM_COLUMNS)
    else:
        i_t = columns.index("arrival_s")
        if pair is not None:
            i_c, i_g = columns.index(pair[0]), columns.index(pair[1])
    times = array("d")
    context = array("q")
    generated = array("q")
    skipped: list[str] = []
    for line, row in _rows(reader, path):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # a blank line (e.g. at the end of the file)
        try:
            if len(row) != width:
                raise ValueError(f"{len(row)} fields, the header has {width}")
            if azure:
                t = _parse_timestamp(row[i_t])
            else:
                t = float(row[i_t])
                if not math.isfinite(t) or t < 0:
                    raise ValueError("arrival_s must be a finite number >= 0")
            if tokens:
                c, g = int(row[i_c]), int(row[i_g])
                if c < 0 or g < 0:
                    raise ValueError("negative token count")
                context.append(c)
                generated.append(g)
        except (ValueError, OverflowError) as exc:
            skipped.append(f"{path.name}, line {line}: {exc}")
            continue
        times.append(t)
    if not times:
        raise DataFormatError(
            str(path),
            f"has no valid rows ({len(skipped)} malformed)",
            fix="check the file's format",
        )
    arrival = np.frombuffer(times, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    origin = float(arrival[order[0]])
    data: dict[str, object] = {"arrival_s": arrival[order] - origin}
    del times
    if tokens:
        data["context_tokens"] = np.frombuffer(context, dtype=np.int64)[order]
        data["generated_tokens"] = np.frombuffer(generated, dtype=np.int64)[order]
    frame = pd.DataFrame(data, copy=False)
    frame.attrs[ORIGIN_ATTR] = origin
    frame.attrs[FORMAT_ATTR] = AZURE_LLM_FORMAT if azure else "arrival_s"
    return ImportResult(frame=frame, skipped=tuple(skipped))
