"""Many writers at once, and a writer killed mid-write: nothing committed is ever lost."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from store_factories import make_measurement

from gpucast.store import Store, open_store

WRITERS = 4
ROWS_PER_WRITER = 200


def _writer(path: str, worker: int, barrier: Any, results: Any) -> None:
    barrier.wait(timeout=60)  # every process opens and writes at the same moment
    ids = []
    with Store(path) as store:  # its own connection, opened after the fork
        for i in range(ROWS_PER_WRITER):
            ids.append(store.save_measurement(make_measurement(worker * 1000 + i)))
    results.put((worker, ids))


@pytest.mark.skipif(sys.platform == "win32", reason="uses fork")
def test_four_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")  # a brand-new file: the writers also race to create it
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(WRITERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, barrier, results)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    reported: dict[int, list[int]] = {}
    deadline = time.monotonic() + 180
    while len(reported) < WRITERS and time.monotonic() < deadline:
        try:
            worker, ids = results.get(timeout=0.5)
            reported[worker] = ids
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not failed, f"a writer failed (exit codes {failed}); see its traceback above"
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0, "a writer failed (e.g. 'database is locked')"

    all_ids = [i for ids in reported.values() for i in ids]
    assert len(all_ids) == len(set(all_ids)) == WRITERS * ROWS_PER_WRITER
    with open_store(path) as store:
        assert store.integrity_check() == []
        assert store.count_runs() == WRITERS * ROWS_PER_WRITER
        stored = {r.id: r for r in store.list_runs(limit=None)}
        assert set(stored) == set(all_ids)
        for worker, ids in reported.items():
            last = store.get_measurement(ids[-1])
            assert last == make_measurement(worker * 1000 + ROWS_PER_WRITER - 1)


CHILD = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.store import Store

    env = EnvironmentFingerprint(host="h", os="o", python_version="p", cpu_model="c",
                                 cpu_cores=1, torch_threads=1, torch_version="t")
    with Store(sys.argv[1]) as store:
        i = 0
        while True:
            m = Measurement(spec=WorkloadSpec(name="mlp", batch_size=1 + i % 64), mode="train",
                            device="cpu", step_times_s=tuple(0.01 + 1e-4 * k for k in range(200)),
                            samples_per_step=1 + i % 64, stop_reason="ci_reached", target_ci=0.02,
                            environment=env, created_at=datetime.now(UTC))
            run_id = store.save_measurement(m)
            print(run_id, flush=True)  # printed only after the commit returned
            i += 1
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")
@pytest.mark.parametrize("kill_after", [25, 160])
def test_a_writer_killed_mid_write_leaves_every_committed_row(
    tmp_path: Path, kill_after: int
) -> None:
    path = tmp_path / "killed.db"
    with open_store(path) as store:  # rows from before the crash must survive too
        earlier = [store.save_measurement(make_measurement(i)) for i in range(3)]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    reported: list[int] = []
    try:
        while len(reported) < kill_after:
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"writer exited early: {child.stderr.read() if child.stderr else ''}")
            reported.append(int(line))
        os.kill(child.pid, signal.SIGKILL)  # lands while it is busy writing the next rows
    finally:
        child.wait(timeout=30)
    reported += [int(line) for line in child.stdout.read().split()]
    assert child.returncode == -signal.SIGKILL

    with open_store(path) as store:
        assert store.integrity_check() == []
        present = {r.id for r in store.list_runs(limit=None)}
        assert set(earlier) <= present
        assert set(reported) <= present
        assert store.get_measurement(reported[-1]).spec.name == "mlp"
        new_id = store.save_measurement(make_measurement(99))  # and it still takes writes
        assert new_id > max(present)
