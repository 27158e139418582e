"""Roofline predictor for profiled workloads: terms, precision, calibration."""

from __future__ import annotations

import math
from datetime import date

import pytest

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.intervals import IntervalTable, batch_regime, distance_regimes
from gpucast.predict.roofline import (
    DeviceRoofline,
    RooflineEfficiency,
    RooflineWorkload,
    calibrate,
    predict_step_time,
)


def gpu(name: str, fp32: float, bf16: float | None, bw: float) -> GpuSpec:
    return GpuSpec(
        name=name,
        vendor="nvidia",
        architecture="test",
        fp32_tflops=fp32,
        tf32_tflops=None,
        fp16_tflops=bf16,
        bf16_tflops=bf16,
        fp8_tflops=None,
        memory_gib=40,
        memory_bandwidth_gbps=bw,
        interconnect_gbps=None,
        pcie_generation=4,
        tdp_w=300,
        sm_count=80,
        source_url="https://example.org",
        as_of=date(2024, 1, 1),
    )


V100 = gpu("V100", 15.7, 125.0, 900.0)
A100 = gpu("A100", 19.5, 312.0, 1555.0)
RESNET = RooflineWorkload(
    name="resnet50",
    batch_size=64,
    matmul_flops=64 * 3 * 8.2e9,
    memory_bytes=64 * 1.2e9,
    n_kernels=1500,
)


def test_terms_follow_the_roofline() -> None:
    eff = RooflineEfficiency()
    est = predict_step_time(RESNET, V100, "fp32")
    assert est.breakdown["compute"] == pytest.approx(
        RESNET.matmul_flops / (eff.compute_efficiency_fp32 * 15.7e12)
    )
    assert est.breakdown["memory_bandwidth"] == pytest.approx(RESNET.memory_bytes / (0.7 * 900e9))
    assert est.breakdown["overhead"] == pytest.approx(1500 * eff.kernel_overhead_s)
    assert est.bottleneck == "compute" and est.source == "catalog"
    assert est.lower < est.value < est.upper


def test_a_sustained_clock_slows_compute_and_says_so() -> None:
    from dataclasses import replace

    slow = replace(V100, boost_clock_mhz=1530.0, sustained_clock_mhz=765.0)
    est, base = predict_step_time(RESNET, slow, "fp32"), predict_step_time(RESNET, V100, "fp32")
    assert est.breakdown["compute"] == pytest.approx(2 * base.breakdown["compute"])
    assert est.breakdown["memory_bandwidth"] == base.breakdown["memory_bandwidth"]
    assert any("sustained 765 MHz clock, x0.50" in n for n in est.notes)
    assert not any("sustained" in n for n in base.notes)


def test_tensor_cores_make_memory_the_bottleneck() -> None:
    est = predict_step_time(RESNET, A100, "bf16")
    assert est.bottleneck == "memory_bandwidth"
    assert est.value < predict_step_time(RESNET, A100, "fp32").value


