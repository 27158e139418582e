from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidInputError
from gpucast.domain.kernels import KernelTrace, OperatorRecord, kernel_op_class


def _op(name: str, op_class: str, calls: float, time_s: float) -> OperatorRecord:
    return OperatorRecord(
        name=name,
        op_class=op_class,
        input_shapes="4x4",
        dtype="float32",
        calls_per_step=calls,
        time_s_per_call=time_s,
        flops=100,
        bytes_read=40,
        bytes_written=10,
    )


def test_trace_sums_by_class_and_round_trips() -> None:
    trace = KernelTrace(
        device="cpu",
        activity="cpu",
        steps=2,
        profiled_step_s=1.0,
        operators=(_op("aten.mm", "matmul", 2, 0.1), _op("aten.relu", "elementwise", 1, 0.05)),
    )
    assert trace.operator_time_s_per_step == pytest.approx(0.25)
    assert trace.calls_per_step == 3
    assert trace.by_class()["matmul"] == (2, pytest.approx(0.2))
    assert trace.by_class()["conv"] == (0.0, 0.0)
    assert trace.operators[0].arithmetic_intensity_flop_per_byte == 2.0
    assert KernelTrace.from_dict(trace.to_dict()) == trace


def test_profile_classes_map_to_trace_classes() -> None:
    assert kernel_op_class("matmul_conv", "convolution_backward") == "conv"
    assert kernel_op_class("matmul_conv", "addmm") == "matmul"
    assert kernel_op_class("normalization", "native_batch_norm") == "norm"
    assert kernel_op_class("elementwise", "relu") == "elementwise"


def test_malformed_records_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="op_class"):
        _op("aten.mm", "gemm", 1, 0.1)
    with pytest.raises(InvalidInputError, match="time_s_per_call"):
        _op("aten.mm", "matmul", 1, float("nan"))
    with pytest.raises(InvalidInputError, match="malformed"):
        KernelTrace.from_dict({"device": "cpu"})
