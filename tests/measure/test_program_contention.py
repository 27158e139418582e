"""The dedicated-equivalent run time: wall time less what other tasks took (issue #20)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from gpucast.measure.program import ProgramSpec, contention_s, run_once

PY = sys.executable


def test_one_thread_loses_exactly_its_wait() -> None:
    assert contention_s(np.array([0.4]), np.array([0.6]), 1.0, 1.0) == pytest.approx(0.6)
    assert contention_s(np.array([0.4]), np.array([0.0]), 1.0, 2.0) == 0.0


def test_its_own_threads_queueing_for_too_few_cores_is_not_contention() -> None:
    # 4 busy threads on 2 dedicated cores: each runs half the interval, waits the other half
    run, wait = np.full(4, 0.5), np.full(4, 0.5)
    assert contention_s(run, wait, 1.0, 2.0) == pytest.approx(0.0)
    # the same threads beside 3 other busy tasks get 8/7 cores: the 1 s interval holds
    # 8/7 core-seconds, 4/7 s of work on 2 dedicated cores, so 3/7 s were lost
    run, wait = np.full(4, 2.0 / 7.0), np.full(4, 5.0 / 7.0)
    assert contention_s(run, wait, 1.0, 2.0) == pytest.approx(3.0 / 7.0)


def test_threads_that_run_one_after_another_lose_the_sum_of_their_waits() -> None:
    # two threads in turn, each runnable half the interval and waiting half of that
    assert contention_s(np.array([0.25, 0.25]), np.array([0.25, 0.25]), 1.0, 2.0) == (
        pytest.approx(0.5)
    )


def test_the_loss_never_exceeds_the_interval_and_empty_input_loses_nothing() -> None:
    assert contention_s(np.array([0.1, 0.1]), np.array([5.0, 5.0]), 1.0, 1.0) <= 1.0
    assert contention_s(np.array([]), np.array([]), 1.0, 1.0) == 0.0
    assert contention_s(np.array([0.5]), np.array([0.5]), 0.0, 1.0) == 0.0


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not os.path.exists(f"/proc/{os.getpid()}/schedstat"),
    reason="needs Linux schedstat (/proc/PID/task/TID/schedstat)",
)
def test_a_busy_neighbour_on_the_same_cpu_is_taken_out_of_the_run_time() -> None:
    """A CPU-bound program shares its one CPU with a busy process: the time the neighbour
    held the CPU is recorded as contention and taken out of the wall time, never below the
    program's own CPU time. (How close the result lands to the same program's time alone is
    a benchmark figure -- ``benchmarks/program_prediction.py`` -- not asserted here: on a
    loaded machine two runs' times differ by more than any margin a test could hold.)"""
    cpu = sorted(os.sched_getaffinity(0))[0]
    spec = ProgramSpec(
        command=(PY, "-c", "x = 0\nfor i in range(6_000_000): x += i"),
        cpus=(cpu,),
        interval_s=0.05,
    )
    hog = subprocess.Popen(
        [PY, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nprint('on', flush=True)\n"
         "while True: pass"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == b"on"  # spinning
        shared = run_once(spec)
    finally:
        hog.kill()
        hog.wait()
    assert shared.status == "ok"
    assert shared.dedicated_s is not None and shared.contention_s is not None
    # the neighbour took a real share of the one CPU (a fair scheduler gives each runnable
    # task its turn: 25-50% of the wall time in practice)
    assert shared.contention_s > 0.1 * shared.wall_s
    # the dedicated-equivalent time is the wall time less that share ...
    assert shared.dedicated_s == pytest.approx(shared.wall_s - shared.contention_s)
    # ... and still the program's own: never less than the CPU time it used
    assert shared.dedicated_s >= 0.9 * shared.cpu_s
