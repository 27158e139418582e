"""Held-out log residuals of :class:`~gpucast.predict.steptime.StepTimeModel` per regime
(:func:`cross_validated_residuals`) and with each source left out
(:func:`source_held_out`): the folds, and the residuals of predictions calibrated by a
measurement at another batch or on another GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError
from gpucast.predict._steptime_columns import TARGET, FloatArray, _workload_names
from gpucast.predict._steptime_intervals import _widened_limits, interval_table
from gpucast.predict._steptime_model import StepTimeModel
from gpucast.predict.intervals import BRACKETED, CROSS_GPU, SAME_GPU, batch_regimes
from gpucast.predict.roofline import held_ratio, two_part_solution, uncalibrated_regime

if TYPE_CHECKING:  # pandas loads where a frame is built (fits), not to predict
    from concurrent.futures import Executor

    import pandas as pd

#: ``(train, test) -> log(measured / predicted)`` for the test rows, one regime's fold.
Fold = Callable[["pd.DataFrame", "pd.DataFrame"], FloatArray]


def _scale_known(frame: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Rows whose source gives an absolute scale (``samples_known``; all without the column):
    only those can test a prediction that no measurement of the workload calibrates."""
    if "samples_known" not in frame.columns:
        return np.ones(len(frame), dtype=bool)
    return np.asarray(frame["samples_known"].to_numpy(dtype=bool))


def _log_residuals(
    model: StepTimeModel,
    test: pd.DataFrame,
    *,
    calibrated: bool,
    carried: FloatArray | None = None,
) -> FloatArray:
    """``log(measured / predicted)`` per row; ``carried``: per row, the factor on the fixed
    part carried from the GPUs the workload was measured on (:func:`_carried_ratio`)."""
    terms = model.terms(test, use_workload_factor=calibrated)
    predicted = np.asarray(sum(terms.values()), dtype=np.float64)
    if carried is not None:
        predicted = predicted + terms["overhead"] * (carried - 1.0)
    return np.asarray(np.log(test[TARGET].to_numpy(dtype=np.float64) / predicted), dtype=np.float64)


def _carried_ratio(
    model: StepTimeModel, target: pd.DataFrame, measured: pd.DataFrame
) -> FloatArray:
    """Per (target row, measured row) pair: how many times its own fixed part (with its GPU's
    factor) the target row takes when the measured row calibrates it -- the fixed part
    carried from the measured GPU, its factor times ``sqrt(peak ratio x bandwidth ratio)``
    (:func:`gpucast.predict.roofline.carried_fixed_ratio`, as a prediction calibrated on
    another GPU prices it)."""

    def col(frame: pd.DataFrame, name: str) -> FloatArray:
        return frame[name].to_numpy(dtype=np.float64)

    datasheet = np.sqrt(
        col(measured, "peak_tflops") / col(target, "peak_tflops")
        * col(measured, "bandwidth_gbps") / col(target, "bandwidth_gbps")
    )  # fmt: skip
    factors = model.gpu_factors(measured["gpu"]) / model.gpu_factors(target["gpu"])
    return np.asarray(factors * held_ratio(datasheet), dtype=np.float64)


def _carried_mean(model: StepTimeModel, test: pd.DataFrame, train: pd.DataFrame) -> FloatArray:
    """Per test row, the geometric mean of :func:`_carried_ratio` over the train rows of its
    workload key (its workload factor's rows; 1 where it has none)."""
    key_t = test["workload_key"].to_numpy()
    key_s = train["workload_key"].to_numpy()
    i, j = np.nonzero(key_t[:, None] == key_s[None, :])
    logs = np.zeros(len(test))
    counts = np.zeros(len(test))
    if len(i):
        ratio = _carried_ratio(model, test.iloc[i], train.iloc[j])
        np.add.at(logs, i, np.log(ratio))
        np.add.at(counts, i, 1.0)
    return np.asarray(np.exp(np.divide(logs, np.maximum(counts, 1.0))), dtype=np.float64)


