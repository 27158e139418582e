"""ProgramMeasurement and friends: statistics from the runs, metric names, JSON round trip."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.measurement import EnvironmentFingerprint
from gpucast.domain.program import (
    ProgramMeasurement,
    ProgramRun,
    ResourceSeries,
    check_metric_pattern,
    metric_is_rate,
    metric_name,
)

ENV = EnvironmentFingerprint(
    host="h", os="Linux", python_version="3.11", cpu_model="cpu", cpu_cores=2,
    torch_threads=1, torch_version="2",
)  # fmt: skip


def _series(n: int = 4) -> ResourceSeries:
    t = tuple(0.1 * i for i in range(n))
    zeros = (0.0,) * n
    return ResourceSeries(
        interval_s=0.1, t_s=t, cpu_cores=(1.0,) * n, rss_bytes=(1e6,) * n,
        read_bytes=zeros, write_bytes=zeros, read_chars=zeros, write_chars=zeros,
        net_sent_bytes=zeros, net_recv_bytes=zeros, active_threads=(1.0,) * n,
        cpu_wait_cores=zeros, core_util_pct=((50.0, 10.0),) * n,
    )  # fmt: skip


def _run(i: int, wall: float, *, warmup: bool = False, status: str = "ok", metric=None):
    return ProgramRun(
        index=i, warmup=warmup, status=status, wall_s=wall, exit_code=0 if status == "ok" else 3,
        user_s=wall, metric_value=metric, stderr_tail=("boom",) if status != "ok" else (),
        series=_series(),
    )  # fmt: skip


def _measurement(runs, pattern=None) -> ProgramMeasurement:
    return ProgramMeasurement(
        name="p", command=("p", "a"), n_cores=2, runs=tuple(runs), stop_reason="ci_reached",
        environment=ENV, created_at=datetime(2026, 1, 1, tzinfo=UTC), metric_pattern=pattern,
    )  # fmt: skip


def test_statistics_come_from_the_measured_ok_runs_only() -> None:
    m = _measurement([_run(0, 9.0, warmup=True), _run(1, 1.0), _run(2, 2.0), _run(3, 3.0)])
    assert m.n_samples == 3
    assert m.median_s == 2.0 and m.mean_s == 2.0
    assert m.work_per_s == pytest.approx(0.5)  # runs per second without a metric
    assert m.status == "ok" and m.failure() == ""


def test_a_rate_metric_is_the_work_rate_and_a_count_is_divided_by_the_time() -> None:
    rate = _measurement([_run(1, 2.0, metric=10.0), _run(2, 2.0, metric=30.0)], r"tx/s=(\d+)")
    assert rate.metric_is_rate and rate.work_unit == "tx"
    assert rate.work_per_s == pytest.approx(20.0)
    count = _measurement([_run(1, 2.0, metric=10.0), _run(2, 2.0, metric=10.0)], r"proofs: (\d+)")
    assert not count.metric_is_rate and count.work_unit == "proofs"
    assert count.work_per_s == pytest.approx(5.0)


def test_a_failed_run_makes_it_failed_and_says_why() -> None:
    m = _measurement([_run(0, 1.0), _run(1, 0.5, status="exit")])
    assert m.status == "failed" and m.n_samples == 1
    assert "exited with code 3" in m.failure() and "boom" in m.failure()
    only_failed = _measurement([_run(0, 0.5, status="timeout")])
    assert only_failed.n_samples == 0 and only_failed.median_s is None
    assert only_failed.work_per_s is None


def test_a_missing_metric_is_quoted_as_typed() -> None:
    """The pattern items=(\\d+) was shown as 'items=(\\\\d+)' (repr; QA 35 R #19)."""
    run = _run(0, 1.0, status="no_metric")
    text = run.failure(metric=r"items=(\d+)")
    assert text.startswith(r"never printed the metric 'items=(\d+)'")


def test_round_trip_through_json_is_exact() -> None:
    m = _measurement([_run(0, 1.0, warmup=True), _run(1, 1.5, metric=2.0)], r"x=(\d+)")
    again = ProgramMeasurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again == m
    assert again.to_dict() == m.to_dict()


def test_one_run_has_no_interval() -> None:
    m = _measurement([_run(1, 1.0)])
    assert m.ci_halfwidth_rel == math.inf
    assert m.to_dict()["ci_halfwidth_rel"] is None


@pytest.mark.parametrize(
    ("pattern", "name"),
    [(r"tx/s=(\d+\.?\d*)", "tx/s"), (r"proofs: (\d+)", "proofs"), (r"(\d+) MB", "metric")],
)
def test_metric_name(pattern: str, name: str) -> None:
    assert metric_name(pattern) == name


def test_rates_are_names_per_second() -> None:
    assert metric_is_rate("tx/s") and metric_is_rate("MB/sec")
    assert not metric_is_rate("proofs")


@pytest.mark.parametrize("bad", [r"x=\d+", "x=(", ""])
def test_a_metric_needs_a_valid_regex_with_a_group(bad: str) -> None:
    with pytest.raises(InvalidSpecError, match="metric"):
        check_metric_pattern(bad)


def test_series_lengths_must_agree() -> None:
    with pytest.raises(InvalidSpecError, match="cpu_cores"):
        ResourceSeries(
            interval_s=0.1, t_s=(0.0, 0.1), cpu_cores=(1.0,), rss_bytes=(0.0, 0.0),
            read_bytes=(0.0, 0.0), write_bytes=(0.0, 0.0), read_chars=(0.0, 0.0),
            write_chars=(0.0, 0.0), net_sent_bytes=(0.0, 0.0), net_recv_bytes=(0.0, 0.0),
        )  # fmt: skip


def test_a_command_is_needed() -> None:
    with pytest.raises(InvalidSpecError, match="command"):
        ProgramMeasurement(
            name="p", command=(), n_cores=1, runs=(), stop_reason="failed", environment=ENV,
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )  # fmt: skip


def _contended(i: int, wall: float, lost: float) -> ProgramRun:
    s = _series()
    cumulative = tuple(lost * k / (s.n_samples - 1) for k in range(s.n_samples))
    series = ResourceSeries.from_dict({**s.to_dict(), "contention_s": list(cumulative)})
    return ProgramRun(index=i, warmup=False, status="ok", wall_s=wall, series=series)


def test_the_dedicated_time_is_the_wall_time_less_the_contention() -> None:
    m = _measurement([_contended(0, 2.0, 0.5), _contended(1, 3.0, 1.5), _contended(2, 1.0, 0.0)])
    assert [r.dedicated_s for r in m.runs] == [1.5, 1.5, 1.0]
    assert m.dedicated_median_s == 1.5 and m.median_s == 2.0
    assert m.contention_share == pytest.approx(2.0 / 6.0)
    back = ProgramMeasurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.dedicated_median_s == 1.5 and back.runs[1].contention_s == 1.5
    # a run stored before the contention was recorded has none, and neither has the median
    older = _measurement([_run(1, 1.0), _contended(2, 2.0, 0.5)])
    assert older.runs[0].dedicated_s is None and older.dedicated_median_s is None
