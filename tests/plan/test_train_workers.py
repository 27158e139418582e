"""`plan train` scans runs of its space's chunks in worker processes: the same plan (rows,
counts, reasons, the spot lifetimes its sources name) as one process."""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import pytest

import gpucast
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.plan import TrainRequest
from gpucast.plan._train_search import _scan_part as _real_scan_part

_JOB: dict[str, Any] = dict(workload="resnet50", epochs=90, dataset_size=1281167)


def _plan(**kw: Any) -> dict[str, Any]:
    out = gpucast.plan_train(**_JOB, **kw).to_dict()
    assert out["request"].pop("jobs") == kw.get("jobs")
    return out


def _pools(monkeypatch: pytest.MonkeyPatch, make: Any) -> list[int]:
    """Each pool the planner gets, by its worker count."""
    import gpucast.app.planning as planning

    made: list[int] = []

    def pool(jobs: int) -> Executor | None:
        if jobs <= 1:
            return None
        made.append(jobs)
        return make(jobs)

    monkeypatch.setattr(planning, "worker_pool", pool)
    return made


def test_runs_of_chunks_scanned_apart_give_the_one_process_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Threads (in process: the lowered constants hold) scan runs of the catalog's chunks;
    the caller re-prunes as runs arrive, at other points than one scan does."""
    import gpucast.plan._train_search as planner

    monkeypatch.setattr(planner, "PARALLEL_MIN_CHUNKS", 0)
    monkeypatch.setattr(planner, "REPRUNE_ROWS", 300)  # re-prune often, at different rows
    seen: list[int] = []
    real = planner._scan_part

    def counted(*args: Any) -> Any:
        seen.append(args[-1][0])
        return real(*args)

    monkeypatch.setattr(planner, "_scan_part", counted)
    made = _pools(monkeypatch, ThreadPoolExecutor)
    here = _plan(jobs=1)
    assert not seen
    for jobs in (2, 3):
        apart = _plan(jobs=jobs)
        assert apart == here
    parts = max(seen) + 1  # each pool scanned every run of the chunks once
    assert made == [2, 3] and parts >= 4 and sorted(seen) == sorted(list(range(parts)) * 2)
    assert here["evaluated"] > 400_000 and here["recommended"] is not None


def test_worker_processes_plan_what_one_process_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real worker processes (loky), a spot plan whose pruning looks up lifetimes: its
    sources list the nodes the workers looked up."""
    import gpucast.plan._train_search as planner

    monkeypatch.setattr(planner, "PARALLEL_MIN_CHUNKS", 0)
    here = _plan(jobs=1, deadline_s=3 * 86400.0)
    apart = _plan(jobs=2, deadline_s=3 * 86400.0)
    assert apart == here
    assert "scenario (no data) for" in str(here["assumptions"])


def test_a_small_space_is_searched_here(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _pools(monkeypatch, ThreadPoolExecutor)
    import gpucast.plan._train_search as planner

    calls: list[int] = []
    monkeypatch.setattr(planner, "_scan_part", lambda *a: calls.append(1))
    gpucast.plan_train(**_JOB, jobs=2)  # the default catalog space: 8 chunks, below the bar
    assert made == [2] and not calls


def test_jobs_below_one_is_one_line() -> None:
    with pytest.raises(InvalidSpecError, match=r"^jobs: must be an integer >= 1 \(got 0\)"):
        TrainRequest(workload="resnet50", jobs=0)


def test_a_worker_that_dies_is_one_line_naming_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed mid-search (the OS for memory, a crash in native code): one line with
    the fix, exit code 1, not loky's traceback; the next plan builds a new pool and runs."""
    from typer.testing import CliRunner

    import gpucast.plan._train_search as planner
    from gpucast.cli.app import app

    monkeypatch.setattr(planner, "PARALLEL_MIN_CHUNKS", 0)

    def dies(*_args: Any) -> None:  # a local function: sent to the worker by value
        import os

        os._exit(9)

    monkeypatch.setattr(planner, "_scan_part", dies)
    flags = ["plan", "train", "--workload", "resnet50", "--epochs", "90", "--dataset-size",
             "1281167", "--jobs", "2"]  # fmt: skip
    result = CliRunner().invoke(app, flags)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    (line,) = [line for line in lines if "worker process" in line]
    assert line.startswith("error: a worker process of the search stopped before it finished")
    assert "--jobs 1" in line and "Traceback" not in result.output
    monkeypatch.setattr(planner, "_scan_part", _real_scan_part)
    assert gpucast.plan_train(**_JOB, jobs=2).recommended is not None


def test_a_plan_too_small_to_share_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool is fetched at its first task: `make run`'s plan (8 chunks) starts no worker
    and not even loky's resource tracker."""
    import loky

    def never(**_kw: Any) -> None:
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(loky, "get_reusable_executor", never)
    plan = gpucast.plan_train(**_JOB, jobs=4)
    assert plan.recommended is not None
