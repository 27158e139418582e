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

Energy (``energy=``, a cumulative joule counter: RAPL on a CPU, NVML on a GPU, opened by
:func:`open_energy_counter`): after the profiled steps, one more step runs under a second
dispatch mode that *replays* each distinct call -- on clones of its inputs, so the step's own
tensors are untouched -- in a loop for at least ``energy_window_s``, reading the counter
before and after (Braun et al. measure each kernel's power the same way: a sensor too slow for
one call sees a call repeated). Power is that energy over the replay's time; the record's
``energy_j_per_call`` is that power times the call's profiled time. The counters measure a
whole package or board, so the power includes its idle draw. Calls are replayed largest
first, at most ``energy_max_ops`` of them within ``energy_budget_s``; the others have no energy.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.kernels import KernelTrace, OperatorRecord, kernel_op_class
from gpucast.measure.energy import (
    NO_NVML_ENERGY_COUNTER,
    POWERCAP_ROOT,
    CounterJ,
    no_rapl_reason,
    nvml_energy_counter,
    open_rapl,
)
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


GroupKey = tuple[str, str, str]  # (aten op name, input shapes, dtype)
#: Replay window per call: RAPL counts in ~61 uJ steps about every millisecond; NVML's board
#: counter updates far less often, so a GPU call is replayed for longer.
CPU_ENERGY_WINDOW_S = 0.05
GPU_ENERGY_WINDOW_S = 0.5


def open_energy_counter(
    device: torch.device, *, powercap_root: Path = POWERCAP_ROOT
) -> tuple[CounterJ | None, str, str]:
    """(cumulative joule counter, source, note) for ``device``: NVML's board energy on a GPU,
    the CPU packages' RAPL counters on the CPU; without one, ``None``, ``""`` and a one-line
    note that says why."""
    if device.type == "cuda":
        from gpucast.measure.telemetry import open_nvml_reader

        reader = open_nvml_reader(device)
        counter = (
            None
            if reader is None
            else nvml_energy_counter(getattr(reader, "nvml", None), getattr(reader, "handle", None))
        )
        if counter is not None:
            return counter, "nvml", ""
        return None, "", f"energy per kernel not recorded: {NO_NVML_ENERGY_COUNTER}"
    rapl, note = open_rapl(powercap_root)
    if rapl is not None:
        return rapl, "rapl", ""
    return (
        None,
        "",
        (
            note.replace("CPU energy", "energy per operator", 1)
            if note
            else f"energy per operator not recorded: {no_rapl_reason(powercap_root)}"
        ),
    )


def _detached_clone(value: Any) -> Any:
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


class _EnergyReplayer(TorchDispatchMode):
    """Replays each wanted call on clones of its inputs and meters it (module docstring)."""

    def __init__(
        self,
        wanted: list[GroupKey],
        formulas: dict[Any, Callable[..., int]],
        counter: CounterJ,
        *,
        sync: Callable[[], None],
        window_s: float,
        budget_s: float,
        clock: Callable[[], float],
    ) -> None:
        super().__init__()
        self.wanted = set(wanted)
        self.signatures = {(shapes, dtype) for _, shapes, dtype in wanted}
        self.formulas = formulas
        self.counter = counter
        self.sync = sync
        self.window_s = window_s
        self.clock = clock
        self.deadline = clock() + budget_s
        self.power_w: dict[GroupKey, float] = {}

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        shapes, dtype = _signature(args, kwargs)
        if not self.wanted or (shapes, dtype) not in self.signatures:
            return func(*args, **kwargs)
        # the inputs as they were before the call (an in-place call changes them); no room
        # for a copy (device memory): the call runs unmetered
        leaves, spec = tree_flatten((args, kwargs))
        try:
            clones = [_detached_clone(x) for x in leaves]
        except Exception:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if self.clock() > self.deadline:
            return out
        cost = op_cost(func, args, kwargs, out, self.formulas)
        if cost is None:
            return out
        key = (cost.name, shapes, dtype)
        if key not in self.wanted:
            return out
        self.wanted.discard(key)
        r_args, r_kwargs = tree_unflatten(clones, spec)
        with contextlib.suppress(Exception):  # a call that cannot be replayed keeps no energy
            self.sync()
            e0, t0 = self.counter(), self.clock()
            calls, batch = 0, 1
            while True:
                for _ in range(batch):
                    func(*r_args, **r_kwargs)
                calls += batch
                self.sync()
                elapsed = self.clock() - t0
                if elapsed >= self.window_s:
                    break
                batch *= 2
            joules = self.counter() - e0
            if elapsed > 0 and joules >= 0:
                self.power_w[key] = joules / elapsed
        return out


