"""How long a revoked node's market stays short of capacity (:mod:`gpucast.predict.bursty`):
:class:`CapacityGaps`, Kaplan-Meier on a trace's gaps with an exponential tail.
"""

from __future__ import annotations

import math
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.predict._bursty_checks import BoolArray, FloatArray, _check_rng_args
from gpucast.predict.base import Estimator, register
from gpucast.predict.revocation import EmpiricalLifetime


def _kaplan_meier(times: FloatArray, observed: BoolArray) -> tuple[FloatArray, FloatArray]:
    """(event times, survival just after each), ties of events and censorings: censored at
    ``t`` are still at risk at ``t``."""
    event_times = np.unique(times[observed])
    if event_times.size == 0:
        return event_times, event_times.copy()
    sorted_times = np.sort(times)
    at_risk = sorted_times.size - np.searchsorted(sorted_times, event_times, side="left")
    died = np.sort(times[observed])
    deaths = np.searchsorted(died, event_times, side="right") - np.searchsorted(
        died, event_times, side="left"
    )
    surv = np.cumprod(1.0 - deaths / at_risk)
    return event_times, np.minimum.accumulate(surv)


@register
class CapacityGaps(Estimator):
    """How long a market stays short of capacity after a revocation, from a trace's gaps.

    Kaplan–Meier on the gaps (a gap still open when the trace ended is right-censored at its
    length so far). Beyond the last observed recovery — where censored gaps leave survival
    mass that the data cannot place — the survival continues as an exponential whose rate is
    Jeffreys' 0.5 / (the gap-seconds observed beyond that point) (else 0.5 / all gap-seconds):
    long and uncertain, as the data are.
    """

    kind = "capacity-gaps"
    schema_version = 1

    def __init__(self) -> None:
        self._fitted_state: dict[str, Any] | None = None

    @property
    def is_fitted(self) -> bool:
        return self._fitted_state is not None

    def fit(self, gaps_s: npt.ArrayLike, observed: npt.ArrayLike | None = None) -> Self:
        """``gaps_s``: one gap per drop; ``observed``: False where the gap was still open at
        the end of the trace (default: all observed)."""
        gaps = np.asarray(gaps_s, dtype=np.float64).reshape(-1)
        seen = (
            np.ones(gaps.size, dtype=bool)
            if observed is None
            else np.asarray(observed, dtype=bool).reshape(-1)
        )
        if gaps.size == 0:
            raise InvalidSpecError(
                "capacity gaps",
                "needs at least one gap (the trace has no drop in its node count)",
                fix="use a trace with revocations, or give the gap as a number of seconds",
            )
        if seen.shape != gaps.shape:
            raise InvalidSpecError("observed", "needs one flag per gap")
        if not (np.all(np.isfinite(gaps)) and gaps.min() >= 0):
            raise InvalidSpecError("gaps_s", "must be finite seconds >= 0")
        times, surv = _kaplan_meier(gaps, seen)
        tail_start = float(times[-1]) if times.size else 0.0
        tail_mass = float(surv[-1]) if surv.size else 1.0
        beyond = float(np.maximum(gaps - tail_start, 0.0).sum())
        total = float(gaps.sum())
        exposure = beyond if beyond > 0 else total
        tail_mean_s = exposure / 0.5 if exposure > 0 else math.inf
        self._fitted_state = {
            "km_times_s": [float(t) for t in times],
            "km_survival": [float(s) for s in surv],
            "tail_start_s": tail_start,
            "tail_mass": tail_mass,
            "tail_mean_s": tail_mean_s if math.isfinite(tail_mean_s) else None,
            "n": int(gaps.size),
            "recovered": int(seen.sum()),
            "median_observed_s": float(np.median(gaps)),
        }
        return self

    def _fitted(self) -> dict[str, Any]:
        self._require_fitted()
        assert self._fitted_state is not None
        return self._fitted_state

    def _km(self) -> EmpiricalLifetime:
        st = self._fitted()
        return EmpiricalLifetime(
            times_s=tuple(st["km_times_s"]), survival_after=tuple(st["km_survival"]), cap_s=None
        )

    @property
    def source(self) -> str:
        st = self._fitted()
        censored = st["n"] - st["recovered"]
        tail = (
            "all recovered"
            if st["tail_mass"] <= 0
            else f"beyond {st['tail_start_s'] / 60:.0f} min: exponential tail, mean "
            f"{(st['tail_mean_s'] or math.inf) / 60:.0f} min (Jeffreys)"
        )
        return (
            f"capacity gaps: Kaplan–Meier on {st['n']} gaps ({st['recovered']} recovered, "
            f"{censored} still open at the trace's end); {tail}"
        )

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """``n`` gaps in seconds: inverse Kaplan–Meier, then the exponential tail."""
        st = self._fitted()
        n = _check_rng_args(n)
        out = self._km().sample(rng, n)
        e = rng.standard_exponential(n)
        mean = st["tail_mean_s"]
        tail = st["tail_start_s"] + (e * mean if mean is not None else np.inf)
        return np.asarray(np.where(np.isinf(out), tail, out), dtype=np.float64)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        """P(the gap lasts longer than ``t_s``)."""
        st = self._fitted()
        t = np.asarray(t_s, dtype=np.float64)
        s = self._km().survival(t)
        mean = st["tail_mean_s"]
        beyond = t > st["tail_start_s"]
        if mean is not None:
            decay = np.exp(-np.maximum(t - st["tail_start_s"], 0.0) / mean)
            s = np.where(beyond, st["tail_mass"] * decay, s)
        return np.asarray(s, dtype=np.float64)

    def median_s(self) -> float:
        st = self._fitted()
        times = np.asarray(st["km_times_s"], dtype=np.float64)
        surv = np.asarray(st["km_survival"], dtype=np.float64)
        below = np.flatnonzero(surv <= 0.5)
        if below.size:
            return float(times[below[0]])
        mean = st["tail_mean_s"]
        if mean is None:
            return math.inf
        return float(st["tail_start_s"] + mean * math.log(st["tail_mass"] / 0.5))

    def _state(self) -> dict[str, Any]:
        return dict(self._fitted())

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        keys = (
            "km_times_s",
            "km_survival",
            "tail_start_s",
            "tail_mass",
            "tail_mean_s",
            "n",
            "recovered",
            "median_observed_s",
        )
        missing = [k for k in keys if k not in state]
        if missing:
            raise DataFormatError(
                "capacity-gaps model", f"bad state: missing {', '.join(missing)}", fix="refit it"
            )
        model = cls()
        model._fitted_state = {k: state[k] for k in keys}
        try:
            model._km()
        except (InvalidSpecError, TypeError, ValueError) as exc:
            raise DataFormatError(
                "capacity-gaps model", f"bad state: {exc}", fix="refit it"
            ) from None
        return model
