"""Synthetic operator traces for the kernel model's tests: a known per-call law."""

from __future__ import annotations

from gpucast.domain.kernels import KernelTrace, OperatorRecord
from gpucast.predict.kernels import KernelDevice, KernelObservation

CPU = KernelDevice(
    name="cpu",
    kind="cpu",
    peak_flops_per_s=8e10,
    memory_bandwidth_bytes_per_s=1e10,
    cores=1,
)
#: the law: a call costs its FLOPs at 25% of peak, its bytes at 50% of bandwidth, plus 5 us
DISPATCH_S = 5e-6


def call_time_s(flops: int, moved: int, device: KernelDevice = CPU) -> float:
    return (
        flops / (0.25 * device.peak_flops_per_s)
        + moved / (0.5 * device.memory_bandwidth_bytes_per_s)
        + DISPATCH_S
    )


#: the power law (W): an idle floor, more for compute-dense classes, rising with intensity
IDLE_W = 30.0
CLASS_W = {"conv": 60.0, "matmul": 50.0, "elementwise": 15.0, "norm": 20.0, "reduction": 10.0}


def call_power_w(op_class: str, flops: int, moved: int) -> float:
    intensity = (flops + 1.0) / (moved + 1.0)
    return IDLE_W + CLASS_W.get(op_class, 5.0) * min(1.0, intensity / 100.0) ** 0.5


def synthetic_trace(
    name: str, *, scale: float = 1.0, device: KernelDevice = CPU, energy: bool = True
) -> KernelTrace:
    ops = []
    for i, (op_class, flops, moved) in enumerate(
        (
            ("conv", 2e8, 4e6),
            ("conv", 8e8, 8e6),
            ("matmul", 5e7, 1e6),
            ("elementwise", 1e6, 8e6),
            ("elementwise", 2e5, 1.6e6),
            ("norm", 5e6, 8e6),
            ("reduction", 1e5, 4e5),
            ("other", 0, 2e6),
        )
    ):
        f, m = int(flops * scale), int(moved * scale)
        time_s = call_time_s(f, m, device)
        ops.append(
            OperatorRecord(
                name=f"aten.op{i}",
                op_class=op_class,
                input_shapes=f"{i}x{scale:g}",
                dtype="float32",
                calls_per_step=float(1 + i % 3),
                time_s_per_call=time_s,
                flops=f,
                bytes_read=m * 2 // 3,
                bytes_written=m - m * 2 // 3,
                energy_j_per_call=call_power_w(op_class, f, m) * time_s if energy else None,
            )
        )
    return KernelTrace(
        device=device.name, activity="cpu", steps=3, profiled_step_s=1.0, operators=tuple(ops)
    )


def synthetic_observations(overhead_s: float = 2e-3) -> list[KernelObservation]:
    out = []
    for i, scale in enumerate((0.25, 0.5, 1.0, 2.0, 4.0)):
        trace = synthetic_trace(f"m{i}", scale=scale)
        out.append(
            KernelObservation(
                workload=f"m{i}",
                device=CPU,
                trace=trace,
                step_time_s=trace.operator_time_s_per_step + overhead_s,
            )
        )
    return out
