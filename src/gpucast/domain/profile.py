"""The static profile of a workload: parameters, FLOPs, bytes moved, tensors and memory.

Produced by :func:`gpucast.profile.profile_workload`; consumed by the performance models
(FLOPs and bytes per step and per operator class for a roofline, gradient bytes and tensor
counts for communication) and stored as JSON through :meth:`WorkloadProfile.to_dict`.

Conventions: one FLOP is one floating-point add or multiply (a multiply-accumulate is 2);
``flops`` are what ``torch.utils.flop_counter`` counts (matrix multiplications, convolutions,
attention); ``approx_uncounted_flops`` is our estimate for the arithmetic it does not count
(one FLOP per element of the larger of an op's inputs or outputs). Bytes are the sizes of the
tensors an operator reads and writes (views move nothing). MiB = 2**20 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucast.domain.errors import DataFormatError

OPERATOR_CLASSES: tuple[str, ...] = (
    "matmul_conv",
    "elementwise",
    "normalization",
    "reduction",
    "embedding",
    "other",
)
PHASES: tuple[str, ...] = ("forward", "backward", "optimizer", "inference")
PROFILE_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorClassCost:
    """What the operators of one class cost in one phase of a step."""

    op_class: str
    calls: int
    flops: int
    approx_uncounted_flops: int
    bytes_read: int
    bytes_written: int
    #: the part of ``flops`` done by convolutions (``matmul_conv`` only; 0 in profiles written
    #: before it was recorded, which then price convolutions as matrix multiplications)
    conv_flops: int = 0

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity_flop_per_byte(self) -> float:
        """(counted + approximate uncounted FLOPs) per byte moved; 0 when nothing moves."""
        moved = self.bytes_moved
        return (self.flops + self.approx_uncounted_flops) / moved if moved else 0.0

    def __add__(self, other: OperatorClassCost) -> OperatorClassCost:
        if other.op_class != self.op_class:
            raise ValueError(f"cannot add {other.op_class} to {self.op_class}")
        return OperatorClassCost(
            op_class=self.op_class,
            calls=self.calls + other.calls,
            flops=self.flops + other.flops,
            approx_uncounted_flops=self.approx_uncounted_flops + other.approx_uncounted_flops,
            bytes_read=self.bytes_read + other.bytes_read,
            bytes_written=self.bytes_written + other.bytes_written,
            conv_flops=self.conv_flops + other.conv_flops,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "op_class": self.op_class,
            "calls": self.calls,
            "flops": self.flops,
            "approx_uncounted_flops": self.approx_uncounted_flops,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "conv_flops": self.conv_flops,
            "arithmetic_intensity_flop_per_byte": self.arithmetic_intensity_flop_per_byte,
        }

    @staticmethod
    def empty(op_class: str) -> OperatorClassCost:
        return OperatorClassCost(
            op_class=op_class,
            calls=0,
            flops=0,
            approx_uncounted_flops=0,
            bytes_read=0,
            bytes_written=0,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseCost:
    """One phase (forward, backward, optimizer step, inference forward) by operator class."""

    phase: str
    by_class: tuple[OperatorClassCost, ...]

    @property
    def flops(self) -> int:
        return sum(c.flops for c in self.by_class)

    @property
    def bytes_moved(self) -> int:
        return sum(c.bytes_moved for c in self.by_class)

    def cost(self, op_class: str) -> OperatorClassCost:
        for c in self.by_class:
            if c.op_class == op_class:
                return c
        return OperatorClassCost.empty(op_class)

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "by_class": [c.to_dict() for c in self.by_class]}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Bytes a step needs on the device, by what holds them.

    Weights, gradients and optimizer state are exact sizes of the tensors involved (fp32
    master weights under mixed precision); activations are the tensors autograd saves for the
    backward pass (including autocast's low-precision weight copies), the input batch is
    separate. ``train_peak_bytes`` adds them all: the peak at the end of the forward pass,
    before transient workspace. ``inference_peak_bytes`` is weights + inputs + the largest
    working set of one operator (its inputs and outputs) during an inference forward.
    """

    optimizer: str
    weights_bytes: int
    gradients_bytes: int
    optimizer_state_bytes: int
    activations_bytes: int
    inputs_bytes: int
    inference_working_bytes: int
    #: the model's inputs alone (the batch without its training target), as a request
    #: carries them: elements of its floating-point tensors (sent at the serving precision)
    #: and bytes of the others (token ids, indices, masks: their own size at any precision);
    #: None in a profile written before they were recorded
    model_input_float_elements: int | None = None
    model_input_other_bytes: int | None = None

    @property
    def train_peak_bytes(self) -> int:
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_state_bytes
            + self.activations_bytes
            + self.inputs_bytes
        )

    @property
    def inference_peak_bytes(self) -> int:
        return self.weights_bytes + self.inputs_bytes + self.inference_working_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer,
            "weights_bytes": self.weights_bytes,
            "gradients_bytes": self.gradients_bytes,
            "optimizer_state_bytes": self.optimizer_state_bytes,
            "activations_bytes": self.activations_bytes,
            "inputs_bytes": self.inputs_bytes,
            "inference_working_bytes": self.inference_working_bytes,
            "model_input_float_elements": self.model_input_float_elements,
            "model_input_other_bytes": self.model_input_other_bytes,
            "train_peak_bytes": self.train_peak_bytes,
            "inference_peak_bytes": self.inference_peak_bytes,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadProfile:
    """Static features of one workload at one batch size and precision (per step)."""

    workload: str
    batch_size: int
    precision: str
    parameters_total: int
    parameters_trainable: int
    parameter_tensors: int
    parameter_tensor_mean_mib: float
    parameter_tensor_max_mib: float
    gradient_bytes: int
    forward_flops: int
    backward_flops: int
    inference_flops: int
    phases: tuple[PhaseCost, ...]
    uncounted_ops: tuple[str, ...]
    memory: MemoryEstimate
    notes: tuple[str, ...] = field(default=())
    schema_version: int = PROFILE_SCHEMA_VERSION

    @property
    def forward_backward_flops(self) -> int:
        return self.forward_flops + self.backward_flops

    def phase(self, name: str) -> PhaseCost:
        for p in self.phases:
            if p.phase == name:
                return p
        raise KeyError(name)

    def train_step_by_class(self) -> tuple[OperatorClassCost, ...]:
        """Forward + backward + optimizer step, per operator class."""
        totals = {c: OperatorClassCost.empty(c) for c in OPERATOR_CLASSES}
        for p in self.phases:
            if p.phase == "inference":
                continue
            for cost in p.by_class:
                totals[cost.op_class] = totals[cost.op_class] + cost
        return tuple(totals.values())

    @property
    def train_step_bytes(self) -> int:
        return sum(c.bytes_moved for c in self.train_step_by_class())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "workload": self.workload,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "parameters_total": self.parameters_total,
            "parameters_trainable": self.parameters_trainable,
            "parameter_tensors": self.parameter_tensors,
            "parameter_tensor_mean_mib": self.parameter_tensor_mean_mib,
            "parameter_tensor_max_mib": self.parameter_tensor_max_mib,
            "gradient_bytes": self.gradient_bytes,
            "forward_flops": self.forward_flops,
            "backward_flops": self.backward_flops,
            "forward_backward_flops": self.forward_backward_flops,
            "inference_flops": self.inference_flops,
            "train_step_by_class": [c.to_dict() for c in self.train_step_by_class()],
            "phases": [p.to_dict() for p in self.phases],
            "uncounted_ops": list(self.uncounted_ops),
            "memory": self.memory.to_dict(),
            "notes": list(self.notes),
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> WorkloadProfile:
        """Inverse of :meth:`to_dict` (derived fields are recomputed, not read)."""
        version = data.get("schema_version")
        if version != PROFILE_SCHEMA_VERSION:
            raise DataFormatError(
                "profile",
                f"schema_version {version!r} is not {PROFILE_SCHEMA_VERSION}",
                fix="re-run gpucast profile with this version",
            )
        try:
            memory = dict(data["memory"])
            for derived in ("train_peak_bytes", "inference_peak_bytes"):
                memory.pop(derived, None)
            return WorkloadProfile(
                workload=data["workload"],
                batch_size=data["batch_size"],
                precision=data["precision"],
                parameters_total=data["parameters_total"],
                parameters_trainable=data["parameters_trainable"],
                parameter_tensors=data["parameter_tensors"],
                parameter_tensor_mean_mib=data["parameter_tensor_mean_mib"],
                parameter_tensor_max_mib=data["parameter_tensor_max_mib"],
                gradient_bytes=data["gradient_bytes"],
                forward_flops=data["forward_flops"],
                backward_flops=data["backward_flops"],
                inference_flops=data["inference_flops"],
                phases=tuple(
                    PhaseCost(
                        phase=p["phase"],
                        by_class=tuple(
                            OperatorClassCost(
                                **{
                                    k: v
                                    for k, v in c.items()
                                    if k != "arithmetic_intensity_flop_per_byte"
                                }
                            )
                            for c in p["by_class"]
                        ),
                    )
                    for p in data["phases"]
                ),
                uncounted_ops=tuple(data["uncounted_ops"]),
                memory=MemoryEstimate(**memory),
                notes=tuple(data.get("notes", ())),
            )
        except (KeyError, TypeError) as exc:
            raise DataFormatError("profile", f"missing or malformed field: {exc}") from None
