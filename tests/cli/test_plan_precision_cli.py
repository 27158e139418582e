"""``gpucast plan train``: each candidate names its precision (table, JSON, CSV, HTML)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from gpucast.cli.app import app as cli

ARGS = ["plan", "train", "--workload", "mlp", "--steps", "2000", "--provider", "gcp",
        "--gpu", "K80,A100-40GB", "--max-gpus", "2", "--runs", "50", "--batch-sizes", "32",
        "--no-spot"]  # fmt: skip


def test_the_table_json_csv_and_report_name_each_precision(tmp_path: Path) -> None:
    runner = CliRunner()
    report, table = tmp_path / "plan.html", tmp_path / "plan.csv"
    result = runner.invoke(
        cli, [*ARGS, "--columns", "gpus,precision", "--report", str(report), "--csv", str(table)]
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "K80" in line or "A100" in line]
    assert any("A100-40GB" in r and "bf16" in r for r in rows), result.output
    assert any("K80" in r and "fp32" in r for r in rows), result.output
    assert "precision: auto -- bf16 on A100-40GB; fp32 on K80" in " ".join(result.output.split())
    with table.open(encoding="utf-8") as f:
        assert {(r["gpu"], r["precision"]) for r in csv.DictReader(f)} == {
            ("K80", "fp32"),
            ("A100-40GB", "bf16"),
        }
    html = report.read_text(encoding="utf-8")
    assert "auto: bf16, fp32" in html and "on-demand ddp bf16" in html
    result = runner.invoke(cli, [*ARGS, "--precision", "fp32", "--json"])
    assert result.exit_code == 0, result.output
    assert {c["precision"] for c in json.loads(result.output)["candidates"]} == {"fp32"}
