"""The HTML report plots a program run's time series with its phases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import gpucast
from gpucast.report.svg import series_svg

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def test_series_svg_draws_the_line_and_the_phase_bands() -> None:
    svg = series_svg(
        [0.1, 0.2, 0.3], [1.0, float("nan"), 0.5], label="CPU <used>", unit="cores",
        svg_id="x", bands=[(0.0, 0.2, "cpu"), (0.2, 0.3, "idle")],
    )  # fmt: skip
    assert svg.startswith('<svg id="x"') and "<polyline" in svg
    assert "CPU &lt;used&gt;" in svg  # escaped
    assert svg.count("<rect") == 4  # two bands, two legend keys


def test_report_of_the_store_plots_each_program_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    code = "s = sum(i*i for i in range(200000))"
    result = gpucast.measure_cmd(
        command=[sys.executable, "-c", code], repeats=2, target_ci=1.0, sample_interval_s=0.02,
        name="squares", db=db,
    )  # fmt: skip
    out = tmp_path / "report.html"
    gpucast.write_report(runs=True, out=out, db=db)
    html = out.read_text()
    assert f"Program run #{result.run_id}: squares" in html
    assert f'id="program-{result.run_id}-0"' in html  # CPU
    assert f'id="program-{result.run_id}-1"' in html  # memory
    assert "bound by" in html
