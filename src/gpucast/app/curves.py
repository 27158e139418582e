"""``gpucast.measure_infer_curve``: inference latency over batch sizes, and co-location.

Times a workload's inference step at each batch size (and precision) with
:func:`gpucast.measure.curves.measure_curve`, fits ``fixed + per-sample x batch`` to the
medians, and -- with ``colocate`` -- measures the slowdown of running several models on one
device at once (:func:`gpucast.measure.curves.measure_colocated`). Every point is stored
unless ``save=False``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app.measure import (
    check_min_samples,
    check_threads_and_timer,
    threads_option,
    timer_option,
)
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import as_flags, documented, lower_list, option
from gpucast.domain.workload import (
    PRECISIONS,
    WorkloadOptions,
    workload_options_field,
)
from gpucast.inputs.workload import measured_name

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.domain.measurement import Measurement
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.measure.curves import ColocationResult, CurveMeasurement


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class InferCurveRequest:
    """What to measure (``gpucast measure infer-curve``)."""

    VERB: ClassVar[str] = "measure infer-curve"

    workload: str = option(help="Workload, e.g. resnet50 or mlp.", argument=True, example="mlp")
    workload_options: WorkloadOptions = workload_options_field()
    batch_sizes: tuple[int, ...] = option((1, 2, 4, 8), help="e.g. 1,2,4,8.", example="1,2,4,8")
    precisions: tuple[str, ...] = option(
        ("fp32",),
        parse=lower_list,
        flag="precision",
        help="One or more: fp32,fp16.",
        example="fp32,fp16",
    )
    device: str = option(
        "auto", help="cpu, cuda, cuda:N, or auto (a GPU if any).", example="cuda:0"
    )
    colocate: tuple[str, ...] = option(
        (), help="Also run WORKLOAD with this one at once.", example="mlp"
    )
    colocate_batch: int | None = option(
        None, help="Batch size of the co-location run (default: largest).", example="8"
    )
    max_time_s: float = option(10.0, help="Seconds per point.", example="10")
    target_ci: float = option(0.02, help="Relative 95% CI target.", example="0.02")
    min_samples: int = option(10, help="Least steps per point.", example="10")
    timer: str = timer_option("steps")
    threads: int | None = threads_option()
    save: bool = option(
        True, negative="no-save", help="Write the results to the store (--no-save: do not)."
    )
    csv: Path | None = option(
        None,
        help="Also write the measured medians as a latency table (batch_size,latency_s) for "
        "simulate serve --latency-table FILE / plan serve --latency-table MODEL@GPU=FILE.",
        example="lat.csv",
    )

    def __post_init__(self) -> None:
        if not self.workload:
            raise InvalidSpecError("workload", "must not be empty", fix="e.g. mlp")
        if not self.batch_sizes or any(isinstance(b, bool) or b < 1 for b in self.batch_sizes):
            raise InvalidSpecError(
                "batch-sizes", "must be integers >= 1", got=list(self.batch_sizes),
                fix="e.g. --batch-sizes 1,2,4,8",
            )  # fmt: skip
        if not self.precisions:
            raise InvalidSpecError("precision", "is empty", fix="e.g. --precision fp32")
        for p in self.precisions:
            if p not in PRECISIONS:
                raise InvalidSpecError(
                    "precision", f"must be one of {', '.join(PRECISIONS)}", got=p,
                    fix="e.g. --precision fp32",
                )  # fmt: skip
        curve_only = (
            ("option", bool(self.workload_options)),
            ("threads", self.threads is not None),
            ("timer", self.timer != "wall"),
        )
        for flag, given in curve_only:
            if given and self.colocate:
                raise InvalidSpecError(
                    flag,
                    "applies to the curve, not to --colocate (its models run in processes "
                    "of their own, at their built-in options)",
                    fix="measure the configured curve and the co-location in two runs",
                )
        check_threads_and_timer(self.threads, self.timer, self.device)
        if self.colocate_batch is not None and self.colocate_batch < 1:
            raise InvalidSpecError(
                "colocate-batch",
                "must be >= 1",
                got=self.colocate_batch,
                fix="e.g. --colocate-batch 8",
            )
        if not (math.isfinite(self.max_time_s) and self.max_time_s > 0):
            raise InvalidSpecError("max-time-s", "must be > 0 seconds", got=self.max_time_s)
        if not (math.isfinite(self.target_ci) and 0 < self.target_ci <= 1):
            raise InvalidSpecError(
                "target-ci",
                "must be in (0, 1] (relative)",
                got=self.target_ci,
                fix="e.g. --target-ci 0.02",
            )
        with as_flags(type(self)):  # the stopping rule's range, named as the flag
            check_min_samples(self.min_samples)
        if self.csv is not None and len(self.precisions) > 1:
            raise InvalidSpecError(
                "csv", "holds one latency table, one precision's", got=list(self.precisions),
                fix="measure one --precision per --csv file",
            )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class InferCurve:
    """One measured curve and its fit ``latency = fixed_s + per_sample_s x batch``."""

    measurement: CurveMeasurement
    fixed_s: float
    per_sample_s: float

    #: a fitted line this far from a measured median (either way) does not describe the curve
    MISS: ClassVar[float] = 0.5

    def fit_warning(self) -> str | None:
        """Where the line misses a median by more than :attr:`MISS` (a latency that is not
        ``fixed + per-sample x batch`` here, e.g. a CPU thread pool that starts at batch 2):
        the worst such point, said in words; ``None`` where the line holds. One batch size
        fixes no line: its fit is the median over the batch, with no fixed part, and says so."""
        batches = sorted({m.spec.batch_size for m in self.measurement.points})
        if len(batches) < 2:
            return (
                f"one batch size ({batches[0]}) fixes no line: the fit is its median over the "
                "batch, with no fixed cost measured; measure two or more, e.g. --batch-sizes "
                f"1,{max(2, 2 * batches[0])}"
            )
        worst: tuple[float, int, float, float] | None = None
        for m in self.measurement.points:
            batch = m.spec.batch_size
            line = self.fixed_s + self.per_sample_s * batch
            miss = max(line / m.median_s, m.median_s / line) - 1.0
            if miss > self.MISS and (worst is None or miss > worst[0]):
                worst = (miss, batch, m.median_s, line)
        if worst is None:
            return None
        _, batch, median, line = worst
        return (
            f"the line does not describe these points: at batch {batch} the median is "
            f"{median * 1e3:.3g} ms, the line {line * 1e3:.3g} ms (latency is not linear in "
            "the batch here; use the measured points: --csv FILE writes them as a "
            "--latency-table)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.measurement.to_dict(),
            "fit": {
                "fixed_s": self.fixed_s,
                "per_sample_s": self.per_sample_s,
                "warning": self.fit_warning(),
            },
            "latency_curve": self.measurement.latency_curve().to_dict(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class InferCurveResult:
    """One curve per precision and, with ``colocate``, the co-location slowdowns."""

    workload: str
    curves: tuple[InferCurve, ...]
    colocation: ColocationResult | None = None
    #: where ``csv`` wrote the latency table (``None``: not asked)
    latency_table: Path | None = None
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """What ``gpucast measure infer-curve --json`` prints."""
        return {
            "workload": self.workload,
            "curves": [c.to_dict() for c in self.curves],
            "colocation": None if self.colocation is None else self.colocation.to_dict(),
            "latency_table": None if self.latency_table is None else str(self.latency_table),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per measured point (precision, device, batch size)."""
        import pandas as pd

        rows = []
        for c in self.curves:
            m = c.measurement
            for point in m.to_dict()["points"]:
                rows.append(
                    {
                        "workload": m.workload,
                        "device": m.device,
                        "precision": m.precision,
                        **{k: v for k, v in point.items() if k != "warnings"},
                    }
                )
        return pd.DataFrame(rows)


