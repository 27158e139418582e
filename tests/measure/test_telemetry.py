from __future__ import annotations

import itertools
import threading

import pytest
import torch

from gpucast.measure.telemetry import (
    TelemetrySample,
    TelemetrySampler,
    open_nvml_reader,
    summarize,
)


def test_summary_means_and_maxes_per_signal() -> None:
    samples = [
        TelemetrySample(gpu_util_pct=50.0, memory_used_bytes=1e9, power_w=100.0, sm_clock_mhz=None),
        TelemetrySample(gpu_util_pct=100.0, memory_used_bytes=3e9, power_w=None, sm_clock_mhz=None),
    ]
    s = summarize(samples, 0.1)
    assert s is not None
    assert s.n_samples == 2
    assert (s.gpu_util_mean_pct, s.gpu_util_max_pct) == (75.0, 100.0)
    assert (s.memory_used_mean_bytes, s.memory_used_max_bytes) == (2e9, 3e9)
    assert (s.power_mean_w, s.power_max_w) == (100.0, 100.0)  # the missing reading is skipped
    assert s.sm_clock_mean_mhz is None and s.sm_clock_max_mhz is None  # never reported
    assert summarize([], 0.1) is None


def test_sampler_reads_in_the_background_until_stopped() -> None:
    counter = itertools.count()
    enough = threading.Event()

    def read() -> TelemetrySample:
        i = next(counter)
        if i >= 4:
            enough.set()
        return TelemetrySample(gpu_util_pct=float(i), power_w=200.0 + i)

    sampler = TelemetrySampler(read, interval_s=0.005)
    with sampler:
        sampler.start()
        assert sampler.running
        assert enough.wait(5.0), "the sampler thread never ran"
        summary = sampler.stop()
    assert summary is not None
    n = summary.n_samples
    assert n >= 5  # one at start, several from the thread, one at stop
    assert summary.gpu_util_max_pct == float(n - 1)
    assert summary.gpu_util_mean_pct == pytest.approx((n - 1) / 2)
    assert not sampler.running
    assert not any(t.name == "gpucast-telemetry" for t in threading.enumerate())


def test_leaving_the_block_stops_the_thread_even_on_error() -> None:
    sampler = TelemetrySampler(lambda: TelemetrySample(power_w=1.0), interval_s=0.001)
    with pytest.raises(RuntimeError), sampler:
        sampler.start()
        raise RuntimeError("step failed")
    assert not sampler.running


def test_a_failing_reader_never_breaks_the_run() -> None:
    def read() -> TelemetrySample:
        raise RuntimeError("NVML went away")

    sampler = TelemetrySampler(read, interval_s=0.001)
    sampler.start()
    assert sampler.stop() is None


def test_no_telemetry_on_the_cpu() -> None:
    assert open_nvml_reader(torch.device("cpu")) is None


@pytest.mark.gpu
def test_nvml_reads_a_real_gpu() -> None:
    reader = open_nvml_reader(torch.device("cuda", 0))
    if reader is None:
        pytest.skip("nvidia-ml-py or the NVIDIA driver is not available")
    try:
        sample = reader()
    finally:
        reader.close()
    assert sample.memory_used_bytes is not None and sample.memory_used_bytes > 0
    assert sample.sm_clock_mhz is not None and sample.sm_clock_mhz > 0