@contextlib.contextmanager
def _quiet_kineto(quiet: bool) -> Iterator[None]:
    """Without kineto's "USDT: profiler_start/stop" lines on stderr (QA 39 O #14) when
    ``quiet`` (on a CPU: on a GPU kineto reports CUPTI errors at that level too); a level the
    user set wins, and the environment is restored after."""
    if not quiet or "KINETO_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["KINETO_LOG_LEVEL"] = "6"  # above every message kineto logs
    try:
        yield
    finally:
        os.environ.pop("KINETO_LOG_LEVEL", None)


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
    energy: CounterJ | None = None,
    energy_source: str = "",
    energy_note: str = "",
    energy_window_s: float | None = None,
    energy_max_ops: int = 256,
    energy_budget_s: float = 60.0,
    energy_clock: Callable[[], float] = time.perf_counter,
) -> KernelTrace:
    """Run ``step`` ``steps`` times under the profiler and return its operators' times.

    ``step`` must already be warm (the harness has run it). On a GPU the per-call time is the
    device time of the kernels the call launched; on the CPU the profiler's inclusive
    duration of the call, or, with ``clock`` (e.g. ``time.process_time``: ``--timer cpu``),
    that clock read around the same call -- CPU time does not count the turns other
    processes take on a shared machine. With ``energy`` (a cumulative joule counter), one
    more step replays the calls to meter their power (module docstring).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InvalidSpecError("kernel-steps", "must be an integer >= 1", got=steps)
    on_gpu = device.type == "cuda"
    recorder = _CallRecorder(flop_formulas.registry(), None if on_gpu else clock)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    sync()
    step_clock = clock if clock is not None and not on_gpu else time.perf_counter
    with (
        _quiet_kineto(not on_gpu),
        torch.profiler.profile(activities=_activities(device), record_shapes=True) as prof,
    ):
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
    groups: dict[GroupKey, list[Any]] = defaultdict(lambda: [None, 0, 0.0, set()])
    for index, (cost, shapes, dtype) in enumerate(recorder.calls):
        if not cost.name or index not in timed:
            continue
        time_s, kernels = timed[index]
        group = groups[(cost.name, shapes, dtype)]
        group[0] = cost
        group[1] += 1
        group[2] += time_s
        group[3].update(kernels)
    power: dict[GroupKey, float] = {}
    if energy is not None:
        largest = sorted(groups, key=lambda k: -groups[k][2])[: max(0, energy_max_ops)]
        replayer = _EnergyReplayer(
            largest,
            flop_formulas.registry(),
            energy,
            sync=sync,
            window_s=energy_window_s
            if energy_window_s is not None
            else (GPU_ENERGY_WINDOW_S if on_gpu else CPU_ENERGY_WINDOW_S),
            budget_s=energy_budget_s,
            clock=energy_clock,
        )
        with replayer:
            step()
        sync()
        power = replayer.power_w
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
            energy_j_per_call=None
            if (name, shapes, dtype) not in power
            else power[(name, shapes, dtype)] * total_s / calls,
        )
        for (name, shapes, dtype), (cost, calls, total_s, kernels) in groups.items()
    )
    if energy is not None and len(power) < len(records):
        energy_note = (
            f"{len(power)} of {len(records)} operator signatures have an energy reading "
            "(the others were not replayed: the replay budget or a call that cannot be re-run)"
        )
    return KernelTrace(
        device=label,
        activity="cuda" if on_gpu else "cpu",
        steps=steps,
        profiled_step_s=wall_s / steps,
        operators=records,
        timer="cpu" if recorder.clock is not None else "wall",
        energy_source=energy_source if power else "",
        energy_note=energy_note,
    )


def _subtree(event: Any) -> list[Any]:
    out, todo = [], [event]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(current.cpu_children)
    return out
