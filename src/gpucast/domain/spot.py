"""Facts and records of spot (transient) servers that importers and models share.

GCE's 24-hour cap on preemptible VMs, how a lifetime that reached it is censored, zone names,
and the chief-rejoining eval series of CM-DARE. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import fields_of, is_default, none_or, option
from gpucast.domain.units import duration_s

if TYPE_CHECKING:  # numpy loads with the first censoring, not with the spot facts
    import numpy as np
    import numpy.typing as npt

#: GCE stops every preemptible VM after 24 hours.
GCP_PREEMPTIBLE_CAP_S = 24 * 3600.0
#: A lifetime this close to (or beyond) the cap is the forced stop: right-censored.
DEFAULT_CAP_TOLERANCE_S = 30 * 60.0

_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")


def zone_to_region(zone: str) -> str:
    """``us-east1-c`` -> ``us-east1``; a region is returned unchanged."""
    match = _ZONE.match(zone.strip())
    return match.group(1) if match else zone.strip()


def censor_observed(
    duration_s: npt.ArrayLike,
    *,
    cap_s: float | None = GCP_PREEMPTIBLE_CAP_S,
    tolerance_s: float = DEFAULT_CAP_TOLERANCE_S,
) -> npt.NDArray[np.bool_]:
    """``True`` where a lifetime ended in a revocation, ``False`` where it reached the cap."""
    import numpy as np

    d = np.asarray(duration_s, dtype=np.float64)
    if cap_s is None:
        return np.ones(d.shape, dtype=bool)
    return d < cap_s - tolerance_s


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalSeries:
    """One chief-rejoining run: eval records (global step, wall time in s).

    ``chief_left_at_step`` is ``None`` for an undisturbed baseline run.
    """

    name: str
    steps: tuple[float, ...]
    wall_s: tuple[float, ...]
    chief_left_at_step: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotMarket:
    """How one provider's transient servers behave (``catalog/data/spot_markets.csv``).

    ``kind`` is the offering (``spot``; GCP's legacy ``preemptible``); ``current`` marks the
    kind the catalog's spot prices are for. ``max_lifetime_s`` is a forced stop (None: none);
    ``notice_s`` the warning before a revocation; billing is per ``billing_increment_s`` with
    a ``billing_minimum_s``; no provider guarantees a replacement.
    """

    provider: str
    kind: str
    notice_s: float
    max_lifetime_s: float | None
    billing_increment_s: float
    billing_minimum_s: float
    replacement_guaranteed: bool
    eviction: str
    current: bool
    source_url: str
    as_of: str

    def describe(self) -> str:
        cap = (
            f"stopped after {self.max_lifetime_s / 3600:g} h"
            if self.max_lifetime_s
            else "no maximum lifetime"
        )
        return f"{self.provider} {self.kind}: {self.notice_s:g} s notice, {cap}"


#: Where no lifetime data covers a (provider, GPU): which documented scenario plans rank by.
SPOT_SCENARIOS: tuple[str, ...] = ("pessimistic", "optimistic")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotScenario:
    """A documented assumption for spot markets without data (``spot_scenarios.csv``):
    a constant hazard (None: the AWS Spot Advisor band given by the user) and a capacity gap
    before a replacement starts."""

    name: str
    hazard_per_node_hour: float | None
    capacity_gap_s: float
    source_url: str
    as_of: str
    note: str


# -- the spot options shared by `plan train` and `simulate train` (one definition each) -----
#: Spot band (AWS Spot Advisor, interrupted per month) of the optimistic scenario.
DEFAULT_BAND = "5-10%"


def interruption_band_option() -> Any:
    return option(
        DEFAULT_BAND,
        help="AWS Spot Advisor band (interrupted per month) of the optimistic scenario.",
        example="5-10%",
    )


def hazard_option() -> Any:
    return option(
        None,
        help="Revocations per node-hour for every spot node (replaces lifetimes and scenarios).",
        example="0.05",
    )


def lifetimes_option() -> Any:
    return option(
        None,
        help="Spot lifetimes fitted on your own preemption data and stored under this name "
        "(gpucast fit lifetimes --name NAME); used for the nodes its scope covers.",
        example="aws-v100",
    )


def spot_scenario_option() -> Any:
    return option(
        "pessimistic",
        help="Where no lifetime data covers a provider and GPU, spot is ranked (plan) or "
        "reported (simulate) by this documented scenario, the other shown beside it: "
        "pessimistic | optimistic.",
        example="optimistic",
    )


def _fallback(value: Any) -> float | None:
    return none_or(lambda v: duration_s(v, field="fallback-after"))(value)


def fallback_after_option() -> Any:
    return option(
        None,
        flag="fallback-after",
        kind="text",
        parse=_fallback,
        help="A spot replacement that has waited this long for capacity is launched on demand "
        "(K failed launches retried every r: K x r); default never.",
        metavar="DURATION",
        example="15m",
    )


def _move_after(value: Any) -> float:
    return duration_s(value, field="move-after")


def move_region_option() -> Any:
    return option(
        None,
        flag="move-region",
        help="Managed recovery (SkyPilot-style failover): a spot replacement that waited "
        "--move-after for capacity is launched in this region instead (its lifetimes, "
        "capacity gaps, start-ups and prices); default: replacements stay in their region.",
        example="us-west1",
    )


def plan_move_region_option() -> Any:
    return option(
        None,
        flag="move-region",
        help="Managed recovery in plans (SkyPilot-style failover): a spot candidate's "
        "replacement that waited --move-after for capacity is launched in another region of "
        "its provider -- 'auto': the one with the cheapest spot price for the same instance "
        "type, or a region name; default: replacements stay in their region.",
        example="auto",
    )


def move_after_option() -> Any:
    return option(
        900.0,
        flag="move-after",
        kind="text",
        parse=_move_after,
        help="How long a replacement waits for capacity before it moves region.",
        metavar="DURATION",
        example="10m",
    )


def check_move_after(
    move_after_s: float, move_region: str | None = None, *, given: bool = False
) -> None:
    """``--move-after``: a finite wait >= 0; ``given`` (not its default) only beside
    ``--move-region`` (alone it did nothing without a word, QA 39 K #3)."""
    if not (math.isfinite(move_after_s) and move_after_s >= 0):
        raise InvalidSpecError(
            "move-after", "must be a wait >= 0", got=move_after_s, fix="e.g. --move-after 10m"
        )
    if given and move_region is None:
        raise InvalidSpecError(
            "move-after",
            "is how long a replacement waits before it moves region, and no --move-region is given",
            got=f"{move_after_s / 60:g} min",
            fix="add --move-region REGION, or drop --move-after",
        )


#: The highest ``--hazard-per-hour`` a plan or simulation takes: a node revoked every 6 minutes
#: on average never finishes starting up (the worst published market, 17.6 revocations per
#: node-day, is 0.73 per hour), and every revocation is an incarnation the Monte Carlo draws.
MAX_HAZARD_PER_HOUR = 10.0


def check_hazard(hazard_per_hour: float | None, lifetimes: str | None = None) -> None:
    """``--hazard-per-hour``: a finite rate in (0, :data:`MAX_HAZARD_PER_HOUR`], not beside
    ``--lifetimes NAME`` (the hazard replaces every lifetime model: the named one was dropped
    without a word, QA 37 T #4)."""
    if hazard_per_hour is None:
        return
    if lifetimes is not None:
        raise InvalidSpecError(
            "hazard-per-hour",
            "replaces every lifetime model, so --lifetimes would be ignored",
            got=f"{hazard_per_hour:g} beside --lifetimes {lifetimes}",
            fix="drop --hazard-per-hour to use the named lifetimes, or drop --lifetimes",
        )
    if not (math.isfinite(hazard_per_hour) and hazard_per_hour > 0):
        raise InvalidSpecError(
            "hazard-per-hour",
            "must be > 0 revocations per node-hour",
            got=hazard_per_hour,
            fix="e.g. --hazard-per-hour 0.05",
        )
    if hazard_per_hour > MAX_HAZARD_PER_HOUR:
        raise InvalidSpecError(
            "hazard-per-hour",
            f"must be at most {MAX_HAZARD_PER_HOUR:g} revocations per node-hour (a node "
            f"revoked every {60 / MAX_HAZARD_PER_HOUR:g} min never finishes starting; the "
            "worst published market sees 0.73 per hour)",
            got=hazard_per_hour,
            fix="e.g. --hazard-per-hour 0.05",
        )


#: The options that shape spot servers only (their lifetimes, scenario, replacements), as
#: every spot-planning request names them.
SPOT_ONLY_OPTIONS: tuple[str, ...] = (
    "hazard_per_hour",
    "lifetimes",
    "interruption_band",
    "spot_scenario",
    "fallback_after_s",
    "move_region",
)


def check_spot_only(
    request: object,
    *,
    spot: bool,
    names: tuple[str, ...],
    market: str = "this job runs on demand",
    fix: str = "add --spot",
) -> None:
    """The options ``names`` of ``request`` shape spot servers only: given (not at their
    default) to a job or plan that has none (``spot`` false), the first is refused, as
    ``--reshard-s`` without ``--elastic`` is -- they did nothing without a word while the
    plan's assumptions stated them as applied (QA 41 QS #1). ``market`` says why there is no
    spot server and ``fix`` how to get one."""
    if spot:
        return
    for f in fields_of(type(request)):
        if f.name not in names or is_default(request, f.name):
            continue
        value = getattr(request, f.name)
        if isinstance(value, bool):
            flag = f.info.cli_flag if value else f"--{f.info.negative}"
            got = flag
        else:
            flag = f.info.cli_flag
            got = f"{value / 60:g} min" if f.info.metavar == "DURATION" else value
        raise InvalidSpecError(
            flag.removeprefix("--"),
            f"shapes spot servers only, and {market}",
            got=got,
            fix=f"{fix}, or drop {flag}",
        )


def check_spot_options(scenario: str) -> None:
    if scenario not in SPOT_SCENARIOS:
        raise InvalidSpecError(
            "spot-scenario",
            f"must be one of {', '.join(SPOT_SCENARIOS)}",
            got=scenario,
            fix="e.g. --spot-scenario optimistic",
        )
