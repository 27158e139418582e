"""`gpucast simulate serve --deadline-ms / --request-class / --scheduler`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()
BASE = ["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate", "500", "--duration-s", "2"]


def test_classes_report_misses_and_worst_latency() -> None:
    argv = [*BASE, "--request-class", "urgent:0.2:5:0,bulk:0.8:100:1", "--scheduler", "edf"]
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["scheduler"] == "edf"
    names = [c["model"] for c in data["classes"]]
    assert names == ["mlp/urgent", "mlp/bulk"]
    assert sum(c["requests"] for c in data["classes"]) == data["requests"]
    table = runner.invoke(app, argv)
    assert table.exit_code == 0 and "mlp/urgent (priority 0, deadline 5 ms)" in table.stdout


def test_a_single_deadline() -> None:
    data = json.loads(runner.invoke(app, [*BASE, "--deadline-ms", "50", "--json"]).stdout)
    assert data["scheduler"] == "fifo" and data["classes"][0]["deadline_s"] == 0.05


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--deadline-ms", "0.001"], "shorter than its fastest possible service"),
        # QA 38 I #20: both read "deadline:", a flag neither verb has
        (["--deadline-ms", "0.001"], "deadline-ms: "),
        (["--request-class", "a:1:0.001:0"], "request-class: mlp/a: 0.001 ms is shorter"),
        (["--request-class", "a:0.5:10,b:0.4:10"], "shares must add up to 1"),
        (["--request-class", "a:1"], "NAME:SHARE:DEADLINE_MS"),
        (["--request-class", "a:0.5:10,a:0.5:20"], "('a' is given twice) (got ['a', 'a']); give"),
        (["--request-class", "a:1:10", "--scheduler", "lifo"], "scheduler"),
        (["--deadline-ms", "10", "--find-saturation"], "open-loop arrivals only"),
    ],
)
def test_bad_real_time_options_are_one_line_exit_2(extra: list[str], needle: str) -> None:
    result = runner.invoke(app, [*BASE, *extra])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and needle in line
