"""``measure()`` end to end: real PyTorch steps on the CPU (GPU tests when CUDA is present)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from gpucast.domain.errors import (
    DeviceUnavailableError,
    InvalidSpecError,
    MeasurementError,
    UnknownWorkloadError,
)
from gpucast.domain.measurement import Measurement
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure import Progress, StoppingRule, measure, measure_runner
from gpucast.measure.telemetry import TelemetrySample
from gpucast.workloads.base import Batch, Workload

QUICK: dict[str, Any] = {"max_time_s": 0.5, "min_samples": 5, "telemetry": False}


def tiny_workload(*, fail: bool = False) -> Workload:
    """A two-layer perceptron built directly from the Workload interface."""

    def build_model(device: torch.device) -> nn.Module:
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        width = 17 if fail else 16  # a shape mismatch makes every step raise
        x = torch.randn(batch_size, width, device=device)
        return (x,), torch.randint(0, 4, (batch_size,), device=device)

    def loss(output: Any, target: Any) -> torch.Tensor:
        return nn.functional.cross_entropy(output, target)

    return Workload(
        name="tiny",
        family="mlp",
        sample_unit="samples",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
    )


def test_measures_a_custom_workload_on_cpu() -> None:
    spec = WorkloadSpec(name="tiny", batch_size=8)
    m = measure(spec, mode="train", device="cpu", workload=tiny_workload(), **QUICK)
    assert isinstance(m, Measurement)
    assert m.spec == spec and m.mode == "train" and m.device == "cpu"
    assert m.n_samples >= 5 and m.n_warmup >= 1
    assert m.samples_per_step == 8
    assert m.stop_reason in ("ci_reached", "time_budget")
    assert all(t > 0 for t in m.step_times_s)
    assert m.telemetry is None
    env = m.environment
    assert env.torch_version == torch.__version__ and env.cpu_cores >= 1 and env.host
    assert env.gpu_name is None


def test_measures_the_registered_mlp_in_both_modes() -> None:
    spec = WorkloadSpec(name="mlp", batch_size=4)
    train = measure(spec, mode="train", device="cpu", **QUICK)
    infer = measure(spec, mode="infer", device="cpu", **QUICK)
    assert train.workload == infer.workload == "mlp"
    assert (train.mode, infer.mode) == ("train", "infer")
    # (no claim that a training step is slower: step times on a shared machine are not
    # evidence of anything; tests/workloads/test_workload_steps.py checks that a train step
    # updates the weights and an infer step does not)
    assert train.n_samples >= QUICK["min_samples"] and infer.n_samples >= QUICK["min_samples"]


def test_injected_clock_drives_the_whole_run() -> None:
    ticks = itertools.count(start=0.0, step=0.25)
    m = measure(
        WorkloadSpec(name="tiny", batch_size=2),
        workload=tiny_workload(),
        clock=lambda: next(ticks),
        min_samples=6,
        max_time_s=1e6,
        telemetry=False,
    )
    # every step spans exactly one tick of the fake clock: zero variance, stop at min_samples
    assert m.step_times_s == (0.25,) * 6
    assert m.stop_reason == "ci_reached"
    assert m.samples_per_s == pytest.approx(2 / 0.25)


def test_measure_runner_accepts_any_step() -> None:
    calls = []

    class Runner:
        samples_per_step = 3

        def __call__(self) -> None:
            calls.append(1)
            torch.ones(64, 64) @ torch.ones(64, 64)

    m = measure_runner(
        Runner(),
        spec=WorkloadSpec(name="matmul", batch_size=3),
        mode="infer",
        device="cpu",
        rule=StoppingRule(max_time_s=0.3, min_samples=4),
    )
    assert len(calls) == m.n_samples + m.n_warmup


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"target_ci": -1.0}, InvalidSpecError, "target_ci"),
        ({"max_time_s": 0.0}, InvalidSpecError, "max_time_s"),
        ({"min_samples": 1}, InvalidSpecError, "min_samples"),
        ({"mode": "serve"}, InvalidSpecError, "mode"),
        ({"device": "tpu"}, InvalidSpecError, "device"),
    ],
)
def test_bad_input_fails_before_any_model_is_built(
    kwargs: dict[str, Any], error: type[Exception], text: str
) -> None:
    built = []

    def build_model(device: torch.device) -> nn.Module:
        built.append(device)
        raise AssertionError("must not build")

    workload = Workload(
        name="never", family="mlp", sample_unit="samples", build_model=build_model,
        make_batch=tiny_workload().make_batch, loss=tiny_workload().loss,
    )  # fmt: skip
    with pytest.raises(error, match=text):
        measure(WorkloadSpec(name="never", batch_size=1), workload=workload, **kwargs)
    assert built == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_cpu_machine() -> None:
    with pytest.raises(DeviceUnavailableError, match="--device cpu"):
        measure(WorkloadSpec(name="mlp", batch_size=1), device="cuda", **QUICK)


def test_unknown_workload_lists_close_matches() -> None:
    with pytest.raises(UnknownWorkloadError, match="mlp"):
        measure(WorkloadSpec(name="mpl", batch_size=1), **QUICK)


def test_a_crashing_step_becomes_one_measurement_error() -> None:
    with pytest.raises(MeasurementError, match=r"train step of tiny at batch size 2 on cpu failed"):
        measure(WorkloadSpec(name="tiny", batch_size=2), workload=tiny_workload(fail=True), **QUICK)


@pytest.mark.gpu
def test_measures_on_the_gpu_with_telemetry() -> None:
    spec = WorkloadSpec(name="mlp", batch_size=64)
    m = measure(spec, mode="train", device="cuda", max_time_s=3.0)
    assert m.device == "cuda:0"
    assert m.environment.gpu_name
    assert m.environment.cuda_version
    assert m.n_samples >= 10
    if m.telemetry is not None:  # NVML present
        assert m.telemetry.n_samples >= 1
        assert m.telemetry.memory_used_max_bytes and m.telemetry.memory_used_max_bytes > 0


@pytest.mark.gpu
def test_gpu_precisions_run() -> None:
    for precision in ("bf16", "fp16"):
        spec = WorkloadSpec(name="mlp", batch_size=64, precision=precision)  # type: ignore[arg-type]
        m = measure(spec, mode="train", device="cuda", max_time_s=1.0, telemetry=False)
        assert m.spec.precision == precision


def test_telemetry_covers_the_measured_steps_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NVML wiring, with a fake reader standing in for the GPU."""
    phase = {"now": "warmup"}
    read_during: list[str] = []

    class FakeReader:
        closed = False

        def __call__(self) -> TelemetrySample:
            read_during.append(phase["now"])
            return TelemetrySample(gpu_util_pct=90.0, power_w=300.0)

        def close(self) -> None:
            FakeReader.closed = True

    import gpucast.measure.api as api

    monkeypatch.setattr(api, "open_nvml_reader", lambda device: FakeReader())

    class Runner:
        samples_per_step = 1

        def __call__(self) -> None:
            time.sleep(0.002)

    def track(p: Progress) -> None:
        phase["now"] = p.phase

    m = measure_runner(
        Runner(),
        spec=WorkloadSpec(name="sleep", batch_size=1),
        mode="infer",
        device="cpu",
        rule=StoppingRule(max_time_s=0.3, target_ci=1e-6),
        telemetry_interval_s=0.01,
        on_progress=track,
    )
    assert m.telemetry is not None
    assert m.telemetry.n_samples >= 3
    assert m.telemetry.gpu_util_mean_pct == 90.0 and m.telemetry.power_max_w == 300.0
    assert "warmup" not in read_during
    assert FakeReader.closed


