"""Per-operator (CPU) and per-kernel (GPU) times of a measured step, with their features.

``gpucast measure train|infer --kernels`` runs a few extra steps under ``torch.profiler``
(:mod:`gpucast.measure.kernels`) and keeps one :class:`OperatorRecord` per distinct aten
operator call (name, input shapes and dtype): how often it runs per step, its time, and
hardware-independent features -- FLOPs, bytes read and written, arithmetic intensity, class.
The store keeps the :class:`KernelTrace` with the run (table ``kernel_traces``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpucast.domain.errors import InvalidInputError

#: Operator classes of a kernel trace (the profiler's ``matmul_conv`` split in two).
KERNEL_OP_CLASSES: tuple[str, ...] = (
    "matmul",
    "conv",
    "elementwise",
    "reduction",
    "norm",
    "embedding",
    "other",
)
_FROM_PROFILE_CLASS = {"normalization": "norm"}


def kernel_op_class(profile_class: str, name: str) -> str:
    """The trace class of an op the profiler put in ``profile_class`` (``matmul_conv`` is
    split into ``conv`` for convolutions and ``matmul`` for the rest)."""
    if profile_class == "matmul_conv":
        return "conv" if "convolution" in name else "matmul"
    return _FROM_PROFILE_CLASS.get(profile_class, profile_class)


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorRecord:
    """One distinct operator call of a step: an aten op at one input signature."""

    name: str  # e.g. "aten.convolution"
    op_class: str  # one of KERNEL_OP_CLASSES
    input_shapes: str  # e.g. "32x3x32x32,16x3x3x3"
    dtype: str  # dtype of the first tensor input, e.g. "float32"
    calls_per_step: float
    time_s_per_call: float  # mean over the profiled calls
    flops: int  # per call (counted by flop_counter; else one per element for arithmetic)
    bytes_read: int  # per call, distinct tensors
    bytes_written: int
    #: CUDA kernels the op launched (empty on the CPU) and their launch shape where the
    #: profiler reports one ("" otherwise)
    kernels: tuple[str, ...] = ()
    launch: str = ""
    #: energy of one call (J): the power the device drew while the call was replayed on its
    #: own (RAPL on a CPU, NVML on a GPU) times ``time_s_per_call``; ``None`` without a
    #: power reading or for a call not replayed
    energy_j_per_call: float | None = None

    def __post_init__(self) -> None:
        if self.op_class not in KERNEL_OP_CLASSES:
            raise InvalidInputError(
                f"operator {self.name}: op_class {self.op_class!r} is not one of "
                f"{', '.join(KERNEL_OP_CLASSES)}",
                fix="re-measure with --kernels",
            )
        for field, value in (
            ("calls_per_step", self.calls_per_step),
            ("time_s_per_call", self.time_s_per_call),
            ("flops", self.flops),
            ("bytes_read", self.bytes_read),
            ("bytes_written", self.bytes_written),
        ):
            if not (math.isfinite(value) and value >= 0):
                raise InvalidInputError(
                    f"operator {self.name}: {field} must be a finite number >= 0 (got {value})",
                    fix="re-measure with --kernels",
                )
        energy = self.energy_j_per_call
        if energy is not None and not (math.isfinite(energy) and energy >= 0):
            raise InvalidInputError(
                f"operator {self.name}: energy_j_per_call must be a finite number >= 0 "
                f"(got {energy})",
                fix="re-measure with --kernels",
            )

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity_flop_per_byte(self) -> float:
        """FLOPs per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0

    @property
    def time_s_per_step(self) -> float:
        return self.time_s_per_call * self.calls_per_step

    @property
    def power_w(self) -> float | None:
        """Mean power while the call runs (W), or ``None`` without an energy reading."""
        if self.energy_j_per_call is None or self.time_s_per_call <= 0:
            return None
        return self.energy_j_per_call / self.time_s_per_call

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_class": self.op_class,
            "input_shapes": self.input_shapes,
            "dtype": self.dtype,
            "calls_per_step": self.calls_per_step,
            "time_s_per_call": self.time_s_per_call,
            "flops": self.flops,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "arithmetic_intensity_flop_per_byte": self.arithmetic_intensity_flop_per_byte,
            "kernels": list(self.kernels),
            "launch": self.launch,
            "energy_j_per_call": self.energy_j_per_call,
            "power_w": self.power_w,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OperatorRecord:
        try:
            return cls(
                name=str(data["name"]),
                op_class=str(data["op_class"]),
                input_shapes=str(data["input_shapes"]),
                dtype=str(data["dtype"]),
                calls_per_step=float(data["calls_per_step"]),
                time_s_per_call=float(data["time_s_per_call"]),
                flops=int(data["flops"]),
                bytes_read=int(data["bytes_read"]),
                bytes_written=int(data["bytes_written"]),
                kernels=tuple(str(k) for k in data.get("kernels", ())),
                launch=str(data.get("launch", "")),
                energy_j_per_call=None
                if data.get("energy_j_per_call") is None
                else float(data["energy_j_per_call"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"a stored operator record is malformed ({type(exc).__name__}: {exc})",
                fix="re-measure with --kernels",
            ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelTrace:
    """The operators of one measured step, from ``steps`` profiled steps on ``device``."""

    device: str  # "cpu" or "cuda:N"
    activity: str  # "cpu" (operator times) or "cuda" (kernel times on the device)
    steps: int
    #: time of a profiled step on the trace's clock (profiler and recording overhead included)
    profiled_step_s: float
    operators: tuple[OperatorRecord, ...]
    #: what timed the CPU operator calls: "wall" (the profiler's durations) or "cpu" (the
    #: process's CPU time around each call, ``--timer cpu``); GPU kernels are device time
    timer: str = "wall"
    #: what read the operators' energy: "rapl" (CPU packages), "nvml" (the GPU board), or ""
    #: (none; ``energy_note`` says why)
    energy_source: str = ""
    energy_note: str = ""

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise InvalidInputError(
                f"kernel trace: steps must be >= 1 (got {self.steps})", fix="re-measure"
            )

    @property
    def operator_time_s_per_step(self) -> float:
        """Time of every operator of one step, summed."""
        return math.fsum(op.time_s_per_step for op in self.operators)

    @property
    def calls_per_step(self) -> float:
        return math.fsum(op.calls_per_step for op in self.operators)

    @property
    def energy_j_per_step(self) -> float | None:
        """Energy of every operator of one step (J), or ``None`` unless each has one."""
        if not self.operators or any(op.energy_j_per_call is None for op in self.operators):
            return None
        return math.fsum((op.energy_j_per_call or 0.0) * op.calls_per_step for op in self.operators)

    def by_class(self) -> dict[str, tuple[float, float]]:
        """op class -> (calls per step, seconds per step), every class listed."""
        out = {c: (0.0, 0.0) for c in KERNEL_OP_CLASSES}
        for op in self.operators:
            calls, time_s = out[op.op_class]
            out[op.op_class] = (calls + op.calls_per_step, time_s + op.time_s_per_step)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "activity": self.activity,
            "steps": self.steps,
            "profiled_step_s": self.profiled_step_s,
            "timer": self.timer,
            "energy_source": self.energy_source,
            "energy_note": self.energy_note,
            "energy_j_per_step": self.energy_j_per_step,
            "operator_time_s_per_step": self.operator_time_s_per_step,
            "operators": [op.to_dict() for op in self.operators],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelTrace:
        try:
            return cls(
                device=str(data["device"]),
                activity=str(data["activity"]),
                steps=int(data["steps"]),
                profiled_step_s=float(data["profiled_step_s"]),
                operators=tuple(OperatorRecord.from_dict(o) for o in data["operators"]),
                timer=str(data.get("timer", "wall")),
                energy_source=str(data.get("energy_source", "")),
                energy_note=str(data.get("energy_note", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"a stored kernel trace is malformed ({type(exc).__name__}: {exc})",
                fix="re-measure with --kernels",
            ) from None
