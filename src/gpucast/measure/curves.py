"""Measured inference latency curves over batch sizes, and co-location slowdown.

:func:`measure_curve` times a workload's inference step (the harness of
:func:`gpucast.measure.measure`, mode ``"infer"``) at each batch size and precision, one
:class:`~gpucast.domain.measurement.Measurement` per point, each saved to the store when one
is given. :class:`CurveMeasurement` turns the points into a
:class:`~gpucast.domain.serving.LatencyCurve` (median step time per batch) or a fitted
:class:`~gpucast.predict.serving.BatchLatencyModel` (``a + b * batch``).

:func:`measure_colocated` runs two or more inference workloads *at once* on one device, each
in its own process (``multiprocessing`` spawn context, so CUDA works): every process builds
its model and warms up, all wait on one barrier, then each times its steps for the same wall
time while the others run. Each workload is also timed alone the same way, so the slowdown
``together / alone`` is measured, not assumed; :meth:`ColocationResult.slowdown_table` is the
table :class:`~gpucast.domain.serving.ServerSpec` takes. Co-located measurements are saved
like any other, with a ``warnings`` entry starting ``co-located:`` that names the partners
(so :func:`curve_from_store` never mixes them into a solo curve).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing as mp
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpucast.domain.errors import InvalidSpecError, MeasurementError
from gpucast.domain.measurement import Measurement
from gpucast.domain.serving import LatencyCurve
from gpucast.domain.workload import (
    PRECISIONS,
    Precision,
    WorkloadOptions,
    WorkloadSpec,
    configured_name,
)
from gpucast.predict.serving import BatchLatencyModel, colocation_slowdown

if TYPE_CHECKING:
    from gpucast.store.db import Store

COLOCATED_MARK = "co-located:"


def _check_batches(batch_sizes: Sequence[int]) -> tuple[int, ...]:
    sizes = tuple(sorted(set(batch_sizes)))
    if not sizes or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes):
        raise InvalidSpecError(
            "batch-sizes", "must be integers >= 1", got=list(batch_sizes), fix="e.g. 1,2,4,8"
        )
    return sizes


@dataclass(frozen=True, slots=True, kw_only=True)
class CurveMeasurement:
    """Inference measurements of one workload on one device at one precision, by batch."""

    workload: str
    device: str
    precision: str
    points: tuple[Measurement, ...]
    run_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.points:
            raise InvalidSpecError("curve", "has no measured point")
        sizes = [m.spec.batch_size for m in self.points]
        if sizes != sorted(set(sizes)):
            raise InvalidSpecError("curve", "needs one point per batch size, in order")

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(m.spec.batch_size for m in self.points)

    def latency_curve(self, *, host_s: float = 0.0) -> LatencyCurve:
        """Median step time per measured batch size."""
        return LatencyCurve(
            batch_sizes=self.batch_sizes,
            latency_s=tuple(m.median_s for m in self.points),
            host_s=min(host_s, self.points[0].median_s),
            source=f"measured: {self.workload} on {self.device} ({self.precision})",
        )

    def fit(self, *, host_fraction: float = 0.0) -> BatchLatencyModel:
        """``latency = fixed_s + per_sample_s * batch`` fitted on the medians."""
        return BatchLatencyModel(host_fraction=host_fraction).fit(
            self.batch_sizes,
            [m.median_s for m in self.points],
            source=f"{self.workload} on {self.device} ({self.precision})",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "device": self.device,
            "precision": self.precision,
            "run_ids": list(self.run_ids),
            "points": [
                {
                    "batch_size": m.spec.batch_size,
                    "median_s": m.median_s,
                    "mean_s": m.mean_s,
                    "p95_s": m.p95_s,
                    "ci_halfwidth_rel": m.ci_halfwidth_rel,
                    "samples_per_s": m.samples_per_s,
                    "n_samples": m.n_samples,
                    "warnings": list(m.warnings),
                }
                for m in self.points
            ],
        }


def _check_batches_fit(
    workload: str, sizes: Sequence[int], options: WorkloadOptions, device: str, precision: str
) -> None:
    """Every batch's synthetic inputs (and on the CPU its inference step) fit the device,
    checked before the first is timed."""
    from gpucast.measure.devices import check_batch_fits, resolve_device
    from gpucast.profile.profiler import workload_without_weights

    # a user's model as built on meta (QA 41: a 128 GiB one was built for real to check it)
    built = workload_without_weights(workload, dict(options))
    torch_device = resolve_device(device)
    for b in sizes:
        check_batch_fits(built, b, torch_device, flag="batch-sizes", step=("infer", precision))


def measure_curve(
    workload: str,
    batch_sizes: Sequence[int],
    *,
    precision: str = "fp32",
    device: str = "cpu",
    target_ci: float = 0.02,
    max_time_s: float = 10.0,
    min_samples: int = 10,
    telemetry: bool = True,
    store: Store | None = None,
    measure_fn: Callable[..., Measurement] | None = None,
    options: WorkloadOptions = (),
) -> CurveMeasurement:
    """Time ``workload``'s inference step at each of ``batch_sizes`` (``max_time_s`` each),
    built with ``options`` (its ``-o``; the curve is named :func:`configured_name`)."""
    sizes = _check_batches(batch_sizes)
    if options:
        from gpucast.workloads import canonical_options

        options = canonical_options(workload, options)  # as each point's run is stored
    if precision not in PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(PRECISIONS)}", got=precision
        )
    _check_batches_fit(workload, sizes, options, device, precision)
    if measure_fn is None:
        from gpucast.measure.api import measure as run_one
    else:
        run_one = measure_fn
    points: list[Measurement] = []
    ids: list[int] = []
    for b in sizes:
        spec = WorkloadSpec(
            name=workload,
            batch_size=b,
            precision=precision,  # type: ignore[arg-type]
            options=options,
        )
        m = run_one(
            spec,
            mode="infer",
            device=device,
            target_ci=target_ci,
            max_time_s=max_time_s,
            min_samples=min_samples,
            telemetry=telemetry,
        )
        points.append(m)
        if store is not None:
            ids.append(store.save_measurement(m))
    return CurveMeasurement(
        workload=configured_name(workload, options),
        device=points[0].device,
        precision=precision,
        points=tuple(points),
        run_ids=tuple(ids),
    )


def curve_from_store(
    store: Store, workload: str, *, device: str | None = None, precision: str = "fp32"
) -> CurveMeasurement:
    """The newest solo inference measurement per batch size of ``workload`` in the store."""
    newest: dict[int, tuple[int, Measurement]] = {}
    for run in store.list_runs(kind="measurement", workload=workload, limit=None):
        if run.mode != "infer" or run.precision != precision:
            continue
        if device is not None and run.device != device:
            continue
        if run.batch_size in newest:
            continue  # list_runs is newest first
        m = store.get_measurement(run.id)
        if any(w.startswith(COLOCATED_MARK) for w in m.warnings):
            continue
        newest[run.batch_size] = (run.id, m)
    if not newest:
        where = f" on {device}" if device else ""
        raise InvalidSpecError(
            "store",
            f"has no solo inference measurement of {workload}{where} ({precision})",
            fix=f"run `gpucast measure infer-curve {workload} --batch-sizes 1,2,4,8` first",
        )
    sizes = sorted(newest)
    devices = {newest[b][1].device for b in sizes}
    if len(devices) > 1:
        raise InvalidSpecError(
            "device", f"{workload} was measured on {', '.join(sorted(devices))}", fix="--device"
        )
    return CurveMeasurement(
        workload=workload,
        device=devices.pop(),
        precision=precision,
        points=tuple(newest[b][1] for b in sizes),
        run_ids=tuple(newest[b][0] for b in sizes),
    )


# -- co-location ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ColocationResult:
    """Each workload's inference step time alone and with all the others running at once."""

    device: str
    workloads: tuple[str, ...]  # as given; a name may repeat (n copies of one model)
    batch_sizes: tuple[int, ...]
    alone: tuple[Measurement, ...]
    together: tuple[Measurement, ...]
    run_ids: tuple[int, ...] = ()

    def slowdown(self) -> tuple[float, ...]:
        """``together median / alone median`` per workload."""
        return tuple(
            t.median_s / a.median_s for a, t in zip(self.alone, self.together, strict=True)
        )

    def slowdown_table(self) -> tuple[float, ...]:
        """``(1.0, s_n)`` for ``n`` co-located batches, ``s_n`` the geometric mean of the
        per-workload slowdowns (at least 1): the :class:`ServerSpec` table for this mix."""
        n = len(self.workloads)
        geo = math.exp(float(np.mean(np.log(self.slowdown()))))
        table = colocation_slowdown(1.0, [geo])
        return (*table[:1], *([table[1]] * (n - 1)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "workloads": list(self.workloads),
            "batch_sizes": list(self.batch_sizes),
            "alone_median_s": [m.median_s for m in self.alone],
            "together_median_s": [m.median_s for m in self.together],
            "slowdown": list(self.slowdown()),
            "slowdown_table": list(self.slowdown_table()),
            "run_ids": list(self.run_ids),
        }


def _worker(
    index: int,
    spec_tuple: tuple[str, int, str],
    device: str,
    max_time_s: float,
    min_samples: int,
    barrier: Any,
    results: Any,
) -> None:
    """One co-located process: build, warm up, wait for the others, time for ``max_time_s``."""
    try:
        from gpucast.measure.api import measure_runner
        from gpucast.measure.devices import resolve_device
        from gpucast.measure.harness import StoppingRule
        from gpucast.workloads import get_workload
        from gpucast.workloads.steps import make_step

        name, batch, precision = spec_tuple
        spec = WorkloadSpec(name=name, batch_size=batch, precision=precision)  # type: ignore[arg-type]
        torch_device = resolve_device(device)
        runner = make_step(get_workload(name), spec, "infer", torch_device)
        for _ in range(3):  # build-time warm-up (lazy init, allocator, autotuning)
            runner()
        barrier.wait(timeout=600)
        # a CI target no run reaches: every process runs for the same wall time
        rule = StoppingRule(
            target_ci=1e-9, max_time_s=max_time_s, min_samples=min_samples, max_warmup_steps=3
        )
        m = measure_runner(
            runner, spec=spec, mode="infer", device=torch_device, rule=rule, telemetry=False
        )
        results.put((index, m.to_dict(), None))
    except BaseException as exc:  # report any failure to the parent
        with contextlib.suppress(Exception):
            barrier.abort()
        results.put((index, None, f"{type(exc).__name__}: {exc}"))


def _run_together(
    specs: Sequence[tuple[str, int, str]], device: str, max_time_s: float, min_samples: int
) -> list[Measurement]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(specs))
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker,
            args=(i, spec, device, max_time_s, min_samples, barrier, results),
            daemon=True,
        )
        for i, spec in enumerate(specs)
    ]
    for p in procs:
        p.start()
    out: dict[int, Measurement] = {}
    errors: list[str] = []
    try:
        for _ in procs:
            index, data, error = results.get(timeout=600 + 4 * max_time_s)
            if error is not None:
                errors.append(f"{specs[index][0]}: {error}")
            else:
                out[index] = Measurement.from_dict(data)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    if errors:
        raise MeasurementError(f"co-located run failed ({'; '.join(errors)})")
    return [out[i] for i in range(len(specs))]


