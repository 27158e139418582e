"""Step time and average board power of a training step under a GPU power limit.

A step at the GPU's default clocks splits, as the roofline prices it
(:func:`gpucast.predict.roofline.predict_step_time` ``.breakdown``), into shares ``f`` of
compute-bound time (``c``: matmul / convolution FLOPs), memory-bound time (``m``: bytes of
element-wise, normalisation, reduction kernels), launch-bound time (``k``: the per-kernel
dispatch cost, when the GPU runs many tiny kernels) and host time (``h``: the fixed per-step
cost, the GPU waiting on the Python loop and the data loader). Under a power limit the GPU
lowers its SM clock to a fraction ``x`` of the default, and with it the voltage::

    v(x)     = max(v_floor, 1 - slope * (1 - x))                     DVFS: a floor, then linear
    tau(x)   = f_c / x + f_m (mu / x + 1 - mu) + f_k (kappa / x + 1 - kappa) + f_h
    e(x)     = a_c f_c v^2 + a_m f_m (rho + (1 - rho) v^2) + a_k f_k v^2 + a_h f_h
    P(x)     = P_static + D * e(x) / tau(x),     D = q_gpu * P_max - P_static

``tau`` is the step time relative to the default clock: compute-bound time scales with
``1 / x``, memory-bound time with only its SM-side share ``mu``, launch-bound time with
``kappa``, host time not at all. ``e`` is the step's dynamic energy: switching energy per
operation goes with ``v^2`` (dynamic power ~ clock x voltage^2), the DRAM share ``rho`` of
memory-bound energy does not. ``a_*`` are the activities of each phase (1 = the board's
sustained dynamic power ``D``), ``P_static`` the board's idle draw with clocks up
(``idle_power_w`` from the catalog, else ``static_fraction * P_max``), ``q_gpu`` a per-GPU
factor (how far the board's sustained draw is from its limit: a P100 never nears its 250 W
in FP32 work), fitted where the GPU has data and 1 elsewhere.

The controller keeps the average draw just under the limit, with a margin that grows with the
limit: ``budget(L) = L - margin * max(0, L - margin_floor * P_max)``. If ``P(1)`` is within the
budget the step runs at default clocks; otherwise ``x`` solves ``P(x) = budget(L)``. Predicted:
``step_time(L) = step_time(L_ref) * tau(x_L) / tau(x_ref)`` and ``avg_power(L) = P(x_L)``,
``L_ref`` the limit the step time refers to (the default: ``P_max``).

**Calibrated**: given the average power measured at ``L_ref`` (Zeus-style profiling at the
default limit), the activities are scaled by one factor so that the model's unconstrained
draw equals it; the physics of the cap (``v_floor``, ``slope``, ``mu``, ``kappa``, ``rho``)
is unchanged. A reading above ``budget(L_ref)`` (up to ``L_ref`` itself) shows that this
board's controller keeps a smaller margin than the fitted one: a prediction lowers the row's
``margin`` to the one that puts ``budget(L_ref)`` at the reading (:func:`reading_margin`), so
it reproduces the reading at ``L_ref`` rather than throttling the board below what it was
measured to draw there (21 of the 165 Zeus sweeps read up to 8% above the fitted budget at
their top limit). The fit keeps the one global margin on every row: it is the margin of a
board without a reading, and those 21 sweeps are evidence of it (fitted with the per-row
margin too, it drifted from 0.12 to 0.25 and the predicted power left one workload out went
from 24.9% to 27.7% MAPE; predicting with it on the shipped fit takes the measured regime's
power from 5.1% to 4.6% left one GPU out and 4.8% to 4.3% left one workload out:
``benchmarks/energy_accuracy.py``).

:class:`PowerModel` fits the global constants (:class:`PowerConstants`) and the per-GPU
factors on power-limit sweeps (the Zeus NSDI 2023 traces: ``gpucast fit power``): weighted
least squares on log step time and log power of the calibrated model at every limit, plus
the uncalibrated power at each sweep's reference limit (so the activities are learnt from
the roofline shares), plus a Gaussian prior on ``log q_gpu``.

:func:`zeus_cost` is Zeus's energy-time cost, ``eta * energy + (1 - eta) * P_max * time``;
:func:`energy_optimal` picks the limit that minimises it.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict.base import Estimator, register
from gpucast.predict.intervals import calibrated_level

FloatArray = npt.NDArray[np.float64]

#: The lowest clock fraction the solver considers (real boards stop near 0.2-0.3).
MIN_CLOCK_FRACTION = 0.05
_BISECTIONS = 48
#: A measured draw within this share of the limit's budget is taken as capped.
CAPPED_TOLERANCE = 0.02
#: How far an average board power read under a limit may lie above it (W): NVML's stated
#: accuracy of ``power.draw`` ("accurate to within +/- 5 watts", nvidia-smi's documentation);
#: the Zeus sweeps' highest average draw is 2.1 W above its 100 W limit. A reading further
#: above the limit is not one the board could draw under it.
READING_TOLERANCE_W = 5.0
#: The error of a power predicted from the roofline's shares, without a reading of the GPU:
#: ``python benchmarks/energy_accuracy.py`` (rerun 2026-12-07), leave one GPU out, every limit
#: below the default (README's table; ``catalog/data/validation.csv`` has the per-GPU rows).
PREDICTED_POWER_ERROR = "leave-one-GPU-out power MAPE 20.6% on the Zeus GPUs (15.7-31.9% per GPU)"
#: What a prediction knows besides the step time at the reference limit: the average power
#: measured there (``measured_power``: the model is calibrated to it) or nothing
#: (``predicted_power``: the power comes from the roofline's shares and the fitted constants).
REGIMES: tuple[str, ...] = ("measured_power", "predicted_power")
#: Phases of a step, in the order of :class:`PowerTerms`.
PHASES: tuple[str, ...] = ("compute", "memory", "kernel", "host")
TERM_COLUMNS: tuple[str, ...] = ("compute_s", "memory_s", "kernel_s", "host_s")


def _finite(name: str, value: float, *, low: float, high: float) -> None:
    if not (math.isfinite(value) and low <= value <= high):
        raise InvalidSpecError(name, f"must be in [{low:g}, {high:g}]", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerTerms:
    """Seconds of one training step at default clocks, by what bounds them."""

    compute_s: float
    memory_s: float
    kernel_s: float
    host_s: float

    def __post_init__(self) -> None:
        for f in fields(self):
            _finite(f.name, getattr(self, f.name), low=0.0, high=math.inf)
        if self.total_s <= 0:
            raise InvalidSpecError(
                "terms", "a step needs some compute, memory, kernel or host time"
            )

    @property
    def total_s(self) -> float:
        return self.compute_s + self.memory_s + self.kernel_s + self.host_s

    def shares(self) -> tuple[float, float, float, float]:
        t = self.total_s
        return (self.compute_s / t, self.memory_s / t, self.kernel_s / t, self.host_s / t)

    @classmethod
    def from_breakdown(cls, breakdown: Mapping[str, float], *, kernel_share: float) -> PowerTerms:
        """From a roofline breakdown (``compute``, ``memory_bandwidth``, ``overhead``):
        ``kernel_share`` of the overhead is per-kernel launch cost, the rest per-step host
        time (:func:`kernel_share` computes it from the kernel count and the efficiencies)."""
        _finite("kernel_share", kernel_share, low=0.0, high=1.0)
        overhead = float(breakdown.get("overhead", 0.0))
        return cls(
            compute_s=float(breakdown.get("compute", 0.0)),
            memory_s=float(breakdown.get("memory_bandwidth", 0.0)),
            kernel_s=overhead * kernel_share,
            host_s=overhead * (1.0 - kernel_share),
        )


def kernel_share(n_kernels: float, kernel_overhead_s: float, step_overhead_s: float) -> float:
    """The share of the roofline's ``overhead`` term that is per-kernel launch cost."""
    launch = max(0.0, n_kernels * kernel_overhead_s)
    total = launch + max(0.0, step_overhead_s)
    return launch / total if total > 0 else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BoardPower:
    """A GPU's power facts as the model takes them (W)."""

    name: str
    max_power_limit_w: float
    min_power_limit_w: float | None = None
    idle_power_w: float | None = None

    def __post_init__(self) -> None:
        _finite("max_power_limit_w", self.max_power_limit_w, low=1e-9, high=math.inf)
        for name in ("min_power_limit_w", "idle_power_w"):
            value = getattr(self, name)
            if value is not None:
                _finite(name, value, low=1e-9, high=self.max_power_limit_w)

    #: The lowest limit assumed, as a share of the default, where the catalog has no minimum
    #: (most catalog minimums lie at 25-50% of the default, so half rarely asks for a limit a
    #: board refuses; the small inference boards sit higher: L4 56%, T4 86%).
    ASSUMED_MIN_SHARE: ClassVar[float] = 0.5

    @property
    def lowest_power_limit_w(self) -> float:
        """The lowest limit the board takes: the catalog minimum, else half the default."""
        if self.min_power_limit_w is not None:
            return self.min_power_limit_w
        return self.ASSUMED_MIN_SHARE * self.max_power_limit_w

    def clamp_limit_w(self, limit_w: float) -> float:
        """``limit_w`` moved into the board's range (what a fixed plan-wide limit sets it to)."""
        return min(max(limit_w, self.lowest_power_limit_w), self.max_power_limit_w)

    @classmethod
    def of_gpu(cls, gpu: GpuSpec) -> BoardPower:
        """The catalog's figures; a GPU without ``max_power_limit_w`` cannot be priced."""
        if gpu.max_power_limit_w is None:
            raise InvalidSpecError(
                "gpu",
                f"{gpu.name} has no max_power_limit_w (its default power limit) in the catalog",
                got=gpu.name,
                fix="add the board's default power limit (`nvidia-smi -q -d power`: Max Power "
                "Limit, or the datasheet's board power) to the max_power_limit_w column of "
                "gpucast/catalog/data/gpus.csv, with its source",
            )
        return cls(
            name=gpu.name,
            max_power_limit_w=gpu.max_power_limit_w,
            min_power_limit_w=gpu.min_power_limit_w,
            idle_power_w=gpu.idle_power_w,
        )


