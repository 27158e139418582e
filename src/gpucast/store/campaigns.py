"""Campaign bookkeeping and distributed runs in the store.

A campaign is a row of ``campaigns`` plus one row of ``campaign_points`` per point of its sweep
(status ``pending`` -> ``running`` -> ``done`` | ``failed``). :func:`complete_point` inserts
the point's run and marks the point done in *one* transaction, and refuses a point that is
already done, so a campaign killed at any moment and run again neither loses nor duplicates a
completed point. Distributed runs are stored in ``runs`` with ``kind = "distributed"``.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpucast._version import __version__
from gpucast.domain.campaign import PointState, PointStatus
from gpucast.domain.distributed import DistributedMeasurement
from gpucast.domain.errors import GpucastError, InvalidInputError
from gpucast.domain.measurement import Measurement
from gpucast.store.db import Store, measurement_row

DISTRIBUTED_KIND = "distributed"
MEASUREMENT_KIND = "measurement"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _dumps(value: Any) -> str:
    from gpucast.store.db import _dumps as store_dumps

    return store_dumps(value)


# -- runs rows ---------------------------------------------------------------------------------
def _distributed_row(d: DistributedMeasurement) -> dict[str, Any]:
    import numpy as np

    steps = np.asarray(d.step_times_s)
    return {
        "kind": DISTRIBUTED_KIND,
        "workload": d.spec.label,
        "batch_size": d.spec.batch_size,
        "precision": d.spec.precision,
        "mode": "train",
        "device": f"{d.config.label}:{d.config.n_workers}x{d.workers[0].device}",
        "created_at": d.created_at.astimezone(UTC).isoformat(),
        "spec_json": _dumps({**d.spec.to_dict(), "distributed": d.config.to_dict()}),
        "result_json": _dumps(d.to_dict()),
        "median_s": d.median_step_s,
        "mean_s": d.mean_step_s,
        "p5_s": float(np.percentile(steps, 5)),
        "p95_s": float(np.percentile(steps, 95)),
        "ci_halfwidth_rel": None,
        "samples_per_s": d.samples_per_s,
        "n_samples": len(d.step_times_s),
        "stop_reason": "sample_cap",
        "host": d.environment.host,
        "gpu_name": d.environment.gpu_name,
        "gpucast_version": __version__,
    }


def _insert_run(conn: sqlite3.Connection, row: Mapping[str, Any]) -> int:
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    cursor = conn.execute(f"INSERT INTO runs ({columns}) VALUES ({marks})", tuple(row.values()))
    assert cursor.lastrowid is not None
    return int(cursor.lastrowid)


def result_row(kind: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The ``runs`` row of a point's result dict (``Measurement`` or distributed form)."""
    if kind == DISTRIBUTED_KIND:
        return _distributed_row(DistributedMeasurement.from_dict(result))
    if kind == MEASUREMENT_KIND:
        return measurement_row(Measurement.from_dict(result))
    raise InvalidInputError(f"unknown result kind {kind!r}", fix="measurement or distributed")


def save_distributed(store: Store, measurement: DistributedMeasurement) -> int:
    """Store a distributed measurement (one transaction); returns its run id."""
    with store.transaction() as conn:
        return _insert_run(conn, _distributed_row(measurement))


def load_distributed(
    store: Store, *, workload: str | None = None, limit: int | None = None
) -> list[DistributedMeasurement]:
    """Stored distributed measurements, oldest first."""
    sql = "SELECT result_json FROM runs WHERE kind = ?"
    params: list[Any] = [DISTRIBUTED_KIND]
    if workload is not None:
        sql += " AND workload = ?"
        params.append(workload)
    sql += " ORDER BY id"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    rows = store.connection.execute(sql, params).fetchall()
    return [DistributedMeasurement.from_dict(json.loads(r[0])) for r in rows]


# -- campaigns ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignRow:
    id: str
    name: str
    sweep_path: str | None
    status: str
    driver_pid: int | None
    driver_host: str | None
    created_at: str
    updated_at: str


