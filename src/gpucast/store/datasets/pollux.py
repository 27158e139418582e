"""The Pollux (OSDI 2021) traces (``pollux_osdi21/<job>/``) as tidy frames.

Each job folder (``bert``, ``cifar10``, ``deepspeech2``, ``ncf``) holds three kinds of file,
measured on 16 AWS g4dn.12xlarge nodes of 4 T4 each
(:data:`gpucast.domain.pollux.POLLUX_TESTBED`):

* :func:`read_pollux_placements` -- ``placements.csv``: step and gradient-sync time of
  synchronous data-parallel training per GPU placement and per-GPU batch.

  =====================  ============================================================
  ``job``                the job folder's name
  ``placement``          GPUs used on each node, one digit per node (``"1124"``: 4 nodes
                         with 1, 1, 2 and 4 GPUs); as published, a rotation stands for
                         all its rotations
  ``nodes``              number of digits
  ``gpus``               sum of the digits (replicas)
  ``gpus_per_node_max``  the largest digit
  ``local_bsz``          samples per GPU per step
  ``global_bsz``         ``local_bsz * gpus``
  ``step_time_s``        seconds per training step
  ``sync_time_s``        seconds of it spent in gradient all-reduce
  ``compute_time_s``     ``step_time_s - sync_time_s``
  =====================  ============================================================

* :func:`read_pollux_scalability` -- ``scalability.csv``: the same columns (no
  ``placement``) for larger spreads, given as ``num_nodes`` and ``num_replicas``.
* :func:`read_pollux_validation` -- every ``validation-<global batch>.csv``: one row per
  statistical epoch of training at that global batch -- ``global_bsz``, ``reference_bsz``
  (``B0``, the job's smallest traced batch), ``epoch`` (0-based row), ``progress`` (steps of
  ``B0`` samples, scaled by Pollux's gain; the same per row in every file of a job),
  ``iteration`` (optimizer steps so far), ``metric`` (validation metric), ``grad_sqr`` and
  ``grad_var`` (see :mod:`gpucast.domain.pollux` for their definitions).
* :func:`gradient_noise_scale` -- McCandlish et al.'s simple noise scale per row and its median
  per (job, global batch).

Each ``read_*`` takes a job folder or the folder of job folders (then every job is read).
Parse only: no model is imported here. A malformed cell is a :class:`DataFormatError` naming
the file, the line (the header is line 1), the column and a fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets._tidy import (
    line_of,
    number_column,
    read_cells,
    require_columns,
    require_rows,
    text_column,
)

_FIX = "use the file as published in petuum/adaptdl (osdi21-artifact) sched/traces/<job>/"
_VALIDATION = re.compile(r"^validation-(?P<bsz>\d+)\.csv$")
_PLACEMENT = re.compile(r"^[1-9]+$")


def _job_dirs(job_dir: Path, marker: Callable[[Path], bool]) -> list[Path]:
    """``job_dir`` itself when ``marker`` says it is a job folder, else its job subfolders."""
    if not job_dir.is_dir():
        raise DataFormatError(
            str(job_dir), "folder not found", fix="point at pollux_osdi21/<job> or pollux_osdi21"
        )
    if marker(job_dir):
        return [job_dir]
    jobs = sorted(p for p in job_dir.iterdir() if p.is_dir() and marker(p))
    if not jobs:
        raise DataFormatError(
            str(job_dir),
            "holds no Pollux job traces",
            fix="point at pollux_osdi21/<job> or pollux_osdi21",
        )
    return jobs


def _times(raw: pd.DataFrame, path: Path, step_col: str, sync_col: str) -> dict[str, object]:
    step = number_column(raw, path, step_col, fix=_FIX)
    sync = number_column(raw, path, sync_col, allow_zero=True, fix=_FIX)
    over = np.flatnonzero(sync > step)
    if over.size:
        pos = int(over[0])
        raise DataFormatError(
            str(path),
            f"sync time {sync[pos]:g} s exceeds the step time {step[pos]:g} s",
            line=line_of(pos),
            column=sync_col,
            fix="sync_time is the part of step_time spent in all-reduce; fix the row",
        )
    return {"step_time_s": step, "sync_time_s": sync, "compute_time_s": step - sync}


def _no_duplicates(frame: pd.DataFrame, path: Path, keys: list[str]) -> None:
    dup = frame.duplicated(keys).to_numpy()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        raise DataFormatError(
            str(path),
            f"repeats an earlier row's {', '.join(keys)}",
            line=line_of(pos),
            fix="keep one row per configuration",
        )


def _read_placements(job: Path) -> pd.DataFrame:
    path = job / "placements.csv"
    raw = read_cells(path, fix=_FIX)
    require_columns(raw, path, ("placement", "local_bsz", "step_time", "sync_time"), fix=_FIX)
    require_rows(raw, path, fix=_FIX)
    placement = text_column(raw, path, "placement", fix=_FIX)
    for i, text in enumerate(placement):
        if not _PLACEMENT.match(str(text)):
            raise DataFormatError(
                str(path),
                f"placement {text!r} is not one digit 1-9 per node",
                line=line_of(i),
                column="placement",
                fix='write the GPUs used on each node as digits, e.g. "1124"',
            )
    digits = [[int(c) for c in str(p)] for p in placement]
    gpus = np.array([sum(d) for d in digits], dtype=np.int64)
    local = number_column(raw, path, "local_bsz", integer=True, fix=_FIX).astype(np.int64)
    frame = pd.DataFrame(
        {
            "job": job.name,
            "placement": placement.astype(str),
            "nodes": np.array([len(d) for d in digits], dtype=np.int64),
            "gpus": gpus,
            "gpus_per_node_max": np.array([max(d) for d in digits], dtype=np.int64),
            "local_bsz": local,
            "global_bsz": local * gpus,
            **_times(raw, path, "step_time", "sync_time"),
        }
    )
    _no_duplicates(frame, path, ["placement", "local_bsz"])
    return frame


def read_pollux_placements(job_dir: Path | str) -> pd.DataFrame:
    """``placements.csv`` of one job (or of every job under the folder); columns in the module
    docstring."""
    jobs = _job_dirs(Path(job_dir), lambda p: (p / "placements.csv").is_file())
    return pd.concat([_read_placements(j) for j in jobs], ignore_index=True)


def _read_scalability(job: Path) -> pd.DataFrame:
    path = job / "scalability.csv"
    raw = read_cells(path, fix=_FIX)
    columns = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
    require_columns(raw, path, columns, fix=_FIX)
    require_rows(raw, path, fix=_FIX)
    nodes = number_column(raw, path, "num_nodes", integer=True, fix=_FIX).astype(np.int64)
    gpus = number_column(raw, path, "num_replicas", integer=True, fix=_FIX).astype(np.int64)
    fewer = np.flatnonzero(gpus < nodes)
    if fewer.size:
        pos = int(fewer[0])
        raise DataFormatError(
            str(path),
            f"{gpus[pos]} replicas cannot span {nodes[pos]} nodes",
            line=line_of(pos),
            column="num_replicas",
            fix="every node used holds at least one replica",
        )
    local = number_column(raw, path, "local_bsz", integer=True, fix=_FIX).astype(np.int64)
    frame = pd.DataFrame(
        {
            "job": job.name,
            "nodes": nodes,
            "gpus": gpus,
            "local_bsz": local,
            "global_bsz": local * gpus,
            **_times(raw, path, "step_time", "sync_time"),
        }
    )
    _no_duplicates(frame, path, ["nodes", "gpus", "local_bsz"])
    return frame


def read_pollux_scalability(job_dir: Path | str) -> pd.DataFrame:
    """``scalability.csv`` of one job (or of every job under the folder): job, nodes, gpus,
    local_bsz, global_bsz, step_time_s, sync_time_s, compute_time_s."""
    jobs = _job_dirs(Path(job_dir), lambda p: (p / "scalability.csv").is_file())
    return pd.concat([_read_scalability(j) for j in jobs], ignore_index=True)


def _validation_files(job: Path) -> list[tuple[int, Path]]:
    found = []
    for path in job.iterdir():
        match = _VALIDATION.match(path.name)
        if match is not None and path.is_file():
            found.append((int(match["bsz"]), path))
    return sorted(found)


def _read_validation(job: Path) -> pd.DataFrame:
    files = _validation_files(job)
    reference = files[0][0]
    if reference <= 0:
        raise DataFormatError(
            str(files[0][1]), "global batch 0 in the file name", fix="name it validation-<B>.csv"
        )
    frames = []
    for bsz, path in files:
        raw = read_cells(path, fix=_FIX)
        columns = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
        require_columns(raw, path, columns, fix=_FIX)
        require_rows(raw, path, fix=_FIX)
        frames.append(
            pd.DataFrame(
                {
                    "job": job.name,
                    "global_bsz": bsz,
                    "reference_bsz": reference,
                    "epoch": np.arange(len(raw), dtype=np.int64),
                    "progress": number_column(raw, path, "progress", fix=_FIX),
                    "iteration": number_column(
                        raw, path, "iteration", integer=True, allow_zero=True, fix=_FIX
                    ).astype(np.int64),
                    "metric": number_column(raw, path, "metric", allow_zero=True, fix=_FIX),
                    "grad_sqr": number_column(raw, path, "grad_sqr", allow_zero=True, fix=_FIX),
                    "grad_var": number_column(raw, path, "grad_var", allow_zero=True, fix=_FIX),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def read_pollux_validation(job_dir: Path | str) -> pd.DataFrame:
    """Every ``validation-<B>.csv`` of one job (or of every job under the folder), ``B`` as
    ``global_bsz``; columns in the module docstring."""
    jobs = _job_dirs(Path(job_dir), lambda p: bool(_validation_files(p)))
    return pd.concat([_read_validation(j) for j in jobs], ignore_index=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseScale:
    """:func:`gradient_noise_scale`'s result: ``rows`` (the validation rows with
    ``b_simple_in_reference`` and ``b_simple``) and ``median`` (one row per job and batch)."""

    rows: pd.DataFrame
    median: pd.DataFrame


def gradient_noise_scale(validation: pd.DataFrame) -> NoiseScale:
    """The simple gradient noise scale ``B_simple = tr(Sigma) / |G|^2`` (McCandlish et al.,
    2018) from :func:`read_pollux_validation`'s rows.

    Per row: ``b_simple_in_reference = grad_var / grad_sqr`` and ``b_simple =
    reference_bsz * grad_var / grad_sqr`` in samples -- AdaptDL's ``grad_var`` is the
    variance of a gradient averaged over the reference batch ``B0`` (``tr(Sigma) / B0``), not
    the per-sample variance (see :mod:`gpucast.domain.pollux`). Rows with ``grad_sqr == 0``
    (AdaptDL floors a negative estimate at 0) have NaN. ``median``: per (job, global_bsz), the
    median of both over its rows, ``n`` (rows with a value) and ``reference_bsz``.
    """
    rows = validation.copy()
    sqr = rows["grad_sqr"].to_numpy(dtype=float)
    var = rows["grad_var"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(sqr > 0, var / sqr, np.nan)
    rows["b_simple_in_reference"] = ratio
    rows["b_simple"] = ratio * rows["reference_bsz"].to_numpy(dtype=float)
    keys = ["job", "global_bsz"]
    median = (
        rows.groupby(keys, sort=True)
        .agg(
            reference_bsz=("reference_bsz", "first"),
            n=("b_simple", "count"),
            b_simple_in_reference=("b_simple_in_reference", "median"),
            b_simple=("b_simple", "median"),
        )
        .reset_index()
    )
    median["n"] = median["n"].astype(np.int64)
    return NoiseScale(rows=rows, median=median)
