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


def test_each_call_is_replayed_to_meter_its_power_and_the_step_is_untouched() -> None:
    import time
    from pathlib import Path

    # a stand-in meter: 25 W, read off the same clock as the replay's time
    def meter() -> float:
        return 25.0 * time.perf_counter()

    model, step = _linear_step(torch.device("cpu"))
    trace = record_kernels(
        step, torch.device("cpu"), steps=1, energy=meter, energy_source="test",
        energy_window_s=0.002,
    )  # fmt: skip
    assert trace.energy_source == "test" and trace.energy_note == ""
    assert all(op.power_w == pytest.approx(25.0, rel=0.05) for op in trace.operators)
    energy = trace.energy_j_per_step
    assert energy == pytest.approx(25.0 * trace.operator_time_s_per_step, rel=0.05)
    # the replays ran on clones: the weights are those of the same steps without replay
    twin, twin_step = _linear_step(torch.device("cpu"))
    record_kernels(twin_step, torch.device("cpu"), steps=1)
    twin_step()  # the replay pass ran one more step
    assert torch.equal(model.weight, twin.weight)
    # no RAPL (this container) or an unreadable one: a one-line note, no counter
    from gpucast.measure.kernels import open_energy_counter

    counter, source, note = open_energy_counter(torch.device("cpu"), powercap_root=Path("/none"))
    assert counter is None and source == "" and "RAPL" in note and "\n" not in note


def test_a_readable_rapl_powercap_gives_a_counter(tmp_path) -> None:
    from gpucast.measure.kernels import open_energy_counter

    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("1000000\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    counter, source, note = open_energy_counter(torch.device("cpu"), powercap_root=tmp_path)
    assert counter is not None and source == "rapl" and note == ""
    (zone / "energy_uj").write_text("3500000\n")
    assert counter() == pytest.approx(2.5)


@pytest.mark.skipif(
    not any(
        p.name.count(":") == 1 and (p / "energy_uj").exists()
        for p in __import__("pathlib").Path("/sys/class/powercap").glob("intel-rapl:*")
    ),
    reason="no RAPL powercap in this machine or container (/sys/class/powercap): CPU energy "
    "per operator cannot be read here",
)
def test_real_rapl_energy_per_operator() -> None:  # pragma: no cover - needs RAPL
    from gpucast.measure.kernels import open_energy_counter

    counter, source, note = open_energy_counter(torch.device("cpu"))
    if counter is None:
        pytest.skip(note)
    _, step = _linear_step(torch.device("cpu"))
    trace = record_kernels(step, torch.device("cpu"), steps=1, energy=counter, energy_source=source)
    powers = [op.power_w for op in trace.operators if op.power_w is not None]
    assert powers and all(0 < p < 2000 for p in powers)


def test_the_profiler_prints_no_kineto_lines_on_a_cpu(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 39 O #14: `measure train --kernels` printed kineto's `USDT: ... profiler_start` /
    `profiler_stop` lines on stderr; the environment is as it was after."""
    import os

    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    _, step = _linear_step(torch.device("cpu"))
    record_kernels(step, torch.device("cpu"), steps=1)
    assert "profiler_st" not in capfd.readouterr().err
    assert "KINETO_LOG_LEVEL" not in os.environ
