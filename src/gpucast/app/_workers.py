"""Worker processes for searches a verb runs side by side (``plan serve``'s GPU x degree
searches): how many by default, and the pool (loky's reusable executor: it starts the same
under every start method, never re-runs the caller's ``__main__``, and is kept for the next
call in the process)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

from gpucast.domain.errors import GpucastError

T = TypeVar("T")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def worker_pool(jobs: int) -> Executor | None:
    """``jobs`` worker processes, or None (run here) for one. Nothing starts until the first
    task: a search too small to share (most plans) starts no process."""
    return None if jobs <= 1 else _OnFirstTask(jobs)


class _OnFirstTask(Executor):
    """loky's reusable executor of ``jobs`` workers, fetched at the first :meth:`submit`."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: Executor | None = None

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._pool is None:
            from loky import get_reusable_executor

            self._pool = get_reusable_executor(max_workers=self.jobs)
        return self._pool.submit(fn, *args, **kwargs)


@contextmanager
def worker_failures() -> Iterator[None]:
    """A worker process that died (killed for memory, a crash in native code) as one line
    naming ``--jobs``, not loky's traceback; the pool is rebuilt on the next call."""
    try:
        yield
    except BrokenProcessPool as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GpucastError(
            f"a worker process of the search stopped before it finished ({first})",
            fix="rerun with fewer workers (--jobs 1 searches in this process, with the least "
            "memory)",
        ) from exc
