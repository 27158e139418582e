"""The step-time model: recovers a known roofline, transfers across GPUs, honest intervals."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from speed_factories import gpu_spec
from steptime_factories import GPUS, TRUE, synthetic_steps

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict.intervals import (
    CALIBRATED,
    UNCALIBRATED,
    IntervalTable,
    distance_regimes,
)
from gpucast.predict.roofline import (
    CARRIED_RATIO_SPAN,
    RooflineEfficiency,
    RooflineWorkload,
    calibrate,
    carried_fixed_ratio,
    predict_step_time,
)
from gpucast.predict.steptime import (
    StepTimeModel,
    cross_validated_residuals,
    interval_table,
    nested_coverage,
    source_held_out,
    source_weights,
)


def test_recovers_the_efficiencies_of_noise_free_data() -> None:
    rows = synthetic_steps()
    model = StepTimeModel(gpu_prior_sd=10.0, workload_prior_sd=10.0).fit(rows)
    predicted = model.predict(rows, use_workload_factor=True)
    np.testing.assert_allclose(predicted, rows["step_time_s"], rtol=1e-3)
    # the GPU and workload factors trade against a common scale; their ratios do not
    ratio_fp32 = model.eta_compute_["fp32"] / model.eta_compute_["tensor16"]
    assert ratio_fp32 == pytest.approx(TRUE["fp32"] / TRUE["tensor16"], rel=0.05)
    assert model.gpu_factor_["A"] / model.gpu_factor_["C"] == pytest.approx(1.10, rel=0.02)


def test_recovers_the_tensor_core_convolution_ratio() -> None:
    rows = synthetic_steps(conv_ratio=0.5)
    model = StepTimeModel(gpu_prior_sd=10.0, workload_prior_sd=10.0).fit(rows)
    assert model.conv_ratio_ == pytest.approx(0.5, rel=0.02)
    np.testing.assert_allclose(
        model.predict(rows, use_workload_factor=True), rows["step_time_s"], rtol=1e-3
    )
    # the fitted set carries it to the roofline: a convolution costs more on tensor cores only
    eff = model.efficiency()
    assert eff.tensor_core_conv_ratio == pytest.approx(model.conv_ratio_)
    conv = RooflineWorkload(name="c", batch_size=1, matmul_flops=1e12, memory_bytes=0.0,
                            n_kernels=0, conv_flops=1e12)  # fmt: skip
    gemm = RooflineWorkload(name="g", batch_size=1, matmul_flops=1e12, memory_bytes=0.0,
                            n_kernels=0)  # fmt: skip
    assert eff.compute_flops(conv, "bf16") == pytest.approx(2e12, rel=0.03)
    assert eff.compute_flops(conv, "fp32") == eff.compute_flops(gemm, "bf16") == 1e12
    # the state round-trips; a state written before the ratio existed reads as 1
    state = model.to_dict()
    assert StepTimeModel.from_dict(state).conv_ratio_ == model.conv_ratio_
    old = {**state, "state": {k: v for k, v in state["state"].items() if k != "conv_ratio"}}
    assert StepTimeModel.from_dict(old).conv_ratio_ == 1.0
    # without convolutions on tensor cores there is nothing to fit it on
    assert StepTimeModel().fit(rows.drop(columns="conv_flops")).conv_ratio_ == 1.0


def test_fp8_borrows_the_16_bit_efficiency_until_fitted_apart() -> None:
    model = StepTimeModel(gpu_prior_sd=10.0, workload_prior_sd=10.0).fit(synthetic_steps())
    assert model.borrowed_["eta_compute:fp8"] == "tensor16"
    assert model.eta_compute_["fp8"] == model.eta_compute_["tensor16"]
    assert "fp8" not in model.efficiency().source
    model.with_fp8(0.8, "whole fp8 runs (2 systems)")
    assert "eta_compute:fp8" not in model.borrowed_
    assert model.eta_compute_["fp8"] == pytest.approx(0.8 * model.eta_compute_["tensor16"])
    eff = model.efficiency()
    assert eff.compute_efficiency("fp8") == pytest.approx(0.8 * eff.compute_efficiency("bf16"))
    assert eff.source.endswith("fp8 efficiency from whole fp8 runs (2 systems)")
    # the state keeps it and says where it came from
    again = StepTimeModel.from_dict(model.to_dict())
    assert again.eta_compute_ == model.eta_compute_ and again.fp8_source_ == model.fp8_source_
    assert "eta_compute:fp8" not in again.borrowed_
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(InvalidSpecError, match="fp8 ratio"):
            model.with_fp8(bad, "x")


def test_half_precision_convolutions_take_the_fp32_units_where_those_are_faster() -> None:
    """On a GPU whose bf16 peak is only 2x its FP32 one, convolutions at a tensor-core ratio of
    0.3 run faster on the FP32 units: the fit recovers the truth with that path, and the
    roofline prices the same rule (never slower than FP32, and said so)."""
    rows = synthetic_steps(conv_ratio=0.3, low_ratio=True)
    model = StepTimeModel(gpu_prior_sd=10.0, workload_prior_sd=10.0).fit(rows)
    assert model.fp32_path
    assert model.conv_ratio_ == pytest.approx(0.3, rel=0.02)
    np.testing.assert_allclose(
        model.predict(rows, use_workload_factor=True), rows["step_time_s"], rtol=1e-3
    )
    # without the FP32 column the rule has no peak to take: E's convolutions are overpriced
    plain = model.predict(rows.drop(columns="fp32_peak_tflops"), use_workload_factor=True)
    on_e = (rows.gpu == "E").to_numpy() & rows.workload_key.isin(["w1", "w2"]).to_numpy()
    assert np.all(plain[on_e] > rows["step_time_s"].to_numpy()[on_e] * 1.5)
    # the roofline: an A10G-like GPU prices bf16 convolutions no slower than FP32
    eff = model.efficiency()
    gpu = replace(gpu_spec("lowratio", 30.0, fp16=60.0), bf16_tflops=60.0)
    conv = RooflineWorkload(name="c", batch_size=1, matmul_flops=1e12, memory_bytes=0.0,
                            n_kernels=0, conv_flops=1e12)  # fmt: skip
    half = predict_step_time(conv, gpu, "bf16", efficiency=eff)
    fp32 = predict_step_time(conv, gpu, "fp32", efficiency=eff)
    assert half.breakdown["compute"] == pytest.approx(fp32.breakdown["compute"], rel=1e-9)
    assert any("priced on lowratio's FP32 units" in n for n in half.notes)
    assert not any("FP32 units" in n for n in fp32.notes)


def test_conv_flops_above_the_matmul_flops_are_refused() -> None:
    rows = synthetic_steps(conv_ratio=0.5)
    rows.loc[0, "conv_flops"] = rows.loc[0, "matmul_flops"] * 2
    with pytest.raises(InvalidSpecError, match="conv_flops"):
        StepTimeModel().fit(rows)
    with pytest.raises(InvalidSpecError, match="conv_flops"):
        RooflineWorkload(name="c", batch_size=1, matmul_flops=1.0, memory_bytes=0.0,
                         n_kernels=0, conv_flops=2.0)  # fmt: skip


def test_a_gpu_left_out_is_predicted_from_its_specs() -> None:
    rows = synthetic_steps(noise=0.02)
    train, test = rows[rows.gpu != "B"], rows[rows.gpu == "B"]
    model = StepTimeModel().fit(train)
    assert "B" not in model.gpu_factor_
    err = model.predict(test, use_workload_factor=True) / test["step_time_s"] - 1
    assert np.median(np.abs(err)) < 0.12  # B's true factor 0.95 is unknown to the model


def test_fit_does_not_modify_its_input_and_weights_balance_sources() -> None:
    rows = synthetic_steps(noise=0.05)
    before = rows.copy()
    StepTimeModel().fit(rows)
    pd.testing.assert_frame_equal(rows, before)
    w = source_weights(pd.Series(["a"] * 90 + ["b"] * 10))
    assert w[:90].sum() == pytest.approx(w[90:].sum())
    assert w.mean() == pytest.approx(1.0)


def test_cross_validated_intervals_cover_about_80_percent() -> None:
    rows = synthetic_steps(noise=0.08, seed=3)
    residuals = cross_validated_residuals(rows)
    by_distance = {name for base in CALIBRATED for name in distance_regimes(base)}
    assert set(residuals.regime) - by_distance == {
        "same_gpu/calibrated",
        "gpu_seen/calibrated",
        "gpu_seen/uncalibrated",
        "gpu_unseen/calibrated",
        "gpu_unseen/uncalibrated",
        "gpu_seen/measured_elsewhere",
        "same_gpu/calibrated/bracketed",
    }
    # rows between two others of their configuration, from both (of the synthetic batches
    # 8, 32, 128, 256 the middle two)
    bracketed = residuals[residuals.regime == "same_gpu/calibrated/bracketed"]
    assert 0 < len(bracketed) < len(residuals[residuals.regime == "same_gpu/calibrated"])
    # the same-GPU predictions again, each under how far its batch is from the measured one
    same = residuals[residuals.regime == "same_gpu/calibrated"]
    split = residuals[residuals.regime.isin(distance_regimes("same_gpu/calibrated"))]
    assert len(split) == len(same) and len(set(split.regime)) >= 2
    # a held-out GPU's rows, each calibrated by one measurement on another GPU
    one = residuals[residuals.regime.isin(distance_regimes("gpu_unseen/calibrated"))]
    assert len(one) > len(residuals[residuals.regime == "gpu_unseen/calibrated"])
    # the pair fold, predicted with and without the workload's factor
    pairs = residuals[residuals.regime == "gpu_seen/calibrated"]
    elsewhere = residuals[residuals.regime == "gpu_seen/measured_elsewhere"]
    assert len(elsewhere) == len(pairs)
    table = interval_table(residuals)
    assert table.n["gpu_unseen/uncalibrated"] == len(rows)
    low, high = table.ratios("gpu_unseen/uncalibrated")
    assert low < 1.0 < high
    cov = nested_coverage(residuals).set_index("regime")
    # every group's rows judged against the other groups' quantiles
    assert cov.loc["gpu_seen/calibrated", "coverage"] == pytest.approx(0.8, abs=0.15)


def _fitted_on_synthetic() -> tuple[pd.DataFrame, StepTimeModel, RooflineEfficiency, GpuSpec]:
    """The synthetic rows, the model fitted on them with its cross-validated intervals, its
    efficiency set and GPU A's spec."""
    rows = synthetic_steps(noise=0.05)
    model = StepTimeModel().fit(rows, fitted_on="synthetic")
    model.with_intervals(interval_table(cross_validated_residuals(rows)))
    fp32, bf16, bw, _ = GPUS["A"]
    return rows, model, model.efficiency(), _spec("A", fp32, bf16, bw)


