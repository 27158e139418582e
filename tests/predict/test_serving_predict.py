"""Batch-latency models: fit, catalog roofline, MIG, co-location, estimator contract."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.errors import InvalidSpecError, NotFittedError
from gpucast.predict.base import estimator_from_dict
from gpucast.predict.serving import (
    BatchLatencyModel,
    InferenceWork,
    colocation_slowdown,
    mig_profile,
    predict_latency_curve,
    request_overhead_s,
)

WORK = InferenceWork(
    name="toy",
    matmul_flops_per_sample=8e9,
    other_bytes_fixed=1e6,
    other_bytes_per_sample=2e8,
    n_kernels=170,
    weights_bytes=1e8,
    input_bytes_per_sample=6e5,
    activation_bytes_per_sample=1e7,
)


def test_fit_recovers_affine_latency_and_round_trips() -> None:
    sizes = [1, 2, 4, 8]
    lat = [0.005 + 0.002 * b for b in sizes]
    given = copy.deepcopy(lat)
    model = BatchLatencyModel().fit(sizes, lat, source="unit test")
    assert lat == given  # fit does not mutate its input
    fixed, per = model.coefficients
    assert fixed == pytest.approx(0.005) and per == pytest.approx(0.002)
    est = model.predict(16)
    assert est.value == pytest.approx(0.037)
    assert est.lower < est.value < est.upper
    again = estimator_from_dict(model.to_dict())
    assert isinstance(again, BatchLatencyModel)
    assert again.predict(3).value == model.predict(3).value
    assert model.curve(32).latency(32) == pytest.approx(0.069)


def test_predict_before_fit_raises() -> None:
    with pytest.raises(NotFittedError):
        BatchLatencyModel().predict(1)


def test_catalog_curve_grows_with_batch_and_faster_gpu_is_faster() -> None:
    cat = load_catalog()
    p4 = predict_latency_curve(WORK, cat.gpu("P4"), max_batch=16)
    a100 = predict_latency_curve(WORK, cat.gpu("A100-40GB"), max_batch=16)
    assert all(x < y for x, y in zip(p4.latency_s, p4.latency_s[1:], strict=False))
    assert a100.latency(8) < p4.latency(8)
    assert 0 < p4.host_s < p4.latency(1)
    half = predict_latency_curve(WORK, cat.gpu("P4"), max_batch=16, calibration_scale=2.0)
    assert half.latency(4) == pytest.approx(2 * p4.latency(4))


def test_mig_slice_is_slower_than_the_whole_gpu_and_bad_profile_is_one_line() -> None:
    gpu = load_catalog().gpu("A100-40GB")
    whole = predict_latency_curve(WORK, gpu, max_batch=8)
    small = predict_latency_curve(WORK, gpu, max_batch=8, mig=mig_profile(gpu, "1g.5gb"))
    big = predict_latency_curve(WORK, gpu, max_batch=8, mig=mig_profile(gpu, "3g.20gb"))
    assert whole.latency(8) < big.latency(8) < small.latency(8)
    with pytest.raises(InvalidSpecError, match=r"'2g\.99gb' does not exist on A100-40GB"):
        mig_profile(gpu, "2g.99gb")
    with pytest.raises(InvalidSpecError, match="does not support MIG") as none:
        mig_profile(load_catalog().gpu("P4"), "1g.5gb")
    # it has no profile to pick (session 37 QA: "pick one of its profiles")
    assert "its profiles" not in str(none.value.fix) and "catalog gpus" in str(none.value.fix)
    # refused as `catalog mig` refuses it: profiles without published placements (QA 37 FO#3)
    with pytest.raises(InvalidSpecError, match="no published MIG placements for B200"):
        mig_profile(load_catalog().gpu("B200"), "1g.23gb")
    with pytest.raises(InvalidSpecError) as wrong:
        mig_profile(gpu, "2g.99gb")
    assert "catalog mig --gpu A100-40GB" in str(wrong.value.fix)


def test_colocation_table_and_overhead() -> None:
    assert colocation_slowdown(0.010, [0.016, 0.021]) == pytest.approx((1.0, 1.6, 2.1))
    assert request_overhead_s(1.25e6, 10.0, rtt_s=0.0) == pytest.approx(0.001)
    with pytest.raises(InvalidSpecError):
        request_overhead_s(1.0, 0.0)


def test_device_scale_stretches_only_the_device_part() -> None:
    p4 = load_catalog().gpu("P4")
    base = predict_latency_curve(WORK, p4, max_batch=8)
    slow = predict_latency_curve(WORK, p4, max_batch=8, device_scale=1.5)
    assert slow.host_s == pytest.approx(base.host_s)
    for b in (1, 2, 4, 8):
        assert slow.device_s(b) == pytest.approx(1.5 * base.device_s(b))
        assert slow.latency(b) > base.latency(b)
    assert "device time x1.5" in slow.source
    with pytest.raises(InvalidSpecError, match="device_scale"):
        predict_latency_curve(WORK, p4, device_scale=0.0)


def test_one_byte_precisions_halve_the_bytes_not_the_flops() -> None:
    import dataclasses

    from gpucast.predict.serving import InferenceWork, profile_precision

    work = InferenceWork(
        name="w", matmul_flops_per_sample=1e9, other_bytes_fixed=4e6,
        other_bytes_per_sample=2e6, n_kernels=10, weights_bytes=8e6,
        input_bytes_per_sample=3e5, activation_bytes_per_sample=1e6,
    )  # fmt: skip
    int8 = work.at_precision("int8", "fp16")
    assert int8.matmul_flops_per_sample == work.matmul_flops_per_sample
    for name in ("other_bytes_fixed", "other_bytes_per_sample", "weights_bytes",
                 "input_bytes_per_sample", "activation_bytes_per_sample"):  # fmt: skip
        assert getattr(int8, name) == pytest.approx(getattr(work, name) / 2)
    assert work.at_precision("fp16", "fp16") is work
    assert dataclasses.replace(work) == work.at_precision("bf16", "fp16")
    assert [profile_precision(p) for p in ("fp32", "bf16", "fp16", "fp8", "int8")] == [
        "fp32", "bf16", "fp16", "fp16", "fp16"]  # fmt: skip
    with pytest.raises(InvalidSpecError, match="precision"):
        work.at_precision("int4", "fp16")


def test_a_request_s_floating_point_inputs_follow_the_precision_its_token_ids_do_not() -> None:
    from gpucast.predict.serving import InferenceWork

    # an fp32 profile: 1,000 float elements (4,000 B) and 512 B of int64 token ids
    work = InferenceWork(
        name="w", matmul_flops_per_sample=1e9, other_bytes_fixed=0.0,
        other_bytes_per_sample=1e6, n_kernels=10, weights_bytes=8e6,
        input_bytes_per_sample=4512.0, activation_bytes_per_sample=1e6,
        input_float_elements_per_sample=1000.0,
    )  # fmt: skip
    sizes = {p: work.at_precision(p, "fp32").input_bytes_per_sample
             for p in ("fp32", "fp16", "bf16", "int8", "fp8")}  # fmt: skip
    assert sizes == {"fp32": 4512.0, "fp16": 2512.0, "bf16": 2512.0, "int8": 1512.0,
                     "fp8": 1512.0}  # fmt: skip
    # from an fp16 profile (the one int8/fp8 are made from) the same element sizes hold
    fp16 = work.at_precision("fp16", "fp32")
    assert fp16.at_precision("int8", "fp16").input_bytes_per_sample == 1512.0
    # a work without the split: every input byte follows the precision, as before
    old = dataclasses.replace(work, input_float_elements_per_sample=None)
    assert old.at_precision("int8", "fp32").input_bytes_per_sample == pytest.approx(4512 / 4)
    with pytest.raises(InvalidSpecError, match="input_float_elements_per_sample"):
        dataclasses.replace(work, input_float_elements_per_sample=5000.0)


def test_engine_efficiency_terms_of_the_curve() -> None:
    from gpucast.predict.roofline import DeviceRoofline
    from gpucast.predict.serving import InferenceWork, ServingEfficiency, predict_latency_curve

    work = InferenceWork(
        name="w", matmul_flops_per_sample=1e10, other_bytes_fixed=0.0,
        other_bytes_per_sample=1e8, n_kernels=100, weights_bytes=1e6,
        input_bytes_per_sample=1e5, activation_bytes_per_sample=1e5,
    )  # fmt: skip
    dev = DeviceRoofline(name="d", kind="gpu", peak_tflops=100.0, memory_bandwidth_gbps=1000.0)
    eager = ServingEfficiency(engine="e", compute_efficiency_fp32=0.9,
                              compute_efficiency_tensor=0.5, bandwidth_efficiency=1.0,
                              kernel_overhead_s=1e-5)  # fmt: skip
    fused = ServingEfficiency(engine="f", compute_efficiency_fp32=0.9,
                              compute_efficiency_tensor=0.5, bandwidth_efficiency=1.0,
                              traffic_factor=0.25, kernel_overhead_s=1e-5,
                              batch_overhead_s=1e-3)  # fmt: skip
    a = predict_latency_curve(work, dev, "fp16", max_batch=2, efficiency=eager)
    b = predict_latency_curve(work, dev, "fp16", max_batch=2, efficiency=fused)
    # per sample: compute 1e10/(0.5*1e14) = 0.2 ms; bytes 1e8/1e12 = 0.1 ms (x0.25 fused)
    assert a.latency(2) - a.latency(1) == pytest.approx(0.3e-3)
    assert b.latency(2) - b.latency(1) == pytest.approx(0.225e-3)
    assert a.host_s == pytest.approx(1e-3) and b.host_s == pytest.approx(2e-3)  # + per batch
    with pytest.raises(InvalidSpecError, match="traffic_factor"):
        ServingEfficiency(engine="x", compute_efficiency_fp32=0.5, compute_efficiency_tensor=0.5,
                          bandwidth_efficiency=0.5, traffic_factor=0.0)  # fmt: skip
    with pytest.raises(InvalidSpecError, match="compute_efficiency_tensor"):
        ServingEfficiency(engine="x", compute_efficiency_fp32=0.5, compute_efficiency_tensor=1.5,
                          bandwidth_efficiency=0.5)  # fmt: skip


def test_convolutions_on_tensor_cores_take_the_conv_ratio() -> None:
    import dataclasses

    from gpucast.predict.roofline import DeviceRoofline
    from gpucast.predict.serving import ServingEfficiency

    conv = dataclasses.replace(WORK, conv_share=1.0, other_bytes_per_sample=0.0,
                               other_bytes_fixed=0.0, n_kernels=0)  # fmt: skip
    gemm = dataclasses.replace(conv, conv_share=0.0)
    dev = DeviceRoofline(name="d", kind="gpu", peak_tflops=100.0, memory_bandwidth_gbps=1000.0)
    eff = ServingEfficiency(engine="e", compute_efficiency_fp32=0.9,
                            compute_efficiency_tensor=0.5, bandwidth_efficiency=1.0,
                            kernel_overhead_s=0.0, tensor_core_conv_ratio=0.5)  # fmt: skip

    def per_sample(work: InferenceWork, precision: str) -> float:
        c = predict_latency_curve(work, dev, precision, max_batch=2, efficiency=eff)
        return c.latency(2) - c.latency(1)

    # convolutions run at half the matmul efficiency on tensor cores, the same in fp32
    assert per_sample(conv, "fp16") == pytest.approx(2 * per_sample(gemm, "fp16"))
    assert per_sample(conv, "fp32") == pytest.approx(per_sample(gemm, "fp32"))
    with pytest.raises(InvalidSpecError, match="conv_share"):
        dataclasses.replace(WORK, conv_share=1.5)
    with pytest.raises(InvalidSpecError, match="tensor_core_conv_ratio"):
        dataclasses.replace(eff, tensor_core_conv_ratio=0.0)


def test_a_cnn_profile_carries_its_convolution_share() -> None:
    from gpucast.inputs.serving import serving_efficiency
    from gpucast.inputs.workload import workload_profile

    one, two = (workload_profile("resnet50", "fp16", batch_size=b) for b in (1, 2))
    assert 0.99 < InferenceWork.from_profiles(one, two).conv_share <= 1.0
    # the eager engine's efficiency comes from the step-time model, with its fitted ratio
    eager = serving_efficiency("eager-pytorch").value
    assert eager.tensor_core_conv_ratio < 1.0


def _matrix_work(conv_share: float) -> tuple[InferenceWork, Any]:
    """WORK with matrix work only (``conv_share`` of it convolutions), and efficiencies whose
    convolutions reach 0.3 of the tensor cores' 0.5 (FP32 units 0.9, no launch cost)."""
    from dataclasses import replace

    from gpucast.predict.roofline import RooflineEfficiency

    work = replace(WORK, conv_share=conv_share, other_bytes_per_sample=0.0, other_bytes_fixed=0.0)
    eff = RooflineEfficiency(compute_efficiency_fp32=0.9, compute_efficiency_tensor_core=0.5,
                             tensor_core_conv_ratio=0.3, kernel_overhead_s=0.0)  # fmt: skip
    return work, eff


