"""Crossbow: k small-batch learners per GPU with model averaging, against one large batch."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.crossbow import crossbow

#: one learner at batch 8: 2 ms compute + 1 ms memory on the device, 6 ms launch/host overhead
SMALL = {"compute": 2e-3, "memory_bandwidth": 1e-3, "overhead": 6e-3}


def _cb(learners: int = 4, noise_batch: float = 64.0, weights: float = 1e6) -> object:
    return crossbow(
        learners=learners,
        batch=8,
        small_breakdown_s=SMALL,
        single_step_s=4 * 3e-3 + 6e-3,  # one learner at 32: 4 x the device work, one overhead
        weights_bytes=weights,
        bandwidth_bytes_per_s=1e12,
        noise_batch=noise_batch,
    )


def test_learners_fill_each_others_launch_gaps() -> None:
    cb = _cb()
    # 4 learners: max(4 x 3 ms, 9 ms) = 12 ms, + (2 x 4 + 2) x 1 MB / 1 TB/s = 10 us averaging
    assert cb.learner_step_s == pytest.approx(12e-3)  # type: ignore[attr-defined]
    assert cb.averaging_s == pytest.approx(1e-5)  # type: ignore[attr-defined]
    assert cb.samples_per_s == pytest.approx(32 / 12.01e-3)  # type: ignore[attr-defined]
    assert cb.single_samples_per_s == pytest.approx(32 / 18e-3)  # type: ignore[attr-defined]
    # large-batch-like SMA: the throughput ratio; small-batch efficiency: x (1 + 8/64) /
    # (1 + 32/64) = 0.75 on top
    high = 12.01 / 18.0
    assert cb.time_ratio_high == pytest.approx(high)  # type: ignore[attr-defined]
    assert cb.time_ratio_low == pytest.approx(high * 0.75)  # type: ignore[attr-defined]
    # two learners: overhead-bound, each step as long as alone
    two = _cb(learners=2)
    assert two.learner_step_s == pytest.approx(9e-3)  # type: ignore[attr-defined]


def test_one_learner_is_the_plain_step_and_a_huge_noise_scale_closes_the_range() -> None:
    one = _cb(learners=1)
    assert one.averaging_s == 0.0 and one.learner_step_s == pytest.approx(9e-3)  # type: ignore[attr-defined]
    wide = _cb(noise_batch=1e12)
    assert wide.time_ratio_low == pytest.approx(wide.time_ratio_high, rel=1e-9)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"learners": 0}, "learners"), ({"batch": 0}, "batch-size"), ({"noise_batch": 0.0}, "noise")],
)
def test_bad_input_names_the_field(changes: dict[str, object], field: str) -> None:
    args: dict[str, object] = {
        "learners": 4, "batch": 8, "small_breakdown_s": SMALL, "single_step_s": 0.018,
        "weights_bytes": 1e6, "bandwidth_bytes_per_s": 1e12, "noise_batch": 64.0,
    }  # fmt: skip
    with pytest.raises(InvalidSpecError, match=field):
        crossbow(**{**args, **changes})  # type: ignore[arg-type]
