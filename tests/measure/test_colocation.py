"""Two real processes on one core (the CPU proxy of a time-sliced GPU): ordering only."""

from __future__ import annotations

import os

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.measure.colocation import measure_pair


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity")
def test_a_busy_neighbour_on_the_same_core_slows_the_victim() -> None:
    m = measure_pair("matmul", "matmul", units=20, repeats=3)
    assert len(m.alone_s) == len(m.together_s) == 3
    assert m.slowdown > 1.0  # sharing one core never makes it faster


def test_unknown_loop_is_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="loop: must be one of"):
        measure_pair("matmul", "nosuchloop")
