"""Every verb that produces results takes --json and prints one JSON object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()

RESULT_VERBS = [
    "catalog gpus", "catalog offers", "catalog spot", "catalog import-skypilot", "profile",
    "measure train", "fit lifetimes",
    "measure infer", "measure infer-curve", "runs list", "runs show", "campaign run",
    "campaign status", "fit speed", "fit cluster", "fit checkpoint", "predict train",
    "predict speed", "predict cluster", "predict checkpoint", "validate", "simulate train",
    "simulate serve", "plan train", "plan serve", "plan embeddings", "predict embedding-cache",
]  # fmt: skip


@pytest.mark.parametrize("verb", RESULT_VERBS)
def test_verb_offers_json(verb: str) -> None:
    result = runner.invoke(app, [*verb.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "--json" in result.output


def test_fit_and_predict_checkpoint_json(shared_data: Path, tmp_path: Path) -> None:
    model = tmp_path / "ckpt.json"
    fit = runner.invoke(
        app,
        ["fit", "checkpoint", "--data", str(shared_data / "cmdare/checkpoint/whole_data.csv"),
         "--out", str(model), "--json"],
    )  # fmt: skip
    assert fit.exit_code == 0, fit.output
    summary = json.loads(fit.stdout)
    assert summary["rows"] > 0 and summary["lomo_mape_pct"] > 0
    rows = tmp_path / "rows.csv"
    rows.write_text("Checkpoint Size (MB)\n10\n200\n")
    out = tmp_path / "out.csv"
    pred = runner.invoke(
        app,
        ["predict", "checkpoint", "--model", str(model), "--input", str(rows),
         "--output", str(out), "--json"],
    )  # fmt: skip
    assert pred.exit_code == 0, pred.output
    printed = json.loads(pred.stdout)
    assert (printed["output"], printed["rows"], len(printed["predictions"])) == (str(out), 2, 2)
    assert out.read_text().splitlines()[0].startswith("Checkpoint Size (MB),Predicted Duration")
    # QA 35 E #20: --json without --output prints the predictions ("output: is required")
    only = runner.invoke(
        app, ["predict", "checkpoint", "--model", str(model), "--input", str(rows), "--json"]
    )
    assert only.exit_code == 0, only.output
    assert json.loads(only.stdout)["predictions"] == printed["predictions"]
    text = runner.invoke(
        app, ["predict", "checkpoint", "--model", str(model), "--input", str(rows)]
    )
    assert text.stdout.startswith("predicted 2 rows\n  row 1: ")
