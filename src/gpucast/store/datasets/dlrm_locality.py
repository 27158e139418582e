"""Meta's DLRM embedding-lookup locality statistics (``dlrm_datasets/``) as tidy frames.

``facebookresearch/dlrm_datasets`` ships synthetic embedding-bag inputs whose reuse patterns
match Meta's production ads models, with ``embedding_bag/{2021,2022}/locality_stats.txt``
(here ``embedding_bag_{2021,2022}_locality_stats.txt``) describing each trace file: one block
per ``fbgemm_t<tables>_bs<batch>[_<part>].pt`` (2021: 856 tables, batches of 65,536, 17 files;
2022: 788 tables, batches of 131,072, 16 files)::

    fbgemm_t856_bs65536_0.pt
    Locality stats after processing 1 batches of size 65536
    Avg # of indices: 468084223          <- embedding lookups per batch
    Avg # of unique cols: 61644628       <- distinct rows they touch
    Avg col size: 7.6                    <- lookups per distinct row
    Histogram of col sizes:              <- share of distinct rows per reuse bucket
    (0, 1]: 0.423
    ...
    (32768+: 0.000
    [0, 1, 2, 4, ..., 32768]             <- bucket lower edges
    ['0.000', '0.423', ...]              <- cumulative shares at the upper edges
    Ratio of index distribution at different column sizes:   <- share of lookups per bucket
    ...

A "col" is one embedding row (an index value of a table); its "size" is how often the batch
looks it up. :func:`read_dlrm_locality` returns :class:`DlrmLocality`:

* ``totals`` -- one row per trace: ``dataset`` (``2021``/``2022``), ``trace``, ``tables``,
  ``part`` (the file's ``_<n>`` suffix; <NA> without one), ``batches``, ``batch_size``,
  ``lookups``, ``unique_rows``, ``mean_reuse`` (as published, 1 decimal),
  ``lookups_per_sample`` (``lookups / (batches * batch_size)``) and ``unique_share``
  (``unique_rows / lookups``).
* ``histogram`` -- one row per (trace, reuse bucket): ``bucket`` (as published),
  ``reuse_min`` (exclusive) and ``reuse_max`` (inclusive; inf for the open last bucket),
  ``rows_share`` (share of the distinct rows), ``rows`` (``rows_share * unique_rows``, carrying
  the 3-decimal rounding of the share), ``lookups_share`` (share of the lookups), and the
  published cumulative shares at ``reuse_max``, ``rows_share_cum`` and ``lookups_share_cum``.

:func:`hot_row_coverage` turns a histogram into "the hottest X of the distinct rows serve Y
of the lookups" -- what a per-batch cache of the most reused rows could hit at best.

A block that does not follow the layout above is a :class:`DataFormatError` naming the file,
the line and what was expected. Parse only: no model is imported here.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.domain.errors import DataFormatError

_FIX = "use locality_stats.txt as published in facebookresearch/dlrm_datasets embedding_bag/"
_TRACE = re.compile(r"^(?P<name>fbgemm_t(?P<tables>\d+)_bs(?P<bs>\d+)(?:_(?P<part>\d+))?)\.pt$")
_PROCESSED = re.compile(r"^Locality stats after processing (?P<n>\d+) batches of size (?P<bs>\d+)$")
_INDICES = re.compile(r"^Avg # of indices: (?P<v>\d+)$")
_UNIQUE = re.compile(r"^Avg # of unique cols: (?P<v>\d+)$")
_MEAN = re.compile(r"^Avg col size: (?P<v>[0-9.]+)$")
_BUCKET = re.compile(r"^\((?P<lo>\d+)(?:, (?P<hi>\d+)\]|\+): (?P<share>[0-9.]+)$")
_ROWS_HEAD = "Histogram of col sizes:"
_LOOKUPS_HEAD = "Ratio of index distribution at different column sizes:"
_YEAR = re.compile(r"(20\d\d)")
_SHARE_SUM_TOLERANCE = 0.02  # 17 shares rounded to 3 decimals


@dataclass(frozen=True, slots=True, kw_only=True)
class DlrmLocality:
    """:func:`read_dlrm_locality`'s result: per-trace totals and the reuse histograms."""

    totals: pd.DataFrame
    histogram: pd.DataFrame


