"""Rendered figures read right: a small GPU-hours figure is not "0", one GPU is not "1 GPUs"."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()
ONE_K80 = ["plan", "train", "--workload", "mlp", "--steps", "2000", "--provider", "gcp",
           "--gpu", "K80", "--max-gpus", "1", "--runs", "20", "--batch-sizes", "32",
           "--no-spot"]  # fmt: skip


def test_a_one_gpu_plan_shows_its_small_gpu_hours(tmp_path: Path) -> None:
    report = tmp_path / "plan.html"
    result = runner.invoke(
        app, [*ONE_K80, "--columns", "gpus,gpu-hours", "--report", str(report)],
        terminal_width=200,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if "1 K80" in line and "│" in line]
    gpu_hours = row.split("│")[3].strip()
    assert re.fullmatch(r"0\.0\d+", gpu_hours), row  # three significant figures, not "0"
    assert f'<td class="num">{gpu_hours}</td>' in report.read_text(encoding="utf-8")
    # one candidate, every one shown: no "--limit N shows more of the 1 candidates"
    assert "--limit N" not in result.output and "1 candidates" not in result.output
    assert "--columns all every column" in result.output


def test_a_one_gpu_serving_deployment_says_one_gpu() -> None:
    result = runner.invoke(
        app, ["plan", "serve", "--model", "llama-3-8b", "--rate", "1", "--slo-tpot-ms", "50",
              "--gpu", "L40S"], terminal_width=250,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "tp=1, 1 replica (1 GPU)" in result.output
    assert "1 GPUs" not in result.output
