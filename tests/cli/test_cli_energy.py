"""`gpucast predict energy` and `gpucast fit power`: flags, the rendered lines, exit codes."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()
BASE = ["predict", "energy", "--workload", "mlp", "--batch-size", "32", "--gpu", "V100-PCIe"]


def test_help_lists_the_flags() -> None:
    result = runner.invoke(app, ["predict", "energy", "--help"])
    assert result.exit_code == 0
    for flag in ("--workload", "--gpu", "--power-limit", "--eta", "--dataset-size",
                 "--step-time-s", "--power-w", "--power-model", "--json"):  # fmt: skip
        assert flag in result.output
    fit = runner.invoke(app, ["fit", "power", "--help"])
    assert fit.exit_code == 0 and "--datasets" in fit.output and "--out" in fit.output


def test_renders_the_step_the_sweep_and_the_sources() -> None:
    result = runner.invoke(
        app, [*BASE, "--power-limit", "auto", "--eta", "1", "--dataset-size", "3200"]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "on V100-PCIe at" in out and "(auto)" in out and "J/step" in out
    assert "per epoch (100 steps)" in out and "kWh" in out
    assert "power-limit sweep (eta 1)" in out and "least energy" in out and "Zeus pick" in out
    assert "power model: predicted power (gpucast/catalog/data/power.json" in out
    assert "[override: --power-limit W|auto]" in out  # not eaten as markup
    assert "validated: V100-PCIe: leave-one-GPU-out MAPE" in out


def test_a_short_epoch_is_not_printed_as_zero() -> None:
    """QA 40 E #12: `--dataset-size 10` printed "per epoch (1 steps): 0.00 h, 0.000 kWh"."""
    result = runner.invoke(app, [*BASE, "--dataset-size", "10"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "per epoch" in x)
    assert line.startswith("  per epoch (1 step): ") and " s, " in line
    assert "0.00 h" not in line and "0.000 kWh" not in line and line.endswith(" kWh")


def test_bad_limit_exits_2_with_one_line() -> None:
    result = runner.invoke(app, [*BASE, "--power-limit", "20"])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith("error: power-limit: must be within the V100-PCIe's range 100-250 W")
    assert "\n" not in line


def test_a_power_reading_above_the_board_exits_2_with_one_line() -> None:
    result = runner.invoke(app, [*BASE, "--power-w", "5000"])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith(
        "error: power-w: must be at most the V100-PCIe's default power limit, 250 W"
    )
    assert "--power-w" in line and "\n" not in line


def test_a_step_that_does_not_fit_is_one_line_and_exit_2_as_in_predict_train() -> None:
    argv = ["--workload", "resnet50", "--batch-size", "100000", "--gpu", "L4"]
    for verb in ("energy", "train"):
        result = runner.invoke(app, ["predict", verb, *argv])
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert "\n" not in line and line.startswith("error: batch-size: resnet50 at 100,000")
        assert "no strategy fits 1 x L4" in line and "use --batch-size " in line
    fits = runner.invoke(app, BASE)
    assert "  memory: data-parallel needs" in fits.output and "does not fit" not in fits.output


def test_fit_power_names_the_folder_it_reads(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["fit", "power", "--data-dir", str(tmp_path), "--out", str(tmp_path / "p.json")]
    )
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith("error: data-dir: has no zeus_nsdi23/ folder") and "\n" not in line


def test_a_clock_just_under_the_default_is_not_printed_as_throttled_to_100_percent() -> None:
    # QA 38 E: a T4 at its 70 W default drew the step at 99.6% clock: "throttled to 100% clock"
    result = runner.invoke(
        app,
        ["predict", "energy", "--workload", "resnet50", "--batch-size", "64", "--gpu", "T4",
         "--precision", "fp16"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    clock = re.search(r"throttled to ([\d.]+)% clock", result.output.splitlines()[0])
    assert clock is None or float(clock.group(1)) < 100.0
