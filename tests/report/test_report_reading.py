"""The HTML reports read as the engineer who receives them (QA 41 R): the figures as the
terminal writes them, units on every column, what was asked, why a page is empty, and an
output folder that cannot be written refused before the work."""

from __future__ import annotations

import errno
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plan"))

from plan_factories import context, request

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.plan import TrainPlan
from gpucast.plan.train import plan_training
from gpucast.report.html import measurements_html, plan_html, serve_plan_html


@pytest.fixture(scope="module")
def plan() -> TrainPlan:
    return plan_training(request(budget_usd=5.0), context())


def _with_best(plan: TrainPlan, **changes: Any) -> TrainPlan:
    assert plan.recommended is not None
    candidates = list(plan.candidates)
    candidates[plan.recommended] = replace(candidates[plan.recommended], **changes)
    return replace(plan, candidates=tuple(candidates))


def test_a_sub_cent_cost_and_a_three_minute_plan_read_as_the_terminal_writes_them(
    plan: TrainPlan,
) -> None:
    """R1/R2: the pick of a small job read "$0.00" and "0.05 h [0.03 h, 0.09 h]" in the
    report, "$0.0025" and "3m [2m, 5m]" in the terminal."""
    small = _with_best(plan, cost_usd=0.0025, time_s=180.0, time_lower_s=120.0, time_upper_s=300.0)
    pick = plan_html(small).split('id="recommended">', 1)[1].split("</div>", 1)[0]
    assert "$0.0025" in pick and "$0.00," not in pick
    assert "3 min [2 min, 5 min]" in pick and "0.05 h" not in pick


def test_the_request_table_says_yes_no_and_a_percentage(plan: TrainPlan) -> None:
    """R6: "spot allowed | True", "min P(meet deadline) | 0.9"."""
    html = plan_html(plan)
    table = html.split('id="request">', 1)[1].split("</table>", 1)[0]
    assert "<th>spot allowed</th><td>yes</td>" in table
    assert "<th>min P(meet deadline)</th><td>90%</td>" in table
    assert "True" not in table


def test_a_spot_mean_above_its_p90_is_explained_in_the_report(plan: TrainPlan) -> None:
    """R13: the terminal explains a spot row whose Monte Carlo mean lies above its p90; the
    report showed "0.06 h ... p90 0.05 h" without a word."""
    spot = next(k for k, c in enumerate(plan.candidates) if c.market == "spot")
    c = plan.candidates[spot]
    candidates = list(plan.candidates)
    candidates[spot] = replace(c, time_p90_s=c.time_s * 0.8)
    html = plan_html(replace(plan, candidates=tuple(candidates)))
    assert 'id="skewed"' in html and f"#{spot}: the time is the mean" in html
    assert 'id="skewed"' not in plan_html(
        replace(plan, candidates=tuple(replace(x, time_p90_s=None) for x in plan.candidates))
    )


SERVE: dict[str, Any] = {
    "kind": "serve-plan",
    "request": {
        "models": [{"name": "resnet50", "rate_rps": 200.0}],
        "slo_s": 0.05,
        "slo_percentile": 95.0,
        "max_batch_sizes": [1, 8],
        "max_delays_s": [0.0, 0.002],
        "instances": [1],
        "max_servers": 64,
        "budget_usd_per_hour": None,
        "placements": ["dedicated"],
        "duration_s": 60.0,
        "seed": 0,
    },
    "candidates": [
        {
            "description": "1x T4 [resnet50(b1,0ms,x2)]",
            "meets_slo": True,
            "cost_usd_per_hour": 0.445,
            "tail_latency_s": 0.0087,
            "headroom": 1.68,
            "bound": "capacity",
        }
    ],
    "recommended": 0,
    "pareto": [0],
}


