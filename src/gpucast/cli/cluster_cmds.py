"""`gpucast fit cluster|checkpoint` and `gpucast predict cluster|checkpoint` (thin shells).

The lead wires these functions into the ``fit`` / ``predict`` Typer groups. Input rows are
validated before anything is written: a bad cell raises :class:`DataFormatError` naming
file, line and column (exit 2), and the output CSV appears only when complete (temp file +
``os.replace``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpucast.cli._common import JSON_OPTION_HELP, console, emit_result
from gpucast.domain.errors import DataFormatError, InvalidInputError

if TYPE_CHECKING:  # heavy (pandas, scipy): imported inside the commands that need them
    import numpy as np
    import pandas as pd

    from gpucast.predict.cluster import ClusterModel
    from gpucast.predict.overheads import CheckpointModel

GPU_COL = "GPU (temp)"
MODEL_COL = "Model (temp)"
PARAMS_COL = "Number of Parameters"
TENSORS_COL = "Number of Tensors"
STEP_COL = "Step Time (s)"
WORKERS_COL = "Workers"
PS_COL = "Parameter Servers"
STRATEGY_COL = "Strategy"
MAX_TENSOR_COL = "Max Tensor Size (MB)"
SPEED_OUT = "Predicted Speed (steps/sec)"
CKPT_SIZE_COL = "Checkpoint Size (MB)"
CKPT_INDEX_COL = "Index File Size"
CKPT_OUT = "Predicted Duration (s)"


# ---------------------------------------------------------------------- helpers
def _read_rows(path: Path) -> pd.DataFrame:
    import pandas as pd

    if not path.is_file():
        raise DataFormatError(str(path), "file not found", fix="check the --input path")
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataFormatError(str(path), f"is not a readable CSV ({exc})") from exc


def _require(frame: pd.DataFrame, path: Path, columns: tuple[str, ...]) -> None:
    for col in columns:
        if col not in frame.columns:
            raise DataFormatError(
                str(path), "missing column", column=col, fix=f"add a {col!r} column"
            )


def _number(
    frame: pd.DataFrame,
    path: Path,
    column: str,
    *,
    integer: bool = False,
    allow_zero: bool = False,
    optional: bool = False,
) -> np.ndarray:
    """Parse a column; the first bad cell raises with its line (header = line 1)."""
    import numpy as np

    out = np.full(len(frame), np.nan)
    for i, text in enumerate(frame[column].astype(str)):
        text = text.strip()
        line = i + 2
        if not text:
            if optional:
                continue
            raise DataFormatError(str(path), "empty cell", line=line, column=column)
        try:
            value = float(text)
        except ValueError:
            raise DataFormatError(
                str(path), f"not a number ({text!r})", line=line, column=column
            ) from None
        if not math.isfinite(value):
            raise DataFormatError(
                str(path), f"not a finite number ({text})", line=line, column=column
            )
        if value < 0 or (value == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise DataFormatError(
                str(path), f"must be {bound} (got {text})", line=line, column=column
            )
        if integer and value != int(value):
            raise DataFormatError(
                str(path), f"must be a whole number (got {text})", line=line, column=column
            )
        out[i] = value
    return out


def _load(
    path: Path, cls: type[ClusterModel] | type[CheckpointModel]
) -> ClusterModel | CheckpointModel:
    from gpucast.store.models import load_model

    model = load_model(path)
    if not isinstance(model, cls):
        raise InvalidInputError(
            f"{path} holds a {model.kind!r} model, not {cls.kind!r}",
            fix=f"pass a file written by `gpucast fit {cls.kind}`",
        )
    return model


# ---------------------------------------------------------------------- cluster
def fit_cluster_command(
    data: Annotated[
        Path, typer.Option("--data", help="cluster_scaling folder: <GPU>/<model>_<N>workers.csv")
    ],
    out: Annotated[Path, typer.Option("--out", help="where to write the fitted model (JSON)")],
    features: Annotated[
        Path | None,
        typer.Option(
            "--features", help="single_gpu_speed.csv with model features [default: ../speed/]"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_OPTION_HELP)] = False,
) -> None:
    """Fit the distributed-scaling model on CM-DARE cluster runs (1 PS, N workers)."""
    from gpucast.predict.cluster import ClusterModel
    from gpucast.store.datasets.cmdare_cluster import cluster_fit_table
    from gpucast.store.models import save_model

    table = cluster_fit_table(data, features)
    model = ClusterModel().fit(table.frame)
    save_model(model, out)
    if not as_json:
        for reason in table.skipped:
            console.print(f"skipped: {reason}")
    cv = "n/a" if model.cv_mape_pct_ is None else f"{model.cv_mape_pct_:.1f}%"
    summary = {
        "model_file": str(out),
        "runs": len(table.frame),
        "models": len(model.models_),
        "ps_network_efficiency": model.network_efficiency_,
        "per_tensor_cost_s": model.per_tensor_cost_s_,
        "lomo_mape_pct": model.cv_mape_pct_,
        "skipped": list(table.skipped),
    }
    emit_result(
        summary,
        f"fitted cluster model on {len(table.frame)} runs of {len(model.models_)} models; "
        f"PS network efficiency {model.network_efficiency_:.2f}, "
        f"per-tensor cost {1e3 * (model.per_tensor_cost_s_ or 0.0):.3f} ms; "
        f"leave-one-model-out MAPE {cv} -> {out}",
        as_json=as_json,
    )


def predict_cluster_command(
    model: Annotated[Path, typer.Option("--model", help="JSON from `gpucast fit cluster`")],
    input: Annotated[Path, typer.Option("--input", help="CSV of rows to predict")],
    output: Annotated[Path, typer.Option("--output", help="CSV to write (input + predictions)")],
    as_json: Annotated[bool, typer.Option("--json", help=JSON_OPTION_HELP)] = False,
) -> None:
    """Predict cluster speed for each input row; adds Predicted Speed and Bottleneck."""
    import numpy as np
    import pandas as pd

    from gpucast.predict.cluster import STRATEGIES, ClusterModel
    from gpucast.store.files import write_csv_atomic

    fitted = _load(model, ClusterModel)
    assert isinstance(fitted, ClusterModel)
    rows = _read_rows(input)
    _require(rows, input, (PARAMS_COL, TENSORS_COL, WORKERS_COL, PS_COL))
    params = _number(rows, input, PARAMS_COL)
    tensors = _number(rows, input, TENSORS_COL)
    workers = _number(rows, input, WORKERS_COL, integer=True)
    shards = _number(rows, input, PS_COL, integer=True)
    steps = (
        _number(rows, input, STEP_COL, optional=True)
        if STEP_COL in rows.columns
        else np.full(len(rows), np.nan)
    )
    max_tensor = (
        _number(rows, input, MAX_TENSOR_COL, optional=True)
        if MAX_TENSOR_COL in rows.columns
        else np.full(len(rows), np.nan)
    )
    for i in np.flatnonzero(np.isnan(steps)):
        line = int(i) + 2
        for col in (GPU_COL, MODEL_COL):
            if col not in rows.columns or not str(rows[col].iloc[i]).strip():
                raise DataFormatError(
                    str(input),
                    f"no {STEP_COL!r} and no {col!r} to look the 1-worker step time up",
                    line=line,
                    column=STEP_COL,
                    fix=f"give {STEP_COL!r} (single-worker step time)",
                )
        seen = fitted.single_worker_step_time(
            str(rows[GPU_COL].iloc[i]), str(rows[MODEL_COL].iloc[i])
        )
        if seen is None:
            raise DataFormatError(
                str(input),
                f"{rows[GPU_COL].iloc[i]}/{rows[MODEL_COL].iloc[i]} was not in the fit data",
                line=line,
                column=STEP_COL,
                fix=f"give {STEP_COL!r} (e.g. from `gpucast predict speed`)",
            )
        steps[i] = seen
    strategy = np.full(len(rows), "ps-async", dtype=object)
    if STRATEGY_COL in rows.columns:
        for j, text in enumerate(rows[STRATEGY_COL].astype(str)):
            text = text.strip().lower() or "ps-async"
            if text not in STRATEGIES:
                raise DataFormatError(
                    str(input),
                    f"unknown strategy {text!r}",
                    line=j + 2,
                    column=STRATEGY_COL,
                    fix=f"use one of {', '.join(STRATEGIES)}",
                )
            strategy[j] = text
    frame = pd.DataFrame(
        {
            "single_worker_step_time_s": steps,
            "workers": workers.astype(np.int64),
            "ps_shards": shards,
            "param_bytes": params * fitted.bytes_per_parameter,
            "n_tensors": tensors,
            "max_tensor_bytes": max_tensor * 1e6,
            "strategy": strategy,
        }
    )
    pred = fitted.predict_frame(frame)
    result = rows.copy()
    result[SPEED_OUT] = pred["speed_steps_per_s"].to_numpy()
    result["Lower (steps/sec)"] = pred["lower"].to_numpy()
    result["Upper (steps/sec)"] = pred["upper"].to_numpy()
    result["Bottleneck"] = pred["bottleneck"].to_numpy()
    result["PS Shards Needed"] = pred["ps_shards_needed"].to_numpy()
    write_csv_atomic(result, output)
    bottlenecks = result["Bottleneck"].astype(str).value_counts().to_dict()
    emit_result(
        {"output": str(output), "rows": len(result), "bottlenecks": bottlenecks},
        f"predicted {len(result)} rows -> {output}",
        as_json=as_json,
    )


# ---------------------------------------------------------------------- checkpoint
def fit_checkpoint_command(
    data: Annotated[
        Path, typer.Option("--data", help="CM-DARE checkpoint CSV (e.g. whole_data.csv)")
    ],
    out: Annotated[Path, typer.Option("--out", help="where to write the fitted model (JSON)")],
    as_json: Annotated[bool, typer.Option("--json", help=JSON_OPTION_HELP)] = False,
) -> None:
    """Fit checkpoint duration from checkpoint size (and .index size when present)."""
    from gpucast.predict.overheads import CheckpointModel
    from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv
    from gpucast.store.models import save_model

    table = read_checkpoint_csv(data)
    if len(table.frame) < 3:
        raise DataFormatError(str(data), "has fewer than 3 usable rows", fix="check the file")
    model = CheckpointModel().fit(table.frame)
    save_model(model, out)
    if not as_json:
        for reason in table.skipped:
            console.print(f"skipped: {reason}")
    cv = "n/a" if model.cv_mape_pct_ is None else f"{model.cv_mape_pct_:.1f}%"
    emit_result(
        {
            "model_file": str(out),
            "rows": len(table.frame),
            "lomo_mape_pct": model.cv_mape_pct_,
            "skipped": list(table.skipped),
        },
        f"fitted checkpoint model on {len(table.frame)} rows; "
        f"leave-one-model-out MAPE {cv} -> {out}",
        as_json=as_json,
    )


def predict_checkpoint_command(
    model: Annotated[Path, typer.Option("--model", help="JSON from `gpucast fit checkpoint`")],
    input: Annotated[Path, typer.Option("--input", help="CSV with Checkpoint Size (MB)")],
    output: Annotated[Path, typer.Option("--output", help="CSV to write (input + predictions)")],
    as_json: Annotated[bool, typer.Option("--json", help=JSON_OPTION_HELP)] = False,
) -> None:
    """Predict checkpoint duration per row; adds Predicted Duration (s), Lower (s), Upper (s)."""
    import pandas as pd

    from gpucast.predict.overheads import CheckpointModel
    from gpucast.store.files import write_csv_atomic

    fitted = _load(model, CheckpointModel)
    assert isinstance(fitted, CheckpointModel)
    rows = _read_rows(input)
    _require(rows, input, (CKPT_SIZE_COL,))
    frame = pd.DataFrame({"checkpoint_mb": _number(rows, input, CKPT_SIZE_COL, allow_zero=True)})
    if CKPT_INDEX_COL in rows.columns:
        frame["index_mb"] = _number(rows, input, CKPT_INDEX_COL, allow_zero=True, optional=True)
    pred = fitted.predict_frame(frame)
    result = rows.copy()
    result[CKPT_OUT] = pred["duration_s"].to_numpy()
    result["Lower (s)"] = pred["lower"].to_numpy()
    result["Upper (s)"] = pred["upper"].to_numpy()
    write_csv_atomic(result, output)
    emit_result(
        {"output": str(output), "rows": len(result)},
        f"predicted {len(result)} rows -> {output}",
        as_json=as_json,
    )
