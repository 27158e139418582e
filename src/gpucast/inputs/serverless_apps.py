"""The functions of an Azure Functions 2019 trace grouped into their applications (issue #19).

In Azure Functions the application is the unit of resource allocation: "warm-up decisions are
made at the application level, and memory allocation is measured by application, not by
function" (``../shared/data/azure_functions_2019/AzureFunctionsDataset2019.md``), as Shahrad
et al. (ATC'20) define keep-alive. ``--unit app`` simulates each application
(``HashOwner``/``HashApp``) as one unit:

- its invocations are those of all its functions, minute by minute (summed);
- its warm instance is one process holding one copy of each distinct model its functions
  serve (function i serves model i mod len(--models), as with ``--unit function``): the
  weights of every one of them plus the largest of their working sets (inference peak minus
  weights; calls of one instance run one at a time);
- its cold start pays the container and the CUDA context once (the largest of its models'),
  then every model's weights and first call; a swap in a pool moves every model's weights;
- a call runs the invocation-weighted mix of its functions' execution times over the day:
  the mean for GPU-seconds, the mix at :data:`SPREAD_POINTS` equally likely points for the
  latency percentiles (only when an app's functions differ);
- its own memory is the trace's ``AverageAllocatedMb`` (the day's average committed memory
  of the app's process, MB as the trace records it; NaN without a row).

Numbers in, numbers out: the trace and the functions come in already read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gpu_memory import usable_gib, usable_text
from gpucast.domain.units import GIB

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.inputs.serverless import GpuFunction, ServerlessTrace

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: equally likely points of an app's execution-time mix (as an LLM trace's service times)
SPREAD_POINTS = 64
#: the percentiles over apps of their ``AverageAllocatedMb`` the trace summary gives
SUMMARY_PERCENTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class AppUnits:
    """The applications of a trace as simulated units (module docstring), in the order of
    their first function."""

    names: tuple[str, ...]
    counts: npt.NDArray[np.signedinteger[Any]]
    #: per function, the index of its application
    app_of: IntArray
    exec_s: FloatArray
    #: ``(apps, SPREAD_POINTS)`` execution times of each app's calls, None when every app's
    #: functions run equally long
    exec_spread: FloatArray | None
    cold_s: FloatArray
    memory_gib: FloatArray
    swap_s: FloatArray
    #: per app, the distinct models its functions serve
    models: tuple[tuple[str, ...], ...]
    #: per app, its ``AverageAllocatedMb`` (NaN: no row in the memory file, or no file)
    host_memory_mb: FloatArray


def app_index(apps: tuple[str, ...]) -> tuple[tuple[str, ...], IntArray]:
    """The distinct applications in the order of their first function, and each function's
    application index."""
    keys, first, inverse = np.unique(np.asarray(apps), return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return tuple(str(k) for k in keys[order]), rank[inverse].astype(np.int64)


def _models_of(app_of: IntArray, model_of: IntArray, n_apps: int, n_models: int) -> FloatArray:
    """``(apps, models)``: 1 where one of an app's functions serves the model, else 0."""
    has = np.zeros((n_apps, n_models))
    has[app_of, model_of] = 1.0
    return has


def _exec_mix(
    app_of: IntArray, n_apps: int, exec_s: FloatArray, invocations: FloatArray
) -> tuple[FloatArray, FloatArray | None]:
    """Each app's invocation-weighted mean execution time (equal weights for an app never
    invoked) and, when some app's functions differ, its mix at :data:`SPREAD_POINTS`."""
    from gpucast.simulate.serverless import weighted_percentiles

    total = np.bincount(app_of, weights=invocations, minlength=n_apps)
    weight = np.where(total[app_of] > 0, invocations, 1.0)
    total = np.bincount(app_of, weights=weight, minlength=n_apps)
    mean = np.bincount(app_of, weights=weight * exec_s, minlength=n_apps) / total
    low = np.full(n_apps, np.inf)
    high = np.full(n_apps, -np.inf)
    np.minimum.at(low, app_of, exec_s)
    np.maximum.at(high, app_of, exec_s)
    mixed = np.flatnonzero(high > low)
    if mixed.size == 0:
        return mean, None
    spread = np.repeat(mean[:, None], SPREAD_POINTS, axis=1)
    qs = [(k + 0.5) / SPREAD_POINTS * 100.0 for k in range(SPREAD_POINTS)]
    order = np.argsort(app_of, kind="stable")
    bounds = np.searchsorted(app_of[order], np.arange(n_apps + 1))
    for a in mixed:
        rows = order[bounds[a] : bounds[a + 1]]
        spread[a] = weighted_percentiles(exec_s[rows], weight[rows], qs)
    return mean, spread


