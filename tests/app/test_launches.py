"""The up-front estimate of the servers a simulate train run launches."""

from __future__ import annotations

import math

import pytest

from gpucast.app._launches import MAX_LAUNCHES, check_launches, expected_run_s
from gpucast.domain.errors import InvalidSpecError


def _run(lost_s: float, rollback_per_s: float, horizon_s: float = 1e9) -> float:
    """Ten segments of 100 s."""
    return expected_run_s(
        segments=10, segment_s=100.0, lost_per_rollback_s=lost_s,
        rollback_per_s=rollback_per_s, horizon_s=horizon_s,
    )  # fmt: skip


def test_without_revocations_a_run_is_its_segments() -> None:
    assert _run(50.0, 0.0) == 1500.0


def test_a_run_needs_a_stretch_free_of_rollbacks_per_segment() -> None:
    """(exp(h L) - 1) / h per segment: rare rollbacks barely add, frequent ones explode up to
    the horizon."""
    assert _run(0.0, 1e-6) == pytest.approx(1000.0, rel=1e-3)
    assert _run(200.0, 0.01) == pytest.approx(10 * math.expm1(3.0) / 0.01)
    assert _run(200.0, 10.0, horizon_s=86400.0) == 86400.0


def test_launches_over_the_ceiling_are_refused_unless_allowed() -> None:
    kw = dict(counts=[100], hazards_per_s=[1e-3], rollback_per_s=0.1, horizon_s=86400.0)
    runs = int(MAX_LAUNCHES / (100 + 100 * 1e-3 * 86400.0)) + 1
    with pytest.raises(InvalidSpecError, match=r"^workers: 100 spot nodes x "):
        check_launches(runs=runs, run_s=86400.0, allow_large=False, **kw)  # type: ignore[arg-type]
    check_launches(runs=runs, run_s=86400.0, allow_large=True, **kw)  # type: ignore[arg-type]
    check_launches(runs=runs - 1, run_s=86400.0, allow_large=False, **kw)  # type: ignore[arg-type]
