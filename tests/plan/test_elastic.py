"""The elastic re-plan: keep the global batch where it fits, else the per-GPU batch, by
goodput (throughput x statistical efficiency)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from gpucast.plan.elastic import (
    IDLE,
    KEEP_GLOBAL,
    KEEP_PER_GPU,
    elastic_table,
    rebalanced_batch,
)

FloatArray = npt.NDArray[np.float64]


def _law(noise_batch: float):  # type: ignore[no-untyped-def]
    """McCandlish's law: samples to target = 1e6 (1 + B / B_noise)."""

    def samples(b: FloatArray) -> FloatArray:
        return np.asarray(1e6 * (1.0 + np.asarray(b, dtype=np.float64) / noise_batch))

    return samples


def test_rebalanced_batch_keeps_the_global_batch() -> None:
    np.testing.assert_array_equal(rebalanced_batch(1024, np.array([0, 1, 3, 8, 2000])),
                                  [0, 1024, 341, 128, 1])  # fmt: skip


def test_progress_is_throughput_over_samples_at_the_batch_used() -> None:
    # 8 GPUs planned at 128 each (global 1,024); perfect scaling: k GPUs do k/8 of the steps
    # at 128 per GPU; keeping the global batch takes 8/k times longer steps (linear in the
    # batch), or does not fit below 4 GPUs
    k = np.arange(9)
    keep = np.where(k > 0, 1.0, 0.0)  # global steps/s of k x 128: 1 step/s at any k
    same = np.where(k >= 4, k / 8.0, np.nan)  # steps of 1,024 samples
    el = elastic_table(
        keep_steps_per_s=keep, same_steps_per_s=same, gpus=k, batch=128, full_gpus=8,
        samples_to_target=_law(1024.0),
    )  # fmt: skip
    # full cluster: the planned job itself (1 step/s of 1,024)
    assert el.progress_steps_per_s[8] == pytest.approx(1.0)
    # 4 GPUs: keep 128 each -> 512 samples/s at S(512) = 1.5e6 vs S(1024) = 2e6: each sample
    # is worth 4/3 of a planned one: 512 x 4/3 / 1024 = 0.667 planned steps/s; keeping the
    # global batch: 0.5 steps of 1,024 per second = 0.5: the per-GPU batch wins
    assert el.progress_steps_per_s[4] == pytest.approx(2.0 / 3.0)
    assert el.choice[4] == KEEP_PER_GPU and el.global_batch[4] == 512
    assert el.efficiency[4] == pytest.approx(4.0 / 3.0)
    assert el.choice[0] == IDLE and el.progress_steps_per_s[0] == 0.0
    # a huge noise scale (no statistical gain from smaller batches) and a sub-linear
    # step: keeping the global batch wins where it fits
    sub = np.where(k >= 4, np.sqrt(k / 8.0), np.nan)
    el = elastic_table(
        keep_steps_per_s=keep * 0.4, same_steps_per_s=sub, gpus=k, batch=128, full_gpus=8,
        samples_to_target=_law(1e12),
    )  # fmt: skip
    assert el.choice[4] == KEEP_GLOBAL and el.per_gpu_batch[4] == 256
    assert el.progress_steps_per_s[4] == pytest.approx(np.sqrt(0.5))
    assert el.choice[3] == KEEP_PER_GPU  # does not fit: the per-GPU batch
    assert el.progress_steps_per_s[3] == pytest.approx(0.4 * 3 * 128 / 1024, rel=1e-6)