def test_fitted_efficiency_drives_the_roofline_with_its_intervals() -> None:
    rows, model, eff, gpu_a = _fitted_on_synthetic()
    fp32, bf16, bw, _ = GPUS["A"]
    work = RooflineWorkload(
        name="w1", batch_size=32, matmul_flops=3e9 * 32, memory_bytes=40e6 * 32, n_kernels=300
    )
    est = predict_step_time(work, gpu_a, "fp32", efficiency=eff)
    row = rows[(rows.gpu == "A") & (rows.workload_key == "w1") & (rows.batch == 32)]
    assert est.value == pytest.approx(float(model.predict(row)[0]), rel=1e-9)
    assert est.source == "fitted"  # GPU A has data
    assert "cross-validated" in " ".join(est.notes)
    unseen = predict_step_time(work, _spec("Z", fp32, bf16, bw), "fp32", efficiency=eff)
    assert unseen.source == "catalog"
    assert unseen.value == pytest.approx(est.value / model.gpu_factor_["A"], rel=1e-9)
    # a measurement on A calibrates a prediction for the unseen GPU
    cal = calibrate(work, est.value * 1.3, gpu_a, "fp32", efficiency=eff)
    moved = predict_step_time(work, _spec("Z", fp32, bf16, bw), "fp32", calibration=cal,
                              efficiency=eff)  # fmt: skip
    # x1.3 everywhere, the fixed part carried from A (its factor; the same datasheet: ratio 1)
    carried = unseen.value + unseen.breakdown["overhead"] * (model.gpu_factor_["A"] - 1.0)
    assert moved.value == pytest.approx(carried * 1.3, rel=1e-9)
    assert moved.lower <= moved.value <= moved.upper


