"""MLPerf reference convergence points (``data/convergence.csv``) as ConvergencePoints.

One row per (benchmark, reference global batch), copied from the RCP files of
``mlcommons/logging`` (``source_url`` points at the file at its commit) with the per-seed values
kept raw (``values``, semicolon-separated). ``mean``, ``std``, ``n_runs``, ``min``, ``max`` and
``rcp_mean`` are stored for readers of the file and checked against the values on load, so a
typo in either fails loudly. Parsing is strict and cached per process.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from importlib import resources

from gpucast.catalog._csv import (
    parse_date,
    parse_int,
    read_rows,
    require_float,
    require_text,
)
from gpucast.domain.convergence import (
    CONVERGENCE_UNITS,
    ConvergencePoint,
    ConvergenceUnit,
    SamplesToTarget,
    benchmark_points,
    samples_to_target,
)
from gpucast.domain.errors import DataFormatError, InvalidSpecError

CONVERGENCE_COLUMNS = (
    "benchmark",
    "global_batch_size",
    "unit",
    "mean",
    "std",
    "n_runs",
    "min",
    "max",
    "rcp_mean",
    "values",
    "dataset_samples",
    "tokens_per_sample",
    "rcp_folder",
    "source_url",
    "as_of",
    "note",
)
_STATS: tuple[tuple[str, Callable[[ConvergencePoint], float]], ...] = (
    ("mean", lambda p: p.mean),
    ("std", lambda p: p.std),
    ("n_runs", lambda p: p.n_runs),
    ("min", lambda p: p.min),
    ("max", lambda p: p.max),
    ("rcp_mean", lambda p: p.rcp_mean),
)


def parse_convergence(text: str, path: str) -> tuple[ConvergencePoint, ...]:
    """Convergence points from CSV text; the stored statistics must match the raw values."""
    points: list[ConvergencePoint] = []
    seen: set[tuple[str, int]] = set()
    for line, row in read_rows(text, path, CONVERGENCE_COLUMNS):
        benchmark = require_text(row["benchmark"], path=path, line=line, column="benchmark")
        batch = parse_int(
            row["global_batch_size"], path=path, line=line, column="global_batch_size", minimum=1
        )
        if (benchmark, batch) in seen:
            raise DataFormatError(
                path,
                f"second row for {benchmark} at global batch {batch}",
                line=line,
                column="global_batch_size",
            )
        seen.add((benchmark, batch))
        unit = require_text(row["unit"], path=path, line=line, column="unit")
        if unit not in CONVERGENCE_UNITS:
            raise DataFormatError(
                path,
                f"unit must be one of {', '.join(CONVERGENCE_UNITS)}, got {unit!r}",
                line=line,
                column="unit",
            )
        cells = [c.strip() for c in row["values"].split(";")]
        values = tuple(require_float(c, path=path, line=line, column="values") for c in cells)

        def optional_int(column: str, _row: dict[str, str] = row, _line: int = line) -> int | None:
            if not _row[column]:
                return None
            return parse_int(_row[column], path=path, line=_line, column=column, minimum=1)

        try:
            point = ConvergencePoint(
                benchmark=benchmark,
                global_batch_size=batch,
                unit=_unit(unit),
                values=values,
                dataset_samples=optional_int("dataset_samples"),
                tokens_per_sample=optional_int("tokens_per_sample"),
                rcp_folder=require_text(
                    row["rcp_folder"], path=path, line=line, column="rcp_folder"
                ),
                source_url=require_text(
                    row["source_url"], path=path, line=line, column="source_url"
                ),
                as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
                note=row["note"],
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
        for column, statistic in _STATS:
            stored = require_float(row[column], path=path, line=line, column=column, positive=False)
            computed = statistic(point)
            if not math.isclose(stored, computed, rel_tol=1e-6, abs_tol=1e-9):
                raise DataFormatError(
                    path,
                    f"{column} is {stored:g} but the values give {computed:.10g}",
                    line=line,
                    column=column,
                    fix="recompute the statistics from the values column",
                )
        points.append(point)
    return tuple(points)


def _unit(text: str) -> ConvergenceUnit:
    if text == "epochs":
        return "epochs"
    if text == "tokens":
        return "tokens"
    return "samples"


@functools.cache
def load_convergence() -> tuple[ConvergencePoint, ...]:
    """The built-in MLPerf Training reference convergence points (v4.0 rules)."""
    text = (
        resources.files("gpucast.catalog")
        .joinpath("data", "convergence.csv")
        .read_text(encoding="utf-8")
    )
    return parse_convergence(text, "convergence.csv")


def convergence_points(benchmark: str) -> tuple[ConvergencePoint, ...]:
    """The built-in points of one benchmark, by global batch (unknown names list the known)."""
    return benchmark_points(load_convergence(), benchmark)


def mlperf_samples_to_target(benchmark: str, global_batch: int) -> SamplesToTarget:
    """:func:`~gpucast.domain.convergence.samples_to_target` on the built-in points."""
    return samples_to_target(load_convergence(), benchmark, global_batch)
