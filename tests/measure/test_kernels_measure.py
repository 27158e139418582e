"""Per-operator times under torch.profiler (``--kernels``): features are exact, times real."""

from __future__ import annotations

import pytest
import torch

from gpucast.domain.errors import InvalidSpecError
from gpucast.measure.kernels import record_kernels


def _linear_step(device: torch.device) -> tuple[torch.nn.Module, object]:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32).to(device)
    x = torch.randn(16, 64, device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).relu().sum().backward()
        opt.step()

    step()
    return model, step


def test_a_training_step_records_every_operator_with_its_features() -> None:
    _, step = _linear_step(torch.device("cpu"))
    trace = record_kernels(step, torch.device("cpu"), steps=2)
    assert trace.activity == "cpu" and trace.steps == 2
    by_name = {op.name: op for op in trace.operators}
    forward = by_name["aten.addmm"]
    assert forward.op_class == "matmul"
    assert forward.flops == 2 * 16 * 64 * 32
    assert forward.calls_per_step == 1.0
    # bias (32) + input (16x64) + weight (64x32) read, output (16x32) written, fp32
    assert forward.bytes_read == 4 * (32 + 16 * 64 + 64 * 32)
    assert forward.bytes_written == 4 * 16 * 32
    assert forward.input_shapes == "32,16x64,64x32" and forward.dtype == "float32"
    # the weight gradient is one more matmul of the same size (backward ran under the mode)
    assert sum(op.flops * op.calls_per_step for op in trace.operators if op.name == "aten.mm") >= (
        2 * 16 * 64 * 32
    )
    assert {op.op_class for op in trace.operators} >= {"matmul", "elementwise", "reduction"}
    assert all(op.time_s_per_call > 0 for op in trace.operators)
    assert 0 < trace.operator_time_s_per_step <= trace.profiled_step_s


def test_steps_must_be_positive() -> None:
    _, step = _linear_step(torch.device("cpu"))
    with pytest.raises(InvalidSpecError, match="kernel-steps"):
        record_kernels(step, torch.device("cpu"), steps=0)


@pytest.mark.gpu
def test_on_a_gpu_the_kernels_are_timed_on_the_device() -> None:
    device = torch.device("cuda")
    _, step = _linear_step(device)
    trace = record_kernels(step, device, steps=2, label="cuda:0")
    assert trace.activity == "cuda"
    forward = next(op for op in trace.operators if op.name == "aten.addmm")
    assert forward.kernels, "the addmm call launched no CUDA kernel the profiler saw"
    assert forward.time_s_per_call > 0
    assert trace.operator_time_s_per_step <= trace.profiled_step_s


def test_an_injected_clock_times_each_call() -> None:
    ticks = iter(range(10**6))

    def clock() -> float:  # advances 1 ms per read: every call lasts exactly 1 ms
        return next(ticks) * 1e-3

    _, step = _linear_step(torch.device("cpu"))
    trace = record_kernels(step, torch.device("cpu"), steps=2, clock=clock)
    assert trace.timer == "cpu"
    assert all(op.time_s_per_call == pytest.approx(1e-3) for op in trace.operators)
