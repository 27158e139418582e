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
