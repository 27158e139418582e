"""The store keeps a run's operator trace (``--kernels``) in ``kernel_traces`` (schema v4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from store_factories import make_measurement

from gpucast.domain.kernels import KernelTrace, OperatorRecord
from gpucast.store import Store, open_store
from gpucast.store.schema import latest_version


def _trace() -> KernelTrace:
    op = OperatorRecord(
        name="aten.addmm",
        op_class="matmul",
        input_shapes="8,8x4,4x8",
        dtype="float32",
        calls_per_step=2.0,
        time_s_per_call=1e-4,
        flops=512,
        bytes_read=416,
        bytes_written=256,
    )
    return KernelTrace(device="cpu", activity="cpu", steps=3, profiled_step_s=5e-4, operators=(op,))


def test_a_trace_round_trips_with_its_run(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        plain = store.save_measurement(make_measurement(0))
        traced = store.save_measurement(make_measurement(1), kernels=_trace())
        assert store.kernel_trace(traced) == _trace()
        assert store.kernel_trace(plain) is None
        assert store.kernel_run_ids() == [traced]
        assert store.get_measurement(traced) == make_measurement(1)


def test_v3_rows_survive_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    with open_store(path) as store:
        run_id = store.save_measurement(make_measurement(3))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE kernel_traces")
    conn.execute("DELETE FROM schema_migrations WHERE version = 4")
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    with Store(path) as store:
        assert store.schema_version == latest_version()
        assert store.get_measurement(run_id) == make_measurement(3)
        traced = store.save_measurement(make_measurement(4), kernels=_trace())
        assert store.kernel_trace(traced) == _trace()
