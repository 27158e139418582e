"""``gpucast.fit_variability``: your own GPUs' speed spread -> a named variability profile.

Two inputs, the ways people have it:

* **stored runs** (``--runs 3,4,5``): measurements of one workload (same batch, precision and
  mode) on different GPUs of the same type -- ``gpucast measure train ... --device cuda:N`` on
  each GPU, or on each node -- one factor per run: its median step over the runs' median;
* **a CSV** (``--factors FILE``) with a ``step_time_s`` column (one row per GPU, any other
  columns ignored) or a ``factor`` column (already relative).

The fitted :class:`~gpucast.predict.variability.SpeedVariability` is stored under ``name``;
``plan train`` and ``simulate train`` take it with ``--gpu-variability NAME``. The result shows
what it means: the expected slowdown of synchronous jobs of 8 to 1,024 GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.options import documented, option, split_list
from gpucast.domain.units import count_of

#: Job sizes the result reports the expected synchronous slowdown for.
REPORT_GPUS: tuple[int, ...] = (8, 64, 256, 1024)


def _ids(value: Any) -> tuple[int, ...]:
    """Run ids as typed: repeated flags and/or comma-separated text, each id once."""
    out: list[int] = []
    for item in split_list(value):
        try:
            run_id = int(str(item).strip())
        except ValueError:
            raise InvalidSpecError(
                "runs", "must be run ids", got=item, fix="e.g. --runs 3,4,5"
            ) from None
        if run_id in out:
            raise InvalidSpecError(
                "runs",
                f"run {run_id} is given twice (one run per GPU)",
                fix="give each run id once, e.g. --runs 3,4,5",
            )
        out.append(run_id)
    return tuple(out)


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class FitVariabilityRequest:
    """Per-GPU measurements to fit a named variability profile on (``gpucast fit variability``)."""

    VERB: ClassVar[str] = "fit variability"

    name: str = option(help="Name to store the profile under (--gpu-variability NAME).",
                       example="lab-a100")  # fmt: skip
    runs: tuple[int, ...] = option(
        (),
        help="Stored runs of one workload, one per GPU (gpucast runs list).",
        example="3,4,5",
        parse=_ids,
    )
    factors: Path | None = option(
        None,
        help="CSV with a step_time_s (or factor) column, one row per GPU.",
        example="fleet.csv",
    )
    save: bool = option(
        True, negative="no-save", help="Store the profile (--no-save: fit and show only)."
    )

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise InvalidSpecError("name", "must not be empty", fix="e.g. --name lab-a100")
        if bool(self.runs) == (self.factors is not None):
            raise InvalidSpecError(
                "runs/factors",
                "give stored --runs or a --factors CSV (one of them)",
                fix="e.g. --runs 3,4,5",
            )
        if self.runs and len(self.runs) < 3:
            raise InvalidSpecError(
                "runs", "need at least 3 GPUs' runs", got=len(self.runs), fix="e.g. --runs 3,4,5"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitVariabilityResult:
    """The fitted profile, the GPUs it rests on and what it does to synchronous jobs."""

    name: str
    gpus: int
    sigma_log: float
    outlier_share: float
    outlier_max_factor: float
    factors: tuple[float, ...]
    #: GPUs in the job -> expected synchronous slowdown (the slowest GPU's factor)
    slowdown: dict[int, float]
    source: str
    saved_in: str | None
    warnings: tuple[str, ...] = ()
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gpus": self.gpus,
            "sigma_log": self.sigma_log,
            "outlier_share": self.outlier_share,
            "outlier_max_factor": self.outlier_max_factor,
            "factors": list(self.factors),
            "slowdown": {str(k): v for k, v in self.slowdown.items()},
            "source": self.source,
            "saved_in": self.saved_in,
            "warnings": list(self.warnings),
        }


def fit_variability(
    request: FitVariabilityRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> FitVariabilityResult:
    """Fit a GPU-variability profile on per-GPU measurements and store it under a name."""
    import numpy as np

    from gpucast.catalog.variability import variability_profiles
    from gpucast.domain.variability import NO_VARIABILITY, VARIABILITY_KIND
    from gpucast.predict.variability import SpeedVariability
    from gpucast.store.db import Store, default_db_path, new_store

    request = resolve(FitVariabilityRequest, request, options)
    name = request.name.strip()
    built_in = [NO_VARIABILITY, *sorted(variability_profiles())]
    if name in built_in:
        # a stored fleet under a built-in name would never be used: the built-in wins
        raise InvalidSpecError(
            "name",
            f"{name!r} is reserved for a built-in profile ({', '.join(built_in)})",
            fix="choose another --name, e.g. --name lab-a100",
        )
    path = Path(db) if db is not None else default_db_path()
    warnings = []
    if request.runs:
        times, what, shared = _from_runs(request.runs, path)
        if shared:
            warnings.append(shared)
    else:
        assert request.factors is not None
        times, what = _from_csv(request.factors)
    factors = np.asarray(times, dtype=np.float64) / float(np.median(times))
    fitted = SpeedVariability.fit(factors, source=f"{len(factors)} GPUs: {what}")
    if len(factors) < 16:
        warnings.append(
            f"{len(factors)} GPUs are few to see outliers: the profile's outlier share rests "
            "on them alone (measure more GPUs, or compare with --gpu-variability typical)"
        )
    beyond = [n for n in REPORT_GPUS if n > len(factors)]
    if beyond:
        # QA 40 E #11: a 64-GPU fleet's 1,024-GPU slowdown was printed as if measured
        warnings.append(
            f"jobs of {', '.join(f'{n:,}' for n in beyond)} GPUs are larger than the "
            f"{len(factors)} measured: their slowdown rests on outliers as rare as 1 in "
            f"{len(factors)} and misses rarer, slower ones (benchmarks/variability_accuracy.py: "
            "a 512-GPU sample reads 256-1,024-GPU jobs 6-14% low); measure more GPUs"
        )
    saved = created = None
    if request.save:
        with Store(path).open() as store:
            store.save_named_model(
                VARIABILITY_KIND,
                name,
                dict(fitted.to_dict()),
                {"source": fitted.source, "gpus": len(factors)},
            )
        saved, created = str(path), new_store(store)
    slow = fitted.expected_max(list(REPORT_GPUS))
    return FitVariabilityResult(
        name=name,
        gpus=len(factors),
        sigma_log=fitted.sigma_log,
        outlier_share=fitted.outlier_share,
        outlier_max_factor=fitted.outlier_max_factor,
        factors=tuple(float(f) for f in factors),
        slowdown={n: float(s) for n, s in zip(REPORT_GPUS, slow, strict=True)},
        source=fitted.source,
        saved_in=saved,
        warnings=tuple(warnings),
        new_store=created,
    )


def _from_runs(ids: tuple[int, ...], db: Path) -> tuple[list[float], str, str | None]:
    """Median step times of stored single-process runs of one workload configuration, what
    they are, and a warning when some ran on one device (their spread is then run-to-run
    noise, not one GPU against another)."""
    from gpucast.domain.measurement import Measurement
    from gpucast.store.db import Store, no_store_yet

    if no_store_yet(db):
        raise InvalidSpecError(
            "runs", f"no store at {db}", fix="measure each GPU first (gpucast measure train)"
        )
    with Store(db).open(create=False) as store:
        measured = [store.get_measurement(i) for i in ids]
    first = measured[0]
    for run_id, m in zip(ids, measured, strict=True):
        if not isinstance(m, Measurement):
            raise InvalidSpecError("runs", f"run {run_id} is not a single-GPU measurement")
        same = (m.spec.label, m.spec.batch_size, m.spec.precision, m.mode) == (
            first.spec.label,
            first.spec.batch_size,
            first.spec.precision,
            first.mode,
        )
        if not same:
            raise InvalidSpecError(
                "runs",
                f"run {run_id} measured {m.mode} {m.spec.label} at batch {m.spec.batch_size} "
                f"{m.spec.precision}, run {ids[0]} {first.mode} {first.spec.label} at batch "
                f"{first.spec.batch_size} {first.spec.precision}",
                fix="pick runs of one workload, batch, precision and mode",
            )
    devices = sorted({f"{m.environment.host}/{m.device}" for m in measured})
    what = (
        f"stored runs {','.join(str(i) for i in ids)} ({first.mode} {first.spec.label}, batch "
        f"{first.spec.batch_size}, {first.spec.precision}; {len(devices)} distinct devices)"
    )
    shared = None
    if len(devices) < len(ids):
        shared = (
            f"{len(ids)} runs on {count_of(len(devices), 'device')} ({', '.join(devices)}): "
            "their spread is run-to-run noise on one device, not one GPU against another; "
            "measure each GPU once (gpucast measure train --device cuda:N on each)"
        )
    return [m.median_s for m in measured], what, shared


def _from_csv(path: Path) -> tuple[list[float], str]:
    import numpy as np
    import pandas as pd

    from gpucast.predict.variability import MAX_OUTLIER_FACTOR
    from gpucast.store.files import read_csv_input

    # blank lines kept as empty rows, then dropped: a row's index + 2 is its line in the file;
    # only an empty cell is missing ('nan' is a bad cell to name as written, QA 35 E #21)
    frame = read_csv_input(
        path,
        "factors",
        fix="check the --factors path",
        skip_blank_lines=False,
        keep_default_na=False,
        na_values=[""],
    ).dropna(how="all")
    column = next((c for c in ("step_time_s", "factor") if c in frame.columns), None)
    if column is None:
        raise InvalidSpecError(
            "factors",
            f"needs a step_time_s or factor column (has {', '.join(map(str, frame.columns))})",
            got=str(path),
            fix="one row per GPU with its step_time_s",
        )
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values <= 0))
    if bad.size:
        raw = frame[column].iloc[int(bad[0])]
        raise DataFormatError(
            str(path),
            f"must be a number > 0, got {'an empty cell' if pd.isna(raw) else repr(str(raw))}",
            line=int(frame.index[int(bad[0])]) + 2,
            column=column,
            fix="one row per GPU with its step time in seconds (or its factor)",
        )
    if values.size < 3:
        raise InvalidSpecError(
            "factors",
            "needs at least 3 GPUs' rows",
            got=int(values.size),
            fix="one row per GPU, e.g. gpu,step_time_s then 0,0.25 / 1,0.26 / 2,0.25",
        )
    ratio = values / np.median(values)
    far = np.flatnonzero((ratio > MAX_OUTLIER_FACTOR) | (ratio < 1.0 / MAX_OUTLIER_FACTOR))
    if far.size:  # the model caps a GPU at 10x the median: a cell past it is a typo or a unit
        i = int(far[0])
        raise DataFormatError(
            str(path),
            f"is {ratio[i]:.3g}x the median GPU's {column} ({np.median(values):.4g}); a GPU "
            f"over {MAX_OUTLIER_FACTOR:g}x slower or faster than the median is not a speed spread",
            line=int(frame.index[i]) + 2,
            column=column,
            fix="check the cell's unit (seconds per step) or drop the row of a broken GPU",
        )
    return [float(v) for v in values], f"{path} ({column})"
