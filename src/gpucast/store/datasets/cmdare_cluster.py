"""Importer of CM-DARE cluster scaling runs: ``cluster_scaling/<GPU>/<model>_<N>workers.csv``.

Store format of the samples (:func:`read_cluster_scaling`), one row per TensorBoard sample:

=====================  ==========================================================
``gpu``                GPU type from the folder name (``K80``, ``P100``)
``model``              model name from the file name (``res15``, ``shakebig``...)
``workers``            number of GPU workers (1 PS throughout)
``ps_shards``          parameter-server shards (always 1 in CM-DARE)
``step``               global step of the sample
``speed_steps_per_s``  cluster-wide global steps/s over the preceding ~100 steps
``wall_time_s``        Unix time of the sample
=====================  ==========================================================

:func:`steady_state_speeds` reduces samples to one row per run (median after warm-up);
:func:`cluster_fit_table` joins runs with model features from ``single_gpu_speed.csv``
into the frame :meth:`gpucast.predict.cluster.ClusterModel.fit` takes.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets._import import ImportResult

SAMPLE_COLUMNS: tuple[str, ...] = (
    "gpu",
    "model",
    "workers",
    "ps_shards",
    "step",
    "speed_steps_per_s",
    "wall_time_s",
)
_FILE_RE = re.compile(r"^(?P<model>.+)_(?P<workers>\d+)workers\.csv$")
_SOURCE_COLUMNS = ("Wall time", "Step", "Value")


def read_cluster_scaling(root: Path) -> ImportResult:
    """Read every ``<GPU>/<model>_<N>workers.csv`` under ``root`` into samples.

    Unreadable cells or rows are skipped and reported; a file without the TensorBoard
    columns raises :class:`DataFormatError`; so does a folder with no run at all.
    """
    if not root.is_dir():
        raise DataFormatError(str(root), "is not a folder", fix="pass cmdare/cluster_scaling")
    frames: list[pd.DataFrame] = []
    skipped: list[str] = []
    for gpu_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in sorted(gpu_dir.glob("*.csv")):
            match = _FILE_RE.match(path.name)
            if match is None:
                skipped.append(f"{path}: file name is not <model>_<N>workers.csv")
                continue
            rows, bad = _read_run(path)
            skipped.extend(bad)
            if rows.empty:
                continue
            rows.insert(0, "gpu", gpu_dir.name)
            rows.insert(1, "model", match["model"])
            rows.insert(2, "workers", int(match["workers"]))
            rows.insert(3, "ps_shards", 1)
            frames.append(rows)
    if not frames:
        raise DataFormatError(
            str(root),
            "holds no <GPU>/<model>_<N>workers.csv run",
            fix="pass cmdare/cluster_scaling",
        )
    frame = pd.concat(frames, ignore_index=True)[list(SAMPLE_COLUMNS)]
    return ImportResult(frame=frame, skipped=tuple(skipped))


def _read_run(path: Path) -> tuple[pd.DataFrame, list[str]]:
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in _SOURCE_COLUMNS if c not in raw.columns]
    if missing:
        raise DataFormatError(
            str(path),
            f"missing column(s) {', '.join(missing)}",
            column=missing[0],
            fix="expected a TensorBoard export with Wall time, Step, Value",
        )
    out: list[tuple[int, float, float]] = []
    bad: list[str] = []
    for i, rec in enumerate(raw.itertuples(index=False), start=2):  # line 1 is the header
        values = dict(zip(raw.columns, rec, strict=True))
        try:
            wall = float(values["Wall time"])
            step = float(values["Step"])
            speed = float(values["Value"])
        except ValueError:
            bad.append(f"{path}, line {i}: non-numeric cell")
            continue
        if not all(math.isfinite(v) for v in (wall, step, speed)):
            bad.append(f"{path}, line {i}: missing or infinite value")
            continue
        if speed <= 0 or step < 0:
            bad.append(f"{path}, line {i}: speed must be > 0 and step >= 0")
            continue
        out.append((int(step), speed, wall))
    frame = pd.DataFrame(out, columns=["step", "speed_steps_per_s", "wall_time_s"])
    return frame, bad


def steady_state_speeds(samples: pd.DataFrame, *, warmup_fraction: float = 0.1) -> pd.DataFrame:
    """One row per run: median speed after dropping the first ``warmup_fraction`` of samples.

    Columns: gpu, model, workers, ps_shards, speed_steps_per_s, n_samples, iqr_pct (the
    inter-quartile range as a percentage of the median: the run's noise).
    """
    rows = []
    keys = ["gpu", "model", "workers", "ps_shards"]
    for key, run in samples.sort_values("step").groupby(keys, sort=True):
        values = run["speed_steps_per_s"].to_numpy(dtype=np.float64)
        drop = min(math.ceil(warmup_fraction * len(values)), len(values) - 1)
        steady = values[drop:]
        median = float(np.median(steady))
        q75, q25 = np.percentile(steady, [75, 25])
        rows.append((*key, median, len(steady), float(100 * (q75 - q25) / median)))
    return pd.DataFrame(rows, columns=[*keys, "speed_steps_per_s", "n_samples", "iqr_pct"])


def read_model_features(speed_csv: Path) -> ImportResult:
    """Static model features from CM-DARE ``single_gpu_speed.csv``, one row per model.

    Columns: model (as labelled in the file), model_key (lower-case alphanumerics, the join
    key), n_parameters, n_tensors, max_tensor_bytes (NaN when the file has none).
    """
    raw = pd.read_csv(speed_csv)
    need = ["Model (temp)", "Number of Parameters", "Number of Tensors"]
    missing = [c for c in need if c not in raw.columns]
    if missing:
        raise DataFormatError(
            str(speed_csv), f"missing column(s) {', '.join(missing)}", column=missing[0]
        )
    rows = []
    skipped: list[str] = []
    for model, group in raw.groupby("Model (temp)", sort=True):
        params = pd.to_numeric(group["Number of Parameters"], errors="coerce").dropna()
        tensors = pd.to_numeric(group["Number of Tensors"], errors="coerce").dropna()
        if params.empty or tensors.empty:
            skipped.append(f"{speed_csv}: model {model!r} lacks parameter or tensor count")
            continue
        max_mb = (
            pd.to_numeric(group["Max Tensor Size (MB)"], errors="coerce").dropna()
            if "Max Tensor Size (MB)" in group.columns
            else pd.Series(dtype=float)
        )
        rows.append(
            (
                str(model),
                model_key(str(model)),
                float(params.iloc[0]),
                float(tensors.iloc[0]),
                float(max_mb.iloc[0]) * 1e6 if not max_mb.empty else float("nan"),
            )
        )
    frame = pd.DataFrame(
        rows, columns=["model", "model_key", "n_parameters", "n_tensors", "max_tensor_bytes"]
    )
    return ImportResult(frame=frame, skipped=tuple(skipped))


def model_key(name: str) -> str:
    """Join key of a CM-DARE model name across files (``Res15`` == ``res15``)."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def default_features_csv(cluster_root: Path) -> Path:
    """``<cmdare>/speed/single_gpu_speed.csv`` beside a ``<cmdare>/cluster_scaling`` folder."""
    return cluster_root.resolve().parent / "speed" / "single_gpu_speed.csv"


def cluster_fit_table(cluster_root: Path, features_csv: Path | None = None) -> ImportResult:
    """Runs of ``cluster_root`` joined with model features: the cluster model's fit frame."""
    samples = read_cluster_scaling(cluster_root)
    feats_path = features_csv or default_features_csv(cluster_root)
    if not feats_path.is_file():
        raise DataFormatError(
            str(feats_path),
            "model features file not found",
            fix="pass --features single_gpu_speed.csv",
        )
    feats = read_model_features(feats_path)
    runs = steady_state_speeds(samples.frame)
    runs["model_key"] = runs["model"].map(model_key)
    joined = runs.merge(
        feats.frame.drop(columns=["model"]), on="model_key", how="left", validate="many_to_one"
    )
    unmatched = sorted(joined.loc[joined["n_parameters"].isna(), "model"].unique())
    skipped = [*samples.skipped, *feats.skipped]
    skipped += [f"{cluster_root}: model {m!r} has no features in {feats_path}" for m in unmatched]
    joined = joined[joined["n_parameters"].notna()].drop(columns=["model_key"])
    return ImportResult(frame=joined.reset_index(drop=True), skipped=tuple(skipped))
