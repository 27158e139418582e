"""`plan serve` for a language model searches its GPU x degrees in worker processes: the same
plan as one process, a large run's pruning taken in search order, errors reaching the caller."""

from __future__ import annotations

import pickle
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import pytest

import gpucast
from gpucast.app.llm_serve import PlanLlmServeRequest
from gpucast.domain.errors import InvalidSpecError

_PLAN: dict[str, Any] = dict(
    model="llama-3-8b", rate=4, duration_s=30, gpu=["H100-SXM", "L40S", "A100-80GB"],
    slo_ttft_ms=1000, slo_tpot_ms=60,
)  # fmt: skip


class _Counting(Executor):
    """An executor that counts what it is given and hands it to ``inner``."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.submitted = 0
        self.tasks: list[str] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        self.tasks.append(fn.__name__)
        return self.inner.submit(fn, *args, **kwargs)


def _spy(monkeypatch: pytest.MonkeyPatch, make: Any) -> list[_Counting]:
    import gpucast.app._workers as workers

    made: list[_Counting] = []

    def pool(jobs: int) -> Executor | None:
        if jobs <= 1:
            return None
        made.append(_Counting(make(jobs)))
        return made[-1]

    monkeypatch.setattr(workers, "worker_pool", pool)
    return made


def test_worker_processes_find_the_plan_one_process_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpucast.plan.llm_serve as planner
    from gpucast.app._workers import worker_pool

    monkeypatch.setattr(planner, "PARALLEL_MIN_WORK", 0)  # a small plan, searched in parallel
    made = _spy(monkeypatch, worker_pool)
    here = gpucast.plan_llm_serve(**_PLAN, jobs=1)
    assert not made
    pooled = gpucast.plan_llm_serve(**_PLAN, jobs=2)
    assert made and made[0].submitted >= 6  # every GPU x degree searched by the workers
    assert pooled.to_dict() == here.to_dict()
    assert pooled.plan.best is not None and pooled.plan.best.meets_slo


def test_the_picks_band_edges_run_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpucast.plan.llm_serve as planner

    monkeypatch.setattr(planner, "PARALLEL_MIN_WORK", 0)
    made = _spy(monkeypatch, lambda jobs: ThreadPoolExecutor(jobs))
    plan = dict(_PLAN, gpu=["H100-SXM"], band=True)
    here = gpucast.plan_llm_serve(**plan, jobs=1)
    apart = gpucast.plan_llm_serve(**plan, jobs=2)
    assert apart.to_dict() == here.to_dict() and "best_band_80" in here.to_dict()
    assert made and made[0].tasks.count("_band_edge") == 2


def test_a_small_plan_does_not_start_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _spy(monkeypatch, lambda jobs: ThreadPoolExecutor(jobs))
    gpucast.plan_llm_serve(**_PLAN, jobs=2)  # 120 requests x a few GPU x degrees
    assert made and made[0].submitted == 0


def test_a_large_runs_pruning_is_taken_in_search_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches run ahead of the one being read; one a deployment found before it prunes is
    dropped (or never started), so the rows and the pruned list are the one-process ones."""
    import gpucast.plan._llm_serve_evaluate as evaluate
    import gpucast.plan._llm_serve_search as search
    import gpucast.plan.llm_serve as planner

    for module in (planner, evaluate, search):  # each module of the planner that reads it
        monkeypatch.setattr(module, "SAMPLED_REQUESTS", 200)  # threads see the lowered constant
    monkeypatch.setattr(planner, "PARALLEL_MIN_WORK", 0)
    made = _spy(monkeypatch, lambda jobs: ThreadPoolExecutor(jobs))
    plan = dict(_PLAN, rate=40, duration_s=20, slo_ttft_ms=2000, slo_tpot_ms=100)
    here = gpucast.plan_llm_serve(**plan, jobs=1)
    assert any(planner.PRUNED in line for line in here.plan.infeasible)
    for jobs in (2, 5):
        ahead = gpucast.plan_llm_serve(**plan, jobs=jobs)
        assert ahead.to_dict() == here.to_dict()
    assert all(pool.submitted > 0 for pool in made)


def test_an_error_in_a_worker_reaches_the_caller_whole() -> None:
    from gpucast.app._workers import worker_pool
    from gpucast.domain.llm_serving import parse_token_lengths

    error = InvalidSpecError("input-len", "must be > 0", got=-1, fix="e.g. --input-len 512")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.field, copy.detail, copy.fix, copy.exit_code) == (
        InvalidSpecError, str(error), "input-len", error.detail, error.fix, 2,
    )  # fmt: skip
    pool = worker_pool(2)
    assert pool is not None
    with pytest.raises(InvalidSpecError, match=r"^input-len: ") as raised:
        pool.submit(parse_token_lengths, "lognormal:x", "input-len").result()
    assert raised.value.field == "input-len"


def test_jobs_below_one_is_one_line() -> None:
    with pytest.raises(InvalidSpecError, match=r"^jobs: must be an integer >= 1 \(got 0\)"):
        PlanLlmServeRequest(model="llama-3-8b:2", slo_tpot_ms=50, jobs=0)