def test_half_precision_never_priced_slower_than_fp32_and_says_when_fp32_binds() -> None:
    """A tensor-core path the efficiencies would price slower than the FP32 units (a GPU whose
    bf16 peak is only 2x its FP32 one, convolutions at a third of the tensor efficiency) is
    priced on the FP32 units and says so with both figures; lanes shared with INT32 count
    only their dedicated half; a GPU without bf16 units says what it was priced at; no note
    on a GPU whose bf16 path is faster."""
    from dataclasses import replace

    eff = RooflineEfficiency(
        compute_efficiency_fp32=0.94, compute_efficiency_tensor_core=0.51,
        tensor_core_conv_ratio=0.34,
    )  # fmt: skip
    convs = replace(RESNET, conv_flops=RESNET.matmul_flops * 0.99)
    small = gpu("A10G-like", 35.0, 70.0, 600.0)
    slow = predict_step_time(convs, small, "bf16", efficiency=eff)
    fp32 = predict_step_time(convs, small, "fp32", efficiency=eff)
    assert slow.breakdown["compute"] == pytest.approx(fp32.breakdown["compute"], rel=1e-9)
    (note,) = [n for n in slow.notes if "FP32 units" in n]
    assert "priced on A10G-like's FP32 units" in note and "take 2.69x as long" in note
    assert "convolutions 0.34 of that" in note and "2.0x its FP32 units'" in note
    # half the FP32 lanes shared with INT32 (GA10x / Ada): the FP32 path is half as fast
    shared = replace(small, fp32_dedicated_tflops=17.5)
    half = predict_step_time(convs, shared, "bf16", efficiency=eff)
    assert half.breakdown["compute"] == pytest.approx(
        convs.matmul_flops / (0.94 * 17.5e12), rel=1e-9
    )
    assert any("take 1.35x as long" in n and "4.0x its FP32 units'" in n for n in half.notes)
    fast = predict_step_time(convs, A100, "bf16", efficiency=eff)
    assert not any("FP32 units" in n or "no bf16 units" in n for n in fast.notes)
    old = replace(V100, bf16_tflops=None, fp16_tflops=None, tf32_tflops=None)
    with pytest.raises(InvalidSpecError, match="bf16 needs bf16 units, which the V100 has not"):
        predict_step_time(convs, old, "bf16", efficiency=eff)  # never the fallback's peak
    (none,) = [n for n in predict_step_time(convs, old, "tf32", efficiency=eff).notes
               if "units" in n]  # fmt: skip
    assert none.startswith("V100 has no tf32 units: priced at the 15.7 TFLOP/s")
    assert not any("units" in n for n in predict_step_time(convs, old, "fp32").notes)


def test_fp32_convolutions_run_on_tf32_where_cudnn_puts_them() -> None:
    """fp32 as PyTorch runs it on an NVIDIA GPU with TF32 units: convolutions on the TF32
    tensor cores where faster (cuDNN's default), other matmuls on the FP32 units; an AMD
    board, a GPU without TF32 units or a conv-free step prices all of it on the FP32 units;
    the calibration prices the measured device the same way; ``tf32`` prices the matmuls on
    TF32 too."""
    from dataclasses import replace

    eff = RooflineEfficiency(
        compute_efficiency_fp32=0.9, compute_efficiency_tensor_core=0.6,
        tensor_core_conv_ratio=0.5,
    )  # fmt: skip
    a100 = replace(A100, tf32_tflops=156.0)
    assert a100.fp32_convolution_tflops() == 156.0
    amd = replace(a100, vendor="amd")
    assert amd.fp32_convolution_tflops() is None and A100.fp32_convolution_tflops() is None
    convs = replace(RESNET, conv_flops=RESNET.matmul_flops * 0.75)
    est = predict_step_time(convs, a100, "fp32", efficiency=eff)
    other, conv = convs.matmul_flops - convs.conv_flops, convs.conv_flops
    assert est.breakdown["compute"] == pytest.approx(
        other / (0.9 * 19.5e12) + conv / (0.6 * 0.5 * 156e12), rel=1e-9
    )
    (note,) = [n for n in est.notes if "TF32" in n]
    assert "convolutions on its TF32 tensor cores (46.8 TFLOP/s sustained vs 17.6" in note
    assert "torch.backends.cudnn.allow_tf32" in note and "--precision tf32" in note
    plain = convs.matmul_flops / (0.9 * 19.5e12)
    for same in (amd, A100):
        fp32 = predict_step_time(convs, same, "fp32", efficiency=eff)
        assert fp32.breakdown["compute"] == pytest.approx(plain, rel=1e-9)
        assert not any("TF32" in n for n in fp32.notes)
    matmuls = predict_step_time(RESNET, a100, "fp32", efficiency=eff)
    assert matmuls.breakdown["compute"] == pytest.approx(
        RESNET.matmul_flops / (0.9 * 19.5e12), rel=1e-9
    )
    assert not any("TF32" in n for n in matmuls.notes)
    # a TF32 path slower than the FP32 units (TF32 peak = FP32 peak): convolutions stay
    slow = replace(a100, tf32_tflops=19.5)
    stay = predict_step_time(convs, slow, "fp32", efficiency=eff)
    assert stay.breakdown["compute"] == pytest.approx(plain, rel=1e-9)
    assert any("convolutions on its FP32 units (the fitted TF32 path" in n for n in stay.notes)
    tf32 = predict_step_time(convs, a100, "tf32", efficiency=eff)
    assert tf32.value < est.value
    cal = calibrate(convs, 0.5, a100, "fp32", efficiency=eff)
    again = predict_step_time(convs, a100, "fp32", calibration=cal, efficiency=eff)
    assert again.value == pytest.approx(0.5)


