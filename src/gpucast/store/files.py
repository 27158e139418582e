"""Writing output files so that a failure never leaves a half-written file behind.

Every file gpucast writes for the user (prediction CSVs, model JSON, plans, reports, offers)
goes through :func:`write_text_atomic`: a temp file in the same folder, fsync, ``os.replace``.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from gpucast.domain.errors import InvalidSpecError

if TYPE_CHECKING:
    import pandas as pd


def write_text_atomic(path: Path, text: str, *, field: str = "output") -> None:
    """Replace ``path`` with ``text`` in one step; the folder must exist."""
    path = Path(path)
    directory = path.resolve().parent
    if not directory.is_dir():
        raise InvalidSpecError(
            field, f"folder {directory} does not exist", got=str(path), fix="create it first"
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv_atomic(frame: pd.DataFrame, path: Path, *, field: str = "output") -> None:
    """Write ``frame`` as CSV (no index) with :func:`write_text_atomic`."""
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    write_text_atomic(path, buffer.getvalue(), field=field)
