"""Leave-one-group-out cross-validation shared by every performance model.

:func:`leave_one_group_out` is the one loop behind ``gpucast validate`` and the accuracy
scripts in ``benchmarks/``: for each value of ``group_col`` (a model name, a GPU...) a fresh
estimator is fitted on the *other* groups' rows only and predicts the held-out group's rows.
The held-out rows never reach the fit, so no target of the held-out group can leak.

:func:`error_summary` turns its output into MAPE (%) per group. The ``*_fit_predict``
factories adapt the speed, cluster and checkpoint estimators to the ``(train, test) ->
predictions`` signature the loop takes; :func:`speed_leave_one_model_out` and
:func:`speed_leave_one_gpu_out` are the speed model's two folds. The models never import this
module (it imports them). Pure: frames in, frames out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.cmdare import GPU_COL, MODEL_COL, STEP_TIME_COL, impute_model_properties
from gpucast.domain.errors import InvalidInputError, InvalidSpecError

#: ``fit_predict(train, test)``: fit on ``train``, predict every row of ``test``. Returns the
#: predictions in ``test``'s row order: an array / Series, or a frame with a ``predicted``
#: column, optionally ``lower`` and ``upper`` (the prediction interval) and any further
#: columns to carry into the result (e.g. the bottleneck).
FitPredict = Callable[[pd.DataFrame, pd.DataFrame], Any]

#: Columns :func:`leave_one_group_out` adds to the rows it returns.
CV_COLUMNS: tuple[str, ...] = ("held_out", "actual", "predicted", "lower", "upper", "ape_pct")


def _as_prediction_frame(out: Any, test: pd.DataFrame, group: str) -> pd.DataFrame:
    if isinstance(out, pd.DataFrame):
        if "predicted" not in out.columns:
            raise InvalidInputError(
                "fit_predict returned a frame without a 'predicted' column",
                fix="name the prediction column 'predicted'",
            )
        frame = pd.DataFrame({c: out[c].to_numpy() for c in out.columns})
        for column in ("predicted", "lower", "upper"):
            if column in frame.columns:
                frame[column] = frame[column].astype(np.float64)
    else:
        frame = pd.DataFrame({"predicted": np.asarray(out, dtype=np.float64).reshape(-1)})
    if len(frame) != len(test):
        raise InvalidInputError(
            f"fit_predict returned {len(frame)} predictions for the {len(test)} rows of "
            f"held-out group {group!r}",
            fix="return one prediction per test row, in the test frame's order",
        )
    for column in ("lower", "upper"):
        if column not in frame.columns:
            frame[column] = np.nan
    frame.index = test.index
    return frame


def leave_one_group_out(
    fit_predict: FitPredict,
    frame: pd.DataFrame,
    group_col: str,
    *,
    target_col: str,
) -> pd.DataFrame:
    """Cross-validate ``fit_predict`` by holding out one ``group_col`` value at a time.

    Returns a copy of ``frame`` (same index and row order) with the :data:`CV_COLUMNS`:
    ``held_out`` (the group whose fold predicted the row), ``actual`` (``target_col``),
    ``predicted``, ``lower`` / ``upper`` (NaN when ``fit_predict`` gives no interval) and
    ``ape_pct`` (``|predicted / actual - 1|`` in %). ``frame`` is not modified.
    """
    for column in (group_col, target_col):
        if column not in frame.columns:
            raise InvalidInputError(
                f"cross-validation frame lacks column {column!r}",
                fix=f"give a frame with {group_col!r} and {target_col!r}",
            )
    groups = frame[group_col].astype(str)
    names = sorted(set(groups))
    if len(names) < 2:
        raise InvalidSpecError(
            group_col,
            "needs at least 2 distinct values to hold one out",
            got=len(names),
            fix="add rows of another group",
        )
    actual = pd.to_numeric(frame[target_col], errors="coerce").to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(actual) & (actual > 0)):
        raise InvalidSpecError(target_col, "must be a finite number > 0 on every row")
    parts: list[pd.DataFrame] = []
    for held in names:
        test_mask = (groups == held).to_numpy()
        train, test = frame.loc[~test_mask], frame.loc[test_mask]
        pred = _as_prediction_frame(fit_predict(train, test), test, held)
        pred.insert(0, "held_out", held)
        parts.append(pred)
    preds = pd.concat(parts).loc[frame.index]
    out = frame.copy()
    out["held_out"] = preds["held_out"].to_numpy()
    out["actual"] = actual
    for column in preds.columns:
        if column != "held_out":
            out[column] = preds[column].to_numpy()
    out["ape_pct"] = np.abs(out["predicted"].to_numpy() / actual - 1.0) * 100.0
    return out


def held_out_scale(
    predicted: npt.ArrayLike, measured: npt.ArrayLike, *, median: bool = False
) -> npt.NDArray[np.float64]:
    """Per row, the one calibration factor a user who measured every *other* row would apply:
    the geometric mean of ``measured / predicted`` over the other rows (leave one out), or
    with ``median`` their median (robust to one row the model cannot explain)."""
    log_ratio = np.log(
        np.asarray(measured, dtype=np.float64) / np.asarray(predicted, dtype=np.float64)
    )
    n = log_ratio.size
    if n < 2:
        raise InvalidSpecError("rows", "need at least 2 to hold one out", got=n)
    if median:
        others = [np.median(np.delete(log_ratio, i)) for i in range(n)]
        return np.asarray(np.exp(others), dtype=np.float64)
    return np.asarray(np.exp((log_ratio.sum() - log_ratio) / (n - 1)), dtype=np.float64)


def scale_and_per_step(
    predicted_s: npt.ArrayLike, steps: npt.ArrayLike, measured_s: npt.ArrayLike
) -> tuple[float, float]:
    """The calibration ``measured ~ scale x predicted + per_step_s x steps`` fitted to every
    row: a factor on the model's time and a fixed time per step that does not scale with the
    GPU (host-side sampling, launches, synchronisation), least squares on the relative error,
    both >= 0 (:func:`scipy.optimize.nnls`). Returns ``(scale, per_step_s)``."""
    from scipy.optimize import nnls

    p, n, m = (np.asarray(v, dtype=np.float64) for v in (predicted_s, steps, measured_s))
    if not (p.shape == n.shape == m.shape) or p.size < 2:
        raise InvalidSpecError("rows", "need at least 2 of predicted, steps and measured")
    if not all(np.all(np.isfinite(v)) and np.all(v > 0) for v in (p, n, m)):
        raise InvalidSpecError("rows", "must be finite and > 0")
    (scale, per_step_s), _ = nnls(np.column_stack([p / m, n / m]), np.ones(p.size))
    return float(scale), float(per_step_s)


def held_out_scale_and_per_step(
    predicted_s: npt.ArrayLike, steps: npt.ArrayLike, measured_s: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Per row, the time :func:`scale_and_per_step` fitted on every *other* row predicts for
    it (leave one out): ``scale x predicted + per_step_s x steps``."""
    p, n, m = (np.asarray(v, dtype=np.float64) for v in (predicted_s, steps, measured_s))
    if p.size < 3:
        raise InvalidSpecError("rows", "need at least 3 to hold one out", got=p.size)
    out = np.empty(p.size)
    for i in range(p.size):
        keep = np.arange(p.size) != i
        scale, per_step_s = scale_and_per_step(p[keep], n[keep], m[keep])
        out[i] = scale * p[i] + per_step_s * n[i]
    return out


