"""Importer of CM-DARE checkpoint durations: ``checkpoint/{whole_data,unaggregated_*}.csv``.

Store format, one row per saved checkpoint:

================  ===========================================================
``model``         model name as labelled by the authors (``ResNet-15``...)
``checkpoint_mb`` checkpoint size in MB (``.meta`` + ``.data``)
``index_mb``      size of the ``.index`` file in MB (grows with the tensor count)
``local_s``       time to write the checkpoint locally
``duration_s``    total time to save it (the target)
================  ===========================================================
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets._import import ImportResult

COLUMNS: tuple[str, ...] = ("model", "checkpoint_mb", "index_mb", "local_s", "duration_s")
_SOURCE = {
    "Checkpoint Size (MB)": "checkpoint_mb",
    "Index File Size": "index_mb",
    "Local duration": "local_s",
    "Duration": "duration_s",
}
_REQUIRED = ("Model", "Checkpoint Size (MB)", "Duration")


def read_checkpoint_csv(path: Path) -> ImportResult:
    """Read one unaggregated checkpoint CSV; malformed rows are skipped and reported."""
    from gpucast.store.files import read_csv_input

    fix = "expected CM-DARE checkpoint columns Model, Checkpoint Size (MB), Duration"
    raw = read_csv_input(path, "data", fix=fix, dtype=str, keep_default_na=False)
    missing = [c for c in _REQUIRED if c not in raw.columns]
    if missing:
        raise DataFormatError(
            str(path),
            f"missing column(s) {', '.join(missing)}",
            column=missing[0],
            fix="expected CM-DARE checkpoint columns Model, Checkpoint Size (MB), Duration",
        )
    rows: list[dict[str, object]] = []
    skipped: list[str] = []
    for line, rec in enumerate(raw.to_dict("records"), start=2):
        model = str(rec["Model"]).strip()
        if not model:
            skipped.append(f"{path}, line {line}: empty Model")
            continue
        out: dict[str, object] = {"model": model}
        problem = None
        for src, dst in _SOURCE.items():
            text = str(rec.get(src, "")).strip()
            if not text:
                if src in _REQUIRED:
                    problem = f"column {src!r} is empty"
                    break
                out[dst] = math.nan
                continue
            try:
                value = float(text)
            except ValueError:
                problem = f"column {src!r} is not a number ({text!r})"
                break
            if not math.isfinite(value) or value < 0:
                problem = f"column {src!r} must be a finite number >= 0 (got {text})"
                break
            out[dst] = value
        if problem is not None:
            skipped.append(f"{path}, line {line}: {problem}")
            continue
        rows.append(out)
    return ImportResult(frame=pd.DataFrame(rows, columns=list(COLUMNS)), skipped=tuple(skipped))


def read_checkpoint_split(folder: Path) -> tuple[ImportResult, ImportResult]:
    """The authors' split: (``unaggregated_training.csv``, ``unaggregated_test.csv``)."""
    return (
        read_checkpoint_csv(folder / "unaggregated_training.csv"),
        read_checkpoint_csv(folder / "unaggregated_test.csv"),
    )