def test_a_measurement_on_another_gpu_carries_its_fixed_part_at_the_datasheet_ratio() -> None:
    """Calibrated on GPU A, a prediction for another GPU scales its compute and memory terms by
    the measurement's scale, and its fixed part is A's (A's factor) times sqrt(peak ratio x
    bandwidth ratio): for a GPU without data (factor 1) and for one with data (its factor
    divided out); on A itself nothing is carried."""
    _, model, eff, gpu_a = _fitted_on_synthetic()
    fp32, _, bw, _ = GPUS["A"]
    work = RooflineWorkload(
        name="w1", batch_size=8, matmul_flops=3e9 * 8, memory_bytes=40e6 * 8, n_kernels=300
    )
    base = predict_step_time(work, gpu_a, "fp32", efficiency=eff)
    cal = calibrate(work, base.value * 1.2, gpu_a, "fp32", efficiency=eff)
    k_a = model.gpu_factor_["A"]
    for name, (p, b) in {"Z": (30.0, 1500.0), "B": GPUS["B"][::2]}.items():
        target = _spec(name, p, 4 * p, b)
        plain = predict_step_time(work, target, "fp32", efficiency=eff)
        moved = predict_step_time(work, target, "fp32", calibration=cal, efficiency=eff)
        ratio = k_a / model.gpu_factor_.get(name, 1.0) * math.sqrt(fp32 / p * bw / b)
        assert carried_fixed_ratio(target, cal, "fp32", eff) == pytest.approx(ratio)
        expected = 1.2 * (plain.value + plain.breakdown["overhead"] * (ratio - 1.0))
        assert moved.value == pytest.approx(expected, rel=1e-9)
        assert any("carried from A" in n for n in moved.notes)
        assert ratio < 1.0  # a faster datasheet: the fixed part shrinks with it
    same = predict_step_time(work, gpu_a, "fp32", calibration=cal, efficiency=eff)
    assert same.value == pytest.approx(base.value * 1.2, rel=1e-9)
    assert not any("carried from" in n for n in same.notes)


