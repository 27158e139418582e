"""``measure(spec, ...)``: time a workload's training or inference step on this machine."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from gpucast.domain.errors import GpucastError, InvalidSpecError, MeasurementError
from gpucast.domain.kernels import KernelTrace
from gpucast.domain.limits import MAX_SAMPLES
from gpucast.domain.measurement import MODES, EnergySummary, Measurement, TelemetrySummary
from gpucast.domain.workload import Mode, WorkloadSpec
from gpucast.measure.devices import check_batch_fits, device_label, resolve_device
from gpucast.measure.energy import (
    NO_NVML_ENERGY_COUNTER,
    POWERCAP_ROOT,
    EnergyWindow,
    no_rapl_reason,
    nvml_energy_counter,
    nvml_power_limit_w,
    open_rapl,
)
from gpucast.measure.environment import busy_host_warning, fingerprint, host_load_average
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


#: What torch's CPU allocator says when an allocation fails (a RuntimeError).
_CPU_OUT_OF_MEMORY = "can't allocate memory"


@contextlib.contextmanager
def _translate_failures(spec: WorkloadSpec, mode: str, device: str) -> Iterator[None]:
    """Turn a crash inside a step (OOM, shape error) into one clear MeasurementError; in a
    user model's step (``module:factory``) any exception but running out of memory is the
    user's error (exit 2, :func:`gpucast.workloads.user.user_step_failed`)."""
    from gpucast.workloads.user import is_user_spec, user_step_failed

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
        if _CPU_OUT_OF_MEMORY in first_line:  # the CPU allocator's, not an OutOfMemoryError
            raise MeasurementError(
                f"out of host memory in the {where} ({first_line})",
                fix="lower --batch-size or use a lower --precision",
            ) from exc
        if is_user_spec(spec.name):
            raise user_step_failed(f"the {where}", exc) from exc
        raise MeasurementError(f"the {where} failed: {first_line}") from exc
    except GpucastError:
        raise
    except Exception as exc:  # any other, from a user's model: its fault (QA 41: a traceback)
        if not is_user_spec(spec.name):
            raise
        raise user_step_failed(f"the {where}", exc) from exc


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
    powercap_root: Path = POWERCAP_ROOT,
) -> Measurement:
    """Time an already-built ``runner`` under ``rule`` and wrap the samples in a Measurement.

    ``clock`` and ``timer`` are injectable for tests; by default the timer is CUDA events on a
    GPU and ``time.perf_counter`` on the CPU. When ``telemetry`` is true, NVML telemetry is
    sampled during the measured steps on NVIDIA GPUs, and the energy of those steps is read
    from the GPU's NVML energy counter (else sampled power x time) and the CPU packages' RAPL
    counters under ``powercap_root`` where readable (:mod:`gpucast.measure.energy`).
    """
    mode = _check_mode(mode)
    torch_device = resolve_device(device) if isinstance(device, str) else device
    label = device_label(torch_device)
    environment = fingerprint(torch_device)
    created_at = datetime.now(UTC)
    step_timer = timer or timer_for(torch_device, clock)

    reader = open_nvml_reader(torch_device) if telemetry else None
    summary: TelemetrySummary | None = None
    energy: EnergySummary | None = None
    notes: list[str] = []
    # Make the measured GPU the current one, so events, streams and stray allocations agree.
    on_device = (
        torch.cuda.device(torch_device) if torch_device.type == "cuda" else contextlib.nullcontext()
    )
    try:
        window: EnergyWindow | None = None
        rapl, rapl_note = open_rapl(powercap_root) if telemetry else (None, None)
        if telemetry:
            # any reader with NVML behind it (a stand-in reader may have none)
            nvml, handle = getattr(reader, "nvml", None), getattr(reader, "handle", None)
            has_nvml = nvml is not None
            gpu_counter = nvml_energy_counter(nvml, handle) if has_nvml else None
            if reader is not None or rapl is not None:
                window = EnergyWindow(
                    gpu=gpu_counter,
                    cpu=rapl,
                    clock=clock or time.perf_counter,
                    power_limit_w=nvml_power_limit_w(nvml, handle) if has_nvml else None,
                )
        sampler = (
            None if reader is None else TelemetrySampler(reader, interval_s=telemetry_interval_s)
        )

        def progress(p: Progress) -> None:
            if on_progress is not None:
                on_progress(p)
            # sample and meter the measured steps only, not the warm-up
            if p.phase == "measure":
                if sampler is not None and not sampler.running:
                    sampler.start()
                if window is not None and not window.running:
                    window.start()

        with on_device, _translate_failures(spec, mode, label), contextlib.ExitStack() as stack:
            if sampler is not None:
                stack.enter_context(sampler)
            raw = run_adaptive(runner, rule, timer=step_timer, clock=clock, on_progress=progress)
            if sampler is not None:
                summary = sampler.stop()
            if window is not None:
                energy = window.stop(
                    len(raw.step_times_s),
                    gpu_power_w=None if summary is None else summary.power_mean_w,
                )
                notes.extend(window.warnings)
                if energy is not None and energy.gpu_method is None and energy.cpu_method is None:
                    energy = None
            if telemetry and energy is None and not (window is not None and window.warnings):
                notes.append(
                    _unrecorded_energy(torch_device, reader, rapl is None, rapl_note, powercap_root)
                )
            elif rapl_note:
                notes.append(rapl_note)
    finally:
        if reader is not None:
            reader.close()

    if torch_device.type == "cpu":
        busy = busy_host_warning(
            host_load_average(),
            cores=environment.cpu_cores,
            threads=environment.torch_threads,
            cpu_time=clock is time.process_time,
        )
        if busy is not None:
            notes.append(busy)
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
        energy=energy,
        created_at=created_at,
        warnings=(*raw.warnings, *notes),
    )


