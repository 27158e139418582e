"""Prediction intervals that held-out data earned: quantiles of cross-validated residuals.

An :class:`IntervalTable` holds, per *regime*, percentiles of ``log(measured / predicted)``
over held-out predictions (see :func:`gpucast.predict.steptime.cross_validated_residuals`) --
the 10th and 90th, or wider where those covered fewer than 80% of held-out groups
(:func:`calibrated_level`) -- so a stated 80% interval covers what cross-validation saw.
Regimes say what the prediction knows: whether the GPU type had data in the fit (``gpu_seen``)
and whether the workload was calibrated by a measurement (``calibrated``); ``same_gpu`` is a
measurement on the very GPU predicted (another batch). :data:`NEW_SOURCE` holds what leaving
a whole *source* out earned (a code base, its servers and data loaders, the fit never saw:
:func:`gpucast.predict.steptime.source_held_out`); an uncalibrated prediction -- no
measurement of the user's own workload -- states the envelope of its regime's band and that
one (:meth:`IntervalTable.ratios`), since the user's code base is never one of the sources.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Regimes of the interval table, most informed first. ``uncalibrated`` without a qualifier
#: is a workload the data never measured on a GPU type it has (``gpu_seen``), or one it
#: measured on other GPU types (``gpu_unseen``); ``gpu_seen/measured_elsewhere`` a workload
#: the data measured (on other GPU types or in another source) predicted without its factor.
REGIMES: tuple[str, ...] = (
    "same_gpu/calibrated",
    "gpu_seen/calibrated",
    "gpu_seen/uncalibrated",
    "gpu_unseen/calibrated",
    "gpu_unseen/uncalibrated",
    "gpu_seen/measured_elsewhere",
)
#: A prediction calibrated by one measurement, by how far the predicted batch is from the
#: measured one: up to this many doublings either way (the error grows with the distance: the
#: fit's split between a step's fixed and per-sample cost is off by a slope that differs from
#: one workload to the next). Each regime of :data:`CALIBRATED` splits into these
#: (``same_gpu/calibrated/batch_x2``, ...); the plain regime pools every distance.
BATCH_DISTANCE: tuple[tuple[float, str], ...] = (
    (1.0, "batch_x2"),
    (2.0, "batch_x4"),
    (3.0, "batch_x8"),
    (math.inf, "batch_far"),
)
#: A measurement on this very GPU (at another batch).
SAME_GPU = "same_gpu/calibrated"
#: Two measurements on this very GPU, at a smaller and a larger batch: the step's fixed and
#: per-sample parts each scaled to both (:func:`gpucast.predict.roofline.two_part_scale`).
BRACKETED = f"{SAME_GPU}/bracketed"
#: Regimes a measurement of the user's workload calibrates (on this GPU, on another GPU type
#: the fit has, on another GPU type it lacks): split by :data:`BATCH_DISTANCE`.
CALIBRATED: tuple[str, ...] = (SAME_GPU, "gpu_seen/calibrated", "gpu_unseen/calibrated")
#: Calibrated by a measurement on another GPU type: the fixed part of the step is carried
#: from the measured GPU (:func:`gpucast.predict.roofline.carried_fixed_ratio`).
CROSS_GPU: tuple[str, ...] = ("gpu_seen/calibrated", "gpu_unseen/calibrated")
#: A GPU type without data running a workload without data: no held-out fold is both, so it
#: states the envelope of the two it combines (:meth:`IntervalTable.ratios`).
NOVEL = "gpu_unseen/novel_workload"
#: A step at a precision no held-out step ran (fp8 outside the LLM path: its efficiency is
#: fitted on whole LLM runs, no profiled single step at fp8 is in the data): no fold says how
#: far off it is, so it states the widest band of any uncalibrated regime (their envelope,
#: widened by :data:`NEW_SOURCE`), whatever the GPU, workload or calibration.
UNVALIDATED_PRECISION = "unvalidated_precision"
#: Regimes without a measurement of the user's workload: :data:`NEW_SOURCE` widens them.
UNCALIBRATED: frozenset[str] = frozenset(
    {
        "gpu_seen/uncalibrated",
        "gpu_unseen/uncalibrated",
        "gpu_seen/measured_elsewhere",
        NOVEL,
        UNVALIDATED_PRECISION,
    }
)
#: A code base none of the fit's sources ran (leave one source out, grouped by source).
NEW_SOURCE = "new_source/uncalibrated"
#: What an 80% interval is made of: the 10th and 90th percentiles.
INTERVAL_QUANTILES = (0.10, 0.90)
#: The share of held-out cases a stated interval is meant to cover.
TARGET_COVERAGE = 0.80
#: Upper quantile levels :func:`calibrated_level` tries, from the nominal 0.90 up: residuals
#: pooled over few held-out groups spread less than a new group's do, so the nominal
#: percentiles cover fewer than 80% of new groups.
LEVELS: tuple[float, ...] = tuple(round(0.90 + 0.005 * i, 3) for i in range(20))
#: Where a regime without validated residuals borrows from (the next less informed one).
_FALLBACK: dict[str, tuple[str, ...]] = {
    "same_gpu/calibrated": REGIMES,
    "gpu_seen/calibrated": REGIMES[1:],
    "gpu_seen/uncalibrated": (REGIMES[2], REGIMES[4]),
    "gpu_unseen/calibrated": (REGIMES[3], REGIMES[4]),
    "gpu_unseen/uncalibrated": (REGIMES[4],),
    "gpu_seen/measured_elsewhere": (REGIMES[5], REGIMES[2]),
    NOVEL: (REGIMES[2], REGIMES[4]),
    UNVALIDATED_PRECISION: (REGIMES[2], REGIMES[4], REGIMES[5]),
}
_FALLBACK.update(
    {
        f"{base}/{suffix}": (f"{base}/{suffix}", *_FALLBACK[base])
        for base in CALIBRATED
        for _, suffix in BATCH_DISTANCE
    }
)
_FALLBACK[BRACKETED] = (BRACKETED, *_FALLBACK[f"{SAME_GPU}/{BATCH_DISTANCE[0][1]}"])
#: Regimes whose band also spans these others' (on top of :data:`NEW_SOURCE`'s).
_ENVELOPE: dict[str, tuple[str, ...]] = {
    NOVEL: ("gpu_seen/uncalibrated", "gpu_unseen/uncalibrated"),
    UNVALIDATED_PRECISION: tuple(sorted(UNCALIBRATED - {NOVEL, UNVALIDATED_PRECISION})),
}


def batch_regime(base: str, measured_batch: float | None, batch: float) -> str:
    """The :data:`BATCH_DISTANCE` split of calibrated regime ``base`` for a prediction at
    ``batch`` from a measurement at ``measured_batch`` (``base`` itself when not known)."""
    if measured_batch is None or measured_batch <= 0 or batch <= 0:
        return base
    return distance_regimes(base)[int(batch_distance_index(measured_batch, batch))]


def distance_regimes(base: str) -> tuple[str, ...]:
    """The names of ``base``'s :data:`BATCH_DISTANCE` regimes, nearest first."""
    return tuple(f"{base}/{suffix}" for _, suffix in BATCH_DISTANCE)


