"""Importer of CM-DARE single-GPU speeds: ``cmdare/speed/*`` and any CSV in that column format.

* :func:`read_speed_rows` reads a CSV in the CM-DARE column format (``GPU (temp)``,
  ``Model FLOPs``, ``Number of Parameters``, ``Number of Tensors``, ``Step Time (s)``...), keeps
  every column as it is and checks the ones the speed model needs; a bad cell is a
  :class:`DataFormatError` naming the file, line and column. It is what ``gpucast fit speed``
  and ``gpucast predict speed`` read.
* :func:`read_single_gpu_speed` turns ``single_gpu_speed.csv`` into the store's tidy format,
  one row per TensorBoard sample:

  ======================  ====================================================
  ``gpu``                 GPU label (``K80``, ``P100``)
  ``model``               model label (``Res15``, ``shakebig``...)
  ``gpu_tflops``          peak FP32 TFLOP/s the authors assign to the GPU
  ``model_flops``         TFProf FLOP count of the model (per sample, fwd + bwd)
  ``n_params``            trainable parameters
  ``n_tensors``           parameter tensors (variables)
  ``step_time_s``         seconds per global step (the target)
  ``speed_steps_per_s``   global steps per second
  ======================  ====================================================

* :func:`read_step_rates` reads the raw TensorBoard step-rate series behind it
  (``single_gpu_step_rate/<GPU>/<model>.csv``) and the separate ``base_runs`` into
  ``gpu, model, run, step, wall_time_s, speed_steps_per_s``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gpucast.domain.cmdare import (
    FLOPS_COL,
    GPU_COL,
    MODEL_COL,
    PARAMS_COL,
    STEP_TIME_COL,
    TENSORS_COL,
    TFLOPS_COL,
    impute_model_properties,
)
from gpucast.domain.errors import DataFormatError, InvalidInputError
from gpucast.store.datasets._import import ImportResult
from gpucast.store.files import read_csv_input

#: Columns a row must have to be predicted; fitting needs ``Step Time (s)`` too.
REQUIRED_COLUMNS: tuple[str, ...] = (GPU_COL, FLOPS_COL, PARAMS_COL, TENSORS_COL)
STORE_COLUMNS: tuple[str, ...] = (
    "gpu",
    "model",
    "gpu_tflops",
    "model_flops",
    "n_params",
    "n_tensors",
    "step_time_s",
    "speed_steps_per_s",
)
_FIX = "fix or drop the row (CM-DARE column format; see `gpucast fit speed --help`)"
#: the fix of an error about the whole file (empty, unreadable): there is no row to drop
_FILE_FIX = (
    "give a CSV with a header and rows (CM-DARE column format; see `gpucast fit speed --help`)"
)


def _line(position: int) -> int:
    """File line of the ``position``-th data row (line 1 is the header)."""
    return position + 2


#: The longest step time a row may give: one training step of a day is a typo (a 1e300 cell
#: stretched every interval of its GPU to [1e-302, 1e300] s, QA session 36)
MAX_STEP_TIME_S = 86_400


def read_speed_rows(path: Path, *, require_step_time: bool) -> pd.DataFrame:
    """Read and check a CSV in the CM-DARE column format; every column is kept as read.

    Empty model-property cells (FLOPs, parameters, tensors) are filled from other rows of the
    same ``Model (temp)``, as CM-DARE leaves some of them empty. Anything else that is missing,
    non-numeric, negative, zero or NaN is a :class:`DataFormatError` with file, line, column.
    ``GPU TFLOPS`` is optional (the catalog supplies it), but a value given must be valid.
    """
    path = Path(path)
    where = str(path)
    from gpucast.store.files import read_csv_input

    raw = read_csv_input(
        path, "data", fix=_FILE_FIX, dtype=str, keep_default_na=False, skipinitialspace=True
    )
    required = [*REQUIRED_COLUMNS, *([STEP_TIME_COL] if require_step_time else [])]
    missing = [c for c in required if c not in raw.columns]
    if missing:
        raise DataFormatError(
            where,
            f"missing column(s) {', '.join(repr(c) for c in missing)}",
            line=1,
            fix="add them (CM-DARE column format; see `gpucast fit speed --help`)",
        )
    if raw.empty:
        raise DataFormatError(where, "has no data rows", fix="add at least one row")

    gpu = raw[GPU_COL].str.strip()
    empty_gpu = gpu == ""
    if empty_gpu.any():
        pos = int(empty_gpu.to_numpy().nonzero()[0][0])
        raise DataFormatError(where, "GPU name is empty", line=_line(pos), column=GPU_COL, fix=_FIX)

    numeric = raw.copy()
    numeric_columns = [FLOPS_COL, PARAMS_COL, TENSORS_COL]
    if require_step_time:
        numeric_columns.append(STEP_TIME_COL)
    optional = [TFLOPS_COL] if TFLOPS_COL in raw.columns else []
    for column in [*numeric_columns, *optional]:
        text = raw[column].str.strip()
        values = pd.to_numeric(text, errors="coerce")
        bad_text = (text != "") & values.isna()
        if bad_text.any():
            pos = int(bad_text.to_numpy().nonzero()[0][0])
            raise DataFormatError(
                where,
                f"{text.iloc[pos]!r} is not a number",
                line=_line(pos),
                column=column,
                fix=_FIX,
            )
        numeric[column] = values.astype(float)
    numeric = impute_model_properties(numeric)

    for column in [*numeric_columns, *optional]:
        values = numeric[column]
        for pos, value in enumerate(values.to_numpy(dtype=float)):
            if column in optional and math.isnan(value) and raw[column].iloc[pos].strip() == "":
                continue  # optional and left empty: the catalog supplies it
            if math.isnan(value):
                raise DataFormatError(
                    where,
                    "value is missing (empty or NaN) and no other row of the same model has it",
                    line=_line(pos),
                    column=column,
                    fix=_FIX,
                )
            if not math.isfinite(value) or value <= 0:
                raise DataFormatError(
                    where,
                    f"must be a finite number > 0 (got {raw[column].iloc[pos].strip()})",
                    line=_line(pos),
                    column=column,
                    fix=_FIX,
                )
            if column == STEP_TIME_COL and value > MAX_STEP_TIME_S:
                raise DataFormatError(
                    where,
                    f"must be <= {MAX_STEP_TIME_S:,} s (a day per step is a typo, not a "
                    f"measurement; got {raw[column].iloc[pos].strip()})",
                    line=_line(pos),
                    column=column,
                    fix=_FIX,
                )
    numeric[GPU_COL] = gpu
    if MODEL_COL in numeric.columns:
        numeric[MODEL_COL] = numeric[MODEL_COL].str.strip()
    return numeric


def read_speed_files(paths: Sequence[Path], *, require_step_time: bool) -> pd.DataFrame:
    """:func:`read_speed_rows` of several files, concatenated (columns are unioned)."""
    if not paths:
        raise DataFormatError("--data", "no file given", fix="pass --data FILE at least once")
    frames = [read_speed_rows(p, require_step_time=require_step_time) for p in paths]
    return pd.concat(frames, ignore_index=True, sort=False)


def read_single_gpu_speed(path: Path) -> ImportResult:
    """``single_gpu_speed.csv`` in the store's tidy format (see the module docstring)."""
    rows = read_speed_rows(path, require_step_time=True)
    step = rows[STEP_TIME_COL].astype(float)
    frame = pd.DataFrame(
        {
            "gpu": rows[GPU_COL],
            "model": rows[MODEL_COL] if MODEL_COL in rows.columns else "",
            "gpu_tflops": (
                rows[TFLOPS_COL].astype(float) if TFLOPS_COL in rows.columns else float("nan")
            ),
            "model_flops": rows[FLOPS_COL].astype(float),
            "n_params": rows[PARAMS_COL].astype(float),
            "n_tensors": rows[TENSORS_COL].astype(float),
            "step_time_s": step,
            "speed_steps_per_s": 1.0 / step,
        },
        columns=list(STORE_COLUMNS),
    )
    return ImportResult(frame=frame.reset_index(drop=True))