def cross_validated_residuals(
    frame: pd.DataFrame,
    *,
    make_model: Callable[[], StepTimeModel] = StepTimeModel,
    min_rows: int = 1,
) -> pd.DataFrame:
    """Held-out log residuals ``log(measured / predicted)`` of every row in each regime.

    * ``gpu_unseen/calibrated`` -- leave one GPU out; the workload factors learnt on the other
      GPUs apply (a user who measured the model on one GPU, predicting another);
    * ``gpu_unseen/uncalibrated`` -- leave one GPU out and predict with workload factor 1;
    * ``gpu_seen/uncalibrated`` -- leave one (source, workload) out: the GPU factors apply,
      the workload is new;
    * ``gpu_seen/calibrated`` -- leave one (GPU, workload) pair out: both factors come from
      the other rows (the workload measured on other GPUs, the GPU seen with other work);
    * ``gpu_seen/measured_elsewhere`` -- the same fold predicted with workload factor 1: a
      workload the data has, on a GPU type it has, without a measurement of the user's own.

    The two calibrated folds are also scored as one measurement calibrates them (each held-out
    row from each row of its workload on another GPU, by batch distance: ``.../batch_x2`` ...),
    and the same-GPU regime pairs the rows of one (GPU, workload) (:func:`_same_gpu_residuals`).

    Returns one row per (observation, regime): the frame's ``source``, ``gpu``,
    ``workload_key`` (and ``group`` when present), ``regime``, ``held_out`` and ``residual``.
    """
    out: list[pd.DataFrame] = []
    pair = frame["gpu"].astype(str) + "|" + frame["workload_key"].astype(str)
    folds: list[tuple[str, pd.Series, bool]] = [
        ("gpu_unseen/calibrated", frame["gpu"], True),
        ("gpu_unseen/uncalibrated", frame["gpu"], False),
        ("gpu_seen/uncalibrated", frame["workload_key"], False),
        ("gpu_seen/calibrated", pair, True),
    ]
    keep = [
        c
        for c in ("source", "stack", "gpu", "workload_key", "group", "batch")
        if c in frame.columns
    ]
    for name, groups, calibrated in folds:
        for value in sorted(set(groups)):
            test_mask = (groups == value).to_numpy()
            train = frame[~test_mask]
            test = frame[test_mask]
            if len(train) < min_rows:
                continue
            # a row belongs to the regime only if what the regime assumes known is in train
            seen_gpu = test["gpu"].isin(set(train["gpu"])).to_numpy()
            seen_work = test["workload_key"].isin(set(train["workload_key"])).to_numpy()
            wanted = (seen_gpu == name.startswith("gpu_seen")) & (seen_work | (not calibrated))
            if not calibrated:
                wanted &= _scale_known(test)
            if not wanted.any():
                continue
            test = test[wanted]
            model = make_model().fit(train)
            part = test[keep].copy()
            part["regime"] = name
            part["held_out"] = value
            carried = _carried_mean(model, test, train) if name in CROSS_GPU else None
            part["residual"] = _log_residuals(model, test, calibrated=calibrated, carried=carried)
            out.append(part)
            if calibrated:  # the regime as one measurement on another GPU calibrates it
                one = _one_measurement_residuals(model, train, test, name, str(value), keep)
                if one is not None:
                    out.append(one)
            if name == "gpu_seen/calibrated":  # the same fold without the workload's factor
                known = test[_scale_known(test)]
                if len(known):
                    part = known[keep].copy()
                    part["regime"] = "gpu_seen/measured_elsewhere"
                    part["held_out"] = value
                    part["residual"] = _log_residuals(model, known, calibrated=False)
                    out.append(part)
    out.extend(_same_gpu_residuals(frame, pair, keep, make_model))
    if not out:
        raise InvalidInputError("no fold could be fitted", fix="give more than one group")
    import pandas as pd

    return pd.concat(out, ignore_index=True)


