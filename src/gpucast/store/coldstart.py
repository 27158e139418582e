"""Measured cold starts in the store: ``runs`` rows of kind ``coldstart`` (no new table: the
row's ``result_json`` is :meth:`ColdStartMeasurement.to_dict`, ``median_s`` its total)."""

from __future__ import annotations

import json
from typing import Any

from gpucast._version import __version__
from gpucast.domain.errors import InvalidInputError
from gpucast.domain.serverless import ColdStartMeasurement
from gpucast.store.db import Store

COLDSTART_KIND = "coldstart"


def save_coldstart(store: Store, measurement: ColdStartMeasurement) -> int:
    """Store one measured cold start (one transaction); returns its run id."""
    m = measurement
    row: dict[str, Any] = {
        "kind": COLDSTART_KIND,
        "workload": m.workload,
        "batch_size": m.batch_size,
        "precision": "fp32",
        "mode": "infer",
        "device": m.device,
        "created_at": m.created_at,
        "spec_json": json.dumps({"workload": m.workload, "options": m.options}, default=str),
        "result_json": json.dumps(m.to_dict(), default=str),
        "median_s": m.total_s,
        "n_samples": 1,
        "host": m.host,
        "gpu_name": m.gpu_name,
        "gpucast_version": __version__,
    }
    return store.insert_run(row)


def load_coldstarts(store: Store, workload: str | None = None) -> list[ColdStartMeasurement]:
    """Stored cold starts, newest first (of ``workload`` when given)."""
    runs = store.list_runs(kind=COLDSTART_KIND, workload=workload, limit=None)
    return [ColdStartMeasurement.from_dict(store.get_run(r.id).result) for r in runs]


def load_coldstart_run(store: Store, run_id: int) -> ColdStartMeasurement:
    """The measured cold start stored as run ``run_id``; a run of another kind is one error
    naming its kind."""
    run = store.get_run(run_id)
    if run.kind != COLDSTART_KIND:
        raise InvalidInputError(
            f"run {run_id} is a {run.kind} run, not a coldstart run",
            fix="pick a run listed by `gpucast runs list --kind coldstart`, or measure one: "
            "gpucast measure coldstart WORKLOAD",
        )
    return ColdStartMeasurement.from_dict(run.result)


def coldstart_runs(store: Store, workload: str) -> list[tuple[int, ColdStartMeasurement]]:
    """Every stored cold start of ``workload`` with its run id, newest first."""
    runs = store.list_runs(kind=COLDSTART_KIND, workload=workload, limit=None)
    return [(r.id, ColdStartMeasurement.from_dict(store.get_run(r.id).result)) for r in runs]