def _unrecorded_energy(
    device: torch.device, reader: Any, no_rapl: bool, rapl_note: str | None, powercap_root: Path
) -> str:
    """One line saying why no energy counter could be read around the measured steps (the
    reasons ``--kernels`` gives for its energy per kernel or operator)."""
    from gpucast.measure.telemetry import nvml_unavailable_reason

    why = []
    if device.type == "cuda":
        gpu = (
            nvml_unavailable_reason(device)
            if reader is None
            else f"{NO_NVML_ENERGY_COUNTER} and no sampled power"
        )
        why.append(f"GPU: {gpu}")
    if no_rapl:
        cpu = (rapl_note or "").removeprefix("CPU energy not recorded: ")
        why.append(f"CPU: {cpu or no_rapl_reason(powercap_root)}")
    return "energy not recorded: " + (
        "; ".join(why) or "the counters gave no reading over the measured steps"
    )


def measure(
    spec: WorkloadSpec,
    *,
    mode: str = "train",
    device: str = "cpu",
    target_ci: float = 0.02,
    max_time_s: float = 60.0,
    min_samples: int = 10,
    max_samples: int = MAX_SAMPLES,
    confidence: float = 0.95,
    warmup_window: int = 3,
    warmup_tolerance: float = 0.05,
    max_warmup_steps: int = 50,
    workload: Workload | None = None,
    clock: Clock | None = None,
    telemetry: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
    noise_scale: bool = False,
    noise_micro_batches: int = 4,
    noise_steps: int = 8,
) -> Measurement:
    """Measure ``spec``'s ``mode`` ("train" or "infer") step on ``device``.

    ``device`` is ``cpu``, ``cuda``, ``cuda:N`` or ``auto``. The workload comes from the
    registry by ``spec.name`` unless ``workload`` is given. Stops when the 95% CI of the mean
    step time is within ``target_ci`` of it, or after ``max_time_s`` (warm-up included; model
    construction excluded), with at least ``min_samples`` samples — see
    :mod:`gpucast.measure.harness` for the exact warm-up and stopping rules.

    With ``noise_scale`` (training only), the gradient noise scale is estimated first, at the
    weights the workload was built with, from ``noise_steps`` steps of ``noise_micro_batches``
    micro-batches of ``batch_size // noise_micro_batches`` samples
    (:mod:`gpucast.measure.noise`), and kept in ``Measurement.gradient_noise``.

    Raises InvalidSpecError / DeviceUnavailableError / UnknownWorkloadError for bad input
    (checked before any model is built) and MeasurementError when a step fails.
    """
    return _measure(
        spec,
        mode=mode,
        device=device,
        target_ci=target_ci,
        max_time_s=max_time_s,
        min_samples=min_samples,
        max_samples=max_samples,
        confidence=confidence,
        warmup_window=warmup_window,
        warmup_tolerance=warmup_tolerance,
        max_warmup_steps=max_warmup_steps,
        workload=workload,
        clock=clock,
        telemetry=telemetry,
        on_progress=on_progress,
        noise_scale=noise_scale,
        noise_micro_batches=noise_micro_batches,
        noise_steps=noise_steps,
    )[0]


def canonical_spec(spec: WorkloadSpec) -> WorkloadSpec:
    """``spec`` with its options as :func:`gpucast.workloads.canonical_options` gives them
    (an option at its built-in value dropped): every run is stored under this spec's label,
    the name predictions look a configuration up by (``inputs.workload.measured_name``)."""
    if not spec.options:
        return spec
    from gpucast.workloads import canonical_options

    return dataclasses.replace(spec, options=canonical_options(spec.name, spec.options))


def measure_kernels(
    spec: WorkloadSpec, *, kernel_steps: int = 3, **options: Any
) -> tuple[Measurement, KernelTrace | None]:
    """:func:`measure` (same ``options``), then ``kernel_steps`` more steps under
    ``torch.profiler`` for the per-operator (CPU) or per-kernel (GPU) times and features of
    the step (:mod:`gpucast.measure.kernels`); ``kernel_steps=0``: no trace (``None``)."""
    return _measure(spec, kernel_steps=kernel_steps, **options)


