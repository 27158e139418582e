"""Fitting the two-state Poisson hidden Markov model of :mod:`gpucast.predict.bursty` on a
node-count trace or on revocation events (Baum-Welch from several seeded starts, a
constant hazard where one state explains the trace as well): :class:`MMPPFit`,
:func:`fit_mmpp`, :func:`fit_mmpp_events`, :func:`storm_probability` and the
:class:`MMPPModel` estimator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.preemption import check_gap_s, revocations_and_exposure
from gpucast.domain.units import format_amount
from gpucast.predict._bursty_checks import _H, FloatArray, _check_cap
from gpucast.predict._bursty_markov import MarkovModulatedLifetime
from gpucast.predict._bursty_scans import _Posterior, _posterior
from gpucast.predict.base import Estimator, register


@dataclass(frozen=True, slots=True, kw_only=True)
class MMPPFit:
    """A fitted :class:`MarkovModulatedLifetime` and how the fit went."""

    lifetime: MarkovModulatedLifetime
    log_likelihood: float
    constant_log_likelihood: float
    #: True when the fit fell back to a constant hazard (see ``lifetime.source`` for why).
    constant: bool
    iterations: int
    converged: bool
    ticks: int
    events: int
    exposure_node_h: float
    gap_s: float

    def to_dict(self) -> dict[str, Any]:
        life = self.lifetime
        return {
            "hazard_calm_per_hour": life.hazard_calm_per_hour,
            "hazard_storm_per_hour": life.hazard_storm_per_hour,
            "calm_mean_h": life.calm_mean_h,
            "storm_mean_h": life.storm_mean_h,
            "cap_s": life.cap_s,
            "source": life.source,
            "log_likelihood": self.log_likelihood,
            "constant_log_likelihood": self.constant_log_likelihood,
            "constant": self.constant,
            "iterations": self.iterations,
            "converged": self.converged,
            "ticks": self.ticks,
            "events": self.events,
            "exposure_node_h": self.exposure_node_h,
            "gap_s": self.gap_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MMPPFit:
        lifetime = MarkovModulatedLifetime(
            hazard_calm_per_hour=float(data["hazard_calm_per_hour"]),
            hazard_storm_per_hour=float(data["hazard_storm_per_hour"]),
            calm_mean_h=float(data["calm_mean_h"]),
            storm_mean_h=float(data["storm_mean_h"]),
            cap_s=None if data["cap_s"] is None else float(data["cap_s"]),
            source=str(data["source"]),
        )
        return cls(
            lifetime=lifetime,
            log_likelihood=float(data["log_likelihood"]),
            constant_log_likelihood=float(data["constant_log_likelihood"]),
            constant=bool(data["constant"]),
            iterations=int(data["iterations"]),
            converged=bool(data["converged"]),
            ticks=int(data["ticks"]),
            events=int(data["events"]),
            exposure_node_h=float(data["exposure_node_h"]),
            gap_s=float(data["gap_s"]),
        )


def _events_inputs(
    revocations: npt.ArrayLike, exposure_node_h: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    y = np.asarray(revocations, dtype=np.float64).reshape(-1)
    x = np.asarray(exposure_node_h, dtype=np.float64).reshape(-1)
    if y.shape != x.shape or y.size == 0:
        raise InvalidSpecError(
            "revocations", "needs one count and one exposure per tick, at least one tick"
        )
    if not (np.all(np.isfinite(y)) and np.all(y >= 0) and np.all(y == np.round(y))):
        raise InvalidSpecError("revocations", "must be whole numbers >= 0 per tick")
    if not (np.all(np.isfinite(x)) and np.all(x >= 0)):
        raise InvalidSpecError("exposure_node_h", "must be node-hours >= 0 per tick")
    bad = np.flatnonzero((y > 0) & (x == 0))
    if bad.size:
        raise InvalidSpecError(
            f"revocations[{int(bad[0])}]",
            "a tick with revocations needs nodes at risk (exposure > 0)",
        )
    return y, x


def _constant_fit(
    hazard_per_hour: float,
    why: str,
    *,
    loglik: float,
    ticks: int,
    events: int,
    exposure_h: float,
    gap_s: float,
    cap_s: float | None,
    iterations: int = 0,
) -> MMPPFit:
    span_h = max(ticks * gap_s / _H, 1e-9)
    lifetime = MarkovModulatedLifetime(
        hazard_calm_per_hour=hazard_per_hour,
        hazard_storm_per_hour=hazard_per_hour,
        calm_mean_h=span_h,
        storm_mean_h=span_h,
        cap_s=cap_s,
        source=f"constant hazard {hazard_per_hour:.3g}/h fitted on {ticks} ticks of "
        f"{gap_s:g} s ({events} revocations in {format_amount(exposure_h)} node-h): {why}",
    )
    return MMPPFit(
        lifetime=lifetime,
        log_likelihood=loglik,
        constant_log_likelihood=loglik,
        constant=True,
        iterations=iterations,
        converged=True,
        ticks=ticks,
        events=events,
        exposure_node_h=exposure_h,
        gap_s=gap_s,
    )


#: Baum–Welch runs every start this many iterations, then only the best :data:`_KEEP`.
_PRUNE_AFTER = 15
_KEEP = 2


def fit_mmpp_events(
    revocations: npt.ArrayLike,
    exposure_node_h: npt.ArrayLike,
    gap_s: float,
    *,
    restarts: int = 6,
    max_iter: int = 400,
    tol: float = 1e-6,
    seed: int = 0,
    cap_s: float | None = None,
) -> MMPPFit:
    """Fit a two-state Poisson HMM: revocations at tick t ~ Poisson(hazard[state_t] x
    exposure_t), the state a Markov chain per tick of ``gap_s`` seconds.

    Baum–Welch (EM) from ``restarts`` seeded starts run side by side (after a few
    iterations only the best two go on); the best likelihood wins. In the per-tick model a
    state holds for whole ticks, so a spell that lasts ``1 / p`` ticks on average (``p`` its
    per-tick leaving probability) is read back as a continuous-time spell of mean
    ``gap_s / p``: that keeps the storm frequency, the share of time in storm and the
    revocations per storm of the fit, also when a storm lasts a single tick (mass revocations
    within one tick of the trace, which no continuous chain sampled at the ticks can give).
    Falls back to a constant hazard (said in ``source``) when there is no revocation
    (Jeffreys: 0.5 / exposure) or when BIC prefers one state.
    """
    from scipy import special

    y, x = _events_inputs(revocations, exposure_node_h)
    gap = check_gap_s(gap_s)
    _check_cap(cap_s)
    if restarts < 1 or max_iter < 1 or not tol > 0:
        raise InvalidSpecError("fit_mmpp", "needs restarts >= 1, max_iter >= 1 and tol > 0")
    ticks, events, exposure_h = y.size, int(y.sum()), float(x.sum())
    if exposure_h <= 0:
        raise InvalidSpecError(
            "counts",
            "no node was running in the trace (no exposure)",
            fix="pass a trace with at least one running node",
        )
    at_risk = x > 0
    const = float(np.sum(y[at_risk] * np.log(x[at_risk]) - special.gammaln(y[at_risk] + 1)))

    def constant(rate: float, why: str, loglik: float, iterations: int = 0) -> MMPPFit:
        return _constant_fit(
            rate,
            why,
            loglik=loglik,
            ticks=ticks,
            events=events,
            exposure_h=exposure_h,
            gap_s=gap,
            cap_s=cap_s,
            iterations=iterations,
        )

    if events == 0:
        rate = 0.5 / exposure_h
        return constant(
            rate, "no revocations, so Jeffreys' 0.5 / exposure", -rate * exposure_h + const
        )
    mean_rate = events / exposure_h
    loglik1 = float(events * math.log(mean_rate) - mean_rate * exposure_h) + const

    rng = np.random.default_rng(seed)
    lam = np.stack(
        [
            mean_rate * np.exp(rng.uniform(-3.0, -0.3, restarts)),
            mean_rate * np.exp(rng.uniform(0.5, 3.0, restarts)),
        ]
    )  # (2, R)
    p01 = rng.uniform(0.002, 0.1, restarts)
    p10 = rng.uniform(0.02, 0.5, restarts)
    trans = np.array([[1 - p01, p01], [p10, 1 - p10]])  # (2, 2, R)
    p0 = np.full((2, restarts), 0.5)
    last = np.full(restarts, -np.inf)
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):
        post = _posterior(y, x, lam, trans, p0, const)
        ll = post.log_likelihood
        if np.all(np.abs(ll - last) <= tol * np.maximum(1.0, np.abs(ll))):
            converged = True
            break
        if iterations == _PRUNE_AFTER and ll.size > _KEEP:
            # the starts that are behind by now rarely catch up: keep the leaders only
            keep = np.argsort(np.where(np.isfinite(ll), ll, -np.inf))[-_KEEP:]
            lam, trans, p0, ll = lam[:, keep], trans[:, :, keep], p0[:, keep], ll[keep]
            post = _Posterior(
                gamma=post.gamma[:, :, keep],
                xi=post.xi[:, :, keep],
                filtered=post.filtered[:, :, keep],
                log_likelihood=ll,
            )
        last = ll
        weight_y = (post.gamma * y[None, :, None]).sum(axis=1)
        weight_x = (post.gamma * x[None, :, None]).sum(axis=1)
        lam = np.where(weight_x > 0, weight_y / np.where(weight_x > 0, weight_x, 1.0), lam)
        lam = np.maximum(lam, mean_rate * 1e-9)
        trans = post.xi / post.xi.sum(axis=1, keepdims=True)
        trans = np.clip(trans, 1e-12, 1 - 1e-12)
        trans /= trans.sum(axis=1, keepdims=True)
        p0 = post.gamma[:, 0]
    else:  # the likelihood of the parameters the last M-step gave
        ll = _posterior(y, x, lam, trans, p0, const).log_likelihood
    if not np.any(np.isfinite(ll)):
        return constant(mean_rate, "the two-state fit failed (no finite likelihood)", loglik1)
    best = int(np.nanargmax(np.where(np.isfinite(ll), ll, np.nan)))
    loglik2 = float(ll[best])
    lam_b, trans_b = lam[:, best], trans[:, :, best]
    calm, storm = (0, 1) if lam_b[0] <= lam_b[1] else (1, 0)
    h_calm, h_storm = float(lam_b[calm]), float(lam_b[storm])
    p_cs, p_sc = float(trans_b[calm, storm]), float(trans_b[storm, calm])
    n_obs = int(at_risk.sum())
    bic_gain = 2 * (loglik2 - loglik1) - 3 * math.log(max(n_obs, 2))
    if bic_gain <= 0 or h_storm <= h_calm * (1 + 1e-6):
        why = (
            f"one state explains the trace as well (BIC; log-lik {loglik2:.1f} with two states "
            f"vs {loglik1:.1f})"
        )
        return constant(mean_rate, why, loglik1, iterations)
    calm_mean_h = gap / p_cs / _H
    storm_mean_h = gap / p_sc / _H
    lifetime = MarkovModulatedLifetime(
        hazard_calm_per_hour=h_calm,
        hazard_storm_per_hour=h_storm,
        calm_mean_h=calm_mean_h,
        storm_mean_h=storm_mean_h,
        cap_s=cap_s,
        source=(
            f"MMPP fitted on {ticks} ticks of {gap:g} s ({events} revocations in "
            f"{format_amount(exposure_h)} node-h): calm {h_calm:.3g}/h for {calm_mean_h:.3g} h, "
            f"storm {h_storm:.3g}/h for {storm_mean_h:.3g} h "
            f"(log-lik {loglik2:.1f} vs {loglik1:.1f} constant)"
            + ("" if converged else f"; EM stopped after {iterations} iterations")
        ),
    )
    return MMPPFit(
        lifetime=lifetime,
        log_likelihood=loglik2,
        constant_log_likelihood=loglik1,
        constant=False,
        iterations=iterations,
        converged=converged,
        ticks=ticks,
        events=events,
        exposure_node_h=exposure_h,
        gap_s=gap,
    )


def fit_mmpp(
    counts: npt.ArrayLike,
    gap_s: float,
    *,
    restarts: int = 6,
    max_iter: int = 400,
    tol: float = 1e-6,
    seed: int = 0,
    cap_s: float | None = None,
) -> MMPPFit:
    """Fit a :class:`MarkovModulatedLifetime` on a node-count trace (running nodes per tick
    of ``gap_s`` seconds): a drop of k is k revocations, ``counts[t - 1] * gap_s`` the
    exposure (see :class:`~gpucast.domain.preemption.NodeCountTrace`); then
    :func:`fit_mmpp_events`."""
    revocations, exposure_s = revocations_and_exposure(counts, gap_s)
    return fit_mmpp_events(
        revocations,
        exposure_s / _H,
        gap_s,
        restarts=restarts,
        max_iter=max_iter,
        tol=tol,
        seed=seed,
        cap_s=cap_s,
    )


def storm_probability(
    lifetime: MarkovModulatedLifetime, counts: npt.ArrayLike, gap_s: float
) -> FloatArray:
    """Per tick of a node-count trace: P(storm | the trace up to that tick), under
    ``lifetime`` (the forward filter of the per-tick hidden Markov model :func:`fit_mmpp_events`
    fits: a spell of mean ``m`` is left with probability ``min(gap_s / m, 1)`` per tick)."""
    revocations, exposure_s = revocations_and_exposure(counts, gap_s)
    gap = check_gap_s(gap_s)
    p_cs = min(gap / (lifetime.calm_mean_h * _H), 1.0)
    p_sc = min(gap / (lifetime.storm_mean_h * _H), 1.0)
    trans = np.array([[1 - p_cs, p_cs], [p_sc, 1 - p_sc]])[:, :, None]
    lam = np.array([[lifetime.hazard_calm_per_hour], [lifetime.hazard_storm_per_hour]])
    p = p_cs / (p_cs + p_sc)
    post = _posterior(
        revocations.astype(np.float64),
        exposure_s / _H,
        lam,
        trans,
        np.array([[1 - p], [p]]),
        0.0,
        backward=False,
    )
    return np.asarray(post.filtered[1, :, 0], dtype=np.float64)


@register
class MMPPModel(Estimator):
    """A :class:`MarkovModulatedLifetime` fitted on a node-count trace (:func:`fit_mmpp`)."""

    kind = "mmpp"
    schema_version = 1

    def __init__(
        self,
        *,
        restarts: int = 6,
        max_iter: int = 400,
        tol: float = 1e-6,
        seed: int = 0,
        cap_s: float | None = None,
    ) -> None:
        if restarts < 1 or max_iter < 1 or not tol > 0:
            raise InvalidSpecError("mmpp", "needs restarts >= 1, max_iter >= 1 and tol > 0")
        _check_cap(cap_s)
        self.restarts = restarts
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed
        self.cap_s = cap_s
        self._fit: MMPPFit | None = None

    @property
    def is_fitted(self) -> bool:
        return self._fit is not None

    def _options(self) -> dict[str, Any]:
        return {
            "restarts": self.restarts,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "seed": self.seed,
            "cap_s": self.cap_s,
        }

    def fit(self, counts: npt.ArrayLike, gap_s: float) -> Self:
        """Fit on running nodes per tick of ``gap_s`` seconds."""
        self._fit = fit_mmpp(counts, gap_s, **self._options())
        return self

    def fit_events(
        self, revocations: npt.ArrayLike, exposure_node_h: npt.ArrayLike, gap_s: float
    ) -> Self:
        """Fit on revocations and node-hours at risk per tick."""
        self._fit = fit_mmpp_events(revocations, exposure_node_h, gap_s, **self._options())
        return self

    @property
    def result(self) -> MMPPFit:
        self._require_fitted()
        assert self._fit is not None
        return self._fit

    def distribution(self) -> MarkovModulatedLifetime:
        return self.result.lifetime

    @property
    def source(self) -> str:
        return self.result.lifetime.source

    @property
    def log_likelihood(self) -> float:
        return self.result.log_likelihood

    def storm_probability(self, counts: npt.ArrayLike, gap_s: float) -> FloatArray:
        """P(storm | the trace so far) per tick of ``counts`` under the fitted model."""
        return storm_probability(self.distribution(), counts, gap_s)

    def _state(self) -> dict[str, Any]:
        return {"options": self._options(), "fit": self.result.to_dict()}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(**dict(state["options"]))
            model._fit = MMPPFit.from_dict(dict(state["fit"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataFormatError("mmpp model", f"bad state: {exc}", fix="refit it") from None
        return model