_CAMPAIGN_COLUMNS = "id, name, sweep_path, status, driver_pid, driver_host, created_at, updated_at"


def _campaign_row(row: Sequence[Any]) -> CampaignRow:
    names = [c.strip() for c in _CAMPAIGN_COLUMNS.split(",")]
    return CampaignRow(**dict(zip(names, row, strict=True)))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def get_campaign(store: Store, campaign_id: str) -> CampaignRow | None:
    row = store.connection.execute(
        "SELECT id, name, sweep_path, status, driver_pid, driver_host, created_at, updated_at "
        "FROM campaigns WHERE id = ?",
        (campaign_id,),
    ).fetchone()
    return None if row is None else _campaign_row(row)


def list_campaigns(store: Store) -> list[CampaignRow]:
    rows = store.connection.execute(
        "SELECT id, name, sweep_path, status, driver_pid, driver_host, created_at, updated_at "
        "FROM campaigns ORDER BY created_at"
    ).fetchall()
    return [_campaign_row(r) for r in rows]


def start_campaign(
    store: Store,
    *,
    campaign_id: str,
    name: str,
    sweep_path: str | None,
    sweep: Mapping[str, Any],
    points: Sequence[tuple[str, Mapping[str, Any]]],
    retry_failed: bool = False,
) -> None:
    """Create or resume ``campaign_id`` and take it over as its driver (this process).

    New points are added as pending (existing ones keep their state); points left
    ``running`` by a driver that died go back to pending; with ``retry_failed`` so do failed
    points. Raises :class:`GpucastError` if a live driver on this host holds the campaign.
    """
    host = socket.gethostname()
    now = _now()
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT status, driver_pid, driver_host FROM campaigns WHERE id = ?", (campaign_id,)
        ).fetchone()
        if row is not None:
            status, pid, other_host = row
            if (
                status == "running"
                and pid is not None
                and pid != os.getpid()
                and other_host == host
                and _pid_alive(int(pid))
            ):
                raise GpucastError(
                    f"campaign {campaign_id} is being run by process {pid} on {host}",
                    fix="wait for it, or stop it (SIGTERM) and run again",
                )
            conn.execute(
                "UPDATE campaigns SET status = 'running', driver_pid = ?, driver_host = ?, "
                "sweep_json = ?, sweep_path = ?, updated_at = ? WHERE id = ?",
                (os.getpid(), host, _dumps(dict(sweep)), sweep_path, now, campaign_id),
            )
        else:
            conn.execute(
                "INSERT INTO campaigns (id, name, sweep_path, sweep_json, status, driver_pid, "
                "driver_host, created_at, updated_at) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)",
                (campaign_id, name, sweep_path, _dumps(dict(sweep)), os.getpid(), host, now, now),
            )
        conn.executemany(
            "INSERT OR IGNORE INTO campaign_points (campaign_id, point_key, position, point_json, "
            "status) VALUES (?, ?, ?, ?, 'pending')",
            [
                (campaign_id, key, position, _dumps(dict(point)))
                for position, (key, point) in enumerate(points)
            ],
        )
        conn.executemany(
            "UPDATE campaign_points SET position = ? WHERE campaign_id = ? AND point_key = ?",
            [(position, campaign_id, key) for position, (key, _) in enumerate(points)],
        )
        conn.execute(
            "UPDATE campaign_points SET status = 'pending' "
            "WHERE campaign_id = ? AND status = 'running'",
            (campaign_id,),
        )
        if retry_failed:
            conn.execute(
                "UPDATE campaign_points SET status = 'pending' "
                "WHERE campaign_id = ? AND status = 'failed'",
                (campaign_id,),
            )