def _measure(
    spec: WorkloadSpec,
    *,
    mode: str = "train",
    device: str = "cpu",
    target_ci: float = 0.02,
    max_time_s: float = 60.0,
    min_samples: int = 10,
    max_samples: int = MAX_SAMPLES,
    confidence: float = 0.95,
    warmup_window: int = 3,
    warmup_tolerance: float = 0.05,
    max_warmup_steps: int = 50,
    workload: Workload | None = None,
    clock: Clock | None = None,
    telemetry: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
    noise_scale: bool = False,
    noise_micro_batches: int = 4,
    noise_steps: int = 8,
    kernel_steps: int = 0,
) -> tuple[Measurement, KernelTrace | None]:
    """:func:`measure`, and with ``kernel_steps`` its operator trace (:func:`measure_kernels`)."""
    if kernel_steps and (
        isinstance(kernel_steps, bool) or not isinstance(kernel_steps, int) or kernel_steps < 1
    ):
        raise InvalidSpecError("kernel-steps", "must be an integer >= 1", got=kernel_steps)
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
    if noise_scale:
        check_noise_options(checked_mode, spec.batch_size, noise_micro_batches, noise_steps)
    torch_device = resolve_device(device)

    from gpucast.profile.profiler import user_workload_on_meta
    from gpucast.workloads import get_workload
    from gpucast.workloads.steps import make_step

    spec = canonical_spec(spec)  # stored under the name predictions look it up by
    # a user's model is checked as built on meta, before its factory allocates it (QA 41: a
    # 128 GiB MLP was built for real, then refused -- or the OS killed the process first)
    on_meta = None if workload is not None else user_workload_on_meta(spec.name, dict(spec.options))
    fits = functools.partial(
        check_batch_fits, batch_size=spec.batch_size, device=torch_device, flag="batch-size",
        step=(checked_mode, spec.precision),
    )  # fmt: skip
    if on_meta is not None:
        fits(on_meta)
    chosen = workload if workload is not None else get_workload(spec.name, **dict(spec.options))
    if on_meta is None:
        fits(chosen)
    with _translate_failures(spec, checked_mode, device_label(torch_device)):
        runner = make_step(chosen, spec, checked_mode, torch_device)
    noise, noise_notes = None, ()
    if noise_scale:
        from gpucast.measure.noise import estimate_gradient_noise

        what = (
            "the user factory's example batch, at its weights"
            if chosen.family == "user"
            else "synthetic batches (random inputs and labels), at initialisation"
        )
        noise, noise_notes = estimate_gradient_noise(
            chosen,
            runner.model,
            torch_device,
            micro_batch=spec.batch_size // noise_micro_batches,
            micro_batches=noise_micro_batches,
            steps=noise_steps,
            data=f"{what}; fp32 gradients",
        )
    result = measure_runner(
        runner,
        spec=spec,
        mode=checked_mode,
        device=torch_device,
        rule=rule,
        clock=clock,
        telemetry=telemetry,
        on_progress=on_progress,
    )
    trace = None
    if kernel_steps:
        from gpucast.measure.kernels import open_energy_counter, record_kernels

        # energy per operator/kernel where a counter is readable; else a one-line note
        meter, meter_source, meter_note = (
            open_energy_counter(torch_device) if telemetry else (None, "", "")
        )
        with _translate_failures(spec, checked_mode, device_label(torch_device)):
            trace = record_kernels(
                runner,
                torch_device,
                steps=kernel_steps,
                label=device_label(torch_device),
                clock=clock if torch_device.type == "cpu" else None,
                energy=meter,
                energy_source=meter_source,
                energy_note=meter_note,
            )
    loss_note = runner.loss_warning()
    notes = (*noise_notes, *(() if loss_note is None else (loss_note,)))
    if noise is None and not notes:
        return result, trace
    return dataclasses.replace(
        result, gradient_noise=noise, warnings=(*result.warnings, *notes)
    ), trace


def check_noise_options(mode: str, batch_size: int, micro_batches: int, steps: int) -> None:
    """The noise-scale options, checked before anything is built."""
    if mode != "train":
        raise InvalidSpecError("noise-scale", "is measured on training steps only")
    for name, value in (("noise-micro-batches", micro_batches), ("noise-steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise InvalidSpecError(name, "must be an integer >= 2", got=value)
    if batch_size < micro_batches:
        raise InvalidSpecError(
            "noise-scale",
            f"needs a batch of at least {micro_batches} samples to split into "
            f"{micro_batches} micro-batches",
            got=batch_size,
            fix=f"raise --batch-size to >= {micro_batches} or lower --noise-micro-batches",
        )