def test_a_datasheet_gap_beyond_the_validated_span_is_held_at_its_edge() -> None:
    """H100 to T4 is a 12x datasheet gap; the data validates carrying the fixed part over at
    most CARRIED_RATIO_SPAN, so the ratio is held there, both ways, and the note says so."""
    _, model, eff, gpu_a = _fitted_on_synthetic()
    work = RooflineWorkload(
        name="w1", batch_size=8, matmul_flops=3e9 * 8, memory_bytes=40e6 * 8, n_kernels=300
    )
    cal = calibrate(work, 0.05, gpu_a, "fp32", efficiency=eff)
    k_a = model.gpu_factor_["A"]
    for spec, held in ((_spec("Big", 1000.0, 4000.0, 50000.0), 1.0 / CARRIED_RATIO_SPAN),
                       (_spec("Tiny", 0.1, 0.4, 5.0), CARRIED_RATIO_SPAN)):  # fmt: skip
        assert carried_fixed_ratio(spec, cal, "fp32", eff) == pytest.approx(k_a * held)
        moved = predict_step_time(work, spec, "fp32", calibration=cal, efficiency=eff)
        assert any(f"held at the {CARRIED_RATIO_SPAN:g}x" in n for n in moved.notes)


def test_priors_keep_the_documented_bands() -> None:
    work = RooflineWorkload(name="w", batch_size=1, matmul_flops=1e9, memory_bytes=1e6,
                            n_kernels=10)  # fmt: skip
    est = predict_step_time(work, _spec("A", 10.0, 40.0, 500.0), "fp32")
    assert est.upper / est.value == pytest.approx(1.5)
    assert "not validated" in " ".join(est.notes)


def test_bad_frames_are_refused_with_the_column_named() -> None:
    rows = synthetic_steps()
    with pytest.raises(InvalidInputError, match="lacks column"):
        StepTimeModel().fit(rows.drop(columns=["peak_tflops"]))
    bad = rows.copy()
    bad.loc[3, "step_time_s"] = np.nan
    with pytest.raises(InvalidSpecError, match="step_time_s"):
        StepTimeModel().fit(bad)
    bad = rows.copy()
    bad.loc[0, "stack"] = "jax"
    with pytest.raises(InvalidSpecError, match="stack"):
        StepTimeModel().fit(bad)
    with pytest.raises(InvalidSpecError, match="software"):
        StepTimeModel().fit(rows).efficiency("jax")


def test_interval_table_falls_back_to_a_wider_regime() -> None:
    table = IntervalTable.from_residuals({"gpu_unseen/uncalibrated": np.linspace(-0.3, 0.3, 11)})
    assert table.resolved("gpu_seen/calibrated") == "gpu_unseen/uncalibrated"
    low, high = table.ratios("gpu_seen/calibrated")
    assert low == pytest.approx(np.exp(-0.24)) and high == pytest.approx(np.exp(0.24))
    assert IntervalTable.from_dict(table.to_dict()) == table


