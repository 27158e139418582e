"""The embedded measurement store (SQLite, WAL, versioned schema). Nothing is opened at import.

Dataset importers for published data live in :mod:`gpucast.store.datasets`; to add tables,
append a script to :data:`gpucast.store.schema.MIGRATIONS`.
"""

from __future__ import annotations

from gpucast.store.db import EXPORT_FORMATS, Store, default_db_path, open_store
from gpucast.store.records import RunSummary, StoredRun

__all__ = ["EXPORT_FORMATS", "RunSummary", "Store", "StoredRun", "default_db_path", "open_store"]
