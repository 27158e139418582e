"""Piecewise-constant hazards (:mod:`gpucast.predict.bursty`): a user-given one on the
node's age or the run's clock (:class:`PiecewiseHazardLifetime`) and its fit on
censored lifetimes (:class:`PiecewiseHazardModel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.preemption import HazardSpec
from gpucast.predict._bursty_checks import _H, FloatArray, _cap, _check_cap, _check_rng_args
from gpucast.predict.base import Estimator, register

#: What a piecewise hazard's hours count from: the node's age, or the run's clock (a hazard
#: shared by every node of the run, e.g. a known busy period).
CLOCKS = ("age", "run")


@dataclass(frozen=True, slots=True, kw_only=True)
class PiecewiseHazardLifetime:
    """Hazard ``hazard_per_hour[i]`` from hour ``start_h[i]`` on (the last one for ever).

    ``clock="age"``: hours since the node started (e.g. a higher hazard in a VM's first hour);
    the nodes are independent. ``clock="run"``: hours since the run started, shared by all of
    its nodes; ``sample``/``survival`` then describe a node started at the run's start.
    Sampling inverts the cumulative hazard with one Exp(1) draw per node.
    """

    start_h: tuple[float, ...]
    hazard_per_hour: tuple[float, ...]
    clock: str = "age"
    cap_s: float | None = None
    source: str = "piecewise hazard"

    def __post_init__(self) -> None:
        HazardSpec(start_h=self.start_h, hazard_per_hour=self.hazard_per_hour)  # validates
        if self.clock not in CLOCKS:
            raise InvalidSpecError("clock", f"must be one of {', '.join(CLOCKS)}", got=self.clock)
        _check_cap(self.cap_s)

    @classmethod
    def from_spec(
        cls, spec: HazardSpec, *, clock: str = "age", cap_s: float | None = None
    ) -> PiecewiseHazardLifetime:
        return cls(
            start_h=tuple(spec.start_h),
            hazard_per_hour=tuple(spec.hazard_per_hour),
            clock=clock,
            cap_s=cap_s,
            source=spec.source if clock == "age" else f"{spec.source} (on the run's clock)",
        )

    def _table(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        edges = np.asarray(self.start_h, dtype=np.float64) * _H
        rate = np.asarray(self.hazard_per_hour, dtype=np.float64) / _H
        cum = np.concatenate([[0.0], np.cumsum(rate[:-1] * np.diff(edges))])
        return edges, rate, cum

    def cumulative_hazard(self, t_s: npt.ArrayLike) -> FloatArray:
        """H(t): expected revocations of one node by ``t_s`` (on the distribution's clock)."""
        t = np.maximum(np.asarray(t_s, dtype=np.float64), 0.0)
        edges, rate, cum = self._table()
        i = np.searchsorted(edges, t, side="right") - 1
        with np.errstate(invalid="ignore"):
            h = cum[i] + np.where(rate[i] > 0, rate[i] * (t - edges[i]), 0.0)
        return np.asarray(h, dtype=np.float64)

    def _inverse(self, target: FloatArray) -> FloatArray:
        """The time at which H reaches ``target`` (inf when it never does)."""
        edges, rate, cum = self._table()
        # the last segment whose start the target has reached: with ties (zero-rate segments
        # leave the cumulative hazard flat) the last of them, so only the final segment can
        # have a zero rate here (the target is then never reached)
        i = np.searchsorted(cum, target, side="right") - 1
        r = rate[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(r > 0, edges[i] + (target - cum[i]) / np.where(r > 0, r, 1.0), np.inf)
        return np.asarray(t, dtype=np.float64)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        n = _check_rng_args(n)
        return _cap(self._inverse(rng.standard_exponential(n)), self.cap_s)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        t = np.asarray(t_s, dtype=np.float64)
        s = np.exp(-self.cumulative_hazard(t))
        if self.cap_s is not None:
            s = np.where(t >= self.cap_s, 0.0, s)
        return np.asarray(s, dtype=np.float64)

    def environment(self, rng: np.random.Generator, runs: int, horizon_s: float) -> None:
        """Nothing to draw: the hazard's path is the same in every run."""
        _check_rng_args(runs, "runs")
        return None

    def sample_at(
        self,
        rng: np.random.Generator,
        start_s: FloatArray,
        run: npt.NDArray[np.int64],
        env: Any,
    ) -> FloatArray:
        """Lifetimes of nodes requested at ``start_s`` (on the run's clock)."""
        start = np.asarray(start_s, dtype=np.float64).reshape(-1)
        e = rng.standard_exponential(start.size)
        if self.clock == "age":
            return _cap(self._inverse(e), self.cap_s)
        death = self._inverse(self.cumulative_hazard(start) + e)
        return _cap(np.maximum(death - start, 0.0), self.cap_s)


@register
class PiecewiseHazardModel(Estimator):
    """A piecewise-constant hazard on node age, fitted on censored lifetimes: in each age bin
    ``[breaks_h[i], breaks_h[i + 1])`` the revocations there over the node-hours spent there
    (the maximum-likelihood piecewise-exponential model). A bin no node reached keeps the
    previous bin's hazard; without any revocation the hazard is Jeffreys' 0.5 / exposure."""

    kind = "piecewise-hazard"
    schema_version = 1

    def __init__(
        self,
        *,
        breaks_h: tuple[float, ...] = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0),
        cap_s: float | None = None,
    ) -> None:
        HazardSpec(start_h=tuple(breaks_h), hazard_per_hour=tuple(0.0 for _ in breaks_h))
        _check_cap(cap_s)
        self.breaks_h = tuple(float(b) for b in breaks_h)
        self.cap_s = cap_s
        self._hazard: tuple[float, ...] | None = None
        self._source = ""

    @property
    def is_fitted(self) -> bool:
        return self._hazard is not None

    def fit(self, duration_s: npt.ArrayLike, observed: npt.ArrayLike | None = None) -> Self:
        """``duration_s`` per node; ``observed`` False where the node was not revoked
        (right-censored; default all revoked)."""
        d = np.asarray(duration_s, dtype=np.float64).reshape(-1)
        seen = (
            np.ones(d.size, dtype=bool)
            if observed is None
            else np.asarray(observed, dtype=bool).reshape(-1)
        )
        if d.size == 0 or seen.shape != d.shape:
            raise InvalidSpecError("lifetimes", "need one duration and one flag per node, >= 1")
        if not (np.all(np.isfinite(d)) and d.min() >= 0):
            raise InvalidSpecError("duration_s", "must be finite seconds >= 0")
        edges = np.asarray(self.breaks_h) * _H
        upper = np.append(edges[1:], np.inf)
        exposure_h = np.clip(d[:, None] - edges[None, :], 0.0, (upper - edges)[None, :]).sum(0) / _H
        bins = np.searchsorted(edges, d, side="right") - 1
        events = np.bincount(bins[seen], minlength=edges.size).astype(np.float64)
        total_h, total_events = float(exposure_h.sum()), int(events.sum())
        if total_h <= 0:
            raise InvalidSpecError("duration_s", "the nodes spent no time alive (all 0 s)")
        if total_events == 0:
            rate = 0.5 / total_h
            hazard = [rate] * edges.size
            why = f"no revocations: Jeffreys' 0.5 / {total_h:.0f} node-h in every bin"
        else:
            hazard = []
            for i in range(edges.size):
                if exposure_h[i] > 0:
                    hazard.append(float(events[i] / exposure_h[i]))
                else:
                    hazard.append(hazard[-1] if hazard else total_events / total_h)
            why = f"{total_events} revocations in {total_h:.0f} node-h"
        self._hazard = tuple(float(h) for h in hazard)
        self._source = f"piecewise hazard fitted on {d.size} lifetimes ({why})"
        return self

    def spec(self) -> HazardSpec:
        self._require_fitted()
        assert self._hazard is not None
        return HazardSpec(start_h=self.breaks_h, hazard_per_hour=self._hazard, source=self._source)

    def distribution(self) -> PiecewiseHazardLifetime:
        return PiecewiseHazardLifetime.from_spec(self.spec(), clock="age", cap_s=self.cap_s)

    def _state(self) -> dict[str, Any]:
        spec = self.spec()
        return {
            "breaks_h": list(self.breaks_h),
            "cap_s": self.cap_s,
            "hazard_per_hour": list(spec.hazard_per_hour),
            "source": self._source,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(breaks_h=tuple(state["breaks_h"]), cap_s=state["cap_s"])
            hazard = tuple(float(h) for h in state["hazard_per_hour"])
            HazardSpec(start_h=model.breaks_h, hazard_per_hour=hazard)
            source = str(state["source"])
        except (KeyError, TypeError, ValueError, InvalidSpecError) as exc:
            raise DataFormatError(
                "piecewise-hazard model", f"bad state: {exc}", fix="refit it"
            ) from None
        model._hazard = hazard
        model._source = source
        return model