def test_a_serving_report_heads_its_columns_with_units_and_says_what_was_asked() -> None:
    """R3-R5: "headroom 168" (no %), "tail latency ms" (which percentile?), "$0.45 per hour;
    capacity" (0.445 in the table, the bare word the bound), and no table of the request."""
    html = serve_plan_html(SERVE)
    assert "<th>p95 latency ms</th>" in html and "<th>tail latency ms</th>" not in html
    assert '<td class="num">168%</td>' in html
    pick = html.split('id="recommended">', 1)[1].split("</div>", 1)[0]
    assert "0.445 US$/h; bound: capacity" in pick
    asked = html.split('id="request">', 1)[1].split("</table>", 1)[0]
    for cell in ("resnet50 200 req/s", "p95 &lt;= 50 ms", "1, 8", "0 ms, 2 ms", "dedicated"):
        assert cell in asked


def test_a_serving_reports_warnings_have_a_heading() -> None:
    """R7: the warnings followed the validation table unlabelled."""
    html = serve_plan_html({**SERVE, "warnings": ["the pick's run is too short"]})
    assert "<h2>Warnings</h2>" in html.split("the pick's run is too short")[0]


RUN: dict[str, Any] = {
    "id": 1,
    "kind": "measurement",
    "workload": "mlp",
    "batch_size": 32,
    "precision": "fp32",
    "mode": "train",
    "device": "cpu",
    "gpu_name": None,
    "created_at": "2026-12-07T22:02:44.942643+00:00",
    "median_s": 0.0991975860000025,
    "ci_halfwidth_rel": 0.31682599998794864,
    "samples_per_s": 224.8654916537127,
    "n_samples": 25,
    "host": "vm",
    "warnings": ["IQR is 157% of the median: step times are noisy"],
}


def test_the_runs_report_writes_a_run_as_runs_list_does_with_its_warnings() -> None:
    """R8/R10: raw field names and unrounded floats (0.0991975860000025), and none of the
    run's stored warnings."""
    html = measurements_html([RUN], title="t", source="s.db")
    table = html.split('id="runs">', 1)[1].split("</table>", 1)[0]
    chart = html.split('id="runs-plot"', 1)[1].split("</svg>", 1)[0]
    assert ">99.2 ms</text>" in chart  # the table's figure, not "0.0992 s"
    for cell in ("99.2 ms", "31.7%", "224.9", "2026-12-07 22:02:44", "<th>±CI of mean</th>"):
        assert cell in table
    assert "0.0991975860000025" not in html and "median_s" not in html
    assert "#1 mlp:<ul><li>IQR is 157% of the median" in html


def test_an_empty_runs_report_says_why_on_the_page() -> None:
    """R11: the warning went to the terminal only; the page was a header row."""
    why = "the report is empty: s.db holds no run; measure first"
    html = measurements_html([], title="t", source="s.db", warnings=(why,))
    assert why in html and 'id="runs"' not in html


def test_write_report_carries_the_stored_warnings(tmp_path: Path) -> None:
    from gpucast.app import write_report
    from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.store.db import open_store

    env = EnvironmentFingerprint(
        host="h", os="linux", python_version="3.11", cpu_model="cpu", cpu_cores=2,
        torch_threads=2, torch_version="2",
    )  # fmt: skip
    m = Measurement(
        spec=WorkloadSpec(name="mlp", batch_size=8),
        mode="train",
        device="cpu",
        step_times_s=(0.01, 0.011, 0.012),
        samples_per_step=8,
        stop_reason="time_budget",
        target_ci=0.05,
        environment=env,
        created_at=datetime.now(UTC),
        warnings=("the host was busy: load average 5.2 on 2 CPU cores",),
    )
    db = tmp_path / "m.db"
    with open_store(db) as store:
        store.save_measurement(m)
    result = write_report(runs=True, db=db)
    assert result.data["runs"][0]["warnings"][0].startswith("the host was busy")
    write_report(runs=True, out=tmp_path / "r.html", db=db)
    assert "the host was busy" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_an_unwritable_output_folder_is_refused_before_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12: a --report into a folder the user cannot write failed only after the plan (and
    with --save written); the check before the work now tries the folder."""
    import tempfile

    from gpucast.store.files import output_file

    assert output_file(tmp_path / "ok.html", "report") == tmp_path / "ok.html"
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(InvalidSpecError, match=r"report: cannot be written \(Permission denied\)"):
        output_file(tmp_path / "r.html", "report")


def test_an_llm_plans_spot_rows_show_their_revocations() -> None:
    """A spot row of plan llm-train printed "spot: P(meet) 1%, p90 3.96 days, 32.7
    revocations" in the terminal; the report showed no revocations."""
    from gpucast.report.html import llm_train_plan_html

    row = {
        "provider": "aws", "region": "us-east-1", "nodes": 1, "instance_type": "p5.48xlarge",
        "gpus": 8, "gpu": "H100-SXM", "market": "spot", "network": "rdma", "layout": "dp=8",
        "time_s": 241959.0, "time_low_s": 119494.0, "time_high_s": 342298.0,
        "cost_usd": 630.98, "mfu": 0.5, "memory_gib": 55.5, "p_meet_deadline": 0.006,
        "revocations_mean": 32.74, "meets_deadline": False, "within_budget": True,
    }  # fmt: skip
    data = {
        "model": "llama-2-70b",
        "request": {"deadline_s": 172800.0, "objective": "cheapest", "allow_spot": True},
        "candidates": [row],
        "pareto": [0],
        "recommended": None,
    }
    html = llm_train_plan_html(data)
    assert "<th>revocations (mean)</th>" in html and "<td>32.7</td>" in html
    on_demand = {**data, "candidates": [{**row, "market": "on-demand"}]}
    assert "revocations" not in llm_train_plan_html(on_demand)