#: name -> (lower bound, upper bound, start) of each fitted constant.
_BOUNDS: dict[str, tuple[float, float, float]] = {
    "static_fraction": (0.02, 0.5, 0.16),
    "activity_compute": (0.0, 2.0, 1.0),
    "activity_memory": (0.0, 2.0, 0.6),
    "activity_kernel": (0.0, 2.0, 0.5),
    "activity_host": (0.0, 0.001, 0.0005),
    "voltage_floor": (0.2, 1.0, 0.8),
    "voltage_slope": (0.3, 5.0, 1.2),
    "memory_dram_energy": (0.0, 1.0, 0.5),
    "memory_clock_share": (0.0, 1.0, 0.3),
    "kernel_clock_share": (0.0, 1.0, 0.3),
    "cap_margin": (0.0, 0.5, 0.1),
    "cap_margin_floor": (0.0, 1.0, 0.35),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerConstants:
    """The global constants of the module docstring's equations (defaults: the starting point
    of a fit -- physical guesses, not a fit)."""

    static_fraction: float = 0.16  # P_static / P_max where the catalog has no idle figure
    activity_compute: float = 1.0  # a_c
    activity_memory: float = 0.6  # a_m
    activity_kernel: float = 0.5  # a_k
    activity_host: float = 0.0005  # a_h
    voltage_floor: float = 0.8  # v_floor
    voltage_slope: float = 1.2  # slope
    memory_dram_energy: float = 0.5  # rho
    memory_clock_share: float = 0.3  # mu
    kernel_clock_share: float = 0.3  # kappa
    cap_margin: float = 0.1  # margin
    cap_margin_floor: float = 0.35  # margin_floor

    def __post_init__(self) -> None:
        for name, (low, high, _) in _BOUNDS.items():
            _finite(name, getattr(self, name), low=low, high=high)

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}

    @classmethod
    def from_vector(cls, theta: Sequence[float] | FloatArray) -> PowerConstants:
        return cls(**{name: float(v) for name, v in zip(_BOUNDS, theta, strict=True)})

    def vector(self) -> list[float]:
        return [float(getattr(self, name)) for name in _BOUNDS]


