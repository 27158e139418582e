"""`gpucast measure cmd` and `runs show` of a program run, through Typer's CliRunner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

PY = sys.executable
runner = CliRunner()
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def test_measure_cmd_runs_the_program_after_the_double_dash(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    result = runner.invoke(
        app,
        ["--db", db, "measure", "cmd", "--repeats", "2", "--target-ci", "1", "--metric",
         r"rate/s=(\d+)", "--json", "--", PY, "-c", "print('rate/s=7')"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["metric_median"] == 7.0 and out["work_per_s"] == 7.0 and out["run_id"] == 1
    shown = runner.invoke(app, ["--db", db, "runs", "show", "1"])
    assert shown.exit_code == 0, shown.output
    assert "bound by" in shown.output and "rate/s = 7" in shown.output
    if out["dedicated_median_s"] is not None:  # Linux schedstat: the corrected time is shown
        assert out["dedicated_median_s"] <= out["median_s"]
        assert "dedicated-equivalent" in shown.output


def test_options_of_the_program_stay_the_programs(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["--db", str(tmp_path / "r.db"), "measure", "cmd", "--repeats", "1", "--json",
         "--", PY, "-c", "import sys; print('argv=' + str(len(sys.argv)))", "--repeats", "x"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["command"][-2:] == ["--repeats", "x"]


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["--", "no-such-program-xyz"], "not found on PATH"),
        (["--metric", r"x=\d+", "--", "true"], "needs a capture group"),
        (["--metric", r"x=(\d+)", "--", "true"], "never printed the metric"),
        (["--timeout", "0.3", "--", "sleep", "30"], "ran past the timeout of 0.3 s"),
        (["--", "sh", "-c", "echo broken >&2; exit 3"], "exited with code 3 (stderr: broken)"),
        ([], "Missing argument"),
    ],
)
def test_bad_programs_are_one_line_and_exit_2(tmp_path: Path, argv: list[str], text: str) -> None:
    result = runner.invoke(app, ["--db", str(tmp_path / "r.db"), "measure", "cmd", *argv])
    assert result.exit_code == 2, result.output
    assert text in result.output.replace("\n", " ")
    assert "Traceback" not in result.output


def test_help_lists_the_flags() -> None:
    result = runner.invoke(app, ["measure", "cmd", "--help"])
    assert result.exit_code == 0
    for flag in ("--repeats", "--warmup", "--timeout", "--metric", "--cores", "--json"):
        assert flag in result.output


def test_predict_cmd_renders_the_instances(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    measured = runner.invoke(
        app,
        ["--db", db, "measure", "cmd", "--repeats", "2", "--target-ci", "1", "--", PY, "-c",
         "pass"],
    )  # fmt: skip
    assert measured.exit_code == 0, measured.output
    result = runner.invoke(app, ["--db", db, "predict", "cmd", "1", "--instances", "c7g.large"])
    assert result.exit_code == 0, result.output
    assert "c7g.large" in result.output and "assumption" in result.output
    assert "dedicated" in result.output  # the measured table's column (and the assumption)
    bad = runner.invoke(app, ["--db", db, "predict", "cmd", "1", "--arch", "sparc"])
    assert bad.exit_code == 2 and "arch" in bad.output


def test_predict_cmd_prices_one_unit_of_work(tmp_path: Path) -> None:
    """The table read "$ per items" for a metric named items (QA 35 R #20)."""
    db = str(tmp_path / "runs.db")
    measured = runner.invoke(
        app,
        ["--db", db, "measure", "cmd", "--repeats", "2", "--target-ci", "1", "--metric",
         r"items=(\d+)", "--", PY, "-c", "print('items=5')"],
    )  # fmt: skip
    assert measured.exit_code == 0, measured.output
    result = runner.invoke(app, ["--db", db, "predict", "cmd", "1", "--instances", "c7g.large"])
    assert result.exit_code == 0, result.output
    assert "$ per item" in result.output and "$ per items" not in result.output
    assert "cheapest per item first" in result.output and "items/s" in result.output