def test_an_uncalibrated_band_is_widened_to_what_a_new_code_base_earned() -> None:
    """The new-source row widens uncalibrated regimes only, on the side it is wider, says
    so, survives a round trip, and a regime that borrows its band is widened all the same."""
    from gpucast.predict.intervals import NEW_SOURCE

    table = IntervalTable.from_residuals(
        {
            "gpu_unseen/uncalibrated": np.linspace(-0.3, 0.3, 11),
            "gpu_unseen/calibrated": np.linspace(-0.1, 0.1, 11),
            NEW_SOURCE: np.linspace(-0.2, 1.0, 13),
        }
    )
    q_low, q_high = table.q_low[NEW_SOURCE], table.q_high[NEW_SOURCE]
    low, high = table.ratios("gpu_unseen/uncalibrated")
    assert low == pytest.approx(np.exp(-0.24))  # its own lower side is the wider
    assert high == pytest.approx(np.exp(q_high)) and q_high > 0.24
    assert table.widened("gpu_unseen/uncalibrated")
    assert table.ratios("gpu_seen/uncalibrated") == (low, high)  # borrowed, then widened
    assert not table.widened("gpu_unseen/calibrated")
    assert table.ratios("gpu_unseen/calibrated") == pytest.approx((np.exp(-0.08), np.exp(0.08)))
    assert not table.widened(NEW_SOURCE)
    assert table.ratios(NEW_SOURCE) == pytest.approx((np.exp(q_low), np.exp(q_high)))
    assert IntervalTable.from_dict(table.to_dict()) == table
    narrow = IntervalTable.from_residuals(
        {"gpu_unseen/uncalibrated": np.linspace(-0.3, 0.3, 11), NEW_SOURCE: np.zeros(5)}
    )
    assert not narrow.widened("gpu_unseen/uncalibrated")


def test_a_prediction_without_a_measurement_states_the_new_code_base_band() -> None:
    """Fitted with a source table, an uncalibrated prediction's interval is the envelope and
    its note names the band and how to narrow it; a calibrated one keeps its regime's."""
    from gpucast.predict.intervals import NEW_SOURCE

    rows = synthetic_steps(noise=0.05)
    model = StepTimeModel().fit(rows, fitted_on="synthetic")
    residuals = cross_validated_residuals(rows)
    sources = pd.DataFrame(
        {"source": np.repeat(["a", "b", "c"], 10), "residual": np.linspace(-1.2, 1.5, 30)}
    )
    model.with_intervals(interval_table(residuals, sources))
    assert model.intervals_.level[NEW_SOURCE] >= 0.9
    eff = model.efficiency()
    fp32, bf16, bw, _ = GPUS["A"]
    work = RooflineWorkload(
        name="w1", batch_size=32, matmul_flops=3e9 * 32, memory_bytes=40e6 * 32, n_kernels=300
    )
    est = predict_step_time(work, _spec("Z", fp32, bf16, bw), "fp32", efficiency=eff)
    low, high = model.intervals_.ratios("gpu_unseen/uncalibrated")
    assert est.lower == pytest.approx(est.value * low) and est.upper == pytest.approx(
        est.value * high
    )
    assert high >= np.exp(model.intervals_.q_high[NEW_SOURCE]) - 1e-12
    notes = " ".join(est.notes)
    assert "a code base no source ran" in notes and "gpucast measure train" in notes
    gpu_a = _spec("A", fp32, bf16, bw)
    cal = calibrate(work, est.value, gpu_a, "fp32", efficiency=eff)
    calibrated = predict_step_time(work, _spec("Z", fp32, bf16, bw), "fp32", calibration=cal,
                                   efficiency=eff)  # fmt: skip
    assert "a code base no source ran" not in " ".join(calibrated.notes)
    # the calibrated regime's own band (at the measured batch), not the new-code-base one
    _, own_high = model.intervals_.ratios("gpu_unseen/calibrated/batch_x2")
    assert calibrated.upper / calibrated.value == pytest.approx(own_high)


def test_nested_coverage_as_stated_widens_the_uncalibrated_regimes_only() -> None:
    """Judged as the product states them, uncalibrated regimes take the new-code-base band the
    other sources give each row's source: coverage can only rise there, and the calibrated
    regimes are judged exactly as before."""
    rows = synthetic_steps(noise=0.08, seed=3)
    rows["source"] = np.where(rows["gpu"].isin(["A", "B"]), "a", "b")
    residuals = cross_validated_residuals(rows)
    sources = pd.DataFrame(
        {"source": np.repeat(["a", "b", "c"], 12), "residual": np.linspace(-2.0, 2.0, 36)}
    )
    own = nested_coverage(residuals).set_index("regime")
    stated = nested_coverage(residuals, sources).set_index("regime")
    for regime in own.index:
        if regime in UNCALIBRATED:
            assert stated.loc[regime, "coverage"] >= own.loc[regime, "coverage"]
        else:
            assert stated.loc[regime, "coverage"] == own.loc[regime, "coverage"]
    assert stated.loc["gpu_unseen/uncalibrated", "coverage"] == pytest.approx(1.0)


