"""Records of spot preemptions that the importers and the models share.

* :class:`InstanceLifetime`: one spot instance, from its start to its end, with whether the
  end was a revocation (anything else — completed, stopped, still running — is right-censored).
* :class:`NodeCountTrace` (built by :func:`node_count_trace`): a count of running instances per
  tick (SkyPilot's spot traces) with what it implies — revocations and exposure per tick,
  per-node lifetimes and capacity gaps — derived once here, so the importer and the fitter
  (:mod:`gpucast.predict.bursty`) read the same numbers.
* :class:`HazardSpec`: a user-given revocation hazard, constant or piecewise in hours.

Pure: numbers in, numbers out (pandas is imported only by :func:`instance_lifetimes_frame`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.spot import zone_to_region

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: End reasons that are revocations (after lower-casing and mapping ``_`` and spaces to ``-``).
#: Every other reason (completed, stopped, running, terminated, ...) is right-censored.
REVOCATION_REASONS = frozenset(
    {
        "revoked",
        "revocation",
        "preempted",
        "preemption",
        "evicted",
        "eviction",
        "interrupted",
        "interruption",
        "spot-interruption",
        "reclaimed",
    }
)
#: Placeholder for a GPU, region or provider that a record does not give.
UNKNOWN = "unknown"
_AWS_ZONE = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)[a-z]$")


def zone_region(zone: str) -> str:
    """The region of a GCE (``us-east1-c``) or AWS (``us-east-1a``) zone; else ``zone``."""
    text = zone.strip().lower()
    aws = _AWS_ZONE.match(text)
    return aws.group(1) if aws else zone_to_region(text)


def normalise_reason(reason: str) -> str:
    """``"Spot Interruption"`` -> ``"spot-interruption"``."""
    return "-".join(reason.strip().lower().replace("_", " ").split())


def is_revocation(reason: str) -> bool:
    """Whether an end reason is a revocation (see :data:`REVOCATION_REASONS`)."""
    return normalise_reason(reason) in REVOCATION_REASONS


# -- instance lifetimes -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceLifetime:
    """One spot instance: ``start_s``/``end_s`` in Unix seconds (UTC), why it ended.

    ``observed`` is True when the end was a revocation; False means right-censored (the
    instance was still alive when it was stopped, completed or the export was taken).
    """

    line: int
    start_s: float
    end_s: float
    observed: bool
    reason: str = ""
    region: str = ""
    zone: str = ""
    gpu: str = ""
    provider: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)):
            raise InvalidSpecError("lifetime", "start and end must be finite", got=self.line)
        if self.end_s < self.start_s:
            raise InvalidSpecError(
                "lifetime",
                f"ends ({self.end_s}) before it starts ({self.start_s})",
                fix="swap start and end or fix the clock",
            )

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def market_region(self) -> str:
        """The region (from the zone when only a zone is given), or :data:`UNKNOWN`."""
        if self.region:
            return zone_region(self.region)
        return zone_region(self.zone) if self.zone else UNKNOWN


def instance_lifetimes_frame(records: Iterable[InstanceLifetime]) -> Any:
    """The records as a pandas frame in the shape ``RevocationModel.fit`` takes.

    Columns: ``gpu, region, zone, provider, start_s, end_s, duration_s, observed, reason``;
    a missing GPU, region or provider is :data:`UNKNOWN`.
    """
    import pandas as pd

    rows = list(records)
    return pd.DataFrame(
        {
            "gpu": [r.gpu or UNKNOWN for r in rows],
            "region": [r.market_region for r in rows],
            "zone": [r.zone for r in rows],
            "provider": [r.provider or UNKNOWN for r in rows],
            "start_s": np.array([r.start_s for r in rows], dtype=np.float64),
            "end_s": np.array([r.end_s for r in rows], dtype=np.float64),
            "duration_s": np.array([r.duration_s for r in rows], dtype=np.float64),
            "observed": np.array([r.observed for r in rows], dtype=bool),
            "reason": [r.reason for r in rows],
        }
    )


# -- node-count traces ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class NodeCountTrace:
    """Running spot instances per tick, and what the count implies.

    Tick ``i`` is at ``i * gap_s`` seconds. Conventions (one tick is the resolution):

    * ``revocations[i]``: a drop of k between ticks ``i - 1`` and ``i`` is k revocations at
      tick ``i`` (0 at tick 0). Only the net change is seen: a revocation and a new instance
      within one tick cancel, so a trace undercounts revocations when they are frequent.
    * ``exposure_node_s[i] = counts[i - 1] * gap_s``: the node-seconds at risk in the tick
      ending at ``i`` (0 at tick 0).
    * per-node lifetimes, first in first out: a rise of k starts k nodes at that tick, a drop
      of k revokes the k oldest; instances running at tick 0 start at 0 (their true start is
      unknown: ``lifetime_left_truncated``), instances running at the last tick are
      right-censored there (``lifetime_observed`` False).
    * capacity gaps, one per drop: from the drop's tick until the first tick whose count is
      back at the level before the drop; censored at the last tick when it never is
      (``capacity_gap_observed`` False).
    """

    gap_s: float
    counts: IntArray
    revocations: IntArray
    exposure_node_s: FloatArray
    lifetime_start_s: FloatArray
    lifetimes_s: FloatArray
    lifetime_observed: BoolArray
    lifetime_left_truncated: BoolArray
    capacity_gap_start_s: FloatArray
    capacity_gaps_s: FloatArray
    capacity_gap_observed: BoolArray
    source: str = "node-count trace"

    @property
    def tick_s(self) -> FloatArray:
        return np.arange(self.counts.size, dtype=np.float64) * self.gap_s

    @property
    def duration_s(self) -> float:
        return float(max(self.counts.size - 1, 0) * self.gap_s)

    @property
    def exposure_node_h(self) -> float:
        return float(self.exposure_node_s.sum() / 3600.0)

    @property
    def revocations_per_node_day(self) -> float:
        """Observed revocations per node per 24 h (NaN without exposure)."""
        exposure_days = float(self.exposure_node_s.sum()) / 86400.0
        return float(self.revocations.sum()) / exposure_days if exposure_days > 0 else math.nan


def _counts_array(counts: npt.ArrayLike, field: str) -> IntArray:
    raw = np.asarray(counts)
    if raw.ndim != 1 or raw.size == 0:
        raise InvalidSpecError(field, "must be a non-empty list of node counts", got=raw.shape)
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iuf":
        raise InvalidSpecError(
            field, "must hold whole numbers of running nodes", got=str(raw.dtype)
        )
    values = raw.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
    if bad.size:
        i = int(bad[0])
        raise InvalidSpecError(
            f"{field}[{i}]", "must be a whole number of running nodes", got=float(values[i])
        )
    negative = np.flatnonzero(values < 0)
    if negative.size:
        i = int(negative[0])
        raise InvalidSpecError(f"{field}[{i}]", "must be >= 0", got=int(values[i]))
    return values.astype(np.int64)


def check_gap_s(gap_s: float, field: str = "gap_s") -> float:
    """``gap_s`` as a float > 0, or an :class:`InvalidSpecError`."""
    try:
        value = float(gap_s)
    except (TypeError, ValueError):
        raise InvalidSpecError(field, "must be a number of seconds > 0", got=gap_s) from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(field, "must be a number of seconds > 0", got=gap_s)
    return value


def revocations_and_exposure(
    counts: npt.ArrayLike, gap_s: float, *, field: str = "counts"
) -> tuple[IntArray, FloatArray]:
    """Per tick: revocations (drops) and node-seconds at risk (see :class:`NodeCountTrace`)."""
    c = _counts_array(counts, field)
    gap = check_gap_s(gap_s)
    revocations = np.zeros(c.size, dtype=np.int64)
    exposure = np.zeros(c.size, dtype=np.float64)
    revocations[1:] = np.maximum(c[:-1] - c[1:], 0)
    exposure[1:] = c[:-1] * gap
    return revocations, exposure


def _fifo_lifetimes(c: IntArray, gap_s: float) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(start, lifetime, observed): the k-th departure ends the k-th arrival (FIFO).

    FIFO needs no queue: nodes leave in the order they came, and a count never goes below 0,
    so the k-th drop-out happens no earlier than the k-th arrival.
    """
    diff = np.diff(c)
    ticks = np.arange(1, c.size)
    arrival_ticks = np.concatenate(
        [np.zeros(int(c[0]), dtype=np.int64), np.repeat(ticks, np.maximum(diff, 0))]
    )
    departure_ticks = np.repeat(ticks, np.maximum(-diff, 0))
    start_s = arrival_ticks.astype(np.float64) * gap_s
    end_tick = np.full(arrival_ticks.size, c.size - 1, dtype=np.int64)
    end_tick[: departure_ticks.size] = departure_ticks
    observed = np.zeros(arrival_ticks.size, dtype=bool)
    observed[: departure_ticks.size] = True
    return start_s, (end_tick - arrival_ticks).astype(np.float64) * gap_s, observed