def _read_series(path: Path, gpu: str, model: str, run: str) -> tuple[pd.DataFrame, list[str]]:
    skipped: list[str] = []
    try:
        raw = read_csv_input(path, "data")
    except InvalidInputError as exc:
        return pd.DataFrame(), [f"{path}: unreadable ({exc})"]
    for column in ("Wall time", "Step", "Value"):
        if column not in raw.columns:
            return pd.DataFrame(), [f"{path}: missing column {column!r}"]
    value = pd.to_numeric(raw["Value"], errors="coerce")
    step = pd.to_numeric(raw["Step"], errors="coerce")
    keep = value.notna() & (value > 0) & step.notna()
    for pos in (~keep).to_numpy().nonzero()[0]:
        skipped.append(
            f"{path}, line {_line(int(pos))}: no step or no positive step rate (placeholder row)"
        )
    frame = pd.DataFrame(
        {
            "gpu": gpu,
            "model": model,
            "run": run,
            "step": step[keep].astype("int64"),
            "wall_time_s": pd.to_numeric(raw["Wall time"], errors="coerce")[keep],
            "speed_steps_per_s": value[keep],
        }
    )
    return frame, skipped


def read_step_rates(speed_root: Path) -> ImportResult:
    """The raw single-worker step-rate series under ``speed_root`` (``cmdare/speed``).

    ``run`` is ``"step_rate"`` for ``single_gpu_step_rate/`` (the runs behind
    ``single_gpu_speed.csv``) and ``"base_run"`` for the separate ``base_runs/``.
    """
    root = Path(speed_root)
    if not root.is_dir():
        raise DataFormatError(str(root), "folder not found", fix="pass ../shared/data/cmdare/speed")
    frames: list[pd.DataFrame] = []
    skipped: list[str] = []
    for run, folder in (("step_rate", "single_gpu_step_rate"), ("base_run", "base_runs")):
        base = root / folder
        if not base.is_dir():
            continue
        for gpu_dir in sorted(p for p in base.iterdir() if p.is_dir()):
            for csv in sorted(gpu_dir.glob("*.csv")):
                frame, notes = _read_series(csv, gpu_dir.name, csv.stem, run)
                skipped.extend(notes)
                if not frame.empty:
                    frames.append(frame)
    if not frames:
        raise DataFormatError(str(root), "no step-rate files found", fix="check the folder")
    return ImportResult(frame=pd.concat(frames, ignore_index=True), skipped=tuple(skipped))
