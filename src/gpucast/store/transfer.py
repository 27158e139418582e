"""Deleting stored runs and importing the runs another store exported (``gpucast runs
delete|import``).

What references a run: its operator trace (``kernel_traces``, deleted with it) and the
campaign point that measured it (``campaign_points.run_id``: the point goes back to pending,
so running the campaign again measures it anew, and a finished campaign becomes interrupted).

An import reads what :meth:`Store.export` wrote (every column of the ``runs`` table, the
spec and the result as JSON text). A row already stored -- same kind, workload, host,
``created_at`` and result -- is skipped, so importing a file twice adds nothing. Operator
traces and campaign links are not exported, so an imported run has neither.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.store.db import RUN_COLUMNS, Store

#: columns that may be empty (SQL NULL)
NULLABLE: frozenset[str] = frozenset(
    ("mode", "device", "median_s", "mean_s", "p5_s", "p95_s", "ci_halfwidth_rel",
     "samples_per_s", "n_samples", "stop_reason", "host", "gpu_name")
)  # fmt: skip
FLOAT_COLUMNS: frozenset[str] = frozenset(
    ("median_s", "mean_s", "p5_s", "p95_s", "ci_halfwidth_rel", "samples_per_s")
)
INT_COLUMNS: frozenset[str] = frozenset(("id", "batch_size", "n_samples"))
JSON_COLUMNS: frozenset[str] = frozenset(("spec_json", "result_json"))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletedRun:
    """One deleted run, and what referenced it."""

    id: int
    kind: str
    workload: str
    #: it had an operator trace (``--kernels``), deleted with it
    kernel_trace: bool = False
    #: (campaign id, point key) of the campaign point that measured it, now pending again
    campaign_point: tuple[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        point = self.campaign_point
        return {
            "id": self.id,
            "kind": self.kind,
            "workload": self.workload,
            "kernel_trace": self.kernel_trace,
            "campaign_point": None if point is None else {"campaign": point[0], "point": point[1]},
        }


def delete_runs(store: Store, ids: Sequence[int]) -> list[DeletedRun]:
    """Delete the runs ``ids`` with their operator traces, and put the campaign points that
    measured them back to pending, in one transaction; any unknown id deletes nothing."""
    wanted = sorted({int(i) for i in ids})
    marks = ", ".join("?" for _ in wanted)
    with store.transaction() as conn:
        found = {
            int(r[0]): (str(r[1]), str(r[2]))
            for r in conn.execute(
                f"SELECT id, kind, workload FROM runs WHERE id IN ({marks})", wanted
            )
        }
        missing = [i for i in wanted if i not in found]
        if missing:
            newest = conn.execute("SELECT MAX(id) FROM runs").fetchone()[0]
            hint = "the store is empty" if newest is None else f"ids go up to {newest}"
            raise InvalidSpecError(
                "ids",
                f"no run with id {', '.join(map(str, missing))} in {store.path} ({hint}); "
                "nothing was deleted",
                fix="see `gpucast runs list` for the ids",
            )
        traces = {
            int(r[0])
            for r in conn.execute(
                f"SELECT run_id FROM kernel_traces WHERE run_id IN ({marks})", wanted
            )
        }
        points = {
            int(r[0]): (str(r[1]), str(r[2]))
            for r in conn.execute(
                "SELECT run_id, campaign_id, point_key FROM campaign_points "
                f"WHERE run_id IN ({marks})",
                wanted,
            )
        }
        conn.execute(f"DELETE FROM kernel_traces WHERE run_id IN ({marks})", wanted)
        conn.execute(
            "UPDATE campaign_points SET status = 'pending', run_id = NULL, error = NULL, "
            f"finished_at = NULL WHERE run_id IN ({marks})",
            wanted,
        )
        for campaign in sorted({c for c, _ in points.values()}):
            conn.execute(
                "UPDATE campaigns SET status = 'interrupted', updated_at = ? "
                "WHERE id = ? AND status IN ('done', 'incomplete')",
                (datetime.now(UTC).isoformat(), campaign),
            )
        conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", wanted)
    return [
        DeletedRun(
            id=i,
            kind=found[i][0],
            workload=found[i][1],
            kernel_trace=i in traces,
            campaign_point=points.get(i),
        )
        for i in wanted
    ]


def _same_result(stored: str, given: str) -> bool:
    try:
        return bool(json.loads(stored) == json.loads(given))
    except ValueError:
        return stored == given


def _instant(text: str) -> datetime | str:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return text


def import_rows(store: Store, rows: Sequence[Mapping[str, Any]]) -> list[tuple[int, int | None]]:
    """Insert checked ``runs`` rows (:data:`RUN_COLUMNS`, from :func:`gpucast.app.runs_edit`'s
    reader) in one transaction: ``(old id, new id)`` per row, the new id ``None`` where the
    same run is already stored (or earlier in ``rows``)."""
    columns = [c for c in RUN_COLUMNS if c != "id"]
    insert = f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    mapping: list[tuple[int, int | None]] = []
    with store.transaction() as conn:
        for row in rows:
            present = conn.execute(
                "SELECT created_at, result_json FROM runs WHERE kind = ? AND workload = ? "
                "AND host IS ?",
                (row["kind"], row["workload"], row["host"]),
            ).fetchall()
            when = _instant(row["created_at"])
            if any(_instant(c) == when and _same_result(r, row["result_json"]) for c, r in present):
                mapping.append((int(row["id"]), None))
                continue
            cursor = conn.execute(insert, [row[c] for c in columns])
            assert cursor.lastrowid is not None
            mapping.append((int(row["id"]), int(cursor.lastrowid)))
    return mapping


def cell_value(column: str, value: Any) -> Any:
    """An exported cell as the store's column holds it (empty/NaN: ``None``); a
    :class:`ValueError` says what is wrong with it."""
    import pandas as pd

    if (isinstance(value, str) and value == "") or (not isinstance(value, str) and pd.isna(value)):
        if column in NULLABLE:
            return None
        raise ValueError("is empty; this column always holds a value")
    if column in INT_COLUMNS | FLOAT_COLUMNS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a number") from None
    if column in INT_COLUMNS:
        if not number.is_integer():
            raise ValueError(f"{value!r} is not a whole number")
        if column != "n_samples" and number < 1:
            raise ValueError(f"{value!r} must be >= 1")
        return int(number)
    if column in FLOAT_COLUMNS:
        return number if math.isfinite(number) else None
    text = str(value)
    if column in JSON_COLUMNS:
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"is not JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise ValueError("is JSON but not an object")
    if column == "created_at":
        try:
            datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an ISO 8601 time") from None
    return text
