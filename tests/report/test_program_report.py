"""The HTML report plots a program run's time series with its phases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import gpucast
from gpucast.domain.errors import InvalidInputError
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


def test_the_report_says_what_runs_show_says_of_a_program(tmp_path: Path) -> None:
    """QA 41 R9: the report printed "median run (s) 0.8069855394999763" and no failure,
    dedicated-equivalent time or work metric; it now shows runs show's rows, and its I/O
    chart the table's unit (MiB/s, not MB/s)."""
    from gpucast.report.program import program_rows

    db = tmp_path / "runs.db"
    code = "s = sum(i*i for i in range(200000)); print('items=7')"
    result = gpucast.measure_cmd(
        command=[sys.executable, "-c", code], repeats=2, target_ci=1.0, sample_interval_s=0.02,
        name="squares", metric="items=(\\d+)", db=db,
    )  # fmt: skip
    with pytest.raises(InvalidInputError, match="stored as failed run"):
        gpucast.measure_cmd(
            command=[sys.executable, "-c", "import sys; sys.exit(3)"], repeats=2, name="bad",
            db=db,
        )  # fmt: skip
    out = tmp_path / "report.html"
    gpucast.write_report(runs=True, out=out, db=db)
    html = out.read_text()
    assert result.run_id is not None
    for run_id in (result.run_id, result.run_id + 1):
        stored = gpucast.runs_show(run_id=run_id, db=db).result
        table = html.split(f'<table id="program-{run_id}">', 1)[1].split("</table>", 1)[0]
        for what, value in program_rows(stored):
            assert f"<th>{what}</th>" in table and value.split("\n")[0][:40] in table.replace(
                "&#x27;", "'"
            )
    assert "items = 7 per run" in html and "failed: exited with code 3" in html
    assert "I/O (read + write calls) (MiB/s)" in html
