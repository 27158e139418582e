"""The Zeus (NSDI 2023) traces (``zeus_nsdi23/``) as tidy frames.

* :func:`read_zeus_power` -- ``summary_power_{v100,p100,rtx6000}.csv``: one training epoch per
  (dataset, network, batch size, optimizer, GPU power limit) on one GPU, measured once.

  ======================  ===========================================================
  ``dataset``             ``cifar100``, ``imagenet``, ``librispeech``, ``movielens-1m``,
                          ``squad``, ``sentiment140``
  ``network``             ``shufflenetv2``, ``resnet50``, ``deepspeech2``, ``ncf``,
                          ``bert_base_uncased``
  ``batch_size``          samples per step (one GPU)
  ``optimizer``           as published (``adadelta``, ``adam``, ``adamw``)
  ``power_limit_w``       the GPU power limit set through NVML, W
  ``time_per_epoch_s``    wall time of one training epoch, s
  ``average_power_w``     mean GPU board power over the epoch (NVML), W
  ``energy_per_epoch_j``  ``time_per_epoch_s * average_power_w``, J
  ``gpu``                 the catalog's GPU name (``V100-32GB``, ``P100``, ``RTX6000``;
                          "" for a trace GPU the catalog lacks)
  ``zeus_gpu``            the trace's key (``v100``, ``p100``, ``rtx6000``)
  ======================  ===========================================================

* :func:`read_zeus_train` -- ``summary_train.csv``: for each (dataset, network, batch size) and
  seed (``run``), the first epoch at which the validation metric reached each target
  (``target_epoch`` NaN: never reached in that run).
* :func:`zeus_unthrottled` -- the power-trace rows at each GPU's highest power limit (the GPU
  as shipped), one per (GPU, dataset, network, batch size, optimizer).
* :func:`target_epochs` / :func:`epochs_to_target` -- the epoch each seed reached a target at,
  and its mean/std/min/max per batch size.

What the traces do not carry -- samples per epoch, metric direction, Zeus's own targets, the
precision and the boards -- is in :mod:`gpucast.domain.zeus`, each with its source. Parse only:
no model is imported here. A malformed cell is a :class:`DataFormatError` naming the file, the
line (the header is line 1), the column and a fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.zeus import ZEUS_GPUS, ZEUS_WORKLOADS
from gpucast.store.datasets._tidy import (
    line_of,
    number_column,
    read_cells,
    require_columns,
    require_rows,
    text_column,
)

POWER_COLUMNS: tuple[str, ...] = (
    "dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch",
    "average_power",
)  # fmt: skip
TRAIN_COLUMNS: tuple[str, ...] = (
    "dataset", "network", "batch_size", "optimizer", "learning_rate", "run", "target_metric",
    "target_epoch",
)  # fmt: skip
_POWER_FIX = "use summary_power_<gpu>.csv as published by ml-energy/zeus (see TRACE_README.md)"
_TRAIN_FIX = "use summary_train.csv as published by ml-energy/zeus (see TRACE_README.md)"
_POWER_FILE = re.compile(r"^summary_power_(?P<key>[a-z0-9]+)\.csv$", re.IGNORECASE)


def _gpu_key(gpu: str) -> str:
    """The trace key of ``gpu`` given as a key (``v100``) or a catalog name (``V100-32GB``)."""
    wanted = gpu.strip().lower()
    for key, spec in ZEUS_GPUS.items():
        if wanted in (key, spec.catalog_name.lower()):
            return key
    raise InvalidSpecError(
        "gpu",
        "not a GPU of the Zeus power traces",
        got=gpu,
        fix="use one of " + ", ".join(ZEUS_GPUS),
    )


def _duplicate_check(frame: pd.DataFrame, path: Path, keys: list[str], fix: str) -> None:
    dup = frame.duplicated(keys, keep="first").to_numpy()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((frame[keys] == frame[keys].iloc[pos]).all(axis=1))[0])
        raise DataFormatError(
            str(path),
            f"repeats the configuration of line {line_of(first)} ({', '.join(keys)})",
            line=line_of(pos),
            fix=fix,
        )


def _read_power_file(path: Path, key: str) -> pd.DataFrame:
    raw = read_cells(path, fix=_POWER_FIX)
    require_columns(raw, path, POWER_COLUMNS, fix=_POWER_FIX)
    require_rows(raw, path, fix=_POWER_FIX)
    spec = ZEUS_GPUS.get(key)
    frame = pd.DataFrame(
        {
            "dataset": text_column(raw, path, "dataset", fix=_POWER_FIX),
            "network": text_column(raw, path, "network", fix=_POWER_FIX),
            "batch_size": number_column(
                raw, path, "batch_size", integer=True, fix=_POWER_FIX
            ).astype(np.int64),
            "optimizer": text_column(raw, path, "optimizer", fix=_POWER_FIX),
            "power_limit_w": number_column(raw, path, "power_limit", fix=_POWER_FIX),
            "time_per_epoch_s": number_column(raw, path, "time_per_epoch", fix=_POWER_FIX),
            "average_power_w": number_column(raw, path, "average_power", fix=_POWER_FIX),
        }
    )
    _duplicate_check(
        frame,
        path,
        ["dataset", "network", "batch_size", "optimizer", "power_limit_w"],
        "keep one row per (dataset, network, batch_size, optimizer, power_limit)",
    )
    frame["energy_per_epoch_j"] = frame["time_per_epoch_s"] * frame["average_power_w"]
    frame["gpu"] = spec.catalog_name if spec is not None else ""
    frame["zeus_gpu"] = key
    return frame


def read_zeus_power(path_or_dir: Path | str, gpu: str | None = None) -> pd.DataFrame:
    """The power trace(s) as one frame (columns in the module docstring).

    ``path_or_dir`` is a ``summary_power_<key>.csv`` or the folder holding them (the shared
    data's ``zeus_nsdi23``). ``gpu`` -- a trace key (``v100``, ``p100``, ``rtx6000``) or a
    catalog name (``V100-32GB``, ``P100``, ``RTX6000``) -- picks the folder's file; ``None``
    reads every ``summary_power_*.csv`` of the folder. For a single file ``gpu`` overrides the
    GPU its name gives.
    """
    path = Path(path_or_dir)
    if path.is_dir():
        if gpu is not None:
            key = _gpu_key(gpu)
            return _read_power_file(path / f"summary_power_{key}.csv", key)
        files = sorted(p for p in path.iterdir() if _POWER_FILE.match(p.name))
        if not files:
            raise DataFormatError(
                str(path), "has no summary_power_<gpu>.csv", fix="point at zeus_nsdi23/"
            )
        frames = []
        for file in files:
            match = _POWER_FILE.match(file.name)
            assert match is not None
            frames.append(_read_power_file(file, match["key"].lower()))
        return pd.concat(frames, ignore_index=True)
    if gpu is not None:
        return _read_power_file(path, _gpu_key(gpu))
    match = _POWER_FILE.match(path.name)
    if match is None:
        if not path.exists():
            raise DataFormatError(str(path), "file not found", fix=_POWER_FIX)
        raise DataFormatError(
            str(path),
            "cannot tell the GPU from the file name",
            fix="name it summary_power_<v100|p100|rtx6000>.csv or pass gpu=",
        )
    return _read_power_file(path, match["key"].lower())


def read_zeus_train(path: Path | str) -> pd.DataFrame:
    """``summary_train.csv``: dataset, network, batch_size, optimizer, learning_rate, run,
    target_metric, target_epoch (float; NaN -- ``nan`` or empty in the file -- where the run
    never reached the target)."""
    path = Path(path)
    raw = read_cells(path, fix=_TRAIN_FIX)
    require_columns(raw, path, TRAIN_COLUMNS, fix=_TRAIN_FIX)
    require_rows(raw, path, fix=_TRAIN_FIX)
    metric = number_column(raw, path, "target_metric", allow_zero=True, fix=_TRAIN_FIX)
    frame = pd.DataFrame(
        {
            "dataset": text_column(raw, path, "dataset", fix=_TRAIN_FIX),
            "network": text_column(raw, path, "network", fix=_TRAIN_FIX),
            "batch_size": number_column(
                raw, path, "batch_size", integer=True, fix=_TRAIN_FIX
            ).astype(np.int64),
            "optimizer": text_column(raw, path, "optimizer", fix=_TRAIN_FIX),
            "learning_rate": number_column(raw, path, "learning_rate", fix=_TRAIN_FIX),
            "run": number_column(
                raw, path, "run", integer=True, allow_zero=True, fix=_TRAIN_FIX
            ).astype(np.int64),
            "target_metric": metric,
            "target_epoch": number_column(
                raw, path, "target_epoch", integer=True, allow_missing=True, fix=_TRAIN_FIX
            ),
        }
    )
    _duplicate_check(
        frame,
        path,
        ["dataset", "network", "batch_size", "optimizer", "run", "target_metric"],
        "keep one row per (dataset, network, batch_size, optimizer, run, target_metric)",
    )
    return frame


def zeus_unthrottled(power: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`read_zeus_power` at each GPU's highest power limit: one per (GPU,
    dataset, network, batch_size, optimizer), every optimizer kept (V100's CIFAR-100 has both
    ``adadelta`` and ``adam``). A configuration not measured at its GPU's highest limit is left
    out (none is, in the published traces)."""
    top = power.groupby("zeus_gpu")["power_limit_w"].transform("max")
    keys = ["zeus_gpu", "dataset", "network", "batch_size", "optimizer"]
    return power[power["power_limit_w"] == top].sort_values(keys).reset_index(drop=True)


def _higher_is_better(dataset: str, rows: pd.DataFrame) -> bool:
    """The metric's direction: from :data:`ZEUS_WORKLOADS`, else from the data (harder
    targets are reached later)."""
    workload = ZEUS_WORKLOADS.get(dataset)
    if workload is not None:
        return workload.higher_is_better
    reached = rows.dropna(subset=["target_epoch"])
    if reached["target_metric"].nunique() < 2:
        return True
    corr = np.corrcoef(reached["target_metric"], reached["target_epoch"])[0, 1]
    return bool(not corr < 0)


def _targets(
    train: pd.DataFrame, target: str | Mapping[str, float]
) -> dict[tuple[str, str], float]:
    chosen: dict[tuple[str, str], float] = {}
    for (dataset, network), rows in train.groupby(["dataset", "network"], sort=True):
        pair = (str(dataset), str(network))
        if isinstance(target, Mapping):
            if pair[0] not in target:
                raise InvalidSpecError(
                    "target", f"no target given for {pair[0]}", fix="add it to the mapping"
                )
            chosen[pair] = float(target[pair[0]])
        elif target == "zeus":
            workload = ZEUS_WORKLOADS.get(pair[0])
            if workload is None:
                raise InvalidSpecError(
                    "target",
                    f"Zeus publishes no target for {pair[0]}",
                    fix='pass target="final" or a {dataset: target} mapping',
                )
            chosen[pair] = workload.target_metric
        elif target == "final":
            higher = _higher_is_better(pair[0], rows)
            metric = rows["target_metric"]
            chosen[pair] = float(metric.max() if higher else metric.min())
        else:
            raise InvalidSpecError(
                "target", "unknown choice", got=target, fix='use "zeus", "final" or a mapping'
            )
    return chosen


def target_epochs(train: pd.DataFrame, target: str | Mapping[str, float] = "zeus") -> pd.DataFrame:
    """One row per (dataset, network, batch_size, run) of :func:`read_zeus_train` at the
    chosen target of its pair: ``"zeus"`` (default) is the target Zeus's simulator uses
    (:data:`~gpucast.domain.zeus.ZEUS_WORKLOADS`); ``"final"`` the strictest target listed for
    the pair (the highest, or the lowest for LibriSpeech's word error rate, where lower is
    better -- often never reached); a mapping gives a target per dataset."""
    chosen = _targets(train, target)
    parts = []
    for (dataset, network), value in chosen.items():
        rows = train[(train["dataset"] == dataset) & (train["network"] == network)]
        at = rows[np.isclose(rows["target_metric"], value, rtol=1e-9, atol=1e-12)]
        if at.empty:
            listed = ", ".join(f"{v:g}" for v in sorted(rows["target_metric"].unique()))
            raise InvalidSpecError(
                "target",
                f"{dataset}/{network} has no rows at target {value:g}",
                fix=f"use one of {listed}",
            )
        parts.append(at)
    keys = ["dataset", "network", "batch_size", "run"]
    return pd.concat(parts).sort_values(keys).reset_index(drop=True)


def epochs_to_target(
    train: pd.DataFrame, target: str | Mapping[str, float] = "zeus"
) -> pd.DataFrame:
    """Per (dataset, network, batch_size) at the target :func:`target_epochs` picks:
    optimizer, learning_rate, target_metric, ``n_runs`` (seeds), ``n`` (seeds that reached
    it), and the epoch to target over those seeds -- ``epochs_mean``, ``epochs_std`` (sample
    std, NaN below 2 seeds), ``epochs_min``, ``epochs_max`` (NaN when no seed reached it);
    ``max_epochs``, the epoch cap of Zeus's simulator for the dataset (NaN for a dataset Zeus
    does not list), and ``n_within_max_epochs``, the seeds that reached the target within it
    (the trace trained past the cap: CIFAR-100 at batch 4096 took ~485 epochs to 60%)."""
    per_run = target_epochs(train, target)
    keys = ["dataset", "network", "batch_size"]
    grouped = per_run.groupby(keys, sort=True)
    out = grouped.agg(
        optimizer=("optimizer", "first"),
        learning_rate=("learning_rate", "first"),
        target_metric=("target_metric", "first"),
        n_runs=("run", "nunique"),
        n=("target_epoch", "count"),
        epochs_mean=("target_epoch", "mean"),
        epochs_std=("target_epoch", "std"),
        epochs_min=("target_epoch", "min"),
        epochs_max=("target_epoch", "max"),
    ).reset_index()
    out["n_runs"] = out["n_runs"].astype(np.int64)
    out["n"] = out["n"].astype(np.int64)
    caps = {name: float(w.max_epochs) for name, w in ZEUS_WORKLOADS.items()}
    out["max_epochs"] = out["dataset"].map(caps).astype(float)
    within = per_run[per_run["target_epoch"] <= per_run["dataset"].map(caps)]
    counts = within.groupby(keys).size().rename("n_within_max_epochs").reset_index()
    out = out.merge(counts, on=keys, how="left")
    out["n_within_max_epochs"] = out["n_within_max_epochs"].fillna(0).astype(np.int64)
    return out
