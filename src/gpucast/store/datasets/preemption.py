"""Readers for the spot-preemption data people have (parse only; the models fit elsewhere).

* :func:`read_instance_lifetimes`: a CSV of spot instances, one per row — ``start``, ``end``
  (ISO 8601 date-times, naive ones read as UTC, or Unix seconds) and optionally ``reason``,
  ``region``/``zone``, ``gpu``, ``provider``. An end whose reason is a revocation
  (:data:`~gpucast.domain.preemption.REVOCATION_REASONS`) is observed; any other reason is
  right-censored; without a ``reason`` column every end is taken as a revocation.
* :func:`read_spot_trace`: a node-count trace in SkyPilot's spot-traces JSON
  (``{"metadata": {"gap_seconds": g}, "data": [count per tick, ...]}``, github.com/skypilot-org/
  spot-traces) as a :class:`~gpucast.domain.preemption.NodeCountTrace` (revocations, exposure,
  FIFO lifetimes, capacity gaps). The traces' README reads ``data`` as the number of available
  instances per tick (the default, ``values="running"``); SkyPilot's simulator reads its 0/1
  availability traces the other way round (``spot_available = not trace[tick]``), which
  ``values="preempted"`` follows (running = ``nodes`` - value).
* :func:`read_hazard_spec`: a constant ``hazard_per_hour`` or a ``start_h,hazard_per_hour``
  CSV table as a :class:`~gpucast.domain.preemption.HazardSpec`.

Every problem is a :class:`~gpucast.domain.errors.DataFormatError` naming the file, the line
(or the JSON key) and the column, with a fix. A UTF-8 byte-order mark and CRLF line ends are
accepted.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.preemption import (
    HazardSpec,
    InstanceLifetime,
    NodeCountTrace,
    instance_lifetimes_frame,
    is_revocation,
    node_count_trace,
    normalise_reason,
)

__all__ = [
    "LIFETIME_COLUMNS",
    "InstanceLifetimes",
    "instance_lifetimes_frame",
    "parse_hazard_spec",
    "parse_instance_lifetimes",
    "parse_spot_trace",
    "read_hazard_spec",
    "read_instance_lifetimes",
    "read_spot_trace",
    "spot_trace_frame",
]

#: Required and optional columns of an instance-lifetimes CSV.
LIFETIME_COLUMNS = ("start", "end")
OPTIONAL_LIFETIME_COLUMNS = ("reason", "region", "zone", "gpu", "provider")
_HEADER_FIX = "the header must include start,end (optional: reason, region, zone, gpu, provider)"
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _read_text(path: Path, what: str) -> str:
    """The file as text: UTF-8 (a BOM is dropped); non-UTF-8 bytes name their line."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataFormatError(
            str(path), f"cannot read: {exc.strerror or exc}", fix=f"pass the path of {what}"
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataFormatError(
            str(path),
            f"is not UTF-8 (byte 0x{data[exc.start]:02x})",
            line=line,
            fix="re-save the file as UTF-8",
        ) from None
    if not text.strip():
        raise DataFormatError(str(path), "is empty", fix=f"pass {what}")
    return text


# -- instance lifetimes -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceLifetimes:
    """The parsed rows of one instance-lifetimes CSV."""

    path: str
    #: in order of ``start`` (the file's order where it already was: a stable sort)
    records: tuple[InstanceLifetime, ...]
    #: False when the file has no ``reason`` column (every end is taken as a revocation).
    has_reason: bool
    #: rows that started before the row above them in the file (0: the file was in order)
    out_of_order: int = 0
    #: the lines of rows whose end is their start (a 0 s lifetime)
    zero_length_lines: tuple[int, ...] = ()

    def order_note(self) -> str | None:
        """What the reader did with a file not in order of ``start``; None for one that was."""
        if not self.out_of_order:
            return None
        return (
            f"{self.path}: {self.out_of_order} row(s) start before the row above; the rows "
            "were sorted by start (each lifetime is an interval of its own, so the order does "
            "not change the fit; the file is unchanged)"
        )

    def zero_length_note(self) -> str | None:
        """The rows that end when they start, counted (None where there are none): a 0 s
        lifetime is more often a logging artefact (an end stamped at launch) than a VM."""
        lines = self.zero_length_lines
        if not lines:
            return None
        shown = ", ".join(str(n) for n in lines[:5]) + (", ..." if len(lines) > 5 else "")
        return (
            f"{self.path}: {len(lines)} row(s) end when they start (a 0 s lifetime; line "
            f"{shown}); fitted as they are, as instances that ended at launch (they pull "
            "the fitted lifetimes down): drop the rows if they are logging artefacts"
        )

    @property
    def events(self) -> int:
        return sum(r.observed for r in self.records)

    def frame(self) -> pd.DataFrame:
        """The records as ``gpu, region, zone, provider, start_s, end_s, duration_s, observed,
        reason`` (the shape ``RevocationModel.fit`` takes)."""
        frame: pd.DataFrame = instance_lifetimes_frame(self.records)
        return frame


