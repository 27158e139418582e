"""leave_one_group_out / error_summary: honest folds, alignment, errors, adapters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict.validation import (
    CV_COLUMNS,
    error_summary,
    leave_one_group_out,
    speed_fit_predict,
)


def _frame(groups: list[str], values: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"g": groups, "y": values, "x": np.arange(len(values), dtype=float)})


def test_held_out_group_never_reaches_the_fit() -> None:
    frame = _frame(["a", "a", "b", "c", "c", "c"], [1, 2, 3, 4, 5, 6])
    seen: list[tuple[set[str], set[str]]] = []

    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
        seen.append((set(train["g"]), set(test["g"])))
        return np.full(len(test), train["y"].mean())

    cv = leave_one_group_out(fit_predict, frame, "g", target_col="y")
    assert len(seen) == 3
    for train_groups, test_groups in seen:
        assert len(test_groups) == 1 and not (train_groups & test_groups)
    # b is predicted by the mean of a and c rows: (1 + 2 + 4 + 5 + 6) / 5 = 3.6
    assert cv.loc[2, "predicted"] == pytest.approx(3.6)
    assert cv.loc[2, "ape_pct"] == pytest.approx(20.0)
    assert list(cv["held_out"]) == ["a", "a", "b", "c", "c", "c"]
    assert set(CV_COLUMNS) <= set(cv.columns)
    assert cv["lower"].isna().all()  # no interval given


def test_frame_predictions_keep_interval_and_extra_columns() -> None:
    frame = _frame(["a", "b"], [1.0, 2.0])

    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
        value = test["y"].to_numpy() * 1.1
        return pd.DataFrame(
            {"predicted": value, "lower": value / 2, "upper": value * 2, "note": "x"}
        )

    cv = leave_one_group_out(fit_predict, frame, "g", target_col="y")
    assert cv["ape_pct"].to_list() == pytest.approx([10.0, 10.0])
    assert (cv["note"] == "x").all()
    summary = error_summary(cv, ["g"])
    assert summary["coverage"].to_list() == [1.0, 1.0]
    assert error_summary(cv, [])["mape_pct"].iloc[0] == pytest.approx(10.0)


def test_input_is_not_modified_and_order_is_kept() -> None:
    frame = _frame(["b", "a", "b", "a"], [1, 2, 3, 4]).set_index(pd.Index([9, 7, 5, 3]))
    before = frame.copy()
    cv = leave_one_group_out(lambda tr, te: te["y"].to_numpy(), frame, "g", target_col="y")
    pd.testing.assert_frame_equal(frame, before)
    assert list(cv.index) == [9, 7, 5, 3]
    assert (cv["ape_pct"] == 0).all()


def test_bad_inputs_raise() -> None:
    frame = _frame(["a", "a"], [1, 2])
    with pytest.raises(InvalidSpecError, match="at least 2"):
        leave_one_group_out(lambda tr, te: te["y"], frame, "g", target_col="y")
    with pytest.raises(InvalidInputError, match="lacks column"):
        leave_one_group_out(lambda tr, te: te["y"], frame, "nope", target_col="y")
    two = _frame(["a", "b"], [1, 2])
    with pytest.raises(InvalidInputError, match="1 rows"):
        leave_one_group_out(lambda tr, te: np.ones(3), two, "g", target_col="y")
    with pytest.raises(InvalidSpecError, match="> 0"):
        leave_one_group_out(lambda tr, te: te["y"], _frame(["a", "b"], [1, 0]), "g", target_col="y")


@settings(max_examples=30, deadline=None)
@given(
    groups=st.lists(st.sampled_from("abcd"), min_size=2, max_size=30),
    scale=st.floats(min_value=0.5, max_value=2.0),
)
def test_every_row_is_predicted_once_by_its_own_fold(groups: list[str], scale: float) -> None:
    if len(set(groups)) < 2:
        return
    frame = _frame(groups, [1.0 + i for i in range(len(groups))])
    cv = leave_one_group_out(lambda tr, te: te["y"].to_numpy() * scale, frame, "g", target_col="y")
    assert len(cv) == len(frame)
    assert (cv["held_out"] == cv["g"]).all()
    assert np.allclose(cv["ape_pct"], abs(scale - 1) * 100)


def test_speed_adapter_on_synthetic_rows() -> None:
    from speed_factories import synthetic_rows

    from gpucast.predict.speed import MODEL_COL, STEP_TIME_COL

    rows = synthetic_rows(noise=0.0)
    cv = leave_one_group_out(speed_fit_predict(), rows, MODEL_COL, target_col=STEP_TIME_COL)
    assert cv["ape_pct"].max() < 1.0  # noiseless rows of the model's own form
    assert {"source", "bottleneck"} <= set(cv.columns)


def test_held_out_scale_is_the_geometric_mean_of_the_other_rows() -> None:
    from gpucast.predict.validation import held_out_scale

    predicted = np.array([1.0, 2.0, 4.0])
    measured = np.array([2.0, 2.0, 2.0])  # ratios 2, 1, 0.5
    np.testing.assert_allclose(held_out_scale(predicted, measured), [0.5**0.5, 1.0, 2**0.5])
    with pytest.raises(InvalidSpecError, match="rows"):
        held_out_scale([1.0], [1.0])


def test_scale_and_per_step_recovers_both_terms_and_holds_each_row_out() -> None:
    from gpucast.predict.validation import held_out_scale_and_per_step, scale_and_per_step

    predicted = np.array([100.0, 50.0, 20.0, 10.0])
    steps = np.array([1000.0, 1000.0, 400.0, 100.0])
    measured = 0.5 * predicted + 0.03 * steps  # a factor and 30 ms a step
    scale, per_step = scale_and_per_step(predicted, steps, measured)
    assert scale == pytest.approx(0.5) and per_step == pytest.approx(0.03)
    np.testing.assert_allclose(held_out_scale_and_per_step(predicted, steps, measured), measured)
    # a row the others cannot explain is predicted from them alone, not fitted
    odd = measured.copy()
    odd[0] *= 2.0
    held = held_out_scale_and_per_step(predicted, steps, odd)
    assert held[0] == pytest.approx(measured[0])
    # steps that would want a negative time each are held at none (a factor alone)
    scale, per_step = scale_and_per_step(predicted, steps, 0.8 * predicted - 0.01 * steps)
    assert per_step == 0.0 and 0.5 < scale < 0.8
    with pytest.raises(InvalidSpecError, match="rows"):
        held_out_scale_and_per_step(predicted[:2], steps[:2], measured[:2])
    with pytest.raises(InvalidSpecError, match="rows"):
        scale_and_per_step([1.0, float("nan")], [1.0, 1.0], [1.0, 1.0])


def test_held_out_median_scale_ignores_one_outlier() -> None:
    from gpucast.predict.validation import held_out_scale

    predicted = np.ones(5)
    measured = np.array([1.0, 1.1, 0.9, 1.0, 5.0])  # one row the model cannot explain
    median = held_out_scale(predicted, measured, median=True)
    mean = held_out_scale(predicted, measured)
    assert median[0] == pytest.approx(np.exp(np.median(np.log([1.1, 0.9, 1.0, 5.0]))))
    assert median[1] < 1.01 < mean[1]  # the outlier drags the geometric mean, not the median
    assert median[4] == pytest.approx(1.0)