def test_reduced_precision_serving_is_never_priced_slower_than_fp32_units() -> None:
    """Convolutions at a low tensor-core ratio on A10G (bf16 2x its FP32 figure, 4x its
    dedicated lanes'): bf16 matrix work falls back to the FP32 units' rate, so a bf16 batch
    costs at most what fp32 costs; on A100 (bf16 16x) the tensor path stays far faster."""
    convs, eff = _matrix_work(1.0)
    cat = load_catalog()
    a10g = cat.gpu("A10G")
    half = predict_latency_curve(convs, a10g, "bf16", max_batch=64, efficiency=eff)
    full = predict_latency_curve(convs, a10g, "fp32", max_batch=64, efficiency=eff)
    assert half.latency(64) == pytest.approx(full.latency(64), rel=1e-9)
    tensor_s = 64 * 8e9 / (0.5 * 0.3 * 70e12)  # what the tensor path alone would take
    assert half.latency(64) == pytest.approx(64 * 8e9 / (0.9 * 17.5e12))
    assert half.latency(64) < tensor_s / 1.4
    a100 = cat.gpu("A100-40GB")
    fast = predict_latency_curve(convs, a100, "bf16", max_batch=64, efficiency=eff)
    assert fast.latency(64) == pytest.approx(64 * 8e9 / (0.5 * 0.3 * 312e12), rel=1e-9)


def test_fp32_serving_runs_convolutions_on_tf32_where_cudnn_does() -> None:
    """An fp32 batch on an A100 puts its convolutions on TF32 (cuDNN's default) at the conv
    ratio of the tensor efficiency, its other matmuls on the FP32 units; on a T4 (no TF32)
    all of it stays on the FP32 units."""
    mixed, eff = _matrix_work(0.75)
    cat = load_catalog()
    a100 = cat.gpu("A100-40GB")
    curve = predict_latency_curve(mixed, a100, "fp32", max_batch=8, efficiency=eff)
    flops = 8 * 8e9
    assert curve.latency(8) == pytest.approx(
        0.25 * flops / (0.9 * 19.5e12) + 0.75 * flops / (0.5 * 0.3 * 156e12), rel=1e-9
    )
    t4 = cat.gpu("T4")
    plain = predict_latency_curve(mixed, t4, "fp32", max_batch=8, efficiency=eff)
    assert plain.latency(8) == pytest.approx(flops / (0.9 * t4.fp32_path_tflops() * 1e12))