# -- the physics, vectorised ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Rows:
    """Per-row arrays: shares, static power, dynamic range, limits, the controller's margin
    (:attr:`PowerConstants.cap_margin` unless a reading lowers it: :func:`reading_margin`)."""

    shares: tuple[FloatArray, FloatArray, FloatArray, FloatArray]
    static_w: FloatArray
    dynamic_w: FloatArray
    max_w: FloatArray
    margin: FloatArray


def _voltage(c: PowerConstants, x: FloatArray) -> FloatArray:
    return np.maximum(c.voltage_floor, 1.0 - c.voltage_slope * (1.0 - x))


def _clock_terms(
    c: PowerConstants, rows: _Rows
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(a, b, e, f) of a step at clock fraction x: time tau = a / x + b (the shares the clock
    slows, the rest), energy = v(x)^2 e + f (what scales with the voltage squared, the rest)."""
    fc, fm, fk, fh = rows.shares
    mu, kappa, rho = c.memory_clock_share, c.kernel_clock_share, c.memory_dram_energy
    a = fc + fm * mu + fk * kappa
    b = fm * (1.0 - mu) + fk * (1.0 - kappa) + fh
    e = c.activity_compute * fc + c.activity_memory * fm * (1.0 - rho) + c.activity_kernel * fk
    f = c.activity_memory * fm * rho + c.activity_host * fh
    return a, b, e, f


def _time_and_power(
    c: PowerConstants, rows: _Rows, x: FloatArray, scale: FloatArray
) -> tuple[FloatArray, FloatArray]:
    a, b, e, f = _clock_terms(c, rows)
    tau = a / x + b
    energy = _voltage(c, x) ** 2 * e + f
    return tau, rows.static_w + scale * rows.dynamic_w * energy / tau


def _budget(c: PowerConstants, limit_w: FloatArray, rows: _Rows) -> FloatArray:
    return limit_w - rows.margin * np.maximum(0.0, limit_w - c.cap_margin_floor * rows.max_w)


def reading_margin(
    c: PowerConstants, measured_w: FloatArray, reference_w: FloatArray, max_w: FloatArray
) -> FloatArray:
    """The controller's margin per row given the power measured at ``reference_w`` (NaN: no
    reading): the fitted :attr:`PowerConstants.cap_margin`, lowered where the reading is above
    the budget it implies to the margin whose budget is the reading (0 for a reading at or
    above the limit): a board measured drawing more under a limit than the fitted margin lets
    it keeps a smaller margin."""
    span = np.maximum(0.0, reference_w - c.cap_margin_floor * max_w)
    fitted = np.full_like(reference_w, c.cap_margin)
    with np.errstate(divide="ignore", invalid="ignore"):
        seen = np.where(span > 0, (reference_w - measured_w) / span, c.cap_margin)
    lowered = np.clip(seen, 0.0, c.cap_margin)
    return np.asarray(np.where(np.isfinite(measured_w), lowered, fitted), dtype=np.float64)


def _at_limit(
    c: PowerConstants, rows: _Rows, limit_w: FloatArray, scale: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(tau, power, clock fraction) under ``limit_w``: the clock at which the step's average
    draw meets the budget (bisection; ``P`` rises with the clock)."""
    budget = _budget(c, limit_w, rows)
    ones = np.ones_like(limit_w)
    _, p1 = _time_and_power(c, rows, ones, scale)
    lo = np.full_like(limit_w, MIN_CLOCK_FRACTION)
    hi = ones.copy()
    # the draw meets the budget where static + dynamic * (v^2 e + f) / (a / x + b) <= budget:
    # a few array operations per bisection step
    a, b, e, f = _clock_terms(c, rows)
    dynamic = scale * rows.dynamic_w
    room = budget - rows.static_w
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        v = np.maximum(c.voltage_floor, 1.0 - c.voltage_slope * (1.0 - mid))
        ok = dynamic * (v * v * e + f) <= room * (a / mid + b)
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    # a draw at the budget runs at default clocks (a reading sets the budget to itself:
    # rounding must not call it throttled)
    x = np.where(p1 <= budget * (1.0 + 1e-9), 1.0, lo)
    tau, power = _time_and_power(c, rows, x, scale)
    # A draw the lowest clock cannot bring under the cap (a calibration that puts much of the
    # power in phases the clock does not slow) is held at the cap, as the board enforces it.
    return tau, np.minimum(power, limit_w), x


