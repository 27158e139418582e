"""Progress of long verbs when stderr is not a terminal: plain periodic lines (#21)."""

from __future__ import annotations

import io
import threading

import pytest

from gpucast.cli import _common


class _Recorder(io.StringIO):
    """stderr (a real stream, as far as ``fileno`` tells) that says when it was written."""

    def fileno(self) -> int:
        return 2

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()

    def write(self, text: str) -> int:
        n = super().write(text)
        self.written.set()
        return n


def test_a_long_step_prints_plain_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = _Recorder()
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(_common, "PLAIN_FIRST_S", 0.0)
    monkeypatch.setattr(_common, "PLAIN_EVERY_S", 3600.0)
    assert not _common.err_console.is_terminal  # pytest captures stderr
    with _common.working("planning: searching"):
        assert stderr.written.wait(timeout=60)  # an event, not a wall-clock bound
    assert stderr.getvalue().startswith("... still planning: searching (")


def test_a_quick_step_prints_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = _Recorder()
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(_common, "PLAIN_FIRST_S", 3600.0)
    with _common.working("quick"):
        pass
    assert stderr.getvalue() == ""


def test_an_in_memory_stderr_gets_no_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Captured stderr (CliRunner) stays clean: a test that parses it never sees progress."""
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(_common, "PLAIN_FIRST_S", 0.0)
    with _common.working("captured"):
        threading.Event().wait(0.2)  # time for a line that must not come
    assert stderr.getvalue() == ""
