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


@pytest.mark.parametrize(
    ("changes", "message"),
    [  # QA session 35: field names were "mc_runs", "max_simulated", "batch_sizes", no fix
        ({"mc_runs": 0}, r"^runs: must be an integer >= 1 \(got 0\); e.g. --runs 1000$"),
        ({"max_simulated": 0}, r"^max-simulated: must be .*; e.g. --max-simulated 20$"),
        ({"max_ps_shards": 0}, r"^max-ps-shards: must be .*; e.g. --max-ps-shards 4$"),
        ({"batch_sizes": "0,8"}, r"^batch-sizes: must be .*; e.g. --batch-sizes 32,64,128$"),
        (  # --eta without --power-limit auto was silently ignored
            {"eta": 0.3, "power_limit": "200"},
            r"^eta: only applies with --power-limit auto .*; add --power-limit auto, or drop",
        ),
        (  # simulate train refuses --elastic with ps-async; plan train took it, silently idle
            {"elastic": True, "strategy": "ps"},
            r"^elastic: re-plans a synchronous job; .*add --strategy ddp or fsdp",
        ),
    ],
)
def test_bad_plan_options_name_the_flag_and_a_fix(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        build(TrainRequest, {"workload": "resnet50", "steps": 1000, **changes})
    if changes.get("elastic"):  # with a synchronous strategy beside it, elastic applies
        build(
            TrainRequest, {"workload": "resnet50", "steps": 1000, **changes, "strategy": "ps,ddp"}
        )
