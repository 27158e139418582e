"""``plan train``'s request: the strategy names it takes."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import build
from gpucast.domain.plan import TrainRequest


def test_plan_train_takes_allreduce_as_ddp_as_simulate_train_takes_ddp() -> None:
    # QA: simulate train calls DDP allreduce (and takes ddp); plan train refused allreduce
    base = {"workload": "resnet50", "steps": 1000}
    request = build(TrainRequest, {**base, "strategy": "allreduce,fsdp"})
    assert request.strategies == ("ddp", "fsdp")
    with pytest.raises(InvalidSpecError, match=r"ddp, fsdp, ps \(allreduce = ddp\)"):
        build(TrainRequest, {**base, "strategy": "gossip"})


def test_too_many_monte_carlo_cells_names_the_flag_raised() -> None:
    """QA 34 #13: --max-gpus 1000000 was refused as "runs: ..."; the flag raised is named."""
    base = {"workload": "resnet50", "steps": 1000}
    with pytest.raises(InvalidSpecError, match=r"^max-gpus: asks for 1,000,006,000 Monte"):
        build(TrainRequest, {**base, "max_gpus": 1_000_000})
    with pytest.raises(InvalidSpecError, match=r"^runs: asks for 700,000,000 Monte"):
        build(TrainRequest, {**base, "mc_runs": 10_000_000})
