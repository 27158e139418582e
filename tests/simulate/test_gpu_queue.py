"""The shared-server job queue: conservation, determinism, and placement's effect."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.catalog.topologies import load_topologies
from gpucast.domain.errors import InvalidSpecError
from gpucast.plan.placement import choose_gpus
from gpucast.simulate.gpu_queue import Job, simulate_queue, synthetic_jobs

DGX1 = load_topologies()["dgx1-v100"]


def _run(jobs: tuple[Job, ...], policy: str):  # type: ignore[no-untyped-def]
    return simulate_queue(
        DGX1, jobs, lambda f, k: choose_gpus(DGX1, f, k, policy=policy).gpus, policy=policy
    )


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 40))
def test_every_job_finishes_and_the_same_seed_gives_the_same_result(seed: int, n: int) -> None:
    jobs = synthetic_jobs(np.random.default_rng(seed), n)
    again = synthetic_jobs(np.random.default_rng(seed), n)
    assert jobs == again
    a, b = _run(jobs, "mapa"), _run(again, "mapa")
    assert a == b and a.jobs == n
    work = sum(j.steps * j.compute_s for j in jobs)  # the makespan is at least the longest job
    assert a.makespan_s >= max(j.steps * j.compute_s for j in jobs) - 1e-9
    assert work > 0


def test_topology_aware_placement_raises_dgx1_throughput() -> None:
    ratios = []
    for seed in range(3):
        jobs = synthetic_jobs(np.random.default_rng(seed), 120)
        ratios.append(_run(jobs, "mapa").jobs_per_hour / _run(jobs, "first-fit").jobs_per_hour)
    assert min(ratios) > 1.0


def test_placement_does_not_matter_on_an_nvswitch_board() -> None:
    a100 = load_topologies()["hgx-a100"]
    jobs = synthetic_jobs(np.random.default_rng(1), 60)
    res = [
        simulate_queue(
            a100, jobs, lambda f, k, p=p: choose_gpus(a100, f, k, policy=p).gpus, policy=p
        )
        for p in ("mapa", "first-fit")
    ]
    assert res[0].jobs_per_hour == pytest.approx(res[1].jobs_per_hour)


def test_bad_queues() -> None:
    with pytest.raises(InvalidSpecError, match="jobs"):
        synthetic_jobs(np.random.default_rng(0), 0)
    big = Job(job_id=0, model="x", gpus=9, steps=1, compute_s=1.0, gradient_bytes=1.0, arrival_s=0)
    with pytest.raises(InvalidSpecError, match="asks for 9 GPUs"):
        _run((big,), "mapa")