def test_the_uncalibrated_regime_follows_what_the_fit_has_measured() -> None:
    """A workload the fit has rows of, on a GPU type it has: measured_elsewhere; a workload it
    never saw on a GPU it never saw: the envelope of the two less-informed bands, never
    narrower than either."""
    from dataclasses import replace

    from gpucast.predict.intervals import NOVEL

    rows = synthetic_steps(noise=0.05).assign(workload=lambda f: f["workload_key"])
    model = StepTimeModel().fit(rows, fitted_on="synthetic")
    assert model.workloads_ == frozenset(rows["workload_key"])
    model.with_intervals(interval_table(cross_validated_residuals(rows)))
    eff = model.efficiency()
    assert eff.measured_workloads == model.workloads_
    fp32, bf16, bw, _ = GPUS["A"]

    def regime_of(name: str, gpu: str) -> str:
        work = RooflineWorkload(name=name, batch_size=32, matmul_flops=3e9 * 32,
                                memory_bytes=40e6 * 32, n_kernels=300)  # fmt: skip
        est = predict_step_time(work, _spec(gpu, fp32, bf16, bw), "fp32", efficiency=eff)
        note = next(n for n in est.notes if n.startswith("80% interval"))
        return note.split("in regime ")[1].split()[0].rstrip(",")

    assert regime_of("w1", "A") == "gpu_seen/measured_elsewhere"
    assert regime_of("mine", "A") == "gpu_seen/uncalibrated"
    assert regime_of("w1", "Z") == "gpu_unseen/uncalibrated"
    assert regime_of("mine", "Z") == NOVEL
    table = eff.intervals
    low, high = table.ratios(NOVEL)
    for other in ("gpu_seen/uncalibrated", "gpu_unseen/uncalibrated"):
        lo, hi = table.ratios(other)
        assert low <= lo and high >= hi
    # a model saved before the workload list existed treats every workload as new
    state = model._state()
    state.pop("workloads")
    assert StepTimeModel._from_state(state).workloads_ == frozenset()
    assert replace(eff, measured_workloads=frozenset()).measured_workloads == frozenset()


def _spec(name: str, fp32: float, bf16: float, bw: float) -> GpuSpec:
    from datetime import date

    return GpuSpec(
        name=name, vendor="nvidia", architecture="test", fp32_tflops=fp32, tf32_tflops=None,
        fp16_tflops=bf16, bf16_tflops=bf16, fp8_tflops=None, memory_gib=16,
        memory_bandwidth_gbps=bw, interconnect_gbps=None, pcie_generation=4, tdp_w=300, sm_count=80,
        source_url="https://example.org", as_of=date(2026, 12, 2),
    )  # fmt: skip


def test_recovers_the_latency_of_evaluations_inside_a_timed_run() -> None:
    rows = synthetic_steps()
    # some runs evaluate: a fixed 0.2 s per evaluation, spread over their steps
    runs = np.where(rows.gpu == "D", np.linspace(0.0, 0.05, len(rows)), 0.0)
    rows = rows.assign(eval_runs=runs, eval_work=0.0, step_time_s=rows.step_time_s + runs * 0.2)
    model = StepTimeModel(gpu_prior_sd=10.0, workload_prior_sd=10.0).fit(rows)
    assert model.eval_latency_s_ == pytest.approx(0.2, rel=0.02)
    np.testing.assert_allclose(
        model.predict(rows, use_workload_factor=True), rows["step_time_s"], rtol=5e-3
    )
    # the forward passes of the evaluated samples: a third of a trained sample's work
    terms = model.terms(rows.assign(eval_runs=0.0, eval_work=0.3))
    np.testing.assert_allclose(
        terms["evaluation"], 0.1 * (terms["compute"] + terms["memory_bandwidth"]), rtol=1e-9
    )
    # rows without the columns hold no evaluation; a state from before the term reads as 0
    assert not model.terms(rows.drop(columns=["eval_runs", "eval_work"]))["evaluation"].any()
    state = model.to_dict()
    assert StepTimeModel.from_dict(state).eval_latency_s_ == model.eval_latency_s_
    old = {**state, "state": {k: v for k, v in state["state"].items() if k != "eval_latency_s"}}
    assert StepTimeModel.from_dict(old).eval_latency_s_ == 0.0
    # nothing to fit it on without evaluations
    assert StepTimeModel().fit(synthetic_steps()).eval_latency_s_ == 0.0
    with pytest.raises(InvalidSpecError, match="eval_runs"):
        StepTimeModel().fit(rows.assign(eval_runs=-1.0))
    bad = {**state, "state": {**state["state"], "eval_latency_s": -1.0}}
    with pytest.raises(InvalidInputError, match="non-positive"):
        StepTimeModel.from_dict(bad)


