"""A stored program run as an observation of the program model: dedicated or shared time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpucast.domain.measurement import EnvironmentFingerprint
from gpucast.domain.program import ProgramMeasurement, ProgramRun, ResourceSeries
from gpucast.inputs.program import observation

ENV = EnvironmentFingerprint(
    host="h", os="Linux", python_version="3.11", cpu_model="cpu", cpu_cores=2,
    torch_threads=1, torch_version="2",
)  # fmt: skip


def _measurement(*, lost: float | None) -> ProgramMeasurement:
    n = 11
    zeros = (0.0,) * n
    series = ResourceSeries(
        interval_s=0.1, t_s=tuple(0.1 * i for i in range(n)), cpu_cores=(0.5,) * n,
        rss_bytes=(1e6,) * n, read_bytes=zeros, write_bytes=zeros, read_chars=zeros,
        write_chars=zeros, net_sent_bytes=zeros, net_recv_bytes=zeros,
        active_threads=(1.0,) * n, cpu_wait_cores=(0.5,) * n, runnable_tasks=(4.0,) * n,
        contention_s=() if lost is None else tuple(lost * i / (n - 1) for i in range(n)),
    )  # fmt: skip
    runs = tuple(
        ProgramRun(index=i, warmup=False, status="ok", wall_s=1.0, user_s=0.5, series=series)
        for i in range(3)
    )
    return ProgramMeasurement(
        name="p", command=("p",), n_cores=1, cores=(0,), runs=runs, stop_reason="ci_reached",
        environment=ENV, created_at=datetime(2026, 1, 1, tzinfo=UTC), cpu_clock_ghz=2.0,
    )  # fmt: skip


def test_a_run_with_its_contention_is_observed_on_a_dedicated_machine() -> None:
    obs, profile, notes = observation(_measurement(lost=0.5))
    assert obs.wall_s == pytest.approx(0.5)
    assert obs.machine.background_tasks == 0.0
    assert profile.background_tasks > 0  # the load was there, and is taken out of the time
    assert not any(a.name == "measured run time" for a in notes)
    raw, _, _ = observation(_measurement(lost=0.5), dedicated=False)
    assert raw.wall_s == pytest.approx(1.0)
    assert raw.machine.background_tasks == pytest.approx(profile.background_tasks)


def test_an_older_run_without_it_falls_back_to_the_fair_share_and_says_so() -> None:
    obs, profile, notes = observation(_measurement(lost=None))
    assert obs.wall_s == pytest.approx(1.0)
    assert obs.machine.background_tasks == pytest.approx(profile.background_tasks)
    assert any(a.name == "measured run time" for a in notes)
