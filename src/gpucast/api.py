"""The Python API the CLI is a shell over: ``gpucast.profile(...)``, ``gpucast.measure(...)``.

``gpucast.profile`` and ``gpucast.measure`` are packages *and* callables: calling the package
runs the function below (see :func:`make_callable`), so ``gpucast.profile("resnet50",
batch_size=64)`` and ``from gpucast.profile import profile_workload`` both work.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpucast.domain.workload import Precision, WorkloadSpec

if TYPE_CHECKING:
    from gpucast.domain.measurement import Measurement
    from gpucast.domain.profile import WorkloadProfile


def _spec(workload: str | WorkloadSpec, batch_size: int, precision: Precision) -> WorkloadSpec:
    if isinstance(workload, WorkloadSpec):
        return workload
    return WorkloadSpec(name=workload, batch_size=batch_size, precision=precision)


def profile(
    workload: str | WorkloadSpec,
    *,
    batch_size: int = 32,
    precision: Precision = "fp32",
    optimizer: str = "sgd",
    **workload_options: Any,
) -> WorkloadProfile:
    """Static features of a workload (FLOPs, bytes per operator class, memory) without
    allocating the batch. ``workload`` is a built-in name, ``module:factory`` or a spec."""
    from gpucast.profile.profiler import profile_workload

    spec = _spec(workload, batch_size, precision)
    return profile_workload(spec, optimizer=optimizer, **workload_options)


def measure(
    workload: str | WorkloadSpec,
    *,
    batch_size: int = 32,
    precision: Precision = "fp32",
    mode: str = "train",
    device: str = "auto",
    **options: Any,
) -> Measurement:
    """Time training or inference steps until the 95% CI is tight (see
    :func:`gpucast.measure.api.measure` for the stopping options)."""
    from gpucast.measure.api import measure as run_measure

    spec = _spec(workload, batch_size, precision)
    return run_measure(spec, mode=mode, device=device, **options)


class _CallableModule(types.ModuleType):
    """A package that can also be called, delegating to ``__gpucast_call__``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["__gpucast_call__"](*args, **kwargs)


def make_callable(module_name: str, function: Callable[..., Any]) -> None:
    """Make the already-imported module ``module_name`` callable as ``function``."""
    module = sys.modules[module_name]
    module.__dict__["__gpucast_call__"] = function
    module.__class__ = _CallableModule