def source_held_out(
    frame: pd.DataFrame,
    *,
    make_model: Callable[[], StepTimeModel] = StepTimeModel,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Leave one *source* out, as a user meets a new lab, framework or code base: per source,
    the model and its interval table are fitted on the other sources alone
    (:func:`cross_validated_residuals` on them, :func:`interval_table`), then each of the
    source's rows is predicted uncalibrated (no factor of its workload) and judged against
    the 80% interval the product would state -- the uncalibrated band of its regime, by
    whether another source measured the row's GPU type and its workload. A stack or
    precision class only this source has is borrowed (:attr:`StepTimeModel.borrowed_`).
    Rows whose source does not give an absolute scale (``samples_known`` false) are left
    out. One row per predicted observation: the frame's ``source``, ``gpu``,
    ``workload_key``, ``stack``, ``regime``, ``residual`` (log measured / predicted), the
    regime's band ``low`` and ``high`` (log ratios) and ``inside`` (1 within it), and
    ``widened_low``, ``widened_high``, ``widened_inside``: the band widened to the
    new-code-base one the other sources' rows give (:func:`_widened_limits`), as
    :meth:`IntervalTable.ratios` states an uncalibrated prediction's. ``executor`` (worker
    processes) refits the sources side by side: the same result."""
    import pandas as pd

    if "source" not in frame.columns or frame["source"].nunique() < 2:
        raise InvalidInputError(
            "leaving a source out needs rows from two sources or more",
            fix="give a frame with a source column",
        )
    sources = sorted(set(frame["source"]))
    if executor is None:
        parts = [_source_held_out(frame, source, make_model) for source in sources]
    else:  # one source's refits per task, side by side: the same frame
        parts = [
            pending.result()
            for pending in [
                executor.submit(_source_held_out, frame, source, make_model) for source in sources
            ]
        ]
    out = [part for part in parts if part is not None]
    if not out:
        raise InvalidInputError(
            "no source has rows with an absolute scale to predict",
            fix="give rows whose samples_known is true",
        )
    result = pd.concat(out, ignore_index=True)
    low, high = _widened_limits(
        result, result["low"].to_numpy(np.float64), result["high"].to_numpy(np.float64), result
    )
    r = result["residual"].to_numpy(np.float64)
    result["widened_low"], result["widened_high"] = low, high
    result["widened_inside"] = ((r >= low) & (r <= high)).astype(np.float64)
    return result


def _source_held_out(
    frame: pd.DataFrame, source: str, make_model: Callable[[], StepTimeModel]
) -> pd.DataFrame | None:
    """:func:`source_held_out`'s rows of one ``source`` (None: none with an absolute scale)."""
    test_mask = (frame["source"] == source).to_numpy()
    train, test = frame[~test_mask], frame[test_mask]
    test = test[_scale_known(test)]
    if not len(test):
        return None
    table = interval_table(cross_validated_residuals(train, make_model=make_model))
    residual = _log_residuals(make_model().fit(train), test, calibrated=False)
    seen = test["gpu"].isin(set(train["gpu"])).to_numpy()
    known = _workload_names(train)
    measured = (
        test["workload"].astype(str).isin(known).to_numpy()
        if "workload" in test.columns
        else np.zeros(len(test), dtype=bool)
    )
    names = [uncalibrated_regime(bool(g), bool(w)) for g, w in zip(seen, measured, strict=True)]
    regime: npt.NDArray[Any] = np.asarray(names, dtype=object)
    bands = {r: np.log(table.ratios(r)) for r in set(regime)}
    low = np.array([bands[r][0] for r in regime], dtype=np.float64)
    high = np.array([bands[r][1] for r in regime], dtype=np.float64)
    keep = [c for c in ("source", "gpu", "workload_key", "stack") if c in test.columns]
    part = test[keep].copy()
    part["regime"] = regime
    part["residual"] = residual
    part["low"], part["high"] = low, high
    part["inside"] = ((residual >= low) & (residual <= high)).astype(np.float64)
    return part


def _same_gpu_residuals(
    frame: pd.DataFrame,
    pair: pd.Series,
    keep: list[str],
    make_model: Callable[[], StepTimeModel],
) -> list[pd.DataFrame]:
    """``same_gpu/calibrated``: the (GPU, workload) pair left out of the fit, then each of its
    rows predicted from a measurement of another of its rows (another batch) -- every ordered
    pair of rows, as :func:`gpucast.predict.roofline.calibrate` would scale it; each also under
    its :data:`~gpucast.predict.intervals.BATCH_DISTANCE` regime (how many doublings apart the
    two batches are)."""
    out: list[pd.DataFrame] = []
    for value in sorted(set(pair)):
        mask = (pair == value).to_numpy()
        test = frame[mask]
        batches = test["batch"].nunique() if "batch" in test.columns else len(test)
        if batches < 2:
            continue
        train = frame[~mask]
        if not len(train):
            continue
        model = make_model().fit(train)
        predicted = model.predict(test)
        measured = test[TARGET].to_numpy(dtype=np.float64)
        ratio = measured / predicted  # the scale a measurement of each row would give
        n = len(test)
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        off = i != j
        part = test[keep].iloc[i[off]].copy()
        part["regime"] = SAME_GPU
        part["held_out"] = value
        part["residual"] = np.log(measured[i[off]] / (ratio[j[off]] * predicted[i[off]]))
        out.append(part)
        if "batch" in test.columns:  # the same predictions by distance from the measured batch
            batch = test["batch"].to_numpy(dtype=np.float64)
            out.append(part.assign(regime=batch_regimes(SAME_GPU, batch[j[off]], batch[i[off]])))
            bracketed = _bracketed_residuals(model, test, keep)
            if bracketed is not None:
                out.append(bracketed.assign(held_out=value))
    return out


