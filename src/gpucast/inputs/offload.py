"""The CPU Adam speed the offload model uses, with its source.

Stored optimizer-step measurements (``gpucast measure optimizer``; three sizes or more) fit
:class:`gpucast.predict.offload.CpuAdamModel` on each size's fastest step; without them the
shipped row of ``catalog/data/cpu_adam.csv`` (measured on the development machine by
``benchmarks/offload_accuracy.py``) is used, and the source says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpucast.domain.offload import OptimizerStepMeasurement
from gpucast.domain.provenance import Sourced
from gpucast.predict.offload import CpuAdamModel

if TYPE_CHECKING:
    from gpucast.store.db import Store


def fit_cpu_adam(measurements: Sequence[OptimizerStepMeasurement]) -> CpuAdamModel:
    """:class:`CpuAdamModel` fitted on measured steps (each size's fastest step: the least
    disturbed by other processes on a shared machine; an offload node's CPU is the job's)."""
    return CpuAdamModel().fit(
        [m.n_params for m in measurements],
        [m.n_tensors for m in measurements],
        [m.fastest_s for m in measurements],
    )


def distinct_sizes(measurements: Sequence[OptimizerStepMeasurement]) -> int:
    return len({(m.n_params, m.n_tensors) for m in measurements})


def cpu_adam_from_store(store: Store, *, max_params: float | None = None) -> CpuAdamModel | None:
    """The model fitted on every stored optimizer measurement (of at most ``max_params``
    parameters); None with fewer than 3 distinct sizes stored."""
    from gpucast.store.optimizer import load_optimizer_steps

    rows = [
        m for m in load_optimizer_steps(store) if max_params is None or m.n_params <= max_params
    ]
    return fit_cpu_adam(rows) if distinct_sizes(rows) >= 3 else None


def cpu_adam(db: Path) -> Sourced[CpuAdamModel]:
    """The stored measurements' model, else the catalog's default row."""
    if Path(db).exists():
        from gpucast.store.db import Store

        with Store(db).open(create=False) as store:
            fitted = cpu_adam_from_store(store)
        if fitted is not None:
            return Sourced(
                fitted,
                f"CPU AdamW measured on this host ({fitted.n_rows_} sizes up to "
                f"{fitted.max_params_:,.0f} parameters, gpucast measure optimizer): "
                f"{fitted.bandwidth_gbps:.1f} GB/s streamed",
            )
    from gpucast.catalog.offload import load_cpu_adam

    row = load_cpu_adam()["default"]
    model = CpuAdamModel.from_coefficients(
        fixed_s=row.fixed_s, per_tensor_s=row.per_tensor_s, bandwidth_gbps=row.bandwidth_gbps
    )
    return Sourced(
        model,
        f"catalog/data/cpu_adam.csv ({row.source_url}, {row.as_of.isoformat()}): "
        f"{row.bandwidth_gbps:g} GB/s, {row.per_tensor_s * 1e6:g} us per tensor -- one core of "
        "the development machine; measure the host with gpucast measure optimizer",
    )