def measure_colocated(
    workloads: Sequence[str],
    batch_sizes: Sequence[int] | int,
    *,
    precision: str = "fp32",
    device: str = "cpu",
    max_time_s: float = 5.0,
    min_samples: int = 5,
    store: Store | None = None,
) -> ColocationResult:
    """Each of ``workloads`` alone, then all at once in separate processes (see module doc)."""
    names = tuple(workloads)
    if len(names) < 2:
        raise InvalidSpecError(
            "colocate", "needs two or more workloads", fix="e.g. --colocate resnet18"
        )
    sizes = (batch_sizes,) * len(names) if isinstance(batch_sizes, int) else tuple(batch_sizes)
    if len(sizes) != len(names) or any(b < 1 for b in sizes):
        raise InvalidSpecError("batch sizes", "need one batch size >= 1 per workload")
    if precision not in PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(PRECISIONS)}", got=precision
        )
    specs = [(n, b, precision) for n, b in zip(names, sizes, strict=True)]
    alone = [_run_together([s], device, max_time_s, min_samples)[0] for s in specs]
    together = _run_together(specs, device, max_time_s, min_samples)
    marked = []
    for i, m in enumerate(together):
        others = ", ".join(f"{n} b{b}" for j, (n, b, _p) in enumerate(specs) if j != i)
        note = f"{COLOCATED_MARK} ran at once with {len(specs) - 1} other process(es): {others}"
        marked.append(dataclasses.replace(m, warnings=(note, *m.warnings)))
    ids: list[int] = []
    if store is not None:
        ids = [store.save_measurement(m) for m in (*alone, *marked)]
    return ColocationResult(
        device=alone[0].device,
        workloads=names,
        batch_sizes=sizes,
        alone=tuple(alone),
        together=tuple(marked),
        run_ids=tuple(ids),
    )


def precision_of(text: str) -> Precision:
    if text not in PRECISIONS:
        raise InvalidSpecError("precision", f"must be one of {', '.join(PRECISIONS)}", got=text)
    return text  # type: ignore[return-value]
