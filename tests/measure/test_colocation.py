"""Two real processes on one core (the CPU proxy of a time-sliced GPU): structure only (the
slowdown itself is wall-clock speed; ``benchmarks/colocation_interference.py`` checks it)."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.measure.colocation import measure_pair


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity")
def test_a_pair_runs_alone_and_together_and_cleans_up() -> None:
    before = os.sched_getaffinity(0)
    m = measure_pair("matmul", "half", units=5, repeats=2)
    assert (m.victim, m.aggressor) == ("matmul", "half")
    assert len(m.alone_s) == len(m.together_s) == 2
    assert all(t > 0 for t in (*m.alone_s, *m.together_s)) and m.slowdown > 0
    assert os.sched_getaffinity(0) == before  # the pinning is undone
    assert not mp.active_children()  # every aggressor stopped


def test_unknown_loop_is_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="loop: must be one of"):
        measure_pair("matmul", "nosuchloop")
