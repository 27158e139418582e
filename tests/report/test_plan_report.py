"""The HTML plan report: content, escaping, and rendering in a real headless browser."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plan"))

from plan_factories import context, request

from gpucast.domain.plan import TrainPlan
from gpucast.plan.train import plan_training
from gpucast.report.html import plan_html
from gpucast.report.tables import plan_table

EVIL = 'evil"<script>alert(1)</script>'


@pytest.fixture(scope="module")
def plan() -> TrainPlan:
    return plan_training(request(workload=EVIL, budget_usd=5.0), context())


def test_report_has_every_section(plan: TrainPlan) -> None:
    html = plan_html(plan)
    for marker in (
        'id="pareto-plot"',
        'id="candidates"',
        'id="breakdown"',
        'id="risk"',
        'id="assumptions"',
        'id="models"',
        'id="recommended"',
        "catalog snapshot",
        "2026-01-01",
    ):
        assert marker in html
    assert html.count('class="point') == len(plan.candidates)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "<script" not in html


def test_user_text_is_escaped(plan: TrainPlan) -> None:
    html = plan_html(plan)
    assert EVIL not in html
    assert "evil&quot;&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_rich_table_lists_candidates(plan: TrainPlan) -> None:
    table = plan_table(plan)
    assert table.row_count >= len(plan.pareto)


def test_plan_columns_add_the_objectives_figure_on_a_narrow_terminal() -> None:
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.report.tables import NARROW_COLUMNS, PLAN_COLUMNS, plan_columns

    assert plan_columns(None, 120) == NARROW_COLUMNS
    assert plan_columns(None, 120, "cheapest") == NARROW_COLUMNS
    carbon = plan_columns(None, 120, "carbon")
    assert carbon[carbon.index("cost") + 1 :][:2] == ("energy", "carbon")
    assert "energy" in plan_columns(None, 120, "energy")
    assert "carbon" not in plan_columns(None, 120, "energy")
    wide = plan_columns(None, 250, "cheapest")
    assert "energy" not in wide and len(wide) == len(PLAN_COLUMNS) - 2
    assert plan_columns(None, 250, "energy") == (*wide[: wide.index("cost") + 1], "energy",
                                                 *wide[wide.index("cost") + 1 :])  # fmt: skip
    assert plan_columns(["all"], 120) == tuple(PLAN_COLUMNS)
    assert {"energy", "carbon"} <= set(PLAN_COLUMNS)
    assert plan_columns(["cost", "KWh", "co2"], 120) == ("cost", "energy", "carbon")
    with pytest.raises(InvalidSpecError, match=r"columns.*energy, carbon"):
        plan_columns(["joules"], 120)


def test_the_pick_and_the_front_are_rows_whatever_the_limit(plan: TrainPlan) -> None:
    must = {*plan.pareto, *(() if plan.recommended is None else (plan.recommended,))}
    for limit in (1, 3, len(plan.candidates)):
        shown = {
            int(str(cell).lstrip(">*")) for cell in plan_table(plan, limit=limit).columns[0].cells
        }
        assert must <= shown and len(shown) == min(len(plan.candidates), max(limit, len(must)))


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_report_renders_in_headless_chromium(plan: TrainPlan, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    page = tmp_path / "report.html"
    page.write_text(plan_html(plan), encoding="utf-8")
    shot = tmp_path / "shot.png"
    common = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
    ]
    shot_run = subprocess.run(
        [
            *common,
            f"--user-data-dir={tmp_path / 'profile-a'}",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot_run.returncode == 0, shot_run.stderr[-2000:]
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # a blank page compresses to a few hundred bytes
    dom_run = subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'profile-b'}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom_run.returncode == 0, dom_run.stderr[-2000:]
    dom = dom_run.stdout
    assert 'id="pareto-plot"' in dom and "<polyline" in dom
    assert 'id="candidates"' in dom and dom.count("<tr") > len(plan.candidates)
    console_errors = [
        line
        for line in (shot_run.stderr + dom_run.stderr).splitlines()
        if re.search(r"CONSOLE|Uncaught|SyntaxError|Refused to load", line)
    ]
    assert not console_errors, console_errors
    # control: the same check does flag a page that logs an error
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>throw new Error('x')</script></body></html>")
    bad_run = subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'profile-c'}", "--dump-dom", bad.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert re.search(r"CONSOLE.*Uncaught", bad_run.stderr)


def test_a_cost_under_a_cent_is_not_zero() -> None:
    """A spot pick of 0.0785 GPU-h read "$0.00" (QA 35 R #22)."""
    from gpucast.report.tables import _usd

    assert _usd(0.0047) == "$0.0047" and _usd(0.0) == "$0.00"
    assert _usd(0.04) == "$0.04" and _usd(1234.5) == "$1,234"


def test_a_spot_mean_above_its_interval_is_explained_under_the_table(plan: TrainPlan) -> None:
    """QA session 38: a spot row read "4m [2m, 3m]" with p90 3m (a few runs' long waits
    for capacity pull the Monte Carlo mean above p90) and nothing said why."""
    from dataclasses import replace

    from rich.console import Console

    from gpucast.report.tables import mean_above_band, print_plan

    def text(p: TrainPlan) -> str:
        console = Console(record=True, width=200)
        print_plan(p, console, limit=None)
        return console.export_text()

    assert not any(mean_above_band(c) for c in plan.candidates)
    assert "the time is the mean of the Monte Carlo runs" not in text(plan)
    k, c = next((k, c) for k, c in enumerate(plan.candidates) if c.market == "spot")
    tail = replace(c, time_s=c.time_upper_s * 1.5)
    skewed = replace(plan, candidates=(*plan.candidates[:k], tail, *plan.candidates[k + 1 :]))
    assert mean_above_band(tail)
    assert f"spot row #{k}: the time is the mean of the Monte Carlo runs" in text(skewed)


@pytest.mark.parametrize(
    ("work", "row"),
    [
        ({"target": "90epochs@256"}, "<td>--target 90epochs@256: samples to target at each"),
        ({"steps": 1000, "dataset_size": None}, "<td>1,000 steps of the reference batch 256</td>"),
    ],
)
def test_the_work_row_says_the_work_as_given(plan: TrainPlan, work: dict, row: str) -> None:  # type: ignore[type-arg]
    # QA 41 QT: a --target plan's report read "None steps at batch 256"
    req = replace(plan.request, epochs=None, **work)
    html = plan_html(replace(plan, request=req, reference_batch=256))
    assert row in html and "None" not in html