def error_summary(cv: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """MAPE (%) per ``by`` group of a :func:`leave_one_group_out` frame.

    One row per group with ``rows``, mean ``actual`` and ``predicted``, ``mape_pct``,
    ``max_ape_pct`` and ``coverage`` (share of actuals inside ``[lower, upper]``; NaN when the
    predictions had no interval). With ``by=[]`` one row for all of ``cv``.
    """
    has_interval = cv["lower"].notna() & cv["upper"].notna()
    inside = (cv["actual"] >= cv["lower"]) & (cv["actual"] <= cv["upper"])
    frame = cv.assign(_inside=np.where(has_interval, inside.astype(float), np.nan))
    aggregations: dict[str, Any] = {
        "rows": ("actual", "size"),
        "actual": ("actual", "mean"),
        "predicted": ("predicted", "mean"),
        "mape_pct": ("ape_pct", "mean"),
        "max_ape_pct": ("ape_pct", "max"),
        "coverage": ("_inside", "mean"),
    }
    if not by:
        table = frame.assign(_all="all").groupby("_all").agg(**aggregations)
        return pd.DataFrame(table.reset_index(drop=True))
    return pd.DataFrame(frame.groupby(list(by), sort=True).agg(**aggregations).reset_index())


# -- adapters of the estimators ---------------------------------------------------------------
def speed_fit_predict(
    specs: Mapping[str, GpuSpec] | None = None, *, coverage: float = 0.9
) -> FitPredict:
    """``fit_predict`` of :class:`~gpucast.predict.speed.SpeedModel` on CM-DARE-format rows."""
    from gpucast.predict.speed import SpeedModel

    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
        model = SpeedModel(coverage=coverage).fit(train, specs)
        pred = model.predict_frame(test, specs)
        return pd.DataFrame(
            {
                "predicted": pred["step_time_s"],
                "lower": pred["lower_s"],
                "upper": pred["upper_s"],
                "source": pred["source"],
                "bottleneck": pred["bottleneck"],
            }
        )

    return fit_predict


def _speed_cross_validate(
    rows: pd.DataFrame,
    specs: Mapping[str, GpuSpec] | None,
    *,
    group: str,
    coverage: float,
) -> pd.DataFrame:
    from gpucast.predict.speed import gpu_key

    missing = [c for c in (GPU_COL, STEP_TIME_COL) if c not in rows.columns]
    if missing:
        raise InvalidInputError(
            f"speed rows lack column(s) {', '.join(repr(c) for c in missing)}",
            fix="use the CM-DARE column format (see `gpucast fit speed --help`)",
        )
    rows = impute_model_properties(rows)  # model properties, not targets: no leakage
    frame = pd.DataFrame(
        {
            "gpu": rows[GPU_COL].astype(str).str.strip(),
            "model": rows[MODEL_COL].astype(str) if MODEL_COL in rows.columns else "",
        },
        index=rows.index,
    )
    frame["_gpu_key"] = frame["gpu"].map(gpu_key)
    group_col = "model" if group == "model" else "_gpu_key"
    rows = rows.assign(**{"__group": frame[group_col]})
    cv = leave_one_group_out(
        speed_fit_predict(specs, coverage=coverage), rows, "__group", target_col=STEP_TIME_COL
    )
    return pd.DataFrame(
        {
            "gpu": frame["gpu"],
            "model": frame["model"],
            "fold": group,
            "held_out": cv["held_out"],
            "actual_s": cv["actual"],
            "predicted_s": cv["predicted"],
            "lower_s": cv["lower"],
            "upper_s": cv["upper"],
            "source": cv["source"],
            "bottleneck": cv["bottleneck"],
            "ape_pct": cv["ape_pct"],
        },
        index=rows.index,
    )


def speed_leave_one_model_out(
    rows: pd.DataFrame,
    specs: Mapping[str, GpuSpec] | None = None,
    *,
    coverage: float = 0.9,
) -> pd.DataFrame:
    """Leave-one-model-out of the speed model on CM-DARE-format rows: each model's rows (on
    every GPU) are predicted by a model fitted without any of them. One row per input row:
    ``gpu``, ``model``, ``fold``, ``held_out``, ``actual_s``, ``predicted_s``, ``lower_s``,
    ``upper_s``, ``source``, ``bottleneck``, ``ape_pct``."""
    if MODEL_COL not in rows.columns:
        raise InvalidInputError(
            f"speed rows lack column {MODEL_COL!r}",
            fix="use the CM-DARE column format (see `gpucast fit speed --help`)",
        )
    return _speed_cross_validate(rows, specs, group="model", coverage=coverage)


def speed_leave_one_gpu_out(
    rows: pd.DataFrame,
    specs: Mapping[str, GpuSpec] | None = None,
    *,
    coverage: float = 0.9,
) -> pd.DataFrame:
    """Cross-GPU check of the speed model: each GPU's rows are predicted by a model fitted on
    the other GPUs only, i.e. from the held-out GPU's peak FLOP/s (its ``GPU TFLOPS`` column,
    else its catalog spec in ``specs``). Same columns as :func:`speed_leave_one_model_out`."""
    return _speed_cross_validate(rows, specs, group="gpu", coverage=coverage)


def speed_error_table(cv: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, model): rows, mean actual and predicted step time, MAPE (%) and interval
    coverage, from a :func:`speed_leave_one_model_out` / :func:`speed_leave_one_gpu_out`
    frame."""
    inside = (cv["actual_s"] >= cv["lower_s"]) & (cv["actual_s"] <= cv["upper_s"])
    frame = cv.assign(inside=inside.astype(float))
    table = frame.groupby(["gpu", "model"], sort=True).agg(
        rows=("actual_s", "size"),
        actual_s=("actual_s", "mean"),
        predicted_s=("predicted_s", "mean"),
        mape_pct=("ape_pct", "mean"),
        coverage=("inside", "mean"),
    )
    return table.reset_index()


def cluster_fit_predict(**params: Any) -> FitPredict:
    """``fit_predict`` of :class:`~gpucast.predict.cluster.ClusterModel` on the rows of
    :func:`gpucast.store.datasets.cmdare_cluster.cluster_fit_table` (one row per run).

    The fold is fitted on the training rows; each held-out run is predicted from the held-out
    model's own measured 1-worker step time on the same GPU and its static features
    (parameters, tensors), as a user predicting cluster speed from one single-GPU measurement
    would. (Its N = 1 row is therefore near-trivial; the N > 1 rows are the test.)
    """
    from gpucast.predict.cluster import ClusterModel

    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
        model = ClusterModel(**params).fit(train)
        single = test[test["workers"] == 1].groupby("gpu")["speed_steps_per_s"].median()
        missing = sorted(set(test["gpu"]) - set(single.index))
        if missing:
            raise InvalidInputError(
                f"held-out model has no 1-worker run on {', '.join(map(str, missing))}",
                fix="include the 1-worker runs: they are the held-out model's input",
            )
        frame = pd.DataFrame(
            {
                "single_worker_step_time_s": 1.0 / test["gpu"].map(single).to_numpy(),
                "workers": test["workers"].to_numpy(),
                "param_bytes": test["n_parameters"].to_numpy(dtype=np.float64)
                * model.bytes_per_parameter,
                "n_tensors": test["n_tensors"].to_numpy(dtype=np.float64),
            },
            index=test.index,
        )
        pred = model.predict_frame(frame)
        return pd.DataFrame(
            {
                "predicted": pred["speed_steps_per_s"].to_numpy(),
                "lower": pred["lower"].to_numpy(),
                "upper": pred["upper"].to_numpy(),
            }
        )

    return fit_predict


def checkpoint_fit_predict(**params: Any) -> FitPredict:
    """``fit_predict`` of :class:`~gpucast.predict.overheads.CheckpointModel` on the rows of
    :func:`gpucast.store.datasets.cmdare_checkpoint.read_checkpoint_csv`."""
    from gpucast.predict.overheads import CheckpointModel

    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
        model = CheckpointModel(**params).fit(train)
        pred = model.predict_frame(test)
        return pd.DataFrame(
            {
                "predicted": pred["duration_s"].to_numpy(),
                "lower": pred["lower"].to_numpy(),
                "upper": pred["upper"].to_numpy(),
            }
        )

    return fit_predict
