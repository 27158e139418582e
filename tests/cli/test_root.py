from __future__ import annotations

from typer.testing import CliRunner

from gpucast import __version__
from gpucast.cli.app import app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.stdout


def test_help_lists_verbs() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for verb in ("catalog", "profile", "measure", "runs", "fit", "predict", "validate"):
        assert verb in result.stdout


def test_unknown_option_is_one_line_exit_2() -> None:
    result = runner.invoke(app, ["--no-such-flag"])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "--no-such-flag" in lines[0]


def test_unknown_verb_exit_2() -> None:
    result = runner.invoke(app, ["frobnicate"])
    assert result.exit_code == 2
    assert "frobnicate" in result.stderr