def test_the_cpu_allocators_failure_reads_as_out_of_memory_with_the_fix() -> None:
    """Session 35 QA: `measure train --device cpu --batch-size 1e12` ended with the allocator's
    '[enforce fail at alloc_cpu.cpp] ... can't allocate memory' and no fix; GPU OOM names one."""
    from gpucast.measure.api import _translate_failures

    spec = WorkloadSpec(name="tiny", batch_size=10**12)
    failure = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
        "memory: you tried to allocate 32000000000000 bytes. Error code 12"
    )
    with (
        pytest.raises(
            MeasurementError, match=r"out of host memory in the train step.*--batch-size"
        ),
        _translate_failures(spec, "train", "cpu"),
    ):
        raise failure


def test_a_busy_host_is_said_on_a_cpu_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    """QA session 36: on a 2-core host at load ~4 an MLP step timed 170 ms at torch's 2 threads
    and 4 ms at 1; the result said nothing of the load (only that the CI was missed)."""
    import os

    from gpucast.measure.environment import busy_host_warning

    assert busy_host_warning(None, cores=2, threads=2) is None
    assert busy_host_warning(2.0, cores=2, threads=2) is None  # this run alone fills the host
    assert busy_host_warning(2.5, cores=2, threads=2) is None  # less than a task beside it
    busy = busy_host_warning(4.5, cores=2, threads=2)
    assert busy is not None and busy.startswith("the host was busy: load average 4.5 on 2 CPU")
    assert busy.endswith("or with --threads 1 --timer cpu")
    # QA 39: the advice named flags the run already had
    one_thread = busy_host_warning(4.5, cores=2, threads=1)
    assert one_thread is not None and one_thread.endswith("or with --timer cpu")
    given = busy_host_warning(4.5, cores=2, threads=1, cpu_time=True)
    assert given is not None and "--threads 1" not in given and "--timer cpu" not in given

    class Runner:
        samples_per_step = 1

        def __call__(self) -> None:
            torch.ones(16, 16) @ torch.ones(16, 16)

    def timed(clock: Callable[[], float] | None = None) -> tuple[str, ...]:
        return measure_runner(
            Runner(),
            spec=WorkloadSpec(name="matmul", batch_size=1),
            mode="infer",
            device="cpu",
            rule=StoppingRule(max_time_s=0.2, min_samples=3),
            clock=clock,
            telemetry=False,
        ).warnings

    cores = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (cores + 8.0, 0.0, 0.0))
    assert any(w.startswith("the host was busy") for w in timed())
    by_cpu_time = [w for w in timed(time.process_time) if w.startswith("the host was busy")]
    assert by_cpu_time and "--timer cpu" not in by_cpu_time[0]
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not any(w.startswith("the host was busy") for w in timed())