def _capacity_gaps(c: IntArray, gap_s: float) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(start, gap, observed) per drop: until the count is back at its pre-drop level."""
    drop_ticks = np.flatnonzero(c[1:] < c[:-1]) + 1
    levels = c[drop_ticks - 1]
    end_tick = np.full(drop_ticks.size, c.size - 1, dtype=np.int64)
    observed = np.zeros(drop_ticks.size, dtype=bool)
    for level in np.unique(levels):
        at_level = np.flatnonzero(c >= level)
        which = np.flatnonzero(levels == level)
        pos = np.searchsorted(at_level, drop_ticks[which], side="right")
        found = pos < at_level.size
        end_tick[which[found]] = at_level[pos[found]]
        observed[which[found]] = True
    start_s = drop_ticks.astype(np.float64) * gap_s
    return start_s, (end_tick - drop_ticks).astype(np.float64) * gap_s, observed


def node_count_trace(
    counts: npt.ArrayLike, gap_s: float, *, source: str = "node-count trace"
) -> NodeCountTrace:
    """Derive revocations, exposure, lifetimes and capacity gaps from per-tick node counts."""
    c = _counts_array(counts, "counts")
    gap = check_gap_s(gap_s)
    revocations, exposure = revocations_and_exposure(c, gap)
    life_start, lifetimes, life_observed = _fifo_lifetimes(c, gap)
    left_truncated = np.zeros(life_start.size, dtype=bool)
    left_truncated[: int(c[0])] = True
    gap_start, gaps, gap_observed = _capacity_gaps(c, gap)
    return NodeCountTrace(
        gap_s=gap,
        counts=c,
        revocations=revocations,
        exposure_node_s=exposure,
        lifetime_start_s=life_start,
        lifetimes_s=lifetimes,
        lifetime_observed=life_observed,
        lifetime_left_truncated=left_truncated,
        capacity_gap_start_s=gap_start,
        capacity_gaps_s=gaps,
        capacity_gap_observed=gap_observed,
        source=source,
    )


# -- hazard specs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HazardSpec:
    """A revocation hazard given by the user: ``hazard_per_hour[i]`` from ``start_h[i]`` on.

    ``start_h`` starts at 0 and increases; the last hazard holds for ever. One row is a
    constant hazard.
    """

    start_h: tuple[float, ...]
    hazard_per_hour: tuple[float, ...]
    source: str = "user-given hazard"

    def __post_init__(self) -> None:
        if len(self.start_h) != len(self.hazard_per_hour) or not self.start_h:
            raise InvalidSpecError(
                "hazard table",
                "needs one hazard_per_hour per start_h, and at least one row",
                got=(len(self.start_h), len(self.hazard_per_hour)),
            )
        if self.start_h[0] != 0:
            raise InvalidSpecError(
                "start_h", "must start at 0", got=self.start_h[0], fix="make the first row 0,<h>"
            )
        for i, (a, b) in enumerate(zip(self.start_h, self.start_h[1:], strict=False)):
            if not (math.isfinite(b) and b > a):
                raise InvalidSpecError(
                    f"start_h[{i + 1}]",
                    "must increase from row to row",
                    got=b,
                    fix="sort the table by start_h and drop repeated rows",
                )
        for i, h in enumerate(self.hazard_per_hour):
            if not (math.isfinite(h) and h >= 0):
                raise InvalidSpecError(
                    f"hazard_per_hour[{i}]",
                    "must be a revocation rate >= 0 per hour",
                    got=h,
                    fix="e.g. 0.05 for one revocation per 20 node-hours",
                )

    @classmethod
    def constant(cls, hazard_per_hour: float, *, source: str = "user-given hazard") -> HazardSpec:
        return cls(start_h=(0.0,), hazard_per_hour=(float(hazard_per_hour),), source=source)

    @classmethod
    def table(
        cls,
        start_h: Sequence[float],
        hazard_per_hour: Sequence[float],
        *,
        source: str = "user-given hazard",
    ) -> HazardSpec:
        return cls(
            start_h=tuple(float(x) for x in start_h),
            hazard_per_hour=tuple(float(x) for x in hazard_per_hour),
            source=source,
        )

    @property
    def is_constant(self) -> bool:
        return len(self.hazard_per_hour) == 1
