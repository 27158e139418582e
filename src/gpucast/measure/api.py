"""``measure(spec, ...)``: time a workload's training or inference step on this machine."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

import torch

from gpucast.domain.errors import InvalidSpecError, MeasurementError
from gpucast.domain.measurement import MODES, Measurement, TelemetrySummary
from gpucast.domain.workload import Mode, WorkloadSpec
from gpucast.measure.devices import device_label, resolve_device
from gpucast.measure.environment import fingerprint
from gpucast.measure.harness import Progress, StoppingRule, run_adaptive
from gpucast.measure.telemetry import TelemetrySampler, open_nvml_reader
from gpucast.measure.timing import Clock, StepTimer, timer_for

if TYPE_CHECKING:
    from gpucast.workloads.base import Workload


class StepRunner(Protocol):
    """One training or inference step, ready to call (see ``gpucast.workloads.steps``)."""

    samples_per_step: int

    def __call__(self) -> object: ...


def _check_mode(mode: str) -> Mode:
    if mode not in MODES:
        raise InvalidSpecError("mode", f"must be one of {', '.join(MODES)}", got=mode)
    return mode  # type: ignore[return-value]


@contextlib.contextmanager
def _translate_failures(spec: WorkloadSpec, mode: str, device: str) -> Iterator[None]:
    """Turn a crash inside a step (OOM, shape error) into one clear MeasurementError."""
    where = f"{mode} step of {spec.name} at batch size {spec.batch_size} on {device}"
    try:
        yield
    except torch.OutOfMemoryError as exc:
        raise MeasurementError(
            f"out of memory in the {where}",
            fix="lower --batch-size or use a lower --precision",
        ) from exc
    except (RuntimeError, ValueError, TypeError) as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MeasurementError(f"the {where} failed: {first_line}") from exc


def measure_runner(
    runner: StepRunner,
    *,
    spec: WorkloadSpec,
    mode: str,
    device: str | torch.device,
    rule: StoppingRule,
    clock: Clock | None = None,
    timer: StepTimer | None = None,
    telemetry: bool = True,
    telemetry_interval_s: float = 0.1,
    on_progress: Callable[[Progress], None] | None = None,
) -> Measurement:
    """Time an already-built ``runner`` under ``rule`` and wrap the samples in a Measurement.

    ``clock`` and ``timer`` are injectable for tests; by default the timer is CUDA events on a
    GPU and ``time.perf_counter`` on the CPU. NVML telemetry is sampled during the measured
    steps on NVIDIA GPUs when ``telemetry`` is true and NVML is available.
    """
    mode = _check_mode(mode)
    torch_device = resolve_device(device) if isinstance(device, str) else device
    label = device_label(torch_device)
    environment = fingerprint(torch_device)
    created_at = datetime.now(UTC)
    step_timer = timer or timer_for(torch_device, clock)

    reader = open_nvml_reader(torch_device) if telemetry else None
    summary: TelemetrySummary | None = None
    # Make the measured GPU the current one, so events, streams and stray allocations agree.
    on_device = (
        torch.cuda.device(torch_device) if torch_device.type == "cuda" else contextlib.nullcontext()
    )
    try:
        with on_device, _translate_failures(spec, mode, label):
            if reader is None:
                raw = run_adaptive(
                    runner, rule, timer=step_timer, clock=clock, on_progress=on_progress
                )
            else:
                sampler = TelemetrySampler(reader, interval_s=telemetry_interval_s)

                def progress(p: Progress) -> None:
                    if on_progress is not None:
                        on_progress(p)
                    # sample the measured steps only, not the warm-up
                    if p.phase == "measure" and not sampler.running:
                        sampler.start()

                with sampler:
                    raw = run_adaptive(
                        runner, rule, timer=step_timer, clock=clock, on_progress=progress
                    )
                    summary = sampler.stop()
    finally:
        if reader is not None:
            reader.close()

    if min(raw.step_times_s) <= 0:
        raise MeasurementError(
            f"a {mode} step of {spec.name} took no measurable time on {label}",
            fix="raise --batch-size so a step lasts longer than the clock's resolution",
        )
    return Measurement(
        spec=spec,
        mode=mode,
        device=label,
        step_times_s=raw.step_times_s,
        warmup_step_times_s=raw.warmup_step_times_s,
        samples_per_step=int(runner.samples_per_step),
        stop_reason=raw.stop_reason,
        target_ci=rule.target_ci,
        confidence=rule.confidence,
        environment=environment,
        telemetry=summary,
        created_at=created_at,
        warnings=raw.warnings,
    )


def measure(
    spec: WorkloadSpec,
    *,
    mode: str = "train",
    device: str = "cpu",
    target_ci: float = 0.02,
    max_time_s: float = 60.0,
    min_samples: int = 10,
    max_samples: int = 100_000,
    confidence: float = 0.95,
    warmup_window: int = 3,
    warmup_tolerance: float = 0.05,
    max_warmup_steps: int = 50,
    workload: Workload | None = None,
    clock: Clock | None = None,
    telemetry: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
) -> Measurement:
    """Measure ``spec``'s ``mode`` ("train" or "infer") step on ``device``.

    ``device`` is ``cpu``, ``cuda``, ``cuda:N`` or ``auto``. The workload comes from the
    registry by ``spec.name`` unless ``workload`` is given. Stops when the 95% CI of the mean
    step time is within ``target_ci`` of it, or after ``max_time_s`` (warm-up included; model
    construction excluded), with at least ``min_samples`` samples — see
    :mod:`gpucast.measure.harness` for the exact warm-up and stopping rules.

    Raises InvalidSpecError / DeviceUnavailableError / UnknownWorkloadError for bad input
    (checked before any model is built) and MeasurementError when a step fails.
    """
    rule = StoppingRule(
        target_ci=target_ci,
        confidence=confidence,
        max_time_s=max_time_s,
        min_samples=min_samples,
        max_samples=max_samples,
        warmup_window=warmup_window,
        warmup_tolerance=warmup_tolerance,
        max_warmup_steps=max_warmup_steps,
    )
    checked_mode = _check_mode(mode)
    torch_device = resolve_device(device)

    from gpucast.workloads import get_workload
    from gpucast.workloads.steps import make_step

    chosen = workload if workload is not None else get_workload(spec.name)
    with _translate_failures(spec, checked_mode, device_label(torch_device)):
        runner = make_step(chosen, spec, checked_mode, torch_device)
    return measure_runner(
        runner,
        spec=spec,
        mode=checked_mode,
        device=torch_device,
        rule=rule,
        clock=clock,
        telemetry=telemetry,
        on_progress=on_progress,
    )
