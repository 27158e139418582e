"""A write that creates its store's folder says so on its result, not in module state
(QA 38 C #6: a module-level list every write appended to grew forever in an API process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gpucast
import gpucast.store.db as store_db


def _module_state() -> dict[str, Any]:
    """Copies of the store module's mutable globals (lists, dicts, sets)."""
    return {
        name: type(value)(value)
        for name, value in vars(store_db).items()
        if isinstance(value, list | dict | set) and not name.startswith("__")
    }


def test_a_write_carries_the_folder_it_created_and_leaves_no_state(tmp_path: Path) -> None:
    before = _module_state()
    db = tmp_path / "new" / "deeper" / "runs.db"
    first = gpucast.profile_workload(workload="mlp", batch_size=4, db=db)
    assert first.new_store == db and first.new_store.parent.is_dir()
    again = gpucast.profile_workload(workload="mlp", batch_size=4, db=db)
    assert again.new_store is None  # the folder was there
    other = tmp_path / "other" / "runs.db"
    assert gpucast.profile_workload(workload="mlp", batch_size=4, db=other).new_store == other
    assert _module_state() == before  # nothing accumulated for anyone to drain


def test_an_unsaved_result_names_no_new_store(tmp_path: Path) -> None:
    db = tmp_path / "never" / "runs.db"
    result = gpucast.profile_workload(workload="mlp", batch_size=4, db=db, save=False)
    assert result.new_store is None and not db.parent.exists()
