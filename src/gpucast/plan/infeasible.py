"""When no plan is feasible: which of the deadline and the budget excludes the plans.

The rows that only the deadline (with ``--min-p-meet``) or the budget excluded are the plans
the user could have by relaxing one of them. Over those rows (:class:`Limits`, kept as
extremes so a compact search can let the rows go):

* a row *meets* a deadline when its central time does (on demand) and its P(meet) reaches
  ``min_p_meet`` (:func:`needed_deadline_s`: the shortest deadline it meets);
* if no row meets the deadline, the **deadline** binds (the fastest row within the budget
  says how far to relax it);
* if no row that meets the deadline is within the budget, the **budget** binds (the
  cheapest row that meets the deadline says how far to raise it);
* if each alone is met by some row but no row meets both, **both** bind, and the message
  gives either way out.

Counting which reason cut the most rows cannot tell these apart: a row that misses the
deadline is counted there even when faster rows exist and the budget excludes them all.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.units import format_duration
from gpucast.plan.uncertainty import ndtri, sigmas

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: the probabilities :func:`needed_deadline_s` reads the factor's quantile at are clipped to
#: this distance from 0 and 1 (``min_p_meet`` 0 and 1 are valid requests)
_P_EDGE = 1e-15


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Extremes over the rows that only the deadline, ``--min-p-meet`` or the budget
    excluded (``inf`` when none)."""

    fastest_s: float = math.inf  # the least central time
    least_need_s: float = math.inf  # the shortest deadline any of them meets
    least_need_in_budget_s: float = math.inf  # ... of those within the budget
    cheapest_usd: float = math.inf
    cheapest_on_time_usd: float = math.inf  # of those that meet the deadline

    def merge(self, other: Limits) -> Limits:
        return Limits(
            fastest_s=min(self.fastest_s, other.fastest_s),
            least_need_s=min(self.least_need_s, other.least_need_s),
            least_need_in_budget_s=min(self.least_need_in_budget_s, other.least_need_in_budget_s),
            cheapest_usd=min(self.cheapest_usd, other.cheapest_usd),
            cheapest_on_time_usd=min(self.cheapest_on_time_usd, other.cheapest_on_time_usd),
        )

    @staticmethod
    def of(
        *,
        rows: BoolArray,
        time_s: FloatArray,
        need_s: FloatArray,
        cost_usd: FloatArray,
        deadline_s: float | None,
        budget_usd: float | None,
    ) -> Limits:
        """The extremes over ``rows`` (a mask)."""

        def least(values: FloatArray, mask: BoolArray) -> float:
            return float(np.min(values[mask])) if mask.any() else math.inf

        on_time = rows if deadline_s is None else rows & (need_s <= deadline_s)
        in_budget = rows if budget_usd is None else rows & (cost_usd <= budget_usd)
        return Limits(
            fastest_s=least(time_s, rows),
            least_need_s=least(need_s, rows),
            least_need_in_budget_s=least(need_s, in_budget),
            cheapest_usd=least(cost_usd, rows),
            cheapest_on_time_usd=least(cost_usd, on_time),
        )


def needed_deadline_s(
    *,
    time_s: FloatArray,
    train_s: FloatArray,
    ratio_lower: FloatArray,
    ratio_upper: FloatArray,
    spot: BoolArray,
    startup_s: float,
    min_p_meet: float,
) -> FloatArray:
    """The shortest deadline each row meets: ``startup + train x F_q`` with ``F_q`` the
    speed factor's ``min_p_meet`` quantile (:mod:`gpucast.plan.uncertainty`), and, on
    demand, at least the central time. For a spot row it is a lower bound (revocations only
    slow a run down)."""
    p = min(max(float(min_p_meet), _P_EDGE), 1.0 - _P_EDGE)
    z = float(ndtri(p))
    s_lo, s_hi = sigmas(ratio_lower, ratio_upper)
    factor = np.exp(z * (s_lo if z < 0 else s_hi))
    need = startup_s + np.asarray(train_s, dtype=np.float64) * factor
    return np.asarray(np.where(spot, need, np.maximum(need, time_s)), dtype=np.float64)