def group_by_app(
    trace: ServerlessTrace,
    *,
    model_of: IntArray,
    functions: tuple[GpuFunction, ...],
    exec_s: FloatArray,
    gpu: GpuSpec,
    pcie_gbs: float,
) -> AppUnits:
    """The applications of ``trace`` as units (module docstring): ``model_of`` gives each
    function's model (an index into ``functions``), ``exec_s`` each function's execution
    time. An app whose models together exceed ``gpu``'s memory is one error."""
    names, app_of = app_index(trace.apps)
    n_apps = len(names)
    counts = np.zeros((n_apps, trace.counts.shape[1]), dtype=trace.counts.dtype)
    np.add.at(counts, app_of, trace.counts)
    invocations = trace.counts.sum(axis=1).astype(np.float64)
    mean, spread = _exec_mix(app_of, n_apps, exec_s, invocations)
    has = _models_of(app_of, model_of, n_apps, len(functions))
    weights_gib = np.array([f.weight_bytes / GIB for f in functions])
    working = np.array([f.memory_gib for f in functions]) - weights_gib
    memory = has @ weights_gib + np.max(has * working, axis=1)
    big = int(np.argmax(memory))
    if memory[big] > usable_gib(gpu.memory_gib):  # the one rule: what an instance can fill
        served = [f.model for f, h in zip(functions, has[big], strict=True) if h]
        raise InvalidSpecError(
            "unit",
            f"app {names[big]} serves {', '.join(served)}: {memory[big]:.1f} GiB held warm "
            f"together, more than a {gpu.name}'s {usable_text(gpu.memory_gib)}",
            fix="give --unit function (each function its own instance), fewer --models or a "
            "GPU with more memory",
        )
    colds = [f.cold_start for f in functions]
    container = np.array([c.container_s if c is not None else 0.0 for c in colds])
    context = np.array([c.cuda_context_s if c is not None else 0.0 for c in colds])
    own = np.array([f.cold_start_s for f in functions]) - container - context
    cold = np.max(has * container, axis=1) + np.max(has * context, axis=1) + has @ own
    weight_bytes = np.array([float(f.weight_bytes) for f in functions])
    return AppUnits(
        names=names,
        counts=counts,
        app_of=app_of,
        exec_s=mean,
        exec_spread=spread,
        cold_s=cold,
        memory_gib=memory,
        swap_s=has @ weight_bytes / (pcie_gbs * 1e9),
        models=tuple(
            tuple(f.model for f, h in zip(functions, row, strict=True) if h) for row in has
        ),
        host_memory_mb=host_memory_mb(trace, names),
    )


def host_memory_mb(trace: ServerlessTrace, names: tuple[str, ...]) -> FloatArray:
    """Each app's ``AverageAllocatedMb`` in the trace's memory file (NaN: none)."""
    if trace.memory is None:
        return np.full(len(names), np.nan)
    apps = trace.memory.apps
    mb = dict(zip(apps["owner"] + "/" + apps["app"], apps["average_mb"], strict=True))
    return np.array([mb.get(n, np.nan) for n in names], dtype=np.float64)


def app_summary(trace: ServerlessTrace, model_of: IntArray, n_models: int) -> dict[str, Any]:
    """The trace's applications: how many, their functions, the apps loading several models
    (``model_of``: each function's model), and their memory (the memory file's
    ``AverageAllocatedMb`` over the apps of the trace: percentiles, total; and the median
    over apps of each of its percentile columns) or None without a memory file."""
    from gpucast.store.datasets.azure_functions import MEMORY_PERCENTILES

    names, app_of = app_index(trace.apps)
    per_app = np.bincount(app_of, minlength=len(names))
    models = _models_of(app_of, model_of, len(names), n_models).sum(axis=1)
    out: dict[str, Any] = {
        "apps": len(names),
        "functions": int(app_of.size),
        "functions_per_app_mean": float(per_app.mean()),
        "functions_per_app_max": int(per_app.max()),
        "single_function_app_share": float((per_app == 1).mean()),
        "apps_with_several_models": int((models > 1).sum()),
        "memory": None,
    }
    if trace.memory is None:
        return out
    frame = trace.memory.apps
    keys = frame["owner"] + "/" + frame["app"]
    here = keys.isin(set(names)).to_numpy()
    mine = frame[here]
    memory: dict[str, Any] = {
        "file": trace.memory_file,
        "apps_with_row": int(here.sum()),
        "apps_without_row": len(names) - int(here.sum()),
        "rows_of_other_apps": int((~here).sum()),
        "average_allocated_mb": None,
        "median_over_apps_mb": None,
    }
    if len(mine):
        average = mine["average_mb"].to_numpy(dtype=np.float64)
        memory["average_allocated_mb"] = {
            **{
                f"p{q:g}": float(v)
                for q, v in zip(
                    SUMMARY_PERCENTILES, np.percentile(average, SUMMARY_PERCENTILES), strict=True
                )
            },
            "max": float(average.max()),
            "total": float(average.sum()),
        }
        memory["median_over_apps_mb"] = {
            f"pct{p}": float(np.median(mine[f"pct{p}_mb"].to_numpy(dtype=np.float64)))
            for p in MEMORY_PERCENTILES
        }
    out["memory"] = memory
    return out
