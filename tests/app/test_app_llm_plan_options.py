"""plan_llm_train's catalog filters and outputs, as plan train's: --region, --exclude-gpu,
the row limit, and the plan saved (JSON), reported (HTML) and written as CSV."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpucast
from gpucast.app.llm_plan import PlanLlmTrainRequest, PlanLlmTrainResult
from gpucast.app.reports import load_plan, save_plan, write_plan_report, write_report
from gpucast.domain.errors import (
    DataFormatError,
    InvalidSpecError,
    NoFeasiblePlanError,
    UnknownGpuError,
    UnknownRegionError,
)

SMALL: dict[str, Any] = {
    "model": "llama-3-8b", "tokens": 2e9, "seq_len": 4096, "global_batch": 256, "max_gpus": 16,
}  # fmt: skip


@pytest.fixture(scope="module")
def h100() -> PlanLlmTrainResult:
    return gpucast.plan_llm_train(**SMALL, gpus=["H100"])


def test_region_keeps_only_that_regions_offers(h100: PlanLlmTrainResult) -> None:
    assert len({c.region for c in h100.candidates}) > 1  # the filter has something to cut
    plan = gpucast.plan_llm_train(**SMALL, gpus=["H100"], regions=["US-EAST4"])  # any case
    assert plan.candidates and {c.region for c in plan.candidates} == {"us-east4"}
    assert plan.request is not None and plan.request.regions == ("US-EAST4",)


def test_exclude_gpu_leaves_those_types_out(h100: PlanLlmTrainResult) -> None:
    every = gpucast.plan_llm_train(**SMALL, providers=["aws"])
    gpus = {c.gpu for c in every.candidates}
    assert {"H100-SXM", "A100-80GB"} <= gpus
    plan = gpucast.plan_llm_train(**SMALL, providers=["aws"], exclude_gpus=["h100", "A100-80GB"])
    assert plan.candidates
    assert {c.gpu for c in plan.candidates} == gpus - {"H100-SXM", "A100-80GB"}


@pytest.mark.parametrize(
    ("options", "error", "needle"),
    [
        ({"regions": ["mars-1"]}, UnknownRegionError, "unknown region 'mars-1'"),
        ({"exclude_gpus": ["H1OO"]}, UnknownGpuError, "unknown GPU 'H1OO'"),
        (
            {"gpus": ["H100"], "exclude_gpus": ["H100"]},
            InvalidSpecError,
            "gpu/exclude-gpu: .* is both required and excluded",
        ),
        (
            {"gpus": ["H100"], "regions": ["eu-west-2"], "providers": ["gcp"]},
            NoFeasiblePlanError,
            "no GPU offer in the catalog matches --provider gcp --region eu-west-2",
        ),
    ],
)
def test_bad_filters_are_refused_as_plan_train_refuses_them(
    options: dict[str, Any], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        gpucast.plan_llm_train(**SMALL, **options)
    if error is not NoFeasiblePlanError:  # the same message from plan train
        with pytest.raises(error, match=needle):
            gpucast.plan_train(workload="cifar-resnet20", epochs=1, **options)


@pytest.mark.parametrize("budget", [0.0, -1.0])
def test_a_budget_not_above_zero_says_how_to_give_one(budget: float) -> None:
    # session 34 QA: plan llm-train --budget -1 said "budget: must be > 0 (got -1.0)", no fix
    with pytest.raises(InvalidSpecError, match=r"budget: must be > 0 .*; e\.g\. --budget"):
        gpucast.plan_llm_train(**SMALL, budget_usd=budget)


@pytest.mark.parametrize("deadline", [0.0, -5.0, float("nan"), "-3d"])
def test_a_deadline_not_above_zero_is_refused_in_python_as_on_the_cli(deadline: object) -> None:
    # session 39 QA: a request built in Python with deadline_s=-5.0 planned, then said "relax
    # --deadline to at least 2.6d" (keywords to plan_llm_train were checked, the request not)
    with pytest.raises(InvalidSpecError, match=r"^deadline: must be"):
        gpucast.plan_llm_train(**SMALL, deadline_s=deadline)
    with pytest.raises(InvalidSpecError, match=r"^deadline: must be"):
        PlanLlmTrainRequest(**SMALL, deadline_s=deadline)  # type: ignore[arg-type]


def test_a_deadline_given_as_text_reads_as_the_cli_reads_it() -> None:
    # session 39 QA: deadline_s="7d" was a TypeError deep in the planner
    request = PlanLlmTrainRequest(**SMALL, deadline_s="7d")  # type: ignore[arg-type]
    assert request.deadline_s == 7 * 86400.0


@pytest.mark.parametrize("flag", ["regions", "exclude_gpus"])
def test_a_cluster_takes_no_catalog_filter(flag: str) -> None:
    with pytest.raises(InvalidSpecError, match="a --cluster replaces it"):
        gpucast.plan_llm_train(**SMALL, cluster="DGX-H100", cluster_nodes=2, **{flag: ["us-east4"]})


def test_a_budget_on_an_unpriced_cluster_is_refused_as_in_plan_train() -> None:
    """QA session 38: a cluster without a price costs $0, so --budget 0.01 was met."""
    with pytest.raises(InvalidSpecError, match="budget: cannot bind: the cluster DGX-H100"):
        gpucast.plan_llm_train(**SMALL, cluster="DGX-H100", cluster_nodes=2, budget_usd=0.01)


def test_shown_rows_follow_plan_trains_limit(h100: PlanLlmTrainResult) -> None:
    plan = h100
    front = set(plan.pareto) | {plan.recommended}
    assert len(plan.candidates) > len(front)  # rows beyond the front to fill with
    assert set(plan.shown()) == front
    cost = [plan.candidates[i].cost_usd for i in range(len(plan.candidates))]
    by_cost = sorted(range(len(cost)), key=lambda i: (cost[i], plan.candidates[i].time_s))
    assert plan.shown(limit=len(plan.candidates)) == by_cost
    one_more = plan.shown(limit=len(front) + 1)
    assert len(one_more) == len(front) + 1 and front < set(one_more)
    extra = (set(one_more) - front).pop()
    assert cost[extra] == min(cost[i] for i in range(len(cost)) if i not in front)
    assert [cost[i] for i in one_more] == sorted(cost[i] for i in one_more)
    assert set(plan.shown(limit=1)) == front  # the front and the pick beyond the limit
    with pytest.raises(InvalidSpecError, match="limit"):
        plan.shown(limit=0)


def test_saved_reported_and_csv_plans(h100: PlanLlmTrainResult, tmp_path: Path) -> None:
    saved = save_plan(h100, tmp_path / "plan.json")
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["kind"] == "llm-train-plan" and data == json.loads(json.dumps(h100.to_dict()))
    assert data["request"]["gpus"] == ["H100"] and data["request"]["global_batch"] == 256
    html = write_plan_report(h100, tmp_path / "plan.html").read_text(encoding="utf-8")
    pick = h100.candidates[h100.recommended or 0]
    assert 'id="recommended"' in html and pick.instance_type in html and pick.layout in html
    assert html.count("<tr class=") == len(set(h100.pareto) | {h100.recommended})
    # gpucast report --plan renders the saved plan the same way
    write_report(plan=saved, out=tmp_path / "again.html")
    assert (tmp_path / "again.html").read_text(encoding="utf-8") == html
    # a plan train plan reader refuses it clearly
    with pytest.raises(DataFormatError, match="is an LLM training plan"):
        load_plan(saved)
    # the CSV rows: the JSON rows' columns, one row per candidate
    frame = h100.to_frame()
    assert list(frame.columns) == list(data["candidates"][0])
    assert len(frame) == len(h100.candidates)


def test_an_unwritable_output_names_its_option(h100: PlanLlmTrainResult, tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"save: folder .* does not exist"):
        save_plan(h100, tmp_path / "missing" / "plan.json", field="save")
    with pytest.raises(InvalidSpecError, match="report: is a folder"):
        write_plan_report(h100, tmp_path, field="report")


def test_rows_that_miss_the_deadline_are_marked(h100: PlanLlmTrainResult, tmp_path: Path) -> None:
    from gpucast.report.html import llm_train_plan_html

    plan = gpucast.plan_llm_train(**SMALL, gpus=["H100"], deadline="5h")
    missed = {i for i, c in enumerate(plan.candidates) if not c.meets_deadline}
    late = {i for i, c in enumerate(plan.candidates) if c.time_s > 5 * 3600}
    assert late and late <= missed and plan.recommended not in missed  # others are shown
    for i, c in enumerate(plan.candidates):  # late, or on time with P(meet) below 0.9
        assert c.text().endswith(" -- misses the deadline") == (i in late), c.text()
        risky = c.text().endswith(" -- P(meet deadline) below --min-p-meet")
        assert risky == (i in missed - late) and (c.p_meet_deadline < 0.9) == (i in missed)
    html = write_plan_report(plan, tmp_path / "plan.html").read_text(encoding="utf-8")
    shown_late = late & set(plan.pareto)
    assert shown_late  # the cheapest row of the front is too slow
    assert "<th>deadline / budget</th>" in html and "<th>P(meet)</th>" in html
    assert html.count("<td>misses the deadline</td>") == len(shown_late)
    assert html.count("<td>P(meet deadline) below --min-p-meet</td>") == len(
        (missed - late) & set(plan.pareto)
    )
    assert "<td>met</td>" in html
    # a plan without deadline or budget has no limits column, nor a P(meet) one
    plain = write_plan_report(h100, tmp_path / "h100.html").read_text(encoding="utf-8")
    assert "deadline / budget" not in plain and "P(meet)" not in plain
    # a saved plan from before on-demand rows had P(meet): a spot row's fills the column,
    # the on-demand rows have none ("-") and a missed deadline reads as late
    data = plan.to_dict()
    for row in data["candidates"]:
        row.pop("late"), row.update(p_meet_deadline=None)
    spot = data["candidates"][plan.recommended]
    spot.update(market="spot", p_meet_deadline=0.84, meets_deadline=False)
    html = llm_train_plan_html(data)
    assert "<th>P(meet)</th>" in html and "<td>84%</td>" in html and "<td>-</td>" in html
    assert html.count("<td>misses the deadline</td>") == len(missed & set(plan.pareto))
    assert "<td>P(meet deadline) below --min-p-meet</td>" in html


def test_the_pick_says_why_it_is_the_pick() -> None:
    """plan train's "bound by" and "what would help" for plan llm-train's pick (QA 41 L F2:
    the text marked the pick and said nothing of why): the objective among the rows that
    meet the limits, what bounds its step, and the cheapest faster row of the front."""
    from gpucast.report.html import llm_train_plan_html

    plan = gpucast.plan_llm_train(**SMALL, gpus=["H100"], deadline="8h")
    pick = plan.best
    meeting = [c for c in plan.candidates if not c.missed()]
    faster = [i for i in plan.pareto if plan.candidates[i].time_s < pick.time_s]
    assert meeting and faster  # the fixture has both: a row that helps, rows that miss
    why = plan.why()
    assert why.startswith(f"the cheapest of the {len(meeting)} rows that meet the deadline (8 h;")
    assert f"bound by {pick.bottleneck.replace('_', ' ')}" in why
    nearest = min(faster, key=lambda i: plan.candidates[i].cost_usd)
    assert f"; faster: {nearest} ({plan.candidates[nearest].gpus} H100-SXM) in " in why
    assert f"  why: {why}" in plan.verdict() and plan.to_dict()["why"] == why
    html = llm_train_plan_html(json.loads(json.dumps(plan.to_dict())))
    assert "<br>Why: the cheapest of the " in html
    fastest = gpucast.plan_llm_train(**SMALL, gpus=["H100"], objective="fastest")
    assert fastest.why().startswith("the fastest of ") and "; faster:" not in fastest.why()


def test_a_plan_of_one_step_says_step() -> None:
    # session 39 QA: --tokens 100 printed "100 tokens in 1 steps"
    plan = gpucast.plan_llm_train(**{**SMALL, "tokens": 100.0}, gpus=["H100"])
    assert plan.steps == 1
    assert plan.table_lines()[0].startswith("llama-3-8b: 100 tokens in 1 step; ")


def test_the_plan_keeps_the_request_as_asked() -> None:
    # session 39 QA: a saved bf16 plan's request listed K80, T4 and V100 under exclude_gpus,
    # which the user never excluded (the GPU types without bf16 units, skipped and said so)
    plan = gpucast.plan_llm_train(**SMALL, exclude_gpus=["B200"], providers=["aws"])
    assert plan.request is not None and plan.request.exclude_gpus == ("B200",)
    assert "T4" in plan.assumptions["bf16 GPUs"]  # the skip is said where it belongs
    named = gpucast.plan_llm_train(**SMALL, gpus=["H100", "T4"])
    assert named.request is not None and named.request.gpus == ("H100", "T4")
    assert {c.gpu for c in named.candidates} == {"H100-SXM"}
