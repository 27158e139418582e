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


def test_a_measurement_off_a_terminal_prints_its_latest_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA 38 R F1: `measure train` in a log was silent for 10 minutes (its Rich bar is off
    there); it now prints the plain lines every long verb prints, with the latest samples."""
    from gpucast.cli.measure import progress_line
    from gpucast.measure.harness import Progress

    class _Needle(_Recorder):
        """Says when a line naming the latest samples has come."""

        def __init__(self) -> None:
            super().__init__()
            self.latest = threading.Event()

        def write(self, text: str) -> int:
            if "4 samples" in text:
                self.latest.set()
            return super().write(text)

    stderr = _Needle()
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(_common, "PLAIN_FIRST_S", 0.0)
    monkeypatch.setattr(_common, "PLAIN_EVERY_S", 0.01)
    step = Progress(
        phase="measure",
        n_warmup=3,
        n_samples=4,
        elapsed_s=1.0,
        mean_s=0.5,
        ci_halfwidth_rel=0.25,
        target_ci=0.02,
    )
    with progress_line("train mlp") as show:
        show(step)
        assert stderr.latest.wait(timeout=60)  # an event, not a wall-clock bound
    assert stderr.getvalue().startswith("... still train mlp: ")
    assert "... still train mlp: 4 samples, CI ±25.0% (target ±2.0%) (" in stderr.getvalue()


def test_a_measurement_s_note_is_printed_when_it_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The slow-minimum warning (a 10-minute `measure train` on a CPU) shows on stderr as
    the harness reports it, not only under the table at the end."""
    from gpucast.cli.measure import progress_line
    from gpucast.measure.harness import Progress

    stderr = _Recorder()
    monkeypatch.setattr("sys.stderr", stderr)
    step = dict(phase="measure", n_warmup=1, n_samples=1, elapsed_s=1.0, mean_s=0.5,
                ci_halfwidth_rel=None, target_ci=0.02)  # fmt: skip
    with progress_line("train mlp") as show:
        show(Progress(**step))  # type: ignore[arg-type]
        assert "warning" not in stderr.getvalue()
        show(Progress(**step, note="the 10 minimum samples take about 11 min"))  # type: ignore[arg-type]
        assert stderr.getvalue().count("warning: the 10 minimum samples take about 11 min") == 1