def deadline_flag(seconds: float) -> str:
    """A ``--deadline`` value of at least ``seconds``: whole minutes under 2 h, tenths of an
    hour under 2 days, else tenths of a day."""
    if seconds < 2 * 3600:
        return f"{max(math.ceil(seconds / 60.0), 1)}m"
    if seconds < 2 * 86400:
        return f"{math.ceil(seconds / 360.0) / 10:g}h"
    return f"{math.ceil(seconds / 8640.0) / 10:g}d"


def budget_flag(usd: float) -> str:
    """A ``--budget`` value of at least ``usd``: whole dollars from $10, else cents."""
    if usd >= 10.0:
        return f"${math.ceil(usd):,}"
    return f"${math.ceil(usd * 100.0) / 100.0:.2f}"


def _raise_budget(usd: float) -> str:
    return f"costs ${usd:,.2f}: raise --budget to at least {budget_flag(usd)}"


def binding(
    limits: Limits,
    *,
    deadline_s: float | None,
    budget_usd: float | None,
    min_p_meet: float,
    deadline_default: bool = False,
) -> tuple[str, str] | None:
    """(what excludes the plans, how to relax it), or None when ``limits`` cannot tell: no
    such row, one meets both (the plans fell to a later check), or none meets a deadline
    that can be named (simulated spot plans that revocations make miss it).
    ``deadline_default``: the deadline is the option's default, which the line says (QA 40 P
    #10: "misses the deadline" where the user had given none)."""
    if not math.isfinite(limits.cheapest_usd):
        return None
    the_deadline = (
        f"the deadline ({format_duration(deadline_s)}, --deadline's default)"
        if deadline_default and deadline_s is not None
        else "the deadline"
    )
    sure = f" with P(meet) >= {min_p_meet:.0%}" if min_p_meet > 0 else ""
    deadline_alone = deadline_s is not None and limits.least_need_s > deadline_s
    if deadline_alone and not math.isfinite(limits.least_need_s):
        return None
    budget_alone = budget_usd is not None and limits.cheapest_usd > budget_usd
    combined = (
        deadline_s is not None
        and budget_usd is not None
        and limits.cheapest_on_time_usd > budget_usd
    )
    fastest = f"the fastest plan takes {format_duration(limits.fastest_s)}"
    if deadline_alone and budget_alone:
        return (
            f"no plan meets {the_deadline} and none is within the budget",
            f"{fastest} (the earliest deadline a plan meets{sure}: "
            f"{format_duration(limits.least_need_s)}) and the cheapest costs "
            f"${limits.cheapest_usd:,.2f}: relax --deadline to at least "
            f"{deadline_flag(limits.least_need_s)} and raise --budget, or raise --max-gpus",
        )
    if deadline_alone:
        need = limits.least_need_in_budget_s if budget_usd is not None else limits.least_need_s
        within = need > limits.least_need_s  # the budget excludes the earliest too
        earliest = ""
        if sure or within:
            earliest = f"; the earliest deadline a plan meets{sure} is " + format_duration(
                limits.least_need_s
            )
        relax = f"relax --deadline to at least {deadline_flag(need)}"
        if within and math.isfinite(need):
            earliest += f" ({format_duration(need)} within the budget)"
        elif within:  # no plan within the budget meets a deadline that can be named
            relax = f"relax --deadline to at least {deadline_flag(limits.least_need_s)} and "
            relax += "raise --budget"
        return (
            f"no plan{' within the budget' if within else ''} meets {the_deadline}{sure}",
            f"{fastest}{earliest}: {relax}"
            + (", lower --min-p-meet" if min_p_meet > 0 else "")
            + " or raise --max-gpus",
        )
    if budget_alone:
        on_time = f" that meets {the_deadline}{sure}" if deadline_s is not None else ""
        return (
            "every plan is over the budget",
            f"the cheapest plan{on_time} {_raise_budget(limits.cheapest_on_time_usd)}",
        )
    if combined:
        need = limits.least_need_in_budget_s
        other = (
            f"; or the earliest deadline a plan within the budget meets{sure} is "
            f"{format_duration(need)}: relax --deadline to at least {deadline_flag(need)}"
            if math.isfinite(need)
            else ""
        )
        return (
            f"no plan meets both {the_deadline} and the budget",
            f"the cheapest plan that meets {the_deadline}{sure} "
            f"{_raise_budget(limits.cheapest_on_time_usd)}{other}",
        )
    return None
