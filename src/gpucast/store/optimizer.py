"""Measured CPU optimizer steps in the store: ``runs`` rows of kind ``optimizer`` (no new
table, as cold starts: the row's ``result_json`` is :meth:`OptimizerStepMeasurement.to_dict`,
``median_s`` its median step, ``batch_size`` its parameter count)."""

from __future__ import annotations

import json
import statistics
from typing import Any

from gpucast._version import __version__
from gpucast.domain.offload import OptimizerStepMeasurement
from gpucast.store.db import Store

OPTIMIZER_KIND = "optimizer"


def save_optimizer_step(store: Store, measurement: OptimizerStepMeasurement) -> int:
    """Store one measured optimizer step size (one transaction); returns its run id."""
    m = measurement
    times = m.step_times_s
    row: dict[str, Any] = {
        "kind": OPTIMIZER_KIND,
        "workload": f"{m.optimizer}-{m.implementation}",
        "batch_size": m.n_params,
        "precision": "fp32",
        "mode": "optimizer",
        "device": f"cpu x{m.threads}",
        "created_at": m.created_at,
        "spec_json": json.dumps(
            {"n_params": m.n_params, "n_tensors": m.n_tensors, "implementation": m.implementation}
        ),
        "result_json": json.dumps(m.to_dict()),
        "median_s": m.median_s,
        "mean_s": statistics.fmean(times),
        "n_samples": len(times),
        "host": m.host,
        "gpu_name": None,
        "gpucast_version": __version__,
    }
    return store.insert_run(row)


def load_optimizer_steps(store: Store) -> list[OptimizerStepMeasurement]:
    """Stored optimizer-step measurements, newest first."""
    runs = store.list_runs(kind=OPTIMIZER_KIND, limit=None)
    return [OptimizerStepMeasurement.from_dict(store.get_run(r.id).result) for r in runs]