def _bracketed_residuals(
    model: StepTimeModel, test: pd.DataFrame, keep: list[str]
) -> pd.DataFrame | None:
    """:data:`~gpucast.predict.intervals.BRACKETED`: each row predicted from the two rows of
    the same configuration at the nearest smaller and the nearest larger batch, the model's
    per-sample and fixed parts each scaled to both
    (:func:`gpucast.predict.roofline.two_part_scale`; pairs without a positive pair of
    scales are skipped, as a prediction then falls back to the nearest measurement)."""
    terms = model.terms(test)
    work = terms["compute"] + terms["memory_bandwidth"] + terms["evaluation"]
    fixed, extra = terms["overhead"], terms["extra"]
    target = test[TARGET].to_numpy(dtype=np.float64) - extra
    batch = test["batch"].to_numpy(dtype=np.float64)
    config = [c for c in ("optimizer", "gpus", "precision", "stack") if c in test.columns]
    rows: list[int] = []
    predicted: list[float] = []
    for _, group in test.reset_index(drop=True).groupby(config, dropna=False, sort=False):
        idx = group.index.to_numpy()
        for i in idx:
            below = idx[batch[idx] < batch[i]]
            above = idx[batch[idx] > batch[i]]
            if not len(below) or not len(above):
                continue
            j = below[np.argmax(batch[below])]
            k = above[np.argmin(batch[above])]
            solved = two_part_solution(
                (work[j], fixed[j], target[j]), (work[k], fixed[k], target[k])
            )
            if solved is not None:
                rows.append(int(i))
                predicted.append(solved[0] * work[i] + solved[1] * fixed[i] + extra[i])
    if not rows:
        return None
    part = test[keep].iloc[rows].copy()
    part["regime"] = BRACKETED
    measured = test[TARGET].to_numpy(dtype=np.float64)[rows]
    part["residual"] = np.log(measured / np.asarray(predicted, dtype=np.float64))
    return part


def _one_measurement_residuals(
    model: StepTimeModel,
    train: pd.DataFrame,
    test: pd.DataFrame,
    regime: str,
    value: str,
    keep: list[str],
) -> pd.DataFrame | None:
    """A calibrated regime as a user meets it: each held-out row predicted from *one*
    measurement of its workload on another GPU (each train row of the same workload key, at
    its own batch), no workload factor -- the residual ``log(T_i / P_i) - log(T_j / P_j)``,
    under ``regime``'s :data:`~gpucast.predict.intervals.BATCH_DISTANCE` split; ``P_i``'s
    fixed part carried from row ``j``'s GPU (:func:`_carried_ratio`, as
    :func:`gpucast.predict.roofline.predict_step_time` prices a measurement on another GPU)."""
    if "batch" not in test.columns:
        return None
    same = train[train["workload_key"].isin(set(test["workload_key"]))]
    if not len(same):
        return None
    terms = model.terms(test)
    predicted = np.asarray(sum(terms.values()), dtype=np.float64)
    other = np.log(same[TARGET].to_numpy(dtype=np.float64) / model.predict(same))
    key_t = test["workload_key"].to_numpy()
    key_s = same["workload_key"].to_numpy()
    i, j = np.nonzero(key_t[:, None] == key_s[None, :])
    if not len(i):
        return None
    own = predicted[i]
    if regime in CROSS_GPU:  # the fixed part carried from the measured GPU
        own = own + terms["overhead"][i] * (_carried_ratio(model, test.iloc[i], same.iloc[j]) - 1.0)
    part = test[keep].iloc[i].copy()
    part["held_out"] = str(value)
    part["residual"] = np.log(test[TARGET].to_numpy(dtype=np.float64)[i] / own) - other[j]
    b_t = test["batch"].to_numpy(dtype=np.float64)[i]
    b_s = same["batch"].to_numpy(dtype=np.float64)[j]
    part["regime"] = batch_regimes(regime, b_s, b_t)
    return part