def test_calibration_same_device_reproduces_measurement() -> None:
    cal = calibrate(RESNET, 0.25, V100, "fp32")
    est = predict_step_time(RESNET, V100, "fp32", calibration=cal)
    assert est.value == pytest.approx(0.25)
    assert est.source == "measured" and est.relative_halfwidth < 0.11


def _distance_table() -> IntervalTable:
    """Bands that widen with the distance from the measured batch (as the data's do)."""
    width = {"same_gpu/calibrated": 0.4, "gpu_unseen/calibrated": 0.6}
    for base, step in (("same_gpu/calibrated", 0.1), ("gpu_unseen/calibrated", 0.2)):
        width.update({n: step * (i + 1) for i, n in enumerate(distance_regimes(base))})
    return IntervalTable(
        q_low={k: -w for k, w in width.items()},
        q_high=dict(width),
        n=dict.fromkeys(width, 50),
        mape_pct=dict.fromkeys(width, 10.0),
    )


def test_a_same_gpu_calibration_states_the_band_of_the_batch_distance() -> None:
    from dataclasses import replace

    eff = replace(RooflineEfficiency(), intervals=_distance_table())
    cal = calibrate(RESNET, 0.25, V100, "fp32", efficiency=eff)
    assert cal.batch_size == 64
    widths = []
    for batch in (64, 128, 256, 512, 4096):  # x1, x2, x4, x8, x64 of the measured batch
        work = replace(RESNET, batch_size=batch)
        est = predict_step_time(work, V100, "fp32", calibration=cal, efficiency=eff)
        widths.append(est.upper / est.value)
        assert any("at batch 64" in n for n in est.notes)
    assert widths[0] == widths[1] == pytest.approx(math.exp(0.1))  # within 2x
    assert widths[2:] == pytest.approx([math.exp(0.2), math.exp(0.3), math.exp(0.4)])
    assert any("batch_far" in n for n in est.notes)
    # a calibration whose batch is not known pools every distance
    pooled = replace(cal, batch_size=None)
    est = predict_step_time(RESNET, V100, "fp32", calibration=pooled, efficiency=eff)
    assert est.upper / est.value == pytest.approx(math.exp(0.4))
    near = "same_gpu/calibrated/batch_x2"
    assert batch_regime("same_gpu/calibrated", 64, 32) == near
    assert batch_regime("same_gpu/calibrated", 64, 128) == near
    # a measurement on another GPU type: that regime's split, wider at each distance here
    other = predict_step_time(RESNET, A100, "fp32", calibration=cal, efficiency=eff)
    far = predict_step_time(
        replace(RESNET, batch_size=4096), A100, "fp32", calibration=cal, efficiency=eff
    )
    assert other.upper / other.value == pytest.approx(math.exp(0.2))
    assert far.upper / far.value == pytest.approx(math.exp(0.8))
    assert any("gpu_unseen/calibrated/batch_far" in n for n in far.notes)


def _fitted_efficiency() -> RooflineEfficiency:
    """Priors with validated bands for the uncalibrated regimes (a GPU type without data)."""
    from dataclasses import replace

    regimes = ("gpu_seen/uncalibrated", "gpu_unseen/uncalibrated")
    table = IntervalTable(
        q_low=dict.fromkeys(regimes, -1.0),
        q_high=dict.fromkeys(regimes, 1.2),
        n=dict.fromkeys(regimes, 50),
        mape_pct=dict.fromkeys(regimes, 40.0),
    )
    return replace(RooflineEfficiency(), intervals=table)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_cpu_measurement_calibrates_no_gpu(precision: str) -> None:
    """A CPU's step time does not tell a GPU's per-kernel costs: the GPU is priced as without
    it, with the uncalibrated band, at every precision, and the note says so."""
    cpu = DeviceRoofline(name="cpu", kind="cpu", peak_tflops=1.0, memory_bandwidth_gbps=50)
    cal = calibrate(RESNET, 20.0, cpu, "fp32")
    assert cal.scale != pytest.approx(1.0)
    for eff in (RooflineEfficiency(), _fitted_efficiency()):
        uncal = predict_step_time(RESNET, A100, precision, efficiency=eff)
        est = predict_step_time(RESNET, A100, precision, calibration=cal, efficiency=eff)
        assert (est.value, est.lower, est.upper) == (uncal.value, uncal.lower, uncal.upper)
        assert est.source == uncal.source
        said = " ".join(est.notes)
        assert "the measurement on cpu at batch 64" in said and "calibrates no GPU" in said
        assert "calibrated by" not in said


