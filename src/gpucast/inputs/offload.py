"""The CPU Adam speed the offload model uses, with its source.

Stored optimizer-step measurements (``gpucast measure optimizer``; three sizes or more of the
newest run's implementation, thread count and timer) fit
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


#: How far past its largest measured run (x) a fitted CPU Adam step is used without a warning
EXTRAPOLATION_LIMIT = 10.0


def extrapolation_warning(model: CpuAdamModel, n_params: float) -> str | None:
    """One line where the host's Adam step of ``n_params`` parameters extrapolates more than
    :data:`EXTRAPOLATION_LIMIT` times past the largest run ``model`` was fitted on, naming the
    runs' range and how to measure a larger one; ``None`` otherwise (or for the catalog's
    constants, which name their own range)."""
    times = model.extrapolation(n_params)
    if times <= EXTRAPOLATION_LIMIT:
        return None
    return (
        f"the CPU Adam step of {n_params:,.0f} parameters is {times:,.0f}x the largest run its "
        f"fit measured ({model.min_params_:,.0f}-{model.max_params_:,.0f} parameters): "
        f"measure larger ones on the host, e.g. gpucast measure optimizer --sizes "
        f"{_round_size(n_params / 10)},{_round_size(n_params / 3)},{_round_size(n_params)} "
        "(the host needs 16 B a parameter free)"
    )


def _round_size(n: float) -> str:
    """``n`` to 2 significant digits, as a --sizes value (``160000000``)."""
    return f"{float(f'{n:.2g}'):.0f}"


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


def _setting(m: OptimizerStepMeasurement) -> tuple[str, int, str]:
    return (m.implementation, m.threads, m.timer)


def newest_setting(
    store: Store, *, max_params: float | None = None
) -> list[OptimizerStepMeasurement]:
    """The stored optimizer measurements (of at most ``max_params`` parameters) of the newest
    one's implementation, thread count and timer: runs of another setting time another step
    (a 2-thread wall-clock step is not a 1-thread CPU-time one) and are not pooled with it."""
    from gpucast.store.optimizer import load_optimizer_steps

    rows = [
        m for m in load_optimizer_steps(store) if max_params is None or m.n_params <= max_params
    ]
    return [m for m in rows if _setting(m) == _setting(rows[0])] if rows else []


def cpu_adam(db: Path) -> Sourced[CpuAdamModel]:
    """The stored measurements' model, else the catalog's default row."""
    if Path(db).exists():
        from gpucast.store.db import Store

        with Store(db).open(create=False) as store:
            rows = newest_setting(store)
        if distinct_sizes(rows) >= 3:
            fitted = fit_cpu_adam(rows)
            impl, threads, timer = _setting(rows[0])
            clock = "CPU time" if timer == "cpu" else "wall clock"
            return Sourced(
                fitted,
                f"CPU AdamW measured on this host ({distinct_sizes(rows)} sizes, "
                f"{fitted.min_params_:,.0f}-{fitted.max_params_:,.0f} parameters; {impl}, "
                f"{threads} thread"
                f"{'s' if threads > 1 else ''}, {clock}; gpucast measure optimizer): "
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