def _calibration_scale(
    c: PowerConstants, rows: _Rows, measured_w: FloatArray, reference_w: FloatArray
) -> FloatArray:
    """The activity factor that makes the unconstrained draw equal ``measured_w`` (NaN: 1).
    A reading at the reference limit's budget was capped: it only says the draw is at least
    that, so the roofline's activity stands where it is higher."""
    ones = np.ones_like(measured_w)
    _, p1 = _time_and_power(c, rows, ones, ones)
    model = np.maximum(p1 - rows.static_w, 1e-9)
    scale = np.maximum(measured_w - rows.static_w, 1e-3 * rows.dynamic_w) / model
    capped = measured_w >= (1.0 - CAPPED_TOLERANCE) * _budget(c, reference_w, rows)
    scale = np.where(capped, np.maximum(scale, 1.0), scale)
    return np.asarray(np.where(np.isfinite(measured_w), scale, 1.0), dtype=np.float64)


# -- the estimator --------------------------------------------------------------------------
#: Columns :meth:`PowerModel.predict` reads (``idle_power_w`` may be NaN; the ``reference_*``
#: columns are optional, see :meth:`PowerModel.predict`).
PREDICT_COLUMNS: tuple[str, ...] = (
    "gpu", *TERM_COLUMNS, "max_power_limit_w", "power_limit_w", "reference_step_time_s",
)  # fmt: skip
#: Columns :meth:`PowerModel.fit` reads: one row per (sweep, power limit); a sweep is one
#: ``group`` (a workload at a batch on a GPU), its reference the row at its highest limit.
FIT_COLUMNS: tuple[str, ...] = (
    "group", "gpu", *TERM_COLUMNS, "max_power_limit_w", "power_limit_w", "step_time_s",
    "avg_power_w",
)  # fmt: skip


def _require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidSpecError(what, f"lacks column(s) {', '.join(missing)}")
    if not len(frame):
        raise InvalidSpecError(what, "has no rows")


def _col(frame: pd.DataFrame, name: str, default: float = math.nan) -> FloatArray:
    if name not in frame.columns:
        return np.full(len(frame), default, dtype=np.float64)
    return frame[name].to_numpy(dtype=np.float64)


