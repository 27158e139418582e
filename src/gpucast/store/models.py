"""Fitted models as JSON files: atomic save, checked load. Never pickle."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from gpucast.domain.errors import DataFormatError, StoreError
from gpucast.predict.base import Estimator, estimator_from_dict


def save_model(estimator: Estimator, path: Path) -> None:
    """Write ``estimator.to_dict()`` to ``path`` atomically (temp file + ``os.replace``)."""
    payload = json.dumps(estimator.to_dict(), indent=2, sort_keys=True, allow_nan=False)
    path = Path(path)
    directory = path.resolve().parent
    if not directory.is_dir():
        raise StoreError(f"{path}: folder {directory} does not exist", fix="create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(payload + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_model(path: Path) -> Estimator:
    """Read a model saved by :func:`save_model` (any registered kind)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataFormatError(
            str(path), "model file not found", fix="run `gpucast fit ...` first"
        ) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            str(path), f"is not valid JSON ({exc.msg})", line=exc.lineno, fix="refit the model"
        ) from exc
    if not isinstance(data, dict):
        raise DataFormatError(str(path), "is not a JSON object", fix="refit the model")
    return estimator_from_dict(data)
