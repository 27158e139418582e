"""The shipped step-time model's intervals: every calibrated regime split by batch distance."""

from __future__ import annotations

import math

from gpucast.catalog.steptime import shipped_step_time_model
from gpucast.predict.intervals import CALIBRATED, distance_regimes


def test_every_calibrated_regime_has_its_batch_distance_bands() -> None:
    model = shipped_step_time_model()
    assert model is not None
    table = model.efficiency().intervals
    for base in CALIBRATED:
        names = distance_regimes(base)
        assert all(table.resolved(n) == n and table.n[n] > 100 for n in names)
        widths = [math.log(table.ratios(n)[1] / table.ratios(n)[0]) for n in names]
        assert widths[0] < widths[-1]  # far from the measured batch: a wider band
        low, high = table.ratios(names[0])
        assert low < 1.0 < high

    # the same GPU near the measured batch is the narrowest band the model states
    def width(regime: str) -> float:
        low, high = table.ratios(regime)
        return high / low

    near, between = "same_gpu/calibrated/batch_x2", "same_gpu/calibrated/bracketed"
    assert width(near) < min(width(r) for r in table.q_low if r not in (near, between))
    # two measurements around the batch, each part scaled to both: narrower still
    assert table.resolved(between) == between and width(between) < width(near)