@register
class PowerModel(Estimator):
    """The model of the module docstring (an estimator like scikit-learn's)."""

    kind: ClassVar[str] = "power"
    schema_version: ClassVar[int] = 1

    def __init__(self, *, gpu_prior_sd: float = 0.3, reference_weight: float = 1.0) -> None:
        self.gpu_prior_sd = gpu_prior_sd
        self.reference_weight = reference_weight
        self.constants_: PowerConstants | None = None
        self.gpu_factors_: dict[str, float] = {}
        self.fitted_on_: str = ""
        self.n_rows_: int = 0
        #: in-sample MAPE (%) of the calibrated step time / power and the uncalibrated power
        self.train_mape_pct_: dict[str, float] = {}
        #: regime -> quantity -> (q_low, q_high) of measured / predicted from cross-validation
        #: (:func:`interval_table`); empty: no validated intervals
        self.intervals_: dict[str, dict[str, tuple[float, float]]] = {}

    @property
    def is_fitted(self) -> bool:
        return self.constants_ is not None

    @property
    def constants(self) -> PowerConstants:
        self._require_fitted()
        assert self.constants_ is not None
        return self.constants_

    def with_intervals(self, table: Mapping[str, Mapping[str, Sequence[float]]]) -> Self:
        """Attach the cross-validated interval table (:func:`interval_table`)."""
        out: dict[str, dict[str, tuple[float, float]]] = {}
        for regime, quantities in table.items():
            if regime not in REGIMES:
                raise InvalidSpecError("intervals", f"unknown regime {regime!r}", got=regime)
            out[regime] = {}
            for quantity, pair in quantities.items():
                low, high = (float(v) for v in pair)
                if not (0 < low <= 1.0 <= high < math.inf):
                    raise InvalidSpecError(
                        "intervals", "need 0 < low <= 1 <= high", got=(regime, quantity, pair)
                    )
                out[regime][str(quantity)] = (low, high)
        self.intervals_ = out
        return self

    def interval(self, regime: str, quantity: str) -> tuple[float, float] | None:
        """(low, high) ratios of measured to predicted ``quantity`` (``step_time`` or
        ``avg_power``) in ``regime`` (:data:`REGIMES`), or ``None`` when not validated."""
        return self.intervals_.get(regime, {}).get(quantity)

    def idle_power_w(self, board: BoardPower) -> float:
        """``P_static`` of ``board``: its catalog idle draw, else the fitted share of its
        default limit."""
        if board.idle_power_w is not None:
            return board.idle_power_w
        return self.constants.static_fraction * board.max_power_limit_w

    def gpu_factor(self, gpu: str) -> float:
        """``q_gpu`` of a GPU (1: no data for it)."""
        return float(self.gpu_factors_.get(gpu, 1.0))

    # -- fit ------------------------------------------------------------------------------
    def fit(self, frame: pd.DataFrame, *, fitted_on: str = "") -> Self:
        """Fit on power-limit sweeps (columns :data:`FIT_COLUMNS`, optional ``idle_power_w``).
        ``frame`` is not modified."""
        for name in ("gpu_prior_sd", "reference_weight"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be > 0", got=value)
        _require(frame, FIT_COLUMNS, "fit frame")
        data = _reference_columns(frame)
        gpus = sorted({str(g) for g in data["gpu"]})
        step = data["step_time_s"].to_numpy(dtype=np.float64)
        power = data["avg_power_w"].to_numpy(dtype=np.float64)
        if np.any(~np.isfinite(step) | (step <= 0)) or np.any(~np.isfinite(power) | (power <= 0)):
            raise InvalidSpecError("fit frame", "step_time_s and avg_power_w must be > 0")
        is_ref = data["_is_reference"].to_numpy(dtype=bool)
        n_const = len(_BOUNDS)
        sd, w_ref = self.gpu_prior_sd, self.reference_weight

        def residuals(theta: FloatArray) -> FloatArray:
            c = PowerConstants.from_vector(theta[:n_const])
            factors = dict(zip(gpus, np.exp(theta[n_const:]), strict=True))
            cal = _predict(c, factors, data, calibrated=True, board_margin=False)
            unc = _predict(c, factors, data[is_ref], calibrated=False)
            return np.concatenate(
                [
                    np.log(cal["step_time_s"] / step),
                    np.log(cal["avg_power_w"] / power),
                    w_ref * np.log(unc["avg_power_w"] / power[is_ref]),
                    theta[n_const:] / sd,
                ]
            )

        start = PowerConstants().vector() + [0.0] * len(gpus)
        lower = [b[0] for b in _BOUNDS.values()] + [math.log(0.2)] * len(gpus)
        upper = [b[1] for b in _BOUNDS.values()] + [math.log(5.0)] * len(gpus)
        from scipy.optimize import least_squares  # (loaded when fitting only)

        solution = least_squares(residuals, np.asarray(start), bounds=(lower, upper))
        theta = solution.x
        self.constants_ = PowerConstants.from_vector(theta[:n_const])
        self.gpu_factors_ = {
            g: float(math.exp(v)) for g, v in zip(gpus, theta[n_const:], strict=True)
        }
        # in-sample errors of the fit's own objective (the global margin on every row)
        cal = _predict(
            self.constants_, self.gpu_factors_, data, calibrated=True, board_margin=False
        )
        unc = _predict(self.constants_, self.gpu_factors_, data, calibrated=False)
        self.train_mape_pct_ = {
            "step_time_calibrated": _mape(cal["step_time_s"], step),
            "avg_power_calibrated": _mape(cal["avg_power_w"], power),
            "avg_power": _mape(unc["avg_power_w"], power),
        }
        self.fitted_on_ = fitted_on
        self.n_rows_ = len(data)
        return self

    # -- predict --------------------------------------------------------------------------
    def predict(self, frame: pd.DataFrame) -> dict[str, FloatArray]:
        """Per row (columns :data:`PREDICT_COLUMNS`): ``step_time_s``, ``avg_power_w``,
        ``energy_j`` (per step), ``clock_fraction`` and ``throttled`` (0/1) at
        ``power_limit_w``. ``reference_step_time_s`` is the step time at
        ``reference_power_limit_w`` (column optional, default ``max_power_limit_w``);
        a finite ``reference_power_w`` (optional) is the power measured there and calibrates
        the row; ``idle_power_w`` (optional, NaN: unknown) is the board's idle draw."""
        self._require_fitted()
        _require(frame, PREDICT_COLUMNS, "prediction frame")
        return _predict(self.constants, self.gpu_factors_, frame, calibrated=True)

    def sweep(
        self,
        terms: PowerTerms,
        board: BoardPower,
        limits_w: Sequence[float],
        *,
        step_time_s: float,
        measured_power_w: float | None = None,
        reference_limit_w: float | None = None,
    ) -> pd.DataFrame:
        """One workload on one board at each of ``limits_w``: a frame with ``power_limit_w``,
        ``step_time_s``, ``avg_power_w``, ``energy_j``, ``clock_fraction``, ``throttled``.
        ``step_time_s`` (and ``measured_power_w``, if known) hold at ``reference_limit_w``
        (default: the board's max)."""
        self._require_fitted()
        _finite("step_time_s", step_time_s, low=1e-12, high=math.inf)
        if measured_power_w is not None:
            _finite("measured_power_w", measured_power_w, low=1e-9, high=math.inf)
        limits = np.asarray(list(limits_w), dtype=np.float64)
        if not limits.size or np.any(~np.isfinite(limits) | (limits <= 0)):
            raise InvalidSpecError("power limits", "must be one or more numbers > 0")
        ref = board.max_power_limit_w if reference_limit_w is None else reference_limit_w
        rows = pd.DataFrame(
            {
                "gpu": board.name,
                "compute_s": terms.compute_s,
                "memory_s": terms.memory_s,
                "kernel_s": terms.kernel_s,
                "host_s": terms.host_s,
                "max_power_limit_w": board.max_power_limit_w,
                "idle_power_w": math.nan if board.idle_power_w is None else board.idle_power_w,
                "power_limit_w": limits,
                "reference_power_limit_w": float(ref),
                "reference_step_time_s": float(step_time_s),
                "reference_power_w": math.nan if measured_power_w is None else measured_power_w,
            }
        )
        out = self.predict(rows)
        frame = pd.DataFrame({"power_limit_w": limits})
        for key in ("step_time_s", "avg_power_w", "energy_j", "clock_fraction"):
            frame[key] = out[key]
        frame["throttled"] = out["throttled"].astype(bool)
        return frame

    # -- JSON -----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "gpu_prior_sd": self.gpu_prior_sd,
            "reference_weight": self.reference_weight,
            "constants": self.constants.to_dict(),
            "gpu_factors": dict(self.gpu_factors_),
            "fitted_on": self.fitted_on_,
            "n_rows": self.n_rows_,
            "train_mape_pct": dict(self.train_mape_pct_),
            "intervals": {
                r: {q: list(v) for q, v in t.items()} for r, t in self.intervals_.items()
            },
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(
                gpu_prior_sd=float(state["gpu_prior_sd"]),
                reference_weight=float(state["reference_weight"]),
            )
            model.constants_ = PowerConstants(
                **{k: float(v) for k, v in dict(state["constants"]).items()}
            )
            model.gpu_factors_ = {str(k): float(v) for k, v in dict(state["gpu_factors"]).items()}
            model.fitted_on_ = str(state.get("fitted_on", ""))
            model.n_rows_ = int(state.get("n_rows", 0))
            model.train_mape_pct_ = {
                str(k): float(v) for k, v in dict(state.get("train_mape_pct", {})).items()
            }
            model.with_intervals(dict(state.get("intervals", {})))
        except (KeyError, TypeError, ValueError, InvalidSpecError) as exc:
            raise InvalidInputError(
                f"power model state is malformed ({exc})", fix="refit it (gpucast fit power)"
            ) from None
        return model


def _mape(predicted: FloatArray, actual: FloatArray) -> float:
    return float(100.0 * np.mean(np.abs(predicted / actual - 1.0)))


def _reference_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each sweep's reference (its highest limit): ``reference_power_limit_w``,
    ``reference_step_time_s``, ``reference_power_w`` and ``_is_reference``."""
    data = frame.reset_index(drop=True).copy()
    top = data.groupby("group")["power_limit_w"].transform("max")
    is_ref = (data["power_limit_w"] == top).to_numpy()
    ref = data[is_ref].drop_duplicates("group").set_index("group")
    data["reference_power_limit_w"] = data["group"].map(ref["power_limit_w"]).astype(float)
    data["reference_step_time_s"] = data["group"].map(ref["step_time_s"]).astype(float)
    data["reference_power_w"] = data["group"].map(ref["avg_power_w"]).astype(float)
    data["_is_reference"] = is_ref
    return data


def _rows(
    c: PowerConstants, factors: Mapping[str, float], frame: pd.DataFrame
) -> tuple[_Rows, FloatArray]:
    terms = np.stack([_col(frame, t, 0.0) for t in TERM_COLUMNS])
    if np.any(~np.isfinite(terms) | (terms < 0)) or np.any(terms.sum(axis=0) <= 0):
        raise InvalidSpecError("terms", "must be >= 0 with some time in every row")
    shares = terms / terms.sum(axis=0)
    max_w = _col(frame, "max_power_limit_w")
    limit = _col(frame, "power_limit_w")
    if np.any(~np.isfinite(max_w) | (max_w <= 0)) or np.any(~np.isfinite(limit) | (limit <= 0)):
        raise InvalidSpecError("power limits", "max_power_limit_w and power_limit_w must be > 0")
    idle = _col(frame, "idle_power_w")
    static = np.where(np.isfinite(idle), idle, c.static_fraction * max_w)
    q = np.array([factors.get(str(g), 1.0) for g in frame["gpu"]], dtype=np.float64)
    dynamic = np.maximum(q * max_w - static, 1e-3 * max_w)
    rows = _Rows(
        shares=(shares[0], shares[1], shares[2], shares[3]),
        static_w=static,
        dynamic_w=dynamic,
        max_w=max_w,
        margin=np.full_like(max_w, c.cap_margin),
    )
    return rows, limit


def _predict(
    c: PowerConstants,
    factors: Mapping[str, float],
    frame: pd.DataFrame,
    *,
    calibrated: bool,
    board_margin: bool = True,
) -> dict[str, FloatArray]:
    """The module docstring's prediction per row; ``board_margin``: a reading above the
    fitted budget at the reference limit lowers that row's margin (:func:`reading_margin`;
    off in the fit, which learns the global margin)."""
    rows, limit = _rows(c, factors, frame)
    ref_limit = _col(frame, "reference_power_limit_w")
    ref_limit = np.where(np.isfinite(ref_limit), ref_limit, rows.max_w)
    ref_step = _col(frame, "reference_step_time_s")
    if np.any(~np.isfinite(ref_step) | (ref_step <= 0)):
        raise InvalidSpecError("reference_step_time_s", "must be > 0")
    measured = _col(frame, "reference_power_w") if calibrated else np.full(len(frame), math.nan)
    # a reading above the limit it was taken under (within the sensor's accuracy:
    # READING_TOLERANCE_W) is the board at its limit
    measured = np.minimum(measured, ref_limit)
    if board_margin:
        rows = replace(rows, margin=reading_margin(c, measured, ref_limit, rows.max_w))
    scale = _calibration_scale(c, rows, measured, ref_limit)
    tau, power, x = _at_limit(c, rows, limit, scale)
    tau_ref, _, _ = _at_limit(c, rows, ref_limit, scale)
    step = ref_step * tau / tau_ref
    return {
        "step_time_s": step,
        "avg_power_w": power,
        "energy_j": step * power,
        "clock_fraction": x,
        "throttled": (x < 1.0).astype(np.float64),
    }


def power_interval(
    avg_power_w: float, band: tuple[float, float], *, idle_w: float, limit_w: float
) -> tuple[float, float]:
    """The interval of an average board power: ``avg_power_w`` x the validated ``band`` of
    measured / predicted, cut to what a board can draw -- no more than the power limit in
    force (the controller enforces it), no less than its idle draw -- and always holding
    ``avg_power_w`` itself."""
    low = min(avg_power_w, avg_power_w * band[0])
    high = max(avg_power_w, avg_power_w * band[1])
    return max(low, min(idle_w, avg_power_w)), min(high, max(limit_w, avg_power_w))


# -- Zeus's energy-time trade-off -----------------------------------------------------------
def zeus_cost(
    step_time_s: npt.ArrayLike, avg_power_w: npt.ArrayLike, *, eta: float, max_power_w: float
) -> FloatArray:
    """Zeus (NSDI 2023) cost of a step: ``eta * energy + (1 - eta) * max_power * time`` (J)."""
    _finite("eta", eta, low=0.0, high=1.0)
    _finite("max_power_w", max_power_w, low=1e-9, high=math.inf)
    t = np.asarray(step_time_s, dtype=np.float64)
    p = np.asarray(avg_power_w, dtype=np.float64)
    return np.asarray(t * (eta * p + (1.0 - eta) * max_power_w), dtype=np.float64)


def energy_optimal(
    limits_w: npt.ArrayLike,
    step_time_s: npt.ArrayLike,
    avg_power_w: npt.ArrayLike,
    *,
    eta: float,
    max_power_w: float,
) -> int:
    """Index of the limit with the lowest :func:`zeus_cost`. Ties -- a step whose draw never
    reaches the cap costs the same at every limit above its draw -- go to the lowest such
    limit: the same time and energy with the least power reserved. (The highest-limit rule
    picked the measured energy-optimal limit within 25 W for 65-67% of the Zeus sweeps, this
    one for 77-81%; ``benchmarks/energy_accuracy.py``.)"""
    limits = np.asarray(limits_w, dtype=np.float64)
    cost = zeus_cost(step_time_s, avg_power_w, eta=eta, max_power_w=max_power_w)
    if cost.shape != limits.shape or not limits.size:
        raise InvalidSpecError("limits", "need one step time and power per limit")
    best = float(np.min(cost))
    ties = np.flatnonzero(cost <= best * (1.0 + 1e-9))
    return int(ties[np.argmin(limits[ties])])


def power_limit_grid(board: BoardPower, step_w: float = 25.0) -> list[float]:
    """The limits Zeus sweeps: from the minimum up in ``step_w`` steps, and the maximum.
    Without a catalog minimum the grid starts at half the maximum
    (:attr:`BoardPower.lowest_power_limit_w`)."""
    _finite("step_w", step_w, low=1e-9, high=math.inf)
    top = board.max_power_limit_w
    low = board.lowest_power_limit_w
    grid = list(np.arange(low, top, step_w, dtype=np.float64))
    return [float(v) for v in grid if v < top - 1e-9] + [float(top)]


# -- cross-validation -------------------------------------------------------------------------
def cross_validated(
    frame: pd.DataFrame,
    holdout: str,
    *,
    make: Any = None,
    reference_step_column: str | None = None,
) -> pd.DataFrame:
    """Each value of ``frame[holdout]`` (e.g. ``gpu``, a workload column) predicted by a
    model fitted on the other rows (:data:`FIT_COLUMNS` + ``holdout``). Returns ``frame``'s
    rows with ``fold``, and per row the predictions of the two regimes: ``pred_step_time_s``
    / ``pred_avg_power_w`` from the roofline shares alone (the step time at the sweep's
    reference limit known: ``reference_step_column`` if given -- e.g. a predicted step --
    else the measured one), and ``cal_step_time_s`` / ``cal_avg_power_w`` calibrated by the
    power measured at the reference limit. ``make`` builds an unfitted model (default
    :class:`PowerModel`)."""
    _require(frame, (*FIT_COLUMNS, holdout), "cross-validation frame")
    factory = make if make is not None else PowerModel
    data = _reference_columns(frame)
    parts = []
    for value in sorted(data[holdout].astype(str).unique()):
        test_mask = (data[holdout].astype(str) == value).to_numpy()
        train = frame.reset_index(drop=True)[~test_mask]
        if not len(train):
            raise InvalidSpecError(holdout, f"holding out {value!r} leaves no rows to fit on")
        model = factory().fit(train)
        test = data[test_mask].copy()
        measured = test.copy()
        if reference_step_column is not None:
            measured["reference_step_time_s"] = test[reference_step_column].to_numpy()
        blind = measured.drop(columns=["reference_power_w"])
        unc = model.predict(blind)
        cal = model.predict(test)
        test["fold"] = value
        test["pred_step_time_s"] = unc["step_time_s"]
        test["pred_avg_power_w"] = unc["avg_power_w"]
        test["cal_step_time_s"] = cal["step_time_s"]
        test["cal_avg_power_w"] = cal["avg_power_w"]
        parts.append(test.drop(columns=["_is_reference"]))
    out: pd.DataFrame = pd.concat(parts, ignore_index=True)
    return out


def optimal_limits(
    frame: pd.DataFrame, step_column: str, power_column: str, *, eta: float
) -> pd.Series:
    """Per ``group``: the power limit :func:`energy_optimal` picks from ``frame``'s rows
    (columns ``group``, ``power_limit_w``, ``max_power_limit_w`` and the two named)."""
    out = {}
    for group, part in frame.groupby("group", sort=True):
        i = energy_optimal(
            part["power_limit_w"].to_numpy(dtype=np.float64),
            part[step_column].to_numpy(dtype=np.float64),
            part[power_column].to_numpy(dtype=np.float64),
            eta=eta,
            max_power_w=float(part["max_power_limit_w"].iloc[0]),
        )
        out[group] = float(part["power_limit_w"].iloc[i])
    return pd.Series(out, name="power_limit_w", dtype=np.float64)


#: A sweep whose highest draw stays below this share of its lowest limit is never capped.
UNCAPPED_HEADROOM = 0.9


def uncapped_sweeps(frame: pd.DataFrame, power_column: str) -> pd.Series:
    """Per ``group`` (bool): whether the cap never binds the sweep -- its highest draw is
    below :data:`UNCAPPED_HEADROOM` of its lowest limit, so no limit changes its step."""
    _require(frame, ("group", "power_limit_w", power_column), "sweeps")
    by = frame.groupby("group", sort=True)
    out = by[power_column].max() < UNCAPPED_HEADROOM * by["power_limit_w"].min()
    return out.rename("uncapped")


def measurement_noise(
    frame: pd.DataFrame, step_column: str, power_column: str
) -> tuple[float, int]:
    """(sigma, sweeps): the pooled standard deviation of log energy per step across the
    limits of the :func:`uncapped_sweeps` -- no limit changes their step, so the whole
    spread of their readings is the measurement's own -- and how many such sweeps there are
    (``frame``: columns ``group``, ``power_limit_w`` and the two named). NaN when no sweep
    qualifies or none has two readings."""
    _require(frame, ("group", "power_limit_w", step_column, power_column), "sweeps")
    uncapped = uncapped_sweeps(frame, power_column)
    rows = frame[frame["group"].map(uncapped).to_numpy(dtype=bool)]
    if not len(rows):
        return math.nan, 0
    log_e = pd.Series(
        np.log(
            rows[step_column].to_numpy(dtype=np.float64)
            * rows[power_column].to_numpy(dtype=np.float64)
        ),
        index=rows.index,
    )
    grouped = log_e.groupby(rows["group"], sort=True)
    dev = (log_e - grouped.transform("mean")).to_numpy()
    dof = len(rows) - grouped.ngroups
    sigma = float(np.sqrt(np.sum(dev**2) / dof)) if dof > 0 else math.nan
    return sigma, int(grouped.ngroups)


def tied_optimal_limits(
    frame: pd.DataFrame,
    step_column: str,
    power_column: str,
    *,
    eta: float,
    log_tolerance: float,
) -> dict[str, FloatArray]:
    """Per ``group``: every limit whose :func:`zeus_cost` is within ``exp(log_tolerance)``
    of the group's least -- the limits one reading per limit cannot tell from the optimum
    when ``log_tolerance`` is the noise of a difference of two readings (``sqrt(2)`` x
    :func:`measurement_noise`)."""
    _finite("log_tolerance", log_tolerance, low=0.0, high=math.inf)
    out: dict[str, FloatArray] = {}
    for group, part in frame.groupby("group", sort=True):
        cost = zeus_cost(
            part[step_column].to_numpy(dtype=np.float64),
            part[power_column].to_numpy(dtype=np.float64),
            eta=eta,
            max_power_w=float(part["max_power_limit_w"].iloc[0]),
        )
        limits = part["power_limit_w"].to_numpy(dtype=np.float64)
        out[str(group)] = np.sort(limits[np.log(cost) <= np.log(cost.min()) + log_tolerance])
    return out


def interval_table(cv: pd.DataFrame) -> dict[str, dict[str, tuple[float, float]]]:
    """The 80% interval of measured / predicted per regime and quantity from the rows of
    :func:`cross_validated` (rows at the reference limit, whose step time is known exactly,
    are left out of the step-time quantiles; each interval contains 1), at the quantile level
    that covers 80% of each held-out fold's rows with the other folds' band
    (:func:`gpucast.predict.intervals.calibrated_level`; the 10th/90th percentiles where
    those already do)."""
    ref = cv["power_limit_w"].to_numpy() == cv["reference_power_limit_w"].to_numpy()
    folds = cv["fold"].astype(str).to_numpy()
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for regime, prefix in (("measured_power", "cal"), ("predicted_power", "pred")):
        out[regime] = {}
        for quantity, column in (("step_time", "step_time_s"), ("avg_power", "avg_power_w")):
            rows = ~ref if quantity == "step_time" else np.ones(len(cv), dtype=bool)
            if regime == "measured_power" and quantity == "avg_power":
                rows = ~ref  # calibrated to the reference reading: exact there
            ratio = cv[column].to_numpy()[rows] / cv[f"{prefix}_{column}"].to_numpy()[rows]
            if not ratio.size:
                continue
            level = calibrated_level(np.log(ratio), folds[rows])
            low, high = np.quantile(ratio, [1.0 - level, level])
            out[regime][quantity] = (float(min(low, 1.0)), float(max(high, 1.0)))
    return out
