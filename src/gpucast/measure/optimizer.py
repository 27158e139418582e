"""Time the optimizer step ZeRO-Offload runs on the host: ``torch.optim.AdamW`` on the CPU.

:func:`measure_optimizer_step` builds ``n_params`` fp32 parameters in ``n_tensors`` equal
tensors (the last takes the remainder) with gradients, takes the steps the adaptive harness
(:func:`gpucast.measure.harness.run_adaptive`) asks for -- warm-up until the step time settles
(the first steps allocate the moments), then samples until the confidence interval is tight
or the time budget is spent -- and returns every sample. ``implementation`` is ``fused`` (one
kernel per step over all tensors, as DeepSpeed's CPU Adam; torch >= 2.4), ``foreach`` (the
multi-tensor path) or ``for-loop``.

Memory is checked before anything is allocated: AdamW holds 16 bytes per parameter (weight,
gradient, two moments) and the foreach path up to 4 more of temporaries; the measurement
refuses a size that would leave less than ``reserve_gib`` of this machine's available memory.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

import psutil
import torch

from gpucast.domain.errors import InvalidSpecError, MeasurementError
from gpucast.domain.offload import ADAM_HOST_BYTES_PER_PARAM, OptimizerStepMeasurement
from gpucast.domain.units import GIB
from gpucast.measure.harness import StoppingRule, run_adaptive

Implementation = Literal["fused", "foreach", "for-loop"]
TimerKind = Literal["wall", "cpu"]
IMPLEMENTATIONS: tuple[str, ...] = ("fused", "foreach", "for-loop")
#: Peak bytes per parameter while stepping (16 held + foreach temporaries).
PEAK_BYTES_PER_PARAM = ADAM_HOST_BYTES_PER_PARAM + 4.0


def available_memory_bytes() -> float:
    """Memory the OS can give this process now without swapping (``MemAvailable``)."""
    return float(psutil.virtual_memory().available)


def check_fits(n_params: int, *, reserve_gib: float, available_bytes: float) -> None:
    """Refuse a size whose optimizer state would leave less than ``reserve_gib`` free."""
    need = PEAK_BYTES_PER_PARAM * n_params
    if need + reserve_gib * GIB > available_bytes:
        largest = max(0.0, (available_bytes - reserve_gib * GIB) / PEAK_BYTES_PER_PARAM)
        raise InvalidSpecError(
            "sizes",
            f"{n_params:,} parameters need {need / GIB:.1f} GiB for AdamW on the CPU, leaving "
            f"less than {reserve_gib:g} GiB of the {available_bytes / GIB:.1f} GiB available",
            fix=f"measure at most {largest:,.0f} parameters here, or lower --reserve-gib",
        )


def _split(n_params: int, n_tensors: int) -> list[int]:
    base, extra = divmod(n_params, n_tensors)
    return [base + (1 if i < extra else 0) for i in range(n_tensors)]


def measure_optimizer_step(
    n_params: int,
    n_tensors: int,
    *,
    implementation: Implementation = "fused",
    max_time_s: float = 20.0,
    reserve_gib: float = 6.0,
    threads: int | None = None,
    timer: TimerKind = "wall",
    available_bytes: float | None = None,
    clock: Callable[[], float] | None = None,
) -> OptimizerStepMeasurement:
    """AdamW step times for ``n_params`` fp32 parameters in ``n_tensors`` tensors (module doc)."""
    if isinstance(n_params, bool) or not isinstance(n_params, int) or n_params < 1:
        raise InvalidSpecError("sizes", "must be integers >= 1", got=n_params)
    if (
        isinstance(n_tensors, bool)
        or not isinstance(n_tensors, int)
        or not (1 <= n_tensors <= n_params)
    ):
        raise InvalidSpecError("tensors", "must be an integer in [1, parameters]", got=n_tensors)
    cores = os.cpu_count() or 1
    if threads is not None and (isinstance(threads, bool) or not 1 <= threads <= cores):
        raise InvalidSpecError("threads", f"must be an integer in [1, {cores}]", got=threads)
    if implementation not in IMPLEMENTATIONS:
        raise InvalidSpecError(
            "implementation", f"must be one of {', '.join(IMPLEMENTATIONS)}", got=implementation
        )
    avail = available_memory_bytes() if available_bytes is None else available_bytes
    check_fits(n_params, reserve_gib=reserve_gib, available_bytes=avail)
    params = []
    for size in _split(n_params, n_tensors):
        p = torch.nn.Parameter(torch.full((size,), 0.01, dtype=torch.float32))
        p.grad = torch.full((size,), 1e-3, dtype=torch.float32)
        params.append(p)
    flags = {
        "fused": {"fused": True},
        "foreach": {"foreach": True},
        "for-loop": {"foreach": False},
    }[implementation]
    try:
        opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **flags)
    except (RuntimeError, TypeError) as exc:
        raise MeasurementError(
            f"torch {torch.__version__} has no {implementation} AdamW on the CPU ({exc})",
            fix="use --implementation foreach",
        ) from None
    rule = StoppingRule(
        target_ci=0.02,
        max_time_s=max_time_s,
        min_samples=5,
        warmup_window=2,
        max_warmup_steps=8,
        cut_text="smaller --sizes",  # its minimum is fixed
    )
    if timer not in ("wall", "cpu"):
        raise InvalidSpecError("timer", "must be wall or cpu", got=timer)
    if clock is None and timer == "cpu":
        clock = time.process_time
    kwargs = {} if clock is None else {"clock": clock}
    before = torch.get_num_threads()
    used = before if threads is None else threads
    torch.set_num_threads(used)
    try:
        with torch.no_grad():
            raw = run_adaptive(opt.step, rule, **kwargs)
    finally:
        torch.set_num_threads(before)
    return OptimizerStepMeasurement(
        optimizer="adamw",
        implementation=implementation,
        n_params=n_params,
        n_tensors=n_tensors,
        threads=used,
        timer=timer,
        step_times_s=raw.step_times_s,
        host=socket.gethostname(),
        created_at=datetime.now(UTC).isoformat(),
        warnings=raw.warnings,
    )
