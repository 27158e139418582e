"""Device specs the kernel model reads: this CPU, a catalog CPU instance, a catalog GPU."""

from __future__ import annotations

import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.errors import UnknownNameError
from gpucast.inputs.calibration import host_cpu_roofline
from gpucast.inputs.kernels import cpu_instance_device, gpu_device, host_device


def test_host_device_is_the_roofline_calibrations_cpu() -> None:
    device = host_device(2)
    roof = host_cpu_roofline(2)
    assert device.cores == 2 and device.kind == "cpu"
    assert device.peak_flops_per_s == pytest.approx(roof.peak_tflops * 1e12)
    assert device.memory_bandwidth_bytes_per_s == pytest.approx(roof.memory_bandwidth_gbps * 1e9)


def test_a_cpu_instance_gets_the_runs_threads_up_to_its_cores_and_what_they_draw() -> None:
    # c7i.large: 2 vCPUs = 1 core x 2 threads, 3.2 GHz, 307.2 GB/s in the catalog
    device = cpu_instance_device("c7i.large", threads=4)
    assert device.cores == 1
    assert device.peak_flops_per_s == pytest.approx(32 * 3.2e9)
    # what its one core draws, not the socket's 307.2 GB/s (QA 41: 30x this machine's figure
    # per core, so a 1-thread run's memory-bound operators were predicted 30x faster)
    assert device.memory_bandwidth_bytes_per_s == pytest.approx(10e9)
    assert cpu_instance_device("c7i.2xlarge", threads=4).memory_bandwidth_bytes_per_s == (
        pytest.approx(40e9)
    )
    with pytest.raises(UnknownNameError):
        cpu_instance_device("c7i.huge", threads=1)


def test_a_gpu_has_its_precisions_peak_and_sms() -> None:
    device = gpu_device(load_catalog(), "A100-40GB", "fp32")
    assert device.kind == "gpu" and device.cores == 108
    assert device.peak_flops_per_s == pytest.approx(19.5e12)
    assert device.memory_bandwidth_bytes_per_s == pytest.approx(1555e9)
