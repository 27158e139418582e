"""A measurement the store cannot take (locked by another process past its busy timeout) is
said with its figure, not dropped with a bare store error (QA 40 C3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucast
from gpucast.domain.errors import StoreError
from gpucast.store import Store, open_store

QUICK = {"device": "cpu", "batch_size": 4, "max_time_s": 0.5, "min_samples": 3}


def test_a_store_locked_at_save_time_names_the_measurement_it_did_not_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "s.db"
    gpucast.measure_train("mlp", db=db, **QUICK)  # a run already stored: kept

    def locked(self: Store, *args: object, **kwargs: object) -> int:
        raise self._locked_error()  # what a writer holding the lock 60 s makes save raise

    monkeypatch.setattr(Store, "save_measurement", locked)
    with pytest.raises(StoreError) as info:
        gpucast.measure_train("mlp", db=db, **QUICK)
    error = info.value
    assert error.exit_code == 1 and "\n" not in str(error)
    assert "stayed locked by another process" in error.message
    assert "the measurement (median step " in error.message
    assert error.message.endswith(" ms) was not saved")
    assert error.fix is not None and error.fix.endswith("and measure again")
    with open_store(db) as store:
        assert len(store.list_runs()) == 1
