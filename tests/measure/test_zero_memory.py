"""ZeRO per-rank memory: the prediction against the tensors two gloo ranks really hold."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.measure.zero_memory import measure_zero_memory
from gpucast.predict.memory import MemoryNeeds, zero_state_bytes


@pytest.mark.parametrize("stage", [1, 3])
def test_predicted_bytes_per_rank_match_a_real_run_within_5pct(stage: int) -> None:
    ranks = measure_zero_memory(stage, nproc=2, hidden=64, layers=2, vocab=500, steps=1)
    assert len(ranks) == 2
    n_params = ranks[0]["n_params"]
    needs = MemoryNeeds.from_parameters(
        n_params=n_params, activations_bytes=0.0, n_layers=2, setup="fp32-adam"
    )
    predicted = zero_state_bytes(needs, stage=stage, ranks=2)
    for held in ranks:
        total = held["weights_bytes"] + held["gradients_bytes"] + held["optimizer_bytes"]
        assert total == pytest.approx(sum(predicted.values()), rel=0.05)
        for part in ("weights", "gradients", "optimizer"):
            assert held[f"{part}_bytes"] == pytest.approx(predicted[part], rel=0.05)
    # the optimizer state really is partitioned: the ranks' shares add up to the whole
    whole = sum(r["optimizer_bytes"] for r in ranks)
    assert whole == pytest.approx(8 * n_params, rel=0.01)


def test_bad_arguments() -> None:
    with pytest.raises(InvalidSpecError, match="stage"):
        measure_zero_memory(2)
    with pytest.raises(InvalidSpecError, match="nproc"):
        measure_zero_memory(1, nproc=1)
    with pytest.raises(InvalidSpecError, match="stage"):
        zero_state_bytes(
            MemoryNeeds.from_parameters(n_params=1, activations_bytes=0, n_layers=1),
            stage=4,
            ranks=2,
        )
