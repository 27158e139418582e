"""Distributed measurements to the cluster-scaling model's inputs (pure: values in, frame out).

:func:`cluster_frame` gives one row per run in the columns :meth:`ClusterModel.fit` reads
(``gpu``, ``model``, ``workers``, ``speed_steps_per_s``, ``n_parameters``, ``n_tensors``,
``ps_shards``) plus ``strategy``, ``single_worker_step_time_s`` where a 1-worker run of the
same gpu/model/strategy exists, and the measured communication facts (``compute_s``,
``exposed_communication_s``, ``bytes_per_step``, ``ps_utilization``) for other uses.
:func:`fit_cluster_model` fits a :class:`ClusterModel` on the asynchronous-PS rows -- the
strategy that model is fitted on -- with the PS bandwidth taken from what the runs measured.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from gpucast.domain.distributed import DistributedMeasurement
from gpucast.domain.errors import InvalidInputError


def _gpu(m: DistributedMeasurement) -> str:
    return m.environment.gpu_name or m.workers[0].device


def cluster_frame(measurements: Iterable[DistributedMeasurement]) -> pd.DataFrame:
    """One row per measurement (see the module docstring); an empty input gives no rows."""
    rows: list[dict[str, Any]] = []
    for m in measurements:
        rows.append(
            {
                "gpu": _gpu(m),
                "model": m.spec.name,
                "strategy": m.config.label,
                "workers": m.config.n_workers,
                "ps_shards": max(m.config.n_ps, 1),
                "batch_size": m.spec.batch_size,
                "speed_steps_per_s": m.worker_steps_per_s,
                "step_time_s": m.mean_step_s,
                "n_parameters": m.n_parameters,
                "n_tensors": m.n_tensors,
                "compute_s": m.compute_s,
                "communication_s": m.communication_s,
                "exposed_communication_s": m.exposed_communication_s,
                "bytes_per_step": m.bytes_per_step,
                "ps_utilization": m.ps_utilization,
                "achieved_gbps": _achieved_gbps(m),
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    ones = frame[(frame["workers"] == 1) & (frame["ps_shards"] == 1)]
    base = ones.groupby(["gpu", "model", "strategy"])["step_time_s"].median().to_dict()
    frame["single_worker_step_time_s"] = [
        base.get((g, m, s))
        for g, m, s in zip(frame["gpu"], frame["model"], frame["strategy"], strict=True)
    ]
    return frame


def _achieved_gbps(m: DistributedMeasurement) -> float | None:
    """Bytes a worker pushed and pulled per second of its communication time (Gbit/s)."""
    if m.communication_s <= 0:
        return None
    return (m.bytes_per_step + m.bytes_received_per_step) * 8 / m.communication_s / 1e9


def fit_cluster_model(
    measurements: Iterable[DistributedMeasurement], *, ps_network_gbps: float | None = None
) -> Any:
    """A :class:`~gpucast.predict.cluster.ClusterModel` fitted on the asynchronous-PS runs.

    ``ps_network_gbps`` (the PS link's nominal rate) defaults to the highest bandwidth a
    worker achieved in these runs, so that ``network_efficiency`` is fitted relative to the
    links the measurements actually used. Needs a 1-worker, 1-shard run per gpu/model.
    """
    from gpucast.predict.cluster import ClusterModel

    frame = cluster_frame(measurements)
    if frame.empty or not (frame["strategy"] == "ps-async").any():
        raise InvalidInputError(
            "no asynchronous parameter-server runs to fit the cluster model on",
            fix="measure with --distributed ps --async at several --nproc values",
        )
    ps = frame[frame["strategy"] == "ps-async"].drop(columns=["strategy"])
    if ps_network_gbps is None:
        achieved = ps["achieved_gbps"].dropna()
        ps_network_gbps = float(achieved.max()) if not achieved.empty else 8.0
    return ClusterModel(ps_network_gbps=ps_network_gbps).fit(ps)
