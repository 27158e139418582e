"""Learning-rate scaling rules: what a batch change costs when the learning rate is not re-tuned.

The convergence curve (:class:`~gpucast.predict.convergence.ConvergenceCurve`) gives the
samples to a target at each global batch *with the learning rate tuned at that batch* -- what
MLPerf's reference points are, and what the gradient-noise-scale law ``E(B) = E_min (1 +
B / B_noise)`` assumes. A job that changes its batch (a planner's choice, an elastic cluster)
usually applies a rule instead:

* ``linear`` (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): ``lr ~ B``;
* ``sqrt`` (Krizhevsky 2014; Malladi et al. 2022 for Adam-type optimizers): ``lr ~ sqrt(B)``;
* ``fixed``: the learning rate kept;
* ``adascale`` (Johnson, Agrawal, Gu, Guestrin, ICML 2020): the step scaled by the *gain
  ratio* ``r = (sigma^2 + |g|^2) / (sigma^2 / S + |g|^2)`` measured during training -- with
  the noise scale ``B_noise = sigma^2 / |g|^2`` per sample that is ``E(B0) (B_noise + B) /
  (B_noise + B0)`` samples at ``B = S B0``: the tuned law itself (Pollux trains with it);
* ``tuned``: re-tuned at every batch (the curve as it is).

**How far a rule is from the tuned learning rate.** With McCandlish et al.'s (2018,
arXiv:1812.06162) quadratic model the best step at batch ``B`` is ``eps_opt(B) = eps_max /
(1 + B_noise / B)`` for SGD; for adaptive optimizers (Adam, AdamW, Adadelta) the update is
normalised by the gradient's running magnitude and the rule that keeps the dynamics is the
square root (Malladi et al. 2022), so their best step moves as the square root of SGD's. With
``g(B) = B / (1 + B / B_noise)`` and ``a* = 1`` (SGD) or ``1/2`` (adaptive), a rule of
exponent ``a`` set at the tuned batch ``B0`` is off by the factor::

    x(B) = (B / B0)^a / (g(B) / g(B0))^a*          (1 at B0 for every rule)

**What a mis-set step costs.** Progress per step falls symmetrically in ``log x``:
``efficiency = 2 x / (1 + x^2)`` (``sech(ln x)``; 1 at ``x = 1``, 0.8 at ``x = 2`` or ``1/2``),
so the samples to target are the tuned ones over it. The quadratic model's own ``x (2 - x)``
diverges at ``x = 2``; on Zeus's traces (Adadelta at a fixed rate over 8-4,096, Adam(W) at
``sqrt(B)``) that over-states the cost at the ends, where the ``sech`` form fits the U-shaped
curves better than the tuned law (``benchmarks/convergence_accuracy.py``, part 4). A curve
measured under a rule (Zeus) is moved to another rule by the ratio of the two efficiencies.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.convergence import LR_RULES
from gpucast.domain.errors import InvalidSpecError

FloatArray = npt.NDArray[np.float64]

#: Rules a plan can apply (``tuned``: the curve as given; ``auto``: the planner chooses).
RULES: tuple[str, ...] = LR_RULES
#: Exponent of the batch in each fixed rule's learning rate.
RULE_EXPONENT: dict[str, float] = {"linear": 1.0, "sqrt": 0.5, "fixed": 0.0}
#: ``a*``: how the tuned step moves with the (small) batch, per optimizer family.
OPTIMIZER_EXPONENT: dict[str, float] = {"sgd": 1.0, "adaptive": 0.5}
#: The fixed rule that keeps each optimizer family's dynamics at small batches.
NATURAL_RULE: dict[str, str] = {"sgd": "linear", "adaptive": "sqrt"}
#: ``auto`` keeps the family's natural rule while it costs at most this share more samples.
AUTO_TOLERANCE = 0.01
#: Sources, for the assumption a plan shows.
SOURCE = (
    "gradient-noise-scale model (McCandlish et al. 2018) with a rule's step measured against the "
    "tuned one, progress 2x/(1+x^2); linear: Goyal et al. 2017; sqrt: Malladi et al. 2022; "
    "AdaScale: Johnson et al. 2020; checked on Zeus's fixed/sqrt learning rates "
    "(benchmarks/convergence_accuracy.py, part 4)"
)


def optimizer_family(optimizer: str) -> str:
    """``sgd`` or ``adaptive`` for an optimizer name (``adam``, ``adamw``, ``adadelta``,
    ``lamb``, ``adagrad``, ``rmsprop`` are adaptive; ``sgd``, ``momentum``, ``lars``,
    ``nesterov`` are SGD)."""
    name = optimizer.strip().lower()
    if name in OPTIMIZER_EXPONENT:
        return name
    if name.startswith(("adam", "adadelta", "adagrad", "lamb", "rmsprop", "adafactor")):
        return "adaptive"
    if name.startswith(("sgd", "momentum", "lars", "nesterov")):
        return "sgd"
    raise InvalidSpecError(
        "optimizer",
        f"unknown optimizer family {optimizer!r}",
        fix="use sgd or adaptive (or an optimizer name: sgd, adam, adamw, adadelta, lamb)",
    )


def rule_of_learning_rates(batch: npt.ArrayLike, learning_rate: npt.ArrayLike) -> str:
    """The fixed rule closest to how ``learning_rate`` moves with ``batch`` (log-log slope)."""
    b = np.log(np.asarray(batch, dtype=np.float64))
    lr = np.log(np.asarray(learning_rate, dtype=np.float64))
    if b.size < 2 or np.ptp(b) == 0:
        return "fixed"
    slope = float(np.polyfit(b, lr, 1)[0])
    return min(RULE_EXPONENT, key=lambda r: abs(RULE_EXPONENT[r] - slope))


def mismatch(
    batch: npt.ArrayLike,
    *,
    rule: str,
    tuned_batch: float,
    noise_batch: float,
    optimizer: str,
) -> FloatArray:
    """``x(B)``: the rule's step over the tuned step at each batch (module docstring);
    1 for ``tuned`` and ``adascale``."""
    b = np.asarray(batch, dtype=np.float64)
    if rule in ("tuned", "adascale"):
        return np.ones_like(b)
    if rule not in RULE_EXPONENT:
        raise InvalidSpecError("lr-rule", f"unknown rule {rule!r}", fix=f"use one of {RULES}")
    a = RULE_EXPONENT[rule]
    a_star = OPTIMIZER_EXPONENT[optimizer_family(optimizer)]

    def g(x: FloatArray | float) -> FloatArray:
        return np.asarray(x / (1.0 + np.asarray(x) / noise_batch), dtype=np.float64)

    ratio = b / tuned_batch
    return np.asarray(ratio**a / (g(b) / g(tuned_batch)) ** a_star, dtype=np.float64)


def step_efficiency(x: npt.ArrayLike) -> FloatArray:
    """Progress per step of a mis-set step, relative to the tuned one: ``2x / (1 + x^2)``."""
    v = np.asarray(x, dtype=np.float64)
    return np.asarray(2.0 * v / (1.0 + v * v), dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class LrScaling:
    """A rule applied to a curve measured under ``baseline`` (``tuned`` for MLPerf's points
    and a user's figure; Zeus's own rule for its traces), with the step tuned at
    ``tuned_batch`` for an optimizer of family ``optimizer``."""

    rule: str
    baseline: str = "tuned"
    tuned_batch: float
    optimizer: str = "sgd"

    def __post_init__(self) -> None:
        for name, allowed in (("rule", (*RULES, "auto")), ("baseline", RULES)):
            if getattr(self, name) not in allowed:
                raise InvalidSpecError(
                    "lr-rule",
                    f"unknown rule {getattr(self, name)!r}",
                    fix="use auto, " + ", ".join(RULES),
                )
        if not (math.isfinite(self.tuned_batch) and self.tuned_batch > 0):
            raise InvalidSpecError("lr-rule.tuned_batch", "must be a finite number > 0")
        optimizer_family(self.optimizer)

    def factor(self, batch: npt.ArrayLike, noise_batch: float) -> FloatArray:
        """Samples under ``rule`` over samples under ``baseline`` at each batch (>= 0)."""
        kw: dict[str, Any] = {
            "tuned_batch": self.tuned_batch,
            "noise_batch": noise_batch,
            "optimizer": self.optimizer,
        }
        base = step_efficiency(mismatch(batch, rule=self.baseline, **kw))
        if self.rule == "auto":
            natural = step_efficiency(
                mismatch(batch, rule=NATURAL_RULE[optimizer_family(self.optimizer)], **kw)
            )
            mine = np.where(1.0 / natural <= 1.0 + AUTO_TOLERANCE, natural, 1.0)
        else:
            mine = step_efficiency(mismatch(batch, rule=self.rule, **kw))
        return np.asarray(base / mine, dtype=np.float64)

    def rule_at(self, batch: float, noise_batch: float) -> str:
        """The rule used at ``batch`` (``auto`` resolved: :func:`auto_rule`)."""
        if self.rule != "auto":
            return self.rule
        return auto_rule(
            batch, tuned_batch=self.tuned_batch, noise_batch=noise_batch,
            optimizer=self.optimizer,
        )[0]  # fmt: skip

    def text(self, batch: float, noise_batch: float) -> str:
        """'at global batch 4,096 the linear rule needs +12% samples over a tuned run; sqrt
        +48%; AdaScale as tuned' -- each rule's cost at ``batch`` against a tuned run."""
        kw: dict[str, Any] = {
            "tuned_batch": self.tuned_batch,
            "noise_batch": noise_batch,
            "optimizer": self.optimizer,
        }
        parts = []
        for rule in ("linear", "sqrt", "fixed"):
            eff = float(step_efficiency(mismatch([batch], rule=rule, **kw))[0])
            parts.append(f"{rule} {1.0 / eff - 1.0:+.1%}")
        used = self.rule_at(batch, noise_batch)
        family = optimizer_family(self.optimizer)
        return (
            f"learning rate {'chosen: ' if self.rule == 'auto' else ''}{used} "
            f"(step tuned at global batch {self.tuned_batch:,.0f}, {family} optimizer); "
            f"at global batch {batch:,.0f} each fixed rule needs over a tuned run: "
            + ", ".join(parts)
            + "; AdaScale as tuned"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "baseline": self.baseline,
            "tuned_batch": self.tuned_batch,
            "optimizer": self.optimizer,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LrScaling:
        return cls(
            rule=str(data["rule"]),
            baseline=str(data.get("baseline", "tuned")),
            tuned_batch=float(data["tuned_batch"]),
            optimizer=str(data.get("optimizer", "sgd")),
        )


def auto_rule(
    batch: float, *, tuned_batch: float, noise_batch: float, optimizer: str
) -> tuple[str, float]:
    """``auto``: the optimizer family's natural fixed rule (no code beyond a formula) while it
    costs at most :data:`AUTO_TOLERANCE` more samples than a tuned run at ``batch``, else
    AdaScale. Returns ``(rule, samples over tuned samples of the natural rule)``."""
    natural = NATURAL_RULE[optimizer_family(optimizer)]
    x = mismatch(
        [batch], rule=natural, tuned_batch=tuned_batch, noise_batch=noise_batch,
        optimizer=optimizer,
    )  # fmt: skip
    extra = float(1.0 / step_efficiency(x)[0])
    return (natural if extra <= 1.0 + AUTO_TOLERANCE else "adascale"), extra


def fit_rule_law(
    batch: npt.ArrayLike,
    value: npt.ArrayLike,
    *,
    rule: str,
    optimizer: str,
    efficiency: Callable[[FloatArray], FloatArray] = step_efficiency,
) -> tuple[float, float, float]:
    """``(E_min, B_noise, B0)`` of ``E(B) = E_min (1 + B/B_noise) / eff(x(B))`` under
    ``rule`` with the step tuned at ``B0`` (least squares in log space over the runs' values;
    NaN values -- never reached -- are left out). ``B0`` is searched from every batch."""
    from scipy.optimize import least_squares

    b = np.asarray(batch, dtype=np.float64)
    y = np.asarray(value, dtype=np.float64)
    ok = np.isfinite(y) & (y > 0) & (b > 0)
    b, ly = b[ok], np.log(y[ok])
    if np.unique(b).size < 2:
        raise InvalidSpecError("batch", "needs runs at two or more batches to fit the rule")

    def model(p: FloatArray, at: FloatArray) -> FloatArray:
        bn, b0 = math.exp(p[1]), math.exp(p[2])
        x = mismatch(at, rule=rule, tuned_batch=b0, noise_batch=bn, optimizer=optimizer)
        return np.asarray(p[0] + np.log1p(at / bn) - np.log(efficiency(x)))

    lo, hi = math.log(b.min() / 100.0), math.log(b.max() * 1e4)
    best = None
    for start in np.unique(np.log(b)):
        p0 = np.array([ly.min(), math.log(np.median(b) * 4.0), start])
        fit = least_squares(
            lambda p: model(p, b) - ly,
            p0,
            bounds=([-np.inf, lo, lo], [np.inf, hi, hi]),
        )
        if best is None or fit.cost < best.cost:
            best = fit
    assert best is not None
    return float(math.exp(best.x[0])), float(math.exp(best.x[1])), float(math.exp(best.x[2]))


def rule_law_samples(
    batch: npt.ArrayLike,
    params: tuple[float, float, float],
    *,
    rule: str,
    optimizer: str,
    efficiency: Callable[[FloatArray], FloatArray] = step_efficiency,
) -> FloatArray:
    """Samples of :func:`fit_rule_law`'s fitted law at each batch."""
    e_min, bn, b0 = params
    b = np.asarray(batch, dtype=np.float64)
    x = mismatch(b, rule=rule, tuned_batch=b0, noise_batch=bn, optimizer=optimizer)
    return np.asarray(e_min * (1.0 + b / bn) / efficiency(x), dtype=np.float64)
