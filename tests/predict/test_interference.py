"""Co-located jobs' slowdown per sharing mechanism: structure and ordering."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.interference import (
    MECHANISMS,
    JobDemand,
    colocated_slowdowns,
    demand_from_roofline,
    fair_shares,
)

COMPUTE = JobDemand(
    name="gemm", compute_fraction=0.9, sm_utilisation=0.9, bandwidth_utilisation=0.2
)
MEMORY = JobDemand(name="copy", compute_fraction=0.1, sm_utilisation=0.2, bandwidth_utilisation=0.9)

shares = st.floats(0.0, 1.0)
jobs = st.builds(
    JobDemand,
    name=st.just("j"),
    compute_fraction=shares,
    sm_utilisation=shares,
    bandwidth_utilisation=shares,
    duty=shares,
    thread_percentage=st.floats(1.0, 100.0),
)


@given(st.lists(jobs, min_size=1, max_size=5), st.sampled_from(MECHANISMS))
def test_slowdowns_are_at_least_one_and_mig_isolates(group: list[JobDemand], how: str) -> None:
    out = colocated_slowdowns(group, how)
    assert len(out) == len(group) and all(s >= 1.0 for s in out)
    assert colocated_slowdowns(group, "mig") == tuple(1.0 for _ in group)


def test_time_slicing_n_busy_jobs_each_run_n_times_slower() -> None:
    for n in (1, 2, 3, 4):
        assert colocated_slowdowns([COMPUTE] * n, "time-slicing") == pytest.approx([n] * n)
    light = JobDemand(name="light", compute_fraction=1.0, duty=0.3)
    busy, lit = colocated_slowdowns([COMPUTE, light], "time-slicing")
    assert busy == pytest.approx(1 / 0.7) and lit == 1.0


def test_concurrent_sharing_slows_complementary_pairs_less() -> None:
    # a compute-bound and a memory-bound job overlap well; two compute-bound ones do not
    for how in ("streams", "mps"):
        mixed = colocated_slowdowns([COMPUTE, MEMORY], how)
        same = colocated_slowdowns([COMPUTE, COMPUTE], how)
        assert max(mixed) < min(same)
        assert max(same) <= colocated_slowdowns([COMPUTE, COMPUTE], "time-slicing")[0]


def test_mps_thread_limits_partition_the_sms() -> None:
    half = JobDemand(name="h", compute_fraction=1.0, sm_utilisation=0.5, thread_percentage=50.0)
    assert colocated_slowdowns([half, half], "mps") == (1.0, 1.0)
    # a limit below what the job uses alone slows it even without a neighbour
    capped = JobDemand(name="c", compute_fraction=1.0, sm_utilisation=1.0, thread_percentage=25.0)
    assert colocated_slowdowns([capped], "mps")[0] == pytest.approx(4.0)
    assert colocated_slowdowns([capped], "streams")[0] == 1.0  # streams have no limits


@given(st.lists(shares, min_size=1, max_size=6))
def test_fair_shares_never_exceed_demand_or_the_device(demands: list[float]) -> None:
    out = fair_shares(demands)
    assert all(s <= d + 1e-12 for s, d in zip(out, demands, strict=True))
    assert sum(out) <= 1.0 + 1e-9


def test_demand_from_roofline_and_bad_input() -> None:
    d = demand_from_roofline("x", compute_s=3.0, memory_s=1.0, other_s=1.0)
    assert d.compute_fraction == pytest.approx(0.75)
    assert (d.sm_utilisation, d.bandwidth_utilisation) == pytest.approx((0.6, 0.2))
    with pytest.raises(InvalidSpecError, match="must be in \\[0, 1\\]"):
        JobDemand(name="x", compute_fraction=1.5)
    with pytest.raises(InvalidSpecError, match="thread percentage"):
        JobDemand(name="x", compute_fraction=0.5, thread_percentage=0)
    with pytest.raises(InvalidSpecError, match="sharing mechanism"):
        colocated_slowdowns([COMPUTE], "vgpu")
