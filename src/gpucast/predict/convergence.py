"""Statistical efficiency: samples (or epochs) to a quality target as a function of the batch.

The shape is the gradient-noise-scale model of McCandlish, Kaplan, Amodei et al. (2018, "An
Empirical Model of Large-Batch Training", arXiv:1812.06162): the optimizer steps ``S`` and the
examples ``E`` to reach a target trade off as ``(S / S_min - 1)(E / E_min - 1) = 1``, so at a
batch ``B = E / S``::

    E(B) = E_min (1 + B / B_noise)          S(B) = S_min (1 + B_noise / B)

``B_noise`` is the critical batch: below it doubling the batch nearly halves the steps; far
above it the steps stop falling and only samples are wasted. Pollux (Qiao et al., OSDI 2021)
writes the same law as the *statistical efficiency* of a batch ``M`` relative to ``B0``:
``E(B0) / E(M) = (B_noise + B0) / (B_noise + M)``, with ``B_noise`` read from the gradient
noise scale ``tr(Sigma) / |G|^2`` measured during training.

:class:`ConvergenceModel` fits the law to seeds' epochs (or samples) to target at several
batches (Zeus's ``summary_train.csv``, MLPerf's reference convergence points):

* the two parameters by weighted least squares in log space (each batch weighted by its seeds
  over their log spread, floored at the data's resolution -- one epoch for Zeus);
* predictions go through the data: the log residual of each measured batch is interpolated
  over log batch (held constant beyond the ends), so at a measured batch the prediction is
  the seeds' mean and between or beyond them the fitted law carries the shape. Leave-one-batch
  -out this beats both the bare law and plain log-log interpolation on Zeus and MLPerf
  (``benchmarks/convergence_accuracy.py``);
* the interval is for one run (a new seed): the seeds' log spread at the batch (interpolated)
  and, away from a measured batch, the model's own leave-one-batch-out log error on the data
  it was fitted on, growing by half of it per octave beyond the measured range.

What the law does not capture is said where it matters: the learning rate and optimizer of
the data change with the batch (Zeus scales Adam's learning rate with sqrt(B) and keeps
Adadelta's fixed; MLPerf submitters tune per batch), and a U-shape at small batches (too many
noisy steps with hyper-parameters tuned for larger ones) is carried only by the residuals.

:class:`ConvergenceCurve` is the fitted result as a plain value the planner evaluates over
arrays of global batches (pure; no scipy at evaluation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.predict.base import Estimator, register
from gpucast.predict.lr_scaling import LrScaling

FloatArray = npt.NDArray[np.float64]

#: Log spread assumed for a batch whose seeds all agree and whose data has no resolution.
MIN_SIGMA_LOG = 0.02
#: Leave-one-batch-out log error assumed where fewer than three batches were measured.
DEFAULT_SIGMA_MODEL = 0.15
#: Growth of the model term per octave beyond the measured batches (a fraction of it).
GROWTH_PER_OCTAVE = 0.5
#: The fitted B_noise is kept within [smallest batch / 100, largest batch x 1e4]: at the top
#: the law is flat over the data (no measurable loss of efficiency).
_BN_LOW, _BN_HIGH = 1e-2, 1e4


def _check_batches(batch: npt.ArrayLike, name: str = "batch") -> FloatArray:
    b = np.asarray(batch, dtype=np.float64)
    if b.size and not (np.all(np.isfinite(b)) and np.all(b > 0)):
        raise InvalidSpecError(name, "every batch must be a finite number > 0")
    return b


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvergenceCurve:
    """Samples (or epochs: ``unit``) to a target at any global batch, with a run's interval.

    ``samples(B) = min_samples (1 + B / noise_batch) exp(r(B))`` where ``r`` interpolates
    ``knot_log_residual`` over ``log(knot_batch)`` (constant beyond the ends). The log
    standard deviation of one run is ``sigma_seed(B)`` (``knot_sigma_log`` interpolated) and
    ``sigma_model`` away from a knot, growing by ``GROWTH_PER_OCTAVE`` of it per octave
    beyond the knots. ``reference_batch`` is the batch a user's figure was given at (the
    first knot otherwise). ``source`` says where the numbers come from.
    """

    min_samples: float
    noise_batch: float
    knot_batch: tuple[float, ...]
    knot_log_residual: tuple[float, ...]
    knot_sigma_log: tuple[float, ...]
    sigma_model: float
    reference_batch: float
    unit: str = "samples"
    source: str = ""
    #: batches where no run of the data reached the target (the curve is no evidence there)
    unreached_batch: tuple[float, ...] = field(default=())
    #: the learning-rate rule applied over the curve's own (None: as measured / tuned)
    lr: LrScaling | None = None

    def __post_init__(self) -> None:
        for name in ("min_samples", "noise_batch", "reference_batch"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise InvalidSpecError(f"convergence.{name}", "must be a finite number > 0")
        n = len(self.knot_batch)
        if n < 1 or len(self.knot_log_residual) != n or len(self.knot_sigma_log) != n:
            raise InvalidSpecError(
                "convergence.knots", "needs >= 1 knot, with one residual and spread each"
            )
        if list(self.knot_batch) != sorted(set(self.knot_batch)) or self.knot_batch[0] <= 0:
            raise InvalidSpecError("convergence.knot_batch", "must be increasing and > 0")
        if not all(math.isfinite(r) for r in self.knot_log_residual):
            raise InvalidSpecError("convergence.knot_log_residual", "must be finite")
        if not all(math.isfinite(s) and s >= 0 for s in self.knot_sigma_log):
            raise InvalidSpecError("convergence.knot_sigma_log", "must be finite and >= 0")
        if not (math.isfinite(self.sigma_model) and self.sigma_model >= 0):
            raise InvalidSpecError("convergence.sigma_model", "must be finite and >= 0")

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_reference(
        cls,
        *,
        samples_at_reference: float,
        reference_batch: float,
        noise_batch: float,
        sigma_log: float = 0.0,
        sigma_model: float = 0.0,
        unit: str = "samples",
        source: str = "",
    ) -> ConvergenceCurve:
        """One figure at one batch plus a critical batch: ``E(B) = E0 (1 + B/Bn) / (1 +
        B0/Bn)`` (the planner's rule when only epochs at a reference batch are known)."""
        for name, value in (
            ("samples_at_reference", samples_at_reference),
            ("reference_batch", reference_batch),
            ("noise_batch", noise_batch),
        ):
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a finite number > 0", got=value)
        return cls(
            min_samples=samples_at_reference / (1.0 + reference_batch / noise_batch),
            noise_batch=float(noise_batch),
            knot_batch=(float(reference_batch),),
            knot_log_residual=(0.0,),
            knot_sigma_log=(float(sigma_log),),
            sigma_model=float(sigma_model),
            reference_batch=float(reference_batch),
            unit=unit,
            source=source,
        )

    # -- evaluation --------------------------------------------------------------------------
    def _log_b(self, batch: npt.ArrayLike) -> FloatArray:
        return np.log(_check_batches(batch))

    def samples(self, batch: npt.ArrayLike) -> FloatArray:
        """Central samples (``unit``) to target at each batch."""
        logb = self._log_b(batch)
        knots = np.log(np.asarray(self.knot_batch))
        resid = np.interp(logb, knots, np.asarray(self.knot_log_residual))
        b = np.exp(logb)
        law = self.min_samples * (1.0 + b / self.noise_batch)
        if self.lr is not None:
            law = law * self.lr.factor(b, self.noise_batch)
        return np.asarray(law * np.exp(resid), dtype=np.float64)

    def sigma_log(self, batch: npt.ArrayLike) -> FloatArray:
        """Log standard deviation of one run's samples to target at each batch."""
        logb = self._log_b(batch)
        knots = np.log(np.asarray(self.knot_batch))
        seed = np.interp(logb, knots, np.asarray(self.knot_sigma_log))
        at_knot = np.min(np.abs(logb[..., None] - knots), axis=-1) < 1e-9
        octaves = np.maximum(np.maximum(knots[0] - logb, logb - knots[-1]), 0.0) / math.log(2)
        model = np.where(at_knot, 0.0, self.sigma_model * (1.0 + GROWTH_PER_OCTAVE * octaves))
        return np.asarray(np.sqrt(seed**2 + model**2), dtype=np.float64)

    def interval(
        self, batch: npt.ArrayLike, confidence: float = 0.8
    ) -> tuple[FloatArray, FloatArray]:
        """Central ``confidence`` interval of one run's samples to target."""
        if not 0.0 < confidence < 1.0:
            raise InvalidSpecError("confidence", "must be in (0, 1)", got=confidence)
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        mid = self.samples(batch)
        spread = np.exp(z * self.sigma_log(batch))
        return mid / spread, mid * spread

    def efficiency(self, batch: npt.ArrayLike, reference_batch: float | None = None) -> FloatArray:
        """Statistical efficiency: samples at the reference batch over samples at ``batch``
        (Pollux's ``E(B0) / E(M)``; 1 at the reference, below 1 where more samples are
        needed)."""
        ref = self.reference_batch if reference_batch is None else reference_batch
        return np.asarray(self.samples([ref])[0] / self.samples(batch), dtype=np.float64)

    def extrapolated(self, batch: float) -> bool:
        """Whether ``batch`` lies outside the knots by more than 1%."""
        return bool(batch < self.knot_batch[0] * 0.99 or batch > self.knot_batch[-1] * 1.01)

    def scaled(self, factor: float, unit: str) -> ConvergenceCurve:
        """The same curve in another unit (e.g. epochs x samples per epoch -> samples)."""
        if not (math.isfinite(factor) and factor > 0):
            raise InvalidSpecError("scale", "must be a finite number > 0", got=factor)
        return replace(self, min_samples=self.min_samples * factor, unit=unit)

    def with_reference(self, reference_batch: float) -> ConvergenceCurve:
        return replace(self, reference_batch=float(reference_batch))

    def with_lr_rule(
        self, rule: str, optimizer: str = "sgd", tuned_batch: float | None = None
    ) -> ConvergenceCurve:
        """The curve under learning-rate ``rule`` (:mod:`gpucast.predict.lr_scaling`); the
        data's own rule and optimizer (``lr``) stay the baseline; without them the curve is
        a tuned one, the step tuned at ``tuned_batch`` (default: the reference batch) for an
        ``optimizer``."""
        at = self.reference_batch if tuned_batch is None else tuned_batch
        lr = self.lr or LrScaling(rule="tuned", tuned_batch=at, optimizer=optimizer)
        return replace(self, lr=replace(lr, rule=rule))

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_samples": self.min_samples,
            "noise_batch": self.noise_batch,
            "knot_batch": list(self.knot_batch),
            "knot_log_residual": list(self.knot_log_residual),
            "knot_sigma_log": list(self.knot_sigma_log),
            "sigma_model": self.sigma_model,
            "reference_batch": self.reference_batch,
            "unit": self.unit,
            "source": self.source,
            "unreached_batch": list(self.unreached_batch),
            **({"lr": self.lr.to_dict()} if self.lr is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConvergenceCurve:
        try:
            return cls(
                min_samples=float(data["min_samples"]),
                noise_batch=float(data["noise_batch"]),
                knot_batch=tuple(float(b) for b in data["knot_batch"]),
                knot_log_residual=tuple(float(r) for r in data["knot_log_residual"]),
                knot_sigma_log=tuple(float(s) for s in data["knot_sigma_log"]),
                sigma_model=float(data["sigma_model"]),
                reference_batch=float(data["reference_batch"]),
                unit=str(data.get("unit", "samples")),
                source=str(data.get("source", "")),
                unreached_batch=tuple(float(b) for b in data.get("unreached_batch", ())),
                lr=LrScaling.from_dict(data["lr"]) if data.get("lr") else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"malformed convergence curve ({type(exc).__name__}: {exc})",
                fix="refit the convergence model",
            ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Knots:
    batch: FloatArray
    mean: FloatArray  # mean over the runs that reached the target
    sigma_log: FloatArray  # log spread of those runs, floored at the data's resolution
    runs: npt.NDArray[np.int64]
    reached: npt.NDArray[np.int64]


def _knots(batch: FloatArray, value: FloatArray) -> tuple[_Knots, tuple[float, ...]]:
    """Per batch: the runs that reached the target, their mean and log spread."""
    ok = np.isfinite(value)
    if np.any(value[ok] <= 0):
        raise InvalidSpecError("value", "epochs or samples to target must be > 0 (NaN: never)")
    order = np.unique(batch)
    finite = np.unique(value[ok])
    gaps = np.diff(finite)
    gaps = gaps[gaps > 0]
    resolution = float(np.min(gaps)) if gaps.size else 0.0
    means, sds, runs, reached, kept = [], [], [], [], []
    unreached = []
    for b in order:
        sel = batch == b
        vals = value[sel & ok]
        if vals.size == 0:
            unreached.append(float(b))
            continue
        mean = float(vals.mean())
        sd = float(np.std(np.log(vals), ddof=1)) if vals.size > 1 else 0.0
        floor = max(resolution / math.sqrt(12.0) / mean, MIN_SIGMA_LOG)
        kept.append(float(b))
        means.append(mean)
        sds.append(max(sd, floor))
        runs.append(int(np.count_nonzero(sel)))
        reached.append(int(vals.size))
    knots = _Knots(
        batch=np.asarray(kept, dtype=np.float64),
        mean=np.asarray(means, dtype=np.float64),
        sigma_log=np.asarray(sds, dtype=np.float64),
        runs=np.asarray(runs, dtype=np.int64),
        reached=np.asarray(reached, dtype=np.int64),
    )
    return knots, tuple(unreached)


def _fit_law(k: _Knots) -> tuple[float, float]:
    """(E_min, B_noise) by weighted least squares of log(mean) on log(1 + B/B_noise)."""
    logb, loge = np.log(k.batch), np.log(k.mean)
    if k.batch.size == 1:
        # one batch: the law cannot be identified; flat at the measured value
        bn = float(k.batch[0]) * _BN_HIGH
        return float(k.mean[0]) / (1.0 + float(k.batch[0]) / bn), bn
    w = np.sqrt(k.reached / k.sigma_log**2)
    lo_bn = math.log(float(k.batch.min()) * _BN_LOW)
    hi_bn = math.log(float(k.batch.max()) * _BN_HIGH)

    def resid(p: FloatArray) -> FloatArray:
        return np.asarray(w * (p[0] + np.log1p(np.exp(logb - p[1])) - loge), dtype=np.float64)

    from scipy.optimize import least_squares  # (loaded when fitting only)

    best: tuple[float, FloatArray] | None = None
    for start in np.linspace(lo_bn + 1.0, hi_bn - 1.0, 5):  # a few starts: the fit is tiny
        p0 = np.array([float(loge.min()) - 0.1, float(start)])
        fit = least_squares(resid, p0, bounds=([-np.inf, lo_bn], [np.inf, hi_bn]))
        cost = float(fit.cost)
        if best is None or cost < best[0] - 1e-12:
            best = (cost, fit.x)
    assert best is not None
    return float(math.exp(best[1][0])), float(math.exp(best[1][1]))


def _curve(k: _Knots, sigma_model: float, unit: str, source: str) -> ConvergenceCurve:
    e_min, bn = _fit_law(k)
    law = e_min * (1.0 + k.batch / bn)
    return ConvergenceCurve(
        min_samples=e_min,
        noise_batch=bn,
        knot_batch=tuple(float(b) for b in k.batch),
        knot_log_residual=tuple(float(r) for r in np.log(k.mean / law)),
        knot_sigma_log=tuple(float(s) for s in k.sigma_log),
        sigma_model=sigma_model,
        reference_batch=float(k.batch[0]),
        unit=unit,
        source=source,
    )


def _drop(k: _Knots, i: int) -> _Knots:
    keep = np.arange(k.batch.size) != i
    return _Knots(
        batch=k.batch[keep],
        mean=k.mean[keep],
        sigma_log=k.sigma_log[keep],
        runs=k.runs[keep],
        reached=k.reached[keep],
    )


def leave_one_batch_out_log_errors(k: _Knots) -> FloatArray:
    """log(predicted / measured mean) of each batch from a fit on the others."""
    errors = np.empty(k.batch.size)
    for i in range(k.batch.size):
        curve = _curve(_drop(k, i), 0.0, "", "")
        errors[i] = math.log(float(curve.samples([k.batch[i]])[0]) / float(k.mean[i]))
    return errors


@register
class ConvergenceModel(Estimator):
    """Samples (or epochs) to a target vs the batch, fitted on seeds' runs (module doc).

    ``fit(batch, value)`` takes one entry per run: the batch it trained at and the epochs or
    samples it took to reach the target (NaN: it never did). ``confidence`` is the coverage of
    :meth:`predict_interval` for one run.
    """

    kind = "convergence"
    schema_version = 1

    def __init__(self, *, confidence: float = 0.8, unit: str = "samples", source: str = ""):
        self.confidence = confidence
        self.unit = unit
        self.source = source
        self.curve_: ConvergenceCurve | None = None
        self.loo_log_errors_: tuple[float, ...] = ()

    @property
    def is_fitted(self) -> bool:
        return self.curve_ is not None

    def fit(self, batch: npt.ArrayLike, value: npt.ArrayLike) -> Self:
        if not 0.0 < self.confidence < 1.0:
            raise InvalidSpecError("confidence", "must be in (0, 1)", got=self.confidence)
        b = _check_batches(batch)
        v = np.asarray(value, dtype=np.float64)
        if b.ndim != 1 or v.shape != b.shape or b.size == 0:
            raise InvalidSpecError(
                "batch/value", "must be two 1-D arrays of the same, non-zero length"
            )
        knots, unreached = _knots(b, v)
        if knots.batch.size == 0:
            raise InvalidSpecError(
                "value",
                "no run reached the target at any batch",
                fix="give runs that reached the target, or a lower target",
            )
        if knots.batch.size >= 3:
            errors = leave_one_batch_out_log_errors(knots)
            sigma_model = float(np.sqrt(np.mean(errors**2)))
        else:
            errors = np.empty(0)
            sigma_model = DEFAULT_SIGMA_MODEL
        curve = _curve(knots, sigma_model, self.unit, self.source)
        self.curve_ = replace(curve, unreached_batch=unreached)
        self.loo_log_errors_ = tuple(float(e) for e in errors)
        return self

    @property
    def curve(self) -> ConvergenceCurve:
        self._require_fitted()
        assert self.curve_ is not None
        return self.curve_

    @property
    def noise_batch(self) -> float:
        return self.curve.noise_batch

    def predict(self, batch: npt.ArrayLike) -> FloatArray:
        """Central epochs or samples to target at each batch."""
        return self.curve.samples(batch)

    def predict_interval(self, batch: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        return self.curve.interval(batch, self.confidence)

    def estimate(self, batch: float) -> Estimate:
        """One batch's prediction as an :class:`Estimate` (bottleneck: ``statistical`` when
        the batch is past the critical batch, else ``steps``)."""
        curve = self.curve
        mid = float(curve.samples([batch])[0])
        lo, hi = (float(x[0]) for x in curve.interval([batch], self.confidence))
        notes = []
        if curve.extrapolated(batch):
            notes.append(
                f"batch {batch:g} is outside the fitted batches "
                f"{curve.knot_batch[0]:g}-{curve.knot_batch[-1]:g}: extrapolated"
            )
        return Estimate(
            value=mid,
            lower=min(lo, mid),
            upper=max(hi, mid),
            unit=self.unit,
            bottleneck="statistical" if batch > curve.noise_batch else "steps",
            source="fitted",
            breakdown={
                "min_samples": curve.min_samples,
                "noise_batch": curve.noise_batch,
                "efficiency": float(curve.efficiency([batch])[0]),
            },
            notes=tuple(notes),
        )

    def _state(self) -> dict[str, Any]:
        return {
            "confidence": self.confidence,
            "unit": self.unit,
            "source": self.source,
            "curve": self.curve.to_dict(),
            "loo_log_errors": list(self.loo_log_errors_),
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(
                confidence=float(state["confidence"]),
                unit=str(state["unit"]),
                source=str(state.get("source", "")),
            )
            curve = state["curve"]
            if not isinstance(curve, dict):
                raise TypeError("curve must be an object")
            model.curve_ = ConvergenceCurve.from_dict(curve)
            model.loo_log_errors_ = tuple(float(e) for e in state.get("loo_log_errors", ()))
        except (KeyError, TypeError, ValueError, InvalidSpecError) as exc:
            raise InvalidInputError(
                f"malformed convergence model state ({exc})", fix="refit it"
            ) from None
        return model


def noise_scale_efficiency(
    noise_scale: npt.ArrayLike, batch: npt.ArrayLike, reference_batch: float
) -> FloatArray:
    """Pollux's statistical efficiency ``(B_noise + B0) / (B_noise + M)`` of batch ``M``."""
    bn = np.asarray(noise_scale, dtype=np.float64)
    m = _check_batches(batch)
    return np.asarray((bn + reference_batch) / (bn + m), dtype=np.float64)


def samples_from_progress(
    progress_samples: npt.ArrayLike, noise_scale: npt.ArrayLike, batch: float, reference: float
) -> float:
    """Samples a run at ``batch`` needs to make the statistical progress that ``progress_samples``
    (increments at the ``reference`` batch) made, each increment at its own noise scale:
    ``sum dE_i (B_i + M) / (B_i + B0)`` -- the noise scale changes over training, and Pollux
    re-reads it every step."""
    de = np.asarray(progress_samples, dtype=np.float64)
    bn = np.asarray(noise_scale, dtype=np.float64)
    if de.shape != bn.shape:
        raise InvalidSpecError("noise_scale", "needs one value per progress increment")
    return float(np.sum(de / noise_scale_efficiency(bn, [batch], reference)))
