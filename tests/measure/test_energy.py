"""Energy counters (RAPL, NVML's energy counter) around the measured steps; power limits."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch

from gpucast.app.measure import MeasureTrainRequest, _power_sweep
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.measurement import EnergySummary, Measurement
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure import StoppingRule, measure_runner
from gpucast.measure.energy import (
    EnergyWindow,
    PowerLimitControl,
    RaplCounter,
    nvml_energy_counter,
    nvml_power_limit_w,
    open_power_limit_control,
    open_rapl,
)
from gpucast.store import Store


def _package(root: Path, index: int, energy_uj: int, *, wrap: int = 10**9) -> Path:
    zone = root / f"intel-rapl:{index}"
    zone.mkdir(parents=True)
    (zone / "name").write_text(f"package-{index}\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{wrap}\n")
    sub = root / f"intel-rapl:{index}:0"  # a core sub-zone: never counted twice
    sub.mkdir()
    (sub / "name").write_text("core\n")
    (sub / "energy_uj").write_text("5\n")
    return zone / "energy_uj"


def test_rapl_sums_packages_and_survives_a_wrap(tmp_path: Path) -> None:
    a = _package(tmp_path, 0, 1_000_000, wrap=2_000_000)
    b = _package(tmp_path, 1, 0)
    counter, note = open_rapl(tmp_path)
    assert isinstance(counter, RaplCounter) and note is None
    assert counter() == 0.0
    a.write_text("1500000\n")  # +0.5 J
    b.write_text("250000\n")  # +0.25 J
    assert counter() == pytest.approx(0.75)
    a.write_text("100000\n")  # wrapped at 2 J: +0.6 J
    assert counter() == pytest.approx(1.35)


def test_no_rapl_is_silent_and_unreadable_rapl_says_how_to_fix(tmp_path: Path) -> None:
    assert open_rapl(tmp_path / "absent") == (None, None)
    assert open_rapl(tmp_path) == (None, None)  # a powercap folder without packages
    _package(tmp_path, 0, 10)
    (tmp_path / "intel-rapl:0" / "energy_uj").unlink()
    (tmp_path / "intel-rapl:0" / "energy_uj").mkdir()  # unreadable as a number
    counter, note = open_rapl(tmp_path)
    assert counter is None and note is not None and "CPU energy not recorded" in note


def test_rapl_permission_denied_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, 0, 10)

    def denied(self: Path, *args: Any, **kwargs: Any) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(RaplCounter, "_raw", staticmethod(lambda d: denied(d.energy)))
    counter, note = open_rapl(tmp_path)
    assert counter is None and note is not None
    assert "not readable" in note and "chmod a+r" in note


def test_window_counts_the_measured_steps_only() -> None:
    gpu = iter([100.0, 160.0])
    cpu = iter([5.0, 9.0])
    clock = iter([10.0, 12.0])
    window = EnergyWindow(
        gpu=lambda: next(gpu), cpu=lambda: next(cpu), clock=lambda: next(clock), power_limit_w=250
    )
    assert window.stop(3) is None  # never started
    window.start()
    e = window.stop(4)
    assert e is not None
    assert (e.gpu_energy_j, e.gpu_method, e.cpu_energy_j, e.cpu_method) == (
        60.0,
        "nvml-counter",
        4.0,
        "rapl",
    )
    assert e.gpu_energy_j_per_step == 15.0 and e.gpu_avg_power_w == 30.0
    assert e.power_limit_w == 250


def test_window_falls_back_to_sampled_power_and_survives_a_failing_counter() -> None:
    clock = itertools.count(0.0, 2.0)
    calls = itertools.count()

    def flaky() -> float:
        if next(calls) > 0:
            raise OSError("gone")
        return 1.0

    window = EnergyWindow(gpu=None, cpu=flaky, clock=lambda: next(clock))
    window.start()
    e = window.stop(2, gpu_power_w=50.0)
    assert e is not None
    assert (e.gpu_energy_j, e.gpu_method) == (100.0, "power-sampling")
    assert e.cpu_energy_j is None and e.cpu_method is None
    assert any("counter failed" in w for w in window.warnings)


def test_energy_summary_checks_and_round_trips() -> None:
    e = EnergySummary(steps=2, elapsed_s=1.0, gpu_energy_j=3.0, gpu_method="nvml-counter")
    assert EnergySummary.from_dict(e.to_dict()) == e
    with pytest.raises(InvalidSpecError, match="goes with"):
        EnergySummary(steps=2, elapsed_s=1.0, gpu_energy_j=3.0)
    with pytest.raises(InvalidSpecError, match="must be >= 0"):
        EnergySummary(steps=2, elapsed_s=1.0, cpu_energy_j=-1.0, cpu_method="rapl")
    with pytest.raises(InvalidSpecError, match="must be one of"):
        EnergySummary(steps=2, elapsed_s=1.0, cpu_energy_j=1.0, cpu_method="guess")


class _Runner:
    samples_per_step = 4

    def __call__(self) -> None:
        torch.ones(32, 32) @ torch.ones(32, 32)


def test_a_cpu_measurement_records_rapl_energy_and_the_store_keeps_it(tmp_path: Path) -> None:
    counter_file = _package(tmp_path / "powercap", 0, 0)
    ticks = itertools.count(0, 7_000)

    class Runner(_Runner):
        def __call__(self) -> None:  # every step "burns" 7 mJ on the fake package
            super().__call__()
            counter_file.write_text(f"{next(ticks)}\n")

    m = measure_runner(
        Runner(),
        spec=WorkloadSpec(name="matmul", batch_size=4),
        mode="train",
        device="cpu",
        rule=StoppingRule(max_time_s=0.5, min_samples=4),
        powercap_root=tmp_path / "powercap",
    )
    assert m.energy is not None and m.energy.cpu_method == "rapl"
    assert m.energy.steps == m.n_samples
    assert m.energy.cpu_energy_j_per_step == pytest.approx(0.007, rel=0.01)
    assert m.energy.gpu_energy_j is None and m.energy.power_limit_w is None
    with Store(tmp_path / "s.db") as store:
        run = store.save_measurement(m)
        back = store.get_measurement(run)
    assert isinstance(back, Measurement) and back.energy == m.energy


def test_no_counters_no_energy_and_one_line_that_says_why(tmp_path: Path) -> None:
    spec = WorkloadSpec(name="matmul", batch_size=4)
    rule = StoppingRule(max_time_s=0.3, min_samples=3)
    kw: dict[str, Any] = {"spec": spec, "mode": "train", "device": "cpu", "rule": rule}
    m = measure_runner(_Runner(), **kw, powercap_root=tmp_path / "none")
    assert m.energy is None
    said = [w for w in m.warnings if "energy" in w]
    assert said == [
        f"energy not recorded: CPU: no readable RAPL powercap here ({tmp_path / 'none'} has no "
        "intel-rapl package domain)"
    ]
    _package(tmp_path / "locked", 0, 10)
    (tmp_path / "locked" / "intel-rapl:0" / "energy_uj").unlink()
    (tmp_path / "locked" / "intel-rapl:0" / "energy_uj").mkdir()  # unreadable
    locked = measure_runner(_Runner(), **kw, powercap_root=tmp_path / "locked")
    said = [w for w in locked.warnings if "energy" in w]
    assert len(said) == 1 and said[0].startswith("energy not recorded: CPU: RAPL unreadable")
    quiet = measure_runner(_Runner(), **kw, telemetry=False, powercap_root=tmp_path / "none")
    assert not any("energy" in w for w in quiet.warnings)  # none asked for


def test_why_a_gpu_has_no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from gpucast.measure.api import _unrecorded_energy
    from gpucast.measure.telemetry import nvml_unavailable_reason

    cuda = torch.device("cuda", 0)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert nvml_unavailable_reason(cuda) == "pynvml is not installed (pip install 'gpucast[nvml]')"
    broken = types.ModuleType("pynvml")

    def fail() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    broken.nvmlInit = fail  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    assert nvml_unavailable_reason(cuda) == (
        "NVML did not start (NVML Shared Library Not Found; check the NVIDIA driver)"
    )
    line = _unrecorded_energy(cuda, None, True, None, Path("/none"))
    assert line == (
        "energy not recorded: GPU: NVML did not start (NVML Shared Library Not Found; check the "
        "NVIDIA driver); CPU: no readable RAPL powercap here (/none has no intel-rapl package "
        "domain)"
    )
    with_reader = _unrecorded_energy(cuda, object(), False, None, Path("/none"))
    assert with_reader == (
        "energy not recorded: GPU: no NVML energy counter on this GPU and no sampled power"
    )


class FakeNvml:
    """NVML as the energy and power-limit code calls it (milliwatts, millijoules)."""

    def __init__(self, *, allow_set: bool = True, energy: bool = True) -> None:
        self.limit_mw = 250_000
        self.set_calls: list[int] = []
        self.allow_set, self.energy = allow_set, energy

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        if not self.energy:
            raise RuntimeError("NVMLError_NotSupported")
        return 123_456

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: object) -> int:
        return self.limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: object) -> tuple[int, int]:
        return 100_000, 300_000

    def nvmlDeviceGetPowerManagementLimit(self, handle: object) -> int:
        return self.limit_mw

    def nvmlDeviceSetPowerManagementLimit(self, handle: object, mw: int) -> None:
        if not self.allow_set:
            raise RuntimeError("Insufficient Permissions")
        self.set_calls.append(mw)
        self.limit_mw = mw


def test_nvml_energy_counter_and_limit() -> None:
    counter = nvml_energy_counter(FakeNvml(), None)
    assert counter is not None and counter() == pytest.approx(123.456)
    assert nvml_energy_counter(FakeNvml(energy=False), None) is None
    assert nvml_power_limit_w(FakeNvml(), None) == 250.0


def test_power_limit_control_checks_sets_and_restores() -> None:
    nvml = FakeNvml()
    control = PowerLimitControl(nvml, None, "cuda:0")
    assert (control.min_w, control.max_w, control.original_w) == (100.0, 300.0, 250.0)
    with pytest.raises(InvalidSpecError, match="outside cuda:0's range 100-300 W"):
        control.check([150.0, 350.0])
    with pytest.raises(ZeroDivisionError), control.at(150.0):
        assert nvml.limit_mw == 150_000
        raise ZeroDivisionError  # a failing run still gets its limit back
    assert nvml.limit_mw == 250_000 and nvml.set_calls == [150_000, 250_000]
    denied = PowerLimitControl(FakeNvml(allow_set=False), None, "cuda:0")
    with pytest.raises(InvalidSpecError, match="needs root"):
        denied.set(200.0)


def test_a_sweep_measures_once_per_limit_and_restores(tmp_path: Path) -> None:
    nvml = FakeNvml()
    request = MeasureTrainRequest(
        workload="mlp",
        device="cpu",
        batch_size=8,
        max_time_s=0.5,
        min_samples=3,
        target_ci=0.5,
        power_limits=(150.0, 200.0),
    )
    result = _power_sweep(
        request, tmp_path / "s.db", None, control=PowerLimitControl(nvml, None, "cuda:0")
    )
    assert [p.power_limit_w for p in result.sweep] == [150.0, 200.0]
    assert nvml.set_calls == [150_000, 250_000, 200_000, 250_000]
    assert all(p.run_id is not None for p in result.sweep)
    assert [p["power_limit_w"] for p in result.to_dict()["power_sweep"]] == [150.0, 200.0]
    assert result.measurement is result.sweep[0].measurement


def test_sweep_needs_a_gpu_and_one_process() -> None:
    with pytest.raises(InvalidInputError, match="power-limits: needs an NVIDIA GPU"):
        open_power_limit_control("cpu")
    with pytest.raises(InvalidSpecError, match="sweeps one process only"):
        MeasureTrainRequest(workload="mlp", power_limits=(150.0,), distributed="ddp")
    with pytest.raises(InvalidSpecError, match="must be watts > 0"):
        MeasureTrainRequest(workload="mlp", power_limits=(-1.0,))


@pytest.mark.gpu
def test_a_gpu_measurement_records_board_energy_and_its_limit() -> None:
    pytest.importorskip("pynvml")
    m = measure_runner(
        _Runner(),
        spec=WorkloadSpec(name="matmul", batch_size=4),
        mode="train",
        device="cuda",
        rule=StoppingRule(max_time_s=1.0, min_samples=5),
    )
    assert m.energy is not None
    assert m.energy.gpu_method in ("nvml-counter", "power-sampling")
    assert m.energy.gpu_energy_j_per_step is not None and m.energy.gpu_energy_j_per_step >= 0
    assert m.energy.power_limit_w is not None and m.energy.power_limit_w > 0