def test_invalid_inputs() -> None:
    with pytest.raises(InvalidSpecError, match="matmul_flops"):
        RooflineWorkload(name="x", batch_size=1, matmul_flops=-1, memory_bytes=0, n_kernels=0)
    with pytest.raises(InvalidSpecError, match="bandwidth_efficiency"):
        RooflineEfficiency(bandwidth_efficiency=1.5)
    with pytest.raises(InvalidSpecError, match="measured_step_time_s"):
        calibrate(RESNET, 0.0, V100)


def test_adapters_from_a_real_profile() -> None:
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.predict.memory import MemoryNeeds, fit_memory
    from gpucast.profile import profile_workload

    profile = profile_workload(WorkloadSpec(name="cifar-resnet20", batch_size=32))
    work = RooflineWorkload.from_profile(profile)
    assert 0 < work.matmul_flops <= profile.forward_backward_flops
    assert work.memory_bytes > 0 and work.n_kernels > 0
    slow = predict_step_time(work, gpu("P100", 9.3, 18.7, 732.0), "fp32")
    fast = predict_step_time(work, A100, "fp32")
    assert fast.value < slow.value
    needs = MemoryNeeds.from_profile(profile)
    assert needs.weights_bytes == profile.memory.weights_bytes
    assert fit_memory(needs, A100, 1).best is not None


def test_an_fp8_step_states_the_widest_uncalibrated_band() -> None:
    """No step of a profiled workload ran at fp8: whatever the regime (here a calibrated one
    on the same GPU), the band is the envelope of every uncalibrated regime; the LLM path,
    whose fp8 is validated on whole runs, keeps its regime's band."""
    from dataclasses import replace

    from gpucast.predict.intervals import UNVALIDATED_PRECISION

    h100 = replace(gpu("H100", 67.0, 989.0, 3350.0), fp8_tflops=1979.0)
    table = IntervalTable(
        q_low={"gpu_seen/uncalibrated": -1.0, "gpu_unseen/uncalibrated": -0.5,
               "gpu_seen/measured_elsewhere": -0.7, "same_gpu/calibrated": -0.1},
        q_high={"gpu_seen/uncalibrated": 0.9, "gpu_unseen/uncalibrated": 1.3,
                "gpu_seen/measured_elsewhere": 0.8, "same_gpu/calibrated": 0.1},
        n=dict.fromkeys(("gpu_seen/uncalibrated", "gpu_unseen/uncalibrated",
                         "gpu_seen/measured_elsewhere", "same_gpu/calibrated"), 50),
        mape_pct={},
    )  # fmt: skip
    assert table.ratios(UNVALIDATED_PRECISION) == pytest.approx((math.exp(-1.0), math.exp(1.3)))
    eff = replace(RooflineEfficiency(compute_efficiency_fp8=0.3), intervals=table)
    cal = calibrate(RESNET, 0.05, h100, "fp8", efficiency=eff)
    est = predict_step_time(RESNET, h100, "fp8", calibration=cal, efficiency=eff)
    assert est.lower / est.value == pytest.approx(math.exp(-1.0))
    assert est.upper / est.value == pytest.approx(math.exp(1.3))
    assert est.source == "measured"  # what the point value rests on is unchanged
    assert any("no step of a profiled workload" in n for n in est.notes)
    kept = predict_step_time(
        RESNET, h100, "fp8", calibration=cal, efficiency=eff, precision_validated=True
    )
    assert kept.value == est.value and kept.upper / kept.value == pytest.approx(math.exp(0.1))
    # the fp8 rate with the fp8 efficiency, never the 16-bit one
    assert est.breakdown["compute"] / cal.scale == pytest.approx(
        RESNET.matmul_flops / (0.3 * 1979e12)
    )
