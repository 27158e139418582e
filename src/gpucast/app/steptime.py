"""``gpucast.fit_steptime``: fit the roofline's efficiencies on every published source.

Builds the table of published step times (:func:`gpucast.inputs.steptime.step_time_observations`:
CM-DARE, MLPerf Training v4.0, Zeus, Pollux -- whichever ``--data-dir`` holds), fits
:class:`gpucast.predict.steptime.StepTimeModel`, cross-validates it per regime (a GPU left
out, a workload left out, a (GPU, workload) pair left out, another batch on the same GPU) for
the interval table, and writes the model as JSON. The shipped model
(``gpucast/catalog/data/steptime.json``) is this verb's output on ``../shared/data``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app._workers import usable_cpus, worker_failures, worker_pool
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_jobs, jobs_option
from gpucast.domain.options import documented, option

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.predict.steptime import StepTimeModel

#: The published sources a step-time fit can read.
SOURCES: tuple[str, ...] = ("cmdare", "mlperf", "zeus", "pollux")


def _sources(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(s).strip().lower() for s in items if str(s).strip())


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class FitStepTimeRequest:
    """Where the published data is and where the fitted model goes (``gpucast fit steptime``)."""

    VERB: ClassVar[str] = "fit steptime"

    out: Path = option(help="Where to write the fitted model (JSON).", example="steptime.json")
    data_dir: Path | None = option(
        None,
        help="Published data folder (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )
    sources: tuple[str, ...] = option(
        SOURCES,
        help=f"Sources to fit on, comma-separated: {', '.join(SOURCES)}.",
        example="cmdare,zeus",
        parse=_sources,
    )
    cross_validate: bool = option(
        True,
        negative="no-cross-validate",
        help="Cross-validate per regime for the interval table (a few hundred refits), and "
        "leave each source out for the band of a new code base; --no-cross-validate: fit "
        "only, the model then has no validated intervals.",
    )
    jobs: int | None = jobs_option()

    def __post_init__(self) -> None:
        check_jobs(self.jobs)
        bad = [s for s in self.sources if s not in SOURCES]
        if bad or not self.sources:
            raise InvalidSpecError(
                "sources",
                f"must name one or more of {', '.join(SOURCES)}",
                got=bad[0] if bad else "",
                fix="e.g. --sources cmdare,mlperf",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitStepTimeResult:
    """The fitted model, the data it rests on, and its cross-validated errors."""

    model_file: Path
    rows_by_source: dict[str, int]
    efficiencies: dict[str, Any]
    gpu_factors: dict[str, float]
    #: per regime: q_low / q_high (log), n, MAPE (%)
    intervals: dict[str, Any]
    #: cross-validated MAPE (%) and 80%-interval coverage per (regime, source, gpu)
    errors: list[dict[str, Any]]
    #: the TCP collective constants fitted on Pollux and their leave-one-placement-out error
    collective: dict[str, Any]
    #: the fp8 efficiency fitted on MLPerf's whole fp8 runs (empty: borrowed)
    fp8: dict[str, Any]
    #: the host's time per layer fitted on MLPerf's runs without CUDA graphs (empty: none)
    host: dict[str, Any]
    model: StepTimeModel = field(compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_file": str(self.model_file),
            "rows_by_source": dict(self.rows_by_source),
            "efficiencies": dict(self.efficiencies),
            "gpu_factors": dict(self.gpu_factors),
            "intervals": dict(self.intervals),
            "errors": [dict(e) for e in self.errors],
            "collective": dict(self.collective),
            "fp8": dict(self.fp8),
            "host": dict(self.host),
        }

    def to_frame(self) -> pd.DataFrame:
        """The cross-validated error table, one row per (regime, source, gpu)."""
        import pandas as pd

        return pd.DataFrame(self.errors)


def fit_steptime(request: FitStepTimeRequest | None = None, /, **options: Any) -> FitStepTimeResult:
    """Fit the step-time model on the published data and save it (see the module docstring)."""
    from gpucast.catalog import load_catalog
    from gpucast.inputs.data import published_data_dir
    from gpucast.inputs.steptime import step_time_observations
    from gpucast.predict.steptime import (
        StepTimeModel,
        cross_validated_residuals,
        error_table,
        interval_table,
        source_held_out,
    )
    from gpucast.store.models import save_model

    request = resolve(FitStepTimeRequest, request, options)
    data_dir = published_data_dir(request.data_dir)
    if data_dir is None:
        raise InvalidSpecError(
            "data-dir",
            "is required (the published measurements to fit on)",
            fix="pass --data-dir ../shared/data or set $GPUCAST_SHARED_DATA",
        )
    catalog = load_catalog()
    observations = step_time_observations(data_dir, catalog, sources=request.sources)
    counts = {str(k): int(v) for k, v in observations["source"].value_counts().items()}
    described = ", ".join(f"{k} ({v})" for k, v in sorted(counts.items()))
    model = StepTimeModel().fit(observations, fitted_on=described)
    errors: list[dict[str, Any]] = []
    if request.cross_validate:
        jobs = request.jobs or usable_cpus()
        with worker_failures():
            # the refits of each left-out source and the per-regime ones side by side
            pool = worker_pool(jobs)
            pending = None if pool is None else pool.submit(cross_validated_residuals, observations)
            # a user's code base is none of the sources: what leaving one out earned widens
            # every uncalibrated band (predict.intervals.NEW_SOURCE)
            sources = source_held_out(observations, executor=pool) if len(counts) > 1 else None
            residuals = (
                cross_validated_residuals(observations) if pending is None else pending.result()
            )
        model.with_intervals(interval_table(residuals, sources))
        errors = [
            {str(k): v for k, v in e.items()}
            for e in error_table(residuals, sources).to_dict("records")
        ]
    collective = _fit_tcp_collective(data_dir, catalog, model, request)
    fp8 = _fit_fp8(data_dir, model, request)
    host = _fit_host(data_dir, model, request)
    save_model(model, request.out)
    assert model.eta_compute_ is not None
    return FitStepTimeResult(
        model_file=Path(request.out),
        rows_by_source=counts,
        efficiencies={
            "eta_compute": dict(model.eta_compute_),
            "eta_memory": model.eta_memory_,
            "overhead_s": dict(model.overhead_s_),
            "traffic": dict(model.traffic_),
            "borrowed": dict(model.borrowed_),
        },
        gpu_factors=dict(model.gpu_factor_),
        intervals=model.intervals_.to_dict(),
        errors=errors,
        collective=collective,
        fp8=fp8,
        host=host,
        model=model,
    )


def _mlperf_llm_runs(data_dir: Path, request: FitStepTimeRequest) -> bool:
    """Whether the MLPerf source is fitted on and its runs table is there (the fp8 and host
    fits price its LLM systems)."""
    from gpucast.inputs.mlperf_llm import RUNS_FILE

    return "mlperf" in request.sources and (data_dir / RUNS_FILE).is_file()


def _fit_fp8(data_dir: Path, model: StepTimeModel, request: FitStepTimeRequest) -> dict[str, Any]:
    """The fp8 efficiency fitted on MLPerf's whole fp8 runs through the 3D-parallel model
    (kept in the model; :func:`gpucast.inputs.mlperf_llm.fit_fp8_ratio`), where the MLPerf
    source is fitted on and its table is there."""
    from gpucast.inputs.mlperf_llm import fit_fp8_ratio

    if not _mlperf_llm_runs(data_dir, request):
        return {}
    fit = fit_fp8_ratio(data_dir, model)
    if fit is None:
        return {}
    model.with_fp8(fit.ratio, fit.source)
    assert model.eta_compute_ is not None
    return {
        "ratio": fit.ratio,
        "eta_compute": model.eta_compute_["fp8"],
        "systems": list(fit.systems),
        "mape_pct": fit.mape_pct,
        "source": fit.source,
    }


def _fit_host(data_dir: Path, model: StepTimeModel, request: FitStepTimeRequest) -> dict[str, Any]:
    """The host's time per layer and micro-batch and a run's one-off warm-up, fitted on
    MLPerf's runs without CUDA graphs (kept in the model;
    :func:`gpucast.inputs.mlperf_llm.fit_host_layer_s`), after the fp8 efficiency those runs
    also use."""
    from gpucast.inputs.mlperf_llm import fit_host_layer_s

    if not _mlperf_llm_runs(data_dir, request):
        return {}
    fit = fit_host_layer_s(data_dir, model)
    if fit is None:
        return {}
    model.with_host(fit.seconds, fit.source, warmup_s=fit.warmup_s)
    return {
        "seconds": fit.seconds,
        "warmup_s": fit.warmup_s,
        "systems": list(fit.systems),
        "level": fit.level,
        "spread_before": fit.spread_before,
        "spread_after": fit.spread_after,
        "source": fit.source,
    }


def _fit_tcp_collective(
    data_dir: Path, catalog: Any, model: StepTimeModel, request: FitStepTimeRequest
) -> dict[str, Any]:
    """The TCP collective constants fitted on Pollux's multi-GPU placements (kept in the
    model), and their leave-one-placement-out error."""
    import numpy as np

    from gpucast.inputs.steptime import pollux_collective_rows
    from gpucast.predict.collective import CollectiveModel

    if "pollux" not in request.sources:
        return {}
    rows = pollux_collective_rows(data_dir, catalog, model)
    if not len(rows):
        return {}
    out: dict[str, Any] = {"rows": len(rows)}
    validated = ""
    if request.cross_validate:
        errors = []
        for placement in sorted(set(rows["placement"])):
            held = rows["placement"] == placement
            part = CollectiveModel().fit(rows[~held]).predict(rows[held])
            errors.append(np.abs(part / rows.loc[held, "step_time_s"].to_numpy() - 1.0))
        mape = float(100.0 * np.mean(np.concatenate(errors)))
        out["leave_one_placement_out_mape_pct"] = mape
        validated = f", leave one placement out {mape:.1f}%"
    fitted = CollectiveModel().fit(
        rows, fitted_on=f"Pollux traces: {len(rows)} multi-GPU steps{validated}"
    )
    model.with_collective("tcp", fitted.constants)
    out["tcp"] = fitted.constants.to_dict()
    return out
