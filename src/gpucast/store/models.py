"""Fitted models as JSON files: atomic save, checked load. Never pickle."""

from __future__ import annotations

import json
from pathlib import Path

from gpucast.domain.errors import DataFormatError
from gpucast.predict.base import Estimator
from gpucast.predict.estimators import load_estimator
from gpucast.store.files import read_input_text, write_text_atomic


def save_model(estimator: Estimator, path: Path) -> None:
    """Write ``estimator.to_dict()`` to ``path`` atomically (temp file + ``os.replace``)."""
    payload = json.dumps(estimator.to_dict(), indent=2, sort_keys=True, allow_nan=False)
    write_text_atomic(Path(path), payload + "\n", field="out")


def load_model(path: Path, *, field: str = "model", fit: str = "gpucast fit ...") -> Estimator:
    """Read a model saved by :func:`save_model` (any registered kind); ``field`` names the
    flag that gave ``path`` and ``fit`` the command that writes such a file."""
    path = Path(path)
    text = read_input_text(path, field, fix=f"run `{fit}` first")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            str(path), f"is not valid JSON ({exc.msg})", line=exc.lineno, fix="refit the model"
        ) from exc
    if not isinstance(data, dict):
        raise DataFormatError(str(path), "is not a JSON object", fix="refit the model")
    return load_estimator(data)
