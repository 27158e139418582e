"""Held-out residuals of :mod:`gpucast.predict.steptime` into the interval table a model
states (:func:`interval_table`), its error summary (:func:`error_table`) and the
coverage of its bands on groups their quantiles never saw (:func:`nested_coverage`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from gpucast.predict._steptime_columns import FloatArray
from gpucast.predict.intervals import (
    NEW_SOURCE,
    UNCALIBRATED,
    IntervalTable,
    calibrated_level,
    held_out_bands,
)

if TYPE_CHECKING:  # pandas loads where a frame is built (fits), not to predict
    import pandas as pd


def _widened_limits(
    rows: pd.DataFrame, low: FloatArray, high: FloatArray, sources: pd.DataFrame
) -> tuple[FloatArray, FloatArray]:
    """``rows``' uncalibrated (low, high) bands widened to the new-code-base band
    (:data:`~gpucast.predict.intervals.NEW_SOURCE`) that the *other* sources of
    :func:`source_held_out`'s output ``sources`` give each row's source, as
    :meth:`IntervalTable.ratios` widens a stated one -- a nested check: the scored source's
    residuals never place its band."""
    bands = held_out_bands(
        sources["residual"].to_numpy(dtype=np.float64), sources["source"].astype(str).to_numpy()
    )
    nan = (math.nan, math.nan)
    own = np.array([bands.get(str(s), nan) for s in rows["source"]], dtype=np.float64)
    own = own.reshape(len(rows), 2)
    widen = rows["regime"].astype(str).isin(UNCALIBRATED).to_numpy() & ~np.isnan(own[:, 0])
    return (
        np.where(widen, np.fmin(low, own[:, 0]), low),
        np.where(widen, np.fmax(high, own[:, 1]), high),
    )


def interval_table(residuals: pd.DataFrame, sources: pd.DataFrame | None = None) -> IntervalTable:
    """The interval table of :func:`cross_validated_residuals`' output: one row per regime, at
    the quantile level that covered 80% of held-out groups (:func:`calibrated_level`); with
    ``sources`` (:func:`source_held_out`'s output) a :data:`~gpucast.predict.intervals.NEW_SOURCE`
    row too, its level calibrated with the sources as the groups.

    Rows per (regime, software stack) were stated until session 12; judged as
    :func:`nested_coverage` judges (each held-out group against the quantiles of the others)
    they covered less than the regime's own -- 47-78% against 66-80% -- because a stack's
    residuals in a regime come from a handful of held-out groups (2-4 GPUs, 3 MLPerf
    workloads), too few to place a 10th or 90th percentile."""
    residual, levels = {}, {}
    for name, part in residuals.groupby("regime"):
        r = part["residual"].to_numpy(dtype=np.float64)
        residual[str(name)] = r
        levels[str(name)] = calibrated_level(r, part["held_out"].astype(str).to_numpy())
    if sources is not None and len(sources):
        r = sources["residual"].to_numpy(dtype=np.float64)
        residual[NEW_SOURCE] = r
        levels[NEW_SOURCE] = calibrated_level(r, sources["source"].astype(str).to_numpy())
    return IntervalTable.from_residuals(residual, levels)


def error_table(residuals: pd.DataFrame, sources: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (regime, source, gpu): held-out rows, MAPE (%), signed median error (%) and the
    share inside the 80% interval built from the *other* held-out groups of the regime
    (:func:`nested_coverage`'s rule, ``sources`` as there)."""
    inside = _nested_inside(residuals, sources)
    frame = residuals.assign(
        ape=100.0 * np.abs(np.exp(-residuals["residual"]) - 1.0),
        err=100.0 * (np.exp(-residuals["residual"]) - 1.0),
        inside=inside,
    )
    keys = [k for k in ("regime", "source", "gpu") if k in frame.columns]
    out = (
        frame.groupby(keys)
        .agg(rows=("ape", "size"), mape_pct=("ape", "mean"), median_error_pct=("err", "median"),
             coverage=("inside", "mean"))
        .reset_index()
    )  # fmt: skip
    return out


def _held_out_limits(
    residuals: pd.DataFrame, sources: pd.DataFrame | None = None
) -> tuple[FloatArray, FloatArray]:
    """Per row: the (low, high) log-residual band the *other* held-out groups of its regime
    give it (:func:`gpucast.predict.intervals.held_out_bands`: its level calibrated on those
    others alone), with ``sources`` (:func:`source_held_out`'s output) widened as an
    uncalibrated prediction states it (:func:`_widened_limits`); NaN where too few other
    residuals exist."""
    low = np.full(len(residuals), np.nan)
    high = np.full(len(residuals), np.nan)
    groups = residuals["held_out"].astype(str).to_numpy()
    for _, part in residuals.groupby("regime"):
        pos = residuals.index.get_indexer(part.index)
        bands = held_out_bands(part["residual"].to_numpy(dtype=np.float64), groups[pos])
        for i in pos:
            low[i], high[i] = bands.get(groups[i], (math.nan, math.nan))
    if sources is not None and "source" in residuals.columns:
        judged = ~np.isnan(low)
        low, high = _widened_limits(residuals, low, high, sources)
        low, high = np.where(judged, low, np.nan), np.where(judged, high, np.nan)
    return low, high


def _nested_inside(residuals: pd.DataFrame, sources: pd.DataFrame | None = None) -> FloatArray:
    """Per row: 1 if inside the band the other held-out groups of its regime give it
    (:func:`_held_out_limits`), 0 if not, NaN when too few other residuals exist."""
    r = residuals["residual"].to_numpy(dtype=np.float64)
    low, high = _held_out_limits(residuals, sources)
    inside = ((r >= low) & (r <= high)).astype(np.float64)
    return np.where(np.isnan(low), np.nan, inside)


def nested_coverage(residuals: pd.DataFrame, sources: pd.DataFrame | None = None) -> pd.DataFrame:
    """Honest coverage of the stated 80% interval: each held-out group's residuals against
    the interval of the *other* groups in the same regime, its quantile level calibrated on
    those others alone -- with ``sources`` (:func:`source_held_out`'s output), uncalibrated
    regimes widened as the product states them (:func:`_held_out_limits`). One row per
    regime with the coverage, the share above / below and the number of rows."""
    r = residuals["residual"].to_numpy(dtype=np.float64)
    low, high = _held_out_limits(residuals, sources)
    judged = ~np.isnan(low)
    regime = residuals["regime"].to_numpy()
    rows = []
    for name in sorted(set(regime)):
        mine = judged & (regime == name)
        total = int(mine.sum())
        above = int(np.sum(mine & (r > high)))
        below = int(np.sum(mine & (r < low)))
        rows.append(
            {
                "regime": name,
                "rows": total,
                "coverage": (total - above - below) / total if total else math.nan,
                "above": above / total if total else math.nan,
                "below": below / total if total else math.nan,
            }
        )
    import pandas as pd

    return pd.DataFrame(rows)