def pending_points(
    store: Store, campaign_id: str, keys: Iterable[str] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Pending points in sweep order (only those in ``keys`` when given)."""
    rows = store.connection.execute(
        "SELECT point_key, point_json FROM campaign_points "
        "WHERE campaign_id = ? AND status = 'pending' ORDER BY position",
        (campaign_id,),
    ).fetchall()
    wanted = None if keys is None else set(keys)
    return [(k, json.loads(p)) for k, p in rows if wanted is None or k in wanted]


def mark_running(store: Store, campaign_id: str, key: str) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE campaign_points SET status = 'running', attempts = attempts + 1, "
            "started_at = ?, error = NULL WHERE campaign_id = ? AND point_key = ? "
            "AND status = 'pending'",
            (_now(), campaign_id, key),
        )


def complete_point(
    store: Store, campaign_id: str, key: str, kind: str, result: Mapping[str, Any]
) -> int | None:
    """Insert the point's run and mark it done, atomically; ``None`` if it was already done."""
    row = result_row(kind, result)  # validate before the transaction
    with store.transaction() as conn:
        status = conn.execute(
            "SELECT status FROM campaign_points WHERE campaign_id = ? AND point_key = ?",
            (campaign_id, key),
        ).fetchone()
        if status is None:
            raise InvalidInputError(f"campaign {campaign_id} has no point {key}")
        if status[0] == "done":
            return None
        run_id = _insert_run(conn, row)
        conn.execute(
            "UPDATE campaign_points SET status = 'done', run_id = ?, error = NULL, "
            "finished_at = ? WHERE campaign_id = ? AND point_key = ?",
            (run_id, _now(), campaign_id, key),
        )
    return run_id


def fail_point(store: Store, campaign_id: str, key: str, error: str) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE campaign_points SET status = 'failed', error = ?, finished_at = ? "
            "WHERE campaign_id = ? AND point_key = ? AND status != 'done'",
            (error, _now(), campaign_id, key),
        )


def release_point(store: Store, campaign_id: str, key: str) -> None:
    """Back to pending: the point was interrupted, not failed."""
    with store.transaction() as conn:
        conn.execute(
            "UPDATE campaign_points SET status = 'pending' "
            "WHERE campaign_id = ? AND point_key = ? AND status = 'running'",
            (campaign_id, key),
        )


def finished_status(counts: Mapping[str, int], *, interrupted: bool = False) -> str:
    """A stopped campaign's status from its points' counts by status: interrupted (some are
    left to run), incomplete (some failed) or done."""
    if interrupted or counts.get("pending", 0) or counts.get("running", 0):
        return "interrupted"
    return "incomplete" if counts.get("failed", 0) else "done"


def finish_campaign(
    store: Store, campaign_id: str, *, interrupted: bool, keys: Iterable[str] | None = None
) -> str:
    """Release the campaign; its status becomes interrupted, incomplete or done, counting the
    points in ``keys`` (the sweep file's) when given, every stored point otherwise."""
    wanted = None if keys is None else set(keys)
    with store.transaction() as conn:
        counts: dict[str, int] = {}
        for key, point_status in conn.execute(
            "SELECT point_key, status FROM campaign_points WHERE campaign_id = ?", (campaign_id,)
        ).fetchall():
            if wanted is None or key in wanted:
                counts[point_status] = counts.get(point_status, 0) + 1
        status = finished_status(counts, interrupted=interrupted)
        conn.execute(
            "UPDATE campaign_points SET status = 'pending' "
            "WHERE campaign_id = ? AND status = 'running'",
            (campaign_id,),
        )
        conn.execute(
            "UPDATE campaigns SET status = ?, driver_pid = NULL, updated_at = ? WHERE id = ?",
            (status, _now(), campaign_id),
        )
    return status


def point_states(store: Store, campaign_id: str) -> list[PointState]:
    """Every point of the campaign in sweep order."""
    rows = store.connection.execute(
        "SELECT point_key, position, status, error, run_id, attempts, started_at, finished_at "
        "FROM campaign_points WHERE campaign_id = ? ORDER BY position",
        (campaign_id,),
    ).fetchall()
    return [
        PointState(
            key=k,
            position=int(pos),
            status=PointStatus(st),
            error=err,
            run_id=None if rid is None else int(rid),
            attempts=int(att),
            started_at=None if sa is None else datetime.fromisoformat(sa),
            finished_at=None if fa is None else datetime.fromisoformat(fa),
        )
        for k, pos, st, err, rid, att, sa, fa in rows
    ]
