"""Parser of the Azure Functions 2019 per-minute invocation counts.

The trace (``invocations_per_function_md.anon.dNN.csv``, one file per day; see
``../shared/data/azure_functions_2019/AzureFunctionsDataset2019.md``) has one row per function:
``HashOwner``, ``HashApp``, ``HashFunction``, ``Trigger`` (http, timer, event, queue, storage,
orchestration, others), then columns ``1`` .. ``1440`` with the invocations in each minute of
the day. A file with fewer minute columns (``1`` .. ``N``, consecutive) is accepted, so a
slice of a day works too.

A row with the wrong number of fields, an empty id or trigger, or a count that is not an
integer in [0, :data:`MAX_COUNT_PER_MINUTE`] is skipped and reported
(``InvocationCounts.skipped``: ``"file, line N: reason"``) rather than guessed; a file
whose header is not this format is one :class:`DataFormatError`.
This module only parses: :func:`gpucast.inputs.serving.function_arrivals` turns the counts
into arrival times (uniform inside each minute).
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.store.files import check_header, not_utf8, open_input_text

ID_COLUMNS = ("HashOwner", "HashApp", "HashFunction", "Trigger")
TRIGGERS = ("http", "timer", "event", "queue", "storage", "orchestration", "others")
MINUTE_S = 60.0
#: the most invocations one function may have in one minute (16.7 million a second, far
#: beyond any function of the trace): a row above it is skipped as malformed, which also keeps
#: the sums over a day's functions and minutes inside int64 (10^9 x 20,160 minutes x 450,000
#: functions < 2^63) instead of wrapping around to negative totals
MAX_COUNT_PER_MINUTE = 10**9


@dataclass(frozen=True, slots=True, kw_only=True)
class InvocationCounts:
    """Per-minute invocation counts of the functions of one trace file.

    ``functions``: one row per kept function (``owner``, ``app``, ``function``, ``trigger``,
    ``invocations``); ``counts[i, m]``: invocations of function ``i`` in minute ``m``.
    """

    path: str
    functions: pd.DataFrame
    counts: npt.NDArray[np.int64]
    skipped: tuple[str, ...] = field(default=())

    @property
    def minutes(self) -> int:
        return int(self.counts.shape[1])

    def total_per_minute(self, rows: npt.ArrayLike | None = None) -> npt.NDArray[np.int64]:
        """Invocations per minute summed over ``rows`` (default: every function)."""
        sel = self.counts if rows is None else self.counts[np.asarray(rows, dtype=np.int64)]
        return np.asarray(sel.sum(axis=0), dtype=np.int64)

    def select(
        self, *, trigger: str | None = None, app: str | None = None
    ) -> npt.NDArray[np.int64]:
        """Row indices of the functions with this trigger and/or app."""
        keep = np.ones(len(self.functions), dtype=bool)
        if trigger is not None:
            if trigger not in TRIGGERS:
                raise InvalidSpecError(
                    "trigger", f"must be one of {', '.join(TRIGGERS)}", got=trigger
                )
            keep &= (self.functions["trigger"] == trigger).to_numpy()
        if app is not None:
            keep &= (self.functions["app"] == app).to_numpy()
        return np.asarray(np.flatnonzero(keep), dtype=np.int64)


def _minute_columns(header: list[str], path: str) -> int:
    got = [h.strip() for h in header]
    if tuple(got[:4]) != ID_COLUMNS:
        raise DataFormatError(
            path,
            f"does not start with the columns {','.join(ID_COLUMNS)} (got {','.join(got[:4])})",
            line=1,
            fix="give an invocations_per_function_md.anon.dNN.csv of the Azure Functions 2019 "
            "trace",
        )
    minutes = got[4:]
    expected = [str(i) for i in range(1, len(minutes) + 1)]
    if not minutes or minutes != expected:
        # where the minutes break (QA 39 S #3: a header cut short read "names the column twice")
        pairs = enumerate(zip(minutes, expected, strict=True))
        at = next((i for i, (m, e) in pairs if m != e), None)
        where = (
            ""
            if at is None
            else f" (column {at + 5} is {minutes[at]!r}, not {expected[at]!r}: "
            "the header is cut short or edited)"
        )
        raise DataFormatError(
            path,
            f"needs minute columns 1, 2, ... (1440 for a whole day) after Trigger{where}",
            line=1,
            fix="keep the trace's header unchanged (a copy cut short: copy the file again)",
        )
    return len(minutes)


def read_invocation_counts(path: Path) -> InvocationCounts:
    """Read one per-minute invocation-count file (see the module docstring)."""
    path = Path(path)
    name = path.name
    handle = open_input_text(path, "trace", fix="give an Azure Functions invocation-count file")
    ids: list[tuple[str, str, str, str]] = []
    rows: list[npt.NDArray[np.int64]] = []
    skipped: list[str] = []
    try:
        with handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise DataFormatError(str(path), "is empty", fix="give a non-empty trace file")
            n_min = _minute_columns(header, str(path))  # before check_header: says where
            check_header(header, path)
            width = 4 + n_min
            for line, fields in enumerate(reader, start=2):
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue  # blank line
                if len(fields) != width:
                    skipped.append(f"{name}, line {line}: {len(fields)} fields, expected {width}")
                    continue
                owner, app, func, trigger = (f.strip() for f in fields[:4])
                if not (owner and app and func and trigger):
                    skipped.append(f"{name}, line {line}: empty owner, app, function or trigger")
                    continue
                try:
                    ints = [int(v) for v in fields[4:]]
                except ValueError:
                    bad = next(v for v in fields[4:] if not v.strip().lstrip("-").isdigit())
                    skipped.append(f"{name}, line {line}: count {bad!r} is not an integer")
                    continue
                if max(ints) > MAX_COUNT_PER_MINUTE:
                    minute = next(i for i, v in enumerate(ints) if v > MAX_COUNT_PER_MINUTE)
                    skipped.append(
                        f"{name}, line {line}: count {ints[minute]:,} in minute {minute + 1} "
                        f"is above {MAX_COUNT_PER_MINUTE:,} a minute"
                    )
                    continue
                values = np.array(ints, dtype=np.int64)
                if np.any(values < 0):
                    minute = int(np.flatnonzero(values < 0)[0]) + 1
                    skipped.append(f"{name}, line {line}: negative count in minute {minute}")
                    continue
                ids.append((owner, app, func, trigger))
                rows.append(values)
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    if not rows:
        raise DataFormatError(
            str(path),
            f"has no valid function row ({len(skipped)} malformed)",
            fix="check the file is an Azure Functions 2019 invocation-count file",
        )
    counts = np.vstack(rows)
    frame = pd.DataFrame(ids, columns=["owner", "app", "function", "trigger"])
    frame["invocations"] = counts.sum(axis=1)
    return InvocationCounts(path=str(path), functions=frame, counts=counts, skipped=tuple(skipped))


# -- the per-day files keyed by owner/app(/function): durations and memory ------------------

DURATION_COLUMNS = ("HashOwner", "HashApp", "HashFunction", "Average", "Count")
INVOCATIONS_FILE = "invocations_per_function_md.anon.d{day:02d}.csv"
DURATIONS_FILE = "function_durations_percentiles.anon.d{day:02d}.csv"
MEMORY_FILE = "app_memory_percentiles.anon.d{day:02d}.csv"
#: the percentiles of ``AverageAllocatedMb`` an app memory file has (its 0th is not recorded)
MEMORY_PERCENTILES = (1, 5, 25, 50, 75, 95, 99, 100)
MEMORY_COLUMNS = (
    "HashOwner",
    "HashApp",
    "SampleCount",
    "AverageAllocatedMb",
    *(f"AverageAllocatedMb_pct{p}" for p in MEMORY_PERCENTILES),
)

_Row = TypeVar("_Row")


def _read_rows(
    path: Path,
    required: tuple[str, ...],
    parse: Callable[[Callable[[str], str]], _Row | str],
    *,
    fix: str,
) -> tuple[list[tuple[int, _Row]], tuple[str, ...]]:
    """The rows of one of the trace's per-day CSV files whose header has the ``required``
    columns (any order, others allowed), each with its line: ``parse(get)`` turns a row
    (``get(column)``: its text, stripped) into a value, or says why it is malformed; rows with
    the wrong number of fields or that ``parse`` refuses are skipped and reported (``"file,
    line N: reason"``)."""
    path = Path(path)
    name = path.name
    handle = open_input_text(path, "trace", fix=fix)
    rows: list[tuple[int, _Row]] = []
    skipped: list[str] = []
    try:
        with handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise DataFormatError(str(path), "is empty", fix="give a non-empty trace file")
            check_header(header, path)
            got = [h.strip() for h in header]
            missing = [c for c in required if c not in got]
            if missing:
                raise DataFormatError(
                    str(path), f"lacks the column(s) {', '.join(missing)}", line=1, fix=fix
                )
            at = {c: got.index(c) for c in required}
            for line, fields in enumerate(reader, start=2):
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue
                if len(fields) != len(got):
                    skipped.append(
                        f"{name}, line {line}: {len(fields)} fields, expected {len(got)}"
                    )
                    continue

                def get(column: str, fields: list[str] = fields) -> str:
                    return fields[at[column]].strip()

                row = parse(get)
                if isinstance(row, str):
                    skipped.append(f"{name}, line {line}: {row}")
                else:
                    rows.append((line, row))
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    return rows, tuple(skipped)


def _duration_row(get: Callable[[str], str]) -> tuple[str, str, str, float, int] | str:
    owner, app, func = (get(c) for c in DURATION_COLUMNS[:3])
    try:
        average = float(get("Average"))
        count = int(float(get("Count")))
    except ValueError:
        return "Average or Count is not a number"
    except OverflowError:  # int(inf)
        return f"Count {get('Count')!r} is not finite"
    if not (owner and app and func):
        return "empty id"
    if not (np.isfinite(average) and average >= 0):
        return f"Average {get('Average')!r} is not a finite number >= 0"
    return owner, app, func, average, max(count, 0)


def read_function_durations(path: Path) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """(``owner``, ``app``, ``function``, ``average_ms``, ``count``) per function of one
    duration-percentile file, and the malformed rows skipped (``"file, line N: reason"``; a
    function given again: its first row kept, as an app of the memory file). Only the columns
    used are required; the percentile columns may be absent."""
    rows, skipped = _read_rows(
        path,
        DURATION_COLUMNS,
        _duration_row,
        fix="give a function_durations_percentiles.anon.dNN.csv of the Azure Functions 2019 trace",
    )
    kept, again = _first_rows(rows, 3, path, "function")  # the last silently won before
    frame = pd.DataFrame(kept, columns=["owner", "app", "function", "average_ms", "count"])
    return frame, skipped + again


@dataclass(frozen=True, slots=True, kw_only=True)
class AppMemory:
    """The allocated memory of the apps of one ``app_memory_percentiles.anon.dNN.csv``.

    ``apps``: one row per app (``owner``, ``app``, ``sample_count``, ``average_mb`` -- the
    day's average of the app's committed memory, MB as the trace records it -- and
    ``pct1_mb`` .. ``pct100_mb``, the percentiles of its per-minute averages); ``skipped``:
    the malformed rows (``"file, line N: reason"``)."""

    path: str
    apps: pd.DataFrame
    skipped: tuple[str, ...] = field(default=())


def _memory_row(get: Callable[[str], str]) -> tuple[object, ...] | str:
    owner, app = get("HashOwner"), get("HashApp")
    if not (owner and app):
        return "empty owner or app"
    try:
        samples = float(get("SampleCount"))
        values = [float(get(c)) for c in MEMORY_COLUMNS[3:]]
    except ValueError:
        return "SampleCount or an AverageAllocatedMb column is not a number"
    if not (np.isfinite(samples) and samples >= 0 and samples == int(samples)):
        return f"SampleCount {get('SampleCount')!r} is not an integer >= 0"
    if not all(np.isfinite(v) and v >= 0 for v in values):
        return "an AverageAllocatedMb column is negative or not finite"
    if any(b < a for a, b in itertools.pairwise(values[1:])):
        return "the AverageAllocatedMb percentiles decrease"
    return (owner, app, int(samples), *values)


def read_app_memory(path: Path) -> AppMemory:
    """One app memory file (``HashOwner, HashApp, SampleCount, AverageAllocatedMb,
    AverageAllocatedMb_pct1`` .. ``_pct100``, as the dataset's description documents): every
    column is required (a header without them is one :class:`DataFormatError`); a row with
    the wrong number of fields, an empty id, a value that is not a number >= 0, percentiles
    that decrease, or an app given twice is skipped and reported."""
    fix = "give an app_memory_percentiles.anon.dNN.csv of the Azure Functions 2019 trace"
    rows, skipped = _read_rows(path, MEMORY_COLUMNS, _memory_row, fix=fix)
    columns = [
        "owner", "app", "sample_count", "average_mb",
        *(f"pct{p}_mb" for p in MEMORY_PERCENTILES),
    ]  # fmt: skip
    kept, again = _first_rows(rows, 2, path, "app")
    frame = pd.DataFrame(kept, columns=columns)
    return AppMemory(path=str(path), apps=frame, skipped=skipped + again)


def _first_rows(
    rows: list[tuple[int, _Row]], key_len: int, path: Path, what: str
) -> tuple[list[_Row], tuple[str, ...]]:
    """The first row of each id (its first ``key_len`` fields) and, for each later one, the
    reason it is skipped (``"file, line N: app o/a given again (its first row kept)"``)."""
    seen: set[tuple[object, ...]] = set()
    kept, again = [], []
    for line, row in rows:
        key = tuple(row[:key_len])  # type: ignore[index]
        if key in seen:
            again.append(f"{Path(path).name}, line {line}: {what} {'/'.join(map(str, key))} "
                         "given again (its first row kept)")  # fmt: skip
        else:
            seen.add(key)
            kept.append(row)
    return kept, tuple(again)