def test_a_stacks_unidentified_per_kernel_cost_is_drawn_to_the_reference_stacks() -> None:
    rows = synthetic_steps()
    # a second stack whose rows cannot tell a per-kernel from a per-step cost: one workload
    tuned = rows[rows.workload_key == "w1"].assign(stack="tuned", workload_key="t1")
    frame = pd.concat([rows, tuned], ignore_index=True)
    with_prior = StepTimeModel().fit(frame)
    reference = with_prior.overhead_s_["pytorch"]
    assert reference == pytest.approx(8e-6, rel=0.1)
    assert with_prior.overhead_s_["tuned"] == pytest.approx(reference, rel=0.5)
    # without the prior nothing pins it: it may sit anywhere, the fit is as good either way
    free = StepTimeModel(kernel_prior_sd=float("inf")).fit(frame)
    for model in (with_prior, free):
        np.testing.assert_allclose(
            model.predict(tuned, use_workload_factor=True), tuned.step_time_s, rtol=0.05
        )
    assert StepTimeModel.from_dict(with_prior.to_dict()).kernel_prior_sd == 1.0
    with pytest.raises(InvalidSpecError, match="kernel_prior_sd"):
        StepTimeModel(kernel_prior_sd=0.0).fit(frame)


def test_a_stack_measured_at_one_batch_has_its_per_step_cost_drawn_to_the_reference() -> None:
    rows = synthetic_steps()
    # a second stack measured on one GPU at one batch per workload: its per-step cost cannot be
    # told from per-sample work there, and only the split carries to a faster GPU
    one = rows[(rows.gpu == "A") & (rows.batch == 128.0)].assign(stack="tf1")
    one = one.assign(workload_key="tf1:" + one.workload_key)
    frame = pd.concat([rows, one], ignore_index=True)
    with_prior = StepTimeModel().fit(frame)
    assert with_prior.step_s_["tf1"] == pytest.approx(with_prior.step_s_["pytorch"], abs=2e-3)
    on_b = rows[(rows.gpu == "B") & (rows.batch == 128.0)].assign(stack="tf1")
    on_b = on_b.assign(workload_key="tf1:" + on_b.workload_key)
    free = StepTimeModel(step_prior_sd=float("inf")).fit(frame)
    # both fit the GPU they saw; the prior's split carries better to the other one
    errors = {}
    for name, model in (("prior", with_prior), ("free", free)):
        np.testing.assert_allclose(
            model.predict(one, use_workload_factor=True), one.step_time_s, rtol=0.15
        )
        errors[name] = np.abs(
            np.log(model.predict(on_b, use_workload_factor=True) / on_b.step_time_s)
        )
    assert errors["prior"].max() < 0.12
    assert errors["prior"].mean() < 0.75 * errors["free"].mean()
    # the reference stack, measured at several batches, has no such prior
    from gpucast.predict._steptime_columns import _single_batch_stacks

    assert _single_batch_stacks(frame) == {"tf1"}
    assert StepTimeModel.from_dict(with_prior.to_dict()).step_prior_sd == 0.5
    with pytest.raises(InvalidSpecError, match="step_prior_sd"):
        StepTimeModel(step_prior_sd=-1.0).fit(frame)


def test_the_interval_level_widens_until_held_out_groups_are_covered() -> None:
    from gpucast.predict.intervals import LEVELS, calibrated_level, held_out_coverage

    rng = np.random.default_rng(7)
    # 12 groups whose residuals share an offset: pooled percentiles are too narrow for a
    # new group, so the nominal 0.90 level covers well under 80% of each held-out group
    offsets = rng.normal(0.0, 0.5, 12)
    groups = np.repeat(np.arange(12), 20)
    r = offsets[groups] + rng.normal(0.0, 0.05, groups.size)
    assert held_out_coverage(r, groups, 0.90) < 0.8
    level = calibrated_level(r, groups)
    assert 0.90 < level <= LEVELS[-1]
    assert held_out_coverage(r, groups, level) >= 0.8
    # independent residuals: the nominal level already covers 80%
    iid = rng.normal(0.0, 0.3, groups.size)
    assert calibrated_level(iid, groups) <= 0.91
    # the table states the level; a table written before it reads as the nominal 0.90
    frame = pd.DataFrame({"regime": "gpu_unseen/calibrated", "held_out": groups, "residual": r})
    table = interval_table(frame)
    assert table.level["gpu_unseen/calibrated"] == level
    assert table.q_high["gpu_unseen/calibrated"] == pytest.approx(np.quantile(r, level))
    old = {k: v for k, v in table.to_dict().items() if k != "level"}
    assert IntervalTable.from_dict(old).level == {}
    assert IntervalTable.from_dict(table.to_dict()) == table
    # judged on groups it never saw, the widened band covers about 80%, the nominal one less
    honest = nested_coverage(frame).set_index("regime").loc["gpu_unseen/calibrated", "coverage"]
    assert honest > held_out_coverage(r, groups, 0.90)


