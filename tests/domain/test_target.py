"""``--target``: what a training job must reach, parsed once in the domain."""

from __future__ import annotations

import pytest

from gpucast.domain.convergence import parse_target
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.plan import TrainRequest


@pytest.mark.parametrize(
    ("text", "kind", "name", "amount", "batch"),
    [
        ("mlperf:resnet", "mlperf", "resnet", None, None),
        ("MLPerf:RetinaNet", "mlperf", "ssd", None, None),
        ("zeus:imagenet", "zeus", "imagenet", None, None),
        ("90epochs@256", "epochs", "", 90.0, 256),
        ("90 epochs @ 256", "epochs", "", 90.0, 256),
        ("2.5ep@1_024", "epochs", "", 2.5, 1024),
        ("1.2e8samples@1024", "samples", "", 1.2e8, 1024),
        ("4_000_000 samples@4096", "samples", "", 4e6, 4096),
    ],
)
def test_target_forms(text: str, kind: str, name: str, amount: float | None, batch: int | None):
    spec = parse_target(text)
    assert (spec.kind, spec.name, spec.amount, spec.batch) == (kind, name, amount, batch)
    assert spec.table == (kind in ("mlperf", "zeus"))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "must not be empty"),
        ("imagenet:resnet", "unknown table"),
        ("mlperf:", "needs a name"),
        ("90epochs", "N epochs|samples @ B"),
        ("90 steps@256", "N epochs|samples @ B"),
        ("0epochs@256", "> 0"),
        ("90epochs@0", ">= 1"),
        # QA 41 QT: these read "is not a table or N epochs|samples @ B", not the constraint
        ("-5epochs@256", "the amount must be a finite number > 0"),
        ("nanepochs@256", "the amount must be a finite number > 0"),
        ("infsamples@256", "the amount must be a finite number > 0"),
        ("90epochs@-1", "the batch after @ must be an integer >= 1"),
    ],
)
def test_bad_targets_name_the_field_and_a_fix(text: str, needle: str) -> None:
    with pytest.raises(InvalidSpecError, match="target") as info:
        parse_target(text)
    assert needle in str(info.value)
    assert "e.g. --target" in str(info.value)


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        ({"epochs": 90.0}, "epochs"),
        ({"steps": 1000}, "steps"),
        ({"reference_batch": 256}, "reference-batch"),
    ],
)
def test_target_excludes_the_other_ways_to_give_work(extra: dict, flag: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidSpecError, match=f"target/{flag}"):
        TrainRequest(workload="resnet50", target="90epochs@256", **extra)
    TrainRequest(workload="resnet50", target="mlperf:resnet", dataset_size=1000)
    with pytest.raises(InvalidSpecError, match="target"):
        TrainRequest(workload="resnet50", target="mlperf")