class _Lines:
    """The file's lines with a cursor; errors name the file and the line."""

    def __init__(self, path: Path, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.pos = 0

    def done(self) -> bool:
        while self.pos < len(self.lines) and not self.lines[self.pos].strip():
            self.pos += 1
        return self.pos >= len(self.lines)

    def fail(self, problem: str, *, offset: int = 0) -> DataFormatError:
        """An error at the current line (``offset=-1``: the line just taken)."""
        return self.fail_at(self.pos + 1 + offset, problem)

    def fail_at(self, line: int, problem: str) -> DataFormatError:
        return DataFormatError(str(self.path), problem, line=line, fix=_FIX)

    def take(self, pattern: re.Pattern[str], expected: str) -> re.Match[str]:
        if self.done():
            raise DataFormatError(str(self.path), f"ends where {expected} was expected", fix=_FIX)
        match = pattern.match(self.lines[self.pos].strip())
        if match is None:
            raise self.fail(f"expected {expected}, found {self.lines[self.pos].strip()[:60]!r}")
        self.pos += 1
        return match

    def take_text(self, text: str) -> None:
        self.take(re.compile(re.escape(text) + "$"), repr(text))

    def take_list(self, expected: str) -> list[object]:
        if self.done():
            raise DataFormatError(str(self.path), f"ends where {expected} was expected", fix=_FIX)
        text = self.lines[self.pos].strip()
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise self.fail(f"expected {expected}, found {text[:60]!r}") from None
        if not isinstance(value, list):
            raise self.fail(f"expected {expected}, found {text[:60]!r}")
        self.pos += 1
        return value


def _share(lines: _Lines, text: str, *, offset: int = -1) -> float:
    value = float(text)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise lines.fail(f"share {text} is not between 0 and 1", offset=offset)
    return value


def _histogram(
    lines: _Lines, head: str
) -> tuple[int, list[int], list[float], list[float], list[str]]:
    """The line of ``head``, then the buckets' lower edges, shares, cumulative shares and
    labels that follow it."""
    lines.take_text(head)
    head_line = lines.pos
    lows: list[int] = []
    shares: list[float] = []
    labels: list[str] = []
    previous_high: int | None = None
    while True:
        match = lines.take(_BUCKET, "a reuse bucket such as '(1, 2]: 0.152'")
        lo = int(match["lo"])
        if previous_high is not None and lo != previous_high:
            raise lines.fail(
                f"bucket starts at {lo} but the one before ends at {previous_high}", offset=-1
            )
        if match["hi"] is not None:
            previous_high = int(match["hi"])
            if previous_high <= lo:
                raise lines.fail(f"bucket upper edge {previous_high} <= lower edge {lo}", offset=-1)
        lows.append(lo)
        shares.append(_share(lines, match["share"]))
        labels.append(lines.lines[lines.pos - 1].strip().rsplit(":", 1)[0])
        if match["hi"] is None:  # the open last bucket "(N+"
            break
    edges = lines.take_list("the list of bucket edges")
    if edges != lows:
        raise lines.fail("the edge list does not match the buckets above", offset=-1)
    cumulative = lines.take_list("the list of cumulative shares")
    try:
        cum = [float(str(c)) for c in cumulative]
    except ValueError:
        raise lines.fail("cumulative shares are not numbers", offset=-1) from None
    if len(cum) != len(lows) + 1:
        raise lines.fail(
            f"{len(cum)} cumulative shares for {len(lows)} buckets (expected one more)", offset=-1
        )
    if any(b < a for a, b in itertools.pairwise(cum)) or cum[0] != 0.0:
        raise lines.fail("cumulative shares must start at 0 and never decrease", offset=-1)
    total = sum(shares)
    if abs(total - 1.0) > _SHARE_SUM_TOLERANCE:
        raise lines.fail_at(head_line, f"the bucket shares below sum to {total:.3f}, not 1")
    return head_line, lows, shares, cum[1:], labels


def _dataset(path: Path, given: str | None) -> str:
    if given is not None:
        return given
    for part in (path.name, path.parent.name):
        match = _YEAR.search(part)
        if match is not None:
            return match.group(1)
    return path.stem


def read_dlrm_locality(path: Path | str, *, dataset: str | None = None) -> DlrmLocality:
    """Parse one ``locality_stats.txt``; ``dataset`` defaults to the year in the file's (or
    its folder's) name. Columns in the module docstring."""
    path = Path(path)
    if path.is_dir():
        raise DataFormatError(str(path), "is a folder, not a file", fix=f"move it aside and {_FIX}")
    if not path.is_file():
        raise DataFormatError(str(path), "file not found", fix=_FIX)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(str(path), f"cannot read ({exc})", fix=_FIX) from None
    lines = _Lines(path, text.splitlines())
    label = _dataset(path, dataset)
    totals: list[dict[str, object]] = []
    buckets: list[pd.DataFrame] = []
    while not lines.done():
        name = lines.take(_TRACE, "a trace file name such as 'fbgemm_t856_bs65536_0.pt'")
        processed = lines.take(_PROCESSED, "'Locality stats after processing N batches of size B'")
        if processed["bs"] != name["bs"]:
            raise lines.fail(
                f"batch size {processed['bs']} differs from the file name's {name['bs']}", offset=-1
            )
        lookups = int(lines.take(_INDICES, "'Avg # of indices: N'")["v"])
        unique = int(lines.take(_UNIQUE, "'Avg # of unique cols: N'")["v"])
        if not 0 < unique <= lookups:
            raise lines.fail(f"{unique} unique rows for {lookups} lookups", offset=-1)
        mean = float(lines.take(_MEAN, "'Avg col size: X'")["v"])
        if abs(mean - lookups / unique) > 0.1:
            raise lines.fail(
                f"mean reuse {mean} disagrees with {lookups} / {unique} = {lookups / unique:.2f}",
                offset=-1,
            )
        _, lows, row_shares, row_cum, labels = _histogram(lines, _ROWS_HEAD)
        head, lows2, lookup_shares, lookup_cum, _ = _histogram(lines, _LOOKUPS_HEAD)
        if lows2 != lows:
            raise lines.fail_at(head, "its buckets differ from the row histogram's above")
        batches, batch_size = int(processed["n"]), int(processed["bs"])
        trace = name["name"]
        totals.append(
            {
                "dataset": label,
                "trace": trace,
                "tables": int(name["tables"]),
                "part": None if name["part"] is None else int(name["part"]),
                "batches": batches,
                "batch_size": batch_size,
                "lookups": lookups,
                "unique_rows": unique,
                "mean_reuse": mean,
                "lookups_per_sample": lookups / (batches * batch_size),
                "unique_share": unique / lookups,
            }
        )
        highs = [float(h) for h in lows[1:]] + [math.inf]
        buckets.append(
            pd.DataFrame(
                {
                    "dataset": label,
                    "trace": trace,
                    "bucket": labels,
                    "reuse_min": np.array(lows, dtype=np.int64),
                    "reuse_max": highs,
                    "rows_share": row_shares,
                    "rows": np.array(row_shares) * unique,
                    "lookups_share": lookup_shares,
                    "rows_share_cum": row_cum,
                    "lookups_share_cum": lookup_cum,
                }
            )
        )
    if not totals:
        raise DataFormatError(str(path), "has no locality block", fix=_FIX)
    frame = pd.DataFrame(totals)
    frame["part"] = frame["part"].astype("Int64")
    return DlrmLocality(totals=frame, histogram=pd.concat(buckets, ignore_index=True))


def hot_row_coverage(histogram: pd.DataFrame) -> pd.DataFrame:
    """Per trace and bucket edge, hottest first: the share of distinct rows looked up more
    than ``reuse_min`` times (``hot_rows_share``; ``hot_rows`` of them) and the share of the
    batch's lookups they serve (``hot_lookups_share``) -- the best hit rate of a per-batch
    cache holding exactly those rows. From the published cumulative shares:
    ``1 - cumulative share at reuse_min``."""
    parts = []
    for (dataset, trace), rows in histogram.groupby(["dataset", "trace"], sort=True):
        ordered = rows.sort_values("reuse_min")
        unique_rows = float(ordered["rows"].sum()) / max(float(ordered["rows_share"].sum()), 1e-12)
        rows_before = ordered["rows_share_cum"].shift(1, fill_value=0.0).to_numpy(dtype=float)
        lookups_before = ordered["lookups_share_cum"].shift(1, fill_value=0.0).to_numpy(dtype=float)
        part = pd.DataFrame(
            {
                "dataset": dataset,
                "trace": trace,
                "reuse_min": ordered["reuse_min"].to_numpy(),
                "hot_rows_share": 1.0 - rows_before,
                "hot_rows": (1.0 - rows_before) * unique_rows,
                "hot_lookups_share": 1.0 - lookups_before,
            }
        )
        parts.append(part.iloc[::-1])
    return pd.concat(parts, ignore_index=True)