def test_a_source_left_out_is_predicted_from_the_others_and_judged_on_its_band() -> None:
    """Two labs: lab b (GPUs C and D) runs the same physics 2x slower (its host and code).
    Left out, b's rows are predicted from lab a alone -- uncalibrated, its GPUs unseen --
    so they come out 2x fast, and the band a's cross-validation states cannot cover them;
    a's rows predicted from b come out 2x slow. Rows without an absolute scale are left out;
    one source is refused."""
    rows = synthetic_steps(noise=0.02, seed=3)
    rows["source"] = np.where(rows["gpu"].isin(["A", "B"]), "a", "b")
    rows.loc[rows["source"] == "b", "step_time_s"] *= 2.0
    rows["samples_known"] = True
    rows.loc[rows.index[:3], "samples_known"] = False  # three of lab a's rows
    rows["workload"] = rows["workload_key"]  # both labs ran the same models
    out = source_held_out(rows)
    assert len(out) == len(rows) - 3
    assert set(out["regime"]) == {"gpu_unseen/uncalibrated"}
    # models the other lab never ran: the envelope of a new GPU and a new workload
    novel = source_held_out(rows.assign(workload=rows["source"] + rows["workload_key"]))
    assert set(novel["regime"]) == {"gpu_unseen/novel_workload"}
    b = out[out["source"] == "b"]
    assert np.median(b["residual"]) == pytest.approx(np.log(2.0), abs=0.15)
    assert b["inside"].mean() < 0.5
    a = out[out["source"] == "a"]
    assert np.median(a["residual"]) == pytest.approx(-np.log(2.0), abs=0.15)
    # widened by the band the *other* lab's rows give: a's residuals (2x fast) widen b's
    # band downwards only, so b's (2x slow) stay outside -- two labs teach no shift's size
    assert (out["widened_low"] <= out["low"]).all() and (out["widened_high"] >= out["high"]).all()
    assert (out["widened_inside"] >= out["inside"]).all()
    assert b["widened_low"].iloc[0] < b["low"].iloc[0]
    assert b["widened_inside"].mean() < 0.5
    with pytest.raises(InvalidInputError, match="two sources"):
        source_held_out(rows[rows["source"] == "a"])


def test_sources_left_out_side_by_side_give_the_same_rows() -> None:
    """Each left-out source's refits as a task of worker processes (fit steptime --jobs):
    the frame one process gives, row for row."""
    from gpucast.app._workers import worker_pool

    rows = synthetic_steps(noise=0.02, seed=3)
    rows["source"] = np.select([rows["gpu"] == "A", rows["gpu"] == "B"], ["a", "b"], default="c")
    rows["samples_known"] = True
    rows["workload"] = rows["workload_key"]
    here = source_held_out(rows)
    pool = worker_pool(2)
    assert pool is not None
    apart = source_held_out(rows, executor=pool)
    assert set(here["source"]) == {"a", "b", "c"}
    pd.testing.assert_frame_equal(apart, here)


@pytest.mark.parametrize("kind", ["fp32 and bf16", "convolutions on tensor cores", "FP32 path"])
def test_the_fit_s_jacobian_is_the_derivative_of_its_prediction(kind: str) -> None:
    from gpucast.predict._steptime_columns import _extra
    from gpucast.predict._steptime_design import _Arrays, _Layout

    frame = {
        "fp32 and bf16": lambda: synthetic_steps(noise=0.05),
        "convolutions on tensor cores": lambda: synthetic_steps(conv_ratio=0.4),
        "FP32 path": lambda: synthetic_steps(low_ratio=True),
    }[kind]()
    frame = frame.assign(eval_runs=0.01, eval_work=0.2)  # the evaluation terms too
    layout = _Layout.of(frame)
    data, extra = _Arrays.of(frame, layout), _extra(frame)
    x0, low, high = layout.start_and_bounds()
    rng = np.random.default_rng(7)
    for theta in (x0, low + (high - low) * rng.uniform(0.2, 0.8, size=x0.size)):
        analytic = data.jacobian(theta, layout, extra)
        numeric = np.zeros_like(analytic)
        for j in range(theta.size):
            step = np.zeros_like(theta)
            step[j] = 1e-6
            up, down = (data.predict(theta + d, layout, extra) for d in (step, -step))
            numeric[:, j] = (up - down) / 2e-6
        scale = data.predict(theta, layout, extra)[:, None]  # relative to each row's step
        assert analytic / scale == pytest.approx(numeric / scale, abs=1e-6)
