"""The per-operator random forest: exact tree walk, step sum, overhead, roofline baseline."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from kernel_factories import CPU, call_time_s, synthetic_observations, synthetic_trace
from sklearn.ensemble import RandomForestRegressor

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict.kernels import (
    KernelDevice,
    KernelObservation,
    KernelTimeModel,
    operator_features,
    roofline_call_s,
    roofline_step_s,
)


def test_the_saved_trees_walk_exactly_as_scikit_learn_predicts() -> None:
    obs = synthetic_observations()
    model = KernelTimeModel(n_estimators=6, random_state=3).fit(obs)
    x = np.vstack([operator_features(o.trace.operators, o.device) for o in obs])
    y = np.concatenate(
        [
            np.log([op.time_s_per_call for op in o.trace.operators])
            - np.log(roofline_call_s(o.trace.operators, o.device))
            for o in obs
        ]
    )
    w = np.concatenate([[op.calls_per_step for op in o.trace.operators] for o in obs])
    forest = RandomForestRegressor(
        n_estimators=6, min_samples_leaf=2, max_features=0.7, random_state=3
    ).fit(x, y, sample_weight=w)
    trace = synthetic_trace("new", scale=1.7)
    expected = roofline_call_s(trace.operators, CPU) * np.exp(
        forest.predict(operator_features(trace.operators, CPU))
    )
    np.testing.assert_allclose(model.predict_call_s(trace.operators, CPU), expected, rtol=1e-9)


def test_a_held_out_step_inside_the_training_range_is_predicted_closely() -> None:
    model = KernelTimeModel().fit(synthetic_observations(overhead_s=2e-3))
    trace = synthetic_trace("held-out", scale=1.5)
    truth = trace.operator_time_s_per_step + 2e-3
    predicted = model.predict_step(trace, CPU)
    assert predicted.step_time_s == pytest.approx(truth, rel=0.15)
    assert predicted.overhead_s == pytest.approx(2e-3, abs=1e-4)
    assert sum(predicted.by_class_s.values()) == pytest.approx(predicted.operator_time_s)
    assert predicted.by_class_s["conv"] > predicted.by_class_s["reduction"]
    assert model.training["workloads"] == [f"m{i}" for i in range(5)]


def test_a_faster_device_is_predicted_faster_through_the_roofline() -> None:
    model = KernelTimeModel(n_estimators=8).fit(synthetic_observations())
    fast = KernelDevice(
        name="fast", kind="cpu", peak_flops_per_s=8e11, memory_bandwidth_bytes_per_s=1e11, cores=8
    )
    trace = synthetic_trace("x")
    assert (
        model.predict_step(trace, fast).operator_time_s
        < model.predict_step(trace, CPU).operator_time_s
    )


def test_roofline_step_uses_the_roofline_modules_default_efficiencies() -> None:
    trace = synthetic_trace("x")
    compute = sum(
        op.flops * op.calls_per_step for op in trace.operators if op.op_class in ("matmul", "conv")
    )
    memory = sum(
        op.bytes_moved * op.calls_per_step
        for op in trace.operators
        if op.op_class not in ("matmul", "conv")
    )
    expected = (
        compute / (0.62 * CPU.peak_flops_per_s)
        + memory / (0.70 * CPU.memory_bandwidth_bytes_per_s)
        + round(trace.calls_per_step) * 10e-6
    )
    assert roofline_step_s(trace, CPU) == pytest.approx(expected, rel=1e-9)
    assert call_time_s(0, 0) > 0


def test_bad_inputs_and_states_are_refused() -> None:
    with pytest.raises(InvalidSpecError, match="observations"):
        KernelTimeModel().fit([])
    with pytest.raises(InvalidSpecError, match="peak_flops_per_s"):
        KernelDevice(
            name="x", kind="cpu", peak_flops_per_s=0.0, memory_bandwidth_bytes_per_s=1.0, cores=1
        )
    saved = KernelTimeModel(n_estimators=2).fit(synthetic_observations()).to_dict()
    cyclic = copy.deepcopy(saved)
    tree = cyclic["state"]["trees"][0]
    tree["left"][0] = 0  # a node that is its own child would never reach a leaf
    with pytest.raises(InvalidInputError, match="inconsistent"):
        KernelTimeModel.from_dict(cyclic)
    other_features = copy.deepcopy(saved)
    other_features["state"]["features"] = ["a"]
    with pytest.raises(InvalidInputError, match="features"):
        KernelTimeModel.from_dict(other_features)


def test_the_power_forest_learns_each_calls_power_and_sums_the_steps_energy() -> None:
    from kernel_factories import call_power_w

    model = KernelTimeModel(n_estimators=16).fit(synthetic_observations())
    assert model.has_power and model.training["operators_with_power"] == 40
    trace = synthetic_trace("held-out", scale=1.5)
    power = model.predict_call_power_w(trace.operators, CPU)
    truth = np.array(
        [call_power_w(op.op_class, op.flops, op.bytes_moved) for op in trace.operators]
    )
    assert np.max(np.abs(power / truth - 1.0)) < 0.1
    # compute-dense calls draw more than the data-moving ones, as in the law
    classes = [op.op_class for op in trace.operators]
    assert power[classes.index("conv")] > power[classes.index("other")] + 10.0
    step = model.predict_step(trace, CPU)
    measured_j = trace.energy_j_per_step
    assert step.energy_j is not None and measured_j is not None
    assert step.energy_j == pytest.approx(measured_j, rel=0.15)
    assert step.power_w == pytest.approx(step.energy_j / step.step_time_s)
    assert sum(step.by_class_j.values()) <= step.energy_j + 1e-12 or step.overhead_s < 0


def test_without_energy_readings_it_predicts_time_only_and_says_so() -> None:
    obs = [
        type(o)(
            workload=o.workload,
            device=o.device,
            trace=synthetic_trace(o.workload, scale=s, energy=False),
            step_time_s=o.step_time_s,
        )
        for o, s in zip(synthetic_observations(), (0.25, 0.5, 1.0, 2.0, 4.0), strict=True)
    ]
    model = KernelTimeModel(n_estimators=4).fit(obs)
    assert not model.has_power
    assert model.predict_step(synthetic_trace("x"), CPU).energy_j is None
    with pytest.raises(InvalidSpecError, match="energy readings"):
        model.predict_call_power_w(synthetic_trace("x").operators, CPU)
    # a state saved before the power forest existed loads as a time-only model
    state = model.to_dict()
    state["state"].pop("power_trees")
    state["state"].pop("overhead_power_w")
    assert not KernelTimeModel.from_dict(state).has_power
    broken = copy.deepcopy(model.to_dict())
    broken["state"]["power_trees"] = []
    with pytest.raises(InvalidInputError, match="power_trees"):
        KernelTimeModel.from_dict(broken)


def test_an_overhead_capped_at_half_the_operators_says_so() -> None:
    """QA 39: a user's transformer predicted "step overhead (fitted) -3.53 ms" against 7.06 ms
    of operators -- the fitted per-call overhead, capped at -50% of the operators, shown as
    fitted. The prediction now says it was capped."""
    obs = []
    for i, scale in enumerate((0.25, 0.5, 1.0, 2.0, 4.0)):
        trace = synthetic_trace(f"m{i}", scale=scale)  # profiled calls 10x the step
        step_s = 0.1 * trace.operator_time_s_per_step
        obs.append(KernelObservation(workload=f"m{i}", device=CPU, trace=trace, step_time_s=step_s))
    model = KernelTimeModel().fit(obs)
    predicted = model.predict_step(synthetic_trace("held-out", scale=1.5), CPU)
    assert predicted.overhead_s == pytest.approx(-0.5 * predicted.operator_time_s)
    assert predicted.overhead_capped
    assert predicted.to_dict()["overhead_capped"] is True
    fitted = KernelTimeModel().fit(synthetic_observations(overhead_s=2e-3))
    assert not fitted.predict_step(synthetic_trace("held-out", scale=1.5), CPU).overhead_capped