def _csv_header(
    text: str, path: str, columns: Sequence[str], *, empty_fix: str, missing_fix: str
) -> tuple[Any, list[str], int]:
    """A CSV reader over ``text`` (a BOM dropped), its header (the first non-blank row, in
    lower case, which must hold every one of ``columns``) and the header's line."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise DataFormatError(path, "is empty", fix=empty_fix)
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] = []
    for cells in reader:
        if any(c.strip() for c in cells):
            header = [c.strip().lower() for c in cells]
            break
    header_line = reader.line_num
    for col in columns:
        if col not in header:
            raise DataFormatError(
                path, "missing column", line=header_line, column=col, fix=missing_fix
            )
    return reader, header, header_line


def _data_rows(
    reader: Any, header: Sequence[str], path: str, *, fix: str
) -> Iterator[tuple[int, list[str]]]:
    """``(line, cells)`` of the rows after the header, blank rows skipped; a row with more or
    fewer cells than the header is a DataFormatError (with ``fix``)."""
    for cells in reader:
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise DataFormatError(
                path,
                f"expected {len(header)} cells like the header, got {len(cells)}",
                line=line,
                fix=fix,
            )
        yield line, cells


def parse_time_s(text: str) -> float | None:
    """Unix seconds of an ISO 8601 date-time (naive: UTC) or of a number; None if neither."""
    cell = text.strip()
    if not cell:
        return None
    if _NUMBER.match(cell):
        value = float(cell)
        return value if math.isfinite(value) else None
    try:
        moment = datetime.fromisoformat(cell)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


#: An instance lifetime longer than this is a typo (an end in year 9999, a date for a
#: number): no spot market is old enough to have held one instance so long (EC2 spot began
#: in December 2009), and a fit on it stretches every lifetime (QA session 36: a median of
#: 142 days from one such row)
MAX_LIFETIME_YEARS = 10
_YEAR_S = 365.25 * 86400


def parse_instance_lifetimes(text: str, path: str = "lifetimes.csv") -> InstanceLifetimes:
    """Parse an instance-lifetimes CSV (see the module docstring).

    Rows may come in any order: each is one instance's interval, fitted on its own, so
    nothing needs them sorted. The records come back sorted by ``start`` (stably) and
    ``out_of_order`` counts the rows that started before the row above them, for a note.
    """
    reader, header, header_line = _csv_header(
        text, path, LIFETIME_COLUMNS, empty_fix=_HEADER_FIX, missing_fix=_HEADER_FIX
    )
    idx = {
        c: header.index(c) for c in (*LIFETIME_COLUMNS, *OPTIONAL_LIFETIME_COLUMNS) if c in header
    }
    records: list[InstanceLifetime] = []
    previous_start: float | None = None
    out_of_order = 0
    zero_length: list[int] = []
    for line, cells in _data_rows(reader, header, path, fix="quote cells that contain commas"):
        times: dict[str, float] = {}
        for col in LIFETIME_COLUMNS:
            raw = cells[idx[col]]
            value = parse_time_s(raw)
            if value is None:
                raise DataFormatError(
                    path,
                    f"not an ISO 8601 date-time or Unix seconds ({raw.strip()!r})",
                    line=line,
                    column=col,
                    fix="write e.g. 2023-04-22T10:05:00Z or 1682157900",
                )
            times[col] = value
        start, end = times["start"], times["end"]
        if end < start:
            raise DataFormatError(
                path,
                f"end is {start - end:.0f} s before start",
                line=line,
                column="end",
                fix="swap start and end, or give both in the same time zone",
            )
        if end == start:
            zero_length.append(line)
        if end - start > MAX_LIFETIME_YEARS * _YEAR_S:
            raise DataFormatError(
                path,
                f"the instance lived {(end - start) / _YEAR_S:,.0f} years, longer than any "
                f"spot market has held one (at most {MAX_LIFETIME_YEARS} years)",
                line=line,
                column="end",
                fix="check the end's year (and that start and end share one unit); an instance "
                "still running: its last-seen time, with reason running",
            )
        if previous_start is not None and start < previous_start:
            out_of_order += 1
        previous_start = start
        reason = ""
        observed = True
        if "reason" in idx:
            reason = normalise_reason(cells[idx["reason"]])
            if not reason:
                raise DataFormatError(
                    path,
                    "empty reason",
                    line=line,
                    column="reason",
                    fix="write revoked (or preempted) for a revocation, else why it ended "
                    "(completed, stopped, running)",
                )
            observed = is_revocation(reason)

        def text_of(col: str, cells: list[str] = cells) -> str:
            return cells[idx[col]].strip() if col in idx else ""

        records.append(
            InstanceLifetime(
                line=line,
                start_s=start,
                end_s=end,
                observed=observed,
                reason=reason,
                region=text_of("region"),
                zone=text_of("zone"),
                gpu=text_of("gpu"),
                provider=text_of("provider").lower(),
            )
        )
    if not records:
        raise DataFormatError(path, "has a header but no rows", line=header_line, fix=_HEADER_FIX)
    return InstanceLifetimes(
        path=path,
        records=tuple(sorted(records, key=lambda r: r.start_s)),  # stable: ties keep file order
        has_reason="reason" in idx,
        out_of_order=out_of_order,
        zero_length_lines=tuple(zero_length),
    )


def read_instance_lifetimes(path: Path) -> InstanceLifetimes:
    """Read and parse an instance-lifetimes CSV."""
    text = _read_text(path, "a CSV with columns start,end[,reason,region,zone,gpu,provider]")
    return parse_instance_lifetimes(text, str(path))


# -- SkyPilot spot traces -------------------------------------------------------------------

_TRACE_FIX = 'the file must look like {"metadata": {"gap_seconds": 300}, "data": [4, 4, 3, ...]}'
TRACE_VALUES = ("running", "preempted")


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def parse_spot_trace(
    text: str,
    path: str = "trace.json",
    *,
    values: str = "running",
    nodes: int | None = None,
) -> NodeCountTrace:
    """Parse a SkyPilot spot-traces JSON document (see the module docstring).

    ``values``: ``"running"`` (each value is the number of running instances) or
    ``"preempted"`` (each value is the number not running, out of ``nodes``; default: the
    largest value, at least 1).
    """
    if values not in TRACE_VALUES:
        raise InvalidSpecError("values", f"must be one of {', '.join(TRACE_VALUES)}", got=values)
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise DataFormatError(path, "is empty", fix=_TRACE_FIX)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            path, f"is not valid JSON ({exc.msg})", line=exc.lineno, fix=_TRACE_FIX
        ) from None
    if not isinstance(doc, dict):
        raise DataFormatError(path, "is not a JSON object", fix=_TRACE_FIX)
    for key in ("metadata", "data"):
        if key not in doc:
            raise DataFormatError(path, "missing key", column=key, fix=_TRACE_FIX)
    metadata = doc["metadata"]
    if not isinstance(metadata, dict) or "gap_seconds" not in metadata:
        raise DataFormatError(path, "missing key", column="metadata.gap_seconds", fix=_TRACE_FIX)
    gap = metadata["gap_seconds"]
    if (
        isinstance(gap, bool)
        or not isinstance(gap, int | float)
        or not (math.isfinite(gap) and gap > 0)
    ):
        raise DataFormatError(
            path,
            f"must be a number of seconds > 0 (got {gap!r})",
            column="metadata.gap_seconds",
            fix="give the tick length, e.g. 300 for 5-minute ticks",
        )
    data = doc["data"]
    if not isinstance(data, list) or not data:
        raise DataFormatError(
            path, "must be a non-empty list of node counts", column="data", fix=_TRACE_FIX
        )
    counts = np.empty(len(data), dtype=np.int64)
    for i, value in enumerate(data):
        whole = _whole(value)
        if whole is None:
            raise DataFormatError(
                path,
                f"must be a whole number of nodes (got {value!r})",
                column=f"data[{i}]",
                fix="counts are instances per tick: 0, 1, 2, ...",
            )
        if whole < 0:
            raise DataFormatError(
                path,
                f"must be >= 0 (got {whole})",
                column=f"data[{i}]",
                fix="counts are instances per tick: 0, 1, 2, ...",
            )
        counts[i] = whole
    if values == "preempted":
        capacity = max(int(counts.max()), 1) if nodes is None else int(nodes)
        if capacity < int(counts.max()):
            raise InvalidSpecError(
                "nodes",
                f"must be >= the largest preempted count {int(counts.max())}",
                got=nodes,
            )
        counts = capacity - counts
    source = f"{path} ({counts.size} ticks of {float(gap):g} s, values={values})"
    return node_count_trace(counts, float(gap), source=source)


def read_spot_trace(
    path: Path, *, values: str = "running", nodes: int | None = None
) -> NodeCountTrace:
    """Read and parse a SkyPilot spot-traces JSON file."""
    text = _read_text(path, "a SkyPilot spot-traces JSON file")
    return parse_spot_trace(text, str(path), values=values, nodes=nodes)


def spot_trace_frame(trace: NodeCountTrace) -> pd.DataFrame:
    """One row per tick: ``tick_s, count, revocations, exposure_node_s``."""
    return pd.DataFrame(
        {
            "tick_s": trace.tick_s,
            "count": trace.counts,
            "revocations": trace.revocations,
            "exposure_node_s": trace.exposure_node_s,
        }
    )


# -- hazard specs -------------------------------------------------------------------------

_HAZARD_FIX = "give a number (revocations per node-hour) or a CSV with start_h,hazard_per_hour"


def parse_hazard_spec(text: str, path: str = "hazard.csv") -> HazardSpec:
    """A ``start_h,hazard_per_hour`` CSV table (``start_h`` increasing from 0)."""
    reader, header, header_line = _csv_header(
        text,
        path,
        ("start_h", "hazard_per_hour"),
        empty_fix=_HAZARD_FIX,
        missing_fix="the header must be start_h,hazard_per_hour",
    )
    i_start, i_hazard = header.index("start_h"), header.index("hazard_per_hour")
    start_h: list[float] = []
    hazard: list[float] = []
    for line, cells in _data_rows(
        reader, header, path, fix="write one start_h,hazard_per_hour pair per row"
    ):
        row: dict[str, float] = {}
        for col, i in (("start_h", i_start), ("hazard_per_hour", i_hazard)):
            cell = cells[i].strip()
            value = float(cell) if _NUMBER.match(cell) else math.nan
            if not (math.isfinite(value) and value >= 0):
                raise DataFormatError(
                    path,
                    f"must be a number >= 0 (got {cell!r})",
                    line=line,
                    column=col,
                    fix="e.g. 0,0.2 then 1,0.05 (0.2 revocations per node-hour in the first hour)",
                )
            row[col] = value
        if not start_h and row["start_h"] != 0:
            raise DataFormatError(
                path,
                f"the first start_h must be 0 (got {row['start_h']:g})",
                line=line,
                column="start_h",
                fix="add a row 0,<hazard> for the hazard from the start",
            )
        if start_h and row["start_h"] <= start_h[-1]:
            raise DataFormatError(
                path,
                f"start_h must increase (got {row['start_h']:g} after {start_h[-1]:g})",
                line=line,
                column="start_h",
                fix="sort the rows by start_h and drop repeated rows",
            )
        start_h.append(row["start_h"])
        hazard.append(row["hazard_per_hour"])
    if not start_h:
        raise DataFormatError(path, "has a header but no rows", line=header_line, fix=_HAZARD_FIX)
    return HazardSpec.table(start_h, hazard, source=f"hazard table {path} ({len(start_h)} rows)")


def read_hazard_spec(spec: str | float | Path) -> HazardSpec:
    """A constant hazard (a number, or text that is one) or a ``start_h,hazard_per_hour`` CSV."""
    if isinstance(spec, bool):
        raise InvalidSpecError("hazard", "must be a number or a CSV path", got=spec)
    if isinstance(spec, int | float):
        value = float(spec)
    elif isinstance(spec, str) and (
        _NUMBER.match(spec.strip()) or spec.strip().lower().lstrip("+-") in _NON_FINITE
    ):
        value = float(spec.strip())
    else:
        path = Path(spec)
        table = parse_hazard_spec(_read_text(path, "a start_h,hazard_per_hour CSV"), str(path))
        _at_most_max_hazard(max(table.hazard_per_hour), str(path))
        return table
    if not (math.isfinite(value) and value >= 0):
        raise InvalidSpecError(
            "hazard_per_hour",
            "must be a finite revocation rate >= 0 per hour",
            got=spec,
            fix="e.g. 0.05 for one revocation per 20 node-hours",
        )
    _at_most_max_hazard(value, spec)
    return HazardSpec.constant(value, source=f"user-given hazard {value:g}/h")


_NON_FINITE = ("nan", "inf", "infinity")


def _at_most_max_hazard(value: float, got: object) -> None:
    """The bound ``--hazard-per-hour`` keeps (:data:`MAX_HAZARD_PER_HOUR`): a stored hazard
    above it is one no plan or simulation would take as a flag."""
    from gpucast.domain.spot import MAX_HAZARD_PER_HOUR

    if value > MAX_HAZARD_PER_HOUR:
        raise InvalidSpecError(
            "hazard_per_hour",
            f"must be at most {MAX_HAZARD_PER_HOUR:g} revocations per node-hour (a node revoked "
            f"every {60 / MAX_HAZARD_PER_HOUR:g} min never finishes starting), as "
            "--hazard-per-hour",
            got=got,
            fix="e.g. 0.05 for one revocation per 20 node-hours",
        )
