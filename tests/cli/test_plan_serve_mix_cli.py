"""``gpucast plan serve --mix``: PARIS + ELSA on MIG slices from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def test_mix_plans_heterogeneous_layouts_and_compares_the_baselines() -> None:
    result = runner.invoke(app, ["plan", "serve", "--mix", "mlp:2000:5", "--duration-s", "2"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "plan serve --mix on A100-40GB" in out
    for word in ("paris", "elsa", "least_loaded", "round_robin", "whole GPU", "7x 1g.5gb"):
        assert word in out
    assert "paris GPU 0:" in out and "gpu: A100-40GB (the default" in out


def test_mix_json() -> None:
    result = runner.invoke(
        app, ["plan", "serve", "--mix", "mlp:2000:5", "--duration-s", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "mig-serve-plan" and data["gpu"] == "A100-40GB"
    assert data["choices"][0]["name"] == "paris"
    assert {o["dispatch"] for o in data["outcomes"] if o["choice"] == "paris"} == {
        "elsa", "least_loaded", "round_robin",
    }  # fmt: skip
    assert data["recommended"] is not None


@pytest.mark.parametrize(
    "argv, text",
    [
        (["--mix", "mlp:100"], "each item must be NAME:RATE:SLO_MS"),
        (["--mix", "mlp:-5:50"], "mix mlp: rate must be a finite number > 0"),
        (["--mix", "mlp:nan:50"], "rate must be a finite number > 0 (got nan)"),  # QA 35 S #22
        (["--mix", "mlp:10:inf"], "SLO must be a finite number > 0 (got inf)"),
        (["--mix", "mlp:100:50,mlp:10:50"], "lists a model twice"),
        (["--mix", "mlp:100:50", "--model", "mlp:100"], "drop --model"),
        (["--mix", "mlp:100:50", "--gpu", "T4"], "T4 does not support MIG"),
        (["--mix", "mlp:100:0.001"], "SLO 0.001 ms is below its worst case"),
    ],
)
def test_bad_mix_is_one_line_exit_2(argv: list[str], text: str) -> None:
    result = runner.invoke(app, ["plan", "serve", *argv, "--duration-s", "2"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and text in line


def test_too_many_requests_from_mix_names_mix_not_rate() -> None:
    """QA 35 S #13: the rate came from --mix; --rate is not a flag there."""
    result = runner.invoke(app, ["plan", "serve", "--mix", "resnet50:1e9:50"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "lower the rates in --mix" in line and "--rate" not in line and "\n" not in line