def test_the_serving_and_llm_training_reports_draw_their_fronts() -> None:
    """R14: only the training report had a chart; the LLM report's "Pareto front: time
    against cost" was a table, the serving report had none."""
    from gpucast.report.html import llm_train_plan_html

    miss = {**SERVE["candidates"][0], "meets_slo": False, "tail_latency_s": 0.09}
    html = serve_plan_html({**SERVE, "candidates": [*SERVE["candidates"], miss]})
    chart = html.split('<svg id="pareto-plot"', 1)[1].split("</svg>", 1)[0]
    assert chart.count('class="point') == 2 and chart.count('class="point spot"') == 1
    assert "p95 latency (ms, log scale)" in chart and ">SLO</text>" in chart
    assert "cost (US$ per hour, log scale)" in chart
    row = {
        "provider": "gcp", "region": "us-east4", "nodes": 2, "instance_type": "a4-highgpu-8g",
        "gpus": 16, "gpu": "B200", "market": "on-demand", "network": "rdma", "layout": "dp=16",
        "time_s": 36000.0, "time_low_s": 30000.0, "time_high_s": 50000.0, "cost_usd": 900.0,
        "mfu": 0.4, "memory_gib": 60.0,
    }  # fmt: skip
    page = llm_train_plan_html(
        {"model": "m", "request": {"deadline_s": 86400.0}, "candidates": [row],
         "pareto": [0], "recommended": 0}
    )  # fmt: skip
    chart = page.split('<svg id="pareto-plot"', 1)[1].split("</svg>", 1)[0]
    assert chart.count('class="point on-demand"') == 1 and 'class="recommended"' in chart
    assert "time to target (hours, log scale)" in chart and ">deadline</text>" in chart


def test_the_training_report_shows_each_candidates_energy_and_carbon(plan: TrainPlan) -> None:
    """The JSON and the terminal (--columns energy,carbon) carry each plan's kWh and kg CO2e;
    the report stated the power and carbon assumptions but no figure."""
    html = plan_html(_with_best(plan, energy_kwh=9.3, co2e_kg=2.52))
    table = html.split('id="candidates">', 1)[1].split("</table>", 1)[0]
    assert "<th>energy (kWh)</th><th>kgCO2e</th>" in table
    pick = table.split("(pick)", 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">9.30</td><td class="num">2.52</td>' in pick


def test_a_cold_starts_one_total_says_so_in_the_runs_report() -> None:
    """runs list writes a cold start's median cell as "N s total" (one total, not a median
    of samples); the report wrote it as a median."""
    html = measurements_html(
        [{**RUN, "kind": "coldstart", "median_s": 12.5}, RUN],
        title="t",
        source="s.db",
        total_kinds=frozenset({"coldstart"}),
    )
    table = html.split('id="runs">', 1)[1].split("</table>", 1)[0]
    assert "<td>12.5 s total</td>" in table and "<td>99.2 ms</td>" in table
