"""The result type shared by the dataset importers."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportResult:
    """A tidy table and the rows that were skipped, each as ``"file, line N: reason"``."""

    frame: pd.DataFrame
    skipped: tuple[str, ...] = field(default=())
