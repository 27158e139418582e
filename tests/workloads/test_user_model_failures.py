"""A user model whose step raises is the user's error, in every verb that runs it: one line
naming the exception, exit 2, and the fix that fits the cause (QA 41: ``measure`` printed a
traceback for an AttributeError in ``forward`` and exited 1 with no fix for a TypeError, and
``profile`` gave every failure the same paragraph about shapes that depend on the data)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure import measure
from gpucast.profile import profile_workload

FILE = Path(__file__).resolve().parent / "failing_user_models.py"
QUICK = {"max_time_s": 0.5, "min_samples": 2, "telemetry": False}


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_any_exception_in_a_user_forward_is_one_line_of_bad_input(mode: str) -> None:
    spec = WorkloadSpec(name=f"{FILE}:attribute_typo", batch_size=2)
    with pytest.raises(InvalidSpecError, match=rf"{mode} step of .* failed: AttributeError") as err:
        measure(spec, mode=mode, device="cpu", **QUICK)
    assert err.value.exit_code == 2
    assert "--debug" in str(err.value)


def test_a_forward_needing_a_keyword_argument_says_how_to_give_it() -> None:
    spec = WorkloadSpec(name=f"{FILE}:keyword_forward", batch_size=2)
    with pytest.raises(InvalidSpecError, match=r"missing 1 required keyword-only") as measured:
        measure(spec, device="cpu", **QUICK)
    with pytest.raises(InvalidSpecError, match=r"missing 1 required keyword-only") as profiled:
        profile_workload(spec)
    for err in (measured, profiled):
        assert err.value.exit_code == 2
        assert "keyword arguments in the factory" in str(err.value)
        assert "depend on the data" not in str(err.value)


def test_a_model_reading_a_value_is_profiled_on_real_tensors() -> None:
    """QA 41: control flow on a tensor's value (``.item()``) cannot run on fake tensors, and
    no verb could price such a model; it is profiled on real ones, the path its example took."""
    p = profile_workload(WorkloadSpec(name=f"{FILE}:branching", batch_size=2))
    assert p.forward_flops == 2 * (2 * 2 * 4 * 4)  # the layer ran twice: sum(ones) > 0
    assert any("profiled on real tensors" in note for note in p.notes)


def test_a_value_reading_model_too_big_for_real_tensors_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Memory:
        available = 400  # bytes: less than twice its 3 x 20 fp32 weights (240 bytes)

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Memory())
    with pytest.raises(InvalidSpecError, match=r"DataDependent.*more than half") as err:
        profile_workload(WorkloadSpec(name=f"{FILE}:branching", batch_size=2))
    assert err.value.exit_code == 2 and "gpucast measure" in str(err.value)


def test_only_a_value_reading_model_is_told_to_measure_instead() -> None:
    typo = WorkloadSpec(name=f"{FILE}:attribute_typo", batch_size=2)
    with pytest.raises(InvalidSpecError, match=r"AttributeError") as err:
        profile_workload(typo)
    assert "gpucast measure" not in str(err.value)