def measure_infer_curve(
    request: InferCurveRequest | str | Path | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> InferCurveResult:
    """Latency and throughput of a workload's inference step over batch sizes (and
    precisions), stored in ``db`` (default: ``$GPUCAST_DB`` or the user store) unless
    ``save=False``; with ``colocate``, the slowdown of running the models at once."""
    import torch

    from gpucast.app.measure import cpu_timer_note
    from gpucast.measure.api import measure
    from gpucast.measure.curves import measure_colocated, measure_curve
    from gpucast.profile.profiler import workload_without_weights
    from gpucast.store.db import Store, default_db_path, new_store
    from gpucast.store.files import output_file, write_text_atomic
    from gpucast.workloads import get_workload

    request = resolve(InferCurveRequest, request, options)
    # fails now, not later; a user's model built on meta (QA 41: a 128 GiB one for real)
    workload_without_weights(request.workload, dict(request.workload_options))
    if request.csv is not None:
        output_file(request.csv, "csv")  # a path that cannot be written fails before timing
    for name in request.colocate:
        get_workload(name)
    store = None
    if request.save:
        store = Store(Path(db) if db is not None else default_db_path()).open()
    threads_before = torch.get_num_threads()
    try:
        if request.threads is not None:
            torch.set_num_threads(request.threads)
        note = cpu_timer_note(torch.get_num_threads()) if request.timer == "cpu" else None

        def timed(spec: WorkloadSpec, **kw: Any) -> Measurement:
            m = measure(spec, clock=time.process_time if note else None, **kw)
            return m if note is None else dataclasses.replace(m, warnings=(*m.warnings, note))

        curves = []
        for precision in request.precisions:
            curve = measure_curve(
                request.workload,
                request.batch_sizes,
                precision=precision,
                device=request.device,
                target_ci=request.target_ci,
                max_time_s=request.max_time_s,
                min_samples=request.min_samples,
                store=store,
                options=request.workload_options,
                measure_fn=timed,
            )
            fixed_s, per_sample_s = curve.fit().coefficients
            curves.append(InferCurve(measurement=curve, fixed_s=fixed_s, per_sample_s=per_sample_s))
        colocation = None
        if request.colocate:
            colocation = measure_colocated(
                [request.workload, *request.colocate],
                request.colocate_batch or max(request.batch_sizes),
                precision=request.precisions[0],
                device=request.device,
                max_time_s=request.max_time_s,
                min_samples=min(request.min_samples, 5),
                store=store,
            )
    finally:
        torch.set_num_threads(threads_before)
        if store is not None:
            store.close()
    if request.csv is not None:
        write_text_atomic(request.csv, latency_table_csv(curves[0].measurement), field="csv")
    return InferCurveResult(
        workload=measured_name(request.workload, request.workload_options),
        curves=tuple(curves),
        colocation=colocation,
        latency_table=request.csv,
        new_store=new_store(store),
    )


def latency_table_csv(curve: CurveMeasurement) -> str:
    """The medians of ``curve`` as the ``batch_size,latency_s`` table that
    :func:`gpucast.inputs.serving.read_latency_table` reads back."""
    lc = curve.latency_curve()
    rows = (f"{b},{t!r}" for b, t in zip(lc.batch_sizes, lc.latency_s, strict=True))
    return "batch_size,latency_s\n" + "".join(f"{r}\n" for r in rows)
