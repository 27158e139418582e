"""Per-operator and per-kernel times of a step, under ``torch.profiler`` (``--kernels``).

After the harness has timed a step (so the step is warm), :func:`record_kernels` runs
``steps`` more under ``torch.profiler.profile`` (CPU activity; CUDA activity too on a GPU,
``record_shapes=True``) and, at the same time, under a ``TorchDispatchMode`` that sees every
aten operator call with its real tensors. For each call the mode

* computes the hardware-independent features with the profiler package's own rules
  (:func:`gpucast.profile.profiler.op_cost`: FLOPs from ``torch.utils.flop_counter`` and
  gpucast's extra formulas, bytes of the distinct tensors read and written from their shapes
  and dtypes, the operator class), and
* wraps the call in ``torch.profiler.record_function("gpucast.op#<n>")``, so that the
  profiler's event for that label times exactly this call: its inclusive CPU time (the aten
  op and everything it dispatched to, e.g. ``convolution`` -> ``mkldnn_convolution``) and,
  on a GPU, the device time of the kernels it launched, with their names.

Calls with the same op, input shapes and dtype are one :class:`OperatorRecord` (calls per
step, mean time per call). What the operators do not cover (Python, the autograd engine's
bookkeeping, the optimizer's loop) is the step's overhead, which the kernel model fits per
step. The profiler does not report a CUDA kernel's grid and block through its Python events,
so ``launch`` stays empty; the dispatch mode's Python cost lies between the timed calls, not
inside them.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.kernels import KernelTrace, OperatorRecord, kernel_op_class
from gpucast.profile import flops as flop_formulas
from gpucast.profile.profiler import OpCost, op_cost

_LABEL = "gpucast.op#"


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str]:
    leaves, _ = tree_flatten((args, kwargs))
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    shapes = ",".join("x".join(str(int(d)) for d in t.shape) or "scalar" for t in tensors)
    dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else "-"
    return shapes, dtype


class _CallRecorder(TorchDispatchMode):
    """Labels each aten call for the profiler and keeps its features by label number."""

    def __init__(
        self, formulas: dict[Any, Callable[..., int]], clock: Callable[[], float] | None
    ) -> None:
        super().__init__()
        self.formulas = formulas
        self.clock = clock
        self.calls: list[tuple[OpCost, str, str]] = []
        self.clocked: list[float] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        index = len(self.calls)
        clock = self.clock
        with torch.profiler.record_function(f"{_LABEL}{index}"):
            if clock is None:
                out = func(*args, **kwargs)
            else:
                started = clock()
                out = func(*args, **kwargs)
                self.clocked.append(clock() - started)
        cost = op_cost(func, args, kwargs, out, self.formulas)
        if cost is None:  # a view or metadata op: no time worth a record, no label kept
            self.calls.append((_NO_COST, "", ""))
        else:
            shapes, dtype = _signature(args, kwargs)
            self.calls.append((cost, shapes, dtype))
        return out


_NO_COST = OpCost(
    name="",
    op_class="other",
    flops=0,
    conv_flops=0,
    approx_uncounted_flops=0,
    bytes_read=0,
    bytes_written=0,
)


def _activities(device: torch.device) -> list[torch.profiler.ProfilerActivity]:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


def record_kernels(
    step: Callable[[], object],
    device: torch.device,
    *,
    steps: int = 3,
    label: str = "cpu",
    clock: Callable[[], float] | None = None,
) -> KernelTrace:
    """Run ``step`` ``steps`` times under the profiler and return its operators' times.

    ``step`` must already be warm (the harness has run it). On a GPU the per-call time is the
    device time of the kernels the call launched; on the CPU the profiler's inclusive
    duration of the call, or, with ``clock`` (e.g. ``time.process_time``: ``--timer cpu``),
    that clock read around the same call -- CPU time does not count the turns other
    processes take on a shared machine.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InvalidSpecError("kernel-steps", "must be an integer >= 1", got=steps)
    on_gpu = device.type == "cuda"
    recorder = _CallRecorder(flop_formulas.registry(), None if on_gpu else clock)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    sync()
    step_clock = clock if clock is not None and not on_gpu else time.perf_counter
    with torch.profiler.profile(activities=_activities(device), record_shapes=True) as prof:
        started = step_clock()
        for _ in range(steps):
            with recorder:
                step()
        sync()
        wall_s = step_clock() - started
    # label number -> (time s, kernel names)
    timed: dict[int, tuple[float, tuple[str, ...]]] = {}
    for event in prof.events():
        name = event.name
        if not name.startswith(_LABEL):
            continue
        with contextlib.suppress(ValueError):
            index = int(name[len(_LABEL) :])
            if on_gpu:
                kernels = tuple(
                    sorted({k.name for child in _subtree(event) for k in child.kernels})
                )
                timed[index] = (event.device_time_total * 1e-6, kernels)
            elif recorder.clock is not None:
                timed[index] = (recorder.clocked[index], ())
            else:
                timed[index] = (event.cpu_time_total * 1e-6, ())
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(lambda: [None, 0, 0.0, set()])
    for index, (cost, shapes, dtype) in enumerate(recorder.calls):
        if not cost.name or index not in timed:
            continue
        time_s, kernels = timed[index]
        group = groups[(cost.name, shapes, dtype)]
        group[0] = cost
        group[1] += 1
        group[2] += time_s
        group[3].update(kernels)
    records = tuple(
        OperatorRecord(
            name=f"aten.{name}",
            op_class=kernel_op_class(cost.op_class, name),
            input_shapes=shapes,
            dtype=dtype,
            calls_per_step=calls / steps,
            time_s_per_call=total_s / calls,
            flops=cost.flops + cost.approx_uncounted_flops,
            bytes_read=cost.bytes_read,
            bytes_written=cost.bytes_written,
            kernels=tuple(sorted(kernels)),
        )
        for (name, shapes, dtype), (cost, calls, total_s, kernels) in groups.items()
    )
    return KernelTrace(
        device=label,
        activity="cuda" if on_gpu else "cpu",
        steps=steps,
        profiled_step_s=wall_s / steps,
        operators=records,
        timer="cpu" if recorder.clock is not None else "wall",
    )


def _subtree(event: Any) -> list[Any]:
    out, todo = [], [event]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(current.cpu_children)
    return out
