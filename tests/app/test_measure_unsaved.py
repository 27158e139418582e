"""A measurement the store cannot take (locked by another process past its busy timeout) is
said with its figure, not dropped with a bare store error (QA 40 C3)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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


def test_the_wait_on_the_store_is_said_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 40 C3: while the save waited on a store another process held, the progress line
    still said "... still train mlp: 10 samples, CI ±30.1%" as if measuring. The last progress
    is now the save, with the longest it waits; the CLI's line says so."""
    from typer.testing import CliRunner

    from gpucast.cli import _progress as progress_cli  # the line measure shows
    from gpucast.cli.app import app

    db = tmp_path / "s.db"
    told: list[str] = []
    shown: list[Callable[[], str]] = []

    def save_reads_the_line(self: Store, *args: object, **kwargs: object) -> int:
        told.append(shown[0]())  # the line the display shows while the save runs
        raise self._locked_error()

    @contextlib.contextmanager
    def working(message: Callable[[], str]) -> Iterator[None]:
        shown.append(message)
        yield

    seen: list[object] = []
    gpucast.measure_train("mlp", db=db, on_progress=seen.append, **QUICK)
    last = seen[-1]
    assert getattr(last, "phase", None) == "saving" and getattr(last, "store_wait_s", 0) == 60
    monkeypatch.setattr(progress_cli, "working", working)
    monkeypatch.setattr(Store, "save_measurement", save_reads_the_line)
    args = ["--db", str(db), "measure", "train", "mlp", "--device", "cpu", "--batch-size", "4",
            "--max-time-s", "0.5", "--min-samples", "3"]  # fmt: skip
    assert CliRunner().invoke(app, args).exit_code == 1
    assert told == [
        "train mlp: measured, saving to the store (waiting up to 60 s while another process "
        "holds it)"
    ]
