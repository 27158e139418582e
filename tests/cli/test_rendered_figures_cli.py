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


def test_one_instance_and_one_gpu_read_singular_in_serve_and_serverless() -> None:
    """QA 33b #20: "1 instance(s) each" (simulate serve), "peak 1 GPU(s), memory of all
    models 1 GPU(s)" (plan serverless)."""
    serve = runner.invoke(app, ["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate",
                                "10", "--duration-s", "2"], terminal_width=250)  # fmt: skip
    assert serve.exit_code == 0, serve.output
    assert "1 instance each" in serve.output and "(s)" not in serve.output
    plan = runner.invoke(app, ["plan", "serverless", "--synthetic", "5", "--minutes", "60",
                               "--models", "mlp", "--json"])  # fmt: skip
    assert plan.exit_code == 0, plan.output
    assert "GPU(s)" not in plan.output
    text = runner.invoke(app, ["plan", "serverless", "--synthetic", "5", "--minutes", "60",
                               "--models", "mlp"], terminal_width=250)  # fmt: skip
    assert "peak 1 GPU," in text.output and "memory of all models 1 GPU)" in text.output


def test_gpu_hours_keep_three_significant_figures_in_the_serverless_table() -> None:
    """QA 33b #20: GPU-h "27", "7.1", "4" beside "8.84"."""
    result = runner.invoke(app, ["plan", "serverless", "--synthetic", "20", "--minutes", "240",
                                 "--models", "mlp"], terminal_width=250)  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if "GPU-h" in line)
    col = lines[at].split().index("GPU-h") - len(lines[at].split())  # from the right
    for line in lines[at + 1 :]:
        if not line.startswith("  serverless") and not line.startswith("  always-on"):
            break
        figure = line.split()[col].replace(",", "")
        digits = figure.replace(".", "").lstrip("0")
        assert len(digits) >= 3 or (float(figure) >= 100 and "." not in figure), line


def test_predict_infer_intervals_keep_three_significant_figures() -> None:
    """QA 33b #20: intervals read "[0.231, 0.52]": each end keeps its trailing zero."""
    from gpucast.domain.units import format_sig

    assert format_sig(0.52) == "0.520" and f"{0.52:.3g}" == "0.52"  # what the line used
    result = runner.invoke(app, ["predict", "infer", "--model", "llama-3-8b", "--gpu", "H100-SXM",
                                 "--batch-size", "1", "--input-len", "100", "--output-len", "10"],
                           terminal_width=250)  # fmt: skip
    assert result.exit_code == 0, result.output
    ends = re.findall(r"\[([\d.]+), ([\d.]+)\]", result.output.split("generated")[0])
    assert len(ends) == 2, result.output
    for figure in (f for pair in ends for f in pair):
        assert len(figure.replace(".", "").lstrip("0")) == 3, result.output


def test_measure_durations_keep_three_significant_figures() -> None:
    """QA 33b #20: "median step 12 ms" beside "11.8 ms"."""
    from gpucast.domain.units import format_seconds

    assert [format_seconds(v) for v in (0.012, 0.0118, 0.000812, 2.0)] == [
        "12.0 ms", "11.8 ms", "812 µs", "2.00 s"
    ]  # fmt: skip