def test_a_batch_whose_inputs_exceed_the_device_is_refused_as_bad_input() -> None:
    """QA 38 I #21: a synthetic batch larger than the device's memory is a bad --batch-size
    (exit 2), found on ``meta`` before anything is allocated -- not a runtime OOM (exit 1)."""
    from gpucast.measure.devices import check_batch_fits, device_memory_bytes
    from gpucast.workloads import get_workload

    mlp, cpu = get_workload("mlp"), torch.device("cpu")
    with pytest.raises(InvalidSpecError, match=r"batch-size: .*synthetic batch alone") as info:
        measure(WorkloadSpec(name="mlp", batch_size=10**9), max_time_s=0.1, telemetry=False)
    assert info.value.exit_code == 2 and info.value.fix == "lower --batch-size"
    # the bound is the device's memory: a batch just under it passes, one above does not
    inputs, label = mlp.make_batch(1, torch.device("meta"))
    per_sample = sum(t.numel() * t.element_size() for t in (*inputs, label))
    fitting = int(device_memory_bytes(cpu) // per_sample)
    check_batch_fits(mlp, fitting, cpu, flag="batch-size")
    with pytest.raises(InvalidSpecError):
        check_batch_fits(mlp, fitting + 1, cpu, flag="batch-size")


@pytest.mark.parametrize(("mode", "step"), [("train", "a training step"), ("infer", "an infer")])
def test_a_cpu_step_beyond_the_hosts_memory_is_refused_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, mode: str, step: str
) -> None:
    """QA 40 C2: a batch whose inputs fit but whose step did not (mlp at 3,000,000 on a
    23.5 GiB host) was SIGKILLed by the OOM killer minutes later, exit 137 and no word. The
    profiler's estimate of the step's peak is checked first: one line, exit 2, how much fits."""
    from gpucast.measure import devices
    from gpucast.workloads import get_workload

    monkeypatch.setattr(devices, "device_memory_bytes", lambda device: 64 * 2**20)
    with pytest.raises(InvalidSpecError, match=rf"batch-size: .*needs about .* for {step}") as info:
        measure(WorkloadSpec(name="mlp", batch_size=16384), mode=mode, max_time_s=0.1)
    assert info.value.exit_code == 2 and "of memory on cpu" in info.value.message
    fits = int(info.value.fix.split("about ")[1].split(" fits")[0].replace(",", ""))
    assert 1 <= fits < 16384
    # the batch it says fits passes both checks; its inputs alone (3 KiB a sample) fit at 16384
    devices.check_batch_fits(
        get_workload("mlp"), fits, torch.device("cpu"), flag="batch-size", step=(mode, "fp32")
    )


def test_a_user_model_beyond_the_hosts_memory_is_refused_before_its_factory_builds_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """QA 41: `measure train` of a user factory building a 128 GiB MLP called the factory for
    real (the OS kills the process while its weights are initialised) and only then checked
    the step against the host's memory, whose fix said to lower a batch of 2. The check now
    runs on the factory's model built on ``meta``; the factory runs for real only for a step
    that fits."""
    from gpucast.measure import devices

    factory = Path(__file__).resolve().parents[1] / "profile" / "user_models.py"
    built_on = tmp_path / "built_on"
    monkeypatch.setenv("BUILT_ON", str(built_on))
    monkeypatch.setattr(devices, "device_memory_bytes", lambda device: 64.0)  # bytes
    spec = WorkloadSpec(name=f"{factory}:records_device", batch_size=2)
    with pytest.raises(InvalidSpecError, match=r"batch-size: .*needs about") as info:
        measure(spec, **QUICK)
    assert built_on.read_text().split() == ["meta"]
    assert info.value.fix.startswith("no batch fits")  # not "lower --batch-size" (of 2)
    monkeypatch.undo()
    monkeypatch.setenv("BUILT_ON", str(built_on))
    measure(spec, **QUICK)  # fits: checked on meta, then built once for real
    assert built_on.read_text().split() == ["meta", "meta", "cpu"]
