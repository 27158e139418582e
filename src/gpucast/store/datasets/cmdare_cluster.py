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

:func:`steady_state_speeds` reduces samples to one row per run: the median of the level the
run settled at, after the warm-up in which workers join (changepoint segmentation, the same
rule for every run; see :func:`steady_state_start`);
:func:`cluster_fit_table` joins runs with model features from ``single_gpu_speed.csv``
into the frame :meth:`gpucast.predict.cluster.ClusterModel.fit` takes.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.store.datasets._import import ImportResult
from gpucast.store.files import read_csv_input

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
    raw = read_csv_input(path, "data", dtype=str, keep_default_na=False)
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


#: How :func:`steady_state_speeds` finds the steady state of a run.
STEADY_METHODS: tuple[str, ...] = ("changepoint", "fraction")
#: Shortest regime the changepoint segmentation accepts: 10 TensorBoard samples, ~1,000
#: global steps. Shorter excursions (a late dip of a few samples) are transients, not regimes.
MIN_SEGMENT_SAMPLES = 10
#: Penalty per changepoint in units of ``noise variance x ln(samples)`` (BIC is 2; 3 is a
#: little more conservative so that ordinary sample noise never opens a segment).
CHANGEPOINT_PENALTY = 3.0


def steady_state_start(
    speeds: NDArray[np.float64],
    *,
    warmup_fraction: float = 0.1,
    min_segment_samples: int = MIN_SEGMENT_SAMPLES,
    penalty: float = CHANGEPOINT_PENALTY,
) -> int:
    """Index of the first steady-state sample of one run (samples in step order).

    A CM-DARE run starts with its workers joining one by one and warming up, so its speed
    climbs through levels before it settles (e.g. P100 res15, 7 workers: 16 samples near 82
    steps/s, then ~97). The log speeds are split into constant-mean segments by exact
    optimal partitioning (least squares, each changepoint penalised by ``penalty x sigma^2 x
    ln n`` with ``sigma`` the robust noise from the median absolute first difference; no
    segment shorter than ``min_segment_samples``). Warm-up only ever raises the speed, so
    the steady state starts at the last *upward* level shift; later downward shifts (a dip,
    interference) stay in and the median absorbs them. The first ``warmup_fraction`` of the
    samples is always dropped; runs too short to hold two segments only drop that.
    """
    n = len(speeds)
    floor = min(math.ceil(warmup_fraction * n), max(n - 1, 0))
    if n < 2 * min_segment_samples:
        return floor
    x = np.log(np.asarray(speeds, dtype=np.float64))
    sigma = float(np.median(np.abs(np.diff(x)))) / 0.6745 / math.sqrt(2.0)
    beta = penalty * max(sigma, 1e-4) ** 2 * math.log(n)
    csum = np.concatenate([[0.0], np.cumsum(x)])
    csq = np.concatenate([[0.0], np.cumsum(x * x)])
    best = np.full(n + 1, np.inf)
    best[0] = -beta
    last = np.zeros(n + 1, dtype=np.int64)
    for t in range(min_segment_samples, n + 1):
        starts = np.concatenate(
            [[0], np.arange(min_segment_samples, t - min_segment_samples + 1)]
        ).astype(np.int64)
        length = t - starts
        total = csum[t] - csum[starts]
        cost = (csq[t] - csq[starts]) - total * total / length
        value = best[starts] + cost + beta
        i = int(np.argmin(value))
        best[t] = value[i]
        last[t] = starts[i]
    bounds = [n]
    while bounds[-1] > 0:
        bounds.append(int(last[bounds[-1]]))
    bounds.reverse()  # 0 = b_0 < b_1 < ... < b_k = n
    means = [(csum[b] - csum[a]) / (b - a) for a, b in itertools.pairwise(bounds)]
    start = 0
    for i in range(1, len(means)):
        if means[i] > means[i - 1]:
            start = bounds[i]
    return max(start, floor)


def steady_state_speeds(
    samples: pd.DataFrame,
    *,
    method: str = "changepoint",
    warmup_fraction: float = 0.1,
    min_segment_samples: int = MIN_SEGMENT_SAMPLES,
) -> pd.DataFrame:
    """One row per run: the median speed of its steady state.

    ``method="changepoint"`` (default) takes the last regime found by
    :func:`steady_state_start`; ``method="fraction"`` only drops the first
    ``warmup_fraction`` of the samples. The same rule is applied to every run.

    Columns: gpu, model, workers, ps_shards, speed_steps_per_s, n_samples (samples in the
    steady state), warmup_samples (samples dropped before it) and iqr_pct (the steady
    state's inter-quartile range as a percentage of its median: the run's noise).
    """
    if method not in STEADY_METHODS:
        raise InvalidSpecError("method", f"must be one of {', '.join(STEADY_METHODS)}", got=method)
    if not 0.0 <= warmup_fraction < 1.0:
        raise InvalidSpecError("warmup_fraction", "must be in [0, 1)", got=warmup_fraction)
    if min_segment_samples < 2:
        raise InvalidSpecError("min_segment_samples", "must be >= 2", got=min_segment_samples)
    rows = []
    keys = ["gpu", "model", "workers", "ps_shards"]
    for key, run in samples.sort_values("step").groupby(keys, sort=True):
        values = run["speed_steps_per_s"].to_numpy(dtype=np.float64)
        if method == "changepoint":
            drop = steady_state_start(
                values, warmup_fraction=warmup_fraction, min_segment_samples=min_segment_samples
            )
        else:
            drop = min(math.ceil(warmup_fraction * len(values)), len(values) - 1)
        steady = values[drop:]
        median = float(np.median(steady))
        q75, q25 = np.percentile(steady, [75, 25])
        rows.append((*key, median, len(steady), drop, float(100 * (q75 - q25) / median)))
    return pd.DataFrame(
        rows, columns=[*keys, "speed_steps_per_s", "n_samples", "warmup_samples", "iqr_pct"]
    )


def read_model_features(speed_csv: Path) -> ImportResult:
    """Static model features from CM-DARE ``single_gpu_speed.csv``, one row per model.

    Columns: model (as labelled in the file), model_key (lower-case alphanumerics, the join
    key), n_parameters, n_tensors, max_tensor_bytes (NaN when the file has none).
    """
    raw = read_csv_input(speed_csv, "features")
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


def cluster_fit_table(
    cluster_root: Path, features_csv: Path | None = None, *, steady_method: str = "changepoint"
) -> ImportResult:
    """Runs of ``cluster_root`` joined with model features: the cluster model's fit frame.

    Each run is reduced by :func:`steady_state_speeds` with ``steady_method``.
    """
    samples = read_cluster_scaling(cluster_root)
    feats_path = features_csv or default_features_csv(cluster_root)
    if not feats_path.is_file():
        raise DataFormatError(
            str(feats_path),
            "model features file not found",
            fix="pass --features single_gpu_speed.csv",
        )
    feats = read_model_features(feats_path)
    runs = steady_state_speeds(samples.frame, method=steady_method)
    runs["model_key"] = runs["model"].map(model_key)
    joined = runs.merge(
        feats.frame.drop(columns=["model"]), on="model_key", how="left", validate="many_to_one"
    )
    unmatched = sorted(joined.loc[joined["n_parameters"].isna(), "model"].unique())
    skipped = [*samples.skipped, *feats.skipped]
    skipped += [f"{cluster_root}: model {m!r} has no features in {feats_path}" for m in unmatched]
    joined = joined[joined["n_parameters"].notna()].drop(columns=["model_key"])
    return ImportResult(frame=joined.reset_index(drop=True), skipped=tuple(skipped))