def batch_regimes(
    base: str, measured_batch: npt.ArrayLike, batch: npt.ArrayLike
) -> npt.NDArray[np.object_]:
    """Vectorised :func:`batch_regime` (batches known)."""
    names = np.asarray(distance_regimes(base), dtype=object)
    return np.asarray(names[batch_distance_index(measured_batch, batch)], dtype=object)


def batch_distance_index(
    measured_batch: npt.ArrayLike, batch: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Per batch, the index into :data:`BATCH_DISTANCE` of its distance from the measured
    batch (vectorised)."""
    doublings = np.abs(
        np.log2(np.asarray(batch, dtype=np.float64) / np.asarray(measured_batch, dtype=np.float64))
    )
    limits = np.array([limit for limit, _ in BATCH_DISTANCE])
    return np.asarray(np.searchsorted(limits, doublings - 1e-9), dtype=np.int64)


def regime(gpu_seen: bool, calibrated: bool) -> str:
    seen = "seen" if gpu_seen else "unseen"
    return f"gpu_{seen}/{'calibrated' if calibrated else 'uncalibrated'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class IntervalTable:
    """Per regime: 10th/90th percentiles of cross-validated log(measured / predicted), and
    the number of held-out predictions they rest on."""

    q_low: Mapping[str, float] = field(default_factory=dict)
    q_high: Mapping[str, float] = field(default_factory=dict)
    n: Mapping[str, int] = field(default_factory=dict)
    mape_pct: Mapping[str, float] = field(default_factory=dict)
    #: per regime, the upper quantile level of ``q_high`` (``q_low`` at 1 - level): 0.90 where
    #: the nominal 10th/90th percentiles were kept, more where they covered too few held-out
    #: groups (:func:`calibrated_level`); regimes absent: 0.90
    level: Mapping[str, float] = field(default_factory=dict)

    def resolved(self, name: str) -> str | None:
        """The row whose quantiles :meth:`ratios` uses for regime ``name``: the regime's own,
        else the next wider regime's (None: none)."""
        for key in _FALLBACK.get(name, (name,)):
            if key in self.q_low and key in self.q_high:
                return key
        return None

    def ratios(self, name: str) -> tuple[float, float]:
        """(lower, upper) multipliers of a prediction in regime ``name`` (see
        :meth:`resolved`; 1/1.5 and 1.5 when nothing is validated), widened to the
        :data:`NEW_SOURCE` band for an uncalibrated regime (:meth:`widened`)."""
        key = self.resolved(name)
        if key is None:
            return 1.0 / 1.5, 1.5
        low, high = self.q_low[key], self.q_high[key]
        for other in _ENVELOPE.get(name, ()):
            if other in self.q_low:
                low, high = min(low, self.q_low[other]), max(high, self.q_high[other])
        if self.widened(name):
            low = min(low, self.q_low[NEW_SOURCE])
            high = max(high, self.q_high[NEW_SOURCE])
        return math.exp(low), math.exp(high)

    def widened(self, name: str) -> bool:
        """Whether :meth:`ratios` of regime ``name`` reaches past the regime's own band to the
        :data:`NEW_SOURCE` one (uncalibrated regimes, where the table has that row)."""
        key = self.resolved(name)
        if key is None or name not in UNCALIBRATED or NEW_SOURCE not in self.q_low:
            return False
        keys = [key, *(k for k in _ENVELOPE.get(name, ()) if k in self.q_low)]
        return self.q_low[NEW_SOURCE] < min(self.q_low[k] for k in keys) or self.q_high[
            NEW_SOURCE
        ] > max(self.q_high[k] for k in keys)

    def __bool__(self) -> bool:
        return bool(self.q_low)

    def to_dict(self) -> dict[str, Any]:
        return {
            "q_low": dict(self.q_low),
            "q_high": dict(self.q_high),
            "n": dict(self.n),
            "mape_pct": dict(self.mape_pct),
            "level": dict(self.level),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IntervalTable:
        return cls(
            q_low={str(k): float(v) for k, v in dict(data.get("q_low", {})).items()},
            q_high={str(k): float(v) for k, v in dict(data.get("q_high", {})).items()},
            n={str(k): int(v) for k, v in dict(data.get("n", {})).items()},
            mape_pct={str(k): float(v) for k, v in dict(data.get("mape_pct", {})).items()},
            level={str(k): float(v) for k, v in dict(data.get("level", {})).items()},
        )

    @classmethod
    def from_residuals(
        cls,
        residuals: Mapping[str, FloatArray],
        levels: Mapping[str, float] | None = None,
    ) -> IntervalTable:
        """Quantiles of log residuals per regime, at ``levels[regime]`` (default the nominal
        :data:`INTERVAL_QUANTILES`); regimes without residuals are left out."""
        lo, hi, n, mape, level = {}, {}, {}, {}, {}
        for name, r in residuals.items():
            r = np.asarray(r, dtype=np.float64)
            r = r[np.isfinite(r)]
            if not r.size:
                continue
            q = float((levels or {}).get(name, INTERVAL_QUANTILES[1]))
            lo[name], hi[name] = (float(x) for x in np.quantile(r, (1.0 - q, q)))
            n[name] = int(r.size)
            mape[name] = float(100.0 * np.mean(np.abs(np.exp(-r) - 1.0)))
            level[name] = q
        return cls(q_low=lo, q_high=hi, n=n, mape_pct=mape, level=level)


def percentile_words(level: float, groups: str = "held-out groups") -> str:
    """How an interval at upper quantile ``level`` was made, in words (``groups``: what was
    held out)."""
    if abs(level - INTERVAL_QUANTILES[1]) < 1e-9:
        return "10th-90th percentiles"
    low, high = _ordinal(100 * (1 - level)), _ordinal(100 * level)
    return f"{low}-{high} percentiles, the band that covered 80% of {groups}"


def _ordinal(value: float) -> str:
    """``7th``, ``93rd``, ``92.5th``, ``1st``, ``22nd`` (English ordinals of a percentile)."""
    text = f"{value:.3g}"
    if "." in text or "e" in text:
        return f"{text}th"
    n = int(text)
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def held_out_coverage(residuals: FloatArray, groups: npt.ArrayLike, level: float) -> float:
    """Share of residuals inside the (1 - level, level) quantiles of the *other* groups'
    residuals (NaN when no group has 5 others to compare with)."""
    return float(_coverage_by_level(residuals, groups, (level,))[0])


def _coverage_by_level(
    residuals: FloatArray, groups: npt.ArrayLike, levels: tuple[float, ...]
) -> FloatArray:
    """:func:`held_out_coverage` at each of ``levels`` (one quantile pass per group)."""
    r = np.asarray(residuals, dtype=np.float64)
    g = np.asarray(groups)
    upper = np.asarray(levels, dtype=np.float64)
    inside = np.zeros(len(upper))
    total = 0
    for value in np.unique(g):
        mine = g == value
        others = r[~mine]
        if others.size < 5:
            continue
        q = np.quantile(others, np.concatenate([1.0 - upper, upper]))
        lo, hi = q[: len(upper), None], q[len(upper) :, None]
        scored = r[mine][None, :]
        inside += np.sum((scored >= lo) & (scored <= hi), axis=1)
        total += int(mine.sum())
    return inside / total if total else np.full(len(upper), math.nan)


def calibrated_level(residuals: FloatArray, groups: npt.ArrayLike) -> float:
    """The least upper quantile level in :data:`LEVELS` whose (1 - level, level) band of the
    other groups covers :data:`TARGET_COVERAGE` of each held-out group's residuals (the
    highest level where none does): split-conformal calibration with the groups as the
    exchangeable units, since residuals of one group (a GPU, a workload) move together."""
    covered = _coverage_by_level(residuals, groups, LEVELS)
    for level, share in zip(LEVELS, covered, strict=True):
        if not math.isnan(share) and share >= TARGET_COVERAGE:
            return level
    return LEVELS[-1]


def held_out_bands(residuals: FloatArray, groups: npt.ArrayLike) -> dict[str, tuple[float, float]]:
    """Per group: the band the *other* groups give it, at the level :func:`calibrated_level`
    picks on those others alone, so a check of its coverage never sees the group it scores
    (groups with fewer than 5 other residuals get none)."""
    r = np.asarray(residuals, dtype=np.float64)
    g = np.asarray(groups).astype(str)
    bands: dict[str, tuple[float, float]] = {}
    for value in np.unique(g):
        others, their_groups = r[g != value], g[g != value]
        if others.size < 5:
            continue
        level = calibrated_level(others, their_groups)
        lo, hi = np.quantile(others, (1.0 - level, level))
        bands[str(value)] = (float(lo), float(hi))
    return bands
