"""Learning-rate rules: a rule's step against the tuned one, and what it costs in samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.convergence import ConvergenceCurve
from gpucast.predict.lr_scaling import (
    LrScaling,
    auto_rule,
    fit_rule_law,
    mismatch,
    optimizer_family,
    rule_law_samples,
    rule_of_learning_rates,
    step_efficiency,
)

KW = {"tuned_batch": 256.0, "noise_batch": 32768.0}


def test_every_rule_is_exact_at_the_tuned_batch() -> None:
    for rule in ("linear", "sqrt", "fixed", "adascale", "tuned"):
        for opt in ("sgd", "adaptive"):
            x = mismatch([256.0], rule=rule, optimizer=opt, **KW)
            assert x[0] == pytest.approx(1.0)


def test_linear_keeps_sgd_and_sqrt_keeps_adam_well_below_the_noise_scale() -> None:
    # far below B_noise the tuned SGD step grows like B, the adaptive one like sqrt(B)
    b = np.array([512.0, 1024.0])
    kw = {"tuned_batch": 32.0, "noise_batch": 1e9}
    assert mismatch(b, rule="linear", optimizer="sgd", **kw) == pytest.approx([1.0, 1.0], 1e-5)
    assert mismatch(b, rule="sqrt", optimizer="adam", **kw) == pytest.approx([1.0, 1.0], 1e-5)
    # the other rule is off by sqrt(B / B0) either way
    assert mismatch(b, rule="sqrt", optimizer="sgd", **kw) == pytest.approx([0.25, 1 / 32**0.5])
    assert mismatch(b, rule="linear", optimizer="adaptive", **kw) == pytest.approx([4.0, 32**0.5])


def test_linear_overshoots_beyond_the_noise_scale() -> None:
    # B >> B_noise: the tuned step saturates, the linear rule keeps growing (Goyal et al.'s
    # 8k limit for ImageNet)
    x = mismatch([8192.0, 65536.0], rule="linear", optimizer="sgd", **KW)
    assert 1.0 < x[0] < x[1]
    f = LrScaling(rule="linear", tuned_batch=256.0).factor([8192.0, 65536.0], 32768.0)
    assert 1.0 < f[0] < 1.05 < f[1]


def test_step_efficiency_is_symmetric_in_log_and_peaks_at_one() -> None:
    assert step_efficiency([1.0])[0] == 1.0
    assert step_efficiency([2.0])[0] == pytest.approx(0.8)
    assert step_efficiency([0.5])[0] == pytest.approx(0.8)
    assert np.all(step_efficiency([0.1, 0.9, 1.1, 10.0]) < 1.0)


def test_factor_is_relative_to_the_baseline_rule() -> None:
    same = LrScaling(rule="fixed", baseline="fixed", tuned_batch=64.0, optimizer="adam")
    assert same.factor([8.0, 64.0, 4096.0], 300.0) == pytest.approx([1.0, 1.0, 1.0])
    tuned = LrScaling(rule="adascale", baseline="fixed", tuned_batch=64.0, optimizer="adam")
    assert np.all(tuned.factor([8.0, 4096.0], 300.0) < 1.0)  # tuning gains over a fixed rate


def test_auto_keeps_the_natural_rule_until_it_costs_one_percent() -> None:
    assert auto_rule(1024.0, optimizer="sgd", **KW)[0] == "linear"
    rule, extra = auto_rule(65536.0, optimizer="sgd", **KW)
    assert rule == "adascale" and extra > 1.01
    assert auto_rule(1024.0, optimizer="adam", **KW)[0] == "sqrt"
    auto = LrScaling(rule="auto", tuned_batch=256.0)
    f = auto.factor([1024.0, 65536.0], 32768.0)
    assert f[0] == pytest.approx(1.0, abs=0.01) and f[1] == pytest.approx(1.0)
    assert auto.rule_at(65536.0, 32768.0) == "adascale"


def test_curve_under_a_rule_needs_more_samples_and_round_trips() -> None:
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=1e6, reference_batch=256, noise_batch=4096
    )
    linear = curve.with_lr_rule("linear", "sgd")
    b = np.array([256.0, 2048.0, 16384.0])
    assert linear.samples(b)[0] == pytest.approx(1e6)
    assert np.all(linear.samples(b)[1:] > curve.samples(b)[1:])
    back = ConvergenceCurve.from_dict(linear.to_dict())
    assert back == linear and back.samples(b) == pytest.approx(linear.samples(b))
    assert ConvergenceCurve.from_dict(curve.to_dict()).lr is None
    assert "linear" in linear.lr.text(16384.0, 4096.0)  # type: ignore[union-attr]


def test_fit_recovers_a_fixed_rate_u_shape() -> None:
    true = (10.0, 300.0, 128.0)
    b = np.array([8.0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096])
    y = rule_law_samples(b, true, rule="fixed", optimizer="adam")
    assert y[0] > y[3] < y[-1]  # U-shaped: too large a step at small batches
    fit = fit_rule_law(b, y, rule="fixed", optimizer="adam")
    again = rule_law_samples(b, fit, rule="fixed", optimizer="adam")
    assert again == pytest.approx(y, rel=1e-3)


def test_rule_of_learning_rates_and_optimizer_names() -> None:
    b = [8, 16, 32, 64]
    assert rule_of_learning_rates(b, [0.1] * 4) == "fixed"
    assert rule_of_learning_rates(b, [math.sqrt(x) for x in b]) == "sqrt"
    assert rule_of_learning_rates(b, b) == "linear"
    assert optimizer_family("AdamW") == "adaptive" and optimizer_family("lars") == "sgd"
    with pytest.raises(InvalidSpecError, match="optimizer"):
        optimizer_family("quantum")
    with pytest.raises(InvalidSpecError, match="lr-rule"):
        LrScaling(rule="cubic", tuned_batch=256.0)
    with pytest.raises(InvalidSpecError, match="tuned_batch"):
        LrScaling(rule="linear", tuned_batch=-1.0)
    with pytest.raises(InvalidSpecError, match="two or more"):
        fit_rule_law([8.0, 8.0], [1.0, 2.0], rule="fixed", optimizer="sgd")
